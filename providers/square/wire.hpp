#pragma once
// Square's wire format for the Payments API (Connect v2, Square-Version 2025-08-20): the JSON
// CreatePayment request, the Payment, Error and ListPayments shapes, amounts and status mapping.
// Pure functions: no I/O. See adapter.hpp for the provider's quirks.

#include "core/carry_limits.hpp"
#include "providers/provider.hpp"
#include "providers/status_rules.hpp"

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon::providers::square {

// ISO minor units -> Square's `amount_money`. Square counts in the currency's smallest ISO 4217
// unit (USD cents, JPY yen) and documents no exceptions, so this only checks the currency is known
// and the amount positive. nullopt otherwise.
std::optional<Money> to_square_money(const Money& money);
// Square's Money {amount, currency} -> ISO minor units. nullopt for an unknown currency.
std::optional<Money> from_square_money(long long amount, std::string_view currency);

// What Square carries of a payment: no metadata at all (CreatePayment has no metadata field).
const CarryLimits& carry_limits();

// The JSON body of POST /v2/payments: idempotency_key and reference_id are our operation ID,
// source_id the payment method token, amount_money, customer_id and note when present, and
// autocomplete true. nullopt if the amount is not expressible, the operation ID is longer than
// reference_id allows (40), or the payment has metadata (it would be left out).
std::optional<std::string> create_body(const PaymentOrder& order);

// A Payment's status mapped to an outcome: COMPLETED -> succeeded; APPROVED (authorised, not
// captured: should not happen with autocomplete), PENDING -> pending; FAILED, CANCELED -> declined;
// anything else -> unknown.
// Its status words, each mapped on purpose (providers/status_rules.hpp); map_status() reads them.
std::span<const StatusRule> status_rules();
Outcome map_status(std::string_view status);

// Parses a Payment object (not the envelope). nullopt if it is not one (missing id, amount_money,
// status).
std::optional<RemotePayment> parse_payment(std::string_view json_text);

// One entry of Square's error envelope {"errors": [{"category", "code", "detail", "field"}]}.
struct SquareError {
    std::string category;
    std::string code;
    std::string detail;
    std::string field;
};

// A CreatePaymentResponse, GetPaymentResponse or ListPaymentsResponse -- errors, the payment
// (create, get) and its refund_ids, payments and cursor (list) -- or a RefundPaymentResponse,
// GetPaymentRefundResponse or ListPaymentRefundsResponse: errors and the refund, or the refunds
// and cursor (parse_refund's reading). nullopt if the body is not a JSON object or an entry in it
// is unreadable: one unreadable payment or refund makes a page untrustworthy.
struct Envelope {
    std::vector<SquareError> errors;
    std::optional<RemotePayment> payment;
    std::vector<std::string> refund_ids; // the payment's
    std::vector<RemotePayment> payments;
    std::optional<std::string> cursor;
    std::optional<RemotePayment> refund;
    std::vector<RemotePayment> refunds; // ListPaymentRefunds
};
std::optional<Envelope> parse_envelope(std::string_view json_text);

// The INVALID_REQUEST_ERROR codes that are final for the payment as it is, whatever the
// integration does: UNSUPPORTED_CURRENCY ("The API request references an unsupported currency",
// the spec's ErrorCode). Declined, not rejected.
bool final_invalid_request(std::string_view code);

// Decides the outcome of a create call from its HTTP status and body (DESIGN section 5: unknown
// unless positively recognised; README.md has the table). A 2xx must carry a
// Payment echoing our amount and reference_id; 400/402 PAYMENT_METHOD_ERROR -> declined (the card
// was tried and refused; a Payment it carries must echo us); IDEMPOTENCY_KEY_REUSED -> unknown;
// 429 -> not_sent (rate limited: Square executes nothing); 401, 403 (AUTHENTICATION_ERROR) and
// another 400 INVALID_REQUEST_ERROR (a missing, unknown or invalid parameter: Square executed
// nothing) -> rejected with Square's code and detail, except final_invalid_request codes ->
// declined; 5xx, other 4xx (a 404, a 409 CONFLICT) and anything unparseable -> unknown.
SubmitResult interpret_create(const PaymentOrder& order, int http_status, std::string_view body);

// Refunds (POST /v2/refunds, DESIGN section 16).

// What a PaymentRefund's `reason` carries of our operation ID, so that a refund can be found again:
// a PaymentRefund has no reference field, and `reason` (at most 192 characters) is the only text
// of ours it keeps. "<reason> [<operation ID>]", or "[<operation ID>]" without a reason.
std::string refund_reason(const RefundOrder& order);
// The operation ID a `reason` written by refund_reason carries, or nullopt.
std::optional<std::string> operation_id_of_reason(std::string_view reason);

// The JSON body of POST /v2/refunds: idempotency_key our operation ID, payment_id the payment's
// reference, amount_money, and reason (refund_reason). nullopt if the payment has no reference,
// the amount is not expressible, the operation ID is longer than the key allows (45), or the
// refund has metadata (RefundPayment has no metadata: never left out). The refund's merchant
// reference stays ours, as a payment's does with Square.
std::optional<std::string> refund_body(const RefundOrder& order);

// A PaymentRefund's status words, each mapped on purpose: COMPLETED -> succeeded; PENDING ->
// pending; REJECTED, FAILED -> declined; anything else unknown.
std::span<const StatusRule> refund_status_rules();
Outcome map_refund_status(std::string_view status);

// Parses a PaymentRefund object (not the envelope): provider_reference its id, the operation ID
// from its reason. nullopt if it is not one (missing id, amount_money or status).
std::optional<RemotePayment> parse_refund(std::string_view json_text);

// The refund codes that are final for the refund as it is, whatever the integration does: the
// amount is more than the payment has left (REFUND_AMOUNT_INVALID), the payment cannot be refunded
// (PAYMENT_NOT_REFUNDABLE, ..._DUE_TO_DISPUTE), Square refused it (REFUND_DECLINED). Declined.
bool final_refund_request(std::string_view code);

// The outcome of a refund call, as interpret_create decides a charge's (the same table), but a
// 2xx must carry a PaymentRefund echoing our amount and operation ID (its reason), a 400
// REFUND_ERROR (or PAYMENT_METHOD_ERROR: the card refused the refund) is declined -- a refund it
// carries must echo us and be REJECTED or FAILED --, and final_refund_request codes are declined.
SubmitResult interpret_refund(const RefundOrder& order, int http_status, std::string_view body);

} // namespace payrecon::providers::square
