#include "tests/fake_provider/stripe.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <set>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <variant>

namespace payrecon::fake {
namespace {

using Json = nlohmann::ordered_json;

// An empty JSON object with room for `keys` members: ordered_json keeps them in a vector whose
// growth would copy (const keys do not move) everything added so far, nested objects included.
Json object_with_room(std::size_t keys) {
    Json j = Json::object();
    j.get_ref<Json::object_t&>().reserve(keys);
    return j;
}
using Clock = std::chrono::system_clock;

constexpr std::size_t k_max_key_length = 255;
constexpr std::int64_t k_max_amount = 99'999'999;
constexpr std::size_t k_max_metadata_keys = 50;
constexpr std::size_t k_max_metadata_key_length = 40;
constexpr std::size_t k_max_metadata_value_length = 500;
constexpr std::int64_t k_default_limit = 10;
constexpr std::int64_t k_max_limit = 100;
constexpr std::string_view k_page_prefix = "fakepage_";
constexpr std::string_view k_list_url = "/v1/payment_intents";
constexpr std::string_view k_search_url = "/v1/payment_intents/search";
constexpr std::string_view k_refunds_url = "/v1/refunds";
// Stripe cancels an uncaptured PaymentIntent this long after its creation ("7 by default").
constexpr std::chrono::seconds k_authorization_validity{7 * 86400};

// Every top-level parameter of POST /v1/payment_intents in the 2020-08-27 spec. Others get 400.
const std::set<std::string_view> k_create_params{
    "amount",
    "application_fee_amount",
    "automatic_payment_methods",
    "capture_method",
    "confirm",
    "confirmation_method",
    "currency",
    "customer",
    "description",
    "error_on_requires_action",
    "expand",
    "mandate",
    "mandate_data",
    "metadata",
    "off_session",
    "on_behalf_of",
    "payment_method",
    "payment_method_data",
    "payment_method_options",
    "payment_method_types",
    "receipt_email",
    "return_url",
    "setup_future_usage",
    "shipping",
    "statement_descriptor",
    "statement_descriptor_suffix",
    "transfer_data",
    "transfer_group",
    "use_stripe_sdk",
};

Json error_object(std::string_view type, std::string_view message, std::string_view code = {},
                  std::string_view param = {}) {
    Json e = Json::object();
    if (!code.empty()) {
        e["code"] = code;
        std::string doc(code);
        std::replace(doc.begin(), doc.end(), '_', '-');
        e["doc_url"] = "https://stripe.com/docs/error-codes/" + doc;
    }
    e["message"] = message;
    if (!param.empty()) {
        e["param"] = param;
    }
    e["type"] = type;
    return e;
}

http::Response error(int status, std::string_view type, std::string_view message,
                     std::string_view code = {}, std::string_view param = {}) {
    Json body;
    body["error"] = error_object(type, message, code, param);
    return json_response(status, body);
}

http::Response invalid_request(std::string_view message, std::string_view code = {},
                               std::string_view param = {}) {
    return error(400, "invalid_request_error", message, code, param);
}

http::Response api_error_500(std::string_view when) {
    return error(500, "api_error",
                 "An unknown error occurred while processing your request (fake provider: "
                 "injected " +
                     std::string(when) + ").");
}

std::optional<std::int64_t> parse_int(std::string_view text) {
    std::int64_t value = 0;
    const char* first = text.data();
    const char* last = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(first, last, value);
    if (text.empty() || ec != std::errc{} || ptr != last) {
        return std::nullopt;
    }
    return value;
}

const std::string* field(const http::Fields& fields, std::string_view name) {
    for (const auto& [key, value] : fields) {
        if (key == name) {
            return &value;
        }
    }
    return nullptr;
}

// nullopt when every query parameter is allowed (`expand[...]` always is); else a 400.
std::optional<http::Response> unknown_query_param(const http::Fields& query,
                                                  std::initializer_list<std::string_view> allowed) {
    for (const auto& [key, value] : query) {
        if (key.rfind("expand[", 0) == 0) {
            continue;
        }
        if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
            return invalid_request("Received unknown parameter: " + key, "parameter_unknown", key);
        }
    }
    return std::nullopt;
}

// Stripe's 429: "Too many requests hit the API too quickly", with the wait (list_rate_limited).
http::Response rate_limited() {
    http::Response r = error(429, "invalid_request_error",
                             "Too many requests hit the API too quickly (fake provider: "
                             "list_rate_limited).",
                             "rate_limit");
    r.headers.emplace_back("Retry-After", "1");
    return r;
}

// A list's `created` filter: created[gt], [gte], [lt], [lte], or `created` (one second).
struct CreatedRange {
    std::optional<std::int64_t> gt, gte, lt, lte;

    bool holds(std::int64_t created) const {
        return (!gt || created > *gt) && (!gte || created >= *gte) && (!lt || created < *lt) &&
               (!lte || created <= *lte);
    }
};

// The created filter of `query`, or Stripe's 400 for an integer it cannot read.
std::variant<CreatedRange, http::Response> parse_created(const http::Fields& query) {
    CreatedRange range;
    for (auto [name, bound] :
         {std::pair{"created[gt]", &range.gt}, std::pair{"created[gte]", &range.gte},
          std::pair{"created[lt]", &range.lt}, std::pair{"created[lte]", &range.lte},
          std::pair{"created", &range.gte}}) {
        if (const std::string* text = field(query, name)) {
            const auto value = parse_int(*text);
            if (!value) {
                return invalid_request("Invalid integer: " + *text, "parameter_invalid_integer",
                                       name);
            }
            *bound = value;
            if (std::string_view(name) == "created") {
                range.lte = value;
            }
        }
    }
    return range;
}

// `limit`: 1..100, 10 when absent.
std::variant<std::int64_t, http::Response> parse_limit(const http::Fields& query) {
    const std::string* text = field(query, "limit");
    if (text == nullptr) {
        return k_default_limit;
    }
    const auto limit = parse_int(*text);
    if (!limit || *limit < 1 || *limit > k_max_limit) {
        return invalid_request("Invalid integer: " + *text + " (limit must be between 1 and 100)",
                               "parameter_invalid_integer", "limit");
    }
    return *limit;
}

// The operation a Stripe form POST counts under: its `metadata[operation_id]`, else its
// Idempotency-Key, else "(none)".
std::string operation_of(const std::optional<http::Fields>& form, const http::Request& request) {
    if (form) {
        if (const std::string* op = field(*form, "metadata[operation_id]")) {
            return *op;
        }
    }
    const std::string* header = request.header("idempotency-key");
    return header != nullptr ? *header : std::string(k_no_operation);
}

// One `metadata[key]=value` form field into `metadata`; the 400 Stripe answers a bad one.
std::optional<http::Response> add_metadata(const std::string& name, const std::string& value,
                                           std::map<std::string, std::string>& metadata) {
    constexpr std::string_view base = "metadata";
    const std::string key = name.size() > base.size() + 1
                                ? name.substr(base.size() + 1, name.size() - base.size() - 2)
                                : std::string();
    if (name.back() != ']' || key.empty() || key.find_first_of("[]") != std::string::npos) {
        return invalid_request("Invalid metadata parameter: " + name + " (use metadata[key]=value)",
                               "parameter_invalid", name);
    }
    if (key.size() > k_max_metadata_key_length || value.size() > k_max_metadata_value_length) {
        return invalid_request("Metadata keys are at most 40 characters and values at most "
                               "500 characters: " +
                                   name,
                               "parameter_invalid", name);
    }
    metadata[key] = value;
    return std::nullopt;
}

// `unknown`: parameters this account does not know on top of the spec's (FaultConfig).
std::variant<CreateParams, http::Response>
validate_create(const http::Fields& form, const std::vector<std::string>& unknown) {
    CreateParams p;
    std::set<std::string> seen;
    const std::string* amount = nullptr;
    const std::string* currency = nullptr;
    const std::string* confirm = nullptr;
    const std::string* capture_method = nullptr;
    for (const auto& [name, value] : form) {
        const std::string base = name.substr(0, name.find('['));
        if (k_create_params.count(base) == 0 ||
            std::find(unknown.begin(), unknown.end(), base) != unknown.end()) {
            return invalid_request("Received unknown parameter: " + name, "parameter_unknown",
                                   name);
        }
        const bool array_item = name.size() >= 2 && name.compare(name.size() - 2, 2, "[]") == 0;
        if (!array_item && !seen.insert(name).second) {
            return invalid_request("Parameter given more than once: " + name, "parameter_invalid",
                                   name);
        }
        if (base == "metadata") {
            if (auto bad = add_metadata(name, value, p.metadata)) {
                return std::move(*bad);
            }
            continue;
        }
        if (name != base) {
            continue; // a nested parameter the fake accepts and ignores (expand[], ...)
        }
        if (name == "amount") {
            amount = &value;
        } else if (name == "currency") {
            currency = &value;
        } else if (name == "confirm") {
            confirm = &value;
        } else if (name == "capture_method") {
            capture_method = &value;
        } else if (name == "payment_method") {
            p.payment_method = value;
        } else if (name == "customer") {
            p.customer = value;
        } else if (name == "description") {
            p.description = value;
        } else if (name == "off_session") {
            if (value != "true" && value != "false" && value != "one_off" && value != "recurring") {
                return invalid_request("Invalid off_session: " + value, "parameter_invalid",
                                       "off_session");
            }
            p.off_session = value != "false";
        }
    }
    if (p.metadata.size() > k_max_metadata_keys) {
        return invalid_request("Metadata can have at most 50 keys", "parameter_invalid",
                               "metadata");
    }
    if (amount == nullptr) {
        return invalid_request("Missing required param: amount.", "parameter_missing", "amount");
    }
    const auto minor = parse_int(*amount);
    if (!minor) {
        return invalid_request("Invalid integer: " + *amount, "parameter_invalid_integer",
                               "amount");
    }
    if (*minor < 1) {
        return invalid_request("Amount must be at least 1 (in the currency's minor unit).",
                               "amount_too_small", "amount");
    }
    if (*minor > k_max_amount) {
        return invalid_request("Amount must be no more than 99999999.", "amount_too_large",
                               "amount");
    }
    p.amount = *minor;
    if (currency == nullptr) {
        return invalid_request("Missing required param: currency.", "parameter_missing",
                               "currency");
    }
    if (currency->size() != 3 || !std::all_of(currency->begin(), currency->end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        })) {
        return invalid_request("Invalid currency: " + *currency, "parameter_invalid_string",
                               "currency");
    }
    for (const char c : *currency) {
        p.currency += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    if (confirm == nullptr || *confirm != "true") {
        return invalid_request("The fake provider supports only confirm=true (create and confirm "
                               "in one call).",
                               "parameter_invalid", "confirm");
    }
    if (capture_method != nullptr && *capture_method != "automatic" &&
        *capture_method != "manual") {
        return invalid_request(
            "The fake provider supports only capture_method=automatic and manual.",
            "parameter_invalid", "capture_method");
    }
    p.manual_capture = capture_method != nullptr && *capture_method == "manual";
    if (p.payment_method.empty()) {
        return invalid_request("Missing required param: payment_method.", "parameter_missing",
                               "payment_method");
    }
    return p;
}

// metadata['key']:'value' (or double quotes), with backslash escapes. nullopt for anything else.
std::optional<std::pair<std::string, std::string>> parse_metadata_query(std::string_view q) {
    auto read_quoted = [&q]() -> std::optional<std::string> {
        if (q.empty() || (q.front() != '\'' && q.front() != '"')) {
            return std::nullopt;
        }
        const char quote = q.front();
        q.remove_prefix(1);
        std::string out;
        while (!q.empty()) {
            const char c = q.front();
            q.remove_prefix(1);
            if (c == '\\' && !q.empty()) {
                out += q.front();
                q.remove_prefix(1);
            } else if (c == quote) {
                return out;
            } else {
                out += c;
            }
        }
        return std::nullopt;
    };
    while (!q.empty() && q.front() == ' ') {
        q.remove_prefix(1);
    }
    while (!q.empty() && q.back() == ' ') {
        q.remove_suffix(1);
    }
    constexpr std::string_view k_prefix = "metadata[";
    if (q.substr(0, k_prefix.size()) != k_prefix) {
        return std::nullopt;
    }
    q.remove_prefix(k_prefix.size());
    auto key = read_quoted();
    if (!key || q.substr(0, 2) != "]:") {
        return std::nullopt;
    }
    q.remove_prefix(2);
    auto value = read_quoted();
    if (!value || !q.empty()) {
        return std::nullopt;
    }
    return std::make_pair(std::move(*key), std::move(*value));
}

std::int64_t unix_seconds(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

Clock::time_point from_unix_seconds(std::int64_t s) {
    return Clock::time_point(std::chrono::seconds(s));
}

std::string_view view(const std::array<char, 24>& part) {
    return {part.data(), part.size()};
}

template <class... Parts>
std::string concat(const Parts&... parts) {
    std::string out;
    (out.append(parts), ...);
    return out;
}

// The currency as create validates it, answered lower case.
std::string checked_currency(const std::string& currency) {
    if (currency.size() != 3 || !std::all_of(currency.begin(), currency.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        })) {
        throw std::invalid_argument("currency: expected three letters, got '" + currency + "'");
    }
    std::string out;
    for (const char c : currency) {
        out += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    return out;
}

void check_amount(std::int64_t amount) {
    if (amount < 1 || amount > k_max_amount) {
        throw std::invalid_argument("amount: must be 1..99999999 (minor units), got " +
                                    std::to_string(amount));
    }
}

struct Decline {
    std::string_view code;
    std::string_view decline_code;
    std::string_view message;
};

std::optional<Decline> decline_of(IntentOutcome outcome) {
    switch (outcome) {
    case IntentOutcome::declined_generic:
        return Decline{"card_declined", "generic_decline", "Your card was declined."};
    case IntentOutcome::declined_insufficient_funds:
        return Decline{"card_declined", "insufficient_funds", "Your card has insufficient funds."};
    case IntentOutcome::declined_authentication_required:
        return Decline{"authentication_required", "authentication_required",
                       "Your card was declined. This transaction requires authentication."};
    case IntentOutcome::succeeded:
    case IntentOutcome::requires_action:
        break;
    }
    return std::nullopt;
}

// `POST /v1/payment_intents/{id}/capture` or `/cancel`: the id and whether it is the cancel.
std::optional<std::pair<std::string_view, bool>> intent_action(const http::Request& request,
                                                               std::string_view prefix) {
    const std::string_view path = request.path;
    if (request.method != "POST" || path.substr(0, prefix.size()) != prefix) {
        return std::nullopt;
    }
    const std::string_view rest = path.substr(prefix.size());
    const std::size_t slash = rest.find('/');
    if (slash == 0 || slash == std::string_view::npos) {
        return std::nullopt;
    }
    const std::string_view action = rest.substr(slash + 1);
    if (action != "capture" && action != "cancel") {
        return std::nullopt;
    }
    return std::pair(rest.substr(0, slash), action == "cancel");
}

} // namespace

StripeApi::StripeApi(Ledger& ledger, const Account& account, StripeOptions options)
    : m_ledger(ledger), m_account(account), m_options(options) {}

bool StripeApi::serves(const http::Request& request) const {
    return request.path == k_list_url || request.path == k_refunds_url ||
           request.path.compare(0, k_list_url.size() + 1, std::string(k_list_url) + "/") == 0;
}

void StripeApi::reset_locked() {
    m_by_id.clear();
    m_order.clear();
    m_intents.clear();
    m_keys.clear();
    m_seeded.clear();
    m_authorizations.clear();
    m_capture_deliveries = 0;
    m_cancel_deliveries = 0;
    m_captures = 0;
    m_cancels = 0;
    m_refund_seq = 0;
}

bool StripeApi::authorized(const http::Request& request) const {
    const auto token = bearer_credential(request);
    return token && !m_account.api_key.empty() &&
           constant_time_equal(*token, m_account.api_key.reveal());
}

Reply StripeApi::handle(const http::Request& request, const Wait& wait) {
    Reply reply;
    const std::string& path = request.path;
    constexpr std::string_view k_intents = "/v1/payment_intents";
    const bool is_create = request.method == "POST" && path == k_intents;

    if (is_create) {
        reply = create(request, wait, nullptr);
    } else if (!authorized(request)) {
        const bool given = request.header("authorization") != nullptr;
        reply.response =
            error(401, "invalid_request_error",
                  given ? "Invalid API Key provided."
                        : "You did not provide an API key. You need to provide your API key in "
                          "the Authorization header, using Bearer auth (e.g. 'Authorization: "
                          "Bearer YOUR_SECRET_KEY').");
        reply.response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"Stripe\"");
    } else {
        const auto query = http::parse_form(request.query);
        const std::string prefix = std::string(k_intents) + "/";
        if (!query) {
            reply.response = invalid_request("Malformed query string.");
        } else if (request.method == "POST" && path == k_refunds_url) {
            reply = create_refund(request, wait);
        } else if (request.method == "GET" && path == k_refunds_url) {
            reply = list_refunds(*query, wait);
        } else if (request.method == "GET" && path == k_intents) {
            reply = list(*query, wait);
        } else if (request.method == "GET" && path == k_search_url) {
            reply = search(*query, wait);
        } else if (request.method == "GET" && path.rfind(prefix, 0) == 0 &&
                   path.size() > prefix.size() &&
                   path.find('/', prefix.size()) == std::string::npos) {
            reply = retrieve(path.substr(prefix.size()), *query, wait);
        } else if (const auto action = intent_action(request, prefix)) {
            reply = capture_or_cancel(request, action->first, action->second, wait);
        } else {
            reply.response = error(404, "invalid_request_error",
                                   "Unrecognized request URL (" + request.method + ": " + path +
                                       "). The fake provider serves PaymentIntents create, "
                                       "retrieve, list, search, capture and cancel, and refunds' "
                                       "create and list, only.");
        }
    }
    stamp(reply);
    return reply;
}

Reply StripeApi::create_for(const IntentCreate& dialect, const http::Request& request,
                            const Wait& wait) {
    Reply reply = create(request, wait, &dialect);
    stamp(reply);
    return reply;
}

Reply StripeApi::refund_for(const IntentRefund& other, const http::Request& request,
                            const Wait& wait) {
    Reply reply;
    const std::string* key = m_account.idempotency ? request.header("idempotency-key") : nullptr;
    reply.operation_id = other.operation_id(request);
    if (reply.operation_id.empty()) {
        reply.operation_id = operation_of(std::nullopt, request);
    }
    std::unique_lock lock = m_ledger.lock();
    m_ledger.count_delivery_locked(reply.operation_id);
    const auto latency = m_ledger.faults_locked().latency;
    auto answer = [&](Reply r) {
        Reply out = answer_after(lock, wait, latency, std::move(r));
        stamp(out);
        return out;
    };
    auto after = [](Reply& r) { apply_after_execute(r, api_error_500("after execution")); };
    if (auto refused = other.refusal(request, m_account)) {
        reply.response = std::move(*refused);
        return answer(std::move(reply));
    }
    if (fault_before_execute_locked(m_ledger, reply, [] {
            return api_error_500("before execution: nothing was executed");
        })) {
        return answer(std::move(reply));
    }
    auto validated = other.read_locked(request);
    if (auto* rejected = std::get_if<http::Response>(&validated)) {
        reply.response = std::move(*rejected);
        return answer(std::move(reply));
    }
    const RefundParams params = std::get<RefundParams>(std::move(validated));
    const auto found = find_id(params.intent_id);
    if (!found) {
        throw std::logic_error("a dialect's refund names a PaymentIntent the fake does not have");
    }
    http::Fields sorted = other.replay_params(request);
    std::sort(sorted.begin(), sorted.end());
    if (key_answered_locked(key, sorted, reply)) {
        after(reply);
        return answer(std::move(reply));
    }
    if (!wait_in_flight(lock, wait, latency, m_keys, key)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    // What the charge has left is read now, after the wait: another refund may have taken it.
    Intent& in = m_intents[*found];
    const std::int64_t left = in.paid() ? in.net() : 0;
    Executed executed;
    executed.operation_id = reply.operation_id;
    executed.amount = params.amount;
    executed.currency = params.currency;
    executed.charged = reply.fault != Fault::decline && params.currency == in.currency &&
                       params.amount >= 1 && params.amount <= left;
    Refund refund;
    refund.id = random_part();
    if (executed.charged) {
        refund.amount = params.amount;
        refund.created = unix_seconds(m_ledger.now_locked());
        refund.operation_id = reply.operation_id;
        refund.adyen = true;
        refund.seq = next_refund_seq_locked();
        in.refunds.push_back(refund);
        in.amount_refunded += params.amount;
        m_ledger.add_refunded_locked(in.currency, params.amount);
        m_ledger.count_execution_locked(reply.operation_id);
    }
    executed.provider_id = concat("re_", view(refund.id));
    reply.response = other.answer(request, executed);
    if (executed.charged) {
        in.refunds.back().merchant_account = executed.merchant_account;
    }
    reply.executed = true;
    after(reply);
    save_key_locked(key, reply);
    const auto on_executed = m_on_executed;
    lock.unlock();
    stamp(reply);
    if (on_executed) {
        on_executed(executed);
    }
    return reply;
}

Reply StripeApi::modify_for(const IntentModification& other, const http::Request& request,
                            bool cancel, const Wait& wait) {
    Reply reply;
    const std::string* key = m_account.idempotency ? request.header("idempotency-key") : nullptr;
    reply.operation_id = other.operation_id(request);
    if (reply.operation_id.empty()) {
        reply.operation_id = operation_of(std::nullopt, request);
    }
    std::unique_lock lock = m_ledger.lock();
    m_ledger.count_delivery_locked(reply.operation_id);
    ++(cancel ? m_cancel_deliveries : m_capture_deliveries);
    const auto latency = m_ledger.faults_locked().latency;
    auto answer = [&](Reply r) {
        Reply out = answer_after(lock, wait, latency, std::move(r));
        stamp(out);
        return out;
    };
    auto after = [](Reply& r) { apply_after_execute(r, api_error_500("after execution")); };
    if (auto refused = other.refusal(request, m_account)) {
        reply.response = std::move(*refused);
        return answer(std::move(reply));
    }
    if (fault_before_execute_locked(m_ledger, reply, [] {
            return api_error_500("before execution: nothing was executed");
        })) {
        return answer(std::move(reply));
    }
    auto validated = other.read_locked(request);
    if (auto* rejected = std::get_if<http::Response>(&validated)) {
        reply.response = std::move(*rejected);
        return answer(std::move(reply));
    }
    const ModificationParams params = std::get<ModificationParams>(std::move(validated));
    const auto found = find_id(params.intent_id);
    if (!found) {
        throw std::logic_error("a dialect's capture names a PaymentIntent the fake does not have");
    }
    {
        Intent& in = m_intents[*found];
        ++(cancel ? in.cancel_deliveries : in.capture_deliveries);
        m_authorizations.insert(*found);
    }
    http::Fields sorted = other.replay_params(request);
    std::sort(sorted.begin(), sorted.end());
    if (key_answered_locked(key, sorted, reply)) {
        after(reply);
        return answer(std::move(reply));
    }
    if (!wait_in_flight(lock, wait, latency, m_keys, key)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    // The authorisation is read now, after the wait: a racing capture or cancel, or the clock
    // moved past its validity, is seen.
    Intent& in = m_intents[*found];
    const auto now = m_ledger.now_locked();
    const State state = in.at(now);
    const bool held = state.status == "requires_capture";
    Executed executed;
    executed.operation_id = reply.operation_id;
    executed.currency = in.currency;
    executed.amount = cancel ? in.amount : params.amount;
    executed.charged = reply.fault != Fault::decline && held &&
                       (cancel || (params.currency == in.currency && params.amount >= 1 &&
                                   params.amount <= state.amount_capturable));
    const IdPart id = random_part();
    if (executed.charged && cancel) {
        in.cancellation = Cancellation::unspecified;
        in.canceled_at = unix_seconds(now);
        ++in.cancels;
        ++m_cancels;
    } else if (executed.charged) {
        in.captured = true;
        in.amount_captured = params.amount;
        in.capture_operation_id = reply.operation_id;
        in.capture_id = id;
        ++in.captures;
        ++m_captures;
        m_ledger.add_charged_locked(in.currency, params.amount);
    }
    if (executed.charged) {
        m_ledger.count_execution_locked(reply.operation_id);
    }
    executed.provider_id = concat("pi_", view(id));
    reply.response = other.answer(request, executed);
    if (executed.charged && !cancel) {
        in.capture_account = executed.merchant_account;
    }
    reply.executed = true;
    after(reply);
    save_key_locked(key, reply);
    const auto on_executed = m_on_executed;
    lock.unlock();
    stamp(reply);
    if (on_executed) {
        on_executed(executed);
    }
    return reply;
}

void StripeApi::stamp(Reply& reply) {
    if (reply.action == SocketAction::respond || reply.action == SocketAction::partial_then_fin) {
        const auto lock = m_ledger.lock();
        reply.response.headers.emplace_back("Request-Id", m_ledger.random_id_locked("req_", 14));
        reply.response.headers.emplace_back("Stripe-Version", "2020-08-27");
    }
}

void StripeApi::set_on_executed(std::function<void(const Executed&)> callback) {
    const auto lock = m_ledger.lock();
    m_on_executed = std::move(callback);
}

Reply StripeApi::create(const http::Request& request, const Wait& wait, const IntentCreate* other) {
    Reply reply;
    const std::string* content_type = request.header("content-type");
    const bool is_form = other == nullptr && content_type != nullptr &&
                         content_type->rfind("application/x-www-form-urlencoded", 0) == 0;
    const auto form = is_form ? http::parse_form(request.body) : std::nullopt;
    const std::string* key = m_account.idempotency ? request.header("idempotency-key") : nullptr;

    reply.operation_id = other != nullptr ? other->operation_id(request) : std::string();
    if (reply.operation_id.empty()) {
        reply.operation_id = operation_of(form, request);
    }

    std::unique_lock lock = m_ledger.lock();
    m_ledger.count_delivery_locked(reply.operation_id);
    const auto latency = m_ledger.faults_locked().latency;

    // Answers without executing, after the configured latency.
    auto answer = [&](Reply r) { return answer_after(lock, wait, latency, std::move(r)); };
    // What the after-execute faults do to the socket (and a 500 to the response).
    auto after = [](Reply& r) { apply_after_execute(r, api_error_500("after execution")); };

    if (other != nullptr) {
        if (auto refused = other->refusal(request, m_account)) {
            reply.response = std::move(*refused);
            return answer(std::move(reply));
        }
    } else if (!authorized(request)) {
        const bool given = request.header("authorization") != nullptr;
        reply.response = error(401, "invalid_request_error",
                               given ? "Invalid API Key provided."
                                     : "You did not provide an API key. You need to provide your "
                                       "API key in the Authorization header, using Bearer auth.");
        reply.response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"Stripe\"");
        return answer(std::move(reply));
    }

    if (fault_before_execute_locked(m_ledger, reply, [] {
            return api_error_500("before execution: nothing was executed");
        })) {
        return answer(std::move(reply));
    }

    if (other == nullptr && !is_form) {
        reply.response = invalid_request(
            "Requests to /v1/payment_intents must be application/x-www-form-urlencoded.");
        after(reply);
        return answer(std::move(reply));
    }
    if (other == nullptr && !form) {
        reply.response = invalid_request("Malformed form body.");
        after(reply);
        return answer(std::move(reply));
    }
    auto validated = other != nullptr
                         ? other->read(request)
                         : validate_create(*form, m_ledger.faults_locked().unknown_parameters);
    if (auto* rejected = std::get_if<http::Response>(&validated)) {
        reply.response = std::move(*rejected);
        after(reply);
        return answer(std::move(reply));
    }
    const CreateParams params = std::get<CreateParams>(std::move(validated));

    // What a replay must match: Stripe's form fields, sorted; the other dialect's own.
    http::Fields sorted = other != nullptr ? other->replay_params(request) : *form;
    std::sort(sorted.begin(), sorted.end());
    if (key_answered_locked(key, sorted, reply)) {
        after(reply);
        return answer(std::move(reply));
    }

    // The key is in flight for as long as the latency lasts.
    if (!wait_in_flight(lock, wait, latency, m_keys, key)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }

    // Execute: one PaymentIntent, one charge attempt.
    Intent intent;
    if (reply.fault == Fault::decline) {
        intent.outcome = Outcome::declined_insufficient_funds;
    } else if (params.payment_method == "pm_card_chargeDeclined") {
        intent.outcome = Outcome::declined_generic;
    } else if (params.payment_method == "pm_card_chargeDeclinedInsufficientFunds" ||
               params.payment_method == "pm_card_visa_chargeDeclinedInsufficientFunds") {
        intent.outcome = Outcome::declined_insufficient_funds;
    } else if (params.payment_method == "pm_card_authenticationRequired") {
        intent.outcome = params.off_session ? Outcome::declined_authentication_required
                                            : Outcome::requires_action;
    }
    intent.id = random_part();
    if (intent.has_charge()) {
        intent.charge_id = random_part();
    }
    intent.secret = random_part();
    intent.created_at = m_ledger.now_locked();
    intent.created = unix_seconds(intent.created_at);
    intent.amount = params.amount;
    intent.currency = params.currency;
    intent.operation_id = reply.operation_id;
    intent.payment_method = params.payment_method;
    intent.customer = params.customer;
    intent.description = params.description;
    intent.metadata = params.metadata;
    intent.manual = params.manual_capture;
    const bool declined = decline_of(intent.outcome).has_value();
    const std::size_t index = add_intent(std::move(intent));
    const Intent& added = m_intents[index];
    if (added.manual) {
        m_authorizations.insert(index);
    }

    Executed executed;
    executed.provider_id = "pi_" + std::string(added.id.data(), added.id.size());
    executed.operation_id = added.operation_id;
    executed.amount = added.amount;
    executed.currency = added.currency;
    executed.charged = added.paid();
    if (added.manual && added.succeeded()) {
        executed.stripe_event = "payment_intent.amount_capturable_updated";
        executed.stripe_status = "requires_capture";
        executed.amount_capturable = added.amount;
    }
    if (other != nullptr) {
        reply.response = other->answer(request, executed);
    } else {
        Json pi = render(added, m_ledger.now_locked());
        if (declined) {
            Json err = pi["last_payment_error"];
            err["payment_intent"] = std::move(pi);
            Json body;
            body["error"] = std::move(err);
            reply.response = json_response(402, body);
        } else {
            reply.response = json_response(200, pi);
        }
    }
    reply.executed = true;
    after(reply);

    save_key_locked(key, reply);
    const auto on_executed = m_on_executed;
    lock.unlock();
    if (on_executed) {
        on_executed(executed);
    }
    return reply;
}

Json StripeApi::render_refund(const Intent& in, const Refund& r) const {
    Json refund = object_with_room(14);
    refund["id"] = concat("re_", view(r.id));
    refund["object"] = "refund";
    refund["amount"] = r.amount;
    refund["balance_transaction"] = nullptr;
    refund["charge"] = concat("ch_", view(in.charge_id));
    refund["created"] = r.created;
    refund["currency"] = in.currency;
    Json metadata = Json::object();
    for (const auto& [k, v] : r.metadata) {
        metadata[k] = v;
    }
    refund["metadata"] = std::move(metadata);
    refund["payment_intent"] = concat("pi_", view(in.id));
    refund["reason"] = r.reason ? Json(*r.reason) : Json(nullptr);
    refund["receipt_number"] = nullptr;
    refund["source_transfer_reversal"] = nullptr;
    refund["status"] = r.failure_reason ? "failed" : "succeeded";
    if (r.failure_reason) {
        refund["failure_reason"] = *r.failure_reason;
    }
    refund["transfer_reversal"] = nullptr;
    return refund;
}

Reply StripeApi::create_refund(const http::Request& request, const Wait& wait) {
    Reply reply;
    const std::string* content_type = request.header("content-type");
    const bool is_form =
        content_type != nullptr && content_type->rfind("application/x-www-form-urlencoded", 0) == 0;
    const auto form = is_form ? http::parse_form(request.body) : std::nullopt;
    const std::string* key = m_account.idempotency ? request.header("idempotency-key") : nullptr;
    reply.operation_id = operation_of(form, request);

    std::unique_lock lock = m_ledger.lock();
    m_ledger.count_delivery_locked(reply.operation_id);
    const auto latency = m_ledger.faults_locked().latency;
    auto answer = [&](Reply r) { return answer_after(lock, wait, latency, std::move(r)); };
    auto after = [](Reply& r) { apply_after_execute(r, api_error_500("after execution")); };
    if (fault_before_execute_locked(m_ledger, reply, [] {
            return api_error_500("before execution: nothing was executed");
        })) {
        return answer(std::move(reply));
    }
    if (!form) {
        reply.response =
            invalid_request("Requests to /v1/refunds must be application/x-www-form-urlencoded.");
        return answer(std::move(reply));
    }
    // Validation: a refusal here saves nothing under the key.
    const std::string* intent_id = nullptr;
    const std::string* amount_text = nullptr;
    Refund refund;
    for (const auto& [name, value] : *form) {
        const std::string base = name.substr(0, name.find('['));
        if (base == "metadata") {
            if (auto bad = add_metadata(name, value, refund.metadata)) {
                reply.response = std::move(*bad);
                return answer(std::move(reply));
            }
        } else if (name == "payment_intent") {
            intent_id = &value;
        } else if (name == "amount") {
            amount_text = &value;
        } else if (name == "reason") {
            if (value != "duplicate" && value != "fraudulent" && value != "requested_by_customer") {
                reply.response =
                    invalid_request("Invalid reason: " + value, "parameter_invalid", "reason");
                return answer(std::move(reply));
            }
            refund.reason = value;
        } else {
            reply.response =
                invalid_request("Received unknown parameter: " + name, "parameter_unknown", name);
            return answer(std::move(reply));
        }
    }
    const auto found = intent_id != nullptr ? find_id(*intent_id) : std::nullopt;
    if (!found) {
        reply.response =
            intent_id == nullptr
                ? invalid_request("Missing required param: payment_intent.", "parameter_missing",
                                  "payment_intent")
                : error(404, "invalid_request_error",
                        "No such payment_intent: '" + *intent_id + "'", "resource_missing");
        return answer(std::move(reply));
    }
    std::int64_t asked = 0; // 0: all that is left
    if (amount_text != nullptr) {
        const auto parsed = parse_int(*amount_text);
        if (!parsed || *parsed < 1) {
            reply.response = invalid_request("Invalid positive integer: " + *amount_text,
                                             "parameter_invalid_integer", "amount");
            return answer(std::move(reply));
        }
        asked = *parsed;
    }
    http::Fields sorted = *form;
    std::sort(sorted.begin(), sorted.end());
    if (key_answered_locked(key, sorted, reply)) {
        after(reply);
        return answer(std::move(reply));
    }
    if (!wait_in_flight(lock, wait, latency, m_keys, key)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    // What the charge has left is read now, after the wait: another refund may have taken it.
    Intent& in = m_intents[*found];
    const std::int64_t left = in.paid() ? in.net() : 0;
    const std::int64_t take = asked != 0 ? asked : left;
    if (!in.paid() || left == 0 || take > left) {
        if (key != nullptr) {
            m_keys.erase(*key); // nothing executed: Stripe saves no result for it
        }
        // An authorisation has nothing to refund until it is captured (only a cancel releases
        // it); Stripe's documents do not word this answer: the fake's, in the unpaid one's code.
        const bool uncaptured = in.manual && in.succeeded() && !in.captured;
        reply.response =
            uncaptured ? invalid_request(
                             "This PaymentIntent's charge is not captured, so there is nothing "
                             "to refund: cancel the PaymentIntent to release the "
                             "authorization.",
                             "charge_not_refundable", "payment_intent")
            : !in.paid()
                ? invalid_request("This PaymentIntent does not have a successful charge to refund.",
                                  "charge_not_refundable", "payment_intent")
            : left == 0 ? invalid_request("Charge " + concat("ch_", view(in.charge_id)) +
                                              " has already been refunded.",
                                          "charge_already_refunded")
                        : invalid_request("Refund amount (" + std::to_string(take) +
                                              ") is greater than unrefunded amount on charge (" +
                                              std::to_string(left) + ")",
                                          "amount_too_large", "amount");
        return answer(std::move(reply));
    }
    // Execute: one refund.
    refund.id = random_part();
    refund.amount = take;
    refund.created = unix_seconds(m_ledger.now_locked());
    refund.operation_id = reply.operation_id;
    refund.seq = next_refund_seq_locked();
    in.refunds.push_back(refund);
    in.amount_refunded += take;
    m_ledger.add_refunded_locked(in.currency, take);
    m_ledger.count_execution_locked(reply.operation_id);
    reply.response = json_response(200, render_refund(in, in.refunds.back()));
    reply.executed = true;
    after(reply);
    save_key_locked(key, reply);
    return reply;
}

Reply StripeApi::capture_or_cancel(const http::Request& request, std::string_view id, bool cancel,
                                   const Wait& wait) {
    Reply reply;
    const std::string* content_type = request.header("content-type");
    const bool is_form =
        content_type != nullptr && content_type->rfind("application/x-www-form-urlencoded", 0) == 0;
    // A capture of everything or a cancel without a reason has no parameters: no body at all is
    // an empty form.
    const auto form = is_form                ? http::parse_form(request.body)
                      : request.body.empty() ? std::optional(http::Fields{})
                                             : std::nullopt;
    const std::string* key = m_account.idempotency ? request.header("idempotency-key") : nullptr;
    reply.operation_id = operation_of(form, request);
    const std::string_view what = cancel ? "cancel" : "capture";

    std::unique_lock lock = m_ledger.lock();
    m_ledger.count_delivery_locked(reply.operation_id);
    ++(cancel ? m_cancel_deliveries : m_capture_deliveries);
    const auto found = find_id(id);
    if (found) {
        Intent& in = m_intents[*found];
        ++(cancel ? in.cancel_deliveries : in.capture_deliveries);
        m_authorizations.insert(*found);
    }
    const auto latency = m_ledger.faults_locked().latency;
    auto answer = [&](Reply r) { return answer_after(lock, wait, latency, std::move(r)); };
    auto after = [](Reply& r) { apply_after_execute(r, api_error_500("after execution")); };
    if (fault_before_execute_locked(m_ledger, reply, [] {
            return api_error_500("before execution: nothing was executed");
        })) {
        return answer(std::move(reply));
    }
    if (!form) {
        reply.response =
            invalid_request("Requests to /v1/payment_intents/{intent}/" + std::string(what) +
                            " must be application/x-www-form-urlencoded.");
        return answer(std::move(reply));
    }
    // Validation: a refusal here saves nothing under the key. The capture's parameters are the
    // API reference's (metadata, final_capture and the descriptors beyond the 2020-08-27 spec).
    std::optional<std::int64_t> amount_to_capture;
    std::map<std::string, std::string> metadata;
    Cancellation reason = Cancellation::unspecified;
    const auto refuse = [&](http::Response response) {
        reply.response = std::move(response);
        return answer(std::move(reply));
    };
    for (const auto& [name, value] : *form) {
        const std::string base = name.substr(0, name.find('['));
        if (base == "expand") {
            continue;
        }
        if (!cancel && base == "metadata") {
            if (auto bad = add_metadata(name, value, metadata)) {
                return refuse(std::move(*bad));
            }
        } else if (!cancel && name == "amount_to_capture") {
            const auto parsed = parse_int(value);
            if (!parsed || *parsed < 1) {
                return refuse(invalid_request("Invalid positive integer: " + value,
                                              "parameter_invalid_integer", "amount_to_capture"));
            }
            amount_to_capture = parsed;
        } else if (!cancel && name == "final_capture") {
            if (value != "true") {
                return refuse(invalid_request("final_capture=false needs multicapture, which this "
                                              "account does not have: one capture is final.",
                                              "parameter_invalid", "final_capture"));
            }
        } else if (!cancel && (name == "application_fee_amount" || name == "statement_descriptor" ||
                               name == "statement_descriptor_suffix")) {
            continue; // accepted and ignored, as create's
        } else if (cancel && name == "cancellation_reason") {
            if (value == "abandoned") {
                reason = Cancellation::abandoned;
            } else if (value == "duplicate") {
                reason = Cancellation::duplicate;
            } else if (value == "fraudulent") {
                reason = Cancellation::fraudulent;
            } else if (value == "requested_by_customer") {
                reason = Cancellation::requested_by_customer;
            } else {
                return refuse(invalid_request("Invalid cancellation_reason: " + value,
                                              "parameter_invalid", "cancellation_reason"));
            }
        } else {
            return refuse(
                invalid_request("Received unknown parameter: " + name, "parameter_unknown", name));
        }
    }
    if (!found) {
        return refuse(error(404, "invalid_request_error",
                            "No such payment_intent: '" + std::string(id) + "'", "resource_missing",
                            "intent"));
    }
    // What a replay must match: the form and the path (a key is Stripe's for one endpoint).
    http::Fields sorted = *form;
    sorted.emplace_back("(path)", request.path);
    std::sort(sorted.begin(), sorted.end());
    if (key_answered_locked(key, sorted, reply)) {
        after(reply);
        return answer(std::move(reply));
    }
    if (!wait_in_flight(lock, wait, latency, m_keys, key)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    // The PaymentIntent's state is read now, after the wait: a racing capture or cancel, or the
    // clock moved past the authorisation's 7 days, is seen.
    Intent& in = m_intents[*found];
    const auto now = m_ledger.now_locked();
    const State state = in.at(now);
    const bool allowed = cancel ? state.status == "requires_capture" ||
                                      state.status == "requires_payment_method" ||
                                      state.status == "requires_action"
                                : state.status == "requires_capture";
    const std::int64_t take = amount_to_capture.value_or(state.amount_capturable);
    if (!allowed || (!cancel && take > state.amount_capturable)) {
        if (key != nullptr) {
            m_keys.erase(*key); // nothing executed: Stripe saves no result for it
        }
        if (allowed) {
            return refuse(
                invalid_request("The amount to capture (" + std::to_string(take) +
                                    ") is greater than the PaymentIntent's amount_capturable (" +
                                    std::to_string(state.amount_capturable) + ").",
                                "amount_too_large", "amount_to_capture"));
        }
        Json err = error_object(
            "invalid_request_error",
            cancel ? "You cannot cancel this PaymentIntent because it has a status of " +
                         std::string(state.status) +
                         ". Only a PaymentIntent with one of the following statuses may be "
                         "canceled: requires_payment_method, requires_capture, "
                         "requires_confirmation, requires_action, processing."
                   : "This PaymentIntent could not be captured because it has a status of " +
                         std::string(state.status) +
                         ". Only a PaymentIntent with one of the following statuses may be "
                         "captured: requires_capture.",
            "payment_intent_unexpected_state");
        err["payment_intent"] = render(in, now);
        Json body;
        body["error"] = std::move(err);
        return refuse(json_response(400, body));
    }
    // Execute: the capture takes `take` and releases the rest; the cancel releases everything.
    // A `decline` fault drawn here changes nothing, as for a refund: Stripe documents no declined
    // capture of a live authorisation.
    Executed executed;
    executed.provider_id = concat("pi_", view(in.id));
    const auto op = in.metadata.find("operation_id");
    executed.operation_id = op != in.metadata.end() ? op->second : in.operation_id;
    executed.request_key = key != nullptr ? *key : reply.operation_id;
    executed.amount = in.amount;
    executed.currency = in.currency;
    if (cancel) {
        in.cancellation = reason;
        in.canceled_at = unix_seconds(now);
        ++in.cancels;
        ++m_cancels;
        executed.stripe_event = "payment_intent.canceled";
        executed.stripe_status = "canceled";
    } else {
        for (const auto& [k, v] : metadata) {
            if (v.empty()) {
                in.metadata.erase(k); // Stripe: an empty value unsets the key
            } else {
                in.metadata[k] = v;
            }
        }
        in.captured = true;
        in.amount_captured = take;
        ++in.captures;
        ++m_captures;
        m_ledger.add_charged_locked(in.currency, take);
        executed.charged = true;
        executed.stripe_event = "payment_intent.succeeded";
        executed.stripe_status = "succeeded";
        executed.amount_received = take;
    }
    m_ledger.count_execution_locked(reply.operation_id);
    reply.response = json_response(200, render(in, now));
    reply.executed = true;
    after(reply);
    save_key_locked(key, reply);
    const auto on_executed = m_on_executed;
    lock.unlock();
    if (on_executed) {
        on_executed(executed);
    }
    return reply;
}

Reply StripeApi::list_refunds(const http::Fields& query, const Wait& wait) {
    Reply reply;
    if (!wait(m_ledger.faults().latency)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    if (auto rejected = unknown_query_param(query, {"payment_intent", "limit", "created",
                                                    "created[gt]", "created[gte]", "created[lt]",
                                                    "created[lte]", "starting_after"})) {
        reply.response = std::move(*rejected);
        return reply;
    }
    auto limit = parse_limit(query);
    if (auto* rejected = std::get_if<http::Response>(&limit)) {
        reply.response = std::move(*rejected);
        return reply;
    }
    auto created = parse_created(query);
    if (auto* rejected = std::get_if<http::Response>(&created)) {
        reply.response = std::move(*rejected);
        return reply;
    }
    const CreatedRange& range = std::get<CreatedRange>(created);
    const std::string* intent_id = field(query, "payment_intent");
    const std::string* starting_after = field(query, "starting_after");
    const auto lock = m_ledger.lock();
    if (m_ledger.faults_locked().lookup_down) {
        reply.response = error(503, "api_error",
                               "Listing is temporarily unavailable (fake provider: lookup_down).");
        return reply;
    }
    if (m_ledger.faults_locked().list_rate_limited) {
        reply.response = rate_limited();
        return reply;
    }
    const auto found = intent_id != nullptr ? find_id(*intent_id) : std::nullopt;
    if (intent_id != nullptr && !found) {
        reply.response = error(404, "invalid_request_error",
                               "No such payment_intent: '" + *intent_id + "'", "resource_missing");
        return reply;
    }
    // Every refund listed, newest first: (created, seq) descending. A listing of one
    // PaymentIntent reads only its refunds; one of the account reads every PaymentIntent's.
    struct Listed {
        std::int64_t created;
        std::uint64_t seq;
        const Intent* intent;
        const Refund* refund;
    };
    std::vector<Listed> listed;
    std::optional<std::pair<std::int64_t, std::uint64_t>> cursor;
    const auto visit = [&](const Intent& in) {
        for (const Refund& r : in.refunds) {
            if (starting_after != nullptr && concat("re_", view(r.id)) == *starting_after) {
                cursor = std::pair(r.created, r.seq);
            }
            if (range.holds(r.created)) {
                listed.push_back(Listed{r.created, r.seq, &in, &r});
            }
        }
    };
    if (found) {
        visit(m_intents[*found]);
    } else {
        for (std::size_t i = 0; i < m_intents.size(); ++i) {
            visit(m_intents[i]);
        }
    }
    if (starting_after != nullptr && !cursor) {
        reply.response = invalid_request("No such refund: '" + *starting_after + "'",
                                         "resource_missing", "starting_after");
        return reply;
    }
    std::sort(listed.begin(), listed.end(), [](const Listed& a, const Listed& b) {
        return std::pair(a.created, a.seq) > std::pair(b.created, b.seq);
    });
    auto first = listed.begin();
    if (cursor) {
        first = std::find_if(listed.begin(), listed.end(), [&](const Listed& l) {
            return std::pair(l.created, l.seq) < *cursor;
        });
    }
    const auto n = static_cast<std::size_t>(std::get<std::int64_t>(limit));
    Json body = object_with_room(4);
    body["object"] = "list";
    body["data"] = Json::array();
    for (auto it = first; it != listed.end() && body["data"].size() < n; ++it) {
        body["data"].push_back(render_refund(*it->intent, *it->refund));
    }
    body["has_more"] = static_cast<std::size_t>(listed.end() - first) > n;
    body["url"] = "/v1/refunds";
    reply.response = json_response(200, body);
    return reply;
}

bool StripeApi::key_answered_locked(const std::string* key, const http::Fields& sorted,
                                    Reply& reply) {
    if (key != nullptr) {
        if (key->empty() || key->size() > k_max_key_length) {
            reply.response =
                invalid_request("Keys for idempotent requests must be 1 to 255 characters long.",
                                "parameter_invalid", "Idempotency-Key");
            return true;
        }
        auto it = m_keys.find(*key);
        if (it != m_keys.end() && !it->second.in_flight &&
            m_ledger.now_locked() - it->second.first_seen >= m_options.key_retention) {
            m_keys.erase(it); // pruned: the key is new again, as at Stripe after 24 h
            it = m_keys.end();
        }
        if (it != m_keys.end()) {
            if (it->second.in_flight) {
                reply.response = error(
                    409, "idempotency_error",
                    "There is currently another in-progress request using this Idempotent Key "
                    "(that probably means you submitted twice, and the other request is still "
                    "going through): " +
                        *key + ". Please try again later.",
                    "idempotency_key_in_use");
            } else if (it->second.params != sorted) {
                reply.response = error(
                    400, "idempotency_error",
                    "Keys for idempotent requests can only be used with the same parameters they "
                    "were first used with. Try using a key other than '" +
                        *key + "' if you meant to execute a different request.");
            } else {
                reply.response.status = it->second.status;
                reply.response.body = it->second.body;
                reply.response.headers.emplace_back("Idempotent-Replayed", "true");
                reply.replayed = true;
                m_ledger.count_replay_locked();
            }
            return true;
        }
        KeyRecord record;
        record.params = sorted;
        record.first_seen = m_ledger.now_locked();
        m_keys.emplace(*key, std::move(record));
    }
    return false;
}

void StripeApi::save_key_locked(const std::string* key, const Reply& reply) {
    if (key == nullptr) {
        return;
    }
    const auto it = m_keys.find(*key);
    if (it != m_keys.end()) { // gone only if reset() ran meanwhile
        it->second.in_flight = false;
        it->second.status = reply.response.status;
        it->second.body = reply.response.body;
    }
}

bool StripeApi::Intent::has_charge() const {
    return outcome == Outcome::succeeded || outcome == Outcome::declined_generic ||
           outcome == Outcome::declined_insufficient_funds;
}

StripeApi::IdPart StripeApi::random_part() {
    static constexpr std::string_view k_alphabet =
        "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    IdPart part{};
    for (std::size_t i = 0; i < part.size(); i += 8) {
        std::uint64_t bits =
            m_ledger.id_rng_locked()(); // 8 characters from each draw (62^8 < 2^64)
        for (std::size_t j = i; j < i + 8; ++j) {
            part[j] = k_alphabet[bits % k_alphabet.size()];
            bits /= k_alphabet.size();
        }
    }
    return part;
}

StripeApi::State StripeApi::Intent::at(Clock::time_point now) const {
    State s;
    const bool held = manual && succeeded() && !captured;
    const bool expired =
        held && cancellation == Cancellation::none && now >= created_at + k_authorization_validity;
    if (cancellation != Cancellation::none || expired) {
        s.status = "canceled";
        s.canceled_at = expired ? unix_seconds(created_at + k_authorization_validity) : canceled_at;
        switch (expired ? Cancellation::none : cancellation) {
        case Cancellation::none:
            s.cancellation_reason = "automatic";
            break;
        case Cancellation::unspecified:
            break;
        case Cancellation::abandoned:
            s.cancellation_reason = "abandoned";
            break;
        case Cancellation::duplicate:
            s.cancellation_reason = "duplicate";
            break;
        case Cancellation::fraudulent:
            s.cancellation_reason = "fraudulent";
            break;
        case Cancellation::requested_by_customer:
            s.cancellation_reason = "requested_by_customer";
            break;
        }
    } else if (held) {
        s.status = "requires_capture";
        s.amount_capturable = amount;
    } else if (succeeded()) {
        s.status = "succeeded";
    } else if (outcome == Outcome::requires_action) {
        s.status = "requires_action";
    } else {
        s.status = "requires_payment_method";
    }
    s.amount_received = received();
    s.captured = paid();
    return s;
}

Json StripeApi::render(const Intent& in, Clock::time_point now) const {
    const std::string id = concat("pi_", view(in.id));
    const State state = in.at(now);
    const bool charged = state.captured;
    const bool approved = in.succeeded(); // an authorisation's charge too
    const bool has_charge = in.has_charge();
    const bool requires_action = state.status == "requires_action";
    const auto decline = decline_of(in.outcome);
    const std::string charge_id = has_charge ? concat("ch_", view(in.charge_id)) : std::string();
    const Json customer = in.customer ? Json(*in.customer) : Json(nullptr);
    const Json description = in.description ? Json(*in.description) : Json(nullptr);
    Json metadata = Json::object();
    for (const auto& [k, v] : in.metadata) {
        metadata[k] = v;
    }

    Json last_error = nullptr;
    if (decline) {
        last_error = error_object("card_error", decline->message, decline->code);
        last_error["decline_code"] = decline->decline_code;
        if (has_charge) {
            last_error["charge"] = charge_id;
        }
        last_error["payment_method"] =
            Json{{"id", in.payment_method}, {"object", "payment_method"}, {"type", "card"}};
    }
    Json charges = object_with_room(5);
    charges["object"] = "list";
    charges["data"] = Json::array();
    if (has_charge) {
        Json refunds = object_with_room(5);
        refunds["object"] = "list";
        refunds["data"] = Json::array();
        for (auto it = in.refunds.rbegin(); it != in.refunds.rend(); ++it) { // newest first
            Json refund = render_refund(in, *it);
            refunds["data"].push_back(std::move(refund));
        }
        refunds["has_more"] = false;
        refunds["total_count"] = in.refunds.size();
        refunds["url"] = "/v1/charges/" + charge_id + "/refunds";

        Json charge = object_with_room(24);
        charge["id"] = charge_id;
        charge["object"] = "charge";
        charge["amount"] = in.amount;
        charge["amount_captured"] = state.amount_received;
        charge["amount_refunded"] = in.amount_refunded;
        charge["captured"] = charged;
        charge["created"] = in.created;
        charge["currency"] = in.currency;
        charge["customer"] = customer;
        charge["description"] = description;
        charge["disputed"] = false;
        charge["failure_code"] = decline ? Json(decline->code) : Json(nullptr);
        charge["failure_message"] = decline ? Json(decline->message) : Json(nullptr);
        charge["livemode"] = false;
        charge["metadata"] = metadata;
        charge["outcome"] =
            Json{{"network_status", approved ? "approved_by_network" : "declined_by_network"},
                 {"reason", decline ? Json(decline->decline_code) : Json(nullptr)},
                 {"type", approved ? "authorized" : "issuer_declined"}};
        // Stripe: paid "if the charge succeeded, or was successfully authorized for later capture".
        charge["paid"] = approved;
        charge["payment_intent"] = id;
        charge["payment_method"] = in.payment_method;
        // Stripe: true only once fully refunded; a partial refund shows in amount_refunded.
        charge["refunded"] = charged && in.amount_refunded >= state.amount_received;
        charge["refunds"] = std::move(refunds);
        charge["status"] = approved ? "succeeded" : "failed";
        charges["data"].push_back(std::move(charge));
    }
    charges["has_more"] = false;
    charges["total_count"] = has_charge ? 1 : 0;
    charges["url"] = "/v1/charges?payment_intent=" + id;

    Json pi = object_with_room(40);
    pi["id"] = id;
    pi["object"] = "payment_intent";
    pi["amount"] = in.amount;
    pi["amount_capturable"] = state.amount_capturable;
    pi["amount_received"] = state.amount_received;
    pi["application"] = nullptr;
    pi["application_fee_amount"] = nullptr;
    pi["canceled_at"] = state.canceled_at != 0 ? Json(state.canceled_at) : Json(nullptr);
    pi["cancellation_reason"] =
        state.cancellation_reason ? Json(*state.cancellation_reason) : Json(nullptr);
    pi["capture_method"] = in.manual ? "manual" : "automatic";
    pi["charges"] = std::move(charges);
    pi["client_secret"] = concat(id, "_secret_", view(in.secret));
    pi["confirmation_method"] = "automatic";
    pi["created"] = in.created;
    pi["currency"] = in.currency;
    pi["customer"] = customer;
    pi["description"] = description;
    pi["invoice"] = nullptr;
    pi["last_payment_error"] = std::move(last_error);
    pi["latest_charge"] = has_charge ? Json(charge_id) : Json(nullptr);
    pi["livemode"] = false;
    pi["metadata"] = std::move(metadata);
    pi["next_action"] = requires_action
                            ? Json{{"type", "use_stripe_sdk"}, {"use_stripe_sdk", Json::object()}}
                            : Json(nullptr);
    pi["on_behalf_of"] = nullptr;
    pi["payment_method"] = in.payment_method;
    pi["payment_method_options"] = Json::object();
    pi["payment_method_types"] = Json::array({"card"});
    pi["processing"] = nullptr;
    pi["receipt_email"] = nullptr;
    pi["review"] = nullptr;
    pi["setup_future_usage"] = nullptr;
    pi["shipping"] = nullptr;
    pi["statement_descriptor"] = nullptr;
    pi["statement_descriptor_suffix"] = nullptr;
    pi["status"] = state.status;
    pi["transfer_data"] = nullptr;
    pi["transfer_group"] = nullptr;
    return pi;
}

bool StripeApi::before_in_order(std::size_t a, std::size_t b) const {
    const std::int64_t ca = m_intents[a].created;
    const std::int64_t cb = m_intents[b].created;
    return ca != cb ? ca < cb : a < b;
}

std::size_t StripeApi::add_intent(Intent intent) {
    const std::size_t index = m_intents.size();
    Intent& in = m_intents.emplace_back();
    in = std::move(intent);
    m_by_id.emplace(view(in.id), index);
    // The newest index goes after every intent created in the same second or before.
    if (m_order.empty() || m_intents[m_order.back()].created <= in.created) {
        m_order.push_back(index);
    } else {
        const auto at = std::upper_bound(
            m_order.begin(), m_order.end(), in.created,
            [this](std::int64_t created, std::size_t i) { return created < m_intents[i].created; });
        m_order.insert(at, index);
    }
    m_ledger.count_execution_locked(in.operation_id);
    if (in.paid()) {
        m_ledger.add_charged_locked(in.currency, in.net());
    }
    return index;
}

std::size_t StripeApi::order_position(std::size_t i) const {
    const auto at =
        std::lower_bound(m_order.begin(), m_order.end(), i,
                         [this](std::size_t a, std::size_t b) { return before_in_order(a, b); });
    return static_cast<std::size_t>(at - m_order.begin());
}

std::optional<std::size_t> StripeApi::find_id(std::string_view id) const {
    constexpr std::string_view k_prefix = "pi_";
    if (id.size() != k_prefix.size() + std::tuple_size_v<IdPart> ||
        id.substr(0, k_prefix.size()) != k_prefix) {
        return std::nullopt;
    }
    const auto it = m_by_id.find(id.substr(k_prefix.size()));
    if (it == m_by_id.end()) {
        return std::nullopt;
    }
    return it->second;
}

std::size_t StripeApi::find_ref(const IntentRef& ref) const {
    if (!ref.id.empty()) {
        if (const auto i = find_id(ref.id)) {
            return *i;
        }
        throw SeedNotFound("id: no such payment_intent: '" + ref.id + "'");
    }
    for (std::size_t i = 0; i < m_intents.size(); ++i) {
        if (m_intents[i].operation_id == ref.operation_id) {
            return i;
        }
    }
    throw SeedNotFound("operation_id: no PaymentIntent for operation '" + ref.operation_id + "'");
}

std::vector<std::string> StripeApi::seed(const Seed& seed) {
    std::unique_lock lock = m_ledger.lock();
    auto ids = std::visit([this](const auto& s) { return seed_locked(s); }, seed);
    m_seeded[std::string(seed_kind(seed))] += ids.size();
    // A reversed Adyen refund or capture is told as Adyen tells it: a REFUND_FAILED or
    // CAPTURE_FAILED notification.
    std::optional<Executed> reversal = std::exchange(m_adyen_reversal, std::nullopt);
    const auto on_executed = m_on_executed;
    lock.unlock();
    if (reversal && on_executed) {
        on_executed(*reversal);
    }
    return ids;
}

void StripeApi::count_seeded(std::string_view kind, std::size_t n) {
    const auto lock = m_ledger.lock();
    m_seeded[std::string(kind)] += n;
}

std::vector<std::string> StripeApi::seed_locked(const OrphanCharge& s) {
    check_amount(s.amount);
    Intent in;
    in.currency = checked_currency(s.currency);
    if (s.metadata.size() > k_max_metadata_keys) {
        throw std::invalid_argument("metadata: at most 50 keys");
    }
    for (const auto& [key, value] : s.metadata) {
        if (key.empty() || key.size() > k_max_metadata_key_length ||
            value.size() > k_max_metadata_value_length) {
            throw std::invalid_argument("metadata: keys 1..40 characters, values at most 500");
        }
    }
    in.amount = s.amount;
    in.metadata = s.metadata;
    const auto op = s.metadata.find("operation_id");
    in.operation_id = op != s.metadata.end() ? op->second : std::string(k_no_operation);
    in.payment_method = s.payment_method;
    in.customer = s.customer;
    in.description = s.description;
    in.created_at = s.created ? from_unix_seconds(*s.created) : m_ledger.now_locked();
    in.created = unix_seconds(in.created_at);
    in.id = random_part();
    in.charge_id = random_part();
    in.secret = random_part();
    const Intent& added = m_intents[add_intent(std::move(in))];
    return {concat("pi_", view(added.id))};
}

std::vector<std::string> StripeApi::seed_locked(const DuplicateCharge& s) {
    const Intent& original = m_intents[find_ref(IntentRef{"", s.operation_id})];
    Intent in;
    in.amount = original.amount;
    in.currency = original.currency;
    in.operation_id = original.operation_id;
    in.payment_method = original.payment_method;
    in.customer = original.customer;
    in.description = original.description;
    in.metadata = original.metadata;
    in.created_at = s.created ? from_unix_seconds(*s.created) : m_ledger.now_locked();
    in.created = unix_seconds(in.created_at);
    in.id = random_part();
    in.charge_id = random_part();
    in.secret = random_part();
    const Intent& added = m_intents[add_intent(std::move(in))];
    return {concat("pi_", view(added.id))};
}

std::vector<std::string> StripeApi::seed_locked(const AmountMismatch& s) {
    check_amount(s.amount);
    Intent& in = m_intents[find_ref(s.intent)];
    if (in.amount_refunded > s.amount) {
        throw std::invalid_argument("amount: below what is already refunded (" +
                                    std::to_string(in.amount_refunded) + ")");
    }
    const std::int64_t before = in.net();
    in.amount = s.amount;
    if (in.paid()) {
        m_ledger.add_charged_locked(in.currency, in.net() - before);
    }
    return {concat("pi_", view(in.id))};
}

std::vector<std::string> StripeApi::seed_locked(const Refunded& s) {
    Intent& in = m_intents[find_ref(s.intent)];
    if (!in.paid()) {
        throw std::invalid_argument("the PaymentIntent has no succeeded charge to refund");
    }
    const std::int64_t left = in.net();
    const std::int64_t amount = s.amount.value_or(left);
    if (left == 0) {
        throw std::invalid_argument("the charge is already fully refunded");
    }
    if (amount < 1 || amount > left) {
        throw std::invalid_argument("amount: must be 1.." + std::to_string(left) +
                                    " (what is not yet refunded)");
    }
    Refund refund;
    refund.id = random_part();
    refund.amount = amount;
    refund.created = s.created.value_or(unix_seconds(m_ledger.now_locked()));
    refund.seq = next_refund_seq_locked();
    in.refunds.push_back(refund);
    in.amount_refunded += amount;
    m_ledger.add_refunded_locked(in.currency, amount);
    return {concat("pi_", view(in.id))};
}

std::vector<std::string> StripeApi::seed_locked(const RefundReversed& s) {
    for (std::size_t i = 0; i < m_intents.size(); ++i) {
        Intent& in = m_intents[i];
        for (Refund& r : in.refunds) {
            if (r.operation_id != s.operation_id || s.operation_id.empty()) {
                continue;
            }
            if (r.failure_reason) {
                throw std::invalid_argument("the refund is reversed already");
            }
            r.failure_reason = s.failure_reason;
            in.amount_refunded -= r.amount;
            // Back to `charged`, out of `refunded`.
            m_ledger.add_refunded_locked(in.currency, -r.amount);
            if (r.adyen) {
                Executed e;
                e.adyen = true;
                e.event_code = "REFUND_FAILED";
                e.provider_id = adyen_reference(concat("re_", view(r.id)));
                e.original_reference = adyen_reference(concat("pi_", view(in.id)));
                e.operation_id = r.operation_id;
                e.amount = r.amount;
                e.currency = in.currency;
                e.charged = true; // success "true": the failure happened
                e.merchant_account = r.merchant_account;
                e.reason = s.failure_reason;
                m_adyen_reversal = std::move(e);
            }
            return {concat("re_", view(r.id))};
        }
    }
    throw SeedNotFound("no refund with operation ID " + s.operation_id);
}

std::vector<std::string> StripeApi::seed_locked(const CaptureReversed& s) {
    for (std::size_t i = 0; i < m_intents.size(); ++i) {
        Intent& in = m_intents[i];
        if (s.operation_id.empty() || in.capture_operation_id != s.operation_id) {
            continue;
        }
        if (in.capture_reversed) {
            throw std::invalid_argument("the capture is reversed already");
        }
        in.capture_reversed = true;
        // Out of `charged`: the scheme took nothing.
        m_ledger.add_charged_locked(in.currency, -in.amount_captured);
        Executed e;
        e.adyen = true;
        e.event_code = "CAPTURE_FAILED";
        e.provider_id = adyen_reference(concat("pi_", view(in.capture_id)));
        e.original_reference = adyen_reference(concat("pi_", view(in.id)));
        e.operation_id = in.capture_operation_id;
        e.amount = in.amount_captured;
        e.currency = in.currency;
        e.charged = true; // success "true": the failure happened
        e.merchant_account = in.capture_account;
        e.reason = s.failure_reason;
        in.amount_captured = 0;
        m_adyen_reversal = std::move(e);
        return {concat("pi_", view(in.id))};
    }
    throw SeedNotFound("no capture made through Adyen's dialect with operation ID " +
                       s.operation_id);
}

std::vector<std::string> StripeApi::seed_locked(const BulkSeed& s) {
    if (s.n > 0) {
        check_amount(s.amount);
    }
    const std::string currency = checked_currency(s.currency);
    if (s.spacing.count() < 0) {
        throw std::invalid_argument("spacing: must not be negative");
    }
    const std::size_t first = m_intents.size();
    const std::size_t order_before = m_order.size();
    m_order.reserve(m_order.size() + s.n);
    m_by_id.reserve(m_by_id.size() + s.n);
    std::vector<std::string> ids;
    ids.reserve(s.n);
    const Clock::time_point start = from_unix_seconds(s.start_time);
    std::map<std::string, std::uint64_t>& executions = m_ledger.executions_locked();
    std::uint64_t& none = executions[std::string(k_no_operation)];
    const bool with_metadata = !s.operation_id_prefix.empty();
    for (std::size_t i = 0; i < s.n; ++i) {
        Intent& in = m_intents.emplace_back();
        in.id = random_part();
        in.charge_id = random_part();
        in.secret = random_part();
        in.created_at = start + s.spacing * static_cast<std::int64_t>(i);
        in.created = unix_seconds(in.created_at);
        in.amount = s.amount;
        in.currency = currency;
        in.payment_method = "pm_card_visa";
        if (with_metadata) {
            in.operation_id = s.operation_id_prefix + std::to_string(i);
            in.metadata.emplace("operation_id", in.operation_id);
            ++executions[in.operation_id];
        } else {
            in.operation_id = k_no_operation;
            ++none;
        }
        m_by_id.emplace(view(in.id), first + i);
        m_order.push_back(first + i);
        ids.push_back(concat("pi_", view(in.id)));
    }
    if (none == 0) {
        executions.erase(std::string(k_no_operation));
    }
    if (s.n > 0) {
        m_ledger.add_charged_locked(currency, s.amount * static_cast<std::int64_t>(s.n));
    }
    // The new run is in order (spacing >= 0); merge it in if it starts before the newest.
    const auto mid = m_order.begin() + static_cast<std::ptrdiff_t>(order_before);
    if (order_before > 0 && mid != m_order.end() && before_in_order(*mid, *(mid - 1))) {
        std::inplace_merge(m_order.begin(), mid, m_order.end(),
                           [this](std::size_t a, std::size_t b) { return before_in_order(a, b); });
    }
    return ids;
}

Reply StripeApi::retrieve(const std::string& id, const http::Fields& query, const Wait& wait) {
    Reply reply;
    if (!wait(m_ledger.faults().latency)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    if (auto rejected = unknown_query_param(query, {"client_secret"})) {
        reply.response = std::move(*rejected);
        return reply;
    }
    const auto lock = m_ledger.lock();
    if (const auto i = find_id(id)) {
        reply.response = json_response(200, render(m_intents[*i], m_ledger.now_locked()));
        return reply;
    }
    reply.response = error(404, "invalid_request_error", "No such payment_intent: '" + id + "'",
                           "resource_missing", "intent");
    return reply;
}

Reply StripeApi::search(const http::Fields& query, const Wait& wait) {
    Reply reply;
    if (!m_account.lookup) {
        reply.response = error(404, "invalid_request_error",
                               "Unrecognized request URL (GET: /v1/payment_intents/search): this "
                               "provider has no search.",
                               "resource_missing");
        return reply;
    }
    if (!wait(m_ledger.faults().latency)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    if (auto rejected = unknown_query_param(query, {"query", "limit", "page"})) {
        reply.response = std::move(*rejected);
        return reply;
    }
    const std::string* text = field(query, "query");
    if (text == nullptr) {
        reply.response =
            invalid_request("Missing required param: query.", "parameter_missing", "query");
        return reply;
    }
    const auto clause = parse_metadata_query(*text);
    if (!clause) {
        reply.response = invalid_request(
            "The fake provider supports only queries of the form metadata['key']:'value'.",
            "parameter_invalid", "query");
        return reply;
    }
    auto limit = parse_limit(query);
    if (auto* rejected = std::get_if<http::Response>(&limit)) {
        reply.response = std::move(*rejected);
        return reply;
    }
    std::size_t offset = 0;
    if (const std::string* page = field(query, "page")) {
        const auto n = page->rfind(k_page_prefix, 0) == 0
                           ? parse_int(std::string_view(*page).substr(k_page_prefix.size()))
                           : std::nullopt;
        if (!n || *n < 0) {
            reply.response = invalid_request("Invalid page: " + *page, "parameter_invalid", "page");
            return reply;
        }
        offset = static_cast<std::size_t>(*n);
    }

    const auto lock = m_ledger.lock();
    const FaultConfig& faults = m_ledger.faults_locked();
    if (faults.lookup_down) {
        reply.response = error(503, "api_error",
                               "Search is temporarily unavailable (fake provider: lookup_down).");
        return reply;
    }
    const auto now = m_ledger.now_locked();
    std::vector<const Intent*> found;
    for (auto it = m_order.rbegin(); it != m_order.rend(); ++it) { // newest first
        const Intent& intent = m_intents[*it];
        const auto meta = intent.metadata.find(clause->first);
        if (meta == intent.metadata.end() || meta->second != clause->second) {
            continue;
        }
        if (intent.created_at + faults.lookup_stale > now) {
            continue; // not indexed yet
        }
        found.push_back(&intent);
    }
    const auto per_page = static_cast<std::size_t>(std::get<std::int64_t>(limit));
    Json body;
    body["object"] = "search_result";
    body["data"] = Json::array();
    for (std::size_t i = offset; i < found.size() && i < offset + per_page; ++i) {
        body["data"].push_back(render(*found[i], now));
    }
    const bool more = offset + per_page < found.size();
    body["has_more"] = more;
    body["next_page"] =
        more ? Json(std::string(k_page_prefix) + std::to_string(offset + per_page)) : Json(nullptr);
    body["url"] = k_search_url;
    reply.response = json_response(200, body);
    return reply;
}

Reply StripeApi::list(const http::Fields& query, const Wait& wait) {
    Reply reply;
    if (!wait(m_ledger.faults().latency)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    if (auto rejected = unknown_query_param(query, {"created", "created[gt]", "created[gte]",
                                                    "created[lt]", "created[lte]", "customer",
                                                    "limit", "starting_after", "ending_before"})) {
        reply.response = std::move(*rejected);
        return reply;
    }
    auto parsed_range = parse_created(query);
    if (auto* rejected = std::get_if<http::Response>(&parsed_range)) {
        reply.response = std::move(*rejected);
        return reply;
    }
    const auto [gt, gte, lt, lte] = std::get<CreatedRange>(parsed_range);
    auto limit = parse_limit(query);
    if (auto* rejected = std::get_if<http::Response>(&limit)) {
        reply.response = std::move(*rejected);
        return reply;
    }
    const std::string* starting_after = field(query, "starting_after");
    const std::string* ending_before = field(query, "ending_before");
    const std::string* customer = field(query, "customer");
    if (starting_after != nullptr && ending_before != nullptr) {
        reply.response = invalid_request("Give starting_after or ending_before, not both.",
                                         "parameter_invalid", "ending_before");
        return reply;
    }

    const auto lock = m_ledger.lock();
    const FaultConfig& faults = m_ledger.faults_locked();
    if (faults.lookup_down) {
        reply.response = error(503, "api_error",
                               "Listing is temporarily unavailable (fake provider: lookup_down).");
        return reply;
    }
    if (faults.list_rate_limited) {
        reply.response = rate_limited();
        return reply;
    }
    // Stripe's order: newest first; within one second, the later creation first. m_order holds
    // that order reversed, so a window is a range of it found by binary search, and a page costs
    // O(log n + page) (plus the PaymentIntents a `customer` filter skips).
    const auto first_at_least = [this](std::int64_t created) {
        const auto at = std::lower_bound(
            m_order.begin(), m_order.end(), created,
            [this](std::size_t i, std::int64_t c) { return m_intents[i].created < c; });
        return static_cast<std::size_t>(at - m_order.begin());
    };
    constexpr std::int64_t k_max = std::numeric_limits<std::int64_t>::max();
    std::size_t lo = 0; // the window is m_order[lo, hi)
    std::size_t hi = m_order.size();
    if (gte) {
        lo = std::max(lo, first_at_least(*gte));
    }
    if (gt) {
        lo = std::max(lo, *gt == k_max ? m_order.size() : first_at_least(*gt + 1));
    }
    if (lt) {
        hi = std::min(hi, first_at_least(*lt));
    }
    if (lte) {
        hi = std::min(hi, *lte == k_max ? m_order.size() : first_at_least(*lte + 1));
    }
    hi = std::max(hi, lo);
    std::optional<std::size_t> cursor; // the cursor's position in m_order
    if (const std::string* id = starting_after != nullptr ? starting_after : ending_before) {
        const auto i = find_id(*id);
        if (!i) {
            reply.response =
                invalid_request("No such payment_intent: '" + *id + "'", "resource_missing",
                                starting_after != nullptr ? "starting_after" : "ending_before");
            return reply;
        }
        cursor = order_position(*i);
    }
    const auto wanted = [&](std::size_t i) {
        return customer == nullptr ||
               (m_intents[i].customer && *m_intents[i].customer == *customer);
    };
    const auto per_page = static_cast<std::size_t>(std::get<std::int64_t>(limit));
    std::vector<std::size_t> page; // indexes into m_intents, newest first
    bool more = false;
    if (ending_before != nullptr) {
        // The page just newer than the cursor: walk up from it, then show newest first.
        for (std::size_t p = std::max(lo, *cursor + 1); p < hi; ++p) {
            if (!wanted(m_order[p])) {
                continue;
            }
            if (page.size() == per_page) {
                more = true;
                break;
            }
            page.push_back(m_order[p]);
        }
        std::reverse(page.begin(), page.end());
    } else {
        const std::size_t top = cursor ? std::min(hi, *cursor) : hi;
        for (std::size_t p = top; p > lo; --p) {
            if (!wanted(m_order[p - 1])) {
                continue;
            }
            if (page.size() == per_page) {
                more = true;
                break;
            }
            page.push_back(m_order[p - 1]);
        }
    }
    Json body;
    body["object"] = "list";
    body["data"] = Json::array();
    const auto now = m_ledger.now_locked();
    for (const std::size_t i : page) {
        body["data"].push_back(render(m_intents[i], now));
    }
    body["has_more"] = more;
    body["url"] = k_list_url;
    reply.response = json_response(200, body);
    return reply;
}

void StripeApi::write_ledger_locked(nlohmann::ordered_json& j, LedgerOptions options) const {
    j["seeded"] = Json::object();
    for (const auto& [kind, n] : m_seeded) {
        j["seeded"][kind] = n;
    }
    j["payment_intent_count"] = m_intents.size();
    const auto now = m_ledger.now_locked();
    if (options.payment_intents) {
        j["payment_intents"] = Json::array();
        for (const std::size_t i : m_order) {
            j["payment_intents"].push_back(render(m_intents[i], now));
        }
    }
    j["capture_deliveries"] = m_capture_deliveries;
    j["cancel_deliveries"] = m_cancel_deliveries;
    j["captures"] = m_captures;
    j["cancels"] = m_cancels;
    j["authorizations"] = Json::array();
    for (const std::size_t i : m_authorizations) {
        const Intent& in = m_intents[i];
        const State state = in.at(now);
        Json a = object_with_room(11);
        a["id"] = concat("pi_", view(in.id));
        a["operation_id"] = in.operation_id;
        a["capture_method"] = in.manual ? "manual" : "automatic";
        a["status"] = state.status;
        a["amount"] = in.amount;
        a["amount_capturable"] = state.amount_capturable;
        a["amount_captured"] = state.amount_received;
        a["captures"] = in.captures;
        a["cancels"] = in.cancels;
        a["capture_deliveries"] = in.capture_deliveries;
        a["cancel_deliveries"] = in.cancel_deliveries;
        j["authorizations"].push_back(std::move(a));
    }
}

} // namespace payrecon::fake
