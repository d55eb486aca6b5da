#pragma once
// Numbered SQL migrations (store/migrations/NNNN_name.sql), compiled into the binary and
// applied in order, all pending ones in one transaction under an advisory lock, each recorded in
// schema_migrations with a checksum of its SQL.

#include <string_view>
#include <vector>

namespace payrecon::store {

class Db;

struct Migration {
    int version;
    std::string_view name;
    std::string_view sql;
};

// The migrations compiled into this binary, ascending by version.
const std::vector<Migration>& embedded_migrations();

// The highest version this binary knows.
int latest_known_version();

// The highest version applied to the database; 0 if it has no schema_migrations table.
int schema_version(Db& db);

// Applies every pending migration and returns the versions applied (empty if none: idempotent).
// Safe to run from many processes at once. Throws SchemaMismatch if the database has a newer
// schema than this binary knows, or if an applied migration's SQL differs from this binary's.
std::vector<int> migrate(Db& db);

// Throws SchemaMismatch unless the schema is exactly the one this binary knows: newer ("upgrade
// payrecon") or older ("run payrecon db migrate").
void require_current_schema(Db& db);

} // namespace payrecon::store
