#include "providers/checkout/wire.hpp"

#include "core/external_json.hpp"
#include "providers/wire_util.hpp"

#include <array>
#include <iterator>
#include <nlohmann/json.hpp>
#include <utility>

namespace payrecon::providers::checkout {
namespace {

using nlohmann::json;

// PaymentRequest.reference: "maxLength: 50".
constexpr std::size_t k_max_reference = 50;
// "Not contain more than nine digits" (format-the-amount-value).
constexpr std::int64_t k_max_amount = 999'999'999;

constexpr std::array<std::string_view, 15> k_full_amount = {
    "BIF", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG",
    "RWF", "UGX", "VUV", "VND", "XAF", "XOF", "XPF",
};
constexpr std::array<std::string_view, 7> k_thousandths = {
    "BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND",
};

bool listed(const auto& list, std::string_view code) {
    for (const auto c : list) {
        if (c == code) {
            return true;
        }
    }
    return false;
}

std::optional<Payment> payment_from(const json& j) {
    if (!j.is_object()) {
        return std::nullopt;
    }
    Payment p;
    const auto id = wire::string_member(j, "id");
    if (!id || id->empty()) {
        return std::nullopt;
    }
    p.id = *id;
    p.status = wire::string_member(j, "status");
    if (j.contains("approved")) {
        if (!j["approved"].is_boolean()) {
            return std::nullopt;
        }
        p.approved = j["approved"].get<bool>();
    }
    const bool has_amount = j.contains("amount");
    const bool has_currency = j.contains("currency");
    if (has_amount || has_currency) {
        if (!has_amount || !has_currency || !j["amount"].is_number_integer() ||
            !j["currency"].is_string()) {
            return std::nullopt;
        }
        p.amount =
            from_checkout_amount(j["amount"].get<std::int64_t>(), j["currency"].get<std::string>());
        if (!p.amount) {
            return std::nullopt;
        }
    }
    p.reference = wire::string_member(j, "reference");
    p.response_code = wire::string_member(j, "response_code");
    p.response_summary = wire::string_member(j, "response_summary");
    p.created_on = wire::string_member(j, "requested_on");
    if (!p.created_on) {
        p.created_on = wire::string_member(j, "processed_on");
    }
    if (j.contains("balances") && p.amount) {
        const json& b = j["balances"];
        if (!b.is_object()) {
            return std::nullopt;
        }
        if (b.contains("total_captured")) {
            if (!b["total_captured"].is_number_integer()) {
                return std::nullopt;
            }
            const auto captured =
                from_checkout_amount(b["total_captured"].get<std::int64_t>(), p.amount->currency);
            if (!captured) {
                return std::nullopt;
            }
            p.total_captured = captured->minor;
        }
    }
    return p;
}

// A capture's or a void's `metadata`: every caller entry, our operation ID, and the operation's
// merchant reference when given (as a refund's).
json action_metadata(const AuthorizationOrder& order) {
    json metadata = json::object();
    for (const auto& [k, v] : order.metadata) {
        metadata[k] = v;
    }
    metadata["operation_id"] = order.operation_id;
    if (order.merchant_reference) {
        metadata["merchant_reference"] = *order.merchant_reference;
    }
    return metadata;
}

bool action_sendable(const AuthorizationOrder& order) {
    return !order.payment_reference.empty() && !order.operation_id.empty() &&
           order.operation_id.size() <= k_max_reference &&
           !carry_problem(carry_limits(), order.merchant_reference.value_or(""), order.metadata);
}

// A 422 `request_invalid` as rejected (its first error code), or nullopt for any other 422.
std::optional<SubmitResult> rejected_invalid(int http_status, std::string_view body,
                                             std::string_view what) {
    const auto e = parse_error(body);
    if (!e || e->error_type != "request_invalid") {
        return std::nullopt;
    }
    std::string codes;
    for (const auto& c : e->error_codes) {
        codes += (codes.empty() ? "" : ", ") + c;
    }
    return rejected_request(http_status,
                            e->error_codes.empty() ? e->error_type : e->error_codes.front(),
                            "Checkout.com refused the " + std::string(what) +
                                " as invalid: " + (codes.empty() ? e->error_type : codes),
                            wire::excerpt(body));
}

} // namespace

std::optional<int> checkout_exponent(std::string_view currency) {
    const std::string code = wire::upper(currency);
    if (!find_currency(code)) {
        return std::nullopt;
    }
    if (listed(k_full_amount, code)) {
        return 0;
    }
    if (listed(k_thousandths, code)) {
        return 3;
    }
    return 2;
}

std::optional<std::int64_t> to_checkout_amount(const Money& money) {
    const auto exponent = checkout_exponent(money.currency);
    const auto amount = wire::to_provider_units(money, exponent);
    if (!amount || *amount <= 0 || *amount > k_max_amount) {
        return std::nullopt;
    }
    if (*exponent == 3 && *amount % 10 != 0) {
        return std::nullopt; // "The last digit must always be a 0"
    }
    return amount;
}

std::optional<Money> from_checkout_amount(std::int64_t amount, std::string_view currency) {
    return wire::from_provider_units(amount, currency, checkout_exponent(currency));
}

const CarryLimits& carry_limits() {
    // The published schema sets no limit on metadata beyond "one level of depth" of primitive
    // values; these bounds are payrecon's own, kept well inside what Checkout.com's dashboard and
    // reports show, so that nothing is cut where a person reads it.
    static const CarryLimits k_limits{
        "Checkout.com",
        MetadataLimits{20,
                       {"operation_id", "merchant_reference"},
                       50,
                       255,
                       "payrecon sends at most 20 metadata entries (its own two included), keys up "
                       "to 50 and values up to 255 characters to Checkout.com, whose schema "
                       "publishes no limit"}};
    return k_limits;
}

std::optional<std::string> create_body(const PaymentOrder& order,
                                       std::string_view processing_channel_id) {
    const auto amount = to_checkout_amount(order.amount);
    if (!amount || order.operation_id.empty() || order.operation_id.size() > k_max_reference ||
        (order.description && order.description->size() > k_max_description) ||
        carry_problem(carry_limits(), order.merchant_reference, order.metadata)) {
        return std::nullopt;
    }
    json metadata = json::object();
    for (const auto& [k, v] : order.metadata) {
        metadata[k] = v;
    }
    metadata["operation_id"] = order.operation_id;
    metadata["merchant_reference"] = order.merchant_reference;
    json body = {
        {"source", {{"type", "id"}, {"id", order.payment_method}}},
        {"amount", *amount},
        {"currency", wire::upper(order.amount.currency)},
        {"reference", order.operation_id},
        {"processing_channel_id", std::string(processing_channel_id)},
        {"capture", !order.manual_capture},
        {"payment_type", "Recurring"},
        {"merchant_initiated", true},
        {"metadata", std::move(metadata)},
    };
    if (order.description) {
        body["description"] = *order.description;
    }
    if (order.customer) {
        body["customer"] = {{"id", *order.customer}};
    }
    return body.dump();
}

// A payment's statuses as GET /payments/{id} can give them (PaymentDetails: Payment's and Expired).
// payrecon asks for automatic capture: an authorisation is the charge it asked for (the capture
// follows on Checkout.com's side), and so is a payment captured or paid out. Money moved and moved
// back (refunded) or not as asked (partly captured, voided): an operator decides; so does anything
// newer (Retry Scheduled).
constexpr StatusRule k_status_rules[] = {
    {"Authorized", Outcome::succeeded,
     "authorised with automatic capture: the charge payrecon asked for"},
    {"Captured", Outcome::succeeded, "charged"},
    {"Paid", Outcome::succeeded, "charged and paid out"},
    {"Declined", Outcome::declined, "attempted and refused"},
    {"Canceled", Outcome::declined, "canceled before it charged"},
    {"Expired", Outcome::declined, "an authorisation that lapsed uncaptured: no money moved"},
    {"Pending", Outcome::pending, "not final yet"},
    {"Card Verified", Outcome::unknown,
     "a card verification moves no money: never what payrecon asks for"},
    {"Voided", Outcome::unknown,
     "an authorisation released: payrecon captures automatically, so an "
     "operator finds out who voided it"},
    {"Partially Captured", Outcome::unknown,
     "money moved, but not our amount: an operator decides"},
    {"Partially Refunded", Outcome::unknown,
     "charged, then partly refunded: an operator decides what was kept"},
    {"Refunded", Outcome::unknown, "charged, then refunded: an operator decides what was kept"},
};

std::span<const StatusRule> status_rules() {
    return k_status_rules;
}

Outcome map_status(std::string_view status) {
    return outcome_by_rules(k_status_rules, status);
}

Outcome map_status_for(std::string_view status, bool manual_capture) {
    if (manual_capture) {
        // Held, then captured in part or whole since: the authorisation the order asked for.
        if (status == "Authorized" || status == "Captured" || status == "Partially Captured" ||
            status == "Paid") {
            return Outcome::succeeded;
        }
        if (status == "Voided") {
            return Outcome::declined; // released before anything was captured
        }
    }
    return map_status(status);
}

std::optional<Payment> parse_payment(std::string_view json_text) {
    const auto parsed = parse_external_json(json_text);
    if (!parsed) {
        return std::nullopt;
    }
    return payment_from(*parsed);
}

std::optional<RemotePayment> to_remote(const Payment& payment, std::string raw) {
    if (!payment.amount) {
        return std::nullopt;
    }
    RemotePayment r;
    r.provider_reference = payment.id;
    r.operation_id = payment.reference;
    r.amount = *payment.amount;
    r.raw_status = payment.status.value_or("");
    r.state = payment.status                                   ? map_status(*payment.status)
              : payment.approved == std::optional<bool>(false) ? Outcome::declined
                                                               : Outcome::unknown;
    if (payment.created_on) {
        if (const auto t = wire::parse_rfc3339(*payment.created_on)) {
            r.created_at = *t;
        }
    }
    r.amount_captured_minor = payment.total_captured.value_or(0);
    r.awaiting_capture = r.raw_status == "Authorized" && r.amount_captured_minor == 0;
    r.raw = std::move(raw);
    return r;
}

std::optional<PaymentList> parse_payment_list(std::string_view json_text) {
    const auto parsed = parse_external_json(json_text);
    if (!parsed || !parsed->is_object() || !parsed->contains("data") ||
        !(*parsed)["data"].is_array()) {
        return std::nullopt;
    }
    const json& j = *parsed;
    PaymentList out;
    if (j.contains("total_count")) {
        if (!j["total_count"].is_number_integer()) {
            return std::nullopt;
        }
        out.total_count = j["total_count"].get<long long>();
    }
    if (j.contains("skip")) {
        if (!j["skip"].is_number_integer()) {
            return std::nullopt;
        }
        out.skip = j["skip"].get<long long>();
    }
    for (const auto& item : j["data"]) {
        const auto p = payment_from(item);
        if (!p) {
            return std::nullopt;
        }
        auto remote = to_remote(*p, item.dump());
        if (!remote) {
            return std::nullopt;
        }
        out.data.push_back(std::move(*remote));
    }
    if (out.total_count < static_cast<long long>(out.data.size())) {
        out.total_count = static_cast<long long>(out.data.size());
    }
    return out;
}

std::optional<CheckoutError> parse_error(std::string_view json_text) {
    const auto parsed = parse_external_json(json_text);
    if (!parsed || !parsed->is_object()) {
        return std::nullopt;
    }
    const json& j = *parsed;
    CheckoutError out;
    const auto type = wire::string_member(j, "error_type");
    if (!type) {
        return std::nullopt;
    }
    out.error_type = *type;
    if (j.contains("error_codes")) {
        if (!j["error_codes"].is_array()) {
            return std::nullopt;
        }
        for (const auto& c : j["error_codes"]) {
            if (c.is_string()) {
                out.error_codes.push_back(c.get<std::string>());
            }
        }
    }
    return out;
}

SubmitResult interpret_create(const PaymentOrder& order, int http_status, std::string_view body) {
    SubmitResult r;
    r.call.http_status = http_status;
    r.call.detail = wire::excerpt(body);
    if (http_status == 201 || http_status == 202) {
        const auto p = parse_payment(body);
        // A 202 (PaymentAcceptedResponse) carries no amount: it must still name our reference.
        const bool amount_ok = p && (p->amount ? *p->amount == order.amount : http_status == 202);
        if (!p || !amount_ok || p->reference != order.operation_id) {
            r.call.error_class = "unrecognised_response";
            return r; // unknown: a success we cannot match to our request proves nothing
        }
        r.provider_reference = p->id;
        if (p->status) {
            r.outcome = map_status_for(*p->status, order.manual_capture);
        } else {
            r.outcome =
                p->approved == std::optional<bool>(false) ? Outcome::declined : Outcome::unknown;
        }
        if (r.outcome == Outcome::succeeded && p->approved == std::optional<bool>(false)) {
            r.outcome = Outcome::unknown; // a status that says charged, a flag that says not
        }
        if (r.outcome == Outcome::declined) {
            r.call.error_class = "card_declined:" + p->response_code.value_or("declined");
        } else if (r.outcome == Outcome::unknown) {
            r.call.error_class = "unexpected_status_" + p->status.value_or("none");
        }
        return r;
    }
    if (http_status == 401 || http_status == 403) {
        // The secret key, or what it may do. Nothing was executed, and Checkout.com saves no
        // non-2xx answer under the key: an operator's retry executes afresh.
        return rejected_request(
            http_status, http_status == 401 ? "unauthorized" : "access_forbidden",
            http_status == 401 ? "Checkout.com refused the secret key (401 Unauthorized)"
                               : "the secret key may not request payments (403 Forbidden)",
            wire::excerpt(body));
    }
    if (http_status == 422) {
        const auto e = parse_error(body);
        if (e && e->error_type == "request_invalid") {
            std::string codes;
            for (const auto& c : e->error_codes) {
                codes += (codes.empty() ? "" : ", ") + c;
            }
            return rejected_request(http_status,
                                    e->error_codes.empty() ? e->error_type : e->error_codes.front(),
                                    "Checkout.com refused the request as invalid: " +
                                        (codes.empty() ? e->error_type : codes),
                                    wire::excerpt(body));
        }
        r.call.error_class = "unrecognised_response";
        return r;
    }
    if (http_status == 409) {
        r.call.error_class = "idempotency_conflict";
        return r; // the first request with our key is still running: it may charge
    }
    if (http_status == 429) {
        r.call.error_class = "too_many_requests";
        return r; // "too many requests or duplicate request detected": the second may be ours
    }
    r.call.error_class = "http_" + std::to_string(http_status);
    return r;
}

// Refunds (POST /payments/{id}/refunds).

std::optional<std::string> refund_body(const RefundOrder& order) {
    const auto amount = to_checkout_amount(order.amount);
    if (!amount || order.payment_reference.empty() || order.operation_id.empty() ||
        order.operation_id.size() > k_max_reference ||
        carry_problem(carry_limits(), order.merchant_reference.value_or(""), order.metadata)) {
        return std::nullopt;
    }
    json metadata = json::object();
    for (const auto& [k, v] : order.metadata) {
        metadata[k] = v;
    }
    metadata["operation_id"] = order.operation_id;
    if (order.merchant_reference) {
        metadata["merchant_reference"] = *order.merchant_reference;
    }
    return json{
        {"amount", *amount}, {"reference", order.operation_id}, {"metadata", std::move(metadata)}}
        .dump();
}

SubmitResult interpret_refund(const RefundOrder& order, int http_status, std::string_view body) {
    SubmitResult r;
    r.call.http_status = http_status;
    r.call.detail = wire::excerpt(body);
    if (http_status == 202) {
        const auto parsed = parse_external_json(body);
        const auto action = parsed ? wire::string_member(*parsed, "action_id") : std::nullopt;
        const auto reference = parsed ? wire::string_member(*parsed, "reference") : std::nullopt;
        if (!action || action->empty() || reference != order.operation_id) {
            r.call.error_class = "unrecognised_response";
            return r; // unknown: an acceptance we cannot match to our request proves nothing
        }
        r.outcome = Outcome::pending; // accepted; card refunds are processed asynchronously
        r.provider_reference = *action;
        return r;
    }
    if (http_status == 401) {
        return rejected_request(http_status, "unauthorized",
                                "Checkout.com refused the secret key (401 Unauthorized)",
                                wire::excerpt(body));
    }
    if (http_status == 403) {
        r.outcome = Outcome::declined; // "Refund not allowed": nothing refunded
        r.call.error_class = "refund_not_allowed";
        return r;
    }
    if (http_status == 404) {
        return rejected_request(http_status, "payment_not_found",
                                "Checkout.com does not know the payment refunded (404)",
                                wire::excerpt(body));
    }
    if (http_status == 422) {
        const auto e = parse_error(body);
        if (e && e->error_type == "request_invalid") {
            std::string codes;
            for (const auto& c : e->error_codes) {
                codes += (codes.empty() ? "" : ", ") + c;
            }
            return rejected_request(http_status,
                                    e->error_codes.empty() ? e->error_type : e->error_codes.front(),
                                    "Checkout.com refused the refund as invalid: " +
                                        (codes.empty() ? e->error_type : codes),
                                    wire::excerpt(body));
        }
        r.call.error_class = "unrecognised_response";
        return r;
    }
    r.call.error_class = http_status == 409   ? "idempotency_conflict"
                         : http_status == 429 ? "too_many_requests"
                                              : "http_" + std::to_string(http_status);
    return r; // the refund may have executed: the reconciler looks it up before any re-send
}

std::optional<std::vector<RemotePayment>>
parse_actions(std::string_view json_text, std::string_view currency, std::string_view type) {
    const auto parsed = parse_external_json(json_text);
    if (!parsed || !parsed->is_array()) {
        return std::nullopt;
    }
    std::vector<RemotePayment> out;
    for (const json& a : *parsed) {
        const auto id = a.is_object() ? wire::string_member(a, "id") : std::nullopt;
        const auto kind = a.is_object() ? wire::string_member(a, "type") : std::nullopt;
        if (!id || !kind || !a.contains("amount") || !a["amount"].is_number_integer()) {
            return std::nullopt; // one unreadable action makes the list untrustworthy
        }
        if (*kind != type) {
            continue;
        }
        const auto money = from_checkout_amount(a["amount"].get<std::int64_t>(), currency);
        if (!money || (a.contains("approved") && !a["approved"].is_boolean())) {
            return std::nullopt;
        }
        RemotePayment r;
        r.provider_reference = *id;
        r.amount = *money;
        r.operation_id = wire::string_member(a, "reference");
        const std::optional<bool> approved =
            a.contains("approved") ? std::optional<bool>(a["approved"].get<bool>()) : std::nullopt;
        r.state = !approved ? Outcome::pending : *approved ? Outcome::succeeded : Outcome::declined;
        r.raw_status = !approved ? "pending" : *approved ? "approved" : "declined";
        if (const auto on = wire::string_member(a, "processed_on")) {
            if (const auto t = wire::parse_rfc3339(*on)) {
                r.created_at = *t;
            }
        }
        r.raw = a.dump();
        out.push_back(std::move(r));
    }
    return out;
}

std::optional<std::vector<RemotePayment>> parse_refund_actions(std::string_view json_text,
                                                               std::string_view currency) {
    return parse_actions(json_text, currency, "Refund");
}

// Captures and voids (POST /payments/{id}/captures, /voids).

std::optional<std::string> capture_body(const AuthorizationOrder& order) {
    const auto amount = to_checkout_amount(order.amount);
    if (!amount || !action_sendable(order)) {
        return std::nullopt;
    }
    return json{{"amount", *amount},
                {"capture_type", order.final ? "Final" : "NonFinal"},
                {"reference", order.operation_id},
                {"metadata", action_metadata(order)}}
        .dump();
}

std::optional<std::string> void_body(const AuthorizationOrder& order) {
    if (!action_sendable(order)) {
        return std::nullopt;
    }
    return json{{"reference", order.operation_id}, {"metadata", action_metadata(order)}}.dump();
}

SubmitResult interpret_authorization_action(const AuthorizationOrder& order, int http_status,
                                            std::string_view body) {
    const bool capture = order.kind == OperationKind::capture;
    const std::string_view what = capture ? "capture" : "void";
    SubmitResult r;
    r.call.http_status = http_status;
    r.call.detail = wire::excerpt(body);
    if (http_status == 202) {
        const auto parsed = parse_external_json(body);
        const auto action = parsed && parsed->is_object()
                                ? wire::string_member(*parsed, "action_id")
                                : std::nullopt;
        const auto reference = parsed && parsed->is_object()
                                   ? wire::string_member(*parsed, "reference")
                                   : std::nullopt;
        if (!action || action->empty() || reference != order.operation_id) {
            r.call.error_class = "unrecognised_response";
            return r; // unknown: an acceptance we cannot match to our request proves nothing
        }
        // Accepted; card captures and voids are processed asynchronously: the action's `approved`
        // says how it ended (lookup_capture, or the payment_captured / payment_voided webhook).
        r.outcome = Outcome::pending;
        r.provider_reference = *action;
        return r;
    }
    if (http_status == 401) {
        return rejected_request(http_status, "unauthorized",
                                "Checkout.com refused the secret key (401 Unauthorized)",
                                wire::excerpt(body));
    }
    if (http_status == 403) {
        // "Capture not allowed", "Void not allowed": the document's only meaning of a 403 here
        // (the authorisation voided or expired, captured already, less left than asked).
        r.outcome = Outcome::declined;
        r.call.error_class = capture ? "capture_not_allowed" : "void_not_allowed";
        return r;
    }
    if (http_status == 404) {
        return rejected_request(http_status, "payment_not_found",
                                "Checkout.com does not know the payment (404) whose authorisation "
                                "the " +
                                    std::string(what) + " names",
                                wire::excerpt(body));
    }
    if (http_status == 422) {
        if (auto rejected = rejected_invalid(http_status, body, what)) {
            return *rejected;
        }
        r.call.error_class = "unrecognised_response";
        return r;
    }
    r.call.error_class = http_status == 409   ? "idempotency_conflict"
                         : http_status == 429 ? "too_many_requests"
                                              : "http_" + std::to_string(http_status);
    return r; // it may have executed: the reconciler looks it up before any re-send
}

LookupResult capture_lookup_answer(const AuthorizationOrder& order, std::string_view body) {
    LookupResult out;
    const auto currency = order.amount.currency;
    const auto authorizations = parse_actions(body, currency, "Authorization");
    const auto actions =
        parse_actions(body, currency, order.kind == OperationKind::capture ? "Capture" : "Void");
    if (!authorizations || !actions) {
        out.call.error_class = "unrecognised_response";
        return out;
    }
    if (authorizations->empty()) {
        out.call.error_class = "no_authorization";
        out.call.detail = "the payment's actions hold no Authorization";
        return out; // failed: not the authorisation the order names, so no proof of absence
    }
    std::vector<RemotePayment> matches;
    for (auto it = actions->rbegin(); it != actions->rend(); ++it) { // oldest first
        if (it->operation_id == order.operation_id) {
            matches.push_back(*it);
        }
    }
    if (matches.empty()) {
        out.status = LookupResult::Status::not_found; // the authorisation untouched by it
        return out;
    }
    out.status = LookupResult::Status::found;
    out.payment = std::move(matches.front());
    out.duplicates.assign(std::make_move_iterator(matches.begin() + 1),
                          std::make_move_iterator(matches.end()));
    return out;
}

} // namespace payrecon::providers::checkout
