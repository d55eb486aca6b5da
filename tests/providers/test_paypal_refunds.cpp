// PayPal refunds (DESIGN section 16): the refund request, the outcome table, the capture check that
// refuses an order's ID unsent, and the lookup among the capture's order's refunds, through an
// injected send function that records every request and replays PayPal's answers (the fake's
// dialect runs the same calls over real HTTP: tests/execution/test_refund_calls.cpp).
#include "providers/paypal/adapter.hpp"
#include "providers/paypal/wire.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::providers::paypal;
using namespace payrecon::testing;
using net::HttpRequest;
using net::HttpResult;
using net::SendClass;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string k_base = "https://api-m.paypal.test";
const std::string k_token_url = k_base + "/v1/oauth2/token";
const std::string k_capture = "3C679366HH908993F";
const std::string k_order = "5O190127TN364715T";
const std::string k_refund = "1JU08902781691411";
const std::string k_op = k_sample_refund_operation_id;

ProviderConfig config() {
    return sample_config("paypal", k_base,
                         OAuth2ClientCredentials{"PAYPAL_CLIENT_ID", "PAYPAL_CLIENT_SECRET",
                                                 k_token_url, Secret("paypal-client-id-0001"),
                                                 Secret("paypal-client-secret-0001")});
}

RefundOrder refund_order() {
    RefundOrder o = sample_refund_order(k_capture);
    o.merchant_reference.reset();
    return o;
}

json refund_json(const std::string& status, const std::string& invoice_id = k_op,
                 const std::string& value = "7.00") {
    return json{{"id", k_refund},
                {"status", status},
                {"amount", {{"currency_code", "EUR"}, {"value", value}}},
                {"invoice_id", invoice_id},
                {"custom_id", invoice_id},
                {"note_to_payer", "requested_by_customer"},
                {"create_time", "2026-12-02T10:00:03Z"},
                {"update_time", "2026-12-02T10:00:03Z"},
                {"links", json::array({{{"href", k_base + "/v2/payments/refunds/" + k_refund},
                                        {"rel", "self"},
                                        {"method", "GET"}},
                                       {{"href", k_base + "/v2/payments/captures/" + k_capture},
                                        {"rel", "up"},
                                        {"method", "GET"}}})}};
}

std::string error_json(int status, const std::string& issue) {
    const std::string name = status == 422   ? "UNPROCESSABLE_ENTITY"
                             : status == 404 ? "RESOURCE_NOT_FOUND"
                             : status == 409 ? "RESOURCE_CONFLICT"
                             : status == 403 ? "NOT_AUTHORIZED"
                                             : "INVALID_REQUEST";
    return json{{"name", name},
                {"message", "The requested action could not be performed."},
                {"debug_id", "4c2e1b9a07d35"},
                {"details", json::array({{{"issue", issue}, {"description", "fake"}}})}}
        .dump();
}

// GET /v2/payments/captures/{id}: the capture, naming its order.
std::string capture_json(const std::string& id = k_capture, bool order_id = true) {
    json c = {{"id", id},
              {"status", "COMPLETED"},
              {"amount", {{"currency_code", "EUR"}, {"value", "49.99"}}},
              {"links", json::array({{{"href", k_base + "/v2/checkout/orders/" + k_order},
                                      {"rel", "up"},
                                      {"method", "GET"}}})}};
    if (order_id) {
        c["supplementary_data"]["related_ids"]["order_id"] = k_order;
    }
    return c.dump();
}

std::string order_json(const json& refunds) {
    json unit = {
        {"reference_id", "default"},
        {"amount", {{"currency_code", "EUR"}, {"value", "49.99"}}},
        {"payments", {{"captures", json::array({{{"id", k_capture}, {"status", "COMPLETED"}}})}}}};
    if (!refunds.is_null()) {
        unit["payments"]["refunds"] = refunds;
    }
    return json{{"id", k_order}, {"status", "COMPLETED"}, {"purchase_units", json::array({unit})}}
        .dump();
}

// Token requests are answered with a token; API requests from `replies`, recorded.
struct Seam {
    std::vector<HttpRequest> sent;
    std::vector<HttpResult> replies;

    net::SendFunction fn() {
        return [this](const HttpRequest& r) {
            if (r.url == k_token_url) {
                return response(200, R"({"access_token":"paypal-token-0001","token_type":"Bearer",)"
                                     R"("expires_in":32400})");
            }
            sent.push_back(r);
            REQUIRE(!replies.empty());
            HttpResult out = replies.front();
            replies.erase(replies.begin());
            return out;
        };
    }
};

} // namespace

TEST_CASE("paypal refunds: the request carries refund_request's fields, our operation ID as its "
          "invoice_id and custom_id, the reason as the note",
          "[providers][paypal][refunds]") {
    const auto body = refund_body(refund_order());
    REQUIRE(body);
    CHECK(json::parse(*body) == json{{"amount", {{"value", "7.00"}, {"currency_code", "EUR"}}},
                                     {"invoice_id", k_op},
                                     {"custom_id", k_op},
                                     {"note_to_payer", "requested_by_customer"}});
    // A long reason is cut to PayPal's 255, never inside a character; none: no note.
    RefundOrder long_reason = refund_order();
    long_reason.reason = std::string(254, 'a') + "\xc3\xa9"; // 256 bytes, the last character 2
    const auto cut = json::parse(*refund_body(long_reason));
    CHECK(cut["note_to_payer"] == std::string(254, 'a'));
    RefundOrder no_reason = refund_order();
    no_reason.reason.reset();
    CHECK_FALSE(json::parse(*refund_body(no_reason)).contains("note_to_payer"));
    // Nothing PayPal cannot express: HUF has no decimals there, an operation ID past 108.
    RefundOrder huf = refund_order();
    huf.amount = Money{1050, "HUF"};
    CHECK_FALSE(refund_body(huf));
    RefundOrder long_op = refund_order();
    long_op.operation_id = std::string(109, 'x');
    CHECK_FALSE(refund_body(long_op));
}

TEST_CASE("paypal refunds: every row of the outcome table", "[providers][paypal][refunds]") {
    const RefundOrder o = refund_order();
    SECTION("a refund's status decides a 2xx") {
        const auto done = interpret_refund(o, 201, refund_json("COMPLETED").dump());
        CHECK(done.outcome == Outcome::succeeded);
        CHECK(done.provider_reference == k_refund); // the refund's own ID
        CHECK(done.call.error_class.empty());
        // A replay answers 200 with the current state.
        CHECK(interpret_refund(o, 200, refund_json("COMPLETED").dump()).outcome ==
              Outcome::succeeded);
        CHECK(interpret_refund(o, 201, refund_json("PENDING").dump()).outcome == Outcome::pending);
        for (const std::string status : {"FAILED", "CANCELLED"}) {
            INFO(status);
            const auto r = interpret_refund(o, 201, refund_json(status).dump());
            CHECK(r.outcome == Outcome::declined);
            CHECK(r.call.error_class == "refund_" + status);
        }
        CHECK(interpret_refund(o, 201, refund_json("REVERSED").dump()).outcome == Outcome::unknown);
    }
    SECTION("a 2xx that is not our refund proves nothing") {
        CHECK(
            interpret_refund(o, 201, refund_json("COMPLETED", "pr_someone_else").dump()).outcome ==
            Outcome::unknown);
        CHECK(interpret_refund(o, 201, refund_json("COMPLETED", k_op, "7.01").dump()).outcome ==
              Outcome::unknown);
        CHECK(interpret_refund(o, 201, R"({"id":")" + k_refund + R"(","status":"COMPLETED"})")
                  .outcome == Outcome::unknown); // a minimal answer: no amount, no invoice_id
        CHECK(interpret_refund(o, 201, "{").outcome == Outcome::unknown);
    }
    SECTION("422 issues that refuse the refund are declined, final") {
        for (const std::string issue :
             {"CAPTURE_FULLY_REFUNDED", "REFUND_AMOUNT_EXCEEDED", "REFUND_NOT_ALLOWED",
              "REFUND_TIME_LIMIT_EXCEEDED", "PARTIAL_REFUND_NOT_ALLOWED",
              "MAX_NUMBER_OF_REFUNDS_EXCEEDED", "PENDING_CAPTURE",
              "REFUND_FAILED_INSUFFICIENT_FUNDS", "TRANSACTION_DISPUTED",
              "REFUND_NOT_PERMITTED_DUE_TO_CHARGEBACK"}) {
            INFO(issue);
            const auto r = interpret_refund(o, 422, error_json(422, issue));
            CHECK(r.outcome == Outcome::declined);
            CHECK(r.call.error_class == "refund_declined:" + issue);
        }
    }
    SECTION("DUPLICATE_INVOICE_ID: a refund with our invoice ID exists, unknown") {
        const auto r = interpret_refund(o, 422, error_json(422, "DUPLICATE_INVOICE_ID"));
        CHECK(r.outcome == Outcome::unknown);
        CHECK(r.call.error_class == "DUPLICATE_INVOICE_ID");
    }
    SECTION("what PayPal refused before executing is rejected") {
        for (const auto& [status, issue] :
             std::vector<std::pair<int, std::string>>{{400, "MISSING_REQUIRED_PARAMETER"},
                                                      {403, "PERMISSION_DENIED"},
                                                      {404, "INVALID_RESOURCE_ID"},
                                                      {422, "REFUND_CAPTURE_CURRENCY_MISMATCH"},
                                                      {422, "PAYEE_ACCOUNT_RESTRICTED"}}) {
            INFO(status << " " << issue);
            const auto r = interpret_refund(o, status, error_json(status, issue));
            CHECK(r.outcome == Outcome::rejected);
            REQUIRE(r.rejection);
            CHECK(r.rejection->code == issue);
            CHECK(r.call.error_class == "request_rejected:" + issue);
        }
        const auto auth = interpret_refund(o, 401, R"({"name":"AUTHENTICATION_FAILURE"})");
        CHECK(auth.outcome == Outcome::rejected);
        REQUIRE(auth.rejection);
        CHECK(auth.rejection->http_status == 401);
    }
    SECTION("429 was not executed; 409, 5xx and anything unreadable are unknown") {
        const auto limited = interpret_refund(o, 429, error_json(429, "RATE_LIMIT_REACHED"));
        CHECK(limited.outcome == Outcome::not_sent);
        CHECK(limited.call.error_class == "rate_limited");
        CHECK(interpret_refund(o, 409, error_json(409, "PREVIOUS_REQUEST_IN_PROGRESS")).outcome ==
              Outcome::unknown);
        for (const int status : {500, 502, 503}) {
            INFO(status);
            CHECK(interpret_refund(o, status, "").outcome == Outcome::unknown);
        }
        CHECK(interpret_refund(o, 422, "not json").outcome == Outcome::unknown);
    }
}

TEST_CASE("paypal refunds: the adapter checks the capture, then posts the refund under the "
          "refund's own PayPal-Request-Id",
          "[providers][paypal][refunds]") {
    Seam seam;
    seam.replies = {response(200, capture_json()), response(201, refund_json("COMPLETED").dump()),
                    response(200, capture_json()), failure(SendClass::unknown, 28)};
    PaypalAdapter a(config(), seam.fn());
    RefundOrder o = refund_order();
    o.deadline = std::chrono::steady_clock::now() + 30s;
    const auto sent = a.refund(o);
    CHECK(sent.outcome == Outcome::succeeded);
    CHECK(sent.provider_reference == k_refund);
    CHECK(a.refund(o).outcome == Outcome::unknown); // timed out after sending
    REQUIRE(seam.sent.size() == 4);
    for (const std::size_t check : {0U, 2U}) {
        const HttpRequest& get = seam.sent[check];
        CHECK(get.method == "GET");
        CHECK(get.url == k_base + "/v2/payments/captures/" + k_capture);
        CHECK_FALSE(get.mutating);
        CHECK(get.deadline == o.deadline);
    }
    for (const std::size_t post : {1U, 3U}) {
        const HttpRequest& req = seam.sent[post];
        CHECK(req.method == "POST");
        CHECK(req.url == k_base + "/v2/payments/captures/" + k_capture + "/refund");
        CHECK(req.mutating);
        CHECK(req.deadline == o.deadline);
        CHECK(header(req, "PayPal-Request-Id") == k_op); // the refund's, on every attempt
        CHECK(header(req, "Prefer") == "return=representation");
        CHECK(header(req, "Content-Type") == "application/json");
        CHECK(header(req, "Authorization") == "Bearer paypal-token-0001");
        CHECK(req.body == *refund_body(o));
    }
}

TEST_CASE(
    "paypal refunds: a reference that is not a capture (an order's ID) is refused unsent, and "
    "a capture check without an answer sends nothing either",
    "[providers][paypal][refunds]") {
    Seam seam;
    // The order's ID: no capture, and no authorization either.
    seam.replies = {response(404, error_json(404, "INVALID_RESOURCE_ID")),
                    response(404, error_json(404, "INVALID_RESOURCE_ID")),
                    failure(SendClass::unknown, 28),
                    response(503, ""),
                    response(200, capture_json("SOMEOTHERCAPTURE1")),
                    response(403, error_json(403, "PERMISSION_DENIED"))};
    PaypalAdapter a(config(), seam.fn());
    RefundOrder by_order = refund_order();
    by_order.payment_reference = k_order;
    const auto refused = a.refund(by_order);
    CHECK(refused.outcome == Outcome::rejected);
    CHECK(refused.call.error_class == "request_rejected:not_a_capture");
    REQUIRE(refused.rejection);
    CHECK(refused.rejection->message.find(k_order) != std::string::npos);
    // No answer, a 5xx, or another capture's: the refund was never sent; it can be later.
    for (int i = 0; i < 3; ++i) {
        INFO(i);
        const auto r = a.refund(refund_order());
        CHECK(r.outcome == Outcome::not_sent);
        CHECK(r.call.error_class.rfind("capture_check:", 0) == 0);
    }
    CHECK(a.refund(refund_order()).outcome == Outcome::rejected); // our credentials refused
    REQUIRE(seam.sent.size() == 6);
    CHECK(seam.sent[0].url == k_base + "/v2/payments/captures/" + k_order);
    CHECK(seam.sent[1].url == k_base + "/v2/payments/authorizations/" + k_order);
    for (const HttpRequest& req : seam.sent) {
        CHECK(req.method == "GET"); // no refund was posted
    }
    // Nothing to ask about without a reference; metadata PayPal cannot carry is never sent.
    RefundOrder none = refund_order();
    none.payment_reference.clear();
    CHECK(a.refund(none).call.error_class == "no_payment_reference");
    RefundOrder metadata = refund_order();
    metadata.metadata = {{"ticket", "T-9"}};
    CHECK(a.refund(metadata).call.error_class == "not_carried");
    CHECK(seam.sent.size() == 6);
}

TEST_CASE("paypal refunds: the lookup reads the capture's order and finds our refund by its "
          "invoice ID",
          "[providers][paypal][refunds]") {
    Seam seam;
    const json refunds = json::array({refund_json("COMPLETED", "pr_someone_else"),
                                      refund_json("PENDING"), refund_json("COMPLETED")});
    seam.replies = {response(200, capture_json()),
                    response(200, order_json(refunds)),
                    response(200, capture_json("3C679366HH908993F", false)),
                    response(200, order_json(json())),
                    response(200, capture_json()),
                    response(200, order_json(json::array({json{{"id", "X"}}}))),
                    response(503, ""),
                    response(200, R"({"id":")" + k_capture + R"("})")};
    PaypalAdapter a(config(), seam.fn());
    const auto found = a.lookup_refund(refund_order());
    REQUIRE(found.status == LookupResult::Status::found);
    CHECK(found.payment->provider_reference == k_refund);
    CHECK(found.payment->state == Outcome::pending); // the first listed: the oldest
    CHECK(found.payment->amount == Money{700, "EUR"});
    CHECK(found.payment->operation_id == k_op);
    CHECK(found.duplicates.size() == 1);
    REQUIRE(seam.sent.size() == 2);
    CHECK(seam.sent[0].url == k_base + "/v2/payments/captures/" + k_capture);
    CHECK(seam.sent[1].url == k_base + "/v2/checkout/orders/" + k_order);
    for (const HttpRequest& req : seam.sent) {
        CHECK(req.method == "GET");
        CHECK_FALSE(req.mutating);
    }
    // The order from the capture's `up` link when supplementary_data is absent; no refunds: none.
    CHECK(a.lookup_refund(refund_order()).status == LookupResult::Status::not_found);
    CHECK(seam.sent[3].url == k_base + "/v2/checkout/orders/" + k_order);
    // An unreadable refund, no answer, a capture without its order: never absence.
    CHECK(a.lookup_refund(refund_order()).status == LookupResult::Status::failed);
    CHECK(a.lookup_refund(refund_order()).status == LookupResult::Status::failed);
    const auto orphan = a.lookup_refund(refund_order());
    CHECK(orphan.status == LookupResult::Status::failed);
    CHECK(orphan.call.error_class == "unrecognised_response");
    CHECK(seam.sent.size() == 8);
}

TEST_CASE("paypal refunds: the capabilities say a refund can be found", "[providers][paypal]") {
    Seam seam;
    PaypalAdapter a(config(), seam.fn());
    CHECK(a.capabilities().refund_lookup);
    CHECK(paypal::descriptor().api.refund_lookup);
    // The search's 3 h is the charges' staleness; a refund is read from the capture's order, at
    // once: its staleness is the configured settle delay, not raised.
    CHECK(a.capabilities().lookup_staleness >= std::chrono::hours(3));
    CHECK(a.capabilities().refund_lookup_staleness == config().settle_delay);
    CHECK(a.capabilities().refund_lookup_staleness < std::chrono::hours(3));
}
