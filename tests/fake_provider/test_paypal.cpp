// The fake provider's PayPal dialect over real HTTP on loopback: the OAuth2 client-credentials
// token and its expiry on the fake clock, POST /v2/checkout/orders with a vaulted payment source as
// payrecon's paypal adapter sends it, PayPal-Request-Id as PayPal documents it (a known ID answers
// the order's current state, nothing executed again), Transaction Search and its lag, and every
// fault, counted in the one ledger every dialect shares.
#include "tests/fake_provider/command_line.hpp"
#include "tests/fake_provider/test_client.hpp"

#include <catch2/catch.hpp>
#include <chrono>
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

constexpr const char* k_client_id = "AcmeShopFakeClient01";
constexpr const char* k_client_secret = "EFakeSecret_k29dj3KDl0q9x";

FakeProviderOptions paypal_options(FaultConfig faults = {}) {
    FakeProviderOptions o = options_with(std::move(faults));
    o.paypal.client_id = k_client_id;
    o.paypal.client_secret = Secret(k_client_secret);
    return o;
}

std::string base64(const std::string& text) {
    static constexpr char k_alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    std::size_t i = 0;
    for (; i + 2 < text.size(); i += 3) {
        const auto n = (static_cast<unsigned>(static_cast<unsigned char>(text[i])) << 16) |
                       (static_cast<unsigned>(static_cast<unsigned char>(text[i + 1])) << 8) |
                       static_cast<unsigned>(static_cast<unsigned char>(text[i + 2]));
        for (const unsigned shift : {18U, 12U, 6U, 0U}) {
            out += k_alphabet[(n >> shift) & 63U];
        }
    }
    if (i < text.size()) {
        unsigned n = static_cast<unsigned>(static_cast<unsigned char>(text[i])) << 16;
        if (i + 1 < text.size()) {
            n |= static_cast<unsigned>(static_cast<unsigned char>(text[i + 1])) << 8;
        }
        out += k_alphabet[(n >> 18) & 63U];
        out += k_alphabet[(n >> 12) & 63U];
        out += i + 1 < text.size() ? k_alphabet[(n >> 6) & 63U] : '=';
        out += '=';
    }
    return out;
}

HttpResult token_request(const Running& r, const std::string& id = k_client_id,
                         const std::string& secret = k_client_secret,
                         const std::string& body = "grant_type=client_credentials") {
    return call("POST", r.url("/v1/oauth2/token"),
                {"Authorization: Basic " + base64(id + ":" + secret),
                 "Content-Type: application/x-www-form-urlencoded"},
                body);
}

// A new access token (empty if the fake refused one).
std::string fetch_token(const Running& r) {
    const HttpResult answer = token_request(r);
    return answer.status == 200 ? answer.json()["access_token"].get<std::string>() : std::string();
}

// An order_request as the paypal adapter sends it: the operation ID as reference_id and
// invoice_id, the amount as a decimal string, a vaulted card (or PayPal wallet).
Json order(const std::string& op, const std::string& value = "49.99",
           const std::string& currency = "EUR", const std::string& source = "card",
           const std::string& vault_id = "8kk8451t") {
    Json unit;
    unit["reference_id"] = op;
    unit["invoice_id"] = op;
    unit["custom_id"] = "pay-" + op;
    unit["amount"] = {{"currency_code", currency}, {"value", value}};
    Json j;
    j["intent"] = "CAPTURE";
    j["purchase_units"] = Json::array({unit});
    j["payment_source"][source]["vault_id"] = vault_id;
    return j;
}

HttpResult post_order(const Running& r, const std::string& token, const std::string& request_id,
                      const std::string& body, bool representation = true, long timeout_ms = 5000) {
    std::vector<std::string> headers{"Authorization: Bearer " + token,
                                     "Content-Type: application/json"};
    if (!request_id.empty()) {
        headers.push_back("PayPal-Request-Id: " + request_id);
    }
    if (representation) {
        headers.emplace_back("Prefer: return=representation");
    }
    return call("POST", r.url("/v2/checkout/orders"), headers, body, timeout_ms);
}

HttpResult post_order(const Running& r, const std::string& token, const std::string& request_id,
                      const Json& body, bool representation = true, long timeout_ms = 5000) {
    return post_order(r, token, request_id, body.dump(), representation, timeout_ms);
}

HttpResult paypal_get(const Running& r, const std::string& token, const std::string& path) {
    return call("GET", r.url(path), {"Authorization: Bearer " + token});
}

std::string raw_order(const std::string& token, const std::string& request_id, const Json& body) {
    const std::string text = body.dump();
    return "POST /v2/checkout/orders HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
           token + "\r\nPayPal-Request-Id: " + request_id +
           "\r\nPrefer: return=representation\r\nContent-Type: application/json\r\n"
           "Content-Length: " +
           std::to_string(text.size()) + "\r\nConnection: close\r\n\r\n" + text;
}

std::chrono::system_clock::time_point fake_now(const Running& r) {
    return std::chrono::system_clock::time_point(seconds(r.ledger()["now"].get<long long>()));
}

HttpResult search(const Running& r, const std::string& token,
                  std::chrono::system_clock::time_point start,
                  std::chrono::system_clock::time_point end, const std::string& more = {}) {
    return paypal_get(
        r, token,
        "/v1/reporting/transactions?start_date=" + http::percent_encode(rfc3339(start)) +
            "&end_date=" + http::percent_encode(rfc3339(end)) + more);
}

const Json& capture_of(const Json& order) {
    return order["purchase_units"][0]["payments"]["captures"].at(0);
}

std::string issue_of(const HttpResult& result) {
    return result.json()["details"].at(0)["issue"].get<std::string>();
}

// A refund_request as the paypal adapter sends it: the amount, the refund's operation ID as
// invoice_id and custom_id, the reason as the note.
Json refund_request(const std::string& op, const std::string& value = "10.00") {
    return Json{{"amount", {{"value", value}, {"currency_code", "EUR"}}},
                {"invoice_id", op},
                {"custom_id", op},
                {"note_to_payer", "requested_by_customer"}};
}

HttpResult post_refund(const Running& r, const std::string& token, const std::string& capture_id,
                       const std::string& request_id, const Json& body, long timeout_ms = 5000) {
    std::vector<std::string> headers{"Authorization: Bearer " + token,
                                     "Content-Type: application/json",
                                     "Prefer: return=representation"};
    if (!request_id.empty()) {
        headers.push_back("PayPal-Request-Id: " + request_id);
    }
    return call("POST", r.url("/v2/payments/captures/" + capture_id + "/refund"), headers,
                body.dump(), timeout_ms);
}

std::string raw_refund(const std::string& token, const std::string& capture_id,
                       const std::string& request_id, const Json& body) {
    const std::string text = body.dump();
    return "POST /v2/payments/captures/" + capture_id +
           "/refund HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
           "\r\nPayPal-Request-Id: " + request_id +
           "\r\nPrefer: return=representation\r\nContent-Type: application/json\r\n"
           "Content-Length: " +
           std::to_string(text.size()) + "\r\nConnection: close\r\n\r\n" + text;
}

// A charged order of 49.99 EUR under `op`: its capture's ID.
std::string captured(const Running& r, const std::string& token, const std::string& op) {
    const HttpResult created = post_order(r, token, "req-" + op, order(op));
    REQUIRE(created.status == 201);
    return capture_of(created.json())["id"].get<std::string>();
}

} // namespace

// ---- OAuth2 ---------------------------------------------------------------------------------

TEST_CASE("paypal: client credentials get a bearer token, bad ones 401 invalid_client, the ledger "
          "counts tokens issued",
          "[fake_provider][paypal][auth]") {
    Running r(paypal_options());
    const HttpResult issued = token_request(r);
    REQUIRE(issued.status == 200);
    const Json t = issued.json();
    CHECK(t["token_type"] == "Bearer");
    CHECK(t["expires_in"] == 32400);
    CHECK(t["access_token"].get<std::string>().size() > 20);
    CHECK_FALSE(t["scope"].get<std::string>().empty());
    CHECK_FALSE(t["app_id"].get<std::string>().empty());
    CHECK_FALSE(t["nonce"].get<std::string>().empty());
    CHECK(token_request(r).json()["access_token"] != t["access_token"]);

    for (const HttpResult& refused :
         {token_request(r, k_client_id, "wrong-secret"), token_request(r, "other-client"),
          call("POST", r.url("/v1/oauth2/token"), {}, "grant_type=client_credentials")}) {
        CHECK(refused.status == 401);
        CHECK(refused.json() == Json{{"error", "invalid_client"},
                                     {"error_description", "Client Authentication failed"}});
    }
    const HttpResult no_grant = token_request(r, k_client_id, k_client_secret, "");
    CHECK(no_grant.status == 400);
    CHECK(no_grant.json()["error"] == "unsupported_grant_type");
    CHECK(token_request(r, k_client_id, k_client_secret, "grant_type=password").status == 400);
    Json ledger = r.ledger();
    CHECK(ledger["paypal_tokens_issued"] == 2);
    CHECK(ledger["deliveries"] == 0); // a token request is no create

    // A shorter lifetime is what expires_in says.
    auto options = paypal_options();
    options.paypal.token_ttl = seconds(60);
    Running short_lived(std::move(options));
    CHECK(token_request(short_lived).json()["expires_in"] == 60);
    // Without a configured secret every token request is refused.
    Running unconfigured;
    CHECK(token_request(unconfigured).status == 401);
    CHECK(token_request(unconfigured, "fake-paypal-client-id", "").status == 401);

    // Neither the secret nor a token is ever logged.
    const std::string token = t["access_token"];
    post_order(r, token, "req-1", order("op-1"));
    r.server.stop();
    const std::string log = r.log.str();
    CHECK(log.find(k_client_secret) == std::string::npos);
    CHECK(log.find(token) == std::string::npos);
    CHECK(log.find(base64(std::string(k_client_id) + ":" + k_client_secret)) == std::string::npos);
}

TEST_CASE("paypal: an expired, revoked or unknown token gets 401 invalid_token, a new token works",
          "[fake_provider][paypal][auth]") {
    Running r(paypal_options());
    const std::string first = fetch_token(r);
    REQUIRE_FALSE(first.empty());
    CHECK(post_order(r, first, "req-1", order("op-1")).status == 201);

    // Past its expires_in on the fake clock: refused, the create counted but not executed.
    r.server.advance_clock(seconds(32400));
    const HttpResult expired = post_order(r, first, "req-2", order("op-2"));
    CHECK(expired.status == 401);
    CHECK(expired.json() == Json{{"error", "invalid_token"},
                                 {"error_description", "Access Token not found in cache"}});
    CHECK(paypal_get(r, first, "/v1/reporting/transactions").status == 401);
    // What an adapter's refresh once on 401 does: a new token, the same request again.
    const std::string second = fetch_token(r);
    REQUIRE_FALSE(second.empty());
    CHECK(post_order(r, second, "req-2", order("op-2")).status == 201);

    // Revoked at once, in-process and over the admin API.
    CHECK(r.server.expire_paypal_tokens() == 1);
    CHECK(post_order(r, second, "req-3", order("op-3")).status == 401);
    const std::string third = fetch_token(r);
    const HttpResult revoked = call("POST", r.admin_url("/__admin/paypal/expire-tokens"));
    REQUIRE(revoked.status == 200);
    CHECK(revoked.json()["expired"] == 1);
    CHECK(post_order(r, third, "req-3", order("op-3")).json()["error"] == "invalid_token");

    const HttpResult unknown = post_order(r, "A21AAnot-a-token", "req-3", order("op-3"));
    CHECK(unknown.status == 401);
    CHECK(unknown.json()["error_description"] == "Token signature verification failed");
    const HttpResult missing = call("POST", r.url("/v2/checkout/orders"),
                                    {"PayPal-Request-Id: req-3"}, order("op-3").dump());
    CHECK(missing.status == 401);
    CHECK(missing.json()["name"] == "AUTHENTICATION_FAILURE");

    const Json ledger = r.ledger();
    CHECK(ledger["paypal_tokens_issued"] == 3);
    CHECK(ledger["executions"] == Json{{"op-1", 1}, {"op-2", 1}});
    CHECK(ledger["deliveries"] == 7);
    // A request refused for its token keeps nothing under its request ID.
    CHECK(post_order(r, fetch_token(r), "req-3", order("op-3")).status == 201);
    CHECK(r.executions("op-3") == 1);
}

// ---- orders ---------------------------------------------------------------------------------

TEST_CASE("paypal: an order with a vaulted source executes at once: 201 COMPLETED with its "
          "COMPLETED capture",
          "[fake_provider][paypal]") {
    Running r(paypal_options());
    const std::string token = fetch_token(r);
    const HttpResult created = post_order(r, token, "req-1", order("op-1"));
    REQUIRE(created.code == CURLE_OK);
    REQUIRE(created.status == 201);
    const Json o = created.json();
    static const std::regex k_id("[A-Z0-9]{17}");
    CHECK(std::regex_match(o["id"].get<std::string>(), k_id));
    CHECK(o["intent"] == "CAPTURE");
    CHECK(o["status"] == "COMPLETED");
    const Json& unit = o["purchase_units"][0];
    CHECK(unit["reference_id"] == "op-1");
    CHECK(unit["invoice_id"] == "op-1");
    CHECK(unit["custom_id"] == "pay-op-1");
    CHECK(unit["amount"] == Json{{"currency_code", "EUR"}, {"value", "49.99"}});
    const Json& capture = capture_of(o);
    CHECK(std::regex_match(capture["id"].get<std::string>(), k_id));
    CHECK(capture["status"] == "COMPLETED");
    CHECK(capture["amount"] == Json{{"currency_code", "EUR"}, {"value", "49.99"}});
    CHECK(capture["invoice_id"] == "op-1");
    CHECK(capture["custom_id"] == "pay-op-1");
    CHECK(capture["final_capture"] == true);
    CHECK(parse_rfc3339(capture["create_time"].get<std::string>()));
    CHECK(capture["update_time"] == capture["create_time"]);
    CHECK(o["create_time"] == capture["create_time"]);
    CHECK(o["links"][0]["rel"] == "self");
    CHECK(o["links"][0]["href"] == r.url("/v2/checkout/orders/" + o["id"].get<std::string>()));
    CHECK(o["payment_source"]["card"]["attributes"]["vault"]["id"] == "8kk8451t");
    CHECK_FALSE(created.header("paypal-debug-id").empty());

    // Without Prefer: return=representation, PayPal's default: id, status and links only.
    const HttpResult minimal = post_order(
        r, token, "req-2", order("op-2", "10.5", "EUR", "paypal", "vault-wallet_1"), false);
    REQUIRE(minimal.status == 201);
    const Json m = minimal.json();
    std::set<std::string> keys;
    for (const auto& [key, value] : m.items()) {
        keys.insert(key);
    }
    CHECK(keys == std::set<std::string>{"id", "status", "links"});
    CHECK(m["status"] == "COMPLETED");
    // GET shows the whole order: the wallet, the value normalised to the currency's decimals.
    const HttpResult got =
        paypal_get(r, token, "/v2/checkout/orders/" + m["id"].get<std::string>());
    REQUIRE(got.status == 200);
    CHECK(capture_of(got.json())["amount"]["value"] == "10.50");
    CHECK_FALSE(got.json()["payment_source"]["paypal"]["account_id"].get<std::string>().empty());
    const HttpResult unknown = paypal_get(r, token, "/v2/checkout/orders/0000000000000000X");
    CHECK(unknown.status == 404);
    CHECK(unknown.json()["name"] == "RESOURCE_NOT_FOUND");

    // Exact decimal amounts in each currency's ISO 4217 minor units.
    CHECK(post_order(r, token, "req-3", order("op-3", "1000", "JPY")).status == 201);
    CHECK(post_order(r, token, "req-4", order("op-4", "1.234", "KWD")).status == 201);
    CHECK(post_order(r, token, "req-5", order("op-5", "0.10", "EUR")).status == 201);

    const Json ledger = r.ledger();
    CHECK(ledger["executions"] ==
          Json{{"op-1", 1}, {"op-2", 1}, {"op-3", 1}, {"op-4", 1}, {"op-5", 1}});
    CHECK(ledger["charged"] == Json{{"eur", 4999 + 1050 + 10}, {"jpy", 1000}, {"kwd", 1234}});
    CHECK(ledger["paypal_order_count"] == 5);
    CHECK(ledger["paypal_orders"][0]["id"] == o["id"]);
    CHECK(ledger["deliveries_by_operation"]["op-1"] == 1);
}

TEST_CASE("paypal: a decline is a COMPLETED order holding a DECLINED capture, an execution that "
          "charges nothing",
          "[fake_provider][paypal][faults]") {
    Running r(paypal_options(faults_from(R"({"next": ["decline"]})")));
    const std::string token = fetch_token(r);
    const HttpResult declined = post_order(r, token, "req-1", order("op-1"));
    REQUIRE(declined.status == 201);
    CHECK(declined.json()["status"] == "COMPLETED");
    CHECK(capture_of(declined.json())["status"] == "DECLINED");
    const HttpResult vaulted =
        post_order(r, token, "req-2", order("op-2", "5.00", "EUR", "card", "vault_declined"));
    REQUIRE(vaulted.status == 201);
    CHECK(capture_of(vaulted.json())["status"] == "DECLINED");
    CHECK(capture_of(vaulted.json())["processor_response"]["response_code"] == "5120");
    const Json ledger = r.ledger();
    CHECK(ledger["executions"] == Json{{"op-1", 1}, {"op-2", 1}});
    CHECK(ledger["charged"].empty());
    CHECK(ledger["faults_applied"] == Json{{"decline", 1}});
}

TEST_CASE("paypal: invalid orders get PayPal's 400 or 422 envelope, execute nothing and leave the "
          "request ID free",
          "[fake_provider][paypal][validation]") {
    Running r(paypal_options());
    const std::string token = fetch_token(r);
    const HttpResult no_intent = post_order(r, token, "req-1", std::string(R"({"x": 1})"));
    REQUIRE(no_intent.status == 400);
    const Json e = no_intent.json();
    CHECK(e["name"] == "INVALID_REQUEST");
    CHECK(e["message"] ==
          "Request is not well-formed, syntactically incorrect, or violates schema.");
    CHECK_FALSE(e["debug_id"].get<std::string>().empty());
    CHECK(e["details"][0] == Json{{"field", "/intent"},
                                  {"location", "body"},
                                  {"issue", "MISSING_REQUIRED_PARAMETER"},
                                  {"description", "A required field / parameter is missing."}});

    const auto answer_for = [&](const std::string& value, const std::string& currency = "EUR") {
        return post_order(r, token, "req-1", order("op-1", value, currency));
    };
    struct Case {
        std::string value;
        std::string currency;
        long status;
        std::string issue;
    };
    for (const Case& c : std::vector<Case>{
             {"12.345", "EUR", 422, "DECIMAL_PRECISION"},
             {"10.5", "JPY", 422, "DECIMAL_PRECISION"},
             {"0.00", "EUR", 422, "CANNOT_BE_ZERO_OR_NEGATIVE"},
             {"-5", "EUR", 422, "CANNOT_BE_ZERO_OR_NEGATIVE"},
             {"1234567890123456", "EUR", 422, "MAX_VALUE_EXCEEDED"},
             {"abc", "EUR", 400, "INVALID_PARAMETER_SYNTAX"},
             {"1e3", "EUR", 400, "INVALID_PARAMETER_SYNTAX"},
             {"12.", "EUR", 400, "INVALID_PARAMETER_SYNTAX"},
             {"", "EUR", 400, "INVALID_STRING_LENGTH"},
             {"10.00", "XXY", 422, "INVALID_CURRENCY_CODE"},
             {"10.00", "eur", 422, "INVALID_CURRENCY_CODE"},
             {"10.00", "EURO", 400, "INVALID_STRING_LENGTH"},
         }) {
        INFO(c.value << " " << c.currency);
        const HttpResult result = answer_for(c.value, c.currency);
        CHECK(result.status == c.status);
        CHECK(result.json()["name"] ==
              (c.status == 422 ? "UNPROCESSABLE_ENTITY" : "INVALID_REQUEST"));
        CHECK(issue_of(result) == c.issue);
        CHECK(result.json()["details"][0]["field"] ==
              (c.issue == "INVALID_CURRENCY_CODE" || c.currency.size() != 3
                   ? "/purchase_units/0/amount/currency_code"
                   : "/purchase_units/0/amount/value"));
    }
    CHECK(issue_of(post_order(r, token, "req-1", std::string("not json"))) ==
          "MALFORMED_REQUEST_JSON");
    Json no_amount = order("op-1");
    no_amount["purchase_units"][0].erase("amount");
    CHECK(issue_of(post_order(r, token, "req-1", no_amount)) == "MISSING_REQUIRED_PARAMETER");
    Json raw_card = order("op-1");
    raw_card["payment_source"]["card"] = {{"number", "4111111111111111"}, {"expiry", "2030-12"}};
    CHECK(issue_of(post_order(r, token, "req-1", raw_card)) == "NOT_SUPPORTED");
    Json sale = order("op-1");
    sale["intent"] =
        "SALE"; // not one of checkout_payment_intent's (AUTHORIZE is: test_paypal_capture.cpp)
    CHECK(issue_of(post_order(r, token, "req-1", sale)) == "INVALID_PARAMETER_VALUE");
    Json two_units = order("op-1");
    two_units["purchase_units"].push_back(two_units["purchase_units"][0]);
    CHECK(issue_of(post_order(r, token, "req-1", two_units)) == "NOT_SUPPORTED");
    const HttpResult no_request_id = post_order(r, token, "", order("op-1"));
    CHECK(no_request_id.status == 400);
    CHECK(issue_of(no_request_id) == "PAYPAL_REQUEST_ID_REQUIRED");
    CHECK(issue_of(post_order(r, token, std::string(109, 'k'), order("op-1"))) ==
          "INVALID_STRING_LENGTH");
    CHECK(r.executions("op-1") == 0);
    CHECK(r.ledger()["paypal_order_count"] == 0);

    // Nothing was kept under the request ID: the valid order executes.
    const HttpResult valid = post_order(r, token, "req-1", order("op-1"));
    CHECK(valid.status == 201);
    CHECK(r.executions("op-1") == 1);
    CHECK(r.ledger()["replays"] == 0);

    // Without a payment source the order is only CREATED: it awaits a payer, nothing executed.
    Json unpaid = order("op-unpaid");
    unpaid.erase("payment_source");
    const HttpResult created = post_order(r, token, "", unpaid);
    REQUIRE(created.status == 201);
    CHECK(created.json()["status"] == "CREATED");
    CHECK_FALSE(created.json()["purchase_units"][0].contains("payments"));
    CHECK(r.executions("op-unpaid") == 0);
    CHECK(r.ledger()["charged"] == Json{{"eur", 4999}});
}

// ---- PayPal-Request-Id ----------------------------------------------------------------------

TEST_CASE("paypal: a known PayPal-Request-Id answers its order's current state, 200, with no "
          "second execution, also after a 500 after execution",
          "[fake_provider][paypal][idempotency]") {
    Running r(paypal_options(faults_from(R"({"next": ["http_500_after_execute"]})")));
    const std::string token = fetch_token(r);
    const HttpResult failed = post_order(r, token, "req-1", order("op-1"));
    REQUIRE(failed.code == CURLE_OK);
    CHECK(failed.status == 500);
    CHECK(failed.json()["name"] == "INTERNAL_SERVER_ERROR");
    CHECK(r.executions("op-1") == 1);

    const HttpResult retry = post_order(r, token, "req-1", order("op-1"));
    REQUIRE(retry.status == 200);
    const Json o = retry.json();
    CHECK(o["status"] == "COMPLETED");
    CHECK(capture_of(o)["status"] == "COMPLETED");
    CHECK(o["id"] == r.ledger()["paypal_orders"][0]["id"]);
    // The body of the repeat is not compared; minimal unless the representation is asked for.
    const HttpResult minimal = post_order(r, token, "req-1", order("op-1", "1.00"), false);
    CHECK(minimal.status == 200);
    CHECK(minimal.json() == Json{{"id", o["id"]}, {"status", "COMPLETED"}, {"links", o["links"]}});
    Json ledger = r.ledger();
    CHECK(ledger["executions"] == Json{{"op-1", 1}});
    CHECK(ledger["replays"] == 2);
    CHECK(ledger["deliveries"] == 3);
    CHECK(ledger["charged"] == Json{{"eur", 4999}});

    // The request ID is remembered 6 h of fake time, then executes again.
    r.server.advance_clock(seconds(6 * 3600 - 1));
    CHECK(post_order(r, fetch_token(r), "req-1", order("op-1")).status == 200);
    r.server.advance_clock(seconds(2));
    const HttpResult late = post_order(r, fetch_token(r), "req-1", order("op-1"));
    CHECK(late.status == 201);
    CHECK(late.json()["id"] != o["id"]);
    CHECK(r.executions("op-1") == 2);
}

TEST_CASE("paypal: the same PayPal-Request-Id while the first executes gets 409 RESOURCE_CONFLICT",
          "[fake_provider][paypal][idempotency]") {
    Running r(paypal_options());
    const std::string token = fetch_token(r);
    r.server.close_gate();
    HttpResult first;
    HttpResult second;
    std::thread in_flight([&] { first = post_order(r, token, "req-1", order("op-1")); });
    REQUIRE(wait_until([&] { return r.server.held() == 1; }));
    std::thread again([&] { second = post_order(r, token, "req-1", order("op-1")); });
    REQUIRE(wait_until([&] { return r.server.held() == 2; }));
    CHECK(r.executions("op-1") == 0);
    r.server.open_gate();
    in_flight.join();
    again.join();
    CHECK(first.status == 201);
    REQUIRE(second.status == 409);
    CHECK(second.json()["name"] == "RESOURCE_CONFLICT");
    CHECK(r.executions("op-1") == 1);
    const HttpResult third = post_order(r, token, "req-1", order("op-1"));
    CHECK(third.status == 200);
    CHECK(third.json()["id"] == first.json()["id"]);
    CHECK(r.executions("op-1") == 1);
}

TEST_CASE("paypal: with --no-idempotency every create executes and no PayPal-Request-Id is needed",
          "[fake_provider][paypal][idempotency]") {
    auto options = paypal_options();
    options.account.idempotency = false;
    Running r(std::move(options));
    const std::string token = fetch_token(r);
    const HttpResult a = post_order(r, token, "req-1", order("op-1"));
    const HttpResult b = post_order(r, token, "req-1", order("op-1"));
    const HttpResult c = post_order(r, token, "", order("op-1"));
    REQUIRE(a.status == 201);
    REQUIRE(b.status == 201);
    REQUIRE(c.status == 201);
    CHECK(a.json()["id"] != b.json()["id"]);
    CHECK(r.executions("op-1") == 3);
    CHECK(r.ledger()["charged"] == Json{{"eur", 3 * 4999}});
}

// ---- Transaction Search ---------------------------------------------------------------------

TEST_CASE("paypal: transaction search finds a capture only lookup_stale_s after it, oldest first, "
          "paged, within 31 days",
          "[fake_provider][paypal][lookup]") {
    Running r(paypal_options(faults_from(R"({"lookup_stale_s": 10800})")));
    const std::string token = fetch_token(r);
    const auto start = fake_now(r) - std::chrono::hours(1);
    const auto end = start + std::chrono::hours(24);
    std::vector<std::string> captures;
    for (const auto& [op, vault] : std::vector<std::pair<std::string, std::string>>{
             {"op-a", "8kk8451t"}, {"op-b", "vault_declined"}, {"op-c", "8kk8451t"}}) {
        const HttpResult created =
            post_order(r, token, "req-" + op, order(op, "12.30", "EUR", "card", vault));
        REQUIRE(created.status == 201);
        captures.push_back(capture_of(created.json())["id"]);
        r.server.advance_clock(seconds(1));
    }
    // PayPal's lag: nothing yet; the data is refreshed up to 3 h ago.
    const HttpResult early = search(r, token, start, end);
    REQUIRE(early.status == 200);
    CHECK(early.json()["transaction_details"].empty());
    CHECK(early.json()["total_items"] == 0);
    const auto refreshed =
        parse_rfc3339(early.json()["last_refreshed_datetime"].get<std::string>());
    REQUIRE(refreshed);
    CHECK(std::chrono::abs(*refreshed - (fake_now(r) - std::chrono::hours(3))) <= seconds(2));

    r.server.advance_clock(seconds(10800));
    const HttpResult all = search(r, token, start, end, "&fields=transaction_info");
    REQUIRE(all.status == 200);
    const Json found = all.json();
    CHECK(found["total_items"] == 3);
    CHECK(found["total_pages"] == 1);
    CHECK(found["page"] == 1);
    CHECK_FALSE(found["account_number"].get<std::string>().empty());
    REQUIRE(found["transaction_details"].size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
        const Json& info = found["transaction_details"][i]["transaction_info"];
        CHECK(info["transaction_id"] == captures[i]); // oldest first
        CHECK(info["transaction_amount"] == Json{{"currency_code", "EUR"}, {"value", "12.30"}});
        CHECK(info["transaction_event_code"] == "T0006");
        CHECK(parse_rfc3339(info["transaction_initiation_date"].get<std::string>()));
    }
    const Json& a = found["transaction_details"][0]["transaction_info"];
    CHECK(a["invoice_id"] == "op-a");
    CHECK(a["custom_field"] == "pay-op-a");
    CHECK(a["transaction_status"] == "S");
    CHECK(found["transaction_details"][1]["transaction_info"]["transaction_status"] == "D");

    // Pages of 2; a filter; a window that ends before them.
    const HttpResult page1 = search(r, token, start, end, "&page_size=2&page=1");
    REQUIRE(page1.json()["transaction_details"].size() == 2);
    CHECK(page1.json()["total_pages"] == 2);
    bool has_next = false;
    const Json first_page = page1.json();
    for (const Json& l : first_page["links"]) {
        has_next = has_next || l["rel"] == "next";
    }
    CHECK(has_next);
    const HttpResult page2 = search(r, token, start, end, "&page_size=2&page=2");
    REQUIRE(page2.json()["transaction_details"].size() == 1);
    CHECK(page2.json()["transaction_details"][0]["transaction_info"]["invoice_id"] == "op-c");
    CHECK(search(r, token, start, end, "&transaction_status=D").json()["total_items"] == 1);
    CHECK(search(r, token, start - std::chrono::hours(48), start).json()["total_items"] == 0);

    // The spec's bounds: 400 in PayPal's envelope.
    const HttpResult too_wide = search(r, token, start, start + std::chrono::hours(24 * 31 + 1));
    CHECK(too_wide.status == 400);
    CHECK(too_wide.json()["name"] == "INVALID_REQUEST");
    CHECK(search(r, token, start, start + std::chrono::hours(24 * 31)).status == 200);
    CHECK(search(r, token, end, start).status == 400);
    CHECK(search(r, token, start, end, "&page_size=501").status == 400);
    CHECK(search(r, token, start, end, "&fields=everything").status == 400);
    CHECK(paypal_get(r, token, "/v1/reporting/transactions?start_date=2026-01-01").status == 400);
    CHECK(paypal_get(r, token,
                     "/v1/reporting/transactions?start_date=2026-01-01T00:00Z&end_date=2026-01-"
                     "02T00:00:00Z")
              .status == 400);

    r.server.set_faults(faults_from(R"({"lookup_down": true})"));
    const HttpResult down = search(r, token, start, end);
    CHECK(down.status == 503);
    CHECK(down.json()["name"] == "SERVICE_UNAVAILABLE");

    auto options = paypal_options();
    options.account.lookup = false;
    Running without(std::move(options));
    const HttpResult forbidden = search(without, fetch_token(without), start, end);
    CHECK(forbidden.status == 403);
    CHECK(forbidden.json()["name"] == "NOT_AUTHORIZED");
}

// ---- faults ---------------------------------------------------------------------------------

TEST_CASE("paypal: every socket fault applies to its create and is counted in the ledger",
          "[fake_provider][paypal][faults]") {
    Running r(paypal_options(faults_from(
        R"({"next": ["drop_before_execute", "execute_then_fin", "execute_then_rst",
                     "execute_then_hang", "execute_then_partial", "http_500_before_execute"],
            "hang_ms": 500})")));
    const std::string token = fetch_token(r);
    const int port = r.server.port();

    const RawOutcome dropped =
        raw_exchange(port, raw_order(token, "req-drop", order("op-drop")), milliseconds(3000));
    CHECK(dropped.ending == Ending::fin);
    CHECK(dropped.bytes.empty());
    CHECK(r.executions("op-drop") == 0);

    const HttpResult lost = post_order(r, token, "req-fin", order("op-fin"));
    CHECK(lost.code == CURLE_GOT_NOTHING);
    CHECK(r.executions("op-fin") == 1);

    const RawOutcome reset =
        raw_exchange(port, raw_order(token, "req-rst", order("op-rst")), milliseconds(3000));
    CHECK(reset.ending == Ending::rst);
    CHECK(reset.bytes.empty());
    CHECK(r.executions("op-rst") == 1);

    const HttpResult hung = post_order(r, token, "req-hang", order("op-hang"), true, 150);
    CHECK(hung.code == CURLE_OPERATION_TIMEDOUT);
    CHECK(r.executions("op-hang") == 1);

    const HttpResult partial = post_order(r, token, "req-partial", order("op-partial"));
    CHECK(partial.code == CURLE_PARTIAL_FILE);
    CHECK(partial.status == 201);
    CHECK(r.executions("op-partial") == 1);

    const HttpResult before = post_order(r, token, "req-500", order("op-500"));
    CHECK(before.status == 500);
    CHECK(before.json()["name"] == "INTERNAL_SERVER_ERROR");
    CHECK(r.executions("op-500") == 0);

    // The retries: what created no order executes now; the rest answer their order, 200.
    CHECK(post_order(r, token, "req-drop", order("op-drop")).status == 201);
    CHECK(post_order(r, token, "req-500", order("op-500")).status == 201);
    for (const char* op : {"fin", "rst", "hang", "partial"}) {
        const HttpResult retry =
            post_order(r, token, std::string("req-") + op, order(std::string("op-") + op));
        CHECK(retry.status == 200);
        CHECK(capture_of(retry.json())["status"] == "COMPLETED");
        CHECK(retry.json()["purchase_units"][0]["invoice_id"] == std::string("op-") + op);
    }

    r.server.set_faults(faults_from(R"({"next": ["refuse"], "refuse_ms": 300})"));
    CHECK(post_order(r, token, "req-refused", order("op-refused")).code == CURLE_COULDNT_CONNECT);
    REQUIRE(wait_until([&] { return r.server.listening(); }));
    CHECK(post_order(r, token, "req-refused", order("op-refused")).status == 201);

    const Json ledger = r.ledger();
    CHECK(ledger["deliveries"] == 6 + 6 + 1);
    CHECK(ledger["executions"] == Json{{"op-500", 1},
                                       {"op-drop", 1},
                                       {"op-fin", 1},
                                       {"op-hang", 1},
                                       {"op-partial", 1},
                                       {"op-refused", 1},
                                       {"op-rst", 1}});
    CHECK(ledger["replays"] == 4);
    CHECK(ledger["charged"] == Json{{"eur", 7 * 4999}});
    CHECK(ledger["faults_applied"] == Json{{"drop_before_execute", 1},
                                           {"execute_then_fin", 1},
                                           {"execute_then_hang", 1},
                                           {"execute_then_partial", 1},
                                           {"execute_then_rst", 1},
                                           {"http_500_before_execute", 1},
                                           {"refuse", 1}});
}

// ---- refunds ---------------------------------------------------------------------------------

TEST_CASE(
    "paypal: a refund of a capture executes at once, 201 COMPLETED, the capture and its order "
    "show it, and a known PayPal-Request-Id answers it again, 200",
    "[fake_provider][paypal][refunds]") {
    Running r(paypal_options());
    const std::string token = fetch_token(r);
    const std::string capture = captured(r, token, "op-charge");
    const HttpResult made = post_refund(r, token, capture, "rr-1", refund_request("op-r1"));
    REQUIRE(made.status == 201);
    const Json refund = made.json();
    static const std::regex k_id("[A-Z0-9]{17}");
    CHECK(std::regex_match(refund["id"].get<std::string>(), k_id));
    CHECK(refund["status"] == "COMPLETED");
    CHECK(refund["amount"] == Json{{"currency_code", "EUR"}, {"value", "10.00"}});
    CHECK(refund["invoice_id"] == "op-r1");
    CHECK(refund["custom_id"] == "op-r1");
    CHECK(refund["note_to_payer"] == "requested_by_customer");
    CHECK(refund["seller_payable_breakdown"]["total_refunded_amount"]["value"] == "10.00");
    CHECK(refund["links"][1]["rel"] == "up");
    CHECK(refund["links"][1]["href"] == r.url("/v2/payments/captures/" + capture));

    // The same request ID: the refund again, nothing executed.
    const HttpResult again = post_refund(r, token, capture, "rr-1", refund_request("op-r1"));
    CHECK(again.status == 200);
    CHECK(again.json()["id"] == refund["id"]);
    CHECK(r.executions("op-r1") == 1);

    // The capture names its order and is partly refunded; the order lists the refund.
    const HttpResult got = paypal_get(r, token, "/v2/payments/captures/" + capture);
    REQUIRE(got.status == 200);
    CHECK(got.json()["status"] == "PARTIALLY_REFUNDED");
    const std::string order_id =
        got.json()["supplementary_data"]["related_ids"]["order_id"].get<std::string>();
    const HttpResult o = paypal_get(r, token, "/v2/checkout/orders/" + order_id);
    REQUIRE(o.status == 200);
    const Json refunds = o.json()["purchase_units"][0]["payments"]["refunds"];
    REQUIRE(refunds.size() == 1);
    CHECK(refunds[0]["id"] == refund["id"]);
    CHECK(refunds[0]["invoice_id"] == "op-r1");
    CHECK(paypal_get(r, token, "/v2/payments/refunds/" + refund["id"].get<std::string>())
              .json()["invoice_id"] == "op-r1");
    CHECK(paypal_get(r, token, "/v2/payments/captures/0000000000000000X").status == 404);
    CHECK(paypal_get(r, token, "/v2/payments/refunds/0000000000000000X").status == 404);
    // The reads a refund lookup makes are down with the search; the order is not.
    r.server.set_faults(faults_from(R"({"lookup_down": true})"));
    for (const std::string& path : {"/v2/payments/captures/" + capture,
                                    "/v2/payments/refunds/" + refund["id"].get<std::string>()}) {
        const HttpResult down = paypal_get(r, token, path);
        INFO(path);
        CHECK(down.status == 503);
        CHECK(down.json()["name"] == "SERVICE_UNAVAILABLE");
    }
    CHECK(paypal_get(r, token, "/v2/checkout/orders/" + order_id).status == 200);
    r.server.set_faults(faults_from("{}"));

    // Without an amount, what is left; then nothing is left.
    const HttpResult rest = post_refund(r, token, capture, "rr-2", Json{{"invoice_id", "op-r2"}});
    REQUIRE(rest.status == 201);
    CHECK(rest.json()["amount"]["value"] == "39.99");
    CHECK(paypal_get(r, token, "/v2/payments/captures/" + capture).json()["status"] == "REFUNDED");
    const Json ledger = r.ledger();
    CHECK(ledger["refunded"] == Json{{"eur", 4999}});
    CHECK(ledger["charged"] == Json{{"eur", 0}});
    CHECK(ledger["paypal_refund_count"] == 2);
    CHECK(ledger["replays"] == 1);
}

TEST_CASE("paypal: a refund past what the capture has left is refused as PayPal refuses it, and "
          "executes nothing",
          "[fake_provider][paypal][refunds]") {
    Running r(paypal_options(faults_from(R"({"next": ["decline"]})")));
    const std::string token = fetch_token(r);
    const std::string declined = captured(r, token, "op-declined");
    const std::string capture = captured(r, token, "op-charge");

    const HttpResult not_allowed =
        post_refund(r, token, declined, "rr-declined", refund_request("op-r0"));
    CHECK(not_allowed.status == 422);
    CHECK(issue_of(not_allowed) == "REFUND_NOT_ALLOWED");
    const HttpResult exceeded =
        post_refund(r, token, capture, "rr-1", refund_request("op-r1", "50.00"));
    CHECK(exceeded.status == 422);
    CHECK(exceeded.json()["name"] == "UNPROCESSABLE_ENTITY");
    CHECK(issue_of(exceeded) == "REFUND_AMOUNT_EXCEEDED");
    CHECK(post_refund(r, token, capture, "rr-2", refund_request("op-r2", "49.99")).status == 201);
    const HttpResult full = post_refund(r, token, capture, "rr-3", refund_request("op-r3", "0.01"));
    CHECK(full.status == 422);
    CHECK(issue_of(full) == "CAPTURE_FULLY_REFUNDED");
    // A refused request leaves nothing under its request ID: the same ID is refused again.
    CHECK(issue_of(post_refund(r, token, capture, "rr-1", refund_request("op-r1", "50.00"))) ==
          "CAPTURE_FULLY_REFUNDED");
    Json usd = refund_request("op-r4");
    usd["amount"]["currency_code"] = "USD";
    CHECK(issue_of(post_refund(r, token, captured(r, token, "op-other"), "rr-4", usd)) ==
          "REFUND_CAPTURE_CURRENCY_MISMATCH");
    const HttpResult unknown =
        post_refund(r, token, "0000000000000000X", "rr-5", refund_request("op-r5"));
    CHECK(unknown.status == 404);
    CHECK(unknown.json()["name"] == "RESOURCE_NOT_FOUND");
    const HttpResult no_key = post_refund(r, token, capture, "", refund_request("op-r6"));
    CHECK(no_key.status == 400);
    CHECK(issue_of(no_key) == "MISSING_REQUIRED_PARAMETER");
    const Json ledger = r.ledger();
    CHECK(ledger["executions"] ==
          Json{{"op-charge", 1}, {"op-declined", 1}, {"op-other", 1}, {"op-r2", 1}});
    CHECK(ledger["refunded"] == Json{{"eur", 4999}});
}

TEST_CASE("paypal: an invoice ID another refund of the capture has is refused once its request ID "
          "is forgotten (45 days)",
          "[fake_provider][paypal][refunds]") {
    Running r(paypal_options());
    const std::string token = fetch_token(r);
    const std::string capture = captured(r, token, "op-charge");
    CHECK(post_refund(r, token, capture, "rr-1", refund_request("op-r1")).status == 201);
    r.server.advance_clock(std::chrono::hours(24 * 44));
    const std::string fresh = fetch_token(r);
    CHECK(post_refund(r, fresh, capture, "rr-1", refund_request("op-r1")).status == 200);
    r.server.advance_clock(std::chrono::hours(24 * 2));
    const std::string later = fetch_token(r);
    const HttpResult duplicate = post_refund(r, later, capture, "rr-1", refund_request("op-r1"));
    CHECK(duplicate.status == 422);
    CHECK(issue_of(duplicate) == "DUPLICATE_INVOICE_ID");
    CHECK(r.executions("op-r1") == 1);
}

TEST_CASE("paypal: every socket fault applies to a refund as to a create, and a retry under the "
          "same request ID answers the refund",
          "[fake_provider][paypal][refunds][faults]") {
    Running r(paypal_options());
    const std::string token = fetch_token(r);
    const std::string capture = captured(r, token, "op-charge");
    r.server.set_faults(faults_from(
        R"({"next": ["drop_before_execute", "execute_then_rst", "http_500_before_execute",
                     "http_500_after_execute"]})"));
    const int port = r.server.port();
    const RawOutcome dropped = raw_exchange(
        port, raw_refund(token, capture, "rr-drop", refund_request("op-drop")), milliseconds(3000));
    CHECK(dropped.ending == Ending::fin);
    CHECK(r.executions("op-drop") == 0);
    const RawOutcome reset = raw_exchange(
        port, raw_refund(token, capture, "rr-rst", refund_request("op-rst")), milliseconds(3000));
    CHECK(reset.ending == Ending::rst);
    CHECK(r.executions("op-rst") == 1);
    CHECK(post_refund(r, token, capture, "rr-500", refund_request("op-500")).status == 500);
    CHECK(r.executions("op-500") == 0);
    CHECK(post_refund(r, token, capture, "rr-after", refund_request("op-after")).status == 500);
    CHECK(r.executions("op-after") == 1);

    CHECK(post_refund(r, token, capture, "rr-drop", refund_request("op-drop")).status == 201);
    CHECK(post_refund(r, token, capture, "rr-500", refund_request("op-500")).status == 201);
    for (const char* op : {"rst", "after"}) {
        const HttpResult retry = post_refund(r, token, capture, std::string("rr-") + op,
                                             refund_request(std::string("op-") + op));
        CHECK(retry.status == 200);
        CHECK(retry.json()["status"] == "COMPLETED");
    }
    const Json ledger = r.ledger();
    CHECK(ledger["refunded"] == Json{{"eur", 4000}});
    CHECK(ledger["executions"] ==
          Json{{"op-500", 1}, {"op-after", 1}, {"op-charge", 1}, {"op-drop", 1}, {"op-rst", 1}});
}

// ---- all dialects ---------------------------------------------------------------------------

TEST_CASE("fake provider: the dialects share one ledger, one fault queue, one clock and reset",
          "[fake_provider][ledger]") {
    Running r(paypal_options(faults_from(R"({"next": ["decline", "decline", "decline"]})")));
    const std::string token = fetch_token(r);
    // The three declines go one each to the next create, whatever its dialect.
    CHECK(post_order(r, token, "req-1", order("op-paypal")).status == 201);
    Json checkout;
    checkout["source"] = {{"type", "id"}, {"id", "src_wmlfc3zyhqzehihu7giusaaawu"}};
    checkout["amount"] = 500;
    checkout["currency"] = "EUR";
    checkout["reference"] = "op-checkout";
    CHECK(call("POST", r.url("/payments"), {auth(), "Cko-Idempotency-Key: k-1"}, checkout.dump())
              .json()["status"] == "Declined");
    CHECK(call("POST", r.url("/v1/payment_intents"), {auth(), "Idempotency-Key: k-2"},
               "amount=700&currency=eur&payment_method=pm_card_visa&confirm=true&metadata%"
               "5Boperation_id%5D=op-stripe")
              .status == 402);
    CHECK(call("POST", r.url("/payments"), {auth(), "Cko-Idempotency-Key: k-3"}, checkout.dump())
              .json()["status"] == "Captured");
    Json ledger = r.ledger();
    CHECK(ledger["executions"] == Json{{"op-checkout", 2}, {"op-paypal", 1}, {"op-stripe", 1}});
    CHECK(ledger["charged"] == Json{{"eur", 500}});
    CHECK(ledger["faults_applied"] == Json{{"decline", 3}});
    CHECK(ledger["payment_intent_count"] == 1);
    CHECK(ledger["checkout_payment_count"] == 2);
    CHECK(ledger["paypal_order_count"] == 1);
    CHECK_FALSE(r.server.ledger(LedgerOptions{.payment_intents = false}).contains("paypal_orders"));

    r.server.reset();
    ledger = r.ledger();
    CHECK(ledger["deliveries"] == 0);
    CHECK(ledger["executions"].empty());
    CHECK(ledger["checkout_payment_count"] == 0);
    CHECK(ledger["paypal_order_count"] == 0);
    CHECK(ledger["paypal_tokens_issued"] == 0);
    // Tokens are forgotten too; the request ID and key are free again.
    CHECK(post_order(r, token, "req-1", order("op-paypal")).status == 401);
    CHECK(post_order(r, fetch_token(r), "req-1", order("op-paypal")).status == 201);
    CHECK(call("POST", r.url("/payments"), {auth(), "Cko-Idempotency-Key: k-1"}, checkout.dump())
              .json()["status"] == "Captured");
}

TEST_CASE("paypal: the command line reads the client secret from the named variable only",
          "[fake_provider][paypal][cli]") {
    auto parse = [](std::vector<std::string> args, const char* secret) {
        CLI::App app;
        CommandLine command_line;
        add_options(app, command_line);
        args.insert(args.begin(), {"payrecon-fake-provider", "--api-key-env", "FAKE_KEY"});
        std::vector<const char*> argv;
        for (const auto& a : args) {
            argv.push_back(a.c_str());
        }
        app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
        return to_options(command_line, [secret](const char* name) -> const char* {
            const std::string n(name);
            return n == "FAKE_KEY" ? "sk_test_k" : n == "FAKE_PAYPAL_SECRET" ? secret : nullptr;
        });
    };
    const FakeProviderOptions defaults = parse({}, nullptr);
    CHECK(defaults.checkout.key_retention == seconds(86400));
    CHECK(defaults.paypal.key_retention == seconds(21600));
    CHECK(defaults.paypal.refund_key_retention == seconds(45 * 24 * 3600));
    CHECK(defaults.paypal.token_ttl == seconds(32400));
    CHECK(defaults.paypal.client_id == "fake-paypal-client-id");
    CHECK(defaults.paypal.client_secret.empty());

    const FakeProviderOptions o =
        parse({"--checkout-key-retention-s", "600", "--paypal-key-retention-s", "700",
               "--paypal-refund-key-retention-s", "800", "--paypal-token-ttl-s", "120",
               "--paypal-client-id", "AcmeClient", "--paypal-client-secret-env",
               "FAKE_PAYPAL_SECRET", "--no-lookup"},
              "pp_secret_from_env");
    CHECK(o.checkout.key_retention == seconds(600));
    CHECK(o.paypal.key_retention == seconds(700));
    CHECK(o.paypal.refund_key_retention == seconds(800));
    CHECK(o.paypal.token_ttl == seconds(120));
    CHECK(o.paypal.client_id == "AcmeClient");
    CHECK(o.paypal.client_secret.reveal() == "pp_secret_from_env");
    CHECK_FALSE(o.account.lookup);

    CHECK_THROWS_AS(parse({"--paypal-client-secret-env", "FAKE_PAYPAL_SECRET"}, nullptr),
                    std::invalid_argument);
    CHECK_THROWS_AS(parse({"--paypal-client-secret-env", "FAKE_PAYPAL_SECRET"}, ""),
                    std::invalid_argument);
    CHECK_THROWS_AS(parse({"--checkout-key-retention-s=-1"}, nullptr), std::invalid_argument);
    CHECK_THROWS_AS(parse({"--paypal-refund-key-retention-s=-1"}, nullptr), std::invalid_argument);
    CHECK_THROWS_AS(parse({"--paypal-token-ttl-s", "0"}, nullptr), CLI::ValidationError);
    CHECK_THROWS_AS(parse({"--paypal-client-id", ""}, nullptr), std::invalid_argument);
}

TEST_CASE("paypal: transaction search lists a capture's refunds as money out (T1107, a negative "
          "amount, the refund's invoice_id), a declined refund FAILED and denied",
          "[fake_provider][paypal][refunds]") {
    Running r(paypal_options());
    const std::string token = fetch_token(r);
    const auto now = fake_now(r);
    const std::string capture = captured(r, token, "op-charge");
    const HttpResult made = post_refund(r, token, capture, "rr-1", refund_request("op-r1"));
    REQUIRE(made.status == 201);
    r.server.set_faults(faults_from(R"({"next": ["decline"]})"));
    const HttpResult failed =
        post_refund(r, token, capture, "rr-2", refund_request("op-r2", "5.00"));
    REQUIRE(failed.status == 201);
    CHECK(failed.json()["status"] == "FAILED");
    CHECK(r.executions("op-r2") == 1);
    CHECK(r.ledger()["refunded"] == Json{{"eur", 1000}}); // the FAILED one gave nothing back

    const HttpResult found = search(r, token, now - seconds(60), now + seconds(60));
    REQUIRE(found.status == 200);
    const Json details = found.json()["transaction_details"];
    REQUIRE(details.size() == 3); // the capture, then its two refunds: oldest first
    CHECK(details[0]["transaction_info"]["transaction_event_code"] == "T0006");
    const Json& refund = details[1]["transaction_info"];
    CHECK(refund["transaction_event_code"] == "T1107");
    CHECK(refund["transaction_id"] == made.json()["id"]);
    CHECK(refund["paypal_reference_id"] == capture);
    CHECK(refund["transaction_amount"] == Json{{"currency_code", "EUR"}, {"value", "-10.00"}});
    CHECK(refund["transaction_status"] == "S");
    CHECK(refund["invoice_id"] == "op-r1");
    const Json& denied = details[2]["transaction_info"];
    CHECK(denied["transaction_amount"]["value"] == "-5.00");
    CHECK(denied["transaction_status"] == "D");
    CHECK(denied["invoice_id"] == "op-r2");
    // The status filter reads the refunds' too.
    CHECK(search(r, token, now - seconds(60), now + seconds(60), "&transaction_status=D")
              .json()["transaction_details"]
              .size() == 1);
    r.server.set_faults(faults_from(R"({"list_rate_limited": true})"));
    const HttpResult limited = search(r, token, now - seconds(60), now + seconds(60));
    CHECK(limited.status == 429);
    CHECK(limited.header("retry-after") == "1");
    CHECK(limited.json()["name"] == "RATE_LIMIT_REACHED");
}
