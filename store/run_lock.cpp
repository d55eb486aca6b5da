#include "store/run_lock.hpp"

#include "store/pq.hpp"

namespace payrecon::store {

std::optional<AdvisoryLockHolder> advisory_lock_holder(pqxx::transaction_base& tx, long long key) {
    // An advisory lock of one bigint key shows in pg_locks as its high and low 32 bits.
    const auto bits = static_cast<unsigned long long>(key);
    const pqxx::result r = tx.exec_params(
        "SELECT l.pid, a.application_name, a.usename::text, a.client_addr::text, " +
            iso_utc("a.backend_start") + ", a.state, " + iso_utc("a.state_change") +
            ", floor(extract(epoch FROM clock_timestamp() - a.state_change))::bigint "
            "FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
            "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND l.classid = $1::bigint::oid AND l.objid = $2::bigint::oid "
            "ORDER BY l.pid LIMIT 1",
        static_cast<long long>(bits >> 32), static_cast<long long>(bits & 0xffffffffULL));
    if (r.empty() || r[0][0].is_null()) {
        return std::nullopt;
    }
    const pqxx::row row = r[0];
    const auto text_of = [&](int i) {
        return row[i].is_null() ? std::string() : row[i].as<std::string>();
    };
    AdvisoryLockHolder h;
    h.backend_pid = row[0].as<long long>();
    h.text = "database session " + std::to_string(h.backend_pid) + " (";
    const std::string app = text_of(1);
    h.text += app.empty() ? std::string("no application name") : "\"" + app + "\"";
    if (const std::string user = text_of(2); !user.empty()) {
        h.text += ", user " + user;
    }
    if (const std::string from = text_of(3); !from.empty()) {
        h.text += ", from " + from;
    }
    if (const std::string since = text_of(4); !since.empty()) {
        h.text += ", connected " + since;
    }
    if (const std::string state = text_of(5); !state.empty()) {
        h.text += ", " + state;
        if (const std::string changed = text_of(6); !changed.empty()) {
            h.text += " since " + changed + " (" + text_of(7) + " s)";
        }
    }
    h.text += ")";
    return h;
}

RunLock::RunLock(std::unique_ptr<Db> db) : m_db(std::move(db)) {}
RunLock::RunLock(RunLock&&) noexcept = default;
RunLock& RunLock::operator=(RunLock&&) noexcept = default;
RunLock::~RunLock() = default;

std::variant<RunLock, RunLockHeld> try_run_lock(const std::string& url, const std::string& name) {
    auto db = std::make_unique<Db>(url);
    Db::Impl& impl = db->impl();
    return translate_errors(impl, [&]() -> std::variant<RunLock, RunLockHeld> {
        // Held, and by nobody a moment later: its holder has just let it go; try again.
        for (int tries = 0;; ++tries) {
            long long key = 0;
            {
                pqxx::nontransaction tx(impl.connection());
                const pqxx::row r = tx.exec_params1("SELECT k, pg_try_advisory_lock(k) FROM "
                                                    "(SELECT hashtextextended($1, 0) AS k) s",
                                                    "payrecon run " + name);
                if (r[1].as<bool>()) {
                    return RunLock(std::move(db));
                }
                key = r[0].as<long long>();
            }
            pqxx::read_transaction tx(impl.connection());
            const auto holder = advisory_lock_holder(tx, key);
            if (holder || tries >= 2) {
                return RunLockHeld{holder ? holder->text
                                          : std::string("a session that has just let it go")};
            }
        }
    });
}

} // namespace payrecon::store
