#pragma once
// The reconciler's and operators' writes (DESIGN sections 7 and 8). Unknown payments are claimed
// with FOR UPDATE SKIP LOCKED and generation + 1, so several reconcilers never handle one payment
// twice; every decision is written fenced by that generation (and bumps it again), with its
// lookup record, an audit row and -- when the state changes -- an outbox event, in one transaction.

#include "core/payment_state.hpp"
#include "core/resolution_policy.hpp"
#include "store/executor_store.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace payrecon::store {

class Db;

// A provider the reconciler can ask, and how long after an attempt its answers can be trusted.
struct ProviderSchedule {
    std::string provider; // [a-z0-9_-]{1,32}
    std::chrono::seconds settle_delay{0};
    std::chrono::seconds refund_settle_delay{0}; // the same for its refunds
};

struct ReconcileCandidate {
    ClaimedPayment payment; // attempt_no is 0: a reconciler opens no attempt
    PaymentState state = PaymentState::unknown;
    std::chrono::seconds since_first_attempt{0}; // from created_at if it was never sent
    std::chrono::seconds since_last_attempt{0};
    int attempt_count = 0;
    int resends = 0; // times the reconciler sent it again
    int lookup_count = 0;
    int lookup_failures = 0;
    std::optional<std::string> review_code; // in needs_review
    // Its latest attempt was accepted: answered pending with the provider's reference (an Adyen
    // refund `received`); a provider without a lookup then waits for its notification.
    bool last_attempt_accepted = false;
};

// Claims up to `limit` `unknown` payments of `providers` whose check is due (next_attempt_at, or
// the last attempt plus the provider's settle delay) by `due_by` at the latest, oldest first:
// generation + 1, and next_attempt_at moved `hold` ahead so that a reconciler that dies mid-lookup
// leaves the payment to the next one. Rows another transaction holds are skipped.
std::vector<ReconcileCandidate>
claim_unknown(Db& db, std::chrono::seconds hold, int limit,
              const std::vector<ProviderSchedule>& providers,
              std::chrono::system_clock::time_point due_by = std::chrono::system_clock::now());

// The same selection as claim_unknown, claiming and changing nothing (--dry-run).
std::vector<ReconcileCandidate> peek_unknown(Db& db, int limit,
                                             const std::vector<ProviderSchedule>& providers);

// One payment (kind charge: `subject_id` its payment ID) or one refund (kind refund: its refund
// ID) as it is now, whatever its state; nullopt if the tenant has no such payment or refund.
std::optional<ReconcileCandidate> load_candidate(Db& db, const std::string& tenant_id,
                                                 const std::string& subject_id,
                                                 OperationKind kind = OperationKind::charge);

// What a status query found, for the payment_lookups row.
struct LookupObservation {
    std::string status; // found, not_found, failed, not_asked
    std::optional<std::string> remote_state;
    std::optional<std::string> remote_raw_status;
    std::optional<long long> remote_amount;
    std::optional<std::string> remote_currency;
    std::optional<std::string> provider_reference;
    int duplicates = 0;
    std::optional<int> http_status;
    std::string error_class;
    std::string detail; // redacted excerpt
};

struct ReconcileWrite {
    PaymentState to = PaymentState::unknown;           // may equal the current state (check later)
    std::optional<std::chrono::seconds> next_check_in; // unknown: when to look again
    bool resend_now = false;                           // retry_scheduled: due at once
    std::optional<std::string> review_code;            // needs_review only
    std::string reason;
    std::optional<std::string> provider_reference;
    std::string decision; // ReconcileAction name, for the records
};

// Records `lookup` (always: the observation is kept even when fenced out) and, if the payment is
// still in `candidate.state` at `candidate.payment.generation`, applies `write` with generation +
// 1, an audit row by `actor`, and an outbox event if the state changed. Returns false if fenced
// out. Throws std::logic_error if the transition is not allowed.
bool apply_reconciliation(Db& db, const ReconcileCandidate& candidate, const std::string& actor,
                          const LookupObservation& lookup, const ReconcileWrite& write);

// Records a status query that decided something outside apply_reconciliation (a late reversal
// checked with the provider): the observation of operation `operation_id` (of payment
// `payment_id`) at the generation it was asked at, by `actor`, with the decision's name and
// reason and whether it was applied. Throws DatabaseUnavailable.
void record_lookup(Db& db, const std::string& tenant_id, const std::string& payment_id,
                   const std::string& operation_id, long long generation, const std::string& actor,
                   const LookupObservation& lookup, const std::string& decision,
                   const std::string& reason, bool applied);

// An operator's decision on a payment that is `unknown` or `needs_review` (DESIGN section 8), or
// `cancel`: a payment that is `pending` or `retry_scheduled` and was provably never sent (no
// attempt, or every attempt `not_sent`) becomes `failed`.
struct Resolution {
    std::string tenant_id;
    std::string payment_id;
    // Kind refund, capture or void: the decision is about that operation `refund_id` (the
    // operations row), under the same rules; one decided failed gives back what it held
    // (store/payment_event.hpp's operation_effect_update).
    OperationKind kind = OperationKind::charge;
    std::string refund_id;
    long long generation = 0; // as the operator was shown it
    OperatorDecision decision = OperatorDecision::failed;
    std::string note;
    std::string operator_name;
    std::optional<std::string> provider_reference;
    // With succeeded: what the provider really charged, in minor units of the payment's currency,
    // when it differs from what was asked (payments.charged_amount_minor).
    std::optional<long long> charged_amount_minor;
    bool confirmed_no_charge = false; // with retry: the operator confirmed no charge exists
    // Make every check below, under the same row lock, and write nothing: `applied` then says the
    // write would be made, with the state and generation it would give.
    bool dry_run = false;
};

struct ResolveResult {
    // maybe_sent: a cancel refused because an attempt of the payment may have reached the provider.
    // reference_taken: another payment already holds the provider reference given.
    enum class Status { applied, not_found, changed, not_resolvable, maybe_sent, reference_taken };
    Status status = Status::not_found;
    std::string state;        // now (after the write, when applied)
    long long generation = 0; // now
    std::string holder;       // with reference_taken: the payment that holds the reference
    std::string why;          // with not_resolvable from requeue_payment: the rule it breaks
};

// Applies the decision if the payment (or its refund) is still at `generation` and unknown or
// needs_review (a
// cancel: pending or retry_scheduled, with no attempt that may have been sent):
// succeeded / failed / retry_scheduled (due at once, same operation ID), generation + 1, review
// fields cleared, an audit row with the operator, the note and the decision, and an outbox event,
// in one transaction. Otherwise changes nothing and says why. A dry run changes nothing either way.
ResolveResult resolve_payment(Db& db, const Resolution& resolution);

// A payment, refund, capture or void in review as a bulk recheck selects it: by provider and
// review code.
struct ReviewItem {
    OperationKind kind = OperationKind::charge;
    std::string tenant_id;
    std::string payment_id; // a refund's, capture's or void's: the payment it acts on
    std::string refund_id;  // the refund's, capture's or void's own ID; empty for a payment
    // What is rechecked: the payment, or the operation.
    const std::string& subject_id() const {
        return kind == OperationKind::charge ? payment_id : refund_id;
    }
    long long generation = 0; // as selected: each recheck is fenced by it
    long long amount_minor = 0;
    std::string currency;
    std::string review_reason;
    std::string in_review_since; // updated_at, ISO 8601 UTC
};
// The payments and refunds of `provider` in review with `review_code` (of `tenant_id` only, when
// given), longest in review first, at most `limit` (`more`: there are others). Throws
// std::invalid_argument if limit < 1; DatabaseUnavailable.
struct ReviewItems {
    std::vector<ReviewItem> items;
    bool more = false;
};
ReviewItems review_items(Db& db, const std::string& provider, const std::string& review_code,
                         const std::optional<std::string>& tenant_id, int limit);

// A payment in review as request_rejected, with what its latest attempt recorded: what a requeue
// selects from (core's requeue_refusal decides which may go).
struct RejectedPayment {
    std::string tenant_id;
    std::string payment_id;
    long long generation = 0;
    long long amount_minor = 0;
    std::string currency;
    std::string review_reason;
    int attempt_no = 0;
    std::string outcome; // of the latest attempt; empty: none
    std::optional<int> http_status;
    std::string error_class;
    std::string attempt_at; // when the latest attempt was recorded, RFC 3339 UTC
};
// The payments of `provider` in review as request_rejected (of `tenant_id` only, when given),
// oldest in review first.
std::vector<RejectedPayment> rejected_payments(Db& db, const std::string& provider,
                                               const std::optional<std::string>& tenant_id = {});

// A requeue (core/resolution_policy): a payment in review sent again with the same operation ID
// on the record's evidence that its provider refused our credentials before executing anything.
struct Requeue {
    std::string tenant_id;
    std::string payment_id;
    long long generation = 0; // as selected
    std::string note;         // the operator's, 1..2000 characters once trimmed
    std::string operator_name;
};
// In one transaction, under the payment's row lock: if it is still at `generation` and core's
// requeue_refusal finds nothing against what its row and latest attempt say, it becomes
// retry_scheduled, due at once (same operation ID), generation + 1, review fields cleared, with an
// audit row "review.requeue" (the operator, the note and the refused attempt's status) and an
// outbox event. Otherwise nothing is written: not_found, changed, or not_resolvable with `why`.
// Throws UsageError if the note breaks check_resolution's rule.
ResolveResult requeue_payment(Db& db, const Requeue& requeue);

// What is left open (pending, retry_scheduled, processing, unknown, needs_review), per kind (the
// charges, the refunds), state, provider, review code and currency, for the nightly summary.
// `stuck`: the pending and retry_scheduled payments among them that have been in that state longer
// than `stuck_after`; `lookups_failing`: the unknown ones whose latest status query failed.
struct QueueCount {
    std::string state;
    std::string provider;
    std::string review_code; // empty outside needs_review
    std::string currency;
    long long payments = 0;
    long long amount_minor = 0;
    long long stuck = 0;
    long long lookups_failing = 0;
    std::string kind = "charge"; // charge (the payments) or refund (counted apart, alike)
};
std::vector<QueueCount> open_queue_counts(Db& db, std::chrono::seconds stuck_after);

// Payments in review because their provider refused the request (review code request_rejected),
// per provider and the provider's error code -- the rejected attempt's error class
// "request_rejected:<code>" -- with the most recent one's payment ID and review reason (which
// holds the provider's message). For nightly: an integration fault, loud.
struct RejectedInReview {
    std::string provider;
    std::string code;
    long long payments = 0;
    std::string latest_payment_id;
    std::string latest_reason;
};
std::vector<RejectedInReview> rejected_in_review(Db& db);

// Every attempt a provider rejected, ever (attempts are never deleted), per provider and code:
// what `payrecon serve` exports on /metrics, counted at scrape time.
struct RejectedAttempts {
    std::string provider;
    std::string code;
    long long attempts = 0;
};
std::vector<RejectedAttempts> rejected_attempt_counts(Db& db);

} // namespace payrecon::store
