// api::Allowance: what one holder may have in hand (issue 36 item 6), without a server.
#include "api/allowance.hpp"

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

using payrecon::api::Allowance;
using payrecon::api::AllowanceLimits;
using payrecon::api::AllowanceUse;

TEST_CASE("allowance: a holder at its request bound is refused until one of its holds ends, and "
          "another holder is not",
          "[api][allowance]") {
    Allowance a(AllowanceLimits{2, 1000, 0});
    auto first = a.admit("key-a");
    auto second = a.admit("key-a");
    REQUIRE(first);
    REQUIRE(second);
    AllowanceUse use;
    CHECK_FALSE(a.admit("key-a", &use));
    CHECK(use.requests == 2);
    CHECK(a.admit("key-b")); // its own count (the hold ends at once)
    second.reset();
    CHECK(a.admit("key-a"));
    CHECK(a.use("key-a").requests == 1);
}

TEST_CASE("allowance: unsent bytes count from the charge until the hold ends, per holder and in "
          "all",
          "[api][allowance]") {
    Allowance a(AllowanceLimits{100, 1000, 1500});
    auto big = a.admit("key-a");
    big->charge(600);
    big->charge(400); // 1000: at the holder's bound
    AllowanceUse use;
    CHECK_FALSE(a.admit("key-a", &use));
    CHECK(use.unsent_bytes == 1000);
    auto other = a.admit("key-b");
    REQUIRE(other);
    other->charge(500); // 1500 in all: at the total bound, for every holder
    CHECK_FALSE(a.admit("key-c"));
    CHECK(a.total().unsent_bytes == 1500);
    big.reset();
    CHECK(a.total().unsent_bytes == 500);
    CHECK(a.total().requests == 1);
    CHECK(a.admit("key-c"));
    other.reset();
    CHECK(a.total().unsent_bytes == 0);
    CHECK(a.total().requests == 0);
    CHECK(a.use("key-b").requests == 0);
}

TEST_CASE("allowance: holds taken and ended on many threads leave nothing counted",
          "[api][allowance]") {
    Allowance a(AllowanceLimits{1'000'000, 1u << 30u, 0});
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&a, t] {
            for (int i = 0; i < 2000; ++i) {
                auto h = a.admit("key-" + std::to_string((t + i) % 3));
                if (h) {
                    h->charge(10);
                }
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    CHECK(a.total().requests == 0);
    CHECK(a.total().unsent_bytes == 0);
}
