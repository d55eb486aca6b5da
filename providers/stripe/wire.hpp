#pragma once
// Stripe's wire format for PaymentIntents (API 2020-08-27 and later): the form-encoded create
// request, the PaymentIntent and error objects, amount units and status mapping. Pure functions:
// no I/O. See adapter.hpp for the provider's quirks.

#include "core/carry_limits.hpp"
#include "core/webhook.hpp"
#include "providers/provider.hpp"
#include "providers/status_rules.hpp"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace payrecon::providers::stripe {

// Stripe's minor-unit exponent for `currency` where it differs from ISO 4217 (ISK: 2 at Stripe,
// 0 in ISO; MGA: 0 at Stripe, 2 in ISO), else the ISO exponent. nullopt for an unknown currency.
std::optional<int> stripe_exponent(std::string_view currency);

// ISO minor units -> Stripe's `amount`. nullopt if the amount cannot be expressed exactly (MGA
// amounts must be whole ariary), overflows either bound, or the currency is unknown.
std::optional<long long> to_stripe_amount(const Money& money);
// Stripe's `amount` + `currency` (lower case) -> ISO minor units. nullopt if unknown or
// overflowing.
std::optional<Money> from_stripe_amount(long long amount, std::string_view currency);

// What Stripe carries of a payment: 50 metadata keys per object (two of them ours: operation_id and
// merchant_reference), keys up to 40 and values up to 500 characters.
const CarryLimits& carry_limits();

// The body of POST /v1/payment_intents: create and confirm off-session, with every caller metadata
// entry and our operation ID and merchant reference in metadata. nullopt if the amount is not
// expressible or carry_problem(carry_limits(), ...) finds something Stripe cannot carry: nothing is
// ever left out.
std::optional<std::string> create_body(const PaymentOrder& order);

// A PaymentIntent's status mapped to an outcome: succeeded -> succeeded; processing,
// requires_action -> pending; requires_payment_method, canceled -> declined; anything else
// (requires_confirmation, requires_capture, unknown words) -> unknown.
// Its status words, each mapped on purpose (providers/status_rules.hpp); map_status() reads them.
std::span<const StatusRule> status_rules();
Outcome map_status(std::string_view status);

// Parses a PaymentIntent object. nullopt if it is not one (missing id/amount/currency/status).
std::optional<RemotePayment> parse_payment_intent(std::string_view json_text);

// A Stripe event (webhook body, already verified): its id, type and the PaymentIntent it carries
// as evidence -- the operation ID from the PaymentIntent's metadata, else the creating request's
// idempotency key. payment_intent.* events map by the PaymentIntent's status (succeeded;
// requires_payment_method and canceled: failed; processing and requires_action: pending); every
// other type is kept as `other`. nullopt if the body is not an event (no id or type, not JSON, or
// nested deeper than core/external_json allows).
std::optional<WebhookEvent> parse_event(std::string_view body);

// The Stripe error envelope {"error": {"type", "code", ...}}: type and code, or nullopt.
struct StripeError {
    std::string type;
    std::string code;
    std::string decline_code;
    std::string message;
    std::optional<RemotePayment> payment_intent; // a card_error carries the PaymentIntent
};
std::optional<StripeError> parse_error(std::string_view json_text);

// The invalid_request_error codes that are final for the payment as it is, whatever the
// integration does: the amount is outside what Stripe charges (docs.stripe.com/error-codes:
// amount_too_small, amount_too_large). Declined, not rejected.
bool final_invalid_request(std::string_view code);

// Decides the outcome of a create call from its HTTP status and body (DESIGN section 5: unknown
// unless positively recognised; README.md has the table). A 2xx must be a
// PaymentIntent echoing our amount, currency and operation ID; 402 card_error -> declined (Stripe
// executed the charge attempt and the card was refused); 429 -> not_sent (rate limited, nothing
// executed); 401, 403 (the API key: bad configuration) and a 400 or 404 invalid_request_error
// (unknown, missing or invalid parameters: Stripe executed nothing) -> rejected, with Stripe's code
// and message -- except final_invalid_request codes -> declined; 400 idempotency_error, 409
// idempotency_key_in_use, 5xx, anything unparseable -> unknown.
SubmitResult interpret_create(const PaymentOrder& order, int http_status, std::string_view body);

// The Search query that finds our payment: metadata['operation_id']:'<op>'.
std::string search_query(std::string_view operation_id);

// A list or search_result envelope: its PaymentIntents and has_more. nullopt if not one.
struct ListEnvelope {
    std::vector<RemotePayment> items;
    bool has_more = false;
};
std::optional<ListEnvelope> parse_list(std::string_view json_text);

// Refunds (POST /v1/refunds, DESIGN section 16).

// The body of POST /v1/refunds: the PaymentIntent refunded (`payment_intent`: the payment's
// reference), the amount in Stripe's units, the reason, every caller metadata entry and our
// operation ID (and the refund's merchant reference, when given) in metadata. nullopt if the
// amount is not expressible, the payment has no reference, or Stripe cannot carry the metadata.
std::optional<std::string> refund_body(const RefundOrder& order);

// A Refund's status words, each mapped on purpose: succeeded -> succeeded; pending,
// requires_action -> pending; failed, canceled -> declined; anything else unknown.
std::span<const StatusRule> refund_status_rules();
Outcome map_refund_status(std::string_view status);

// Parses a Refund object (RemotePayment: provider_reference is the re_..., the operation ID from
// metadata). nullopt if it is not one.
std::optional<RemotePayment> parse_refund(std::string_view json_text);

// The outcome of a refund call, as interpret_create decides a charge's (the same table), but a
// 2xx must be a Refund echoing our amount and operation ID, there are no card errors, and the
// final invalid_request codes are charge_already_refunded and charge_disputed (declined).
SubmitResult interpret_refund(const RefundOrder& order, int http_status, std::string_view body);

// A list of Refunds (GET /v1/refunds?payment_intent=...), and whether more pages exist. nullopt
// if the body is not one, or one item is not a Refund.
std::optional<std::vector<RemotePayment>> parse_refund_list(std::string_view json_text,
                                                            bool& has_more);

} // namespace payrecon::providers::stripe
