// The benchmarks' database baselines (bench/pgbench_scripts.hpp) run payrecon's own statements:
// each script is run through pgbench on a database of its own, and what it wrote is counted.
#include "bench/pgbench_scripts.hpp"
#include "store/cluster.hpp"
#include "store/db.hpp"
#include "store/migrations.hpp"
#include "tests/support/test_db.hpp"

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <fstream>
#include <libpq-fe.h>
#include <pqxx/pqxx>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// Runs pgbench (-M prepared, one client) over `script` for `transactions` transactions against
// `url`, with PGOPTIONS `pg_options` if given. The connection goes to pgbench through PG*
// variables, never its arguments. Returns its exit status; its output goes to `log`.
int run_pgbench(const std::string& url, const std::string& script, int transactions,
                const std::vector<std::string>& defines, const std::string& log,
                const std::string& pg_options = "") {
    const std::string script_path = log + ".sql";
    std::ofstream(script_path) << script;
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
        if (std::string_view(*e).rfind("PG", 0) != 0) {
            env.emplace_back(*e);
        }
    }
    char* error = nullptr;
    PQconninfoOption* options = PQconninfoParse(url.c_str(), &error);
    if (options == nullptr) {
        const std::string what = error != nullptr ? error : "out of memory";
        PQfreemem(error);
        FAIL("the test database URL does not parse: " << what);
    }
    const std::map<std::string, std::string> to_env = {{"host", "PGHOST"},
                                                       {"port", "PGPORT"},
                                                       {"user", "PGUSER"},
                                                       {"password", "PGPASSWORD"},
                                                       {"dbname", "PGDATABASE"}};
    for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
        if (o->val != nullptr && to_env.count(o->keyword) != 0) {
            env.push_back(to_env.at(o->keyword) + "=" + o->val);
        }
    }
    PQconninfoFree(options);
    if (!pg_options.empty()) {
        env.push_back("PGOPTIONS=" + pg_options);
    }
    std::vector<std::string> args = {(store::postgres_bindir() / "pgbench").string(),
                                     "-n",
                                     "-M",
                                     "prepared",
                                     "-c",
                                     "1",
                                     "-t",
                                     std::to_string(transactions),
                                     "-f",
                                     script_path};
    for (const auto& d : defines) {
        args.push_back("-D");
        args.push_back(d);
    }
    std::vector<char*> argv;
    for (auto& a : args) {
        argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& e : env) {
        envp.push_back(e.data());
    }
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    REQUIRE(rc == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

} // namespace

TEST_CASE("bench: a statement and its benchmark binding cannot drift apart", "[store][bench]") {
    CHECK(bench::bind("SELECT $1, $2, $10, $1", {{1, "a"}, {2, ":b"}, {10, "'c'"}}) ==
          "SELECT a, :b, 'c', a");
    // A parameter the benchmark does not bind, and a binding the statement does not have.
    CHECK_THROWS_AS(bench::bind("SELECT $1, $2", {{1, "a"}}), std::invalid_argument);
    CHECK_THROWS_AS(bench::bind("SELECT $1", {{1, "a"}, {2, "b"}}), std::invalid_argument);
    // Nothing of the store's left unbound.
    for (const auto& script :
         {bench::executor_script(), bench::executor_batch_script(4), bench::intake_script()}) {
        bool parameter_left = false;
        for (std::size_t i = 0; i + 1 < script.size(); ++i) {
            parameter_left = parameter_left || (script[i] == '$' && std::isdigit(script[i + 1]));
        }
        CHECK_FALSE(parameter_left);
    }
}

TEST_CASE("bench: the pgbench baselines run the store's own statements and write what payrecon "
          "writes",
          "[store][db][bench][regression]") {
    // bench/executor_pgbench.sql was a hand-kept copy of the executor's SQL and had drifted: its
    // outbox event had 11 keys where the store writes 14, and bench/intake_pgbench.sql ran four
    // statements where intake ran two (now one). The scripts are now built from the store's
    // statements.
    ScratchDatabase scratch;
    store::Db db(scratch.url());
    store::migrate(db);
    const auto tenant = make_tenant(db);
    const auto writer = make_principal(db, tenant);
    const std::string log = "/tmp/payrecon-test-pgbench-" + unique_name("run");
    const int n = 5;

    const int intake =
        run_pgbench(scratch.url(), bench::intake_script(), n,
                    {"tenant=" + tenant.tenant_id, "principal=" + writer.principal.principal_id},
                    log + ".intake");
    INFO(read_file(log + ".intake"));
    REQUIRE(intake == 0);
    const std::string t = tenant.tenant_id;
    const auto url = scratch.url();
    CHECK(count_rows("payments", t, "state = 'pending'", url) == n);
    // Each record names its payment, and its stored 202 carries the time the statement wrote.
    CHECK(count_rows("idempotency_records", t,
                     "response_status = 202 AND resource_id IN (SELECT payment_id FROM payments) "
                     "AND response_body::jsonb ->> 'created_at' = to_char(created_at AT TIME ZONE "
                     "'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')",
                     url) == n);
    CHECK(count_rows("outbox", t,
                     "event_type = 'payment.created' AND "
                     "(SELECT count(*) FROM jsonb_object_keys(payload)) = 14",
                     url) == n);

    // The same payments, handed to the provider the executor script claims.
    exec_sql("UPDATE payments SET provider = 'pgbench' WHERE tenant_id = '" + t + "'", url);
    const int executor = run_pgbench(url, bench::executor_script(), n, {}, log + ".executor");
    INFO(read_file(log + ".executor"));
    REQUIRE(executor == 0);
    CHECK(count_rows("payments", t, "state = 'succeeded' AND generation = 1", url) == n);
    CHECK(count_rows("payment_attempts", t, "outcome = 'succeeded' AND finished_at IS NOT NULL",
                     url) == n);
    CHECK(count_rows("outbox", t,
                     "event_type = 'payment.succeeded' AND "
                     "(SELECT count(*) FROM jsonb_object_keys(payload)) = 14",
                     url) == n);

    // Batches of 4 (bench/executor's ceiling for the worker's --batch 4): 8 more payments, three
    // transactions -- 4, 4, and one that claims none and must still run.
    REQUIRE(
        run_pgbench(url, bench::intake_script(), 8,
                    {"tenant=" + tenant.tenant_id, "principal=" + writer.principal.principal_id},
                    log + ".intake") == 0);
    exec_sql("UPDATE payments SET provider = 'pgbench' WHERE state = 'pending' AND tenant_id = '" +
                 t + "'",
             url);
    const int batched = run_pgbench(url, bench::executor_batch_script(4), 3, {}, log + ".executor");
    INFO(read_file(log + ".executor"));
    REQUIRE(batched == 0);
    CHECK(count_rows("payments", t, "state = 'succeeded' AND generation = 1", url) == n + 8);
    CHECK(count_rows("payments", t, "state <> 'succeeded'", url) == 0);
    CHECK(count_rows("payment_attempts", t,
                     "outcome = 'succeeded' AND finished_at IS NOT NULL AND http_status = 200 AND "
                     "provider_reference = 'pi_pgbench'",
                     url) == n + 8);
    CHECK(count_rows("outbox", t, "event_type = 'payment.succeeded'", url) == n + 8);
    CHECK_THROWS_AS(bench::executor_batch_script(0), std::invalid_argument);

    // The lean baseline (bench/intake_lean.sql, issue 33): the same logical writes in one
    // statement on the bench's own tables -- one key with its stored 202 naming its payment, the
    // payment, its event -- per transaction.
    exec_sql(read_file(std::string(PAYRECON_SOURCE_DIR) + "/bench/intake_lean_schema.sql"), url);
    const int lean =
        run_pgbench(url, read_file(std::string(PAYRECON_SOURCE_DIR) + "/bench/intake_lean.sql"), n,
                    {"tenant=" + tenant.tenant_id, "principal=" + writer.principal.principal_id},
                    log + ".lean");
    INFO(read_file(log + ".lean"));
    REQUIRE(lean == 0);
    CHECK(count_rows("lean.payments", t, "state = 'pending'", url) == n);
    CHECK(count_rows("lean.idempotency_records", t,
                     "response_status = 202 AND resource_id IN (SELECT payment_id FROM "
                     "lean.payments)",
                     url) == n);
    CHECK(count_rows("lean.outbox", t,
                     "event_type = 'payment.created' AND aggregate_id IN (SELECT payment_id FROM "
                     "lean.payments)",
                     url) == n);
    for (const char* suffix :
         {".intake", ".intake.sql", ".executor", ".executor.sql", ".lean", ".lean.sql"}) {
        ::unlink((log + suffix).c_str());
    }
}

TEST_CASE("bench: each rung of the intake ladder removes what it names from the store's statement",
          "[store][bench]") {
    // Rung 0 is the intake baseline itself; 1-4 the same statement with keys from a counter per
    // client (only their tables change, bench/intake_ladder_schema.sql); then one thing less each.
    CHECK(bench::ladder_script(0) == bench::intake_script());
    for (int rung = 2; rung <= 4; ++rung) {
        CHECK(bench::ladder_script(rung).substr(bench::ladder_script(rung).find('\n')) ==
              bench::ladder_script(1).substr(bench::ladder_script(1).find('\n')));
    }
    for (int rung = 0; rung < bench::k_ladder_statement_rungs; ++rung) {
        INFO("rung " << rung);
        const std::string script = bench::ladder_script(rung);
        bool parameter_left = false;
        for (std::size_t i = 0; i + 1 < script.size(); ++i) {
            parameter_left = parameter_left || (script[i] == '$' && std::isdigit(script[i + 1]));
        }
        CHECK_FALSE(parameter_left);
        CHECK((script.find("\\set n :n + 1") != std::string::npos) == (rung >= 1));
        // The statement is the script's last line (its comments name what they remove).
        const std::string statement = script.substr(script.rfind('\n', script.size() - 2) + 1);
        CHECK((statement.find("jsonb_build_object") != std::string::npos) == (rung < 5));
        CHECK((statement.find("principals") != std::string::npos) == (rung < 6));
        CHECK((statement.find("payrecon_intake_reference_taken") != std::string::npos) ==
              (rung < 7));
        CHECK((statement.find("to_char(now()") != std::string::npos) == (rung < 8));
        if (rung >= 5) {
            CHECK(script != bench::ladder_script(rung - 1));
        }
    }
    CHECK_THROWS_AS(bench::ladder_script(bench::k_ladder_statement_rungs), std::invalid_argument);
    CHECK_THROWS_AS(bench::ladder_script(-1), std::invalid_argument);
}

TEST_CASE("bench: every rung of the intake ladder runs through pgbench on its own tables and "
          "writes what it should",
          "[store][db][bench]") {
    // bench/intake_ladder (issue 33) measures each rung against the one above; a rung that failed,
    // wrote elsewhere or wrote something else would measure nothing. The schema file checks each
    // rung's tables against the rung above's (and rung 4's against the lean ones) as it makes them.
    ScratchDatabase scratch;
    store::Db db(scratch.url());
    store::migrate(db);
    const auto tenant = make_tenant(db);
    const auto writer = make_principal(db, tenant);
    const std::string t = tenant.tenant_id;
    const auto url = scratch.url();
    exec_sql(read_file(std::string(PAYRECON_SOURCE_DIR) + "/bench/intake_lean_schema.sql"), url);
    exec_sql(read_file(std::string(PAYRECON_SOURCE_DIR) + "/bench/intake_ladder_schema.sql"), url);
    const std::string log = "/tmp/payrecon-test-ladder-" + unique_name("run");
    const int n = 5;
    for (int rung = 0; rung < bench::k_ladder_statement_rungs; ++rung) {
        INFO("rung " << rung);
        const std::string schema = "rung" + std::to_string(rung);
        const int rc = run_pgbench(
            url, bench::ladder_script(rung), n,
            {"tenant=" + t, "principal=" + writer.principal.principal_id, "run=" + schema, "n=0"},
            log, "-c search_path=" + schema + ",public");
        INFO(read_file(log));
        REQUIRE(rc == 0);
        CHECK(
            count_rows(schema + ".payments", t,
                       "state = 'pending' AND created_by = '" + writer.principal.principal_id + "'",
                       url) == n);
        // The key's 202 names the payment and carries its creation time, a constant from rung 8.
        const std::string created_at =
            rung < 8 ? "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
                     : "'2026-12-02T10:00:00.000Z'";
        CHECK(count_rows(schema + ".idempotency_records", t,
                         "response_status = 202 AND resource_id IN (SELECT payment_id FROM " +
                             schema +
                             ".payments) AND response_body::jsonb ->> 'created_at' = " + created_at,
                         url) == n);
        // The event's payload from the row (14 keys) down to rung 5, the lean literal (4) from it.
        CHECK(count_rows(schema + ".outbox", t,
                         "event_type = 'payment.created' AND aggregate_id IN (SELECT payment_id "
                         "FROM " +
                             schema +
                             ".payments) AND (SELECT count(*) FROM jsonb_object_keys(payload)) = " +
                             (rung < 5 ? "14" : "4"),
                         url) == n);
    }
    // Nothing went to payrecon's own tables: search_path sent every rung to its copies.
    CHECK(count_rows("payments", t, "", url) == 0);
    CHECK(count_rows("idempotency_records", t, "", url) == 0);
    CHECK(count_rows("outbox", t, "", url) == 0);
    for (const char* suffix : {"", ".sql"}) {
        ::unlink((log + suffix).c_str());
    }
}
