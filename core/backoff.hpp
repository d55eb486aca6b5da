#pragma once
// The one exponential backoff: `base` doubled per step, never over `cap`, optionally jittered
// into [half, all] of that. The executor's retry of a payment never sent, the reconciler's next
// look at an unknown payment, a worker's reconnect to a database that went away, and a
// statement listing's retry of a failed page all wait by it.

#include <chrono>

namespace payrecon {

struct Backoff {
    std::chrono::milliseconds base{1000};
    std::chrono::milliseconds cap{300000};

    // base * 2^step (step < 0 counts as 0), at most cap, at least 1 ms. Never overflows.
    std::chrono::milliseconds delay(int step) const;
    // delay(step) times a factor in [0.5, 1.0) that `jitter01` in [0, 1) picks: retries that
    // failed together do not come back together.
    std::chrono::milliseconds delay(int step, double jitter01) const;
};

} // namespace payrecon
