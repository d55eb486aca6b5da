// Checkout.com webhook signatures (providers/checkout/webhook.cpp): a vector computed
// independently (Python's hmac over the raw body), a rotation, every way a signature can be wrong,
// what each event type is evidence of, and bodies that are not events -- a 1 MiB maximally nested
// one among them.

#include "core/fingerprint.hpp"
#include "providers/checkout/adapter.hpp"

#include <catch2/catch.hpp>
#include <string>

using namespace payrecon;
using namespace payrecon::providers;

namespace {

constexpr const char* k_key = "cko_webhook_test_key_not_a_secret_0001";
// python3: hmac.new(key.encode(), body.encode(), hashlib.sha256).hexdigest()
constexpr const char* k_signature =
    "489aa3ee19dcc40e0fc3fae7599037440c9d7e87c190128e06d7a4a8a7a53ab8";
const std::string k_body =
    R"({"id":"evt_az5sblvku4ge3dwpztvyizgcau","type":"payment_captured","version":"1.0.33",)"
    R"("created_on":"2026-12-02T10:00:05Z","data":{"id":"pay_mbabizu24mvu3mela5njyhpit4",)"
    R"("action_id":"act_2f3ny3lotfwerfzyw2rgoqnqvq","amount":4999,"currency":"EUR",)"
    R"("reference":"pr_0123456789abcdef0123456789abcdef","response_code":"10000",)"
    R"("response_summary":"Approved","processed_on":"2026-12-02T10:00:04Z"},"_links":{"self":)"
    R"({"href":"https://api.sandbox.checkout.com/workflows/events/evt_az5sblvku4ge3dwpztvyizgcau"}}})";

WebhookVerdict verify(const std::vector<Secret>& keys, const std::string& body,
                      std::optional<std::string> signature) {
    WebhookRequest r;
    r.body = body;
    if (signature) {
        r.headers.emplace_back("cko-signature", *signature);
    }
    r.received_at = std::chrono::system_clock::now();
    return checkout::webhook_verifier(keys)->verify(r);
}

std::string signed_hex(const std::string& key, const std::string& body) {
    return to_hex(hmac_sha256(key, body));
}
} // namespace

TEST_CASE("checkout webhook: the independent vector verifies and reads as evidence",
          "[providers][checkout][webhook]") {
    const WebhookVerdict v = verify({Secret(k_key)}, k_body, std::string(k_signature));
    INFO(v.reason);
    REQUIRE(v.status == WebhookVerdict::Status::verified);
    REQUIRE(v.events.size() == 1);
    const WebhookEvent& e = v.events[0];
    CHECK(e.event_key == "evt_az5sblvku4ge3dwpztvyizgcau");
    CHECK(e.event_type == "payment_captured");
    CHECK(e.outcome == EvidenceOutcome::succeeded);
    CHECK(e.operation_id == "pr_0123456789abcdef0123456789abcdef");
    CHECK(e.provider_reference == "pay_mbabizu24mvu3mela5njyhpit4");
    CHECK(e.amount_minor == 4999);
    CHECK(e.currency == "EUR");
    CHECK(e.occurred_at == 1796205605);
    // Upper-case hex is the same signature; during a rotation either key verifies.
    std::string upper = k_signature;
    for (char& c : upper) {
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    CHECK(verify({Secret("old_key_000000000000"), Secret(k_key)}, k_body, upper).status ==
          WebhookVerdict::Status::verified);
}

TEST_CASE("checkout webhook: a wrong key, a changed body, or a missing or cut signature do not "
          "verify",
          "[providers][checkout][webhook]") {
    CHECK(verify({Secret("another_key_0000000000")}, k_body, std::string(k_signature)).status ==
          WebhookVerdict::Status::bad_signature);
    std::string altered = k_body;
    altered.replace(altered.find("4999"), 4, "4998");
    CHECK(verify({Secret(k_key)}, altered, std::string(k_signature)).status ==
          WebhookVerdict::Status::bad_signature);
    CHECK(verify({Secret(k_key)}, k_body, std::nullopt).status ==
          WebhookVerdict::Status::bad_signature);
    CHECK(verify({Secret(k_key)}, k_body, std::string("")).status ==
          WebhookVerdict::Status::bad_signature);
    CHECK(verify({Secret(k_key)}, k_body, std::string(k_signature).substr(0, 63)).status ==
          WebhookVerdict::Status::bad_signature);
    CHECK(verify({}, k_body, std::string(k_signature)).status ==
          WebhookVerdict::Status::bad_signature);
}

TEST_CASE("checkout webhook: each payment event type is the evidence it says, others are kept",
          "[providers][checkout][webhook]") {
    const auto outcome = [](const std::string& type) {
        const std::string body =
            R"({"id":"evt_1","type":")" + type +
            R"(","data":{"id":"pay_1","amount":500000,"currency":"CLP","reference":"op-1"}})";
        const WebhookVerdict v = verify({Secret(k_key)}, body, signed_hex(k_key, body));
        REQUIRE(v.status == WebhookVerdict::Status::verified);
        REQUIRE(v.events.size() == 1);
        // CLP goes in hundredths at Checkout.com: 500000 is CLP 5000, ISO minor units 5000.
        CHECK(v.events[0].amount_minor == 5000);
        return v.events[0].outcome;
    };
    CHECK(outcome("payment_approved") == EvidenceOutcome::succeeded);
    CHECK(outcome("payment_captured") == EvidenceOutcome::succeeded);
    CHECK(outcome("payment_paid") == EvidenceOutcome::succeeded);
    CHECK(outcome("payment_declined") == EvidenceOutcome::failed);
    CHECK(outcome("payment_canceled") == EvidenceOutcome::failed);
    CHECK(outcome("payment_expired") == EvidenceOutcome::failed);
    CHECK(outcome("payment_pending") == EvidenceOutcome::pending);
    CHECK(outcome("dispute_received") == EvidenceOutcome::other);
}

TEST_CASE("checkout webhook: a refund's events are evidence about the refund, by its action and "
          "the reference its request carried",
          "[providers][checkout][webhook][refunds]") {
    const auto event = [](const std::string& type) {
        const std::string body =
            R"({"id":"evt_r","type":")" + type +
            R"(","data":{"id":"pay_1","action_id":"act_refund_1","amount":1500,)"
            R"("currency":"EUR","reference":"pr_refund_op"}})";
        const WebhookVerdict v = verify({Secret(k_key)}, body, signed_hex(k_key, body));
        REQUIRE(v.status == WebhookVerdict::Status::verified);
        REQUIRE(v.events.size() == 1);
        return v.events[0];
    };
    const WebhookEvent refunded = event("payment_refunded");
    CHECK(refunded.kind == OperationKind::refund);
    CHECK(refunded.outcome == EvidenceOutcome::succeeded);
    CHECK(refunded.provider_reference == "act_refund_1");
    CHECK(refunded.operation_id == "pr_refund_op");
    CHECK(refunded.amount_minor == 1500);
    CHECK(event("payment_refund_declined").outcome == EvidenceOutcome::failed);
    CHECK(event("payment_refund_declined").kind == OperationKind::refund);
    CHECK(event("payment_refund_pending").outcome == EvidenceOutcome::pending);
    // The charge's own events stay the charge's.
    CHECK(event("payment_captured").kind == OperationKind::charge);
    CHECK(event("payment_captured").provider_reference == "pay_1");
}

TEST_CASE("checkout webhook: signed bodies that are not events are malformed, a 1 MiB maximally "
          "nested one included",
          "[providers][checkout][webhook]") {
    for (const std::string& body :
         {std::string("not json"), std::string("[]"), std::string(R"({"id":"evt_1"})"),
          std::string(R"({"id":"evt_1","type":"payment_captured","data":[]})"),
          std::string(R"({"id":7,"type":"payment_captured","data":{}})"),
          std::string(1 << 19, '[') + std::string(1 << 19, ']')}) {
        const WebhookVerdict v = verify({Secret(k_key)}, body, signed_hex(k_key, body));
        CHECK(v.status == WebhookVerdict::Status::malformed);
        CHECK(v.events.empty());
    }
}
