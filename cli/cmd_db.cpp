// payrecon db start|stop|status|migrate|url
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "core/errors.hpp"
#include "core/settings.hpp"
#include "store/migrations.hpp"

#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

namespace payrecon::cli {
namespace {

void require_private(const AppState& state, const char* verb) {
    if (!state.global.database_url.empty()) {
        throw UsageError(
            std::string("`payrecon db ") + verb +
                "` manages payrecon's private PostgreSQL, and a database URL was given",
            "unset PAYRECON_DATABASE_URL / drop --database, or manage that server yourself");
    }
}

void run_start(AppState& state) {
    require_private(state, "start");
    store::LocalCluster cluster = local_cluster(state.global);
    cluster.ensure_started();
    name_sessions(state.global);
    store::Db db(cluster.url());
    const auto applied = store::migrate(db, migration_lock_wait());
    const auto st = cluster.status();
    std::cout << "PostgreSQL " << st.server_version << " is running (pid "
              << (st.pid ? std::to_string(*st.pid) : "?") << ") on "
              << cluster.socket_dir().string() << "\nschema version " << store::schema_version(db)
              << (applied.empty() ? "" : " (just migrated)") << "\n";
}

void run_stop(AppState& state, bool immediate) {
    require_private(state, "stop");
    store::LocalCluster cluster = local_cluster(state.global);
    const bool stopped = cluster.stop(immediate ? store::LocalCluster::StopMode::immediate
                                                : store::LocalCluster::StopMode::fast);
    std::cout << (!stopped ? "PostgreSQL was not running\n"
                  : immediate
                      ? "PostgreSQL stopped immediately (the next start runs crash recovery)\n"
                      : "PostgreSQL stopped\n");
}

void run_status(AppState& state, bool json) {
    nlohmann::json out;
    if (!state.global.database_url.empty()) {
        out["database"] = store::redact_url(state.global.database_url);
        out["private"] = false;
        try {
            store::Db db(state.global.database_url);
            out["reachable"] = true;
            out["schema_version"] = store::schema_version(db);
        } catch (const DatabaseUnavailable& e) {
            out["reachable"] = false;
            out["error"] = e.what();
        }
    } else {
        store::LocalCluster cluster = local_cluster(state.global);
        const auto st = cluster.status();
        out["private"] = true;
        out["home"] = cluster.home().string();
        out["data_dir"] = cluster.data_dir().string();
        out["socket_dir"] = cluster.socket_dir().string();
        out["log"] = cluster.log_file().string();
        out["url"] = cluster.url();
        out["initialized"] = st.initialized;
        out["running"] = st.running;
        out["reachable"] = st.running;
        if (st.pid) {
            out["pid"] = *st.pid;
        }
        if (st.running) {
            store::Db db(cluster.url());
            out["schema_version"] = store::schema_version(db);
        }
    }
    out["schema_version_known"] = store::latest_known_version();
    if (json) {
        print_json(out);
    } else {
        for (const auto& [key, value] : out.items()) {
            std::cout << key << ": "
                      << (value.is_string() ? value.get<std::string>() : value.dump()) << "\n";
        }
    }
    state.exit_code =
        out["reachable"].get<bool>() ? 0 : static_cast<int>(ExitCode::database_unavailable);
}

void run_migrate(AppState& state, const std::string& lock_timeout) {
    std::optional<std::chrono::milliseconds> timeout;
    if (!lock_timeout.empty()) {
        timeout = parse_duration_ms(lock_timeout, "--lock-timeout");
    }
    const store::MigrationLockWait wait = migration_lock_wait(timeout);
    OpenDatabase opened = open_database(state.global, SchemaCheck::none);
    const auto applied = store::migrate(*opened.db, wait);
    if (applied.empty()) {
        std::cout << "schema is current (version " << store::schema_version(*opened.db) << ")\n";
    } else {
        for (const int v : applied) {
            std::cout << "applied migration " << v << "\n";
        }
        std::cout << "schema version " << store::schema_version(*opened.db) << "\n";
    }
}

void run_url(AppState& state) {
    if (!state.global.database_url.empty()) {
        std::cout << store::redact_url(state.global.database_url) << "\n";
        return;
    }
    std::cout << local_cluster(state.global).url() << "\n";
}

} // namespace

void setup_db(CLI::App& app, AppState& state) {
    CLI::App* db = app.add_subcommand("db", "payrecon's private PostgreSQL and the schema");
    db->require_subcommand(1);
    db->add_subcommand("start", "create (first time) and start the private PostgreSQL, and migrate")
        ->callback([&state] { run_start(state); });
    auto immediate = std::make_shared<bool>(false);
    CLI::App* stop =
        db->add_subcommand("stop", "stop the private PostgreSQL (open transactions roll back)");
    stop->add_flag("--immediate", *immediate,
                   "stop every server process at once, without a checkpoint: the next start runs "
                   "crash recovery (for crash drills)");
    stop->callback([&state, immediate] { run_stop(state, *immediate); });
    auto json = std::make_shared<bool>(false);
    CLI::App* status = db->add_subcommand("status", "where the database is, and whether it runs");
    status->add_flag("--json", *json, "print JSON");
    status->callback([&state, json] { run_status(state, *json); });
    auto lock_timeout = std::make_shared<std::string>();
    CLI::App* migrate = db->add_subcommand(
        "migrate", "apply pending schema migrations (idempotent, safe to run at once)");
    migrate->add_option("--lock-timeout", *lock_timeout,
                        "how long to wait for the migration lock another session holds (250ms, "
                        "30s, 5m) instead of PAYRECON_MIGRATION_LOCK_TIMEOUT (default 60s); then "
                        "exit 6 naming the session that holds it");
    migrate->callback([&state, lock_timeout] { run_migrate(state, *lock_timeout); });
    db->add_subcommand("url", "print the libpq URL of the private PostgreSQL (passwords hidden)")
        ->callback([&state] { run_url(state); });
}

} // namespace payrecon::cli
