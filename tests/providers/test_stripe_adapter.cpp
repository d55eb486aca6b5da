// The Stripe adapter through an injected HTTP seam: it asserts on every request sent (method,
// path, headers, body) and replays recorded responses.
#include "providers/stripe/adapter.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::net;
using namespace payrecon::testing;

namespace {

std::string fixture(const std::string& name) {
    return testing::fixture("stripe", name);
}

ProviderConfig config() {
    return testing::sample_config(
        "stripe", "https://api.stripe.test",
        ApiKey{"STRIPE_API_KEY", Secret("sk_test_51Hx_not_a_real_key_0000")});
}

PaymentOrder order() {
    return testing::sample_order("pm_card_visa");
}

} // namespace

TEST_CASE("stripe adapter: submit sends one form POST with the operation ID as Idempotency-Key",
          "[providers][stripe]") {
    Recorder rec;
    rec.replies.push_back(response(200, fixture("payment_intent_succeeded.json")));
    stripe::StripeAdapter a(config(), rec.fn());
    const auto r = a.submit(order());
    CHECK(r.outcome == Outcome::succeeded);
    CHECK(r.provider_reference == "pi_3MtwBwLkdIwHu7ix28a3tqPa");
    REQUIRE(rec.sent.size() == 1);
    const HttpRequest& req = rec.sent[0];
    CHECK(req.method == "POST");
    CHECK(req.url == "https://api.stripe.test/v1/payment_intents");
    CHECK(req.mutating);
    CHECK(header(req, "Idempotency-Key") == "pr_0123456789abcdef0123456789abcdef");
    CHECK(header(req, "Authorization") == "Bearer sk_test_51Hx_not_a_real_key_0000");
    CHECK(header(req, "Content-Type") == "application/x-www-form-urlencoded");
    CHECK(header(req, "Stripe-Version") == "2020-08-27");
    CHECK(req.body.find("metadata%5Boperation_id%5D=pr_0123456789abcdef0123456789abcdef") !=
          std::string::npos);
    REQUIRE(req.secrets_to_redact.size() == 1);
    CHECK(req.secrets_to_redact[0].reveal() == "sk_test_51Hx_not_a_real_key_0000");
}

TEST_CASE("stripe adapter: transport classes become outcomes", "[providers][stripe]") {
    Recorder rec;
    rec.replies = {failure(SendClass::not_sent, 7),
                   failure(SendClass::unknown, 28),
                   failure(SendClass::unknown, 52),
                   response(402, fixture("card_declined.json")),
                   response(409, fixture("idempotency_key_in_use.json")),
                   response(503, "")};
    stripe::StripeAdapter a(config(), rec.fn());
    CHECK(a.submit(order()).outcome == Outcome::not_sent);
    const auto timeout = a.submit(order());
    CHECK(timeout.outcome == Outcome::unknown);
    CHECK(timeout.call.error_class == "unknown:curl_28");
    CHECK(a.submit(order()).outcome == Outcome::unknown);
    CHECK(a.submit(order()).outcome == Outcome::declined);
    CHECK(a.submit(order()).outcome == Outcome::unknown);
    CHECK(a.submit(order()).outcome == Outcome::unknown);
    // The same operation ID on every attempt.
    for (const auto& req : rec.sent) {
        CHECK(header(req, "Idempotency-Key") == "pr_0123456789abcdef0123456789abcdef");
    }
}

TEST_CASE("stripe adapter: a provider configured without idempotency keys sends none",
          "[providers][stripe]") {
    ProviderConfig c = config();
    c.overrides.idempotency_keys = false;
    Recorder rec;
    rec.replies.push_back(response(200, fixture("payment_intent_succeeded.json")));
    stripe::StripeAdapter a(c, rec.fn());
    CHECK_FALSE(a.capabilities().honours_idempotency_keys);
    a.submit(order());
    CHECK(header(rec.sent[0], "Idempotency-Key") == "(absent)");
}

TEST_CASE("stripe adapter: lookup searches by operation ID, failures are never absence",
          "[providers][stripe]") {
    Recorder rec;
    rec.replies = {
        response(200, fixture("search_result.json")),
        response(
            200,
            R"({"object":"search_result","data":[],"has_more":false,"url":"/v1/payment_intents/search"})"),
        response(500, R"({"error":{"type":"api_error"}})"), failure(SendClass::unknown, 28),
        response(200, "{not json")};
    stripe::StripeAdapter a(config(), rec.fn());
    const auto found = a.lookup(order());
    CHECK(found.status == LookupResult::Status::found);
    REQUIRE(found.payment);
    CHECK(found.payment->amount == Money{4999, "EUR"});
    CHECK(found.payment->state == Outcome::succeeded);
    CHECK(a.lookup(order()).status == LookupResult::Status::not_found);
    CHECK(a.lookup(order()).status == LookupResult::Status::failed);
    CHECK(a.lookup(order()).status == LookupResult::Status::failed);
    CHECK(a.lookup(order()).status == LookupResult::Status::failed);
    const HttpRequest& req = rec.sent[0];
    CHECK(req.method == "GET");
    CHECK_FALSE(req.mutating);
    CHECK(req.url == "https://api.stripe.test/v1/payment_intents/"
                     "search?query=metadata%5B%27operation_id%27%5D%3A%27pr_"
                     "0123456789abcdef0123456789abcdef%27");
}

TEST_CASE("stripe adapter: two charges for one operation ID are reported, not hidden",
          "[providers][stripe]") {
    const std::string one =
        R"({"id":"pi_A","object":"payment_intent","amount":4999,"currency":"eur","created":1764669600,"metadata":{"operation_id":"pr_0123456789abcdef0123456789abcdef"},"status":"succeeded"})";
    const std::string two =
        R"({"id":"pi_B","object":"payment_intent","amount":4999,"currency":"eur","created":1764669601,"metadata":{"operation_id":"pr_0123456789abcdef0123456789abcdef"},"status":"succeeded"})";
    Recorder rec;
    rec.replies = {response(200, R"({"object":"search_result","has_more":false,"data":[)" + one +
                                     "," + two + "]}")};
    stripe::StripeAdapter a(config(), rec.fn());
    const auto r = a.lookup(order());
    CHECK(r.status == LookupResult::Status::found);
    CHECK(r.duplicates.size() == 1);
}

TEST_CASE("stripe adapter: list pages through a created window", "[providers][stripe]") {
    const std::string item =
        R"({"id":"pi_A","object":"payment_intent","amount":100,"currency":"usd","created":1764669600,"metadata":{},"status":"succeeded"})";
    Recorder rec;
    rec.replies = {
        response(200, R"({"object":"list","url":"/v1/payment_intents","has_more":true,"data":[)" +
                          item + "]}"),
        response(429, R"({"error":{"type":"rate_limit_error"}})")};
    rec.replies[1].headers = {{"retry-after", "2"}};
    stripe::StripeAdapter a(config(), rec.fn());
    const TimeWindow w{std::chrono::system_clock::time_point(std::chrono::seconds(1764600000)),
                       std::chrono::system_clock::time_point(std::chrono::seconds(1764686400))};
    const auto page = a.list(w, std::nullopt);
    CHECK(page.ok);
    CHECK(page.items.size() == 1);
    CHECK(page.next_cursor == "pi_A");
    CHECK(rec.sent[0].url ==
          "https://api.stripe.test/v1/"
          "payment_intents?limit=100&created%5Bgte%5D=1764600000&created%5Blt%5D=1764686400");
    const auto limited = a.list(w, page.next_cursor);
    CHECK_FALSE(limited.ok);
    CHECK(limited.retry_after == std::chrono::seconds(2));
    CHECK(rec.sent[1].url.find("starting_after=pi_A") != std::string::npos);
}
