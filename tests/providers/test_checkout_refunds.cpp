// Checkout.com refunds (DESIGN section 16, issue 31): the refund request, its 202 and the payment's
// actions against Checkout.com's published document, the outcome table, and the adapter's refund
// and lookup calls through an injected send function.
#include "providers/checkout/adapter.hpp"
#include "providers/checkout/wire.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::providers::checkout;
using namespace payrecon::testing;
using net::HttpRequest;
using net::SendClass;

namespace {

const nlohmann::json& spec() {
    return provider_contract("checkout");
}

const std::string k_payment = "pay_y3oqhf46pyzuxjbcn2giaqnb44";
const std::string k_op = k_sample_refund_operation_id;

RefundOrder refund_order() {
    RefundOrder o = sample_refund_order(k_payment);
    o.metadata = {{"ticket", "T-9"}};
    return o;
}

std::string accepted_json(const std::string& reference = k_op) {
    return nlohmann::json{
        {"action_id", "act_fd3h6evhpn3uxdoqbuu3lqnqbm"},
        {"reference", reference},
        {"_links", {{"payment", {{"href", "https://api.checkout.test/payments/" + k_payment}}}}}}
        .dump();
}

nlohmann::json action(const std::string& id, const std::string& type, long long amount,
                      const std::string& reference, std::optional<bool> approved) {
    nlohmann::json a = {{"id", id},
                        {"type", type},
                        {"processed_on", "2026-12-02T10:00:00Z"},
                        {"amount", amount},
                        {"response_code", "10000"},
                        {"reference", reference}};
    if (approved) {
        a["approved"] = *approved;
    }
    return a;
}

ProviderConfig config() {
    ProviderConfig c = sample_config("checkout", "https://api.sandbox.checkout.test",
                                     ApiKey{"CKO_SECRET_KEY", Secret("sk_sbox_not_a_real_key_00")});
    c.settings = checkout::settings("pc_q4dbxom5jbgudnjzjpz7j2z6uq");
    return c;
}

} // namespace

TEST_CASE("checkout refunds: the request carries only RefundRequest's fields, our operation ID as "
          "its reference",
          "[providers][checkout][refunds][contract]") {
    const auto body = refund_body(refund_order());
    REQUIRE(body);
    const auto sent = nlohmann::json::parse(*body);
    const auto& post = spec().at("paths").at("/payments/{id}/refunds").at("post");
    CHECK(post.at("requestBody").at("content").at("application/json").at("schema").at("$ref") ==
          "#/components/schemas/RefundRequest");
    const auto& request = spec().at("components").at("schemas").at("RefundRequest");
    std::set<std::string> fields;
    for (const auto& [key, value] : sent.items()) {
        INFO(key);
        CHECK(request.at("properties").contains(key));
        fields.insert(key);
    }
    CHECK(fields == std::set<std::string>{"amount", "metadata", "reference"});
    CHECK(sent["amount"] == 700);
    CHECK(sent["reference"] == k_op);
    CHECK(k_op.size() <=
          request.at("properties").at("reference").at("maxLength").get<std::size_t>());
    CHECK(sent["metadata"] == nlohmann::json{{"operation_id", k_op},
                                             {"merchant_reference", "RF-7"},
                                             {"ticket", "T-9"}});
    // The answers the document lists for this call, each read on purpose.
    std::set<std::string> answers;
    for (const auto& [code, value] : post.at("responses").items()) {
        answers.insert(code);
    }
    CHECK(answers == std::set<std::string>{"202", "401", "403", "404", "422", "502"});
    const auto& accepted = spec().at("components").at("schemas").at("RefundAcceptedResponse");
    const nlohmann::json answer = nlohmann::json::parse(accepted_json());
    for (const auto& [key, value] : answer.items()) {
        INFO(key);
        CHECK(accepted.at("properties").contains(key));
    }
    CHECK(accepted.at("required") == nlohmann::json::array({"action_id"}));
    // The lookup's actions: a refund is the action of type Refund.
    const auto& types = spec()
                            .at("components")
                            .at("schemas")
                            .at("PaymentAction")
                            .at("properties")
                            .at("type")
                            .at("enum");
    CHECK(std::find(types.begin(), types.end(), "Refund") != types.end());
    const auto a = action("act_1", "Refund", 700, k_op, true);
    for (const auto& [key, value] : a.items()) {
        INFO(key);
        CHECK(spec()
                  .at("components")
                  .at("schemas")
                  .at("PaymentAction")
                  .at("properties")
                  .contains(key));
    }
    CHECK(
        spec().at("paths").at("/payments/{id}/actions").at("get").at("responses").contains("200"));
    // Nothing is sent without the payment's ID or with an amount Checkout.com cannot express.
    RefundOrder no_reference = refund_order();
    no_reference.payment_reference.clear();
    CHECK_FALSE(refund_body(no_reference));
    RefundOrder kwd = refund_order();
    kwd.amount = Money{1234, "KWD"}; // Checkout.com's KWD amounts end in 0
    CHECK_FALSE(refund_body(kwd));
}

TEST_CASE("checkout refunds: the outcome table", "[providers][checkout][refunds]") {
    const RefundOrder o = refund_order();
    const auto ok = interpret_refund(o, 202, accepted_json());
    CHECK(ok.outcome == Outcome::pending); // accepted, processed asynchronously
    CHECK(ok.provider_reference == "act_fd3h6evhpn3uxdoqbuu3lqnqbm");
    // An acceptance of another reference, or without an action, proves nothing.
    CHECK(interpret_refund(o, 202, accepted_json("pr_other")).outcome == Outcome::unknown);
    CHECK(interpret_refund(o, 202, R"({"reference": ")" + k_op + R"("})").outcome ==
          Outcome::unknown);
    CHECK(interpret_refund(o, 200, accepted_json()).outcome == Outcome::unknown);
    // "Refund not allowed": declined, final.
    const auto refused = interpret_refund(o, 403, "");
    CHECK(refused.outcome == Outcome::declined);
    CHECK(refused.call.error_class == "refund_not_allowed");
    // Executed nothing: rejected. 401 refuses the key, as for a payment.
    const auto invalid = interpret_refund(
        o, 422,
        R"({"request_id": "0HL80RJLS76I7", "error_type": "request_invalid", "error_codes": ["amount_invalid"]})");
    CHECK(invalid.outcome == Outcome::rejected);
    REQUIRE(invalid.rejection);
    CHECK(invalid.rejection->code == "amount_invalid");
    const auto unauthorized = interpret_refund(o, 401, "");
    CHECK(unauthorized.outcome == Outcome::rejected);
    REQUIRE(unauthorized.rejection);
    CHECK(unauthorized.rejection->http_status == 401);
    CHECK(interpret_refund(o, 404, "").outcome == Outcome::rejected);
    // Only 2xx answers are kept under the key: anything else may have refunded, and the same key
    // would execute again. Unknown, never not_sent.
    for (const int status : {409, 429, 500, 502, 503}) {
        INFO(status);
        CHECK(interpret_refund(o, status, "").outcome == Outcome::unknown);
    }
    CHECK(interpret_refund(o, 422, "not json").outcome == Outcome::unknown);
}

TEST_CASE("checkout refunds: the adapter posts one refund under the refund's own key, and finds it "
          "among the payment's Refund actions by its reference",
          "[providers][checkout][refunds]") {
    Recorder rec;
    rec.replies.push_back(response(202, accepted_json()));
    rec.replies.push_back(failure(SendClass::unknown, 28));
    const auto actions = nlohmann::json::array(
        {action("act_3", "Refund", 700, k_op, true), // re-executed after a non-2xx: a duplicate
         action("act_2", "Refund", 300, "pr_someone_else", true),
         action("act_1", "Refund", 700, k_op, std::nullopt),
         action("act_0", "Capture", 4999, "pr_0123456789abcdef0123456789abcdef", true)});
    rec.replies.push_back(response(200, actions.dump()));
    rec.replies.push_back(
        response(200, nlohmann::json::array({action("act_0", "Capture", 4999, "x", true)}).dump()));
    rec.replies.push_back(response(200, R"({"not": "an array"})"));
    rec.replies.push_back(response(404, ""));
    CheckoutAdapter a(config(), rec.fn());

    const auto sent = a.refund(refund_order());
    CHECK(sent.outcome == Outcome::pending);
    CHECK(a.refund(refund_order()).outcome == Outcome::unknown); // timed out after sending
    REQUIRE(rec.sent.size() == 2);
    for (const HttpRequest& req : rec.sent) {
        CHECK(req.method == "POST");
        CHECK(req.url == "https://api.sandbox.checkout.test/payments/" + k_payment + "/refunds");
        CHECK(req.mutating);
        CHECK(header(req, "Cko-Idempotency-Key") == k_op); // the refund's, on every attempt
    }

    const auto found = a.lookup_refund(refund_order());
    REQUIRE(found.status == LookupResult::Status::found);
    CHECK(found.payment->provider_reference == "act_1"); // the oldest: the first request's
    CHECK(found.payment->state == Outcome::pending);     // not approved yet
    CHECK(found.payment->amount == Money{700, "EUR"});
    REQUIRE(found.duplicates.size() == 1);
    CHECK(found.duplicates[0].provider_reference == "act_3");
    CHECK(rec.sent[2].method == "GET");
    CHECK(rec.sent[2].url ==
          "https://api.sandbox.checkout.test/payments/" + k_payment + "/actions");
    CHECK_FALSE(rec.sent[2].mutating);
    CHECK(a.lookup_refund(refund_order()).status == LookupResult::Status::not_found);
    // An unreadable list, or no answer, is never absence.
    CHECK(a.lookup_refund(refund_order()).status == LookupResult::Status::failed);
    CHECK(a.lookup_refund(refund_order()).status == LookupResult::Status::failed);

    RefundOrder no_reference = refund_order();
    no_reference.payment_reference.clear();
    CHECK(a.refund(no_reference).call.error_class == "no_payment_reference");
    CHECK(rec.sent.size() == 6);
}
