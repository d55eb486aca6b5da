// Provider responses nested as deep as the transport's 1 MiB response cap allows: every parser
// refuses them without recursing, and a payment answered with one is `unknown`, never a crash. (A
// Stripe PaymentIntent whose metadata nested 170,000 objects overflowed the stack in dump(): the
// worker died mid-call, and so did every reconciler that asked the provider again.)
#include "core/external_json.hpp"
#include "net/transport.hpp"
#include "providers/adyen/wire.hpp"
#include "providers/square/wire.hpp"
#include "providers/stripe/wire.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <catch2/catch.hpp>
#include <string>

using namespace payrecon;
using namespace payrecon::providers;

namespace {

constexpr std::size_t k_cap = net::TransportOptions{}.max_response_bytes;

// `prefix` + `{"a":` nested until the body fills the response cap + `suffix`.
std::string nested_objects(const std::string& prefix, const std::string& suffix) {
    const std::size_t levels = (k_cap - prefix.size() - suffix.size() - 1) / 6;
    std::string body = prefix;
    body.reserve(k_cap);
    for (std::size_t i = 0; i < levels; ++i) {
        body += R"({"a":)";
    }
    body += "1";
    body.append(levels, '}');
    body += suffix;
    REQUIRE(body.size() <= k_cap);
    return body;
}

std::string nested_arrays() {
    return std::string(k_cap / 2, '[') + std::string(k_cap / 2, ']');
}

PaymentOrder order() {
    return testing::sample_order("pm_card_visa");
}

} // namespace

TEST_CASE(
    "external json: nesting is measured outside strings and escapes, and refused past the limit",
    "[providers][json]") {
    CHECK(json_nesting_depth(R"({"a": [1, {"b": "[[[{{{"}], "c": "\"]}"})") == 3);
    CHECK(json_nesting_depth("[]") == 1);
    CHECK(json_nesting_depth("\"[[[\"") == 0);
    const std::string at_limit =
        std::string(k_max_external_json_depth, '[') + std::string(k_max_external_json_depth, ']');
    const std::string past_limit = "[" + at_limit + "]";
    CHECK(parse_external_json(at_limit).has_value());
    CHECK_FALSE(parse_external_json(past_limit).has_value());
    CHECK_FALSE(parse_external_json("{\"a\": ").has_value());
    // The scan stops counting past the limit: a cap-sized document is one pass.
    CHECK(json_nesting_depth(nested_arrays()) == k_max_external_json_depth + 1);
}

TEST_CASE("external json: a 1 MiB maximally nested response or webhook is refused by every "
          "provider parser, "
          "and a payment answered with one is unknown",
          "[providers][json]") {
    const std::string intent = nested_objects(
        R"({"id":"pi_1","object":"payment_intent","amount":4999,"currency":"eur","status":"succeeded",)"
        R"("metadata":{"operation_id":"pr_0123456789abcdef0123456789abcdef","deep":)",
        "}}");
    const std::string arrays = nested_arrays();
    for (const std::string* body : {&intent, &arrays}) {
        CHECK_FALSE(stripe::parse_payment_intent(*body));
        CHECK_FALSE(stripe::parse_error(*body));
        CHECK_FALSE(stripe::parse_list(*body));
        CHECK_FALSE(stripe::parse_event(*body)); // a webhook body, once its signature verified
        CHECK_FALSE(adyen::parse_payment_response(*body));
        CHECK_FALSE(adyen::parse_service_error(*body));
        CHECK_FALSE(square::parse_payment(*body));
        CHECK_FALSE(square::parse_envelope(*body));
        for (const int status : {200, 201, 400, 402, 422, 500}) {
            INFO("HTTP " << status);
            CHECK(stripe::interpret_create(order(), status, *body).outcome == Outcome::unknown);
            CHECK(adyen::interpret_payment(order(), status, *body).outcome == Outcome::unknown);
            CHECK(square::interpret_create(order(), status, *body).outcome == Outcome::unknown);
        }
    }
}
