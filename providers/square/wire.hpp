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
// autocomplete true -- or, for an order that only authorises (manual_capture), autocomplete false
// with delay_action CANCEL and delay_duration k_delay_duration, so that an authorisation left
// alone is released, never captured. nullopt if the amount is not expressible, the operation ID is
// longer than reference_id allows (40), or the payment has metadata (it would be left out).
std::optional<std::string> create_body(const PaymentOrder& order);

// A Payment's status mapped to an outcome: COMPLETED -> succeeded; APPROVED (authorised, not
// captured: what an order that only authorises asks for, else not what we asked), PENDING ->
// pending; FAILED, CANCELED -> declined; anything else -> unknown.
// Its status words, each mapped on purpose (providers/status_rules.hpp); map_status() reads them.
std::span<const StatusRule> status_rules();
Outcome map_status(std::string_view status);
// As map_status, but APPROVED is succeeded for an order that only authorises (manual_capture):
// the amount is held, as it asked. CANCELED stays declined (voided or lapsed: nothing captured).
Outcome map_status_for(std::string_view status, bool manual_capture);

// An authorisation's delay_duration (RFC 3339): Square's documented default and longest for a
// card-not-present payment, "P7D". ApiCapabilities::authorization_validity is the same 7 days.
inline constexpr const char* k_delay_duration = "P7D";

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
    std::optional<std::string> version_token; // the payment's (optimistic concurrency)
    std::vector<std::string> refund_ids;      // the payment's
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
// A manual_capture order's APPROVED payment is succeeded (map_status_for).
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

// Captures and voids (issue 32, README.md "Captures and voids"). CompletePayment and
// CancelPayment take no idempotency key: a lost answer is settled by reading the payment.

// The key of the UpdatePayment that lowers an authorisation to a partial capture's amount: the
// capture's operation ID and "-amount", so that a re-send of the capture sets the same amount
// under the same key. nullopt past the 45 characters a key may have.
std::optional<std::string> update_key(const AuthorizationOrder& order);
// PUT /v2/payments/{id}: {"idempotency_key": update_key, "payment": {"amount_money": the
// capture's amount}}. nullopt if the amount or the key cannot be expressed.
std::optional<std::string> update_body(const AuthorizationOrder& order);
// POST /v2/payments/{id}/complete: {} or {"version_token": ...} (the payment as UpdatePayment left
// it: a complete of any other version is refused, VERSION_MISMATCH, never captures another amount).
std::string complete_body(const std::optional<std::string>& version_token);

// The answer to UpdatePayment: succeeded when a 2xx carries our payment, APPROVED, at the
// capture's amount (`version_token` then its version); the errors as interpret_create reads them
// (429 not_sent, 401/403 and 400 INVALID_REQUEST_ERROR rejected, IDEMPOTENCY_KEY_REUSED, 5xx and
// anything else unknown). A 400 is classified by the adapter by reading the payment
// (refusal_by_status).
struct UpdateAnswer {
    SubmitResult result;
    std::optional<std::string> version_token;
};
UpdateAnswer interpret_update(const AuthorizationOrder& order, int http_status,
                              std::string_view body);
// The answer to CompletePayment (a capture) or CancelPayment (a void): a 2xx must carry the
// payment the order names, in its currency -- COMPLETED (at the capture's amount) succeeds a
// capture, CANCELED a void; any other status in a 2xx is unknown. The errors as interpret_update.
SubmitResult interpret_complete(const AuthorizationOrder& order, int http_status,
                                std::string_view body);
SubmitResult interpret_cancel(const AuthorizationOrder& order, int http_status,
                              std::string_view body);

// What a 400 refusal of a capture's or a void's call (`refused`: rejected, Square executed
// nothing) means, from the payment's status read right after it (`payment_body`, GetPayment's
// 200): a capture of a CANCELED (voided, or lapsed by its delay_duration) or FAILED payment is
// declined; of a COMPLETED one unknown (captured, perhaps by this very capture: the lookup
// decides); a void of a COMPLETED or FAILED payment is declined, of a CANCELED one unknown (the
// lookup decides); an APPROVED payment refused all the same stays rejected (an integration
// fault: Square's code kept). nullopt if the body is not the order's payment.
std::optional<SubmitResult> refusal_by_status(const AuthorizationOrder& order,
                                              const SubmitResult& refused,
                                              std::string_view payment_body);

// lookup_capture's reading of GetPayment's 200 (`body`) for `order`: a capture is found succeeded
// when the payment is COMPLETED (amount what it captured), declined when CANCELED or FAILED; a
// void found succeeded when CANCELED, declined when COMPLETED or FAILED; PENDING found pending;
// APPROVED not_found (untouched: the reconciler may send it again -- this read is what makes a
// re-send of an unkeyed call safe). Failed (unrecognised_response, unexpected_status_...) for a
// body that is not the order's payment or a status no table knows.
LookupResult capture_lookup_answer(const AuthorizationOrder& order, std::string_view body);

} // namespace payrecon::providers::square
