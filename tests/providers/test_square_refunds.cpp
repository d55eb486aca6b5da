// Square refunds (DESIGN section 16, issue 31): the RefundPayment request and the PaymentRefund
// against Square's published document, the outcome table, and the adapter's refund and lookup
// calls through an injected send function.
#include "providers/square/adapter.hpp"
#include "providers/square/wire.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::providers::square;
using namespace payrecon::testing;
using net::HttpRequest;
using net::SendClass;

namespace {

const nlohmann::json& spec() {
    return provider_contract("square");
}

const std::string k_payment = "R2B3Z8WMVt3EAmzYWLZvz7Y69EbZY";
const std::string k_op = k_sample_refund_operation_id;

RefundOrder refund_order() {
    RefundOrder o = sample_refund_order(k_payment);
    o.merchant_reference.reset();
    return o;
}

// A PaymentRefund as Square answers it, echoing our amount and operation ID unless told.
nlohmann::json refund_object(const std::string& status, long long amount = 700,
                             const std::string& op = k_op,
                             const std::string& id = k_payment + "_r1") {
    return {{"id", id},
            {"status", status},
            {"location_id", "L88917AVBK2S5"},
            {"unlinked", false},
            {"destination_type", "CARD"},
            {"amount_money", {{"amount", amount}, {"currency", "EUR"}}},
            {"payment_id", k_payment},
            {"order_id", "1JLEUZeEooAIX8HMqm9kvWd69aQZY"},
            {"reason", "requested_by_customer [" + op + "]"},
            {"created_at", "2026-12-02T10:00:00.000Z"},
            {"updated_at", "2026-12-02T10:00:00.000Z"}};
}

std::string refund_json(const std::string& status, long long amount = 700,
                        const std::string& op = k_op, const std::string& id = k_payment + "_r1") {
    return nlohmann::json{{"refund", refund_object(status, amount, op, id)}}.dump();
}

std::string error_json(const std::string& category, const std::string& code) {
    return nlohmann::json{{"errors", {{{"category", category}, {"code", code}, {"detail", "no"}}}}}
        .dump();
}

std::string payment_json(const std::vector<std::string>& refund_ids) {
    nlohmann::json p = {{"id", k_payment},
                        {"status", "COMPLETED"},
                        {"amount_money", {{"amount", 4999}, {"currency", "EUR"}}},
                        {"reference_id", k_sample_operation_id}};
    if (!refund_ids.empty()) {
        p["refund_ids"] = refund_ids;
        p["refunded_money"] = {{"amount", 1000}, {"currency", "EUR"}};
    }
    return nlohmann::json{{"payment", p}}.dump();
}

ProviderConfig config() {
    return sample_config("square", "https://connect.squareup.test",
                         ApiKey{"SQUARE_ACCESS_TOKEN", Secret("EAAAl_not_a_real_token_0000")});
}

} // namespace

TEST_CASE("square refunds: the request carries the fields RefundPayment requires, and only fields "
          "Square's document lists",
          "[providers][square][refunds][contract]") {
    const auto body = refund_body(refund_order());
    REQUIRE(body);
    const auto sent = nlohmann::json::parse(*body);
    CHECK(spec()
              .at("paths")
              .at("/v2/refunds")
              .at("post")
              .at("requestBody")
              .at("content")
              .at("application/json")
              .at("schema")
              .at("$ref") == "#/components/schemas/RefundPaymentRequest");
    const auto& request = spec().at("components").at("schemas").at("RefundPaymentRequest");
    std::set<std::string> fields;
    for (const auto& [key, value] : sent.items()) {
        INFO(key);
        CHECK(request.at("properties").contains(key));
        fields.insert(key);
    }
    CHECK(fields ==
          std::set<std::string>{"amount_money", "idempotency_key", "payment_id", "reason"});
    check_required_fields_sent(request.at("required"), fields);
    CHECK(sent["idempotency_key"] == k_op);
    CHECK(sent["payment_id"] == k_payment);
    CHECK(sent["amount_money"] == nlohmann::json{{"amount", 700}, {"currency", "EUR"}});
    // The reason carries our operation ID, the only text of ours a PaymentRefund keeps.
    CHECK(sent["reason"] == "requested_by_customer [" + k_op + "]");
    CHECK(operation_id_of_reason(sent["reason"].get<std::string>()) == k_op);
    CHECK(sent["reason"].get<std::string>().size() <=
          request.at("properties").at("reason").at("maxLength").get<std::size_t>());
    RefundOrder no_reason = refund_order();
    no_reason.reason.reset();
    CHECK(nlohmann::json::parse(*refund_body(no_reason))["reason"] == "[" + k_op + "]");
    CHECK_FALSE(operation_id_of_reason("requested_by_customer"));
    CHECK_FALSE(operation_id_of_reason("a refund[" + k_op + "]"));
    // The refund lookup reads each refund by its ID.
    std::set<std::string> params;
    for (const auto& p :
         spec().at("paths").at("/v2/refunds/{refund_id}").at("get").at("parameters")) {
        params.insert(p.at("in").get<std::string>() + ":" + p.at("name").get<std::string>());
    }
    CHECK(params == std::set<std::string>{"path:refund_id"});
    // Nothing is sent without the payment's ID, with metadata Square cannot carry, or with a key
    // longer than Square's 45 characters.
    RefundOrder no_reference = refund_order();
    no_reference.payment_reference.clear();
    CHECK_FALSE(refund_body(no_reference));
    RefundOrder metadata = refund_order();
    metadata.metadata = {{"ticket", "T-9"}};
    CHECK_FALSE(refund_body(metadata));
    RefundOrder long_key = refund_order();
    long_key.operation_id = std::string(46, 'k');
    CHECK_FALSE(refund_body(long_key));
}

TEST_CASE("square refunds: every refund status the document names is mapped on purpose, and the "
          "PaymentRefund's fields are the document's",
          "[providers][square][refunds][contract]") {
    const auto& refund = spec().at("components").at("schemas").at("PaymentRefund").at("properties");
    const std::string prose = refund.at("status").at("description");
    std::set<std::string> named;
    for (const std::string word : {"PENDING", "COMPLETED", "REJECTED", "FAILED"}) {
        INFO(word);
        CHECK(prose.find("`" + word + "`") != std::string::npos);
        CHECK(map_refund_status(word) != Outcome::unknown);
        named.insert(word);
    }
    std::set<std::string> mapped;
    for (const auto& rule : refund_status_rules()) {
        mapped.insert(std::string(rule.word));
    }
    CHECK(mapped == named);
    CHECK(map_refund_status("CANCELED") == Outcome::unknown);
    const nlohmann::json answer = refund_object("COMPLETED");
    for (const auto& [key, value] : answer.items()) {
        INFO(key);
        CHECK(refund.contains(key));
    }
    // The codes read as final are codes RefundPayment documents.
    std::set<std::string> documented;
    for (const auto& e : spec().at("paths").at("/v2/refunds").at("post").at("x-endpoint-errors")) {
        documented.insert(e.at("error-code").get<std::string>());
    }
    for (const std::string code : {"REFUND_AMOUNT_INVALID", "PAYMENT_NOT_REFUNDABLE",
                                   "PAYMENT_NOT_REFUNDABLE_DUE_TO_DISPUTE", "REFUND_DECLINED"}) {
        INFO(code);
        CHECK(documented.count(code) == 1);
        CHECK(final_refund_request(code));
    }
    const auto& categories = spec().at("components").at("schemas").at("ErrorCategory").at("enum");
    CHECK(std::find(categories.begin(), categories.end(), "REFUND_ERROR") != categories.end());
}

TEST_CASE("square refunds: the outcome table", "[providers][square][refunds]") {
    const RefundOrder o = refund_order();
    const auto ok = interpret_refund(o, 200, refund_json("COMPLETED"));
    CHECK(ok.outcome == Outcome::succeeded);
    CHECK(ok.provider_reference == k_payment + "_r1");
    CHECK(interpret_refund(o, 200, refund_json("PENDING")).outcome == Outcome::pending);
    CHECK(interpret_refund(o, 200, refund_json("REJECTED")).outcome == Outcome::declined);
    CHECK(interpret_refund(o, 200, refund_json("FAILED")).outcome == Outcome::declined);
    CHECK(interpret_refund(o, 200, refund_json("REVERSED")).outcome == Outcome::unknown);
    // A 2xx that does not echo our amount or operation ID, or holds a payment, proves nothing.
    CHECK(interpret_refund(o, 200, refund_json("COMPLETED", 701)).outcome == Outcome::unknown);
    CHECK(interpret_refund(o, 200, refund_json("COMPLETED", 700, "pr_other")).outcome ==
          Outcome::unknown);
    CHECK(interpret_refund(o, 200, payment_json({})).outcome == Outcome::unknown);
    // Square refused the refund: declined, final.
    const auto over = interpret_refund(o, 400, error_json("REFUND_ERROR", "REFUND_AMOUNT_INVALID"));
    CHECK(over.outcome == Outcome::declined);
    CHECK(over.call.error_class == "refund_declined:REFUND_AMOUNT_INVALID");
    CHECK(interpret_refund(o, 400, error_json("PAYMENT_METHOD_ERROR", "GENERIC_DECLINE")).outcome ==
          Outcome::declined);
    CHECK(interpret_refund(o, 400, error_json("INVALID_REQUEST_ERROR", "PAYMENT_NOT_REFUNDABLE"))
              .outcome == Outcome::declined);
    // A refused refund carrying a refund that is not ours, or not refused, proves nothing.
    nlohmann::json with_refund =
        nlohmann::json::parse(error_json("REFUND_ERROR", "REFUND_DECLINED"));
    with_refund["refund"] = refund_object("FAILED");
    CHECK(interpret_refund(o, 400, with_refund.dump()).outcome == Outcome::declined);
    with_refund["refund"] = refund_object("COMPLETED");
    CHECK(interpret_refund(o, 400, with_refund.dump()).outcome == Outcome::unknown);
    // Executed nothing: rejected (an operator's), rate limited: not sent.
    const auto bad =
        interpret_refund(o, 400, error_json("INVALID_REQUEST_ERROR", "UNKNOWN_BODY_PARAMETER"));
    CHECK(bad.outcome == Outcome::rejected);
    REQUIRE(bad.rejection);
    CHECK(bad.rejection->code == "UNKNOWN_BODY_PARAMETER");
    CHECK(interpret_refund(o, 401, error_json("AUTHENTICATION_ERROR", "UNAUTHORIZED")).outcome ==
          Outcome::rejected);
    CHECK(interpret_refund(o, 429, error_json("RATE_LIMIT_ERROR", "RATE_LIMITED")).outcome ==
          Outcome::not_sent);
    // The first request under the key may have refunded: unknown.
    CHECK(interpret_refund(o, 400, error_json("INVALID_REQUEST_ERROR", "IDEMPOTENCY_KEY_REUSED"))
              .outcome == Outcome::unknown);
    CHECK(interpret_refund(o, 409, error_json("INVALID_REQUEST_ERROR", "CONFLICT")).outcome ==
          Outcome::unknown);
    CHECK(interpret_refund(o, 404, error_json("INVALID_REQUEST_ERROR", "NOT_FOUND")).outcome ==
          Outcome::unknown);
    CHECK(interpret_refund(o, 500, "").outcome == Outcome::unknown);
    CHECK(interpret_refund(o, 502, "<html>").outcome == Outcome::unknown);
}

TEST_CASE("square refunds: the adapter posts one refund under the refund's own key, and finds it "
          "among the payment's refunds by the operation ID in its reason",
          "[providers][square][refunds]") {
    Recorder rec;
    rec.replies.push_back(response(200, refund_json("PENDING")));
    rec.replies.push_back(failure(SendClass::unknown, 28));
    // The lookup: the payment, then each of its refunds.
    rec.replies.push_back(response(200, payment_json({k_payment + "_r0", k_payment + "_r1"})));
    rec.replies.push_back(
        response(200, refund_json("COMPLETED", 300, "pr_someone_else", k_payment + "_r0")));
    rec.replies.push_back(response(200, refund_json("COMPLETED")));
    // A payment without refunds: absent.
    rec.replies.push_back(response(200, payment_json({})));
    // One refund unreadable: no answer.
    rec.replies.push_back(response(200, payment_json({k_payment + "_r0"})));
    rec.replies.push_back(response(503, ""));
    SquareAdapter a(config(), rec.fn());

    const auto sent = a.refund(refund_order());
    CHECK(sent.outcome == Outcome::pending);
    CHECK(sent.provider_reference == k_payment + "_r1");
    CHECK(a.refund(refund_order()).outcome == Outcome::unknown); // timed out after sending
    REQUIRE(rec.sent.size() == 2);
    for (const HttpRequest& req : rec.sent) {
        CHECK(req.method == "POST");
        CHECK(req.url == "https://connect.squareup.test/v2/refunds");
        CHECK(req.mutating);
        CHECK(nlohmann::json::parse(req.body)["idempotency_key"] == k_op); // on every attempt
    }

    const auto found = a.lookup_refund(refund_order());
    REQUIRE(found.status == LookupResult::Status::found);
    CHECK(found.payment->provider_reference == k_payment + "_r1");
    CHECK(found.payment->state == Outcome::succeeded);
    CHECK(found.duplicates.empty());
    REQUIRE(rec.sent.size() == 5);
    CHECK(rec.sent[2].url == "https://connect.squareup.test/v2/payments/" + k_payment);
    CHECK(rec.sent[3].url == "https://connect.squareup.test/v2/refunds/" + k_payment + "_r0");
    CHECK(rec.sent[4].url == "https://connect.squareup.test/v2/refunds/" + k_payment + "_r1");
    for (std::size_t i = 2; i < rec.sent.size(); ++i) {
        CHECK(rec.sent[i].method == "GET");
        CHECK_FALSE(rec.sent[i].mutating);
    }
    CHECK(a.lookup_refund(refund_order()).status == LookupResult::Status::not_found);
    CHECK(a.lookup_refund(refund_order()).status == LookupResult::Status::failed);
    CHECK(rec.sent.size() == 8);

    // Nothing is sent for a payment without Square's ID.
    RefundOrder no_reference = refund_order();
    no_reference.payment_reference.clear();
    const auto refused = a.refund(no_reference);
    CHECK(refused.outcome == Outcome::declined);
    CHECK(refused.call.error_class == "no_payment_reference");
    CHECK(a.lookup_refund(no_reference).status == LookupResult::Status::failed);
    CHECK(rec.sent.size() == 8);
}
