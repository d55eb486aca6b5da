#include "core/errors.hpp"
#include "store/db.hpp"
#include "store/migrations.hpp"
#include "tests/support/test_db.hpp"

#include <catch2/catch.hpp>
#include <pqxx/pqxx>
#include <thread>
#include <vector>

using namespace payrecon;
using namespace payrecon::testing;

namespace {
long long count_in(const std::string& url, const std::string& sql) {
    pqxx::connection c(url);
    pqxx::read_transaction tx(c);
    return tx.exec1(sql)[0].as<long long>();
}
} // namespace

TEST_CASE("migrations: a fresh database gets every migration once, and migrate is idempotent",
          "[store][db][migrations]") {
    ScratchDatabase scratch;
    store::Db db(scratch.url());
    CHECK(store::schema_version(db) == 0);
    CHECK_THROWS_AS(store::require_current_schema(db), SchemaMismatch);
    const auto applied = store::migrate(db);
    CHECK(applied.size() == store::embedded_migrations().size());
    CHECK(store::schema_version(db) == store::latest_known_version());
    CHECK_NOTHROW(store::require_current_schema(db));
    CHECK(store::migrate(db).empty());
    CHECK(count_in(scratch.url(), "SELECT count(*) FROM schema_migrations") ==
          static_cast<long long>(store::embedded_migrations().size()));
    // Every table the design names exists, keyed by tenant first.
    for (const char* table : {"tenants", "principals", "idempotency_records", "payments",
                              "payment_attempts", "outbox", "audit_log"}) {
        INFO(table);
        CHECK(count_in(scratch.url(),
                       std::string("SELECT count(*) FROM pg_index i JOIN pg_attribute a ON "
                                   "a.attrelid = i.indrelid AND a.attnum = i.indkey[0] WHERE "
                                   "i.indisprimary AND i.indrelid = '") +
                           table + "'::regclass AND a.attname = 'tenant_id'") == 1);
    }
}

TEST_CASE("migrations: many processes migrating at once apply each migration once",
          "[store][db][migrations][concurrency]") {
    ScratchDatabase scratch;
    std::vector<std::thread> threads;
    std::vector<std::string> errors(8);
    for (std::size_t i = 0; i < errors.size(); ++i) {
        threads.emplace_back([&, i] {
            try {
                store::Db db(scratch.url());
                store::migrate(db);
            } catch (const std::exception& e) {
                errors[i] = e.what();
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    for (const auto& e : errors) {
        CHECK(e.empty());
    }
    CHECK(count_in(scratch.url(), "SELECT count(*) FROM schema_migrations") ==
          static_cast<long long>(store::embedded_migrations().size()));
}

TEST_CASE("migrations: a database with a newer schema is refused, and left alone",
          "[store][db][migrations]") {
    ScratchDatabase scratch;
    store::Db db(scratch.url());
    store::migrate(db);
    {
        pqxx::connection c(scratch.url());
        pqxx::work tx(c);
        tx.exec(
            "INSERT INTO schema_migrations (version, name, checksum) VALUES (9999, 'future', 'x')");
        tx.commit();
    }
    CHECK_THROWS_AS(store::require_current_schema(db), SchemaMismatch);
    CHECK_THROWS_AS(store::migrate(db), SchemaMismatch);
    try {
        store::migrate(db);
    } catch (const SchemaMismatch& e) {
        CHECK(std::string(e.what()).find("newer") != std::string::npos);
        CHECK(e.code() == ExitCode::schema_mismatch);
    }
    CHECK(count_in(scratch.url(), "SELECT count(*) FROM schema_migrations") ==
          static_cast<long long>(store::embedded_migrations().size()) + 1);
}

TEST_CASE("migrations: an applied migration whose SQL was edited is refused",
          "[store][db][migrations]") {
    ScratchDatabase scratch;
    store::Db db(scratch.url());
    store::migrate(db);
    {
        pqxx::connection c(scratch.url());
        pqxx::work tx(c);
        tx.exec("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1");
        tx.commit();
    }
    CHECK_THROWS_AS(store::migrate(db), SchemaMismatch);
}

TEST_CASE("migrations: the audit log is append-only", "[store][db][migrations]") {
    ScratchDatabase scratch;
    store::Db db(scratch.url());
    store::migrate(db);
    pqxx::connection c(scratch.url());
    {
        pqxx::work tx(c);
        tx.exec("INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id) "
                "VALUES (gen_random_uuid(), 'alice', 'x', 'y', 'z')");
        tx.commit();
    }
    {
        pqxx::work tx(c);
        CHECK_THROWS_AS(tx.exec("UPDATE audit_log SET actor = 'mallory'"), pqxx::sql_error);
    }
    {
        pqxx::work tx(c);
        CHECK_THROWS_AS(tx.exec("DELETE FROM audit_log"), pqxx::sql_error);
    }
    CHECK(count_in(scratch.url(), "SELECT count(*) FROM audit_log WHERE actor = 'alice'") == 1);
}

TEST_CASE(
    "db: a database that cannot be reached is a clear DatabaseUnavailable without the password",
    "[store][db]") {
    try {
        store::Db db(
            "postgresql://someone:hunter2@/nowhere?host=/nonexistent-socket-dir&connect_timeout=2");
        FAIL("connected to nothing");
    } catch (const DatabaseUnavailable& e) {
        const std::string what = e.what();
        CHECK(what.find("hunter2") == std::string::npos);
        CHECK(what.find("***") != std::string::npos);
        CHECK(e.code() == ExitCode::database_unavailable);
        CHECK_FALSE(e.hint().empty());
    }
}

TEST_CASE("db: redact_url hides passwords in every URL form", "[store]") {
    CHECK(store::redact_url("postgresql://u:secret@host:5432/db") ==
          "postgresql://u:***@host:5432/db");
    CHECK(store::redact_url("host=h password=secret dbname=d") == "host=h password=*** dbname=d");
    CHECK(store::redact_url("postgresql:///db?host=/tmp&password=secret") ==
          "postgresql:///db?host=/tmp&password=***");
    CHECK(store::redact_url("postgresql:///db?host=%2Ftmp") == "postgresql:///db?host=%2Ftmp");
}

TEST_CASE("db: sslpassword and every other libpq secret are hidden like password",
          "[store][regression]") {
    // sslpassword (the client key's passphrase) was printed as it was, and was let through
    // --database, where it shows in the process list.
    CHECK(store::redact_url("host=h sslpassword=secret dbname=d") ==
          "host=h sslpassword=*** dbname=d");
    CHECK(store::redact_url("sslpassword='a b\\' c' host=h") == "sslpassword=*** host=h");
    CHECK(store::redact_url("postgresql:///db?host=/tmp&sslpassword=secret") ==
          "postgresql:///db?host=/tmp&sslpassword=***");
    CHECK(store::redact_url("postgresql:///db?sslpassword=secret&host=/tmp") ==
          "postgresql:///db?sslpassword=***&host=/tmp");
    // libpq percent-decodes parameter names too.
    CHECK(store::redact_url("postgresql:///db?ssl%70assword=secret") ==
          "postgresql:///db?ssl%70assword=***");
    // A password holding '?' or '/'... the user information runs to the '@'.
    CHECK(store::redact_url("postgresql://u:pa?ss@host/db") == "postgresql://u:***@host/db");
    CHECK(store::redact_url("postgres://u:p%40ss@h1,h2:5433/db?sslpassword=x") ==
          "postgres://u:***@h1,h2:5433/db?sslpassword=***");
    // Names that merely end like a secret are not secrets.
    CHECK(store::redact_url("host=h mypassword_file=x") == "host=h mypassword_file=x");
    CHECK(store::redact_url("postgresql:///db?passfile=/home/u/.pgpass") ==
          "postgresql:///db?passfile=/home/u/.pgpass");

    for (const char* url :
         {"postgresql://u:hunter2@/x", "host=h password=hunter2",
          "postgresql:///x?sslpassword=hunter2", "sslpassword=hunter2 dbname=x",
          "postgresql:///x?ssl%70assword=hunter2", "postgresql://u:hun?ter2@h/x"}) {
        INFO(url);
        CHECK(store::url_secret_names(url).size() == 1);
        CHECK(store::redact_url(url).find("hunter2") == std::string::npos);
    }
    CHECK(store::url_secret_names("postgresql://u:a@h/x?sslpassword=b") ==
          std::vector<std::string>{"password", "sslpassword"});
    for (const char* url : {"postgresql:///x?host=/tmp", "host=h dbname=x user=u",
                            "postgresql://u@h/x", "postgresql:///x?passfile=/p&sslkey=/k"}) {
        INFO(url);
        CHECK(store::url_secret_names(url).empty());
    }
}
