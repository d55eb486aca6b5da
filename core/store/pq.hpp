#pragma once
// Store-internal: the pqxx side of Db, and the translation of pqxx errors into payrecon's error
// kinds. Included only by core/store/*.cpp.

#include "core/errors.hpp"
#include "core/store/db.hpp"

#include <functional>
#include <optional>
#include <string>
#include <unordered_set>

#include <pqxx/pqxx>

namespace payrecon::store {

// A failure before commit that the caller may retry (the database went away, a serialization
// failure, a timeout): nothing was stored. `in_doubt` marks a lost COMMIT acknowledgement: the
// transaction may or may not have committed (retrying with the same idempotency key is safe).
class TransientStoreError : public DatabaseUnavailable {
public:
    TransientStoreError(const std::string& what, bool in_doubt)
        : DatabaseUnavailable(what, "retry the same request; nothing is lost"), m_in_doubt(in_doubt) {}
    bool in_doubt() const noexcept { return m_in_doubt; }

private:
    bool m_in_doubt;
};

struct Db::Impl {
    std::string url;
    std::optional<pqxx::connection> conn;
    std::unordered_set<std::string> prepared;

    // The live connection, reconnecting first if the last one broke.
    pqxx::connection& connection();
    // Prepares `name` on this connection once; later calls are free.
    void prepare(const std::string& name, const std::string& sql);
    void mark_broken() { conn.reset(); prepared.clear(); }
};

// Runs `body` and translates pqxx failures: connection loss, serialization failure, deadlock,
// admin shutdown, query cancel -> TransientStoreError (and the connection is dropped so the next
// call reconnects); in_doubt_error -> TransientStoreError(in_doubt) and never retried here.
// Everything else propagates unchanged.
template <typename F>
auto translate_errors(Db::Impl& db, F&& body) -> decltype(body()) {
    try {
        return body();
    } catch (const pqxx::in_doubt_error& e) {
        db.mark_broken();
        throw TransientStoreError(std::string("the database connection was lost during COMMIT; "
                                              "the outcome is unknown: ") + e.what(),
                                  true);
    } catch (const pqxx::broken_connection& e) {
        db.mark_broken();
        throw TransientStoreError(std::string("the database connection was lost: ") + e.what(),
                                  false);
    } catch (const pqxx::sql_error& e) {
        const std::string& state = e.sqlstate();
        const bool transient = state.rfind("40", 0) == 0     // serialization failure, deadlock
                               || state.rfind("08", 0) == 0  // connection exception
                               || state.rfind("53", 0) == 0  // insufficient resources
                               || state.rfind("57P", 0) == 0 // admin shutdown, crash shutdown
                               || state == "57014";          // statement timeout / cancel
        if (!transient) {
            throw;
        }
        if (state.rfind("08", 0) == 0 || state.rfind("57P", 0) == 0) {
            db.mark_broken();
        }
        throw TransientStoreError(std::string("the database refused for now (SQLSTATE ") + state +
                                      "): " + e.what(),
                                  false);
    }
}

} // namespace payrecon::store
