// The statement diff's bulk reads (store/copy_out.hpp): a binary COPY on a connection of its
// own in a snapshot exported by another transaction, and its rows written down and read back as
// the diff's sort keeps them. Against the real test PostgreSQL.
#include "store/copy_out.hpp"
#include "store/pq.hpp"
#include "tests/support/test_db.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// A transaction whose snapshot the streams import; it stays open while they read.
struct Exporter {
    pqxx::connection conn{database_url()};
    pqxx::work tx{conn};
    std::string snapshot = tx.exec1("SELECT pg_export_snapshot()")[0].as<std::string>();
};

} // namespace

TEST_CASE("copy_out: a binary COPY reads text, NULL, bigint and timestamptz columns as sent",
          "[store][db][copy_out]") {
    Exporter e;
    store::CopyOutStream s(
        database_url(), e.snapshot,
        "SELECT * FROM (VALUES "
        "(1::bigint, E'tab\\there, newline\\n, back\\\\slash, \"quote\", {brace}'::text, "
        "NULL::text, "
        " (-42)::bigint, '0123abcd-4567-89ef-0123-456789abcdef'::uuid, "
        " '2026-01-01T00:00:00.999999Z'::timestamptz),"
        "(2, ''::text, 'x'::text, 9223372036854775807::bigint, gen_random_uuid(), "
        " '1999-12-31T23:59:59.5Z'::timestamptz),"
        "(3, 'ü€'::text, NULL, (-9223372036854775807 - 1)::bigint, gen_random_uuid(), "
        " 'infinity'::timestamptz)"
        ") AS v(n, a, b, c, d, t) ORDER BY n",
        "the test rows");
    // Each row as the stream reads it, then as the diff's sort keeps it: its first field and the
    // rest as sent (tail), read back with CopyRow::assign.
    const std::string what = "the test rows";
    std::vector<std::pair<std::string, std::string>> kept;
    const auto check_rows = [](const auto& next, const auto& row) {
        REQUIRE(next());
        REQUIRE(row().fields() == 6);
        CHECK(row().text(0).size() == 8);
        CHECK(row().int8(0) == 1);
        CHECK(row().text(1) == "tab\there, newline\n, back\\slash, \"quote\", {brace}");
        CHECK(row().is_null(2));
        CHECK(row().int8(3) == -42);
        CHECK(row().unix_seconds(5) == 1767225600);         // rounded down
        CHECK_THROWS_AS(row().int8(2), std::runtime_error); // NULL
        REQUIRE(next());
        CHECK(row().text(1).empty());
        CHECK_FALSE(row().is_null(1));
        CHECK(row().text(2) == "x");
        CHECK(row().int8(3) == 9223372036854775807LL);
        CHECK(row().unix_seconds(5) == 946684799); // before 2000: still rounded down
        REQUIRE(next());
        CHECK(row().text(1) == "ü€");
        CHECK(row().is_null(2));
        CHECK(row().int8(3) == std::numeric_limits<long long>::min());
        CHECK(row().unix_seconds(5) == std::numeric_limits<long long>::max());
        CHECK_FALSE(next());
    };
    s.start();
    check_rows(
        [&] {
            if (!s.next()) {
                return false;
            }
            kept.emplace_back(std::string(s.row().text(0)), std::string(s.row().tail()));
            return true;
        },
        [&]() -> const store::CopyRow& { return s.row(); });
    CHECK_FALSE(s.next());
    std::size_t i = 0;
    store::CopyRow again(&what);
    check_rows(
        [&] {
            if (i == kept.size()) {
                return false;
            }
            again.assign(kept[i].first, kept[i].second);
            ++i;
            return true;
        },
        [&]() -> const store::CopyRow& { return again; });
}

TEST_CASE("copy_out: streams share the exporter's snapshot: rows committed after it are not seen",
          "[store][db][copy_out]") {
    std::string table = unique_name("copy_snapshot");
    std::replace(table.begin(), table.end(), '-', '_');
    exec_sql("CREATE TABLE " + table + " (n bigint)");
    exec_sql("INSERT INTO " + table + " SELECT generate_series(1, 3)");
    Exporter e;
    exec_sql("INSERT INTO " + table +
             " SELECT generate_series(4, 100000)"); // committed after the export
    std::vector<long long> seen;
    {
        store::CopyOutStream s(database_url(), e.snapshot, "SELECT n FROM " + table + " ORDER BY n",
                               "the table");
        s.start();
        while (s.next()) {
            seen.push_back(s.int8(0));
        }
    } // its read-only transaction ends with it
    CHECK(seen == std::vector<long long>{1, 2, 3});
    e.tx.abort();
    exec_sql("DROP TABLE " + table);
}

TEST_CASE("copy_out: a snapshot that does not exist, a query the database refuses, an error in the "
          "middle of the rows: each a clear error, never a short stream taken for the whole",
          "[store][db][copy_out]") {
    SECTION("an unknown snapshot") {
        store::CopyOutStream s(database_url(), "00000003-0000001B-1", "SELECT 1::bigint",
                               "the rows");
        CHECK_THROWS_WITH(s.start(), Catch::Contains("reading the rows failed") &&
                                         Catch::Contains("snapshot"));
    }
    SECTION("not a snapshot identifier at all") {
        CHECK_THROWS_AS(store::CopyOutStream(database_url(), "x'; DROP TABLE payments; --",
                                             "SELECT 1", "the rows"),
                        std::invalid_argument);
    }
    Exporter e;
    SECTION("a query the database refuses") {
        store::CopyOutStream s(database_url(), e.snapshot, "SELECT no_such_column FROM payments",
                               "our payments");
        CHECK_THROWS_WITH(s.start(),
                          Catch::Contains("reading our payments failed (SQLSTATE 42703)"));
    }
    SECTION("an error after some rows were sent") {
        store::CopyOutStream s(
            database_url(), e.snapshot,
            "SELECT (100000 / (50000 - n))::bigint FROM generate_series(1, 60000) AS n",
            "the rows");
        s.start();
        long long rows = 0;
        try {
            while (s.next()) {
                ++rows;
            }
            FAIL("the stream ended without its error");
        } catch (const std::runtime_error& error) {
            CHECK(std::string(error.what()).find("22012") != std::string::npos); // division by zero
        }
        CHECK(rows < 50000);
    }
}

TEST_CASE("copy_out: a cancelled stream stops with an error, before or while it reads",
          "[store][db][copy_out]") {
    Exporter e;
    SECTION("before start") {
        store::CopyOutStream s(database_url(), e.snapshot, "SELECT 1::bigint", "the rows");
        s.cancel();
        CHECK_THROWS_AS(s.start(), store::TransientStoreError);
    }
    SECTION("while the server is still producing rows") {
        store::CopyOutStream s(
            database_url(), e.snapshot,
            "SELECT (a * 10000 + b)::bigint FROM generate_series(0, 9999) AS a, "
            "generate_series(0, 9999) AS b", // streamed: 10^8 rows, never all made
            "the rows");
        s.start();
        REQUIRE(s.next());
        s.cancel();
        long long rows = 0;
        CHECK_THROWS_WITH(
            [&] {
                while (s.next()) {
                    ++rows;
                }
            }(),
            Catch::Contains("57014") || Catch::Contains("cancel"));
        CHECK(rows < 100000000 - 1);
    }
}
