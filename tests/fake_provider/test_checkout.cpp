// The fake provider's Checkout.com dialect over real HTTP on loopback: POST /payments as payrecon's
// checkout adapter sends it, its idempotency as Checkout.com documents it (only a 2xx is kept under
// Cko-Idempotency-Key: a retry after a 500 executes again), the lookup by reference, and every
// fault, counted in the one ledger every dialect shares.
#include "tests/fake_provider/test_client.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

using namespace payrecon;
using namespace payrecon::fake;
using namespace payrecon::fake::test;
using Json = nlohmann::json;
using std::chrono::milliseconds;

namespace {

constexpr const char* k_source = "src_wmlfc3zyhqzehihu7giusaaawu";

// A PaymentRequest as the checkout adapter sends it (the amount in Checkout.com's minor units).
Json payment(const std::string& reference, long amount = 4999,
             const std::string& source = k_source) {
    Json j;
    j["source"] = {{"type", "id"}, {"id", source}};
    j["amount"] = amount;
    j["currency"] = "EUR";
    j["reference"] = reference;
    j["processing_channel_id"] = "pc_hpswyyx23geezflc2ocz3exn4y";
    j["capture"] = true;
    j["payment_type"] = "Recurring";
    j["merchant_initiated"] = true;
    j["description"] = "2 concert tickets";
    j["customer"] = {{"id", "cus_udst2tfldj6upmye2reztkmm4i"}};
    j["metadata"] = {{"payment_id", "pay-1"}};
    return j;
}

HttpResult post_payment(const Running& r, const std::string& key, const std::string& body,
                        long timeout_ms = 5000) {
    std::vector<std::string> headers{auth(), "Content-Type: application/json"};
    if (!key.empty()) {
        headers.push_back("Cko-Idempotency-Key: " + key);
    }
    return call("POST", r.url("/payments"), headers, body, timeout_ms);
}

HttpResult post_payment(const Running& r, const std::string& key, const Json& body,
                        long timeout_ms = 5000) {
    return post_payment(r, key, body.dump(), timeout_ms);
}

HttpResult get(const Running& r, const std::string& path_and_query) {
    return call("GET", r.url(path_and_query), {auth()});
}

std::string raw_payment(const std::string& key, const Json& body) {
    const std::string text = body.dump();
    return "POST /payments HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
           std::string(k_api_key) + "\r\nCko-Idempotency-Key: " + key +
           "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(text.size()) +
           "\r\nConnection: close\r\n\r\n" + text;
}

std::vector<std::string> codes_of(const HttpResult& result) {
    return result.json()["error_codes"].get<std::vector<std::string>>();
}

bool has(const std::vector<std::string>& codes, const std::string& code) {
    return std::find(codes.begin(), codes.end(), code) != codes.end();
}

// POST /payments/{id}/refunds as the checkout adapter sends it.
HttpResult post_refund(const Running& r, const std::string& payment_id, const std::string& key,
                       const Json& body) {
    std::vector<std::string> headers{auth(), "Content-Type: application/json"};
    if (!key.empty()) {
        headers.push_back("Cko-Idempotency-Key: " + key);
    }
    return call("POST", r.url("/payments/" + payment_id + "/refunds"), headers, body.dump(), 5000);
}

Json refund(long amount, const std::string& reference) {
    return Json{
        {"amount", amount}, {"reference", reference}, {"metadata", {{"operation_id", reference}}}};
}

long long unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

} // namespace

TEST_CASE("checkout: a payment executes once and answers 201, a same-key retry replays it byte "
          "for byte",
          "[fake_provider][checkout][idempotency]") {
    Running r;
    const HttpResult first = post_payment(r, "key-1", payment("op-1"));
    REQUIRE(first.code == CURLE_OK);
    REQUIRE(first.status == 201);
    const Json p = first.json();
    static const std::regex k_payment_id("pay_[a-z2-7]{26}");
    static const std::regex k_action_id("act_[a-z2-7]{26}");
    CHECK(std::regex_match(p["id"].get<std::string>(), k_payment_id));
    CHECK(std::regex_match(p["action_id"].get<std::string>(), k_action_id));
    CHECK(p["amount"] == 4999);
    CHECK(p["currency"] == "EUR");
    CHECK(p["approved"] == true);
    CHECK(p["status"] == "Captured");
    CHECK(p["response_code"] == "10000");
    CHECK(p["response_summary"] == "Approved");
    CHECK(p["reference"] == "op-1");
    CHECK(p["source"]["id"] == k_source);
    const auto processed = parse_rfc3339(p["processed_on"].get<std::string>());
    REQUIRE(processed);
    CHECK(std::abs(std::chrono::duration_cast<std::chrono::seconds>(processed->time_since_epoch())
                       .count() -
                   unix_now()) <= 2);
    const std::string self = p["_links"]["self"]["href"];
    CHECK(self == r.url("/payments/" + p["id"].get<std::string>()));
    CHECK_FALSE(first.header("cko-request-id").empty());

    const HttpResult second = post_payment(r, "key-1", payment("op-1"));
    REQUIRE(second.code == CURLE_OK);
    CHECK(second.status == 201);
    CHECK(second.body == first.body);

    Json ledger = r.ledger();
    CHECK(ledger["deliveries"] == 2);
    CHECK(ledger["deliveries_by_operation"]["op-1"] == 2);
    CHECK(ledger["executions"] == Json{{"op-1", 1}});
    CHECK(ledger["replays"] == 1);
    CHECK(ledger["charged"] == Json{{"eur", 4999}});
    CHECK(ledger["checkout_payment_count"] == 1);
    CHECK(ledger["payment_intent_count"] == 0);
    REQUIRE(ledger["checkout_payments"].size() == 1);
    CHECK(ledger["checkout_payments"][0]["id"] == p["id"]);

    // GET /payments/{id}: the payment's details.
    const HttpResult details = get(r, "/payments/" + p["id"].get<std::string>());
    REQUIRE(details.status == 200);
    const Json d = details.json();
    CHECK(d["id"] == p["id"]);
    CHECK(d["status"] == "Captured");
    CHECK(d["approved"] == true);
    CHECK(d["amount"] == 4999);
    CHECK(d["reference"] == "op-1");
    CHECK(d["payment_type"] == "Recurring");
    CHECK(d["requested_on"] == p["processed_on"]);
    CHECK(d["balances"]["total_captured"] == 4999);
    CHECK(d["metadata"] == Json{{"payment_id", "pay-1"}});
    CHECK(d["customer"]["id"] == "cus_udst2tfldj6upmye2reztkmm4i");
    const HttpResult unknown = get(r, "/payments/pay_aaaaaaaaaaaaaaaaaaaaaaaaaa");
    CHECK(unknown.status == 404);
    CHECK(unknown.body.empty());

    // capture: false authorizes only: an execution, nothing captured.
    Json authorize = payment("op-2");
    authorize["capture"] = false;
    const HttpResult authorized = post_payment(r, "key-2", authorize);
    REQUIRE(authorized.status == 201);
    CHECK(authorized.json()["status"] == "Authorized");
    CHECK(authorized.json()["approved"] == true);
    // No key: counted under the reference all the same; amount 0 is a card verification.
    const HttpResult verified = post_payment(r, "", payment("op-3", 0));
    REQUIRE(verified.status == 201);
    CHECK(verified.json()["status"] == "Card Verified");
    ledger = r.ledger();
    CHECK(ledger["executions"] == Json{{"op-1", 1}, {"op-2", 1}, {"op-3", 1}});
    CHECK(ledger["charged"] == Json{{"eur", 4999}});
}

TEST_CASE("checkout: a decline is a 201 with approved false, an execution that charges nothing",
          "[fake_provider][checkout][faults]") {
    Running r(options_with(faults_from(R"({"next": ["decline"]})")));
    const HttpResult declined = post_payment(r, "key-1", payment("op-1"));
    REQUIRE(declined.code == CURLE_OK);
    CHECK(declined.status == 201);
    const Json p = declined.json();
    CHECK(p["approved"] == false);
    CHECK(p["status"] == "Declined");
    CHECK(p["response_code"] == "20051");
    CHECK(p["response_summary"] == "Insufficient Funds");
    CHECK(p["amount"] == 4999);
    CHECK(p["reference"] == "op-1");

    const HttpResult card = post_payment(r, "key-2", payment("op-2", 100, "src_card_declined"));
    CHECK(card.status == 201);
    CHECK(card.json()["status"] == "Declined");
    CHECK(card.json()["response_code"] == "20051");

    // A decline is a 2xx: the key keeps it and replays it.
    const HttpResult replay = post_payment(r, "key-1", payment("op-1"));
    CHECK(replay.status == 201);
    CHECK(replay.body == declined.body);
    CHECK(get(r, "/payments/" + p["id"].get<std::string>()).json()["status"] == "Declined");
    const Json ledger = r.ledger();
    CHECK(ledger["executions"] == Json{{"op-1", 1}, {"op-2", 1}});
    CHECK(ledger["charged"].empty());
    CHECK(ledger["replays"] == 1);
    CHECK(ledger["faults_applied"] == Json{{"decline", 1}});
}

TEST_CASE("checkout: invalid requests get 422 request_invalid with every code, execute nothing "
          "and keep no key",
          "[fake_provider][checkout][validation]") {
    Running r;
    const HttpResult empty = post_payment(r, "key-1", std::string("{}"));
    REQUIRE(empty.status == 422);
    const Json e = empty.json();
    CHECK(e["error_type"] == "request_invalid");
    CHECK_FALSE(e["request_id"].get<std::string>().empty());
    CHECK(codes_of(empty) ==
          std::vector<std::string>{"payment_source_required", "currency_required"});

    const auto codes_for = [&](const std::function<void(Json&)>& change) {
        Json body = payment("op-1");
        change(body);
        const HttpResult result = post_payment(r, "key-1", body);
        CHECK(result.status == 422);
        return codes_of(result);
    };
    CHECK(has(codes_for([](Json& b) { b["currency"] = "eur"; }), "currency_invalid"));
    CHECK(has(codes_for([](Json& b) { b["currency"] = "XYZ"; }), "currency_invalid"));
    CHECK(has(codes_for([](Json& b) { b["amount"] = -1; }), "amount_invalid"));
    CHECK(has(codes_for([](Json& b) { b["amount"] = 49.99; }), "amount_invalid"));
    CHECK(has(codes_for([](Json& b) {
                  b["source"] = {{"type", "token"}, {"token", "tok_1"}};
              }),
              "source_type_invalid"));
    CHECK(has(codes_for([](Json& b) { b["source"] = {{"type", "id"}}; }), "source_id_required"));
    CHECK(has(codes_for([](Json& b) { b["source"]["id"] = "card_1"; }), "source_id_invalid"));
    CHECK(has(codes_for([](Json& b) { b["reference"] = std::string(51, 'r'); }),
              "reference_invalid"));
    CHECK(has(codes_for([](Json& b) { b["payment_type"] = "Sometimes"; }), "payment_type_invalid"));
    CHECK(has(codes_for([](Json& b) { b["capture"] = "yes"; }), "capture_invalid"));
    CHECK(has(codes_for([](Json& b) {
                  b["metadata"] = {{"nested", {{"a", 1}}}};
              }),
              "metadata_invalid"));
    const HttpResult garbage = post_payment(r, "key-1", std::string("not json"));
    CHECK(garbage.status == 422);
    CHECK(codes_of(garbage) == std::vector<std::string>{"request_body_malformed"});
    CHECK(r.executions("op-1") == 0);
    CHECK(r.ledger()["checkout_payment_count"] == 0);

    // Nothing was kept under the key: the valid request executes.
    const HttpResult valid = post_payment(r, "key-1", payment("op-1"));
    CHECK(valid.status == 201);
    CHECK(r.executions("op-1") == 1);
    CHECK(r.ledger()["replays"] == 0);
    CHECK(r.deliveries() == 14);
}

TEST_CASE("checkout: a missing or wrong key gets 401 with an empty body and executes nothing",
          "[fake_provider][checkout][auth]") {
    Running r;
    const std::string body = payment("op-1").dump();
    const HttpResult none = call("POST", r.url("/payments"), {"Cko-Idempotency-Key: k"}, body);
    CHECK(none.status == 401);
    CHECK(none.body.empty());
    const HttpResult wrong =
        call("POST", r.url("/payments"), {auth("sk_test_wrong"), "Cko-Idempotency-Key: k"}, body);
    CHECK(wrong.status == 401);
    CHECK(wrong.body.empty());
    // The bare key, as Checkout.com's older accounts took it, is not a bearer token.
    CHECK(call("POST", r.url("/payments"), {"Authorization: " + std::string(k_api_key)}, body)
              .status == 401);
    CHECK(call("GET", r.url("/payments?reference=op-1"), {auth("sk_test_wrong")}).status == 401);
    CHECK(call("GET", r.url("/payments/pay_x"), {}).status == 401);
    CHECK(r.deliveries() == 3);
    CHECK(r.executions("op-1") == 0);
    // A 401 keeps nothing under the key.
    const HttpResult valid = post_payment(r, "k", body);
    CHECK(valid.status == 201);
    CHECK(r.executions("op-1") == 1);
    CHECK(r.ledger()["replays"] == 0);
}

TEST_CASE("checkout: http_500_after_execute keeps nothing under the key: the retry executes again",
          "[fake_provider][checkout][idempotency][faults]") {
    Running r(options_with(
        faults_from(R"({"next": ["http_500_after_execute", "http_500_before_execute"]})")));
    const HttpResult failed = post_payment(r, "key-1", payment("op-1"));
    REQUIRE(failed.code == CURLE_OK);
    CHECK(failed.status == 500);
    CHECK(r.executions("op-1") == 1);
    CHECK(r.ledger()["charged"] == Json{{"eur", 4999}});

    // Checkout.com saves only 2xx answers: the same key executes a second payment. The double
    // charge a blind retry causes there, which the reconciler must prevent.
    const HttpResult retry = post_payment(r, "key-1", payment("op-1"));
    CHECK(retry.status == 500); // http_500_before_execute: nothing executed this time
    CHECK(r.executions("op-1") == 1);
    const HttpResult again = post_payment(r, "key-1", payment("op-1"));
    REQUIRE(again.status == 201);
    CHECK(r.executions("op-1") == 2);
    Json ledger = r.ledger();
    CHECK(ledger["charged"] == Json{{"eur", 2 * 4999}});
    CHECK(ledger["replays"] == 0);
    CHECK(ledger["faults_applied"] ==
          Json{{"http_500_after_execute", 1}, {"http_500_before_execute", 1}});

    // The lookup by reference sees both, newest first.
    const HttpResult found = get(r, "/payments?reference=op-1");
    REQUIRE(found.status == 200);
    const Json list = found.json();
    CHECK(list["total_count"] == 2);
    REQUIRE(list["data"].size() == 2);
    CHECK(list["data"][0]["id"] == again.json()["id"]);
    CHECK(list["data"][1]["id"] != again.json()["id"]);
    // The second key now keeps its 201.
    CHECK(post_payment(r, "key-1", payment("op-1")).body == again.body);
    CHECK(r.executions("op-1") == 2);
}

TEST_CASE("checkout: the same key while the first request executes gets 409, then replays the "
          "first",
          "[fake_provider][checkout][idempotency]") {
    Running r;
    r.server.close_gate();
    HttpResult first;
    HttpResult second;
    std::thread in_flight([&] { first = post_payment(r, "key-1", payment("op-1")); });
    REQUIRE(wait_until([&] { return r.server.held() == 1; }));
    std::thread again([&] { second = post_payment(r, "key-1", payment("op-1")); });
    REQUIRE(wait_until([&] { return r.server.held() == 2; }));
    CHECK(r.executions("op-1") == 0);
    r.server.open_gate();
    in_flight.join();
    again.join();
    REQUIRE(first.code == CURLE_OK);
    CHECK(first.status == 201);
    REQUIRE(second.code == CURLE_OK);
    CHECK(second.status == 409);
    CHECK(second.body.empty());
    CHECK(r.executions("op-1") == 1);

    const HttpResult third = post_payment(r, "key-1", payment("op-1"));
    CHECK(third.status == 201);
    CHECK(third.body == first.body);
    CHECK(r.deliveries() == 3);
    CHECK(r.executions("op-1") == 1);
}

TEST_CASE("checkout: a key keeps its 2xx for its retention of fake time, without idempotency every "
          "POST executes",
          "[fake_provider][checkout][idempotency]") {
    {
        auto options = options_with();
        options.checkout.key_retention = std::chrono::seconds(3600);
        Running r(std::move(options));
        const HttpResult first = post_payment(r, "key-1", payment("op-1"));
        REQUIRE(first.status == 201);
        r.server.advance_clock(std::chrono::seconds(3599));
        CHECK(post_payment(r, "key-1", payment("op-1")).body == first.body);
        CHECK(r.executions("op-1") == 1);
        r.server.advance_clock(std::chrono::seconds(2));
        const HttpResult late = post_payment(r, "key-1", payment("op-1"));
        CHECK(late.status == 201);
        CHECK(late.json()["id"] != first.json()["id"]);
        CHECK(r.executions("op-1") == 2);
    }
    {
        auto options = options_with();
        options.account.idempotency = false;
        Running r(std::move(options));
        const HttpResult a = post_payment(r, "key-1", payment("op-1"));
        const HttpResult b = post_payment(r, "key-1", payment("op-1"));
        REQUIRE(a.status == 201);
        REQUIRE(b.status == 201);
        CHECK(a.json()["id"] != b.json()["id"]);
        CHECK(r.executions("op-1") == 2);
        CHECK(r.ledger()["charged"]["eur"] == 2 * 4999);
    }
}

TEST_CASE("checkout: the lookup by reference pages newest first, lags by lookup_stale_s, answers "
          "503 while down and 404 without lookup",
          "[fake_provider][checkout][lookup]") {
    Running r;
    std::vector<std::string> ids;
    for (int i = 0; i < 3; ++i) {
        const HttpResult created =
            post_payment(r, "key-" + std::to_string(i), payment("op-p", 100 + i));
        REQUIRE(created.status == 201);
        ids.push_back(created.json()["id"]);
    }
    REQUIRE(post_payment(r, "key-other", payment("op-other")).status == 201);
    const HttpResult page1 = get(r, "/payments?reference=op-p&limit=2");
    REQUIRE(page1.status == 200);
    Json list = page1.json();
    CHECK(list["limit"] == 2);
    CHECK(list["skip"] == 0);
    CHECK(list["total_count"] == 3);
    REQUIRE(list["data"].size() == 2);
    CHECK(list["data"][0]["id"] == ids[2]);
    CHECK(list["data"][1]["id"] == ids[1]);
    CHECK(list["data"][0]["amount"] == 102);
    CHECK(list["data"][0]["reference"] == "op-p");
    CHECK_FALSE(list["data"][0]["requested_on"].get<std::string>().empty());
    const HttpResult page2 = get(r, "/payments?reference=op-p&limit=2&skip=2");
    REQUIRE(page2.status == 200);
    REQUIRE(page2.json()["data"].size() == 1);
    CHECK(page2.json()["data"][0]["id"] == ids[0]);
    CHECK(get(r, "/payments?reference=op-none").json()["total_count"] == 0);

    const HttpResult bad_limit = get(r, "/payments?reference=op-p&limit=0");
    CHECK(bad_limit.status == 422);
    CHECK(codes_of(bad_limit) == std::vector<std::string>{"paging_limit_invalid"});
    CHECK(codes_of(get(r, "/payments")) == std::vector<std::string>{"reference_required"});

    // Stale: a new payment is not found until lookup_stale_s fake seconds have passed; retrieve
    // by id sees it at once.
    r.server.set_faults(faults_from(R"({"lookup_stale_s": 3600})"));
    const HttpResult late = post_payment(r, "key-late", payment("op-late"));
    REQUIRE(late.status == 201);
    CHECK(get(r, "/payments?reference=op-late").json()["total_count"] == 0);
    CHECK(get(r, "/payments/" + late.json()["id"].get<std::string>()).status == 200);
    r.server.advance_clock(std::chrono::seconds(3599));
    CHECK(get(r, "/payments?reference=op-late").json()["total_count"] == 0);
    r.server.advance_clock(std::chrono::seconds(1));
    CHECK(get(r, "/payments?reference=op-late").json()["total_count"] == 1);

    r.server.set_faults(faults_from(R"({"lookup_down": true})"));
    const HttpResult down = get(r, "/payments?reference=op-p");
    CHECK(down.status == 503);
    CHECK(down.body.empty());
    CHECK(get(r, "/payments/" + ids[0]).status == 200);

    auto options = options_with();
    options.account.lookup = false;
    Running without(std::move(options));
    const HttpResult missing = get(without, "/payments?reference=op-p");
    CHECK(missing.status == 404);
    CHECK(missing.body.empty());
}

TEST_CASE("checkout: every socket fault applies to its create and is counted in the ledger",
          "[fake_provider][checkout][faults]") {
    Running r(options_with(faults_from(
        R"({"next": ["drop_before_execute", "execute_then_fin", "execute_then_rst",
                     "execute_then_hang", "execute_then_partial"], "hang_ms": 500})")));
    const int port = r.server.port();

    // drop_before_execute: FIN, nothing executed, the key free.
    const RawOutcome dropped =
        raw_exchange(port, raw_payment("key-drop", payment("op-drop")), milliseconds(3000));
    CHECK(dropped.ending == Ending::fin);
    CHECK(dropped.bytes.empty());
    CHECK(r.executions("op-drop") == 0);

    // execute_then_fin: executed, no answer; the key kept the 201, the retry replays it.
    const HttpResult lost = post_payment(r, "key-fin", payment("op-fin"));
    CHECK(lost.code == CURLE_GOT_NOTHING);
    CHECK(r.executions("op-fin") == 1);

    // execute_then_rst: executed, reset.
    const RawOutcome reset =
        raw_exchange(port, raw_payment("key-rst", payment("op-rst")), milliseconds(3000));
    CHECK(reset.ending == Ending::rst);
    CHECK(reset.bytes.empty());
    CHECK(r.executions("op-rst") == 1);

    // execute_then_hang: executed, held past the client's timeout.
    const HttpResult hung = post_payment(r, "key-hang", payment("op-hang"), 150);
    CHECK(hung.code == CURLE_OPERATION_TIMEDOUT);
    CHECK(r.executions("op-hang") == 1);

    // execute_then_partial: half the 201's body, then FIN.
    const HttpResult partial = post_payment(r, "key-partial", payment("op-partial"));
    CHECK(partial.code == CURLE_PARTIAL_FILE);
    CHECK(partial.status == 201);
    CHECK(r.executions("op-partial") == 1);

    // The retries: the dropped one executes now; the others replay their 201 without executing.
    CHECK(post_payment(r, "key-drop", payment("op-drop")).status == 201);
    for (const char* op : {"fin", "rst", "hang", "partial"}) {
        const HttpResult retry =
            post_payment(r, std::string("key-") + op, payment(std::string("op-") + op));
        CHECK(retry.status == 201);
        CHECK(retry.json()["reference"] == std::string("op-") + op);
    }

    // refuse: nothing arrives, nothing is delivered.
    r.server.set_faults(faults_from(R"({"next": ["refuse"], "refuse_ms": 300})"));
    CHECK(post_payment(r, "key-refused", payment("op-refused")).code == CURLE_COULDNT_CONNECT);
    REQUIRE(wait_until([&] { return r.server.listening(); }));
    CHECK(post_payment(r, "key-refused", payment("op-refused")).status == 201);

    const Json ledger = r.ledger();
    CHECK(ledger["deliveries"] == 5 + 5 + 1);
    CHECK(ledger["executions"] == Json{{"op-drop", 1},
                                       {"op-fin", 1},
                                       {"op-hang", 1},
                                       {"op-partial", 1},
                                       {"op-refused", 1},
                                       {"op-rst", 1}});
    CHECK(ledger["replays"] == 4);
    CHECK(ledger["charged"] == Json{{"eur", 6 * 4999}});
    CHECK(ledger["faults_applied"] == Json{{"drop_before_execute", 1},
                                           {"execute_then_fin", 1},
                                           {"execute_then_hang", 1},
                                           {"execute_then_partial", 1},
                                           {"execute_then_rst", 1},
                                           {"refuse", 1}});
}

TEST_CASE("checkout: a refund answers 202 with its action, executes once under its key, shows "
          "among the payment's actions and never goes past what is left",
          "[fake_provider][checkout][refunds]") {
    Running r;
    const HttpResult paid = post_payment(r, "key-p", payment("op-p", 5000));
    REQUIRE(paid.status == 201);
    const std::string id = paid.json()["id"];

    const HttpResult first = post_refund(r, id, "rk-1", refund(2000, "op-r1"));
    REQUIRE(first.status == 202);
    const Json accepted = first.json();
    static const std::regex k_action_id("act_[a-z2-7]{26}");
    CHECK(std::regex_match(accepted["action_id"].get<std::string>(), k_action_id));
    CHECK(accepted["reference"] == "op-r1");
    CHECK(accepted["_links"]["payment"]["href"] == r.url("/payments/" + id));
    // The same key replays the 202 byte for byte and executes nothing.
    CHECK(post_refund(r, id, "rk-1", refund(2000, "op-r1")).body == first.body);
    CHECK(r.executions("op-r1") == 1);
    Json ledger = r.ledger();
    CHECK(ledger["replays"] == 1);
    CHECK(ledger["refunded"] == Json{{"eur", 2000}});
    CHECK(ledger["charged"] == Json{{"eur", 3000}});
    CHECK(ledger["checkout_refund_count"] == 1);

    // Past what is left: 403 "Refund not allowed", nothing executed, nothing kept under the key.
    const HttpResult over = post_refund(r, id, "rk-2", refund(3001, "op-r2"));
    CHECK(over.status == 403);
    CHECK(over.body.empty());
    CHECK(r.executions("op-r2") == 0);
    const HttpResult rest = post_refund(r, id, "rk-2", refund(3000, "op-r2"));
    REQUIRE(rest.status == 202);
    CHECK(r.executions("op-r2") == 1);
    // Nothing left, even for an amount not given (the whole of what is left).
    CHECK(post_refund(r, id, "rk-3", Json{{"reference", "op-r3"}}).status == 403);
    CHECK(r.executions("op-r3") == 0);
    CHECK(r.ledger()["refunded"] == Json{{"eur", 5000}});

    const HttpResult details = get(r, "/payments/" + id);
    REQUIRE(details.status == 200);
    CHECK(details.json()["status"] == "Refunded");
    CHECK(details.json()["balances"]["total_refunded"] == 5000);
    CHECK(details.json()["balances"]["available_to_refund"] == 0);

    const HttpResult actions = get(r, "/payments/" + id + "/actions");
    REQUIRE(actions.status == 200);
    const Json list = actions.json();
    REQUIRE(list.size() == 4); // newest first: two refunds, the capture, the authorization
    CHECK(list[0]["type"] == "Refund");
    CHECK(list[0]["id"] == rest.json()["action_id"]);
    CHECK(list[0]["reference"] == "op-r2");
    CHECK(list[0]["amount"] == 3000);
    CHECK(list[0]["approved"] == true);
    CHECK(list[0]["response_code"] == "10000");
    CHECK(list[1]["type"] == "Refund");
    CHECK(list[1]["id"] == accepted["action_id"]);
    CHECK(list[1]["reference"] == "op-r1");
    CHECK(list[1]["amount"] == 2000);
    CHECK(list[2]["type"] == "Capture");
    CHECK(list[2]["amount"] == 5000);
    CHECK(list[3]["type"] == "Authorization");
    CHECK(list[3]["id"] == paid.json()["action_id"]);
    CHECK(list[3]["reference"] == "op-p");
}

TEST_CASE("checkout: a refund's faults as a create's -- a 500 after executing keeps nothing under "
          "the key, so the same key refunds again -- and unknown, unauthorised and invalid "
          "refunds execute nothing",
          "[fake_provider][checkout][refunds][faults]") {
    Running r;
    const HttpResult paid = post_payment(r, "key-p", payment("op-p", 5000));
    REQUIRE(paid.status == 201);
    const std::string id = paid.json()["id"];
    r.server.set_faults(faults_from(R"({"next": ["http_500_after_execute"]})"));
    CHECK(post_refund(r, id, "rk-1", refund(1000, "op-r1")).status == 500);
    CHECK(r.executions("op-r1") == 1);
    // Only 2xx is kept: the blind retry under the same key is a second refund.
    CHECK(post_refund(r, id, "rk-1", refund(1000, "op-r1")).status == 202);
    CHECK(r.executions("op-r1") == 2);
    CHECK(r.ledger()["refunded"] == Json{{"eur", 2000}});
    const Json list = get(r, "/payments/" + id + "/actions").json();
    CHECK(std::count_if(list.begin(), list.end(), [](const Json& a) {
              return a["type"] == "Refund" && a["reference"] == "op-r1";
          }) == 2);

    CHECK(post_refund(r, "pay_aaaaaaaaaaaaaaaaaaaaaaaaaa", "rk-2", refund(10, "op-r2")).status ==
          404);
    const HttpResult invalid = post_refund(r, id, "rk-3", Json{{"amount", -1}});
    CHECK(invalid.status == 422);
    CHECK(has(codes_of(invalid), "amount_invalid"));
    CHECK(call("POST", r.url("/payments/" + id + "/refunds"), {"Content-Type: application/json"},
               refund(10, "op-r4").dump())
              .status == 401);
    CHECK(r.executions("op-r2") == 0);
    CHECK(r.executions("op-r4") == 0);
    CHECK(r.ledger()["refunded"] == Json{{"eur", 2000}});
}

TEST_CASE("checkout: the payment's actions answer 503 while lookups are down, 404 for an unknown "
          "payment or without lookups",
          "[fake_provider][checkout][refunds]") {
    Running r;
    const HttpResult paid = post_payment(r, "key-p", payment("op-p", 5000));
    REQUIRE(paid.status == 201);
    const std::string id = paid.json()["id"];
    CHECK(get(r, "/payments/" + id + "/actions").status == 200);
    CHECK(get(r, "/payments/pay_aaaaaaaaaaaaaaaaaaaaaaaaaa/actions").status == 404);
    r.server.set_faults(faults_from(R"({"lookup_down": true})"));
    const HttpResult down = get(r, "/payments/" + id + "/actions");
    CHECK(down.status == 503);
    CHECK(down.body.empty());

    auto options = options_with();
    options.account.lookup = false;
    Running without(std::move(options));
    const HttpResult other = post_payment(without, "key-p", payment("op-p", 5000));
    REQUIRE(other.status == 201);
    CHECK(get(without, "/payments/" + other.json()["id"].get<std::string>() + "/actions").status ==
          404);
}
