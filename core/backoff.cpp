#include "core/backoff.hpp"

#include <algorithm>

namespace payrecon {

std::chrono::milliseconds Backoff::delay(int step) const {
    const long long cap_ms = std::max<long long>(1, cap.count());
    const long long base_ms = std::clamp<long long>(base.count(), 1, cap_ms);
    long long d = base_ms;
    // Doubling stops at the cap, so the product never overflows whatever the step.
    for (int i = 0; i < step && d < cap_ms; ++i) {
        d = d > cap_ms / 2 ? cap_ms : d * 2;
    }
    return std::chrono::milliseconds(std::min(d, cap_ms));
}

std::chrono::milliseconds Backoff::delay(int step, double jitter01) const {
    const double factor = 0.5 + 0.5 * std::clamp(jitter01, 0.0, 0.999999);
    return std::chrono::milliseconds(std::max<long long>(
        1, static_cast<long long>(static_cast<double>(delay(step).count()) * factor)));
}

} // namespace payrecon
