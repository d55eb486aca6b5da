#include "tests/fake_provider/paypal.hpp"

#include "core/money.hpp"
#include "tests/fake_provider/square.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <tuple>
#include <utility>
#include <variant>

namespace payrecon::fake {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::system_clock;

constexpr std::string_view k_token_path = "/v1/oauth2/token";
constexpr std::string_view k_orders = "/v2/checkout/orders";
constexpr std::string_view k_transactions = "/v1/reporting/transactions";
constexpr std::string_view k_captures = "/v2/payments/captures/";
constexpr std::string_view k_refunds = "/v2/payments/refunds/";
constexpr std::string_view k_authorizations = "/v2/payments/authorizations/";
constexpr std::size_t k_max_note = 255; // refund_request.note_to_payer
constexpr std::string_view k_upper_alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
constexpr std::string_view k_hex = "0123456789abcdef";
constexpr std::string_view k_declined_vault_id = "vault_declined";
constexpr std::string_view k_account_number = "FAKEMERCHANT01";
constexpr std::string_view k_app_id = "APP-80W284485P519543T";
constexpr std::string_view k_scope =
    "https://uri.paypal.com/services/payments/payment "
    "https://uri.paypal.com/services/payments/orders/client-side-integration "
    "https://uri.paypal.com/services/reporting/search/read";
constexpr std::size_t k_id_length = 17;          // order and capture IDs
constexpr std::size_t k_max_request_id = 108;    // PayPal-Request-Id maxLength
constexpr std::size_t k_max_purchase_units = 10; // order_request.purchase_units maxItems
constexpr std::size_t k_max_reference_id = 256;
constexpr std::size_t k_max_text = 127; // invoice_id, custom_id, description
constexpr std::size_t k_max_value = 32; // money.value maxLength
constexpr std::size_t k_max_vault_id = 255;
constexpr std::size_t k_max_integer_digits = 15; // 999999999999999.99 at most
constexpr std::int64_t k_max_page_size = 500;
constexpr std::int64_t k_default_page_size = 100;
constexpr auto k_max_window = std::chrono::hours(24 * 31);
constexpr std::string_view k_400_message =
    "Request is not well-formed, syntactically incorrect, or violates schema.";
constexpr std::string_view k_422_message = "The requested action could not be performed, "
                                           "semantically incorrect, or failed business validation.";

// The OAuth2 error answer {"error","error_description"}.
http::Response oauth_error(int status, std::string_view error, std::string_view description) {
    Json body;
    body["error"] = error;
    body["error_description"] = description;
    return json_response(status, body);
}

std::optional<std::string> base64_decode(std::string_view text) {
    constexpr std::string_view k_alphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    while (!text.empty() && text.back() == '=') {
        text.remove_suffix(1);
    }
    std::string out;
    std::uint32_t bits = 0;
    int count = 0;
    for (const char c : text) {
        const std::size_t v = k_alphabet.find(c);
        if (v == std::string_view::npos) {
            return std::nullopt;
        }
        bits = (bits << 6) | static_cast<std::uint32_t>(v);
        count += 6;
        if (count >= 8) {
            count -= 8;
            out += static_cast<char>((bits >> count) & 0xFFU);
        }
    }
    return out;
}

std::optional<std::int64_t> parse_int(std::string_view text) {
    std::int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc{} || ptr != text.data() + text.size()) {
        return std::nullopt;
    }
    return value;
}

bool vault_id_syntax(std::string_view id) {
    return std::all_of(id.begin(), id.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
    });
}

struct Amount {
    std::string currency;
    std::int64_t minor = 0;
    std::string value; // normalised
};

struct OrderRequest {
    Amount amount;
    std::string reference_id = "default";
    std::optional<std::string> invoice_id;
    std::optional<std::string> custom_id;
    std::optional<std::string> description;
    bool has_source = false;
    bool paypal_wallet = false;
    bool authorize = false; // intent AUTHORIZE
    std::string vault_id;
};

struct Problem {
    int status = 400;
    std::string issue;
    std::string field;
    std::string description;
};

Problem bad(std::string issue, std::string field, std::string description, int status = 400) {
    return Problem{status, std::move(issue), std::move(field), std::move(description)};
}

// money {currency_code, value} exactly: the spec's pattern for value
// (^((-?[0-9]+)|(-?([0-9]+)?[.][0-9]+))$, at most 32 characters), then PayPal's business rules:
// a known currency, more than zero, no more decimals than the currency has, at most 15 digits
// before the point.
std::variant<Amount, Problem> parse_amount(const Json& amount, const std::string& at) {
    if (!amount.is_object()) {
        return bad("INVALID_PARAMETER_SYNTAX", at,
                   "The value of a field does not conform to the "
                   "expected format.");
    }
    if (!amount.contains("currency_code")) {
        return bad("MISSING_REQUIRED_PARAMETER", at + "/currency_code",
                   "A required field / parameter is missing.");
    }
    if (!amount.contains("value")) {
        return bad("MISSING_REQUIRED_PARAMETER", at + "/value",
                   "A required field / parameter is missing.");
    }
    const Json& code = amount["currency_code"];
    const Json& value = amount["value"];
    if (!code.is_string() || !value.is_string()) {
        return bad("INVALID_PARAMETER_SYNTAX",
                   at + (code.is_string() ? "/value" : "/currency_code"),
                   "The value of a field does not conform to the expected format.");
    }
    const std::string& currency = code.get_ref<const std::string&>();
    const std::string& text = value.get_ref<const std::string&>();
    if (currency.size() != 3) {
        return bad("INVALID_STRING_LENGTH", at + "/currency_code",
                   "The value of a field is either too short or too long.");
    }
    if (text.empty() || text.size() > k_max_value) {
        return bad("INVALID_STRING_LENGTH", at + "/value",
                   "The value of a field is either too short or too long.");
    }
    std::string_view rest = text;
    const bool negative = rest.front() == '-';
    if (negative) {
        rest.remove_prefix(1);
    }
    const std::size_t point = rest.find('.');
    const std::string_view whole = rest.substr(0, point);
    const std::string_view fraction =
        point == std::string_view::npos ? std::string_view() : rest.substr(point + 1);
    const auto all_digits = [](std::string_view s) {
        return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    const bool syntax = point == std::string_view::npos
                            ? !whole.empty() && all_digits(whole)
                            : !fraction.empty() && all_digits(whole) && all_digits(fraction);
    if (!syntax) {
        return bad("INVALID_PARAMETER_SYNTAX", at + "/value",
                   "The value of a field does not conform to the expected format.");
    }
    const auto known = find_currency(currency);
    if (!known) {
        return bad("INVALID_CURRENCY_CODE", at + "/currency_code",
                   "Currency code is invalid or is not currently supported.", 422);
    }
    if (fraction.size() > static_cast<std::size_t>(known->exponent)) {
        return bad("DECIMAL_PRECISION", at + "/value",
                   "If the currency supports decimals, only " + std::to_string(known->exponent) +
                       " decimal place precision is supported.",
                   422);
    }
    std::string_view significant = whole;
    while (!significant.empty() && significant.front() == '0') {
        significant.remove_prefix(1);
    }
    if (significant.size() > k_max_integer_digits ||
        significant.size() + static_cast<std::size_t>(known->exponent) > 18) {
        return bad("MAX_VALUE_EXCEEDED", at + "/value",
                   "Should be less than or equal to 999999999999999.99.", 422);
    }
    std::int64_t minor = 0;
    for (const char c : significant) {
        minor = minor * 10 + (c - '0');
    }
    for (int i = 0; i < known->exponent; ++i) {
        const std::size_t index = static_cast<std::size_t>(i);
        minor = minor * 10 + (index < fraction.size() ? fraction[index] - '0' : 0);
    }
    if (negative || minor == 0) {
        return bad("CANNOT_BE_ZERO_OR_NEGATIVE", at + "/value",
                   "Must be greater than zero. If the currency supports decimals, only two "
                   "decimal place precision is supported.",
                   422);
    }
    Amount a;
    a.currency = currency;
    a.minor = minor;
    a.value = major_units(minor, currency).value_or(text);
    return a;
}

// An optional string member of at most `max` characters (at least 1).
std::optional<Problem> optional_text(const Json& object, const char* name, std::size_t max,
                                     const std::string& at, std::optional<std::string>& out) {
    if (!object.contains(name)) {
        return std::nullopt;
    }
    const Json& value = object[name];
    if (!value.is_string()) {
        return bad("INVALID_PARAMETER_SYNTAX", at + "/" + name,
                   "The value of a field does not conform to the expected format.");
    }
    const std::string& text = value.get_ref<const std::string&>();
    if (text.empty() || text.size() > max) {
        return bad("INVALID_STRING_LENGTH", at + "/" + name,
                   "The value of a field is either too short or too long.");
    }
    out = text;
    return std::nullopt;
}

// order_request (the spec's components/schemas/order_request) for what the fake executes: intent
// CAPTURE or AUTHORIZE, one purchase unit, and a vaulted payment source or none.
std::variant<OrderRequest, Problem> validate_order(const Json& body) {
    OrderRequest r;
    if (!body.is_object()) {
        return bad("MALFORMED_REQUEST_JSON", "/", "The request JSON is not well formed.");
    }
    if (!body.contains("intent")) {
        return bad("MISSING_REQUIRED_PARAMETER", "/intent",
                   "A required field / parameter is missing.");
    }
    if (!body["intent"].is_string() ||
        (body["intent"] != "CAPTURE" && body["intent"] != "AUTHORIZE")) {
        return bad("INVALID_PARAMETER_VALUE", "/intent", "A parameter value is not valid.");
    }
    r.authorize = body["intent"] == "AUTHORIZE";
    if (!body.contains("purchase_units")) {
        return bad("MISSING_REQUIRED_PARAMETER", "/purchase_units",
                   "A required field / parameter is missing.");
    }
    const Json& units = body["purchase_units"];
    if (!units.is_array()) {
        return bad("INVALID_PARAMETER_SYNTAX", "/purchase_units",
                   "The value of a field does not conform to the expected format.");
    }
    if (units.empty()) {
        return bad("INVALID_ARRAY_MIN_ITEMS", "/purchase_units",
                   "The number of items in an array parameter is too small.");
    }
    if (units.size() > k_max_purchase_units) {
        return bad("INVALID_ARRAY_MAX_ITEMS", "/purchase_units",
                   "The number of items in an array parameter is too large.");
    }
    if (units.size() > 1) {
        return bad("NOT_SUPPORTED", "/purchase_units",
                   "This field is not currently supported (the fake provider executes one "
                   "purchase unit).");
    }
    const Json& unit = units[0];
    const std::string at = "/purchase_units/0";
    if (!unit.is_object()) {
        return bad("INVALID_PARAMETER_SYNTAX", at,
                   "The value of a field does not conform to the expected format.");
    }
    std::optional<std::string> reference_id;
    if (auto p = optional_text(unit, "reference_id", k_max_reference_id, at, reference_id)) {
        return *p;
    }
    r.reference_id = reference_id.value_or("default");
    for (const auto& [name, out] :
         {std::pair{"invoice_id", &r.invoice_id}, std::pair{"custom_id", &r.custom_id},
          std::pair{"description", &r.description}}) {
        if (auto p = optional_text(unit, name, k_max_text, at, *out)) {
            return *p;
        }
    }
    if (!unit.contains("amount")) {
        return bad("MISSING_REQUIRED_PARAMETER", at + "/amount",
                   "A required field / parameter is missing.");
    }

    // The payment source's shape (400) before the amount's business rules (422).
    std::optional<Problem> source_problem;
    if (body.contains("payment_source")) {
        const Json& source = body["payment_source"];
        if (!source.is_object()) {
            return bad("INVALID_PARAMETER_SYNTAX", "/payment_source",
                       "The value of a field does not conform to the expected format.");
        }
        const bool card = source.contains("card");
        const bool paypal = source.contains("paypal");
        if (!card && !paypal) {
            return bad("NOT_SUPPORTED", "/payment_source",
                       "This field is not currently supported (the fake provider executes a "
                       "vaulted card or PayPal wallet only).");
        }
        if (card && paypal) {
            source_problem = bad("INCOMPATIBLE_PARAMETER_VALUE", "/payment_source",
                                 "The value of the field is incompatible/redundant with other "
                                 "fields in the order.",
                                 422);
        } else {
            const std::string kind = card ? "card" : "paypal";
            const Json& wallet = source[kind];
            const std::string field = "/payment_source/" + kind;
            if (!wallet.is_object()) {
                return bad("INVALID_PARAMETER_SYNTAX", field,
                           "The value of a field does not conform to the expected format.");
            }
            if (!wallet.contains("vault_id")) {
                return bad("NOT_SUPPORTED", field,
                           "This field is not currently supported (the fake provider executes "
                           "vaulted payment sources only: " +
                               field.substr(1) + "/vault_id).");
            }
            const Json& vault_id = wallet["vault_id"];
            if (!vault_id.is_string()) {
                return bad("INVALID_PARAMETER_SYNTAX", field + "/vault_id",
                           "The value of a field does not conform to the expected format.");
            }
            const std::string& id = vault_id.get_ref<const std::string&>();
            if (id.empty() || id.size() > k_max_vault_id) {
                return bad("INVALID_STRING_LENGTH", field + "/vault_id",
                           "The value of a field is either too short or too long.");
            }
            if (!vault_id_syntax(id)) {
                return bad("INVALID_PARAMETER_SYNTAX", field + "/vault_id",
                           "The value of a field does not conform to the expected format.");
            }
            r.has_source = true;
            r.paypal_wallet = paypal;
            r.vault_id = id;
        }
    }
    auto amount = parse_amount(unit["amount"], at + "/amount");
    if (auto* problem = std::get_if<Problem>(&amount)) {
        if (problem->status == 400 || !source_problem) {
            return *problem;
        }
    }
    if (source_problem) {
        return *source_problem;
    }
    r.amount = std::get<Amount>(std::move(amount));
    return r;
}

bool wants_representation(const http::Request& request) {
    const std::string* prefer = request.header("prefer");
    return prefer != nullptr &&
           to_lower_ascii(*prefer).find("return=representation") != std::string::npos;
}

Json link(std::string href, std::string_view rel, std::string_view method) {
    Json l;
    l["href"] = std::move(href);
    l["rel"] = rel;
    l["method"] = method;
    return l;
}

Json money(const std::string& currency, const std::string& value) {
    return Json{{"currency_code", currency}, {"value", value}};
}

} // namespace

PayPalApi::PayPalApi(Ledger& ledger, const Account& account, PayPalOptions options)
    : m_ledger(ledger), m_account(account), m_options(std::move(options)) {}

bool PayPalApi::serves(const http::Request& request) const {
    const std::string& path = request.path;
    if (SquareApi::serves_path(path)) {
        return false;
    }
    for (const std::string_view prefix : {"/v1/oauth2/", "/v2/", "/v1/reporting/"}) {
        if (path.compare(0, prefix.size(), prefix) == 0) {
            return true;
        }
    }
    return false;
}

void PayPalApi::reset_locked() {
    m_orders.clear();
    m_by_id.clear();
    m_requests.clear();
    m_refunds.clear();
    m_by_capture.clear();
    m_by_authorization.clear();
    m_auth_captures.clear();
    m_capture_requests.clear();
    m_capture_deliveries = 0;
    m_void_deliveries = 0;
    m_captures = 0;
    m_voids = 0;
    m_refunds_by_id.clear();
    m_refund_requests.clear();
    m_tokens.clear();
    m_tokens_issued = 0;
}

std::size_t PayPalApi::expire_tokens() {
    const auto lock = m_ledger.lock();
    const auto now = m_ledger.now_locked();
    std::size_t valid = 0;
    for (auto& [token, expiry] : m_tokens) {
        if (expiry > now) {
            ++valid;
            expiry = now;
        }
    }
    return valid;
}

Reply PayPalApi::handle(const http::Request& request, const Wait& wait) {
    Reply reply;
    const std::string& path = request.path;
    const std::string order_prefix = std::string(k_orders) + "/";
    if (request.method == "POST" && path == k_token_path) {
        reply = token(request, wait);
    } else if (request.method == "POST" && path == k_orders) {
        reply = create(request, wait);
    } else if (request.method == "GET" && path.size() > order_prefix.size() &&
               path.compare(0, order_prefix.size(), order_prefix) == 0 &&
               path.find('/', order_prefix.size()) == std::string::npos) {
        reply = get_order(request, path.substr(order_prefix.size()), wait);
    } else if (request.method == "GET" && path == k_transactions) {
        reply = search(request, wait);
    } else if (request.method == "POST" && path.size() > k_captures.size() + 7 &&
               path.compare(0, k_captures.size(), k_captures) == 0 &&
               path.compare(path.size() - 7, 7, "/refund") == 0 &&
               path.find('/', k_captures.size()) == path.size() - 7) {
        reply = refund(request, path.substr(k_captures.size(), path.size() - 7 - k_captures.size()),
                       wait);
    } else if (request.method == "POST" && path.size() > k_authorizations.size() &&
               path.compare(0, k_authorizations.size(), k_authorizations) == 0 &&
               path.find('/', k_authorizations.size()) != std::string::npos &&
               path.find('/', path.find('/', k_authorizations.size()) + 1) == std::string::npos &&
               (path.substr(path.rfind('/')) == "/capture" ||
                path.substr(path.rfind('/')) == "/void") &&
               path.rfind('/') > k_authorizations.size()) {
        const std::size_t slash = path.rfind('/');
        reply = capture_or_void(
            request, path.substr(k_authorizations.size(), slash - k_authorizations.size()),
            path.substr(slash) == "/void", wait);
    } else if (request.method == "GET" && path.size() > k_authorizations.size() &&
               path.compare(0, k_authorizations.size(), k_authorizations) == 0 &&
               path.find('/', k_authorizations.size()) == std::string::npos) {
        reply = get_payment(request, path, wait);
    } else if (request.method == "GET" &&
               ((path.size() > k_captures.size() &&
                 path.compare(0, k_captures.size(), k_captures) == 0 &&
                 path.find('/', k_captures.size()) == std::string::npos) ||
                (path.size() > k_refunds.size() &&
                 path.compare(0, k_refunds.size(), k_refunds) == 0 &&
                 path.find('/', k_refunds.size()) == std::string::npos))) {
        reply = get_payment(request, path, wait);
    } else {
        const auto lock = m_ledger.lock();
        if (auto refused = token_refusal_locked(request)) {
            reply.response = std::move(*refused);
        } else {
            reply.response =
                error_locked(404, "RESOURCE_NOT_FOUND", "The specified resource does not exist.",
                             {Issue{404, "INVALID_RESOURCE_ID", "",
                                    "Specified "
                                    "resource ID does not exist. Please check the "
                                    "resource ID and try again.",
                                    "path"}});
        }
    }
    if (reply.action == SocketAction::respond || reply.action == SocketAction::partial_then_fin) {
        const auto lock = m_ledger.lock();
        reply.response.headers.emplace_back("Paypal-Debug-Id",
                                            m_ledger.random_id_locked("", 13, k_hex));
    }
    return reply;
}

std::optional<http::Response> PayPalApi::token_refusal_locked(const http::Request& request) const {
    const auto token = bearer_credential(request);
    if (!token || token->empty()) {
        Json body;
        body["name"] = "AUTHENTICATION_FAILURE";
        body["message"] = "Authentication failed due to missing authorization header, or invalid "
                          "authentication credentials.";
        body["links"] =
            Json::array({link("https://developer.paypal.com/api/rest/reference/orders/v2/errors/"
                              "#link-authenticationfailure",
                              "information_link", "GET")});
        return json_response(401, body);
    }
    const auto it = m_tokens.find(std::string(*token));
    if (it == m_tokens.end()) {
        return oauth_error(401, "invalid_token", "Token signature verification failed");
    }
    if (it->second <= m_ledger.now_locked()) {
        return oauth_error(401, "invalid_token", "Access Token not found in cache");
    }
    return std::nullopt;
}

http::Response PayPalApi::error_locked(int status, std::string_view name, std::string_view message,
                                       const std::vector<Issue>& details) {
    Json body;
    body["name"] = name;
    body["message"] = message;
    body["debug_id"] = m_ledger.random_id_locked("", 13, k_hex);
    if (!details.empty()) {
        body["details"] = Json::array();
        for (const Issue& d : details) {
            Json item;
            if (!d.field.empty()) {
                item["field"] = d.field;
            }
            item["location"] = d.location;
            item["issue"] = d.issue;
            item["description"] = d.description;
            body["details"].push_back(std::move(item));
        }
    }
    body["links"] = Json::array(
        {link("https://developer.paypal.com/api/rest/reference/orders/v2/errors/#" +
                  to_lower_ascii(details.empty() ? std::string(name) : details.front().issue),
              "information_link", "GET")});
    return json_response(status, body);
}

http::Response PayPalApi::issue_locked(const Issue& issue) {
    if (issue.status == 422) {
        return error_locked(422, "UNPROCESSABLE_ENTITY", k_422_message, {issue});
    }
    return error_locked(issue.status, "INVALID_REQUEST", k_400_message, {issue});
}

Reply PayPalApi::token(const http::Request& request, const Wait& wait) {
    Reply reply;
    if (!wait(m_ledger.faults().latency)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    // HTTP basic client_id:client_secret.
    bool authenticated = false;
    if (const std::string* value = request.header("authorization");
        value != nullptr && value->size() > 6 && to_lower_ascii(value->substr(0, 6)) == "basic ") {
        const auto decoded = base64_decode(std::string_view(*value).substr(6));
        const std::size_t colon = decoded ? decoded->find(':') : std::string::npos;
        if (colon != std::string::npos && !m_options.client_secret.empty()) {
            const std::string_view id = std::string_view(*decoded).substr(0, colon);
            const std::string_view secret = std::string_view(*decoded).substr(colon + 1);
            // Both compared whole, whatever the first says.
            const bool id_ok = constant_time_equal(id, m_options.client_id);
            const bool secret_ok = constant_time_equal(secret, m_options.client_secret.reveal());
            authenticated = id_ok && secret_ok;
        }
    }
    if (!authenticated) {
        reply.response = oauth_error(401, "invalid_client", "Client Authentication failed");
        return reply;
    }
    const auto form = http::parse_form(request.body);
    const std::string* grant = nullptr;
    if (form) {
        for (const auto& [name, value] : *form) {
            if (name == "grant_type") {
                grant = &value;
            }
        }
    }
    if (grant == nullptr) {
        reply.response = oauth_error(400, "unsupported_grant_type", "Grant Type is NULL");
        return reply;
    }
    if (*grant != "client_credentials") {
        reply.response = oauth_error(400, "unsupported_grant_type", "unsupported grant_type");
        return reply;
    }
    const auto lock = m_ledger.lock();
    const auto now = m_ledger.now_locked();
    std::string access_token = m_ledger.random_id_locked("A21AA", 92, Ledger::k_base62);
    m_tokens[access_token] = now + m_options.token_ttl;
    ++m_tokens_issued;
    Json body;
    body["scope"] = k_scope;
    body["access_token"] = std::move(access_token);
    body["token_type"] = "Bearer";
    body["app_id"] = k_app_id;
    body["expires_in"] = m_options.token_ttl.count();
    body["nonce"] = rfc3339(now) + m_ledger.random_id_locked("", 43, Ledger::k_base62);
    reply.response = json_response(200, body);
    return reply;
}

Reply PayPalApi::create(const http::Request& request, const Wait& wait) {
    Reply reply;
    const Json body = Json::parse(request.body, nullptr, false); // discarded if not JSON
    const std::string* request_id_header = request.header("paypal-request-id");
    const std::string* request_id = m_account.idempotency ? request_id_header : nullptr;
    const bool representation = wants_representation(request);

    // The operation ID: the first purchase unit's invoice_id, custom_id or reference_id.
    if (body.is_object() && body.contains("purchase_units") && body["purchase_units"].is_array() &&
        !body["purchase_units"].empty() && body["purchase_units"][0].is_object()) {
        const Json& unit = body["purchase_units"][0];
        for (const char* name : {"invoice_id", "custom_id", "reference_id"}) {
            if (unit.contains(name) && unit[name].is_string() &&
                !unit[name].get_ref<const std::string&>().empty()) {
                reply.operation_id = unit[name].get<std::string>();
                break;
            }
        }
    }
    if (reply.operation_id.empty()) {
        reply.operation_id = request_id_header != nullptr && !request_id_header->empty()
                                 ? *request_id_header
                                 : std::string(k_no_operation);
    }

    std::unique_lock lock = m_ledger.lock();
    m_ledger.count_delivery_locked(reply.operation_id);
    const auto latency = m_ledger.faults_locked().latency;
    // Answers without executing, after the configured latency.
    auto answer = [&](Reply r) { return answer_after(lock, wait, latency, std::move(r)); };
    const auto error_500 = [this] {
        return error_locked(500, "INTERNAL_SERVER_ERROR", "An internal server error occurred.", {});
    };

    if (auto refused = token_refusal_locked(request)) {
        reply.response = std::move(*refused);
        return answer(std::move(reply));
    }
    if (fault_before_execute_locked(m_ledger, reply, error_500)) {
        return answer(std::move(reply));
    }
    if (request_id != nullptr && request_id->empty()) {
        request_id = nullptr;
    }
    if (request_id != nullptr && request_id->size() > k_max_request_id) {
        reply.response = issue_locked(Issue{400, "INVALID_STRING_LENGTH", "PayPal-Request-Id",
                                            "The value of a field is either too short or too "
                                            "long.",
                                            "header"});
        apply_after_execute(reply, error_500());
        return answer(std::move(reply));
    }
    // A known request ID answers before the body is looked at (PayPal does not compare it).
    if (request_id != nullptr &&
        request_answered_locked(
            m_requests, *request_id, m_options.key_retention,
            "A previous request with this PayPal-Request-Id is still being processed (fake "
            "provider).",
            [&](std::size_t i) {
                return json_response(200, render_order(m_orders[i], representation));
            },
            reply)) {
        apply_after_execute(reply, error_500());
        return answer(std::move(reply));
    }

    std::variant<OrderRequest, Problem> validated =
        bad("MALFORMED_REQUEST_JSON", "/", "The request JSON is not well formed.");
    if (!body.is_discarded()) {
        validated = validate_order(body);
    }
    if (auto* problem = std::get_if<Problem>(&validated)) {
        reply.response = issue_locked(
            Issue{problem->status, problem->issue, problem->field, problem->description, "body"});
        apply_after_execute(reply, error_500());
        return answer(std::move(reply));
    }
    OrderRequest order_request = std::get<OrderRequest>(std::move(validated));

    if (m_account.idempotency && order_request.has_source &&
        (request_id == nullptr || request_id->empty())) {
        reply.response = issue_locked(
            Issue{400, "PAYPAL_REQUEST_ID_REQUIRED", "PayPal-Request-Id",
                  "A PayPal-Request-Id is required if you are trying to process payment for an "
                  "Order. Please specify a PayPal-Request-Id or Create the Order without a "
                  "'payment_source' specified.",
                  "header"});
        apply_after_execute(reply, error_500());
        return answer(std::move(reply));
    }
    if (request_id != nullptr) {
        RequestRecord record;
        record.first_seen = m_ledger.now_locked();
        m_requests.emplace(*request_id, record);
    }

    // The request ID is in flight for as long as the latency lasts.
    if (!wait_in_flight(lock, wait, latency, m_requests, request_id)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }

    // Execute: the order, and with a payment source its capture at once.
    Order order;
    order.id = m_ledger.random_id_locked("", k_id_length, k_upper_alnum);
    order.currency = order_request.amount.currency;
    order.value = order_request.amount.value;
    order.minor = order_request.amount.minor;
    order.reference_id = std::move(order_request.reference_id);
    order.invoice_id = std::move(order_request.invoice_id);
    order.custom_id = std::move(order_request.custom_id);
    order.description = std::move(order_request.description);
    order.operation_id = reply.operation_id;
    order.created_at = m_ledger.now_locked();
    const std::string* host = request.header("host");
    order.base_url = "http://" + (host != nullptr && !host->empty() ? *host : "127.0.0.1");
    order.authorize = order_request.authorize;
    if (order_request.has_source && order_request.authorize) {
        // Authorise only: the amount held, nothing charged until a capture.
        order.source = order_request.paypal_wallet ? Source::paypal : Source::card;
        order.vault_id = std::move(order_request.vault_id);
        if (order_request.paypal_wallet) {
            order.payer_id = m_ledger.random_id_locked("", 13, k_upper_alnum);
        }
        order.authorization_id = m_ledger.random_id_locked("", k_id_length, k_upper_alnum);
        order.denied = reply.fault == Fault::decline || order.vault_id == k_declined_vault_id;
        m_ledger.count_execution_locked(order.operation_id);
        reply.executed = true;
    } else if (order_request.has_source) {
        order.source = order_request.paypal_wallet ? Source::paypal : Source::card;
        order.vault_id = std::move(order_request.vault_id);
        if (order_request.paypal_wallet) {
            order.payer_id = m_ledger.random_id_locked("", 13, k_upper_alnum);
        }
        order.capture_id = m_ledger.random_id_locked("", k_id_length, k_upper_alnum);
        order.capture = reply.fault == Fault::decline || order.vault_id == k_declined_vault_id
                            ? Capture::declined
                            : Capture::completed;
        m_ledger.count_execution_locked(order.operation_id);
        if (order.capture == Capture::completed) {
            m_ledger.add_charged_locked(order.currency, order.minor);
        }
        reply.executed = true;
    }
    reply.response = json_response(201, render_order(order, representation));
    const std::size_t index = m_orders.size();
    m_by_id.emplace(order.id, index);
    if (!order.capture_id.empty()) {
        m_by_capture.emplace(order.capture_id, index);
    }
    if (!order.authorization_id.empty()) {
        m_by_authorization.emplace(order.authorization_id, index);
    }
    m_orders.push_back(std::move(order));
    apply_after_execute(reply, error_500());

    if (request_id != nullptr) {
        const auto it = m_requests.find(*request_id);
        if (it != m_requests.end()) { // gone only if reset() ran meanwhile
            it->second.in_flight = false;
            it->second.index = index; // whatever was answered: the order exists
        }
    }
    return reply;
}

bool PayPalApi::request_answered_locked(std::map<std::string, RequestRecord>& requests,
                                        const std::string& request_id,
                                        std::chrono::seconds retention,
                                        std::string_view in_progress,
                                        const std::function<http::Response(std::size_t)>& current,
                                        Reply& reply) {
    const auto it = known_key_locked(requests, request_id, m_ledger.now_locked(), retention);
    if (it == requests.end()) {
        return false;
    }
    if (it->second.in_flight) {
        reply.response =
            error_locked(409, "RESOURCE_CONFLICT",
                         "The server has detected a conflict while processing this request.",
                         {Issue{409, "PREVIOUS_REQUEST_IN_PROGRESS", "PayPal-Request-Id",
                                std::string(in_progress), "header"}});
    } else {
        reply.response = current(it->second.index);
        reply.replayed = true;
        m_ledger.count_replay_locked();
    }
    return true;
}

Reply PayPalApi::get_order(const http::Request& request, const std::string& id, const Wait& wait) {
    Reply reply;
    if (!wait(m_ledger.faults().latency)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    const auto lock = m_ledger.lock();
    if (auto refused = token_refusal_locked(request)) {
        reply.response = std::move(*refused);
        return reply;
    }
    const auto it = m_by_id.find(id);
    if (it == m_by_id.end()) {
        reply.response = not_found_locked("order_id");
        return reply;
    }
    reply.response = json_response(200, render_order(m_orders[it->second], true));
    return reply;
}

Reply PayPalApi::search(const http::Request& request, const Wait& wait) {
    Reply reply;
    if (!wait(m_ledger.faults().latency)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    const auto lock = m_ledger.lock();
    if (auto refused = token_refusal_locked(request)) {
        reply.response = std::move(*refused);
        return reply;
    }
    if (!m_account.lookup) {
        // What an account without Transaction Search enabled is answered.
        reply.response = error_locked(
            403, "NOT_AUTHORIZED", "Authorization failed due to insufficient permissions.",
            {Issue{403, "PERMISSION_DENIED", "",
                   "You do not have permission to access or perform operations on this resource "
                   "(fake provider: --no-lookup).",
                   "query"}});
        return reply;
    }
    const auto query_issue = [&](std::string issue, std::string field, std::string description) {
        return issue_locked(
            Issue{400, std::move(issue), std::move(field), std::move(description), "query"});
    };
    const auto query = http::parse_form(request.query);
    if (!query) {
        reply.response =
            query_issue("INVALID_PARAMETER_SYNTAX", "", "The query string is not well formed.");
        return reply;
    }
    const auto param = [&](std::string_view name) -> const std::string* {
        for (const auto& [key, value] : *query) {
            if (key == name) {
                return &value;
            }
        }
        return nullptr;
    };
    std::optional<Clock::time_point> window[2];
    for (int i = 0; i < 2; ++i) {
        const char* name = i == 0 ? "start_date" : "end_date";
        const std::string* text = param(name);
        if (text == nullptr) {
            reply.response = query_issue("MISSING_REQUIRED_PARAMETER", name,
                                         "A required field / parameter is missing.");
            return reply;
        }
        window[i] = parse_rfc3339(*text);
        if (!window[i]) {
            reply.response = query_issue("INVALID_PARAMETER_SYNTAX", name,
                                         "The value of a field does not conform to the expected "
                                         "format (RFC 3339, seconds required).");
            return reply;
        }
    }
    const Clock::time_point start = *window[0];
    const Clock::time_point end = *window[1];
    if (end < start) {
        reply.response = query_issue("INVALID_PARAMETER_VALUE", "end_date",
                                     "end_date must not be before start_date.");
        return reply;
    }
    if (end - start > k_max_window) {
        reply.response = query_issue("Date range is greater than 31 days", "start_date",
                                     "The window from start_date to end_date is at most 31 days.");
        return reply;
    }
    std::int64_t page_size = k_default_page_size;
    std::int64_t page = 1;
    for (const auto& [name, out, max] : {std::tuple{"page_size", &page_size, k_max_page_size},
                                         std::tuple{"page", &page, std::int64_t{2147483647}}}) {
        if (const std::string* text = param(name)) {
            const auto n = parse_int(*text);
            if (!n || *n < 1 || *n > max) {
                reply.response =
                    query_issue("INVALID_PARAMETER_VALUE", name, "A parameter value is not valid.");
                return reply;
            }
            *out = *n;
        }
    }
    if (const std::string* fields = param("fields")) {
        static const std::vector<std::string_view> k_fields{
            "transaction_info", "payer_info",     "shipping_info", "auction_info",
            "cart_info",        "incentive_info", "store_info",    "all"};
        std::string_view rest = *fields;
        while (true) {
            const std::size_t comma = rest.find(',');
            if (std::find(k_fields.begin(), k_fields.end(), rest.substr(0, comma)) ==
                k_fields.end()) {
                reply.response = query_issue("INVALID_PARAMETER_VALUE", "fields",
                                             "A parameter value is not valid.");
                return reply;
            }
            if (comma == std::string_view::npos) {
                break;
            }
            rest.remove_prefix(comma + 1);
        }
    }
    const std::string* status_filter = param("transaction_status");
    if (status_filter != nullptr && *status_filter != "D" && *status_filter != "P" &&
        *status_filter != "S" && *status_filter != "V") {
        reply.response = query_issue("INVALID_PARAMETER_VALUE", "transaction_status",
                                     "A parameter value is not valid.");
        return reply;
    }
    const std::string* id_filter = param("transaction_id");
    const std::string* currency_filter = param("transaction_currency");

    const FaultConfig& faults = m_ledger.faults_locked();
    if (faults.lookup_down) {
        reply.response = error_locked(503, "SERVICE_UNAVAILABLE", "Service Unavailable.", {});
        return reply;
    }
    if (faults.list_rate_limited) {
        reply.response = error_locked(429, "RATE_LIMIT_REACHED",
                                      "Too many requests. Blocked due to rate limiting.", {});
        reply.response.headers.emplace_back("Retry-After", "1");
        return reply;
    }
    // PayPal's lag: a capture is searchable lookup_stale after its creation; the data is
    // refreshed up to now - lookup_stale.
    const Clock::time_point refreshed = m_ledger.now_locked() - faults.lookup_stale;
    // The captures and the refunds, each one entry: a refund is money out of the account.
    struct Entry {
        Clock::time_point created_at;
        const Order* order;
        const Refund* refund; // null: the order's capture, authorization or its capture
        bool authorization = false;
        std::optional<std::size_t> auth_capture; // one of the authorization's captures
    };
    const Clock::time_point now = m_ledger.now_locked();
    // An authorization's transaction status: pending while it can be captured, S once captured
    // in full, V voided or expired, D denied.
    const auto held_status = [&](const Order& o) {
        const std::string status = authorization_status(o, now);
        return status == "CREATED" || status == "PARTIALLY_CAPTURED" ? 'P'
               : status == "CAPTURED"                                ? 'S'
               : status == "DENIED"                                  ? 'D'
                                                                     : 'V';
    };
    std::vector<Entry> found;
    const auto consider = [&](const Entry& e, const std::string& id, char status,
                              const std::string& currency) {
        if (e.created_at < start || e.created_at >= end || e.created_at > refreshed ||
            (status_filter != nullptr && (*status_filter)[0] != status) ||
            (id_filter != nullptr && *id_filter != id) ||
            (currency_filter != nullptr && *currency_filter != currency)) {
            return;
        }
        found.push_back(e);
    };
    for (const Order& o : m_orders) {
        if (o.capture != Capture::none) {
            consider(Entry{o.created_at, &o, nullptr, false, std::nullopt}, o.capture_id,
                     o.capture == Capture::completed ? 'S' : 'D', o.currency);
        }
        if (!o.authorization_id.empty()) {
            consider(Entry{o.created_at, &o, nullptr, true, std::nullopt}, o.authorization_id,
                     held_status(o), o.currency);
        }
        for (std::size_t c = 0; c < o.captures.size(); ++c) {
            consider(Entry{o.captures[c].created_at, &o, nullptr, false, c}, o.captures[c].id,
                     o.captures[c].declined ? 'D' : 'S', o.currency);
        }
    }
    for (const Refund& r : m_refunds) {
        consider(Entry{r.created_at, &m_orders[r.order], &r, false, std::nullopt}, r.id,
                 r.failed ? 'D' : 'S', r.currency);
    }
    std::stable_sort(found.begin(), found.end(), [](const Entry& a, const Entry& b) {
        return a.created_at < b.created_at; // oldest first
    });
    const auto total = static_cast<std::int64_t>(found.size());
    const std::int64_t pages = (total + page_size - 1) / page_size;
    Json details = Json::array();
    for (std::int64_t i = (page - 1) * page_size; i < total && i < page * page_size; ++i) {
        const Entry& e = found[static_cast<std::size_t>(i)];
        const Order& o = *e.order;
        Json info;
        if (o.source == Source::paypal) {
            info["paypal_account_id"] = o.payer_id;
        }
        if (e.refund != nullptr) {
            // A refund: "T1107: Payment refund, initiated by merchant", referring to the capture.
            const Refund& r = *e.refund;
            info["transaction_id"] = r.id;
            info["paypal_reference_id"] =
                r.auth_capture ? o.captures[*r.auth_capture].id : o.capture_id;
            info["paypal_reference_id_type"] = "TXN";
            info["transaction_event_code"] = "T1107";
            info["transaction_initiation_date"] = rfc3339(r.created_at);
            info["transaction_updated_date"] = rfc3339(r.created_at);
            info["transaction_amount"] = money(r.currency, "-" + r.value);
            info["transaction_status"] = r.failed ? "D" : "S";
            if (r.invoice_id) {
                info["invoice_id"] = *r.invoice_id;
            }
            if (r.custom_id) {
                info["custom_field"] = *r.custom_id;
            }
            details.push_back(Json{{"transaction_info", std::move(info)}});
            continue;
        }
        if (e.authorization) {
            // The authorization: "T13nn Authorizations", the held amount under the charge's IDs.
            info["transaction_id"] = o.authorization_id;
            info["paypal_reference_id"] = o.id;
            info["paypal_reference_id_type"] = "ODR";
            info["transaction_event_code"] = "T1301";
            info["transaction_initiation_date"] = rfc3339(o.created_at);
            info["transaction_updated_date"] = rfc3339(o.created_at);
            info["transaction_amount"] = money(o.currency, o.value);
            info["transaction_status"] = std::string(1, held_status(o));
            if (o.invoice_id) {
                info["invoice_id"] = *o.invoice_id;
            }
            if (o.custom_id) {
                info["custom_field"] = *o.custom_id;
            }
            details.push_back(Json{{"transaction_info", std::move(info)}});
            continue;
        }
        if (e.auth_capture) {
            // A capture of the authorization, under its own invoice_id (capture_request's).
            const AuthCapture& c = o.captures[*e.auth_capture];
            info["transaction_id"] = c.id;
            info["paypal_reference_id"] = o.authorization_id;
            info["paypal_reference_id_type"] = "TXN";
            info["transaction_event_code"] = "T0006";
            info["transaction_initiation_date"] = rfc3339(c.created_at);
            info["transaction_updated_date"] = rfc3339(c.created_at);
            info["transaction_amount"] = money(o.currency, c.value);
            info["transaction_status"] = c.declined ? "D" : "S";
            if (c.invoice_id) {
                info["invoice_id"] = *c.invoice_id;
            }
            if (o.custom_id) {
                info["custom_field"] = *o.custom_id;
            }
            details.push_back(Json{{"transaction_info", std::move(info)}});
            continue;
        }
        info["transaction_id"] = o.capture_id;
        info["paypal_reference_id"] = o.id;
        info["paypal_reference_id_type"] = "ODR";
        info["transaction_event_code"] = "T0006";
        info["transaction_initiation_date"] = rfc3339(o.created_at);
        info["transaction_updated_date"] = rfc3339(o.created_at);
        info["transaction_amount"] = money(o.currency, o.value);
        info["transaction_status"] = o.capture == Capture::completed ? "S" : "D";
        if (o.invoice_id) {
            info["invoice_id"] = *o.invoice_id;
        }
        if (o.custom_id) {
            info["custom_field"] = *o.custom_id;
        }
        details.push_back(Json{{"transaction_info", std::move(info)}});
    }
    const std::string* host = request.header("host");
    std::string base = "http://" + (host != nullptr && !host->empty() ? *host : "127.0.0.1") +
                       std::string(k_transactions) + "?";
    for (const auto& [name, value] : *query) {
        if (name != "page") {
            base += http::percent_encode(name) + "=" + http::percent_encode(value) + "&";
        }
    }
    Json links = Json::array();
    links.push_back(link(base + "page=" + std::to_string(page), "self", "GET"));
    if (page < pages) {
        links.push_back(link(base + "page=" + std::to_string(page + 1), "next", "GET"));
    }
    if (pages > 0) {
        links.push_back(link(base + "page=" + std::to_string(pages), "last", "GET"));
    }
    Json body;
    body["transaction_details"] = std::move(details);
    body["account_number"] = k_account_number;
    body["start_date"] = rfc3339(start);
    body["end_date"] = rfc3339(std::max(start, std::min(end, refreshed)));
    body["last_refreshed_datetime"] = rfc3339(refreshed);
    body["page"] = page;
    body["total_items"] = total;
    body["total_pages"] = pages;
    body["links"] = std::move(links);
    reply.response = json_response(200, body);
    return reply;
}

Json PayPalApi::render_order(const Order& o, bool representation) const {
    const std::string self = o.base_url + std::string(k_orders) + "/" + o.id;
    const bool created_only = !o.source.has_value();
    Json links = Json::array();
    links.push_back(link(self, "self", "GET"));
    if (created_only) {
        links.push_back(link(o.base_url + "/checkoutnow?token=" + o.id, "approve", "GET"));
        links.push_back(link(self, "update", "PATCH"));
        links.push_back(link(self + "/capture", "capture", "POST"));
    }
    Json j;
    j["id"] = o.id;
    if (representation) {
        j["intent"] = o.authorize ? "AUTHORIZE" : "CAPTURE";
    }
    j["status"] = created_only ? "CREATED" : "COMPLETED";
    if (!representation) {
        j["links"] = std::move(links);
        return j;
    }
    if (o.source == Source::card) {
        Json card;
        card["name"] = "Fake Cardholder";
        card["last_digits"] = "1111";
        card["brand"] = "VISA";
        card["type"] = "CREDIT";
        card["attributes"]["vault"] = Json{{"id", o.vault_id}, {"status", "VAULTED"}};
        j["payment_source"]["card"] = std::move(card);
    } else if (o.source == Source::paypal) {
        Json wallet;
        wallet["email_address"] = "buyer@example.com";
        wallet["account_id"] = o.payer_id;
        wallet["account_status"] = "VERIFIED";
        wallet["attributes"]["vault"] = Json{{"id", o.vault_id}, {"status", "VAULTED"}};
        j["payment_source"]["paypal"] = std::move(wallet);
    }
    Json unit;
    unit["reference_id"] = o.reference_id;
    unit["amount"] = money(o.currency, o.value);
    unit["payee"] = Json{{"merchant_id", k_account_number}};
    if (o.description) {
        unit["description"] = *o.description;
    }
    if (o.custom_id) {
        unit["custom_id"] = *o.custom_id;
    }
    if (o.invoice_id) {
        unit["invoice_id"] = *o.invoice_id;
    }
    if (!o.authorization_id.empty()) {
        unit["payments"]["authorizations"] = Json::array({render_authorization(o, false)});
        if (!o.captures.empty()) {
            unit["payments"]["captures"] = Json::array();
            for (std::size_t c = 0; c < o.captures.size(); ++c) {
                unit["payments"]["captures"].push_back(render_auth_capture(o, c, false));
            }
        }
    }
    if (o.capture != Capture::none || !o.captures.empty()) {
        if (o.capture != Capture::none) {
            unit["payments"]["captures"] = Json::array({render_capture(o, false)});
        }
        if (!o.refunds.empty()) {
            unit["payments"]["refunds"] = Json::array();
            for (const std::size_t r : o.refunds) {
                unit["payments"]["refunds"].push_back(render_refund(m_refunds[r], true));
            }
        }
    }
    j["purchase_units"] = Json::array({std::move(unit)});
    j["create_time"] = rfc3339(o.created_at);
    j["update_time"] = rfc3339(o.created_at);
    j["links"] = std::move(links);
    return j;
}

std::int64_t PayPalApi::refunded_minor(const Order& o,
                                       std::optional<std::size_t> auth_capture) const {
    std::int64_t total = 0;
    for (const std::size_t r : o.refunds) {
        if (m_refunds[r].auth_capture == auth_capture) {
            total += m_refunds[r].failed ? 0 : m_refunds[r].minor;
        }
    }
    return total;
}

std::int64_t PayPalApi::captured_minor(const Order& o) {
    std::int64_t total = 0;
    for (const AuthCapture& c : o.captures) {
        total += c.declined ? 0 : c.minor;
    }
    return total;
}

std::string PayPalApi::authorization_status(const Order& o, Clock::time_point now) const {
    if (o.denied) {
        return "DENIED";
    }
    if (o.voided) {
        return "VOIDED";
    }
    const std::int64_t captured = captured_minor(o);
    if (o.closed || captured >= o.minor) {
        return "CAPTURED";
    }
    if (now >= o.created_at + m_options.authorization_validity) {
        return "EXPIRED";
    }
    return captured == 0 ? "CREATED" : "PARTIALLY_CAPTURED";
}

Json PayPalApi::render_authorization(const Order& o, bool standalone) const {
    const std::string self = o.base_url + std::string(k_authorizations) + o.authorization_id;
    const std::string status = authorization_status(o, m_ledger.now_locked());
    Json a;
    a["id"] = o.authorization_id;
    a["status"] = status;
    if (status == "PENDING") {
        a["status_details"]["reason"] = "PENDING_REVIEW";
    }
    a["amount"] = money(o.currency, o.value);
    if (o.invoice_id) {
        a["invoice_id"] = *o.invoice_id;
    }
    if (o.custom_id) {
        a["custom_id"] = *o.custom_id;
    }
    a["seller_protection"] = Json{{"status", "NOT_ELIGIBLE"}};
    a["expiration_time"] = rfc3339(o.created_at + m_options.authorization_validity);
    if (standalone) {
        a["supplementary_data"]["related_ids"]["order_id"] = o.id;
        a["payee"] = Json{{"merchant_id", k_account_number}};
    }
    Json links = Json::array();
    links.push_back(link(self, "self", "GET"));
    if (status == "CREATED" || status == "PARTIALLY_CAPTURED") {
        links.push_back(link(self + "/capture", "capture", "POST"));
        links.push_back(link(self + "/void", "void", "POST"));
    }
    links.push_back(link(o.base_url + std::string(k_orders) + "/" + o.id, "up", "GET"));
    a["links"] = std::move(links);
    a["create_time"] = rfc3339(o.created_at);
    a["update_time"] = rfc3339(o.created_at);
    return a;
}

Json PayPalApi::render_auth_capture(const Order& o, std::size_t index, bool standalone) const {
    const AuthCapture& c = o.captures[index];
    const std::int64_t refunded = refunded_minor(o, index);
    const std::string capture_url = o.base_url + std::string(k_captures) + c.id;
    Json capture;
    capture["id"] = c.id;
    capture["status"] = c.declined            ? "DECLINED"
                        : refunded == 0       ? "COMPLETED"
                        : refunded >= c.minor ? "REFUNDED"
                                              : "PARTIALLY_REFUNDED";
    capture["amount"] = money(o.currency, c.value);
    capture["final_capture"] = c.final;
    capture["seller_protection"] = Json{{"status", "NOT_ELIGIBLE"}};
    if (c.invoice_id) {
        capture["invoice_id"] = *c.invoice_id;
    }
    if (o.custom_id) {
        capture["custom_id"] = *o.custom_id; // the purchase unit's: capture_request has none
    }
    if (c.note_to_payer) {
        capture["note_to_payer"] = *c.note_to_payer;
    }
    if (standalone) {
        capture["supplementary_data"]["related_ids"]["order_id"] = o.id;
        capture["supplementary_data"]["related_ids"]["authorization_id"] = o.authorization_id;
        capture["payee"] = Json{{"merchant_id", k_account_number}};
    }
    Json capture_links = Json::array();
    capture_links.push_back(link(capture_url, "self", "GET"));
    if (!c.declined && refunded < c.minor) {
        capture_links.push_back(link(capture_url + "/refund", "refund", "POST"));
    }
    capture_links.push_back(
        link(o.base_url + std::string(k_authorizations) + o.authorization_id, "up", "GET"));
    capture["links"] = std::move(capture_links);
    capture["create_time"] = rfc3339(c.created_at);
    capture["update_time"] = rfc3339(c.created_at);
    return capture;
}

Json PayPalApi::render_capture(const Order& o, bool standalone) const {
    const bool completed = o.capture == Capture::completed;
    const std::int64_t refunded = refunded_minor(o);
    const std::string capture_url = o.base_url + std::string(k_captures) + o.capture_id;
    Json capture;
    capture["id"] = o.capture_id;
    capture["status"] = !completed            ? "DECLINED"
                        : refunded == 0       ? "COMPLETED"
                        : refunded >= o.minor ? "REFUNDED"
                                              : "PARTIALLY_REFUNDED";
    capture["amount"] = money(o.currency, o.value);
    capture["final_capture"] = true;
    capture["seller_protection"] = Json{{"status", "NOT_ELIGIBLE"}};
    if (o.invoice_id) {
        capture["invoice_id"] = *o.invoice_id;
    }
    if (o.custom_id) {
        capture["custom_id"] = *o.custom_id;
    }
    if (o.source == Source::card) {
        capture["processor_response"] = Json{
            {"avs_code", "Y"}, {"cvv_code", "S"}, {"response_code", completed ? "0000" : "5120"}};
    }
    if (standalone) {
        capture["supplementary_data"]["related_ids"]["order_id"] = o.id;
        capture["payee"] = Json{{"merchant_id", k_account_number}};
    }
    Json capture_links = Json::array();
    capture_links.push_back(link(capture_url, "self", "GET"));
    if (completed && refunded < o.minor) {
        capture_links.push_back(link(capture_url + "/refund", "refund", "POST"));
    }
    capture_links.push_back(link(o.base_url + std::string(k_orders) + "/" + o.id, "up", "GET"));
    capture["links"] = std::move(capture_links);
    capture["create_time"] = rfc3339(o.created_at);
    capture["update_time"] = rfc3339(o.created_at);
    return capture;
}

Json PayPalApi::render_refund(const Refund& r, bool representation) const {
    const Order& o = m_orders[r.order];
    const std::string self = o.base_url + std::string(k_refunds) + r.id;
    Json links = Json::array();
    links.push_back(link(self, "self", "GET"));
    const std::string& capture_id = r.auth_capture ? o.captures[*r.auth_capture].id : o.capture_id;
    links.push_back(link(o.base_url + std::string(k_captures) + capture_id, "up", "GET"));
    Json j;
    j["id"] = r.id;
    j["status"] = r.failed ? "FAILED" : "COMPLETED";
    if (!representation) {
        j["links"] = std::move(links);
        return j;
    }
    j["amount"] = money(r.currency, r.value);
    if (r.invoice_id) {
        j["invoice_id"] = *r.invoice_id;
    }
    if (r.custom_id) {
        j["custom_id"] = *r.custom_id;
    }
    if (r.note_to_payer) {
        j["note_to_payer"] = *r.note_to_payer;
    }
    // The total refunded from the capture up to this refund.
    std::int64_t total = 0;
    for (const std::size_t i : o.refunds) {
        if (m_refunds[i].auth_capture != r.auth_capture) {
            continue; // another capture's
        }
        total += m_refunds[i].failed ? 0 : m_refunds[i].minor;
        if (m_refunds[i].id == r.id) {
            break;
        }
    }
    Json breakdown;
    breakdown["gross_amount"] = money(r.currency, r.value);
    breakdown["net_amount"] = money(r.currency, r.value);
    breakdown["total_refunded_amount"] =
        money(r.currency, major_units(total, r.currency).value_or(r.value));
    j["seller_payable_breakdown"] = std::move(breakdown);
    j["payer"] = Json{{"merchant_id", k_account_number}};
    j["create_time"] = rfc3339(r.created_at);
    j["update_time"] = rfc3339(r.created_at);
    j["links"] = std::move(links);
    return j;
}

http::Response PayPalApi::not_found_locked(std::string_view field) {
    return error_locked(404, "RESOURCE_NOT_FOUND", "The specified resource does not exist.",
                        {Issue{404, "INVALID_RESOURCE_ID", std::string(field),
                               "Specified resource ID does not exist. Please check the resource "
                               "ID and try again.",
                               "path"}});
}

Reply PayPalApi::get_payment(const http::Request& request, const std::string& path,
                             const Wait& wait) {
    Reply reply;
    if (!wait(m_ledger.faults().latency)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    const auto lock = m_ledger.lock();
    if (auto refused = token_refusal_locked(request)) {
        reply.response = std::move(*refused);
        return reply;
    }
    // The reads PayPal's refund, capture and void lookups make: down with the search.
    if (m_ledger.faults_locked().lookup_down) {
        reply.response = error_locked(503, "SERVICE_UNAVAILABLE", "Service Unavailable.", {});
        return reply;
    }
    if (path.compare(0, k_authorizations.size(), k_authorizations) == 0) {
        const auto it = m_by_authorization.find(path.substr(k_authorizations.size()));
        reply.response = it == m_by_authorization.end()
                             ? not_found_locked("authorization_id")
                             : json_response(200, render_authorization(m_orders[it->second], true));
        return reply;
    }
    if (path.compare(0, k_captures.size(), k_captures) == 0) {
        if (const auto held = m_auth_captures.find(path.substr(k_captures.size()));
            held != m_auth_captures.end()) {
            reply.response = json_response(
                200, render_auth_capture(m_orders[held->second.first], held->second.second, true));
            return reply;
        }
        const auto it = m_by_capture.find(path.substr(k_captures.size()));
        reply.response = it == m_by_capture.end()
                             ? not_found_locked("capture_id")
                             : json_response(200, render_capture(m_orders[it->second], true));
        return reply;
    }
    const auto it = m_refunds_by_id.find(path.substr(k_refunds.size()));
    reply.response = it == m_refunds_by_id.end()
                         ? not_found_locked("refund_id")
                         : json_response(200, render_refund(m_refunds[it->second], true));
    return reply;
}

namespace {

// refund_request (the Payments v2 document's components/schemas/refund_request).
struct RefundRequest {
    std::optional<Amount> amount; // absent: what the capture has left
    std::optional<std::string> invoice_id;
    std::optional<std::string> custom_id;
    std::optional<std::string> note_to_payer;
};

std::variant<RefundRequest, Problem> validate_refund(const Json& body) {
    if (!body.is_object()) {
        return bad("MALFORMED_REQUEST_JSON", "/", "The request JSON is not well formed.");
    }
    RefundRequest r;
    if (body.contains("amount")) {
        auto amount = parse_amount(body["amount"], "/amount");
        if (auto* problem = std::get_if<Problem>(&amount)) {
            return *problem;
        }
        r.amount = std::get<Amount>(std::move(amount));
    }
    for (const auto& [name, max, out] :
         {std::tuple<const char*, std::size_t, std::optional<std::string>*>{
              "invoice_id", k_max_text, &r.invoice_id},
          {"custom_id", k_max_text, &r.custom_id},
          {"note_to_payer", k_max_note, &r.note_to_payer}}) {
        if (auto problem = optional_text(body, name, max, "", *out)) {
            return *problem;
        }
    }
    return r;
}

} // namespace

Reply PayPalApi::refund(const http::Request& request, const std::string& capture_id,
                        const Wait& wait) {
    Reply reply;
    const Json body = Json::parse(request.body, nullptr, false); // discarded if not JSON
    const std::string* request_id_header = request.header("paypal-request-id");
    const std::string* request_id = m_account.idempotency ? request_id_header : nullptr;
    const bool representation = wants_representation(request);
    if (body.is_object()) {
        for (const char* name : {"invoice_id", "custom_id"}) {
            if (body.contains(name) && body[name].is_string() &&
                !body[name].get_ref<const std::string&>().empty()) {
                reply.operation_id = body[name].get<std::string>();
                break;
            }
        }
    }
    if (reply.operation_id.empty()) {
        reply.operation_id = request_id_header != nullptr && !request_id_header->empty()
                                 ? *request_id_header
                                 : std::string(k_no_operation);
    }

    std::unique_lock lock = m_ledger.lock();
    m_ledger.count_delivery_locked(reply.operation_id);
    const auto latency = m_ledger.faults_locked().latency;
    auto answer = [&](Reply r) { return answer_after(lock, wait, latency, std::move(r)); };
    const auto error_500 = [this] {
        return error_locked(500, "INTERNAL_SERVER_ERROR", "An internal server error occurred.", {});
    };
    const auto refused = [&](Reply r, const Issue& issue) {
        r.response = issue_locked(issue);
        apply_after_execute(r, error_500());
        return r;
    };

    if (auto no_token = token_refusal_locked(request)) {
        reply.response = std::move(*no_token);
        return answer(std::move(reply));
    }
    if (fault_before_execute_locked(m_ledger, reply, error_500)) {
        return answer(std::move(reply));
    }
    if (request_id != nullptr && request_id->empty()) {
        request_id = nullptr;
    }
    if (request_id != nullptr && request_id->size() > k_max_request_id) {
        return answer(
            refused(std::move(reply),
                    Issue{400, "INVALID_STRING_LENGTH", "PayPal-Request-Id",
                          "The value of a field is either too short or too long.", "header"}));
    }
    // A known request ID answers the refund's current state before the body is looked at.
    if (request_id != nullptr &&
        request_answered_locked(
            m_refund_requests, *request_id, m_options.refund_key_retention,
            "A previous request on this resource is currently in progress. Please wait for "
            "sometime and try again.",
            [&](std::size_t i) {
                return json_response(200, render_refund(m_refunds[i], representation));
            },
            reply)) {
        apply_after_execute(reply, error_500());
        return answer(std::move(reply));
    }
    std::variant<RefundRequest, Problem> validated =
        bad("MALFORMED_REQUEST_JSON", "/", "The request JSON is not well formed.");
    if (!body.is_discarded()) {
        validated = validate_refund(body);
    }
    if (auto* problem = std::get_if<Problem>(&validated)) {
        return answer(refused(std::move(reply), Issue{problem->status, problem->issue,
                                                      problem->field, problem->description}));
    }
    RefundRequest refund_request = std::get<RefundRequest>(std::move(validated));
    if (m_account.idempotency && request_id == nullptr) {
        return answer(
            refused(std::move(reply), Issue{400, "MISSING_REQUIRED_PARAMETER", "PayPal-Request-Id",
                                            "A required field / parameter is missing.", "header"}));
    }
    if (request_id != nullptr) {
        RequestRecord record;
        record.first_seen = m_ledger.now_locked();
        m_refund_requests.emplace(*request_id, record);
    }
    // The request ID is in flight for as long as the latency lasts; the capture's state is read
    // after it, so that refunds in flight together never pass what it has left.
    if (!wait_in_flight(lock, wait, latency, m_refund_requests, request_id)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    const auto forget = [&] { // a refused refund leaves nothing under its request ID
        if (request_id != nullptr) {
            m_refund_requests.erase(*request_id);
        }
    };
    // The order's own capture, or one of its authorization's.
    std::optional<std::size_t> order_found;
    std::optional<std::size_t> auth_capture;
    if (const auto held = m_auth_captures.find(capture_id); held != m_auth_captures.end()) {
        order_found = held->second.first;
        auth_capture = held->second.second;
    } else if (const auto capture = m_by_capture.find(capture_id); capture != m_by_capture.end()) {
        order_found = capture->second;
    }
    if (!order_found) {
        forget();
        reply.response = not_found_locked("capture_id");
        apply_after_execute(reply, error_500());
        return reply;
    }
    const std::size_t order_index = *order_found;
    Order& order = m_orders[order_index];
    const bool capture_completed = auth_capture ? !order.captures[*auth_capture].declined
                                                : order.capture == Capture::completed;
    const std::int64_t capture_minor =
        auth_capture ? order.captures[*auth_capture].minor : order.minor;
    const std::int64_t left = capture_minor - refunded_minor(order, auth_capture);
    const auto refusal = [&]() -> std::optional<Issue> {
        if (!capture_completed) {
            return Issue{422, "REFUND_NOT_ALLOWED", "", "Capture cannot be refunded.", "body"};
        }
        if (refund_request.amount &&
            to_upper_ascii(refund_request.amount->currency) != to_upper_ascii(order.currency)) {
            return Issue{422, "REFUND_CAPTURE_CURRENCY_MISMATCH", "/amount/currency_code",
                         "Refund must be in the same currency as the capture", "body"};
        }
        if (left <= 0) {
            return Issue{422, "CAPTURE_FULLY_REFUNDED", "",
                         "The capture has already been fully refunded", "body"};
        }
        if (refund_request.amount && refund_request.amount->minor > left) {
            return Issue{422, "REFUND_AMOUNT_EXCEEDED", "/amount/value",
                         "The refund amount must be less than or equal to the capture amount that "
                         "has not yet been refunded.",
                         "body"};
        }
        for (const std::size_t r : order.refunds) {
            if (m_refunds[r].auth_capture == auth_capture && refund_request.invoice_id &&
                m_refunds[r].invoice_id == refund_request.invoice_id) {
                return Issue{422, "DUPLICATE_INVOICE_ID", "/invoice_id",
                             "Invoice ID was previously used to refund a capture.", "body"};
            }
        }
        return std::nullopt;
    }();
    if (refusal) {
        forget();
        return refused(std::move(reply), *refusal);
    }

    // Execute: the refund, COMPLETED at once; FAILED under a `decline` fault.
    Refund refund;
    refund.id = m_ledger.random_id_locked("", k_id_length, k_upper_alnum);
    refund.order = order_index;
    refund.auth_capture = auth_capture;
    refund.currency = order.currency;
    refund.minor = refund_request.amount ? refund_request.amount->minor : left;
    refund.value = refund_request.amount ? refund_request.amount->value
                                         : major_units(left, order.currency).value_or(order.value);
    refund.invoice_id = std::move(refund_request.invoice_id);
    refund.custom_id = std::move(refund_request.custom_id);
    refund.note_to_payer = std::move(refund_request.note_to_payer);
    refund.operation_id = reply.operation_id;
    refund.created_at = m_ledger.now_locked();
    refund.failed = reply.fault == Fault::decline;
    m_ledger.count_execution_locked(refund.operation_id);
    if (!refund.failed) {
        m_ledger.add_refunded_locked(refund.currency, refund.minor);
    }
    reply.executed = true;
    const std::size_t index = m_refunds.size();
    m_refunds_by_id.emplace(refund.id, index);
    m_refunds.push_back(std::move(refund));
    order.refunds.push_back(index);
    reply.response = json_response(201, render_refund(m_refunds[index], representation));
    apply_after_execute(reply, error_500());
    if (request_id != nullptr) {
        const auto it = m_refund_requests.find(*request_id);
        if (it != m_refund_requests.end()) { // gone only if reset() ran meanwhile
            it->second.in_flight = false;
            it->second.index = index;
        }
    }
    return reply;
}

namespace {

// capture_request (the Payments v2 document's components/schemas/capture_request).
struct CaptureRequest {
    std::optional<Amount> amount; // absent: what the authorization has left
    bool final = false;           // final_capture, "default": false
    std::optional<std::string> invoice_id;
    std::optional<std::string> note_to_payer;
    std::optional<std::string> soft_descriptor;
};

constexpr std::size_t k_max_soft_descriptor = 22;

std::variant<CaptureRequest, Problem> validate_capture(const Json& body) {
    if (!body.is_object()) {
        return bad("MALFORMED_REQUEST_JSON", "/", "The request JSON is not well formed.");
    }
    CaptureRequest r;
    for (auto it = body.begin(); it != body.end(); ++it) {
        const std::string& name = it.key();
        if (name != "amount" && name != "final_capture" && name != "invoice_id" &&
            name != "note_to_payer" && name != "soft_descriptor" && name != "payment_instruction") {
            return bad("UNKNOWN_FIELD", "/" + name,
                       "A field that is not part of capture_request was sent.");
        }
    }
    if (body.contains("amount")) {
        auto amount = parse_amount(body["amount"], "/amount");
        if (auto* problem = std::get_if<Problem>(&amount)) {
            return *problem;
        }
        r.amount = std::get<Amount>(std::move(amount));
    }
    if (body.contains("final_capture")) {
        if (!body["final_capture"].is_boolean()) {
            return bad("INVALID_PARAMETER_SYNTAX", "/final_capture",
                       "The value of a field does not conform to the expected format.");
        }
        r.final = body["final_capture"].get<bool>();
    }
    for (const auto& [name, max, out] :
         {std::tuple<const char*, std::size_t, std::optional<std::string>*>{
              "invoice_id", k_max_text, &r.invoice_id},
          {"note_to_payer", k_max_note, &r.note_to_payer},
          {"soft_descriptor", k_max_soft_descriptor, &r.soft_descriptor}}) {
        if (auto problem = optional_text(body, name, max, "", *out)) {
            return *problem;
        }
    }
    return r;
}

// What `representation` leaves of a rendered object when the caller asked for return=minimal:
// id, status and links.
Json minimal(const Json& full) {
    Json j;
    j["id"] = full["id"];
    j["status"] = full["status"];
    j["links"] = full["links"];
    return j;
}

} // namespace

Reply PayPalApi::capture_or_void(const http::Request& request, const std::string& authorization_id,
                                 bool void_it, const Wait& wait) {
    Reply reply;
    // A void has no body; a capture of everything may have none either.
    const Json body =
        request.body.empty() ? Json::object() : Json::parse(request.body, nullptr, false);
    const std::string* request_id_header = request.header("paypal-request-id");
    const std::string* request_id = m_account.idempotency ? request_id_header : nullptr;
    const bool representation = wants_representation(request);
    if (!void_it && body.is_object() && body.contains("invoice_id") &&
        body["invoice_id"].is_string() &&
        !body["invoice_id"].get_ref<const std::string&>().empty()) {
        reply.operation_id = body["invoice_id"].get<std::string>();
    }
    if (reply.operation_id.empty()) {
        reply.operation_id = request_id_header != nullptr && !request_id_header->empty()
                                 ? *request_id_header
                                 : std::string(k_no_operation);
    }

    std::unique_lock lock = m_ledger.lock();
    m_ledger.count_delivery_locked(reply.operation_id);
    ++(void_it ? m_void_deliveries : m_capture_deliveries);
    if (const auto known = m_by_authorization.find(authorization_id);
        known != m_by_authorization.end()) {
        Order& o = m_orders[known->second];
        ++(void_it ? o.void_deliveries : o.capture_deliveries);
    }
    const auto latency = m_ledger.faults_locked().latency;
    auto answer = [&](Reply r) { return answer_after(lock, wait, latency, std::move(r)); };
    const auto error_500 = [this] {
        return error_locked(500, "INTERNAL_SERVER_ERROR", "An internal server error occurred.", {});
    };
    const auto refused = [&](Reply r, const Issue& issue) {
        r.response = issue_locked(issue);
        apply_after_execute(r, error_500());
        return r;
    };
    // The answer to a capture or a void made: the capture, or the authorization (204 without the
    // representation).
    const auto made = [&](int status, std::size_t order, std::size_t capture, bool was_void) {
        const Order& o = m_orders[order];
        if (was_void) {
            return representation
                       ? json_response(status == 201 ? 200 : status, render_authorization(o, true))
                       : http::Response{204, {}, ""};
        }
        const Json c = render_auth_capture(o, capture, true);
        return json_response(status, representation ? c : minimal(c));
    };

    if (auto no_token = token_refusal_locked(request)) {
        reply.response = std::move(*no_token);
        return answer(std::move(reply));
    }
    if (fault_before_execute_locked(m_ledger, reply, error_500)) {
        return answer(std::move(reply));
    }
    if (request_id != nullptr && request_id->empty()) {
        request_id = nullptr;
    }
    if (request_id != nullptr && request_id->size() > k_max_request_id) {
        return answer(
            refused(std::move(reply),
                    Issue{400, "INVALID_STRING_LENGTH", "PayPal-Request-Id",
                          "The value of a field is either too short or too long.", "header"}));
    }
    // A known request ID answers the current state of what it made, before the body is read.
    if (request_id != nullptr &&
        request_answered_locked(
            m_capture_requests, *request_id, m_options.refund_key_retention,
            "A previous request on this resource is currently in progress. Please wait for "
            "sometime and try again.",
            [&](std::size_t i) {
                const RequestRecord& record = m_capture_requests.at(*request_id);
                return made(200, i, record.capture, record.void_request);
            },
            reply)) {
        apply_after_execute(reply, error_500());
        return answer(std::move(reply));
    }
    CaptureRequest capture_request;
    if (!void_it) {
        std::variant<CaptureRequest, Problem> validated =
            bad("MALFORMED_REQUEST_JSON", "/", "The request JSON is not well formed.");
        if (!body.is_discarded()) {
            validated = validate_capture(body);
        }
        if (auto* problem = std::get_if<Problem>(&validated)) {
            return answer(refused(std::move(reply), Issue{problem->status, problem->issue,
                                                          problem->field, problem->description}));
        }
        capture_request = std::get<CaptureRequest>(std::move(validated));
    }
    if (m_account.idempotency && request_id == nullptr) {
        return answer(
            refused(std::move(reply), Issue{400, "MISSING_REQUIRED_PARAMETER", "PayPal-Request-Id",
                                            "A required field / parameter is missing.", "header"}));
    }
    if (request_id != nullptr) {
        RequestRecord record;
        record.first_seen = m_ledger.now_locked();
        record.void_request = void_it;
        m_capture_requests.emplace(*request_id, record);
    }
    // The request ID is in flight for as long as the latency lasts; the authorization is read
    // after it, so that captures in flight together never pass what it has left.
    if (!wait_in_flight(lock, wait, latency, m_capture_requests, request_id)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    const auto forget = [&] { // a refused request leaves nothing under its request ID
        if (request_id != nullptr) {
            m_capture_requests.erase(*request_id);
        }
    };
    const auto found = m_by_authorization.find(authorization_id);
    if (found == m_by_authorization.end()) {
        forget();
        reply.response = not_found_locked("authorization_id");
        apply_after_execute(reply, error_500());
        return reply;
    }
    const std::size_t order_index = found->second;
    Order& order = m_orders[order_index];
    const auto now = m_ledger.now_locked();
    const std::string status = authorization_status(order, now);
    const std::int64_t left = order.minor - captured_minor(order);
    const auto refusal = [&]() -> std::optional<Issue> {
        if (status == "DENIED") {
            return Issue{422, "AUTHORIZATION_DENIED", "",
                         "A denied authorization cannot be captured or voided.", "body"};
        }
        if (status == "VOIDED") {
            return void_it ? Issue{422, "PREVIOUSLY_VOIDED", "",
                                   "Authorization has been previously voided and hence cannot be "
                                   "voided again.",
                                   "body"}
                           : Issue{422, "AUTHORIZATION_VOIDED", "",
                                   "A voided authorization cannot be captured or reauthorized.",
                                   "body"};
        }
        if (status == "EXPIRED") {
            return Issue{422, "AUTHORIZATION_EXPIRED", "",
                         "An expired authorization cannot be captured.", "body"};
        }
        if (status == "CAPTURED") {
            return void_it ? Issue{422, "PREVIOUSLY_CAPTURED", "",
                                   "Authorization has been previously captured and hence cannot "
                                   "be voided.",
                                   "body"}
                           : Issue{422, "AUTHORIZATION_ALREADY_CAPTURED", "",
                                   "Authorization has been previously captured and hence cannot "
                                   "be captured again.",
                                   "body"};
        }
        if (void_it) {
            return std::nullopt;
        }
        if (capture_request.amount &&
            to_upper_ascii(capture_request.amount->currency) != to_upper_ascii(order.currency)) {
            return Issue{422, "AUTH_CAPTURE_CURRENCY_MISMATCH", "/amount/currency_code",
                         "Currency of capture must be the same as currency of authorization.",
                         "body"};
        }
        if (capture_request.amount && capture_request.amount->minor > left) {
            return Issue{422, "MAX_CAPTURE_AMOUNT_EXCEEDED", "/amount/value",
                         "Capture amount exceeds allowable limit.", "body"};
        }
        for (const AuthCapture& c : order.captures) {
            if (capture_request.invoice_id && c.invoice_id == capture_request.invoice_id) {
                return Issue{422, "DUPLICATE_INVOICE_ID", "/invoice_id",
                             "Requested invoice number has been previously captured. Possible "
                             "duplicate transaction.",
                             "body"};
            }
        }
        return std::nullopt;
    }();
    if (refusal) {
        forget();
        return refused(std::move(reply), *refusal);
    }

    // Execute.
    std::size_t capture_index = 0;
    if (void_it) {
        order.voided = true;
        ++order.voids;
        ++m_voids;
    } else {
        AuthCapture c;
        c.id = m_ledger.random_id_locked("", k_id_length, k_upper_alnum);
        c.minor = capture_request.amount ? capture_request.amount->minor : left;
        c.value = capture_request.amount ? capture_request.amount->value
                                         : major_units(left, order.currency).value_or(order.value);
        c.declined = reply.fault == Fault::decline;
        c.final = capture_request.final;
        c.invoice_id = std::move(capture_request.invoice_id);
        c.note_to_payer = std::move(capture_request.note_to_payer);
        c.operation_id = reply.operation_id;
        c.created_at = now;
        if (c.final && !c.declined) {
            order.closed = true; // the rest released
        }
        if (!c.declined) {
            m_ledger.add_charged_locked(order.currency, c.minor);
        }
        capture_index = order.captures.size();
        m_auth_captures.emplace(c.id, std::pair(order_index, capture_index));
        order.captures.push_back(std::move(c));
        ++m_captures;
    }
    m_ledger.count_execution_locked(reply.operation_id);
    reply.executed = true;
    reply.response = made(201, order_index, capture_index, void_it);
    apply_after_execute(reply, error_500());
    if (request_id != nullptr) {
        const auto it = m_capture_requests.find(*request_id);
        if (it != m_capture_requests.end()) { // gone only if reset() ran meanwhile
            it->second.in_flight = false;
            it->second.index = order_index;
            it->second.capture = capture_index;
        }
    }
    return reply;
}

void PayPalApi::write_ledger_locked(nlohmann::ordered_json& j, LedgerOptions options) const {
    j["paypal_tokens_issued"] = m_tokens_issued;
    j["paypal_order_count"] = m_orders.size();
    j["paypal_refund_count"] = m_refunds.size();
    if (options.payment_intents) {
        j["paypal_orders"] = Json::array();
        for (const Order& o : m_orders) {
            j["paypal_orders"].push_back(render_order(o, true));
        }
    }
    j["paypal_capture_deliveries"] = m_capture_deliveries;
    j["paypal_void_deliveries"] = m_void_deliveries;
    j["paypal_captures"] = m_captures;
    j["paypal_voids"] = m_voids;
    j["paypal_authorizations"] = Json::array();
    const auto now = m_ledger.now_locked();
    for (const Order& o : m_orders) {
        if (o.authorization_id.empty()) {
            continue;
        }
        Json a;
        a["id"] = o.authorization_id;
        a["order_id"] = o.id;
        a["operation_id"] = o.operation_id;
        a["status"] = authorization_status(o, now);
        a["amount"] = o.minor;
        a["amount_captured"] = captured_minor(o);
        a["captures"] = o.captures.size();
        a["voids"] = o.voids;
        a["capture_deliveries"] = o.capture_deliveries;
        a["void_deliveries"] = o.void_deliveries;
        j["paypal_authorizations"].push_back(std::move(a));
    }
}

} // namespace payrecon::fake
