#pragma once
// One database connection (not thread-safe: one per thread). Reconnects on the next use after the
// server went away. pqxx stays behind this header: only store/*.cpp include <pqxx/...>.

#include <memory>
#include <string>
#include <vector>

namespace payrecon::store {

class Db {
public:
    // Connects now. Throws DatabaseUnavailable (saying where it tried, never the password) if the
    // server cannot be reached.
    explicit Db(std::string url);
    ~Db();
    Db(const Db&) = delete;
    Db& operator=(const Db&) = delete;

    const std::string& url() const noexcept { return m_url; }

    struct Impl;
    Impl& impl();

private:
    std::string m_url;
    std::unique_ptr<Impl> m_impl;
};

// The application_name this process's connections opened from now on give PostgreSQL, unless their
// URL or PGAPPNAME names one (libpq's fallback_application_name), so that pg_stat_activity tells
// whose session holds a lock: "payrecon worker (pid 5678)". Empty: none. Thread-safe.
void set_application_name(std::string name);

// `url` with the value of every secret libpq parameter -- password (also as the URI's
// user:password@), sslpassword, and whatever else libpq marks as a secret -- replaced by "***", in
// the URI form (parameter names percent-decoded as libpq does) and the keyword/value form. For
// messages and logs. A URL whose secrets cannot be told apart safely is not shown at all.
std::string redact_url(const std::string& url);

// The names of the secret parameters `url` gives a value ("password", "sslpassword"), in libpq's
// order; empty if it carries none. Refuse such a URL on the command line (the process list shows
// it).
std::vector<std::string> url_secret_names(const std::string& url);

} // namespace payrecon::store
