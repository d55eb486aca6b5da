#include "tests/fake_provider/square.hpp"

#include "core/encoding.hpp"
#include "core/money.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>
#include <set>
#include <utility>
#include <variant>

namespace payrecon::fake {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::system_clock;

constexpr std::string_view k_payments = "/v2/payments";
constexpr std::string_view k_refunds = "/v2/refunds";
constexpr std::size_t k_max_refund_reason = 192;
constexpr std::string_view k_upper_alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
constexpr std::size_t k_id_length = 29;
constexpr std::size_t k_max_idempotency_key = 45; // bytes: "might be less ... if multi-byte"
constexpr std::size_t k_max_reference_id = 40;
constexpr std::size_t k_max_note = 500;
constexpr std::size_t k_max_customer_id = 191;
constexpr std::int64_t k_max_limit = 100;
constexpr std::string_view k_cursor_tag = "sqfake1";         // ListPayments
constexpr std::string_view k_refund_cursor_tag = "sqfake1r"; // ListPaymentRefunds
constexpr auto k_default_window = std::chrono::hours(24 * 365);
constexpr auto k_approval_window = std::chrono::hours(168); // delay_duration PT168H

// CreatePaymentRequest's properties in the published document: anything else is
// UNKNOWN_BODY_PARAMETER.
const std::set<std::string_view>& known_create_fields() {
    static const std::set<std::string_view> k_fields{"source_id",
                                                     "idempotency_key",
                                                     "amount_money",
                                                     "tip_money",
                                                     "app_fee_money",
                                                     "delay_duration",
                                                     "delay_action",
                                                     "autocomplete",
                                                     "order_id",
                                                     "customer_id",
                                                     "location_id",
                                                     "team_member_id",
                                                     "reference_id",
                                                     "verification_token",
                                                     "accept_partial_authorization",
                                                     "buyer_email_address",
                                                     "buyer_phone_number",
                                                     "billing_address",
                                                     "shipping_address",
                                                     "note",
                                                     "statement_description_identifier",
                                                     "cash_details",
                                                     "external_details",
                                                     "customer_details",
                                                     "offline_payment_details"};
    return k_fields;
}

// Square's sandbox test nonces that decline, and the code each declines with.
std::optional<std::string_view> declined_source(std::string_view source_id) {
    if (source_id == "cnon:card-nonce-declined") {
        return "CARD_DECLINED";
    }
    if (source_id == "cnon:card-nonce-rejected-cvv") {
        return "CVV_FAILURE";
    }
    if (source_id == "cnon:card-nonce-rejected-postalcode") {
        return "ADDRESS_VERIFICATION_FAILURE";
    }
    if (source_id == "cnon:card-nonce-rejected-expiration") {
        return "INVALID_EXPIRATION";
    }
    return std::nullopt;
}

// "2026-01-02T03:04:05.678Z": RFC 3339 with milliseconds, as Square writes its timestamps.
std::string rfc3339_ms(Clock::time_point t) {
    const auto ms = std::chrono::floor<std::chrono::milliseconds>(t);
    const auto seconds = std::chrono::floor<std::chrono::seconds>(ms);
    std::string text = rfc3339(seconds);
    text.pop_back(); // the 'Z'
    const auto fraction = static_cast<int>((ms - seconds).count());
    char buf[8];
    std::snprintf(buf, sizeof buf, ".%03dZ", fraction);
    return text + buf;
}

// RFC 3339 with an optional fraction kept to the microsecond (parse_rfc3339 drops it).
std::optional<Clock::time_point> parse_time(std::string_view text) {
    std::int64_t micros = 0;
    std::string whole(text);
    if (text.size() > 19 && text[19] == '.') {
        std::size_t at = 20;
        std::int64_t scale = 100000;
        while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
            micros += (text[at] - '0') * scale;
            scale /= 10;
            ++at;
        }
        if (at == 20) {
            return std::nullopt;
        }
        whole = std::string(text.substr(0, 19)) + std::string(text.substr(at));
    }
    const auto t = parse_rfc3339(whole);
    if (!t) {
        return std::nullopt;
    }
    return *t + std::chrono::microseconds(micros);
}

std::int64_t micros_of(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

std::optional<std::int64_t> parse_int(std::string_view text) {
    std::int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc{} || ptr != text.data() + text.size()) {
        return std::nullopt;
    }
    return value;
}

Json money(std::int64_t amount, const std::string& currency) {
    return Json{{"amount", amount}, {"currency", currency}};
}

// Where a listing stands: the query it pages (the sort order and the window) and the last payment
// it answered, by (created_at, creation order). Opaque to the client: URL-safe base64.
struct Cursor {
    bool ascending = false;
    std::int64_t begin_us = 0;
    std::int64_t end_us = 0;
    std::int64_t after_us = 0;
    std::uint64_t after_seq = 0;
};

std::string encode_cursor(const Cursor& c, std::string_view tag) {
    const std::string text = std::string(tag) + ":" + (c.ascending ? "ASC" : "DESC") + ":" +
                             std::to_string(c.begin_us) + ":" + std::to_string(c.end_us) + ":" +
                             std::to_string(c.after_us) + ":" + std::to_string(c.after_seq);
    return base64url(text);
}

std::optional<Cursor> decode_cursor(std::string_view text, std::string_view tag) {
    std::string standard(text);
    for (char& ch : standard) {
        ch = ch == '-' ? '+' : ch == '_' ? '/' : ch;
    }
    while (standard.size() % 4 != 0) {
        standard += '=';
    }
    const auto bytes = from_base64(standard);
    if (!bytes) {
        return std::nullopt;
    }
    std::vector<std::string_view> parts;
    std::string_view rest = *bytes;
    for (;;) {
        const std::size_t colon = rest.find(':');
        parts.push_back(rest.substr(0, colon));
        if (colon == std::string_view::npos) {
            break;
        }
        rest.remove_prefix(colon + 1);
    }
    if (parts.size() != 6 || parts[0] != tag || (parts[1] != "ASC" && parts[1] != "DESC")) {
        return std::nullopt;
    }
    const auto begin = parse_int(parts[2]);
    const auto end = parse_int(parts[3]);
    const auto after = parse_int(parts[4]);
    const auto seq = parse_int(parts[5]);
    if (!begin || !end || !after || !seq || *seq < 0) {
        return std::nullopt;
    }
    Cursor c;
    c.ascending = parts[1] == "ASC";
    c.begin_us = *begin;
    c.end_us = *end;
    c.after_us = *after;
    c.after_seq = static_cast<std::uint64_t>(*seq);
    return c;
}

struct CreateRequest {
    std::string idempotency_key;
    std::string source_id;
    std::int64_t amount = 0;
    std::string currency;
    bool autocomplete = true;
    std::optional<std::string> customer_id;
    std::optional<std::string> location_id;
    std::optional<std::string> reference_id;
    std::optional<std::string> note;
    std::optional<std::string> delay_text;
    std::chrono::seconds delay{k_approval_window};
};

// An RFC 3339 (ISO 8601) duration as Square takes delay_duration: P[nD][T[nH][nM][nS]], whole
// numbers. nullopt for anything else.
std::optional<std::chrono::seconds> parse_duration(std::string_view text) {
    if (text.size() < 3 || text[0] != 'P') {
        return std::nullopt;
    }
    std::int64_t total = 0;
    bool in_time = false;
    bool any = false;
    std::size_t at = 1;
    while (at < text.size()) {
        if (text[at] == 'T') {
            if (in_time) {
                return std::nullopt;
            }
            in_time = true;
            ++at;
            continue;
        }
        const std::size_t start = at;
        while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
            ++at;
        }
        if (at == start || at == text.size() || at - start > 9) {
            return std::nullopt;
        }
        const auto n = parse_int(text.substr(start, at - start));
        const char unit = text[at++];
        const std::int64_t scale = !in_time && unit == 'D'  ? 86400
                                   : in_time && unit == 'H' ? 3600
                                   : in_time && unit == 'M' ? 60
                                   : in_time && unit == 'S' ? 1
                                                            : 0;
        if (!n || scale == 0) {
            return std::nullopt;
        }
        total += *n * scale;
        any = true;
    }
    if (!any || text.back() == 'T') {
        return std::nullopt;
    }
    return std::chrono::seconds(total);
}

// Card-not-present's default and longest delay_duration (CreatePaymentRequest.delay_duration).
constexpr std::chrono::seconds k_max_delay{7 * 86400};

} // namespace

SquareApi::SquareApi(Ledger& ledger, const Account& account, SquareOptions options)
    : m_ledger(ledger), m_account(account), m_options(std::move(options)) {
    const auto lock = m_ledger.lock();
    m_location_id = m_ledger.random_id_locked("L", 12, k_upper_alnum);
}

bool SquareApi::serves_path(const std::string& path) {
    if (path == k_payments || path == k_refunds ||
        path.compare(0, k_refunds.size() + 1, std::string(k_refunds) + "/") == 0) {
        return true;
    }
    const std::string prefix = std::string(k_payments) + "/";
    if (path.compare(0, prefix.size(), prefix) != 0) {
        return false;
    }
    // PayPal's Payments v2 lives under the same prefix.
    for (const std::string_view paypal : {"captures/", "authorizations/", "refunds/"}) {
        if (path.compare(prefix.size(), paypal.size(), paypal) == 0) {
            return false;
        }
    }
    return true;
}

bool SquareApi::authorized(const http::Request& request) const {
    const auto token = bearer_credential(request);
    return token && !m_account.api_key.empty() &&
           constant_time_equal(*token, m_account.api_key.reveal());
}

void SquareApi::reset_locked() {
    m_payments.clear();
    m_by_id.clear();
    m_keys.clear();
    m_refunds.clear();
    m_refunds_by_id.clear();
    m_refund_keys.clear();
    m_update_keys.clear();
    m_updates = 0;
    m_reads.clear();
}

Json SquareApi::render_error(const Error& e) {
    Json j;
    j["category"] = e.category;
    j["code"] = e.code;
    j["detail"] = e.detail;
    if (!e.field.empty()) {
        j["field"] = e.field;
    }
    return j;
}

http::Response SquareApi::errors_response(int status, const std::vector<Error>& errors) {
    Json body;
    body["errors"] = Json::array();
    for (const Error& e : errors) {
        body["errors"].push_back(render_error(e));
    }
    return json_response(status, body);
}

namespace {

http::Response unauthorized(const http::Request& request) {
    Json e;
    e["category"] = "AUTHENTICATION_ERROR";
    e["code"] = "UNAUTHORIZED";
    e["detail"] = request.header("authorization") == nullptr
                      ? "Your request did not include an `Authorization` http header with an "
                        "access token. The header value is expected to be of the format "
                        "\"Bearer TOKEN\" (without quotation marks), where TOKEN is to be replaced "
                        "with your access token (e.g. \"Bearer ABC123def456GHI789jkl0\")."
                      : "This request could not be authorized.";
    return json_response(401, Json{{"errors", Json::array({e})}});
}

} // namespace

Reply SquareApi::handle(const http::Request& request, const Wait& wait) {
    Reply reply;
    const std::string& path = request.path;
    const std::string prefix = std::string(k_payments) + "/";
    const std::string refunds_prefix = std::string(k_refunds) + "/";
    if (request.method == "POST" && path == k_payments) {
        reply = create(request, wait);
    } else if (request.method == "POST" && path == k_refunds) {
        reply = create_refund(request, wait);
    } else if (!authorized(request)) {
        reply.response = unauthorized(request);
    } else if (request.method == "GET" && path.size() > refunds_prefix.size() &&
               path.compare(0, refunds_prefix.size(), refunds_prefix) == 0 &&
               path.find('/', refunds_prefix.size()) == std::string::npos) {
        reply = retrieve_refund(path.substr(refunds_prefix.size()), wait);
    } else if (request.method == "GET" && path == k_payments) {
        reply = list(request, wait);
    } else if (request.method == "GET" && path == k_refunds) {
        reply = list_refunds(request, wait);
    } else if (request.method == "GET" && path.size() > prefix.size() &&
               path.find('/', prefix.size()) == std::string::npos) {
        reply = retrieve(path.substr(prefix.size()), wait);
    } else if (request.method == "PUT" && path.size() > prefix.size() &&
               path.find('/', prefix.size()) == std::string::npos) {
        reply = update_payment(request, path.substr(prefix.size()), wait);
    } else if (const std::size_t slash = path.find('/', prefix.size());
               request.method == "POST" && slash != std::string::npos && slash > prefix.size() &&
               (path.substr(slash) == "/complete" || path.substr(slash) == "/cancel")) {
        reply = close_payment(request, path.substr(prefix.size(), slash - prefix.size()),
                              path.substr(slash) == "/complete", wait);
    } else {
        reply.response = errors_response(
            404,
            {Error{"INVALID_REQUEST_ERROR", "NOT_FOUND",
                   "The fake provider serves CreatePayment (POST /v2/payments), GetPayment, "
                   "ListPayments, CompletePayment, CancelPayment, UpdatePayment, RefundPayment "
                   "(POST /v2/refunds), GetPaymentRefund and ListPaymentRefunds only, not " +
                       request.method + " " + path + ".",
                   ""}});
    }
    return reply;
}

Reply SquareApi::create(const http::Request& request, const Wait& wait) {
    Reply reply;
    const Json body = Json::parse(request.body, nullptr, false); // discarded if not JSON
    const auto string_field = [&](const char* name) -> const std::string* {
        if (!body.is_object()) {
            return nullptr;
        }
        const auto it = body.find(name);
        return it != body.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
    };
    const std::string* key_field = string_field("idempotency_key");
    if (key_field != nullptr && key_field->empty()) {
        key_field = nullptr;
    }
    if (const std::string* reference = string_field("reference_id");
        reference != nullptr && !reference->empty()) {
        reply.operation_id = *reference;
    } else {
        reply.operation_id = key_field != nullptr ? *key_field : std::string(k_no_operation);
    }

    std::unique_lock lock = m_ledger.lock();
    m_ledger.count_delivery_locked(reply.operation_id);
    const auto latency = m_ledger.faults_locked().latency;
    // Answers without executing, after the configured latency.
    auto answer = [&](Reply r) { return answer_after(lock, wait, latency, std::move(r)); };
    const http::Response error_500 = errors_response(
        500, {Error{"API_ERROR", "INTERNAL_SERVER_ERROR",
                    "An internal error has occurred, and the API was unable to service your "
                    "request.",
                    ""}});

    if (!authorized(request)) {
        reply.response = unauthorized(request);
        return answer(std::move(reply));
    }
    if (fault_before_execute_locked(m_ledger, reply, [&] { return error_500; })) {
        return answer(std::move(reply));
    }
    if (!body.is_object()) {
        reply.response =
            errors_response(400, {Error{"INVALID_REQUEST_ERROR", "EXPECTED_JSON_BODY",
                                        "The request body is not a JSON object.", ""}});
        apply_after_execute(reply, error_500);
        return answer(std::move(reply));
    }

    // A known key: the same body answers what the key holds, another body is refused. Compared
    // as JSON (nlohmann::json sorts object keys), so spacing and key order do not matter.
    const std::string fingerprint = nlohmann::json::parse(request.body, nullptr, false).dump();
    const bool key_usable =
        m_account.idempotency && key_field != nullptr && key_field->size() <= k_max_idempotency_key;
    const std::string* key = key_usable ? key_field : nullptr;
    if (key_answered_locked(
            m_keys, key, fingerprint,
            [this](std::size_t i) { return create_answer(m_payments[i]); }, reply)) {
        apply_after_execute(reply, error_500);
        return answer(std::move(reply));
    }

    // Validation: every error found, in field order.
    std::vector<Error> errors;
    CreateRequest params;
    const auto invalid = [&](std::string code, std::string detail, std::string field) {
        errors.push_back(
            Error{"INVALID_REQUEST_ERROR", std::move(code), std::move(detail), std::move(field)});
    };
    for (auto it = body.begin(); it != body.end(); ++it) {
        const std::string& name = it.key();
        if (known_create_fields().count(name) == 0) {
            invalid("UNKNOWN_BODY_PARAMETER", "Unknown body parameter: `" + name + "`.", name);
        } else if (name == "tip_money" || name == "app_fee_money") {
            // Money the fake would have to split; refused rather than charged wrongly.
            invalid("BAD_REQUEST",
                    "`" + name +
                        "` is not supported by the fake provider (it charges "
                        "amount_money only).",
                    name);
        }
    }
    // A required string: MISSING_REQUIRED_PARAMETER, EXPECTED_STRING, VALUE_EMPTY, VALUE_TOO_LONG.
    const auto string_at = [&](const Json& parent, const char* name, const std::string& field,
                               bool required,
                               std::size_t max_length) -> std::optional<std::string> {
        const auto it = parent.find(name);
        if (it == parent.end() || it->is_null()) {
            if (required) {
                invalid("MISSING_REQUIRED_PARAMETER", "Missing required parameter.", field);
            }
            return std::nullopt;
        }
        if (!it->is_string()) {
            invalid("EXPECTED_STRING", "Expected a string value.", field);
            return std::nullopt;
        }
        const std::string& text = it->get_ref<const std::string&>();
        if (text.empty() && required) {
            invalid("VALUE_EMPTY", "Field must not be blank.", field);
            return std::nullopt;
        }
        if (text.size() > max_length) {
            invalid("VALUE_TOO_LONG",
                    "Field must not be greater than " + std::to_string(max_length) + " length.",
                    field);
            return std::nullopt;
        }
        return text;
    };
    if (auto v =
            string_at(body, "idempotency_key", "idempotency_key", true, k_max_idempotency_key)) {
        params.idempotency_key = std::move(*v);
    }
    if (auto v = string_at(body, "source_id", "source_id", true, 192)) {
        params.source_id = std::move(*v);
    }
    if (const auto it = body.find("amount_money"); it == body.end() || it->is_null()) {
        invalid("MISSING_REQUIRED_PARAMETER", "Missing required parameter.", "amount_money");
    } else if (!it->is_object()) {
        invalid("EXPECTED_OBJECT", "Expected an object.", "amount_money");
    } else {
        const Json& m = *it;
        if (const auto amount = m.find("amount"); amount == m.end() || amount->is_null()) {
            invalid("MISSING_REQUIRED_PARAMETER", "Missing required parameter.",
                    "amount_money.amount");
        } else if (!amount->is_number_integer()) {
            invalid("EXPECTED_INTEGER", "Expected an integer value.", "amount_money.amount");
        } else if (amount->is_number_unsigned() &&
                   amount->get<std::uint64_t>() >
                       static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            invalid("VALUE_TOO_HIGH", "`amount_money.amount` is too large.", "amount_money.amount");
        } else if (amount->get<std::int64_t>() < 1) {
            invalid("VALUE_TOO_LOW", "`amount_money.amount` must be greater than 0.",
                    "amount_money.amount");
        } else {
            params.amount = amount->get<std::int64_t>();
        }
        if (auto currency = string_at(m, "currency", "amount_money.currency", true, 64)) {
            if (!find_currency(*currency)) {
                invalid("INVALID_ENUM_VALUE",
                        "`" + *currency + "` is not a valid enum value for `Currency`.",
                        "amount_money.currency");
            } else if (!m_options.currencies.empty() &&
                       std::find(m_options.currencies.begin(), m_options.currencies.end(),
                                 *currency) == m_options.currencies.end()) {
                invalid("UNSUPPORTED_CURRENCY",
                        "This merchant can only process payments in " +
                            m_options.currencies.front() + ", but amount was provided in " +
                            *currency + ".",
                        "amount_money.currency");
            } else {
                params.currency = std::move(*currency);
            }
        }
    }
    if (const auto it = body.find("autocomplete"); it != body.end() && !it->is_null()) {
        if (!it->is_boolean()) {
            invalid("EXPECTED_BOOLEAN", "Expected a boolean value.", "autocomplete");
        } else {
            params.autocomplete = it->get<bool>();
        }
    }
    if (auto text = string_at(body, "delay_duration", "delay_duration", false, 64)) {
        const auto delay = parse_duration(*text);
        if (!delay) {
            invalid("INVALID_VALUE", "`delay_duration` is not an RFC 3339 duration.",
                    "delay_duration");
        } else if (*delay < std::chrono::minutes(1) || *delay > k_max_delay) {
            invalid("BAD_REQUEST",
                    "`delay_duration` must be at least one minute and at most P7D (card not "
                    "present).",
                    "delay_duration");
        } else if (params.autocomplete) {
            invalid("BAD_REQUEST", "`delay_duration` can only be set when autocomplete is false.",
                    "delay_duration");
        } else {
            params.delay_text = std::move(*text);
            params.delay = *delay;
        }
    }
    if (auto action = string_at(body, "delay_action", "delay_action", false, 16)) {
        if (*action == "COMPLETE") {
            invalid("BAD_REQUEST",
                    "`delay_action` COMPLETE is not supported by the fake provider (it cancels an "
                    "authorisation left alone).",
                    "delay_action");
        } else if (*action != "CANCEL") {
            invalid("INVALID_ENUM_VALUE",
                    "`" + *action + "` is not a valid enum value for `delay_action`.",
                    "delay_action");
        }
    }
    params.customer_id = string_at(body, "customer_id", "customer_id", false, k_max_customer_id);
    params.location_id = string_at(body, "location_id", "location_id", false, 50);
    params.reference_id =
        string_at(body, "reference_id", "reference_id", false, k_max_reference_id);
    params.note = string_at(body, "note", "note", false, k_max_note);
    if (!errors.empty()) {
        reply.response = errors_response(400, errors);
        apply_after_execute(reply, error_500);
        return answer(std::move(reply));
    }

    if (key != nullptr) {
        KeyRecord record;
        record.first_seen = m_ledger.now_locked();
        record.fingerprint = fingerprint;
        m_keys.emplace(*key, std::move(record));
    }

    // The key is in flight for as long as the latency lasts.
    if (!wait_in_flight(lock, wait, latency, m_keys, key)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }

    // Execute: one payment.
    Payment p;
    p.id = m_ledger.random_id_locked("", k_id_length);
    p.order_id = m_ledger.random_id_locked("", k_id_length);
    p.source_id = std::move(params.source_id);
    p.amount = params.amount;
    p.approved_amount = params.amount;
    if (params.delay_text) {
        p.delay_text = std::move(*params.delay_text);
        p.delay = params.delay;
    }
    p.currency = std::move(params.currency);
    p.reference_id = std::move(params.reference_id);
    p.customer_id = std::move(params.customer_id);
    p.note = std::move(params.note);
    p.location_id = params.location_id.value_or(m_location_id);
    p.operation_id = reply.operation_id;
    p.auth_result_code = m_ledger.random_id_locked("", 6, k_upper_alnum);
    p.version_token = m_ledger.random_id_locked("", 45);
    p.created_at = std::chrono::floor<std::chrono::milliseconds>(m_ledger.now_locked());
    if (reply.fault == Fault::decline) {
        p.status = Status::failed;
        p.decline_code = "CARD_DECLINED";
    } else if (const auto code = declined_source(p.source_id)) {
        p.status = Status::failed;
        p.decline_code = std::string(*code);
    } else {
        p.status = params.autocomplete ? Status::completed : Status::approved;
    }
    m_ledger.count_execution_locked(p.operation_id);
    if (p.status == Status::completed) {
        m_ledger.add_charged_locked(p.currency, p.amount);
    }
    reply.response = create_answer(p);
    const std::size_t index = m_payments.size();
    m_by_id.emplace(p.id, index);
    m_payments.push_back(std::move(p));
    reply.executed = true;
    apply_after_execute(reply, error_500);

    if (key != nullptr) {
        const auto it = m_keys.find(*key);
        if (it != m_keys.end()) { // gone only if reset() ran meanwhile
            it->second.in_flight = false;
            it->second.index = index; // whatever was answered: the payment exists
        }
    }
    return reply;
}

bool SquareApi::key_answered_locked(std::map<std::string, KeyRecord>& keys, const std::string* key,
                                    const std::string& fingerprint,
                                    const std::function<http::Response(std::size_t)>& answer_of,
                                    Reply& reply) {
    if (key == nullptr) {
        return false;
    }
    const auto it = known_key_locked(keys, *key, m_ledger.now_locked(), m_options.key_retention);
    if (it == keys.end()) {
        return false;
    }
    if (it->second.fingerprint != fingerprint) {
        reply.response = errors_response(
            400, {Error{"INVALID_REQUEST_ERROR", "IDEMPOTENCY_KEY_REUSED",
                        "The idempotency key can only be retried with the same request data.",
                        "idempotency_key"}});
    } else if (it->second.in_flight) {
        reply.response = errors_response(
            409, {Error{"INVALID_REQUEST_ERROR", "CONFLICT",
                        "A request with this idempotency key is still being processed "
                        "(fake provider: the first may yet execute).",
                        "idempotency_key"}});
    } else {
        reply.response = answer_of(it->second.index);
        reply.replayed = true;
        m_ledger.count_replay_locked();
    }
    return true;
}

Reply SquareApi::create_refund(const http::Request& request, const Wait& wait) {
    Reply reply;
    const Json body = Json::parse(request.body, nullptr, false); // discarded if not JSON
    const std::string* key_field = nullptr;
    if (body.is_object()) {
        const auto it = body.find("idempotency_key");
        if (it != body.end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
            key_field = &it->get_ref<const std::string&>();
        }
    }
    // RefundPayment has no reference field: the refund's operation ID is its idempotency key.
    reply.operation_id = key_field != nullptr ? *key_field : std::string(k_no_operation);

    std::unique_lock lock = m_ledger.lock();
    m_ledger.count_delivery_locked(reply.operation_id);
    const auto latency = m_ledger.faults_locked().latency;
    auto answer = [&](Reply r) { return answer_after(lock, wait, latency, std::move(r)); };
    const http::Response error_500 = errors_response(
        500, {Error{"API_ERROR", "INTERNAL_SERVER_ERROR",
                    "An internal error has occurred, and the API was unable to service your "
                    "request.",
                    ""}});
    const auto refund_error = [&](std::string code, std::string detail, std::string field) {
        return errors_response(
            400, {Error{"REFUND_ERROR", std::move(code), std::move(detail), std::move(field)}});
    };

    if (!authorized(request)) {
        reply.response = unauthorized(request);
        return answer(std::move(reply));
    }
    if (fault_before_execute_locked(m_ledger, reply, [&] { return error_500; })) {
        return answer(std::move(reply));
    }
    if (!body.is_object()) {
        reply.response =
            errors_response(400, {Error{"INVALID_REQUEST_ERROR", "EXPECTED_JSON_BODY",
                                        "The request body is not a JSON object.", ""}});
        return answer(std::move(reply));
    }
    const std::string fingerprint = nlohmann::json::parse(request.body, nullptr, false).dump();
    const bool key_usable =
        m_account.idempotency && key_field != nullptr && key_field->size() <= k_max_idempotency_key;
    const std::string* key = key_usable ? key_field : nullptr;
    if (key_answered_locked(
            m_refund_keys, key, fingerprint,
            [this](std::size_t i) { return refund_answer(m_refunds[i]); }, reply)) {
        apply_after_execute(reply, error_500);
        return answer(std::move(reply));
    }

    // Validation (RefundPaymentRequest): every error found, in field order; nothing saved.
    std::vector<Error> errors;
    const auto invalid = [&](std::string code, std::string detail, std::string field) {
        errors.push_back(
            Error{"INVALID_REQUEST_ERROR", std::move(code), std::move(detail), std::move(field)});
    };
    static const std::set<std::string_view> k_known{
        "idempotency_key", "amount_money", "app_fee_money",   "payment_id", "destination_id",
        "unlinked",        "location_id",  "customer_id",     "reason",     "payment_version_token",
        "team_member_id",  "cash_details", "external_details"};
    static const std::set<std::string_view> k_taken{"idempotency_key", "amount_money", "payment_id",
                                                    "reason"};
    for (auto it = body.begin(); it != body.end(); ++it) {
        if (k_known.count(it.key()) == 0) {
            invalid("UNKNOWN_BODY_PARAMETER", "Unknown body parameter: `" + it.key() + "`.",
                    it.key());
        } else if (k_taken.count(it.key()) == 0) {
            invalid("BAD_REQUEST",
                    "`" + it.key() +
                        "` is not supported by the fake provider (it refunds a linked payment "
                        "to its card only).",
                    it.key());
        }
    }
    const auto text = [&](const char* name, bool required,
                          std::size_t max_length) -> std::optional<std::string> {
        const auto it = body.find(name);
        if (it == body.end() || it->is_null()) {
            if (required) {
                invalid("MISSING_REQUIRED_PARAMETER", "Missing required parameter.", name);
            }
            return std::nullopt;
        }
        if (!it->is_string() || it->get_ref<const std::string&>().empty()) {
            invalid(it->is_string() ? "VALUE_EMPTY" : "EXPECTED_STRING",
                    "Expected a non-empty string value.", name);
            return std::nullopt;
        }
        if (it->get_ref<const std::string&>().size() > max_length) {
            invalid("VALUE_TOO_LONG",
                    "Field must not be greater than " + std::to_string(max_length) + " length.",
                    name);
            return std::nullopt;
        }
        return it->get<std::string>();
    };
    text("idempotency_key", true, k_max_idempotency_key);
    const auto payment_id = text("payment_id", true, 192);
    std::optional<std::string> reason = text("reason", false, k_max_refund_reason);
    std::int64_t amount = 0;
    std::string currency;
    if (const auto it = body.find("amount_money"); it == body.end() || !it->is_object()) {
        invalid(it == body.end() ? "MISSING_REQUIRED_PARAMETER" : "EXPECTED_OBJECT",
                "amount_money must be an object.", "amount_money");
    } else if (!it->contains("amount") || !(*it)["amount"].is_number_integer() ||
               (*it)["amount"].get<std::int64_t>() < 1) {
        invalid("INVALID_VALUE", "`amount_money.amount` must be an integer greater than 0.",
                "amount_money.amount");
    } else if (!it->contains("currency") || !(*it)["currency"].is_string()) {
        invalid("MISSING_REQUIRED_PARAMETER", "Missing required parameter.",
                "amount_money.currency");
    } else {
        amount = (*it)["amount"].get<std::int64_t>();
        currency = (*it)["currency"].get<std::string>();
    }
    const auto found = payment_id ? m_by_id.find(*payment_id) : m_by_id.end();
    if (errors.empty() && found != m_by_id.end() &&
        m_payments[found->second].currency != currency) {
        invalid("CURRENCY_MISMATCH",
                "The refund's currency must be the payment's (" +
                    m_payments[found->second].currency + ").",
                "amount_money.currency");
    }
    if (!errors.empty()) {
        reply.response = errors_response(400, errors);
        return answer(std::move(reply));
    }
    if (found == m_by_id.end()) {
        reply.response = errors_response(
            404, {Error{"INVALID_REQUEST_ERROR", "NOT_FOUND",
                        "Could not find payment with id: " + *payment_id, "payment_id"}});
        return answer(std::move(reply));
    }
    const std::size_t payment = found->second;
    if (key != nullptr) {
        KeyRecord record;
        record.first_seen = m_ledger.now_locked();
        record.fingerprint = fingerprint;
        m_refund_keys.emplace(*key, std::move(record));
    }
    if (!wait_in_flight(lock, wait, latency, m_refund_keys, key)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    // What the payment has left is read now, after the wait: another refund may have taken it.
    Payment& p = m_payments[payment];
    const std::int64_t left = p.amount - p.amount_refunded;
    if (p.status != Status::completed || refunds_blocked(p) || amount > left) {
        if (key != nullptr) {
            m_refund_keys.erase(*key); // nothing executed: Square keeps only successes
        }
        // RefundPayment: once a refund of the payment is FAILED, "future refunds to this payment
        // are not allowed and the buyer should be reimbursed by other means".
        reply.response =
            p.status != Status::completed
                ? refund_error("PAYMENT_NOT_REFUNDABLE",
                               "Only a COMPLETED payment can be refunded.", "payment_id")
            : refunds_blocked(p)
                ? refund_error("PAYMENT_NOT_REFUNDABLE",
                               "A refund of this payment failed: no further refund is allowed.",
                               "payment_id")
                : refund_error("REFUND_AMOUNT_INVALID",
                               "The requested refund amount exceeds the amount available to "
                               "refund.",
                               "amount_money.amount");
        return answer(std::move(reply));
    }
    // Execute: one refund, REJECTED under a `decline` fault.
    Refund r;
    r.id = p.id + "_" + m_ledger.random_id_locked("", 44);
    r.payment = payment;
    r.amount = amount;
    r.reason = std::move(reason);
    r.operation_id = reply.operation_id;
    r.created_at = std::chrono::floor<std::chrono::milliseconds>(m_ledger.now_locked());
    r.rejected = reply.fault == Fault::decline;
    const std::size_t index = m_refunds.size();
    m_refunds_by_id.emplace(r.id, index);
    m_refunds.push_back(std::move(r));
    p.refunds.push_back(index);
    if (!m_refunds[index].rejected) {
        p.amount_refunded += amount;
        m_ledger.add_refunded_locked(p.currency, amount);
    }
    m_ledger.count_execution_locked(reply.operation_id);
    reply.response = refund_answer(m_refunds[index]);
    reply.executed = true;
    apply_after_execute(reply, error_500);
    if (key != nullptr) {
        const auto it = m_refund_keys.find(*key);
        if (it != m_refund_keys.end()) { // gone only if reset() ran meanwhile
            it->second.in_flight = false;
            it->second.index = index;
        }
    }
    return reply;
}

Reply SquareApi::retrieve_refund(const std::string& id, const Wait& wait) {
    Reply reply;
    if (!m_account.lookup) {
        reply.response = errors_response(
            403, {Error{"AUTHENTICATION_ERROR", "INSUFFICIENT_SCOPES",
                        "The merchant has not given your application sufficient permissions to do "
                        "this (fake provider: --no-lookup).",
                        ""}});
        return reply;
    }
    if (!wait(m_ledger.faults().latency)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    const auto lock = m_ledger.lock();
    if (m_ledger.faults_locked().lookup_down) {
        reply.response =
            errors_response(503, {Error{"API_ERROR", "SERVICE_UNAVAILABLE",
                                        "Service Unavailable (fake provider: lookup_down).", ""}});
        return reply;
    }
    const auto it = m_refunds_by_id.find(id);
    if (it == m_refunds_by_id.end()) {
        reply.response = errors_response(404, {Error{"INVALID_REQUEST_ERROR", "NOT_FOUND",
                                                     "Could not find refund with id: " + id, ""}});
        return reply;
    }
    reply.response = json_response(200, Json{{"refund", render_refund(m_refunds[it->second])}});
    return reply;
}

Reply SquareApi::retrieve(const std::string& id, const Wait& wait) {
    Reply reply;
    if (!wait(m_ledger.faults().latency)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    const auto lock = m_ledger.lock();
    const auto it = m_by_id.find(id);
    if (it == m_by_id.end()) {
        reply.response = errors_response(404, {Error{"INVALID_REQUEST_ERROR", "NOT_FOUND",
                                                     "Could not find payment with id: " + id, ""}});
        return reply;
    }
    ++m_reads[id];
    reply.response = json_response(200, Json{{"payment", render_payment(m_payments[it->second])}});
    return reply;
}

SquareApi::Status SquareApi::status_locked(const Payment& p) const {
    if (p.status == Status::approved && m_ledger.now_locked() >= p.created_at + p.delay) {
        return Status::canceled; // delay_action CANCEL: Square voided it
    }
    return p.status;
}

namespace {

const char* status_word(bool completed, bool approved, bool canceled) {
    return completed ? "COMPLETED" : approved ? "APPROVED" : canceled ? "CANCELED" : "FAILED";
}

} // namespace

Reply SquareApi::close_payment(const http::Request& request, const std::string& id, bool complete,
                               const Wait& wait) {
    Reply reply;
    // No key, no reference of the caller's: counted by what the path names.
    reply.operation_id = std::string(complete ? "complete:" : "cancel:") + id;
    std::unique_lock lock = m_ledger.lock();
    m_ledger.count_delivery_locked(reply.operation_id);
    const auto latency = m_ledger.faults_locked().latency;
    auto answer = [&](Reply r) { return answer_after(lock, wait, latency, std::move(r)); };
    const http::Response error_500 = errors_response(
        500, {Error{"API_ERROR", "INTERNAL_SERVER_ERROR",
                    "An internal error has occurred, and the API was unable to service your "
                    "request.",
                    ""}});
    if (!authorized(request)) {
        reply.response = unauthorized(request);
        return answer(std::move(reply));
    }
    if (fault_before_execute_locked(m_ledger, reply, [&] { return error_500; })) {
        return answer(std::move(reply));
    }
    // CompletePaymentRequest: version_token only; CancelPayment takes no body.
    std::optional<std::string> version_token;
    if (complete || !request.body.empty()) {
        const Json body = Json::parse(request.body.empty() ? "{}" : request.body, nullptr, false);
        std::vector<Error> errors;
        if (!body.is_object()) {
            errors.push_back(Error{"INVALID_REQUEST_ERROR", "EXPECTED_JSON_BODY",
                                   "The request body is not a JSON object.", ""});
        } else {
            for (auto it = body.begin(); it != body.end(); ++it) {
                if (!complete || it.key() != "version_token") {
                    errors.push_back(Error{"INVALID_REQUEST_ERROR", "UNKNOWN_BODY_PARAMETER",
                                           "Unknown body parameter: `" + it.key() + "`.",
                                           it.key()});
                } else if (!it->is_null() && !it->is_string()) {
                    errors.push_back(Error{"INVALID_REQUEST_ERROR", "EXPECTED_STRING",
                                           "Expected a string value.", "version_token"});
                } else if (it->is_string()) {
                    version_token = it->get<std::string>();
                }
            }
        }
        if (!errors.empty()) {
            reply.response = errors_response(400, errors);
            return answer(std::move(reply));
        }
    }
    // The call takes its latency before Square acts; what the payment is is read after it.
    lock.unlock();
    const bool go_on = wait(latency);
    lock.lock();
    if (!go_on) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    const auto found = m_by_id.find(id);
    if (found == m_by_id.end()) {
        reply.response = errors_response(404, {Error{"INVALID_REQUEST_ERROR", "NOT_FOUND",
                                                     "Could not find payment with id: " + id, ""}});
        return reply;
    }
    Payment& p = m_payments[found->second];
    const Status now_status = status_locked(p);
    if (version_token && *version_token != p.version_token) {
        reply.response =
            errors_response(400, {Error{"INVALID_REQUEST_ERROR", "VERSION_MISMATCH",
                                        "The payment was updated since the version_token given.",
                                        "version_token"}});
        return reply;
    }
    if (now_status != Status::approved) {
        reply.response =
            errors_response(400, {Error{"INVALID_REQUEST_ERROR", "BAD_REQUEST",
                                        std::string("Payment ") + p.id + " is " +
                                            status_word(now_status == Status::completed, false,
                                                        now_status == Status::canceled) +
                                            ": only an APPROVED payment can be " +
                                            (complete ? "completed." : "canceled."),
                                        ""}});
        return reply;
    }
    // Execute: the capture or the void.
    p.status = complete ? Status::completed : Status::canceled;
    p.closed_at = std::chrono::floor<std::chrono::milliseconds>(m_ledger.now_locked());
    p.version_token = m_ledger.random_id_locked("", 45);
    m_ledger.count_execution_locked(reply.operation_id);
    if (complete) {
        m_ledger.add_charged_locked(p.currency, p.amount);
    }
    reply.response = json_response(200, Json{{"payment", render_payment(p)}});
    reply.executed = true;
    apply_after_execute(reply, error_500);
    return reply;
}

Reply SquareApi::update_payment(const http::Request& request, const std::string& id,
                                const Wait& wait) {
    Reply reply;
    if (!authorized(request)) {
        reply.response = unauthorized(request);
        return reply;
    }
    if (!wait(m_ledger.faults().latency)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    const Json body = Json::parse(request.body, nullptr, false);
    std::vector<Error> errors;
    const auto invalid = [&](std::string code, std::string detail, std::string field) {
        errors.push_back(
            Error{"INVALID_REQUEST_ERROR", std::move(code), std::move(detail), std::move(field)});
    };
    std::string key;
    std::optional<std::int64_t> amount;
    std::string currency;
    std::optional<std::string> version_token;
    if (!body.is_object()) {
        invalid("EXPECTED_JSON_BODY", "The request body is not a JSON object.", "");
    } else {
        for (auto it = body.begin(); it != body.end(); ++it) {
            if (it.key() != "idempotency_key" && it.key() != "payment") {
                invalid("UNKNOWN_BODY_PARAMETER", "Unknown body parameter: `" + it.key() + "`.",
                        it.key());
            }
        }
        const auto k = body.find("idempotency_key");
        if (k == body.end() || !k->is_string() || k->get_ref<const std::string&>().empty()) {
            invalid("MISSING_REQUIRED_PARAMETER", "Missing required parameter.", "idempotency_key");
        } else if (k->get_ref<const std::string&>().size() > k_max_idempotency_key) {
            invalid("VALUE_TOO_LONG", "Field must not be greater than 45 length.",
                    "idempotency_key");
        } else {
            key = k->get<std::string>();
        }
        const auto pay = body.find("payment");
        if (pay != body.end() && pay->is_object()) {
            for (auto it = pay->begin(); it != pay->end(); ++it) {
                if (it.key() == "version_token" && it->is_string()) {
                    version_token = it->get<std::string>();
                } else if (it.key() == "amount_money" && it->is_object() &&
                           it->contains("amount") && (*it)["amount"].is_number_integer() &&
                           it->contains("currency") && (*it)["currency"].is_string()) {
                    amount = (*it)["amount"].get<std::int64_t>();
                    currency = (*it)["currency"].get<std::string>();
                } else {
                    invalid("BAD_REQUEST",
                            "`payment." + it.key() +
                                "` is not supported by the fake provider (it updates "
                                "amount_money only).",
                            "payment." + it.key());
                }
            }
        } else if (pay != body.end()) {
            invalid("EXPECTED_OBJECT", "Expected an object.", "payment");
        }
    }
    const auto lock = m_ledger.lock();
    if (!errors.empty()) {
        reply.response = errors_response(400, errors);
        return reply;
    }
    const std::string fingerprint = nlohmann::json::parse(request.body, nullptr, false).dump();
    if (const auto known = m_update_keys.find(key); known != m_update_keys.end()) {
        if (known->second.first != fingerprint) {
            reply.response = errors_response(
                400, {Error{"INVALID_REQUEST_ERROR", "IDEMPOTENCY_KEY_REUSED",
                            "The idempotency key can only be retried with the same request data.",
                            "idempotency_key"}});
        } else {
            reply.response = known->second.second;
            reply.replayed = true;
            m_ledger.count_replay_locked();
        }
        return reply;
    }
    const auto found = m_by_id.find(id);
    if (found == m_by_id.end()) {
        reply.response = errors_response(404, {Error{"INVALID_REQUEST_ERROR", "NOT_FOUND",
                                                     "Could not find payment with id: " + id, ""}});
        return reply;
    }
    Payment& p = m_payments[found->second];
    const auto bad = [&](std::string code, std::string detail, std::string field) {
        reply.response = errors_response(400, {Error{"INVALID_REQUEST_ERROR", std::move(code),
                                                     std::move(detail), std::move(field)}});
        return reply;
    };
    if (status_locked(p) != Status::approved) {
        return bad("BAD_REQUEST", "Only an APPROVED payment can be updated.", "");
    }
    if (version_token && *version_token != p.version_token) {
        return bad("VERSION_MISMATCH", "The payment was updated since the version_token given.",
                   "payment.version_token");
    }
    if (amount) {
        if (currency != p.currency) {
            return bad("CURRENCY_MISMATCH", "amount_money must be in the payment's currency.",
                       "payment.amount_money.currency");
        }
        if (*amount < 1) {
            return bad("VALUE_TOO_LOW", "`amount_money.amount` must be greater than 0.",
                       "payment.amount_money.amount");
        }
        if (*amount > p.approved_amount) {
            return bad("BAD_REQUEST",
                       "amount_money cannot be increased in value. EDIT_AMOUNT_UP capability is "
                       "not available.",
                       "amount_money");
        }
        p.amount = *amount;
    }
    p.version_token = m_ledger.random_id_locked("", 45);
    ++m_updates;
    reply.response = json_response(200, Json{{"payment", render_payment(p)}});
    m_update_keys.emplace(key, std::make_pair(fingerprint, reply.response));
    return reply;
}

namespace {

const std::string* param_of(const http::Fields& query, std::string_view name) {
    for (const auto& [key, value] : query) {
        if (key == name) {
            return &value;
        }
    }
    return nullptr;
}

} // namespace

std::variant<SquareApi::Listing, http::Response>
SquareApi::read_listing_locked(const http::Fields& query, std::string_view tag) const {
    const auto bad = [](std::string code, std::string detail, std::string field) {
        return errors_response(400, {Error{"INVALID_REQUEST_ERROR", std::move(code),
                                           std::move(detail), std::move(field)}});
    };
    const auto param = [&](std::string_view name) { return param_of(query, name); };
    std::optional<Clock::time_point> window[2];
    for (int i = 0; i < 2; ++i) {
        const char* name = i == 0 ? "begin_time" : "end_time";
        if (const std::string* text = param(name)) {
            window[i] = parse_time(*text);
            if (!window[i]) {
                return bad("INVALID_TIME",
                           "`" + std::string(name) + "` must be an RFC 3339 timestamp.", name);
            }
        }
    }
    std::optional<bool> ascending;
    if (const std::string* order = param("sort_order")) {
        if (*order != "ASC" && *order != "DESC") {
            return bad("INVALID_SORT_ORDER", "The sort order must be `ASC` or `DESC`.",
                       "sort_order");
        }
        ascending = *order == "ASC";
    }
    Listing listing;
    listing.limit = k_max_limit;
    if (const std::string* text = param("limit")) {
        const auto n = parse_int(*text);
        if (!n) {
            return bad("EXPECTED_INTEGER", "Expected an integer value.", "limit");
        }
        if (*n < 1) {
            return bad("INVALID_VALUE", "`limit` must be at least 1.", "limit");
        }
        // Above the maximum: the default, as documented.
        listing.limit = static_cast<std::size_t>(*n > k_max_limit ? k_max_limit : *n);
    }
    if (const std::string* text = param("cursor")) {
        const auto decoded = decode_cursor(*text, tag);
        // A cursor pages its original query: a different window or order is another query.
        if (!decoded || (ascending && *ascending != decoded->ascending) ||
            (window[0] && micros_of(*window[0]) != decoded->begin_us) ||
            (window[1] && micros_of(*window[1]) != decoded->end_us)) {
            return bad("INVALID_CURSOR",
                       decoded ? "The cursor was returned for another query (begin_time, "
                                 "end_time or sort_order differ)."
                               : "The pagination cursor is invalid.",
                       "cursor");
        }
        listing.ascending = decoded->ascending;
        listing.begin_us = decoded->begin_us;
        listing.end_us = decoded->end_us;
        listing.after = std::pair(decoded->after_us, static_cast<std::size_t>(decoded->after_seq));
    } else {
        const Clock::time_point end = window[1].value_or(m_ledger.now_locked());
        listing.ascending = ascending.value_or(false); // DESC by default
        listing.end_us = micros_of(end);
        listing.begin_us = micros_of(window[0].value_or(end - k_default_window));
    }
    if (listing.end_us < listing.begin_us) {
        return bad("INVALID_TIME_RANGE", "`end_time` must not be before `begin_time`.", "end_time");
    }
    return listing;
}

std::vector<std::size_t> SquareApi::page_of(std::vector<std::pair<std::int64_t, std::size_t>> found,
                                            const Listing& listing, std::string_view tag,
                                            std::optional<std::string>& next) {
    if (listing.after) {
        std::erase_if(found, [&](const auto& position) {
            return listing.ascending ? position <= *listing.after : position >= *listing.after;
        });
    }
    std::sort(found.begin(), found.end(),
              [&](const auto& a, const auto& b) { return listing.ascending ? a < b : b < a; });
    const std::size_t count = std::min(found.size(), listing.limit);
    std::vector<std::size_t> page;
    for (std::size_t i = 0; i < count; ++i) {
        page.push_back(found[i].second);
    }
    next.reset();
    if (found.size() > count) {
        Cursor c;
        c.ascending = listing.ascending;
        c.begin_us = listing.begin_us;
        c.end_us = listing.end_us;
        c.after_us = found[count - 1].first;
        c.after_seq = found[count - 1].second;
        next = encode_cursor(c, tag);
    }
    return page;
}

std::optional<Reply> SquareApi::refuse_listing(const Wait& wait) const {
    Reply reply;
    if (!m_account.lookup) {
        // What an access token without PAYMENTS_READ is answered.
        reply.response = errors_response(
            403, {Error{"AUTHENTICATION_ERROR", "INSUFFICIENT_SCOPES",
                        "The merchant has not given your application sufficient permissions to do "
                        "this (fake provider: --no-lookup).",
                        ""}});
        return reply;
    }
    if (!wait(m_ledger.faults().latency)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    return std::nullopt;
}

std::optional<http::Response> SquareApi::listing_fault(const FaultConfig& faults) {
    if (faults.lookup_down) {
        return errors_response(503,
                               {Error{"API_ERROR", "SERVICE_UNAVAILABLE",
                                      "Service Unavailable (fake provider: lookup_down).", ""}});
    }
    if (faults.list_rate_limited) {
        http::Response r = errors_response(
            429, {Error{"RATE_LIMIT_ERROR", "RATE_LIMITED",
                        "Rate limit exceeded (fake provider: list_rate_limited).", ""}});
        r.headers.emplace_back("Retry-After", "1");
        return r;
    }
    return std::nullopt;
}

Reply SquareApi::list(const http::Request& request, const Wait& wait) {
    if (auto refused = refuse_listing(wait)) {
        return std::move(*refused);
    }
    Reply reply;
    const auto bad = [&](std::string code, std::string detail, std::string field) {
        Reply r;
        r.response = errors_response(400, {Error{"INVALID_REQUEST_ERROR", std::move(code),
                                                 std::move(detail), std::move(field)}});
        return r;
    };
    const auto query = http::parse_form(request.query);
    if (!query) {
        return bad("BAD_REQUEST", "The query string is not well formed.", "");
    }
    const auto param = [&](std::string_view name) { return param_of(*query, name); };
    static const std::set<std::string_view> k_supported{
        "begin_time", "end_time", "sort_order", "cursor", "location_id",
        "total",      "last_4",   "card_brand", "limit",  "sort_field"};
    static const std::set<std::string_view> k_unsupported{
        "is_offline_payment", "offline_begin_time", "offline_end_time", "updated_at_begin_time",
        "updated_at_end_time"};
    for (const auto& [name, value] : *query) {
        if (k_unsupported.count(name) != 0) {
            return bad("BAD_REQUEST",
                       "`" + name +
                           "` is not supported by the fake provider (it takes no "
                           "offline payments and never updates one).",
                       name);
        }
        if (k_supported.count(name) == 0) {
            return bad("UNKNOWN_QUERY_PARAMETER", "Unknown query parameter: `" + name + "`.", name);
        }
    }
    if (const std::string* field = param("sort_field");
        field != nullptr && *field != "CREATED_AT") {
        return bad(*field == "UPDATED_AT" || *field == "OFFLINE_CREATED_AT" ? "BAD_REQUEST"
                                                                            : "INVALID_ENUM_VALUE",
                   "`" + *field + "` is not a sort field the fake provider lists by (CREATED_AT).",
                   "sort_field");
    }
    std::optional<std::int64_t> total;
    if (const std::string* text = param("total")) {
        total = parse_int(*text);
        if (!total) {
            return bad("EXPECTED_INTEGER", "Expected an integer value.", "total");
        }
    }

    const auto lock = m_ledger.lock();
    auto read = read_listing_locked(*query, k_cursor_tag);
    if (auto* refused = std::get_if<http::Response>(&read)) {
        reply.response = std::move(*refused);
        return reply;
    }
    const Listing& listing = std::get<Listing>(read);
    const FaultConfig& faults = m_ledger.faults_locked();
    if (auto fault = listing_fault(faults)) {
        reply.response = std::move(*fault);
        return reply;
    }
    const Clock::time_point now = m_ledger.now_locked();
    const std::string* location = param("location_id");
    const std::string* last_4 = param("last_4");
    const std::string* brand = param("card_brand");
    std::vector<std::pair<std::int64_t, std::size_t>> found;
    for (std::size_t i = 0; i < m_payments.size(); ++i) {
        const Payment& p = m_payments[i];
        const std::int64_t created = micros_of(p.created_at);
        if (created < listing.begin_us || created >= listing.end_us ||
            p.created_at + faults.lookup_stale > now ||
            (location != nullptr && *location != p.location_id) || (total && *total != p.amount) ||
            (last_4 != nullptr && *last_4 != "1111") || (brand != nullptr && *brand != "VISA")) {
            continue;
        }
        found.emplace_back(created, i);
    }
    std::optional<std::string> next;
    const auto page = page_of(std::move(found), listing, k_cursor_tag, next);
    Json body = Json::object();
    if (!page.empty()) {
        body["payments"] = Json::array();
        for (const std::size_t i : page) {
            body["payments"].push_back(render_payment(m_payments[i]));
        }
    }
    if (next) {
        body["cursor"] = *next;
    }
    reply.response = json_response(200, body);
    return reply;
}

Reply SquareApi::list_refunds(const http::Request& request, const Wait& wait) {
    if (auto refused = refuse_listing(wait)) {
        return std::move(*refused);
    }
    Reply reply;
    const auto bad = [&](std::string code, std::string detail, std::string field) {
        Reply r;
        r.response = errors_response(400, {Error{"INVALID_REQUEST_ERROR", std::move(code),
                                                 std::move(detail), std::move(field)}});
        return r;
    };
    const auto query = http::parse_form(request.query);
    if (!query) {
        return bad("BAD_REQUEST", "The query string is not well formed.", "");
    }
    static const std::set<std::string_view> k_supported{"begin_time", "end_time",    "sort_order",
                                                        "cursor",     "location_id", "status",
                                                        "limit",      "sort_field",  "source_type"};
    for (const auto& [name, value] : *query) {
        if (k_supported.count(name) == 0) {
            return bad("UNKNOWN_QUERY_PARAMETER", "Unknown query parameter: `" + name + "`.", name);
        }
    }
    if (const std::string* field = param_of(*query, "sort_field");
        field != nullptr && *field != "CREATED_AT") {
        return bad("INVALID_ENUM_VALUE",
                   "`" + *field + "` is not a sort field the fake provider lists by (CREATED_AT).",
                   "sort_field");
    }
    const std::string* status = param_of(*query, "status");
    const std::string* location = param_of(*query, "location_id");
    const std::string* source_type = param_of(*query, "source_type");

    const auto lock = m_ledger.lock();
    auto read = read_listing_locked(*query, k_refund_cursor_tag);
    if (auto* refused = std::get_if<http::Response>(&read)) {
        reply.response = std::move(*refused);
        return reply;
    }
    const Listing& listing = std::get<Listing>(read);
    const FaultConfig& faults = m_ledger.faults_locked();
    if (auto fault = listing_fault(faults)) {
        reply.response = std::move(*fault);
        return reply;
    }
    const Clock::time_point now = m_ledger.now_locked();
    std::vector<std::pair<std::int64_t, std::size_t>> found;
    for (std::size_t i = 0; i < m_refunds.size(); ++i) {
        const Refund& r = m_refunds[i];
        const std::int64_t created = micros_of(r.created_at);
        // Every payment the fake takes is a card payment.
        if (created < listing.begin_us || created >= listing.end_us ||
            r.created_at + faults.lookup_stale > now ||
            (status != nullptr && *status != refund_status(r)) ||
            (location != nullptr && *location != m_payments[r.payment].location_id) ||
            (source_type != nullptr && *source_type != "CARD")) {
            continue;
        }
        found.emplace_back(created, i);
    }
    std::optional<std::string> next;
    const auto page = page_of(std::move(found), listing, k_refund_cursor_tag, next);
    Json body = Json::object();
    if (!page.empty()) {
        body["refunds"] = Json::array();
        for (const std::size_t i : page) {
            body["refunds"].push_back(render_refund(m_refunds[i]));
        }
    }
    if (next) {
        body["cursor"] = *next;
    }
    reply.response = json_response(200, body);
    return reply;
}

http::Response SquareApi::create_answer(const Payment& p) const {
    Json body;
    if (p.status == Status::failed) {
        body["errors"] =
            Json::array({render_error(Error{"PAYMENT_METHOD_ERROR", p.decline_code,
                                            "Authorization error: '" + p.decline_code + "'", ""})});
        body["payment"] = render_payment(p);
        return json_response(400, body);
    }
    body["payment"] = render_payment(p);
    return json_response(200, body);
}

Json SquareApi::render_payment(const Payment& p) const {
    const Status status = status_locked(p);
    const bool completed = status == Status::completed;
    const bool approved = status == Status::approved;
    const bool failed = status == Status::failed;
    const bool canceled = status == Status::canceled;
    // When it was completed or canceled: by a call, or by Square at the end of its delay.
    const std::optional<Clock::time_point> closed =
        p.closed_at ? p.closed_at
        : canceled  ? std::optional<Clock::time_point>(p.created_at + p.delay)
                    : std::nullopt;
    const std::string created = rfc3339_ms(p.created_at);
    Json j;
    j["id"] = p.id;
    j["created_at"] = created;
    j["updated_at"] = closed ? rfc3339_ms(*closed) : created;
    j["amount_money"] = money(p.amount, p.currency);
    j["total_money"] = money(p.amount, p.currency);
    j["approved_money"] = money(failed ? 0 : p.approved_amount, p.currency);
    j["status"] = status_word(completed, approved, canceled);
    j["delay_duration"] = p.delay_text;
    j["delay_action"] = "CANCEL";
    j["delayed_until"] = rfc3339_ms(p.created_at + p.delay);
    if (approved) {
        j["capabilities"] = Json::array({"EDIT_AMOUNT_DOWN"});
    }
    j["source_type"] = "CARD";

    Json card;
    card["card_brand"] = "VISA";
    card["last_4"] = "1111";
    card["exp_month"] = 11;
    card["exp_year"] = 2030;
    card["fingerprint"] = "sq-1-FakeProviderCardFingerprintVisa1111000000000";
    card["card_type"] = "CREDIT";
    card["prepaid_type"] = "NOT_PREPAID";
    card["bin"] = "411111";
    Json details;
    details["status"] = completed  ? "CAPTURED"
                        : approved ? "AUTHORIZED"
                        : canceled ? "VOIDED"
                                   : "FAILED";
    details["card"] = std::move(card);
    details["entry_method"] = p.source_id.rfind("cnon:", 0) == 0 ? "KEYED" : "ON_FILE";
    details["cvv_status"] = p.decline_code == "CVV_FAILURE" ? "CVV_REJECTED" : "CVV_ACCEPTED";
    details["avs_status"] =
        p.decline_code == "ADDRESS_VERIFICATION_FAILURE" ? "AVS_REJECTED" : "AVS_ACCEPTED";
    if (!failed) {
        details["auth_result_code"] = p.auth_result_code;
    }
    details["statement_description"] = "SQ *FAKE PROVIDER";
    Json timeline = Json::object();
    if (!failed) {
        timeline["authorized_at"] = created;
    }
    if (completed) {
        timeline["captured_at"] = closed ? rfc3339_ms(*closed) : created;
    }
    if (canceled && closed) {
        timeline["voided_at"] = rfc3339_ms(*closed);
    }
    details["card_payment_timeline"] = std::move(timeline);
    if (failed) {
        details["errors"] =
            Json::array({render_error(Error{"PAYMENT_METHOD_ERROR", p.decline_code,
                                            "Authorization error: '" + p.decline_code + "'", ""})});
    }
    j["card_details"] = std::move(details);
    j["location_id"] = p.location_id;
    j["order_id"] = p.order_id;
    if (p.reference_id) {
        j["reference_id"] = *p.reference_id;
    }
    if (p.customer_id) {
        j["customer_id"] = *p.customer_id;
    }
    if (p.note) {
        j["note"] = *p.note;
    }
    if (!failed) {
        j["risk_evaluation"] = Json{{"created_at", created}, {"risk_level", "NORMAL"}};
    }
    if (completed) {
        j["receipt_number"] = p.id.substr(0, 4);
        j["receipt_url"] = "https://squareupsandbox.com/receipt/preview/" + p.id;
    }
    j["application_details"] =
        Json{{"square_product", "ECOMMERCE_API"}, {"application_id", "sandbox-sq0idb-fake"}};
    if (!p.refunds.empty()) {
        j["refunded_money"] = money(p.amount_refunded, p.currency);
        j["refund_ids"] = Json::array();
        for (const std::size_t i : p.refunds) {
            j["refund_ids"].push_back(m_refunds[i].id);
        }
    }
    j["version_token"] = p.version_token;
    return j;
}

Json SquareApi::render_refund(const Refund& r) const {
    const Payment& p = m_payments[r.payment];
    const std::string created = rfc3339_ms(r.created_at);
    Json j;
    j["id"] = r.id;
    j["status"] = refund_status(r);
    j["location_id"] = p.location_id;
    j["unlinked"] = false;
    j["destination_type"] = "CARD";
    j["amount_money"] = money(r.amount, p.currency);
    j["processing_fee"] = Json::array();
    j["payment_id"] = p.id;
    j["order_id"] = p.order_id;
    if (r.reason) {
        j["reason"] = *r.reason;
    }
    j["created_at"] = created;
    j["updated_at"] = r.failed_at ? rfc3339_ms(*r.failed_at) : created;
    return j;
}

const char* SquareApi::refund_status(const Refund& r) {
    return r.rejected ? "REJECTED" : r.failed_at ? "FAILED" : "COMPLETED";
}

bool SquareApi::refunds_blocked(const Payment& p) const {
    return std::any_of(p.refunds.begin(), p.refunds.end(),
                       [this](std::size_t i) { return m_refunds[i].failed_at.has_value(); });
}

std::vector<std::string> SquareApi::seed_refund_reversed(const RefundReversed& s) {
    const auto lock = m_ledger.lock();
    for (Refund& r : m_refunds) {
        if (s.operation_id.empty() || r.operation_id != s.operation_id) {
            continue;
        }
        if (r.rejected) {
            throw std::invalid_argument("the refund was rejected: it gave nothing back to reverse");
        }
        if (r.failed_at) {
            throw std::invalid_argument("the refund is reversed already");
        }
        r.failed_at = std::chrono::floor<std::chrono::milliseconds>(m_ledger.now_locked());
        Payment& p = m_payments[r.payment];
        p.amount_refunded -= r.amount;
        // Back to `charged`, out of `refunded`.
        m_ledger.add_refunded_locked(p.currency, -r.amount);
        return {r.id};
    }
    throw SeedNotFound("no refund with operation ID " + s.operation_id);
}

http::Response SquareApi::refund_answer(const Refund& r) const {
    if (!r.rejected) {
        return json_response(200, Json{{"refund", render_refund(r)}});
    }
    Json body;
    body["errors"] =
        Json::array({render_error(Error{"REFUND_ERROR", "REFUND_DECLINED",
                                        "The refund was declined (fake provider: decline).", ""})});
    body["refund"] = render_refund(r);
    return json_response(400, body);
}

void SquareApi::write_ledger_locked(nlohmann::ordered_json& j, LedgerOptions options) const {
    j["square_payment_count"] = m_payments.size();
    j["square_refund_count"] = m_refunds.size();
    j["square_updates"] = m_updates;
    j["square_payment_reads"] = Json::object();
    for (const auto& [id, n] : m_reads) {
        j["square_payment_reads"][id] = n;
    }
    if (options.payment_intents) {
        j["square_payments"] = Json::array();
        for (const Payment& p : m_payments) {
            j["square_payments"].push_back(render_payment(p));
        }
    }
}

} // namespace payrecon::fake
