#include "store/migrations.hpp"

#include "core/fingerprint.hpp"
#include "store/pq.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <thread>

namespace payrecon::store {
namespace {

// pg_advisory_xact_lock key: "payrecon" folded into 63 bits, fixed forever.
constexpr long long k_migration_lock = 0x7061797265636f6eLL;

// How often a migration waiting for the lock tries again (and checks stop_requested).
constexpr std::chrono::milliseconds k_lock_poll{200};

constexpr const char* k_create_table = R"sql(
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer     NOT NULL PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
))sql";

int version_in(pqxx::transaction_base& tx) {
    const pqxx::row exists = tx.exec1("SELECT to_regclass('schema_migrations') IS NOT NULL");
    if (!exists[0].as<bool>()) {
        return 0;
    }
    return tx.exec1("SELECT coalesce(max(version), 0) FROM schema_migrations")[0].as<int>();
}

SchemaMismatch newer_schema(int found) {
    return SchemaMismatch("the database schema is version " + std::to_string(found) +
                              ", newer than this payrecon knows (" +
                              std::to_string(latest_known_version()) + ")",
                          "run a payrecon release that knows schema version " +
                              std::to_string(found) + "; this binary will not touch it");
}

// Throws SchemaMismatch if a migration applied to the database (of those up to `current`) differs
// from this binary's.
void check_applied(pqxx::transaction_base& tx, int current) {
    if (current == 0) {
        return;
    }
    std::map<int, std::string> applied;
    for (const auto& row : tx.exec("SELECT version, checksum FROM schema_migrations")) {
        applied.emplace(row[0].as<int>(), row[1].as<std::string>());
    }
    for (const Migration& m : embedded_migrations()) {
        if (m.version > current) {
            break;
        }
        const auto found = applied.find(m.version);
        if (found != applied.end() && found->second != sha256_hex(m.sql)) {
            throw SchemaMismatch(
                "migration " + std::to_string(m.version) + " (" + std::string(m.name) +
                    ") applied to this database differs from the one in this binary",
                "a released migration must never be edited; add a new migration instead");
        }
    }
}

SchemaMismatch lock_timeout(int current, const std::optional<AdvisoryLockHolder>& holder,
                            std::chrono::milliseconds waited) {
    const std::string needs = "the database schema is version " + std::to_string(current) +
                              " and this payrecon needs version " +
                              std::to_string(latest_known_version());
    const std::string waited_text = std::to_string(waited.count() / 1000) + " s";
    if (!holder) {
        return SchemaMismatch(needs + "; the migration lock stayed taken for " + waited_text +
                                  ", by sessions that kept changing",
                              "run the command again; if it keeps happening, look for payrecon "
                              "processes starting in a loop");
    }
    const std::string pid = std::to_string(holder->backend_pid);
    return SchemaMismatch(
        needs + "; " + holder->text + " holds the migration lock, and held it for the " +
            waited_text + " this waited",
        "if that process is stopped (kill -STOP, Ctrl-Z, a debugger), resume it (kill -CONT) or "
        "end it; a migration that is running takes seconds: wait for it and run the command "
        "again. If the process cannot be found, end its database session (SELECT "
        "pg_terminate_backend(" +
            pid +
            ")): its transaction rolls back. PAYRECON_MIGRATION_LOCK_TIMEOUT (or `db migrate "
            "--lock-timeout`) sets how long to wait");
}

} // namespace

int latest_known_version() {
    const auto& all = embedded_migrations();
    return all.empty() ? 0 : all.back().version;
}

int schema_version(Db& db) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        return version_in(tx);
    });
}

std::vector<int> migrate(Db& db, const MigrationLockWait& wait) {
    Db::Impl& impl = db.impl();
    // Without the lock first: a current schema needs nothing, and reading it waits for nobody --
    // not even for a process stopped while it held the lock.
    const int found = translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        const int current = version_in(tx);
        if (current > latest_known_version()) {
            throw newer_schema(current);
        }
        check_applied(tx, current);
        return current;
    });
    if (found == latest_known_version()) {
        return {};
    }
    const auto started = std::chrono::steady_clock::now();
    const auto deadline = started + wait.timeout;
    bool announced = false;
    for (;;) {
        std::optional<AdvisoryLockHolder> holder;
        const std::optional<std::vector<int>> done =
            translate_errors(impl, [&]() -> std::optional<std::vector<int>> {
                pqxx::work tx(impl.connection());
                if (!tx.exec_params1("SELECT pg_try_advisory_xact_lock($1)", k_migration_lock)[0]
                         .as<bool>()) {
                    holder = advisory_lock_holder(tx, k_migration_lock);
                    return std::nullopt; // rolled back: nothing held, nothing changed
                }
                tx.exec0(k_create_table);
                const int current = version_in(tx);
                if (current > latest_known_version()) {
                    throw newer_schema(current);
                }
                check_applied(tx, current);
                std::vector<int> applied;
                for (const Migration& m : embedded_migrations()) {
                    if (m.version <= current) {
                        continue;
                    }
                    tx.exec0(std::string(m.sql));
                    tx.exec_params0("INSERT INTO schema_migrations (version, name, checksum) "
                                    "VALUES ($1, $2, $3)",
                                    m.version, std::string(m.name), sha256_hex(m.sql));
                    applied.push_back(m.version);
                }
                tx.commit();
                return applied;
            });
        if (done) {
            return *done;
        }
        if (!announced && wait.on_wait) {
            wait.on_wait(holder ? holder->text : std::string("a session that has just let it go"));
            announced = true;
        }
        if (wait.stop_requested && wait.stop_requested()) {
            throw MigrationWaitStopped("stopped while waiting for the migration lock; nothing was "
                                       "migrated");
        }
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) {
            throw lock_timeout(
                found, holder,
                std::chrono::duration_cast<std::chrono::milliseconds>(now - started));
        }
        std::this_thread::sleep_for(
            std::min<std::chrono::steady_clock::duration>(k_lock_poll, deadline - now));
    }
}

void require_current_schema(Db& db) {
    const int found = schema_version(db);
    if (found > latest_known_version()) {
        throw newer_schema(found);
    }
    if (found < latest_known_version()) {
        throw SchemaMismatch("the database schema is version " + std::to_string(found) +
                                 "; this payrecon needs version " +
                                 std::to_string(latest_known_version()),
                             "run `payrecon db migrate` (safe to run at any time)");
    }
}

} // namespace payrecon::store
