#pragma once
// The reconciliation report model (DESIGN section 9): what `statement`, `reconcile` and `nightly`
// found, in one shape that every writer (text, JSON, CSV, HTML) renders. A report is data only:
// no I/O, no database; the engine fills it, the writers print it.

#include "core/statement_diff.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace payrecon::reports {

// The statement diff's finding categories (core/statement_diff's FindingCategory), by name, in
// report order.
std::vector<std::string_view> statement_categories();

// One line of the report: a statement finding, or one reconciled payment. Absent values are
// nullopt (written as empty in CSV, null in JSON, "-" in text and HTML).
struct Finding {
    std::string category;         // e.g. "missing_local"; for reconcile: the decision
    bool needs_attention = false; // counts towards the exit code (not `matched`)
    std::string provider;
    std::optional<std::string> payment_id; // ours
    std::optional<std::string> operation_id;
    std::optional<std::string> provider_reference;
    std::optional<long long> local_amount; // minor units, ISO 4217
    std::optional<std::string> local_currency;
    std::optional<std::string> local_state;
    std::optional<long long> remote_amount; // minor units, ISO 4217
    std::optional<std::string> remote_currency;
    std::optional<std::string> remote_state;
    std::string detail; // one sentence for the operator

    friend bool operator==(const Finding&, const Finding&) = default;
};

// Per category: how many findings, and their amounts per currency (the local amount where we
// have one, else the remote one).
struct CategoryTotal {
    long long count = 0;
    std::map<std::string, long long> amounts; // currency -> minor units
};

struct Report {
    std::string kind;  // "statement", "reconcile", "nightly"
    std::string title; // "payrecon statement: stripe, 2026-12-01T00:00:00Z .. 2026-12-02T00:00:00Z"
    std::string generated_at; // ISO 8601 UTC
    // Ordered facts about the run: run ID, provider, window, records read on each side, ...
    std::vector<std::pair<std::string, std::string>> facts;
    // Categories in display order; every category listed here appears in `totals`, even at 0.
    std::vector<std::string> categories;
    std::map<std::string, CategoryTotal> totals;
    // Findings listed in full. `matched` ones are usually only counted (totals), not listed.
    std::vector<Finding> findings;
    bool findings_truncated = false; // more findings exist than are listed (see totals)
    int exit_code = 0;               // 0 clean, 3 attention needed, 1 the run failed
    long long needing_attention = 0; // findings added with needs_attention, listed or not
    std::optional<std::string> failure;

    // Adds `f` to the totals, and to `findings` if `list` is true.
    void add(const Finding& f, bool list = true);
    // Adds `count` findings of `category`, with their amounts per currency, to the totals only.
    void add_counted(const std::string& category, long long count,
                     const std::map<std::string, long long>& amounts);
    // The totals of `category`, which is listed in `categories` from then on.
    CategoryTotal& total_of(const std::string& category);
};

// One line for a terminal or a cron mail: "the run FAILED: ...", "8 findings need attention",
// "clean, 0 records".
std::string summary_line(const Report& report);

// "2026-12-02T13:45:00Z".
std::string format_utc(std::chrono::system_clock::time_point t);
std::string format_utc_seconds(long long unix_seconds);

} // namespace payrecon::reports
