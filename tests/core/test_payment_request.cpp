#include "core/fingerprint.hpp"
#include "core/payment_request.hpp"
#include "tests/core/reference_generator.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using namespace payrecon;
using json = nlohmann::json;
using payrecon::testing::ReferenceGenerator;

namespace {

constexpr std::string_view k_valid_body =
    R"({"amount":1000,"currency":"EUR","merchant_reference":"order-42","provider":"stripe",)"
    R"("payment_method":"pm_card_visa","customer":"cus_9","description":"Blue mug",)"
    R"("metadata":{"cart":"c-17","channel":"web"}})";

const char* const k_card = "4242424242424242";

json valid_json() {
    return json::parse(k_valid_body);
}

PaymentRequest parse_ok(std::string_view body, std::string_view version = "") {
    INFO("body: " << body);
    const auto parsed = parse_payment_request(body, version);
    if (!parsed) {
        FAIL_CHECK("rejected: " << parsed.error().field << " " << parsed.error().code << ": "
                                << parsed.error().message);
    }
    REQUIRE(parsed);
    return *parsed;
}

PaymentRequest parse_ok_doc(const json& body) {
    return parse_ok(body.dump());
}

ValidationError parse_error(std::string_view body, std::string_view version = "") {
    const auto parsed = parse_payment_request(body, version);
    REQUIRE_FALSE(parsed);
    return parsed.error();
}

std::string canonical_of(std::string_view body, std::string_view version = "") {
    return canonical_bytes(parse_ok(body, version));
}

std::string canonical_of_doc(const json& body) {
    return canonical_of(body.dump());
}

std::string kind_name(ValidationKind kind) {
    switch (kind) {
    case ValidationKind::malformed:
        return "malformed";
    case ValidationKind::invalid:
        return "invalid";
    case ValidationKind::card_data:
        return "card_data";
    case ValidationKind::unsupported_version:
        return "unsupported_version";
    }
    return "?";
}

struct BadBody {
    std::string name;
    std::string body;
    ValidationKind kind;
    std::string field;
    std::string code;
};

void check_rejections(const std::vector<BadBody>& cases) {
    for (const BadBody& bad : cases) {
        INFO(bad.name << ": " << bad.body.substr(0, 200));
        const ValidationError error = parse_error(bad.body);
        CHECK(kind_name(error.kind) == kind_name(bad.kind));
        CHECK(error.field == bad.field);
        CHECK(error.code == bad.code);
        CHECK_FALSE(error.message.empty());
    }
}

json with(const std::string& field, const json& value) {
    json body = valid_json();
    body[field] = value;
    return body;
}

json without(const std::string& field) {
    json body = valid_json();
    body.erase(field);
    return body;
}

json with_metadata(const std::string& key, const json& value) {
    json body = valid_json();
    body["metadata"][key] = value;
    return body;
}

} // namespace

// ---- parsing a valid request ------------------------------------------------------------------

TEST_CASE("payment request: a valid body gives the typed request with defaults applied",
          "[core][request]") {
    const PaymentRequest request = parse_ok(k_valid_body);
    CHECK(request.api_version == k_api_version);
    CHECK(request.amount_minor == 1000);
    CHECK(request.currency == "EUR");
    CHECK(request.merchant_reference == "order-42");
    CHECK(request.provider == "stripe");
    CHECK(request.payment_method == "pm_card_visa");
    CHECK(request.customer == "cus_9");
    CHECK(request.description == "Blue mug");
    CHECK(request.metadata ==
          std::map<std::string, std::string>{{"cart", "c-17"}, {"channel", "web"}});
}

TEST_CASE("payment request: optional fields may be absent or null", "[core][request]") {
    json body = valid_json();
    body.erase("customer");
    body.erase("description");
    body.erase("metadata");
    const PaymentRequest absent = parse_ok_doc(body);
    CHECK_FALSE(absent.customer);
    CHECK_FALSE(absent.description);
    CHECK(absent.metadata.empty());

    body["customer"] = nullptr;
    body["description"] = nullptr;
    body["metadata"] = nullptr;
    CHECK(parse_ok_doc(body) == absent);
}

TEST_CASE("payment request: the amount limits are 1 and 10^15 minor units", "[core][request]") {
    CHECK(parse_ok_doc(with("amount", 1)).amount_minor == 1);
    CHECK(parse_ok_doc(with("amount", k_max_amount_minor)).amount_minor == k_max_amount_minor);
}

TEST_CASE("payment request: lengths at their limits are accepted", "[core][request]") {
    CHECK(
        parse_ok_doc(with("merchant_reference", std::string(255, 'r'))).merchant_reference.size() ==
        255);
    CHECK(parse_ok_doc(with("customer", std::string(255, 'c'))).customer->size() == 255);
    CHECK(parse_ok_doc(with("description", std::string(1000, 'd'))).description->size() == 1000);
    CHECK(parse_ok_doc(with("description", "")).description == "");
    CHECK(parse_ok_doc(with("provider", std::string(32, 'p'))).provider.size() == 32);
    CHECK(parse_ok_doc(with("payment_method", std::string(255, 'm'))).payment_method.size() == 255);
    CHECK(parse_ok_doc(with("payment_method", "pm_1.A:b-C")).payment_method == "pm_1.A:b-C");
    CHECK(parse_ok_doc(with("provider", "fake_provider-2")).provider == "fake_provider-2");

    json metadata = json::object();
    for (int i = 0; i < 50; ++i) {
        metadata["k" + std::to_string(i)] = std::string(500, 'v');
    }
    metadata[std::string(40, 'k')] = "";
    metadata.erase("k0");
    CHECK(parse_ok_doc(with("metadata", metadata)).metadata.size() == 50);
}

TEST_CASE("payment request: description may hold newlines and tabs, and any UTF-8",
          "[core][request]") {
    CHECK(parse_ok_doc(with("description", "line 1\nline 2\tend")).description ==
          "line 1\nline 2\tend");
    CHECK(parse_ok_doc(with("description", "Caf\xc3\xa9 \xe2\x98\x95 \xf0\x9f\x8d\xb5"))
              .description == "Caf\xc3\xa9 \xe2\x98\x95 \xf0\x9f\x8d\xb5");
}

TEST_CASE("payment request: transport fields are accepted and ignored", "[core][request]") {
    json body = valid_json();
    body["trace_id"] = "abc";
    body["traceparent"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    body["tracestate"] = "congo=t61rcWkgMzE";
    body["request_id"] = "req-1";
    body["correlation_id"] = "corr-1";
    CHECK(parse_ok_doc(body) == parse_ok(k_valid_body));
}

TEST_CASE("payment request: the nesting limit is exactly k_max_request_depth levels",
          "[core][request][malformed]") {
    // Top object (1) + metadata (2) + 6 arrays = 8 levels: parses, then the value is the wrong
    // type.
    json at_limit = with_metadata("a", json::parse("[[[[[[1]]]]]]"));
    const ValidationError error = parse_error(at_limit.dump());
    CHECK(error.kind == ValidationKind::invalid);
    CHECK(error.field == "metadata.a");
    CHECK(error.code == "wrong_type");

    json over_limit = with_metadata("a", json::parse("[[[[[[[1]]]]]]]"));
    const ValidationError too_deep = parse_error(over_limit.dump());
    CHECK(too_deep.kind == ValidationKind::malformed);
    CHECK(too_deep.code == "too_deep");
}

// ---- canonical bytes: same meaning, same bytes ------------------------------------------------

TEST_CASE("payment request: reordered keys and whitespace give the same canonical bytes",
          "[core][canonical]") {
    const std::string reference = canonical_of(k_valid_body);
    const std::string reordered =
        R"({"metadata":{"channel":"web","cart":"c-17"},"description":"Blue mug","customer":"cus_9",)"
        R"("payment_method":"pm_card_visa","provider":"stripe","merchant_reference":"order-42",)"
        R"("currency":"EUR","amount":1000})";
    CHECK(canonical_of(reordered) == reference);
    const std::string spaced =
        "\n\t{ \"amount\" : 1000 ,\r\n \"currency\":\"EUR\",\n"
        "  \"merchant_reference\" :\"order-42\", \"provider\":\"stripe\",\n"
        "  \"payment_method\":\"pm_card_visa\",\"customer\":\"cus_9\",\n"
        "  \"description\":\"Blue mug\",\n"
        "  \"metadata\" : { \"cart\" : \"c-17\" , \"channel\":\"web\" } }\n ";
    CHECK(canonical_of(spaced) == reference);
    CHECK(canonical_of(valid_json().dump(4)) == reference);
}

TEST_CASE("payment request: a unicode escape and raw UTF-8 give the same canonical bytes",
          "[core][canonical]") {
    json raw = with("description", "Caf\xc3\xa9 \xe2\x82\xac");
    raw["merchant_reference"] = "r\xc3\xa9"
                                "f-1";
    const std::string escaped_text = raw.dump(-1, ' ', /*ensure_ascii=*/true);
    REQUIRE(escaped_text.find("\\u00e9") != std::string::npos);
    REQUIRE(escaped_text.find("\\u20ac") != std::string::npos);
    CHECK(canonical_of(escaped_text) == canonical_of_doc(raw));
    // "/" may be escaped in JSON too.
    CHECK(canonical_of_doc(with("description", "a/b")) ==
          canonical_of(R"({"amount":1000,"currency":"EUR","merchant_reference":"order-42",)"
                       R"("provider":"stripe","payment_method":"pm_card_visa","customer":"cus_9",)"
                       R"("description":"a\/b","metadata":{"cart":"c-17","channel":"web"}})"));
}

TEST_CASE("payment request: tracing fields do not change the canonical bytes",
          "[core][canonical]") {
    json traced = valid_json();
    traced["trace_id"] = "trace-1";
    traced["traceparent"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    CHECK(canonical_of_doc(traced) == canonical_of(k_valid_body));
    traced["trace_id"] = "trace-2";
    CHECK(canonical_of_doc(traced) == canonical_of(k_valid_body));
}

TEST_CASE("payment request: a lower-case currency gives the same canonical bytes",
          "[core][canonical]") {
    CHECK(parse_ok_doc(with("currency", "eur")).currency == "EUR");
    CHECK(canonical_of_doc(with("currency", "eur")) == canonical_of(k_valid_body));
    CHECK(canonical_of_doc(with("currency", "Eur")) == canonical_of(k_valid_body));
}

TEST_CASE("payment request: the explicit default API version gives the same canonical bytes",
          "[core][canonical]") {
    CHECK(canonical_of(k_valid_body, k_api_version) == canonical_of(k_valid_body, ""));
    CHECK(parse_ok(k_valid_body, "").api_version == k_api_version);
}

TEST_CASE("payment request: null and absent optional fields give the same canonical bytes",
          "[core][canonical]") {
    json absent = valid_json();
    absent.erase("customer");
    json null_customer = absent;
    null_customer["customer"] = nullptr;
    CHECK(canonical_of_doc(absent) == canonical_of_doc(null_customer));
    json empty_metadata = absent;
    empty_metadata["metadata"] = json::object();
    json no_metadata = absent;
    no_metadata.erase("metadata");
    CHECK(canonical_of_doc(empty_metadata) == canonical_of_doc(no_metadata));
}

TEST_CASE("payment request: equivalent bodies get the same fingerprint", "[core][canonical]") {
    const FingerprintKeys keys(Secret{"payrecon-test-fingerprint-secret-0123456789"});
    json variant = json::parse(k_valid_body);
    variant["currency"] = "eur";
    variant["trace_id"] = "t-1";
    const std::string escaped = variant.dump(2, ' ', /*ensure_ascii=*/true);
    CHECK(keys.fingerprint(canonical_of(escaped, k_api_version)) ==
          keys.fingerprint(canonical_of(k_valid_body)));
    CHECK(keys.matches(canonical_of(escaped), keys.fingerprint(canonical_of(k_valid_body))));
}

TEST_CASE("payment request: the canonical bytes name the operation and every field",
          "[core][canonical]") {
    json body = valid_json();
    body.erase("customer");
    body.erase("description");
    body.erase("metadata");
    const json canonical = json::parse(canonical_of_doc(body));
    CHECK(canonical ==
          json::parse(R"({"amount":1000,"api_version":"2026-12-01","currency":"EUR",)"
                      R"("customer":null,"description":null,"merchant_reference":"order-42",)"
                      R"("metadata":{},"operation":"create_payment",)"
                      R"("payment_method":"pm_card_visa","provider":"stripe"})"));
    CHECK(canonical_of_doc(body) == canonical.dump()); // compact and sorted
}

// ---- canonical bytes: other meaning, other bytes ----------------------------------------------

TEST_CASE("payment request: any changed field gives different canonical bytes",
          "[core][canonical]") {
    const std::string reference = canonical_of(k_valid_body);
    const FingerprintKeys keys(Secret{"payrecon-test-fingerprint-secret-0123456789"});
    const std::vector<std::pair<std::string, json>> changes = {
        {"amount", with("amount", 1001)},
        {"currency", with("currency", "USD")},
        {"merchant_reference", with("merchant_reference", "order-43")},
        {"provider", with("provider", "adyen")},
        {"payment_method", with("payment_method", "pm_card_mastercard")},
        {"metadata value", with_metadata("cart", "c-18")},
        {"metadata key added", with_metadata("gift", "yes")},
        {"customer", with("customer", "cus_10")},
        {"customer removed", without("customer")},
        {"description", with("description", "Red mug")},
        {"description removed", without("description")},
        {"metadata removed", without("metadata")},
    };
    for (const auto& [name, body] : changes) {
        INFO(name);
        const std::string changed = canonical_of_doc(body);
        CHECK(changed != reference);
        CHECK(keys.fingerprint(changed) != keys.fingerprint(reference));
    }
}

TEST_CASE("payment request: adding a description changes the canonical bytes",
          "[core][canonical]") {
    const json no_description = without("description");
    CHECK(canonical_of_doc(no_description) != canonical_of_doc(with("description", "Blue mug")));
    CHECK(canonical_of_doc(no_description) != canonical_of_doc(with("description", "")));
}

TEST_CASE("payment request: the API version is part of the canonical bytes", "[core][canonical]") {
    PaymentRequest request = parse_ok(k_valid_body);
    const std::string today = canonical_bytes(request);
    request.api_version = "2027-06-01";
    CHECK(canonical_bytes(request) != today);
}

TEST_CASE("payment request: absent, empty and present optional values differ in canonical bytes",
          "[core][canonical]") {
    PaymentRequest request = parse_ok_doc(without("customer"));
    request.description.reset();
    const std::string absent = canonical_bytes(request);
    request.customer = "";
    CHECK(canonical_bytes(request) != absent);
    request.customer.reset();
    request.description = "";
    CHECK(canonical_bytes(request) != absent);
    request.description.reset();
    request.metadata[""] = "";
    CHECK(canonical_bytes(request) != absent);
}

TEST_CASE("payment request: canonical bytes are stable across calls", "[core][canonical]") {
    const PaymentRequest request = parse_ok(k_valid_body);
    CHECK(canonical_bytes(request) == canonical_bytes(request));
    CHECK(canonical_bytes(request) == canonical_bytes(parse_ok(k_valid_body)));
}

// ---- rejected bodies ---------------------------------------------------------------------------

TEST_CASE("payment request: bodies that are not one JSON object are malformed",
          "[core][request][malformed]") {
    check_rejections({
        {"empty body", "", ValidationKind::malformed, "", "empty"},
        {"only whitespace", "  \n", ValidationKind::malformed, "", "syntax"},
        {"not JSON", "amount=1000&currency=EUR", ValidationKind::malformed, "", "syntax"},
        {"truncated", R"({"amount":1000,)", ValidationKind::malformed, "", "syntax"},
        {"trailing comma", R"({"amount":1000,})", ValidationKind::malformed, "", "syntax"},
        {"single quotes", R"({'amount':1000})", ValidationKind::malformed, "", "syntax"},
        {"trailing data", std::string(k_valid_body) + " {}", ValidationKind::malformed, "",
         "syntax"},
        {"comment", std::string("/* c */") + std::string(k_valid_body), ValidationKind::malformed,
         "", "syntax"},
        {"NaN", R"({"amount":NaN})", ValidationKind::malformed, "", "syntax"},
        {"number overflowing a double", R"({"amount":1e400})", ValidationKind::malformed, "",
         "syntax"},
        {"invalid UTF-8", "{\"description\":\"caf\xe9\"}", ValidationKind::malformed, "", "syntax"},
        {"overlong UTF-8", "{\"description\":\"\xc0\xaf\"}", ValidationKind::malformed, "",
         "syntax"},
        {"lone surrogate", R"({"description":"\ud800"})", ValidationKind::malformed, "", "syntax"},
        {"raw control character in a string", "{\"description\":\"a\x01\"}",
         ValidationKind::malformed, "", "syntax"},
        {"top-level array", "[" + std::string(k_valid_body) + "]", ValidationKind::malformed, "",
         "not_object"},
        {"top-level string", R"("payment")", ValidationKind::malformed, "", "not_object"},
        {"top-level number", "1000", ValidationKind::malformed, "", "not_object"},
        {"top-level null", "null", ValidationKind::malformed, "", "not_object"},
    });
}

TEST_CASE("payment request: duplicate keys are malformed at the top level and when nested",
          "[core][request][malformed]") {
    check_rejections({
        {"duplicate amount",
         R"({"amount":1000,"currency":"EUR","merchant_reference":"o","provider":"stripe",)"
         R"("payment_method":"pm_1","amount":1})",
         ValidationKind::malformed, "amount", "duplicate_key"},
        {"duplicate metadata key",
         R"({"amount":1000,"currency":"EUR","merchant_reference":"o","provider":"stripe",)"
         R"("payment_method":"pm_1","metadata":{"a":"1","b":"2","a":"1"}})",
         ValidationKind::malformed, "metadata.a", "duplicate_key"},
        {"duplicate key deeper", R"({"x":{"y":[{"z":1,"z":1}]}})", ValidationKind::malformed,
         "x.y.z", "duplicate_key"},
        {"same value twice", R"({"amount":1000,"amount":1000})", ValidationKind::malformed,
         "amount", "duplicate_key"},
    });
    // The same key in two different objects is not a duplicate.
    CHECK(parse_ok_doc(with_metadata("provider", "x")).metadata.at("provider") == "x");
}

TEST_CASE("payment request: 10,000-deep nesting is rejected quickly, without recursion",
          "[core][request][malformed]") {
    const std::size_t depth = 10'000;
    std::string arrays = std::string(depth, '[') + std::string(depth, ']');
    std::string objects;
    for (std::size_t i = 0; i < depth; ++i) {
        objects += R"({"a":)";
    }
    objects += "1" + std::string(depth, '}');
    std::string unclosed = std::string(depth, '[');
    std::string in_metadata = R"({"amount":1000,"metadata":)" + objects + "}";

    // No timing bound here (a loaded machine makes any threshold flaky): that the depth is
    // refused before anything recurses is what keeps it fast, and what is checked.
    for (const std::string* body : {&arrays, &objects, &unclosed, &in_metadata}) {
        const ValidationError error = parse_error(*body);
        CHECK(error.kind == ValidationKind::malformed);
        CHECK(error.code == "too_deep");
    }
}

TEST_CASE("payment request: each missing required field is named", "[core][request]") {
    for (const char* field :
         {"amount", "currency", "merchant_reference", "provider", "payment_method"}) {
        INFO(field);
        const ValidationError error = parse_error(without(field).dump());
        CHECK(error.kind == ValidationKind::invalid);
        CHECK(error.field == field);
        CHECK(error.code == "required");
    }
    const ValidationError empty_object = parse_error("{}");
    CHECK(empty_object.kind == ValidationKind::invalid);
    CHECK(empty_object.code == "required");
}

TEST_CASE("payment request: an amount that is not a positive JSON integer is invalid",
          "[core][request]") {
    const auto body_with_amount = [](const std::string& amount) {
        return R"({"amount":)" + amount +
               R"(,"currency":"EUR","merchant_reference":"o","provider":"stripe",)"
               R"("payment_method":"pm_1"})";
    };
    const auto inv = ValidationKind::invalid;
    check_rejections({
        {"float 1000.0", body_with_amount("1000.0"), inv, "amount", "not_integer"},
        {"exponent 1e3", body_with_amount("1e3"), inv, "amount", "not_integer"},
        {"exponent 1E3", body_with_amount("1E3"), inv, "amount", "not_integer"},
        {"fraction", body_with_amount("10.5"), inv, "amount", "not_integer"},
        {"float -0.0", body_with_amount("-0.0"), inv, "amount", "not_integer"},
        {"string", body_with_amount(R"("1000")"), inv, "amount", "not_integer"},
        {"bool", body_with_amount("true"), inv, "amount", "not_integer"},
        {"null", body_with_amount("null"), inv, "amount", "not_integer"},
        {"object", body_with_amount(R"({"value":1000})"), inv, "amount", "not_integer"},
        {"array", body_with_amount("[1000]"), inv, "amount", "not_integer"},
        {"zero", body_with_amount("0"), inv, "amount", "out_of_range"},
        {"minus zero", body_with_amount("-0"), inv, "amount", "out_of_range"},
        {"negative", body_with_amount("-1000"), inv, "amount", "out_of_range"},
        {"int64 min", body_with_amount("-9223372036854775808"), inv, "amount", "out_of_range"},
        {"above 10^15", body_with_amount("1000000000000001"), inv, "amount", "out_of_range"},
        {"int64 max", body_with_amount("9223372036854775807"), inv, "amount", "out_of_range"},
        {"int64 max + 1", body_with_amount("9223372036854775808"), inv, "amount", "out_of_range"},
        {"uint64 max", body_with_amount("18446744073709551615"), inv, "amount", "out_of_range"},
        {"overflowing 20 digits", body_with_amount("99999999999999999999"), inv, "amount",
         "out_of_range"},
        {"overflowing negative", body_with_amount("-99999999999999999999"), inv, "amount",
         "out_of_range"},
        {"huge float", body_with_amount("1e300"), inv, "amount", "out_of_range"},
    });
}

TEST_CASE("payment request: wrong types and unknown currencies are invalid", "[core][request]") {
    const auto inv = ValidationKind::invalid;
    check_rejections({
        {"currency number", with("currency", 978).dump(), inv, "currency", "wrong_type"},
        {"currency null", with("currency", nullptr).dump(), inv, "currency", "wrong_type"},
        {"unknown currency", with("currency", "XYZ").dump(), inv, "currency", "unknown_currency"},
        {"precious metal", with("currency", "xau").dump(), inv, "currency", "unknown_currency"},
        {"empty currency", with("currency", "").dump(), inv, "currency", "unknown_currency"},
        {"currency name", with("currency", "euro").dump(), inv, "currency", "unknown_currency"},
        {"currency with space", with("currency", "EUR ").dump(), inv, "currency",
         "unknown_currency"},
        {"merchant_reference number", with("merchant_reference", 42).dump(), inv,
         "merchant_reference", "wrong_type"},
        {"provider null", with("provider", nullptr).dump(), inv, "provider", "wrong_type"},
        {"payment_method object", with("payment_method", json::object()).dump(), inv,
         "payment_method", "wrong_type"},
        {"customer number", with("customer", 5).dump(), inv, "customer", "wrong_type"},
        {"description bool", with("description", true).dump(), inv, "description", "wrong_type"},
        {"metadata array", with("metadata", json::array()).dump(), inv, "metadata", "wrong_type"},
        {"metadata string", with("metadata", "a=b").dump(), inv, "metadata", "wrong_type"},
        {"metadata value number", with_metadata("count", 3).dump(), inv, "metadata.count",
         "wrong_type"},
        {"metadata value object", with_metadata("nested", json::object()).dump(), inv,
         "metadata.nested", "wrong_type"},
        {"metadata value null", with_metadata("gone", nullptr).dump(), inv, "metadata.gone",
         "wrong_type"},
        {"metadata value bool", with_metadata("flag", false).dump(), inv, "metadata.flag",
         "wrong_type"},
        {"transport field number", with("trace_id", 7).dump(), inv, "trace_id", "wrong_type"},
        {"transport field object", with("traceparent", json::object()).dump(), inv, "traceparent",
         "wrong_type"},
    });
}

TEST_CASE("payment request: unknown fields are invalid and named", "[core][request]") {
    const auto inv = ValidationKind::invalid;
    check_rejections({
        {"unknown field", with("amount_cents", 1000).dump(), inv, "amount_cents", "unknown_field"},
        {"api_version in the body", with("api_version", "2026-12-01").dump(), inv, "api_version",
         "unknown_field"},
        {"operation in the body", with("operation", "refund").dump(), inv, "operation",
         "unknown_field"},
        {"case matters", with("Amount", 1000).dump(), inv, "Amount", "unknown_field"},
    });
}

TEST_CASE("payment request: bad lengths and characters are invalid", "[core][request]") {
    const auto inv = ValidationKind::invalid;
    json too_many = json::object();
    for (int i = 0; i < 51; ++i) {
        too_many["k" + std::to_string(i)] = "v";
    }
    check_rejections({
        {"merchant_reference empty", with("merchant_reference", "").dump(), inv,
         "merchant_reference", "empty"},
        {"merchant_reference 256", with("merchant_reference", std::string(256, 'r')).dump(), inv,
         "merchant_reference", "too_long"},
        {"merchant_reference control",
         with("merchant_reference", std::string("a") + '\x01' + "b").dump(), inv,
         "merchant_reference", "invalid_character"},
        {"merchant_reference newline", with("merchant_reference", "a\nb").dump(), inv,
         "merchant_reference", "invalid_character"},
        {"merchant_reference NUL", with("merchant_reference", std::string("a\0b", 3)).dump(), inv,
         "merchant_reference", "invalid_character"},
        {"customer empty", with("customer", "").dump(), inv, "customer", "empty"},
        {"customer 256", with("customer", std::string(256, 'c')).dump(), inv, "customer",
         "too_long"},
        {"customer DEL", with("customer", "cus\x7f").dump(), inv, "customer", "invalid_character"},
        {"description 1001", with("description", std::string(1001, 'd')).dump(), inv, "description",
         "too_long"},
        {"description carriage return", with("description", "a\r\nb").dump(), inv, "description",
         "invalid_character"},
        {"description NUL", with("description", std::string("a\0b", 3)).dump(), inv, "description",
         "invalid_character"},
        {"description escape", with("description", "a\x1b[31m").dump(), inv, "description",
         "invalid_character"},
        {"provider upper case", with("provider", "Stripe").dump(), inv, "provider",
         "invalid_character"},
        {"provider space", with("provider", "my provider").dump(), inv, "provider",
         "invalid_character"},
        {"provider tab", with("provider", "stripe\t").dump(), inv, "provider", "invalid_character"},
        {"provider 33", with("provider", std::string(33, 'p')).dump(), inv, "provider", "too_long"},
        {"provider empty", with("provider", "").dump(), inv, "provider", "empty"},
        {"payment_method empty", with("payment_method", "").dump(), inv, "payment_method", "empty"},
        {"payment_method 256", with("payment_method", std::string(256, 'm')).dump(), inv,
         "payment_method", "too_long"},
        {"payment_method space", with("payment_method", "pm 1").dump(), inv, "payment_method",
         "invalid_character"},
        {"payment_method slash", with("payment_method", "pm/1").dump(), inv, "payment_method",
         "invalid_character"},
        {"payment_method non-ASCII", with("payment_method", "pm_\xc3\xa9").dump(), inv,
         "payment_method", "invalid_character"},
        {"payment_method control", with("payment_method", "pm_1\x02").dump(), inv, "payment_method",
         "invalid_character"},
        {"metadata 51 entries", with("metadata", too_many).dump(), inv, "metadata",
         "too_many_entries"},
        {"metadata empty key", with_metadata("", "v").dump(), inv, "metadata", "empty_key"},
        {"metadata key 41", with_metadata(std::string(41, 'k'), "v").dump(), inv, "metadata",
         "key_too_long"},
        {"metadata key control", with_metadata("a\nb", "v").dump(), inv, "metadata",
         "key_invalid_character"},
        {"metadata key DEL", with_metadata("a\x7f", "v").dump(), inv, "metadata",
         "key_invalid_character"},
        {"metadata value 501", with_metadata("note", std::string(501, 'v')).dump(), inv,
         "metadata.note", "too_long"},
        {"metadata value NUL", with_metadata("note", std::string("a\0b", 3)).dump(), inv,
         "metadata.note", "invalid_character"},
    });
}

TEST_CASE("payment request: an API version other than today's is unsupported", "[core][request]") {
    for (const char* version : {"2025-01-01", "2026-12-02", "latest", " 2026-12-01"}) {
        INFO(version);
        const ValidationError error = parse_error(k_valid_body, version);
        CHECK(error.kind == ValidationKind::unsupported_version);
        CHECK(error.field == "Payrecon-Version");
        CHECK(error.code == "unsupported_version");
    }
}

// ---- card data ----------------------------------------------------------------------------------

TEST_CASE("payment request: card numbers and card field names anywhere are card data",
          "[core][request][card]") {
    const auto card = ValidationKind::card_data;
    const std::string spaced = "4242 4242 4242 4242";
    json nested_card = valid_json();
    nested_card["card"] = {{"number", k_card}, {"exp_month", 12}};
    check_rejections({
        {"description", with("description", k_card).dump(), card, "description", "card_number"},
        {"description with text", with("description", "pay with " + spaced + " please").dump(),
         card, "description", "card_number"},
        {"description dashes", with("description", "4242-4242-4242-4242").dump(), card,
         "description", "card_number"},
        {"metadata value", with_metadata("note", k_card).dump(), card, "metadata.note",
         "card_number"},
        {"metadata value spaced", with_metadata("note", spaced).dump(), card, "metadata.note",
         "card_number"},
        {"metadata key", with_metadata(k_card, "x").dump(), card, "metadata", "card_number"},
        {"payment_method", with("payment_method", k_card).dump(), card, "payment_method",
         "card_number"},
        {"payment_method spaced", with("payment_method", spaced).dump(), card, "payment_method",
         "card_number"},
        {"merchant_reference", with("merchant_reference", "4111111111111111").dump(), card,
         "merchant_reference", "card_number"},
        {"customer", with("customer", "5555555555554444").dump(), card, "customer", "card_number"},
        {"transport field", with("trace_id", k_card).dump(), card, "trace_id", "card_number"},
        {"unknown field value", with("note", "378282246310005").dump(), card, "note",
         "card_number"},
        {"unknown field named as a card number", with(k_card, "x").dump(), card, "", "card_number"},
        {"field named cvc", with("cvc", "123").dump(), card, "cvc", "card_field"},
        {"field named card_number", with("card_number", "x").dump(), card, "card_number",
         "card_field"},
        {"field named cvv as a number", with("cvv", 123).dump(), card, "cvv", "card_field"},
        {"field named pan", with("pan", "x").dump(), card, "pan", "card_field"},
        {"field named exp_year", with("exp_year", 2030).dump(), card, "exp_year", "card_field"},
        {"field named cardNumber", with("cardNumber", "x").dump(), card, "cardNumber",
         "card_field"},
        {"metadata key cvc", with_metadata("cvc", "123").dump(), card, "metadata.cvc",
         "card_field"},
        {"metadata key number", with_metadata("number", "7").dump(), card, "metadata.number",
         "card_field"},
        {"nested card object", nested_card.dump(), card, "card", "card_field"},
        {"card number in an array", with("tags", json::array({"a", k_card})).dump(), card,
         "tags[1]", "card_number"},
        {"card number in a top-level array", R"(["4242424242424242"])", card, "[0]", "card_number"},
        {"card number in a malformed body", R"({"description":"4242424242424242",)", card, "",
         "card_number"},
        {"card number in a body with duplicate keys",
         R"({"description":"4242 4242 4242 4242","description":"x"})", card, "", "card_number"},
    });
}

TEST_CASE("payment request: issue 36's card field names are card data, at the top and in "
          "metadata, in any case and spelling",
          "[core][request][card]") {
    // Each was accepted and stored.
    const auto card = ValidationKind::card_data;
    for (const std::string name :
         {"card_cvc", "cvv2", "cvc2", "security_code", "csc", "cardCode", "exp_date", "expiry",
          "cc_number", "CC-Number", "securityCode", "Card_CVV", "expiry_date", "cardExpiry"}) {
        check_rejections({
            {"top-level " + name, with(name, "123").dump(), card, name, "card_field"},
            {"metadata " + name, with_metadata(name, "12/30").dump(), card, "metadata." + name,
             "card_field"},
            {"a number in metadata " + name, with_metadata(name, 123).dump(), card,
             "metadata." + name, "card_field"},
        });
    }
}

TEST_CASE("payment request: no error message or field echoes the card number",
          "[core][request][card]") {
    const std::vector<std::string> bodies = {
        with("description", k_card).dump(),
        with("description", "4242 4242 4242 4242").dump(),
        with_metadata("note", k_card).dump(),
        with_metadata(k_card, "x").dump(),
        with("payment_method", k_card).dump(),
        with(k_card, 1).dump(),
        with("cvc", k_card).dump(),
        R"({"description":"4242424242424242",)",
        R"({"4242424242424242":1,"4242424242424242":2})",
        "{\"description\":\"4242424242424242\xff\"}",
        "[[[[[[[[[[\"4242424242424242\"]]]]]]]]]]",
    };
    for (const std::string& body : bodies) {
        INFO(body);
        const ValidationError error = parse_error(body);
        CHECK(error.kind == ValidationKind::card_data);
        for (const std::string& text : {error.message, error.field, error.code}) {
            CHECK(text.find("4242424242424242") == std::string::npos);
            CHECK(text.find("4242 4242") == std::string::npos);
            CHECK(text.find("424242") == std::string::npos);
        }
    }
}

TEST_CASE("payment request: card data is reported before any other error",
          "[core][request][card]") {
    json body = valid_json();
    body["amount"] = "not a number";
    body["unknown"] = 1;
    body["description"] = k_card;
    CHECK(parse_error(body.dump()).kind == ValidationKind::card_data);
    CHECK(parse_error(body.dump(), "1999-01-01").kind == ValidationKind::card_data);
}

TEST_CASE("payment request: digit strings that are not card numbers are accepted",
          "[core][request][card]") {
    CHECK(parse_ok_doc(with("merchant_reference", "42424242424242424242")).merchant_reference ==
          "42424242424242424242"); // 20 digits
    CHECK(parse_ok_doc(with("description", "order 424242424242")).description ==
          "order 424242424242"); // 12 digits
    CHECK(parse_ok_doc(with("description", "4242424242424241")).description == "4242424242424241");
    CHECK(parse_ok_doc(with_metadata("phone", "+1 555 123 4567")).metadata.at("phone") ==
          "+1 555 123 4567");
    CHECK(parse_ok_doc(with("amount", 4242424242424)).amount_minor == 4242424242424); // a number
}

// core/card_number has the detector's own tests; these check that the request applies it to every
// string it stores.

TEST_CASE("payment request: issue 12's bypasses are card data in every field that is stored",
          "[core][request][card]") {
    const std::vector<std::string> bypasses = {
        "4242.4242.4242.4242",
        "4242/4242/4242/4242",
        "\xEF\xBC\x94\xEF\xBC\x92\xEF\xBC\x94\xEF\xBC\x92\xEF\xBC\x94\xEF\xBC\x92\xEF\xBC\x94\xEF"
        "\xBC\x92"
        "\xEF\xBC\x94\xEF\xBC\x92\xEF\xBC\x94\xEF\xBC\x92\xEF\xBC\x94\xEF\xBC\x92\xEF\xBC\x94\xEF"
        "\xBC\x92", // full-width
        "card 3782.822463.10005 thanks",
        "5555 5555 5555 4444 12/30",
    };
    for (const std::string& bypass : bypasses) {
        const auto card = ValidationKind::card_data;
        check_rejections({
            {"merchant_reference", with("merchant_reference", bypass).dump(), card,
             "merchant_reference", "card_number"},
            {"description", with("description", bypass).dump(), card, "description", "card_number"},
            {"customer", with("customer", bypass).dump(), card, "customer", "card_number"},
            {"payment_method", with("payment_method", bypass).dump(), card, "payment_method",
             "card_number"},
            {"metadata value", with_metadata("note", bypass).dump(), card, "metadata.note",
             "card_number"},
            {"metadata key", with_metadata(bypass, "x").dump(), card, "metadata", "card_number"},
            {"transport field", with("correlation_id", bypass).dump(), card, "correlation_id",
             "card_number"},
        });
    }
}

TEST_CASE("payment request: a card number in full-width digits is never echoed",
          "[core][request][card]") {
    const std::string full_width_four = "\xEF\xBC\x94";
    std::string number;
    for (int i = 0; i < 8; ++i) {
        number += full_width_four + "\xEF\xBC\x92"; // "42"
    }
    const ValidationError error = parse_error(with("description", number).dump());
    CHECK(error.kind == ValidationKind::card_data);
    CHECK(error.message.find(full_width_four) == std::string::npos);
    CHECK(error.message.find("description") != std::string::npos);    // says where
    CHECK(error.message.find("payment_method") != std::string::npos); // and what to do
}

TEST_CASE("payment request: issue 12's false alarms are accepted in every field",
          "[core][request][card]") {
    // Each passed the old check (13-19 digits joined across '-', Luhn) and was refused with 422.
    for (const std::string reference :
         {"order-2026-1202-000125", "order-2026-1202-000133", "1764670797123-44",
          "1764670797123-51", "1764670797123000002", "1764670797123000010"}) {
        INFO(reference);
        CHECK(parse_ok_doc(with("merchant_reference", reference)).merchant_reference == reference);
        CHECK(parse_ok_doc(with("description", "Order " + reference)).description ==
              "Order " + reference);
        CHECK(parse_ok_doc(with("customer", reference)).customer == reference);
        CHECK(parse_ok_doc(with("payment_method", reference)).payment_method == reference);
        CHECK(parse_ok_doc(with_metadata("order", reference)).metadata.at("order") == reference);
        CHECK(parse_ok_doc(with_metadata(reference, "x")).metadata.at(reference) == "x");
    }
}

TEST_CASE("payment request: 2,000 generated realistic references are accepted as reference, "
          "description and metadata",
          "[core][request][card]") {
    ReferenceGenerator generator(7);
    for (int i = 0; i < 2'000; ++i) {
        const std::string reference = generator.next().text;
        INFO(reference);
        json body = with("merchant_reference", reference);
        body["description"] = "Thanks for order " + reference;
        body["metadata"]["ref"] = reference;
        const auto parsed = parse_payment_request(body.dump(), "");
        REQUIRE(parsed);
        CHECK(parsed->merchant_reference == reference);
    }
}
