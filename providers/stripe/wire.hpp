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

// The metadata key under which a capture writes its operation ID on the PaymentIntent (the
// capture's `metadata` is merged into the PaymentIntent's): for a payment that only authorises,
// payrecon's own (authorisation_carry_problem), so no caller's entry can pose as it.
inline constexpr const char* k_capture_operation_key = "capture_operation_id";

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

// What a payment that only authorises (manual_capture) cannot carry beyond carry_limits(): its
// capture adds a third key of ours to the PaymentIntent (capture_operation_id), so a caller's
// entry of that name would be overwritten and a 48th would leave no room for it. nullopt for an
// order that captures at once. The intake checks carry_limits() only: this is the adapter's
// check before the call.
std::optional<CarryProblem> authorisation_carry_problem(const PaymentOrder& order);

// The body of POST /v1/payment_intents: create and confirm off-session, with every caller metadata
// entry and our operation ID and merchant reference in metadata; with `capture_method=manual` for
// an order that only authorises (PaymentOrder::manual_capture). nullopt if the amount is not
// expressible or carry_problem(carry_limits(), ...) or authorisation_carry_problem() finds
// something Stripe cannot carry: nothing is ever left out.
std::optional<std::string> create_body(const PaymentOrder& order);

// A PaymentIntent's status mapped to an outcome: succeeded -> succeeded; processing,
// requires_action -> pending; requires_payment_method, canceled -> declined; anything else
// (requires_confirmation, requires_capture, unknown words) -> unknown.
// Its status words, each mapped on purpose (providers/status_rules.hpp); map_status() reads them.
std::span<const StatusRule> status_rules();
Outcome map_status(std::string_view status);

// The outcome of a PaymentIntent for the order that made it: map_status(), but for an order that
// only authorises (manual_capture) requires_capture is what it asked for -- the amount held,
// succeeded -- and so is a later capture's succeeded.
Outcome map_status_for(std::string_view status, bool manual_capture);

// Parses a PaymentIntent object. nullopt if it is not one (missing id/amount/currency/status).
// amount_captured_minor is its `amount_received` (ISO minor units); awaiting_capture is its status
// requires_capture, whatever the order asked.
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
    // A card_error carries the PaymentIntent, and so does payment_intent_unexpected_state.
    std::optional<RemotePayment> payment_intent;
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

// Captures and voids (issue 32, DESIGN section 16): POST /v1/payment_intents/{id}/capture and
// /cancel, and the PaymentIntent read back (GET /v1/payment_intents/{id}) to find them again. A
// capture has no ID of its own at Stripe: it moves the PaymentIntent from requires_capture to
// succeeded, so the PaymentIntent is both what is captured and where the capture is seen.

// The body of POST /v1/payment_intents/{id}/capture: `amount_to_capture` (the order's amount in
// Stripe's units) and our operation ID in metadata[capture_operation_id]. The capture's own
// metadata is not sent: it would be merged into the charge's and overwrite its entries of the same
// names. nullopt if the amount is not expressible or the order names no PaymentIntent.
std::optional<std::string> capture_body(const AuthorizationOrder& order);

// What a capture's and a void's answers and lookups read of a PaymentIntent: the PaymentIntent
// (parse_payment_intent's reading), the capture's operation ID from its metadata, and why it was
// canceled (empty if it was not, or Stripe did not say: `automatic` when the authorisation
// expired).
struct Authorisation {
    RemotePayment intent;
    std::optional<std::string> capture_operation_id;
    std::string cancellation_reason;
};
std::optional<Authorisation> parse_authorisation(std::string_view json_text);

// A PaymentIntent's status as the answer to a capture: succeeded -> succeeded (captured);
// processing -> pending; canceled -> declined (it will never capture); anything else unknown --
// still requires_capture after a 2xx is not what we asked.
std::span<const StatusRule> capture_status_rules();
// As the answer to a void (cancel): canceled -> succeeded (released); succeeded -> declined
// (captured); anything else unknown.
std::span<const StatusRule> void_status_rules();

// The outcome of a capture call (README.md, "Captures and voids"): a 2xx must be the
// PaymentIntent order.payment_reference in the order's currency, carrying no other capture's
// operation ID, and when succeeded having received what earlier captures took plus this one's
// amount; 400 payment_intent_unexpected_state reads the PaymentIntent the error carries -- canceled
// or never authorised: declined (final); succeeded, processing, still requires_capture or not
// carried, and charge_already_captured: unknown (it may be our own capture, executed once
// already, its key expired: the lookup decides); charge_expired_for_capture,
// capture_charge_authorization_expired, capture_unauthorized_payment, amount_too_large,
// amount_too_small: declined; the rest as interpret_create's table (rejected, not_sent, unknown),
// without card errors.
SubmitResult interpret_capture(const AuthorizationOrder& order, int http_status,
                               std::string_view body);
// The outcome of a void (cancel) call: a 2xx must be the PaymentIntent order.payment_reference;
// 400 payment_intent_unexpected_state with the PaymentIntent succeeded, and
// charge_already_captured: declined (captured already); with it canceled already, or anything
// else: unknown (our own void executed once already, or the authorisation expired: the lookup
// decides); the rest as interpret_capture's, without its final codes.
SubmitResult interpret_void(const AuthorizationOrder& order, int http_status,
                            std::string_view body);

// lookup_capture's answer from the body of a 200 to GET /v1/payment_intents/{id} (README.md has
// the table): for a capture, succeeded with more received than captured_before_minor -> found
// succeeded, the amount what this capture took, unless the metadata names another capture (found
// declined: Stripe captures a PaymentIntent once); canceled -> found declined; processing -> found
// pending; requires_capture and the states before an authorisation -> not_found; the payment's
// operation_id is the capture's from the metadata, where there is one. For a void (never echoed):
// canceled -> found succeeded; succeeded -> found declined; processing -> found pending; any other
// known status -> not_found. Failed (the error class says why) for a body that is not that
// PaymentIntent in the order's currency, or a status word the tables do not know.
LookupResult capture_lookup_answer(const AuthorizationOrder& order, std::string_view body);

} // namespace payrecon::providers::stripe
