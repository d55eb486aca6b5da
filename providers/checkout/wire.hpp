#pragma once
// Checkout.com's wire format for the Payments API (the new account structure, "NAS"): the JSON
// payment request, the payment response, the error envelope, the payment list that
// `GET /payments?reference=` answers, amounts in Checkout.com's own exponents and the status
// mapping. Pure functions: no I/O. See adapter.hpp for the provider's quirks.

#include "core/carry_limits.hpp"
#include "providers/provider.hpp"
#include "providers/status_rules.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon::providers::checkout {

// Checkout.com's `amount` exponent for `currency` ("Format the amount value",
// checkout.com/docs/payments/accept-payments/format-the-amount-value): the full amount (0) for BIF,
// DJF, GNF, ISK, JPY, KMF, KRW, PYG, RWF, UGX, VUV, VND, XAF, XOF, XPF; divided by 1000 (3) for
// BHD, IQD, JOD, KWD, LYD, OMR, TND; divided by 100 (2) for every other currency -- CLP included,
// whose ISO 4217 exponent is 0. nullopt for a currency ISO 4217 does not have.
std::optional<int> checkout_exponent(std::string_view currency);

// PaymentRequest.description: "maxLength: 100".
inline constexpr std::size_t k_max_description = 100;

// ISO minor units -> Checkout.com's `amount`. nullopt if it cannot be sent exactly: an unknown
// currency, not a whole number of Checkout.com's units, not positive, more than nine digits, or,
// for the divided-by-1000 currencies, a last digit other than 0 (Checkout.com refuses those).
std::optional<std::int64_t> to_checkout_amount(const Money& money);
// Checkout.com's `amount` in `currency` -> ISO minor units. nullopt for an unknown currency or an
// amount that is not a whole number of ISO minor units.
std::optional<Money> from_checkout_amount(std::int64_t amount, std::string_view currency);

// What Checkout.com carries of a payment: `metadata`, one level of primitive values; payrecon puts
// its operation_id and merchant_reference there too.
const CarryLimits& carry_limits();

// The JSON body of POST /payments: `source` {type "id", id: the stored payment instrument},
// `amount` and `currency` (upper case), `reference` = our operation ID (at most 50 characters),
// `processing_channel_id`, `capture` true (false for an order that only authorises,
// PaymentOrder::manual_capture), `payment_type` "Unscheduled" and `merchant_initiated`
// true (a stored credential charged without the customer), `description`, `customer` {id} when
// present, and `metadata` with every caller entry plus ours. nullopt if the amount is not
// expressible, the reference too long, or carry_problem(carry_limits(), ...) finds something.
std::optional<std::string> create_body(const PaymentOrder& order,
                                       std::string_view processing_channel_id);

// A payment's status mapped to an outcome, for payrecon's automatic capture (`capture: true`):
// Authorized, Captured, Paid, Partially Captured... see map_status in wire.cpp for the table
// (descriptor.cpp lists it with the reasons). Anything not listed -> unknown.
// Its status words, each mapped on purpose (providers/status_rules.hpp); map_status() reads them.
std::span<const StatusRule> status_rules();
Outcome map_status(std::string_view status);

// The outcome of a payment's status for the order that made it: map_status(), but for an order
// that only authorises (manual_capture, `capture: false`) Authorized is what it asked for, and so
// are Captured, Partially Captured and Paid since -- succeeded; Voided is the authorisation
// released, declined.
Outcome map_status_for(std::string_view status, bool manual_capture);

// The parts of a payment (a create's 201/202 body, or an item of the payment list) that decide an
// outcome. nullopt if it is not one: no `id` string, or an `amount`/`currency` that is present but
// unreadable.
struct Payment {
    std::string id; // "pay_..."
    std::optional<std::string> status;
    std::optional<bool> approved;
    std::optional<Money> amount; // ISO minor units; absent when the body has no amount
    std::optional<std::string> reference;
    std::optional<std::string> response_code;    // "10000" approved, "20051" insufficient funds...
    std::optional<std::string> response_summary; // "Approved", "Insufficient Funds"...
    std::optional<std::string> created_on;       // requested_on or processed_on, RFC 3339
    std::optional<long long> total_captured;     // balances.total_captured, ISO minor units
};
std::optional<Payment> parse_payment(std::string_view json_text);

// A payment as RemotePayment (state from its status; a payment with `approved: false` and no
// status is declined). amount_captured_minor is its balances.total_captured (0 without);
// awaiting_capture is its status Authorized with nothing captured, whatever the order asked (for
// an automatic capture a passing state). nullopt without an amount and currency.
std::optional<RemotePayment> to_remote(const Payment& payment, std::string raw);

// `GET /payments?reference=` answers {"limit", "skip", "total_count", "data": [payment...]}, newest
// first. nullopt if it is not one or any item is unreadable (one unreadable item makes the page
// untrustworthy).
struct PaymentList {
    std::vector<RemotePayment> data;
    long long total_count = 0;
    long long skip = 0;
};
std::optional<PaymentList> parse_payment_list(std::string_view json_text);

// Checkout.com's error envelope {"request_id", "error_type", "error_codes": [...]}.
struct CheckoutError {
    std::string error_type;
    std::vector<std::string> error_codes;
};
std::optional<CheckoutError> parse_error(std::string_view json_text);

// Decides the outcome of a create call from its HTTP status and body (DESIGN section 5: unknown
// unless positively recognised; README.md has the table). A 201 or 202 must carry a payment
// echoing our amount, currency and reference; then its status decides (Declined, or approved
// false: declined, with the provider's reference). 401, 403, and 422 request_invalid -> rejected
// (Checkout.com executed nothing); 409 (the first request with our key still runs), 429 ("too many
// requests or duplicate request detected": which is not told apart), 5xx and anything unparseable
// -> unknown. Checkout.com saves only 2xx answers under the key: a non-2xx answer tells nothing
// about what a later request with the same key does.
SubmitResult interpret_create(const PaymentOrder& order, int http_status, std::string_view body);

// Refunds (POST /payments/{id}/refunds, DESIGN section 16).

// The JSON body of POST /payments/{id}/refunds: `amount` in Checkout.com's units, `reference` our
// operation ID (at most 50 characters), and `metadata` with every caller entry plus ours (the
// operation ID, and the refund's merchant reference when given). nullopt if the payment has no
// reference, the amount is not expressible, the operation ID is too long, or carry_problem finds
// something.
std::optional<std::string> refund_body(const RefundOrder& order);

// The outcome of a refund call. 202 RefundAcceptedResponse naming our reference -> pending (card
// refunds are processed asynchronously), its action_id the provider reference; 403 ("Refund not
// allowed", the document's only meaning of it here) -> declined; 401, 404 (payment not found) and
// 422 request_invalid -> rejected (nothing executed); 409, 429, 5xx and anything else unknown.
// Checkout.com saves only 2xx answers under the key: after any other answer the same key executes
// again, so no answer is read as not_sent.
SubmitResult interpret_refund(const RefundOrder& order, int http_status, std::string_view body);

// The Refund actions of GET /payments/{id}/actions (an array of PaymentAction, newest first) as
// RemotePayments: provider_reference the action's id, operation_id its `reference`, the amount in
// `currency`; `approved` true -> succeeded, false -> declined, absent -> pending. Other actions
// (Authorization, Capture...) are left out. nullopt if the body is not such an array or one action
// is unreadable.
std::optional<std::vector<RemotePayment>> parse_refund_actions(std::string_view json_text,
                                                               std::string_view currency);

// Captures and voids (issue 32, DESIGN section 16): POST /payments/{id}/captures and /voids, each
// answered 202 {action_id, reference} and processed asynchronously; GET /payments/{id}/actions to
// find them again (the Capture or Void action whose `reference` is our operation ID).

// The JSON body of POST /payments/{id}/captures: `amount` (the order's, in Checkout.com's units),
// `capture_type` Final or NonFinal (AuthorizationOrder::final: Final voids what is left),
// `reference` our operation ID and `metadata` (every caller entry, our operation ID, the
// capture's merchant reference when given). nullopt if the payment has no reference, the amount
// is not expressible, the operation ID is too long or carry_problem finds something.
std::optional<std::string> capture_body(const AuthorizationOrder& order);
// The JSON body of POST /payments/{id}/voids: `reference` and `metadata` as a capture's (a void
// releases all that is left: VoidRequest has no amount). nullopt as capture_body's.
std::optional<std::string> void_body(const AuthorizationOrder& order);

// The outcome of a capture or a void call (order.kind says which; README.md has the table). 202
// naming our reference with an action_id -> pending (processed asynchronously: the lookup finds
// the action approved or not), the action_id the provider reference; 403 ("Capture not allowed",
// "Void not allowed": voided, expired, captured, more than is left) -> declined; 401, 404 (payment
// not found) and 422 request_invalid -> rejected (nothing executed); 409, 429, 5xx and anything
// else unknown. Only a 2xx is kept under the key: no answer is read as not_sent.
SubmitResult interpret_authorization_action(const AuthorizationOrder& order, int http_status,
                                            std::string_view body);

// The actions of GET /payments/{id}/actions (an array of PaymentAction, newest first) of `type`
// (Refund, Capture, Void, Authorization...) as RemotePayments: provider_reference the action's
// id, operation_id its `reference`, the amount in `currency`; `approved` true -> succeeded, false
// -> declined, absent -> pending. nullopt if the body is not such an array or one action is
// unreadable.
std::optional<std::vector<RemotePayment>>
parse_actions(std::string_view json_text, std::string_view currency, std::string_view type);

// lookup_capture's answer from the body of a 200 to GET /payments/{id}/actions: the Capture (for a
// void, Void) actions whose `reference` is our operation ID, oldest first -- found (the action:
// approved succeeded, not approved declined, undecided pending) with any later one a duplicate
// (the key executed again after a non-2xx); none: not_found, the authorisation untouched by it.
// Failed (the error class says why) for a body that is not a list of actions, or a list without
// an Authorization: not the authorisation the order names.
LookupResult capture_lookup_answer(const AuthorizationOrder& order, std::string_view body);

} // namespace payrecon::providers::checkout
