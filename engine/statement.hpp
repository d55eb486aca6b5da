#pragma once
// `payrecon statement`: pull a provider's transactions for a window (paged, rate-limit aware,
// resumable), store them, diff them against our payments and report every discrepancy
// (DESIGN section 9).

#include "core/errors.hpp"
#include "providers/provider.hpp"
#include "reports/report.hpp"
#include "store/statement_store.hpp"

#include <chrono>
#include <functional>

namespace payrecon::store {
class Db;
}

namespace payrecon::engine {

struct StatementOptions {
    long long window_from = 0;         // unix seconds, inclusive
    long long window_to = 0;           // unix seconds, exclusive
    std::chrono::seconds margin{3600}; // both sides are read this much wider, for pairing
    long long amount_tolerance_minor = 0;
    int max_page_retries = 5; // a page (or a lookup) that fails this often in a row stops the run
    // A provider that cannot list is read by looking our payments up, this many per stored page.
    int lookups_per_page = 100;
    std::chrono::seconds max_wait{120}; // longest wait for a rate limit or a retry
    std::size_t listed_findings =
        10000; // findings listed in the report (all are counted and stored)
    // Payments the listing lacks (missing_remote) looked up by operation ID for a counterpart
    // outside the window (a re-send, a late charge) before they are reported: at most this many.
    std::size_t counterpart_lookups = 1000;
    store::DiffSorting sorting; // our side's sort: its memory, where what does not fit goes
    // What an operator checks when the provider refuses our credentials ("STRIPE_API_KEY").
    std::string credentials;
    // The provider's dashboard page of a reference ("https://.../payments/{reference}"); empty
    // for none. See providers::dashboard_url().
    std::string dashboard_url;
    // How to wait (tests pass a recorder); the default sleeps.
    std::function<void(std::chrono::milliseconds)> wait;
};

// run_statement found another process diffing the same provider's statement of the same window
// (a nightly, or `payrecon statement`): nothing was done; what() names that process.
class StatementBusy : public Refused {
public:
    using Refused::Refused;
};

// Converts what a provider listed -- a charge, or (list_refunds, lookup_refund) a refund -- into a
// statement record of that kind.
store::StatementRecord statement_record_of(const providers::RemotePayment& p,
                                           OperationKind kind = OperationKind::charge);

// One finding of the diff as the report shows it, linked to `dashboard_url` (a template; empty for
// no link).
reports::Finding report_finding(const DiffFinding& f, const std::string& provider,
                                const std::string& dashboard_url = {});

// A stored finding as the report shows it (as above).
reports::Finding report_finding(const store::StoredFinding& f,
                                const std::string& dashboard_url = {});

// The report of the window's complete run as stored -- every finding with its ID and, where an
// operator acknowledged it, as handled -- without asking the provider: what `statement findings
// list` prints. Matched payments are counted only (their amounts are not stored). Exit code 3 while
// a finding needs attention, else 0. Throws Refused if the window has no complete run,
// DatabaseUnavailable.
reports::Report stored_statement_report(store::Db& db, const std::string& provider,
                                        long long window_from, long long window_to,
                                        const std::string& dashboard_url = {});

// Runs the statement for `provider` and returns its report (exit code 0 clean, 3 findings need
// attention, 1 the run failed, 4 the provider refused our credentials -- not retried -- and
// `failure` says why; a run whose listing failed resumes where it stopped when started again; the
// window's last complete result stays stored until a new run of it is complete).
// A provider that cannot list its transactions but can find a payment by our operation ID
// (Checkout.com) is read by looking up each of our payments sent inside the window: the same diff,
// except that a charge made outside payrecon cannot be found that way (the report says so).
// Throws StatementBusy if another process is diffing this provider's window now; Refused if the
// provider can do neither, or if the window ends so recently that a "not
// found" would prove nothing yet (its lookup's staleness); DatabaseUnavailable if the database
// went away.
reports::Report run_statement(store::Db& db, providers::Provider& provider,
                              const StatementOptions& options,
                              const std::function<void(const std::string&)>& progress = {});

} // namespace payrecon::engine
