#pragma once
// The text of the statements the executor and the intake prepare, exactly as the store prepares
// them: for the benchmarks (bench/pgbench_scripts.cpp), whose database baseline runs payrecon's own
// SQL through pgbench and must not drift from it. Nothing else uses these; code runs statements
// through the store's functions.

#include <string>

namespace payrecon::store::statements {

// executor_store.cpp: claim a batch of charges and of refunds ($1 worker, $2 lease ms, $3 batch,
// $4 providers text[]); the pre-call fence, read only ($1 worker, $2 tenant IDs, $3 subject IDs
// -- payment IDs for charges, refund IDs for refunds --, $4 generations, $5 kinds), and the
// renewal it runs when the leases run short ($1 worker, $2 lease ms, $3 tenant IDs, $4 subject
// IDs, $5 generations, $6 kinds); the charge's attempt finished and the payment settled fenced by
// generation, with its outbox event ($1 tenant, $2 payment, $3 generation, $4 state, $5 retry in
// ms, $6 provider reference, $7 review reason, $8 review code, $9 attempt, $10 outcome, $11 HTTP
// status, $12 error class, $13 detail, $14 operation ID, $15 payment again); several charges
// settled at once, as the worker's settle group writes them ($1 a JSON array of settlements,
// jsonb_to_recordset's columns: tenant_id, payment_id, generation, state, retry_ms,
// provider_reference, reason, review_code, attempt_no, outcome, http_status, error_class, detail,
// operation_id).
const std::string& executor_claim();
const std::string& executor_check();
const std::string& executor_renew();
const std::string& executor_settle();
const std::string& executor_settle_many();

// intake_store.cpp: a fresh request in one statement ($1 tenant, $2 principal, $3 operation, $4
// key, $5 request hash hex, $6 retention s, $7 payment ID, $8 merchant reference, $9 amount,
// $10 currency, $11 provider, $12 payment method, $13 customer, $14 description, $15 metadata,
// $16 operation ID, $17 and $18 the 202 before and after its creation time, $19 key hash hex).
const std::string& intake_once();

} // namespace payrecon::store::statements
