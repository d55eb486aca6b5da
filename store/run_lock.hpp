#pragma once
// A lock one run of a job holds on its piece of work -- a nightly's window, a statement's provider
// and window -- so that a second run started meanwhile says who holds it instead of doing the same
// work again beside it (both would be safe, every write is fenced, but each would list and report
// everything twice). A session-level advisory lock on a connection of its own: released when the
// RunLock goes, when the process dies, or when that connection is lost.

#include <memory>
#include <string>
#include <variant>

namespace payrecon::store {

class Db;

class RunLock {
public:
    explicit RunLock(std::unique_ptr<Db> db);
    RunLock(RunLock&&) noexcept;
    RunLock& operator=(RunLock&&) noexcept;
    ~RunLock(); // closes its connection: the lock goes with it

private:
    std::unique_ptr<Db> m_db;
};

// Who holds a run lock: the database session and what pg_stat_activity says of it
// ("database session 4242 ("payrecon nightly (pid 77)"), user payrecon, connected ..., idle since
// ... (12 s)").
struct RunLockHeld {
    std::string holder;
};

// Takes the lock named `name` ("nightly 2026-12-01") on a new connection to `url`, without
// waiting: the lock, or who holds it. Throws DatabaseUnavailable.
std::variant<RunLock, RunLockHeld> try_run_lock(const std::string& url, const std::string& name);

} // namespace payrecon::store
