#pragma once
// The canonical "create payment" request: parsed strictly from JSON, typed, server defaults and API
// version applied, transport fields (tracing IDs) excluded. Two requests that mean the same thing
// have the same canonical bytes, whatever their key order, whitespace or escapes.

#include "core/validation.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace payrecon {

inline constexpr std::string_view k_api_version = "2026-12-01"; // the one version spoken today
inline constexpr std::int64_t k_max_amount_minor = 1'000'000'000'000'000; // 10^15 minor units
inline constexpr std::size_t k_max_request_depth = 8; // JSON nesting allowed in a body

struct PaymentRequest {
    std::string api_version;        // k_api_version when the caller sent none
    std::int64_t amount_minor = 0;  // 1 .. k_max_amount_minor
    std::string currency;           // upper case, known to find_currency()
    std::string merchant_reference; // 1..255 bytes, no control characters
    std::string provider;           // [a-z0-9_-]{1,32}
    std::string
        payment_method; // the provider's token for a saved method ("pm_..."), never card data
    std::optional<std::string> customer;    // 1..255 bytes when present
    std::optional<std::string> description; // up to 1000 bytes when present
    std::map<std::string, std::string>
        metadata; // up to 50 entries; key 1..40 bytes, value up to 500
    // "capture": "manual" authorises only; captures and a void follow (issue 32). Absent, null and
    // "automatic" mean the same: the charge captures at once.
    bool manual_capture = false;

    friend bool operator==(const PaymentRequest&, const PaymentRequest&) = default;
};

// Parses and validates a request body. `api_version` is the Payrecon-Version header ("" = default).
// Errors: malformed (not JSON, duplicate key at any level, deeper than k_max_request_depth, not an
// object), unsupported_version, card_data (any string value or object key, at any depth, holding a
// card number as core/card_number.hpp finds them -- code "card_number" -- or a field named like
// card data as is_card_field_name finds them: number, card, card_number, cc_number, pan, cvc, cvv2,
// security_code, csc, cardCode, exp_month, exp_date, expiry, ... -- code "card_field"; a
// body that does not parse is searched whole, and its error is card_data if it holds a card
// number), invalid (missing or unknown field, wrong type, float or out-of-range amount, unknown
// currency, bad lengths or characters). Fields "trace_id", "traceparent", "tracestate",
// "request_id" and "correlation_id" are transport fields: accepted (if strings) and ignored.
// customer, description and metadata may be null, which means the same as absent.
tl::expected<PaymentRequest, ValidationError> parse_payment_request(std::string_view body,
                                                                    std::string_view api_version);

// The canonical bytes that the fingerprint is computed over: deterministic for equal requests,
// different whenever any field differs (absent optional fields and empty metadata included).
// Throws nlohmann::json::type_error if a string is not valid UTF-8 (never for a parsed request).
std::string canonical_bytes(const PaymentRequest& request);

// The canonical "create refund" request (POST /v1/payments/{id}/refunds): the same strict rules
// (syntax, card data, version, transport fields), its own fields. Every field is optional: with
// no amount, the refund is of what the payment still has to refund (decided when it is taken).
struct RefundRequest {
    std::string api_version;
    std::string payment_id;                   // from the path, as the caller validated it
    std::optional<std::int64_t> amount_minor; // 1 .. k_max_amount_minor, in the payment's currency
    std::optional<std::string> reason;        // duplicate, fraudulent, requested_by_customer
    std::optional<std::string> merchant_reference; // 1..255 bytes, no control characters
    std::map<std::string, std::string> metadata;   // the payment's metadata rules

    friend bool operator==(const RefundRequest&, const RefundRequest&) = default;
};

tl::expected<RefundRequest, ValidationError> parse_refund_request(std::string_view payment_id,
                                                                  std::string_view body,
                                                                  std::string_view api_version);

// The bytes a refund's fingerprint is taken over: its payment included, so that one key reused
// for another payment's refund is a different request.
std::string canonical_bytes(const RefundRequest& request);

// The canonical "capture" request (POST /v1/payments/{id}/captures, issue 32): `amount` (default
// what is left of the authorisation), `final` (default true: the provider releases the rest),
// `merchant_reference`, `metadata`; the same strict rules as the others.
struct CaptureRequest {
    std::string api_version;
    std::string payment_id;
    std::optional<std::int64_t> amount_minor;
    bool final = true;
    std::optional<std::string> merchant_reference;
    std::map<std::string, std::string> metadata;

    friend bool operator==(const CaptureRequest&, const CaptureRequest&) = default;
};

tl::expected<CaptureRequest, ValidationError> parse_capture_request(std::string_view payment_id,
                                                                    std::string_view body,
                                                                    std::string_view api_version);
std::string canonical_bytes(const CaptureRequest& request);

// The canonical "void" request (POST /v1/payments/{id}/void): `merchant_reference` and `metadata`
// only; an empty body is a void with neither.
struct VoidRequest {
    std::string api_version;
    std::string payment_id;
    std::optional<std::string> merchant_reference;
    std::map<std::string, std::string> metadata;

    friend bool operator==(const VoidRequest&, const VoidRequest&) = default;
};

tl::expected<VoidRequest, ValidationError> parse_void_request(std::string_view payment_id,
                                                              std::string_view body,
                                                              std::string_view api_version);
std::string canonical_bytes(const VoidRequest& request);

} // namespace payrecon
