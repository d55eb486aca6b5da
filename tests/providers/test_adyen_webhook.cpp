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
