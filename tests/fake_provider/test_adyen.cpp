// The fake provider's Adyen dialect over real HTTP on loopback: refunds
// (POST /v71/payments/{pspReference}/refunds) on the shared ledger -- always answered 201 received,
// the outcome told by the signed REFUND notification, under the same keys and faults as Adyen's
// payments -- and the REFUND_FAILED a reversed refund's seed sends.
#include "core/encoding.hpp"
#include "core/fingerprint.hpp"
#include "tests/fake_provider/test_client.hpp"
#include "tests/support/receiver.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using namespace payrecon;
using namespace payrecon::fake;
using namespace payrecon::fake::test;
using namespace payrecon::testing;
using Json = nlohmann::json;

namespace {

const std::string k_hmac_key = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";

std::vector<std::string> headers(const std::string& key) {
    std::vector<std::string> h{"X-API-Key: " + std::string(k_api_key),
                               "Content-Type: application/json"};
    if (!key.empty()) {
        h.push_back("Idempotency-Key: " + key);
    }
    return h;
}

// A payment as the adyen adapter sends it; returns its pspReference.
std::string charge(const Running& r, const std::string& op, long amount = 2500) {
    const Json body = {{"amount", {{"currency", "EUR"}, {"value", amount}}},
                       {"reference", op},
                       {"merchantAccount", "AcmeShopECOM"},
                       {"paymentMethod", {{"type", "scheme"}, {"storedPaymentMethodId", "8415"}}},
                       {"shopperInteraction", "ContAuth"},
                       {"recurringProcessingModel", "UnscheduledCardOnFile"},
                       {"returnUrl", "https://shop.example.com/return"}};
    const HttpResult res = call("POST", r.url("/v71/payments"), headers(op), body.dump(), 5000);
    REQUIRE(res.status == 200);
    REQUIRE(res.json()["resultCode"] == "Authorised");
    return res.json()["pspReference"].get<std::string>();
}

HttpResult refund(const Running& r, const std::string& psp, const std::string& op, long amount,
                  const std::string& key = "") {
    const Json body = {{"merchantAccount", "AcmeShopECOM"},
                       {"amount", {{"currency", "EUR"}, {"value", amount}}},
                       {"reference", op},
                       {"merchantRefundReason", "CUSTOMER REQUEST"}};
    return call("POST", r.url("/v71/payments/" + psp + "/refunds"), headers(key.empty() ? op : key),
                body.dump(), 5000);
}

long long refunded_eur(const Running& r) {
    const Json l = r.ledger();
    return l.contains("refunded") && l["refunded"].contains("eur")
               ? l["refunded"]["eur"].get<long long>()
               : 0;
}

// The notification items received so far, each checked against its hmacSignature as Adyen signs.
std::vector<Json> items(const Receiver& rx) {
    std::vector<Json> out;
    for (const Received& got : rx.received()) {
        const Json body = Json::parse(got.body);
        for (const Json& wrapper : body["notificationItems"]) {
            const Json& i = wrapper["NotificationRequestItem"];
            const std::string payload = i["pspReference"].get<std::string>() + ":" +
                                        i["originalReference"].get<std::string>() + ":" +
                                        i["merchantAccountCode"].get<std::string>() + ":" +
                                        i["merchantReference"].get<std::string>() + ":" +
                                        std::to_string(i["amount"]["value"].get<long long>()) +
                                        ":" + i["amount"]["currency"].get<std::string>() + ":" +
                                        i["eventCode"].get<std::string>() + ":" +
                                        i["success"].get<std::string>();
            CHECK(i["additionalData"]["hmacSignature"] ==
                  base64(hmac_sha256(*from_hex(k_hmac_key), payload)));
            out.push_back(i);
        }
    }
    return out;
}

struct WithHooks {
    WithHooks() {
        WebhookOptions hooks;
        hooks.url = rx.url("/adyen");
        hooks.secret = k_hmac_key;
        r.server.set_webhooks(hooks);
    }
    Receiver rx;
    Running r;
    std::vector<Json> notifications() {
        REQUIRE(r.server.wait_webhooks_idle(std::chrono::seconds(10)));
        return items(rx);
    }
};

} // namespace

TEST_CASE("adyen fake: a refund is received (201) once under its key, recorded in the ledger, "
          "and told by a signed REFUND success true",
          "[fake_provider][adyen][refunds]") {
    WithHooks h;
    const std::string psp = charge(h.r, "op-pay");
    const HttpResult first = refund(h.r, psp, "op-ref", 700);
    REQUIRE(first.status == 201);
    const Json a = first.json();
    CHECK(a["status"] == "received");
    CHECK(a["paymentPspReference"] == psp);
    CHECK(a["reference"] == "op-ref");
    CHECK(a["merchantAccount"] == "AcmeShopECOM");
    CHECK(a["amount"] == Json{{"currency", "EUR"}, {"value", 700}});
    const std::string refund_psp = a["pspReference"];
    CHECK(refund_psp.size() == 16);
    CHECK(refund_psp != psp);
    // The same key and body replay the answer; nothing is refunded twice.
    const HttpResult again = refund(h.r, psp, "op-ref", 700);
    CHECK(again.status == 201);
    CHECK(again.body == first.body);
    CHECK(h.r.executions("op-ref") == 1);
    CHECK(h.r.ledger()["deliveries_by_operation"]["op-ref"] == 2);
    CHECK(refunded_eur(h.r) == 700);

    const auto n = h.notifications();
    std::vector<Json> refunds;
    for (const Json& i : n) {
        if (i["eventCode"] == "REFUND") {
            refunds.push_back(i);
        }
    }
    REQUIRE(refunds.size() == 1);
    CHECK(refunds[0]["success"] == "true");
    CHECK(refunds[0]["pspReference"] == refund_psp);
    CHECK(refunds[0]["originalReference"] == psp);
    CHECK(refunds[0]["merchantReference"] == "op-ref");
    CHECK(refunds[0]["amount"] == Json{{"currency", "EUR"}, {"value", 700}});
}

TEST_CASE("adyen fake: a refund past what is left is received but refunds nothing, and its "
          "REFUND says success false, and an unknown payment or key is refused",
          "[fake_provider][adyen][refunds]") {
    WithHooks h;
    const std::string psp = charge(h.r, "op-pay", 1000);
    REQUIRE(refund(h.r, psp, "op-1", 600).status == 201);
    const HttpResult over = refund(h.r, psp, "op-2", 500); // 400 left
    REQUIRE(over.status == 201);
    CHECK(over.json()["status"] == "received");
    CHECK(h.r.executions("op-2") == 0);
    CHECK(refunded_eur(h.r) == 600);
    // What is left can still be refunded.
    REQUIRE(refund(h.r, psp, "op-3", 400).status == 201);
    CHECK(refunded_eur(h.r) == 1000);
    std::map<std::string, std::string> success;
    for (const Json& i : h.notifications()) {
        if (i["eventCode"] == "REFUND") {
            success[i["merchantReference"]] = i["success"];
        }
    }
    CHECK(success == std::map<std::string, std::string>{
                         {"op-1", "true"}, {"op-2", "false"}, {"op-3", "true"}});

    // Nothing executes for an unknown payment, a body without an amount, a wrong key.
    const HttpResult unknown = refund(h.r, "ZZZZZZZZZZZZZZZZ", "op-4", 100);
    CHECK(unknown.status == 422);
    CHECK(unknown.json()["errorCode"] == "167");
    const HttpResult no_amount =
        call("POST", h.r.url("/v71/payments/" + psp + "/refunds"), headers("op-5"),
             Json{{"merchantAccount", "AcmeShopECOM"}, {"reference", "op-5"}}.dump(), 5000);
    CHECK(no_amount.status == 422);
    CHECK(no_amount.json()["errorCode"] == "100");
    const HttpResult bad_key =
        call("POST", h.r.url("/v71/payments/" + psp + "/refunds"),
             {"X-API-Key: AQE_wrong", "Content-Type: application/json"}, "{}", 5000);
    CHECK(bad_key.status == 401);
    CHECK(h.r.executions("op-4") + h.r.executions("op-5") == 0);
}

TEST_CASE("adyen fake: a refund meets the same faults as a payment -- executed, then the "
          "connection reset -- and its notification still goes out",
          "[fake_provider][adyen][refunds][faults]") {
    WithHooks h;
    const std::string psp = charge(h.r, "op-pay");
    FaultConfig f;
    f.next = {Fault::execute_then_rst};
    h.r.server.set_faults(f);
    const HttpResult lost = refund(h.r, psp, "op-ref", 900);
    CHECK(lost.code != CURLE_OK);
    CHECK(h.r.executions("op-ref") == 1);
    CHECK(refunded_eur(h.r) == 900);
    int refunds = 0;
    for (const Json& i : h.notifications()) {
        refunds += i["eventCode"] == "REFUND" && i["success"] == "true";
    }
    CHECK(refunds == 1);
    // The key kept the execution: the retry is received again, and refunds nothing more.
    CHECK(refund(h.r, psp, "op-ref", 900).status == 201);
    CHECK(h.r.executions("op-ref") == 1);
    CHECK(refunded_eur(h.r) == 900);
}

TEST_CASE("adyen fake: a reversed refund's seed gives its amount back and sends REFUND_FAILED",
          "[fake_provider][adyen][refunds][seed]") {
    WithHooks h;
    const std::string psp = charge(h.r, "op-pay");
    const HttpResult ok = refund(h.r, psp, "op-ref", 2500);
    REQUIRE(ok.status == 201);
    REQUIRE(h.notifications().size() >= 1);
    h.r.server.seed(RefundReversed{"op-ref", "Refund rejected by the scheme"});
    CHECK(refunded_eur(h.r) == 0);
    std::vector<Json> failed;
    for (const Json& i : h.notifications()) {
        if (i["eventCode"] == "REFUND_FAILED") {
            failed.push_back(i);
        }
    }
    REQUIRE(failed.size() == 1);
    CHECK(failed[0]["success"] == "true");
    CHECK(failed[0]["pspReference"] == ok.json()["pspReference"]);
    CHECK(failed[0]["originalReference"] == psp);
    CHECK(failed[0]["merchantReference"] == "op-ref");
    CHECK(failed[0]["reason"] == "Refund rejected by the scheme");
    // Refundable again at the fake.
    CHECK(refund(h.r, psp, "op-again", 2500).status == 201);
    CHECK(refunded_eur(h.r) == 2500);
}
