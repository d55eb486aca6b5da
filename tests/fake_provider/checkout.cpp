#include "tests/fake_provider/checkout.hpp"

#include "core/money.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <utility>
#include <variant>

namespace payrecon::fake {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view k_payments = "/payments";
constexpr std::string_view k_base32 = "abcdefghijklmnopqrstuvwxyz234567";
constexpr std::string_view k_hex = "0123456789abcdef";
constexpr std::string_view k_upper_alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
constexpr std::string_view k_declined_source = "src_card_declined";
constexpr std::int64_t k_max_amount = 999'999'999'999;
constexpr std::size_t k_max_reference = 50;    // PaymentRequest.reference maxLength
constexpr std::size_t k_max_description = 100; // PaymentRequest.description maxLength
constexpr std::size_t k_max_customer_text = 255;
constexpr std::int64_t k_default_limit = 10;
constexpr std::int64_t k_max_limit = 100;
constexpr std::int64_t k_max_skip = 1'000'000;
// "If you do not capture it within seven days, the payment is voided" (capture-a-payment).
constexpr std::chrono::hours k_authorization_validity{7 * 24};

http::Response empty_response(int status) {
    http::Response r;
    r.status = status;
    return r;
}

// `prefix` and then one or more word characters: the spec's `^(src)_(\w{26})$` and its kin, with
// the length relaxed so that test sources such as src_card_declined are accepted.
bool prefixed_word(const Json& value, std::string_view prefix) {
    if (!value.is_string()) {
        return false;
    }
    const std::string& text = value.get_ref<const std::string&>();
    return text.size() > prefix.size() && text.compare(0, prefix.size(), prefix) == 0 &&
           std::all_of(text.begin() + static_cast<std::ptrdiff_t>(prefix.size()), text.end(),
                       [](char c) {
                           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                  (c >= '0' && c <= '9') || c == '_';
                       });
}

bool string_at_most(const Json& value, std::size_t length) {
    return value.is_string() && value.get_ref<const std::string&>().size() <= length;
}

std::optional<std::int64_t> parse_int(std::string_view text) {
    std::int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc{} || ptr != text.data() + text.size()) {
        return std::nullopt;
    }
    return value;
}

struct CreateRequest {
    std::string source_id;
    std::int64_t amount = 0;
    std::string currency;
    std::string reference;
    std::string payment_type = "Regular";
    bool capture = true;
    std::optional<bool> merchant_initiated;
    std::optional<std::string> description;
    std::optional<std::string> processing_channel_id;
    Json customer;
    Json metadata;
};

// PaymentRequest as the spec defines it (components/schemas/Payments/PaymentRequest.yaml and
// the id source, RequestSources/02_PaymentRequestIdSource.yaml), for the subset the fake executes:
// a stored source (`type: id`). Answers the request, or every error code found (in field order).
// Fields the fake does not use are accepted as they are.
std::variant<CreateRequest, std::vector<std::string>> validate(const Json& body) {
    std::vector<std::string> codes;
    CreateRequest r;
    if (!body.is_object()) {
        return std::vector<std::string>{"request_body_invalid"};
    }
    const auto member = [&](const char* name) -> const Json* {
        const auto it = body.find(name);
        return it == body.end() ? nullptr : &*it;
    };

    if (const Json* source = member("source"); source == nullptr) {
        codes.emplace_back("payment_source_required");
    } else if (!source->is_object()) {
        codes.emplace_back("source_invalid");
    } else if (!source->contains("type")) {
        codes.emplace_back("source_type_required");
    } else if (!(*source)["type"].is_string() || (*source)["type"] != "id") {
        codes.emplace_back("source_type_invalid"); // token, card, ...: the fake stores no cards
    } else if (!source->contains("id")) {
        codes.emplace_back("source_id_required");
    } else if (!prefixed_word((*source)["id"], "src_")) {
        codes.emplace_back("source_id_invalid");
    } else {
        r.source_id = (*source)["id"].get<std::string>();
    }

    if (const Json* amount = member("amount"); amount != nullptr) {
        // An integer, minimum 0; absent or 0 is a card verification.
        if (amount->is_number_unsigned() && amount->get<std::uint64_t>() <= k_max_amount) {
            r.amount = static_cast<std::int64_t>(amount->get<std::uint64_t>());
        } else if (amount->is_number_integer() && !amount->is_number_unsigned() &&
                   amount->get<std::int64_t>() >= 0 &&
                   amount->get<std::int64_t>() <= k_max_amount) {
            r.amount = amount->get<std::int64_t>();
        } else {
            codes.emplace_back("amount_invalid");
        }
    }

    if (const Json* currency = member("currency"); currency == nullptr) {
        codes.emplace_back("currency_required");
    } else if (!currency->is_string() || currency->get_ref<const std::string&>().size() != 3 ||
               !find_currency(currency->get_ref<const std::string&>())) {
        codes.emplace_back("currency_invalid"); // upper case ISO 4217 only
    } else {
        r.currency = currency->get<std::string>();
    }

    if (const Json* payment_type = member("payment_type"); payment_type != nullptr) {
        static const std::vector<std::string> k_types{"Regular", "Recurring", "MOTO",
                                                      "Installment"};
        if (!payment_type->is_string() ||
            std::find(k_types.begin(), k_types.end(), payment_type->get<std::string>()) ==
                k_types.end()) {
            codes.emplace_back("payment_type_invalid");
        } else {
            r.payment_type = payment_type->get<std::string>();
        }
    }
    if (const Json* mit = member("merchant_initiated"); mit != nullptr) {
        if (!mit->is_boolean()) {
            codes.emplace_back("merchant_initiated_invalid");
        } else {
            r.merchant_initiated = mit->get<bool>();
        }
    }
    if (const Json* reference = member("reference"); reference != nullptr) {
        if (!string_at_most(*reference, k_max_reference)) {
            codes.emplace_back("reference_invalid");
        } else {
            r.reference = reference->get<std::string>();
        }
    }
    if (const Json* description = member("description"); description != nullptr) {
        if (!string_at_most(*description, k_max_description)) {
            codes.emplace_back("description_invalid");
        } else {
            r.description = description->get<std::string>();
        }
    }
    if (const Json* capture = member("capture"); capture != nullptr) {
        if (!capture->is_boolean()) {
            codes.emplace_back("capture_invalid");
        } else {
            r.capture = capture->get<bool>();
        }
    }
    if (const Json* channel = member("processing_channel_id"); channel != nullptr) {
        if (!prefixed_word(*channel, "pc_")) {
            codes.emplace_back("processing_channel_id_invalid");
        } else {
            r.processing_channel_id = channel->get<std::string>();
        }
    }
    if (const Json* customer = member("customer"); customer != nullptr) {
        if (!customer->is_object()) {
            codes.emplace_back("customer_invalid");
        } else {
            if (customer->contains("id") && !prefixed_word((*customer)["id"], "cus_")) {
                codes.emplace_back("customer_id_invalid");
            }
            if (customer->contains("email") &&
                !string_at_most((*customer)["email"], k_max_customer_text)) {
                codes.emplace_back("customer_email_invalid");
            }
            if (customer->contains("name") &&
                !string_at_most((*customer)["name"], k_max_customer_text)) {
                codes.emplace_back("customer_name_invalid");
            }
            r.customer = *customer;
        }
    }
    if (const Json* metadata = member("metadata"); metadata != nullptr) {
        // One level only: primitive values (the spec's note on `metadata`).
        if (!metadata->is_object() ||
            std::any_of(metadata->begin(), metadata->end(),
                        [](const Json& v) { return v.is_object() || v.is_array(); })) {
            codes.emplace_back("metadata_invalid");
        } else {
            r.metadata = *metadata;
        }
    }
    if (!codes.empty()) {
        return codes;
    }
    return r;
}

std::string_view status_text(bool declined, bool authorized_only, bool verified) {
    if (declined) {
        return "Declined";
    }
    if (verified) {
        return "Card Verified";
    }
    return authorized_only ? "Authorized" : "Captured";
}

// The payment ID of `path` when it is /payments/{id}`suffix`, else empty.
std::string payment_id(const std::string& path, std::string_view suffix) {
    const std::string prefix = std::string(k_payments) + "/";
    if (path.size() <= prefix.size() + suffix.size() ||
        path.compare(0, prefix.size(), prefix) != 0 ||
        path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) {
        return {};
    }
    std::string id = path.substr(prefix.size(), path.size() - prefix.size() - suffix.size());
    return id.find('/') == std::string::npos ? id : std::string();
}

} // namespace

CheckoutApi::CheckoutApi(Ledger& ledger, const Account& account, CheckoutOptions options)
    : m_ledger(ledger), m_account(account), m_options(options) {}

bool CheckoutApi::serves(const http::Request& request) const {
    const std::string& path = request.path;
    return path == k_payments ||
           path.compare(0, k_payments.size() + 1, std::string(k_payments) + "/") == 0;
}

bool CheckoutApi::authorized(const http::Request& request) const {
    const auto token = bearer_credential(request);
    return token && !m_account.api_key.empty() &&
           constant_time_equal(*token, m_account.api_key.reveal());
}

void CheckoutApi::reset_locked() {
    m_payments.clear();
    m_by_id.clear();
    m_keys.clear();
    m_refund_keys.clear();
    m_capture_keys.clear();
    m_void_keys.clear();
    m_action_seq = 0;
    m_capture_deliveries = 0;
    m_void_deliveries = 0;
    m_captures = 0;
    m_voids = 0;
}

Reply CheckoutApi::handle(const http::Request& request, const Wait& wait) {
    Reply reply;
    const std::string& path = request.path;
    const std::string prefix = std::string(k_payments) + "/";
    if (request.method == "POST" && path == k_payments) {
        reply = create(request, wait);
    } else if (request.method == "POST" && !payment_id(path, "/refunds").empty()) {
        reply = refund(payment_id(path, "/refunds"), request, wait);
    } else if (request.method == "POST" && !payment_id(path, "/captures").empty()) {
        reply = capture_or_void(payment_id(path, "/captures"), true, request, wait);
    } else if (request.method == "POST" && !payment_id(path, "/voids").empty()) {
        reply = capture_or_void(payment_id(path, "/voids"), false, request, wait);
    } else if (!authorized(request)) {
        reply.response = empty_response(401);
    } else if (request.method == "GET" && path == k_payments) {
        reply = lookup(request, wait);
    } else if (request.method == "GET" && path.size() > prefix.size() &&
               path.find('/', prefix.size()) == std::string::npos) {
        reply = retrieve(path.substr(prefix.size()), wait);
    } else if (request.method == "GET" && !payment_id(path, "/actions").empty()) {
        reply = actions(payment_id(path, "/actions"), wait);
    } else {
        reply.response = empty_response(404);
    }
    if (reply.action == SocketAction::respond || reply.action == SocketAction::partial_then_fin) {
        const auto lock = m_ledger.lock();
        std::string id = m_ledger.random_id_locked("", 32, k_hex);
        for (const std::size_t at : std::array<std::size_t, 4>{8, 13, 18, 23}) { // a UUID's form
            id.insert(at, 1, '-');
        }
        reply.response.headers.emplace_back("Cko-Request-Id", id);
    }
    return reply;
}

http::Response CheckoutApi::validation_error(const std::vector<std::string>& codes) {
    Json body;
    body["request_id"] = m_ledger.random_id_locked("", 13, k_upper_alnum);
    body["error_type"] = "request_invalid";
    body["error_codes"] = codes;
    return json_response(422, body);
}

Reply CheckoutApi::create(const http::Request& request, const Wait& wait) {
    Reply reply;
    const Json body = Json::parse(request.body, nullptr, false); // discarded if not JSON
    const std::string* key_header = request.header("cko-idempotency-key");
    if (key_header != nullptr && key_header->empty()) {
        key_header = nullptr;
    }
    const std::string* key = m_account.idempotency ? key_header : nullptr;
    if (body.is_object() && body.contains("reference") && body["reference"].is_string() &&
        !body["reference"].get_ref<const std::string&>().empty()) {
        reply.operation_id = body["reference"].get<std::string>();
    } else {
        reply.operation_id = key_header != nullptr ? *key_header : std::string(k_no_operation);
    }

    std::unique_lock lock = m_ledger.lock();
    m_ledger.count_delivery_locked(reply.operation_id);
    const auto latency = m_ledger.faults_locked().latency;
    // Answers without executing, after the configured latency.
    auto answer = [&](Reply r) { return answer_after(lock, wait, latency, std::move(r)); };
    const http::Response error_500 = empty_response(500);

    if (!authorized(request)) {
        reply.response = empty_response(401);
        return answer(std::move(reply));
    }
    if (fault_before_execute_locked(m_ledger, reply, [&] { return error_500; })) {
        return answer(std::move(reply));
    }
    // A known key answers before the body is looked at (Checkout.com does not compare it).
    if (key_answered_locked(m_keys, key, reply)) {
        apply_after_execute(reply, error_500);
        return answer(std::move(reply));
    }

    std::variant<CreateRequest, std::vector<std::string>> validated =
        std::vector<std::string>{"request_body_malformed"};
    if (!body.is_discarded()) {
        validated = validate(body);
    }
    if (auto* codes = std::get_if<std::vector<std::string>>(&validated)) {
        reply.response = validation_error(*codes);
        apply_after_execute(reply, error_500);
        return answer(std::move(reply));
    }
    CreateRequest params = std::get<CreateRequest>(std::move(validated));

    if (key != nullptr) {
        KeyRecord record;
        record.first_seen = m_ledger.now_locked();
        m_keys.emplace(*key, std::move(record));
    }

    // The key is in flight for as long as the latency lasts.
    if (!wait_in_flight(lock, wait, latency, m_keys, key)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }

    // Execute: one payment.
    Payment p;
    p.id = m_ledger.random_id_locked("pay_", 26, k_base32);
    p.action_id = m_ledger.random_id_locked("act_", 26, k_base32);
    p.source_id = std::move(params.source_id);
    p.amount = params.amount;
    p.currency = std::move(params.currency);
    p.reference = std::move(params.reference);
    p.operation_id = reply.operation_id;
    p.payment_type = std::move(params.payment_type);
    p.merchant_initiated = params.merchant_initiated;
    p.description = std::move(params.description);
    p.processing_channel_id = std::move(params.processing_channel_id);
    p.customer = std::move(params.customer);
    if (p.customer.is_object() && !p.customer.contains("id")) {
        p.customer["id"] = m_ledger.random_id_locked("cus_", 26, k_base32);
    }
    p.metadata = std::move(params.metadata);
    p.created_at = m_ledger.now_locked();
    const std::string* host = request.header("host");
    p.base_url = "http://" + (host != nullptr && !host->empty() ? *host : "127.0.0.1");
    if (reply.fault == Fault::decline || p.source_id == k_declined_source) {
        p.status = Status::declined;
    } else if (p.amount == 0) {
        p.status = Status::card_verified;
    } else {
        p.status = params.capture ? Status::captured : Status::authorized;
    }
    p.manual = !params.capture;
    m_ledger.count_execution_locked(p.operation_id);
    if (p.status == Status::captured) {
        m_ledger.add_charged_locked(p.currency, p.amount);
        p.capture_action_id = m_ledger.random_id_locked("act_", 26, k_base32);
    }
    reply.response = json_response(201, render_response(p));
    m_by_id.emplace(p.id, m_payments.size());
    m_payments.push_back(std::move(p));
    reply.executed = true;
    apply_after_execute(reply, error_500);
    settle_key_locked(m_keys, key, reply);
    return reply;
}

bool CheckoutApi::key_answered_locked(std::map<std::string, KeyRecord>& keys,
                                      const std::string* key, Reply& reply) {
    if (key == nullptr) {
        return false;
    }
    const auto it = known_key_locked(keys, *key, m_ledger.now_locked(), m_options.key_retention);
    if (it == keys.end()) {
        return false;
    }
    if (it->second.in_flight) {
        reply.response = empty_response(409);
    } else {
        reply.response.status = it->second.status;
        reply.response.body = it->second.body;
        reply.replayed = true;
        m_ledger.count_replay_locked();
    }
    return true;
}

void CheckoutApi::settle_key_locked(std::map<std::string, KeyRecord>& keys, const std::string* key,
                                    const Reply& reply) {
    if (key == nullptr) {
        return;
    }
    const auto it = keys.find(*key);
    if (it == keys.end()) { // gone only if reset() ran meanwhile
        return;
    }
    if (reply.response.status >= 200 && reply.response.status < 300) {
        it->second.in_flight = false;
        it->second.status = reply.response.status;
        it->second.body = reply.response.body;
    } else {
        keys.erase(it); // only 2xx is saved: the key is free again
    }
}

Reply CheckoutApi::refund(const std::string& id, const http::Request& request, const Wait& wait) {
    Reply reply;
    const Json body = Json::parse(request.body, nullptr, false); // discarded if not JSON
    const std::string* key_header = request.header("cko-idempotency-key");
    if (key_header != nullptr && key_header->empty()) {
        key_header = nullptr;
    }
    const std::string* key = m_account.idempotency ? key_header : nullptr;
    if (body.is_object() && body.contains("reference") && body["reference"].is_string() &&
        !body["reference"].get_ref<const std::string&>().empty()) {
        reply.operation_id = body["reference"].get<std::string>();
    } else {
        reply.operation_id = key_header != nullptr ? *key_header : std::string(k_no_operation);
    }

    std::unique_lock lock = m_ledger.lock();
    m_ledger.count_delivery_locked(reply.operation_id);
    const auto latency = m_ledger.faults_locked().latency;
    auto answer = [&](Reply r) { return answer_after(lock, wait, latency, std::move(r)); };
    const http::Response error_500 = empty_response(500);

    if (!authorized(request)) {
        reply.response = empty_response(401);
        return answer(std::move(reply));
    }
    if (fault_before_execute_locked(m_ledger, reply, [&] { return error_500; })) {
        return answer(std::move(reply));
    }
    if (key_answered_locked(m_refund_keys, key, reply)) {
        apply_after_execute(reply, error_500);
        return answer(std::move(reply));
    }

    // RefundRequest: amount (integer, minimum 0; absent: what is left), reference (<= 50),
    // metadata (one level).
    std::vector<std::string> codes;
    std::optional<std::int64_t> amount;
    std::string reference;
    Json metadata;
    if (!body.is_object()) {
        codes.emplace_back(body.is_discarded() ? "request_body_malformed" : "request_body_invalid");
    } else {
        if (const auto it = body.find("amount"); it != body.end()) {
            if (it->is_number_integer() && it->get<std::int64_t>() >= 0 &&
                it->get<std::int64_t>() <= k_max_amount) {
                amount = it->get<std::int64_t>();
            } else {
                codes.emplace_back("amount_invalid");
            }
        }
        if (const auto it = body.find("reference"); it != body.end()) {
            if (!string_at_most(*it, k_max_reference)) {
                codes.emplace_back("reference_invalid");
            } else {
                reference = it->get<std::string>();
            }
        }
        if (const auto it = body.find("metadata"); it != body.end()) {
            if (!it->is_object() || std::any_of(it->begin(), it->end(), [](const Json& v) {
                    return v.is_object() || v.is_array();
                })) {
                codes.emplace_back("metadata_invalid");
            } else {
                metadata = *it;
            }
        }
    }
    if (!codes.empty()) {
        reply.response = validation_error(codes);
        return answer(std::move(reply));
    }
    const auto found = m_by_id.find(id);
    if (found == m_by_id.end()) {
        reply.response = empty_response(404);
        return answer(std::move(reply));
    }
    const std::size_t index = found->second;
    if (key != nullptr) {
        KeyRecord record;
        record.first_seen = m_ledger.now_locked();
        m_refund_keys.emplace(*key, std::move(record));
    }
    if (!wait_in_flight(lock, wait, latency, m_refund_keys, key)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    // What the payment has left is read now, after the wait: another refund may have taken it.
    if (index >= m_payments.size()) { // reset() ran meanwhile
        reply.response = empty_response(404);
        return reply;
    }
    Payment& p = m_payments[index];
    // Only what was captured is refunded: all of a payment captured at once, of an authorisation
    // what its captures took.
    const std::int64_t left = standing(p, m_ledger.now_locked()).captured - p.amount_refunded;
    const std::int64_t refunded = amount.value_or(left);
    if (refunded < 1 || refunded > left) {
        // "Refund not allowed" (403, no body): nothing executed, nothing kept under the key.
        reply.response = empty_response(403);
        settle_key_locked(m_refund_keys, key, reply);
        return reply;
    }
    // Execute: one Refund action.
    Payment::Refund r;
    r.action_id = m_ledger.random_id_locked("act_", 26, k_base32);
    r.amount = refunded;
    r.reference = std::move(reference);
    r.metadata = std::move(metadata);
    r.processed_on = m_ledger.now_locked();
    r.seq = ++m_action_seq;
    p.amount_refunded += refunded;
    m_ledger.add_refunded_locked(p.currency, refunded);
    m_ledger.count_execution_locked(reply.operation_id);
    Json accepted;
    accepted["action_id"] = r.action_id;
    if (!r.reference.empty()) {
        accepted["reference"] = r.reference;
    }
    accepted["_links"]["payment"]["href"] = p.base_url + std::string(k_payments) + "/" + p.id;
    p.refunds.push_back(std::move(r));
    reply.response = json_response(202, accepted);
    reply.executed = true;
    apply_after_execute(reply, error_500);
    settle_key_locked(m_refund_keys, key, reply);
    return reply;
}

Reply CheckoutApi::capture_or_void(const std::string& id, bool capture,
                                   const http::Request& request, const Wait& wait) {
    Reply reply;
    const Json body = Json::parse(request.body, nullptr, false); // discarded if not JSON
    const std::string* key_header = request.header("cko-idempotency-key");
    if (key_header != nullptr && key_header->empty()) {
        key_header = nullptr;
    }
    const std::string* key = m_account.idempotency ? key_header : nullptr;
    if (body.is_object() && body.contains("reference") && body["reference"].is_string() &&
        !body["reference"].get_ref<const std::string&>().empty()) {
        reply.operation_id = body["reference"].get<std::string>();
    } else {
        reply.operation_id = key_header != nullptr ? *key_header : std::string(k_no_operation);
    }
    auto& keys = capture ? m_capture_keys : m_void_keys;

    std::unique_lock lock = m_ledger.lock();
    m_ledger.count_delivery_locked(reply.operation_id);
    const auto latency = m_ledger.faults_locked().latency;
    auto answer = [&](Reply r) { return answer_after(lock, wait, latency, std::move(r)); };
    const http::Response error_500 = empty_response(500);

    if (!authorized(request)) {
        reply.response = empty_response(401);
        return answer(std::move(reply));
    }
    // Read in full with the key accepted: counted whatever comes of it.
    ++(capture ? m_capture_deliveries : m_void_deliveries);
    if (const auto named = m_by_id.find(id); named != m_by_id.end()) {
        Payment& p = m_payments[named->second];
        p.named_by_operation = true;
        ++(capture ? p.capture_deliveries : p.void_deliveries);
    }
    if (fault_before_execute_locked(m_ledger, reply, [&] { return error_500; })) {
        return answer(std::move(reply));
    }
    if (key_answered_locked(keys, key, reply)) {
        apply_after_execute(reply, error_500);
        return answer(std::move(reply));
    }

    // CaptureRequest: amount (integer, minimum 0; absent: what is left), capture_type (Final,
    // NonFinal), reference (<= 50), metadata (one level). VoidRequest: reference and metadata.
    std::vector<std::string> codes;
    std::optional<std::int64_t> amount;
    bool final = true;
    std::string reference;
    Json metadata;
    if (!body.is_object()) {
        codes.emplace_back(body.is_discarded() ? "request_body_malformed" : "request_body_invalid");
    } else {
        if (const auto it = body.find("amount"); capture && it != body.end()) {
            if (it->is_number_integer() && it->get<std::int64_t>() >= 0 &&
                it->get<std::int64_t>() <= k_max_amount) {
                amount = it->get<std::int64_t>();
            } else {
                codes.emplace_back("amount_invalid");
            }
        }
        if (const auto it = body.find("capture_type"); capture && it != body.end()) {
            if (*it == "Final" || *it == "NonFinal") {
                final = *it == "Final";
            } else {
                codes.emplace_back("capture_type_invalid");
            }
        }
        if (const auto it = body.find("reference"); it != body.end()) {
            if (!string_at_most(*it, k_max_reference)) {
                codes.emplace_back("reference_invalid");
            } else {
                reference = it->get<std::string>();
            }
        }
        if (const auto it = body.find("metadata"); it != body.end()) {
            if (!it->is_object() || std::any_of(it->begin(), it->end(), [](const Json& v) {
                    return v.is_object() || v.is_array();
                })) {
                codes.emplace_back("metadata_invalid");
            } else {
                metadata = *it;
            }
        }
    }
    if (!codes.empty()) {
        reply.response = validation_error(codes);
        return answer(std::move(reply));
    }
    const auto found = m_by_id.find(id);
    if (found == m_by_id.end()) {
        reply.response = empty_response(404);
        return answer(std::move(reply));
    }
    const std::size_t index = found->second;
    if (key != nullptr) {
        KeyRecord record;
        record.first_seen = m_ledger.now_locked();
        keys.emplace(*key, std::move(record));
    }
    if (!wait_in_flight(lock, wait, latency, keys, key)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    // What is left to capture is read now, after the wait: a racing capture or void is seen.
    if (index >= m_payments.size()) { // reset() ran meanwhile
        reply.response = empty_response(404);
        return reply;
    }
    Payment& p = m_payments[index];
    const auto now = m_ledger.now_locked();
    const std::int64_t left = standing(p, now).capturable;
    const std::int64_t taken = capture ? amount.value_or(left) : left;
    if (left < 1 || taken < 1 || taken > left) {
        // "Capture not allowed" / "Void not allowed" (403, no body): nothing executed, nothing
        // kept under the key.
        reply.response = empty_response(403);
        settle_key_locked(keys, key, reply);
        return reply;
    }
    // Execute: one Capture or Void action.
    Payment::Operation op;
    op.capture = capture;
    op.final = final;
    op.action.action_id = m_ledger.random_id_locked("act_", 26, k_base32);
    op.action.amount = taken;
    op.action.reference = std::move(reference);
    op.action.metadata = std::move(metadata);
    op.action.processed_on = now;
    op.action.seq = ++m_action_seq;
    if (capture) {
        p.amount_captured += taken;
        p.closed = final;
        m_ledger.add_charged_locked(p.currency, taken);
        ++m_captures;
    } else {
        p.closed = true;
        ++m_voids;
    }
    m_ledger.count_execution_locked(reply.operation_id);
    Json accepted;
    accepted["action_id"] = op.action.action_id;
    if (!op.action.reference.empty()) {
        accepted["reference"] = op.action.reference;
    }
    accepted["_links"]["payment"]["href"] = p.base_url + std::string(k_payments) + "/" + p.id;
    p.operations.push_back(std::move(op));
    reply.response = json_response(202, accepted);
    reply.executed = true;
    apply_after_execute(reply, error_500);
    settle_key_locked(keys, key, reply);
    return reply;
}

CheckoutApi::Standing CheckoutApi::standing(const Payment& p,
                                            std::chrono::system_clock::time_point now) {
    Standing s;
    const bool declined = p.status == Status::declined;
    const bool verified = p.status == Status::card_verified;
    if (p.status != Status::authorized) {
        s.status = status_text(declined, false, verified);
        s.captured = p.status == Status::captured ? p.amount : 0;
    } else {
        s.captured = p.amount_captured;
        s.expired = !p.closed && now >= p.created_at + k_authorization_validity;
        const bool open = !p.closed && !s.expired;
        s.capturable = open ? p.amount - p.amount_captured : 0;
        s.voided = open ? 0 : p.amount - p.amount_captured;
        s.status = s.captured == 0         ? (open ? "Authorized" : "Voided")
                   : s.captured < p.amount ? "Partially Captured"
                                           : "Captured";
    }
    if (p.amount_refunded > 0) {
        s.status = p.amount_refunded < s.captured ? "Partially Refunded" : "Refunded";
    }
    return s;
}

Reply CheckoutApi::actions(const std::string& id, const Wait& wait) {
    Reply reply;
    if (!m_account.lookup) {
        reply.response = empty_response(404);
        return reply;
    }
    if (!wait(m_ledger.faults().latency)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    const auto lock = m_ledger.lock();
    if (m_ledger.faults_locked().lookup_down) {
        reply.response = empty_response(503);
        return reply;
    }
    const auto it = m_by_id.find(id);
    reply.response =
        it == m_by_id.end()
            ? empty_response(404)
            : json_response(200, render_actions(m_payments[it->second], m_ledger.now_locked()));
    return reply;
}

Reply CheckoutApi::retrieve(const std::string& id, const Wait& wait) {
    Reply reply;
    if (!wait(m_ledger.faults().latency)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    const auto lock = m_ledger.lock();
    const auto it = m_by_id.find(id);
    reply.response =
        it == m_by_id.end()
            ? empty_response(404)
            : json_response(200, render_details(m_payments[it->second], m_ledger.now_locked()));
    return reply;
}

Reply CheckoutApi::lookup(const http::Request& request, const Wait& wait) {
    Reply reply;
    if (!m_account.lookup) {
        reply.response = empty_response(404);
        return reply;
    }
    if (!wait(m_ledger.faults().latency)) {
        reply.action = SocketAction::close_fin;
        return reply;
    }
    const auto query = http::parse_form(request.query);
    std::vector<std::string> codes;
    std::string reference;
    std::int64_t limit = k_default_limit;
    std::int64_t skip = 0;
    if (!query) {
        codes.emplace_back("request_invalid");
    } else {
        bool has_reference = false;
        for (const auto& [name, value] : *query) {
            if (name == "reference") {
                has_reference = true;
                reference = value;
            } else if (name == "limit") {
                const auto n = parse_int(value);
                if (!n || *n < 1 || *n > k_max_limit) {
                    codes.emplace_back("paging_limit_invalid");
                } else {
                    limit = *n;
                }
            } else if (name == "skip") {
                const auto n = parse_int(value);
                if (!n || *n < 0 || *n > k_max_skip) {
                    codes.emplace_back("paging_skip_invalid");
                } else {
                    skip = *n;
                }
            }
        }
        if (!has_reference || reference.empty()) {
            codes.emplace_back("reference_required");
        } else if (reference.size() > k_max_reference) {
            codes.emplace_back("reference_invalid");
        }
    }
    const auto lock = m_ledger.lock();
    if (!codes.empty()) {
        reply.response = validation_error(codes);
        return reply;
    }
    const FaultConfig& faults = m_ledger.faults_locked();
    if (faults.lookup_down) {
        reply.response = empty_response(503);
        return reply;
    }
    const auto now = m_ledger.now_locked();
    std::vector<const Payment*> found; // newest first
    for (auto it = m_payments.rbegin(); it != m_payments.rend(); ++it) {
        if (it->reference == reference && it->created_at + faults.lookup_stale <= now) {
            found.push_back(&*it);
        }
    }
    Json body;
    body["limit"] = limit;
    body["skip"] = skip;
    body["total_count"] = found.size();
    body["data"] = Json::array();
    const auto first = static_cast<std::size_t>(skip);
    for (std::size_t i = first; i < found.size() && i < first + static_cast<std::size_t>(limit);
         ++i) {
        body["data"].push_back(render_details(*found[i], now));
    }
    reply.response = json_response(200, body);
    return reply;
}

namespace {

Json source_json(const std::string& id) {
    Json s;
    s["id"] = id;
    s["type"] = "card";
    s["expiry_month"] = 12;
    s["expiry_year"] = 2030;
    s["scheme"] = "Visa";
    s["last4"] = "4242";
    s["bin"] = "424242";
    s["card_type"] = "CREDIT";
    return s;
}

} // namespace

Json CheckoutApi::render_response(const Payment& p) {
    const bool declined = p.status == Status::declined;
    const std::string self = p.base_url + std::string(k_payments) + "/" + p.id;
    Json j;
    j["id"] = p.id;
    j["action_id"] = p.action_id;
    j["amount"] = p.amount;
    j["currency"] = p.currency;
    j["approved"] = !declined;
    j["status"] =
        status_text(declined, p.status == Status::authorized, p.status == Status::card_verified);
    if (!declined) {
        j["auth_code"] = p.id.substr(4, 6);
    }
    j["response_code"] = declined ? "20051" : "10000";
    j["response_summary"] = declined ? "Insufficient Funds" : "Approved";
    j["risk"] = Json{{"flagged", false}};
    j["source"] = source_json(p.source_id);
    if (p.customer.is_object()) {
        j["customer"] = p.customer;
    }
    j["processed_on"] = rfc3339(p.created_at);
    if (!p.reference.empty()) {
        j["reference"] = p.reference;
    }
    j["_links"]["self"]["href"] = self;
    j["_links"]["actions"]["href"] = self + "/actions";
    if (p.status == Status::authorized) {
        j["_links"]["capture"]["href"] = self + "/captures";
        j["_links"]["void"]["href"] = self + "/voids";
    } else if (p.status == Status::captured) {
        j["_links"]["refund"]["href"] = self + "/refunds";
    }
    return j;
}

Json CheckoutApi::render_details(const Payment& p, std::chrono::system_clock::time_point now) {
    const bool declined = p.status == Status::declined;
    const Standing st = standing(p, now);
    const std::string self = p.base_url + std::string(k_payments) + "/" + p.id;
    Json j;
    j["id"] = p.id;
    j["requested_on"] = rfc3339(p.created_at);
    j["source"] = source_json(p.source_id);
    j["amount"] = p.amount;
    j["currency"] = p.currency;
    j["payment_type"] = p.payment_type;
    if (!p.reference.empty()) {
        j["reference"] = p.reference;
    }
    if (p.description) {
        j["description"] = *p.description;
    }
    j["approved"] = !declined;
    j["status"] = st.status;
    const bool held = p.status == Status::captured || p.status == Status::authorized;
    j["balances"] = Json{{"total_authorized", held ? p.amount : 0},
                         {"total_voided", st.voided},
                         {"available_to_void", st.capturable},
                         {"total_captured", st.captured},
                         {"available_to_capture", st.capturable},
                         {"total_refunded", p.amount_refunded},
                         {"available_to_refund", st.captured - p.amount_refunded}};
    j["risk"] = Json{{"flagged", false}};
    if (p.customer.is_object()) {
        j["customer"] = p.customer;
    }
    if (p.metadata.is_object()) {
        j["metadata"] = p.metadata;
    }
    if (p.merchant_initiated) {
        j["merchant_initiated"] = *p.merchant_initiated;
    }
    if (p.processing_channel_id) {
        j["processing_channel_id"] = *p.processing_channel_id;
    }
    j["_links"]["self"]["href"] = self;
    j["_links"]["actions"]["href"] = self + "/actions";
    if (st.capturable > 0) {
        j["_links"]["capture"]["href"] = self + "/captures";
        j["_links"]["void"]["href"] = self + "/voids";
    }
    if (st.captured - p.amount_refunded > 0) {
        j["_links"]["refund"]["href"] = self + "/refunds";
    }
    return j;
}

Json CheckoutApi::render_actions(const Payment& p, std::chrono::system_clock::time_point now) {
    const bool declined = p.status == Status::declined;
    // Refunds, captures and voids in the order they were made (seq), newest first.
    struct Made {
        std::chrono::system_clock::time_point on;
        std::uint64_t seq;
        Json action;
    };
    std::vector<Made> made;
    const auto action_json = [](const Payment::Refund& r, std::string_view type) {
        Json a;
        a["id"] = r.action_id;
        a["type"] = type;
        a["processed_on"] = rfc3339(r.processed_on);
        a["amount"] = r.amount;
        a["approved"] = true;
        a["response_code"] = "10000";
        a["response_summary"] = "Approved";
        if (!r.reference.empty()) {
            a["reference"] = r.reference;
        }
        if (r.metadata.is_object()) {
            a["metadata"] = r.metadata;
        }
        return a;
    };
    for (const auto& r : p.refunds) {
        made.push_back({r.processed_on, r.seq, action_json(r, "Refund")});
    }
    for (const auto& op : p.operations) {
        made.push_back({op.action.processed_on, op.action.seq,
                        action_json(op.action, op.capture ? "Capture" : "Void")});
    }
    const Standing st = standing(p, now);
    if (st.expired) {
        // The provider's own void of what was left, when the authorisation lapsed (after every
        // capture; a refund made since comes later, even in the same second: seq 0).
        Json a;
        a["id"] = "act_" + p.action_id.substr(4, 20) + "expire";
        a["type"] = "Void";
        a["processed_on"] = rfc3339(p.created_at + k_authorization_validity);
        a["amount"] = st.voided;
        a["approved"] = true;
        a["response_code"] = "10000";
        a["response_summary"] = "Approved";
        made.push_back({p.created_at + k_authorization_validity, 0, std::move(a)});
    }
    std::sort(made.begin(), made.end(), [](const Made& a, const Made& b) {
        return a.on != b.on ? a.on > b.on : a.seq > b.seq;
    });
    Json out = Json::array();
    for (auto& m : made) {
        out.push_back(std::move(m.action));
    }
    if (!p.capture_action_id.empty()) {
        Json a;
        a["id"] = p.capture_action_id;
        a["type"] = "Capture";
        a["processed_on"] = rfc3339(p.created_at);
        a["amount"] = p.amount;
        a["approved"] = true;
        a["response_code"] = "10000";
        a["response_summary"] = "Approved";
        out.push_back(std::move(a));
    }
    Json a;
    a["id"] = p.action_id;
    a["type"] = p.status == Status::card_verified ? "Card Verification" : "Authorization";
    a["processed_on"] = rfc3339(p.created_at);
    a["amount"] = p.amount;
    a["approved"] = !declined;
    if (!declined) {
        a["auth_code"] = p.id.substr(4, 6);
    }
    a["response_code"] = declined ? "20051" : "10000";
    a["response_summary"] = declined ? "Insufficient Funds" : "Approved";
    if (!p.reference.empty()) {
        a["reference"] = p.reference;
    }
    out.push_back(std::move(a));
    return out;
}

void CheckoutApi::write_ledger_locked(nlohmann::ordered_json& j, LedgerOptions options) const {
    const auto now = m_ledger.now_locked();
    j["checkout_payment_count"] = m_payments.size();
    std::size_t refunds = 0;
    for (const Payment& p : m_payments) {
        refunds += p.refunds.size();
    }
    j["checkout_refund_count"] = refunds;
    if (options.payment_intents) {
        j["checkout_payments"] = Json::array();
        for (const Payment& p : m_payments) {
            j["checkout_payments"].push_back(render_details(p, now));
        }
    }
    j["checkout_capture_deliveries"] = m_capture_deliveries;
    j["checkout_void_deliveries"] = m_void_deliveries;
    j["checkout_captures"] = m_captures;
    j["checkout_voids"] = m_voids;
    j["checkout_authorizations"] = Json::array();
    for (const Payment& p : m_payments) {
        if (!p.manual && !p.named_by_operation) {
            continue;
        }
        const Standing st = standing(p, now);
        std::size_t captures = 0;
        for (const auto& op : p.operations) {
            captures += op.capture ? 1 : 0;
        }
        Json a;
        a["id"] = p.id;
        a["operation_id"] = p.operation_id;
        a["capture"] = !p.manual; // as the create asked
        a["status"] = st.status;
        a["amount"] = p.amount;
        a["available_to_capture"] = st.capturable;
        a["amount_captured"] = st.captured;
        a["amount_voided"] = st.voided;
        a["expired"] = st.expired;
        a["captures"] = captures;
        a["voids"] = p.operations.size() - captures;
        a["capture_deliveries"] = p.capture_deliveries;
        a["void_deliveries"] = p.void_deliveries;
        j["checkout_authorizations"].push_back(std::move(a));
    }
}

} // namespace payrecon::fake
