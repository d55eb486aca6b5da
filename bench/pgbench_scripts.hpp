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

// `batch` payments through the executor as a worker with --batch B moves them when their calls
// end together: one claim of up to B (its rows folded into arrays, since \gset takes one row;
// none is fine), one fence of them all, one settlement of them all (the settle group's statement,
// its JSON built from the arrays). Claims provider 'pgbench' payments only. batch >= 1.
std::string executor_batch_script(int batch);

// One fresh create-payment request: the key claimed, then the payment, its outbox event and its
// stored 202 in one statement. Variables: tenant, principal (-D); keys and merchant references
// are random, the payment's ID and operation ID time-ordered (uuid_generate_v7(), migration 0010).
std::string intake_script();

// bench/intake_ladder (issue 33): the statement of each rung of the ladder from payrecon's intake
// statement down to the lean baseline's (bench/intake_lean.sql, the rung after the last), each
// rung the one above with one thing removed, made from the store's statement by edits that throw
// if it no longer holds what they remove. Rungs 0-4 run the statement as it is (0 is
// intake_script(); 1-4 with keys from a counter per client: variables run and n too) on tables that
// lose one thing per rung (bench/intake_ladder_schema.sql); 5 the event payload a literal, 6 no
// read of principals, 7 the result the stored 202 alone, 8 that 202 a constant.
inline constexpr int k_ladder_statement_rungs = 9;
std::string ladder_script(int rung);

} // namespace payrecon::bench
