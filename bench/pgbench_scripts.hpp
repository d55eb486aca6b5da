#pragma once
// The pgbench scripts of the benchmarks' database baselines, built from the store's own statements
// (store/statements.hpp) with pgbench variables bound to their parameters, so the baseline runs
// exactly the SQL payrecon runs: a statement the store changes changes the benchmark with it.
// Run them with `pgbench -M prepared` (each :variable becomes a parameter).

#include <map>
#include <string>

namespace payrecon::bench {

// `sql` with each $N replaced by values.at(N). Throws std::invalid_argument if a $N of the
// statement has no value, or a value no $N (a statement and its bench would have drifted).
std::string bind(const std::string& sql, const std::map<int, std::string>& values);

// One payment through the executor with --batch 1, no provider call: the claim (\gset: tenant_id,
// payment_id, generation, attempt_count), the pre-call fence, then the attempt finished and the
// payment settled `succeeded` in one transaction. Claims provider 'pgbench' payments only; a
// client that finds none fails (\gset wants a row).
std::string executor_script();

// One fresh create-payment request: the key claimed, then the payment, its outbox event and its
// stored 202 in one statement. Variables: tenant, principal (-D); keys and merchant references
// are random, the payment's ID and operation ID time-ordered (uuid_generate_v7(), migration 0010).
std::string intake_script();

} // namespace payrecon::bench
