#include "providers/square/wire.hpp"

#include "core/external_json.hpp"
#include "providers/wire_util.hpp"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <utility>

namespace payrecon::providers::square {
namespace {

using nlohmann::json;

constexpr std::size_t k_max_reference_id = 40;
constexpr std::size_t k_max_idempotency_key = 45;
constexpr std::size_t k_max_refund_reason = 192;

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
    // An authorisation: held while APPROVED; COMPLETED captured its amount_money (Square
    // completes the whole of it, as an UpdatePayment may have lowered it).
    p.awaiting_capture = p.raw_status == "APPROVED";
    p.amount_captured_minor = p.raw_status == "COMPLETED" ? money->minor : 0;
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

std::optional<RemotePayment> refund_from(const json& j);

// A listed payment's amount is what was authorised: an UpdatePayment before a smaller capture
// lowers amount_money (what COMPLETED captured), never approved_money, "the initial amount of
// money approved" (0 for a payment that failed, whose amount_money stands).
void authorised_amount(const json& j, RemotePayment& p) {
    if (!j.contains("approved_money") || !j["approved_money"].is_object()) {
        return;
    }
    const json& m = j["approved_money"];
    if (!m.contains("amount") || !m["amount"].is_number_integer() || !is_string(m, "currency")) {
        return;
    }
    const auto approved =
        from_square_money(m["amount"].get<long long>(), m["currency"].get<std::string>());
    if (approved && approved->minor > 0 && approved->currency == p.amount.currency) {
        p.amount = *approved;
    }
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
        {"autocomplete", !order.manual_capture},
    };
    if (order.manual_capture) {
        // Explicit, not Square's defaults: an authorisation nobody captures is released.
        body["delay_action"] = "CANCEL";
        body["delay_duration"] = k_delay_duration;
    }
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
    {"APPROVED", Outcome::pending,
     "authorised, not captured: a payment that only authorises (autocomplete false) reads it as "
     "succeeded, the amount held (map_status_for); any other asked to complete at once"},
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

Outcome map_status_for(std::string_view status, bool manual_capture) {
    if (manual_capture && status == "APPROVED") {
        return Outcome::succeeded;
    }
    return map_status(status);
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
        out.version_token = wire::string_member(j["payment"], "version_token");
        if (j["payment"].contains("refund_ids")) {
            const json& ids = j["payment"]["refund_ids"];
            if (!ids.is_array()) {
                return std::nullopt;
            }
            for (const auto& id : ids) {
                if (!id.is_string()) {
                    return std::nullopt; // a refund we could not name: the list is no answer
                }
                out.refund_ids.push_back(id.get<std::string>());
            }
        }
    }
    if (j.contains("refund")) {
        out.refund = refund_from(j["refund"]);
        if (!out.refund) {
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
            authorised_amount(item, *p);
            out.payments.push_back(std::move(*p));
        }
    }
    if (j.contains("refunds")) {
        if (!j["refunds"].is_array()) {
            return std::nullopt;
        }
        for (const auto& item : j["refunds"]) {
            auto r = refund_from(item);
            if (!r) {
                return std::nullopt; // one unreadable refund makes the page untrustworthy
            }
            out.refunds.push_back(std::move(*r));
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

namespace {

// What Square's answer to a call that moves money says (README.md has the table): the object a
// 2xx holds (`object`: the envelope's payment or refund), required to echo our request (`echoes`);
// the errors alike for both, but the declines: the error categories that refuse the money movement
// itself (`declines`), and the codes that are final for the request as it is (`final_code`).
// `state_of` reads a 2xx's object as the outcome (its mapped status unless given).
SubmitResult interpret_call(int http_status, std::string_view body,
                            std::optional<RemotePayment> Envelope::*object,
                            const std::function<bool(const RemotePayment&)>& echoes,
                            const std::function<bool(const SquareError&)>& declines,
                            bool (*final_code)(std::string_view),
                            const std::function<Outcome(const RemotePayment&)>& state_of = {}) {
    SubmitResult r;
    r.call.http_status = http_status;
    r.call.detail = wire::excerpt(body);
    const auto env = parse_envelope(body);
    if (http_status >= 200 && http_status < 300) {
        if (!env || !((*env).*object) || !env->errors.empty() || !echoes(*((*env).*object))) {
            r.call.error_class = "unrecognised_response";
            return r; // unknown: a success we cannot match to our request proves nothing
        }
        const RemotePayment& p = *((*env).*object);
        r.provider_reference = p.provider_reference;
        r.outcome = state_of ? state_of(p) : p.state;
        r.call.error_class =
            r.outcome == Outcome::unknown ? "unexpected_status_" + p.raw_status : "";
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
            return r; // the first request with this key may have moved money: the reconciler
                      // decides
        }
    }
    if ((http_status == 400 || http_status == 402) && declines(first)) {
        if (const auto& p = (*env).*object) {
            if (!echoes(*p) || p->state != Outcome::declined) {
                r.call.error_class = "unrecognised_response";
                return r; // an object that is not ours, or not failed: proves nothing
            }
            r.provider_reference = p->provider_reference;
        }
        r.outcome = Outcome::declined;
        r.call.error_class =
            (first.category == "PAYMENT_METHOD_ERROR" ? "card_declined:" : "refund_declined:") +
            first.code;
        return r;
    }
    if (http_status == 400 && first.category == "INVALID_REQUEST_ERROR") {
        if (final_code(first.code)) {
            r.outcome = Outcome::declined; // no fix of the integration changes this answer
            r.call.error_class = "invalid_request:" + first.code;
            return r;
        }
        return rejected_request(http_status, first.code, first.detail, wire::excerpt(body));
    }
    r.call.error_class = "http_" + std::to_string(http_status);
    return r;
}

} // namespace

SubmitResult interpret_create(const PaymentOrder& order, int http_status, std::string_view body) {
    return interpret_call(
        http_status, body, &Envelope::payment,
        [&order](const RemotePayment& p) {
            return p.amount == order.amount && p.operation_id == order.operation_id;
        },
        [](const SquareError& e) { return e.category == "PAYMENT_METHOD_ERROR"; },
        final_invalid_request,
        [&order](const RemotePayment& p) {
            return map_status_for(p.raw_status, order.manual_capture);
        });
}

bool final_invalid_request(std::string_view code) {
    return code == "UNSUPPORTED_CURRENCY";
}

// Refunds (POST /v2/refunds).

std::string refund_reason(const RefundOrder& order) {
    const std::string tag = "[" + order.operation_id + "]";
    return order.reason ? *order.reason + " " + tag : tag;
}

std::optional<std::string> operation_id_of_reason(std::string_view reason) {
    const auto open = reason.rfind('[');
    if (reason.empty() || reason.back() != ']' || open == std::string_view::npos ||
        open + 2 >= reason.size() || (open != 0 && reason[open - 1] != ' ')) {
        return std::nullopt;
    }
    return std::string(reason.substr(open + 1, reason.size() - open - 2));
}

std::optional<std::string> refund_body(const RefundOrder& order) {
    const auto money = to_square_money(order.amount);
    const std::string reason = refund_reason(order);
    if (!money || order.payment_reference.empty() || order.operation_id.empty() ||
        order.operation_id.size() > k_max_idempotency_key || reason.size() > k_max_refund_reason ||
        carry_problem(carry_limits(), order.merchant_reference.value_or(""), order.metadata)) {
        return std::nullopt;
    }
    return json{
        {"idempotency_key", order.operation_id},
        {"payment_id", order.payment_reference},
        {"amount_money", {{"amount", money->minor}, {"currency", money->currency}}},
        {"reason", reason},
    }
        .dump();
}

constexpr StatusRule k_refund_status_rules[] = {
    {"COMPLETED", Outcome::succeeded, "refunded"},
    {"PENDING", Outcome::pending, "awaiting approval: the funds are not secured yet"},
    {"REJECTED", Outcome::declined, "the refund was rejected: the money stays with the merchant"},
    {"FAILED", Outcome::declined,
     "the refund failed (funds not secured): Square blocks later refunds of the payment"},
};

std::span<const StatusRule> refund_status_rules() {
    return k_refund_status_rules;
}

Outcome map_refund_status(std::string_view status) {
    return outcome_by_rules(k_refund_status_rules, status);
}

namespace {

std::optional<RemotePayment> refund_from(const json& j) {
    // A PaymentRefund has the same id, status and amount_money as a Payment; its reason carries
    // our operation ID.
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
    RemotePayment r;
    r.provider_reference = j["id"].get<std::string>();
    r.amount = *money;
    r.raw_status = j["status"].get<std::string>();
    r.state = map_refund_status(r.raw_status);
    if (is_string(j, "reason")) {
        r.operation_id = operation_id_of_reason(j["reason"].get<std::string>());
    }
    if (is_string(j, "created_at")) {
        if (const auto t = wire::parse_rfc3339(j["created_at"].get<std::string>())) {
            r.created_at = *t;
        }
    }
    r.raw = j.dump();
    return r;
}

} // namespace

std::optional<RemotePayment> parse_refund(std::string_view json_text) {
    const auto parsed = parse_external_json(json_text);
    if (!parsed) {
        return std::nullopt;
    }
    return refund_from(*parsed);
}

bool final_refund_request(std::string_view code) {
    return code == "REFUND_AMOUNT_INVALID" || code == "PAYMENT_NOT_REFUNDABLE" ||
           code == "PAYMENT_NOT_REFUNDABLE_DUE_TO_DISPUTE" || code == "REFUND_DECLINED";
}

SubmitResult interpret_refund(const RefundOrder& order, int http_status, std::string_view body) {
    return interpret_call(
        http_status, body, &Envelope::refund,
        [&order](const RemotePayment& r) {
            return r.amount == order.amount && r.operation_id == order.operation_id;
        },
        [](const SquareError& e) {
            // REFUND_ERROR: Square refused the refund; PAYMENT_METHOD_ERROR: the card refused it.
            return e.category == "REFUND_ERROR" || e.category == "PAYMENT_METHOD_ERROR";
        },
        final_refund_request);
}

// Captures and voids (POST /v2/payments/{id}/complete and /cancel, PUT /v2/payments/{id}).

std::optional<std::string> update_key(const AuthorizationOrder& order) {
    std::string key = order.operation_id + "-amount";
    if (order.operation_id.empty() || key.size() > k_max_idempotency_key) {
        return std::nullopt;
    }
    return key;
}

std::optional<std::string> update_body(const AuthorizationOrder& order) {
    const auto money = to_square_money(order.amount);
    const auto key = update_key(order);
    if (!money || !key || order.payment_reference.empty()) {
        return std::nullopt;
    }
    return json{
        {"idempotency_key", *key},
        {"payment", {{"amount_money", {{"amount", money->minor}, {"currency", money->currency}}}}}}
        .dump();
}

std::string complete_body(const std::optional<std::string>& version_token) {
    json body = json::object();
    if (version_token) {
        body["version_token"] = *version_token;
    }
    return body.dump();
}

namespace {

// The payment an authorisation call's 2xx must be: the one the order names, in its currency.
bool same_authorisation(const AuthorizationOrder& order, const RemotePayment& p) {
    return p.provider_reference == order.payment_reference &&
           p.amount.currency == order.amount.currency;
}

bool never_declined(const SquareError&) {
    // CompletePayment, CancelPayment and UpdatePayment refuse with INVALID_REQUEST_ERROR
    // (classified by reading the payment), not with a card's decline.
    return false;
}

bool no_final_code(std::string_view) {
    return false;
}

} // namespace

UpdateAnswer interpret_update(const AuthorizationOrder& order, int http_status,
                              std::string_view body) {
    UpdateAnswer out;
    out.result = interpret_call(
        http_status, body, &Envelope::payment,
        [&order](const RemotePayment& p) {
            return same_authorisation(order, p) && p.amount == order.amount;
        },
        never_declined, no_final_code,
        [](const RemotePayment& p) {
            // Set, and still to be completed; anything else was not what UpdatePayment does.
            return p.raw_status == "APPROVED" ? Outcome::succeeded : Outcome::unknown;
        });
    if (out.result.outcome == Outcome::succeeded) {
        if (const auto env = parse_envelope(body)) {
            out.version_token = env->version_token;
        }
    }
    return out;
}

SubmitResult interpret_complete(const AuthorizationOrder& order, int http_status,
                                std::string_view body) {
    return interpret_call(
        http_status, body, &Envelope::payment,
        [&order](const RemotePayment& p) {
            // A COMPLETED payment must have taken what we asked: Square completes the whole
            // amount_money, which an UpdatePayment set to this capture's.
            return same_authorisation(order, p) &&
                   (p.raw_status != "COMPLETED" || p.amount == order.amount);
        },
        never_declined, no_final_code,
        [](const RemotePayment& p) {
            return p.raw_status == "COMPLETED" ? Outcome::succeeded : Outcome::unknown;
        });
}

SubmitResult interpret_cancel(const AuthorizationOrder& order, int http_status,
                              std::string_view body) {
    return interpret_call(
        http_status, body, &Envelope::payment,
        [&order](const RemotePayment& p) { return same_authorisation(order, p); }, never_declined,
        no_final_code,
        [](const RemotePayment& p) {
            return p.raw_status == "CANCELED" ? Outcome::succeeded : Outcome::unknown;
        });
}

std::optional<SubmitResult> refusal_by_status(const AuthorizationOrder& order,
                                              const SubmitResult& refused,
                                              std::string_view payment_body) {
    const auto env = parse_envelope(payment_body);
    if (!env || !env->payment || !env->errors.empty() ||
        !same_authorisation(order, *env->payment)) {
        return std::nullopt;
    }
    const std::string& status = env->payment->raw_status;
    const bool capture = order.kind == OperationKind::capture;
    SubmitResult r = refused;
    const std::string code = refused.rejection ? refused.rejection->code : std::string();
    const auto as = [&](Outcome outcome) {
        r.outcome = outcome;
        r.rejection.reset();
        r.call.error_class = "invalid_request:" + code + ":" + status;
        return r;
    };
    if (status == "APPROVED") {
        return r; // held and untouched, and refused all the same: the request itself
    }
    if (status == "FAILED" || status == (capture ? "CANCELED" : "COMPLETED")) {
        return as(Outcome::declined); // voided, lapsed or never authorised; or captured already
    }
    // Captured (a capture) or released (a void) already -- perhaps by this very call, its first
    // answer lost: the lookup decides. PENDING and any other word likewise.
    return as(Outcome::unknown);
}

LookupResult capture_lookup_answer(const AuthorizationOrder& order, std::string_view body) {
    LookupResult out;
    out.call.http_status = 200;
    const auto env = parse_envelope(body);
    if (!env || !env->payment || !env->errors.empty() ||
        !same_authorisation(order, *env->payment)) {
        out.call.error_class = "unrecognised_response";
        out.call.detail = wire::excerpt(body);
        return out;
    }
    RemotePayment p = *env->payment;
    const std::string status = p.raw_status;
    if (std::none_of(std::begin(k_status_rules), std::end(k_status_rules),
                     [&status](const StatusRule& rule) { return rule.word == status; })) {
        out.call.error_class = "unexpected_status_" + status; // a word no table knows
        return out;
    }
    const auto found = [&out, &p](Outcome state) {
        p.state = state;
        out.status = LookupResult::Status::found;
        out.payment = p;
        return out;
    };
    if (status == "APPROVED") {
        out.status = LookupResult::Status::not_found; // held, untouched: neither call happened
        return out;
    }
    if (status == "PENDING") {
        return found(Outcome::pending);
    }
    const bool capture = order.kind == OperationKind::capture;
    if (status == "COMPLETED") {
        // Square completes a payment once, whole: what it captured is its amount_money.
        return found(capture ? Outcome::succeeded : Outcome::declined);
    }
    if (status == "CANCELED") {
        return found(capture ? Outcome::declined : Outcome::succeeded);
    }
    return found(Outcome::declined); // FAILED: nothing held, nothing to capture or release
}

} // namespace payrecon::providers::square
