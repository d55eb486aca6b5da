// PayPal's wire format (providers/paypal/wire.hpp) against PayPal's published documents, as kept in
// tests/providers/contracts/paypal.json: the create body's fields, exact decimal amounts in
// PayPal's exponents, the order and Transaction Search shapes, status words and every error shape.
#include "core/external_json.hpp"
#include "providers/paypal/wire.hpp"
#include "providers/wire_util.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <catch2/catch.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::providers::paypal;
using nlohmann::json;

namespace {

const json& contract() {
    return testing::provider_contract("paypal");
}

const json& at(const std::string& pointer) {
    INFO("contract pointer " << pointer);
    REQUIRE(contract().contains(json::json_pointer(pointer)));
    return contract().at(json::json_pointer(pointer));
}

std::set<std::string> names(const json& object) {
    std::set<std::string> out;
    for (const auto& [k, v] : object.items()) {
        out.insert(k);
    }
    return out;
}

std::string fixture(const std::string& name) {
    return testing::fixture("paypal", name);
}

const std::string k_op = testing::k_sample_operation_id;

std::optional<std::chrono::system_clock::time_point> wire_time(std::string_view text) {
    return wire::parse_rfc3339(text);
}

PaymentOrder order() {
    PaymentOrder o = testing::sample_order("pm_conformance_card");
    o.description = "conformance";
    return o;
}

// An order answering order(): COMPLETED, its one capture `capture_status`, amounts `value`.
json order_json(const std::string& capture_status, const std::string& value = "49.99") {
    return json::parse(fixture("order_completed.json"))
        .patch(json::array(
            {{{"op", "replace"},
              {"path", "/purchase_units/0/payments/captures/0/status"},
              {"value", capture_status}},
             {{"op", "replace"}, {"path", "/purchase_units/0/amount/value"}, {"value", value}},
             {{"op", "replace"},
              {"path", "/purchase_units/0/payments/captures/0/amount/value"},
              {"value", value}}}));
}

} // namespace

TEST_CASE("paypal wire: exponents are ISO 4217's but HUF, JPY and TWD have no decimals",
          "[providers][paypal]") {
    CHECK(paypal_exponent("EUR") == 2);
    CHECK(paypal_exponent("usd") == 2);
    CHECK(paypal_exponent("JPY") == 0);
    CHECK(paypal_exponent("HUF") == 0); // ISO 4217: 2
    CHECK(paypal_exponent("TWD") == 0); // ISO 4217: 2
    CHECK(paypal_exponent("KWD") == 3);
    CHECK_FALSE(paypal_exponent("XYZ"));
}

TEST_CASE("paypal wire: decimal strings are formatted exactly, never through floating point",
          "[providers][paypal]") {
    CHECK(format_decimal(4999, 2) == "49.99");
    CHECK(format_decimal(5, 2) == "0.05");
    CHECK(format_decimal(0, 2) == "0.00");
    CHECK(format_decimal(1000, 0) == "1000");
    CHECK(format_decimal(1234, 3) == "1.234");
    CHECK(format_decimal(1, 3) == "0.001");
    // 0.1 + 0.2 in binary floating point is 0.30000000000000004; here it is what it is.
    CHECK(format_decimal(30, 2) == "0.30");
    // "up to 15 digits preceding the decimal"
    CHECK(format_decimal(99999999999999999, 2) == "999999999999999.99");
    CHECK_FALSE(format_decimal(100000000000000000, 2));
    CHECK_FALSE(format_decimal(-1, 2));
    CHECK_FALSE(format_decimal(1, -1));
    CHECK_FALSE(format_decimal(1, 19));
    // Every value it writes is one PayPal's money.value pattern accepts.
    const std::regex pattern(
        at("/components/schemas/money/properties/value/pattern").get<std::string>());
    for (const auto& [units, exponent] :
         std::vector<std::pair<std::int64_t, int>>{{4999, 2}, {5, 2}, {0, 0}, {1000, 0}, {1, 3}}) {
        CHECK(std::regex_match(*format_decimal(units, exponent), pattern));
    }
}

TEST_CASE("paypal wire: decimal strings are read exactly or not at all", "[providers][paypal]") {
    struct Row {
        std::string text;
        int exponent;
        std::optional<std::int64_t> units;
    };
    const std::vector<Row> rows = {
        {"49.99", 2, 4999},
        {"49.9", 2, 4990},
        {"49", 2, 4900},
        {"0.05", 2, 5},
        {"000.05", 2, 5},
        {"1000", 0, 1000},
        {"1.234", 3, 1234},
        {"92233720368547758.07", 2, 9223372036854775807},
        // Refused: more fractional digits than the exponent, even zeros.
        {"49.990", 2, std::nullopt},
        {"10.0", 0, std::nullopt},
        {"1.2345", 3, std::nullopt},
        // Refused: signs, exponents, floats' spellings, stray characters.
        {"-49.99", 2, std::nullopt},
        {"+49.99", 2, std::nullopt},
        {"4.999e1", 2, std::nullopt},
        {"4999E-2", 2, std::nullopt},
        {".99", 2, std::nullopt},
        {"49.", 2, std::nullopt},
        {"49..99", 2, std::nullopt},
        {"49.9.9", 2, std::nullopt},
        {" 49.99", 2, std::nullopt},
        {"49.99 ", 2, std::nullopt},
        {"49,99", 2, std::nullopt},
        {"0x31", 2, std::nullopt},
        {"NaN", 2, std::nullopt},
        {"inf", 2, std::nullopt},
        {"", 2, std::nullopt},
        // Refused: over int64.
        {"92233720368547758.08", 2, std::nullopt},
        {"99999999999999999999999.99", 2, std::nullopt},
    };
    for (const Row& row : rows) {
        INFO("'" << row.text << "' at exponent " << row.exponent);
        CHECK(parse_decimal(row.text, row.exponent) == row.units);
    }
}

TEST_CASE("paypal wire: amounts go to PayPal in its exponent and come back to ISO minor units",
          "[providers][paypal]") {
    CHECK(to_paypal_value(Money{4999, "EUR"}) == "49.99");
    CHECK(to_paypal_value(Money{1000, "JPY"}) == "1000");
    CHECK(to_paypal_value(Money{1000, "HUF"}) == "10"); // 10.00 HUF: whole forints
    CHECK(to_paypal_value(Money{123400, "TWD"}) == "1234");
    CHECK(to_paypal_value(Money{1234, "KWD"}) == "1.234");
    CHECK_FALSE(to_paypal_value(Money{1050, "HUF"})); // 10.50 HUF: PayPal has no fillér
    CHECK_FALSE(to_paypal_value(Money{1, "TWD"}));
    CHECK_FALSE(to_paypal_value(Money{0, "EUR"}));
    CHECK_FALSE(to_paypal_value(Money{-4999, "EUR"}));
    CHECK_FALSE(to_paypal_value(Money{100, "XYZ"}));

    CHECK(from_paypal_value("49.99", "EUR") == Money{4999, "EUR"});
    CHECK(from_paypal_value("49.99", "eur") == Money{4999, "EUR"});
    CHECK(from_paypal_value("10", "HUF") == Money{1000, "HUF"});
    CHECK(from_paypal_value("1000", "JPY") == Money{1000, "JPY"});
    CHECK_FALSE(from_paypal_value("10.50", "HUF")); // not a PayPal HUF amount
    CHECK_FALSE(from_paypal_value("49.99", "XYZ"));
    CHECK_FALSE(from_paypal_value("-49.99", "EUR"));
    CHECK_FALSE(from_paypal_value("92233720368547758.07", "HUF")); // scaled to ISO: over int64

    // Round trip of every amount a PayPal currency can carry, in each currency's own exponent.
    std::mt19937_64 rng(20261204);
    for (const char* currency : {"EUR", "USD", "JPY", "HUF", "TWD", "KWD", "GBP"}) {
        const int paypal = *paypal_exponent(currency);
        const int iso = find_currency(currency)->exponent;
        for (int i = 0; i < 500; ++i) {
            std::int64_t units = static_cast<std::int64_t>(rng() % 100000000000ULL) + 1;
            std::int64_t minor = units;
            for (int k = paypal; k < iso; ++k) {
                minor *= 10;
            }
            INFO(currency << " " << minor);
            const auto value = to_paypal_value(Money{minor, currency});
            REQUIRE(value);
            CHECK(from_paypal_value(*value, currency) == Money{minor, currency});
        }
    }
}

TEST_CASE("paypal wire: the create body is what the Orders v2 contract defines, every required "
          "field sent",
          "[providers][paypal][contract]") {
    const auto body = create_body(order());
    REQUIRE(body);
    const json j = json::parse(*body);
    CHECK(j == json::parse(R"({
        "intent": "CAPTURE",
        "purchase_units": [{
            "reference_id": "3aabbe24-9c9c-40ea-819f-7766897ccdda",
            "invoice_id": "pr_0123456789abcdef0123456789abcdef",
            "custom_id": "pr_0123456789abcdef0123456789abcdef",
            "description": "conformance",
            "amount": {"currency_code": "EUR", "value": "49.99"}}],
        "payment_source": {"card": {"vault_id": "pm_conformance_card"}}})"));

    // The request schema is order_request; every field sent is one of its properties.
    CHECK(at("/paths/~1v2~1checkout~1orders/post/requestBody/content/application~1json/schema/"
             "$ref") == "#/components/schemas/order_request");
    const auto defined = names(at("/components/schemas/order_request/properties"));
    for (const auto& name : names(j)) {
        CHECK(defined.count(name) == 1);
    }
    testing::check_required_fields_sent(at("/components/schemas/order_request/required"), names(j));
    const auto intents = at("/components/schemas/checkout_payment_intent/enum");
    CHECK(std::find(intents.begin(), intents.end(), "CAPTURE") != intents.end());

    // The purchase unit, its amount and the payment source.
    const auto unit_fields = names(at("/components/schemas/purchase_unit_request/properties"));
    for (const auto& name : names(j["purchase_units"][0])) {
        INFO(name);
        CHECK(unit_fields.count(name) == 1);
    }
    CHECK(names(j["purchase_units"][0]["amount"]) ==
          names(at("/components/schemas/money/properties")));
    testing::check_required_fields_sent(at("/components/schemas/money/required"),
                                        names(j["purchase_units"][0]["amount"]));
    CHECK(names(at("/components/schemas/payment_source/properties")).count("card") == 1);
    CHECK(at("/components/schemas/card_request/allOf/1/properties/vault_id/$ref") ==
          "#/components/schemas/vault_id");
    CHECK(std::regex_match(
        j["payment_source"]["card"]["vault_id"].get<std::string>(),
        std::regex(at("/components/schemas/vault_id/pattern").get<std::string>())));
    // The lengths our operation ID and description are held to are the document's.
    CHECK(at("/components/parameters/paypal_request_id/schema/maxLength") == k_max_key_length);
    CHECK(at("/components/parameters/paypal_request_id/in") == "header");
    CHECK(at("/components/parameters/paypal_request_id/name") == "PayPal-Request-Id");
    CHECK(at("/components/schemas/purchase_unit_request/properties/invoice_id/maxLength") ==
          k_max_invoice_id);
    CHECK(at("/components/schemas/purchase_unit_request/properties/custom_id/maxLength") ==
          k_max_invoice_id);
    CHECK(at("/components/schemas/purchase_unit_request/properties/description/maxLength") ==
          k_max_description);
    CHECK(at("/components/parameters/paypal_request_id/description")
              .get<std::string>()
              .find("6 hours") != std::string::npos);
}

TEST_CASE("paypal wire: a payment PayPal cannot carry whole has no body", "[providers][paypal]") {
    const auto refused = [](const std::function<void(PaymentOrder&)>& change) {
        PaymentOrder o = order();
        change(o);
        return !create_body(o).has_value();
    };
    CHECK(refused([](PaymentOrder& o) { o.metadata["k"] = "v"; }));
    CHECK(refused([](PaymentOrder& o) { o.description = std::string(128, 'd'); }));
    CHECK_FALSE(refused([](PaymentOrder& o) { o.description = std::string(127, 'd'); }));
    CHECK(refused([](PaymentOrder& o) { o.payment_method = "tok visa"; }));
    CHECK(refused([](PaymentOrder& o) { o.payment_method = "pm/../x"; }));
    CHECK(refused([](PaymentOrder& o) { o.payment_method = ""; }));
    CHECK(refused([](PaymentOrder& o) { o.payment_method = std::string(256, 'a'); }));
    CHECK(refused([](PaymentOrder& o) { o.amount = Money{0, "EUR"}; }));
    CHECK(refused([](PaymentOrder& o) { o.amount = Money{-1, "EUR"}; }));
    CHECK(refused([](PaymentOrder& o) { o.amount = Money{1050, "HUF"}; }));
    CHECK(refused([](PaymentOrder& o) { o.amount = Money{100, "XYZ"}; }));
    CHECK(refused([](PaymentOrder& o) { o.operation_id = ""; }));
    CHECK(refused([](PaymentOrder& o) { o.operation_id = std::string(109, 'o'); }));
    // No payment ID: the operation ID is the reference_id; no description: none is sent.
    PaymentOrder o = order();
    o.payment_id.clear();
    o.description.reset();
    const json j = json::parse(*create_body(o));
    CHECK(j["purchase_units"][0]["reference_id"] == k_op);
    CHECK_FALSE(j["purchase_units"][0].contains("description"));
    CHECK(carry_limits().metadata.max_entries == 0);
    CHECK(carry_limits().provider == "PayPal");
}

TEST_CASE("paypal wire: the capture's and the transaction's status words map on purpose",
          "[providers][paypal][contract]") {
    CHECK(map_capture_status("COMPLETED") == Outcome::succeeded);
    CHECK(map_capture_status("PARTIALLY_REFUNDED") == Outcome::succeeded);
    CHECK(map_capture_status("REFUNDED") == Outcome::succeeded);
    CHECK(map_capture_status("PENDING") == Outcome::pending);
    CHECK(map_capture_status("DECLINED") == Outcome::declined);
    CHECK(map_capture_status("FAILED") == Outcome::declined);
    CHECK(map_capture_status("completed") == Outcome::unknown);
    CHECK(map_capture_status("") == Outcome::unknown);

    // Transaction Search's codes, named in its prose: <code>D</code>, P, S, V.
    const std::string prose =
        at("/components/schemas/transaction_info/properties/transaction_status/description");
    std::set<std::string> codes;
    const std::regex code("<code>([A-Z])</code>");
    for (auto it = std::sregex_iterator(prose.begin(), prose.end(), code);
         it != std::sregex_iterator(); ++it) {
        codes.insert((*it)[1]);
    }
    CHECK(codes == std::set<std::string>{"D", "P", "S", "V"});
    CHECK(map_transaction_status("S") == Outcome::succeeded);
    CHECK(map_transaction_status("V") == Outcome::succeeded);
    CHECK(map_transaction_status("P") == Outcome::pending);
    CHECK(map_transaction_status("D") == Outcome::declined);
    for (const char* other : {"", "s", "X", "SS"}) {
        CHECK(map_transaction_status(other) == Outcome::unknown);
    }
}

TEST_CASE("paypal wire: a 2xx order counts only when it echoes our amount, currency and invoice "
          "ID, its capture's status decides",
          "[providers][paypal]") {
    const auto decide = [](const json& body, int status = 201) {
        return interpret_create(order(), status, body.dump());
    };
    const auto completed = decide(json::parse(fixture("order_completed.json")));
    CHECK(completed.outcome == Outcome::succeeded);
    CHECK(completed.provider_reference == "3C679366HH908993F");
    CHECK(completed.call.http_status == 201);
    CHECK(decide(json::parse(fixture("order_completed.json")), 200).outcome ==
          Outcome::succeeded); // a replay

    // A COMPLETED order holding a DECLINED capture: the capture's status is the outcome.
    const auto declined = decide(json::parse(fixture("order_capture_declined.json")));
    CHECK(declined.outcome == Outcome::declined);
    CHECK(declined.provider_reference == "7FD03157Y4620274V");
    CHECK(declined.call.error_class == "capture_DECLINED");
    CHECK(decide(order_json("FAILED")).outcome == Outcome::declined);
    CHECK(decide(order_json("PENDING")).outcome == Outcome::pending);
    CHECK(decide(order_json("REFUNDED")).outcome == Outcome::succeeded);
    const auto odd = decide(order_json("CAPTURED_MAYBE"));
    CHECK(odd.outcome == Outcome::unknown);
    CHECK(odd.call.error_class == "unexpected_status_CAPTURED_MAYBE");

    // An order without a capture.
    const auto action = decide(json::parse(fixture("order_payer_action_required.json")));
    CHECK(action.outcome == Outcome::pending);
    CHECK(action.provider_reference == "1AB23456CD789012E");
    json voided = json::parse(fixture("order_payer_action_required.json"));
    voided["status"] = "VOIDED";
    CHECK(decide(voided).outcome == Outcome::declined);
    for (const char* status : {"CREATED", "SAVED", "APPROVED", "COMPLETED"}) {
        json o = json::parse(fixture("order_payer_action_required.json"));
        o["status"] = status;
        const auto r = decide(o);
        CHECK(r.outcome == Outcome::unknown);
        CHECK(r.call.error_class == std::string("order_") + status + "_without_capture");
    }

    // Not an echo of ours: unknown, whatever the status says.
    struct Case {
        std::string what;
        std::function<void(json&)> change;
    };
    const std::vector<Case> cases = {
        {"another amount", [](json& o) { o = order_json("COMPLETED", "49.98"); }},
        {"another amount on the capture only",
         [](json& o) {
             o["purchase_units"][0]["payments"]["captures"][0]["amount"]["value"] = "4.99";
         }},
        {"another currency",
         [](json& o) {
             o["purchase_units"][0]["amount"]["currency_code"] = "USD";
             o["purchase_units"][0]["payments"]["captures"][0]["amount"]["currency_code"] = "USD";
         }},
        {"an amount with a third decimal",
         [](json& o) {
             o["purchase_units"][0]["payments"]["captures"][0]["amount"]["value"] = "49.990";
         }},
        {"a capture without an amount",
         [](json& o) { o["purchase_units"][0]["payments"]["captures"][0].erase("amount"); }},
        {"another invoice ID",
         [](json& o) {
             o["purchase_units"][0]["invoice_id"] = "pr_other";
             o["purchase_units"][0]["payments"]["captures"][0]["invoice_id"] = "pr_other";
         }},
        {"another custom ID on the capture",
         [](json& o) { o["purchase_units"][0]["payments"]["captures"][0]["custom_id"] = "x"; }},
        {"no invoice ID anywhere",
         [](json& o) {
             o["purchase_units"][0].erase("invoice_id");
             o["purchase_units"][0]["payments"]["captures"][0].erase("invoice_id");
         }},
        {"two purchase units",
         [](json& o) { o["purchase_units"].push_back(o["purchase_units"][0]); }},
        {"two captures",
         [](json& o) {
             auto& c = o["purchase_units"][0]["payments"]["captures"];
             c.push_back(c[0]);
         }},
        {"a capture without an ID",
         [](json& o) { o["purchase_units"][0]["payments"]["captures"][0].erase("id"); }},
        {"no purchase units", [](json& o) { o.erase("purchase_units"); }},
        {"an order ID of the wrong type", [](json& o) { o["id"] = 42; }},
        {"a status of the wrong type", [](json& o) { o["status"] = json::array(); }},
        {"an amount as a number",
         [](json& o) {
             o["purchase_units"][0]["payments"]["captures"][0]["amount"]["value"] = 49.99;
         }},
        {"an error envelope",
         [](json& o) { o = json::parse(fixture("instrument_declined.json")); }},
    };
    for (const Case& c : cases) {
        INFO(c.what);
        json o = json::parse(fixture("order_completed.json"));
        c.change(o);
        const auto r = decide(o);
        CHECK(r.outcome == Outcome::unknown);
        CHECK_FALSE(r.provider_reference);
    }
    for (const std::string body : {"", "{", "[]", "null", "\"COMPLETED\""}) {
        INFO(body);
        CHECK(interpret_create(order(), 201, body).outcome == Outcome::unknown);
    }
}

TEST_CASE("paypal wire: every error shape of the README's table comes to its outcome",
          "[providers][paypal]") {
    struct Row {
        int status;
        std::string body;
        Outcome outcome;
        std::string code; // the rejection's code, or the call's error class
    };
    const auto error = [](const std::string& name, const std::string& issue) {
        json e = {{"name", name}, {"message", "m"}, {"debug_id", "0a1b2c3d4e5f6"}};
        if (!issue.empty()) {
            e["details"] = json::array({{{"issue", issue}, {"description", "d"}}});
        }
        return e.dump();
    };
    std::vector<Row> rows = {
        {422, fixture("instrument_declined.json"), Outcome::declined,
         "declined:INSTRUMENT_DECLINED"},
        {422, fixture("duplicate_invoice_id.json"), Outcome::unknown, "DUPLICATE_INVOICE_ID"},
        {400, fixture("invalid_request.json"), Outcome::rejected, "MISSING_REQUIRED_PARAMETER"},
        {401, fixture("authentication_failure.json"), Outcome::rejected, "AUTHENTICATION_FAILURE"},
        {401, R"({"error":"invalid_client","error_description":"Client Authentication failed"})",
         Outcome::rejected, "invalid_client"},
        {401, "", Outcome::rejected, "AUTHENTICATION_FAILURE"},
        {403, fixture("not_authorized.json"), Outcome::rejected, "PERMISSION_DENIED"},
        {403, error("NOT_AUTHORIZED", ""), Outcome::rejected, "NOT_AUTHORIZED"},
        {415, error("UNSUPPORTED_MEDIA_TYPE", ""), Outcome::rejected, "UNSUPPORTED_MEDIA_TYPE"},
        {422, error("UNPROCESSABLE_ENTITY", "DECIMAL_PRECISION"), Outcome::rejected,
         "DECIMAL_PRECISION"},
        {422, error("UNPROCESSABLE_ENTITY", "PAYEE_ACCOUNT_RESTRICTED"), Outcome::rejected,
         "PAYEE_ACCOUNT_RESTRICTED"},
        {422, error("UNPROCESSABLE_ENTITY", ""), Outcome::rejected, "UNPROCESSABLE_ENTITY"},
        {400, error("INVALID_REQUEST", "PAYPAL_REQUEST_ID_REQUIRED"), Outcome::rejected,
         "PAYPAL_REQUEST_ID_REQUIRED"},
        {429, fixture("rate_limit_reached.json"), Outcome::not_sent, "rate_limited"},
        {429, "", Outcome::not_sent, "rate_limited"},
        {500, fixture("internal_server_error.json"), Outcome::unknown, "http_500"},
        {503, "", Outcome::unknown, "http_503"},
        {404, error("RESOURCE_NOT_FOUND", ""), Outcome::unknown, "http_404"},
        {409, error("RESOURCE_CONFLICT", ""), Outcome::unknown, "http_409"},
        {400, "<html>bad gateway</html>", Outcome::unknown, "unrecognised_response"},
        {422, "", Outcome::unknown, "unrecognised_response"},
        {422, R"({"details":[{"issue":"INSTRUMENT_DECLINED"}]})", Outcome::unknown,
         "unrecognised_response"},
        // A declined issue beside DUPLICATE_INVOICE_ID: a transaction with our invoice ID exists.
        {422,
         R"({"name":"UNPROCESSABLE_ENTITY","details":[{"issue":"INSTRUMENT_DECLINED"},{"issue":"DUPLICATE_INVOICE_ID"}]})",
         Outcome::unknown, "DUPLICATE_INVOICE_ID"},
    };
    for (const char* issue :
         {"TRANSACTION_REFUSED", "PAYMENT_SOURCE_DECLINED_BY_PROCESSOR", "CARD_EXPIRED",
          "PAYER_CANNOT_PAY", "COMPLIANCE_VIOLATION", "INVALID_CURRENCY_CODE", "MAX_VALUE_EXCEEDED",
          "TRANSACTION_BLOCKED_BY_PAYEE"}) {
        rows.push_back({422, error("UNPROCESSABLE_ENTITY", issue), Outcome::declined,
                        std::string("declined:") + issue});
    }
    for (const Row& row : rows) {
        INFO(row.status << " " << row.body);
        const SubmitResult r = interpret_create(order(), row.status, row.body);
        CHECK(r.outcome == row.outcome);
        CHECK(r.call.http_status == row.status);
        CHECK_FALSE(r.provider_reference);
        if (row.outcome == Outcome::rejected) {
            REQUIRE(r.rejection);
            CHECK(r.rejection->code == row.code);
            CHECK(r.call.error_class == "request_rejected:" + row.code);
        } else {
            CHECK_FALSE(r.rejection);
            CHECK(r.call.error_class == row.code);
        }
    }
    // The rejection carries PayPal's description and debug_id for the operator.
    const auto r = interpret_create(order(), 400, fixture("invalid_request.json"));
    REQUIRE(r.rejection);
    CHECK(r.rejection->message ==
          "A required field / parameter is missing. (debug_id 90957fca61718)");
}

TEST_CASE("paypal wire: the issues read as declined are issues the Orders v2 document lists",
          "[providers][paypal][contract]") {
    std::set<std::string> listed;
    for (const auto& item : at("/components/schemas/422/properties/details/items/anyOf")) {
        listed.insert(item.at("title").get<std::string>());
    }
    for (const char* issue :
         {"INSTRUMENT_DECLINED", "TRANSACTION_REFUSED", "PAYMENT_SOURCE_DECLINED_BY_PROCESSOR",
          "PAYMENT_SOURCE_CANNOT_BE_USED", "CARD_EXPIRED", "PAYER_CANNOT_PAY",
          "PAYER_ACCOUNT_RESTRICTED", "PAYER_ACCOUNT_LOCKED_OR_CLOSED", "COMPLIANCE_VIOLATION",
          "TRANSACTION_LIMIT_EXCEEDED", "PAYEE_BLOCKED_TRANSACTION", "TRANSACTION_BLOCKED_BY_PAYEE",
          "MAX_NUMBER_OF_PAYMENT_ATTEMPTS_EXCEEDED", "INVALID_CURRENCY_CODE",
          "MAX_VALUE_EXCEEDED"}) {
        INFO(issue);
        CHECK(declined_issue(issue));
        CHECK(listed.count(issue) == 1);
    }
    CHECK(listed.count("DUPLICATE_INVOICE_ID") == 1);
    CHECK_FALSE(declined_issue("DUPLICATE_INVOICE_ID"));
    CHECK_FALSE(declined_issue("DECIMAL_PRECISION"));
    CHECK_FALSE(declined_issue("instrument_declined"));
    // Which ones the document lists, and how many: a newer document is reviewed by hand.
    std::size_t declined = 0;
    for (const auto& issue : listed) {
        declined += declined_issue(issue) ? 1U : 0U;
    }
    CHECK(declined == 15);
    // The names of the envelopes we read.
    CHECK(at("/components/schemas/error_400/properties/name/enum") == json{"INVALID_REQUEST"});
    CHECK(at("/components/schemas/error_401/properties/name/enum") ==
          json{"AUTHENTICATION_FAILURE"});
    CHECK(at("/components/schemas/error_422/properties/name/enum") == json{"UNPROCESSABLE_ENTITY"});
}

TEST_CASE("paypal wire: the recorded answers hold only fields the documents define",
          "[providers][paypal][contract]") {
    const auto subset = [](const json& object, const std::set<std::string>& defined,
                           const std::string& what) {
        for (const auto& [k, v] : object.items()) {
            INFO(what << ": " << k);
            CHECK(defined.count(k) == 1);
        }
    };
    auto order_fields = names(at("/components/schemas/order/allOf/1/properties"));
    order_fields.insert({"create_time", "update_time"}); // activity_timestamps
    auto capture_fields = names(at("/components/schemas/capture/allOf/1/properties"));
    capture_fields.insert({"status", "status_details", "create_time", "update_time"});
    const auto error_details = names(at("/components/schemas/error_details/properties"));
    for (const char* name : {"order_completed.json", "order_capture_declined.json",
                             "order_capture_pending.json", "order_payer_action_required.json"}) {
        const json o = json::parse(fixture(name));
        subset(o, order_fields, name);
        for (const auto& unit : o["purchase_units"]) {
            subset(unit, names(at("/components/schemas/purchase_unit/properties")), name);
            if (unit.contains("payments")) {
                subset(unit["payments"],
                       names(at("/components/schemas/payment_collection/properties")), name);
                for (const auto& c : unit["payments"]["captures"]) {
                    subset(c, capture_fields, name);
                }
            }
        }
    }
    for (const char* name : {"instrument_declined.json", "duplicate_invoice_id.json",
                             "invalid_request.json", "not_authorized.json"}) {
        const json error = json::parse(fixture(name)); // the loop below reads into it
        for (const auto& d : error["details"]) {
            subset(d, error_details, name);
        }
    }
    for (const char* name : {"search_found.json", "search_not_found.json", "search_page1.json",
                             "search_last_page.json"}) {
        const json page = json::parse(fixture(name));
        subset(page, names(at("/components/schemas/search_response/properties")), name);
        for (const auto& d : page["transaction_details"]) {
            subset(d, names(at("/components/schemas/transaction_detail/properties")), name);
            subset(d["transaction_info"],
                   names(at("/components/schemas/transaction_info/properties")), name);
        }
    }
}

TEST_CASE("paypal wire: a search page holds the charges, refunds and fees left out",
          "[providers][paypal]") {
    const auto page = parse_search_page(fixture("search_found.json"));
    REQUIRE(page);
    CHECK(page->total_pages == 1);
    REQUIRE(page->items.size() == 2); // the refund of our capture (-49.99) is not a charge
    const RemotePayment& ours = page->items[1];
    CHECK(ours.provider_reference == "3C679366HH908993F");
    CHECK(ours.operation_id == k_op);
    CHECK(ours.amount == Money{4999, "EUR"});
    CHECK(ours.state == Outcome::succeeded);
    CHECK(ours.raw_status == "S");
    CHECK(ours.amount_refunded_minor == 0);
    CHECK(ours.created_at == *wire_time("2026-12-02T10:00:03Z"));
    CHECK(json::parse(ours.raw)["transaction_id"] == "3C679366HH908993F");

    const auto listing = parse_search_page(fixture("search_page1.json"));
    REQUIRE(listing);
    CHECK(listing->total_pages == 2);
    REQUIRE(listing->items.size() == 4);
    CHECK(listing->items[2].state == Outcome::declined);
    CHECK(listing->items[3].state == Outcome::pending);
    // No invoice ID: the custom field is ours.
    CHECK(listing->items[3].operation_id == "pr_0123456789abcdef0000000000000003");

    const auto last = parse_search_page(fixture("search_last_page.json"));
    REQUIRE(last);
    REQUIRE(last->items.size() == 2);
    CHECK(last->items[0].state == Outcome::succeeded); // V: reversed after success
    CHECK(last->items[0].amount_refunded_minor == 2000);
    CHECK(last->items[1].amount == Money{1000, "JPY"});

    // An offset without its colon is read; a time that is not one leaves created_at unset.
    json j = json::parse(fixture("search_found.json"));
    j["transaction_details"][1]["transaction_info"]["transaction_initiation_date"] =
        "2026-12-02T11:00:03+0100";
    CHECK(parse_search_page(j.dump())->items[1].created_at == *wire_time("2026-12-02T10:00:03Z"));
    j["transaction_details"][1]["transaction_info"]["transaction_initiation_date"] = "yesterday";
    CHECK(parse_search_page(j.dump())->items[1].created_at ==
          std::chrono::system_clock::time_point{});

    CHECK(parse_search_page(R"({"transaction_details":[],"total_pages":0})")->items.empty());
    CHECK(parse_search_page(R"({"total_pages":0})")->items.empty());
}

TEST_CASE("paypal wire: one unreadable entry makes a search page unreadable",
          "[providers][paypal]") {
    const json good = json::parse(fixture("search_found.json"));
    const std::vector<std::pair<std::string, std::function<void(json&)>>> cases = {
        {"no total_pages", [](json& j) { j.erase("total_pages"); }},
        {"total_pages a string", [](json& j) { j["total_pages"] = "1"; }},
        {"total_pages negative", [](json& j) { j["total_pages"] = -1; }},
        {"details an object", [](json& j) { j["transaction_details"] = json::object(); }},
        {"an entry without transaction_info",
         [](json& j) {
             j["transaction_details"].push_back({{"payer_info", json::object()}});
         }},
        {"an entry without transaction_id",
         [](json& j) { j["transaction_details"][1]["transaction_info"].erase("transaction_id"); }},
        {"an amount as a number",
         [](json& j) {
             j["transaction_details"][1]["transaction_info"]["transaction_amount"]["value"] = 49.99;
         }},
        {"an amount with a third decimal",
         [](json& j) {
             j["transaction_details"][1]["transaction_info"]["transaction_amount"]["value"] =
                 "49.999";
         }},
        {"an unknown currency",
         [](json& j) {
             j["transaction_details"][1]["transaction_info"]["transaction_amount"]
              ["currency_code"] = "XYZ";
         }},
        {"not an object", [](json& j) { j = json::array(); }},
    };
    for (const auto& [what, change] : cases) {
        INFO(what);
        json j = good;
        change(j);
        CHECK_FALSE(parse_search_page(j.dump()));
    }
    CHECK_FALSE(parse_search_page(""));
    CHECK_FALSE(parse_search_page("{\"total_pages\":"));
}

TEST_CASE("paypal wire: a 1 MiB maximally nested body is refused, never recursed into",
          "[providers][paypal]") {
    const std::string deep = std::string(512 * 1024, '[') + std::string(512 * 1024, ']');
    const std::string deep_objects = [] {
        std::string s;
        for (int i = 0; i < 100000; ++i) {
            s += R"({"a":)";
        }
        s += "1";
        s += std::string(100000, '}');
        return s;
    }();
    for (const std::string* body : {&deep, &deep_objects}) {
        CHECK_FALSE(parse_order(*body));
        CHECK_FALSE(parse_error(*body));
        CHECK_FALSE(parse_search_page(*body));
        for (const int status : {200, 201, 400, 401, 422, 429, 500}) {
            CHECK(interpret_create(order(), status, *body).outcome ==
                  (status == 429   ? Outcome::not_sent
                   : status == 401 ? Outcome::rejected
                                   : Outcome::unknown));
        }
    }
}
