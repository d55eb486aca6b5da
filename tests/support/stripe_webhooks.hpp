#pragma once
// Stripe events as the provider sends them, signed with an endpoint secret and received as serve
// receives them (services/webhooks with Stripe's own verifier): what the webhook evidence tests
// deliver; and a refund's event in each refunding kind's own shape and signature.
#include "core/encoding.hpp"
#include "core/fingerprint.hpp"
#include "providers/checkout/adapter.hpp"
#include "providers/square/adapter.hpp"
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

// A refund's event as its provider kind sends it -- Stripe's refund.updated, Square's
// refund.updated, Checkout.com's payment_refunded / payment_refund_declined -- about the provider's
// refund `reference` of `amount` EUR cents under our operation ID `operation_id`, refunded
// (`succeeded`) or not, signed and received as serve receives it for provider `provider`.
inline WebhookReceipt deliver_refund_event(store::Db& db, const std::string& kind,
                                           const std::string& provider,
                                           const std::string& reference,
                                           const std::string& operation_id, long long amount,
                                           bool succeeded) {
    WebhookRequest r;
    r.received_at = std::chrono::system_clock::now();
    std::string body;
    if (kind == "square") {
        const std::string url = "https://payrecon.test/v1/providers/square/webhooks";
        body =
            nlohmann::json{{"type", "refund.updated"},
                           {"event_id", unique_name("sqevt")},
                           {"data",
                            {{"type", "refund"},
                             {"object",
                              {{"refund",
                                {{"id", reference},
                                 {"status", succeeded ? "COMPLETED" : "FAILED"},
                                 {"reason", "requested_by_customer [" + operation_id + "]"},
                                 {"amount_money", {{"amount", amount}, {"currency", "EUR"}}}}}}}}}}
                .dump();
        r.headers = {{"x-square-hmacsha256-signature",
                      base64(hmac_sha256(k_stripe_webhook_secret, url + body))}};
        r.body = body;
        return receive_webhook(
            db, provider,
            *providers::square::webhook_verifier({Secret(k_stripe_webhook_secret)}, url), r);
    }
    if (kind == "checkout") {
        body = nlohmann::json{{"id", unique_name("evt")},
                              {"type", succeeded ? "payment_refunded" : "payment_refund_declined"},
                              {"data",
                               {{"id", "pay_of_refund"},
                                {"action_id", reference},
                                {"reference", operation_id},
                                {"amount", amount},
                                {"currency", "EUR"}}}}
                   .dump();
        r.headers = {{"cko-signature", to_hex(hmac_sha256(k_stripe_webhook_secret, body))}};
        r.body = body;
        return receive_webhook(
            db, provider, *providers::checkout::webhook_verifier({Secret(k_stripe_webhook_secret)}),
            r);
    }
    body = stripe_event("refund.updated", {{"id", reference},
                                           {"object", "refund"},
                                           {"amount", amount},
                                           {"currency", "eur"},
                                           {"status", succeeded ? "succeeded" : "failed"},
                                           {"metadata", {{"operation_id", operation_id}}}});
    return deliver_stripe(db, provider, body);
}

} // namespace payrecon::testing
