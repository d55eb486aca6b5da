// Adyen refunds (DESIGN section 16): the refund request and its 201 against Adyen's published
// document, the outcome table (received is pending: the REFUND notification tells the outcome),
// and the adapter's refund call through an injected send function; there is no refund lookup.
#include "providers/adyen/adapter.hpp"
#include "providers/adyen/wire.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::providers::adyen;
using namespace payrecon::testing;
using net::HttpRequest;
using net::SendClass;

namespace {

const nlohmann::json& spec() {
    return provider_contract("adyen");
}

const std::string k_payment = "993617894903480A";
const std::string k_refund_psp = "993617894906488A";
const std::string k_op = k_sample_refund_operation_id;
const char* const k_key = "AQE_test_not_a_real_key_0000";

RefundOrder refund_order() {
    return sample_refund_order(k_payment); // 7.00 EUR, requested_by_customer
}

// Adyen's 201, shaped as the document's own example.
std::string received_json(const std::string& reference = k_op, long long value = 700,
                          const std::string& status = "received") {
    return nlohmann::json{{"merchantAccount", "AcmeShopECOM"},
                          {"paymentPspReference", k_payment},
                          {"reference", reference},
                          {"pspReference", k_refund_psp},
                          {"status", status},
                          {"amount", {{"currency", "EUR"}, {"value", value}}}}
        .dump();
}

std::string service_error(int status, const std::string& code, const std::string& type,
                          const std::string& message) {
    return nlohmann::json{{"status", status},
                          {"errorCode", code},
                          {"message", message},
                          {"errorType", type},
                          {"pspReference", "8816118280275544"}}
        .dump();
}

ProviderConfig config() {
    ProviderConfig c = sample_config("adyen", "https://checkout-test.adyen.test",
                                     ApiKey{"ADYEN_API_KEY", Secret(k_key)});
    c.settings = adyen::settings("AcmeShopECOM", "https://shop.example.com/checkout/return");
    c.key_retention = std::chrono::hours(168);
    return c;
}

} // namespace

TEST_CASE("adyen refunds: the request carries only PaymentRefundRequest's fields, our operation ID "
          "as its reference, and the 201 only PaymentRefundResponse's",
          "[providers][adyen][refunds][contract]") {
    const auto body = refund_body(refund_order(), "AcmeShopECOM");
    REQUIRE(body);
    const auto sent = nlohmann::json::parse(*body);
    const auto& post = spec().at("paths").at("/payments/{paymentPspReference}/refunds").at("post");
    CHECK(post.at("requestBody").at("content").at("application/json").at("schema").at("$ref") ==
          "#/components/schemas/PaymentRefundRequest");
    const auto& request = spec().at("components").at("schemas").at("PaymentRefundRequest");
    std::set<std::string> fields;
    for (const auto& [key, value] : sent.items()) {
        INFO(key);
        CHECK(request.at("properties").contains(key));
        fields.insert(key);
    }
    CHECK(fields ==
          std::set<std::string>{"amount", "merchantAccount", "merchantRefundReason", "reference"});
    for (const auto& required : request.at("required")) {
        CHECK(fields.count(required.get<std::string>()) == 1);
    }
    CHECK(sent["amount"] == nlohmann::json{{"currency", "EUR"}, {"value", 700}});
    CHECK(sent["reference"] == k_op);
    CHECK(sent["merchantAccount"] == "AcmeShopECOM");
    CHECK(sent["merchantRefundReason"] == "CUSTOMER REQUEST");
    // Each of our reasons is one of Adyen's words; no reason sends none.
    const auto& reasons = request.at("properties").at("merchantRefundReason").at("enum");
    for (const char* reason : {"duplicate", "fraudulent", "requested_by_customer"}) {
        RefundOrder o = refund_order();
        o.reason = reason;
        const auto word =
            nlohmann::json::parse(*refund_body(o, "AcmeShopECOM")).at("merchantRefundReason");
        INFO(reason);
        CHECK(std::find(reasons.begin(), reasons.end(), word) != reasons.end());
    }
    RefundOrder no_reason = refund_order();
    no_reason.reason.reset();
    CHECK_FALSE(
        nlohmann::json::parse(*refund_body(no_reason, "A")).contains("merchantRefundReason"));
    // The answers the document lists for this call.
    std::set<std::string> answers;
    for (const auto& [code, value] : post.at("responses").items()) {
        answers.insert(code);
    }
    CHECK(answers == std::set<std::string>{"201", "400", "401", "403", "422", "500"});
    const auto& response = spec().at("components").at("schemas").at("PaymentRefundResponse");
    const nlohmann::json received = nlohmann::json::parse(received_json());
    for (const auto& [key, value] : received.items()) {
        INFO(key);
        CHECK(response.at("properties").contains(key));
    }
    CHECK(response.at("properties").at("status").at("enum") == nlohmann::json::array({"received"}));
    // An amount Adyen's units cannot express is never sent.
    RefundOrder idr = refund_order();
    idr.amount = Money{1234, "IDR"}; // Adyen's IDR has no minor unit
    CHECK_FALSE(refund_body(idr, "AcmeShopECOM"));
}

TEST_CASE("adyen refunds: the outcome table", "[providers][adyen][refunds]") {
    const RefundOrder o = refund_order();
    const auto received = interpret_refund(o, 201, received_json());
    CHECK(received.outcome == Outcome::pending); // the REFUND notification tells the outcome
    CHECK(received.provider_reference == k_refund_psp);
    // A 201 we cannot match to our request proves nothing: unknown.
    CHECK(interpret_refund(o, 201, received_json("pr_other")).outcome == Outcome::unknown);
    CHECK(interpret_refund(o, 201, received_json(k_op, 701)).outcome == Outcome::unknown);
    CHECK(interpret_refund(o, 201, received_json(k_op, 700, "Authorised")).outcome ==
          Outcome::unknown);
    CHECK(interpret_refund(o, 201, R"({"status": "received"})").outcome == Outcome::unknown);
    CHECK(interpret_refund(o, 201, "not json").outcome == Outcome::unknown);
    CHECK(interpret_refund(o, 200, received_json()).outcome == Outcome::unknown);
    // A refund refused as asked (nothing left to refund): declined, final.
    const auto not_possible =
        interpret_refund(o, 422, service_error(422, "137", "validation", "Invalid amount"));
    CHECK(not_possible.outcome == Outcome::declined);
    CHECK(not_possible.call.error_class == "refund_not_possible:137");
    // Our request's form, the account or the credentials: rejected, nothing executed.
    const auto invalid = interpret_refund(
        o, 422,
        service_error(422, "100", "validation", "Required object 'amount' is not provided."));
    CHECK(invalid.outcome == Outcome::rejected);
    REQUIRE(invalid.rejection);
    CHECK(invalid.rejection->code == "100");
    const auto unauthorized =
        interpret_refund(o, 401, service_error(401, "000", "security", "Unauthorized"));
    CHECK(unauthorized.outcome == Outcome::rejected);
    REQUIRE(unauthorized.rejection);
    CHECK(unauthorized.rejection->http_status == 401);
    CHECK(interpret_refund(o, 403, service_error(403, "010", "security", "Not allowed")).outcome ==
          Outcome::rejected);
    // The payment's rule for 137 is not a refund's: there it stays a rejected request.
    CHECK(interpret_payment(sample_order("x"), 422,
                            service_error(422, "137", "validation", "Invalid amount"))
              .outcome == Outcome::rejected);
    // Rate limited: not executed.
    CHECK(interpret_refund(o, 429, "").outcome == Outcome::not_sent);
    // The key still in flight, 5xx, an unreadable error: the refund may have executed.
    CHECK(interpret_refund(o, 422, service_error(422, "704", "validation", "in flight")).outcome ==
          Outcome::unknown);
    for (const int status : {500, 502, 503}) {
        INFO(status);
        CHECK(interpret_refund(o, status, service_error(status, "905", "internal", "x")).outcome ==
              Outcome::unknown);
    }
    CHECK(interpret_refund(o, 422, "not json").outcome == Outcome::unknown);
}

TEST_CASE("adyen refunds: the adapter posts one refund under the refund's own Idempotency-Key, "
          "and cannot look one up",
          "[providers][adyen][refunds]") {
    Recorder rec;
    rec.replies.push_back(response(201, received_json()));
    rec.replies.push_back(failure(SendClass::unknown, 28)); // timed out after sending
    rec.replies.push_back(failure(SendClass::not_sent, 7)); // refused: nothing reached Adyen
    AdyenAdapter a(config(), rec.fn());
    CHECK_FALSE(a.capabilities().refund_lookup);
    CHECK(a.capabilities().notification_wait == std::chrono::hours(4));

    const auto sent = a.refund(refund_order());
    CHECK(sent.outcome == Outcome::pending);
    CHECK(sent.provider_reference == k_refund_psp);
    CHECK(a.refund(refund_order()).outcome == Outcome::unknown);
    CHECK(a.refund(refund_order()).outcome == Outcome::not_sent);
    REQUIRE(rec.sent.size() == 3);
    for (const HttpRequest& req : rec.sent) {
        CHECK(req.method == "POST");
        CHECK(req.url == "https://checkout-test.adyen.test/v71/payments/" + k_payment + "/refunds");
        CHECK(req.mutating);
        CHECK(header(req, "Idempotency-Key") == k_op); // the refund's, on every attempt
        CHECK(header(req, "X-API-Key") == k_key);
        CHECK(header(req, "Content-Type") == "application/json");
    }

    // No lookup: failed, never read as absence, and nothing sent.
    const auto found = a.lookup_refund(refund_order());
    CHECK(found.status == LookupResult::Status::failed);
    CHECK(found.call.error_class == "lookup_not_supported");
    CHECK(rec.sent.size() == 3);

    // Nothing is sent without the payment's pspReference or with an inexpressible amount.
    RefundOrder no_payment = refund_order();
    no_payment.payment_reference.clear();
    CHECK(a.refund(no_payment).outcome == Outcome::declined);
    RefundOrder idr = refund_order();
    idr.amount = Money{1234, "IDR"};
    CHECK(a.refund(idr).outcome == Outcome::declined);
    CHECK(rec.sent.size() == 3);

    // A configured window replaces the kind's default.
    ProviderConfig shorter = config();
    shorter.notification_wait = std::chrono::seconds(600);
    Recorder none;
    CHECK(AdyenAdapter(shorter, none.fn()).capabilities().notification_wait ==
          std::chrono::seconds(600));
}
