#pragma once
// The one wait for a condition in the tests: poll until it holds or a deadline passes, and let the
// caller assert on the answer (REQUIRE(wait_until(...))), so that a wait never falls through
// silently.

#include <chrono>
#include <thread>

namespace payrecon::testing {

// Polls `done()` every `every` until it returns true or `deadline` passes (10 s unless given);
// returns the last result. done() runs once per poll: a probe that has side effects (a connection)
// is not run again after it succeeded.
template <typename F>
bool wait_until(F done, std::chrono::milliseconds deadline = std::chrono::seconds(10),
                std::chrono::milliseconds every = std::chrono::milliseconds(5)) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    for (;;) {
        if (done()) {
            return true;
        }
        if (std::chrono::steady_clock::now() >= until) {
            return false;
        }
        std::this_thread::sleep_for(every);
    }
}

} // namespace payrecon::testing
