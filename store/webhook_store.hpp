#pragma once
// Provider webhook events (migration 0012): stored as received, once per the provider's event
// identity, before anything interprets them.

#include "core/payment_state.hpp"
#include "core/reconcile_policy.hpp"
#include "core/webhook.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon::store {

class Db;

struct StoredEvent {
    long long event_id = 0;
    bool inserted = false; // false: a redelivery of an event stored before (counted in deliveries)
    int deliveries = 1;
    std::optional<std::string> payment_id; // ours, when the event names one of our operation IDs
};

// Stores `events` of one verified notification of `provider` (whose raw `body` each keeps), in
// one transaction, linking each to our payment of its operation ID at that provider. Returns one
// StoredEvent per event, in order. Throws DatabaseUnavailable.
std::vector<StoredEvent> store_provider_events(Db& db, const std::string& provider,
                                               const std::vector<WebhookEvent>& events,
                                               std::string_view body);

// An `unknown` payment or operation (refund, capture, void) and the first unapplied terminal
// event (succeeded or failed) about it; or (reversal_candidates) a succeeded refund or capture
// and a failed event about it.
struct EvidenceCandidate {
    OperationKind kind = OperationKind::charge;
    std::string
        refund_id; // with an operation beyond the charge: its row ID (refund, capture, void)
    std::optional<std::string> charge_reference; // with one: its charge's provider reference
    std::string tenant_id;
    std::string payment_id;
    long long generation = 0;
    std::string operation_id;
    std::string merchant_reference;
    std::string provider;
    // What the provider should have charged (an operator's record first), or refunded.
    long long amount_minor = 0;
    std::string currency;
    long long event_id = 0;
    WebhookEvent event;
};

// What applying one event did: the decision written, the payment's new state.
struct AppliedEvidence {
    EvidenceCandidate candidate;
    ReconcileDecision decision;
    PaymentState to = PaymentState::unknown;
};

// In one transaction: takes up to `limit` `unknown` payments of `providers` that have an
// unapplied terminal event (oldest event first; rows another transaction holds are skipped), asks
// `decide` about each, and writes its decision fenced by the generation just read: the payment's
// new state (succeeded, failed or needs_review), its reference, an audit row naming the event, the
// outbox event, and the event marked applied with the decision. Then the same for `unknown`
// refunds, captures and voids (store/payment_event.hpp's operation_effect_update: what one that
// settles does to its payment). First, the terminal events of payments and operations that
// settled without them are marked `consistent` or `contradicts` (`superseded`: a success reported
// before the operation was reversed; a void's news need not carry an amount); a failed event of a
// succeeded refund or capture is left for reversal_candidates. Pending and `other` events, and
// events of payments in any other state, are left as they are. Throws DatabaseUnavailable.
std::vector<AppliedEvidence>
apply_webhook_evidence(Db& db, const std::string& actor, const std::vector<std::string>& providers,
                       int limit,
                       const std::function<ReconcileDecision(const EvidenceCandidate&)>& decide);

// Succeeded refunds and captures of `providers` with an unapplied failed event (a possible late
// reversal), oldest event first, at most `limit`; nothing is locked (the caller asks the provider
// first).
std::vector<EvidenceCandidate>
reversal_candidates(Db& db, const std::vector<std::string>& providers, int limit);

// Reverses the refund or capture of `candidate` (core's find_reversal: succeeded -> failed) if it
// is still succeeded at its generation: generation + 1, `reason` as its failure reason,
// reversed_at, its effect on its payment undone (a refund's amount refundable again, a capture's
// taken off what was captured and capturable again), the <kind>.failed event, an audit row
// (<kind>.reversed) naming the event by `actor`, and the event marked applied `reversal` -- one
// transaction. A capture whose amount refunds already hold is not reversed (the refunds would
// exceed what was captured): its event is marked `contradicts` for an operator (`refunded`).
// `changed`: nothing written, the operation changed meanwhile.
enum class Reversal { reversed, refunded, changed };
Reversal reverse_operation(Db& db, const EvidenceCandidate& candidate, const std::string& actor,
                           const std::string& reason);

// Marks stored event `event_id` applied with `result` (contradicts: the provider's lookup says
// otherwise; it waits in the review queue for an operator's acknowledgement).
void mark_provider_event(Db& db, long long event_id, const std::string& result);

// A stored provider event as operators see it (`payrecon events`), with its payment's state now.
struct ProviderEventRow {
    long long event_id = 0;
    std::string provider;
    std::string event_key;
    std::string event_type;
    std::string outcome; // succeeded, failed, pending, other
    std::optional<std::string> operation_id;
    std::optional<std::string> provider_reference;
    std::optional<long long> amount_minor;
    std::optional<std::string> currency;
    std::optional<std::string> occurred_at; // ISO 8601 UTC, as the provider says
    std::string received_at;                // ISO 8601 UTC
    std::string last_received_at;
    int deliveries = 1;
    std::optional<std::string> tenant_id; // none: a payment we do not know
    std::optional<std::string> payment_id;
    std::optional<std::string> payment_state;
    std::optional<long long> payment_amount_minor; // what the provider should have charged
    std::optional<std::string> payment_currency;
    std::optional<std::string> applied_at;
    std::optional<std::string> applied_result; // adopt_succeeded, review, consistent, contradicts..
    std::optional<std::string> acknowledged_at;
    std::optional<std::string> acknowledged_by;
    std::optional<std::string> acknowledge_note;
    std::string body; // the raw notification (find_provider_event only)

    // A contradiction nobody has acknowledged: it is in the review queue.
    bool awaiting_acknowledgement() const {
        return applied_result == "contradicts" && !acknowledged_at;
    }
};

struct ProviderEventFilter {
    std::optional<std::string> provider;
    std::optional<std::string> tenant_id; // with payment_id: one payment's events
    std::optional<std::string> payment_id;
    bool unmatched = false;     // only events of payments we do not know
    bool contradicting = false; // only contradictions awaiting acknowledgement
    int limit = 100;            // the newest this many, listed oldest first
};

struct ProviderEventList {
    std::vector<ProviderEventRow> rows; // the newest `limit`, oldest first
    long long matching = 0;             // how many the filter matches in all
};
ProviderEventList list_provider_events(Db& db, const ProviderEventFilter& filter);
std::optional<ProviderEventRow> find_provider_event(Db& db, long long event_id);

enum class AcknowledgeStatus {
    acknowledged,
    not_found,
    not_contradicting, // nothing to acknowledge: the event agrees, was applied, or waits
    already,           // acknowledged before (by `by`, at `at`)
};
struct AcknowledgeResult {
    AcknowledgeStatus status = AcknowledgeStatus::not_found;
    std::optional<ProviderEventRow> event; // as it is after the call
};

// Records that an operator looked at contradicting event `event_id` and what was done (`note`),
// with an audit row (provider_event.acknowledged); the payment is not touched. Throws
// DatabaseUnavailable.
AcknowledgeResult acknowledge_provider_event(Db& db, long long event_id, const std::string& actor,
                                             const std::string& note);

// Contradictions awaiting acknowledgement, per provider: of `providers` (every provider if it is
// empty), of tenant `tenant_id` (every tenant if none).
std::vector<std::pair<std::string, long long>>
contradicting_event_counts(Db& db, const std::vector<std::string>& providers = {},
                           const std::optional<std::string>& tenant_id = std::nullopt);

// Stored events per provider and result: the reconciler's decision (adopt_succeeded, adopt_failed,
// review), consistent, contradicts, acknowledged (a contradiction an operator has looked at),
// waiting (a terminal event not applied yet), unmatched (no payment of ours), kept (pending and
// other events, which settle nothing).
struct ProviderEventCount {
    std::string provider;
    std::string result;
    long long events = 0;
};
std::vector<ProviderEventCount> provider_event_results(Db& db);

// Retention of the stored provider events (raw bodies). An event goes once its last delivery
// (`last_received_at`) is older than `retention`, unless it is still evidence someone needs:
// - its payment is not settled (`succeeded` or `failed`): every event of a payment still pending,
//   in flight, `unknown` or `needs_review` stays, however old;
// - it contradicts its payment and no operator has acknowledged that (`events acknowledge`);
// - it is terminal evidence (succeeded or failed) of a payment that settled without it and was
//   not yet compared with it (marked consistent or contradicts by the worker or reconcile).
// Events that name no payment of ours go by age alone. In batches of `batch_size` events in
// event-ID order, each one transaction whose deletions commit with an audit row per tenant it
// purged from (provider_events.purge: the run, the count, the retention); then one row for the
// run under the deployment tenant (provider_events.purge_run: the totals, unmatched events among
// them, written even when nothing was purged). `dry_run` counts and writes nothing. Throws
// DatabaseUnavailable.
struct ProviderEventPurgeResult {
    long long events = 0;             // purged (a dry run: would be)
    long long unmatched = 0;          // of them, events that named no payment of ours
    long long kept_unsettled = 0;     // old enough, but their payment is not settled
    long long kept_contradicting = 0; // old enough, but a contradiction nobody acknowledged
    long long kept_unexamined = 0;    // old enough, but not yet compared with its settled payment
    long long tenants = 0;            // tenants whose events were purged
    std::string run_id;               // the audit log's subject_id; empty for a dry run
};
ProviderEventPurgeResult purge_provider_events(Db& db, std::chrono::seconds retention, bool dry_run,
                                               const std::string& actor, int batch_size = 2000);

} // namespace payrecon::store
