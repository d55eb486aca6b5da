// The fake provider's Stripe authorisations over real HTTP on loopback (issue 32): a PaymentIntent
// created with capture_method=manual, then POST /v1/payment_intents/{id}/capture or /cancel under
// Stripe's Idempotency-Key rules and the fault queue, the 7 days an authorisation lasts on the fake
// clock, refunds of what was captured, and the ledger's counts of captures and cancels.
#include "tests/fake_provider/test_client.hpp"
#include "tests/support/receiver.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using namespace payrecon;
using namespace payrecon::fake;
using namespace payrecon::fake::test;
using namespace payrecon::testing;
using Json = nlohmann::json;

namespace {

constexpr long long k_day = 86400;

// A manual-capture create as payrecon's Stripe adapter would send it.
std::string authorise_form(const std::string& operation_id, long amount,
                           const std::string& payment_method = "pm_card_visa",
                           const std::string& capture_method = "manual") {
    return "amount=" + std::to_string(amount) + "&currency=eur&payment_method=" + payment_method +
           "&confirm=true&off_session=true&capture_method=" + capture_method + "&" +
           http::percent_encode("metadata[operation_id]") + "=" +
           http::percent_encode(operation_id);
}

HttpResult post(const Running& r, const std::string& path, const std::string& key,
                const std::string& form, long timeout_ms = 5000) {
    std::vector<std::string> headers{auth()};
    if (!key.empty()) {
        headers.push_back("Idempotency-Key: " + key);
    }
    return call("POST", r.url(path), headers, form, timeout_ms);
}

// Authorises `amount` under `operation_id` (its key too); the PaymentIntent answered.
Json authorise(const Running& r, const std::string& operation_id, long amount) {
    const HttpResult res =
        post(r, "/v1/payment_intents", operation_id, authorise_form(operation_id, amount));
    REQUIRE(res.status == 200);
    return res.json();
}

HttpResult capture(const Running& r, const Json& pi, const std::string& key,
                   const std::string& form = "", long timeout_ms = 5000) {
    return post(r, "/v1/payment_intents/" + pi["id"].get<std::string>() + "/capture", key, form,
                timeout_ms);
}

HttpResult cancel(const Running& r, const Json& pi, const std::string& key,
                  const std::string& form = "") {
    return post(r, "/v1/payment_intents/" + pi["id"].get<std::string>() + "/cancel", key, form);
}

HttpResult refund(const Running& r, const Json& pi, const std::string& key, long amount) {
    return post(r, "/v1/refunds", key,
                "payment_intent=" + pi["id"].get<std::string>() +
                    "&amount=" + std::to_string(amount));
}

Json retrieve(const Running& r, const Json& pi) {
    const HttpResult res =
        call("GET", r.url("/v1/payment_intents/" + pi["id"].get<std::string>()), {auth()});
    REQUIRE(res.status == 200);
    return res.json();
}

// The PaymentIntent as search by its operation ID and the list of its created second show it.
Json searched(const Running& r, const std::string& operation_id) {
    const HttpResult res =
        call("GET",
             r.url("/v1/payment_intents/search?query=" +
                   http::percent_encode("metadata['operation_id']:'" + operation_id + "'")),
             {auth()});
    REQUIRE(res.status == 200);
    REQUIRE(res.json()["data"].size() == 1);
    return res.json()["data"][0];
}

Json listed(const Running& r, const Json& pi) {
    const std::string created = std::to_string(pi["created"].get<long long>());
    const HttpResult res = call("GET",
                                r.url("/v1/payment_intents?created[gte]=" + created +
                                      "&created[lte]=" + created + "&limit=100"),
                                {auth()});
    REQUIRE(res.status == 200);
    const Json page = res.json();
    for (const Json& item : page["data"]) {
        if (item["id"] == pi["id"]) {
            return item;
        }
    }
    FAIL("the PaymentIntent is not in the list of its created second");
    return {};
}

// The ledger's counts for one PaymentIntent (`authorizations`).
Json counts(const Running& r, const Json& pi) {
    const Json ledger = r.ledger();
    for (const Json& a : ledger["authorizations"]) {
        if (a["id"] == pi["id"]) {
            return a;
        }
    }
    FAIL("the ledger has no authorization entry for " + pi["id"].get<std::string>());
    return {};
}

long long charged_eur(const Running& r) {
    const Json l = r.ledger();
    return l["charged"].contains("eur") ? l["charged"]["eur"].get<long long>() : 0;
}

} // namespace

TEST_CASE("stripe fake: capture_method=manual authorises only, and every read shows "
          "requires_capture with nothing charged",
          "[fake_provider][stripe][capture]") {
    Running r;
    const Json pi = authorise(r, "op-auth", 5000);
    CHECK(pi["status"] == "requires_capture");
    CHECK(pi["capture_method"] == "manual");
    CHECK(pi["amount"] == 5000);
    CHECK(pi["amount_capturable"] == 5000);
    CHECK(pi["amount_received"] == 0);
    CHECK(pi["canceled_at"].is_null());
    const Json charge = pi["charges"]["data"][0];
    CHECK(charge["id"] == pi["latest_charge"]);
    CHECK(charge["captured"] == false);
    CHECK(charge["amount_captured"] == 0);
    CHECK(charge["paid"] == true);
    CHECK(charge["status"] == "succeeded");
    for (const Json& read : {retrieve(r, pi), searched(r, "op-auth"), listed(r, pi)}) {
        CHECK(read["status"] == "requires_capture");
        CHECK(read["amount_capturable"] == 5000);
        CHECK(read["amount_received"] == 0);
    }
    // One execution, nothing charged; an automatic create beside it is charged as ever.
    const HttpResult automatic = post(r, "/v1/payment_intents", "op-auto",
                                      authorise_form("op-auto", 700, "pm_card_visa", "automatic"));
    REQUIRE(automatic.status == 200);
    CHECK(automatic.json()["status"] == "succeeded");
    CHECK(automatic.json()["capture_method"] == "automatic");
    CHECK(automatic.json()["amount_capturable"] == 0);
    CHECK(r.executions("op-auth") == 1);
    CHECK(charged_eur(r) == 700);
    const Json c = counts(r, pi);
    CHECK(c["operation_id"] == "op-auth");
    CHECK(c["capture_method"] == "manual");
    CHECK(c["status"] == "requires_capture");
    CHECK(c["amount_capturable"] == 5000);
    CHECK(c["amount_captured"] == 0);
    CHECK(c["captures"] == 0);
    CHECK(c["cancels"] == 0);
    CHECK(r.ledger()["authorizations"].size() == 1); // the automatic one is none

    // The same key replays the authorisation; automatic_async stays refused, executing nothing.
    const HttpResult replay =
        post(r, "/v1/payment_intents", "op-auth", authorise_form("op-auth", 5000));
    CHECK(replay.header("idempotent-replayed") == "true");
    CHECK(replay.json()["id"] == pi["id"]);
    const HttpResult async =
        post(r, "/v1/payment_intents", "op-async",
             authorise_form("op-async", 5000, "pm_card_visa", "automatic_async"));
    CHECK(async.status == 400);
    CHECK(async.json()["error"]["param"] == "capture_method");
    CHECK(r.executions("op-async") == 0);
    CHECK(r.executions("op-auth") == 1);
}

TEST_CASE("stripe fake: a declined authorisation stays a decline and can be canceled, not captured",
          "[fake_provider][stripe][capture]") {
    Running r;
    const HttpResult declined = post(r, "/v1/payment_intents", "op-dec",
                                     authorise_form("op-dec", 3000, "pm_card_chargeDeclined"));
    REQUIRE(declined.status == 402);
    const Json pi = declined.json()["error"]["payment_intent"];
    CHECK(declined.json()["error"]["code"] == "card_declined");
    CHECK(pi["status"] == "requires_payment_method");
    CHECK(pi["capture_method"] == "manual");
    CHECK(pi["amount_capturable"] == 0);
    CHECK(r.executions("op-dec") == 1);

    const HttpResult captured = capture(r, pi, "cap-dec");
    CHECK(captured.status == 400);
    CHECK(captured.json()["error"]["code"] == "payment_intent_unexpected_state");
    CHECK(captured.json()["error"]["payment_intent"]["status"] == "requires_payment_method");
    const HttpResult canceled = cancel(r, pi, "can-dec", "cancellation_reason=abandoned");
    REQUIRE(canceled.status == 200);
    CHECK(canceled.json()["status"] == "canceled");
    CHECK(canceled.json()["cancellation_reason"] == "abandoned");
    CHECK(r.executions("cap-dec") == 0);
    CHECK(r.executions("can-dec") == 1);
    CHECK(charged_eur(r) == 0);
}

TEST_CASE("stripe fake: a partial capture takes part, releases the rest, and refunds follow what "
          "was captured",
          "[fake_provider][stripe][capture][refunds]") {
    Running r;
    const Json pi = authorise(r, "op-pay", 5000);
    // Nothing captured: nothing to refund, and nothing is executed or kept under the key.
    const HttpResult early = refund(r, pi, "ref-early", 1000);
    CHECK(early.status == 400);
    CHECK(early.json()["error"]["code"] == "charge_not_refundable");
    CHECK(r.executions("ref-early") == 0);

    const HttpResult captured =
        capture(r, pi, "cap-1",
                "amount_to_capture=3000&" + http::percent_encode("metadata[captured_by]") + "=ops");
    REQUIRE(captured.status == 200);
    const Json got = captured.json();
    CHECK(got["id"] == pi["id"]);
    CHECK(got["status"] == "succeeded");
    CHECK(got["amount"] == 5000);
    CHECK(got["amount_received"] == 3000);
    CHECK(got["amount_capturable"] == 0);
    CHECK(got["metadata"] == Json{{"operation_id", "op-pay"}, {"captured_by", "ops"}});
    CHECK(got["charges"]["data"][0]["captured"] == true);
    CHECK(got["charges"]["data"][0]["amount_captured"] == 3000);
    CHECK(got["charges"]["data"][0]["refunded"] == false);
    CHECK(retrieve(r, pi)["amount_received"] == 3000);
    CHECK(searched(r, "op-pay")["status"] == "succeeded");
    CHECK(listed(r, pi)["amount_received"] == 3000);
    CHECK(charged_eur(r) == 3000);
    CHECK(r.executions("cap-1") == 1);
    CHECK(r.executions("op-pay") == 1);

    // The refund limit is what was captured, not what was authorised.
    const HttpResult too_much = refund(r, pi, "ref-1", 3001);
    CHECK(too_much.status == 400);
    CHECK(too_much.json()["error"]["code"] == "amount_too_large");
    REQUIRE(refund(r, pi, "ref-1", 3000).status == 200);
    const Json after = retrieve(r, pi);
    CHECK(after["charges"]["data"][0]["amount_refunded"] == 3000);
    CHECK(after["charges"]["data"][0]["refunded"] == true);
    CHECK(after["amount_received"] == 3000);
    CHECK(charged_eur(r) == 0);
    CHECK(r.ledger()["refunded"]["eur"] == 3000);
    CHECK(r.executions("ref-1") == 1);
    const Json c = counts(r, pi);
    CHECK(c["amount_captured"] == 3000);
    CHECK(c["captures"] == 1);
    CHECK(c["capture_deliveries"] == 1);
}

TEST_CASE("stripe fake: a capture replayed under its key executes once, and the key with another "
          "body or another PaymentIntent is 400 idempotency_error",
          "[fake_provider][stripe][capture][idempotency]") {
    Running r;
    const Json pi = authorise(r, "op-a", 4000);
    const Json other = authorise(r, "op-b", 4000);
    const HttpResult first = capture(r, pi, "cap-key", "amount_to_capture=2500");
    REQUIRE(first.status == 200);
    CHECK(first.header("idempotent-replayed").empty());
    const HttpResult again = capture(r, pi, "cap-key", "amount_to_capture=2500");
    CHECK(again.status == 200);
    CHECK(again.header("idempotent-replayed") == "true");
    CHECK(again.body == first.body);

    const HttpResult other_body = capture(r, pi, "cap-key", "amount_to_capture=2000");
    CHECK(other_body.status == 400);
    CHECK(other_body.json()["error"]["type"] == "idempotency_error");
    const HttpResult other_intent = capture(r, other, "cap-key", "amount_to_capture=2500");
    CHECK(other_intent.status == 400);
    CHECK(other_intent.json()["error"]["type"] == "idempotency_error");
    // A cancel under the capture's key is another endpoint: refused, not replayed.
    const HttpResult cancel_same_key = cancel(r, pi, "cap-key");
    CHECK(cancel_same_key.status == 400);
    CHECK(cancel_same_key.json()["error"]["type"] == "idempotency_error");

    CHECK(retrieve(r, other)["status"] == "requires_capture");
    CHECK(r.executions("cap-key") == 1);
    const Json c = counts(r, pi);
    CHECK(c["captures"] == 1);
    CHECK(c["capture_deliveries"] == 3);
    CHECK(c["cancel_deliveries"] == 1);
    CHECK(c["amount_captured"] == 2500);
    CHECK(counts(r, other)["captures"] == 0);
    CHECK(counts(r, other)["capture_deliveries"] == 1);
    const Json l = r.ledger();
    CHECK(l["captures"] == 1);
    CHECK(l["cancels"] == 0);
    CHECK(l["capture_deliveries"] == 4);
    CHECK(l["replays"] == 1);
    CHECK(l["charged"]["eur"] == 2500);
}

TEST_CASE("stripe fake: capturing more than is capturable, or again after a capture, is refused "
          "and executes nothing",
          "[fake_provider][stripe][capture]") {
    Running r;
    const Json pi = authorise(r, "op-1", 2000);
    const HttpResult over = capture(r, pi, "cap-over", "amount_to_capture=2001");
    CHECK(over.status == 400);
    CHECK(over.json()["error"]["type"] == "invalid_request_error");
    CHECK(over.json()["error"]["code"] == "amount_too_large");
    CHECK(over.json()["error"]["param"] == "amount_to_capture");
    CHECK(retrieve(r, pi)["status"] == "requires_capture");
    CHECK(r.executions("cap-over") == 0);
    // The refusal kept nothing under the key: the same key with a right amount captures.
    const HttpResult right = capture(r, pi, "cap-over", "amount_to_capture=2000");
    REQUIRE(right.status == 200);
    CHECK(right.header("idempotent-replayed").empty());
    CHECK(right.json()["amount_received"] == 2000);

    const HttpResult twice = capture(r, pi, "cap-twice");
    CHECK(twice.status == 400);
    const Json err = twice.json()["error"];
    CHECK(err["type"] == "invalid_request_error");
    CHECK(err["code"] == "payment_intent_unexpected_state");
    CHECK(err["payment_intent"]["id"] == pi["id"]);
    CHECK(err["payment_intent"]["status"] == "succeeded");
    CHECK(r.executions("cap-twice") == 0);
    const HttpResult bad = capture(r, pi, "cap-bad", "amount_to_capture=0");
    CHECK(bad.status == 400);
    CHECK(bad.json()["error"]["code"] == "parameter_invalid_integer");
    const HttpResult unknown =
        post(r, "/v1/payment_intents/pi_000000000000000000000000/capture", "cap-unknown", "");
    CHECK(unknown.status == 404);
    CHECK(unknown.json()["error"]["code"] == "resource_missing");

    // Without the API key: 401, answered before anything is counted.
    const HttpResult anonymous =
        call("POST", r.url("/v1/payment_intents/" + pi["id"].get<std::string>() + "/capture"),
             {"Idempotency-Key: cap-anon"}, "");
    CHECK(anonymous.status == 401);

    CHECK(counts(r, pi)["captures"] == 1);
    CHECK(counts(r, pi)["capture_deliveries"] == 4);
    CHECK(charged_eur(r) == 2000);
    CHECK(r.ledger()["capture_deliveries"] == 5);
}

TEST_CASE("stripe fake: a cancel releases an authorisation, a capture after it is refused, and a "
          "captured one cannot be canceled",
          "[fake_provider][stripe][capture][cancel]") {
    Running r;
    const Json held = authorise(r, "op-held", 1500);
    const HttpResult canceled =
        cancel(r, held, "can-1", "cancellation_reason=requested_by_customer");
    REQUIRE(canceled.status == 200);
    const Json got = canceled.json();
    CHECK(got["status"] == "canceled");
    CHECK(got["cancellation_reason"] == "requested_by_customer");
    CHECK(got["canceled_at"].is_number_integer());
    CHECK(got["amount_capturable"] == 0);
    CHECK(got["amount_received"] == 0);
    const HttpResult replay = cancel(r, held, "can-1", "cancellation_reason=requested_by_customer");
    CHECK(replay.header("idempotent-replayed") == "true");
    CHECK(replay.body == canceled.body);
    for (const Json& read : {retrieve(r, held), searched(r, "op-held"), listed(r, held)}) {
        CHECK(read["status"] == "canceled");
        CHECK(read["cancellation_reason"] == "requested_by_customer");
    }
    const HttpResult late = capture(r, held, "cap-late");
    CHECK(late.status == 400);
    CHECK(late.json()["error"]["code"] == "payment_intent_unexpected_state");
    CHECK(late.json()["error"]["payment_intent"]["status"] == "canceled");
    const HttpResult again = cancel(r, held, "can-again");
    CHECK(again.status == 400);
    CHECK(again.json()["error"]["code"] == "payment_intent_unexpected_state");
    const HttpResult reason = cancel(r, held, "can-bad", "cancellation_reason=bored");
    CHECK(reason.status == 400);
    CHECK(reason.json()["error"]["param"] == "cancellation_reason");

    const Json paid = authorise(r, "op-paid", 900);
    REQUIRE(capture(r, paid, "cap-paid").status == 200);
    const HttpResult void_paid = cancel(r, paid, "can-paid");
    CHECK(void_paid.status == 400);
    CHECK(void_paid.json()["error"]["code"] == "payment_intent_unexpected_state");
    CHECK(void_paid.json()["error"]["payment_intent"]["status"] == "succeeded");
    CHECK(retrieve(r, paid)["amount_received"] == 900);

    CHECK(r.executions("can-1") == 1);
    CHECK(r.executions("cap-late") == 0);
    CHECK(r.executions("can-again") == 0);
    CHECK(r.executions("can-paid") == 0);
    const Json h = counts(r, held);
    CHECK(h["status"] == "canceled");
    CHECK(h["cancels"] == 1);
    CHECK(h["captures"] == 0);
    CHECK(h["cancel_deliveries"] == 4);
    CHECK(h["capture_deliveries"] == 1);
    const Json p = counts(r, paid);
    CHECK(p["captures"] == 1);
    CHECK(p["cancels"] == 0);
    CHECK(charged_eur(r) == 900);
    CHECK(r.ledger()["cancels"] == 1);
}

TEST_CASE("stripe fake: an authorisation left 7 fake days is canceled (automatic) in every read "
          "and cannot be captured",
          "[fake_provider][stripe][capture][clock]") {
    Running r;
    const Json pi = authorise(r, "op-old", 2500);
    const long long created = pi["created"].get<long long>();
    r.server.advance_clock(std::chrono::seconds(6 * k_day));
    CHECK(retrieve(r, pi)["status"] == "requires_capture");
    CHECK(counts(r, pi)["status"] == "requires_capture");
    r.server.advance_clock(std::chrono::seconds(k_day));
    for (const Json& read : {retrieve(r, pi), searched(r, "op-old"), listed(r, pi)}) {
        CHECK(read["status"] == "canceled");
        CHECK(read["cancellation_reason"] == "automatic");
        CHECK(read["canceled_at"] == created + 7 * k_day);
        CHECK(read["amount_capturable"] == 0);
        CHECK(read["amount_received"] == 0);
    }
    const HttpResult late = capture(r, pi, "cap-old");
    CHECK(late.status == 400);
    CHECK(late.json()["error"]["code"] == "payment_intent_unexpected_state");
    CHECK(late.json()["error"]["payment_intent"]["cancellation_reason"] == "automatic");
    CHECK(cancel(r, pi, "can-old").status == 400);
    CHECK(r.executions("cap-old") == 0);
    CHECK(r.executions("can-old") == 0);
    const Json c = counts(r, pi);
    CHECK(c["status"] == "canceled");
    CHECK(c["captures"] == 0);
    CHECK(c["cancels"] == 0);
    CHECK(charged_eur(r) == 0);
}

TEST_CASE("stripe fake: a capture under execute_then_hang executes once, and its replay answers "
          "the stored capture",
          "[fake_provider][stripe][capture][faults]") {
    Running r;
    const Json pi = authorise(r, "op-hang", 3000);
    r.server.set_faults(faults_from(R"({"next": ["execute_then_hang"], "hang_ms": 500})"));
    const HttpResult lost = capture(r, pi, "cap-hang", "amount_to_capture=1200", 150);
    CHECK(lost.code == CURLE_OPERATION_TIMEDOUT);
    CHECK(r.executions("cap-hang") == 1);
    CHECK(retrieve(r, pi)["amount_received"] == 1200);

    const HttpResult retry = capture(r, pi, "cap-hang", "amount_to_capture=1200");
    REQUIRE(retry.status == 200);
    CHECK(retry.header("idempotent-replayed") == "true");
    CHECK(retry.json()["status"] == "succeeded");
    CHECK(retry.json()["amount_received"] == 1200);
    CHECK(r.executions("cap-hang") == 1);
    const Json c = counts(r, pi);
    CHECK(c["captures"] == 1);
    CHECK(c["capture_deliveries"] == 2);
    const Json l = r.ledger();
    CHECK(l["faults_applied"]["execute_then_hang"] == 1);
    CHECK(l["charged"]["eur"] == 1200);
    CHECK(l["deliveries_by_operation"]["cap-hang"] == 2);
    CHECK(l["deliveries"] == 3); // the authorisation and both capture POSTs

    // A reset forgets the authorisations and their counts with everything else.
    REQUIRE(call("POST", r.admin_url("/__admin/reset")).status == 200);
    const Json fresh = r.ledger();
    CHECK(fresh["authorizations"].empty());
    CHECK(fresh["captures"] == 0);
    CHECK(fresh["capture_deliveries"] == 0);
}

TEST_CASE("stripe fake: the fault queue applies to capture and cancel POSTs as to any POST",
          "[fake_provider][stripe][capture][faults]") {
    Running r;
    const Json a = authorise(r, "op-a", 1000);
    const Json b = authorise(r, "op-b", 1000);
    r.server.set_faults(
        faults_from(R"({"next": ["drop_before_execute", "http_500_after_execute"]})"));
    // Dropped before execution: nothing captured, the key stays free.
    const HttpResult dropped = capture(r, a, "cap-a");
    CHECK(dropped.code == CURLE_GOT_NOTHING);
    CHECK(retrieve(r, a)["status"] == "requires_capture");
    CHECK(r.executions("cap-a") == 0);
    // A 500 after execution: captured, and the key keeps the 500 (replayed, as Stripe does).
    const HttpResult failed = capture(r, a, "cap-a");
    CHECK(failed.status == 500);
    CHECK(failed.json()["error"]["type"] == "api_error");
    CHECK(retrieve(r, a)["status"] == "succeeded");
    const HttpResult replay = capture(r, a, "cap-a");
    CHECK(replay.status == 500);
    CHECK(replay.header("idempotent-replayed") == "true");
    CHECK(r.executions("cap-a") == 1);
    // A 500 before execution on a cancel: nothing canceled, the key free for the retry.
    r.server.set_faults(faults_from(R"({"next": ["http_500_before_execute", "decline"]})"));
    CHECK(cancel(r, b, "can-b").status == 500);
    CHECK(retrieve(r, b)["status"] == "requires_capture");
    // A decline drawn by a cancel changes nothing: Stripe documents no declined cancel.
    const HttpResult canceled = cancel(r, b, "can-b");
    CHECK(canceled.status == 200);
    CHECK(canceled.json()["status"] == "canceled");
    CHECK(r.executions("can-b") == 1);
    const Json l = r.ledger();
    CHECK(l["faults_applied"]["drop_before_execute"] == 1);
    CHECK(l["faults_applied"]["http_500_after_execute"] == 1);
    CHECK(l["faults_applied"]["http_500_before_execute"] == 1);
    CHECK(l["faults_applied"]["decline"] == 1);
    CHECK(l["captures"] == 1);
    CHECK(l["cancels"] == 1);
    CHECK(l["capture_deliveries"] == 3);
    CHECK(l["cancel_deliveries"] == 2);
    CHECK(l["charged"]["eur"] == 1000);
}

TEST_CASE("stripe fake: an authorisation, its capture and a cancel send Stripe's events",
          "[fake_provider][stripe][capture][webhooks]") {
    const std::string secret = "whsec_fake_capture_test";
    Receiver rx;
    Running r;
    WebhookOptions hooks;
    hooks.url = rx.url("/stripe");
    hooks.secret = secret;
    r.server.set_webhooks(hooks);
    const Json captured = authorise(r, "op-c", 1800);
    const Json canceled = authorise(r, "op-v", 600);
    REQUIRE(capture(r, captured, "cap-c", "amount_to_capture=1000").status == 200);
    REQUIRE(cancel(r, canceled, "can-v").status == 200);
    REQUIRE(r.server.wait_webhooks_idle(std::chrono::seconds(10)));

    std::vector<Json> events;
    for (const Received& got : rx.received()) {
        events.push_back(Json::parse(got.body));
    }
    REQUIRE(events.size() == 4);
    const auto find = [&](const std::string& type, const Json& pi) {
        for (const Json& e : events) {
            if (e["type"] == type && e["data"]["object"]["id"] == pi["id"]) {
                return e;
            }
        }
        FAIL("no " + type + " event for " + pi["id"].get<std::string>());
        return Json{};
    };
    const Json held = find("payment_intent.amount_capturable_updated", captured);
    CHECK(held["data"]["object"]["status"] == "requires_capture");
    CHECK(held["data"]["object"]["amount_capturable"] == 1800);
    CHECK(held["data"]["object"]["metadata"]["operation_id"] == "op-c");
    const Json taken = find("payment_intent.succeeded", captured);
    CHECK(taken["data"]["object"]["amount_received"] == 1000);
    CHECK(taken["data"]["object"]["amount_capturable"] == 0);
    CHECK(taken["data"]["object"]["metadata"]["operation_id"] == "op-c");
    CHECK(taken["request"]["idempotency_key"] == "cap-c");
    find("payment_intent.amount_capturable_updated", canceled);
    const Json released = find("payment_intent.canceled", canceled);
    CHECK(released["data"]["object"]["status"] == "canceled");
    CHECK(released["request"]["idempotency_key"] == "can-v");
    CHECK(r.server.webhook_ledger()["delivered"] == 4);
}
