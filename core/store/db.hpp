#pragma once
// One database connection (not thread-safe: one per thread). Reconnects on the next use after the
// server went away. pqxx stays behind this header: only core/store/*.cpp include <pqxx/...>.

#include <memory>
#include <string>

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

// `url` with any password replaced by "***", for messages and logs.
std::string redact_url(const std::string& url);

} // namespace payrecon::store
