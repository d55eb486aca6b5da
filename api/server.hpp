#pragma once
// `payrecon serve`: the HTTP intake API over cpp-httplib. Each worker thread has its own database
// connection (the pool is the thread pool). One JSON log line per request, never the credential.

#include "api/metrics.hpp"
#include "core/fingerprint.hpp"
#include "core/intake.hpp"

#include <chrono>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>

namespace httplib {
class Server;
struct Request;
struct Response;
} // namespace httplib

namespace payrecon::store {
class Db;
}

namespace payrecon::api {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080; // 0: any free port (bind() returns it)
    int threads = 16;
    std::string database_url;
    IntakeSettings intake;
    std::chrono::seconds read_timeout{5};       // a slow client's headers and body
    std::chrono::seconds write_timeout{5};
    std::chrono::seconds keep_alive_timeout{5}; // an idle keep-alive connection
    std::size_t max_body = 64 * 1024;           // larger bodies get 413
};

class Server {
public:
    Server(ServerOptions options, FingerprintKeys keys, std::ostream& log);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Binds the listening socket; returns the port. Throws ConfigError if it cannot.
    int bind();
    // Serves until stop(); in-flight requests finish before it returns.
    void run();
    // Stops accepting; safe from another thread.
    void stop();

    Metrics& metrics() { return m_metrics; }

private:
    struct Context;
    void install_routes();
    void create_payment(const httplib::Request& req, httplib::Response& res, Context& ctx);
    void get_payment(const httplib::Request& req, httplib::Response& res, Context& ctx);
    void readyz(httplib::Response& res, Context& ctx);
    store::Db& connection(Context& ctx);
    void log_line(const Context& ctx, const httplib::Request& req, int status);

    ServerOptions m_options;
    FingerprintKeys m_keys;
    std::ostream& m_log;
    std::mutex m_log_mutex;
    Metrics m_metrics;
    std::unique_ptr<httplib::Server> m_http;
    int m_listen_socket = -1;
};

} // namespace payrecon::api
