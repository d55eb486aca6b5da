// Square webhook signatures (providers/square/webhook.cpp): a vector computed independently (with
// Python's hmac module, not ours) over the notification URL and the body, every way a signature
// can be wrong -- another key, another URL, one byte of the body changed, none --, a key
// rotation, the configuration that needs the URL, and bodies that are signed but not events, a
// 1 MiB maximally nested one among them.

#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "core/fingerprint.hpp"
#include "providers/config.hpp"
#include "providers/square/adapter.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace payrecon;
using namespace payrecon::providers;

namespace {

// python3 -c 'import hmac,hashlib,base64; print(base64.b64encode(hmac.new(KEY, (URL +
//             BODY).encode(), hashlib.sha256).digest()).decode())'
constexpr const char* k_key = "sq_sig_key_9Vq3zL0pX2mA7rT4";
constexpr const char* k_url = "https://payments.example.com/v1/providers/square/webhooks";
constexpr const char* k_body =
    R"({"merchant_id":"6SSW7HV8K2ST5","type":"payment.updated",)"
    R"("event_id":"13b867cf-db3d-4b1c-90b6-2f32a9d78124","created_at":"2026-12-04T10:00:00Z",)"
    R"("data":{"type":"payment","id":"hYy9pRFVxpDsO1FB05SunFWUe9JZY","object":{"payment":)"
    R"({"id":"hYy9pRFVxpDsO1FB05SunFWUe9JZY","status":"COMPLETED",)"
    R"("reference_id":"pr_0190b9a4c1d27a3f8e5b6c7d8e9f0a1b",)"
    R"("amount_money":{"amount":2500,"currency":"EUR"}}}}})";
constexpr const char* k_signature = "SKLLJCHWMGVuS6WOUrT6+qWWt0UEabxakV1YjX3qtwk=";

WebhookRequest request(const std::string& signature, std::string_view body) {
    WebhookRequest r;
    r.headers = {{"content-type", "application/json"},
                 {"x-square-hmacsha256-signature", signature}};
    r.body = body;
    r.received_at = std::chrono::system_clock::now();
    return r;
}

std::string sign(const std::string& key, const std::string& url, std::string_view body) {
    return base64(hmac_sha256(key, url + std::string(body)));
}

} // namespace

TEST_CASE("square webhook: the independent vector verifies and reads as evidence",
          "[providers][square][webhook]") {
    CHECK(sign(k_key, k_url, k_body) == k_signature);
    const auto verifier = square::webhook_verifier({Secret(k_key)}, k_url);
    const WebhookVerdict v = verifier->verify(request(k_signature, k_body));
    REQUIRE(v.status == WebhookVerdict::Status::verified);
    REQUIRE(v.events.size() == 1);
    const WebhookEvent& e = v.events[0];
    CHECK(e.event_key == "13b867cf-db3d-4b1c-90b6-2f32a9d78124");
    CHECK(e.event_type == "payment.updated");
    CHECK(e.outcome == EvidenceOutcome::succeeded);
    CHECK(e.operation_id == "pr_0190b9a4c1d27a3f8e5b6c7d8e9f0a1b");
    CHECK(e.provider_reference == "hYy9pRFVxpDsO1FB05SunFWUe9JZY");
    CHECK(e.amount_minor == 2500);
    CHECK(e.currency == "EUR");
}

TEST_CASE("square webhook: another key, another URL, a byte of the body changed or no signature "
          "are refused, and a rotated key verifies",
          "[providers][square][webhook]") {
    const auto verifier = square::webhook_verifier({Secret(k_key)}, k_url);
    const auto status = [&](const std::string& signature, std::string_view body) {
        return verifier->verify(request(signature, body)).status;
    };
    using S = WebhookVerdict::Status;
    CHECK(status(sign("another_key", k_url, k_body), k_body) == S::bad_signature);
    // Signed for the address serve sees behind a proxy, not the one registered with Square.
    CHECK(status(sign(k_key, "http://10.0.0.5:8080/v1/providers/square/webhooks", k_body),
                 k_body) == S::bad_signature);
    std::string altered = k_body;
    altered[altered.find("2500") + 1] = '6';
    CHECK(status(k_signature, altered) == S::bad_signature);
    CHECK(status("", k_body) == S::bad_signature);
    WebhookRequest none;
    none.body = k_body;
    CHECK(verifier->verify(none).status == S::bad_signature);

    const auto rotating = square::webhook_verifier({Secret("the_next_key"), Secret(k_key)}, k_url);
    CHECK(rotating->verify(request(k_signature, k_body)).status == S::verified);
    CHECK(rotating->verify(request(sign("the_next_key", k_url, k_body), k_body)).status ==
          S::verified);
}

TEST_CASE("square webhook: statuses as the adapter reads them, other events kept, and signed "
          "bodies that are not events refused without a crash",
          "[providers][square][webhook]") {
    const auto verifier = square::webhook_verifier({Secret(k_key)}, k_url);
    const auto event_with = [&](const std::string& type, const std::string& status) {
        const std::string body =
            nlohmann::json{
                {"type", type},
                {"event_id", "e-" + status},
                {"data",
                 {{"object",
                   {{"payment", {{"id", "p1"}, {"status", status}, {"reference_id", "pr_x"}}}}}}}}
                .dump();
        const auto v = verifier->verify(request(sign(k_key, k_url, body), body));
        REQUIRE(v.status == WebhookVerdict::Status::verified);
        return v.events.at(0).outcome;
    };
    CHECK(event_with("payment.updated", "FAILED") == EvidenceOutcome::failed);
    CHECK(event_with("payment.updated", "CANCELED") == EvidenceOutcome::failed);
    CHECK(event_with("payment.created", "APPROVED") == EvidenceOutcome::pending);
    CHECK(event_with("payment.created", "PENDING") == EvidenceOutcome::pending);
    // A refund's event without a PaymentRefund says nothing.
    CHECK(event_with("refund.updated", "COMPLETED") == EvidenceOutcome::other);

    for (const std::string& body :
         {std::string("not json"), std::string(R"({"type":"payment.updated"})"),
          std::string(512 * 1024, '[') + std::string(512 * 1024, ']')}) {
        CHECK(verifier->verify(request(sign(k_key, k_url, body), body)).status ==
              WebhookVerdict::Status::malformed);
    }
}

TEST_CASE("square webhook: webhook_secret_env without the webhook_url it signs is refused, naming "
          "the field",
          "[providers][square][webhook][config]") {
    nlohmann::json entry = {{"kind", "square"},
                            {"base_url", "https://connect.squareup.com"},
                            {"api_key_env", "SQUARE_TEST_TOKEN"},
                            {"webhook_secret_env", "SQUARE_TEST_SIGNATURE_KEY"}};
    const auto load = [&] {
        return parse_config(nlohmann::json{{"providers", {{"square", entry}}}}.dump(),
                            "providers.json",
                            [](const char*) -> const char* { return "EAAAtoken12345678"; });
    };
    try {
        load();
        FAIL("a square webhook without its webhook_url was accepted");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find("providers.square.webhook_url") != std::string::npos);
    }
    entry["webhook_url"] = k_url;
    CHECK(load().providers.at("square").webhook_url == k_url);
    entry["webhook_url"] = "http://payments.example.com/hook";
    CHECK_THROWS_AS(load(), ConfigError); // https only, but for loopback tests
}

TEST_CASE("square webhook: a refund's events are evidence about the refund, by the operation ID "
          "its reason carries",
          "[providers][square][webhook][refunds]") {
    const auto verifier = square::webhook_verifier({Secret(k_key)}, k_url);
    const auto refund_event = [&](const std::string& type, const std::string& status) {
        const std::string body =
            nlohmann::json{
                {"type", type},
                {"event_id", "r-" + type + status},
                {"data",
                 {{"type", "refund"},
                  {"object",
                   {{"refund",
                     {{"id", "rf_1"},
                      {"status", status},
                      {"payment_id", "p1"},
                      {"reason", "requested_by_customer [pr_0190b9a4c1d27a3f8e5b6c7d8e9f0a1c]"},
                      {"amount_money", {{"amount", 700}, {"currency", "EUR"}}}}}}}}}}
                .dump();
        const auto v = verifier->verify(request(sign(k_key, k_url, body), body));
        REQUIRE(v.status == WebhookVerdict::Status::verified);
        return v.events.at(0);
    };
    const WebhookEvent done = refund_event("refund.updated", "COMPLETED");
    CHECK(done.kind == OperationKind::refund);
    CHECK(done.outcome == EvidenceOutcome::succeeded);
    CHECK(done.operation_id == "pr_0190b9a4c1d27a3f8e5b6c7d8e9f0a1c");
    CHECK(done.provider_reference == "rf_1");
    CHECK(done.amount_minor == 700);
    CHECK(done.currency == "EUR");
    CHECK(refund_event("refund.created", "PENDING").outcome == EvidenceOutcome::pending);
    CHECK(refund_event("refund.updated", "REJECTED").outcome == EvidenceOutcome::failed);
    // FAILED after COMPLETED: the late reversal the reconciler checks with the refund lookup.
    CHECK(refund_event("refund.updated", "FAILED").outcome == EvidenceOutcome::failed);
}
