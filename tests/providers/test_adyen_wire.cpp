// Adyen's wire format: the request we send and the responses we read, checked against what Adyen's
// published OpenAPI document for Checkout v71 says of them (tests/providers/contracts/adyen.json)
// and recorded fixtures.
#include "providers/adyen/wire.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::providers::adyen;

namespace {

std::string read(const std::string& path) {
    return testing::read_file(path);
}

std::string fixture_dir() {
    return std::string(PAYRECON_SOURCE_DIR) + "/tests/providers/fixtures/adyen/";
}

std::string fixture(const std::string& name) {
    return read(fixture_dir() + name);
}

const nlohmann::json& spec() {
    return testing::provider_contract("adyen");
}

const nlohmann::json& schema(const std::string& name) {
    return spec().at("components").at("schemas").at(name);
}

constexpr const char* k_return_url = "https://shop.example.com/checkout/return";

PaymentOrder order() {
    PaymentOrder o = testing::sample_order("8415718415172204");
    o.customer = "cus_8Hx2";
    o.description = "2 concert tickets";
    o.metadata = {{"cart", "c-77"}};
    return o;
}

} // namespace

TEST_CASE("adyen wire: amounts convert through Adyen's own exponents", "[providers][adyen]") {
    CHECK(to_adyen_amount(Money{4999, "EUR"}) == 4999);
    CHECK(to_adyen_amount(Money{500, "JPY"}) == 500);
    CHECK(to_adyen_amount(Money{1500, "KWD"}) == 1500);
    CHECK(to_adyen_amount(Money{1000, "CLP"}) == 100000); // CLP: 0 in ISO, 2 at Adyen
    CHECK(to_adyen_amount(Money{100, "ISK"}) == 10000);   // ISK: 0 in ISO, 2 at Adyen
    CHECK(to_adyen_amount(Money{1200, "CVE"}) == 12);     // CVE: 2 in ISO, 0 at Adyen
    CHECK(to_adyen_amount(Money{150000, "IDR"}) == 1500); // IDR: 2 in ISO, 0 at Adyen
    CHECK_FALSE(to_adyen_amount(Money{1250, "CVE"}).has_value());
    CHECK_FALSE(to_adyen_amount(Money{1, "XXX"}).has_value());
    CHECK_FALSE(
        to_adyen_amount(Money{std::numeric_limits<std::int64_t>::max(), "CLP"}).has_value());
    CHECK(from_adyen_amount(100000, "CLP") == Money{1000, "CLP"});
    CHECK(from_adyen_amount(100000, "clp") == Money{1000, "CLP"});
    CHECK_FALSE(from_adyen_amount(100050, "CLP").has_value());
    CHECK(from_adyen_amount(12, "CVE") == Money{1200, "CVE"});
    CHECK(from_adyen_amount(4999, "EUR") == Money{4999, "EUR"});
    CHECK(adyen_exponent("CLP") == 2);
    CHECK(adyen_exponent("EUR") == 2);
    CHECK_FALSE(adyen_exponent("ZZZ").has_value());
}

TEST_CASE("adyen wire: the body is a stored-card ContAuth charge with our IDs",
          "[providers][adyen]") {
    const auto body = payment_body(order(), "AcmeShopECOM", k_return_url);
    REQUIRE(body);
    const auto j = nlohmann::json::parse(*body);
    CHECK(j["amount"] == nlohmann::json({{"currency", "EUR"}, {"value", 4999}}));
    CHECK(j["reference"] == "pr_0123456789abcdef0123456789abcdef");
    CHECK(j["merchantAccount"] == "AcmeShopECOM");
    CHECK(j["paymentMethod"] ==
          nlohmann::json({{"type", "scheme"}, {"storedPaymentMethodId", "8415718415172204"}}));
    CHECK(j["shopperReference"] == "cus_8Hx2");
    CHECK(j["shopperInteraction"] == "ContAuth");
    CHECK(j["recurringProcessingModel"] == "UnscheduledCardOnFile");
    CHECK(j["returnUrl"] == k_return_url);
    CHECK(j["metadata"] == nlohmann::json({{"cart", "c-77"},
                                           {"operation_id", "pr_0123456789abcdef0123456789abcdef"},
                                           {"merchant_reference", "order-1001"}}));
    CHECK(j.size() == 9);

    PaymentOrder anonymous = order();
    anonymous.customer.reset();
    CHECK_FALSE(nlohmann::json::parse(*payment_body(anonymous, "AcmeShopECOM", k_return_url))
                    .contains("shopperReference"));

    PaymentOrder clp = order();
    clp.amount = Money{1000, "CLP"};
    CHECK(nlohmann::json::parse(
              *payment_body(clp, "AcmeShopECOM", k_return_url))["amount"]["value"] == 100000);
    PaymentOrder cve = order();
    cve.amount = Money{1250, "CVE"};
    CHECK_FALSE(payment_body(cve, "AcmeShopECOM", k_return_url).has_value());
}

TEST_CASE("adyen wire: metadata beyond Adyen's limits is refused, never left out",
          "[providers][adyen]") {
    PaymentOrder o = order();
    for (int i = 0; i < 30; ++i) {
        o.metadata["k" + std::to_string(i)] = "v";
    }
    CHECK_FALSE(payment_body(o, "AcmeShopECOM", k_return_url).has_value()); // 30 + ours > 20
    o.metadata.clear();
    for (int i = 0; i < 18; ++i) {
        o.metadata["k" + std::to_string(i)] = "v";
    }
    const auto j = nlohmann::json::parse(*payment_body(o, "AcmeShopECOM", k_return_url));
    CHECK(j["metadata"].size() == k_max_metadata_entries);
    CHECK(j["metadata"]["operation_id"] == o.operation_id);
    CHECK(j["metadata"]["merchant_reference"] == "order-1001");
    for (const auto& bad :
         std::vector<std::map<std::string, std::string>>{{{"operation_id", "spoofed"}},
                                                         {{"a_key_longer_than_twenty", "v"}},
                                                         {{"long_value", std::string(81, 'x')}}}) {
        o.metadata = bad;
        CHECK_FALSE(payment_body(o, "AcmeShopECOM", k_return_url).has_value());
    }
}

TEST_CASE("adyen wire: every field we send is one Adyen's spec defines for POST /payments",
          "[providers][adyen][contract]") {
    const auto& post = spec().at("paths").at("/payments").at("post");
    CHECK(post.at("requestBody").at("content").at("application/json").at("schema").at("$ref") ==
          "#/components/schemas/PaymentRequest");
    const auto& props = schema("PaymentRequest").at("properties");
    const auto j = nlohmann::json::parse(*payment_body(order(), "AcmeShopECOM", k_return_url));
    for (const auto& [key, value] : j.items()) {
        INFO(key);
        CHECK(props.contains(key));
    }
    // Every field the spec requires is sent, returnUrl included: Adyen refuses a request without
    // it (422 14_030 "Return URL is missing.") even for a ContAuth charge that never redirects.
    std::set<std::string> sent;
    for (const auto& [key, value] : j.items()) {
        sent.insert(key);
    }
    testing::check_required_fields_sent(schema("PaymentRequest").at("required"), sent);
    const auto& required = schema("PaymentRequest").at("required");
    CHECK(std::find(required.begin(), required.end(), "returnUrl") != required.end());
    for (const auto& [key, value] : j["amount"].items()) {
        CHECK(schema("Amount").at("properties").contains(key));
    }
    const auto& interaction = props.at("shopperInteraction").at("enum");
    CHECK(std::find(interaction.begin(), interaction.end(), j["shopperInteraction"]) !=
          interaction.end());
    const auto& model = props.at("recurringProcessingModel").at("enum");
    CHECK(std::find(model.begin(), model.end(), j["recurringProcessingModel"]) != model.end());
    const auto& card = schema("CardDetails").at("properties");
    for (const auto& [key, value] : j["paymentMethod"].items()) {
        INFO(key);
        CHECK(card.contains(key));
    }
    const auto& types = card.at("type").at("enum");
    CHECK(std::find(types.begin(), types.end(), "scheme") != types.end());
    // The key header and the credentials header are the spec's.
    CHECK(spec().at("components").at("parameters").at("Idempotency-Key").at("in") == "header");
    CHECK(spec().at("components").at("securitySchemes").at("ApiKeyAuth").at("name") == "X-API-Key");
}

TEST_CASE("adyen wire: the fixtures are PaymentResponses and ServiceErrors as the spec describes",
          "[providers][adyen][contract]") {
    const auto& response = schema("PaymentResponse").at("properties");
    const auto& codes = response.at("resultCode").at("enum");
    for (const std::string name : {"authorised.json", "refused.json", "received.json"}) {
        const auto j = nlohmann::json::parse(fixture(name));
        for (const auto& [key, value] : j.items()) {
            INFO(name << ": " << key);
            CHECK(response.contains(key));
        }
        CHECK(std::find(codes.begin(), codes.end(), j["resultCode"]) != codes.end());
    }
    const auto& error = schema("ServiceError").at("properties");
    for (const std::string name :
         {"idempotency_in_flight.json", "validation_error.json", "unauthorised.json"}) {
        const auto j = nlohmann::json::parse(fixture(name));
        for (const auto& [key, value] : j.items()) {
            INFO(name << ": " << key);
            CHECK(error.contains(key));
        }
    }
}

TEST_CASE("adyen wire: every resultCode in the spec has a mapping decided on purpose",
          "[providers][adyen][contract]") {
    const std::map<std::string, Outcome> decided = {
        {"Authorised", Outcome::succeeded},
        {"Refused", Outcome::declined},
        {"Cancelled", Outcome::declined},
        {"Error", Outcome::declined}, // a final, non-authorised state with a refusalReason
        {"Pending", Outcome::pending},
        {"Received", Outcome::pending},
        {"PresentToShopper", Outcome::pending},
        {"RedirectShopper", Outcome::pending},
        {"IdentifyShopper", Outcome::pending},
        {"ChallengeShopper", Outcome::pending},
        {"PartiallyAuthorised", Outcome::unknown},       // money moved, but not our amount
        {"AuthenticationFinished", Outcome::unknown},    // authentication-only flows
        {"AuthenticationNotRequired", Outcome::unknown}, // we never ask for
        {"Success", Outcome::unknown},                   // undocumented for /payments
    };
    const auto& codes = schema("PaymentResponse").at("properties").at("resultCode").at("enum");
    for (const auto& c : codes) {
        INFO(c);
        const auto it = decided.find(c.get<std::string>());
        REQUIRE(it != decided.end()); // a new word in the spec needs a decision here
        CHECK(map_result_code(it->first) == it->second);
    }
    CHECK(codes.size() == decided.size());
    CHECK(map_result_code("authorised") == Outcome::unknown);
    CHECK(map_result_code("") == Outcome::unknown);
}

TEST_CASE("adyen wire: payment responses map to outcomes, unknown unless recognised",
          "[providers][adyen]") {
    const PaymentOrder o = order();
    SECTION("200 Authorised echoing our reference and amount") {
        const auto r = interpret_payment(o, 200, fixture("authorised.json"));
        CHECK(r.outcome == Outcome::succeeded);
        CHECK(r.provider_reference == "993617895204576J");
        CHECK(r.call.error_class.empty());
    }
    SECTION("200 Authorised for another amount") {
        PaymentOrder other = o;
        other.amount = Money{5000, "EUR"};
        CHECK(interpret_payment(other, 200, fixture("authorised.json")).outcome ==
              Outcome::unknown);
        other.amount = Money{4999, "USD"};
        CHECK(interpret_payment(other, 200, fixture("authorised.json")).outcome ==
              Outcome::unknown);
    }
    SECTION("200 Authorised for another reference") {
        PaymentOrder other = o;
        other.operation_id = "pr_ffffffffffffffffffffffffffffffff";
        CHECK(interpret_payment(other, 200, fixture("authorised.json")).outcome ==
              Outcome::unknown);
    }
    SECTION("200 Authorised without pspReference is no proof") {
        CHECK(interpret_payment(o, 200, R"({"resultCode":"Authorised"})").outcome ==
              Outcome::unknown);
    }
    SECTION("200 without amount or merchantReference is read by resultCode") {
        CHECK(interpret_payment(o, 200, R"({"pspReference":"X1","resultCode":"Authorised"})")
                  .outcome == Outcome::succeeded);
    }
    SECTION("200 with a CLP amount in Adyen's units") {
        PaymentOrder clp = o;
        clp.amount = Money{1000, "CLP"};
        const std::string body =
            R"({"amount":{"currency":"CLP","value":100000},"merchantReference":"pr_0123456789abcdef0123456789abcdef","pspReference":"X2","resultCode":"Authorised"})";
        CHECK(interpret_payment(clp, 200, body).outcome == Outcome::succeeded);
        clp.amount = Money{100000, "CLP"}; // read as ISO units it would be a hundredfold charge
        CHECK(interpret_payment(clp, 200, body).outcome == Outcome::unknown);
    }
    SECTION("200 Refused") {
        const auto r = interpret_payment(o, 200, fixture("refused.json"));
        CHECK(r.outcome == Outcome::declined);
        CHECK(r.provider_reference == "883617895204576K");
        CHECK(r.call.error_class == "refused:Refused:Not enough balance");
    }
    SECTION("200 Received is pending") {
        CHECK(interpret_payment(o, 200, fixture("received.json")).outcome == Outcome::pending);
    }
    SECTION("200 PartiallyAuthorised is unknown") {
        const auto r = interpret_payment(
            o, 200, R"({"pspReference":"X3","resultCode":"PartiallyAuthorised"})");
        CHECK(r.outcome == Outcome::unknown);
        CHECK(r.call.error_class == "unexpected_result_code_PartiallyAuthorised");
    }
    SECTION("422 or 409 with errorCode 704: the first request with our key is still running") {
        const auto r = interpret_payment(o, 422, fixture("idempotency_in_flight.json"));
        CHECK(r.outcome == Outcome::unknown);
        CHECK(r.call.error_class == "idempotency_in_flight");
        CHECK(interpret_payment(o, 409,
                                R"({"status":409,"errorCode":"704","errorType":"validation"})")
                  .outcome == Outcome::unknown);
    }
    SECTION("a 4xx validation error is a rejected request, never a decline") {
        const auto r = interpret_payment(o, 422, fixture("validation_error.json"));
        CHECK(r.outcome == Outcome::rejected);
        CHECK(r.call.error_class == "request_rejected:14_030");
        REQUIRE(r.rejection);
        CHECK(r.rejection->code == "14_030");
        CHECK(r.rejection->message == "Return URL is missing.");
        CHECK(interpret_payment(o, 400,
                                R"({"status":400,"errorCode":"702","errorType":"validation"})")
                  .outcome == Outcome::rejected);
    }
    SECTION("a configuration error is rejected; a 409 or an unknown errorType is unknown") {
        const auto r = interpret_payment(
            o, 422,
            R"({"status":422,"errorCode":"905_1","errorType":"configuration","message":"Could not find an acquirer account for the provided currency (EUR)."})");
        CHECK(r.outcome == Outcome::rejected);
        CHECK(r.call.error_class == "request_rejected:905_1");
        CHECK(interpret_payment(o, 409,
                                R"({"status":409,"errorCode":"999","errorType":"validation"})")
                  .outcome == Outcome::unknown);
        CHECK(
            interpret_payment(o, 422, R"({"status":422,"errorCode":"999","errorType":"internal"})")
                .outcome == Outcome::unknown);
    }
    SECTION("401 and 403 (credentials, merchant account) are rejected; 429 executed nothing") {
        const auto unauthorised = interpret_payment(o, 401, fixture("unauthorised.json"));
        CHECK(unauthorised.outcome == Outcome::rejected);
        CHECK(unauthorised.call.error_class.rfind("request_rejected:", 0) == 0);
        const auto forbidden = interpret_payment(
            o, 403,
            R"({"status":403,"errorCode":"901","errorType":"security","message":"Invalid Merchant Account"})");
        CHECK(forbidden.outcome == Outcome::rejected);
        CHECK(forbidden.call.error_class == "request_rejected:901");
        CHECK(interpret_payment(o, 403, "").call.error_class == "request_rejected:permission");
        CHECK(interpret_payment(o, 429, "").outcome == Outcome::not_sent);
    }
    SECTION("the provider's message is kept printable and short") {
        const auto r = interpret_payment(
            o, 422,
            R"({"status":422,"errorCode":"702","errorType":"validation","message":"bad\u001b[31m\nfield )" +
                std::string(400, 'x') + R"("})");
        REQUIRE(r.rejection);
        CHECK(r.rejection->message.find('\x1b') == std::string::npos);
        CHECK(r.rejection->message.find('\n') == std::string::npos);
        CHECK(r.rejection->message.size() <= 303);
    }
    SECTION("5xx, garbage, empty, truncated") {
        CHECK(
            interpret_payment(o, 500, R"({"status":500,"errorCode":"901","errorType":"internal"})")
                .outcome == Outcome::unknown);
        CHECK(interpret_payment(o, 502, "<html>bad gateway</html>").outcome == Outcome::unknown);
        CHECK(interpret_payment(o, 200, "").outcome == Outcome::unknown);
        CHECK(interpret_payment(o, 422, "").outcome == Outcome::unknown);
        const std::string full = fixture("authorised.json");
        CHECK(interpret_payment(o, 200, full.substr(0, full.size() / 2)).outcome ==
              Outcome::unknown);
        CHECK(interpret_payment(
                  o, 200,
                  R"({"pspReference":"X4","resultCode":"Authorised","amount":{"value":"4999"}})")
                  .outcome == Outcome::unknown);
        CHECK(interpret_payment(o, 200, R"(["Authorised"])").outcome == Outcome::unknown);
    }
}

TEST_CASE("adyen wire: the fixtures hold no secrets", "[providers][adyen]") {
    static const std::regex k_secret(
        R"((AQE[A-Za-z0-9+/=_-]{20,}|sk_(live|test)_|X-API-Key|api_key))");
    for (const auto& entry : std::filesystem::directory_iterator(fixture_dir())) {
        INFO(entry.path());
        CHECK_FALSE(std::regex_search(read(entry.path().string()), k_secret));
    }
}
