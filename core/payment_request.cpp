#include "core/payment_request.hpp"

#include "core/card_number.hpp"
#include "core/money.hpp"

#include <array>
#include <cmath>
#include <exception>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>
#include <vector>

namespace payrecon {
namespace {

using json = nlohmann::json;

constexpr std::size_t k_max_text_length = 255; // merchant_reference, customer, payment_method
constexpr std::size_t k_max_provider_length = 32;
constexpr std::size_t k_max_description_length = 1000;
constexpr std::size_t k_max_metadata_entries = 50;
constexpr std::size_t k_max_metadata_key_length = 40;
constexpr std::size_t k_max_metadata_value_length = 500;

constexpr std::array<std::string_view, 9> k_known_fields = {
    "amount",   "currency",    "merchant_reference", "provider", "payment_method",
    "customer", "description", "metadata",           "capture"};

// Tracing and correlation IDs: the same request may carry different ones on each retry.
constexpr std::array<std::string_view, 5> k_transport_fields = {
    "trace_id", "traceparent", "tracestate", "request_id", "correlation_id"};

template <std::size_t N>
bool contains(const std::array<std::string_view, N>& names, std::string_view name) {
    for (const std::string_view candidate : names) {
        if (candidate == name) {
            return true;
        }
    }
    return false;
}

// Thrown inside this file to abort parsing or validation with the error to return; it never
// leaves parse_payment_request().
class Rejected : public std::exception {
public:
    explicit Rejected(ValidationError error) : m_error(std::move(error)) {}
    const char* what() const noexcept override { return "payment request rejected"; }
    const ValidationError& error() const noexcept { return m_error; }

private:
    ValidationError m_error;
};

[[noreturn]] void reject(ValidationKind kind, std::string field, std::string code,
                         std::string message) {
    throw Rejected(ValidationError{kind, std::move(field), std::move(code), std::move(message)});
}

[[noreturn]] void reject_invalid(std::string field, std::string code, std::string message) {
    reject(ValidationKind::invalid, std::move(field), std::move(code), std::move(message));
}

std::string join_path(const std::string& parent, std::string_view key) {
    if (parent.empty()) {
        return std::string(key);
    }
    return parent + "." + std::string(key);
}

enum class CardData {
    number_in_value, // a string value holds a card number
    number_in_key,   // an object key holds a card number: `field` names the object
    field_name,      // a field named like card data ("cvc", "card_number")
};

// Says where and what to do; never the value, which may be a card number and must not reach a
// log or a response.
ValidationError card_data_error(std::string field, CardData what) {
    const std::string where = field.empty() ? std::string("the body") : field;
    std::string found;
    switch (what) {
    case CardData::number_in_value:
        found = where + " holds what looks like a card number";
        break;
    case CardData::number_in_key:
        found = "a key in " + where + " holds what looks like a card number";
        break;
    case CardData::field_name:
        found = where + " is a field for card data";
        break;
    }
    return ValidationError{
        ValidationKind::card_data, std::move(field),
        what == CardData::field_name ? "card_field" : "card_number",
        found + ". Card numbers and security codes are never accepted or stored: remove it, and "
                "send the provider's token for the payment method in payment_method instead."};
}

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

// Every string value and every object key, at any depth (the depth is already bounded).
std::optional<ValidationError> find_card_data(const json& value, const std::string& path) {
    if (value.is_string()) {
        if (contains_card_number(value.get_ref<const std::string&>())) {
            return card_data_error(path, CardData::number_in_value);
        }
    } else if (value.is_object()) {
        for (auto it = value.begin(); it != value.end(); ++it) {
            if (contains_card_number(it.key())) {
                // The key itself is the card number: name the enclosing object, not the key.
                return card_data_error(path, CardData::number_in_key);
            }
            const std::string child_path = join_path(path, it.key());
            if (is_card_field_name(it.key())) {
                return card_data_error(child_path, CardData::field_name);
            }
            if (auto error = find_card_data(it.value(), child_path)) {
                return error;
            }
        }
    } else if (value.is_array()) {
        for (std::size_t i = 0; i < value.size(); ++i) {
            if (auto error = find_card_data(value[i], path + "[" + std::to_string(i) + "]")) {
                return error;
            }
        }
    }
    return std::nullopt;
}

// One open JSON container while parsing.
struct Frame {
    bool is_object = false;
    std::set<std::string> keys;
    std::string last_key; // the key whose value is being parsed (objects only)
};

// nlohmann::json accepts duplicate keys (the last wins) and nests as deep as the input goes. The
// callback sees every container and key as it is read, rejects a duplicate key at any level and
// stops at the first container deeper than k_max_request_depth, before building it: a 10,000-deep
// body costs nine callbacks. nlohmann itself rejects bad syntax and ill-formed UTF-8.
json parse_strict(std::string_view body) {
    std::vector<Frame> frames;
    const json::parser_callback_t callback = [&frames](int /*depth*/, json::parse_event_t event,
                                                       json& parsed) {
        switch (event) {
        case json::parse_event_t::object_start:
        case json::parse_event_t::array_start:
            if (frames.size() >= k_max_request_depth) {
                reject(ValidationKind::malformed, "", "too_deep",
                       "the body nests deeper than " + std::to_string(k_max_request_depth) +
                           " levels");
            }
            frames.push_back(Frame{event == json::parse_event_t::object_start, {}, {}});
            break;
        case json::parse_event_t::object_end:
        case json::parse_event_t::array_end:
            frames.pop_back();
            break;
        case json::parse_event_t::key: {
            Frame& frame = frames.back();
            std::string name = parsed.get<std::string>();
            if (!frame.keys.insert(name).second) {
                std::string path;
                for (std::size_t i = 0; i + 1 < frames.size(); ++i) {
                    if (frames[i].is_object) {
                        path = join_path(path, frames[i].last_key);
                    }
                }
                path = join_path(path, name);
                reject(ValidationKind::malformed, path, "duplicate_key",
                       "the body has the key \"" + path + "\" twice; send each key once");
            }
            frame.last_key = std::move(name);
            break;
        }
        case json::parse_event_t::value:
            break;
        }
        return true;
    };
    return json::parse(body.begin(), body.end(), callback, /*allow_exceptions=*/true,
                       /*ignore_comments=*/false);
}

enum class Controls {
    none,            // no byte < 0x20 and no 0x7F
    newline_and_tab, // free text: '\n' and '\t' allowed, every other control character refused
};

bool has_forbidden_control(std::string_view text, Controls controls) {
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte >= 0x20 && byte != 0x7F) {
            continue;
        }
        if (controls == Controls::newline_and_tab && (c == '\n' || c == '\t')) {
            continue;
        }
        return true;
    }
    return false;
}

const json* find_field(const json& object, std::string_view name) {
    const auto it = object.find(name);
    return it == object.end() ? nullptr : &*it;
}

const std::string& require_string(const json& value, const std::string& field) {
    if (!value.is_string()) {
        reject_invalid(field, "wrong_type", field + " must be a string");
    }
    return value.get_ref<const std::string&>();
}

const json& require_present(const json& body, std::string_view name) {
    const json* value = find_field(body, name);
    if (value == nullptr) {
        reject_invalid(std::string(name), "required", std::string(name) + " is required");
    }
    return *value;
}

// A string field's length in bytes and its control characters.
std::string checked_text(const json& value, const std::string& field, std::size_t min_length,
                         std::size_t max_length, Controls controls) {
    const std::string& text = require_string(value, field);
    if (text.size() < min_length) {
        reject_invalid(field, "empty", field + " must not be empty");
    }
    if (text.size() > max_length) {
        reject_invalid(field, "too_long",
                       field + " is longer than " + std::to_string(max_length) + " bytes");
    }
    if (has_forbidden_control(text, controls)) {
        reject_invalid(field, "invalid_character",
                       controls == Controls::none
                           ? field + " contains a control character"
                           : field + " contains a control character other than newline and tab");
    }
    return text;
}

// A string field restricted to ASCII characters accepted by `allowed`.
template <typename Allowed>
std::string checked_token(const json& value, const std::string& field, std::size_t max_length,
                          Allowed allowed, std::string_view rule) {
    std::string text = checked_text(value, field, 1, max_length, Controls::none);
    for (const char c : text) {
        if (!allowed(c)) {
            reject_invalid(field, "invalid_character",
                           field + " may only contain " + std::string(rule));
        }
    }
    return text;
}

bool is_lower_alnum(char c) {
    return (c >= 'a' && c <= 'z') || is_digit(c);
}

bool is_alnum(char c) {
    return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

std::int64_t parse_amount(const json& value) {
    const std::string field = "amount";
    const std::string range_message =
        "amount must be between 1 and " + std::to_string(k_max_amount_minor) + " minor units";
    if (value.is_number_unsigned()) {
        // nlohmann reads every non-negative integer literal that fits 64 bits as unsigned.
        const auto amount = value.get<std::uint64_t>();
        if (amount == 0 || amount > static_cast<std::uint64_t>(k_max_amount_minor)) {
            reject_invalid(field, "out_of_range", range_message);
        }
        return static_cast<std::int64_t>(amount);
    }
    if (value.is_number_integer()) {
        // Signed: a negative literal (or -0).
        const auto amount = value.get<std::int64_t>();
        if (amount <= 0 || amount > k_max_amount_minor) {
            reject_invalid(field, "out_of_range", range_message);
        }
        return amount;
    }
    if (value.is_number_float()) {
        // 1000.0 and 1e3 are not integers; an integer literal beyond 64 bits also arrives here.
        const double amount = value.get<double>();
        if (std::fabs(amount) > static_cast<double>(k_max_amount_minor)) {
            reject_invalid(field, "out_of_range", range_message);
        }
        reject_invalid(field, "not_integer",
                       "amount must be a JSON integer in minor units (1000, not 1000.0 or 1e3)");
    }
    reject_invalid(field, "not_integer",
                   "amount must be a JSON integer in minor units, not a string or another type");
}

std::string parse_currency(const json& value) {
    const std::string field = "currency";
    std::string code = require_string(value, field);
    for (char& c : code) {
        if (c >= 'a' && c <= 'z') {
            c = static_cast<char>(c - 'a' + 'A');
        }
    }
    if (!find_currency(code)) {
        reject_invalid(field, "unknown_currency",
                       "currency must be an active ISO 4217 code such as EUR or USD");
    }
    return code;
}

std::map<std::string, std::string> parse_metadata(const json& value) {
    const std::string field = "metadata";
    if (!value.is_object()) {
        reject_invalid(field, "wrong_type", "metadata must be an object of strings");
    }
    if (value.size() > k_max_metadata_entries) {
        reject_invalid(field, "too_many_entries",
                       "metadata has more than " + std::to_string(k_max_metadata_entries) +
                           " entries");
    }
    std::map<std::string, std::string> metadata;
    for (auto it = value.begin(); it != value.end(); ++it) {
        const std::string& key = it.key();
        if (key.empty()) {
            reject_invalid(field, "empty_key", "metadata has an empty key");
        }
        if (key.size() > k_max_metadata_key_length) {
            reject_invalid(field, "key_too_long",
                           "metadata has a key longer than " +
                               std::to_string(k_max_metadata_key_length) + " bytes");
        }
        if (has_forbidden_control(key, Controls::none)) {
            reject_invalid(field, "key_invalid_character",
                           "metadata has a key with a control character");
        }
        const std::string value_field = join_path(field, key);
        metadata.emplace(key, checked_text(it.value(), value_field, 0, k_max_metadata_value_length,
                                           Controls::newline_and_tab));
    }
    return metadata;
}

PaymentRequest parse_fields(const json& body, std::string_view api_version) {
    // Unknown and transport fields first, in key order (nlohmann keeps object keys sorted).
    for (auto it = body.begin(); it != body.end(); ++it) {
        const std::string& name = it.key();
        if (contains(k_known_fields, name)) {
            continue;
        }
        if (contains(k_transport_fields, name)) {
            require_string(it.value(), name);
            continue;
        }
        reject_invalid(name, "unknown_field", "unknown field \"" + name + "\"");
    }

    PaymentRequest request;
    request.api_version = std::string(api_version);
    request.amount_minor = parse_amount(require_present(body, "amount"));
    request.currency = parse_currency(require_present(body, "currency"));
    request.merchant_reference =
        checked_text(require_present(body, "merchant_reference"), "merchant_reference", 1,
                     k_max_text_length, Controls::none);
    request.provider = checked_token(
        require_present(body, "provider"), "provider", k_max_provider_length,
        [](char c) { return is_lower_alnum(c) || c == '_' || c == '-'; },
        "lower-case letters, digits, '_' and '-'");
    request.payment_method = checked_token(
        require_present(body, "payment_method"), "payment_method", k_max_text_length,
        [](char c) { return is_alnum(c) || c == '_' || c == '.' || c == ':' || c == '-'; },
        "letters, digits, '_', '.', ':' and '-'");
    // Optional fields: absent and null mean the same.
    if (const json* customer = find_field(body, "customer"); customer && !customer->is_null()) {
        request.customer =
            checked_text(*customer, "customer", 1, k_max_text_length, Controls::none);
    }
    if (const json* description = find_field(body, "description");
        description && !description->is_null()) {
        request.description = checked_text(*description, "description", 0, k_max_description_length,
                                           Controls::newline_and_tab);
    }
    if (const json* metadata = find_field(body, "metadata"); metadata && !metadata->is_null()) {
        request.metadata = parse_metadata(*metadata);
    }
    if (const json* capture = find_field(body, "capture"); capture && !capture->is_null()) {
        const std::string& text = require_string(*capture, "capture");
        if (text != "manual" && text != "automatic") {
            reject_invalid("capture", "unknown_capture",
                           "capture must be \"automatic\" (the default: charged at once) or "
                           "\"manual\" (authorised only, captured or voided later)");
        }
        request.manual_capture = text == "manual";
    }
    return request;
}

// A body that does not parse may still carry a card number: then it is card data, so that the
// caller treats it as such (never logs or stores it), whatever else is wrong with it.
ValidationError malformed(std::string_view body, ValidationError error) {
    if (contains_card_number(body)) {
        return card_data_error("", CardData::number_in_value);
    }
    return error;
}

} // namespace

namespace {

// A request body as JSON, every rule before the fields' own applied: strict syntax, no duplicate
// key, bounded depth, no card data anywhere, an object, the API version spoken.
tl::expected<json, ValidationError> parse_document(std::string_view body,
                                                   std::string_view& api_version) {
    if (body.empty()) {
        return tl::make_unexpected(
            ValidationError{ValidationKind::malformed, "", "empty", "the body is empty"});
    }
    json document;
    try {
        document = parse_strict(body);
    } catch (const Rejected& rejected) {
        return tl::make_unexpected(malformed(body, rejected.error()));
    } catch (const json::parse_error& error) {
        // nlohmann's own message quotes the input near the error: give the position only.
        return tl::make_unexpected(
            malformed(body, ValidationError{ValidationKind::malformed, "", "syntax",
                                            "the body is not valid JSON (near byte " +
                                                std::to_string(error.byte) + ")"}));
    } catch (const json::exception&) {
        // A number too large for a double (1e400), reported by nlohmann as out_of_range.
        return tl::make_unexpected(
            malformed(body, ValidationError{ValidationKind::malformed, "", "syntax",
                                            "the body is not valid JSON (a number overflows)"}));
    }

    if (auto card = find_card_data(document, "")) {
        return tl::make_unexpected(std::move(*card));
    }
    if (!document.is_object()) {
        return tl::make_unexpected(ValidationError{ValidationKind::malformed, "", "not_object",
                                                   "the body must be a JSON object"});
    }
    if (api_version.empty()) {
        api_version = k_api_version;
    }
    if (api_version != k_api_version) {
        return tl::make_unexpected(ValidationError{
            ValidationKind::unsupported_version, "Payrecon-Version", "unsupported_version",
            "this server speaks API version " + std::string(k_api_version) +
                "; send that Payrecon-Version or none"});
    }
    return document;
}

constexpr std::array<std::string_view, 4> k_refund_fields = {"amount", "reason",
                                                             "merchant_reference", "metadata"};
constexpr std::array<std::string_view, 3> k_refund_reasons = {"duplicate", "fraudulent",
                                                              "requested_by_customer"};

RefundRequest parse_refund_fields(const json& body, std::string_view api_version) {
    for (auto it = body.begin(); it != body.end(); ++it) {
        const std::string& name = it.key();
        if (contains(k_refund_fields, name)) {
            continue;
        }
        if (contains(k_transport_fields, name)) {
            require_string(it.value(), name);
            continue;
        }
        reject_invalid(name, "unknown_field",
                       "unknown field \"" + name +
                           "\" (a refund takes amount, reason, merchant_reference and metadata; "
                           "its payment is the one in the path)");
    }
    RefundRequest request;
    request.api_version = std::string(api_version);
    // Optional fields: absent and null mean the same.
    if (const json* amount = find_field(body, "amount"); amount && !amount->is_null()) {
        request.amount_minor = parse_amount(*amount);
    }
    if (const json* reason = find_field(body, "reason"); reason && !reason->is_null()) {
        const std::string& text = require_string(*reason, "reason");
        if (!contains(k_refund_reasons, text)) {
            reject_invalid("reason", "unknown_reason",
                           "reason must be one of duplicate, fraudulent, requested_by_customer "
                           "(or left out)");
        }
        request.reason = text;
    }
    if (const json* reference = find_field(body, "merchant_reference");
        reference && !reference->is_null()) {
        request.merchant_reference =
            checked_text(*reference, "merchant_reference", 1, k_max_text_length, Controls::none);
    }
    if (const json* metadata = find_field(body, "metadata"); metadata && !metadata->is_null()) {
        request.metadata = parse_metadata(*metadata);
    }
    return request;
}

constexpr std::array<std::string_view, 4> k_capture_fields = {"amount", "final",
                                                              "merchant_reference", "metadata"};
constexpr std::array<std::string_view, 2> k_void_fields = {"merchant_reference", "metadata"};

// The fields a capture and a void share, after the unknown ones were refused.
template <typename Request>
void parse_reference_and_metadata(const json& body, Request& request) {
    if (const json* reference = find_field(body, "merchant_reference");
        reference && !reference->is_null()) {
        request.merchant_reference =
            checked_text(*reference, "merchant_reference", 1, k_max_text_length, Controls::none);
    }
    if (const json* metadata = find_field(body, "metadata"); metadata && !metadata->is_null()) {
        request.metadata = parse_metadata(*metadata);
    }
}

template <std::size_t N>
void refuse_unknown_fields(const json& body, const std::array<std::string_view, N>& known,
                           std::string_view what_it_takes) {
    for (auto it = body.begin(); it != body.end(); ++it) {
        const std::string& name = it.key();
        if (contains(known, name)) {
            continue;
        }
        if (contains(k_transport_fields, name)) {
            require_string(it.value(), name);
            continue;
        }
        reject_invalid(name, "unknown_field",
                       "unknown field \"" + name + "\" (" + std::string(what_it_takes) + ")");
    }
}

CaptureRequest parse_capture_fields(const json& body, std::string_view api_version) {
    refuse_unknown_fields(body, k_capture_fields,
                          "a capture takes amount, final, merchant_reference and metadata; its "
                          "payment is the one in the path");
    CaptureRequest request;
    request.api_version = std::string(api_version);
    if (const json* amount = find_field(body, "amount"); amount && !amount->is_null()) {
        request.amount_minor = parse_amount(*amount);
    }
    if (const json* final = find_field(body, "final"); final && !final->is_null()) {
        if (!final->is_boolean()) {
            reject_invalid("final", "not_boolean", "final must be true or false");
        }
        request.final = final->get<bool>();
    }
    parse_reference_and_metadata(body, request);
    return request;
}

VoidRequest parse_void_fields(const json& body, std::string_view api_version) {
    refuse_unknown_fields(body, k_void_fields,
                          "a void takes merchant_reference and metadata; its payment is the one "
                          "in the path");
    VoidRequest request;
    request.api_version = std::string(api_version);
    parse_reference_and_metadata(body, request);
    return request;
}

} // namespace

tl::expected<PaymentRequest, ValidationError> parse_payment_request(std::string_view body,
                                                                    std::string_view api_version) {
    auto document = parse_document(body, api_version);
    if (!document) {
        return tl::make_unexpected(std::move(document.error()));
    }
    try {
        return parse_fields(*document, api_version);
    } catch (const Rejected& rejected) {
        return tl::make_unexpected(rejected.error());
    }
}

namespace {

// An operation's request on the payment in its path: the document's rules, then its kind's fields.
template <typename Request>
tl::expected<Request, ValidationError>
parse_operation_request(std::string_view payment_id, std::string_view body,
                        std::string_view api_version,
                        Request (*parse_fields_of)(const json&, std::string_view)) {
    auto document = parse_document(body, api_version);
    if (!document) {
        return tl::make_unexpected(std::move(document.error()));
    }
    try {
        Request request = parse_fields_of(*document, api_version);
        request.payment_id = std::string(payment_id);
        return request;
    } catch (const Rejected& rejected) {
        return tl::make_unexpected(rejected.error());
    }
}

} // namespace

tl::expected<RefundRequest, ValidationError> parse_refund_request(std::string_view payment_id,
                                                                  std::string_view body,
                                                                  std::string_view api_version) {
    return parse_operation_request(payment_id, body, api_version, parse_refund_fields);
}

std::string canonical_bytes(const PaymentRequest& request) {
    json metadata = json::object();
    for (const auto& [key, value] : request.metadata) {
        metadata[key] = value;
    }
    // Keys come out sorted (std::map), numbers and strings in one fixed form: equal requests
    // give equal bytes, and every field is present so that absence is part of the bytes too.
    json canonical = json::object();
    canonical["operation"] = "create_payment";
    canonical["api_version"] = request.api_version;
    canonical["amount"] = request.amount_minor;
    canonical["currency"] = request.currency;
    canonical["merchant_reference"] = request.merchant_reference;
    canonical["provider"] = request.provider;
    canonical["payment_method"] = request.payment_method;
    canonical["customer"] = request.customer ? json(*request.customer) : json(nullptr);
    canonical["description"] = request.description ? json(*request.description) : json(nullptr);
    canonical["metadata"] = std::move(metadata);
    if (request.manual_capture) {
        // Only when manual: a request without it keeps the bytes (and so the fingerprint) it
        // had before captures existed, so that its stored key still matches it.
        canonical["capture"] = "manual";
    }
    return canonical.dump();
}

} // namespace payrecon

namespace payrecon {

std::string canonical_bytes(const RefundRequest& request) {
    json metadata = json::object();
    for (const auto& [key, value] : request.metadata) {
        metadata[key] = value;
    }
    json canonical = json::object();
    canonical["operation"] = "create_refund";
    canonical["api_version"] = request.api_version;
    canonical["payment_id"] = request.payment_id;
    canonical["amount"] = request.amount_minor ? json(*request.amount_minor) : json(nullptr);
    canonical["reason"] = request.reason ? json(*request.reason) : json(nullptr);
    canonical["merchant_reference"] =
        request.merchant_reference ? json(*request.merchant_reference) : json(nullptr);
    canonical["metadata"] = std::move(metadata);
    return canonical.dump();
}

} // namespace payrecon

namespace payrecon {
namespace {

json canonical_metadata(const std::map<std::string, std::string>& entries) {
    json metadata = json::object();
    for (const auto& [key, value] : entries) {
        metadata[key] = value;
    }
    return metadata;
}

json optional_text(const std::optional<std::string>& text) {
    return text ? json(*text) : json(nullptr);
}

} // namespace

tl::expected<CaptureRequest, ValidationError> parse_capture_request(std::string_view payment_id,
                                                                    std::string_view body,
                                                                    std::string_view api_version) {
    return parse_operation_request(payment_id, body, api_version, parse_capture_fields);
}

std::string canonical_bytes(const CaptureRequest& request) {
    json canonical = json::object();
    canonical["operation"] = "create_capture";
    canonical["api_version"] = request.api_version;
    canonical["payment_id"] = request.payment_id;
    canonical["amount"] = request.amount_minor ? json(*request.amount_minor) : json(nullptr);
    canonical["final"] = request.final;
    canonical["merchant_reference"] = optional_text(request.merchant_reference);
    canonical["metadata"] = canonical_metadata(request.metadata);
    return canonical.dump();
}

tl::expected<VoidRequest, ValidationError> parse_void_request(std::string_view payment_id,
                                                              std::string_view body,
                                                              std::string_view api_version) {
    // A void needs no field: an empty body is an empty object.
    return parse_operation_request(payment_id, body.empty() ? std::string_view("{}") : body,
                                   api_version, parse_void_fields);
}

std::string canonical_bytes(const VoidRequest& request) {
    json canonical = json::object();
    canonical["operation"] = "create_void";
    canonical["api_version"] = request.api_version;
    canonical["payment_id"] = request.payment_id;
    canonical["merchant_reference"] = optional_text(request.merchant_reference);
    canonical["metadata"] = canonical_metadata(request.metadata);
    return canonical.dump();
}

} // namespace payrecon
