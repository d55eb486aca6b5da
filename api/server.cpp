#include "api/server.hpp"

#include "core/auth.hpp"
#include "core/errors.hpp"
#include "core/problem.hpp"
#include "core/store/db.hpp"
#include "core/store/payment_store.hpp"
#include "core/store/reconcile_store.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <regex>
#include <sstream>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>

namespace payrecon::api {
namespace {

using Clock = std::chrono::steady_clock;

// Each worker thread keeps one connection, made on its first request and remade after a failure.
thread_local std::unique_ptr<store::Db> t_db;

void send_problem(httplib::Response& res, int status, std::string_view type, std::string_view title,
                  std::string_view detail, std::optional<std::string_view> field = std::nullopt) {
    res.status = status;
    res.set_content(problem_json(status, type, title, detail, field),
                    std::string(k_problem_content_type).c_str());
}

// Outside the intake (authentication, reads) nothing is written, but say it right whatever threw.
void send_unavailable(httplib::Response& res, const DatabaseUnavailable& e) {
    send_problem(res, 503, "service_unavailable", "The payment store is unavailable",
                 e.commit_outcome_unknown()
                     ? "The outcome is unknown: the database connection was lost during a commit. "
                       "Retry the same request with the same Idempotency-Key: it returns the stored "
                       "result if it was committed, and is a fresh attempt if it was not."
                     : "Nothing was stored. Retry the same request with the same Idempotency-Key.");
    res.set_header("Retry-After", "1");
}

// The whole value of header `name`, "" if absent. Request::get_header_value in cpp-httplib 0.11
// hands the value over as a C string, so a NUL byte (sent raw, or as %00, which 0.11 decodes in
// header values) would silently cut it short: "ab\0cd" would become the valid key "ab".
std::string header_value(const httplib::Request& req, const char* name) {
    const auto it = req.headers.find(name);
    return it == req.headers.end() ? std::string() : it->second;
}

// "application/json", "Application/JSON ; charset=utf-8": media types compare case-insensitively
// and may carry parameters and whitespace around them (RFC 9110 8.3.1).
bool is_json_media_type(const std::string& content_type) {
    std::string base = content_type.substr(0, content_type.find(';'));
    while (!base.empty() && (base.back() == ' ' || base.back() == '\t')) {
        base.pop_back();
    }
    for (char& c : base) {
        c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    }
    return base == "application/json";
}

std::string bearer_token(const httplib::Request& req) {
    const std::string value = header_value(req, "Authorization");
    static const std::regex k_bearer(R"(^[Bb][Ee][Aa][Rr][Ee][Rr] +([!-~]+) *$)");
    std::smatch m;
    if (std::regex_match(value, m, k_bearer)) {
        return m[1].str();
    }
    return {};
}

bool is_uuid(const std::string& s) {
    static const std::regex k_uuid(
        "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$");
    return std::regex_match(s, k_uuid);
}

std::string iso_now() {
    const auto now = std::chrono::system_clock::now();
    const auto t = std::chrono::system_clock::to_time_t(now);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    std::ostringstream out;
    out << buf << '.' << std::setw(3) << std::setfill('0') << ms.count() << 'Z';
    return out.str();
}

} // namespace

struct Server::Context {
    Clock::time_point started = Clock::now();
    std::string route = "other";
    std::string tenant;
    std::string outcome;
    bool holds_connection = false;
};

Server::Server(ServerOptions options, FingerprintKeys keys, std::ostream& log)
    : m_options(std::move(options)), m_keys(std::move(keys)), m_log(log),
      m_http(std::make_unique<httplib::Server>()) {
    const int threads = m_options.threads;
    m_http->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    m_metrics.set_pool_size(threads);
    m_http->set_payload_max_length(m_options.max_body);
    m_http->set_read_timeout(static_cast<time_t>(m_options.read_timeout.count()), 0);
    m_http->set_write_timeout(static_cast<time_t>(m_options.write_timeout.count()), 0);
    m_http->set_keep_alive_timeout(static_cast<time_t>(m_options.keep_alive_timeout.count()));
    m_http->set_tcp_nodelay(true);
    // cpp-httplib 0.11's default socket options set SO_REUSEPORT, so a second server could bind a
    // port that is in use and silently take a share of its connections. SO_REUSEADDR alone still allows
    // a quick restart. The socket is kept to enlarge the listen backlog in bind().
    m_http->set_socket_options([this](int sock) {
        const int yes = 1;
        ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        m_listen_socket = sock;
    });
    install_routes();
}

Server::~Server() = default;

int Server::bind() {
    const int port = m_options.port == 0 ? m_http->bind_to_any_port(m_options.host)
                                         : (m_http->bind_to_port(m_options.host, m_options.port)
                                                ? m_options.port
                                                : -1);
    if (port < 0) {
        throw ConfigError("cannot listen on " + m_options.host + ":" + std::to_string(m_options.port),
                          "is another process using the port? choose another with --listen");
    }
    // cpp-httplib 0.11 listens with a backlog of 5: a burst of concurrent connects overflowed it,
    // and clients whose SYN the kernel dropped retried only after 1, 3, 7 and 15 s. Listening again
    // on the bound socket enlarges the queue.
    if (::listen(m_listen_socket, SOMAXCONN) != 0) {
        throw ConfigError("cannot listen on " + m_options.host + ":" + std::to_string(port) + ": " +
                          std::strerror(errno));
    }
    return port;
}

void Server::run() { m_http->listen_after_bind(); }

void Server::stop() { m_http->stop(); }

store::Db& Server::connection(Context& ctx) {
    if (!t_db) {
        t_db = std::make_unique<store::Db>(m_options.database_url);
        m_metrics.connection_opened();
    }
    m_metrics.connection_acquired();
    ctx.holds_connection = true;
    return *t_db;
}

void Server::log_line(const Context& ctx, const httplib::Request& req, int status) {
    const double seconds = std::chrono::duration<double>(Clock::now() - ctx.started).count();
    m_metrics.observe_request(ctx.route, status, seconds);
    nlohmann::ordered_json line;
    line["ts"] = iso_now();
    line["event"] = "request";
    line["method"] = req.method;
    line["route"] = ctx.route;
    line["status"] = status;
    line["latency_ms"] = std::round(seconds * 100000.0) / 100.0;
    if (!ctx.tenant.empty()) {
        line["tenant"] = ctx.tenant;
    }
    if (!ctx.outcome.empty()) {
        line["outcome"] = ctx.outcome;
    }
    line["remote"] = req.remote_addr;
    const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::lock_guard lock(m_log_mutex);
    m_log << text << '\n' << std::flush;
}

void Server::install_routes() {
    // Every handler runs inside this wrapper: timing, the log line, the connection, and the
    // translation of a lost database into 503 (nothing stored) and of a bug into 500.
    auto wrap = [this](std::string route, auto handler) {
        return [this, route = std::move(route), handler](const httplib::Request& req,
                                                         httplib::Response& res) {
            Context ctx;
            ctx.route = route;
            try {
                handler(req, res, ctx);
            } catch (const DatabaseUnavailable& e) {
                t_db.reset();
                send_unavailable(res, e);
                ctx.outcome = e.commit_outcome_unknown() ? "in_doubt" : "unavailable";
            } catch (const std::exception& e) {
                send_problem(res, 500, "internal_error", "Internal error",
                             "The request failed; it was logged. Retry it with the same "
                             "Idempotency-Key.");
                ctx.outcome = "error";
                std::lock_guard lock(m_log_mutex);
                m_log << nlohmann::json{{"ts", iso_now()}, {"event", "error"}, {"route", ctx.route},
                                        {"error", e.what()}}
                             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                      << '\n';
            }
            if (ctx.holds_connection) {
                m_metrics.connection_released();
            }
            if (res.status == -1) {
                res.status = 200;
            }
            log_line(ctx, req, res.status);
        };
    };

    m_http->Post("/v1/payments", wrap("POST /v1/payments", [this](const auto& req, auto& res, Context& ctx) {
        create_payment(req, res, ctx);
    }));
    m_http->Get(R"(/v1/payments/([^/]+))",
                wrap("GET /v1/payments/{id}", [this](const auto& req, auto& res, Context& ctx) {
                    get_payment(req, res, ctx);
                }));
    m_http->Get("/healthz", wrap("GET /healthz", [](const auto&, auto& res, Context&) {
                    res.set_content(R"({"status":"alive"})", "application/json");
                }));
    m_http->Get("/readyz", wrap("GET /readyz", [this](const auto&, auto& res, Context& ctx) {
                    readyz(res, ctx);
                }));
    m_http->Get("/metrics", wrap("GET /metrics", [this](const auto&, auto& res, Context& ctx) {
                    // The rejected requests are the workers' observations, in the database: read
                    // them now. A database that cannot be read still leaves the rest to scrape.
                    const std::string own = m_metrics.render(); // before this scrape takes a connection
                    Metrics::Rejected rejected;
                    try {
                        store::Db& db = connection(ctx);
                        rejected.attempts = store::rejected_attempt_counts(db);
                        rejected.in_review = store::rejected_in_review(db);
                        rejected.readable = true;
                    } catch (const DatabaseUnavailable&) {
                        t_db.reset();
                    }
                    res.set_content(own + Metrics::render_rejected(rejected),
                                    "text/plain; version=0.0.4");
                }));
    // Unknown routes, oversize bodies (413), malformed HTTP (400): problem+json too.
    m_http->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) {
            return;
        }
        Context ctx;
        switch (res.status) {
        case 404:
            send_problem(res, 404, "not_found", "Not found", "No such resource.");
            break;
        case 413:
            send_problem(res, 413, "request_too_large", "Request body too large",
                         "The body exceeds " + std::to_string(m_options.max_body) + " bytes.");
            break;
        case 405:
            send_problem(res, 405, "method_not_allowed", "Method not allowed",
                         "This route does not take that method.");
            break;
        default:
            send_problem(res, res.status, "bad_request", "Bad request",
                         "The HTTP request could not be read.");
            break;
        }
        log_line(ctx, req, res.status);
    });
}

void Server::create_payment(const httplib::Request& req, httplib::Response& res, Context& ctx) {
    // cpp-httplib 0.11 enforces its payload limit only on a Content-Length; a chunked body of any
    // size reaches the handler. 413 before authentication, as for an oversize Content-Length.
    if (req.body.size() > m_options.max_body) {
        send_problem(res, 413, "request_too_large", "Request body too large",
                     "The body exceeds " + std::to_string(m_options.max_body) + " bytes.");
        ctx.outcome = "invalid";
        return;
    }
    const std::string token = bearer_token(req);
    if (token.empty()) {
        res.set_header("WWW-Authenticate", "Bearer");
        send_problem(res, 401, "unauthorized", "Authentication required",
                     "Send Authorization: Bearer <API key>.");
        ctx.outcome = "unauthorized";
        return;
    }
    store::Db& db = connection(ctx);
    const auto principal = authenticate(db, Secret(token));
    if (!principal) {
        if (principal.error() == AuthFailure::revoked) {
            send_problem(res, 403, "credential_revoked", "Credential revoked",
                         "This API key was revoked.");
            ctx.outcome = "forbidden";
        } else {
            res.set_header("WWW-Authenticate", "Bearer");
            send_problem(res, 401, "unauthorized", "Unknown credential",
                         "No principal has this API key.");
            ctx.outcome = "unauthorized";
        }
        return;
    }
    ctx.tenant = principal->tenant_id;
    if (req.get_header_value_count("Idempotency-Key") > 1) {
        send_problem(res, 400, "invalid_idempotency_key", "Idempotency-Key is invalid",
                     "Send Idempotency-Key exactly once.", std::string_view("Idempotency-Key"));
        ctx.outcome = "invalid";
        return;
    }
    // A body without a Content-Type is not JSON by declaration: refused like any other type.
    if (!is_json_media_type(header_value(req, "Content-Type"))) {
        send_problem(res, 415, "unsupported_media_type", "Unsupported media type",
                     "Send the body as application/json, with the header Content-Type: "
                     "application/json.");
        ctx.outcome = "invalid";
        return;
    }
    IntakeService intake(db, m_keys, m_options.intake);
    const IntakeResponse r = intake.create_payment(*principal, header_value(req, "Idempotency-Key"),
                                                   req.body, header_value(req, "Payrecon-Version"));
    res.status = r.status;
    res.set_content(r.body, r.content_type().c_str());
    if (r.location) {
        res.set_header("Location", *r.location);
    }
    if (r.retry_after) {
        res.set_header("Retry-After", std::to_string(*r.retry_after));
    }
    if (r.replayed) {
        res.set_header("Idempotent-Replayed", "true");
        m_metrics.count_replay();
    }
    if (r.outcome == "conflict") {
        m_metrics.count_conflict();
    }
    ctx.outcome = r.outcome;
}

void Server::get_payment(const httplib::Request& req, httplib::Response& res, Context& ctx) {
    const std::string token = bearer_token(req);
    if (token.empty()) {
        res.set_header("WWW-Authenticate", "Bearer");
        send_problem(res, 401, "unauthorized", "Authentication required",
                     "Send Authorization: Bearer <API key>.");
        return;
    }
    store::Db& db = connection(ctx);
    const auto principal = authenticate(db, Secret(token));
    if (!principal) {
        const bool revoked = principal.error() == AuthFailure::revoked;
        send_problem(res, revoked ? 403 : 401, revoked ? "credential_revoked" : "unauthorized",
                     revoked ? "Credential revoked" : "Unknown credential",
                     revoked ? "This API key was revoked." : "No principal has this API key.");
        return;
    }
    ctx.tenant = principal->tenant_id;
    const std::string id = req.matches[1].str();
    // Another tenant's payment and a malformed ID are both simply not found: nothing leaks.
    const auto payment = is_uuid(id) ? store::find_payment(db, principal->tenant_id, id) : std::nullopt;
    if (!payment) {
        send_problem(res, 404, "not_found", "Not found", "No payment with this ID.");
        return;
    }
    nlohmann::ordered_json body = nlohmann::ordered_json::parse(payment_resource_json(PaymentView{
        payment->payment_id, payment->state, payment->amount_minor, payment->currency,
        payment->merchant_reference, payment->provider, payment->created_at}));
    body["updated_at"] = payment->updated_at;
    body["provider_reference"] =
        payment->provider_reference ? nlohmann::ordered_json(*payment->provider_reference) : nullptr;
    nlohmann::ordered_json attempts = nlohmann::ordered_json::array();
    for (const auto& a : payment->attempts) {
        nlohmann::ordered_json j;
        j["attempt"] = a.attempt_no;
        j["outcome"] = a.outcome;
        j["http_status"] = a.http_status ? nlohmann::ordered_json(*a.http_status) : nullptr;
        j["started_at"] = a.started_at;
        j["finished_at"] = a.finished_at ? nlohmann::ordered_json(*a.finished_at) : nullptr;
        attempts.push_back(std::move(j));
    }
    body["attempt_count"] = payment->attempts.size();
    body["attempts"] = std::move(attempts);
    res.status = 200;
    res.set_content(body.dump(), "application/json");
}

void Server::readyz(httplib::Response& res, Context& ctx) {
    bool ready = false;
    try {
        ready = store::database_ready(connection(ctx));
    } catch (const DatabaseUnavailable&) {
        t_db.reset();
    }
    if (ready) {
        res.set_content(R"({"status":"ready"})", "application/json");
    } else {
        send_problem(res, 503, "not_ready", "Not ready",
                     "The database is unreachable or its schema is not the one this server knows.");
    }
}

} // namespace payrecon::api
