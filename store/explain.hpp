#pragma once
// The plan PostgreSQL chooses for one of the store's own prepared statements, for the tests that
// keep the queries on their indexes (tests/store/test_intake_schema.cpp) and for diagnosis.

#include <optional>
#include <string>
#include <vector>

namespace payrecon::store {

class Db;

// EXPLAIN (COSTS OFF) EXECUTE `statement`(params) on `db`'s connection, as text, one plan line a
// line. `statement` is the name a store function prepared it under (e.g. "executor_claim"): call
// that function on `db` once first. `params` are its parameters as text, nullopt for NULL; the
// plan is the one PostgreSQL makes for these values. Throws std::invalid_argument if `statement`
// was not prepared on this connection; DatabaseUnavailable.
std::string explain_prepared(Db& db, const std::string& statement,
                             const std::vector<std::optional<std::string>>& params);

} // namespace payrecon::store
