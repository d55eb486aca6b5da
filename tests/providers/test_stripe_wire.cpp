// Stripe's wire format: the request we send and the responses we read, checked against what
// Stripe's published OpenAPI document says of them (tests/providers/contracts/stripe.json) and
// recorded fixtures.
#include "providers/stripe/wire.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::providers::stripe;

namespace {

std::string read(const std::string& path) {
    return testing::read_file(path);
}

std::string fixture(const std::string& name) {
    return read(std::string(PAYRECON_SOURCE_DIR) + "/tests/providers/fixtures/stripe/" + name);
}

const nlohmann::json& spec() {
    return testing::provider_contract("stripe");
}

// The names of the parameters of `method` on `path`.
std::vector<std::string> parameter_names(const std::string& path, const std::string& method) {
    std::vector<std::string> out;
    for (const auto& p : spec().at("paths").at(path).at(method).at("parameters")) {
        out.push_back(p.at("name").get<std::string>());
    }
    return out;
}

PaymentOrder order() {
    PaymentOrder o = testing::sample_order("pm_card_visa");
    o.customer = "cus_8Hx2";
    o.description = "2 concert tickets & more";
    o.metadata = {{"cart", "c-77"}};
    return o;
}

} // namespace

TEST_CASE("stripe wire: amounts convert through Stripe's own exponents", "[providers][stripe]") {
    CHECK(to_stripe_amount(Money{4999, "EUR"}) == 4999);
    CHECK(to_stripe_amount(Money{500, "JPY"}) == 500);
    CHECK(to_stripe_amount(Money{1500, "KWD"}) == 1500);
    CHECK(to_stripe_amount(Money{100, "ISK"}) == 10000); // ISK: 0 in ISO, 2 at Stripe
    CHECK(to_stripe_amount(Money{1200, "MGA"}) == 12);   // MGA: 2 in ISO, 0 at Stripe
    CHECK_FALSE(to_stripe_amount(Money{1250, "MGA"}).has_value());
    CHECK_FALSE(to_stripe_amount(Money{1, "XXX"}).has_value());
    CHECK(from_stripe_amount(10000, "isk") == Money{100, "ISK"});
    CHECK_FALSE(from_stripe_amount(10050, "isk").has_value());
    CHECK(from_stripe_amount(12, "mga") == Money{1200, "MGA"});
}

TEST_CASE(
    "stripe wire: the create body is form-encoded create-and-confirm with our IDs in metadata",
    "[providers][stripe]") {
    const auto body = create_body(order());
    REQUIRE(body);
    const auto f = testing::form_fields(*body);
    CHECK(f.at("amount") == "4999");
    CHECK(f.at("currency") == "eur");
    CHECK(f.at("payment_method") == "pm_card_visa");
    CHECK(f.at("confirm") == "true");
    CHECK(f.at("off_session") == "true");
    CHECK(f.at("customer") == "cus_8Hx2");
    CHECK(f.at("description") == "2%20concert%20tickets%20%26%20more");
    CHECK(f.at("metadata%5Boperation_id%5D") == "pr_0123456789abcdef0123456789abcdef");
    CHECK(f.at("metadata%5Bmerchant_reference%5D") == "order-1001");
    CHECK(f.at("metadata%5Bcart%5D") == "c-77");
    // A caller key of payrecon's own is never overwritten or dropped: the body is refused.
    PaymentOrder spoofed = order();
    spoofed.metadata["operation_id"] = "spoofed";
    CHECK_FALSE(create_body(spoofed).has_value());
}

TEST_CASE(
    "stripe wire: every parameter we send to create, search and list is one Stripe's spec defines",
    "[providers][stripe][contract]") {
    const auto& schema = spec()
                             .at("paths")
                             .at("/v1/payment_intents")
                             .at("post")
                             .at("requestBody")
                             .at("content")
                             .at("application/x-www-form-urlencoded")
                             .at("schema");
    const auto& props = schema.at("properties");
    std::set<std::string> sent;
    for (const auto& [key, value] : testing::form_fields(*create_body(order()))) {
        const std::string top = key.substr(0, key.find("%5B"));
        INFO(key);
        CHECK(props.contains(top));
        sent.insert(top);
    }
    // Every parameter the spec requires is sent (amount, currency), with no exception.
    testing::check_required_fields_sent(schema.at("required"), sent);
    // The lookup searches with `query`; the list pages through `created` with `limit` and
    // `starting_after` (test_stripe_adapter.cpp asserts the URLs).
    const auto search = parameter_names("/v1/payment_intents/search", "get");
    CHECK(std::find(search.begin(), search.end(), "query") != search.end());
    const auto list = parameter_names("/v1/payment_intents", "get");
    for (const std::string name : {"created", "limit", "starting_after"}) {
        INFO(name);
        CHECK(std::find(list.begin(), list.end(), name) != list.end());
    }
}

TEST_CASE("stripe wire: the fixtures are PaymentIntents as Stripe's spec describes them",
          "[providers][stripe][contract]") {
    const auto& schema =
        spec().at("components").at("schemas").at("payment_intent").at("properties");
    const auto& statuses = schema.at("status").at("enum");
    for (const std::string name : {"payment_intent_succeeded.json"}) {
        const auto j = nlohmann::json::parse(fixture(name));
        for (const auto& [key, value] : j.items()) {
            INFO(name << ": " << key);
            CHECK(schema.contains(key));
        }
        CHECK(std::find(statuses.begin(), statuses.end(), j["status"]) != statuses.end());
    }
    // Every status the spec knows has a mapping decided on purpose.
    for (const auto& s : statuses) {
        INFO(s);
        const Outcome o = map_status(s.get<std::string>());
        const bool unknown_on_purpose = s == "requires_confirmation" || s == "requires_capture";
        CHECK((o == Outcome::unknown) == unknown_on_purpose);
    }
}

TEST_CASE("stripe wire: create responses map to outcomes, unknown unless recognised",
          "[providers][stripe]") {
    const PaymentOrder o = order();
    SECTION("200 succeeded echoing our request") {
        const auto r = interpret_create(o, 200, fixture("payment_intent_succeeded.json"));
        CHECK(r.outcome == Outcome::succeeded);
        CHECK(r.provider_reference == "pi_3MtwBwLkdIwHu7ix28a3tqPa");
    }
    SECTION("200 that does not echo our amount") {
        PaymentOrder other = o;
        other.amount = Money{5000, "EUR"};
        CHECK(interpret_create(other, 200, fixture("payment_intent_succeeded.json")).outcome ==
              Outcome::unknown);
    }
    SECTION("200 that does not echo our operation ID") {
        PaymentOrder other = o;
        other.operation_id = "pr_ffffffffffffffffffffffffffffffff";
        CHECK(interpret_create(other, 200, fixture("payment_intent_succeeded.json")).outcome ==
              Outcome::unknown);
    }
    SECTION("402 card declined") {
        const auto r = interpret_create(o, 402, fixture("card_declined.json"));
        CHECK(r.outcome == Outcome::declined);
        CHECK(r.call.error_class == "card_declined:insufficient_funds");
        CHECK_FALSE(r.rejection);
    }
    SECTION("409 idempotency_key_in_use: the first request may be charging") {
        CHECK(interpret_create(o, 409, fixture("idempotency_key_in_use.json")).outcome ==
              Outcome::unknown);
    }
    SECTION("400 idempotency_error: other parameters under our key") {
        CHECK(
            interpret_create(
                o, 400,
                R"({"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters"}})")
                .outcome == Outcome::unknown);
    }
    SECTION("429 executed nothing: sent again") {
        CHECK(interpret_create(o, 429, R"({"error":{"type":"rate_limit_error"}})").outcome ==
              Outcome::not_sent);
    }
    SECTION("400 invalid_request_error is a rejected request, never a decline") {
        const auto r = interpret_create(o, 400, fixture("parameter_unknown.json"));
        CHECK(r.outcome == Outcome::rejected);
        CHECK(r.call.error_class == "request_rejected:parameter_unknown");
        REQUIRE(r.rejection);
        CHECK(r.rejection->code == "parameter_unknown");
        CHECK(r.rejection->message == "Received unknown parameter: off_session");
        CHECK_FALSE(r.provider_reference);
        CHECK(
            interpret_create(
                o, 400,
                R"({"error":{"type":"invalid_request_error","code":"parameter_missing","message":"Missing required param: currency."}})")
                .call.error_class == "request_rejected:parameter_missing");
        CHECK(
            interpret_create(
                o, 404,
                R"({"error":{"type":"invalid_request_error","message":"Unrecognized request URL (POST: /v1/payment_intent)."}})")
                .call.error_class == "request_rejected:invalid_request_error");
    }
    SECTION("401 and 403 (the API key) are rejected: nothing executed, and a retry cannot help") {
        const auto r = interpret_create(
            o, 401,
            R"({"error":{"type":"invalid_request_error","message":"Invalid API Key provided: sk_test_****1234"}})");
        CHECK(r.outcome == Outcome::rejected);
        CHECK(r.call.error_class == "request_rejected:authentication");
        CHECK(interpret_create(o, 403, "").call.error_class == "request_rejected:permission");
    }
    SECTION("an amount Stripe never charges is final: declined with its code") {
        const auto r = interpret_create(
            o, 400,
            R"({"error":{"type":"invalid_request_error","code":"amount_too_small","message":"Amount must be at least €0.50 eur"}})");
        CHECK(r.outcome == Outcome::declined);
        CHECK(r.call.error_class == "invalid_request:amount_too_small");
        CHECK(interpret_create(
                  o, 400, R"({"error":{"type":"invalid_request_error","code":"amount_too_large"}})")
                  .outcome == Outcome::declined);
    }
    SECTION("5xx, garbage, empty, truncated") {
        CHECK(interpret_create(o, 500, R"({"error":{"type":"api_error"}})").outcome ==
              Outcome::unknown);
        CHECK(interpret_create(o, 502, "<html>bad gateway</html>").outcome == Outcome::unknown);
        CHECK(interpret_create(o, 200, "").outcome == Outcome::unknown);
        const std::string full = fixture("payment_intent_succeeded.json");
        CHECK(interpret_create(o, 200, full.substr(0, full.size() / 2)).outcome ==
              Outcome::unknown);
        CHECK(
            interpret_create(
                o, 200,
                R"({"id":"pi_1","object":"charge","amount":4999,"currency":"eur","status":"succeeded"})")
                .outcome == Outcome::unknown);
    }
}

TEST_CASE("stripe wire: search and list envelopes parse, and one bad item spoils the page",
          "[providers][stripe]") {
    const auto page = parse_list(fixture("search_result.json"));
    REQUIRE(page);
    REQUIRE(page->items.size() == 1);
    CHECK(page->items[0].operation_id == "pr_0123456789abcdef0123456789abcdef");
    CHECK(page->items[0].state == Outcome::succeeded);
    CHECK_FALSE(page->has_more);
    CHECK_FALSE(
        parse_list(R"({"object":"list","data":[{"id":"pi_1"}],"has_more":false})").has_value());
    CHECK_FALSE(parse_list(R"({"data":[]})").has_value());
    CHECK(search_query("pr_abc") == "metadata['operation_id']:'pr_abc'");
}

// Found by tests/fuzz/fuzz_stripe_responses: json::value threw type_error on these, out of the
// parser and through the worker thread.
TEST_CASE("stripe wire: error and list fields of the wrong type are refused, not thrown",
          "[providers][stripe]") {
    CHECK_FALSE(parse_error(R"({"error": {"type": 1, "code": "x"}})").has_value());
    const auto e =
        parse_error(R"({"error": {"type": "card_error", "code": ["x"], "decline_code": {}}})");
    REQUIRE(e.has_value());
    CHECK(e->code.empty());
    CHECK(e->decline_code.empty());
    CHECK(interpret_create(order(), 402, R"({"error": {"type": 7}})").outcome == Outcome::unknown);
    CHECK_FALSE(parse_list(R"({"object": 5, "data": []})").has_value());
    CHECK_FALSE(parse_list(R"({"object": "list", "data": [], "has_more": "yes"})").has_value());
}

// Found by the fuzz corpus: the overflow check guarded only positive amounts.
TEST_CASE("stripe wire: a negative amount that overflows in conversion is refused",
          "[providers][stripe]") {
    CHECK_FALSE(from_stripe_amount(-9223372036854775807LL - 1, "mga").has_value());
    CHECK(from_stripe_amount(-12, "mga") == Money{-1200, "MGA"});
}

// The rescale to Stripe's units checked only the upper bound (issue 13: the copies had drifted);
// it is wire::rescale now, both bounds.
TEST_CASE("stripe wire: a negative amount that overflows on the way to Stripe is refused",
          "[providers][stripe][regression]") {
    CHECK_FALSE(to_stripe_amount(Money{-9223372036854775807LL / 10, "ISK"}).has_value());
    CHECK(to_stripe_amount(Money{-12, "ISK"}) == -1200);
}
