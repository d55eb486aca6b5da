// The fake provider's Adyen authorisations over real HTTP on loopback (issue 32): a payment made
// with additionalData.manualCapture "true" authorises only; its capture
// (POST /v71/payments/{pspReference}/captures) and cancel (/cancels) as the adyen adapter sends
// them are always answered 201 received, the outcome told by the signed CAPTURE or CANCELLATION
// notification -- one capture, the rest released; never past what was authorised, never after a
// cancel or the authorisation's 7 fake days --, under the same keys and faults as Adyen's payments
// and refunds, and the CAPTURE_FAILED a reversed capture's seed sends. Counted in the one ledger.
#include "core/encoding.hpp"
#include "core/fingerprint.hpp"
#include "tests/fake_provider/test_client.hpp"
#include "tests/support/receiver.hpp"

#include <catch2/catch.hpp>
#include <map>
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

// A payment that only authorises, as the adyen adapter sends it; returns its pspReference.
std::string authorise(const Running& r, const std::string& op, long amount = 10000) {
    const Json body = {{"amount", {{"currency", "EUR"}, {"value", amount}}},
                       {"reference", op},
                       {"merchantAccount", "AcmeShopECOM"},
                       {"paymentMethod", {{"type", "scheme"}, {"storedPaymentMethodId", "8415"}}},
                       {"shopperInteraction", "ContAuth"},
                       {"recurringProcessingModel", "UnscheduledCardOnFile"},
                       {"returnUrl", "https://shop.example.com/return"},
                       {"additionalData", {{"manualCapture", "true"}}}};
    const HttpResult res = call("POST", r.url("/v71/payments"), headers(op), body.dump(), 5000);
    REQUIRE(res.status == 200);
    REQUIRE(res.json()["resultCode"] == "Authorised");
    return res.json()["pspReference"].get<std::string>();
}

HttpResult capture(const Running& r, const std::string& psp, const std::string& op, long amount,
                   const std::string& currency = "EUR") {
    const Json body = {{"merchantAccount", "AcmeShopECOM"},
                       {"amount", {{"currency", currency}, {"value", amount}}},
                       {"reference", op}};
    return call("POST", r.url("/v71/payments/" + psp + "/captures"), headers(op), body.dump(),
                5000);
}

HttpResult cancel(const Running& r, const std::string& psp, const std::string& op) {
    const Json body = {{"merchantAccount", "AcmeShopECOM"}, {"reference", op}};
    return call("POST", r.url("/v71/payments/" + psp + "/cancels"), headers(op), body.dump(), 5000);
}

long long charged_eur(const Running& r) {
    const Json c = r.ledger()["charged"];
    return c.contains("eur") ? c["eur"].get<long long>() : 0;
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
    // `code` notifications by merchantReference: their success.
    std::map<std::string, std::string> outcomes(const std::string& code) {
        std::map<std::string, std::string> out;
        for (const Json& i : notifications()) {
            if (i["eventCode"] == code) {
                out[i["merchantReference"]] = i["success"];
            }
        }
        return out;
    }
    // The ledger's authorisation made under operation ID `op`.
    Json authorisation(const std::string& op) {
        const Json ledger = r.ledger(); // a local: a temporary's member would dangle in the loop
        for (const Json& a : ledger["authorizations"]) {
            if (a["operation_id"] == op) {
                return a;
            }
        }
        FAIL("no authorizations entry for " << op);
        return {};
    }
};

} // namespace

TEST_CASE("adyen fake: manualCapture authorises only -- Authorised, its AUTHORISATION success "
          "true, nothing charged",
          "[fake_provider][adyen][captures]") {
    WithHooks h;
    const std::string psp = authorise(h.r, "op-auth", 10000);
    CHECK(psp.size() == 16);
    CHECK(charged_eur(h.r) == 0);
    CHECK(h.r.executions("op-auth") == 1);
    CHECK(h.outcomes("AUTHORISATION") == std::map<std::string, std::string>{{"op-auth", "true"}});
    const Json a = h.authorisation("op-auth");
    CHECK(a["status"] == "requires_capture");
    CHECK(a["amount_capturable"] == 10000);
}

TEST_CASE("adyen fake: a capture is received, takes part of the authorisation once under its key "
          "and releases the rest, and its CAPTURE says so",
          "[fake_provider][adyen][captures]") {
    WithHooks h;
    const std::string psp = authorise(h.r, "op-auth", 10000);
    const HttpResult got = capture(h.r, psp, "op-cap", 6000);
    REQUIRE(got.status == 201);
    const Json body = got.json();
    CHECK(body["status"] == "received");
    CHECK(body["reference"] == "op-cap");
    CHECK(body["paymentPspReference"] == psp);
    CHECK(body["amount"] == Json{{"currency", "EUR"}, {"value", 6000}});
    const std::string capture_psp = body["pspReference"].get<std::string>();
    CHECK(capture_psp.size() == 16);
    CHECK(capture_psp != psp);
    CHECK(h.r.executions("op-cap") == 1);
    CHECK(charged_eur(h.r) == 6000);
    // The key replays the answer, byte for byte, and captures nothing more.
    const HttpResult again = capture(h.r, psp, "op-cap", 6000);
    CHECK(again.status == 201);
    CHECK(again.body == got.body);
    CHECK(h.r.executions("op-cap") == 1);
    CHECK(h.r.ledger()["deliveries_by_operation"].value("op-cap", 0) == 2);
    CHECK(charged_eur(h.r) == 6000);
    // One capture: what it left was released, so a second capture is received and refused.
    REQUIRE(capture(h.r, psp, "op-cap-2", 1000).status == 201);
    CHECK(h.r.executions("op-cap-2") == 0);
    CHECK(charged_eur(h.r) == 6000);
    std::vector<Json> captures;
    for (const Json& i : h.notifications()) {
        if (i["eventCode"] == "CAPTURE") {
            captures.push_back(i);
        }
    }
    REQUIRE(captures.size() == 2);
    CHECK(captures[0]["merchantReference"] == "op-cap");
    CHECK(captures[0]["success"] == "true");
    CHECK(captures[0]["pspReference"] == capture_psp);
    CHECK(captures[0]["originalReference"] == psp);
    CHECK(captures[0]["amount"]["value"] == 6000);
    CHECK(captures[1]["merchantReference"] == "op-cap-2");
    CHECK(captures[1]["success"] == "false");
    const Json a = h.authorisation("op-auth");
    CHECK(a["amount_captured"] == 6000);
    CHECK(a["captures"] == 1);
    CHECK(a["capture_deliveries"] == 3);
}

TEST_CASE("adyen fake: a capture past what was authorised or in another currency is received but "
          "captures nothing, and an unknown payment, a missing amount or a wrong key is refused",
          "[fake_provider][adyen][captures]") {
    WithHooks h;
    const std::string psp = authorise(h.r, "op-auth", 1000);
    REQUIRE(capture(h.r, psp, "op-over", 1001).status == 201);
    REQUIRE(capture(h.r, psp, "op-usd", 500, "USD").status == 201);
    CHECK(h.r.executions("op-over") + h.r.executions("op-usd") == 0);
    CHECK(charged_eur(h.r) == 0);
    // All of it can still be captured.
    REQUIRE(capture(h.r, psp, "op-all", 1000).status == 201);
    CHECK(charged_eur(h.r) == 1000);
    CHECK(h.outcomes("CAPTURE") == std::map<std::string, std::string>{{"op-all", "true"},
                                                                      {"op-over", "false"},
                                                                      {"op-usd", "false"}});

    const HttpResult unknown = capture(h.r, "ZZZZZZZZZZZZZZZZ", "op-x", 100);
    CHECK(unknown.status == 422);
    CHECK(unknown.json()["errorCode"] == "167");
    const HttpResult no_amount =
        call("POST", h.r.url("/v71/payments/" + psp + "/captures"), headers("op-y"),
             Json{{"merchantAccount", "AcmeShopECOM"}, {"reference", "op-y"}}.dump(), 5000);
    CHECK(no_amount.status == 422);
    CHECK(no_amount.json()["errorCode"] == "100");
    const HttpResult bad_key =
        call("POST", h.r.url("/v71/payments/" + psp + "/captures"),
             {"X-API-Key: AQE_wrong", "Content-Type: application/json"}, "{}", 5000);
    CHECK(bad_key.status == 401);
    CHECK(h.r.executions("op-x") + h.r.executions("op-y") == 0);
}

TEST_CASE("adyen fake: a cancel releases the authorisation once under its key, and nothing is "
          "captured after it",
          "[fake_provider][adyen][captures]") {
    WithHooks h;
    const std::string psp = authorise(h.r, "op-auth", 10000);
    const HttpResult got = cancel(h.r, psp, "op-void");
    REQUIRE(got.status == 201);
    CHECK(got.json()["status"] == "received");
    CHECK(got.json()["reference"] == "op-void");
    CHECK_FALSE(got.json().contains("amount"));
    CHECK(h.r.executions("op-void") == 1);
    CHECK(cancel(h.r, psp, "op-void").body == got.body);
    CHECK(h.r.executions("op-void") == 1);
    REQUIRE(capture(h.r, psp, "op-late", 1000).status == 201);
    REQUIRE(cancel(h.r, psp, "op-void-2").status == 201);
    CHECK(h.r.executions("op-late") + h.r.executions("op-void-2") == 0);
    CHECK(charged_eur(h.r) == 0);
    CHECK(h.outcomes("CANCELLATION") ==
          std::map<std::string, std::string>{{"op-void", "true"}, {"op-void-2", "false"}});
    CHECK(h.outcomes("CAPTURE") == std::map<std::string, std::string>{{"op-late", "false"}});
    const Json a = h.authorisation("op-auth");
    CHECK(a["status"] == "canceled");
    CHECK(a["cancels"] == 1);
}

TEST_CASE("adyen fake: an authorisation left 7 fake days lapses -- a capture or cancel after it "
          "is received and refused",
          "[fake_provider][adyen][captures]") {
    WithHooks h;
    const std::string psp = authorise(h.r, "op-auth", 10000);
    h.r.server.advance_clock(std::chrono::hours(7 * 24 - 1));
    REQUIRE(capture(h.r, psp, "op-in-time", 2000).status == 201);
    CHECK(h.r.executions("op-in-time") == 1);
    const std::string later = authorise(h.r, "op-auth-2", 10000);
    h.r.server.advance_clock(std::chrono::hours(7 * 24));
    REQUIRE(capture(h.r, later, "op-late", 2000).status == 201);
    REQUIRE(cancel(h.r, later, "op-late-void").status == 201);
    CHECK(h.r.executions("op-late") + h.r.executions("op-late-void") == 0);
    CHECK(charged_eur(h.r) == 2000);
    CHECK(h.outcomes("CAPTURE") ==
          std::map<std::string, std::string>{{"op-in-time", "true"}, {"op-late", "false"}});
    CHECK(h.authorisation("op-auth-2")["status"] == "canceled");
}

TEST_CASE("adyen fake: a capture meets the same faults as a payment -- dropped before executing, "
          "a 500, executed then the answer lost",
          "[fake_provider][adyen][captures][faults]") {
    WithHooks h;
    const std::string psp = authorise(h.r, "op-auth", 10000);
    FaultConfig f;
    f.next = {Fault::drop_before_execute};
    h.r.server.set_faults(f);
    CHECK(capture(h.r, psp, "op-cap", 3000).code != CURLE_OK);
    CHECK(h.r.executions("op-cap") == 0);
    f.next = {Fault::http_500_before_execute};
    h.r.server.set_faults(f);
    CHECK(capture(h.r, psp, "op-cap", 3000).status == 500);
    CHECK(h.r.executions("op-cap") == 0);
    f.next = {Fault::execute_then_rst};
    h.r.server.set_faults(f);
    CHECK(capture(h.r, psp, "op-cap", 3000).code != CURLE_OK);
    CHECK(h.r.executions("op-cap") == 1);
    CHECK(charged_eur(h.r) == 3000);
    // The key kept the execution: the retry is answered received and captures nothing more.
    CHECK(capture(h.r, psp, "op-cap", 3000).status == 201);
    CHECK(h.r.executions("op-cap") == 1);
    CHECK(h.r.ledger()["deliveries_by_operation"].value("op-cap", 0) == 4);
    CHECK(charged_eur(h.r) == 3000);
    CHECK(h.outcomes("CAPTURE") == std::map<std::string, std::string>{{"op-cap", "true"}});
}

TEST_CASE("adyen fake: a reversed capture's seed takes it out of what was charged and sends "
          "CAPTURE_FAILED",
          "[fake_provider][adyen][captures][seed]") {
    WithHooks h;
    const std::string psp = authorise(h.r, "op-auth", 10000);
    const HttpResult ok = capture(h.r, psp, "op-cap", 10000);
    REQUIRE(ok.status == 201);
    REQUIRE(charged_eur(h.r) == 10000);
    h.r.server.seed(CaptureReversed{"op-cap", "Capture rejected by the scheme"});
    CHECK(charged_eur(h.r) == 0);
    std::vector<Json> failed;
    for (const Json& i : h.notifications()) {
        if (i["eventCode"] == "CAPTURE_FAILED") {
            failed.push_back(i);
        }
    }
    REQUIRE(failed.size() == 1);
    CHECK(failed[0]["success"] == "true");
    CHECK(failed[0]["pspReference"] == ok.json()["pspReference"]);
    CHECK(failed[0]["originalReference"] == psp);
    CHECK(failed[0]["merchantReference"] == "op-cap");
    CHECK(failed[0]["amount"]["value"] == 10000);
    CHECK(failed[0]["reason"] == "Capture rejected by the scheme");
    CHECK_THROWS_AS(h.r.server.seed(CaptureReversed{"op-cap", "again"}), std::invalid_argument);
    CHECK_THROWS_AS(h.r.server.seed(CaptureReversed{"op-none", "x"}), SeedNotFound);
}
