// payrecon serve: the HTTP intake API. SIGTERM or SIGINT drains in-flight requests and exits 0.
#include "api/server.hpp"
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/signals.hpp"
#include "core/errors.hpp"
#include "core/settings.hpp"
#include "providers/registry.hpp"

#include <csignal>
#include <iostream>
#include <sys/resource.h>

namespace payrecon::cli {
namespace {

struct ServeOptions {
    std::string listen = "127.0.0.1:8080";
    int db_workers = 16;
    int io_threads = 2;
    std::string read_timeout; // the older name: sets the header and body timeouts not given
    std::string header_timeout;
    std::string body_timeout;
    std::string idle_timeout = "5s";
    int max_connections = 4096;
    int max_connections_per_peer = 256;
    int max_requests_per_key = 64;
    int max_unsent_mib_per_key = 16;
    int max_unsent_mib_per_peer = 32;
    int max_unsent_mib = 256;
    int queue_length = 1024;
    std::string queue_timeout = "2s";
    bool metrics_per_endpoint = false;
};

std::chrono::milliseconds bounded_duration(const std::string& text, const char* option,
                                           std::chrono::milliseconds min,
                                           std::chrono::milliseconds max) {
    const auto d = parse_duration_ms(text, option);
    if (d < min || d > max) {
        throw UsageError(std::string(option) + " " + text + " is out of range",
                         "give between " + std::to_string(min.count()) + "ms and " +
                             std::to_string(max.count() / 1000) + "s");
    }
    return d;
}

void check_range(int value, const char* option, int min, int max) {
    if (value < min || value > max) {
        throw UsageError(std::string(option) + " must be between " + std::to_string(min) + " and " +
                         std::to_string(max));
    }
}

// Each client connection is a descriptor, and so is each database connection: raise the soft
// RLIMIT_NOFILE as far as that needs (up to the hard limit), and refuse to start if it cannot be.
void ensure_descriptors(const api::ServerOptions& options) {
    const rlim_t needed = static_cast<rlim_t>(options.http.max_connections) +
                          static_cast<rlim_t>(options.db_workers) + 64;
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= needed) {
        return;
    }
    if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed) {
        throw ConfigError("--max-connections " + std::to_string(options.http.max_connections) +
                              " needs " + std::to_string(needed) +
                              " file descriptors, and the hard limit is " +
                              std::to_string(limit.rlim_max),
                          "lower --max-connections, or raise the limit (ulimit -Hn, LimitNOFILE= "
                          "in a systemd unit)");
    }
    limit.rlim_cur = needed;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
        throw ConfigError("cannot raise the open file limit to " + std::to_string(needed),
                          "lower --max-connections, or raise ulimit -n");
    }
}

std::pair<std::string, int> parse_listen(const std::string& listen) {
    const auto colon = listen.rfind(':');
    int port = -1;
    if (colon != std::string::npos && colon > 0) {
        try {
            std::size_t used = 0;
            port = std::stoi(listen.substr(colon + 1), &used);
            if (used != listen.size() - colon - 1) {
                port = -1;
            }
        } catch (const std::exception&) {
        }
    }
    if (port < 0 || port > 65535) {
        throw UsageError("--listen " + listen + " is not HOST:PORT",
                         "for example 127.0.0.1:8080, or 127.0.0.1:0 for any free port");
    }
    return {listen.substr(0, colon), port};
}

void log_event(const nlohmann::ordered_json& j) {
    std::cout << j.dump() << std::endl;
}

void run_serve(AppState& state, const ServeOptions& opts) {
    const auto [host, port] = parse_listen(opts.listen);
    check_range(opts.db_workers, "--db-workers (--threads)", 1, 256);
    check_range(opts.io_threads, "--io-threads", 1, 4);
    check_range(opts.max_connections, "--max-connections", 1, 1'000'000);
    check_range(opts.max_connections_per_peer, "--max-connections-per-peer", 1,
                opts.max_connections);
    check_range(opts.queue_length, "--queue-length", 1, 1'000'000);
    check_range(opts.max_requests_per_key, "--max-requests-per-key", 1, 1'000'000);
    check_range(opts.max_unsent_mib, "--max-unsent-mib", 1, 1'000'000);
    check_range(opts.max_unsent_mib_per_key, "--max-unsent-mib-per-key", 1, opts.max_unsent_mib);
    check_range(opts.max_unsent_mib_per_peer, "--max-unsent-mib-per-peer", 1, opts.max_unsent_mib);
    using std::chrono::milliseconds;
    using std::chrono::minutes;
    const std::string fallback = opts.read_timeout.empty() ? "5s" : opts.read_timeout;
    api::ServerOptions server_options;
    server_options.http.header_timeout =
        bounded_duration(opts.header_timeout.empty() ? fallback : opts.header_timeout,
                         "--header-timeout", milliseconds(100), minutes(10));
    server_options.http.body_timeout =
        bounded_duration(opts.body_timeout.empty() ? fallback : opts.body_timeout, "--body-timeout",
                         milliseconds(100), minutes(10));
    server_options.http.idle_timeout =
        bounded_duration(opts.idle_timeout, "--idle-timeout", milliseconds(100), minutes(10));
    server_options.http.max_connections = opts.max_connections;
    server_options.http.max_connections_per_peer = opts.max_connections_per_peer;
    const auto mib = [](int n) { return static_cast<std::size_t>(n) << 20u; };
    // A connection has one request in hand at most: the per-peer connection cap bounds requests.
    server_options.http.per_peer = {static_cast<std::size_t>(opts.max_connections_per_peer),
                                    mib(opts.max_unsent_mib_per_peer), mib(opts.max_unsent_mib)};
    server_options.per_credential = {static_cast<std::size_t>(opts.max_requests_per_key),
                                     mib(opts.max_unsent_mib_per_key), 0};
    server_options.queue_timeout =
        bounded_duration(opts.queue_timeout, "--queue-timeout", milliseconds(1), minutes(10));
    server_options.queue_length = static_cast<std::size_t>(opts.queue_length);
    server_options.db_workers = opts.db_workers;
    server_options.io_threads = opts.io_threads;
    server_options.metrics_per_endpoint = opts.metrics_per_endpoint;
    ensure_descriptors(server_options);
    OpenDatabase opened = open_database(state.global);
    server_options.host = host;
    server_options.port = port;
    server_options.database_url = opened.db->url();
    server_options.intake.retention = idempotency_retention();
    server_options.intake.providers = intake_provider_catalog(state.global);
    if (!state.global.config_file.empty()) {
        // Webhook secrets are the only credentials serve reads: it never calls a provider.
        server_options.webhooks = providers::webhook_verifiers(
            providers::load_config(state.global.config_file, providers::ApiKeys::not_read));
    }
    FingerprintKeys keys = fingerprint_keys(state.global, opened.embedded);
    opened.db.reset(); // the workers open their own

    api::Server server(server_options, std::move(keys), std::cout);
    const int bound = server.bind();
    {
        // Signals go to one thread that stops the server; the I/O and database threads, started in
        // run(), inherit the mask.
        StopOnSignal stop_on_signal([&server](int sig) {
            nlohmann::ordered_json draining;
            draining["event"] = "draining";
            draining["signal"] = sig == SIGTERM ? "SIGTERM" : "SIGINT";
            log_event(draining);
            server.stop();
        });
        nlohmann::ordered_json listening;
        listening["event"] = "listening";
        listening["address"] = host;
        listening["port"] = bound;
        listening["threads"] = opts.db_workers;
        listening["io_threads"] = opts.io_threads;
        listening["max_connections"] = opts.max_connections;
        listening["max_connections_per_peer"] = opts.max_connections_per_peer;
        log_event(listening);
        if (!server_options.intake.providers) {
            const std::string message =
                "no provider configuration (--config or PAYRECON_CONFIG): provider names are not "
                "checked, so a payment naming a provider that no worker sends to is accepted and "
                "stays pending; give serve the workers' configuration file";
            std::cerr << "payrecon serve: warning: " << message << std::endl;
            nlohmann::ordered_json warning;
            warning["event"] = "warning";
            warning["warning"] = "provider_names_not_checked";
            warning["message"] = message;
            log_event(warning);
        }
        server.run();
    }
    log_event(nlohmann::ordered_json{{"event", "stopped"}});
}

} // namespace

void setup_serve(CLI::App& app, AppState& state) {
    auto opts = std::make_shared<ServeOptions>();
    CLI::App* s = app.add_subcommand(
        "serve", "serve the HTTP intake API (POST /v1/payments, GET /v1/payments/{id}, GET "
                 "/v1/payments?merchant_reference=REF, /healthz, "
                 "/readyz, /metrics) and the providers' webhooks (POST "
                 "/v1/providers/{name}/webhooks, for each provider whose configuration names a "
                 "webhook_secret_env); SIGTERM drains and exits 0. Give it the workers' --config "
                 "(PAYRECON_CONFIG) so that it refuses payments to providers they do not know");
    s->add_option("--listen", opts->listen, "HOST:PORT to listen on (port 0: any free port)")
        ->capture_default_str();
    s->add_option("--db-workers,--threads", opts->db_workers,
                  "database workers, each with its own database connection")
        ->capture_default_str();
    s->add_option("--io-threads", opts->io_threads, "threads that run the network I/O (1-4)")
        ->capture_default_str();
    s->add_option("--header-timeout", opts->header_timeout,
                  "total time a client has to send the request line and headers [5s]");
    s->add_option("--body-timeout", opts->body_timeout,
                  "total time a client has to send the body, once the headers are in [5s]");
    s->add_option("--read-timeout", opts->read_timeout,
                  "sets --header-timeout and --body-timeout where they are not given");
    s->add_option("--idle-timeout", opts->idle_timeout,
                  "how long a kept-alive connection may wait for its next request")
        ->capture_default_str();
    s->add_option("--max-connections", opts->max_connections,
                  "client connections open at once; more are answered 503 and closed")
        ->capture_default_str();
    s->add_option("--max-connections-per-peer", opts->max_connections_per_peer,
                  "client connections open at once from one IP address; more are answered 503 "
                  "and closed")
        ->capture_default_str();
    s->add_option("--max-requests-per-key", opts->max_requests_per_key,
                  "requests one principal's API key may have in progress or answered and not yet "
                  "read; more get 429 with Retry-After")
        ->capture_default_str();
    s->add_option("--max-unsent-mib-per-key", opts->max_unsent_mib_per_key,
                  "MiB of answers one principal's API key may leave unread; more requests get 429")
        ->capture_default_str();
    s->add_option("--max-unsent-mib-per-peer", opts->max_unsent_mib_per_peer,
                  "MiB of answers one IP address may leave unread; more requests get 429")
        ->capture_default_str();
    s->add_option("--max-unsent-mib", opts->max_unsent_mib,
                  "MiB of answers all clients together may leave unread; more requests get 429")
        ->capture_default_str();
    s->add_option("--queue-length", opts->queue_length,
                  "requests that may wait for a database worker; more get 503 at once")
        ->capture_default_str();
    s->add_option("--queue-timeout", opts->queue_timeout,
                  "longest wait for a database worker; then 503 with Retry-After")
        ->capture_default_str();
    s->add_flag("--metrics-per-endpoint", opts->metrics_per_endpoint,
                "label /metrics' events-out series with each webhook endpoint's tenant and "
                "endpoint ID (/metrics is unauthenticated: only where operators alone reach it; "
                "by default they are summed)");
    s->callback([&state, opts] { run_serve(state, *opts); });
}

} // namespace payrecon::cli
