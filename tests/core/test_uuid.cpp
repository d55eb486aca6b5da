#include "core/uuid.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <vector>

using namespace payrecon;
using namespace std::chrono;

TEST_CASE("uuid: a version 7 ID carries its millisecond, version 7 and the RFC 9562 variant",
          "[core][uuid]") {
    const system_clock::time_point at{milliseconds(1'767'225'600'123)}; // 2026-01-01T00:00:00.123Z
    const std::string id = uuid_v7(at);
    REQUIRE(id.size() == 36);
    CHECK(id.substr(0, 13) == "019b76da-a87b"); // 0x019b76daa87b = 1767225600123
    CHECK(id[14] == '7');
    CHECK(std::string("89ab").find(id[19]) != std::string::npos);
    CHECK(uuid_v7_unix_ms(id) == 1'767'225'600'123LL);
    CHECK(id.find_first_not_of("0123456789abcdef-") == std::string::npos);
    // A version 4 UUID, upper case and non-UUIDs are not version 7 IDs.
    CHECK_FALSE(uuid_v7_unix_ms("0b6f4f5e-6a47-4c2b-9c1e-2f5a1d3e4b6c").has_value());
    CHECK_FALSE(uuid_v7_unix_ms("019B7722-AC7B-7000-8000-000000000000").has_value());
    CHECK_FALSE(uuid_v7_unix_ms("019b7722-ac7b-7000-c000-000000000000").has_value());
    CHECK_FALSE(uuid_v7_unix_ms("not a uuid").has_value());
}

TEST_CASE("uuid: IDs made later sort after earlier ones, as text and as PostgreSQL compares them",
          "[core][uuid]") {
    // One ID every 300 ns for 10 ms (past a millisecond boundary 10 times), and 1,000 from the
    // clock.
    std::vector<std::string> made;
    const system_clock::time_point start{milliseconds(1'767'225'600'999)};
    for (int i = 0; i < 33'000; ++i) {
        made.push_back(
            uuid_v7(start + duration_cast<system_clock::duration>(nanoseconds(300LL * i))));
    }
    CHECK(std::is_sorted(made.begin(), made.end()));
    CHECK(std::set<std::string>(made.begin(), made.end()).size() == made.size());
    std::vector<std::string> now;
    for (int i = 0; i < 1'000; ++i) {
        now.push_back(uuid_v7());
    }
    // The clock may repeat a value; IDs of one tick differ in their random bits only.
    for (std::size_t i = 1; i < now.size(); ++i) {
        INFO(now[i - 1] << " then " << now[i]);
        CHECK(*uuid_v7_unix_ms(now[i - 1]) <= *uuid_v7_unix_ms(now[i]));
    }
    CHECK(std::set<std::string>(now.begin(), now.end()).size() == now.size());
}

TEST_CASE("uuid: the 62 random bits differ between IDs of the same instant", "[core][uuid]") {
    const system_clock::time_point at{milliseconds(1'767'225'600'000)};
    std::set<std::string> ids;
    for (int i = 0; i < 1'000; ++i) {
        ids.insert(uuid_v7(at));
    }
    CHECK(ids.size() == 1'000);
    for (const auto& id : ids) {
        CHECK(id.substr(0, 19) == ids.begin()->substr(0, 19)); // time, version, fraction: equal
    }
}
