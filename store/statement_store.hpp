#pragma once
// Statement runs (DESIGN section 9): one run per provider and window, resumable while the listing
// is incomplete, replaced when the window is run again. The provider's records are stored raw and
// normalised; both sides are then read at once -- ours sorted by match key in bounded memory
// (core/external_sort), the provider's in key order from their index, a bounded way ahead -- and
// merged by core/statement_diff, so memory stays bounded however large the window.

#include "core/statement_diff.hpp"
#include "store/executor_store.hpp"

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace payrecon::store {

class Db;

struct StatementRun {
    std::string run_id;
    std::string provider;
    long long window_from = 0; // unix seconds
    long long window_to = 0;
    long long margin_s = 0;
    StatementRunStatus status = StatementRunStatus::listing;
    std::optional<std::string> list_cursor;
    int pages = 0;
    long long remote_records = 0;
    int runs = 1;
    bool resumed = false;       // an unfinished listing of this window is carried on
    bool complete_kept = false; // the window has a complete run, kept until this one completes
};

// The run of (provider, window): a new one; the unfinished one, resumed where its listing stopped
// (same margin only); or a finished or failed one, reset for a rerun (its records and findings are
// deleted, `runs` + 1). Throws UsageError if an unfinished run of the window has another margin.
StatementRun open_statement_run(Db& db, const std::string& provider, long long window_from,
                                long long window_to, long long margin_s);

struct StatementRecord {
    RemoteRecord record; // match_key: operation_id, else "ref:" + provider_reference
    std::string raw;     // the provider's JSON, as received (may be empty)
};

// Stores one listed page and where the listing goes on, in one transaction. `next_cursor` nullopt:
// the listing is complete (status listed). A record already stored (same provider reference) is
// kept as it was.
void store_statement_page(Db& db, StatementRun& run, const std::vector<StatementRecord>& records,
                          const std::optional<std::string>& next_cursor);

// A statement read by lookups, for a provider that can find a payment by our operation ID but
// cannot list its payments by window (Checkout.com): our payments of the run's provider that were
// sent (first attempt inside the window), in the order of their first attempt, each with the
// cursor that goes on after it ("lookup:<first attempt in unix microseconds>:<payment ID>", kept
// as the run's list cursor). `after` nullopt: from the window's start; anything but such a cursor
// is a logic_error.
struct StatementLookup {
    ClaimedPayment payment; // generation and attempt_no: as stored, nothing is claimed
    std::string cursor;     // the one after this payment
};
std::vector<StatementLookup> statement_lookup_page(Db& db, const StatementRun& run,
                                                   const std::optional<std::string>& after,
                                                   int limit);
// Whether a run's list cursor is a lookup cursor (see statement_lookup_page).
bool is_lookup_cursor(const std::string& cursor);

// Records a failure (status failed, unless the listing can resume: then it stays `listing` with
// its cursor) with what happened.
void fail_statement_run(Db& db, const StatementRun& run, const std::string& error);

struct StatementTotals {
    DiffCounts counts;
    std::map<std::string, long long> by_category; // matched included
    std::map<std::string, long long>
        matched_amounts; // currency -> minor units of our matched payments
    std::map<std::string, long long> refund_matched_amounts; // the same of our matched refunds
    // Of the matches, those whose counterpart lay outside the window's reading (DESIGN section 9):
    // stored as findings of category matched, with both times.
    long long matched_across_windows = 0;
    // Of the findings (not matched), those an operator acknowledged in an earlier run of the
    // window, carried over: handled, they need no one.
    long long acknowledged = 0;
};

// Our payments and refunds of the run's provider with these operation IDs (as stored, each of its
// kind; nothing is claimed), for looking up the provider's counterpart of one the run's records
// lack.
std::vector<ClaimedPayment> statement_payments(Db& db, const StatementRun& run,
                                               const std::vector<std::string>& operation_ids);

// Adds records found by looking our payments up (counterparts outside the window's reading) to a
// listed or diffed run, without touching its listing; a record already stored is kept. The run is
// diffed again afterwards.
void store_statement_counterparts(Db& db, StatementRun& run,
                                  const std::vector<StatementRecord>& records);

// Before the findings are replaced, an acknowledgement (`acknowledge_statement_finding`) in the
// window's earlier run goes with the same finding -- same category, operation ID, reference and
// detail -- into the new one; `on_finding` gets each finding as stored: its ID, and that
// acknowledgement.
// Pairs provider records without our operation ID by provider reference (a charge's with our
// payment, a refund's with our refund), then merges our payments of the provider -- and, with
// `refunds_listed` (the provider's refunds of the window are among the run's records), our refunds
// of it -- (first attempt, else acceptance, inside the window widened by the margin) with the
// run's records, replaces the run's findings with the non-matched ones, and marks it done --
// in one transaction, whose snapshot the reads (on connections of their own, at once) share.
// Before a record is called missing, its counterpart is looked for by operation ID outside the
// window's reading: our payments of any time, and the records the provider's other runs stored
// (core/statement_diff: a counterpart found is a match across windows, or what the pair says).
// Calls `on_finding` for every finding that is not `matched`, and for every match across windows,
// in key order, with both sides' records in full; other matches are only counted (totals).
// Our side is sorted by payrecon (core/external_sort) in at most `memory_bytes`; what does not fit
// is written as sorted runs to a temporary file, unlinked as soon as it is created. The provider's
// records come from their index in key order (statement_records_diff), read ahead of the merge:
// `memory_bytes` of them in memory, what is further ahead in a temporary file alike.
struct DiffSorting {
    std::size_t memory_bytes = std::size_t{32} << 20;
    std::string temp_dir; // empty: $TMPDIR, else /tmp
};
StatementTotals diff_statement_run(Db& db, StatementRun& run, long long amount_tolerance_minor,
                                   bool refunds_listed,
                                   const std::function<void(const DiffFinding&)>& on_finding,
                                   const DiffSorting& sorting = {});

// A finding as a complete statement run stored it (recon_findings), with the run it belongs to.
// Amounts in minor units; `merchant_reference` read from our payment where there is one.
struct StoredFinding {
    std::string finding_id;
    std::string run_id;
    std::string provider;
    long long window_from = 0; // unix seconds
    long long window_to = 0;
    long long finding_no = 0;
    std::string category;
    std::optional<std::string> tenant_id;
    std::optional<std::string> payment_id; // a refund's finding: the payment it refunds
    std::optional<std::string> refund_id;  // a refund's finding: the refund
    std::optional<std::string> operation_id;
    std::optional<std::string> merchant_reference; // the payment's
    std::optional<std::string> provider_reference; // the one shown: the first charge's
    std::vector<std::string> provider_references;  // every record's of the key
    std::optional<long long> local_amount;
    std::optional<std::string> local_currency;
    std::optional<std::string> local_state;
    std::optional<long long> remote_amount;
    std::optional<std::string> remote_currency;
    std::optional<std::string> remote_state;
    std::string detail;
    std::optional<FindingAcknowledgement> acknowledged;
};

// The complete run of (provider, window) as stored: its counts and every finding, in report
// order. nullopt if the window has no complete run. Throws DatabaseUnavailable.
struct StoredStatement {
    std::string run_id;
    std::string provider;
    long long window_from = 0;
    long long window_to = 0;
    long long margin_s = 0;
    int runs = 0;
    long long local_records = 0;
    long long remote_records = 0;
    std::string finished_at;                 // ISO 8601 UTC
    std::map<std::string, long long> counts; // per category, matched included
    bool refunds_listed = false;             // the provider's refunds were diffed
    std::vector<StoredFinding> findings;
};
std::optional<StoredStatement> load_statement(Db& db, const std::string& provider,
                                              long long window_from, long long window_to);

// One stored finding by its ID; nullopt if there is none (`finding_id` need not be a UUID).
std::optional<StoredFinding> find_statement_finding(Db& db, const std::string& finding_id);

enum class FindingAcknowledgeStatus {
    acknowledged,
    not_found,
    not_needed, // a match across windows: nothing to handle
    already,    // acknowledged before: `finding.acknowledged` says by whom, when and why
};
struct FindingAcknowledgeResult {
    FindingAcknowledgeStatus status = FindingAcknowledgeStatus::not_found;
    std::optional<StoredFinding> finding; // as it is after the call
};

// Records that operator `actor` handled finding `finding_id` and what was done (`note`, as given:
// the caller checks it), under the finding's row lock, with an audit row
// (statement_finding.acknowledged; under the payment's tenant, else the deployment's) in one
// transaction; the finding stays, out of the money at risk. Throws DatabaseUnavailable.
FindingAcknowledgeResult acknowledge_statement_finding(Db& db, const std::string& finding_id,
                                                       const std::string& actor,
                                                       const std::string& note);

} // namespace payrecon::store
