// payrecon worker: claims due payments and sends them to their provider with the stable operation
// ID. SIGTERM or SIGINT lets the calls in flight finish and be recorded, then exits 0 -- or 4 when
// a provider refused our credentials (the worker calls it no more, and stops by itself when no
// provider is left); `--once` exits 1 when no call got through.
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/relay_launch.hpp"
#include "cli/signals.hpp"
#include "core/backoff.hpp"
#include "core/errors.hpp"
#include "core/settings.hpp"
#include "engine/worker.hpp"
#include "providers/config.hpp"
#include "providers/registry.hpp"

#include <condition_variable>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

namespace payrecon::cli {
namespace {

struct WorkerCliOptions {
    bool once = false;
    int concurrency = 4;
    int threads = 0;
    int batch = 4;
    std::vector<std::string> only;
    std::string retry_base = "1s";
    std::string retry_cap = "5m";
    std::string lease; // empty: claim_lease's default
    int relay = 0;     // relay sender threads beside the executor (events out); 0: none
};

// The database, for a worker about to start. A daemon started while PostgreSQL is down (a
// restart, a failover, a host booting) waits for it -- logging each try, doubling from 200 ms up to
// 10 s -- as it does when the database goes away later; `--once` reports it at once (exit 5).
// A private cluster whose schema needs migrating waits for the migration lock as open_database
// says. nullopt: SIGTERM or SIGINT came while it waited for either.
std::optional<OpenDatabase> open_database_waiting(const GlobalOptions& g, bool once) {
    const Backoff reconnect{std::chrono::milliseconds(200), std::chrono::milliseconds(10000)};
    std::mutex mutex;
    std::condition_variable wake;
    bool stop = false;
    StopOnSignal on_signal([&](int) {
        std::lock_guard lock(mutex);
        stop = true;
        wake.notify_all();
    });
    const auto stop_requested = [&] {
        std::lock_guard lock(mutex);
        return stop;
    };
    for (int failures = 0;; ++failures) {
        try {
            return open_database(g, SchemaCheck::migrate_embedded, stop_requested);
        } catch (const store::MigrationWaitStopped&) {
            return std::nullopt;
        } catch (const DatabaseUnavailable& e) {
            if (once) {
                throw;
            }
            const std::chrono::milliseconds wait = reconnect.delay(failures);
            nlohmann::ordered_json line;
            line["event"] = "database_unavailable";
            line["error"] = e.what();
            line["retry_in_ms"] = wait.count();
            std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                      << std::endl;
            std::unique_lock lock(mutex);
            if (wake.wait_for(lock, wait, [&] { return stop; })) {
                return std::nullopt;
            }
        }
    }
}

void run_worker(AppState& state, const WorkerCliOptions& opts) {
    if (opts.concurrency < 1 || opts.concurrency > 256 || opts.batch < 1 || opts.batch > 100 ||
        opts.threads < 0 || opts.threads > 256) {
        throw UsageError("--concurrency must be 1..256, --threads 1..256 and --batch 1..100");
    }
    const providers::Config config = load_provider_config(state.global);
    const std::vector<const providers::ProviderConfig*> chosen =
        choose_providers(config, opts.only);
    const engine::ExecutorOptions executor_defaults;
    const std::chrono::milliseconds lease =
        claim_lease(chosen, opts.lease, executor_defaults.call_margin);
    std::optional<OpenDatabase> opened = open_database_waiting(state.global, opts.once);
    if (!opened) {
        std::cout << nlohmann::ordered_json{{"event", "worker_stopped"},
                                            {"reason", "stopped while waiting for the database "
                                                       "or its migration lock"}}
                         .dump()
                  << std::endl;
        return;
    }

    engine::WorkerOptions wo;
    wo.database_url = opened->db->url();
    wo.worker_id = process_id_text();
    wo.concurrency = opts.concurrency;
    wo.threads = opts.threads;
    wo.batch = opts.batch;
    wo.once = opts.once;
    wo.backoff.base = parse_duration_ms(opts.retry_base, "--retry-base");
    wo.backoff.cap = parse_duration_ms(opts.retry_cap, "--retry-cap");
    wo.lease = lease;
    for (const auto* p : chosen) {
        wo.credentials[p->name] = credentials_hint(*p);
    }
    // `--relay N`: the relay's senders run beside the executor, on their own connections.
    std::unique_ptr<engine::Relay> relay;
    if (opts.relay > 0) {
        RelayLaunch launch;
        launch.senders = opts.relay;
        launch.once = opts.once;
        relay = make_relay(state, launch, wo.database_url, opened->embedded, std::cout);
    }
    opened->db.reset();

    engine::Worker worker(
        wo,
        [chosen] {
            std::vector<std::unique_ptr<providers::Provider>> v;
            for (const auto* p : chosen) {
                v.push_back(providers::create_provider(*p));
            }
            return v;
        },
        std::cout);
    std::optional<engine::RelayCounts> relay_counts;
    {
        StopOnSignal stop_on_signal([&worker, &relay](int) {
            worker.stop();
            if (relay) {
                relay->stop();
            }
        });
        nlohmann::ordered_json started;
        started["event"] = "worker_started";
        started["worker"] = wo.worker_id;
        started["concurrency"] = wo.concurrency;
        started["threads"] = wo.executor_threads();
        started["lease_ms"] = wo.lease.count();
        std::cout << started.dump() << std::endl;
        std::thread relay_thread;
        if (relay) {
            std::cout << relay_started_line(relay->options()) << std::endl;
            relay_thread = std::thread([&relay, &relay_counts] { relay_counts = relay->run(); });
        }
        worker.run();
        if (relay) {
            // --once: the relay delivers what is due and returns by itself; otherwise it was
            // stopped with the worker (or the worker stopped on a fault: the relay stops too).
            if (!opts.once) {
                relay->stop();
            }
            relay_thread.join();
            std::cout << relay_stopped_line(*relay_counts) << std::endl;
        }
    }
    if (worker.database_failed()) {
        throw DatabaseUnavailable("the worker lost the database",
                                  "payments it had claimed turn unknown when their lease expires; "
                                  "the reconciler resolves them");
    }
    if (worker.failed()) {
        throw OperatorError(ExitCode::failure,
                            "the worker stopped on an error (see its worker_error log line)",
                            "payments it had claimed turn unknown when their lease expires; the "
                            "reconciler resolves them");
    }
    if (relay) {
        check_relay_outcome(*relay);
    }
    if (auto problem = worker.problem()) {
        throw *problem;
    }
}

} // namespace

void setup_worker(CLI::App& app, AppState& state) {
    auto opts = std::make_shared<WorkerCliOptions>();
    CLI::App* w = app.add_subcommand(
        "worker", "send due payments to their providers (pending, and retries that are due); "
                  "SIGTERM finishes the calls in flight. Exit 4 when a provider refused our "
                  "credentials (called no more after that one call), 1 with --once when no call "
                  "got through");
    w->add_flag("--once", opts->once, "process what is due now, then exit");
    w->add_option("--concurrency", opts->concurrency, "provider calls in flight at most")
        ->capture_default_str();
    w->add_option("--threads", opts->threads,
                  "executor threads, each with its own database connection (default: "
                  "--concurrency; more, such as 1.5 x, let claims and settlements overlap the "
                  "calls: docs/operations.md)");
    w->add_option("--batch", opts->batch, "payments claimed per transaction")
        ->capture_default_str();
    w->add_option("--provider", opts->only, "only these configured providers (repeatable)");
    w->add_option("--retry-base", opts->retry_base,
                  "first wait before sending a not-sent payment again (doubles, jittered)")
        ->capture_default_str();
    w->add_option("--retry-cap", opts->retry_cap, "longest wait between sends")
        ->capture_default_str();
    w->add_option("--lease", opts->lease,
                  "how long a claim is held, renewed just before each provider call; at least the "
                  "slowest provider's connect_timeout_ms + timeout_ms + 1s (default: that + 10s)");
    w->add_option("--relay", opts->relay,
                  "also deliver events to webhook endpoints with this many relay senders (as "
                  "payrecon relay --senders N does)")
        ->check(CLI::Range(0, 256))
        ->capture_default_str();
    w->callback([&state, opts] { run_worker(state, *opts); });
}

} // namespace payrecon::cli
