#pragma once
// What the statement tests share: a window around now, a report's counts and facts, and sending
// a world's payments.
#include "engine/statement.hpp"
#include "tests/execution/world.hpp"

#include <chrono>
#include <map>
#include <string>

namespace payrecon::testing {

inline long long now_s() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// The two hours around now, read with a minute's margin, retried pages not waited for.
inline engine::StatementOptions window_around_now() {
    engine::StatementOptions o;
    o.window_from = now_s() - 3600;
    o.window_to = now_s() + 3600;
    o.margin = std::chrono::seconds(60);
    o.wait = [](std::chrono::milliseconds) {};
    return o;
}

// The report's categories with at least one finding (matches included), and their counts.
inline std::map<std::string, long long> counts_of(const reports::Report& r) {
    std::map<std::string, long long> out;
    for (const auto& [category, t] : r.totals) {
        if (t.count > 0) {
            out[category] = t.count;
        }
    }
    return out;
}

// The report's fact `name`; empty if it has none.
inline std::string fact_of(const reports::Report& r, const std::string& name) {
    for (const auto& [n, v] : r.facts) {
        if (n == name) {
            return v;
        }
    }
    return "";
}

// Sends every pending payment (and refund) of the world once.
inline void send_all(World& w, providers::Provider& p) {
    engine::Executor ex(*w.db, {&p}, w.options());
    while (ex.run_once() > 0) {
    }
}

} // namespace payrecon::testing
