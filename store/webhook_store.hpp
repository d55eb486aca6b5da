#pragma once
// Provider webhook events (migration 0012): stored as received, once per the provider's event
// identity, before anything interprets them.

#include "core/payment_state.hpp"
#include "core/reconcile_policy.hpp"
#include "core/webhook.hpp"

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

// An `unknown` payment and the first unapplied terminal event (succeeded or failed) about it.
struct EvidenceCandidate {
    std::string tenant_id;
    std::string payment_id;
    long long generation = 0;
    std::string operation_id;
    std::string merchant_reference;
    std::string provider;
    long long amount_minor =
        0; // what the provider should have charged (an operator's record first)
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
// outbox event, and the event marked applied with the decision. First, the terminal events of
// payments that settled without them are marked `consistent` or `contradicts`. Pending and `other`
// events, and events of payments in any other state, are left as they are. Throws
// DatabaseUnavailable.
std::vector<AppliedEvidence>
apply_webhook_evidence(Db& db, const std::string& actor, const std::vector<std::string>& providers,
                       int limit,
                       const std::function<ReconcileDecision(const EvidenceCandidate&)>& decide);

} // namespace payrecon::store
