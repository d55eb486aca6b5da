// Adyen webhook signatures (providers/adyen/webhook.cpp): vectors computed independently (Python's
// hmac and base64 over the escaped fields), per-item verification, escaping, a rotation, and
// bodies that are not notifications -- a 1 MiB maximally nested one among them.

#include "providers/adyen/adapter.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace payrecon;
using namespace payrecon::providers;

namespace {

constexpr const char* k_key = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";
constexpr const char* k_signature = "peIKpTtbO0xJqhyffU6UgfhMM0a5nyL4p4HOAQk6hmc=";
// The same item with merchantReference "a:b\c": escaped as a\:b\\c before signing.
constexpr const char* k_escaped_signature = "pL4R5Ifl62THk6MGIdTKO3+sgFzpZ/UKOPE18BC8xPA=";

nlohmann::json item(const std::string& signature,
                    const std::string& reference = "pr_0193f1c2a9e87b7d4e6f9a1b2c3d4e5f",
                    const std::string& success = "true") {
    return {{"NotificationRequestItem",
             {{"additionalData", {{"hmacSignature", signature}}},
              {"amount", {{"currency", "EUR"}, {"value", 2500}}},
              {"eventCode", "AUTHORISATION"},
              {"eventDate", "2026-12-01T12:00:00+01:00"},
              {"merchantAccountCode", "AcmeShopECOM"},
              {"merchantReference", reference},
              {"originalReference", ""},
              {"pspReference", "QFQTPCQ8HXSKGK82"},
              {"reason", "034461:1111:03/2030"},
              {"success", success}}}};
}

WebhookVerdict verify(const std::vector<Secret>& keys, const std::string& body) {
    WebhookRequest r;
    r.body = body;
    r.received_at = std::chrono::system_clock::now();
    return adyen::webhook_verifier(keys)->verify(r);
}

std::string notification(const std::vector<nlohmann::json>& items) {
    nlohmann::json j = nlohmann::json::object();
    j["live"] = "false";
    j["notificationItems"] = items;
    return j.dump();
}

} // namespace

TEST_CASE("adyen webhook: the independent vectors verify and read as evidence",
          "[providers][adyen][webhook]") {
    const WebhookVerdict v = verify({Secret(k_key)}, notification({item(k_signature)}));
    INFO(v.reason);
    REQUIRE(v.status == WebhookVerdict::Status::verified);
    REQUIRE(v.events.size() == 1);
    const WebhookEvent& e = v.events[0];
    CHECK(e.event_key == "QFQTPCQ8HXSKGK82:AUTHORISATION:true");
    CHECK(e.event_type == "AUTHORISATION");
    CHECK(e.outcome == EvidenceOutcome::succeeded);
    CHECK(e.operation_id == "pr_0193f1c2a9e87b7d4e6f9a1b2c3d4e5f");
    CHECK(e.provider_reference == "QFQTPCQ8HXSKGK82");
    CHECK(e.amount_minor == 2500);
    CHECK(e.currency == "EUR");
    // The key in lower case is the same key; ':' and '\' in a field are escaped before signing.
    CHECK(verify({Secret("44782def547aaa06c910c43932b1eb0c71fc68d9d0c057550c48ec2acf6ba056")},
                 notification({item(k_signature)}))
              .status == WebhookVerdict::Status::verified);
    CHECK(verify({Secret(k_key)}, notification({item(k_escaped_signature, "a:b\\c")})).status ==
          WebhookVerdict::Status::verified);
}

TEST_CASE("adyen webhook: a wrong key, a changed field, a missing signature or one bad item "
          "refuse the whole request",
          "[providers][adyen][webhook]") {
    using S = WebhookVerdict::Status;
    const std::string other = "00" + std::string(k_key).substr(2);
    CHECK(verify({Secret(other)}, notification({item(k_signature)})).status == S::bad_signature);
    // success flipped: a refusal dressed as a charge.
    CHECK(verify({Secret(k_key)},
                 notification({item(k_signature, "pr_0193f1c2a9e87b7d4e6f9a1b2c3d4e5f", "false")}))
              .status == S::bad_signature);
    CHECK(verify({Secret(k_key)}, notification({item("")})).status == S::bad_signature);
    const WebhookVerdict mixed =
        verify({Secret(k_key)}, notification({item(k_signature), item("AAAA")}));
    CHECK(mixed.status == S::bad_signature);
    CHECK(mixed.events.empty());
    CHECK(verify({Secret("not hex")}, notification({item(k_signature)})).status ==
          S::bad_signature);
    // A rotation: any configured key may match.
    CHECK(verify({Secret(other), Secret(k_key)}, notification({item(k_signature)})).status ==
          S::verified);
}

TEST_CASE("adyen webhook: bodies that are not notifications are malformed, a 1 MiB maximally "
          "nested one included",
          "[providers][adyen][webhook][regression]") {
    const std::size_t depth = 512 * 1024;
    for (const std::string& body :
         {std::string(depth, '[') + std::string(depth, ']'), std::string("not json"),
          std::string(R"({"live":"false"})"), std::string(R"({"notificationItems":[]})"),
          std::string(R"({"notificationItems":[{"x":1}]})")}) {
        INFO(body.substr(0, 40));
        const WebhookVerdict v = verify({Secret(k_key)}, body);
        CHECK(v.status == WebhookVerdict::Status::malformed);
        CHECK(v.events.empty());
    }
}

namespace {

// A refund's notification item: the refund's pspReference, the payment's as originalReference,
// the refund's operation ID as merchantReference. Signatures computed independently (Python's
// hmac and base64 over the escaped fields, with k_key).
nlohmann::json refund_item(const std::string& code, const std::string& success,
                           const std::string& signature) {
    return {{"NotificationRequestItem",
             {{"additionalData", {{"hmacSignature", signature}}},
              {"amount", {{"currency", "EUR"}, {"value", 700}}},
              {"eventCode", code},
              {"eventDate", "2026-12-01T12:00:00+01:00"},
              {"merchantAccountCode", "AcmeShopECOM"},
              {"merchantReference", "pr_01a24d44082e74c7aad6770393d3d29c"},
              {"originalReference", "QFQTPCQ8HXSKGK82"},
              {"pspReference", "RFND7QX2M4K9PL0A"},
              {"reason", ""},
              {"success", success}}}};
}

} // namespace

TEST_CASE("adyen webhook: REFUND, REFUND_FAILED and REFUNDED_REVERSED are evidence about the "
          "refund named by their merchantReference",
          "[providers][adyen][webhook][refunds]") {
    struct Row {
        const char* code;
        const char* success;
        const char* signature;
        EvidenceOutcome outcome;
    };
    const Row rows[] = {
        {"REFUND", "true",
         "5Nj7CM9YT2dvwWAGCwYX2g3xJ6FFWsH2JP1WP8cnROw=", EvidenceOutcome::succeeded},
        {"REFUND", "false",
         "jeFbFw5h1RfTZSJF/k9rkWyQqujeWcdGdV2xfg3OS1E=", EvidenceOutcome::failed},
        // After a success: a late reversal (the refund fails, its amount is refundable again).
        {"REFUND_FAILED", "true",
         "WM1p4crCqnOP+WiQ9jfbbPQI3gKVQRA0AJ4RT8o+M34=", EvidenceOutcome::failed},
        {"REFUNDED_REVERSED", "true",
         "lTff3EJ/nB+Wj1BI6htCf0Vf05rFRcZV73XbLEO7UpI=", EvidenceOutcome::failed},
        // A REFUND_FAILED that did not happen says nothing.
        {"REFUND_FAILED", "false",
         "2oFQYGThlMQWWlih8DcncnlGBmtwzLeYaD7+YUfqcps=", EvidenceOutcome::other},
    };
    for (const Row& row : rows) {
        INFO(row.code << " " << row.success);
        const WebhookVerdict v = verify(
            {Secret(k_key)}, notification({refund_item(row.code, row.success, row.signature)}));
        INFO(v.reason);
        REQUIRE(v.status == WebhookVerdict::Status::verified);
        REQUIRE(v.events.size() == 1);
        const WebhookEvent& e = v.events[0];
        CHECK(e.kind == OperationKind::refund);
        CHECK(e.outcome == row.outcome);
        CHECK(e.event_type == row.code);
        CHECK(e.event_key == std::string("RFND7QX2M4K9PL0A:") + row.code + ":" + row.success);
        CHECK(e.operation_id == "pr_01a24d44082e74c7aad6770393d3d29c"); // the refund's
        CHECK(e.provider_reference == "RFND7QX2M4K9PL0A");              // the refund's own
        CHECK(e.amount_minor == 700);
        CHECK(e.currency == "EUR");
    }
    // The signature covers the event code: a REFUND success dressed as a REFUND_FAILED is refused.
    CHECK(verify({Secret(k_key)},
                 notification({refund_item("REFUND_FAILED", "true",
                                           "5Nj7CM9YT2dvwWAGCwYX2g3xJ6FFWsH2JP1WP8cnROw=")}))
              .status == WebhookVerdict::Status::bad_signature);
    // The payment's AUTHORISATION stays about the charge.
    const WebhookVerdict charge = verify({Secret(k_key)}, notification({item(k_signature)}));
    REQUIRE(charge.events.size() == 1);
    CHECK(charge.events[0].kind == OperationKind::charge);
}

namespace {

// A capture's, a cancel's or an expiry's notification item: its own pspReference, the payment's
// as originalReference, its operation ID as merchantReference. Signatures computed independently
// (Python's hmac and base64 over the escaped fields, with k_key).
nlohmann::json modification_item(const std::string& code, const std::string& success,
                                 const std::string& psp, const std::string& reference,
                                 long long value, const std::string& signature) {
    return {{"NotificationRequestItem",
             {{"additionalData", {{"hmacSignature", signature}}},
              {"amount", {{"currency", "EUR"}, {"value", value}}},
              {"eventCode", code},
              {"eventDate", "2026-12-01T12:00:00+01:00"},
              {"merchantAccountCode", "AcmeShopECOM"},
              {"merchantReference", reference},
              {"originalReference", "QFQTPCQ8HXSKGK82"},
              {"pspReference", psp},
              {"reason", ""},
              {"success", success}}}};
}

} // namespace

TEST_CASE("adyen webhook: CAPTURE, CAPTURE_FAILED and CANCELLATION are evidence about the capture "
          "or void named by their merchantReference, EXPIRE about the charge's authorisation",
          "[providers][adyen][webhook][captures]") {
    struct Row {
        const char* code;
        const char* success;
        const char* psp;
        const char* reference;
        long long value;
        const char* signature;
        OperationKind kind;
        EvidenceOutcome outcome;
    };
    const char* capture = "pc_01a24d44082e74c7aad6770393d3d2aa";
    const char* cancel = "pv_01a24d44082e74c7aad6770393d3d2bb";
    const char* authorisation = "pa_01a24d44082e74c7aad6770393d3d2cc";
    const Row rows[] = {
        {"CAPTURE", "true", "CPTR8M2K4Q7XW1ZA", capture, 6000,
         "wSxb2w+zPxXHCsyou8bqYveRqMHBBdY4T806vm6ugsE=", OperationKind::capture,
         EvidenceOutcome::succeeded},
        {"CAPTURE", "false", "CPTR8M2K4Q7XW1ZA", capture, 6000,
         "ai9ATIa0WDaOmHcAbd6QYviSA0REawhBJxe0rJLE1fU=", OperationKind::capture,
         EvidenceOutcome::failed},
        // After a success: a late reversal (the capture fails, what it held is given back).
        {"CAPTURE_FAILED", "true", "CPTR8M2K4Q7XW1ZA", capture, 6000,
         "p0iKLOQyLzsw88nDODwDTauvwTroOh7l6UU2jvLizvo=", OperationKind::capture,
         EvidenceOutcome::failed},
        {"CANCELLATION", "true", "CNCL5T9R3W6YH2PB", cancel, 10000,
         "lhPa54uzVi8C8Gz0V1xDhOJMu8nVgphhNuY3J0AN1wo=", OperationKind::void_authorization,
         EvidenceOutcome::succeeded},
        {"CANCELLATION", "false", "CNCL5T9R3W6YH2PB", cancel, 10000,
         "YZh/4QXVcaKzpdU+T6JSWucG7z1TMSHU7a/hFUIQH5o=", OperationKind::void_authorization,
         EvidenceOutcome::failed},
        // The uncaptured authorisation lapsed: released, as a void releases it.
        {"EXPIRE", "true", "EXPR2L6N8D4F1JQC", authorisation, 10000,
         "OnmM0ggcIMFcn5xO9V8SvE51w8LLadOJ0zKkUo6yKpg=", OperationKind::charge,
         EvidenceOutcome::failed},
        // Kept, never applied: payrecon adjusts no authorisation.
        {"AUTHORISATION_ADJUSTMENT", "true", "ADJT3K7M9P2R5VWX", authorisation, 12000,
         "YYb6Lx1SSTOJfBUqz1kwaFKUPdIzFD1keUGbqHWCaQM=", OperationKind::charge,
         EvidenceOutcome::other},
    };
    for (const Row& row : rows) {
        INFO(row.code << " " << row.success);
        const WebhookVerdict v =
            verify({Secret(k_key)},
                   notification({modification_item(row.code, row.success, row.psp, row.reference,
                                                   row.value, row.signature)}));
        INFO(v.reason);
        REQUIRE(v.status == WebhookVerdict::Status::verified);
        REQUIRE(v.events.size() == 1);
        const WebhookEvent& e = v.events[0];
        CHECK(e.kind == row.kind);
        CHECK(e.outcome == row.outcome);
        CHECK(e.event_type == row.code);
        CHECK(e.event_key == std::string(row.psp) + ":" + row.code + ":" + row.success);
        CHECK(e.operation_id == row.reference);
        CHECK(e.provider_reference == row.psp);
        CHECK(e.amount_minor == row.value);
        CHECK(e.currency == "EUR");
    }
    // The signature covers the event code: a CAPTURE success dressed as CAPTURE_FAILED is refused.
    CHECK(verify({Secret(k_key)}, notification({modification_item(
                                      "CAPTURE_FAILED", "true", "CPTR8M2K4Q7XW1ZA", capture, 6000,
                                      "wSxb2w+zPxXHCsyou8bqYveRqMHBBdY4T806vm6ugsE=")}))
              .status == WebhookVerdict::Status::bad_signature);
}
