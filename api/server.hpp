#pragma once
// `payrecon serve`: the HTTP intake API. The transport (`http_server`, Boost.Beast on 1-2 I/O
// threads) reads and bounds requests; database work runs on a fixed pool of workers, each with its
// own connection (`db_workers`), never on an I/O thread; /healthz and /metrics are answered on the
// I/O thread, so they answer while every worker is busy. One JSON log line per request, never the
// credential.

#include "api/http_server.hpp"
#include "api/metrics.hpp"
#include "core/fingerprint.hpp"
#include "core/payment_state.hpp"
#include "core/webhook.hpp"
#include "services/auth.hpp"
#include "services/intake.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace payrecon::store {
class Db;
}

namespace payrecon::api {

class DbWorkers;
struct DbSlot;

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;                               // 0: any free port (bind() returns it)
    int db_workers = 16;                           // threads, each with its own database connection
    int io_threads = 2;                            // threads that run the network I/O
    std::size_t queue_length = 1024;               // requests waiting for a worker; beyond: 503
    std::chrono::milliseconds queue_timeout{2000}; // longest wait for a worker; beyond: 503
    std::string database_url;
    IntakeSettings intake;
    HttpLimits http;
    // POST /v1/providers/{name}/webhooks: each configured provider account's verifier, by name
    // (providers::webhook_verifiers()); a name without one is 404.
    std::map<std::string, std::shared_ptr<const WebhookVerifier>> webhooks;
    // /metrics labels the events-out series with tenant and endpoint IDs (opt in: /metrics is
    // unauthenticated, so only where operators alone reach it); else it sums them.
    bool metrics_per_endpoint = false;
    // What one principal's API key may have in hand: requests taken (from authentication) and not
    // yet read back, and the bytes of its answers not yet read; beyond: 429.
    AllowanceLimits per_credential{64, 16u << 20u, 0};
};

class Server final : private HttpHandler {
public:
    Server(ServerOptions options, FingerprintKeys keys, std::ostream& log);
    ~Server() override;
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Binds the listening socket; returns the port. Throws ConfigError if it cannot.
    int bind();
    // Serves until stop(); requests already received are answered before it returns.
    void run();
    // Stops accepting; safe from another thread.
    void stop();

    Metrics& metrics() { return m_metrics; }

private:
    struct Context;
    struct Route;
    static const std::vector<Route>& routes();
    // The route `method` and `path` match; nullptr if none.
    static const Route* route_of(const std::string& method, const std::string& path);
    void handle(HttpRequest request, Respond respond) override;
    HttpResponse refused(const HttpRequest& request, const HttpRefusal& refusal) override;
    void on_worker(const Route& route, HttpRequest request, Respond respond);
    // GET /metrics: own counters now, the rejected requests from the database through a worker.
    void scrape(HttpRequest request, Respond respond);
    // The principal of a create request (cached; its bearer key, the allowance, one
    // Idempotency-Key, a JSON body), or nullopt with the refusal written to `res`.
    std::optional<Principal> writer(const HttpRequest& req, HttpResponse& res, Context& ctx);
    // An intake's answer as HTTP: status, body, Location, Retry-After, Idempotent-Replayed.
    void send_intake(const IntakeResponse& r, HttpResponse& res, Context& ctx);
    void create_payment(const HttpRequest& req, HttpResponse& res, Context& ctx);
    void create_refund(const HttpRequest& req, HttpResponse& res, Context& ctx);
    void get_refund(const HttpRequest& req, HttpResponse& res, Context& ctx);
    void create_capture(const HttpRequest& req, HttpResponse& res, Context& ctx);
    void create_void(const HttpRequest& req, HttpResponse& res, Context& ctx);
    void get_capture(const HttpRequest& req, HttpResponse& res, Context& ctx);
    void get_void(const HttpRequest& req, HttpResponse& res, Context& ctx);
    void get_operation(const HttpRequest& req, HttpResponse& res, Context& ctx, OperationKind kind,
                       std::string_view prefix);
    // The principal of a read request's bearer key (the tenant recorded in `ctx`), or nullopt
    // with the refusal written to `res`.
    std::optional<Principal> reader(const HttpRequest& req, HttpResponse& res, Context& ctx);
    // Takes the principal's allowance for this request (held in `ctx`), or writes 429 to `res`
    // and returns false.
    bool admit(const Principal& principal, HttpResponse& res, Context& ctx);
    void get_payment(const HttpRequest& req, HttpResponse& res, Context& ctx);
    void list_payments(const HttpRequest& req, HttpResponse& res, Context& ctx);
    void get_events(const HttpRequest& req, HttpResponse& res, Context& ctx);
    void healthz(const HttpRequest& req, HttpResponse& res, Context& ctx);
    void readyz(const HttpRequest& req, HttpResponse& res, Context& ctx);
    void provider_webhook(const HttpRequest& req, HttpResponse& res, Context& ctx);
    store::Db& connection(Context& ctx);
    // Closes the worker's connection (it died, or its state is unknown); the next request opens
    // one.
    void drop_connection(DbSlot& slot);
    void log_line(const Context& ctx, const HttpRequest& req, int status);
    std::string render_metrics();

    ServerOptions m_options;
    FingerprintKeys m_keys;
    CredentialCache m_credentials; // for the create route only: its statement checks revocation
    std::ostream& m_log;
    std::mutex m_log_mutex;
    Metrics m_metrics;
    Allowance m_allowance; // per credential; outlives the workers and the transport
    std::unique_ptr<DbWorkers> m_workers;
    std::unique_ptr<HttpServer> m_http;
};

} // namespace payrecon::api
