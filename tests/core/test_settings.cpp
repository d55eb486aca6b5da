#include "core/errors.hpp"
#include "core/settings.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;

TEST_CASE("settings: durations take a whole number and one unit", "[core][settings]") {
    CHECK(parse_duration("30s", "x") == std::chrono::seconds(30));
    CHECK(parse_duration("15m", "x") == std::chrono::minutes(15));
    CHECK(parse_duration("36h", "x") == std::chrono::hours(36));
    CHECK(parse_duration("7d", "x") == std::chrono::hours(168));
    CHECK(parse_duration_ms("250ms", "x") == std::chrono::milliseconds(250));
    CHECK(parse_duration_ms("2s", "x") == std::chrono::milliseconds(2000));
    for (const char* bad :
         {"", "s", "10", "1.5h", "-1h", "10 s", "10x", "h10", "99999999999999999999s"}) {
        INFO(bad);
        CHECK_THROWS_AS(parse_duration_ms(bad, "--retention"), UsageError);
    }
    CHECK_THROWS_AS(parse_duration("250ms", "--retention"), UsageError);
    try {
        parse_duration("soon", "--retention");
    } catch (const UsageError& e) {
        CHECK(std::string(e.what()).find("--retention") != std::string::npos);
    }
}

TEST_CASE("settings: UTC dates and times for statement windows", "[core][settings]") {
    CHECK(parse_utc_time("1970-01-01", "--from") == 0);
    CHECK(parse_utc_time("2026-12-01", "--from") == 1796083200);
    CHECK(parse_utc_time("2026-12-01T06:30:05Z", "--from") == 1796083200 + 6 * 3600 + 30 * 60 + 5);
    CHECK_THROWS_AS(parse_utc_time("2026-02-30", "--from"), UsageError);
    CHECK_THROWS_AS(parse_utc_time("2026-12-01T06:30:05", "--from"),
                    UsageError); // no zone: ambiguous
    CHECK_THROWS_AS(parse_utc_time("2026-12-01 06:30:05Z", "--from"), UsageError);
    CHECK_THROWS_AS(parse_utc_time("yesterday", "--from"), UsageError);
    CHECK(utc_day_start(1796083200 + 5) == 1796083200);
    CHECK(utc_day_start(1796083200) == 1796083200);
}
