#pragma once
// Receiving a provider's webhook (DESIGN section 14): verify the signature with the account's
// secrets, store what a verified notification says (once per event identity), and answer at once;
// interpretation is the reconciler's, later, never in the provider's 10-second budget.

#include "core/webhook.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace payrecon::store {
class Db;
}

namespace payrecon {

struct WebhookReceipt {
    WebhookVerdict::Status status = WebhookVerdict::Status::malformed;
    std::string reason;         // why it was refused (never a secret, never the body)
    std::size_t events = 0;     // events the notification carries
    std::size_t new_events = 0; // of which stored for the first time (the rest: redeliveries)
    std::size_t unmatched = 0;  // of which name no payment of ours
};

// Stores what a verified notification of `provider` says (`verdict`, from its verifier; a verdict
// that did not verify stores nothing) with its raw `body`. Throws DatabaseUnavailable.
WebhookReceipt record_webhook(store::Db& db, const std::string& provider, WebhookVerdict verdict,
                              std::string_view body);

// Verifies `request` with `verifier` and records it (record_webhook). Throws DatabaseUnavailable.
WebhookReceipt receive_webhook(store::Db& db, const std::string& provider,
                               const WebhookVerifier& verifier, const WebhookRequest& request);

} // namespace payrecon
