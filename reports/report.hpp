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
// report order: a charge's, then, with `refunds`, a refund's.
std::vector<std::string_view> statement_categories(bool refunds = true);

// One line of the report: a statement finding, or one reconciled payment. Absent values are
// nullopt (written as empty in CSV, null in JSON, "-" in text and HTML).
struct Finding {
    std::string category;         // e.g. "missing_local"; for reconcile: the decision
    bool needs_attention = false; // counts towards the exit code (not `matched`)
    std::string provider;
    std::optional<std::string> payment_id; // ours (a refund's finding: the payment refunded)
    std::optional<std::string> refund_id;  // a refund's finding: our refund
    std::optional<std::string> operation_id;
    std::optional<std::string> provider_reference;
    std::optional<std::string> merchant_reference; // the merchant's own (order) reference
    std::optional<std::string> provider_link;      // the provider's dashboard page of the reference
    std::optional<long long> local_amount;         // minor units, ISO 4217
    std::optional<std::string> local_currency;
    std::optional<std::string> local_state;
    std::optional<long long> remote_amount; // minor units, ISO 4217
    std::optional<std::string> remote_currency;
    std::optional<std::string> remote_state;
    std::optional<long long> local_at;  // unix seconds: our first attempt, else acceptance
    std::optional<long long> remote_at; // unix seconds: when the provider created its record
    std::string detail;                 // one sentence for the operator
    // A stored statement finding's ID: what `payrecon statement findings acknowledge` takes.
    std::optional<std::string> finding_id;
    // Every provider reference of the finding's records, each once (a duplicate_remote holds
    // several charges; `provider_reference` is the first charge's).
    std::vector<std::string> provider_references;
    // An operator acknowledged the finding (who, when, what was done): it is listed and counted
    // in its category, and needs no attention: out of the money at risk.
    std::optional<FindingAcknowledgement> handled;

    friend bool operator==(const Finding&, const Finding&) = default;
};

// Ours minus the provider's, in minor units, when both sides have an amount in one currency.
std::optional<long long> difference(const Finding& f);

// The money a finding that needs attention puts at risk, in minor units of `currency`: the size of
// the difference where both sides hold an amount in one currency and they differ (an amount
// mismatch), else our amount, else the provider's (a charge one side lacks, a state the sides
// disagree on). nullopt for a finding that needs no attention or has no amount.
struct AtRisk {
    std::string currency; // upper case
    long long minor = 0;
};
std::optional<AtRisk> at_risk(const Finding& f);
// What a handled finding put at risk before it was handled (at_risk() as if it needed attention);
// nullopt for one that is not handled or has no amount.
std::optional<AtRisk> handled_at_risk(const Finding& f);

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
    // at_risk() summed per currency over the findings added with needs_attention, listed or not.
    std::map<std::string, long long> at_risk;
    // The findings added as handled (acknowledged by an operator), listed or not, and
    // handled_at_risk() summed per currency: out of `at_risk` and `needing_attention`.
    long long handled = 0;
    std::map<std::string, long long> handled_amounts;
    std::optional<std::string> failure;

    // Adds `f` to the totals (and the money at risk), and to `findings` if `list` is true.
    void add(const Finding& f, bool list = true);
    // Takes `f`, added before, out of the totals and the money at risk (not out of `findings`).
    void subtract(const Finding& f);
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
