#include "api/server.hpp"

#include "api/db_workers.hpp"
#include "core/errors.hpp"
#include "core/problem.hpp"
#include "services/auth.hpp"
#include "services/captures.hpp"
#include "services/events.hpp"
#include "services/intake.hpp"
#include "services/payments.hpp"
#include "services/refunds.hpp"
#include "services/webhooks.hpp"
#include "store/db.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

namespace payrecon::api {
namespace {

using Clock = std::chrono::steady_clock;

void set_content(HttpResponse& res, std::string body, std::string_view content_type) {
    res.body = std::move(body);
    res.content_type = std::string(content_type);
}

void set_header(HttpResponse& res, std::string name, std::string value) {
    res.headers.emplace_back(std::move(name), std::move(value));
}

void send_problem(HttpResponse& res, int status, std::string_view type, std::string_view title,
                  std::string_view detail, std::optional<std::string_view> field = std::nullopt) {
    res.status = status;
    set_content(res, problem_json(status, type, title, detail, field), k_problem_content_type);
}

// A refused credential, as services/intake words it for the API and the CLI alike.
void send_refusal(HttpResponse& res, std::string& outcome, AuthFailure failure) {
    const IntakeResponse r = refusal_for(failure);
    if (r.status == 401) {
        set_header(res, "WWW-Authenticate", "Bearer");
    }
    res.status = r.status;
    set_content(res, r.body, r.content_type());
    outcome = r.outcome;
}

// Outside the intake (authentication, reads) nothing is written, but say it right whatever threw.
std::string_view webhook_result(WebhookVerdict::Status status) {
    switch (status) {
    case WebhookVerdict::Status::verified:
        return "verified";
    case WebhookVerdict::Status::bad_signature:
        return "bad_signature";
    case WebhookVerdict::Status::malformed:
        return "malformed";
    }
    return "malformed";
}

void send_not_ready(HttpResponse& res) {
    send_problem(res, 503, "not_ready", "Not ready",
                 "The database is unreachable or its schema is not the one this server knows.");
}

void send_unavailable(HttpResponse& res, const DatabaseUnavailable& e) {
    send_problem(
        res, 503, "service_unavailable", "The payment store is unavailable",
        e.commit_outcome_unknown()
            ? "The outcome is unknown: the database connection was lost during a commit. "
              "Retry the same request with the same Idempotency-Key: it returns the stored "
              "result if it was committed, and is a fresh attempt if it was not."
            : "Nothing was stored. Retry the same request with the same Idempotency-Key.");
    set_header(res, "Retry-After", "1");
}

// Every database worker stayed busy for the whole queue timeout, or too many requests waited.
void send_busy(HttpResponse& res, std::chrono::milliseconds queue_timeout, bool queue_full) {
    send_problem(res, 503, "service_unavailable", "The payment service is busy",
                 (queue_full ? std::string("Too many requests are waiting for a database worker")
                             : "No database worker was free within " +
                                   std::to_string(queue_timeout.count()) + " ms") +
                     ". Nothing was stored. Retry the same request with the same Idempotency-Key.");
    set_header(res, "Retry-After", "1");
}

// "12.3 MiB" / "512 KiB" / "900 bytes"
std::string byte_words(std::size_t bytes) {
    std::ostringstream out;
    if (bytes >= (1u << 20u)) {
        out << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1u << 20u)
            << " MiB";
    } else if (bytes >= 1024) {
        out << bytes / 1024 << " KiB";
    } else {
        out << bytes << " bytes";
    }
    return out.str();
}

// A client address or a credential with as much in hand as its allowance: 429, nothing done.
void send_too_many(HttpResponse& res, std::string_view who, const AllowanceUse& use,
                   const AllowanceLimits& limits) {
    const bool requests = use.requests >= limits.max_requests;
    send_problem(
        res, 429, "too_many_requests", "Too many requests",
        std::string(who) + " has " +
            (requests ? std::to_string(use.requests) + " requests in progress or answered and not "
                                                       "yet read, as many as it may"
                      : byte_words(use.unsent_bytes) +
                            " of answers it has not read yet, as much as it may") +
            ". Nothing was done for this request. Read the answers already asked for (or close "
            "those connections), then retry after the Retry-After seconds.");
    set_header(res, "Retry-After", "1");
}

std::string header_value(const HttpRequest& req, const char* name) {
    return req.header(name);
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

constexpr std::string_view k_payments = "/v1/payments";
constexpr std::string_view k_payment_prefix = "/v1/payments/";

std::string path_of(const std::string& target) {
    return target.substr(0, target.find('?'));
}

// The provider name of a webhook path, /v1/providers/{name}/webhooks, or nullopt.
std::optional<std::string> webhook_provider(const std::string& path) {
    static constexpr std::string_view k_prefix = "/v1/providers/";
    static constexpr std::string_view k_suffix = "/webhooks";
    if (!path.starts_with(k_prefix) || !path.ends_with(k_suffix) ||
        path.size() <= k_prefix.size() + k_suffix.size()) {
        return std::nullopt;
    }
    std::string name =
        path.substr(k_prefix.size(), path.size() - k_prefix.size() - k_suffix.size());
    const bool valid =
        name.size() <= 32 && std::all_of(name.begin(), name.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
        });
    return valid ? std::optional<std::string>(std::move(name)) : std::nullopt;
}

constexpr std::string_view k_refund_prefix = "/v1/refunds/";
constexpr std::string_view k_capture_prefix = "/v1/captures/";
constexpr std::string_view k_void_prefix = "/v1/voids/";

// "/v1/payments/{id}<suffix>" ("/refunds", "/captures", "/void"): the {id}, or nullopt.
std::optional<std::string> payment_subpath(const std::string& path, std::string_view suffix) {
    if (!path.starts_with(k_payment_prefix) || !path.ends_with(suffix) ||
        path.size() <= k_payment_prefix.size() + suffix.size()) {
        return std::nullopt;
    }
    std::string id =
        path.substr(k_payment_prefix.size(), path.size() - k_payment_prefix.size() - suffix.size());
    if (id.find('/') != std::string::npos) {
        return std::nullopt;
    }
    return id;
}

std::optional<std::string> refunds_of_payment_path(const std::string& path) {
    return payment_subpath(path, "/refunds");
}

// "<prefix>{id}" with nothing after the ID.
bool is_resource_path(const std::string& path, std::string_view prefix) {
    return path.size() > prefix.size() && path.starts_with(prefix) &&
           path.find('/', prefix.size()) == std::string::npos;
}

bool is_refund_path(const std::string& path) {
    return is_resource_path(path, k_refund_prefix);
}

bool is_payment_path(const std::string& path) {
    return path.size() > k_payment_prefix.size() && path.starts_with(k_payment_prefix) &&
           path.find('/', k_payment_prefix.size()) == std::string::npos;
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

std::string bearer_token(const HttpRequest& req) {
    const std::string value = header_value(req, "Authorization");
    static const std::regex k_bearer(R"(^[Bb][Ee][Aa][Rr][Ee][Rr] +([!-~]+) *$)");
    std::smatch m;
    if (std::regex_match(value, m, k_bearer)) {
        return m[1].str();
    }
    return {};
}

std::string iso_now() {
    const auto now = std::chrono::system_clock::now();
    const auto t = std::chrono::system_clock::to_time_t(now);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    std::ostringstream out;
    out << buf << '.' << std::setw(3) << std::setfill('0') << ms.count() << 'Z';
    return out.str();
}

} // namespace

// One route: a method and a path pattern, the name logs and /metrics give it, and where it runs.
struct Server::Route {
    enum class Runs {
        io,     // answered on the I/O thread: needs no database
        scrape, // /metrics: its own counters at once, the rest from an idle worker if there is one
        worker, // queued for a database worker
    };
    std::string_view method;
    std::string_view name;
    bool (*matches)(const std::string& path);
    Runs runs;
    void (Server::*handle)(const HttpRequest& req, HttpResponse& res, Context& ctx);
};

// Every route serve has, built once. A path that one of them matches with another method is 405
// (Allow: the methods that take it); a path none matches is 404.
const std::vector<Server::Route>& Server::routes() {
    using Runs = Route::Runs;
    static const std::vector<Route> k_routes = {
        {"POST", "POST /v1/payments", [](const std::string& p) { return p == k_payments; },
         Runs::worker, &Server::create_payment},
        {"GET", "GET /v1/payments/{id}", is_payment_path, Runs::worker, &Server::get_payment},
        {"POST", "POST /v1/payments/{id}/refunds",
         [](const std::string& p) { return refunds_of_payment_path(p).has_value(); }, Runs::worker,
         &Server::create_refund},
        {"GET", "GET /v1/refunds/{id}", is_refund_path, Runs::worker, &Server::get_refund},
        {"POST", "POST /v1/payments/{id}/captures",
         [](const std::string& p) { return payment_subpath(p, "/captures").has_value(); },
         Runs::worker, &Server::create_capture},
        {"POST", "POST /v1/payments/{id}/void",
         [](const std::string& p) { return payment_subpath(p, "/void").has_value(); }, Runs::worker,
         &Server::create_void},
        {"GET", "GET /v1/captures/{id}",
         [](const std::string& p) { return is_resource_path(p, k_capture_prefix); }, Runs::worker,
         &Server::get_capture},
        {"GET", "GET /v1/voids/{id}",
         [](const std::string& p) { return is_resource_path(p, k_void_prefix); }, Runs::worker,
         &Server::get_void},
        {"GET", "GET /v1/payments", [](const std::string& p) { return p == k_payments; },
         Runs::worker, &Server::list_payments},
        {"GET", "GET /v1/events", [](const std::string& p) { return p == "/v1/events"; },
         Runs::worker, &Server::get_events},
        {"POST", "POST /v1/providers/{name}/webhooks",
         [](const std::string& p) { return webhook_provider(p).has_value(); }, Runs::worker,
         &Server::provider_webhook},
        {"GET", "GET /healthz", [](const std::string& p) { return p == "/healthz"; }, Runs::io,
         &Server::healthz},
        {"GET", "GET /readyz", [](const std::string& p) { return p == "/readyz"; }, Runs::worker,
         &Server::readyz},
        {"GET", "GET /metrics", [](const std::string& p) { return p == "/metrics"; }, Runs::scrape,
         nullptr},
    };
    return k_routes;
}

const Server::Route* Server::route_of(const std::string& method, const std::string& path) {
    for (const Route& r : routes()) {
        if (r.method == method && r.matches(path)) {
            return &r;
        }
    }
    return nullptr;
}

struct Server::Context {
    Clock::time_point started = Clock::now();
    std::string route = "other";
    std::string tenant;
    std::string outcome;
    std::string refused;  // why the transport refused the request, if it did
    std::string incident; // what went wrong inside, for the operator (IntakeResponse::incident)
    bool holds_connection = false;
    DbSlot* slot = nullptr; // the worker's connection, on a worker thread
    // The credential's share of the allowance, from authentication until its answer is read.
    std::shared_ptr<Allowance::Hold> hold;
};

Server::Server(ServerOptions options, FingerprintKeys keys, std::ostream& log)
    : m_options(std::move(options)), m_keys(std::move(keys)), m_log(log),
      m_allowance(m_options.per_credential),
      m_http(std::make_unique<HttpServer>(m_options.http, static_cast<HttpHandler&>(*this))) {
    m_metrics.set_pool_size(m_options.db_workers);
}

Server::~Server() = default;

int Server::bind() {
    return m_http->bind(m_options.host, m_options.port);
}

void Server::run() {
    // The threads start here, so that they inherit the caller's signal mask (cli/signals.hpp).
    // Each worker opens its connection and prepares the intake's statement as it starts, as
    // pgbench connects before it measures: the first requests do not wait for a new backend
    // and its first plan. Best effort: a database that is down now is connected to on demand.
    m_workers = std::make_unique<DbWorkers>(m_options.db_workers, m_options.queue_length,
                                            m_options.queue_timeout, [this](DbSlot& slot) {
                                                try {
                                                    slot.db = std::make_unique<store::Db>(
                                                        m_options.database_url);
                                                    m_metrics.connection_opened();
                                                    payrecon::prepare_intake(*slot.db);
                                                } catch (const std::exception&) {
                                                    drop_connection(slot);
                                                }
                                            });
    m_http->run(m_options.io_threads);
    m_workers->stop(); // every request was answered: nothing is queued
}

void Server::stop() {
    m_http->stop();
}

void Server::drop_connection(DbSlot& slot) {
    if (slot.db) {
        slot.db.reset();
        m_metrics.connection_closed();
    }
}

store::Db& Server::connection(Context& ctx) {
    std::unique_ptr<store::Db>& db = ctx.slot->db;
    if (!db) {
        db = std::make_unique<store::Db>(m_options.database_url);
        m_metrics.connection_opened();
    }
    if (!ctx.holds_connection) {
        m_metrics.connection_acquired();
        ctx.holds_connection = true;
    }
    return *db;
}

void Server::log_line(const Context& ctx, const HttpRequest& req, int status) {
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
    if (!ctx.refused.empty()) {
        line["refused"] = ctx.refused;
    }
    if (!ctx.incident.empty()) {
        line["incident"] = ctx.incident;
    }
    line["remote"] = req.remote;
    const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::lock_guard lock(m_log_mutex);
    m_log << text << '\n' << std::flush;
}

std::string Server::render_metrics() {
    return m_metrics.render(m_http->stats(), m_workers->waiting());
}

// On an I/O thread: what needs no database is answered here; the rest is queued for a worker.
void Server::handle(HttpRequest request, Respond respond) {
    Context ctx;
    const std::string path = path_of(request.target);
    const Route* route = route_of(request.method, path);
    ctx.route = route != nullptr ? std::string(route->name) : "other";
    HttpResponse res;
    try {
        if (route != nullptr && route->runs == Route::Runs::scrape) {
            scrape(std::move(request), std::move(respond));
            return;
        }
        if (route != nullptr && route->runs == Route::Runs::worker) {
            on_worker(*route, std::move(request), std::move(respond));
            return;
        }
        if (route != nullptr) {
            (this->*route->handle)(request, res, ctx);
        } else {
            std::string allow;
            for (const Route& r : routes()) {
                if (r.matches(path) && allow.find(r.method) == std::string::npos) {
                    allow += (allow.empty() ? "" : ", ") + std::string(r.method);
                }
            }
            if (!allow.empty()) {
                send_problem(res, 405, "method_not_allowed", "Method not allowed",
                             "This route does not take that method.");
                set_header(res, "Allow", allow);
            } else {
                send_problem(res, 404, "not_found", "Not found", "No such resource.");
            }
        }
    } catch (const std::exception&) {
        res = {};
        send_problem(res, 500, "internal_error", "Internal error", "The request failed.");
        ctx.outcome = "error";
    }
    log_line(ctx, request, res.status);
    respond(std::move(res));
}

// /metrics: this process's own counters are rendered here, on the I/O thread, before anything
// waits; the requests providers rejected are the workers' observations, in the database, read by
// a database worker that is idle at the time. When none is (or the database cannot be read) the
// scrape still gets everything else at once, with payrecon_rejected_requests_readable 0: a
// saturated server stays observable, and scrapes never compete with clients for workers.
void Server::scrape(HttpRequest request, Respond respond) {
    struct Pending {
        Context ctx;
        HttpRequest request;
        Respond respond;
        std::string own;
    };
    auto pending = std::make_shared<Pending>();
    pending->ctx.route = "GET /metrics";
    pending->own = render_metrics();
    pending->request = std::move(request);
    pending->respond = std::move(respond);
    const auto answer = [this, pending](const Metrics::Rejected& rejected) {
        HttpResponse res;
        set_content(
            res, pending->own + Metrics::render_rejected(rejected, m_options.metrics_per_endpoint),
            "text/plain; version=0.0.4");
        log_line(pending->ctx, pending->request, res.status);
        pending->respond(std::move(res));
    };
    auto job = [this, pending, answer](DbSlot& slot) {
        Metrics::Rejected rejected;
        pending->ctx.slot = &slot;
        try {
            store::Db& db = connection(pending->ctx);
            rejected.found = provider_rejections(db);
            rejected.deliveries = event_delivery_health(db);
            rejected.readable = true;
        } catch (const std::exception&) {
            // DatabaseUnavailable or anything else: the series are left out, readable 0.
            drop_connection(slot);
            pending->ctx.outcome = "unavailable";
        }
        if (pending->ctx.holds_connection) {
            m_metrics.connection_released();
            pending->ctx.holds_connection = false;
        }
        pending->ctx.slot = nullptr;
        answer(rejected);
    };
    // Only a worker idle now reads them: a scrape never takes a queue place from a client, nor
    // waits behind one.
    if (m_workers->busy() >= m_workers->workers() || m_workers->waiting() > 0 ||
        !m_workers->submit(job, [answer] { answer({}); })) {
        answer({});
    }
}

void Server::on_worker(const Route& route, HttpRequest request, Respond respond) {
    struct Pending {
        Context ctx;
        HttpRequest request;
        Respond respond;
    };
    auto pending = std::make_shared<Pending>();
    pending->ctx.route = route.name;
    pending->request = std::move(request);
    pending->respond = std::move(respond);
    const auto answer_busy = [this, pending](bool queue_full) {
        HttpResponse res;
        send_busy(res, m_options.queue_timeout, queue_full);
        pending->ctx.outcome = "overloaded";
        m_metrics.count_overloaded();
        log_line(pending->ctx, pending->request, res.status);
        pending->respond(std::move(res));
    };
    // Every handler runs inside this: the connection, the translation of a lost database into 503
    // and of a bug into 500, the log line.
    auto job = [this, pending, &route](DbSlot& slot) {
        Context& ctx = pending->ctx;
        const HttpRequest& req = pending->request;
        ctx.slot = &slot;
        HttpResponse res;
        try {
            // A worker's connection that was opened for an earlier request may have died since
            // (a database restart, a failover): that request is tried once more on a new
            // connection before anyone is told 503 -- never one whose COMMIT may have happened.
            for (bool retried = false;; retried = true) {
                const bool reused = slot.db != nullptr;
                try {
                    (this->*route.handle)(req, res, ctx);
                    break;
                } catch (const DatabaseUnavailable& e) {
                    if (retried || !reused || e.commit_outcome_unknown()) {
                        throw;
                    }
                    drop_connection(slot);
                    res = {};
                    m_metrics.count_reconnect();
                }
            }
        } catch (const DatabaseUnavailable& e) {
            drop_connection(slot);
            res = {};
            if (ctx.route == "GET /readyz") {
                send_not_ready(res);
            } else {
                send_unavailable(res, e);
            }
            ctx.outcome = e.commit_outcome_unknown() ? "in_doubt" : "unavailable";
        } catch (const std::exception& e) {
            res = {};
            send_problem(res, 500, "internal_error", "Internal error",
                         "The request failed; it was logged. Retry it with the same "
                         "Idempotency-Key.");
            ctx.outcome = "error";
            std::lock_guard lock(m_log_mutex);
            m_log << nlohmann::json{{"ts", iso_now()},
                                    {"event", "error"},
                                    {"route", ctx.route},
                                    {"error", e.what()}}
                         .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                  << '\n';
        }
        if (ctx.holds_connection) {
            m_metrics.connection_released();
        }
        ctx.slot = nullptr;
        log_line(ctx, req, res.status);
        if (ctx.hold) { // the credential's until the client has read it
            ctx.hold->charge(res.body.size());
            res.hold = std::move(ctx.hold);
        }
        pending->respond(std::move(res));
    };
    if (!m_workers->submit(job, [answer_busy] { answer_busy(false); })) {
        answer_busy(true);
    }
}

// Requests the transport refused: unreadable, header fields or body too large. problem+json too.
HttpResponse Server::refused(const HttpRequest& req, const HttpRefusal& refusal) {
    Context ctx;
    const Route* route = route_of(req.method, path_of(req.target));
    ctx.route = route != nullptr ? std::string(route->name) : "other";
    ctx.outcome = "invalid";
    ctx.refused = refusal.reason;
    HttpResponse res;
    switch (refusal.status) {
    case 429:
        ctx.outcome = "throttled";
        send_too_many(res, "This client address", refusal.use, m_options.http.per_peer);
        break;
    case 413:
        send_problem(res, 413, "request_too_large", "Request body too large",
                     "The body exceeds " + std::to_string(m_options.http.max_body) + " bytes.");
        break;
    case 431:
        send_problem(res, 431, "request_header_fields_too_large", "Request header fields too large",
                     "The request line and headers must fit in " +
                         std::to_string(m_options.http.max_header_bytes) + " bytes and " +
                         std::to_string(m_options.http.max_header_fields) + " fields.");
        break;
    default:
        if (iequals(refusal.field, "Idempotency-Key")) {
            send_problem(res, 400, "invalid_idempotency_key", "Idempotency-Key is invalid",
                         "The Idempotency-Key holds a control character; send 1 to 255 visible "
                         "ASCII characters.",
                         std::string_view("Idempotency-Key"));
        } else if (!refusal.field.empty()) {
            send_problem(res, 400, "bad_request", "Bad request",
                         "A header value holds a control character.", refusal.field);
        } else {
            send_problem(res, 400, "bad_request", "Bad request",
                         "The HTTP request could not be read.");
        }
        break;
    }
    log_line(ctx, req, res.status);
    return res;
}

std::optional<Principal> Server::writer(const HttpRequest& req, HttpResponse& res, Context& ctx) {
    // The transport refused bodies over the cap (413) as they arrived, before authentication.
    const std::string token = bearer_token(req);
    if (token.empty()) { // refused before a database worker's connection is touched
        send_refusal(res, ctx.outcome, AuthFailure::missing);
        return std::nullopt;
    }
    // Cached: the create statements refuse a principal revoked since (403 credential_revoked).
    auto principal = m_credentials.authenticate(connection(ctx), Secret(token));
    if (!principal) {
        send_refusal(res, ctx.outcome, principal.error());
        return std::nullopt;
    }
    ctx.tenant = principal->tenant_id;
    if (!admit(*principal, res, ctx)) {
        return std::nullopt;
    }
    if (req.header_count("Idempotency-Key") > 1) {
        send_problem(res, 400, "invalid_idempotency_key", "Idempotency-Key is invalid",
                     "Send Idempotency-Key exactly once.", std::string_view("Idempotency-Key"));
        ctx.outcome = "invalid";
        return std::nullopt;
    }
    // A body without a Content-Type is not JSON by declaration: refused like any other type.
    if (!is_json_media_type(header_value(req, "Content-Type"))) {
        send_problem(res, 415, "unsupported_media_type", "Unsupported media type",
                     "Send the body as application/json, with the header Content-Type: "
                     "application/json.");
        ctx.outcome = "invalid";
        return std::nullopt;
    }
    return *principal;
}

void Server::send_intake(const IntakeResponse& r, HttpResponse& res, Context& ctx) {
    res.status = r.status;
    set_content(res, r.body, r.content_type());
    if (r.location) {
        set_header(res, "Location", *r.location);
    }
    if (r.retry_after) {
        set_header(res, "Retry-After", std::to_string(*r.retry_after));
    }
    if (r.replayed) {
        set_header(res, "Idempotent-Replayed", "true");
        m_metrics.count_replay();
    }
    if (r.outcome == "conflict") {
        m_metrics.count_conflict();
    }
    ctx.outcome = r.outcome;
    ctx.incident = r.incident;
}

void Server::create_payment(const HttpRequest& req, HttpResponse& res, Context& ctx) {
    const auto principal = writer(req, res, ctx);
    if (!principal) {
        return;
    }
    IntakeService intake(connection(ctx), m_keys, m_options.intake);
    send_intake(intake.create_payment(*principal, header_value(req, "Idempotency-Key"), req.body,
                                      header_value(req, "Payrecon-Version")),
                res, ctx);
}

void Server::create_refund(const HttpRequest& req, HttpResponse& res, Context& ctx) {
    const auto principal = writer(req, res, ctx);
    if (!principal) {
        return;
    }
    const auto payment_id = refunds_of_payment_path(path_of(req.target));
    RefundService refunds(connection(ctx), m_keys, m_options.intake);
    send_intake(refunds.create_refund(*principal, payment_id.value_or(""),
                                      header_value(req, "Idempotency-Key"), req.body,
                                      header_value(req, "Payrecon-Version")),
                res, ctx);
}

void Server::get_refund(const HttpRequest& req, HttpResponse& res, Context& ctx) {
    const auto principal = reader(req, res, ctx);
    if (!principal) {
        return;
    }
    const std::string id = path_of(req.target).substr(k_refund_prefix.size());
    // Another tenant's refund and a malformed ID are both simply not found: nothing leaks.
    const auto body = refund_resource(connection(ctx), principal->tenant_id, id);
    if (!body) {
        send_problem(res, 404, "not_found", "Not found", "No refund with this ID.");
        return;
    }
    res.status = 200;
    set_content(res, *body, "application/json");
}

void Server::create_capture(const HttpRequest& req, HttpResponse& res, Context& ctx) {
    const auto principal = writer(req, res, ctx);
    if (!principal) {
        return;
    }
    const auto payment_id = payment_subpath(path_of(req.target), "/captures");
    CaptureService captures(connection(ctx), m_keys, m_options.intake);
    send_intake(captures.create_capture(*principal, payment_id.value_or(""),
                                        header_value(req, "Idempotency-Key"), req.body,
                                        header_value(req, "Payrecon-Version")),
                res, ctx);
}

void Server::create_void(const HttpRequest& req, HttpResponse& res, Context& ctx) {
    const auto principal = writer(req, res, ctx);
    if (!principal) {
        return;
    }
    const auto payment_id = payment_subpath(path_of(req.target), "/void");
    CaptureService captures(connection(ctx), m_keys, m_options.intake);
    send_intake(captures.create_void(*principal, payment_id.value_or(""),
                                     header_value(req, "Idempotency-Key"), req.body,
                                     header_value(req, "Payrecon-Version")),
                res, ctx);
}

void Server::get_operation(const HttpRequest& req, HttpResponse& res, Context& ctx,
                           OperationKind kind, std::string_view prefix) {
    const auto principal = reader(req, res, ctx);
    if (!principal) {
        return;
    }
    const std::string id = path_of(req.target).substr(prefix.size());
    // Another tenant's and a malformed ID are both simply not found: nothing leaks.
    const auto body = capture_resource(connection(ctx), kind, principal->tenant_id, id);
    if (!body) {
        send_problem(res, 404, "not_found", "Not found",
                     "No " + std::string(to_string(kind)) + " with this ID.");
        return;
    }
    res.status = 200;
    set_content(res, *body, "application/json");
}

void Server::get_capture(const HttpRequest& req, HttpResponse& res, Context& ctx) {
    get_operation(req, res, ctx, OperationKind::capture, k_capture_prefix);
}

void Server::get_void(const HttpRequest& req, HttpResponse& res, Context& ctx) {
    get_operation(req, res, ctx, OperationKind::void_authorization, k_void_prefix);
}

std::optional<Principal> Server::reader(const HttpRequest& req, HttpResponse& res, Context& ctx) {
    const std::string token = bearer_token(req);
    if (token.empty()) { // refused before a database worker's connection is touched
        send_refusal(res, ctx.outcome, AuthFailure::missing);
        return std::nullopt;
    }
    auto principal = authenticate(connection(ctx), Secret(token));
    if (!principal) {
        send_refusal(res, ctx.outcome, principal.error());
        return std::nullopt;
    }
    ctx.tenant = principal->tenant_id;
    if (!admit(*principal, res, ctx)) {
        return std::nullopt;
    }
    return *principal;
}

bool Server::admit(const Principal& principal, HttpResponse& res, Context& ctx) {
    AllowanceUse use;
    ctx.hold = m_allowance.admit(principal.principal_id, &use);
    if (!ctx.hold) {
        send_too_many(res, "This API key", use, m_options.per_credential);
        ctx.outcome = "throttled";
        return false;
    }
    return true;
}

void Server::get_payment(const HttpRequest& req, HttpResponse& res, Context& ctx) {
    const auto principal = reader(req, res, ctx);
    if (!principal) {
        return;
    }
    store::Db& db = connection(ctx);
    const std::string id = path_of(req.target).substr(k_payment_prefix.size());
    // Another tenant's payment and a malformed ID are both simply not found: nothing leaks.
    const auto body = payment_resource(db, principal->tenant_id, id);
    if (!body) {
        send_problem(res, 404, "not_found", "Not found", "No payment with this ID.");
        return;
    }
    res.status = 200;
    set_content(res, *body, "application/json");
}

void Server::list_payments(const HttpRequest& req, HttpResponse& res, Context& ctx) {
    const auto principal = reader(req, res, ctx);
    if (!principal) {
        return;
    }
    store::Db& db = connection(ctx);
    const std::size_t q = req.target.find('?');
    const std::string query = q == std::string::npos ? std::string() : req.target.substr(q + 1);
    // Only the credential's tenant's payments are looked at: another tenant's is never found.
    const auto list = payments_by_query(db, principal->tenant_id, query);
    if (!list) {
        ctx.outcome = "invalid";
        send_problem(res, list.error().status, list.error().type, "Invalid query",
                     list.error().detail);
        return;
    }
    res.status = 200;
    set_content(res, *list, "application/json");
}

void Server::get_events(const HttpRequest& req, HttpResponse& res, Context& ctx) {
    const auto principal = reader(req, res, ctx);
    if (!principal) {
        return;
    }
    store::Db& db = connection(ctx);
    const std::size_t q = req.target.find('?');
    const std::string query = q == std::string::npos ? std::string() : req.target.substr(q + 1);
    auto page = events_page(db, principal->tenant_id, query);
    if (!page) {
        const EventsPageProblem& p = page.error();
        send_problem(res, p.status, p.type, p.status == 410 ? "Events purged" : "Invalid query",
                     p.detail);
        return;
    }
    res.status = 200;
    set_content(res, *page, "application/json");
}

// A provider's notification: authenticated by the provider's signature alone (no payrecon key),
// stored if it verifies, answered at once; the reconciler interprets it later.
void Server::provider_webhook(const HttpRequest& req, HttpResponse& res, Context& ctx) {
    const std::string name = webhook_provider(path_of(req.target)).value_or("");
    const auto verifier = m_options.webhooks.find(name);
    if (verifier == m_options.webhooks.end()) {
        send_problem(res, 404, "not_found", "Not found",
                     "No webhook endpoint for this provider: serve's provider configuration gives "
                     "it no webhook_secret_env.");
        return;
    }
    WebhookRequest w;
    w.headers.reserve(req.headers.size());
    for (const auto& [key, value] : req.headers) {
        std::string lower = key;
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        w.headers.emplace_back(std::move(lower), value);
    }
    w.body = req.body;
    w.received_at = std::chrono::system_clock::now();
    // Verified before a database connection is taken: a forged request costs no connection.
    WebhookVerdict verdict = verifier->second->verify(w);
    const WebhookReceipt receipt =
        verdict.status == WebhookVerdict::Status::verified
            ? record_webhook(connection(ctx), name, std::move(verdict), w.body)
            : WebhookReceipt{verdict.status, std::move(verdict.reason), 0, 0, 0};
    m_metrics.count_webhook(name, std::string(webhook_result(receipt.status)), receipt.new_events);
    switch (receipt.status) {
    case WebhookVerdict::Status::verified:
        ctx.outcome = receipt.new_events < receipt.events ? "redelivered" : "stored";
        set_content(res,
                    nlohmann::json{{"received", receipt.events},
                                   {"new", receipt.new_events},
                                   {"unmatched", receipt.unmatched}}
                        .dump(),
                    "application/json");
        return;
    case WebhookVerdict::Status::bad_signature:
        ctx.outcome = "bad_signature";
        send_problem(res, 401, "invalid_signature", "Invalid signature",
                     receipt.reason + "; nothing was stored.");
        return;
    case WebhookVerdict::Status::malformed:
        ctx.outcome = "malformed";
        send_problem(res, 400, "malformed_notification", "Malformed notification",
                     receipt.reason + "; nothing was stored.");
        return;
    }
}

void Server::healthz(const HttpRequest&, HttpResponse& res, Context&) {
    set_content(res, R"({"status":"alive"})", "application/json");
}

void Server::readyz(const HttpRequest&, HttpResponse& res, Context& ctx) {
    // An unreachable database is an answer here (not ready), not an error; the job's retry on a
    // new connection has already been spent when this throws.
    if (store_ready(connection(ctx))) {
        set_content(res, R"({"status":"ready"})", "application/json");
    } else {
        send_not_ready(res);
    }
}

} // namespace payrecon::api
