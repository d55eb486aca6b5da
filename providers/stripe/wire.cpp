#include "providers/stripe/wire.hpp"

#include "core/external_json.hpp"
#include "providers/wire_util.hpp"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>

namespace payrecon::providers::stripe {
namespace {

using nlohmann::json;

// obj[key] if it is a string, else "".
std::string string_field(const json& obj, const char* key) {
    return wire::string_member(obj, key).value_or("");
}

} // namespace

std::optional<int> stripe_exponent(std::string_view currency) {
    return wire::provider_exponent(currency, {{"ISK", 2}, {"MGA", 0}});
}

std::optional<long long> to_stripe_amount(const Money& money) {
    return wire::to_provider_units(money, stripe_exponent(money.currency));
}

std::optional<Money> from_stripe_amount(long long amount, std::string_view currency) {
    return wire::from_provider_units(amount, currency, stripe_exponent(currency));
}

const CarryLimits& carry_limits() {
    static const CarryLimits k_limits{
        "Stripe",
        MetadataLimits{50,
                       {"operation_id", "merchant_reference"},
                       40,
                       500,
                       "Stripe's metadata: at most 50 keys, keys up to 40 and values up to 500 "
                       "characters"}};
    return k_limits;
}

std::optional<CarryProblem> authorisation_carry_problem(const PaymentOrder& order) {
    if (!order.manual_capture) {
        return std::nullopt;
    }
    const MetadataLimits& m = carry_limits().metadata;
    if (order.metadata.count(k_capture_operation_key) != 0) {
        return CarryProblem{std::string("metadata.") + k_capture_operation_key,
                            std::string("metadata key '") + k_capture_operation_key +
                                "' is payrecon's own at Stripe on a payment that only authorises "
                                "(its capture writes its operation ID there, so that the capture "
                                "can be found); use another key."};
    }
    const std::size_t room = m.max_entries - m.own_keys.size() - 1;
    if (order.metadata.size() > room) {
        return CarryProblem{"metadata",
                            "metadata has " + std::to_string(order.metadata.size()) +
                                " entries; Stripe carries at most " + std::to_string(room) +
                                " of yours on a payment that only authorises: its limit is " +
                                std::to_string(m.max_entries) +
                                " entries per PaymentIntent, and payrecon adds operation_id and "
                                "merchant_reference when it is made and capture_operation_id when "
                                "it is captured. Send at most " +
                                std::to_string(room) + " entries; none is ever dropped."};
    }
    return std::nullopt;
}

std::optional<std::string> create_body(const PaymentOrder& order) {
    const auto amount = to_stripe_amount(order.amount);
    if (!amount || carry_problem(carry_limits(), order.merchant_reference, order.metadata) ||
        authorisation_carry_problem(order)) {
        return std::nullopt;
    }
    std::vector<std::pair<std::string, std::string>> f = {
        {"amount", std::to_string(*amount)},
        {"currency", wire::lower(order.amount.currency)},
        {"payment_method", order.payment_method},
        {"confirm", "true"},
        {"off_session", "true"},
    };
    if (order.manual_capture) {
        f.emplace_back("capture_method", "manual");
    }
    if (order.customer) {
        f.emplace_back("customer", *order.customer);
    }
    if (order.description) {
        f.emplace_back("description", *order.description);
    }
    for (const auto& [k, v] : order.metadata) {
        f.emplace_back("metadata[" + k + "]", v);
    }
    f.emplace_back("metadata[operation_id]", order.operation_id);
    f.emplace_back("metadata[merchant_reference]", order.merchant_reference);
    return wire::form_encode(f);
}

constexpr StatusRule k_status_rules[] = {
    {"succeeded", Outcome::succeeded, "charged"},
    {"processing", Outcome::pending, "the payment method is still processing"},
    {"requires_action", Outcome::pending,
     "waiting for the customer (3-D Secure): cannot complete off-session"},
    {"requires_payment_method", Outcome::declined,
     "the attempt failed: the PaymentIntent wants another payment method"},
    {"canceled", Outcome::declined, "canceled: it will never charge"},
    {"requires_confirmation", Outcome::unknown,
     "we create with confirm=true: an unconfirmed PaymentIntent is not what we "
     "asked for, and proves neither a charge nor its absence"},
    {"requires_capture", Outcome::unknown,
     "authorised, not captured: a payment that only authorises (capture_method=manual) reads it "
     "as succeeded, the amount held (map_status_for); any other asked to capture at once, so "
     "the money has not moved as it asked"},
};

std::span<const StatusRule> status_rules() {
    return k_status_rules;
}

Outcome map_status(std::string_view status) {
    return outcome_by_rules(k_status_rules, status);
}

Outcome map_status_for(std::string_view status, bool manual_capture) {
    if (manual_capture && status == "requires_capture") {
        return Outcome::succeeded;
    }
    return map_status(status);
}

namespace {

std::optional<RemotePayment> payment_from(const json& j) {
    if (!j.is_object() || !j.contains("id") || !j["id"].is_string() || !j.contains("amount") ||
        !j["amount"].is_number_integer() || !j.contains("currency") || !j["currency"].is_string() ||
        !j.contains("status") || !j["status"].is_string()) {
        return std::nullopt;
    }
    if (j.contains("object") && j["object"] != "payment_intent") {
        return std::nullopt;
    }
    const auto money =
        from_stripe_amount(j["amount"].get<long long>(), j["currency"].get<std::string>());
    if (!money) {
        return std::nullopt;
    }
    RemotePayment p;
    p.provider_reference = j["id"].get<std::string>();
    p.amount = *money;
    p.raw_status = j["status"].get<std::string>();
    p.state = map_status(p.raw_status);
    if (j.contains("metadata") && j["metadata"].is_object() &&
        j["metadata"].contains("operation_id") && j["metadata"]["operation_id"].is_string()) {
        p.operation_id = j["metadata"]["operation_id"].get<std::string>();
    }
    if (j.contains("created") && j["created"].is_number_integer()) {
        p.created_at = std::chrono::system_clock::time_point(
            std::chrono::seconds(j["created"].get<long long>()));
    }
    // Refunds live on the charge: `charges.data[]` (API 2020-08-27), or an expanded
    // `latest_charge`.
    long long refunded = 0;
    const auto add_refunded = [&](const json& charge) {
        if (charge.is_object() && charge.contains("amount_refunded") &&
            charge["amount_refunded"].is_number_integer()) {
            refunded += charge["amount_refunded"].get<long long>();
        }
    };
    if (j.contains("charges") && j["charges"].is_object() && j["charges"].contains("data") &&
        j["charges"]["data"].is_array()) {
        for (const auto& charge : j["charges"]["data"]) {
            add_refunded(charge);
        }
    } else if (j.contains("latest_charge")) {
        add_refunded(j["latest_charge"]);
    }
    if (refunded > 0) {
        if (const auto r = from_stripe_amount(refunded, j["currency"].get<std::string>())) {
            p.amount_refunded_minor = r->minor;
        }
    }
    if (j.contains("amount_received") && j["amount_received"].is_number_integer()) {
        if (const auto r = from_stripe_amount(j["amount_received"].get<long long>(),
                                              j["currency"].get<std::string>())) {
            p.amount_captured_minor = r->minor;
        }
    }
    p.awaiting_capture = p.raw_status == "requires_capture";
    p.raw = j.dump();
    return p;
}

} // namespace

std::optional<RemotePayment> parse_payment_intent(std::string_view json_text) {
    const auto parsed = parse_external_json(json_text);
    if (!parsed) {
        return std::nullopt;
    }
    const json& j = *parsed;
    return payment_from(j);
}

namespace {
std::optional<RemotePayment> refund_from(const json& j);
} // namespace

std::optional<WebhookEvent> parse_event(std::string_view body) {
    const auto parsed = parse_external_json(body);
    if (!parsed || !parsed->is_object()) {
        return std::nullopt;
    }
    const json& j = *parsed;
    if (!j.contains("id") || !j["id"].is_string() || !j.contains("type") ||
        !j["type"].is_string()) {
        return std::nullopt;
    }
    WebhookEvent e;
    e.event_key = j["id"].get<std::string>();
    e.event_type = j["type"].get<std::string>();
    if (j.contains("created") && j["created"].is_number_integer()) {
        e.occurred_at = j["created"].get<long long>();
    }
    const json* object = nullptr;
    if (j.contains("data") && j["data"].is_object() && j["data"].contains("object")) {
        object = &j["data"]["object"];
    }
    // A refund's events (refund.created, refund.updated, refund.failed; charge.refund.updated
    // in older API versions) carry the Refund, whose metadata holds the refund's operation ID.
    const bool refund = object != nullptr && (e.event_type.rfind("refund.", 0) == 0 ||
                                              e.event_type.rfind("charge.refund.", 0) == 0);
    if (object == nullptr || (!refund && e.event_type.rfind("payment_intent.", 0) != 0)) {
        return e; // not about a payment's outcome: kept as `other`
    }
    const auto p = refund ? refund_from(*object) : payment_from(*object);
    if (refund) {
        e.kind = OperationKind::refund;
    }
    e.provider_reference = p->provider_reference;
    e.amount_minor = p->amount.minor;
    e.currency = p->amount.currency;
    e.operation_id = p->operation_id;
    if (!e.operation_id && j.contains("request") && j["request"].is_object() &&
        j["request"].contains("idempotency_key") && j["request"]["idempotency_key"].is_string()) {
        e.operation_id = j["request"]["idempotency_key"].get<std::string>();
    }
    switch (p->state) {
    case Outcome::succeeded:
        e.outcome = EvidenceOutcome::succeeded;
        break;
    case Outcome::declined:
        e.outcome = EvidenceOutcome::failed;
        break;
    case Outcome::pending:
        e.outcome = EvidenceOutcome::pending;
        break;
    case Outcome::not_sent:
    case Outcome::rejected:
    case Outcome::unknown:
        e.outcome = EvidenceOutcome::other;
        break;
    }
    return e;
}

std::optional<StripeError> parse_error(std::string_view json_text) {
    const auto parsed = parse_external_json(json_text);
    if (!parsed) {
        return std::nullopt;
    }
    const json& j = *parsed;
    if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) {
        return std::nullopt;
    }
    const json& e = j["error"];
    StripeError out;
    out.type = string_field(e, "type");
    out.code = string_field(e, "code");
    out.decline_code = string_field(e, "decline_code");
    out.message = string_field(e, "message");
    if (e.contains("payment_intent")) {
        out.payment_intent = payment_from(e["payment_intent"]);
    }
    if (out.type.empty()) {
        return std::nullopt;
    }
    return out;
}

namespace {

// What Stripe's answer to a call that moves money says (README.md has the table): the object a
// 2xx holds, read by `recognise` and required to echo our request (`echoes`); the errors alike
// for every object, but card errors (`card_errors`: only a charge has them) and the codes that
// are final for the request as it is (`final_code`).
// `unexpected_state`, where given, decides a 400 invalid_request_error before the codes are read
// (a capture's and a void's payment_intent_unexpected_state); nullopt leaves it to them.
using StateReading = std::function<std::optional<SubmitResult>(const StripeError&)>;

SubmitResult
interpret_call(int http_status, std::string_view body,
               const std::function<std::optional<RemotePayment>(std::string_view)>& recognise,
               const std::function<bool(const RemotePayment&)>& echoes, bool card_errors,
               bool (*final_code)(std::string_view),
               const StateReading& unexpected_state = nullptr) {
    SubmitResult r;
    r.call.http_status = http_status;
    r.call.detail = wire::excerpt(body);
    if (http_status >= 200 && http_status < 300) {
        const auto p = recognise(body);
        if (!p || !echoes(*p)) {
            r.call.error_class = "unrecognised_response";
            return r; // unknown: a success we cannot match to our request proves nothing
        }
        r.provider_reference = p->provider_reference;
        r.outcome = p->state;
        r.call.error_class =
            p->state == Outcome::unknown ? "unexpected_status_" + p->raw_status : "";
        return r;
    }
    const auto error = parse_error(body);
    if (http_status == 429) {
        r.outcome = Outcome::not_sent;
        r.call.error_class = "rate_limited";
        return r;
    }
    if (http_status == 401 || http_status == 403) {
        // The API key is wrong or lacks the permission: Stripe executed nothing, and nothing will
        // change until an operator fixes the configuration.
        const std::string fallback = http_status == 401 ? "authentication" : "permission";
        return rejected_request(http_status, error && !error->code.empty() ? error->code : fallback,
                                error ? error->message : std::string_view(), wire::excerpt(body));
    }
    if (http_status >= 500 || !error) {
        r.call.error_class =
            http_status >= 500 ? "http_" + std::to_string(http_status) : "unrecognised_response";
        return r;
    }
    if (error->type == "idempotency_error" || http_status == 409) {
        r.call.error_class = error->code.empty() ? "idempotency_error" : error->code;
        return r; // the first request with this key may have moved money: the reconciler decides
    }
    if (card_errors && http_status == 402 && error->type == "card_error") {
        if (error->payment_intent && !echoes(*error->payment_intent)) {
            r.call.error_class = "unrecognised_response";
            return r;
        }
        r.outcome = Outcome::declined;
        if (error->payment_intent) {
            r.provider_reference = error->payment_intent->provider_reference;
        }
        r.call.error_class =
            "card_declined" + (error->decline_code.empty() ? "" : ":" + error->decline_code);
        return r;
    }
    if ((http_status == 400 || http_status == 404) && error->type == "invalid_request_error") {
        if (unexpected_state && http_status == 400) {
            if (auto decided = unexpected_state(*error)) {
                decided->call.http_status = http_status;
                decided->call.detail = r.call.detail;
                return *decided;
            }
        }
        if (final_code(error->code)) {
            r.outcome = Outcome::declined; // no fix of the integration changes this answer
            r.call.error_class = "invalid_request:" + error->code;
            return r;
        }
        return rejected_request(http_status, error->code.empty() ? error->type : error->code,
                                error->message, wire::excerpt(body));
    }
    r.call.error_class = "http_" + std::to_string(http_status);
    return r;
}

} // namespace

SubmitResult interpret_create(const PaymentOrder& order, int http_status, std::string_view body) {
    return interpret_call(
        http_status, body,
        [&order](std::string_view b) {
            auto p = parse_payment_intent(b);
            if (p) {
                p->state = map_status_for(p->raw_status, order.manual_capture);
            }
            return p;
        },
        [&order](const RemotePayment& p) {
            return p.amount == order.amount && p.operation_id == order.operation_id;
        },
        true, final_invalid_request);
}

bool final_invalid_request(std::string_view code) {
    return code == "amount_too_small" || code == "amount_too_large";
}

std::string search_query(std::string_view operation_id) {
    return "metadata['operation_id']:'" + std::string(operation_id) + "'";
}

std::optional<ListEnvelope> parse_list(std::string_view json_text) {
    const auto parsed = parse_external_json(json_text);
    if (!parsed) {
        return std::nullopt;
    }
    const json& j = *parsed;
    if (!j.is_object() || !j.contains("data") || !j["data"].is_array()) {
        return std::nullopt;
    }
    const std::string object = string_field(j, "object");
    if (object != "list" && object != "search_result") {
        return std::nullopt;
    }
    ListEnvelope out;
    if (j.contains("has_more")) {
        if (!j["has_more"].is_boolean()) {
            return std::nullopt; // we could not tell whether pages were left out
        }
        out.has_more = j["has_more"].get<bool>();
    }
    for (const auto& item : j["data"]) {
        auto p = payment_from(item);
        if (!p) {
            return std::nullopt; // one unreadable item makes the page untrustworthy
        }
        out.items.push_back(std::move(*p));
    }
    return out;
}

// Refunds (POST /v1/refunds).

std::optional<std::string> refund_body(const RefundOrder& order) {
    const auto amount = to_stripe_amount(order.amount);
    if (!amount || order.payment_reference.empty() ||
        carry_problem(carry_limits(), order.merchant_reference.value_or(""), order.metadata)) {
        return std::nullopt;
    }
    std::vector<std::pair<std::string, std::string>> f = {
        {"payment_intent", order.payment_reference},
        {"amount", std::to_string(*amount)},
    };
    if (order.reason) {
        f.emplace_back("reason", *order.reason);
    }
    for (const auto& [k, v] : order.metadata) {
        f.emplace_back("metadata[" + k + "]", v);
    }
    f.emplace_back("metadata[operation_id]", order.operation_id);
    if (order.merchant_reference) {
        f.emplace_back("metadata[merchant_reference]", *order.merchant_reference);
    }
    return wire::form_encode(f);
}

constexpr StatusRule k_refund_status_rules[] = {
    {"succeeded", Outcome::succeeded, "refunded (a later refund.failed can still reverse it)"},
    {"pending", Outcome::pending, "not final yet"},
    {"requires_action", Outcome::pending,
     "waiting for the customer's details (some payment methods): not final yet"},
    {"failed", Outcome::declined, "the refund failed: the money stays with the merchant"},
    {"canceled", Outcome::declined, "canceled: it will never refund"},
};

std::span<const StatusRule> refund_status_rules() {
    return k_refund_status_rules;
}

Outcome map_refund_status(std::string_view status) {
    return outcome_by_rules(k_refund_status_rules, status);
}

namespace {

std::optional<RemotePayment> refund_from(const json& j) {
    if (!j.is_object() || string_field(j, "object") != "refund" || !j.contains("id") ||
        !j["id"].is_string() || !j.contains("amount") || !j["amount"].is_number_integer() ||
        !j.contains("currency") || !j["currency"].is_string() || !j.contains("status") ||
        !j["status"].is_string()) {
        return std::nullopt;
    }
    const auto money =
        from_stripe_amount(j["amount"].get<long long>(), j["currency"].get<std::string>());
    if (!money) {
        return std::nullopt;
    }
    RemotePayment r;
    r.provider_reference = j["id"].get<std::string>();
    r.amount = *money;
    r.raw_status = j["status"].get<std::string>();
    r.state = map_refund_status(r.raw_status);
    if (j.contains("metadata") && j["metadata"].is_object() &&
        j["metadata"].contains("operation_id") && j["metadata"]["operation_id"].is_string()) {
        r.operation_id = j["metadata"]["operation_id"].get<std::string>();
    }
    if (j.contains("created") && j["created"].is_number_integer()) {
        r.created_at = std::chrono::system_clock::time_point(
            std::chrono::seconds(j["created"].get<long long>()));
    }
    r.raw = j.dump();
    return r;
}

bool final_refund_request(std::string_view code) {
    // The charge is refunded in full already, or was disputed: no refund of it can go through.
    return code == "charge_already_refunded" || code == "charge_disputed";
}

} // namespace

std::optional<RemotePayment> parse_refund(std::string_view json_text) {
    const auto parsed = parse_external_json(json_text);
    if (!parsed) {
        return std::nullopt;
    }
    return refund_from(*parsed);
}

SubmitResult interpret_refund(const RefundOrder& order, int http_status, std::string_view body) {
    return interpret_call(
        http_status, body, parse_refund,
        [&order](const RemotePayment& r) {
            return r.amount == order.amount && r.operation_id == order.operation_id;
        },
        false, final_refund_request);
}

std::optional<std::vector<RemotePayment>> parse_refund_list(std::string_view json_text,
                                                            bool& has_more) {
    const auto parsed = parse_external_json(json_text);
    if (!parsed) {
        return std::nullopt;
    }
    const json& j = *parsed;
    if (!j.is_object() || string_field(j, "object") != "list" || !j.contains("data") ||
        !j["data"].is_array() || (j.contains("has_more") && !j["has_more"].is_boolean())) {
        return std::nullopt;
    }
    has_more = j.value("has_more", false);
    std::vector<RemotePayment> out;
    for (const auto& item : j["data"]) {
        auto r = refund_from(item);
        if (!r) {
            return std::nullopt; // one unreadable item makes the page untrustworthy
        }
        out.push_back(std::move(*r));
    }
    return out;
}

// Captures and voids (POST /v1/payment_intents/{id}/capture and /cancel).

std::optional<std::string> capture_body(const AuthorizationOrder& order) {
    const auto amount = to_stripe_amount(order.amount);
    if (!amount || order.payment_reference.empty()) {
        return std::nullopt;
    }
    return wire::form_encode(
        {{"amount_to_capture", std::to_string(*amount)},
         {std::string("metadata[") + k_capture_operation_key + "]", order.operation_id}});
}

std::optional<Authorisation> parse_authorisation(std::string_view json_text) {
    const auto parsed = parse_external_json(json_text);
    if (!parsed) {
        return std::nullopt;
    }
    const json& j = *parsed;
    auto intent = payment_from(j);
    if (!intent) {
        return std::nullopt;
    }
    Authorisation a;
    a.intent = std::move(*intent);
    if (j.contains("metadata") && j["metadata"].is_object()) {
        a.capture_operation_id = wire::string_member(j["metadata"], k_capture_operation_key);
    }
    a.cancellation_reason = string_field(j, "cancellation_reason");
    return a;
}

namespace {

constexpr StatusRule k_capture_status_rules[] = {
    {"succeeded", Outcome::succeeded, "captured"},
    {"processing", Outcome::pending, "the capture is still processing"},
    {"canceled", Outcome::declined,
     "voided, or the authorisation expired (cancellation_reason automatic): it never captures"},
};

constexpr StatusRule k_void_status_rules[] = {
    {"canceled", Outcome::succeeded, "released: no charge will be made"},
    {"succeeded", Outcome::declined, "captured: a captured PaymentIntent cannot be canceled"},
};

// The statuses in which a PaymentIntent holds no authorisation yet: nothing was captured or
// voided, and nothing can be captured.
bool before_authorisation(std::string_view status) {
    return status == "requires_payment_method" || status == "requires_confirmation" ||
           status == "requires_action";
}

bool final_capture_request(std::string_view code) {
    // The authorisation is gone or was never made, or the amount is outside what Stripe takes:
    // no fix of the integration captures it (docs.stripe.com/error-codes).
    return code == "charge_expired_for_capture" || code == "capture_charge_authorization_expired" ||
           code == "capture_unauthorized_payment" || final_invalid_request(code);
}

bool final_void_request(std::string_view code) {
    return code == "charge_already_captured"; // a captured charge is never released
}

// The PaymentIntent a capture's or a void's 2xx must be: the one the order names, in its currency.
bool same_authorisation(const AuthorizationOrder& order, const RemotePayment& p) {
    return p.provider_reference == order.payment_reference &&
           p.amount.currency == order.amount.currency;
}

SubmitResult unexpected_state_result(Outcome outcome, const std::string& status) {
    SubmitResult r;
    r.outcome = outcome;
    r.call.error_class =
        "invalid_request:payment_intent_unexpected_state" + (status.empty() ? "" : ":" + status);
    return r;
}

} // namespace

std::span<const StatusRule> capture_status_rules() {
    return k_capture_status_rules;
}

std::span<const StatusRule> void_status_rules() {
    return k_void_status_rules;
}

SubmitResult interpret_capture(const AuthorizationOrder& order, int http_status,
                               std::string_view body) {
    return interpret_call(
        http_status, body,
        [](std::string_view b) -> std::optional<RemotePayment> {
            auto a = parse_authorisation(b);
            if (!a) {
                return std::nullopt;
            }
            a->intent.operation_id = a->capture_operation_id; // the capture's, where it wrote it
            a->intent.state = outcome_by_rules(k_capture_status_rules, a->intent.raw_status);
            return std::move(a->intent);
        },
        [&order](const RemotePayment& p) {
            // Another capture's operation ID, or a success that did not take what we asked, is
            // not the answer to this request.
            return same_authorisation(order, p) &&
                   (!p.operation_id || *p.operation_id == order.operation_id) &&
                   (p.state != Outcome::succeeded ||
                    p.amount_captured_minor == order.captured_before_minor + order.amount.minor);
        },
        false, final_capture_request,
        [&order](const StripeError& e) -> std::optional<SubmitResult> {
            if (e.code == "charge_already_captured") {
                // Captured already -- perhaps by this very capture, its first answer lost and its
                // key expired: the lookup decides, never a blind decline.
                SubmitResult r;
                r.call.error_class = "invalid_request:" + e.code;
                return r;
            }
            if (e.code != "payment_intent_unexpected_state") {
                return std::nullopt;
            }
            if (!e.payment_intent ||
                e.payment_intent->provider_reference != order.payment_reference) {
                return unexpected_state_result(Outcome::unknown, "");
            }
            const std::string& status = e.payment_intent->raw_status;
            if (status == "canceled" || before_authorisation(status)) {
                // Voided or expired, or never authorised: nothing to capture, now or later.
                return unexpected_state_result(Outcome::declined, status);
            }
            // succeeded: captured, maybe by us (executed once, the answer lost, the key expired);
            // processing or requires_capture: a capture in flight. The lookup decides.
            return unexpected_state_result(Outcome::unknown, status);
        });
}

SubmitResult interpret_void(const AuthorizationOrder& order, int http_status,
                            std::string_view body) {
    return interpret_call(
        http_status, body,
        [](std::string_view b) -> std::optional<RemotePayment> {
            auto p = parse_payment_intent(b);
            if (p) {
                p->state = outcome_by_rules(k_void_status_rules, p->raw_status);
            }
            return p;
        },
        [&order](const RemotePayment& p) { return same_authorisation(order, p); }, false,
        final_void_request,
        [&order](const StripeError& e) -> std::optional<SubmitResult> {
            if (e.code != "payment_intent_unexpected_state") {
                return std::nullopt;
            }
            if (!e.payment_intent ||
                e.payment_intent->provider_reference != order.payment_reference) {
                return unexpected_state_result(Outcome::unknown, "");
            }
            const std::string& status = e.payment_intent->raw_status;
            if (status == "succeeded") {
                return unexpected_state_result(Outcome::declined, status); // captured already
            }
            // canceled: released already -- by this very void (executed once, its answer lost, its
            // key expired), by an operator, or by its expiry. The lookup reads it and decides.
            return unexpected_state_result(Outcome::unknown, status);
        });
}

LookupResult capture_lookup_answer(const AuthorizationOrder& order, std::string_view body) {
    LookupResult out;
    out.call.http_status = 200;
    const auto a = parse_authorisation(body);
    if (!a || !same_authorisation(order, a->intent)) {
        out.call.error_class = "unrecognised_response";
        out.call.detail = wire::excerpt(body);
        return out;
    }
    const std::string& status = a->intent.raw_status;
    if (std::none_of(std::begin(k_status_rules), std::end(k_status_rules),
                     [&status](const StatusRule& rule) { return rule.word == status; })) {
        out.call.error_class = "unexpected_status_" + status; // a word no table knows
        return out;
    }
    RemotePayment p = a->intent;
    // Ours where the PaymentIntent echoes it: a capture writes its operation ID there, a void
    // cannot (cancel takes no metadata).
    p.operation_id = order.kind == OperationKind::capture ? a->capture_operation_id : std::nullopt;
    const auto found = [&out, &p](Outcome state) {
        p.state = state;
        out.status = LookupResult::Status::found;
        out.payment = p;
        return out;
    };
    if (status == "processing") {
        return found(Outcome::pending);
    }
    if (order.kind == OperationKind::void_authorization) {
        if (status == "canceled") {
            return found(Outcome::succeeded); // released (by its expiry, too: nothing is held)
        }
        if (status == "succeeded") {
            return found(Outcome::declined); // captured instead
        }
        out.status = LookupResult::Status::not_found; // not canceled: our void did not happen
        return out;
    }
    if (status == "canceled") {
        return found(Outcome::declined); // voided or expired: it will never capture
    }
    if (status == "succeeded") {
        if (a->capture_operation_id && *a->capture_operation_id != order.operation_id) {
            // Another capture took it, and Stripe captures a PaymentIntent once.
            return found(Outcome::declined);
        }
        const long long taken = a->intent.amount_captured_minor - order.captured_before_minor;
        if (taken <= 0) {
            return found(Outcome::declined); // nothing was left for this capture
        }
        p.amount = Money{taken, a->intent.amount.currency};
        return found(Outcome::succeeded);
    }
    // requires_capture, or not authorised yet: no capture happened.
    out.status = LookupResult::Status::not_found;
    return out;
}

} // namespace payrecon::providers::stripe
