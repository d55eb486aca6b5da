#pragma once
// Numbered SQL migrations (store/migrations/NNNN_name.sql), compiled into the binary and
// applied in order, all pending ones in one transaction under an advisory lock, each recorded in
// schema_migrations with a checksum of its SQL.

#include "core/errors.hpp"

#include <chrono>
#include <functional>
#include <string>
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

// How migrate() waits when another session holds the migration lock (a process migrating now, or
// one stopped while it held the lock: SIGSTOP, Ctrl-Z, a debugger).
struct MigrationLockWait {
    // How long to wait for the lock before giving up (SchemaMismatch naming the holder).
    std::chrono::milliseconds timeout{std::chrono::seconds(60)};
    // Asked between tries (every 200 ms at most); true gives up at once: MigrationWaitStopped.
    std::function<bool()> stop_requested;
    // Called once, on the first try that finds the lock held, with who holds it ("session 4242
    // (\"payrecon worker (pid 5678)\", connected ..., idle in transaction since ...)").
    std::function<void(const std::string& holder)> on_wait;
};

// migrate() gave up waiting for the lock because stop_requested() said so; nothing was applied.
class MigrationWaitStopped : public OperatorError {
public:
    explicit MigrationWaitStopped(const std::string& what)
        : OperatorError(ExitCode::failure, what) {}
};

// Applies every pending migration and returns the versions applied (empty if none: idempotent).
// A schema that is current already is found so without the lock: only a database that needs
// migrating waits for it, by `wait`'s rules. Safe to run from many processes at once. Throws
// SchemaMismatch if the database has a newer schema than this binary knows, if an applied
// migration's SQL differs from this binary's, or if the lock stayed held for `wait.timeout` (the
// message names the session that holds it and what to do); MigrationWaitStopped.
std::vector<int> migrate(Db& db, const MigrationLockWait& wait = {});

// Throws SchemaMismatch unless the schema is exactly the one this binary knows: newer ("upgrade
// payrecon") or older ("run payrecon db migrate"). Takes no lock.
void require_current_schema(Db& db);

} // namespace payrecon::store
