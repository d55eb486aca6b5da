#pragma once
// PayPal's wire format: the Orders v2 create request and the order it answers (Orders 2.13), the
// error envelope, and Transaction Search's page (Transaction Search 1.9); amounts as exact decimal
// strings in PayPal's exponents, status mapping. Pure functions: no I/O. See adapter.hpp for the
// provider's quirks.

#include "core/carry_limits.hpp"
#include "providers/provider.hpp"
#include "providers/status_rules.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon::providers::paypal {

// The longest PayPal-Request-Id ("minLength": 1, "maxLength": 108, the Orders v2 document's
// paypal_request_id parameter).
inline constexpr std::size_t k_max_key_length = 108;
// purchase_units[].description, invoice_id and custom_id: at most 127 characters.
inline constexpr std::size_t k_max_description = 127;
inline constexpr std::size_t k_max_invoice_id = 127;
// money.value: "supports up to 15 digits preceding the decimal" (purchase_unit_request.amount).
inline constexpr int k_max_integer_digits = 15;

// PayPal's exponent for `currency` (either case): ISO 4217's, except HUF, JPY and TWD, which
// "do not support decimals. Decimal amounts cause an error" (PayPal's Currency Codes). nullopt for
// a currency ISO 4217 does not have.
std::optional<int> paypal_exponent(std::string_view currency);

// `units` at `exponent` decimal digits as PayPal's money.value: 4999 at 2 -> "49.99", 5 at 2 ->
// "0.05", 1000 at 0 -> "1000". nullopt for a negative amount, an exponent outside 0..18, or more
// than k_max_integer_digits before the point. Never through floating point.
std::optional<std::string> format_decimal(std::int64_t units, int exponent);

// PayPal's money.value at `exponent` as an integer count of units, exactly: one or more digits,
// then optionally '.' and 1 to `exponent` digits ("49.99", "49.9", "49" at 2). nullopt for
// anything else: a sign, a leading '.', a trailing '.', an exponent ("1e3"), spaces, more
// fractional digits than `exponent` ("49.990" at 2, "10.0" at 0), or a value over int64.
std::optional<std::int64_t> parse_decimal(std::string_view text, int exponent);

// ISO minor units -> PayPal's {currency_code, value}: the value in PayPal's exponent. nullopt for
// an unknown currency, a non-positive amount, or one not whole in PayPal's units (10.50 HUF).
std::optional<std::string> to_paypal_value(const Money& money);
// PayPal's value in `currency` -> ISO minor units (currency upper case). nullopt if the value is
// not one parse_decimal reads in PayPal's exponent, the currency is unknown, or it overflows.
std::optional<Money> from_paypal_value(std::string_view value, std::string_view currency);

// What PayPal carries of a payment: no metadata at all (order_request has no metadata field).
const CarryLimits& carry_limits();

// The JSON body of POST /v2/checkout/orders: intent CAPTURE (AUTHORIZE for an order that only
// authorises, PaymentOrder::manual_capture), one purchase unit with reference_id
// (our payment ID, else the operation ID), invoice_id and custom_id (the operation ID), description
// when there is one, amount; payment_source.card.vault_id the payment method. nullopt if the
// amount is not expressible in PayPal's units, the operation ID is empty or longer than 108 (the
// key) or 127 (invoice_id), the description is longer than 127 bytes, the payment method is not a
// vault_id (1 to 255 of 0-9, a-z, A-Z, '_', '-'), or the payment has metadata.
std::optional<std::string> create_body(const PaymentOrder& order);

// A capture's status (the payment object's: capture_status.status) as an outcome: COMPLETED,
// PARTIALLY_REFUNDED, REFUNDED -> succeeded (it was charged; a refund is another matter);
// PENDING -> pending; DECLINED, FAILED -> declined; anything else -> unknown.
// Its status words, each mapped on purpose (providers/status_rules.hpp); map_capture_status() reads
// them.
std::span<const StatusRule> capture_status_rules();
Outcome map_capture_status(std::string_view status);

// Transaction Search's transaction_status code as an outcome: S and V (a success, reversed
// later) -> succeeded; P -> pending; D -> declined; anything else -> unknown.
Outcome map_transaction_status(std::string_view code);

// PayPal's error envelope {"name", "message", "debug_id", "details": [{"issue", "description"}]}.
struct PaypalError {
    std::string name;
    std::string message;
    std::string debug_id;
    std::vector<std::string> issues; // details[].issue, in order
    std::string description;         // details[0].description
};
// nullopt if `body` is not a JSON object with a string `name` (a member of another type counts as
// absent; details entries that are not objects with a string issue are skipped).
std::optional<PaypalError> parse_error(std::string_view body);

// One capture of purchase_units[0].payments.captures (or one authorization of its
// payments.authorizations: the same fields).
struct Capture {
    std::string id;
    std::string status;
    std::optional<Money> amount;
    std::optional<std::string> invoice_id;
    std::optional<std::string> custom_id;
};

// The order of a create's 2xx: what interpret_create reads of it.
struct Order {
    std::string id;
    std::string status;
    std::size_t purchase_units = 0;
    // purchase_units[0]:
    std::optional<Money> amount;
    std::optional<std::string> invoice_id;
    std::optional<std::string> custom_id;
    std::vector<Capture> captures;
    std::vector<Capture> authorizations; // payments.authorizations: an order with intent AUTHORIZE
};
// nullopt if `body` is not an order: a JSON object with string id and status. A member of the
// wrong type counts as absent; an amount that is not exact in PayPal's units is absent too.
std::optional<Order> parse_order(std::string_view body);

// One page of GET /v1/reporting/transactions: the transactions that are charges (a gross amount
// that is not negative: refunds, reversals, fees and withdrawals carry negative ones and are left
// out), and total_pages.
struct SearchPage {
    std::vector<RemotePayment> items;
    std::int64_t total_pages = 0;
};
// nullopt if the body is not a JSON object with an integer total_pages >= 0, or transaction_details
// is not an array, or an entry in it is unreadable (no transaction_info object, no transaction_id,
// no transaction_amount with a currency ISO 4217 knows and an exact value): one unreadable entry
// makes the page untrustworthy. Each item's operation_id is its invoice_id, else its custom_field.
std::optional<SearchPage> parse_search_page(std::string_view body);
// The same page's refunds: the entries whose transaction_event_code is T1107 ("Payment refund,
// initiated by merchant"), each with provider_reference its transaction_id (the refund's ID),
// operation_id its invoice_id (else custom_field), amount its transaction_amount made positive
// (PayPal lists money out as negative), the status by map_refund_transaction_status, created_at
// its transaction_initiation_date. nullopt as parse_search_page, and for an entry without an
// event code (it could be a refund): one unreadable refund makes the page untrustworthy.
std::optional<SearchPage> parse_refund_search_page(std::string_view body);

// A refund's transaction_status in Transaction Search as an outcome: S -> succeeded; P ->
// pending; D (denied), V (reversed: the refund taken back) -> declined; anything else unknown.
std::span<const StatusRule> refund_transaction_status_rules();
Outcome map_refund_transaction_status(std::string_view code);

// The 422 issues that mean PayPal tried the payment and the payment source or payer was refused,
// or that the payment can never be sent as it is (a currency PayPal does not take, an amount over
// its maximum): declined. README.md quotes each.
bool declined_issue(std::string_view issue);

// Decides the outcome of a create call from its HTTP status and body (DESIGN section 5: unknown
// unless positively recognised; README.md has the table). A 2xx counts only as an order with one
// purchase unit echoing our amount, currency and operation ID (invoice_id); its outcome is its
// one capture's status (a COMPLETED order can hold a DECLINED capture), the reference the
// capture's ID; an order without a capture is pending for PAYER_ACTION_REQUIRED, declined for
// VOIDED, unknown otherwise, with the order's ID. 422 with a declined_issue -> declined;
// DUPLICATE_INVOICE_ID -> unknown (a transaction with our invoice ID exists: it may be our first
// attempt); 400, 403, 415, another 422 (with PayPal's envelope) and 401 -> rejected with the issue
// (else the name) and description; 429 -> not_sent; 5xx, 404, 409 and anything unrecognised ->
// unknown. For an order that only authorises (manual_capture) the echo is the same with its one
// authorization in place of the capture, the outcome the authorization's
// (map_authorization_status), the reference the authorization's ID.
SubmitResult interpret_create(const PaymentOrder& order, int http_status, std::string_view body);

// Refunds (POST /v2/payments/captures/{capture_id}/refund, Payments v2.4; DESIGN section 16).

// refund_request.note_to_payer: at most 255 characters.
inline constexpr std::size_t k_max_note_to_payer = 255;

// The JSON body of a refund: `amount` {value, currency_code} in PayPal's units, `invoice_id` and
// `custom_id` our operation ID (the refund's), `note_to_payer` the reason when there is one (cut to
// k_max_note_to_payer bytes, never inside a UTF-8 character). nullopt if the amount is not
// expressible, or the operation ID is empty or longer than 108 (the key) or 127 (invoice_id).
std::optional<std::string> refund_body(const RefundOrder& order);

// A refund's status (refund_status.status) as an outcome: COMPLETED -> succeeded; PENDING ->
// pending; FAILED, CANCELLED -> declined; anything else -> unknown. Its rules, each mapped on
// purpose (providers/status_rules.hpp).
std::span<const StatusRule> refund_status_rules();
Outcome map_refund_status(std::string_view status);

// The 422 issues of captures.refund that mean the capture cannot be refunded, or not for this
// amount (CAPTURE_FULLY_REFUNDED, REFUND_AMOUNT_EXCEEDED, REFUND_NOT_ALLOWED,
// REFUND_TIME_LIMIT_EXCEEDED, ...): declined. README.md quotes each.
bool refund_declined_issue(std::string_view issue);

// Decides the outcome of a refund call (README.md has the table). A 2xx counts only as a refund
// with an ID echoing our amount and our operation ID (invoice_id, else custom_id); its status
// decides (map_refund_status; the reference is the refund's ID). 422 with a refund_declined_issue
// -> declined, error class "refund_declined:<ISSUE>"; 422 DUPLICATE_INVOICE_ID -> unknown (a refund
// of the capture with our invoice ID exists: it may be our first attempt); 404 (no such capture)
// -> rejected; 400, 401, 403, 415 and other 422s -> rejected; 429 -> not_sent; 409
// (PREVIOUS_REQUEST_IN_PROGRESS), 5xx and anything unrecognised -> unknown.
SubmitResult interpret_refund(const RefundOrder& order, int http_status, std::string_view body);

// What GET /v2/payments/captures/{id} says of a capture: its ID, status, and the order it belongs
// to (supplementary_data.related_ids.order_id, else the last segment of its `up` link when that
// points at /v2/checkout/orders/).
struct CaptureDetails {
    std::string id;
    std::string status;
    std::optional<std::string> order_id;
};
// nullopt if `body` is not a JSON object with a string id.
std::optional<CaptureDetails> parse_capture(std::string_view body);

// The refunds of an order (GET /v2/checkout/orders/{id}: purchase_units[].payments.refunds[], the
// Orders document's payment_collection) as RemotePayments: provider_reference the refund's ID,
// operation_id its invoice_id (else its custom_id), the amount, the status (map_refund_status),
// created_at its create_time. nullopt if `body` is not an order, or one refund is unreadable (no
// ID, no exact amount): one unreadable refund makes the list untrustworthy.
std::optional<std::vector<RemotePayment>> parse_order_refunds(std::string_view body);

// Authorisations (issue 32, DESIGN section 16): an order created with intent AUTHORIZE holds its
// authorization in purchase_units[0].payments.authorizations; the authorization is captured
// (POST /v2/payments/authorizations/{id}/capture), voided (.../void) and read
// (GET /v2/payments/authorizations/{id}) through Payments v2. README.md, "Captures and voids".

// An authorization's status as the outcome of the charge that only authorises: CREATED (held),
// PARTIALLY_CAPTURED, CAPTURED -> succeeded (it was authorised; captures are other operations);
// PENDING -> pending; DENIED -> declined; VOIDED, EXPIRED -> declined (nothing held: a voided or
// expired authorisation, as the interface reads it); anything else (PARTIALLY_CREATED: less than
// asked was authorised) unknown.
std::span<const StatusRule> authorization_status_rules();
Outcome map_authorization_status(std::string_view status);

// What GET /v2/payments/authorizations/{id} (authorization-2) says: its ID, status, amount, the
// order it belongs to (supplementary_data.related_ids.order_id, else its `up` link to
// /v2/checkout/orders/), invoice_id, custom_id.
struct AuthorizationDetails {
    std::string id;
    std::string status;
    std::optional<Money> amount;
    std::optional<std::string> order_id;
    std::optional<std::string> invoice_id;
    std::optional<std::string> custom_id;
};
// nullopt if `body` is not a JSON object with a string id and status.
std::optional<AuthorizationDetails> parse_authorization(std::string_view body);

// The body of POST /v2/payments/authorizations/{id}/capture (capture_request): `amount` in
// PayPal's units, `final_capture` the order's `final`, `invoice_id` the capture's own operation ID
// (capture_request has no custom_id: the capture keeps its purchase unit's). nullopt if the amount
// is not expressible, or the operation ID is empty or longer than 108 (the key) or 127
// (invoice_id).
std::optional<std::string> capture_body(const AuthorizationOrder& order);

// The 422 issues of a capture that mean the authorization cannot be captured, or not for this
// amount: AUTHORIZATION_VOIDED, AUTHORIZATION_EXPIRED, MAX_CAPTURE_AMOUNT_EXCEEDED,
// MAX_CAPTURE_COUNT_EXCEEDED, and the payer's or the instrument's (declined_issue): declined.
// AUTHORIZATION_ALREADY_CAPTURED and PREVIOUSLY_CAPTURED are not among them: the capture that
// closed it may be this one (unknown, for the lookup).
bool capture_declined_issue(std::string_view issue);

// The outcome of a capture call (README.md has the table). A 2xx counts only as a capture with an
// ID echoing our amount and our operation ID (its invoice_id; a custom_id is the charge's, not
// compared); its status decides (map_capture_status), the reference the capture's ID. 422 with a
// capture_declined_issue -> declined "capture_declined:<ISSUE>"; 422
// AUTHORIZATION_ALREADY_CAPTURED, PREVIOUSLY_CAPTURED, DUPLICATE_INVOICE_ID -> unknown; 404 (no
// such authorization) -> rejected; 409 (PREVIOUS_REQUEST_IN_PROGRESS), 5xx, anything unrecognised
// -> unknown; the rest as interpret_create's (400, 401, 403, other 422 rejected, 429 not_sent).
SubmitResult interpret_capture(const AuthorizationOrder& order, int http_status,
                               std::string_view body);

// The outcome of a void call: 204 (return=minimal) -> succeeded, the reference the authorization's
// ID; a 2xx authorization order.payment_reference VOIDED -> succeeded, another status unknown; 422
// PREVIOUSLY_CAPTURED, AUTHORIZATION_ALREADY_CAPTURED -> declined
// ("void_declined:<ISSUE>": captured, nothing to release); 422 PREVIOUSLY_VOIDED,
// AUTHORIZATION_VOIDED, AUTHORIZATION_EXPIRED -> unknown (released already, perhaps by this very
// void: the lookup decides); the rest as interpret_capture.
SubmitResult interpret_void(const AuthorizationOrder& order, int http_status,
                            std::string_view body);

// lookup_capture's answer from the authorization (GET /v2/payments/authorizations/{id}, a 200)
// and, for a capture, its order (GET /v2/checkout/orders/{order_id}, a 200; nullopt for a void).
// A capture: the order's captures whose invoice_id is our operation ID -> found (the first; the
// others duplicates), its status, amount and ID; none, and the authorization CREATED,
// PARTIALLY_CAPTURED or PENDING -> not_found (the same key may be sent again); none, and it is
// CAPTURED, VOIDED, EXPIRED or DENIED -> found declined (the authorization's ID and status). A
// void: VOIDED, EXPIRED -> found succeeded (released, whoever released it); CAPTURED, DENIED ->
// found declined; CREATED, PARTIALLY_CAPTURED, PENDING -> not_found. Failed (the error class says
// why) for another authorization, another currency, an order that is not one, or a status word
// the tables do not know.
LookupResult capture_lookup_answer(const AuthorizationOrder& order,
                                   std::string_view authorization_body,
                                   const std::optional<std::string>& order_body);

// An order's captures that took money (COMPLETED, PARTIALLY_REFUNDED, REFUNDED; the order as
// GET /v2/checkout/orders/{id} answers it), summed in minor units; nullopt if it is not an order,
// or a capture that took money has no exact amount.
std::optional<long long> captured_minor(std::string_view order_body);

} // namespace payrecon::providers::paypal
