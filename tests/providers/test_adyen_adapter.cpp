// The Adyen adapter through an injected HTTP seam: it asserts on every request sent (method, URL,
// headers, body) and replays recorded responses.
#include "providers/adyen/adapter.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::net;
using namespace payrecon::testing;

namespace {

std::string fixture(const std::string& name) {
    return testing::fixture("adyen", name);
}

const char* const k_key = "AQE_test_not_a_real_key_0000";

ProviderConfig config() {
    ProviderConfig c = testing::sample_config("adyen", "https://checkout-test.adyen.test",
                                              ApiKey{"ADYEN_API_KEY", Secret(k_key)});
    c.settings = adyen::settings("AcmeShopECOM", "https://shop.example.com/checkout/return");
    c.key_retention = std::chrono::hours(168);
    return c;
}

PaymentOrder order() {
    PaymentOrder o = testing::sample_order("8415718415172204");
    o.customer = "cus_8Hx2";
    return o;
}

} // namespace

TEST_CASE("adyen adapter: submit sends one JSON POST with the operation ID as Idempotency-Key",
          "[providers][adyen]") {
    Recorder rec;
    rec.replies.push_back(response(200, fixture("authorised.json")));
    adyen::AdyenAdapter a(config(), rec.fn());
    CHECK(a.kind() == "adyen");
    CHECK(a.name() == "adyen");
    const auto r = a.submit(order());
    CHECK(r.outcome == Outcome::succeeded);
    CHECK(r.provider_reference == "993617895204576J");
    REQUIRE(rec.sent.size() == 1);
    const HttpRequest& req = rec.sent[0];
    CHECK(req.method == "POST");
    CHECK(req.url == "https://checkout-test.adyen.test/v71/payments");
    CHECK(req.mutating);
    CHECK(header(req, "Idempotency-Key") == "pr_0123456789abcdef0123456789abcdef");
    CHECK(header(req, "X-API-Key") == k_key);
    CHECK(header(req, "Content-Type") == "application/json");
    CHECK(header(req, "Authorization") == "(absent)");
    REQUIRE(req.secrets_to_redact.size() == 1);
    CHECK(req.secrets_to_redact[0].reveal() == k_key);
    const auto body = nlohmann::json::parse(req.body);
    CHECK(body == nlohmann::json::parse(R"({
        "amount": {"currency": "EUR", "value": 4999},
        "reference": "pr_0123456789abcdef0123456789abcdef",
        "merchantAccount": "AcmeShopECOM",
        "paymentMethod": {"type": "scheme", "storedPaymentMethodId": "8415718415172204"},
        "shopperReference": "cus_8Hx2",
        "shopperInteraction": "ContAuth",
        "recurringProcessingModel": "UnscheduledCardOnFile",
        "returnUrl": "https://shop.example.com/checkout/return",
        "metadata": {"operation_id": "pr_0123456789abcdef0123456789abcdef",
                     "merchant_reference": "order-1001"}})"));
    CHECK(req.body.find(k_key) == std::string::npos);
}

TEST_CASE("adyen adapter: transport classes and responses become outcomes", "[providers][adyen]") {
    Recorder rec;
    rec.replies = {failure(SendClass::not_sent, 7),
                   failure(SendClass::unknown, 28),
                   failure(SendClass::unknown, 63, true),
                   response(200, fixture("refused.json")),
                   response(200, fixture("received.json")),
                   response(422, fixture("idempotency_in_flight.json")),
                   response(422, fixture("validation_error.json")),
                   response(401, fixture("unauthorised.json")),
                   response(429, ""),
                   response(503, "")};
    adyen::AdyenAdapter a(config(), rec.fn());
    CHECK(a.submit(order()).outcome == Outcome::not_sent);
    const auto timeout = a.submit(order());
    CHECK(timeout.outcome == Outcome::unknown);
    CHECK(timeout.call.error_class == "unknown:curl_28");
    const auto truncated = a.submit(order());
    CHECK(truncated.outcome == Outcome::unknown);
    CHECK(truncated.call.error_class == "response_too_large");
    CHECK(a.submit(order()).outcome == Outcome::declined);
    CHECK(a.submit(order()).outcome == Outcome::pending);
    CHECK(a.submit(order()).outcome == Outcome::unknown);
    const auto invalid = a.submit(order());
    CHECK(invalid.outcome == Outcome::rejected); // the request, not the card: 14_030
    CHECK(invalid.call.error_class == "request_rejected:14_030");
    CHECK(a.submit(order()).outcome == Outcome::rejected); // 401: the API key
    CHECK(a.submit(order()).outcome == Outcome::not_sent);
    CHECK(a.submit(order()).outcome == Outcome::unknown);
    REQUIRE(rec.sent.size() == 10);
    // The same operation ID, and the same body, on every attempt.
    for (const auto& req : rec.sent) {
        CHECK(header(req, "Idempotency-Key") == "pr_0123456789abcdef0123456789abcdef");
        CHECK(req.body == rec.sent[0].body);
    }
}

TEST_CASE("adyen adapter: an amount Adyen cannot express is never sent", "[providers][adyen]") {
    Recorder rec;
    adyen::AdyenAdapter a(config(), rec.fn());
    PaymentOrder o = order();
    o.amount = Money{1250, "CVE"}; // CVE has no minor units at Adyen
    const auto r = a.submit(o);
    CHECK(r.outcome == Outcome::declined);
    CHECK(r.call.error_class == "amount_not_expressible");
    CHECK(rec.sent.empty());
}

TEST_CASE("adyen adapter: amounts are sent in Adyen's units", "[providers][adyen]") {
    Recorder rec;
    rec.replies.push_back(response(
        200,
        R"({"amount":{"currency":"CLP","value":100000},"merchantReference":"pr_0123456789abcdef0123456789abcdef","pspReference":"X2","resultCode":"Authorised"})"));
    adyen::AdyenAdapter a(config(), rec.fn());
    PaymentOrder o = order();
    o.amount = Money{1000, "CLP"};
    CHECK(a.submit(o).outcome == Outcome::succeeded);
    CHECK(nlohmann::json::parse(rec.sent[0].body)["amount"] ==
          nlohmann::json({{"currency", "CLP"}, {"value", 100000}}));
}

TEST_CASE("adyen adapter: capabilities say keys for the configured retention, no lookup, no list",
          "[providers][adyen]") {
    ProviderConfig c = config();
    c.overrides.lookup = true; // an override cannot give Adyen a lookup it does not have
    c.overrides.list = true;
    Recorder rec;
    adyen::AdyenAdapter a(c, rec.fn());
    const Capabilities& caps = a.capabilities();
    CHECK(caps.honours_idempotency_keys);
    CHECK(caps.key_retention == std::chrono::hours(168));
    CHECK(caps.max_key_length == 64);
    CHECK_FALSE(caps.lookup_by_operation_id);
    CHECK_FALSE(caps.list_transactions);

    const auto found = a.lookup(order());
    CHECK(found.status == LookupResult::Status::failed);
    CHECK(found.call.error_class == "lookup_not_supported");
    CHECK_FALSE(found.payment.has_value());
    const TimeWindow w{std::chrono::system_clock::time_point(std::chrono::seconds(1764600000)),
                       std::chrono::system_clock::time_point(std::chrono::seconds(1764686400))};
    const auto page = a.list(w, std::nullopt);
    CHECK_FALSE(page.ok);
    CHECK(page.call.error_class == "list_not_supported");
    CHECK(rec.sent.empty()); // neither asks Adyen anything
}

TEST_CASE("adyen adapter: a provider configured without idempotency keys sends none",
          "[providers][adyen]") {
    ProviderConfig c = config();
    c.overrides.idempotency_keys = false;
    Recorder rec;
    rec.replies.push_back(response(200, fixture("authorised.json")));
    adyen::AdyenAdapter a(c, rec.fn());
    CHECK_FALSE(a.capabilities().honours_idempotency_keys);
    a.submit(order());
    CHECK(header(rec.sent[0], "Idempotency-Key") == "(absent)");
}

TEST_CASE("adyen adapter: an operation ID longer than Adyen's key is never sent",
          "[providers][adyen]") {
    Recorder rec;
    adyen::AdyenAdapter a(config(), rec.fn());
    PaymentOrder o = order();
    o.operation_id = std::string(65, 'a');
    const auto r = a.submit(o);
    CHECK(r.outcome == Outcome::declined);
    CHECK(r.call.error_class == "operation_id_too_long");
    CHECK(rec.sent.empty());
}
