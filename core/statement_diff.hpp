#pragma once
// The statement diff (DESIGN sections 9 and 16) as pure functions: our money movements (payments'
// charges and their refunds) and the provider's records of them for one window, both sorted by the
// same match key (our operation ID; a provider record that does not carry one is keyed by its
// provider reference), merged in one pass. Memory holds one key's records at a time, however large
// the window. A key is a charge's or a refund's (OperationKind: ours where we have it, else the
// provider record's); operation IDs are unique across both.
//
// A charge's key, with L our payment (0 or 1: operation IDs are unique) and R the provider's
// records:
//   R has more than one charge                          -> duplicate_remote (naming every charge)
//   L only: succeeded                                   -> missing_remote (we say charged, they
//   have nothing)
//           unknown / needs_review                      -> unresolved_unknown
//           anything else                               -> matched (no charge on either side)
//   R only: a charge (succeeded or refunded)            -> missing_local (a charge we have no
//   record of)
//           no charge (declined, pending)               -> nothing (no money moved)
//           an authorisation (authorized)               -> missing_local (funds held on the
//           customer's card for a payment payrecon has no record of)
//   both:   L unknown / needs_review                    -> unresolved_unknown
//           currencies differ                           -> currency_mismatch
//           amounts differ by more than the tolerance   -> amount_mismatch
//           L succeeded and R succeeded                 -> matched
//           L succeeded and R refunded (partly or all)  -> matched where the provider's refunds
//               are diffed one by one (DiffRules::refunds_listed), or where what it refunded is
//               within what our refunds of the payment hold; else status_mismatch (a refund made
//               outside payrecon)
//           any other pair of states                    -> status_mismatch (charged there and
//                                                          failed here, ...)
// An authorisation's charge key (L made with capture "manual", succeeded: authorised), after the
// currency and the authorised amount are compared as above:
//   R authorized: L captured nothing and voided nothing    -> matched (held on both sides)
//                 L captured, or its void succeeded         -> authorization_mismatch
//   R captured (succeeded, refunded): L voided with nothing captured -> authorization_mismatch
//                 what R captured (where it says) within what L's captures took and hold (those
//                 in flight counted) -> matched, the refunds then judged as above; outside ->
//                 authorization_mismatch; R says no amount: matched if L holds a capture, else
//                 authorization_mismatch
//   R released (declined: voided, expired): L voided or expired -> matched (released on both
//                 sides); else authorization_mismatch
//   L automatic, R authorized                           -> status_mismatch (we say charged, the
//                                                          provider holds an authorisation only)
// A refund's key, R's records being refunds, "moved" one that succeeded or is pending there:
//   R has more than one moved                           -> refund_duplicate_remote
//   L only (or R nothing moved): succeeded              -> refund_missing_remote
//           unknown / needs_review                      -> refund_unresolved_unknown
//           anything else                               -> matched (no refund on either side)
//   R only: moved                                       -> refund_missing_local (money went back
//                                                          that payrecon has no refund of: one
//                                                          made in the provider's dashboard)
//           nothing moved                               -> nothing
//   both:   L unknown / needs_review                    -> refund_unresolved_unknown
//           currency or amount differ                   -> refund_amount_mismatch
//           L succeeded and R succeeded                 -> refund_matched
//           any other pair of states                    -> refund_status_mismatch
// A provider record of a capture listed on its own (PayPal's capture of an authorization, keyed by
// the capture's operation ID) is kept with the run and not classified: the authorisation's record
// on the payment's key says whether it was captured.
// Only keys whose anchor time (ours when we have the record, else the provider's) lies inside the
// window are reported: the caller reads both sides with a margin around the window, so that a
// payment accepted just before midnight and charged just after is still paired.
//
// Counterparts across windows. Our side is dated by the first attempt, the provider's by its
// record: an operation re-sent hours later (by the nightly, or an operator) or executed late by
// the provider lies in two windows, and would be missing_remote in one and missing_local in the
// other though its operation ID is ours. So before a record is called missing, the caller looks
// for its counterpart by operation ID outside the window's reading (our operations of any time;
// the provider's records of other runs, or a lookup). A record outside [read_from, read_to) is
// such a counterpart: the key is anchored by the side that was read in the window (ours if both
// were), and is classified as usual; a match is a match, with both times in its detail
// (`across_windows`), never a finding.

#include "core/payment_state.hpp"

#include <chrono>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon {

struct LocalRecord {
    std::string match_key; // operation_id
    OperationKind kind = OperationKind::charge;
    std::string payment_id; // the payment's (a refund's: the payment it refunds)
    std::string refund_id;  // a refund's own ID; empty for a charge
    std::string tenant_id;
    std::string operation_id;
    std::optional<std::string> provider_reference;
    std::optional<std::string> merchant_reference; // read with the details only
    long long amount_minor = 0;
    std::string currency; // ISO 4217, upper case
    PaymentState state = PaymentState::pending;
    long long at = 0; // unix seconds: first attempt, else acceptance
    // A charge's: what its refunds hold (succeeded, in flight, unknown or in review), in minor
    // units; what the provider refunded of it is checked against this where refunds are not
    // diffed one by one.
    long long refund_held_minor = 0;
    // A charge made with capture "manual" (an authorisation, DESIGN section 16): what its captures
    // that succeeded took, what all of them hold (succeeded, in flight, unknown or in review), and
    // whether the authorisation was released -- voided (a void that succeeded) or expired (marked
    // so by the nightly's authorisation watch).
    bool manual = false;
    long long captured_minor = 0;
    long long capture_held_minor = 0;
    bool voided = false;
    bool expired = false;
};

// Where a statement run (one provider, one window) stands. Stored by name in recon_runs.status.
enum class StatementRunStatus {
    listing, // the provider's records are being listed; resumable from the stored cursor
    listed,  // every page is stored; the diff has not finished
    done,    // diffed: counts and findings stored
    failed,  // failed after its listing; a rerun lists again from the start
};
std::string_view to_string(StatementRunStatus status);
// Returns nullopt if `name` is not one of the names to_string() gives.
std::optional<StatementRunStatus> parse_statement_run_status(std::string_view name);

// authorized: an authorisation the provider still holds with nothing captured (Stripe's
// requires_capture, Square's APPROVED, PayPal's authorization pending capture); one that was
// captured is succeeded (or refunded), one voided or expired declined.
enum class RemoteStatus { succeeded, refunded, declined, pending, other, authorized };
std::string_view to_string(RemoteStatus status);
// succeeded, refunded or authorized: money moved at some point, or is held on the customer's card.
bool is_charge(RemoteStatus status);

struct RemoteRecord {
    std::string match_key;                      // operation_id, else "ref:" + provider_reference
    OperationKind kind = OperationKind::charge; // a charge, or a refund the provider listed
    std::string provider_reference;
    std::optional<std::string> operation_id;
    long long amount_minor = 0; // ISO 4217 minor units
    std::string currency;       // any case
    RemoteStatus status = RemoteStatus::other;
    std::string raw_status;
    long long at = 0;              // unix seconds
    long long amount_refunded = 0; // a charge's: what the provider refunded of it, minor units
    // A charge's: what the provider captured of it, minor units, where its record says (Stripe's
    // amount_received, Square's COMPLETED amount, Checkout.com's total_captured); nullopt where it
    // does not (PayPal's authorization entry: its captures are entries of their own).
    std::optional<long long> amount_captured;
};

struct DiffRules {
    long long amount_tolerance_minor = 0; // |ours - theirs| at most this is equal
    long long window_from = 0;            // unix seconds, inclusive
    long long window_to = 0;              // unix seconds, exclusive
    // What the caller read of each side: the window widened by its margin. A record outside is a
    // counterpart found by operation ID (see above).
    long long read_from = std::numeric_limits<long long>::min(); // unix seconds, inclusive
    long long read_to = std::numeric_limits<long long>::max();   // unix seconds, exclusive
    // The provider's refunds of the window were listed and are diffed one by one: a charge it
    // refunded is then matched as a charge, its refunds judged on their own keys.
    bool refunds_listed = false;
};

// What the diff finds of one key (DESIGN section 9), in report order.
enum class FindingCategory {
    matched,
    missing_remote,
    missing_local,
    amount_mismatch,
    currency_mismatch,
    status_mismatch,
    duplicate_remote,
    unresolved_unknown,
    authorization_mismatch,
    refund_matched,
    refund_missing_remote,
    refund_missing_local,
    refund_amount_mismatch,
    refund_status_mismatch,
    refund_duplicate_remote,
    refund_unresolved_unknown,
};
inline constexpr FindingCategory k_charge_categories[] = {FindingCategory::matched,
                                                          FindingCategory::missing_remote,
                                                          FindingCategory::missing_local,
                                                          FindingCategory::amount_mismatch,
                                                          FindingCategory::currency_mismatch,
                                                          FindingCategory::status_mismatch,
                                                          FindingCategory::duplicate_remote,
                                                          FindingCategory::unresolved_unknown,
                                                          FindingCategory::authorization_mismatch};
inline constexpr FindingCategory k_refund_categories[] = {
    FindingCategory::refund_matched,           FindingCategory::refund_missing_remote,
    FindingCategory::refund_missing_local,     FindingCategory::refund_amount_mismatch,
    FindingCategory::refund_status_mismatch,   FindingCategory::refund_duplicate_remote,
    FindingCategory::refund_unresolved_unknown};
// "missing_local": the name reports, the database and the JSON schema use.
std::string_view to_string(FindingCategory category);
// Returns nullopt if `name` is not one of the names to_string() gives.
std::optional<FindingCategory> parse_finding_category(std::string_view name);
// matched or refund_matched: nothing to do, counted and never listed (but across windows).
bool is_match(FindingCategory category);
bool is_match(std::string_view category_name);

// An operator's word that a finding was handled (`statement findings acknowledge`): who, when
// (ISO 8601 UTC) and what was done. A handled finding stays in the report, out of the money at
// risk.
struct FindingAcknowledgement {
    std::string by;
    std::string at;
    std::string note;
    friend bool operator==(const FindingAcknowledgement&, const FindingAcknowledgement&) = default;
};

struct DiffFinding {
    std::string category; // to_string() of a FindingCategory
    std::optional<LocalRecord> local;
    std::vector<RemoteRecord> remote; // every provider record of the key
    std::string detail;
    // One side was found outside the window's reading (a counterpart, see above); a match of this
    // kind is stored with its detail (both times), counted as matched, and needs no one.
    bool across_windows = false;
    // Given as the finding is stored (store/statement_store); empty and nullopt before: its ID, and
    // the acknowledgement of the same finding in an earlier run of the window, carried over.
    std::string finding_id;
    std::optional<FindingAcknowledgement> acknowledged;
};

// Every provider reference of the finding's records, in the order of its records, each once: a
// duplicate_remote has several, and an operator refunds by them.
std::vector<std::string> remote_references(const DiffFinding& finding);

// The provider record a finding is shown with: its first charge (a refund's key: its first refund
// that went or is going out), else its first record, else null.
const RemoteRecord* shown_remote(const DiffFinding& finding);

// One key's findings (at most one), or nullopt if the key's anchor lies outside the window, or
// there is nothing to say (a provider record without a charge and no payment of ours).
std::optional<DiffFinding> classify_key(const std::optional<LocalRecord>& local,
                                        const std::vector<RemoteRecord>& remote,
                                        const DiffRules& rules);

// Merges two streams sorted by match_key (byte order, as PostgreSQL's COLLATE "C" sorts).
// `next_*` fill the record they are given with the stream's next one (overwriting every field the
// stream carries: records are reused, and their strings keep their buffers) and return false at
// the end. Throws std::invalid_argument if a stream is not sorted, or if the local stream repeats a
// key. In key order, calls `sink.finding` once per finding that is not `matched` and per match
// across windows (it may move from it), and `sink.matched` with our record of each other matched
// key (`sink.matched` tells a matched refund by its record's kind).
struct DiffCounts {
    long long local_records = 0;
    long long remote_records = 0;
    long long keys = 0;
};
struct DiffSink {
    std::function<void(DiffFinding&&)> finding;
    std::function<void(const LocalRecord&)> matched;
};
DiffCounts diff_sorted(const std::function<bool(LocalRecord&)>& next_local,
                       const std::function<bool(RemoteRecord&)>& next_remote,
                       const DiffRules& rules, const DiffSink& sink);

} // namespace payrecon
