#pragma once
// Provider webhooks as evidence (DESIGN section 14): what a provider's notification says about a
// payment, once its signature is verified. Each provider kind verifies and reads its own format
// (providers/<kind>/webhook.cpp) behind WebhookVerifier; `serve` receives, the store keeps, the
// reconciler applies. A notification is stored before it is interpreted, and the absence of one
// proves nothing.

#include "core/payment_state.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace payrecon {

// What a notification says happened to the payment it names.
enum class EvidenceOutcome {
    succeeded, // charged (Stripe payment_intent.succeeded, Adyen AUTHORISATION success=true)
    failed,    // will not charge (declined, canceled)
    pending,   // not final yet (Stripe payment_intent.processing)
    other,     // not about a payment's outcome (kept, never applied)
};
std::string_view to_string(EvidenceOutcome outcome);
std::optional<EvidenceOutcome> parse_evidence_outcome(std::string_view name);

// One event of a verified notification (a notification may carry several: Adyen's items).
struct WebhookEvent {
    std::string event_key;  // the provider's identity of the event: deduplicates redeliveries
    std::string event_type; // the provider's own word ("payment_intent.succeeded")
    // What it is about: the charge, or a refund (`operation_id` then the refund's, and `outcome`
    // what happened to the refund: failed after succeeded is a late reversal).
    OperationKind kind = OperationKind::charge;
    EvidenceOutcome outcome = EvidenceOutcome::other;
    std::optional<std::string> operation_id; // ours, as the provider echoes it
    std::optional<std::string> provider_reference;
    std::optional<long long> amount_minor; // ISO 4217 minor units
    std::optional<std::string> currency;   // upper case
    std::optional<long long> occurred_at;  // unix seconds, as the provider says
};

// A webhook request as received: the address it was sent to (Square signs it), its headers (names
// in lower case, values exactly as sent) and its raw body.
struct WebhookRequest {
    std::string url;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string_view body;
    std::chrono::system_clock::time_point received_at{};

    // The value of header `name` (lower case), or nullopt; the first if it repeats.
    std::optional<std::string_view> header(std::string_view name) const;
};

struct WebhookVerdict {
    enum class Status {
        verified,      // signed with one of the secrets; `events` holds what it says
        bad_signature, // no signature, a wrong one, or a timestamp outside the tolerance
        malformed,     // signed or not, the body cannot be read (not JSON, too deep, ...)
    };
    Status status = Status::malformed;
    std::vector<WebhookEvent> events;
    std::string reason; // for the sender's answer and the log: never a secret, never the body
};

// Verifies one provider account's notifications with its secret(s) -- several during a rotation,
// any of which may match -- and reads the verified ones. Never throws for anything the request
// holds; compares signatures in constant time.
class WebhookVerifier {
public:
    virtual ~WebhookVerifier() = default;
    virtual WebhookVerdict verify(const WebhookRequest& request) const = 0;
};

} // namespace payrecon
