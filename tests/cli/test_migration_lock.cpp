// The migration lock (issue 36 item 5). A process stopped while it held the lock (SIGSTOP during
// start-up, here the test's own session holding the same advisory lock) blocked every later
// command of the private PostgreSQL without a word, and a worker waiting for it ignored SIGTERM.
// Now a command whose schema is current never waits for the lock; one that must migrate waits at
// most PAYRECON_MIGRATION_LOCK_TIMEOUT and names the session that holds it; a worker waiting for
// it stops on SIGTERM. Through the real binary, against a private cluster of the test's own.

#include "store/cluster.hpp"
#include "store/migrations.hpp"
#include "tests/support/operated.hpp"
#include "tests/support/wait.hpp"

#include <catch2/catch.hpp>
#include <csignal>
#include <pqxx/pqxx>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// store/migrations.cpp's key: "payrecon" folded into 63 bits.
constexpr long long k_migration_lock = 0x7061797265636f6eLL;

// A private cluster under a home of its own, initialised and started but never migrated; stopped
// and removed at the end.
struct PrivateHome {
    TempDir dir{"payrecon-locktest"};
    store::LocalCluster cluster{dir.path()};
    PrivateHome() { cluster.ensure_started(); }
    ~PrivateHome() {
        try {
            cluster.stop();
        } catch (...) {
        }
    }
};

long long scalar(pqxx::connection& c, const std::string& sql) {
    pqxx::nontransaction tx(c);
    return tx.exec1(sql)[0].as<long long>();
}

} // namespace

TEST_CASE("migration lock: while a stopped session holds it, commands on a current schema go on, "
          "one that must migrate times out naming the holder, and a waiting worker stops on "
          "SIGTERM, and a waiting nightly on Ctrl-C",
          "[cli][db][migrations][regression]") {
    Operated w; // the provider configuration and its key; the database is the private one below
    PrivateHome home;
    const Env env = w.env({{"PAYRECON_HOME", home.dir.path().string()}});
    const std::vector<std::string> config{"--config", w.config_file.string()};
    const auto with_config = [&](std::vector<std::string> args) {
        args.insert(args.begin(), config.begin(), config.end());
        return args;
    };

    // The lock as a payrecon stopped inside its migration holds it: a session that took it and
    // does nothing more.
    pqxx::connection holder(home.cluster.url() + "&application_name=stopped-migrator");
    const long long holder_pid = scalar(holder, "SELECT pg_backend_pid()");
    REQUIRE(scalar(holder, "SELECT pg_try_advisory_lock(" + std::to_string(k_migration_lock) +
                               ")::int") == 1);
    const std::string named =
        "database session " + std::to_string(holder_pid) + " (\"stopped-migrator\"";

    // A fresh database must be migrated: the wait ends at the timeout, naming the session and
    // what to do; nothing is migrated.
    const Run migrate = w.payrecon_raw({"db", "migrate", "--lock-timeout", "1s"}, env);
    INFO(migrate.all());
    CHECK(migrate.exit_code == 6);
    CHECK(contains(migrate.err, named));
    CHECK(contains(migrate.err, "holds the migration lock; waiting up to 1 s"));
    CHECK(contains(migrate.err, "holds the migration lock, and held it for the "));
    CHECK(contains(migrate.err, "pg_terminate_backend(" + std::to_string(holder_pid) + ")"));
    const Env short_wait = w.env(
        {{"PAYRECON_HOME", home.dir.path().string()}, {"PAYRECON_MIGRATION_LOCK_TIMEOUT", "1s"}});
    const Run listed_fresh = w.payrecon_raw({"payments", "list"}, short_wait);
    INFO(listed_fresh.all());
    CHECK(listed_fresh.exit_code == 6);
    CHECK(contains(listed_fresh.err, named));
    {
        store::Db db(home.cluster.url());
        CHECK(store::schema_version(db) == 0);
    }

    // A worker daemon that must migrate waits -- saying for whom -- and SIGTERM ends the wait.
    const Env long_wait = w.env(
        {{"PAYRECON_HOME", home.dir.path().string()}, {"PAYRECON_MIGRATION_LOCK_TIMEOUT", "10m"}});
    Payrecon daemon(w.dir.path(), long_wait, with_config({"worker"}));
    REQUIRE(wait_until([&] { return contains(daemon.errors_so_far(), named); },
                       std::chrono::seconds(60)));
    CHECK(contains(daemon.errors_so_far(), "waiting up to 600 s"));
    // Its session says whose it is: the command and its process ID.
    CHECK(scalar(holder, "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                         "'payrecon worker (pid " +
                             std::to_string(daemon.pid()) + ")'") == 1);
    daemon.signal(SIGTERM);
    const Run stopped = daemon.wait();
    INFO(stopped.all());
    CHECK(stopped.exit_code == 0);
    CHECK(contains(stopped.out, "stopped while waiting for the database or its migration lock"));

    // So does a nightly (from cron, or an operator's Ctrl-C): it took the signal from its start and
    // acted on it only after the wait, up to PAYRECON_MIGRATION_LOCK_TIMEOUT later.
    Payrecon nightly(w.dir.path(), long_wait, with_config({"nightly"}));
    REQUIRE(wait_until([&] { return contains(nightly.errors_so_far(), named); },
                       std::chrono::seconds(60)));
    nightly.signal(SIGINT);
    const Run interrupted = nightly.wait();
    INFO(interrupted.all());
    CHECK(interrupted.exit_code == 1);
    CHECK(contains(interrupted.out, "result: INTERRUPTED (exit 1) stopped while waiting for the "
                                    "migration lock; nothing was migrated and nothing reconciled"));
    {
        store::Db db(home.cluster.url());
        CHECK(store::schema_version(db) == 0);
    }

    // Once the lock is free the migration goes through.
    REQUIRE(scalar(holder, "SELECT pg_advisory_unlock(" + std::to_string(k_migration_lock) +
                               ")::int") == 1);
    const Run migrated = w.payrecon_raw({"db", "migrate"}, env);
    INFO(migrated.all());
    REQUIRE(migrated.exit_code == 0);
    {
        store::Db db(home.cluster.url());
        CHECK(store::schema_version(db) == store::latest_known_version());
    }

    // Held again, as by a payrecon stopped at start-up: the schema is current, so nothing waits
    // for the lock -- before the fix each of these waited for as long as the session held it.
    REQUIRE(scalar(holder, "SELECT pg_try_advisory_lock(" + std::to_string(k_migration_lock) +
                               ")::int") == 1);
    const Run listed = w.payrecon_raw({"payments", "list"}, env);
    INFO(listed.all());
    CHECK(listed.exit_code == 0);
    CHECK_FALSE(contains(listed.err, "migration lock"));
    const Run once = w.payrecon_raw(with_config({"worker", "--once"}), env);
    INFO(once.all());
    CHECK(once.exit_code == 0);
    CHECK(contains(once.out, "worker_stopped"));
    CHECK_FALSE(contains(once.err, "migration lock"));
    const Run migrate_current = w.payrecon_raw({"db", "migrate", "--lock-timeout", "1s"}, env);
    INFO(migrate_current.all());
    CHECK(migrate_current.exit_code == 0);
    CHECK(contains(migrate_current.out, "schema is current"));
    // The session still holds it: nobody took it from under it.
    CHECK(scalar(holder, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                         "AND pid = pg_backend_pid()") == 1);
}
