// Stripe webhook signatures (providers/stripe/webhook.cpp): a vector computed independently (with
// Python's hmac module, not ours), every way a signature can be wrong, a rotation, and bodies that
// are signed but not events -- a 1 MiB maximally nested one among them, refused without a crash.

#include "core/fingerprint.hpp"
#include "providers/stripe/adapter.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;
using namespace payrecon::providers;

namespace {

// python3 -c 'import hmac,hashlib; print(hmac.new(SECRET, (T + "." + BODY).encode(),
//             hashlib.sha256).hexdigest())'
constexpr const char* k_secret = "whsec_3f1Zc2aLrT8qN0vXy6BdP4mW9kJhGe7s";
constexpr long long k_t = 1796126400;
constexpr const char* k_body =
    R"({"id":"evt_1QaBcD2eFgHiJkLm","object":"event","type":"payment_intent.succeeded",)"
    R"("created":1796126399,"data":{"object":{"id":"pi_3QaBcD2eFgHiJkLm0Xyz",)"
    R"("object":"payment_intent","amount":2500,"currency":"eur","status":"succeeded",)"
    R"("metadata":{"operation_id":"pr_0193f1c2a9e87b7d4e6f9a1b2c3d4e5f",)"
    R"("merchant_reference":"order-1001"}}},"request":{"id":"req_x",)"
    R"("idempotency_key":"pr_0193f1c2a9e87b7d4e6f9a1b2c3d4e5f"}})";
constexpr const char* k_signature =
    "5a7bbbf0e4131be0c3e2f1baffa4eb8471594cb2f22691b969f82d7d97d5dccc";

WebhookRequest request(const std::string& signature_header, std::string_view body,
                       long long now = k_t + 5) {
    WebhookRequest r;
    r.headers = {{"content-type", "application/json"}, {"stripe-signature", signature_header}};
    r.body = body;
    r.received_at = std::chrono::system_clock::time_point(std::chrono::seconds(now));
    return r;
}

std::string header(long long t, const std::string& v1) {
    return "t=" + std::to_string(t) + ",v1=" + v1;
}

std::string sign(const std::string& secret, long long t, std::string_view body) {
    return to_hex(hmac_sha256(secret, std::to_string(t) + "." + std::string(body)));
}

} // namespace

TEST_CASE("stripe webhook: the independent vector verifies and reads as evidence",
          "[providers][stripe][webhook]") {
    CHECK(sign(k_secret, k_t, k_body) == k_signature);
    const auto verifier = stripe::webhook_verifier({Secret(k_secret)});
    const WebhookVerdict v = verifier->verify(request(header(k_t, k_signature), k_body));
    INFO(v.reason);
    REQUIRE(v.status == WebhookVerdict::Status::verified);
    REQUIRE(v.events.size() == 1);
    const WebhookEvent& e = v.events[0];
    CHECK(e.event_key == "evt_1QaBcD2eFgHiJkLm");
    CHECK(e.event_type == "payment_intent.succeeded");
    CHECK(e.outcome == EvidenceOutcome::succeeded);
    CHECK(e.operation_id == "pr_0193f1c2a9e87b7d4e6f9a1b2c3d4e5f");
    CHECK(e.provider_reference == "pi_3QaBcD2eFgHiJkLm0Xyz");
    CHECK(e.amount_minor == 2500);
    CHECK(e.currency == "EUR");
    CHECK(e.occurred_at == 1796126399);
}

TEST_CASE("stripe webhook: a wrong secret, an altered byte, a stale or future timestamp, or no "
          "signature do not verify",
          "[providers][stripe][webhook]") {
    const auto verifier = stripe::webhook_verifier({Secret(k_secret)});
    const auto status = [&](const WebhookRequest& r) { return verifier->verify(r).status; };
    using S = WebhookVerdict::Status;
    std::string altered = k_body;
    altered[altered.find("2500")] = '3';
    CHECK(status(request(header(k_t, k_signature), altered)) == S::bad_signature);
    CHECK(status(request(header(k_t, sign("whsec_another_secret_of_the_same_length", k_t, k_body)),
                         k_body)) == S::bad_signature);
    // Signed correctly, but 301 s away from our clock either way; 300 s is still inside.
    CHECK(status(request(header(k_t, k_signature), k_body, k_t + 301)) == S::bad_signature);
    CHECK(status(request(header(k_t, k_signature), k_body, k_t - 301)) == S::bad_signature);
    CHECK(status(request(header(k_t, k_signature), k_body, k_t + 300)) == S::verified);
    // The timestamp is part of what is signed: moving it breaks the signature.
    CHECK(status(request(header(k_t + 1, k_signature), k_body)) == S::bad_signature);
    CHECK(status(request("", k_body)) == S::bad_signature);
    CHECK(status(request("v1=" + std::string(k_signature), k_body)) == S::bad_signature);
    CHECK(status(request("t=" + std::to_string(k_t), k_body)) == S::bad_signature);
    CHECK(status(request("t=-5,v1=" + std::string(k_signature), k_body)) == S::bad_signature);
    WebhookRequest none = request(header(k_t, k_signature), k_body);
    none.headers.pop_back();
    const WebhookVerdict v = verifier->verify(none);
    CHECK(v.status == S::bad_signature);
    CHECK(v.reason == "no Stripe-Signature header");
    CHECK(v.events.empty());
}

TEST_CASE("stripe webhook: any v1 may match any configured secret (a rotation)",
          "[providers][stripe][webhook]") {
    const std::string next = "whsec_the_next_secret_after_rotation_0001";
    const auto old_only = stripe::webhook_verifier({Secret(k_secret)});
    const auto both = stripe::webhook_verifier({Secret(k_secret), Secret(next)});
    const std::string by_next = sign(next, k_t, k_body);
    // Stripe signs with both secrets while one is rolled: two v1 values.
    const std::string two = "t=" + std::to_string(k_t) + ",v1=" + by_next + ",v1=" + k_signature;
    CHECK(old_only->verify(request(two, k_body)).status == WebhookVerdict::Status::verified);
    CHECK(both->verify(request(header(k_t, by_next), k_body)).status ==
          WebhookVerdict::Status::verified);
    CHECK(old_only->verify(request(header(k_t, by_next), k_body)).status ==
          WebhookVerdict::Status::bad_signature);
}

TEST_CASE("stripe webhook: signed bodies that are not events are malformed, a 1 MiB maximally "
          "nested one included, without recursing over it",
          "[providers][stripe][webhook][regression]") {
    const auto verifier = stripe::webhook_verifier({Secret(k_secret)});
    const std::size_t depth = 512 * 1024; // 1 MiB of brackets
    const std::string deep = std::string(depth, '[') + std::string(depth, ']');
    const std::string deep_objects = [] {
        std::string s;
        for (int i = 0; i < 100000; ++i) {
            s += "{\"a\":";
        }
        s += "1";
        s += std::string(100000, '}');
        return s;
    }();
    for (const std::string& body : {deep, deep_objects, std::string("not json"),
                                    std::string(R"({"type":"x"})"), std::string("[]")}) {
        INFO(body.substr(0, 40) << " (" << body.size() << " bytes)");
        const WebhookVerdict v =
            verifier->verify(request(header(k_t, sign(k_secret, k_t, body)), body));
        CHECK(v.status == WebhookVerdict::Status::malformed);
        CHECK(v.events.empty());
    }
}

TEST_CASE("stripe webhook: events other than a PaymentIntent's are kept as other, and statuses map "
          "as lookups map them",
          "[providers][stripe][webhook]") {
    const auto verifier = stripe::webhook_verifier({Secret(k_secret)});
    const auto event = [&](const std::string& body) {
        const WebhookVerdict v =
            verifier->verify(request(header(k_t, sign(k_secret, k_t, body)), body));
        REQUIRE(v.status == WebhookVerdict::Status::verified);
        return v.events.at(0);
    };
    const auto intent = [](const std::string& type, const std::string& status) {
        return R"({"id":"evt_)" + type + status + R"(","type":")" + type +
               R"(","data":{"object":{"id":"pi_1","object":"payment_intent","amount":199,)"
               R"("currency":"usd","status":")" +
               status + R"(","metadata":{}}},"request":{"idempotency_key":"pr_k"}})";
    };
    CHECK(event(intent("payment_intent.payment_failed", "requires_payment_method")).outcome ==
          EvidenceOutcome::failed);
    CHECK(event(intent("payment_intent.canceled", "canceled")).outcome == EvidenceOutcome::failed);
    CHECK(event(intent("payment_intent.processing", "processing")).outcome ==
          EvidenceOutcome::pending);
    const WebhookEvent from_key = event(intent("payment_intent.succeeded", "succeeded"));
    CHECK(from_key.operation_id == "pr_k"); // no metadata: the creating request's key
    CHECK(from_key.amount_minor == 199);
    const WebhookEvent charge = event(
        R"({"id":"evt_c","type":"charge.refunded","data":{"object":{"id":"ch_1","object":"charge"}}})");
    CHECK(charge.outcome == EvidenceOutcome::other);
    CHECK_FALSE(charge.operation_id.has_value());
}
