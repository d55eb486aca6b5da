// The fake provider's Square dialect over real HTTP on loopback: POST /v2/payments as payrecon's
// square adapter sends it (the idempotency_key a body field), its idempotency as Square documents
// it and as the fake decides where Square says nothing (a key that executed holds its payment; the
// same key with another body is IDEMPOTENCY_KEY_REUSED; in flight 409 CONFLICT), GET
// /v2/payments/{id}, ListPayments by window and cursor with its lag and outage, and every fault,
// counted in the one ledger every dialect shares.
#include "tests/fake_provider/command_line.hpp"
#include "tests/fake_provider/test_client.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace payrecon;
using namespace payrecon::fake;
using namespace payrecon::fake::test;
using Json = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

constexpr const char* k_nonce = "cnon:card-nonce-ok";

// A CreatePaymentRequest as the square adapter sends it: the operation ID as idempotency_key and
// reference_id, the amount in ISO minor units, autocomplete.
Json payment(const std::string& op, long long amount = 4999, const std::string& currency = "EUR",
             const std::string& source = k_nonce) {
    Json j;
    j["idempotency_key"] = op;
    j["source_id"] = source;
    j["amount_money"] = {{"amount", amount}, {"currency", currency}};
    j["reference_id"] = op;
    j["autocomplete"] = true;
    return j;
}

HttpResult post_payment(const Running& r, const std::string& body, long timeout_ms = 5000) {
    return call("POST", r.url("/v2/payments"),
                {auth(), "Content-Type: application/json", "Square-Version: 2025-08-20"}, body,
                timeout_ms);
}

HttpResult post_payment(const Running& r, const Json& body, long timeout_ms = 5000) {
    return post_payment(r, body.dump(), timeout_ms);
}

HttpResult get(const Running& r, const std::string& path_and_query) {
    return call("GET", r.url(path_and_query), {auth(), "Square-Version: 2025-08-20"});
}

std::string raw_payment(const Json& body) {
    const std::string text = body.dump();
    return "POST /v2/payments HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
           std::string(k_api_key) +
           "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(text.size()) +
           "\r\nConnection: close\r\n\r\n" + text;
}

// The errors' codes, in order.
std::vector<std::string> codes_of(const HttpResult& result) {
    std::vector<std::string> codes;
    const Json body = result.json();
    for (const auto& e : body["errors"]) {
        codes.push_back(e["code"].get<std::string>());
    }
    return codes;
}

Json first_error(const Json& body) {
    return body["errors"].at(0);
}

std::string q(const std::string& text) {
    return http::percent_encode(text);
}

std::chrono::system_clock::time_point fake_now(const Running& r) {
    return std::chrono::system_clock::time_point(seconds(r.ledger()["now"].get<long long>()));
}

std::vector<std::string> ids_of(const Json& page) {
    std::vector<std::string> ids;
    if (page.contains("payments")) {
        for (const auto& p : page["payments"]) {
            ids.push_back(p["id"].get<std::string>());
        }
    }
    return ids;
}

long long unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

} // namespace

TEST_CASE("square: a payment executes once and answers 200 with the COMPLETED Payment, the same "
          "key and body replay it",
          "[fake_provider][square][idempotency]") {
    Running r;
    const HttpResult first = post_payment(r, payment("op-1"));
    REQUIRE(first.code == CURLE_OK);
    REQUIRE(first.status == 200);
    const Json body = first.json();
    CHECK_FALSE(body.contains("errors"));
    const Json& p = body["payment"];
    static const std::regex k_id("[0-9A-Za-z]{29}");
    static const std::regex k_time(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
    CHECK(std::regex_match(p["id"].get<std::string>(), k_id));
    CHECK(std::regex_match(p["order_id"].get<std::string>(), k_id));
    CHECK(p["status"] == "COMPLETED");
    CHECK(p["amount_money"] == Json{{"amount", 4999}, {"currency", "EUR"}});
    CHECK(p["total_money"] == p["amount_money"]);
    CHECK(p["approved_money"] == p["amount_money"]);
    CHECK(p["reference_id"] == "op-1");
    CHECK(p["source_type"] == "CARD");
    CHECK(p["card_details"]["status"] == "CAPTURED");
    CHECK(p["card_details"]["card"]["last_4"] == "1111");
    CHECK(p["card_details"]["entry_method"] == "KEYED");
    CHECK_FALSE(p["location_id"].get<std::string>().empty());
    CHECK(p["receipt_number"] == p["id"].get<std::string>().substr(0, 4));
    CHECK_FALSE(p.contains("customer_id"));
    const std::string created = p["created_at"];
    CHECK(std::regex_match(created, k_time));
    CHECK(p["updated_at"] == created);
    const auto at = parse_rfc3339(created);
    REQUIRE(at);
    CHECK(std::abs(std::chrono::duration_cast<seconds>(at->time_since_epoch()).count() -
                   unix_now()) <= 2);

    // The same key and the same request, however it is spelled: the first success again.
    const HttpResult second = post_payment(
        r, std::string(
               R"({"autocomplete":true, "reference_id":"op-1", "source_id":"cnon:card-nonce-ok",
               "amount_money":{"currency":"EUR","amount":4999}, "idempotency_key":"op-1"})"));
    REQUIRE(second.code == CURLE_OK);
    CHECK(second.status == 200);
    CHECK(second.body == first.body);

    Json ledger = r.ledger();
    CHECK(ledger["deliveries"] == 2);
    CHECK(ledger["deliveries_by_operation"]["op-1"] == 2);
    CHECK(ledger["executions"] == Json{{"op-1", 1}});
    CHECK(ledger["replays"] == 1);
    CHECK(ledger["charged"] == Json{{"eur", 4999}});
    CHECK(ledger["square_payment_count"] == 1);
    CHECK(ledger["payment_intent_count"] == 0);
    REQUIRE(ledger["square_payments"].size() == 1);
    CHECK(ledger["square_payments"][0] == p);

    // GetPayment.
    const HttpResult got = get(r, "/v2/payments/" + p["id"].get<std::string>());
    REQUIRE(got.status == 200);
    CHECK(got.json() == Json{{"payment", p}});
    const HttpResult unknown = get(r, "/v2/payments/AAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    CHECK(unknown.status == 404);
    CHECK(first_error(unknown.json())["code"] == "NOT_FOUND");
    CHECK(first_error(unknown.json())["category"] == "INVALID_REQUEST_ERROR");

    // autocomplete false: APPROVED, an execution that captures nothing. customer_id and note are
    // kept; a yen amount is in yen.
    Json approve = payment("op-2", 1000, "JPY");
    approve["autocomplete"] = false;
    approve["customer_id"] = "JDKYHBWT1D4F8MFH63DBMEN8Y4";
    approve["note"] = "2 concert tickets";
    const HttpResult approved = post_payment(r, approve);
    REQUIRE(approved.status == 200);
    const Json a = approved.json()["payment"];
    CHECK(a["status"] == "APPROVED");
    CHECK(a["card_details"]["status"] == "AUTHORIZED");
    CHECK(a["customer_id"] == "JDKYHBWT1D4F8MFH63DBMEN8Y4");
    CHECK(a["note"] == "2 concert tickets");
    CHECK(a["amount_money"] == Json{{"amount", 1000}, {"currency", "JPY"}});
    CHECK(post_payment(r, payment("op-3", 1000, "JPY")).status == 200);
    ledger = r.ledger();
    CHECK(ledger["executions"] == Json{{"op-1", 1}, {"op-2", 1}, {"op-3", 1}});
    CHECK(ledger["charged"] == Json{{"eur", 4999}, {"jpy", 1000}});
}

TEST_CASE("square: the same key with another request is 400 IDEMPOTENCY_KEY_REUSED, executes "
          "nothing, and the first request still replays",
          "[fake_provider][square][idempotency]") {
    Running r;
    const HttpResult first = post_payment(r, payment("op-1"));
    REQUIRE(first.status == 200);
    Json other = payment("op-1", 5000);
    const HttpResult reused = post_payment(r, other);
    REQUIRE(reused.code == CURLE_OK);
    CHECK(reused.status == 400);
    const Json e = first_error(reused.json());
    CHECK(e["category"] == "INVALID_REQUEST_ERROR");
    CHECK(e["code"] == "IDEMPOTENCY_KEY_REUSED");
    CHECK(e["field"] == "idempotency_key");
    CHECK_FALSE(reused.json().contains("payment"));
    // Another reference under the same key is another request too.
    other = payment("op-1");
    other["reference_id"] = "op-other";
    CHECK(codes_of(post_payment(r, other)) == std::vector<std::string>{"IDEMPOTENCY_KEY_REUSED"});
    CHECK(post_payment(r, payment("op-1")).body == first.body);
    const Json ledger = r.ledger();
    CHECK(ledger["executions"] == Json{{"op-1", 1}});
    CHECK(ledger["replays"] == 1);
    CHECK(ledger["deliveries"] == 4);
    CHECK(ledger["deliveries_by_operation"] == Json{{"op-1", 3}, {"op-other", 1}});
    CHECK(ledger["charged"] == Json{{"eur", 4999}});
}

TEST_CASE("square: a decline is 400 PAYMENT_METHOD_ERROR with the FAILED payment, an execution "
          "that charges nothing, and its key answers it again",
          "[fake_provider][square][faults]") {
    Running r(options_with(faults_from(R"({"next": ["decline"]})")));
    const HttpResult declined = post_payment(r, payment("op-1"));
    REQUIRE(declined.code == CURLE_OK);
    CHECK(declined.status == 400);
    const Json body = declined.json();
    CHECK(first_error(body)["category"] == "PAYMENT_METHOD_ERROR");
    CHECK(first_error(body)["code"] == "CARD_DECLINED");
    const Json& p = body["payment"];
    CHECK(p["status"] == "FAILED");
    CHECK(p["reference_id"] == "op-1");
    CHECK(p["amount_money"] == Json{{"amount", 4999}, {"currency", "EUR"}});
    CHECK(p["approved_money"]["amount"] == 0);
    CHECK(p["card_details"]["status"] == "FAILED");
    CHECK(p["card_details"]["errors"][0]["code"] == "CARD_DECLINED");
    CHECK_FALSE(p.contains("receipt_url"));

    // Square's sandbox nonces that decline.
    const HttpResult nonce =
        post_payment(r, payment("op-2", 100, "EUR", "cnon:card-nonce-declined"));
    CHECK(nonce.status == 400);
    CHECK(codes_of(nonce) == std::vector<std::string>{"CARD_DECLINED"});
    CHECK(nonce.json()["payment"]["status"] == "FAILED");
    const HttpResult cvv =
        post_payment(r, payment("op-3", 100, "EUR", "cnon:card-nonce-rejected-cvv"));
    CHECK(codes_of(cvv) == std::vector<std::string>{"CVV_FAILURE"});
    CHECK(cvv.json()["payment"]["card_details"]["cvv_status"] == "CVV_REJECTED");

    // The key holds the failed payment: the same request answers it again, nothing executed.
    const HttpResult replay = post_payment(r, payment("op-1"));
    CHECK(replay.status == 400);
    CHECK(replay.body == declined.body);
    CHECK(get(r, "/v2/payments/" + p["id"].get<std::string>()).json()["payment"]["status"] ==
          "FAILED");
    const Json ledger = r.ledger();
    CHECK(ledger["executions"] == Json{{"op-1", 1}, {"op-2", 1}, {"op-3", 1}});
    CHECK(ledger["charged"].empty());
    CHECK(ledger["replays"] == 1);
    CHECK(ledger["faults_applied"] == Json{{"decline", 1}});
}

TEST_CASE("square: invalid requests get 400 INVALID_REQUEST_ERROR with Square's codes, execute "
          "nothing and keep no key",
          "[fake_provider][square][validation]") {
    Running r;
    const HttpResult empty = post_payment(r, std::string("{}"));
    REQUIRE(empty.status == 400);
    const Json empty_body = empty.json();
    for (const auto& e : empty_body["errors"]) {
        CHECK(e["category"] == "INVALID_REQUEST_ERROR");
        CHECK_FALSE(e["detail"].get<std::string>().empty());
    }
    CHECK(codes_of(empty) == std::vector<std::string>{"MISSING_REQUIRED_PARAMETER",
                                                      "MISSING_REQUIRED_PARAMETER",
                                                      "MISSING_REQUIRED_PARAMETER"});
    std::vector<std::string> fields;
    for (const auto& e : empty_body["errors"]) {
        fields.push_back(e["field"]);
    }
    CHECK(fields == std::vector<std::string>{"idempotency_key", "source_id", "amount_money"});

    // One change to a valid request, and the one error (code, field) it must give.
    const auto error_for = [&](const std::function<void(Json&)>& change) {
        Json body = payment("op-1");
        change(body);
        const HttpResult result = post_payment(r, body);
        CHECK(result.status == 400);
        const Json errors = result.json()["errors"];
        CHECK(errors.size() == 1);
        return std::pair(errors.at(0)["code"].get<std::string>(),
                         errors.at(0).value("field", std::string()));
    };
    using E = std::pair<std::string, std::string>;
    CHECK(error_for([](Json& b) { b["merchant_reference"] = "x"; }) ==
          E{"UNKNOWN_BODY_PARAMETER", "merchant_reference"});
    CHECK(error_for([](Json& b) { b["idempotency_key"] = std::string(46, 'k'); }) ==
          E{"VALUE_TOO_LONG", "idempotency_key"});
    CHECK(error_for([](Json& b) { b["idempotency_key"] = ""; }) ==
          E{"VALUE_EMPTY", "idempotency_key"});
    CHECK(error_for([](Json& b) { b["idempotency_key"] = 7; }) ==
          E{"EXPECTED_STRING", "idempotency_key"});
    CHECK(error_for([](Json& b) { b["source_id"] = ""; }) == E{"VALUE_EMPTY", "source_id"});
    CHECK(error_for([](Json& b) { b["reference_id"] = std::string(41, 'r'); }) ==
          E{"VALUE_TOO_LONG", "reference_id"});
    CHECK(error_for([](Json& b) { b["amount_money"]["amount"] = 49.99; }) ==
          E{"EXPECTED_INTEGER", "amount_money.amount"});
    CHECK(error_for([](Json& b) { b["amount_money"]["amount"] = "4999"; }) ==
          E{"EXPECTED_INTEGER", "amount_money.amount"});
    CHECK(error_for([](Json& b) { b["amount_money"]["amount"] = 0; }) ==
          E{"VALUE_TOO_LOW", "amount_money.amount"});
    CHECK(error_for([](Json& b) { b["amount_money"].erase("amount"); }) ==
          E{"MISSING_REQUIRED_PARAMETER", "amount_money.amount"});
    CHECK(error_for([](Json& b) { b["amount_money"]["currency"] = "eur"; }) ==
          E{"INVALID_ENUM_VALUE", "amount_money.currency"});
    CHECK(error_for([](Json& b) { b["amount_money"] = 4999; }) ==
          E{"EXPECTED_OBJECT", "amount_money"});
    CHECK(error_for([](Json& b) { b["autocomplete"] = "yes"; }) ==
          E{"EXPECTED_BOOLEAN", "autocomplete"});
    CHECK(error_for([](Json& b) { b["note"] = std::string(501, 'n'); }) ==
          E{"VALUE_TOO_LONG", "note"});
    CHECK(error_for([](Json& b) {
              b["tip_money"] = {{"amount", 100}, {"currency", "EUR"}};
          }) == E{"BAD_REQUEST", "tip_money"});
    const HttpResult garbage = post_payment(r, std::string("not json"));
    CHECK(garbage.status == 400);
    CHECK(codes_of(garbage) == std::vector<std::string>{"EXPECTED_JSON_BODY"});
    CHECK(codes_of(post_payment(r, std::string("[1]"))) ==
          std::vector<std::string>{"EXPECTED_JSON_BODY"});
    CHECK(r.executions("op-1") == 0);
    CHECK(r.ledger()["square_payment_count"] == 0);

    // Nothing was kept under the key, though requests with other bodies used it: the valid one
    // executes.
    const HttpResult valid = post_payment(r, payment("op-1"));
    CHECK(valid.status == 200);
    CHECK(r.executions("op-1") == 1);
    CHECK(r.ledger()["replays"] == 0);
    CHECK(r.deliveries() == 19);

    // An account that takes only USD: a known currency it does not take is UNSUPPORTED_CURRENCY.
    auto options = options_with();
    options.square.currencies = {"USD"};
    Running usd(std::move(options));
    const HttpResult unsupported = post_payment(usd, payment("op-eur"));
    CHECK(unsupported.status == 400);
    CHECK(codes_of(unsupported) == std::vector<std::string>{"UNSUPPORTED_CURRENCY"});
    CHECK(post_payment(usd, payment("op-usd", 100, "USD")).status == 200);
    CHECK(usd.ledger()["executions"] == Json{{"op-usd", 1}});
}

TEST_CASE("square: a missing or wrong access token gets 401 UNAUTHORIZED and executes nothing",
          "[fake_provider][square][auth]") {
    Running r;
    const std::string body = payment("op-1").dump();
    const HttpResult none = call("POST", r.url("/v2/payments"), {}, body);
    CHECK(none.status == 401);
    CHECK(first_error(none.json()) == Json{{"category", "AUTHENTICATION_ERROR"},
                                           {"code", "UNAUTHORIZED"},
                                           {"detail", first_error(none.json())["detail"]}});
    const HttpResult wrong = call("POST", r.url("/v2/payments"), {auth("EAAAwrongtoken")}, body);
    CHECK(wrong.status == 401);
    CHECK(codes_of(wrong) == std::vector<std::string>{"UNAUTHORIZED"});
    CHECK(call("POST", r.url("/v2/payments"), {"Authorization: " + std::string(k_api_key)}, body)
              .status == 401);
    CHECK(call("GET", r.url("/v2/payments"), {auth("EAAAwrongtoken")}).status == 401);
    CHECK(call("GET", r.url("/v2/payments/X"), {}).status == 401);
    CHECK(r.deliveries() == 3); // the creates only
    CHECK(r.executions("op-1") == 0);
    // A 401 keeps nothing under the key.
    CHECK(post_payment(r, body).status == 200);
    CHECK(r.executions("op-1") == 1);
    CHECK(r.ledger()["replays"] == 0);
    // What the fake does not serve, in Square's envelope; PayPal keeps its own /v2/payments/...
    CHECK(codes_of(call("POST", r.url("/v2/payments/X/complete"), {auth()}, "{}")) ==
          std::vector<std::string>{"NOT_FOUND"});
    CHECK(call("GET", r.url("/v2/payments/captures/X"), {}).json()["name"] ==
          "AUTHENTICATION_FAILURE");
}

TEST_CASE("square: the same key while the first request executes gets 409 CONFLICT (another "
          "body IDEMPOTENCY_KEY_REUSED), then the payment",
          "[fake_provider][square][idempotency]") {
    Running r;
    r.server.close_gate();
    HttpResult first;
    HttpResult second;
    HttpResult third;
    std::thread in_flight([&] { first = post_payment(r, payment("op-1")); });
    REQUIRE(wait_until([&] { return r.server.held() == 1; }));
    std::thread again([&] { second = post_payment(r, payment("op-1")); });
    REQUIRE(wait_until([&] { return r.server.held() == 2; }));
    std::thread other([&] { third = post_payment(r, payment("op-1", 1)); });
    REQUIRE(wait_until([&] { return r.server.held() == 3; }));
    CHECK(r.executions("op-1") == 0);
    r.server.open_gate();
    in_flight.join();
    again.join();
    other.join();
    REQUIRE(first.code == CURLE_OK);
    CHECK(first.status == 200);
    REQUIRE(second.code == CURLE_OK);
    CHECK(second.status == 409);
    CHECK(first_error(second.json())["category"] == "INVALID_REQUEST_ERROR");
    CHECK(first_error(second.json())["code"] == "CONFLICT");
    REQUIRE(third.code == CURLE_OK);
    CHECK(third.status == 400);
    CHECK(codes_of(third) == std::vector<std::string>{"IDEMPOTENCY_KEY_REUSED"});
    CHECK(r.executions("op-1") == 1);

    const HttpResult fourth = post_payment(r, payment("op-1"));
    CHECK(fourth.status == 200);
    CHECK(fourth.body == first.body);
    CHECK(r.deliveries() == 4);
    CHECK(r.executions("op-1") == 1);
    CHECK(r.ledger()["replays"] == 1);
}

TEST_CASE("square: a 500 after execution leaves the key holding the payment (the retry gets it, "
          "200), a 500 before execution leaves the key free",
          "[fake_provider][square][idempotency][faults]") {
    Running r(options_with(faults_from(R"({"next": ["http_500_after_execute"]})")));
    const HttpResult failed = post_payment(r, payment("op-1"));
    REQUIRE(failed.code == CURLE_OK);
    CHECK(failed.status == 500);
    CHECK(first_error(failed.json()) == Json{{"category", "API_ERROR"},
                                             {"code", "INTERNAL_SERVER_ERROR"},
                                             {"detail", first_error(failed.json())["detail"]}});
    CHECK(r.executions("op-1") == 1);
    const HttpResult retry = post_payment(r, payment("op-1"));
    REQUIRE(retry.status == 200);
    CHECK(retry.json()["payment"]["status"] == "COMPLETED");
    CHECK(retry.json()["payment"]["id"] == r.ledger()["square_payments"][0]["id"]);
    CHECK(r.executions("op-1") == 1);

    r.server.set_faults(faults_from(R"({"next": ["http_500_before_execute"]})"));
    const HttpResult before = post_payment(r, payment("op-2"));
    CHECK(before.status == 500);
    CHECK(r.executions("op-2") == 0);
    CHECK(post_payment(r, payment("op-2")).status == 200);
    const Json ledger = r.ledger();
    CHECK(ledger["executions"] == Json{{"op-1", 1}, {"op-2", 1}});
    CHECK(ledger["replays"] == 1);
    CHECK(ledger["charged"] == Json{{"eur", 2 * 4999}});
    CHECK(ledger["faults_applied"] ==
          Json{{"http_500_after_execute", 1}, {"http_500_before_execute", 1}});
}

TEST_CASE("square: a key holds its payment for its retention of fake time, without idempotency "
          "every POST executes",
          "[fake_provider][square][idempotency]") {
    {
        auto options = options_with();
        options.square.key_retention = seconds(3600);
        Running r(std::move(options));
        const HttpResult first = post_payment(r, payment("op-1"));
        REQUIRE(first.status == 200);
        r.server.advance_clock(seconds(3599));
        CHECK(post_payment(r, payment("op-1")).body == first.body);
        CHECK(r.executions("op-1") == 1);
        r.server.advance_clock(seconds(2));
        const HttpResult late = post_payment(r, payment("op-1"));
        CHECK(late.status == 200);
        CHECK(late.json()["payment"]["id"] != first.json()["payment"]["id"]);
        CHECK(r.executions("op-1") == 2);
        // Forgotten, the key takes another body too.
        r.server.advance_clock(seconds(3601));
        CHECK(post_payment(r, payment("op-1", 1)).status == 200);
        CHECK(r.executions("op-1") == 3);
    }
    {
        auto options = options_with();
        options.account.idempotency = false;
        Running r(std::move(options));
        const HttpResult a = post_payment(r, payment("op-1"));
        const HttpResult b = post_payment(r, payment("op-1"));
        REQUIRE(a.status == 200);
        REQUIRE(b.status == 200);
        CHECK(a.json()["payment"]["id"] != b.json()["payment"]["id"]);
        CHECK(r.executions("op-1") == 2);
        CHECK(r.ledger()["charged"]["eur"] == 2 * 4999);
        // The key is still a required field.
        Json keyless = payment("op-1");
        keyless.erase("idempotency_key");
        CHECK(codes_of(post_payment(r, keyless)) ==
              std::vector<std::string>{"MISSING_REQUIRED_PARAMETER"});
    }
}

TEST_CASE(
    "square: ListPayments pages the window from begin_time (inclusive) to end_time (exclusive) by "
    "cursor, ASC or DESC, and checks its query",
    "[fake_provider][square][lookup]") {
    Running r;
    std::vector<std::string> ids;
    std::vector<std::string> created;
    for (int i = 0; i < 5; ++i) {
        const HttpResult p = post_payment(r, payment("op-" + std::to_string(i), 100 + i));
        REQUIRE(p.status == 200);
        ids.push_back(p.json()["payment"]["id"]);
        created.push_back(p.json()["payment"]["created_at"]);
        r.server.advance_clock(seconds(1)); // distinct created_at
    }
    const auto now = fake_now(r);
    const std::string window = "begin_time=" + q(rfc3339(now - std::chrono::hours(1))) +
                               "&end_time=" + q(rfc3339(now + std::chrono::hours(1)));

    // ASC, two at a time: three pages, the last one without a cursor.
    HttpResult page = get(r, "/v2/payments?" + window + "&sort_order=ASC&limit=2");
    REQUIRE(page.status == 200);
    Json body = page.json();
    CHECK(ids_of(body) == std::vector<std::string>{ids[0], ids[1]});
    REQUIRE(body.contains("cursor"));
    CHECK(body["payments"][0]["reference_id"] == "op-0");
    CHECK(body["payments"][1]["amount_money"]["amount"] == 101);
    std::vector<std::string> seen = ids_of(body);
    int pages = 1;
    while (body.contains("cursor")) {
        page = get(r, "/v2/payments?" + window +
                          "&sort_order=ASC&limit=2&cursor=" + q(body["cursor"].get<std::string>()));
        REQUIRE(page.status == 200);
        body = page.json();
        const auto more = ids_of(body);
        seen.insert(seen.end(), more.begin(), more.end());
        ++pages;
    }
    CHECK(pages == 3);
    CHECK(seen == ids);

    // DESC is the default; a cursor alone continues its query.
    body = get(r, "/v2/payments?" + window + "&limit=3").json();
    CHECK(ids_of(body) == std::vector<std::string>{ids[4], ids[3], ids[2]});
    body = get(r, "/v2/payments?limit=3&cursor=" + q(body["cursor"].get<std::string>())).json();
    CHECK(ids_of(body) == std::vector<std::string>{ids[1], ids[0]});
    CHECK_FALSE(body.contains("cursor"));
    // No window at all: the last year up to now, 100 at most.
    CHECK(ids_of(get(r, "/v2/payments").json()).size() == 5);
    CHECK(ids_of(get(r, "/v2/payments?limit=1000").json()).size() == 5); // above 100: ignored

    // begin_time inclusive, end_time exclusive, to the millisecond.
    body = get(r, "/v2/payments?sort_order=ASC&begin_time=" + q(created[1]) +
                      "&end_time=" + q(created[3]))
               .json();
    CHECK(ids_of(body) == std::vector<std::string>{ids[1], ids[2]});
    // Nothing in the window: {}.
    const HttpResult none =
        get(r, "/v2/payments?begin_time=2020-01-01T00:00:00Z&end_time=2020-01-02T00:00:00Z");
    CHECK(none.status == 200);
    CHECK(none.body == "{}");

    // A payment made while paging ASC shows on a later page, nothing twice.
    body = get(r, "/v2/payments?" + window + "&sort_order=ASC&limit=2").json();
    seen = ids_of(body);
    const HttpResult late = post_payment(r, payment("op-late"));
    REQUIRE(late.status == 200);
    while (body.contains("cursor")) {
        body = get(r, "/v2/payments?" + window +
                          "&sort_order=ASC&limit=2&cursor=" + q(body["cursor"].get<std::string>()))
                   .json();
        const auto more = ids_of(body);
        seen.insert(seen.end(), more.begin(), more.end());
    }
    std::vector<std::string> expected = ids;
    expected.push_back(late.json()["payment"]["id"]);
    CHECK(seen == expected);

    // The query is checked.
    const auto error_of = [&](const std::string& query) {
        const HttpResult result = get(r, "/v2/payments?" + query);
        CHECK(result.status == 400);
        const Json e = first_error(result.json());
        CHECK(e["category"] == "INVALID_REQUEST_ERROR");
        return e["code"].get<std::string>();
    };
    CHECK(error_of("limit=0") == "INVALID_VALUE");
    CHECK(error_of("limit=ten") == "EXPECTED_INTEGER");
    CHECK(error_of("sort_order=asc") == "INVALID_SORT_ORDER");
    CHECK(error_of("begin_time=yesterday") == "INVALID_TIME");
    CHECK(error_of("begin_time=2026-01-02&end_time=2026-01-03") == "INVALID_TIME");
    CHECK(error_of("begin_time=2026-01-02T00:00:00Z&end_time=2026-01-01T00:00:00Z") ==
          "INVALID_TIME_RANGE");
    CHECK(error_of("cursor=not-a-cursor") == "INVALID_CURSOR");
    const std::string cursor =
        get(r, "/v2/payments?" + window + "&sort_order=ASC&limit=2").json()["cursor"];
    CHECK(error_of(window + "&sort_order=DESC&cursor=" + q(cursor)) == "INVALID_CURSOR");
    CHECK(error_of("begin_time=2020-01-01T00:00:00Z&cursor=" + q(cursor)) == "INVALID_CURSOR");
    CHECK(error_of("reference_id=op-1") == "UNKNOWN_QUERY_PARAMETER");
    CHECK(error_of("sort_field=UPDATED_AT") == "BAD_REQUEST");
    // Listing is no delivery.
    CHECK(r.deliveries() == 6);
}

TEST_CASE("square: ListPayments shows a payment only lookup_stale_s after it, answers 503 while "
          "down and 403 without lookup, GetPayment is not affected",
          "[fake_provider][square][lookup]") {
    Running r(options_with(faults_from(R"({"lookup_stale_s": 3600})")));
    const HttpResult created = post_payment(r, payment("op-1"));
    REQUIRE(created.status == 200);
    const std::string id = created.json()["payment"]["id"];
    const auto now = fake_now(r);
    const std::string window =
        "/v2/payments?begin_time=" + q(rfc3339(now - std::chrono::hours(1))) +
        "&end_time=" + q(rfc3339(now + std::chrono::hours(2)));
    CHECK(get(r, window).body == "{}");
    CHECK(get(r, "/v2/payments/" + id).status == 200);
    r.server.advance_clock(seconds(3598));
    CHECK(get(r, window).body == "{}");
    r.server.advance_clock(seconds(2));
    CHECK(ids_of(get(r, window).json()) == std::vector<std::string>{id});

    r.server.set_faults(faults_from(R"({"lookup_down": true})"));
    const HttpResult down = get(r, window);
    CHECK(down.status == 503);
    CHECK(first_error(down.json())["category"] == "API_ERROR");
    CHECK(first_error(down.json())["code"] == "SERVICE_UNAVAILABLE");
    CHECK(get(r, "/v2/payments/" + id).status == 200);

    auto options = options_with();
    options.account.lookup = false;
    Running without(std::move(options));
    const HttpResult missing = get(without, "/v2/payments");
    CHECK(missing.status == 403);
    CHECK(first_error(missing.json())["category"] == "AUTHENTICATION_ERROR");
    CHECK(first_error(missing.json())["code"] == "INSUFFICIENT_SCOPES");
}

TEST_CASE("square: every socket fault applies to its create and is counted in the ledger",
          "[fake_provider][square][faults]") {
    Running r(options_with(faults_from(
        R"({"next": ["drop_before_execute", "execute_then_fin", "execute_then_rst",
                     "execute_then_hang", "execute_then_partial"], "hang_ms": 500})")));
    const int port = r.server.port();

    // drop_before_execute: FIN, nothing executed, the key free.
    const RawOutcome dropped =
        raw_exchange(port, raw_payment(payment("op-drop")), milliseconds(3000));
    CHECK(dropped.ending == Ending::fin);
    CHECK(dropped.bytes.empty());
    CHECK(r.executions("op-drop") == 0);

    // execute_then_fin: executed, no answer.
    const HttpResult lost = post_payment(r, payment("op-fin"));
    CHECK(lost.code == CURLE_GOT_NOTHING);
    CHECK(r.executions("op-fin") == 1);

    // execute_then_rst: executed, reset.
    const RawOutcome reset = raw_exchange(port, raw_payment(payment("op-rst")), milliseconds(3000));
    CHECK(reset.ending == Ending::rst);
    CHECK(reset.bytes.empty());
    CHECK(r.executions("op-rst") == 1);

    // execute_then_hang: executed, held past the client's timeout.
    const HttpResult hung = post_payment(r, payment("op-hang"), 150);
    CHECK(hung.code == CURLE_OPERATION_TIMEDOUT);
    CHECK(r.executions("op-hang") == 1);

    // execute_then_partial: half the 200's body, then FIN.
    const HttpResult partial = post_payment(r, payment("op-partial"));
    CHECK(partial.code == CURLE_PARTIAL_FILE);
    CHECK(partial.status == 200);
    CHECK(r.executions("op-partial") == 1);

    // The retries: the dropped one executes now; the others get their payment, nothing executed.
    CHECK(post_payment(r, payment("op-drop")).status == 200);
    for (const char* op : {"fin", "rst", "hang", "partial"}) {
        const HttpResult retry = post_payment(r, payment(std::string("op-") + op));
        CHECK(retry.status == 200);
        CHECK(retry.json()["payment"]["reference_id"] == std::string("op-") + op);
        CHECK(retry.json()["payment"]["status"] == "COMPLETED");
    }

    // refuse: nothing arrives, nothing is delivered.
    r.server.set_faults(faults_from(R"({"next": ["refuse"], "refuse_ms": 300})"));
    CHECK(post_payment(r, payment("op-refused")).code == CURLE_COULDNT_CONNECT);
    REQUIRE(wait_until([&] { return r.server.listening(); }));
    CHECK(post_payment(r, payment("op-refused")).status == 200);

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
    CHECK(ledger["square_payment_count"] == 6);
    CHECK(ledger["faults_applied"] == Json{{"drop_before_execute", 1},
                                           {"execute_then_fin", 1},
                                           {"execute_then_hang", 1},
                                           {"execute_then_partial", 1},
                                           {"execute_then_rst", 1},
                                           {"refuse", 1}});
}

TEST_CASE("square: one ledger, fault queue and reset with the other dialects, the operation ID "
          "falls back to the key",
          "[fake_provider][square][ledger]") {
    Running r(options_with(faults_from(R"({"next": ["decline", "decline"]})")));
    CHECK(post_payment(r, payment("op-square")).status == 400); // the first decline
    Json checkout;
    checkout["source"] = {{"type", "id"}, {"id", "src_wmlfc3zyhqzehihu7giusaaawu"}};
    checkout["amount"] = 500;
    checkout["currency"] = "EUR";
    checkout["reference"] = "op-checkout";
    CHECK(call("POST", r.url("/payments"), {auth(), "Cko-Idempotency-Key: k-1"}, checkout.dump())
              .json()["status"] == "Declined");
    // No reference_id: counted under the idempotency key.
    Json keyed = payment("key-only", 700);
    keyed.erase("reference_id");
    const HttpResult charged = post_payment(r, keyed);
    REQUIRE(charged.status == 200);
    CHECK_FALSE(charged.json()["payment"].contains("reference_id"));
    Json ledger = r.ledger();
    CHECK(ledger["executions"] == Json{{"key-only", 1}, {"op-checkout", 1}, {"op-square", 1}});
    CHECK(ledger["charged"] == Json{{"eur", 700}});
    CHECK(ledger["faults_applied"] == Json{{"decline", 2}});
    CHECK(ledger["square_payment_count"] == 2);
    CHECK(ledger["checkout_payment_count"] == 1);
    const auto lean = r.server.ledger(LedgerOptions{.payment_intents = false});
    CHECK_FALSE(lean.contains("square_payments"));
    CHECK(lean["square_payment_count"] == 2);

    r.server.reset();
    ledger = r.ledger();
    CHECK(ledger["deliveries"] == 0);
    CHECK(ledger["square_payment_count"] == 0);
    CHECK(ledger["square_payments"].empty());
    // The key is free again: another body under it executes.
    const HttpResult again = post_payment(r, payment("op-square", 1));
    CHECK(again.status == 200);
    CHECK(r.executions("op-square") == 1);
}

TEST_CASE("square: the command line sets the key retention", "[fake_provider][square][cli]") {
    auto parse = [](std::vector<std::string> args) {
        CLI::App app;
        CommandLine command_line;
        add_options(app, command_line);
        args.insert(args.begin(), {"payrecon-fake-provider", "--api-key-env", "FAKE_KEY"});
        std::vector<const char*> argv;
        for (const auto& a : args) {
            argv.push_back(a.c_str());
        }
        app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
        return to_options(command_line, [](const char* name) -> const char* {
            return std::string(name) == "FAKE_KEY" ? "sk_test_k" : nullptr;
        });
    };
    CHECK(parse({}).square.key_retention == seconds(86400));
    CHECK(parse({"--square-key-retention-s", "600"}).square.key_retention == seconds(600));
    CHECK_THROWS_AS(parse({"--square-key-retention-s=-1"}), std::invalid_argument);
}

TEST_CASE("square: ListPaymentRefunds lists the refunds of a window in order by cursor, a "
          "declined refund REJECTED, its cursors its own",
          "[fake_provider][square][refunds]") {
    Running r;
    const HttpResult created = post_payment(r, payment("op-pay", 5000));
    REQUIRE(created.status == 200);
    const std::string payment_id = created.json()["payment"]["id"];
    const auto refund = [&](const std::string& op, long long amount) {
        Json j;
        j["idempotency_key"] = op;
        j["payment_id"] = payment_id;
        j["amount_money"] = {{"amount", amount}, {"currency", "EUR"}};
        j["reason"] = "requested_by_customer [" + op + "]";
        return call("POST", r.url("/v2/refunds"),
                    {auth(), "Content-Type: application/json", "Square-Version: 2025-08-20"},
                    j.dump());
    };
    const auto now = fake_now(r);
    REQUIRE(refund("op-r1", 100).status == 200);
    REQUIRE(refund("op-r2", 200).status == 200);
    r.server.set_faults(faults_from(R"({"next": ["decline"]})"));
    const HttpResult declined = refund("op-r3", 300);
    CHECK(declined.status == 400);
    CHECK(first_error(declined.json())["category"] == "REFUND_ERROR");
    CHECK(first_error(declined.json())["code"] == "REFUND_DECLINED");
    CHECK(declined.json()["refund"]["status"] == "REJECTED");
    CHECK(r.executions("op-r3") == 1);
    CHECK(r.ledger()["refunded"]["eur"] == 300);       // the REJECTED one gave nothing back
    CHECK(refund("op-r3", 300).body == declined.body); // its key replays the refusal

    const std::string window = "/v2/refunds?begin_time=" + q(rfc3339(now - seconds(60))) +
                               "&end_time=" + q(rfc3339(now + seconds(60))) + "&sort_order=ASC";
    std::vector<std::string> statuses;
    std::vector<long long> amounts;
    std::string cursor;
    int pages = 0;
    for (;;) {
        const HttpResult page =
            get(r, window + "&limit=2" + (cursor.empty() ? "" : "&cursor=" + q(cursor)));
        REQUIRE(page.status == 200);
        ++pages;
        const Json body = page.json();
        for (const Json& item : body["refunds"]) {
            amounts.push_back(item["amount_money"]["amount"]);
            statuses.push_back(item["status"]);
        }
        if (!body.contains("cursor")) {
            break;
        }
        cursor = body["cursor"];
        REQUIRE(pages < 10);
    }
    CHECK(pages == 2);
    CHECK(amounts == std::vector<long long>{100, 200, 300}); // ASC: oldest first
    CHECK(statuses == std::vector<std::string>{"COMPLETED", "COMPLETED", "REJECTED"});
    CHECK(get(r, window + "&status=REJECTED").json()["refunds"].size() == 1);
    // Outside the window: nothing.
    CHECK(get(r, "/v2/refunds?begin_time=" + q(rfc3339(now - std::chrono::hours(2))) +
                     "&end_time=" + q(rfc3339(now - std::chrono::hours(1))))
              .body == "{}");

    // A ListPayments cursor is not a ListPaymentRefunds one.
    REQUIRE(post_payment(r, payment("op-pay-2", 100)).status == 200);
    const std::string payments_cursor =
        get(r, "/v2/payments?begin_time=" + q(rfc3339(now - seconds(60))) + "&limit=1")
            .json()["cursor"];
    const HttpResult foreign = get(r, "/v2/refunds?cursor=" + q(payments_cursor));
    CHECK(foreign.status == 400);
    CHECK(first_error(foreign.json())["code"] == "INVALID_CURSOR");

    r.server.set_faults(faults_from(R"({"lookup_down": true})"));
    CHECK(get(r, window).status == 503);
    r.server.set_faults(faults_from(R"({"list_rate_limited": true})"));
    const HttpResult limited = get(r, window);
    CHECK(limited.status == 429);
    CHECK(limited.header("retry-after") == "1");
    CHECK(first_error(limited.json())["category"] == "RATE_LIMIT_ERROR");
}

TEST_CASE("square: the refund_reversed seed makes a COMPLETED refund FAILED -- GetPaymentRefund, "
          "the payment and ListPaymentRefunds show it, refunded_money and the ledger give it "
          "back, and no later refund of the payment is allowed",
          "[fake_provider][square][refunds][seed]") {
    Running r;
    const HttpResult created = post_payment(r, payment("op-pay", 5000));
    REQUIRE(created.status == 200);
    const std::string payment_id = created.json()["payment"]["id"];
    const auto refund = [&](const std::string& op, long long amount) {
        Json j;
        j["idempotency_key"] = op;
        j["payment_id"] = payment_id;
        j["amount_money"] = {{"amount", amount}, {"currency", "EUR"}};
        j["reason"] = "requested_by_customer [" + op + "]";
        return call("POST", r.url("/v2/refunds"),
                    {auth(), "Content-Type: application/json", "Square-Version: 2025-08-20"},
                    j.dump());
    };
    const auto now = fake_now(r);
    const HttpResult kept = refund("op-r1", 1000);
    const HttpResult made = refund("op-r2", 1500);
    REQUIRE(kept.status == 200);
    REQUIRE(made.status == 200);
    const std::string refund_id = made.json()["refund"]["id"];
    REQUIRE(r.ledger()["refunded"]["eur"] == 2500);
    REQUIRE(r.ledger()["charged"]["eur"] == 2500);

    r.server.advance_clock(seconds(3600));
    // Not a Stripe refund: the seed finds it among Square's, by its idempotency key.
    CHECK(r.server.seed(RefundReversed{"op-r2", "expired_or_canceled_card"}) ==
          std::vector<std::string>{refund_id});

    const Json one = get(r, "/v2/refunds/" + refund_id).json()["refund"];
    CHECK(one["status"] == "FAILED");
    CHECK(one["amount_money"]["amount"] == 1500);
    CHECK(one["updated_at"] != one["created_at"]); // it changed when it failed
    CHECK(get(r, "/v2/refunds/" + kept.json()["refund"]["id"].get<std::string>())
              .json()["refund"]["status"] == "COMPLETED");
    const Json paid = get(r, "/v2/payments/" + payment_id).json()["payment"];
    CHECK(paid["refunded_money"]["amount"] == 1000);
    CHECK(paid["refund_ids"].size() == 2);
    const std::string window = "/v2/refunds?begin_time=" + q(rfc3339(now - seconds(60))) +
                               "&end_time=" + q(rfc3339(now + seconds(60))) + "&sort_order=ASC";
    std::vector<std::string> statuses;
    const Json listed = get(r, window).json();
    for (const Json& item : listed["refunds"]) {
        statuses.push_back(item["status"]);
    }
    CHECK(statuses == std::vector<std::string>{"COMPLETED", "FAILED"});
    const Json failed_only = get(r, window + "&status=FAILED").json();
    REQUIRE(failed_only["refunds"].size() == 1);
    CHECK(failed_only["refunds"][0]["id"] == refund_id);
    CHECK(get(r, window + "&status=COMPLETED").json()["refunds"].size() == 1);
    // The ledger: out of `refunded`, back in `charged`; the seed counted, no execution more.
    const Json ledger = r.ledger();
    CHECK(ledger["refunded"]["eur"] == 1000);
    CHECK(ledger["charged"]["eur"] == 4000);
    CHECK(ledger["seeded"]["refund_reversed"] == 1);
    CHECK(r.executions("op-r2") == 1);

    // Twice is refused, as a refund no dialect made is not found; neither changes anything.
    CHECK_THROWS_AS(r.server.seed(RefundReversed{"op-r2", "expired_or_canceled_card"}),
                    std::invalid_argument);
    CHECK_THROWS_AS(r.server.seed(RefundReversed{"op-none", "expired_or_canceled_card"}),
                    SeedNotFound);
    const HttpResult over_admin =
        call("POST", r.admin_url("/__admin/seed"), {"Content-Type: application/json"},
             R"({"kind": "refund_reversed", "operation_id": "op-r1"})");
    CHECK(over_admin.status == 200);
    CHECK(over_admin.json()["ids"] ==
          Json::array({kept.json()["refund"]["id"].get<std::string>()}));
    CHECK(r.ledger()["refunded"]["eur"] == 0);
    CHECK(r.ledger()["seeded"]["refund_reversed"] == 2);

    // "Future refunds to this payment are not allowed": refused, nothing executed or kept.
    const HttpResult later = refund("op-r3", 500);
    CHECK(later.status == 400);
    CHECK(first_error(later.json())["category"] == "REFUND_ERROR");
    CHECK(first_error(later.json())["code"] == "PAYMENT_NOT_REFUNDABLE");
    CHECK(r.executions("op-r3") == 0);
    CHECK(r.ledger()["refunded"]["eur"] == 0);
    CHECK(get(r, "/v2/payments/" + payment_id).json()["payment"]["refund_ids"].size() == 2);
}
