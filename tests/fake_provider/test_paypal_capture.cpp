// The fake provider's PayPal authorisations over real HTTP on loopback (issue 32): an order created
// with intent AUTHORIZE, then POST /v2/payments/authorizations/{id}/capture (in parts, final or
// not, never past what was authorised) or /void under PayPal-Request-Id and the fault queue, the
// authorization read by ID, the 29 days it lasts on the fake clock, refunds of its captures, the
// search's entries, and the ledger's counts.
#include "tests/fake_provider/test_client.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

using namespace payrecon;
using namespace payrecon::fake;
using namespace payrecon::fake::test;
using Json = nlohmann::json;
using std::chrono::seconds;

namespace {

constexpr const char* k_client_id = "AcmeShopFakeClient01";
constexpr const char* k_client_secret = "EFakeSecret_k29dj3KDl0q9x";
constexpr long long k_day = 86400;

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

std::string fetch_token(const Running& r) {
    const HttpResult answer =
        call("POST", r.url("/v1/oauth2/token"),
             {"Authorization: Basic " + base64(std::string(k_client_id) + ":" + k_client_secret),
              "Content-Type: application/x-www-form-urlencoded"},
             "grant_type=client_credentials");
    REQUIRE(answer.status == 200);
    return answer.json()["access_token"].get<std::string>();
}

// An order_request as the paypal adapter sends one that only authorises.
Json authorize_order(const std::string& op, const std::string& value = "49.99",
                     const std::string& vault_id = "8kk8451t") {
    Json unit;
    unit["reference_id"] = "pay-" + op;
    unit["invoice_id"] = op;
    unit["custom_id"] = op;
    unit["amount"] = {{"currency_code", "EUR"}, {"value", value}};
    Json j;
    j["intent"] = "AUTHORIZE";
    j["purchase_units"] = Json::array({unit});
    j["payment_source"]["card"]["vault_id"] = vault_id;
    return j;
}

HttpResult post(const Running& r, const std::string& token, const std::string& path,
                const std::string& request_id, const std::string& body, bool representation = true,
                long timeout_ms = 5000) {
    std::vector<std::string> headers{"Authorization: Bearer " + token};
    if (!body.empty()) {
        headers.emplace_back("Content-Type: application/json");
    }
    if (!request_id.empty()) {
        headers.push_back("PayPal-Request-Id: " + request_id);
    }
    if (representation) {
        headers.emplace_back("Prefer: return=representation");
    }
    return call("POST", r.url(path), headers, body, timeout_ms);
}

HttpResult get(const Running& r, const std::string& token, const std::string& path) {
    return call("GET", r.url(path), {"Authorization: Bearer " + token});
}

// Authorises `value` EUR under `op` (its request ID "req-<op>"): the authorization's ID.
std::string authorise(const Running& r, const std::string& token, const std::string& op,
                      const std::string& value = "49.99") {
    const HttpResult created =
        post(r, token, "/v2/checkout/orders", "req-" + op, authorize_order(op, value).dump());
    REQUIRE(created.status == 201);
    return created.json()["purchase_units"][0]["payments"]["authorizations"][0]["id"]
        .get<std::string>();
}

// capture_request as the adapter sends it: amount, final_capture, the capture's operation ID.
Json capture_request(const std::string& op, const std::string& value, bool final) {
    return Json{{"amount", {{"currency_code", "EUR"}, {"value", value}}},
                {"final_capture", final},
                {"invoice_id", op}};
}

HttpResult capture(const Running& r, const std::string& token, const std::string& authorization,
                   const std::string& op, const std::string& value, bool final = false,
                   long timeout_ms = 5000) {
    return post(r, token, "/v2/payments/authorizations/" + authorization + "/capture", "req-" + op,
                capture_request(op, value, final).dump(), true, timeout_ms);
}

HttpResult void_it(const Running& r, const std::string& token, const std::string& authorization,
                   const std::string& op, bool representation = false) {
    return post(r, token, "/v2/payments/authorizations/" + authorization + "/void", op, "",
                representation);
}

Json authorization(const Running& r, const std::string& token, const std::string& id) {
    const HttpResult res = get(r, token, "/v2/payments/authorizations/" + id);
    REQUIRE(res.status == 200);
    return res.json();
}

std::string issue_of(const HttpResult& result) {
    return result.json()["details"].at(0)["issue"].get<std::string>();
}

// The ledger's entry for authorization `id`.
Json ledger_entry(const Running& r, const std::string& id) {
    const Json ledger = r.ledger();
    for (const Json& a : ledger["paypal_authorizations"]) {
        if (a["id"] == id) {
            return a;
        }
    }
    FAIL("no ledger entry for " << id);
    return {};
}

} // namespace

TEST_CASE("paypal capture: an AUTHORIZE order holds the amount -- CREATED, an execution that "
          "charges nothing -- read by its ID and in its order",
          "[fake_provider][paypal][capture]") {
    Running r(paypal_options());
    const std::string token = fetch_token(r);
    const HttpResult created =
        post(r, token, "/v2/checkout/orders", "req-op-a", authorize_order("op-a").dump());
    REQUIRE(created.status == 201);
    const Json order = created.json();
    CHECK(order["intent"] == "AUTHORIZE");
    CHECK(order["status"] == "COMPLETED");
    const Json& payments = order["purchase_units"][0]["payments"];
    CHECK_FALSE(payments.contains("captures"));
    REQUIRE(payments["authorizations"].size() == 1);
    const Json& held = payments["authorizations"][0];
    CHECK(held["status"] == "CREATED");
    CHECK(held["amount"] == Json{{"currency_code", "EUR"}, {"value", "49.99"}});
    CHECK(held["invoice_id"] == "op-a");
    CHECK(held["id"].get<std::string>().size() == 17);
    CHECK(r.executions("op-a") == 1);
    Json ledger = r.ledger();
    CHECK_FALSE((ledger.contains("charged") && ledger["charged"].contains("eur")));

    const std::string id = held["id"];
    const Json by_id = authorization(r, token, id);
    CHECK(by_id["status"] == "CREATED");
    CHECK(by_id["supplementary_data"]["related_ids"]["order_id"] == order["id"]);
    CHECK(by_id["expiration_time"].is_string());
    const Json entry = ledger_entry(r, id);
    CHECK(entry["operation_id"] == "op-a");
    CHECK(entry["status"] == "CREATED");
    CHECK(entry["amount"] == 4999);
    CHECK(entry["amount_captured"] == 0);

    // A declined card is a DENIED authorization: an execution, nothing held.
    const HttpResult denied = post(r, token, "/v2/checkout/orders", "req-op-d",
                                   authorize_order("op-d", "10.00", "vault_declined").dump());
    REQUIRE(denied.status == 201);
    CHECK(denied.json()["purchase_units"][0]["payments"]["authorizations"][0]["status"] ==
          "DENIED");
    CHECK(r.executions("op-d") == 1);
    CHECK(get(r, token, "/v2/payments/authorizations/NOSUCHAUTH0000001").status == 404);

    // A reset forgets them.
    r.server.reset();
    CHECK(r.ledger()["paypal_authorizations"].empty());
    CHECK(get(r, token, "/v2/payments/authorizations/" + id).status == 401); // tokens too
}

TEST_CASE("paypal capture: captures in parts, a final one releases the rest, never past what was "
          "authorised",
          "[fake_provider][paypal][capture]") {
    Running r(paypal_options());
    const std::string token = fetch_token(r);
    const std::string id = authorise(r, token, "op-p");

    const HttpResult first = capture(r, token, id, "cap-1", "20.00");
    REQUIRE(first.status == 201);
    CHECK(first.json()["status"] == "COMPLETED");
    CHECK(first.json()["amount"]["value"] == "20.00");
    CHECK(first.json()["invoice_id"] == "cap-1");
    CHECK(first.json()["custom_id"] == "op-p"); // the purchase unit's
    CHECK(first.json()["final_capture"] == false);
    CHECK(first.json()["supplementary_data"]["related_ids"]["authorization_id"] == id);
    CHECK(authorization(r, token, id)["status"] == "PARTIALLY_CAPTURED");

    // More than is left: refused, nothing taken, nothing kept under the request ID.
    const HttpResult too_much = capture(r, token, id, "cap-2", "30.00");
    CHECK(too_much.status == 422);
    CHECK(issue_of(too_much) == "MAX_CAPTURE_AMOUNT_EXCEEDED");
    CHECK(r.executions("cap-2") == 0);
    // Another currency, an invoice ID another capture has, a field capture_request lacks.
    Json usd = capture_request("cap-3", "1.00", false);
    usd["amount"]["currency_code"] = "USD";
    CHECK(issue_of(post(r, token, "/v2/payments/authorizations/" + id + "/capture", "req-cap-3",
                        usd.dump())) == "AUTH_CAPTURE_CURRENCY_MISMATCH");
    CHECK(issue_of(post(r, token, "/v2/payments/authorizations/" + id + "/capture", "req-dup",
                        capture_request("cap-1", "1.00", false).dump())) == "DUPLICATE_INVOICE_ID");
    Json custom = capture_request("cap-4", "1.00", false);
    custom["custom_id"] = "x";
    CHECK(issue_of(post(r, token, "/v2/payments/authorizations/" + id + "/capture", "req-cap-4",
                        custom.dump())) == "UNKNOWN_FIELD");
    CHECK(capture(r, token, "NOSUCHAUTH0000001", "cap-5", "1.00").status == 404);

    // The second, final: 10.00 of the 29.99 left; the rest released.
    const HttpResult last = capture(r, token, id, "cap-2", "10.00", true);
    REQUIRE(last.status == 201);
    CHECK(last.json()["final_capture"] == true);
    CHECK(authorization(r, token, id)["status"] == "CAPTURED");
    const HttpResult after = capture(r, token, id, "cap-6", "1.00");
    CHECK(after.status == 422);
    CHECK(issue_of(after) == "AUTHORIZATION_ALREADY_CAPTURED");
    const HttpResult no_void = void_it(r, token, id, "void-1");
    CHECK(no_void.status == 422);
    CHECK(issue_of(no_void) == "PREVIOUSLY_CAPTURED");

    // The order lists both captures; each is found by its ID.
    const std::string order_id =
        authorization(r, token, id)["supplementary_data"]["related_ids"]["order_id"];
    const Json order = get(r, token, "/v2/checkout/orders/" + order_id).json();
    CHECK(order["purchase_units"][0]["payments"]["captures"].size() == 2);
    CHECK(get(r, token, "/v2/payments/captures/" + last.json()["id"].get<std::string>()).status ==
          200);

    const Json ledger = r.ledger();
    CHECK(ledger["charged"]["eur"] == 3000);
    CHECK(ledger["paypal_captures"] == 2);
    CHECK(ledger["paypal_capture_deliveries"] == 8);
    CHECK(ledger["paypal_void_deliveries"] == 1);
    CHECK(ledger["paypal_voids"] == 0);
    CHECK(ledger["executions"]["cap-1"] == 1);
    CHECK(ledger["executions"]["cap-2"] == 1);
    const Json entry = ledger_entry(r, id);
    CHECK(entry["status"] == "CAPTURED");
    CHECK(entry["amount_captured"] == 3000);
    CHECK(entry["captures"] == 2);
    CHECK(entry["capture_deliveries"] == 7); // the unknown authorization's is not its
    CHECK(entry["void_deliveries"] == 1);
}

TEST_CASE("paypal capture: a capture without an amount takes what is left, and once nothing is "
          "left the authorization is CAPTURED",
          "[fake_provider][paypal][capture]") {
    Running r(paypal_options());
    const std::string token = fetch_token(r);
    const std::string id = authorise(r, token, "op-w");
    REQUIRE(capture(r, token, id, "cap-w1", "9.99").status == 201);
    const HttpResult rest = post(r, token, "/v2/payments/authorizations/" + id + "/capture",
                                 "req-cap-w2", R"({"invoice_id":"cap-w2"})");
    REQUIRE(rest.status == 201);
    CHECK(rest.json()["amount"]["value"] == "40.00");
    CHECK(authorization(r, token, id)["status"] == "CAPTURED");
    CHECK(r.ledger()["charged"]["eur"] == 4999);
}

TEST_CASE("paypal capture: a void releases the authorization, 204 or the authorization -- captures "
          "and voids after it are refused",
          "[fake_provider][paypal][capture]") {
    Running r(paypal_options());
    const std::string token = fetch_token(r);
    const std::string id = authorise(r, token, "op-v");
    REQUIRE(capture(r, token, id, "cap-v1", "5.00").status == 201);

    const HttpResult voided = void_it(r, token, id, "void-v1");
    CHECK(voided.status == 204);
    CHECK(voided.body.empty());
    CHECK(authorization(r, token, id)["status"] == "VOIDED");
    CHECK(r.executions("void-v1") == 1);
    // A replay under its request ID answers the authorization now.
    const HttpResult again = void_it(r, token, id, "void-v1", true);
    CHECK(again.status == 200);
    CHECK(again.json()["status"] == "VOIDED");
    CHECK(r.executions("void-v1") == 1);

    const HttpResult second = void_it(r, token, id, "void-v2");
    CHECK(second.status == 422);
    CHECK(issue_of(second) == "PREVIOUSLY_VOIDED");
    const HttpResult late = capture(r, token, id, "cap-v2", "1.00");
    CHECK(late.status == 422);
    CHECK(issue_of(late) == "AUTHORIZATION_VOIDED");

    // With the representation: 200 and the authorization.
    const std::string other = authorise(r, token, "op-v2");
    const HttpResult shown = void_it(r, token, other, "void-v3", true);
    CHECK(shown.status == 200);
    CHECK(shown.json()["id"] == other);
    CHECK(shown.json()["status"] == "VOIDED");

    const Json ledger = r.ledger();
    CHECK(ledger["paypal_voids"] == 2);
    CHECK(ledger["paypal_void_deliveries"] == 4);
    CHECK(ledger["charged"]["eur"] == 500); // what was captured stays captured
    CHECK(ledger_entry(r, id)["voids"] == 1);
    CHECK(ledger_entry(r, id)["amount_captured"] == 500);
}

TEST_CASE("paypal capture: a known PayPal-Request-Id answers the capture's current state, 200, "
          "nothing executed again -- the same ID in flight gets 409",
          "[fake_provider][paypal][capture][idempotency]") {
    Running r(paypal_options());
    const std::string token = fetch_token(r);
    const std::string id = authorise(r, token, "op-k");
    r.server.set_faults(faults_from(R"({"next": ["http_500_after_execute"]})"));
    const HttpResult lost = capture(r, token, id, "cap-k", "10.00");
    CHECK(lost.status == 500);
    CHECK(r.executions("cap-k") == 1);
    const HttpResult replay = capture(r, token, id, "cap-k", "10.00");
    CHECK(replay.status == 200);
    CHECK(replay.json()["status"] == "COMPLETED");
    CHECK(replay.json()["invoice_id"] == "cap-k");
    CHECK(r.executions("cap-k") == 1);
    CHECK(r.ledger()["charged"]["eur"] == 1000);

    r.server.close_gate();
    HttpResult first;
    HttpResult second;
    std::thread in_flight([&] { first = capture(r, token, id, "cap-g", "1.00"); });
    REQUIRE(wait_until([&] { return r.server.held() == 1; }));
    std::thread again([&] { second = capture(r, token, id, "cap-g", "1.00"); });
    REQUIRE(wait_until([&] { return r.server.held() == 2; }));
    r.server.open_gate();
    in_flight.join();
    again.join();
    CHECK(first.status == 201);
    REQUIRE(second.status == 409);
    CHECK(issue_of(second) == "PREVIOUS_REQUEST_IN_PROGRESS");
    CHECK(r.executions("cap-g") == 1);
    CHECK(r.ledger()["replays"] == 1);
}

TEST_CASE("paypal capture: faults apply to a capture as to a create, a decline takes nothing, and "
          "a capture without a valid token counts nothing",
          "[fake_provider][paypal][capture][faults]") {
    Running r(paypal_options());
    const std::string token = fetch_token(r);
    const std::string id = authorise(r, token, "op-f");
    r.server.set_faults(
        faults_from(R"({"next": ["decline", "execute_then_fin", "http_500_before_execute"]})"));
    const HttpResult declined = capture(r, token, id, "cap-d", "10.00");
    REQUIRE(declined.status == 201);
    CHECK(declined.json()["status"] == "DECLINED");
    CHECK(r.executions("cap-d") == 1);
    const HttpResult cut = capture(r, token, id, "cap-fin", "10.00");
    CHECK(cut.code == CURLE_GOT_NOTHING);
    CHECK(r.executions("cap-fin") == 1);
    const HttpResult before = capture(r, token, id, "cap-500", "10.00");
    CHECK(before.status == 500);
    CHECK(r.executions("cap-500") == 0);
    CHECK(capture(r, token, id, "cap-500", "10.00").status == 201); // nothing kept: executes now
    CHECK(capture(r, token, id, "cap-fin", "10.00").status == 200); // the capture made, again

    const HttpResult unauthorised =
        post(r, token + "x", "/v2/payments/authorizations/" + id + "/capture", "req-cap-401",
             capture_request("cap-401", "1.00", false).dump());
    CHECK(unauthorised.status == 401);
    CHECK(r.executions("cap-401") == 0);
    const Json ledger = r.ledger();
    CHECK(ledger["charged"]["eur"] == 2000); // the declined capture took nothing
    CHECK(ledger_entry(r, id)["amount_captured"] == 2000);
    CHECK(ledger_entry(r, id)["captures"] == 3);
    CHECK(ledger["paypal_capture_deliveries"] == 6);
}

TEST_CASE("paypal capture: an authorization lasts 29 fake days, then reads EXPIRED and captures "
          "nothing",
          "[fake_provider][paypal][capture][clock]") {
    Running r(paypal_options());
    const std::string token = fetch_token(r);
    const std::string id = authorise(r, token, "op-e");
    const std::string kept = authorise(r, token, "op-e2");
    r.server.advance_clock(seconds(28 * k_day));
    const std::string token1 = fetch_token(r); // tokens last 9 fake hours
    CHECK(authorization(r, token1, id)["status"] == "CREATED");
    REQUIRE(capture(r, token1, kept, "cap-e2", "49.99", true).status == 201);
    r.server.advance_clock(seconds(k_day));
    const std::string token2 = fetch_token(r);
    CHECK(authorization(r, token2, id)["status"] == "EXPIRED");
    CHECK(authorization(r, token2, kept)["status"] == "CAPTURED"); // captured in time
    const HttpResult late = capture(r, token2, id, "cap-e", "1.00");
    CHECK(late.status == 422);
    CHECK(issue_of(late) == "AUTHORIZATION_EXPIRED");
    const HttpResult no_void = void_it(r, token2, id, "void-e");
    CHECK(no_void.status == 422);
    CHECK(issue_of(no_void) == "AUTHORIZATION_EXPIRED");
    CHECK(ledger_entry(r, id)["status"] == "EXPIRED");
    CHECK(r.executions("cap-e") == 0);
}

TEST_CASE("paypal capture: an authorization's capture is refunded as any capture, and the search "
          "lists the authorization (T1301) and its captures (T0006)",
          "[fake_provider][paypal][capture][refunds]") {
    Running r(paypal_options());
    const std::string token = fetch_token(r);
    const std::string id = authorise(r, token, "op-r");
    const std::string c1 = capture(r, token, id, "cap-r1", "20.00").json()["id"];
    const std::string c2 = capture(r, token, id, "cap-r2", "10.00").json()["id"];
    const auto refund = [&](const std::string& capture_id, const std::string& op,
                            const std::string& value) {
        return post(
            r, token, "/v2/payments/captures/" + capture_id + "/refund", "req-" + op,
            Json{{"amount", {{"value", value}, {"currency_code", "EUR"}}}, {"invoice_id", op}}
                .dump());
    };
    const HttpResult refunded = refund(c1, "ref-1", "15.00");
    REQUIRE(refunded.status == 201);
    CHECK(refunded.json()["status"] == "COMPLETED");
    // Each capture's own amount bounds its refunds.
    CHECK(issue_of(refund(c1, "ref-2", "5.01")) == "REFUND_AMOUNT_EXCEEDED");
    CHECK(refund(c2, "ref-3", "10.00").status == 201);
    CHECK(get(r, token, "/v2/payments/captures/" + c1).json()["status"] == "PARTIALLY_REFUNDED");
    CHECK(get(r, token, "/v2/payments/captures/" + c2).json()["status"] == "REFUNDED");
    const Json ledger = r.ledger();
    CHECK(ledger["refunded"]["eur"] == 2500);

    const std::string from = rfc3339(
        std::chrono::system_clock::time_point(seconds(ledger["now"].get<long long>() - 3600)));
    const std::string to =
        rfc3339(std::chrono::system_clock::time_point(seconds(ledger["now"].get<long long>() + 1)));
    const HttpResult page =
        get(r, token,
            "/v1/reporting/transactions?start_date=" + http::percent_encode(from) +
                "&end_date=" + http::percent_encode(to));
    REQUIRE(page.status == 200);
    const Json listed = page.json();
    std::map<std::string, Json> by_id;
    for (const Json& d : listed["transaction_details"]) {
        by_id[d["transaction_info"]["transaction_id"]] = d["transaction_info"];
    }
    REQUIRE(by_id.count(id) == 1);
    CHECK(by_id[id]["transaction_event_code"] == "T1301");
    CHECK(by_id[id]["invoice_id"] == "op-r");
    CHECK(by_id[id]["transaction_status"] == "P"); // still capturable
    REQUIRE(by_id.count(c1) == 1);
    CHECK(by_id[c1]["transaction_event_code"] == "T0006");
    CHECK(by_id[c1]["invoice_id"] == "cap-r1");
    CHECK(by_id[c1]["paypal_reference_id"] == id);
    CHECK(by_id[c1]["transaction_amount"]["value"] == "20.00");
    CHECK(listed["transaction_details"].size() == 5); // two refunds too
}
