#include "core/store/db.hpp"

#include "core/store/pq.hpp"

#include <regex>

namespace payrecon::store {

std::string redact_url(const std::string& url) {
    // URI form: scheme://user:password@host...
    static const std::regex k_uri_password(R"(^([a-z]+://[^:/@?]*):[^@/?]*@)");
    // keyword/value form: password=... (quoted or not)
    static const std::regex k_kv_password(R"((^|\s)password\s*=\s*('([^'\\]|\\.)*'|\S+))");
    std::string out = std::regex_replace(url, k_uri_password, "$1:***@");
    out = std::regex_replace(out, k_kv_password, "$1password=***");
    // password as a URI query parameter
    static const std::regex k_query_password(R"(([?&])password=[^&]*)");
    return std::regex_replace(out, k_query_password, "$1password=***");
}

pqxx::connection& Db::Impl::connection() {
    if (!conn) {
        try {
            conn.emplace(url);
        } catch (const pqxx::broken_connection& e) {
            throw DatabaseUnavailable(
                "cannot connect to the database at " + redact_url(url) + ": " + e.what(),
                "check that PostgreSQL is running and the URL is right (--database or "
                "PAYRECON_DATABASE_URL); without either, `payrecon db start` starts the private one");
        }
        prepared.clear();
    }
    return *conn;
}

void Db::Impl::prepare(const std::string& name, const std::string& sql) {
    pqxx::connection& c = connection();
    if (prepared.insert(name).second) {
        c.prepare(name, sql);
    }
}

Db::Db(std::string url) : m_url(std::move(url)), m_impl(std::make_unique<Impl>()) {
    m_impl->url = m_url;
    m_impl->connection();
}

Db::~Db() = default;

Db::Impl& Db::impl() { return *m_impl; }

} // namespace payrecon::store
