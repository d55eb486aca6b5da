#pragma once
// Stripe events as the provider sends them, signed with an endpoint secret and received as serve
// receives them (services/webhooks with Stripe's own verifier): what the webhook evidence tests
// deliver.
#include "core/encoding.hpp"
#include "core/fingerprint.hpp"
#include "providers/stripe/adapter.hpp"
#include "services/webhooks.hpp"
#include "tests/support/test_db.hpp"

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

namespace payrecon::testing {

inline const std::string k_stripe_webhook_secret = "whsec_evidence_test_secret_0123456789ab";

// An event of `type` about `object` (a PaymentIntent, a Refund), created now.
inline std::string stripe_event(const std::string& type, const nlohmann::json& object) {
    return nlohmann::json{{"id", unique_name("evt")},
                          {"object", "event"},
                          {"type", type},
                          {"created", std::time(nullptr)},
                          {"data", {{"object", object}}}}
        .dump();
}

// Receives `body` for provider `provider` as serve does: signed now with the test secret,
// verified by Stripe's verifier, stored.
inline WebhookReceipt deliver_stripe(store::Db& db, const std::string& provider,
                                     const std::string& body) {
    const long long t = std::time(nullptr);
    WebhookRequest r;
    r.headers = {{"stripe-signature", "t=" + std::to_string(t) + ",v1=" +
                                          to_hex(hmac_sha256(k_stripe_webhook_secret,
                                                             std::to_string(t) + "." + body))}};
    r.body = body;
    r.received_at = std::chrono::system_clock::now();
    const auto verifier = providers::stripe::webhook_verifier({Secret(k_stripe_webhook_secret)});
    return receive_webhook(db, provider, *verifier, r);
}

} // namespace payrecon::testing
