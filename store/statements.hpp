#pragma once
// The text of the statements the executor and the intake prepare, exactly as the store prepares
// them: for the benchmarks (bench/pgbench_scripts.cpp), whose database baseline runs payrecon's own
// SQL through pgbench and must not drift from it. Nothing else uses these; code runs statements
// through the store's functions.

#include <string>

namespace payrecon::store::statements {

// executor_store.cpp: claim a batch ($1 worker, $2 lease ms, $3 batch, $4 providers text[]); the
// pre-call fence ($1 worker, $2 lease ms, $3 tenant IDs, $4 payment IDs, $5 generations); finish
// an attempt ($1 tenant, $2 payment, $3 attempt, $4 outcome, $5 HTTP status, $6 error class,
// $7 provider reference, $8 detail); settle fenced by generation, with its outbox event ($1
// tenant, $2 payment, $3 generation, $4 state, $5 retry in ms, $6 provider reference, $7 review
// reason, $8 review code).
const std::string& executor_claim();
const std::string& executor_renew();
const std::string& executor_finish_attempt();
const std::string& executor_settle();

// intake_store.cpp: claim the idempotency key ($1 tenant, $2 principal, $3 operation, $4 key,
// $5 request hash hex, $6 retention s); the payment, its outbox event and its stored 202 in one
// statement ($1 tenant, $2 principal, $3 operation, $4 key, $5 payment ID, $6 merchant reference,
// $7 amount, $8 currency, $9 provider, $10 payment method, $11 customer, $12 description,
// $13 metadata, $14 operation ID, $15 response body, $16 key hash hex).
const std::string& intake_claim_key();
const std::string& intake_create_payment();

} // namespace payrecon::store::statements
