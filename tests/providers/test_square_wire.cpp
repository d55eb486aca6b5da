// Square's wire format: the JSON we send and the responses we read, checked against what Square's
// published OpenAPI document says of them (tests/providers/contracts/square.json) and recorded
// fixtures.
#include "providers/square/wire.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::providers::square;

namespace {

std::string read(const std::string& path) {
    return testing::read_file(path);
}

std::string fixture(const std::string& name) {
    return read(std::string(PAYRECON_SOURCE_DIR) + "/tests/providers/fixtures/square/" + name);
}

const nlohmann::json& spec() {
    return testing::provider_contract("square");
}

const nlohmann::json& schema(const std::string& name) {
    return spec().at("components").at("schemas").at(name);
}

bool in_enum(const std::string& schema_name, const std::string& value) {
    for (const auto& v : schema(schema_name).at("enum")) {
        if (v == value) {
            return true;
        }
    }
    return false;
}

PaymentOrder order() {
    PaymentOrder o = testing::sample_order("cnon:card-nonce-ok");
    o.customer = "W92WH6P11H4Z77CTET0RNTGFW8";
    o.description = "2 concert tickets & more";
    return o;
}

using std::chrono::system_clock;

} // namespace

TEST_CASE("square wire: amounts are ISO minor units, unknown currencies refused",
          "[providers][square]") {
    CHECK(to_square_money(Money{4999, "EUR"}) == Money{4999, "EUR"});
    CHECK(to_square_money(Money{500, "JPY"}) == Money{500, "JPY"});
    CHECK(to_square_money(Money{1500, "KWD"}) == Money{1500, "KWD"});
    CHECK_FALSE(to_square_money(Money{1, "XXX"}).has_value());
    CHECK_FALSE(to_square_money(Money{0, "EUR"}).has_value());
    CHECK(from_square_money(100, "ISK") == Money{100, "ISK"});
    CHECK_FALSE(from_square_money(100, "eur").has_value()); // Square sends upper case
}

TEST_CASE("square wire: the create body carries our operation ID as key and reference",
          "[providers][square]") {
    const auto body = create_body(order());
    REQUIRE(body);
    const auto j = nlohmann::json::parse(*body);
    CHECK(j["idempotency_key"] == "pr_0123456789abcdef0123456789abcdef");
    CHECK(j["reference_id"] == "pr_0123456789abcdef0123456789abcdef");
    CHECK(j["source_id"] == "cnon:card-nonce-ok");
    CHECK(j["amount_money"] == nlohmann::json({{"amount", 4999}, {"currency", "EUR"}}));
    CHECK(j["customer_id"] == "W92WH6P11H4Z77CTET0RNTGFW8");
    CHECK(j["note"] == "2 concert tickets & more");
    CHECK(j["autocomplete"] == true);
    CHECK(j.size() == 7);

    PaymentOrder bare = order();
    bare.customer.reset();
    bare.description.reset();
    const auto minimal = nlohmann::json::parse(*create_body(bare));
    CHECK_FALSE(minimal.contains("customer_id"));
    CHECK_FALSE(minimal.contains("note"));

    PaymentOrder long_id = order();
    long_id.operation_id = std::string(41, 'a'); // fits the key (45), not reference_id (40)
    CHECK_FALSE(create_body(long_id).has_value());

    PaymentOrder with_metadata = order(); // CreatePayment has nowhere to put it
    with_metadata.metadata = {{"cart", "c-77"}};
    CHECK_FALSE(create_body(with_metadata).has_value());
}

TEST_CASE("square wire: every field we send is one Square's spec defines for CreatePayment",
          "[providers][square][contract]") {
    const auto& post = spec().at("paths").at("/v2/payments").at("post");
    CHECK(post.at("requestBody").at("content").at("application/json").at("schema").at("$ref") ==
          "#/components/schemas/CreatePaymentRequest");
    const auto& request = schema("CreatePaymentRequest");
    const auto& props = request.at("properties");
    const auto j = nlohmann::json::parse(*create_body(order()));
    for (const auto& [key, value] : j.items()) {
        INFO(key);
        CHECK(props.contains(key));
    }
    std::set<std::string> sent;
    for (const auto& [key, value] : j.items()) {
        sent.insert(key);
    }
    testing::check_required_fields_sent(request.at("required"), sent);
    CHECK(props.at("idempotency_key").at("maxLength") == 45);
    CHECK(props.at("reference_id").at("maxLength") == 40);
    for (const auto& [key, value] : j["amount_money"].items()) {
        CHECK(schema("Money").at("properties").contains(key));
    }
    // The list call's query parameters exist too.
    std::vector<std::string> params;
    for (const auto& p : spec().at("paths").at("/v2/payments").at("get").at("parameters")) {
        params.push_back(p.at("name").get<std::string>());
    }
    for (const std::string name : {"begin_time", "end_time", "sort_order", "cursor", "limit"}) {
        INFO(name);
        CHECK(std::find(params.begin(), params.end(), name) != params.end());
    }
}

TEST_CASE("square wire: the fixtures are Payments and Errors as Square's spec describes them",
          "[providers][square][contract]") {
    const auto& payment = schema("Payment").at("properties");
    const auto& error = schema("Error").at("properties");
    for (const std::string name :
         {"payment_completed.json", "card_declined.json", "idempotency_key_reused.json",
          "list_page1.json", "list_page2.json", "unauthorized.json"}) {
        const auto j = nlohmann::json::parse(fixture(name));
        std::vector<nlohmann::json> payments;
        if (j.contains("payment")) {
            payments.push_back(j["payment"]);
        }
        for (const auto& p : j.value("payments", nlohmann::json::array())) {
            payments.push_back(p);
        }
        for (const auto& p : payments) {
            for (const auto& [key, value] : p.items()) {
                INFO(name << ": payment." << key);
                CHECK(payment.contains(key));
            }
        }
        for (const auto& e : j.value("errors", nlohmann::json::array())) {
            for (const auto& [key, value] : e.items()) {
                INFO(name << ": error." << key);
                CHECK(error.contains(key));
            }
            CHECK(in_enum("ErrorCategory", e["category"].get<std::string>()));
            CHECK(in_enum("ErrorCode", e["code"].get<std::string>()));
        }
        const std::string serialized = j.dump();
        // Scrubbed: no access tokens (EAAA..., sq0atp-/sq0csp-) left in the recordings.
        for (const std::string secret : {"EAAA", "sq0atp-", "sq0csp-", "Bearer"}) {
            INFO(name << " holds " << secret);
            CHECK(serialized.find(secret) == std::string::npos);
        }
    }
    for (const std::string category : {"PAYMENT_METHOD_ERROR", "AUTHENTICATION_ERROR",
                                       "RATE_LIMIT_ERROR", "INVALID_REQUEST_ERROR", "API_ERROR"}) {
        INFO(category);
        CHECK(in_enum("ErrorCategory", category));
    }
}

TEST_CASE("square wire: every Payment status is mapped on purpose",
          "[providers][square][contract]") {
    // The spec lists the statuses in prose, not an enum: check our list against it.
    const std::string described = schema("Payment").at("properties").at("status").at("description");
    const std::vector<std::pair<std::string, Outcome>> table = {
        {"COMPLETED", Outcome::succeeded}, {"APPROVED", Outcome::pending},
        {"PENDING", Outcome::pending},     {"FAILED", Outcome::declined},
        {"CANCELED", Outcome::declined},
    };
    for (const auto& [status, outcome] : table) {
        INFO(status);
        CHECK(described.find(status) != std::string::npos);
        CHECK(map_status(status) == outcome);
    }
    CHECK(map_status("completed") == Outcome::unknown);
    CHECK(map_status("VOIDED") == Outcome::unknown);
    CHECK(map_status("") == Outcome::unknown);
}

TEST_CASE("square wire: create responses map to outcomes, unknown unless recognised",
          "[providers][square]") {
    const PaymentOrder o = order();
    SECTION("200 COMPLETED echoing our request") {
        const auto r = interpret_create(o, 200, fixture("payment_completed.json"));
        CHECK(r.outcome == Outcome::succeeded);
        CHECK(r.provider_reference == "R2B3Z8WMVt3EAmzYWLZvz7Y69EbZY");
        CHECK(r.call.error_class.empty());
    }
    SECTION("200 with each status") {
        const std::string full = fixture("payment_completed.json");
        auto with_status = [&](const std::string& status) {
            auto j = nlohmann::json::parse(full);
            j["payment"]["status"] = status;
            return interpret_create(o, 200, j.dump());
        };
        CHECK(with_status("APPROVED").outcome == Outcome::pending);
        CHECK(with_status("PENDING").outcome == Outcome::pending);
        CHECK(with_status("FAILED").outcome == Outcome::declined);
        CHECK(with_status("CANCELED").outcome == Outcome::declined);
        const auto odd = with_status("REVERSED");
        CHECK(odd.outcome == Outcome::unknown);
        CHECK(odd.call.error_class == "unexpected_status_REVERSED");
    }
    SECTION("200 that does not echo our amount, currency or reference_id") {
        PaymentOrder other = o;
        other.amount = Money{5000, "EUR"};
        CHECK(interpret_create(other, 200, fixture("payment_completed.json")).outcome ==
              Outcome::unknown);
        other = o;
        other.amount = Money{4999, "USD"};
        CHECK(interpret_create(other, 200, fixture("payment_completed.json")).outcome ==
              Outcome::unknown);
        other = o;
        other.operation_id = "pr_ffffffffffffffffffffffffffffffff";
        CHECK(interpret_create(other, 200, fixture("payment_completed.json")).outcome ==
              Outcome::unknown);
        auto j = nlohmann::json::parse(fixture("payment_completed.json"));
        j["payment"].erase("reference_id");
        CHECK(interpret_create(o, 200, j.dump()).outcome == Outcome::unknown);
    }
    SECTION("400 PAYMENT_METHOD_ERROR with the FAILED payment: declined") {
        const auto r = interpret_create(o, 400, fixture("card_declined.json"));
        CHECK(r.outcome == Outcome::declined);
        CHECK(r.provider_reference == "qPYV4qT1i7Xo6RVvNVrmV8BNaTbZY");
        CHECK(r.call.error_class == "card_declined:GENERIC_DECLINE");
    }
    SECTION("400 PAYMENT_METHOD_ERROR without a payment: declined") {
        for (const std::string code : {"CARD_DECLINED", "INSUFFICIENT_FUNDS", "CVV_FAILURE"}) {
            const auto r = interpret_create(
                o, 400,
                R"({"errors":[{"category":"PAYMENT_METHOD_ERROR","code":")" + code + R"("}]})");
            CHECK(r.outcome == Outcome::declined);
            CHECK_FALSE(r.provider_reference.has_value());
        }
    }
    SECTION("400 PAYMENT_METHOD_ERROR carrying someone else's or a completed payment: unknown") {
        PaymentOrder other = o;
        other.operation_id = "pr_ffffffffffffffffffffffffffffffff";
        CHECK(interpret_create(other, 400, fixture("card_declined.json")).outcome ==
              Outcome::unknown);
        auto j = nlohmann::json::parse(fixture("card_declined.json"));
        j["payment"]["status"] = "COMPLETED";
        CHECK(interpret_create(o, 400, j.dump()).outcome == Outcome::unknown);
    }
    SECTION("400 IDEMPOTENCY_KEY_REUSED: the first request may have charged") {
        const auto r = interpret_create(o, 400, fixture("idempotency_key_reused.json"));
        CHECK(r.outcome == Outcome::unknown);
        CHECK(r.call.error_class == "IDEMPOTENCY_KEY_REUSED");
    }
    SECTION("another INVALID_REQUEST_ERROR is a rejected request, never a decline") {
        const auto r = interpret_create(
            o, 400,
            R"({"errors":[{"category":"INVALID_REQUEST_ERROR","code":"MISSING_REQUIRED_PARAMETER","detail":"Missing required parameter.","field":"source_id"}]})");
        CHECK(r.outcome == Outcome::rejected);
        CHECK(r.call.error_class == "request_rejected:MISSING_REQUIRED_PARAMETER");
        REQUIRE(r.rejection);
        CHECK(r.rejection->message == "Missing required parameter.");
        CHECK(
            interpret_create(
                o, 400,
                R"({"errors":[{"category":"INVALID_REQUEST_ERROR","code":"UNKNOWN_BODY_PARAMETER","field":"autocomplete"}]})")
                .outcome == Outcome::rejected);
    }
    SECTION("UNSUPPORTED_CURRENCY is final: declined with its code") {
        const auto r = interpret_create(
            o, 400,
            R"({"errors":[{"category":"INVALID_REQUEST_ERROR","code":"UNSUPPORTED_CURRENCY","field":"amount_money.currency"}]})");
        CHECK(r.outcome == Outcome::declined);
        CHECK(r.call.error_class == "invalid_request:UNSUPPORTED_CURRENCY");
    }
    SECTION("401 and 403 (the access token) are rejected; 429 executed nothing") {
        const auto unauthorized = interpret_create(o, 401, fixture("unauthorized.json"));
        CHECK(unauthorized.outcome == Outcome::rejected);
        CHECK(unauthorized.call.error_class.rfind("request_rejected:", 0) == 0);
        CHECK(interpret_create(
                  o, 403, R"({"errors":[{"category":"AUTHENTICATION_ERROR","code":"FORBIDDEN"}]})")
                  .call.error_class == "request_rejected:FORBIDDEN");
        const auto limited = interpret_create(
            o, 429, R"({"errors":[{"category":"RATE_LIMIT_ERROR","code":"RATE_LIMITED"}]})");
        CHECK(limited.outcome == Outcome::not_sent);
        CHECK(limited.call.error_class == "rate_limited");
    }
    SECTION("5xx, garbage, empty, truncated, other statuses") {
        CHECK(interpret_create(
                  o, 500, R"({"errors":[{"category":"API_ERROR","code":"INTERNAL_SERVER_ERROR"}]})")
                  .outcome == Outcome::unknown);
        CHECK(interpret_create(o, 502, "<html>bad gateway</html>").outcome == Outcome::unknown);
        CHECK(interpret_create(o, 200, "").outcome == Outcome::unknown);
        CHECK(interpret_create(o, 200, "{}").outcome == Outcome::unknown);
        const std::string full = fixture("payment_completed.json");
        CHECK(interpret_create(o, 200, full.substr(0, full.size() / 2)).outcome ==
              Outcome::unknown);
        CHECK(interpret_create(o, 400, "not json").outcome == Outcome::unknown);
        CHECK(interpret_create(o, 400, R"({"errors":[]})").outcome == Outcome::unknown);
        CHECK(interpret_create(
                  o, 404, R"({"errors":[{"category":"INVALID_REQUEST_ERROR","code":"NOT_FOUND"}]})")
                  .outcome == Outcome::unknown);
        CHECK(interpret_create(
                  o, 409, R"({"errors":[{"category":"INVALID_REQUEST_ERROR","code":"CONFLICT"}]})")
                  .outcome == Outcome::unknown);
    }
}

TEST_CASE("square wire: list envelopes parse, and one bad item spoils the page",
          "[providers][square]") {
    const auto page = parse_envelope(fixture("list_page1.json"));
    REQUIRE(page);
    REQUIRE(page->payments.size() == 2);
    CHECK(page->payments[0].operation_id == "pr_ffffffffffffffffffffffffffffffff");
    CHECK(page->payments[0].state == Outcome::succeeded);
    CHECK(page->payments[0].created_at ==
          system_clock::time_point(std::chrono::seconds(1764669492)) +
              std::chrono::milliseconds(1) + std::chrono::hours(24 * 365));
    CHECK_FALSE(page->payments[1].operation_id.has_value());
    CHECK(page->cursor == "Fyd8yGSGRN2cOl5c6A0lRbS5RFqbZY");
    const auto last = parse_envelope(fixture("list_page2.json"));
    REQUIRE(last);
    CHECK_FALSE(last->cursor.has_value());
    const auto empty = parse_envelope("{}");
    REQUIRE(empty);
    CHECK(empty->payments.empty());
    CHECK_FALSE(parse_envelope(R"({"payments":[{"id":"x"}]})").has_value());
    CHECK_FALSE(parse_envelope(R"({"payments":{}})").has_value());
    CHECK_FALSE(parse_envelope("[]").has_value());
}

// Found by the corpus the conformance suite replays (tests/fuzz/corpus/square/
// wrong_types_error_detail): an error's detail or field of another type threw nlohmann's
// type_error out of interpret_create.
TEST_CASE("square wire: an error's detail or field of another type is absent, not thrown",
          "[providers][square][regression]") {
    const std::string body =
        R"({"errors":[{"category":"INVALID_REQUEST_ERROR","code":"INVALID_VALUE","detail":5,"field":["x"]}]})";
    const auto env = parse_envelope(body);
    REQUIRE(env);
    REQUIRE(env->errors.size() == 1);
    CHECK(env->errors[0].detail.empty());
    CHECK(env->errors[0].field.empty());
    const auto r = interpret_create(order(), 400, body);
    CHECK(r.outcome == Outcome::rejected);
    CHECK(r.rejection->code == "INVALID_VALUE");
}
