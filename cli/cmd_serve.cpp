// payrecon serve: the HTTP intake API. SIGTERM or SIGINT drains in-flight requests and exits 0.
#include "api/server.hpp"
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/signals.hpp"
#include "core/errors.hpp"
#include "core/settings.hpp"

#include <csignal>
#include <iostream>

namespace payrecon::cli {
namespace {

struct ServeOptions {
    std::string listen = "127.0.0.1:8080";
    int threads = 16;
    std::string read_timeout = "5s";
};

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

void log_event(const nlohmann::ordered_json& j) { std::cout << j.dump() << std::endl; }

void run_serve(AppState& state, const ServeOptions& opts) {
    const auto [host, port] = parse_listen(opts.listen);
    if (opts.threads < 1 || opts.threads > 256) {
        throw UsageError("--threads must be between 1 and 256");
    }
    OpenDatabase opened = open_database(state.global);
    api::ServerOptions server_options;
    server_options.host = host;
    server_options.port = port;
    server_options.threads = opts.threads;
    server_options.database_url = opened.db->url();
    server_options.intake.retention = idempotency_retention();
    server_options.intake.providers = intake_provider_catalog(state.global);
    server_options.read_timeout = parse_duration(opts.read_timeout, "--read-timeout");
    FingerprintKeys keys = fingerprint_keys(state.global, opened.embedded);
    opened.db.reset(); // the workers open their own

    api::Server server(server_options, std::move(keys), std::cout);
    const int bound = server.bind();
    {
        // Signals go to one thread that stops the server; the worker threads inherit the mask.
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
        listening["threads"] = opts.threads;
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
        "serve", "serve the HTTP intake API (POST /v1/payments, GET /v1/payments/{id}, /healthz, "
                 "/readyz, /metrics); SIGTERM drains and exits 0. Give it the workers' --config "
                 "(PAYRECON_CONFIG) so that it refuses payments to providers they do not know");
    s->add_option("--listen", opts->listen, "HOST:PORT to listen on (port 0: any free port)")
        ->capture_default_str();
    s->add_option("--threads", opts->threads,
                  "worker threads, each with its own database connection")
        ->capture_default_str();
    s->add_option("--read-timeout", opts->read_timeout,
                  "how long a slow client may take to send a request")
        ->capture_default_str();
    s->callback([&state, opts] { run_serve(state, *opts); });
}

} // namespace payrecon::cli
