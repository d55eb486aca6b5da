#include "core/backoff.hpp"

#include <catch2/catch.hpp>
#include <climits>

using namespace payrecon;
using std::chrono::milliseconds;

TEST_CASE("backoff: doubles from base per step, stops at the cap, and never overflows",
          "[core][backoff]") {
    const Backoff b{milliseconds(200), milliseconds(10000)};
    CHECK(b.delay(-3) == milliseconds(200));
    CHECK(b.delay(0) == milliseconds(200));
    CHECK(b.delay(1) == milliseconds(400));
    CHECK(b.delay(5) == milliseconds(6400));
    CHECK(b.delay(6) == milliseconds(10000)); // 12,800 capped
    CHECK(b.delay(INT_MAX) == milliseconds(10000));
    // A base over the cap is the cap; a zero base or cap still waits a millisecond.
    CHECK(Backoff{milliseconds(50000), milliseconds(10000)}.delay(0) == milliseconds(10000));
    CHECK(Backoff{milliseconds(0), milliseconds(0)}.delay(3) == milliseconds(1));
    const Backoff huge{milliseconds(LLONG_MAX / 2), milliseconds(LLONG_MAX)};
    CHECK(huge.delay(10) == milliseconds(LLONG_MAX));
}

TEST_CASE("backoff: jitter keeps the delay within half of it and all of it", "[core][backoff]") {
    const Backoff b{milliseconds(1000), milliseconds(300000)};
    CHECK(b.delay(2, 0.0) == milliseconds(2000));
    CHECK(b.delay(2, 0.5) == milliseconds(3000));
    CHECK(b.delay(2, 1.0) < milliseconds(4000));
    CHECK(b.delay(2, -1.0) == milliseconds(2000));
    for (double j = 0; j < 1.0; j += 0.01) {
        const auto d = b.delay(3, j);
        CHECK(d >= milliseconds(4000));
        CHECK(d < milliseconds(8000));
    }
}
