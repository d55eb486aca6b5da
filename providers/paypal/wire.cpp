#include "providers/paypal/wire.hpp"

#include "core/external_json.hpp"
#include "providers/wire_util.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <utility>

namespace payrecon::providers::paypal {
namespace {

using nlohmann::json;

constexpr std::int64_t k_int64_max = std::numeric_limits<std::int64_t>::max();

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

// `v` * 10 + `digit`, nullopt past int64.
std::optional<std::int64_t> push_digit(std::int64_t v, int digit) {
    if (v > (k_int64_max - digit) / 10) {
        return std::nullopt;
    }
    return v * 10 + digit;
}

const json* member(const json& obj, const char* key) {
    if (!obj.is_object()) {
        return nullptr;
    }
    const auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
}

// A money object {currency_code, value}, exact in PayPal's units; nullopt if it is not one.
std::optional<Money> money_from(const json* m) {
    if (m == nullptr) {
        return std::nullopt;
    }
    const auto currency = wire::string_member(*m, "currency_code");
    const auto value = wire::string_member(*m, "value");
    if (!currency || !value) {
        return std::nullopt;
    }
    return from_paypal_value(*value, *currency);
}

// An RFC 3339 time, or one whose offset lacks its colon ("2026-12-02T10:00:03+0000"): the schema's
// pattern asks for "+00:00", but a time read wrongly would put a transaction outside every window.
std::optional<std::chrono::system_clock::time_point> time_from(std::string text) {
    const std::size_t n = text.size();
    if (n > 5 && (text[n - 5] == '+' || text[n - 5] == '-') &&
        std::all_of(text.end() - 4, text.end(), is_digit)) {
        text.insert(n - 2, ":");
    }
    return wire::parse_rfc3339(text);
}

// True if the entry moves money out of the account (a refund, a reversal, a fee, a withdrawal:
// a negative gross amount). It is not a charge, though its invoice ID may be that of the capture
// it refunds.
bool money_out(const json& detail) {
    const json* info = member(detail, "transaction_info");
    const json* amount = info == nullptr ? nullptr : member(*info, "transaction_amount");
    const auto value =
        amount == nullptr ? std::optional<std::string>() : wire::string_member(*amount, "value");
    return value && !value->empty() && value->front() == '-';
}

// The event code of a merchant's refund of a payment ("T1107: Payment refund, initiated by
// merchant", PayPal's transaction event codes, group T11nn Reversals): what a refund of a capture
// is listed as. The group's other codes are not refunds we send (T1106, a reversal PayPal
// initiated; T1108, a fee reversal; holds, MassPay).
constexpr std::string_view k_merchant_refund = "T1107";

// The event group of authorizations ("T13nn Authorizations": an authorization, a
// reauthorization, a void), listed under the payment's invoice_id.
constexpr std::string_view k_authorization_group = "T13";

// A charge's entry, or with `refund` a refund's (its negative amount read as the positive amount
// refunded, its status by refund_transaction_status_rules); nullopt if it is unreadable.
std::optional<RemotePayment> transaction_from(const json& detail, bool refund) {
    const json* info = member(detail, "transaction_info");
    if (info == nullptr || !info->is_object()) {
        return std::nullopt;
    }
    const auto id = wire::string_member(*info, "transaction_id");
    const json* amount = member(*info, "transaction_amount");
    if (!id || id->empty() || amount == nullptr) {
        return std::nullopt;
    }
    auto value = wire::string_member(*amount, "value");
    const auto currency = wire::string_member(*amount, "currency_code");
    if (refund && value && !value->empty() && value->front() == '-') {
        value->erase(0, 1); // money out: the refund's amount is what left the account
    }
    const auto money = value && currency ? from_paypal_value(*value, *currency) : std::nullopt;
    if (!money) {
        return std::nullopt;
    }
    RemotePayment p;
    p.provider_reference = *id;
    p.amount = *money;
    p.raw_status = wire::string_member(*info, "transaction_status").value_or("");
    p.state =
        refund ? map_refund_transaction_status(p.raw_status) : map_transaction_status(p.raw_status);
    const std::string code = wire::string_member(*info, "transaction_event_code").value_or("");
    if (!refund && code.starts_with(k_authorization_group)) {
        // An authorization: P still capturable, S captured (by entries of their own, so what it
        // took is not said here), V voided or expired, D denied.
        p.state = p.raw_status == "P" || p.raw_status == "S"   ? Outcome::succeeded
                  : p.raw_status == "V" || p.raw_status == "D" ? Outcome::declined
                                                               : Outcome::unknown;
        p.awaiting_capture = p.raw_status == "P";
        p.captured_unsaid = true;
    } else if (!refund && p.raw_status == "V") {
        p.amount_refunded_minor = p.amount.minor; // "fully reversed and funds were refunded"
    }
    // A capture of an authorization refers to the authorization's transaction (TXN); a capture of
    // an order, to the order (ODR).
    p.listed_capture =
        !refund && !code.starts_with(k_authorization_group) &&
        wire::string_member(*info, "paypal_reference_id_type") == std::optional<std::string>("TXN");
    const auto invoice_id = wire::string_member(*info, "invoice_id");
    const auto custom_field = wire::string_member(*info, "custom_field");
    if (invoice_id && !invoice_id->empty()) {
        p.operation_id = *invoice_id;
    } else if (custom_field && !custom_field->empty()) {
        p.operation_id = *custom_field;
    }
    if (const auto at = wire::string_member(*info, "transaction_initiation_date")) {
        if (const auto t = time_from(*at)) {
            p.created_at = *t;
        }
    }
    p.raw = info->dump();
    return p;
}

// Whether PayPal's error names `issue` among its details.
bool has_issue(const PaypalError& err, std::string_view issue) {
    return std::find(err.issues.begin(), err.issues.end(), issue) != err.issues.end();
}

// What an answer other than a 2xx means, for a create and a refund alike: 429 not_sent; 401
// rejected (PayPal's envelope, else the OAuth2 error); 5xx and anything without PayPal's envelope
// unknown; then `special(status, error, first issue)` decides what it recognises (its result's
// call gets the status and the excerpt); else 400, 403, 415 and 422 rejected with the issue (else
// the name) and description, and anything else (404, 409, ...) unknown.
SubmitResult error_outcome(
    SubmitResult r, int http_status, std::string_view body,
    const std::function<std::optional<SubmitResult>(int, const PaypalError&, const std::string&)>&
        special) {
    if (http_status == 429) {
        r.outcome = Outcome::not_sent; // "Too many requests. Blocked due to rate limiting."
        r.call.error_class = "rate_limited";
        return r;
    }
    const auto err = parse_error(body);
    const std::string issue = err && !err->issues.empty() ? err->issues.front() : "";
    const auto message = [&err]() {
        if (!err) {
            return std::string();
        }
        std::string m = err->description.empty() ? err->message : err->description;
        if (!err->debug_id.empty()) {
            m += (m.empty() ? "" : " ") + std::string("(debug_id ") + err->debug_id + ")";
        }
        return m;
    };
    if (http_status == 401) {
        // The access token was refused even after a fresh one (ProviderClient sends once more), or
        // the token endpoint refused the client credentials (its OAuth2 error passed on).
        std::string code = err && !err->name.empty() ? err->name : "";
        std::string said = message();
        if (code.empty()) {
            if (const auto parsed = parse_external_json(body); parsed && parsed->is_object()) {
                code = wire::string_member(*parsed, "error").value_or("");
                said = wire::string_member(*parsed, "error_description").value_or("");
            }
        }
        return rejected_request(http_status, code.empty() ? "AUTHENTICATION_FAILURE" : code, said,
                                wire::excerpt(body));
    }
    if (http_status >= 500 || !err || err->name.empty()) {
        r.call.error_class =
            http_status >= 500 ? "http_" + std::to_string(http_status) : "unrecognised_response";
        return r;
    }
    if (auto decided = special(http_status, *err, issue)) {
        decided->call.http_status = r.call.http_status;
        decided->call.detail = r.call.detail;
        return *decided;
    }
    if (http_status == 400 || http_status == 403 || http_status == 415 || http_status == 422) {
        return rejected_request(http_status, issue.empty() ? err->name : issue, message(),
                                wire::excerpt(body));
    }
    r.call.error_class = "http_" + std::to_string(http_status);
    return r;
}

} // namespace

std::optional<int> paypal_exponent(std::string_view currency) {
    return wire::provider_exponent(currency, {{"HUF", 0}, {"JPY", 0}, {"TWD", 0}});
}

std::optional<std::string> format_decimal(std::int64_t units, int exponent) {
    if (units < 0 || exponent < 0 || exponent > 18) {
        return std::nullopt;
    }
    std::string digits = std::to_string(units);
    const auto exp = static_cast<std::size_t>(exponent);
    if (digits.size() <= exp) {
        digits.insert(0, exp + 1 - digits.size(), '0');
    }
    const std::size_t integer_digits = digits.size() - exp;
    if (integer_digits > static_cast<std::size_t>(k_max_integer_digits)) {
        return std::nullopt;
    }
    if (exp == 0) {
        return digits;
    }
    return digits.substr(0, integer_digits) + "." + digits.substr(integer_digits);
}

std::optional<std::int64_t> parse_decimal(std::string_view text, int exponent) {
    if (exponent < 0 || exponent > 18 || text.empty() || !is_digit(text.front())) {
        return std::nullopt;
    }
    std::int64_t v = 0;
    std::size_t pos = 0;
    while (pos < text.size() && is_digit(text[pos])) {
        const auto next = push_digit(v, text[pos] - '0');
        if (!next) {
            return std::nullopt;
        }
        v = *next;
        ++pos;
    }
    int fraction = 0;
    if (pos < text.size()) {
        if (text[pos] != '.' || pos + 1 == text.size()) {
            return std::nullopt;
        }
        ++pos;
        while (pos < text.size()) {
            if (!is_digit(text[pos]) || fraction == exponent) {
                return std::nullopt; // not a digit, or more fractional digits than the exponent
            }
            const auto next = push_digit(v, text[pos] - '0');
            if (!next) {
                return std::nullopt;
            }
            v = *next;
            ++fraction;
            ++pos;
        }
    }
    for (; fraction < exponent; ++fraction) {
        const auto next = push_digit(v, 0);
        if (!next) {
            return std::nullopt;
        }
        v = *next;
    }
    return v;
}

std::optional<std::string> to_paypal_value(const Money& money) {
    const auto exponent = paypal_exponent(money.currency);
    if (!exponent || money.minor <= 0 || !find_currency(money.currency)) {
        return std::nullopt;
    }
    const auto units = wire::to_provider_units(money, exponent);
    if (!units) {
        return std::nullopt;
    }
    return format_decimal(*units, *exponent);
}

std::optional<Money> from_paypal_value(std::string_view value, std::string_view currency) {
    const auto exponent = paypal_exponent(currency);
    if (!exponent) {
        return std::nullopt;
    }
    const auto units = parse_decimal(value, *exponent);
    if (!units) {
        return std::nullopt;
    }
    return wire::from_provider_units(*units, currency, exponent);
}

const CarryLimits& carry_limits() {
    static const CarryLimits k_limits{
        "PayPal", MetadataLimits{0, {}, 0, 0, "PayPal's Orders v2 create has no metadata field"}};
    return k_limits;
}

std::optional<std::string> create_body(const PaymentOrder& order) {
    // vault_id: "minLength": 1, "maxLength": 255, "pattern": "^[0-9a-zA-Z_-]+$".
    static const std::regex k_vault_id("^[0-9a-zA-Z_-]{1,255}$");
    const auto value = to_paypal_value(order.amount);
    const std::string& op = order.operation_id;
    if (!value || op.empty() || op.size() > k_max_key_length || op.size() > k_max_invoice_id ||
        !std::regex_match(order.payment_method, k_vault_id) ||
        (order.description && order.description->size() > k_max_description) ||
        carry_problem(carry_limits(), order.merchant_reference, order.metadata)) {
        return std::nullopt;
    }
    json unit = {
        {"reference_id", order.payment_id.empty() ? op : order.payment_id},
        {"invoice_id", op},
        {"custom_id", op},
        {"amount", {{"currency_code", wire::upper(order.amount.currency)}, {"value", *value}}},
    };
    if (order.description && !order.description->empty()) {
        unit["description"] = *order.description;
    }
    const json body = {
        {"intent", order.manual_capture ? "AUTHORIZE" : "CAPTURE"},
        {"purchase_units", json::array({unit})},
        {"payment_source", {{"card", {{"vault_id", order.payment_method}}}}},
    };
    return body.dump();
}

constexpr StatusRule k_capture_status_rules[] = {
    {"COMPLETED", Outcome::succeeded, "captured: charged"},
    {"DECLINED", Outcome::declined, "the capture was declined"},
    {"FAILED", Outcome::declined, "the capture failed: no charge"},
    {"PENDING", Outcome::pending,
     "captured, funds not yet settled (status_details.reason says why)"},
    {"PARTIALLY_REFUNDED", Outcome::succeeded,
     "charged, then refunded in part (a replay shows the latest status)"},
    {"REFUNDED", Outcome::succeeded, "charged, then refunded (a replay shows the latest status)"},
};

std::span<const StatusRule> capture_status_rules() {
    return k_capture_status_rules;
}

Outcome map_capture_status(std::string_view status) {
    return outcome_by_rules(k_capture_status_rules, status);
}

constexpr StatusRule k_refund_transaction_status_rules[] = {
    {"S", Outcome::succeeded, "refunded"},
    {"P", Outcome::pending, "not final yet"},
    {"D", Outcome::declined, "denied: nothing given back"},
    {"V", Outcome::declined, "reversed: the refund was taken back, nothing stays refunded"},
};

std::span<const StatusRule> refund_transaction_status_rules() {
    return k_refund_transaction_status_rules;
}

Outcome map_refund_transaction_status(std::string_view code) {
    return outcome_by_rules(k_refund_transaction_status_rules, code);
}

Outcome map_transaction_status(std::string_view code) {
    if (code == "S" || code == "V") {
        return Outcome::succeeded;
    }
    if (code == "P") {
        return Outcome::pending;
    }
    if (code == "D") {
        return Outcome::declined;
    }
    return Outcome::unknown;
}

std::optional<PaypalError> parse_error(std::string_view body) {
    const auto parsed = parse_external_json(body);
    if (!parsed || !parsed->is_object()) {
        return std::nullopt;
    }
    const json& j = *parsed;
    const auto name = wire::string_member(j, "name");
    if (!name) {
        return std::nullopt;
    }
    PaypalError e;
    e.name = *name;
    e.message = wire::string_member(j, "message").value_or("");
    e.debug_id = wire::string_member(j, "debug_id").value_or("");
    if (const json* details = member(j, "details"); details != nullptr && details->is_array()) {
        for (const json& d : *details) {
            const auto issue = wire::string_member(d, "issue");
            if (!issue) {
                continue;
            }
            if (e.issues.empty()) {
                e.description = wire::string_member(d, "description").value_or("");
            }
            e.issues.push_back(*issue);
        }
    }
    return e;
}

std::optional<Order> parse_order(std::string_view body) {
    const auto parsed = parse_external_json(body);
    if (!parsed || !parsed->is_object()) {
        return std::nullopt;
    }
    const json& j = *parsed;
    const auto id = wire::string_member(j, "id");
    const auto status = wire::string_member(j, "status");
    if (!id || !status) {
        return std::nullopt;
    }
    Order o;
    o.id = *id;
    o.status = *status;
    const json* units = member(j, "purchase_units");
    if (units == nullptr || !units->is_array() || units->empty()) {
        return o;
    }
    o.purchase_units = units->size();
    const json& unit = units->front();
    o.amount = money_from(member(unit, "amount"));
    o.invoice_id = wire::string_member(unit, "invoice_id");
    o.custom_id = wire::string_member(unit, "custom_id");
    const json* payments = member(unit, "payments");
    const auto read = [payments](const char* name, std::vector<Capture>& into) {
        const json* list = payments == nullptr ? nullptr : member(*payments, name);
        if (list == nullptr || !list->is_array()) {
            return;
        }
        for (const json& c : *list) {
            Capture capture;
            capture.id = wire::string_member(c, "id").value_or("");
            capture.status = wire::string_member(c, "status").value_or("");
            capture.amount = money_from(member(c, "amount"));
            capture.invoice_id = wire::string_member(c, "invoice_id");
            capture.custom_id = wire::string_member(c, "custom_id");
            into.push_back(std::move(capture));
        }
    };
    read("captures", o.captures);
    read("authorizations", o.authorizations);
    return o;
}

namespace {

// A search page's charges, or with `refunds` its merchant refunds (T1107).
std::optional<SearchPage> search_page(std::string_view body, bool refunds) {
    const auto parsed = parse_external_json(body);
    if (!parsed || !parsed->is_object()) {
        return std::nullopt;
    }
    const json& j = *parsed;
    const json* total_pages = member(j, "total_pages");
    if (total_pages == nullptr || !total_pages->is_number_integer() ||
        total_pages->get<std::int64_t>() < 0) {
        return std::nullopt;
    }
    SearchPage page;
    page.total_pages = total_pages->get<std::int64_t>();
    const json* details = member(j, "transaction_details");
    if (details == nullptr) {
        return page;
    }
    if (!details->is_array()) {
        return std::nullopt;
    }
    for (const json& d : *details) {
        if (refunds) {
            const json* info = member(d, "transaction_info");
            const auto code = info == nullptr
                                  ? std::optional<std::string>()
                                  : wire::string_member(*info, "transaction_event_code");
            if (!code) {
                return std::nullopt; // an entry we cannot place could be one of our refunds
            }
            if (*code != k_merchant_refund) {
                continue;
            }
        } else if (money_out(d)) {
            continue;
        }
        auto p = transaction_from(d, refunds);
        if (!p) {
            return std::nullopt; // one unreadable entry makes the page untrustworthy
        }
        page.items.push_back(std::move(*p));
    }
    return page;
}

} // namespace

std::optional<SearchPage> parse_search_page(std::string_view body) {
    return search_page(body, false);
}

std::optional<SearchPage> parse_refund_search_page(std::string_view body) {
    return search_page(body, true);
}

bool declined_issue(std::string_view issue) {
    static constexpr std::string_view k_declined[] = {
        "INSTRUMENT_DECLINED",
        "TRANSACTION_REFUSED",
        "PAYMENT_SOURCE_DECLINED_BY_PROCESSOR",
        "PAYMENT_SOURCE_CANNOT_BE_USED",
        "CARD_EXPIRED",
        "PAYER_CANNOT_PAY",
        "PAYER_ACCOUNT_RESTRICTED",
        "PAYER_ACCOUNT_LOCKED_OR_CLOSED",
        "COMPLIANCE_VIOLATION",
        "TRANSACTION_LIMIT_EXCEEDED",
        "PAYEE_BLOCKED_TRANSACTION",
        "TRANSACTION_BLOCKED_BY_PAYEE",
        "MAX_NUMBER_OF_PAYMENT_ATTEMPTS_EXCEEDED",
        "INVALID_CURRENCY_CODE",
        "MAX_VALUE_EXCEEDED",
    };
    return std::find(std::begin(k_declined), std::end(k_declined), issue) != std::end(k_declined);
}

SubmitResult interpret_create(const PaymentOrder& order, int http_status, std::string_view body) {
    SubmitResult r;
    r.call.http_status = http_status;
    r.call.detail = wire::excerpt(body);
    const std::string& op = order.operation_id;
    if (http_status >= 200 && http_status < 300) {
        const auto o = parse_order(body);
        const auto ours = [&op](const std::optional<std::string>& id) { return !id || *id == op; };
        const auto same_amount = [&order](const std::optional<Money>& m) {
            return !m || *m == order.amount;
        };
        // An order that only authorises is read by its one authorization (captured since, on a
        // replay, or not), one that captures at once by its one capture.
        const std::vector<Capture>* payments = !o                     ? nullptr
                                               : order.manual_capture ? &o->authorizations
                                                                      : &o->captures;
        const Capture* capture = payments && payments->size() == 1 ? &payments->front() : nullptr;
        // The echo: one purchase unit, our invoice ID on it or its capture and nobody else's, our
        // amount and currency on the capture (else on the unit) and no other.
        const bool echoes = o && o->purchase_units == 1 &&
                            (o->invoice_id || (capture && capture->invoice_id)) &&
                            ours(o->invoice_id) && ours(o->custom_id) && same_amount(o->amount) &&
                            (capture ? capture->amount && same_amount(capture->amount) &&
                                           ours(capture->invoice_id) && ours(capture->custom_id)
                                     : o->amount.has_value());
        if (!echoes || payments->size() > 1 || (capture && capture->id.empty()) || o->id.empty() ||
            (order.manual_capture && !o->captures.empty() && !capture)) {
            r.call.error_class = "unrecognised_response";
            return r; // unknown: a success we cannot match to our request proves nothing
        }
        if (capture) {
            r.provider_reference = capture->id;
            r.outcome = order.manual_capture ? map_authorization_status(capture->status)
                                             : map_capture_status(capture->status);
            r.call.error_class =
                r.outcome == Outcome::unknown ? "unexpected_status_" + capture->status
                : r.outcome == Outcome::declined
                    ? (order.manual_capture ? "authorization_" : "capture_") + capture->status
                    : "";
            return r;
        }
        r.provider_reference = o->id;
        if (o->status == "PAYER_ACTION_REQUIRED") {
            r.outcome = Outcome::pending; // the payer must act: it cannot finish off-session
            r.call.error_class = "payer_action_required";
        } else if (o->status == "VOIDED") {
            r.outcome = Outcome::declined; // "all purchase units in the order are voided"
            r.call.error_class = "order_voided";
        } else {
            r.call.error_class = "order_" + o->status + "_without_capture";
        }
        return r;
    }
    return error_outcome(std::move(r), http_status, body,
                         [](int status, const PaypalError& err,
                            const std::string& issue) -> std::optional<SubmitResult> {
                             SubmitResult out;
                             if (status == 422 && has_issue(err, "DUPLICATE_INVOICE_ID")) {
                                 // A transaction with our invoice ID exists: it may be our first
                                 // attempt's.
                                 out.call.error_class = "DUPLICATE_INVOICE_ID";
                                 return out;
                             }
                             if (status == 422 && declined_issue(issue)) {
                                 out.outcome = Outcome::declined;
                                 out.call.error_class = "declined:" + issue;
                                 return out;
                             }
                             return std::nullopt;
                         });
}

namespace {

// `text` cut to at most `max` bytes, never inside a UTF-8 character.
std::string cut_utf8(std::string text, std::size_t max) {
    if (text.size() <= max) {
        return text;
    }
    std::size_t end = max;
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
        --end; // text[end] continues a character: cut before that character
    }
    text.resize(end);
    return text;
}

// One refund object (the Payments document's `refund`); nullopt if it has no ID or no exact
// amount.
std::optional<RemotePayment> refund_from(const json& r) {
    const auto id = r.is_object() ? wire::string_member(r, "id") : std::nullopt;
    const auto money = money_from(member(r, "amount"));
    if (!id || id->empty() || !money) {
        return std::nullopt;
    }
    RemotePayment p;
    p.provider_reference = *id;
    p.amount = *money;
    p.raw_status = wire::string_member(r, "status").value_or("");
    p.state = map_refund_status(p.raw_status);
    const auto invoice_id = wire::string_member(r, "invoice_id");
    const auto custom_id = wire::string_member(r, "custom_id");
    if (invoice_id && !invoice_id->empty()) {
        p.operation_id = *invoice_id;
    } else if (custom_id && !custom_id->empty()) {
        p.operation_id = *custom_id;
    }
    if (const auto at = wire::string_member(r, "create_time")) {
        if (const auto t = time_from(*at)) {
            p.created_at = *t;
        }
    }
    p.raw = r.dump();
    return p;
}

} // namespace

std::optional<std::string> refund_body(const RefundOrder& order) {
    const auto value = to_paypal_value(order.amount);
    const std::string& op = order.operation_id;
    if (!value || op.empty() || op.size() > k_max_key_length || op.size() > k_max_invoice_id) {
        return std::nullopt;
    }
    json body = {
        {"amount", {{"value", *value}, {"currency_code", wire::upper(order.amount.currency)}}},
        {"invoice_id", op},
        {"custom_id", op},
    };
    if (order.reason && !order.reason->empty()) {
        body["note_to_payer"] = cut_utf8(*order.reason, k_max_note_to_payer);
    }
    return body.dump();
}

constexpr StatusRule k_refund_status_rules[] = {
    {"COMPLETED", Outcome::succeeded, "refunded"},
    {"PENDING", Outcome::pending, "not final yet (status_details.reason says why, e.g. ECHECK)"},
    {"FAILED", Outcome::declined, "the refund failed: nothing given back"},
    {"CANCELLED", Outcome::declined, "the refund was cancelled: nothing given back"},
};

std::span<const StatusRule> refund_status_rules() {
    return k_refund_status_rules;
}

Outcome map_refund_status(std::string_view status) {
    return outcome_by_rules(k_refund_status_rules, status);
}

bool refund_declined_issue(std::string_view issue) {
    static constexpr std::string_view k_declined[] = {
        "CAPTURE_FULLY_REFUNDED",
        "REFUND_AMOUNT_EXCEEDED",
        "REFUND_NOT_ALLOWED",
        "REFUND_TIME_LIMIT_EXCEEDED",
        "PARTIAL_REFUND_NOT_ALLOWED",
        "MAX_NUMBER_OF_REFUNDS_EXCEEDED",
        "PENDING_CAPTURE",
        "REFUND_FAILED_INSUFFICIENT_FUNDS",
        "REFUND_AMOUNT_TOO_LOW",
        "REFUND_NOT_PERMITTED_DUE_TO_CHARGEBACK",
        "TRANSACTION_DISPUTED",
        "PAYER_ACCOUNT_LOCKED_OR_CLOSED",
    };
    return std::find(std::begin(k_declined), std::end(k_declined), issue) != std::end(k_declined);
}

SubmitResult interpret_refund(const RefundOrder& order, int http_status, std::string_view body) {
    SubmitResult r;
    r.call.http_status = http_status;
    r.call.detail = wire::excerpt(body);
    if (http_status >= 200 && http_status < 300) {
        const auto parsed = parse_external_json(body);
        const auto refund = parsed && parsed->is_object() ? refund_from(*parsed) : std::nullopt;
        if (!refund || refund->operation_id != order.operation_id ||
            !(refund->amount == order.amount)) {
            r.call.error_class = "unrecognised_response";
            return r; // unknown: a success we cannot match to our request proves nothing
        }
        r.provider_reference = refund->provider_reference;
        r.outcome = refund->state;
        r.call.error_class = r.outcome == Outcome::unknown
                                 ? "unexpected_status_" + refund->raw_status
                             : r.outcome == Outcome::declined ? "refund_" + refund->raw_status
                                                              : "";
        return r;
    }
    return error_outcome(std::move(r), http_status, body,
                         [&body](int status, const PaypalError& err,
                                 const std::string& issue) -> std::optional<SubmitResult> {
                             SubmitResult out;
                             if (status == 422 && has_issue(err, "DUPLICATE_INVOICE_ID")) {
                                 // "Invoice ID was previously used to refund a capture": ours,
                                 // perhaps, sent before PayPal forgot the request ID. The
                                 // reconciler looks it up.
                                 out.call.error_class = "DUPLICATE_INVOICE_ID";
                                 return out;
                             }
                             if (status == 422 && refund_declined_issue(issue)) {
                                 out.outcome = Outcome::declined;
                                 out.call.error_class = "refund_declined:" + issue;
                                 return out;
                             }
                             if (status == 404) {
                                 // The capture refunded does not exist: nothing was executed.
                                 return rejected_request(status, issue.empty() ? err.name : issue,
                                                         "PayPal knows no such capture (404 " +
                                                             err.name + ")",
                                                         wire::excerpt(body));
                             }
                             return std::nullopt;
                         });
}

namespace {

// The order a Payments v2 object belongs to: supplementary_data.related_ids.order_id, else the
// last segment of its `up` link when that points at /v2/checkout/orders/.
std::optional<std::string> related_order(const json& j) {
    const json* supplementary = member(j, "supplementary_data");
    const json* related =
        supplementary == nullptr ? nullptr : member(*supplementary, "related_ids");
    if (related != nullptr) {
        if (auto order_id = wire::string_member(*related, "order_id");
            order_id && !order_id->empty()) {
            return order_id;
        }
    }
    if (const json* links = member(j, "links"); links != nullptr && links->is_array()) {
        static constexpr std::string_view k_orders_path = "/v2/checkout/orders/";
        for (const json& l : *links) {
            const auto rel = wire::string_member(l, "rel");
            const auto href = wire::string_member(l, "href");
            if (rel != "up" || !href) {
                continue;
            }
            const auto at = href->find(k_orders_path);
            if (at == std::string::npos) {
                continue;
            }
            std::string rest = href->substr(at + k_orders_path.size());
            if (!rest.empty() && rest.find_first_of("/?#") == std::string::npos) {
                return rest;
            }
        }
    }
    return std::nullopt;
}

} // namespace

std::optional<CaptureDetails> parse_capture(std::string_view body) {
    const auto parsed = parse_external_json(body);
    if (!parsed || !parsed->is_object()) {
        return std::nullopt;
    }
    const json& j = *parsed;
    const auto id = wire::string_member(j, "id");
    if (!id) {
        return std::nullopt;
    }
    CaptureDetails c;
    c.id = *id;
    c.status = wire::string_member(j, "status").value_or("");
    c.order_id = related_order(j);
    return c;
}

std::optional<std::vector<RemotePayment>> parse_order_refunds(std::string_view body) {
    const auto parsed = parse_external_json(body);
    if (!parsed || !parsed->is_object() || !wire::string_member(*parsed, "id")) {
        return std::nullopt;
    }
    std::vector<RemotePayment> out;
    const json* units = member(*parsed, "purchase_units");
    if (units == nullptr) {
        return out;
    }
    if (!units->is_array()) {
        return std::nullopt;
    }
    for (const json& unit : *units) {
        const json* payments = member(unit, "payments");
        const json* refunds = payments == nullptr ? nullptr : member(*payments, "refunds");
        if (refunds == nullptr) {
            continue;
        }
        if (!refunds->is_array()) {
            return std::nullopt;
        }
        for (const json& r : *refunds) {
            auto refund = refund_from(r);
            if (!refund) {
                return std::nullopt; // one unreadable refund makes the list untrustworthy
            }
            out.push_back(std::move(*refund));
        }
    }
    return out;
}

namespace {

constexpr StatusRule k_authorization_status_rules[] = {
    {"CREATED", Outcome::succeeded, "authorised: the amount is held, nothing captured yet"},
    {"PARTIALLY_CAPTURED", Outcome::succeeded,
     "authorised, captured in part since (the captures are other operations)"},
    {"CAPTURED", Outcome::succeeded,
     "authorised, captured since (the captures are other operations)"},
    {"PENDING", Outcome::pending, "not authorised yet (status_details.reason says why)"},
    {"DENIED", Outcome::declined, "the authorisation was denied: nothing held"},
    {"VOIDED", Outcome::declined, "voided: nothing held"},
    {"EXPIRED", Outcome::declined, "expired (29 days): nothing held"},
    {"PARTIALLY_CREATED", Outcome::unknown,
     "less than the amount asked was authorised: not what payrecon asked, an operator decides"},
};

// The authorization statuses under which it can still be captured, or voided.
bool capturable(std::string_view status) {
    return status == "CREATED" || status == "PARTIALLY_CAPTURED";
}

} // namespace

std::span<const StatusRule> authorization_status_rules() {
    return k_authorization_status_rules;
}

Outcome map_authorization_status(std::string_view status) {
    return outcome_by_rules(k_authorization_status_rules, status);
}

std::optional<AuthorizationDetails> parse_authorization(std::string_view body) {
    const auto parsed = parse_external_json(body);
    if (!parsed || !parsed->is_object()) {
        return std::nullopt;
    }
    const json& j = *parsed;
    const auto id = wire::string_member(j, "id");
    const auto status = wire::string_member(j, "status");
    if (!id || !status) {
        return std::nullopt;
    }
    AuthorizationDetails a;
    a.id = *id;
    a.status = *status;
    a.amount = money_from(member(j, "amount"));
    a.order_id = related_order(j);
    a.invoice_id = wire::string_member(j, "invoice_id");
    a.custom_id = wire::string_member(j, "custom_id");
    return a;
}

std::optional<std::string> capture_body(const AuthorizationOrder& order) {
    const auto value = to_paypal_value(order.amount);
    const std::string& op = order.operation_id;
    if (!value || op.empty() || op.size() > k_max_key_length || op.size() > k_max_invoice_id ||
        order.payment_reference.empty()) {
        return std::nullopt;
    }
    const json body = {
        {"amount", {{"value", *value}, {"currency_code", wire::upper(order.amount.currency)}}},
        {"final_capture", order.final},
        {"invoice_id", op},
    };
    return body.dump();
}

bool capture_declined_issue(std::string_view issue) {
    static constexpr std::string_view k_declined[] = {
        "AUTHORIZATION_VOIDED",
        "AUTHORIZATION_EXPIRED",
        "MAX_CAPTURE_AMOUNT_EXCEEDED",
        "MAX_CAPTURE_COUNT_EXCEEDED",
    };
    return declined_issue(issue) ||
           std::find(std::begin(k_declined), std::end(k_declined), issue) != std::end(k_declined);
}

namespace {

// What a capture and a void answer alike outside a 2xx (README.md's tables): `special` first,
// then 404 rejected (no such authorization: nothing executed), 409 and the rest as
// error_outcome.
SubmitResult authorization_error(
    SubmitResult r, int http_status, std::string_view body,
    const std::function<std::optional<SubmitResult>(int, const PaypalError&, const std::string&)>&
        special) {
    return error_outcome(std::move(r), http_status, body,
                         [&](int status, const PaypalError& err,
                             const std::string& issue) -> std::optional<SubmitResult> {
                             if (auto decided = special(status, err, issue)) {
                                 return decided;
                             }
                             if (status == 404) {
                                 return rejected_request(
                                     status, issue.empty() ? err.name : issue,
                                     "PayPal knows no such authorization (404 " + err.name + ")",
                                     wire::excerpt(body));
                             }
                             return std::nullopt;
                         });
}

SubmitResult unknown_for(std::string error_class) {
    SubmitResult out;
    out.call.error_class = std::move(error_class);
    return out;
}

SubmitResult declined_for(std::string error_class) {
    SubmitResult out;
    out.outcome = Outcome::declined;
    out.call.error_class = std::move(error_class);
    return out;
}

} // namespace

SubmitResult interpret_capture(const AuthorizationOrder& order, int http_status,
                               std::string_view body) {
    SubmitResult r;
    r.call.http_status = http_status;
    r.call.detail = wire::excerpt(body);
    if (http_status >= 200 && http_status < 300) {
        const auto parsed = parse_external_json(body);
        const json* j = parsed && parsed->is_object() ? &*parsed : nullptr;
        const auto id = j ? wire::string_member(*j, "id") : std::nullopt;
        const auto status = j ? wire::string_member(*j, "status") : std::nullopt;
        const auto invoice_id = j ? wire::string_member(*j, "invoice_id") : std::nullopt;
        const auto amount = j ? money_from(member(*j, "amount")) : std::nullopt;
        if (!id || id->empty() || !status || invoice_id != order.operation_id || !amount ||
            !(*amount == order.amount)) {
            r.call.error_class = "unrecognised_response";
            return r; // unknown: a success we cannot match to our request proves nothing
        }
        r.provider_reference = *id;
        r.outcome = map_capture_status(*status);
        r.call.error_class = r.outcome == Outcome::unknown    ? "unexpected_status_" + *status
                             : r.outcome == Outcome::declined ? "capture_" + *status
                                                              : "";
        return r;
    }
    return authorization_error(std::move(r), http_status, body,
                               [](int status, const PaypalError& err,
                                  const std::string& issue) -> std::optional<SubmitResult> {
                                   if (status != 422) {
                                       return std::nullopt;
                                   }
                                   if (has_issue(err, "AUTHORIZATION_ALREADY_CAPTURED") ||
                                       has_issue(err, "PREVIOUSLY_CAPTURED")) {
                                       // Closed by a capture: perhaps this very one, executed once,
                                       // its answer lost and its request ID forgotten. The lookup
                                       // reads the order's captures.
                                       return unknown_for("already_captured");
                                   }
                                   if (has_issue(err, "DUPLICATE_INVOICE_ID")) {
                                       return unknown_for(
                                           "DUPLICATE_INVOICE_ID"); // a capture with our invoice ID
                                   }
                                   if (capture_declined_issue(issue)) {
                                       return declined_for("capture_declined:" + issue);
                                   }
                                   return std::nullopt;
                               });
}

SubmitResult interpret_void(const AuthorizationOrder& order, int http_status,
                            std::string_view body) {
    SubmitResult r;
    r.call.http_status = http_status;
    r.call.detail = wire::excerpt(body);
    if (http_status == 204) {
        // return=minimal: "No Content", the void done.
        r.outcome = Outcome::succeeded;
        r.provider_reference = order.payment_reference;
        return r;
    }
    if (http_status >= 200 && http_status < 300) {
        const auto a = parse_authorization(body);
        if (!a || a->id != order.payment_reference) {
            r.call.error_class = "unrecognised_response";
            return r;
        }
        r.provider_reference = a->id;
        if (a->status == "VOIDED") {
            r.outcome = Outcome::succeeded;
        } else {
            r.call.error_class = "unexpected_status_" + a->status;
        }
        return r;
    }
    return authorization_error(
        std::move(r), http_status, body,
        [](int status, const PaypalError& err,
           const std::string& issue) -> std::optional<SubmitResult> {
            if (status != 422) {
                return std::nullopt;
            }
            if (issue == "PREVIOUSLY_CAPTURED" || issue == "AUTHORIZATION_ALREADY_CAPTURED") {
                return declined_for("void_declined:" + issue); // captured: nothing to release
            }
            if (has_issue(err, "PREVIOUSLY_VOIDED") || has_issue(err, "AUTHORIZATION_VOIDED") ||
                has_issue(err, "AUTHORIZATION_EXPIRED")) {
                // Released already: perhaps by this very void. The lookup reads the authorization.
                return unknown_for("already_released:" + issue);
            }
            return std::nullopt;
        });
}

LookupResult capture_lookup_answer(const AuthorizationOrder& order,
                                   std::string_view authorization_body,
                                   const std::optional<std::string>& order_body) {
    LookupResult out;
    const auto a = parse_authorization(authorization_body);
    if (!a || a->id != order.payment_reference ||
        (a->amount && wire::upper(a->amount->currency) != wire::upper(order.amount.currency))) {
        out.call.error_class = "unrecognised_response";
        out.call.detail = "not the authorization " + order.payment_reference;
        return out;
    }
    const Outcome held = map_authorization_status(a->status);
    if (held == Outcome::unknown) {
        out.call.error_class = "unexpected_status_" + a->status;
        return out;
    }
    RemotePayment authorization;
    authorization.provider_reference = a->id;
    authorization.operation_id = order.operation_id;
    authorization.amount = a->amount.value_or(order.amount);
    authorization.raw_status = a->status;
    authorization.raw = std::string(authorization_body);
    const auto found = [&out](RemotePayment p) {
        out.status = LookupResult::Status::found;
        out.payment = std::move(p);
    };
    if (order.kind == OperationKind::void_authorization) {
        if (a->status == "VOIDED" || a->status == "EXPIRED") {
            authorization.state = Outcome::succeeded; // released, whoever released it
            found(std::move(authorization));
        } else if (a->status == "CAPTURED" || a->status == "DENIED") {
            authorization.state = Outcome::declined;
            found(std::move(authorization));
        } else {
            out.status = LookupResult::Status::not_found;
        }
        return out;
    }
    const auto o = order_body ? parse_order(*order_body) : std::nullopt;
    if (!o || (a->order_id && o->id != *a->order_id)) {
        out.call.error_class = "unrecognised_response";
        out.call.detail = "not the authorization's order";
        return out;
    }
    std::vector<RemotePayment> matches;
    for (const Capture& c : o->captures) {
        if (c.invoice_id != order.operation_id) {
            continue;
        }
        if (c.id.empty() || !c.amount) {
            out.call.error_class = "unrecognised_response";
            out.call.detail = "a capture with our invoice_id without its ID or amount";
            return out;
        }
        RemotePayment p;
        p.provider_reference = c.id;
        p.operation_id = order.operation_id;
        p.amount = *c.amount;
        p.raw_status = c.status;
        p.state = map_capture_status(c.status);
        matches.push_back(std::move(p));
    }
    if (!matches.empty()) {
        // More than one capture with our invoice ID: a finding, never resolved silently.
        out.status = LookupResult::Status::found;
        out.payment = std::move(matches.front());
        out.duplicates.assign(std::make_move_iterator(matches.begin() + 1),
                              std::make_move_iterator(matches.end()));
        return out;
    }
    if (capturable(a->status) || a->status == "PENDING") {
        out.status = LookupResult::Status::not_found;
        return out;
    }
    // Closed without this capture (captured to its end by others, voided, expired): this one took
    // nothing of what it asked. The finding is about it, so it carries its amount, not the
    // authorisation's -- which a part asked for never equals.
    authorization.state = Outcome::declined;
    authorization.amount = order.amount;
    found(std::move(authorization));
    return out;
}

std::optional<long long> captured_minor(std::string_view order_body) {
    const auto o = parse_order(order_body);
    if (!o) {
        return std::nullopt;
    }
    long long sum = 0;
    for (const Capture& c : o->captures) {
        if (map_capture_status(c.status) != Outcome::succeeded) {
            continue;
        }
        if (!c.amount) {
            return std::nullopt;
        }
        sum += c.amount->minor;
    }
    return sum;
}

} // namespace payrecon::providers::paypal
