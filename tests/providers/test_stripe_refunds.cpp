// Stripe refunds (DESIGN section 16, issue 31): the wire format against Stripe's published
// document, the outcome table, and the adapter's calls through an injected send function.
#include "providers/stripe/adapter.hpp"
#include "providers/stripe/wire.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::providers::stripe;
using namespace payrecon::testing;
using net::HttpRequest;
using net::SendClass;

namespace {

const nlohmann::json& spec() {
    return provider_contract("stripe");
}

const std::string k_refund_op = "pr_01a24d44082e74c7aad6770393d3d29c";

RefundOrder refund_order() {
    RefundOrder o;
    o.operation_id = k_refund_op;
    o.refund_id = "01a24d44-082e-74c7-aad6-770393d3d29c";
    o.payment_id = "3aabbe24-9c9c-40ea-819f-7766897ccdda";
    o.payment_reference = "pi_3MtwBwLkdIwHu7ix28a3tqPa";
    o.merchant_reference = "RF-7";
    o.amount = Money{700, "EUR"};
    o.reason = "requested_by_customer";
    o.metadata = {{"ticket", "T-9"}};
    return o;
}

// A Refund as Stripe answers, with `status`, echoing our amount and operation ID unless told.
std::string refund_json(const std::string& status, long long amount = 700,
                        const std::string& op = k_refund_op, const std::string& id = "re_1") {
    return nlohmann::json{{"id", id},
                          {"object", "refund"},
                          {"amount", amount},
                          {"currency", "eur"},
                          {"created", 1796205600},
                          {"metadata", {{"operation_id", op}, {"ticket", "T-9"}}},
                          {"payment_intent", "pi_3MtwBwLkdIwHu7ix28a3tqPa"},
                          {"reason", "requested_by_customer"},
                          {"status", status}}
        .dump();
}

std::string error_json(const std::string& type, const std::string& code) {
    return nlohmann::json{{"error", {{"type", type}, {"code", code}, {"message", "no"}}}}.dump();
}

ProviderConfig config() {
    return sample_config("stripe", "https://api.stripe.test",
                         ApiKey{"STRIPE_API_KEY", Secret("sk_test_51Hx_not_a_real_key_0000")});
}

} // namespace

TEST_CASE("stripe refunds: the request carries only parameters Stripe's document lists",
          "[providers][stripe][refunds][contract]") {
    const auto body = refund_body(refund_order());
    REQUIRE(body);
    const auto& props = spec()
                            .at("paths")
                            .at("/v1/refunds")
                            .at("post")
                            .at("requestBody")
                            .at("content")
                            .at("application/x-www-form-urlencoded")
                            .at("schema")
                            .at("properties");
    std::set<std::string> sent;
    for (const auto& [key, value] : form_fields(*body)) {
        const std::string top = key.substr(0, key.find("%5B"));
        INFO(key);
        CHECK(props.contains(top));
        sent.insert(top);
    }
    CHECK(sent == std::set<std::string>{"amount", "metadata", "payment_intent", "reason"});
    CHECK(body->find("payment_intent=pi_3MtwBwLkdIwHu7ix28a3tqPa") != std::string::npos);
    CHECK(body->find("amount=700") != std::string::npos);
    CHECK(body->find("metadata%5Boperation_id%5D=" + k_refund_op) != std::string::npos);
    CHECK(body->find("metadata%5Bmerchant_reference%5D=RF-7") != std::string::npos);
    CHECK(body->find("metadata%5Bticket%5D=T-9") != std::string::npos);
    // The reasons payrecon takes are exactly Stripe's.
    const auto& reasons = props.at("reason").at("enum");
    CHECK(std::set<std::string>(reasons.begin(), reasons.end()) ==
          std::set<std::string>{"duplicate", "fraudulent", "requested_by_customer"});
    // The lookup lists a PaymentIntent's refunds.
    std::set<std::string> query;
    for (const auto& p : spec().at("paths").at("/v1/refunds").at("get").at("parameters")) {
        query.insert(p.at("name").get<std::string>());
    }
    CHECK(query.count("payment_intent") == 1);
    CHECK(query.count("limit") == 1);
    // Nothing is sent without the charge's reference, or with an amount Stripe cannot express.
    RefundOrder no_reference = refund_order();
    no_reference.payment_reference.clear();
    CHECK_FALSE(refund_body(no_reference));
    RefundOrder mga = refund_order();
    mga.amount = Money{150, "MGA"}; // Stripe takes whole ariary only
    CHECK_FALSE(refund_body(mga));
}

TEST_CASE("stripe refunds: every status word the document names is mapped on purpose, and the "
          "Refund's fields are the document's",
          "[providers][stripe][refunds][contract]") {
    const auto& refund = spec().at("components").at("schemas").at("refund").at("properties");
    const std::string prose = refund.at("status").at("description");
    for (const auto& rule : refund_status_rules()) {
        INFO(rule.word);
        const bool named = prose.find("`" + std::string(rule.word) + "`") != std::string::npos;
        // requires_action is documented for refunds of some methods after 2020-08-27.
        CHECK((named || rule.word == "requires_action"));
    }
    for (const std::string word : {"pending", "succeeded", "failed", "canceled"}) {
        INFO(word);
        CHECK(prose.find("`" + word + "`") != std::string::npos);
        CHECK(map_refund_status(word) != Outcome::unknown);
    }
    CHECK(map_refund_status("reversed") == Outcome::unknown);
    const nlohmann::json answer = nlohmann::json::parse(refund_json("succeeded"));
    for (const auto& [key, value] : answer.items()) {
        INFO(key);
        CHECK(refund.contains(key));
    }
}

TEST_CASE("stripe refunds: the outcome table", "[providers][stripe][refunds]") {
    const RefundOrder o = refund_order();
    const auto ok = interpret_refund(o, 200, refund_json("succeeded"));
    CHECK(ok.outcome == Outcome::succeeded);
    CHECK(ok.provider_reference == "re_1");
    CHECK(interpret_refund(o, 200, refund_json("pending")).outcome == Outcome::pending);
    CHECK(interpret_refund(o, 200, refund_json("failed")).outcome == Outcome::declined);
    // A 2xx that does not echo our amount or operation ID proves nothing.
    CHECK(interpret_refund(o, 200, refund_json("succeeded", 701)).outcome == Outcome::unknown);
    CHECK(interpret_refund(o, 200, refund_json("succeeded", 700, "pr_other")).outcome ==
          Outcome::unknown);
    CHECK(interpret_refund(o, 200, R"({"id": "pi_1", "object": "payment_intent"})").outcome ==
          Outcome::unknown);
    // Errors: executed-nothing is rejected, final codes are declined, the rest unknown.
    const auto bad =
        interpret_refund(o, 400, error_json("invalid_request_error", "parameter_unknown"));
    CHECK(bad.outcome == Outcome::rejected);
    REQUIRE(bad.rejection);
    CHECK(bad.rejection->code == "parameter_unknown");
    CHECK(interpret_refund(o, 400, error_json("invalid_request_error", "charge_already_refunded"))
              .outcome == Outcome::declined);
    CHECK(interpret_refund(o, 401, error_json("invalid_request_error", "")).outcome ==
          Outcome::rejected);
    CHECK(interpret_refund(o, 429, error_json("rate_limit_error", "rate_limit")).outcome ==
          Outcome::not_sent);
    CHECK(interpret_refund(o, 409, error_json("idempotency_error", "idempotency_key_in_use"))
              .outcome == Outcome::unknown);
    CHECK(interpret_refund(o, 500, "").outcome == Outcome::unknown);
    // No card errors on a refund: a 402 is not a decline we recognise.
    CHECK(interpret_refund(o, 402, error_json("card_error", "card_declined")).outcome ==
          Outcome::unknown);
}

TEST_CASE("stripe refunds: the adapter posts one refund under the refund's own key, and finds it "
          "among the PaymentIntent's refunds",
          "[providers][stripe][refunds]") {
    Recorder rec;
    rec.replies.push_back(response(200, refund_json("pending")));
    rec.replies.push_back(failure(SendClass::unknown, 28));
    const std::string list = "{\"object\": \"list\", \"has_more\": false, \"data\": [" +
                             refund_json("succeeded", 300, "pr_someone_else", "re_0") + ", " +
                             refund_json("succeeded") + "]}";
    rec.replies.push_back(response(200, list));
    rec.replies.push_back(response(200, R"({"object": "list", "has_more": true, "data": []})"));
    rec.replies.push_back(response(503, ""));
    StripeAdapter a(config(), rec.fn());

    const auto sent = a.refund(refund_order());
    CHECK(sent.outcome == Outcome::pending);
    CHECK(sent.provider_reference == "re_1");
    CHECK(a.refund(refund_order()).outcome == Outcome::unknown); // timed out after sending
    REQUIRE(rec.sent.size() == 2);
    for (const HttpRequest& req : rec.sent) {
        CHECK(req.method == "POST");
        CHECK(req.url == "https://api.stripe.test/v1/refunds");
        CHECK(req.mutating);
        CHECK(header(req, "Idempotency-Key") == k_refund_op); // the refund's, on every attempt
    }

    const auto found = a.lookup_refund(refund_order());
    REQUIRE(found.status == LookupResult::Status::found);
    CHECK(found.payment->provider_reference == "re_1");
    CHECK(found.payment->state == Outcome::succeeded);
    CHECK(found.duplicates.empty());
    CHECK(rec.sent[2].method == "GET");
    CHECK(
        rec.sent[2].url ==
        "https://api.stripe.test/v1/refunds?payment_intent=pi_3MtwBwLkdIwHu7ix28a3tqPa&limit=100");
    CHECK_FALSE(rec.sent[2].mutating);
    // More refunds than one page holds: absence proves nothing. A 503 is no answer at all.
    CHECK(a.lookup_refund(refund_order()).status == LookupResult::Status::failed);
    CHECK(a.lookup_refund(refund_order()).status == LookupResult::Status::failed);

    // Nothing is sent for a payment without a PaymentIntent.
    RefundOrder no_reference = refund_order();
    no_reference.payment_reference.clear();
    const auto refused = a.refund(no_reference);
    CHECK(refused.outcome != Outcome::unknown);
    CHECK(refused.call.error_class == "no_payment_reference");
    CHECK(rec.sent.size() == 5);
}

TEST_CASE("refunds: a provider kind whose adapter does not refund yet sends nothing and says so",
          "[providers][refunds]") {
    Recorder rec;
    ProviderConfig c = sample_config("stripe", "https://api.stripe.test",
                                     ApiKey{"STRIPE_API_KEY", Secret("sk_test_0")});
    // Stripe refunds; the base Provider's refund() is what the other kinds answer today.
    StripeAdapter a(c, rec.fn());
    const auto r = a.Provider::refund(refund_order());
    CHECK(r.outcome == Outcome::rejected);
    REQUIRE(r.rejection);
    CHECK(r.rejection->code == "refunds_not_supported");
    CHECK(r.rejection->http_status == 0);
    CHECK(a.Provider::lookup_refund(refund_order()).status == LookupResult::Status::failed);
    CHECK(rec.sent.empty());
}
