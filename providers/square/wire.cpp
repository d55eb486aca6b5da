#include "providers/square/wire.hpp"

#include "core/external_json.hpp"
#include "providers/wire_util.hpp"

#include <nlohmann/json.hpp>
#include <utility>

namespace payrecon::providers::square {
namespace {

using nlohmann::json;

constexpr std::size_t k_max_reference_id = 40;

bool is_string(const json& j, const char* key) {
    return j.contains(key) && j[key].is_string();
}

std::optional<RemotePayment> payment_from(const json& j) {
    if (!j.is_object() || !is_string(j, "id") || !is_string(j, "status") ||
        !j.contains("amount_money") || !j["amount_money"].is_object()) {
        return std::nullopt;
    }
    const json& m = j["amount_money"];
    if (!m.contains("amount") || !m["amount"].is_number_integer() || !is_string(m, "currency")) {
        return std::nullopt;
    }
    const auto money =
        from_square_money(m["amount"].get<long long>(), m["currency"].get<std::string>());
    if (!money) {
        return std::nullopt;
    }
    RemotePayment p;
    p.provider_reference = j["id"].get<std::string>();
    p.amount = *money;
    p.raw_status = j["status"].get<std::string>();
    p.state = map_status(p.raw_status);
    if (is_string(j, "reference_id")) {
        p.operation_id = j["reference_id"].get<std::string>();
    }
    if (is_string(j, "created_at")) {
        if (const auto t = wire::parse_rfc3339(j["created_at"].get<std::string>())) {
            p.created_at = *t;
        }
    }
    return p;
}

} // namespace

std::optional<Money> to_square_money(const Money& money) {
    if (!find_currency(money.currency) || money.minor <= 0) {
        return std::nullopt;
    }
    return money;
}

std::optional<Money> from_square_money(long long amount, std::string_view currency) {
    if (!find_currency(currency)) {
        return std::nullopt;
    }
    return Money{amount, std::string(currency)};
}

const CarryLimits& carry_limits() {
    static const CarryLimits k_limits{
        "Square", MetadataLimits{0, {}, 0, 0, "Square's CreatePayment has no metadata field"}};
    return k_limits;
}

std::optional<std::string> create_body(const PaymentOrder& order) {
    const auto money = to_square_money(order.amount);
    if (!money || order.operation_id.empty() || order.operation_id.size() > k_max_reference_id ||
        carry_problem(carry_limits(), order.merchant_reference, order.metadata)) {
        return std::nullopt;
    }
    json body = {
        {"idempotency_key", order.operation_id},
        {"source_id", order.payment_method},
        {"amount_money", {{"amount", money->minor}, {"currency", money->currency}}},
        {"reference_id", order.operation_id},
        {"autocomplete", true},
    };
    if (order.customer) {
        body["customer_id"] = *order.customer;
    }
    if (order.description) {
        body["note"] = *order.description;
    }
    return body.dump();
}

constexpr StatusRule k_status_rules[] = {
    {"COMPLETED", Outcome::succeeded, "charged"},
    {"APPROVED", Outcome::pending, "authorised, not captured: should not happen with autocomplete"},
    {"PENDING", Outcome::pending, "not final yet"},
    {"FAILED", Outcome::declined, "attempted and failed"},
    {"CANCELED", Outcome::declined, "canceled: it will never charge"},
};

std::span<const StatusRule> status_rules() {
    return k_status_rules;
}

Outcome map_status(std::string_view status) {
    return outcome_by_rules(k_status_rules, status);
}

std::optional<RemotePayment> parse_payment(std::string_view json_text) {
    const auto parsed = parse_external_json(json_text);
    if (!parsed) {
        return std::nullopt;
    }
    const json& j = *parsed;
    return payment_from(j);
}

std::optional<Envelope> parse_envelope(std::string_view json_text) {
    const auto parsed = parse_external_json(json_text);
    if (!parsed) {
        return std::nullopt;
    }
    const json& j = *parsed;
    if (!j.is_object()) {
        return std::nullopt;
    }
    Envelope out;
    if (j.contains("errors")) {
        if (!j["errors"].is_array()) {
            return std::nullopt;
        }
        for (const auto& e : j["errors"]) {
            if (!e.is_object() || !is_string(e, "category") || !is_string(e, "code")) {
                return std::nullopt;
            }
            // A detail or field of another type counts as absent (json::value would throw).
            out.errors.push_back(SquareError{e["category"].get<std::string>(),
                                             e["code"].get<std::string>(),
                                             wire::string_member(e, "detail").value_or(""),
                                             wire::string_member(e, "field").value_or("")});
        }
    }
    if (j.contains("payment")) {
        out.payment = payment_from(j["payment"]);
        if (!out.payment) {
            return std::nullopt;
        }
    }
    if (j.contains("payments")) {
        if (!j["payments"].is_array()) {
            return std::nullopt;
        }
        for (const auto& item : j["payments"]) {
            auto p = payment_from(item);
            if (!p) {
                return std::nullopt; // one unreadable item makes the page untrustworthy
            }
            out.payments.push_back(std::move(*p));
        }
    }
    if (j.contains("cursor")) {
        if (!j["cursor"].is_string()) {
            return std::nullopt;
        }
        if (!j["cursor"].get<std::string>().empty()) {
            out.cursor = j["cursor"].get<std::string>();
        }
    }
    return out;
}

SubmitResult interpret_create(const PaymentOrder& order, int http_status, std::string_view body) {
    SubmitResult r;
    r.call.http_status = http_status;
    r.call.detail = wire::excerpt(body);
    auto echoes = [&](const RemotePayment& p) {
        return p.amount == order.amount && p.operation_id == order.operation_id;
    };
    const auto env = parse_envelope(body);
    if (http_status >= 200 && http_status < 300) {
        if (!env || !env->payment || !env->errors.empty() || !echoes(*env->payment)) {
            r.call.error_class = "unrecognised_response";
            return r; // unknown: a success we cannot match to our request proves nothing
        }
        r.provider_reference = env->payment->provider_reference;
        r.outcome = env->payment->state;
        r.call.error_class =
            r.outcome == Outcome::unknown ? "unexpected_status_" + env->payment->raw_status : "";
        return r;
    }
    if (http_status == 429) {
        r.outcome = Outcome::not_sent;
        r.call.error_class = "rate_limited";
        return r;
    }
    if (http_status == 401 || http_status == 403) {
        // AUTHENTICATION_ERROR (UNAUTHORIZED, FORBIDDEN...): the access token or its permissions.
        // Square executed nothing, and nothing changes until the configuration does.
        const bool parsed = env && !env->errors.empty();
        return rejected_request(
            http_status,
            parsed && !env->errors.front().code.empty() ? env->errors.front().code
            : http_status == 401                        ? "UNAUTHORIZED"
                                                        : "FORBIDDEN",
            parsed ? env->errors.front().detail : std::string_view(), wire::excerpt(body));
    }
    if (http_status >= 500 || !env || env->errors.empty()) {
        r.call.error_class =
            http_status >= 500 ? "http_" + std::to_string(http_status) : "unrecognised_response";
        return r;
    }
    const SquareError& first = env->errors.front();
    for (const auto& e : env->errors) {
        if (e.code == "IDEMPOTENCY_KEY_REUSED") {
            r.call.error_class = "IDEMPOTENCY_KEY_REUSED";
            return r; // the first request with this key may have charged: the reconciler decides
        }
    }
    if ((http_status == 400 || http_status == 402) && first.category == "PAYMENT_METHOD_ERROR") {
        if (env->payment) {
            if (!echoes(*env->payment) || (env->payment->state != Outcome::declined)) {
                r.call.error_class = "unrecognised_response";
                return r; // a payment that is not ours, or not failed: proves nothing
            }
            r.provider_reference = env->payment->provider_reference;
        }
        r.outcome = Outcome::declined;
        r.call.error_class = "card_declined:" + first.code;
        return r;
    }
    if (http_status == 400 && first.category == "INVALID_REQUEST_ERROR") {
        if (final_invalid_request(first.code)) {
            r.outcome =
                Outcome::declined; // no fix of the integration makes this currency chargeable
            r.call.error_class = "invalid_request:" + first.code;
            return r;
        }
        return rejected_request(http_status, first.code, first.detail, wire::excerpt(body));
    }
    r.call.error_class = "http_" + std::to_string(http_status);
    return r;
}

bool final_invalid_request(std::string_view code) {
    return code == "UNSUPPORTED_CURRENCY";
}

} // namespace payrecon::providers::square
