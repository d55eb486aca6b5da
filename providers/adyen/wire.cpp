#include "providers/adyen/wire.hpp"

#include "core/external_json.hpp"
#include "providers/wire_util.hpp"

#include <nlohmann/json.hpp>

namespace payrecon::providers::adyen {
namespace {

using nlohmann::json;
using wire::string_member;

} // namespace

std::optional<int> adyen_exponent(std::string_view currency) {
    return wire::provider_exponent(currency, {{"CLP", 2}, {"ISK", 2}, {"CVE", 0}, {"IDR", 0}});
}

std::optional<std::int64_t> to_adyen_amount(const Money& money) {
    return wire::to_provider_units(money, adyen_exponent(money.currency));
}

std::optional<Money> from_adyen_amount(std::int64_t value, std::string_view currency) {
    return wire::from_provider_units(value, currency, adyen_exponent(currency));
}

const CarryLimits& carry_limits() {
    static const CarryLimits k_limits{
        "Adyen", MetadataLimits{
                     k_max_metadata_entries,
                     {"operation_id", "merchant_reference"},
                     k_max_metadata_key,
                     k_max_metadata_value,
                     "Adyen's Checkout API: at most 20 metadata entries, keys up to 20 and values "
                     "up to 80 characters; more is its error 177"}};
    return k_limits;
}

std::optional<std::string> payment_body(const PaymentOrder& order,
                                        std::string_view merchant_account,
                                        std::string_view return_url) {
    const auto value = to_adyen_amount(order.amount);
    if (!value || carry_problem(carry_limits(), order.merchant_reference, order.metadata)) {
        return std::nullopt;
    }
    json metadata = json::object();
    for (const auto& [k, v] : order.metadata) {
        metadata[k] = v;
    }
    metadata["operation_id"] = order.operation_id;
    metadata["merchant_reference"] = order.merchant_reference;

    json body = {
        {"amount", {{"currency", wire::upper(order.amount.currency)}, {"value", *value}}},
        {"reference", order.operation_id},
        {"merchantAccount", std::string(merchant_account)},
        {"paymentMethod", {{"type", "scheme"}, {"storedPaymentMethodId", order.payment_method}}},
        {"shopperInteraction", "ContAuth"},
        {"recurringProcessingModel", "UnscheduledCardOnFile"},
        {"returnUrl", std::string(return_url)},
        {"metadata", metadata},
    };
    if (order.customer) {
        body["shopperReference"] = *order.customer;
    }
    if (order.manual_capture) {
        // AdditionalDataCommon.manualCapture: authorise only, whatever the account's capture delay.
        body["additionalData"] = {{"manualCapture", "true"}};
    }
    return body.dump();
}

constexpr StatusRule k_result_code_rules[] = {
    {"Authorised", Outcome::succeeded, "charged"},
    {"Refused", Outcome::declined, "attempted and refused"},
    {"Cancelled", Outcome::declined, "cancelled: a final, non-authorised state"},
    {"Error", Outcome::declined, "a final, non-authorised state with a refusalReason"},
    {"Pending", Outcome::pending, "the final result is not known yet"},
    {"Received", Outcome::pending, "received, not processed yet"},
    {"PresentToShopper", Outcome::pending, "waiting for the shopper"},
    {"RedirectShopper", Outcome::pending, "waiting for the shopper"},
    {"IdentifyShopper", Outcome::pending, "waiting for the shopper (3-D Secure)"},
    {"ChallengeShopper", Outcome::pending, "waiting for the shopper (3-D Secure)"},
    {"PartiallyAuthorised", Outcome::unknown,
     "money moved, but not our amount: an operator decides"},
    {"AuthenticationFinished", Outcome::unknown, "an authentication-only flow we never ask for"},
    {"AuthenticationNotRequired", Outcome::unknown, "an authentication-only flow we never ask for"},
    {"Success", Outcome::unknown, "undocumented for /payments"},
};

std::span<const StatusRule> result_code_rules() {
    return k_result_code_rules;
}

Outcome map_result_code(std::string_view result_code) {
    return outcome_by_rules(k_result_code_rules, result_code);
}

std::optional<PaymentResponse> parse_payment_response(std::string_view json_text) {
    const auto parsed = parse_external_json(json_text);
    if (!parsed) {
        return std::nullopt;
    }
    const json& j = *parsed;
    if (!j.is_object()) {
        return std::nullopt;
    }
    const auto result_code = string_member(j, "resultCode");
    if (!result_code) {
        return std::nullopt;
    }
    PaymentResponse out;
    out.result_code = *result_code;
    out.psp_reference = string_member(j, "pspReference");
    out.merchant_reference = string_member(j, "merchantReference");
    out.refusal_reason = string_member(j, "refusalReason").value_or("");
    if (j.contains("amount") && !j["amount"].is_null()) {
        const json& a = j["amount"];
        if (!a.is_object() || !a.contains("value") || !a["value"].is_number_integer() ||
            !a.contains("currency") || !a["currency"].is_string()) {
            return std::nullopt;
        }
        out.amount =
            from_adyen_amount(a["value"].get<std::int64_t>(), a["currency"].get<std::string>());
        if (!out.amount) {
            return std::nullopt;
        }
    }
    return out;
}

std::optional<ServiceError> parse_service_error(std::string_view json_text) {
    const auto parsed = parse_external_json(json_text);
    if (!parsed) {
        return std::nullopt;
    }
    const json& j = *parsed;
    if (!j.is_object()) {
        return std::nullopt;
    }
    ServiceError out;
    out.error_code = string_member(j, "errorCode").value_or("");
    out.error_type = string_member(j, "errorType").value_or("");
    out.message = string_member(j, "message").value_or("");
    if (j.contains("status") && j["status"].is_number_integer()) {
        out.status = j["status"].get<int>();
    }
    if (out.error_code.empty() && out.error_type.empty()) {
        return std::nullopt;
    }
    return out;
}

namespace {

// What a non-2xx answer to a call that moves money means, for a payment and a modification alike
// (interpret_payment says it); the 422 of a modification with an amount (`amounted`: "refund",
// "capture"; empty for a payment and a cancel) whose code refund_not_possible() names is declined.
SubmitResult interpret_error(int http_status, std::string_view body, std::string_view amounted) {
    SubmitResult r;
    r.call.http_status = http_status;
    r.call.detail = wire::excerpt(body);
    const auto error = parse_service_error(body);
    if (http_status == 429) {
        r.outcome = Outcome::not_sent;
        r.call.error_class = "rate_limited";
        return r;
    }
    if (http_status == 401 || http_status == 403) {
        // The API key, or the merchant account it may use (901 Invalid Merchant Account, 010 Not
        // allowed): Adyen executed nothing, and nothing changes until the configuration does.
        return rejected_request(http_status,
                                error && !error->error_code.empty() ? error->error_code
                                : http_status == 401                ? "authentication"
                                                                    : "permission",
                                error ? error->message : std::string_view(), wire::excerpt(body));
    }
    if (http_status >= 500 || !error) {
        r.call.error_class =
            http_status >= 500 ? "http_" + std::to_string(http_status) : "unrecognised_response";
        return r;
    }
    if (error->error_code == k_idempotency_in_flight) {
        r.call.error_class = "idempotency_in_flight";
        return r; // the first request with this key may be charging: the reconciler decides
    }
    if (!amounted.empty() && http_status == 422 && refund_not_possible(error->error_code)) {
        r.outcome = Outcome::declined; // Adyen moved nothing; the same request cannot succeed
        r.call.error_class = std::string(amounted) + "_not_possible:" + error->error_code;
        return r;
    }
    if (http_status >= 400 && http_status < 500 && http_status != 409 &&
        (error->error_type == "validation" || error->error_type == "configuration" ||
         error->error_type == "security")) {
        // Adyen refused the request itself (missing or invalid fields, the account's set-up): no
        // payment was attempted. A refused card is a 200 with resultCode Refused instead.
        return rejected_request(http_status, error->error_code, error->message,
                                wire::excerpt(body));
    }
    r.call.error_class = "http_" + std::to_string(http_status) +
                         (error->error_code.empty() ? "" : ":" + error->error_code);
    return r;
}

} // namespace

SubmitResult interpret_payment(const PaymentOrder& order, int http_status, std::string_view body) {
    if (http_status < 200 || http_status >= 300) {
        return interpret_error(http_status, body, {});
    }
    SubmitResult r;
    r.call.http_status = http_status;
    r.call.detail = wire::excerpt(body);
    const auto p = parse_payment_response(body);
    if (!p || (p->merchant_reference && *p->merchant_reference != order.operation_id) ||
        (p->amount && *p->amount != order.amount)) {
        r.call.error_class = "unrecognised_response";
        return r; // unknown: a success we cannot match to our request proves nothing
    }
    r.provider_reference = p->psp_reference;
    r.outcome = map_result_code(p->result_code);
    if (r.outcome == Outcome::succeeded && !p->psp_reference) {
        r.outcome = Outcome::unknown; // an authorisation without Adyen's reference is no proof
        r.call.error_class = "unrecognised_response";
        return r;
    }
    if (r.outcome == Outcome::unknown) {
        r.call.error_class = "unexpected_result_code_" + p->result_code;
    } else if (r.outcome == Outcome::declined) {
        r.call.error_class = "refused:" + p->result_code +
                             (p->refusal_reason.empty() ? "" : ":" + p->refusal_reason);
    }
    return r;
}

std::optional<std::string> refund_body(const RefundOrder& order,
                                       std::string_view merchant_account) {
    const auto value = to_adyen_amount(order.amount);
    if (!value) {
        return std::nullopt;
    }
    json body = {
        {"merchantAccount", std::string(merchant_account)},
        {"amount", {{"currency", wire::upper(order.amount.currency)}, {"value", *value}}},
        {"reference", order.operation_id},
    };
    if (order.reason) {
        if (*order.reason == "duplicate") {
            body["merchantRefundReason"] = "DUPLICATE";
        } else if (*order.reason == "fraudulent") {
            body["merchantRefundReason"] = "FRAUD";
        } else if (*order.reason == "requested_by_customer") {
            body["merchantRefundReason"] = "CUSTOMER REQUEST";
        }
    }
    return body.dump();
}

bool refund_not_possible(std::string_view error_code) {
    // 137 "Invalid amount specified": more than the payment has left to refund, or nothing left.
    return error_code == "137";
}

namespace {

// A modification's 201 (a refund's, a capture's, a cancel's): `status` "received" naming our
// `reference`, the payment and, where one was asked, our amount -> pending with the
// modification's own pspReference; anything we cannot match -> unknown.
SubmitResult interpret_received(std::string_view operation_id, std::string_view payment_reference,
                                const std::optional<Money>& amount, int http_status,
                                std::string_view body) {
    SubmitResult r;
    r.call.http_status = http_status;
    r.call.detail = wire::excerpt(body);
    const auto parsed = parse_external_json(body);
    const json* j = parsed && parsed->is_object() ? &*parsed : nullptr;
    const auto psp = j != nullptr ? string_member(*j, "pspReference") : std::nullopt;
    const auto status = j != nullptr ? string_member(*j, "status") : std::nullopt;
    const auto reference = j != nullptr ? string_member(*j, "reference") : std::nullopt;
    const auto payment = j != nullptr ? string_member(*j, "paymentPspReference") : std::nullopt;
    // The amount, when given, must be ours: an Amount that is not one is no match either (a
    // cancel asks for none, and its answer has none).
    bool same_amount = true;
    if (j != nullptr && j->contains("amount") && !(*j)["amount"].is_null()) {
        const json& a = (*j)["amount"];
        const bool readable = a.is_object() && a.contains("value") &&
                              a["value"].is_number_integer() && a.contains("currency") &&
                              a["currency"].is_string();
        same_amount = amount && readable &&
                      from_adyen_amount(a["value"].get<std::int64_t>(),
                                        a["currency"].get<std::string>()) == amount;
    }
    if (http_status != 201 || !psp || psp->empty() || status != "received" ||
        (reference && *reference != operation_id) || (payment && *payment != payment_reference) ||
        !same_amount) {
        r.call.error_class = "unrecognised_response";
        return r; // unknown: an acceptance we cannot match to our request proves nothing
    }
    r.outcome = Outcome::pending; // received: the modification's notification tells the outcome
    r.provider_reference = *psp;
    return r;
}

} // namespace

SubmitResult interpret_refund(const RefundOrder& order, int http_status, std::string_view body) {
    if (http_status < 200 || http_status >= 300) {
        return interpret_error(http_status, body, "refund");
    }
    return interpret_received(order.operation_id, order.payment_reference, order.amount,
                              http_status, body);
}

// Captures and cancels (POST /payments/{paymentPspReference}/captures and /cancels).

std::optional<std::string> capture_body(const AuthorizationOrder& order,
                                        std::string_view merchant_account) {
    const auto value = to_adyen_amount(order.amount);
    if (!value || order.operation_id.size() > k_max_modification_reference) {
        return std::nullopt;
    }
    return json{{"merchantAccount", std::string(merchant_account)},
                {"amount", {{"currency", wire::upper(order.amount.currency)}, {"value", *value}}},
                {"reference", order.operation_id}}
        .dump();
}

std::optional<std::string> cancel_body(const AuthorizationOrder& order,
                                       std::string_view merchant_account) {
    if (order.operation_id.size() > k_max_modification_reference) {
        return std::nullopt;
    }
    return json{{"merchantAccount", std::string(merchant_account)},
                {"reference", order.operation_id}}
        .dump();
}

SubmitResult interpret_authorization_action(const AuthorizationOrder& order, int http_status,
                                            std::string_view body) {
    const bool capture = order.kind == OperationKind::capture;
    if (http_status < 200 || http_status >= 300) {
        // A capture's 422 137 (more than the authorisation has left) refuses the capture as
        // asked, as it refuses a refund; a cancel asks for no amount.
        return interpret_error(http_status, body, capture ? "capture" : "");
    }
    return interpret_received(order.operation_id, order.payment_reference,
                              capture ? std::optional<Money>(order.amount) : std::nullopt,
                              http_status, body);
}

} // namespace payrecon::providers::adyen
