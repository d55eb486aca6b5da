// The command line, parsed in-process with build_app(), and the binary's exit codes.
#include "core/crash_point.hpp"
#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "services/auth.hpp"
#include "services/intake.hpp"
#include "store/migrations.hpp"
#include "tests/cli/cli_runner.hpp"
#include "tests/support/test_db.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <regex>
#include <unistd.h>

using namespace payrecon;
using namespace payrecon::testing;

TEST_CASE("cli: tenant and principal create, the key printed once and only its digest stored",
          "[cli][db]") {
    const std::string name = unique_name("cli");
    const auto tenant = nlohmann::json::parse(run_cli({"tenant", "create", name, "--json"}));
    CHECK(tenant["name"] == name);
    const std::string tenant_id = tenant["tenant_id"];

    const auto principal = nlohmann::json::parse(run_cli(
        {"principal", "create", "--tenant", name, "--name", "shop", "--role", "writer", "--json"}));
    const std::string key = principal["api_key"];
    CHECK(key.rfind("prk_", 0) == 0);
    CHECK(key.size() == 47);
    CHECK(count_rows("principals", tenant_id) == 1);
    CHECK(count_rows("principals", tenant_id,
                     "api_key_hash = sha256(convert_to('" + key + "', 'UTF8'))") == 1);
    CHECK(query_value(
              "SELECT count(*) FROM principals WHERE api_key_hash::text LIKE '%' || $1 || '%'",
              key) == "0");
    auto db = connect();
    REQUIRE(authenticate(*db, Secret(key)));

    // Listing never shows the key; its columns are named.
    const std::string listed = run_cli({"principal", "list", "--tenant", tenant_id});
    CHECK(listed.rfind("PRINCIPAL ID", 0) == 0);
    CHECK(listed.find("ROLE") != std::string::npos);
    CHECK(listed.find("shop") != std::string::npos);
    CHECK(listed.find(key) == std::string::npos);

    const std::string revoked = run_cli({"principal", "revoke", principal["principal_id"]});
    CHECK(revoked.find("revoked") != std::string::npos);
    CHECK(authenticate(*db, Secret(key)).error() == AuthFailure::revoked);
    CHECK(count_rows("audit_log", tenant_id) ==
          3); // tenant.create, principal.create, principal.revoke
}

TEST_CASE("cli: principal names that could drive a terminal are refused, and stored ones print "
          "escaped",
          "[cli][db][regression]") {
    // Principal names were stored and printed raw: "ESC[2J" cleared the operator's screen and a
    // newline forged a line of `principal list` output.
    const std::string name = unique_name("esc");
    const auto tenant = nlohmann::json::parse(run_cli({"tenant", "create", name, "--json"}));
    const std::string tenant_id = tenant["tenant_id"];
    for (const std::string& bad : {std::string("evil\x1b[2J"), std::string("two\nlines"),
                                   std::string("tab\there"), std::string("bell\x07"),
                                   std::string("csi \xc2\x9b"
                                               "31m"),
                                   std::string("rtl \xe2\x80\xae"
                                               "exe.pdf"),
                                   std::string("zero\xe2\x80\x8bwidth"), std::string(" padded"),
                                   std::string(129, 'x'), std::string("bad utf8 \xff")}) {
        INFO(printable(bad));
        CHECK_THROWS_AS(
            run_cli({"principal", "create", "--tenant", name, "--name", bad, "--role", "reader"}),
            UsageError);
    }
    CHECK(count_rows("principals", tenant_id) == 0);
    CHECK(count_rows("audit_log", tenant_id) == 1); // tenant.create only
    run_cli({"principal", "create", "--tenant", name, "--name", "Caf\xc3\xa9 shop #2", "--role",
             "reader"});
    CHECK(count_rows("principals", tenant_id) == 1);

    // A name stored before names were checked is printed escaped wherever it appears.
    const std::string evil = "evil\x1b[2J\nFAKE: all principals revoked";
    std::string evil_id;
    {
        pqxx::connection c(database_url());
        pqxx::work tx(c);
        evil_id =
            tx.exec_params1(
                  "INSERT INTO principals (tenant_id, name, role, api_key_hash) "
                  "VALUES ($1::uuid, $2, 'reader', sha256(convert_to('x' || $1::text, 'UTF8'))) "
                  "RETURNING principal_id::text",
                  tenant_id, evil)[0]
                .as<std::string>();
        tx.exec_params0(
            "INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, "
            "detail) VALUES ($1::uuid, $2, 'principal.create', 'principal', $3, "
            "jsonb_build_object('name', $2::text))",
            tenant_id, evil, evil_id);
        tx.commit();
    }
    const auto clean = [](const std::string& out) {
        INFO(printable(out));
        CHECK(out.find('\x1b') == std::string::npos);
        CHECK(out.find("\nFAKE") == std::string::npos);
    };
    const std::string listed = run_cli({"principal", "list", "--tenant", name});
    clean(listed);
    CHECK(listed.find("evil\\x1b[2J\\nFAKE: all principals revoked") != std::string::npos);
    CHECK(std::count(listed.begin(), listed.end(), '\n') == 3); // a header, one line per principal
    clean(run_cli({"audit", "--tenant", name}));
    clean(run_cli({"principal", "revoke", evil_id}));

    // Through the binary: what reaches stderr is escaped too.
    const std::string db = "PAYRECON_DATABASE_URL='" + database_url() + "'";
    const auto missing =
        run_binary(db, "principal list --tenant \"$(printf 'no\\033[2Jsuch\\nFAKE')\"");
    CHECK(missing.exit_code == 7);
    clean(missing.output);
    CHECK(missing.output.find("no\\x1b[2Jsuch\\nFAKE") != std::string::npos);
    const auto refused = run_binary(db, "principal create --tenant " + name +
                                            " --role reader --name \"$(printf 'a\\033[2Jb')\"");
    CHECK(refused.exit_code == 2);
    clean(refused.output);
}

TEST_CASE("cli: a tenant name taken twice is refused", "[cli][db]") {
    const std::string name = unique_name("dup");
    run_cli({"tenant", "create", name});
    CHECK_THROWS_AS(run_cli({"tenant", "create", name}), Refused);
    CHECK_THROWS_AS(run_cli({"tenant", "create", "bad name!"}), UsageError);
}

TEST_CASE("cli: purge refuses a retention shorter than the configured minimum",
          "[cli][db][purge]") {
    CHECK_THROWS_AS(run_cli({"purge", "--retention", "1h"}), UsageError);
    CHECK_THROWS_AS(run_cli({"purge", "--retention", "soon"}), UsageError);
    CHECK_NOTHROW(run_cli({"purge", "--retention", "48h", "--dry-run"}));
}

TEST_CASE("cli: the binary maps errors to documented exit codes and clear messages", "[cli][db]") {
    const std::string db = "PAYRECON_DATABASE_URL='" + database_url() + "'";
    SECTION("too short a retention: usage, 2") {
        const auto r = run_binary(db, "purge --retention 1h");
        CHECK(r.exit_code == 2);
        CHECK(r.output.find("shorter than the minimum") != std::string::npos);
    }
    SECTION("a password on the command line: usage, 2, and the password never echoed") {
        const auto r = run_binary("-u PAYRECON_DATABASE_URL",
                                  "--database postgresql://u:hunter2@/x tenant list");
        CHECK(r.exit_code == 2);
        CHECK(r.output.find("password") != std::string::npos);
        CHECK(r.output.find("hunter2") == std::string::npos);
    }
    SECTION("an sslpassword on the command line: usage, 2, and never echoed") {
        for (const std::string url :
             {"'postgresql:///x?sslpassword=hunter2'", "'host=/tmp dbname=x sslpassword=hunter2'",
              "'postgresql:///x?ssl%70assword=hunter2'"}) {
            INFO(url);
            const auto r =
                run_binary("-u PAYRECON_DATABASE_URL", "--database " + url + " tenant list");
            CHECK(r.exit_code == 2);
            CHECK(r.output.find("sslpassword") != std::string::npos);
            CHECK(r.output.find("hunter2") == std::string::npos);
        }
    }
    SECTION("an unreachable database: 5") {
        const auto r = run_binary(
            "PAYRECON_DATABASE_URL='postgresql:///x?host=/nonexistent-dir&connect_timeout=2'",
            "tenant list");
        CHECK(r.exit_code == 5);
        CHECK(r.output.find("cannot connect") != std::string::npos);
    }
    SECTION("an unknown principal: refused, 7") {
        const auto r = run_binary(db, "principal revoke 00000000-0000-4000-8000-000000000000");
        CHECK(r.exit_code == 7);
    }
    SECTION("a create with no credential: usage, 2") {
        const auto r = run_binary("-u PAYRECON_API_KEY " + db,
                                  "payments create --idempotency-key k --body-file /dev/null");
        CHECK(r.exit_code == 2);
        CHECK(r.output.find("PAYRECON_API_KEY") != std::string::npos);
    }
    SECTION("a mistyped command or option: usage, 2, and the nearest valid one") {
        struct Case {
            std::string args;
            std::string says;
        };
        for (const Case& c : std::vector<Case>{
                 {"revew list", "unknown command 'revew' for `payrecon`; did you mean 'review'?"},
                 {"review lst",
                  "unknown command 'lst' for `payrecon review`; did you mean 'list'?"},
                 {"review list --provder stripe",
                  "unknown option --provder for `payrecon review list`; did you mean "
                  "'--provider'?"},
                 {"nightly --no-statemnt", "did you mean '--no-statement'?"},
                 {"--databse x tenant list", "did you mean '--database'?"},
                 {"payments list --limit 3 --tenent t", "did you mean '--tenant'?"},
             }) {
            INFO(c.args);
            const auto r = run_binary(db, c.args);
            CHECK(r.exit_code == 2);
            CHECK(r.output.find(c.says) != std::string::npos);
            CHECK(r.output.find("what to do: payrecon --help") != std::string::npos);
        }
        // Nothing near: the unknown word named, no guess.
        const auto far = run_binary(db, "xyzzy");
        CHECK(far.exit_code == 2);
        CHECK(far.output.find("unknown command 'xyzzy'") != std::string::npos);
        CHECK(far.output.find("did you mean") == std::string::npos);
        // A known command with a bad value is CLI11's own message, not a guess.
        const auto bad = run_binary(db, "review list --limit zero");
        CHECK(bad.exit_code == 2);
        CHECK(bad.output.find("did you mean") == std::string::npos);
    }
    SECTION("help: 0, with the exit codes") {
        const auto r = run_binary("", "--help");
        CHECK(r.exit_code == 0);
        CHECK(r.output.find("Exit codes") != std::string::npos);
    }
}

TEST_CASE("cli: payments create runs the intake protocol with the key from the environment",
          "[cli][db][intake]") {
    const std::string name = unique_name("cli-pay");
    run_cli({"tenant", "create", name});
    const auto principal = nlohmann::json::parse(run_cli(
        {"principal", "create", "--tenant", name, "--name", "shop", "--role", "writer", "--json"}));
    const std::string tenant_id = principal["tenant_id"];
    const std::string base_env = "PAYRECON_DATABASE_URL='" + database_url() +
                                 "' PAYRECON_API_KEY='" + principal["api_key"].get<std::string>() +
                                 "'";
    // With an external database the fingerprint secret must be configured: /dev/null is no secret
    // file.
    const auto no_secret = run_binary(base_env + " PAYRECON_FINGERPRINT_SECRET_FILE=/dev/null",
                                      "payments create --idempotency-key k1 --body-file /dev/null");
    CHECK(no_secret.exit_code == 4);
    CHECK(no_secret.output.find("fingerprint secret") != std::string::npos);
    CHECK(count_rows("payments", tenant_id) == 0);

    char secret_path[] = "/tmp/payrecon-secret-XXXXXX";
    const int fd = ::mkstemp(secret_path);
    REQUIRE(fd >= 0);
    const std::string secret = std::string(44, 's') + "\n";
    REQUIRE(::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size()));
    ::close(fd);
    char body_path[] = "/tmp/payrecon-body-XXXXXX";
    const int body_fd = ::mkstemp(body_path);
    const std::string body = payment_body("cli-ref");
    REQUIRE(::write(body_fd, body.data(), body.size()) == static_cast<ssize_t>(body.size()));
    ::close(body_fd);
    const std::string env = base_env + " PAYRECON_FINGERPRINT_SECRET_FILE=" + secret_path;
    const std::string args =
        std::string("payments create --json --idempotency-key k1 --body-file ") + body_path;

    const auto first = run_binary(env, args);
    const auto second = run_binary(env, args);
    ::unlink(secret_path);
    ::unlink(body_path);
    REQUIRE(first.exit_code == 0);
    REQUIRE(second.exit_code == 0);
    const auto a = nlohmann::json::parse(first.output);
    const auto b = nlohmann::json::parse(second.output);
    CHECK(a["status"] == 202);
    CHECK(a["replayed"] == false);
    CHECK(b["status"] == 202);
    CHECK(b["replayed"] == true);
    CHECK(a["body"] == b["body"]);
    CHECK(count_rows("payments", tenant_id) == 1);
    CHECK(count_rows("idempotency_records", tenant_id) == 1);
    CHECK(count_rows("outbox", tenant_id) == 1);
}

TEST_CASE("cli: payments create refuses a card number in the key with exit 2 and stores nothing",
          "[cli][db][intake][card]") {
    // Issue 12: such a key was kept in idempotency_records.
    const std::string name = unique_name("cli-card");
    run_cli({"tenant", "create", name});
    const auto principal = nlohmann::json::parse(run_cli(
        {"principal", "create", "--tenant", name, "--name", "shop", "--role", "writer", "--json"}));
    const std::string tenant_id = principal["tenant_id"];
    char secret_path[] = "/tmp/payrecon-secret-XXXXXX";
    const int fd = ::mkstemp(secret_path);
    REQUIRE(fd >= 0);
    const std::string secret = std::string(44, 's') + "\n";
    REQUIRE(::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size()));
    ::close(fd);
    char body_path[] = "/tmp/payrecon-body-XXXXXX";
    const int body_fd = ::mkstemp(body_path);
    const std::string body = payment_body("cli-card-ref");
    REQUIRE(::write(body_fd, body.data(), body.size()) == static_cast<ssize_t>(body.size()));
    ::close(body_fd);
    const std::string env = "PAYRECON_DATABASE_URL='" + database_url() + "' PAYRECON_API_KEY='" +
                            principal["api_key"].get<std::string>() +
                            "' PAYRECON_FINGERPRINT_SECRET_FILE=" + secret_path;

    const auto r = run_binary(env, std::string("payments create --json --idempotency-key ") +
                                       "4242.4242.4242.4242 --body-file " + body_path);
    ::unlink(secret_path);
    ::unlink(body_path);
    CHECK(r.exit_code == 2);
    const auto j = nlohmann::json::parse(r.output);
    CHECK(j["status"] == 422);
    CHECK(j["body"]["type"] == "card_data_refused");
    CHECK(j["body"]["field"] == "Idempotency-Key");
    CHECK(r.output.find("4242") == std::string::npos);
    CHECK(count_rows("payments", tenant_id) == 0);
    CHECK(count_rows("idempotency_records", tenant_id) == 0);
    CHECK(query_value("SELECT count(*) FROM idempotency_records WHERE idempotency_key = $1",
                      "4242.4242.4242.4242") == "0");
}

namespace {

// A file of its own under /tmp holding `text`, removed on destruction.
struct TempFile {
    explicit TempFile(const std::string& text) {
        char path_template[] = "/tmp/payrecon-cli-XXXXXX";
        const int fd = ::mkstemp(path_template);
        REQUIRE(fd >= 0);
        const bool written =
            ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
        ::close(fd);
        path = path_template;
        REQUIRE(written);
    }
    ~TempFile() { ::unlink(path.c_str()); }
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
    std::string path;
};

} // namespace

TEST_CASE("cli: global options work after the subcommand too, every help lists them, --version",
          "[cli][db][regression]") {
    // The README writes `payrecon worker --config payrecon.json`: it used to exit 2.
    const std::string url = "'" + database_url() + "'";
    const auto listed = run_binary("-u PAYRECON_DATABASE_URL", "tenant list --database " + url);
    CHECK(listed.exit_code == 0);
    CHECK(listed.output.rfind("TENANT ID", 0) == 0);
    const auto nested = run_binary("-u PAYRECON_DATABASE_URL",
                                   "review list --database " + url + " --operator night-shift");
    CHECK(nested.exit_code == 0);
    // The option reached the parser: the missing file is a configuration error (4), not usage (2).
    const auto worker = run_binary("-u PAYRECON_CONFIG PAYRECON_DATABASE_URL=" + url,
                                   "worker --once --config /nonexistent/payrecon.json");
    CHECK(worker.exit_code == 4);
    CHECK(worker.output.find("/nonexistent/payrecon.json") != std::string::npos);
    const auto before = run_binary("-u PAYRECON_CONFIG PAYRECON_DATABASE_URL=" + url,
                                   "--config /nonexistent/payrecon.json worker --once");
    CHECK(before.exit_code == 4);
    for (const std::string help :
         {"worker --help", "review resolve --help", "db start --help", "nightly --help"}) {
        INFO(help);
        const auto r = run_binary("", help);
        CHECK(r.exit_code == 0);
        CHECK(r.output.find("Global options (before or after the subcommand)") !=
              std::string::npos);
        CHECK(r.output.find("--config FILE") != std::string::npos);
        CHECK(r.output.find("Exit codes") != std::string::npos);
    }
    // The version, the commit the binary was built from (issue 34: an operator says which build
    // runs) and the schema it migrates to.
    const auto version = run_binary("", "--version");
    CHECK(version.exit_code == 0);
    INFO(version.output);
    CHECK(std::regex_search(version.output,
                            std::regex("^payrecon [0-9]+\\.[0-9]+\\.[0-9]+ \\(commit "
                                       "([0-9a-f]{12}(-dirty)?|unknown), schema ([0-9]+)\\)\n$")));
    CHECK(version.output.find("schema " + std::to_string(store::latest_known_version()) + ")") !=
          std::string::npos);
    if (::access((std::string(PAYRECON_SOURCE_DIR) + "/.git").c_str(), F_OK) == 0) {
        CHECK(version.output.find("commit unknown") == std::string::npos); // built from a checkout
    }
    // An option no command knows is still a usage error.
    CHECK(run_binary("", "worker --colour red").exit_code == 2);
}

TEST_CASE("cli: payments create with a provider configuration refuses a provider it does not know",
          "[cli][db][intake][regression]") {
    const std::string name = unique_name("cli-prov");
    run_cli({"tenant", "create", name});
    const auto principal = nlohmann::json::parse(run_cli(
        {"principal", "create", "--tenant", name, "--name", "shop", "--role", "writer", "--json"}));
    const std::string tenant_id = principal["tenant_id"];
    const TempFile secret(std::string(44, 's') + "\n");
    // The API key variable is not set: payments create reads provider names only.
    const TempFile config(
        R"({"providers": {"stripe": {"kind": "stripe", "base_url": "https://api.stripe.com",
        "api_key_env": "PAYRECON_TEST_UNSET_KEY"}}})");
    std::string body = payment_body("cli-prov-ref");
    body.replace(body.find("\"stripe\""), 8, "\"paypal\"");
    const TempFile paypal(body);
    const std::string env = "-u PAYRECON_TEST_UNSET_KEY PAYRECON_DATABASE_URL='" + database_url() +
                            "' PAYRECON_API_KEY='" + principal["api_key"].get<std::string>() +
                            "' PAYRECON_FINGERPRINT_SECRET_FILE=" + secret.path +
                            " PAYRECON_CONFIG=" + config.path;
    const auto r =
        run_binary(env, "payments create --json --idempotency-key k1 --body-file " + paypal.path);
    CHECK(r.exit_code == 2);
    const auto j = nlohmann::json::parse(r.output);
    CHECK(j["status"] == 422);
    CHECK(j["body"]["field"] == "provider");
    CHECK(count_rows("payments", tenant_id) == 0);
    CHECK(count_rows("idempotency_records", tenant_id) == 0);
    CHECK(count_rows("outbox", tenant_id) == 0);

    const TempFile stripe(payment_body("cli-prov-ref"));
    const auto ok =
        run_binary(env, "payments create --json --idempotency-key k1 --body-file " + stripe.path);
    CHECK(ok.exit_code == 0);
    CHECK(count_rows("payments", tenant_id) == 1);
    // A configuration that cannot be read is a configuration error, not a silent pass.
    const auto bad = run_binary(env + " PAYRECON_CONFIG=/nonexistent/payrecon.json",
                                "payments create --idempotency-key k2 --body-file " + stripe.path);
    CHECK(bad.exit_code == 4);
}

TEST_CASE("cli: a bad PAYRECON_OPERATOR or --operator is a clear error, not a CHECK failure",
          "[cli][db][regression]") {
    // A 200-character PAYRECON_OPERATOR reached the audit log's CHECK and failed the command with
    // PostgreSQL's raw "violates check constraint" (exit 1); control characters went in as they
    // were.
    const std::string db = "PAYRECON_DATABASE_URL='" + database_url() + "'";
    const std::string name = unique_name("op");
    const auto tenants = [&] {
        return query_value("SELECT count(*) FROM tenants WHERE name = $1", name);
    };
    for (const std::string& bad :
         {std::string(200, 'o'), std::string("\"$(printf 'eve\\033[2J')\""),
          std::string("\"$(printf 'two\\nlines')\"")}) {
        INFO(bad);
        const auto r = run_binary(db + " PAYRECON_OPERATOR=" + bad, "tenant create " + name);
        CHECK(r.exit_code == 4);
        CHECK(r.output.find("PAYRECON_OPERATOR") != std::string::npos);
        CHECK(r.output.find("check constraint") == std::string::npos);
        CHECK(r.output.find('\x1b') == std::string::npos);
        CHECK(tenants() == "0");
    }
    const auto flag =
        run_binary(db, "--operator " + std::string(101, 'o') + " tenant create " + name);
    CHECK(flag.exit_code == 2);
    CHECK(flag.output.find("--operator") != std::string::npos);
    CHECK(tenants() == "0");

    const auto ok = run_binary(db + " PAYRECON_OPERATOR='Alice Ops'", "tenant create " + name);
    CHECK(ok.exit_code == 0);
    CHECK(tenants() == "1");
    CHECK(query_value(
              "SELECT actor FROM audit_log a JOIN tenants t USING (tenant_id) WHERE t.name = $1",
              name) == "Alice Ops");
}

TEST_CASE(
    "cli: purge says what it did and leaves it in the audit log, and --dry-run records nothing",
    "[cli][db][purge][regression]") {
    // A database of its own: a purge run is global.
    ScratchDatabase scratch;
    store::Db db(scratch.url());
    store::migrate(db);
    const auto tenant = make_tenant(db);
    const auto writer = make_principal(db, tenant);
    IntakeService intake(db, test_keys());
    for (const char* key : {"k-1", "k-2"}) {
        REQUIRE(
            intake
                .create_payment(writer.principal, key, payment_body(std::string("ref-") + key), "")
                .status == 202);
    }
    pqxx::connection c(scratch.url());
    const auto sql = [&](const std::string& text) {
        pqxx::work tx(c);
        const pqxx::result r = tx.exec(text);
        tx.commit();
        return r.empty() || r[0][0].is_null() ? std::string() : r[0][0].as<std::string>();
    };
    sql("UPDATE idempotency_records SET created_at = now() - interval '3 hours'");
    sql("UPDATE payments SET state = 'failed'");
    const std::string audit_rows = "SELECT count(*) FROM audit_log";
    const std::string before = sql(audit_rows);
    const std::string env = "PAYRECON_DATABASE_URL='" + scratch.url() +
                            "' PAYRECON_OPERATOR=alice PAYRECON_MIN_IDEMPOTENCY_RETENTION=1h";
    const auto json_of = [](const std::string& output) { // stderr comes first, then the JSON
        return nlohmann::json::parse(output.substr(output.find('{')));
    };

    const auto dry = run_binary(env, "purge --retention 2h --dry-run --json");
    REQUIRE(dry.exit_code == 0);
    CHECK(json_of(dry.output)["would_delete"] == 2);
    CHECK(json_of(dry.output)["run_id"].is_null());
    CHECK(sql(audit_rows) == before);
    CHECK(sql("SELECT count(*) FROM idempotency_records") == "2");

    const auto run = run_binary(env, "purge --retention 2h --json");
    REQUIRE(run.exit_code == 0);
    CHECK(run.output.find("minimum retention is lowered") != std::string::npos);
    const auto j = json_of(run.output);
    CHECK(j["deleted"] == 2);
    CHECK(j["tenants"] == 1);
    CHECK(j["operator"] == "alice");
    CHECK(j["minimum_retention_s"] == 3600);
    CHECK(j["minimum_lowered"] == true);
    CHECK(j["retention_s"] == 7200);
    const std::string run_id = j["run_id"];
    CHECK(sql("SELECT count(*) FROM idempotency_records") == "0");
    CHECK(sql("SELECT count(*) FROM audit_log WHERE subject_id = '" + run_id +
              "' AND actor = 'alice'") == "2");
    CHECK(sql("SELECT detail->>'deleted' FROM audit_log WHERE action = 'idempotency.purge_run' AND "
              "subject_id = '" +
              run_id + "'") == "2");
    CHECK(std::stoll(sql(audit_rows)) == std::stoll(before) + 2);

    // The text output says the same, and `audit` shows the run as the deployment's.
    const auto text = run_binary(env, "purge --retention 2h");
    CHECK(text.output.find("deleted 0 idempotency record(s)") != std::string::npos);
    CHECK(text.output.find("minimum 3600s (lowered); operator alice") != std::string::npos);
    CHECK(text.output.find("recorded in the audit log as purge run") != std::string::npos);
    const auto shown = run_binary(env, "audit");
    CHECK(shown.output.find("(all tenants)") != std::string::npos);
    CHECK(shown.output.find("idempotency.purge_run") != std::string::npos);
}

TEST_CASE("cli: payments create after a lost COMMIT exits 1 and says the outcome is unknown, not 5",
          "[cli][db][intake][fault][regression]") {
    // Exit 5 means "the database cannot be reached; nothing was changed", which a lost COMMIT
    // cannot promise: the payment may have been stored.
    const std::string name = unique_name("cli-doubt");
    run_cli({"tenant", "create", name});
    const auto principal = nlohmann::json::parse(run_cli(
        {"principal", "create", "--tenant", name, "--name", "shop", "--role", "writer", "--json"}));
    const std::string tenant_id = principal["tenant_id"];
    const TempFile secret(std::string(44, 's') + "\n");
    const TempFile body(payment_body("cli-doubt-ref"));
    ::setenv("PAYRECON_API_KEY", principal["api_key"].get<std::string>().c_str(), 1);
    ::setenv("PAYRECON_FINGERPRINT_SECRET_FILE", secret.path.c_str(), 1);
    // Lost on the statement's run and on its run again on a new connection.
    std::function<void()> lose_again = [&] {
        arm_crash_point("intake.after_commit", lose_again);
        throw pqxx::in_doubt_error("WARNING: Connection lost while committing transaction");
    };
    arm_crash_point("intake.after_commit", lose_again);
    int exit_code = -1;
    const std::string out = run_cli(
        {"payments", "create", "--json", "--idempotency-key", "k1", "--body-file", body.path},
        &exit_code);
    arm_crash_point("");
    const auto retry = nlohmann::json::parse(run_cli(
        {"payments", "create", "--json", "--idempotency-key", "k1", "--body-file", body.path}));
    ::unsetenv("PAYRECON_API_KEY");
    ::unsetenv("PAYRECON_FINGERPRINT_SECRET_FILE");
    CHECK(exit_code == 1);
    const auto j = nlohmann::json::parse(out);
    CHECK(j["status"] == 503);
    CHECK(j["body"].value("detail", "").find("outcome is unknown") != std::string::npos);
    CHECK(count_rows("payments", tenant_id) == 1); // it did commit
    CHECK(retry["status"] == 202);
    CHECK(retry["replayed"] == true);
    CHECK(count_rows("payments", tenant_id) == 1);
}
