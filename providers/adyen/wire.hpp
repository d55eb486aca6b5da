#pragma once
// Adyen's wire format for Checkout API v71 `POST /payments`: the JSON request, the PaymentResponse
// and ServiceError objects, amount units and resultCode mapping. Pure functions: no I/O. See
// adapter.hpp for the provider's quirks.

#include "core/carry_limits.hpp"
#include "providers/provider.hpp"
#include "providers/status_rules.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace payrecon::providers::adyen {

// Adyen's minor-unit exponent for `currency` where it differs from ISO 4217 (Adyen's currency-codes
// page: CLP 2 and ISK 2, 0 in ISO; CVE 0 and IDR 0, 2 in ISO), else the ISO exponent. nullopt for
// an unknown currency.
std::optional<int> adyen_exponent(std::string_view currency);

// ISO minor units -> Adyen's `amount.value`. nullopt if the amount cannot be expressed exactly (CVE
// and IDR amounts must be whole units), overflows, or the currency is unknown.
std::optional<std::int64_t> to_adyen_amount(const Money& money);
// Adyen's `amount.value` + `amount.currency` -> ISO minor units. nullopt if unknown, overflowing,
// or not a whole ISO minor unit (a CLP value with centavos cannot be ours).
std::optional<Money> from_adyen_amount(std::int64_t value, std::string_view currency);

// Adyen's metadata limits: at most 20 entries, keys of at most 20 characters, values of at most 80.
inline constexpr std::size_t k_max_metadata_entries = 20;
inline constexpr std::size_t k_max_metadata_key = 20;
inline constexpr std::size_t k_max_metadata_value = 80;

// What Adyen carries of a payment: the metadata limits above, two entries of them ours
// (operation_id, merchant_reference: so the merchant reference must fit in 80 characters).
const CarryLimits& carry_limits();

// The JSON body of POST /v71/payments: a merchant-initiated charge of a stored card
// (`paymentMethod` {type scheme, storedPaymentMethodId}, shopperInteraction ContAuth,
// recurringProcessingModel UnscheduledCardOnFile), `returnUrl` (required by the schema even when
// no shopper is redirected: the provider configuration's return_url), `reference` = our operation
// ID, every caller
// metadata entry and our operation ID and merchant reference in `metadata`; for an order that
// only authorises (PaymentOrder::manual_capture) `additionalData` {manualCapture: "true"}. nullopt
// if the amount is not expressible in Adyen's units or carry_problem(carry_limits(), ...) finds
// something Adyen cannot carry: nothing is ever left out.
std::optional<std::string> payment_body(const PaymentOrder& order,
                                        std::string_view merchant_account,
                                        std::string_view return_url);

// A PaymentResponse's resultCode mapped to an outcome: Authorised -> succeeded; Refused, Cancelled,
// Error (all three final, non-authorised states by the spec; Error is a refusal category with a
// refusalReason) -> declined; Pending, Received, PresentToShopper, RedirectShopper,
// IdentifyShopper, ChallengeShopper -> pending; anything else (PartiallyAuthorised: money moved,
// but not our amount; AuthenticationFinished, AuthenticationNotRequired: authentication-only flows
// we never ask for; Success: undocumented for /payments; unknown words) -> unknown.
// Its status words, each mapped on purpose (providers/status_rules.hpp); map_result_code() reads
// them.
std::span<const StatusRule> result_code_rules();
Outcome map_result_code(std::string_view result_code);

// The parts of a PaymentResponse that decide an outcome. nullopt if it is not one (not an object,
// no string resultCode, an amount that is not a valid Amount).
struct PaymentResponse {
    std::string result_code;
    std::optional<std::string> psp_reference;
    std::optional<std::string> merchant_reference; // our `reference`, echoed
    std::optional<Money> amount;                   // converted to ISO minor units
    std::string refusal_reason;
};
std::optional<PaymentResponse> parse_payment_response(std::string_view json_text);

// Adyen's ServiceError {status, errorCode, errorType, message, pspReference}. nullopt if the body
// is not a JSON object with at least an errorCode or errorType.
struct ServiceError {
    int status = 0;
    std::string error_code;
    std::string error_type;
    std::string message;
};
std::optional<ServiceError> parse_service_error(std::string_view json_text);

// Adyen's errorCode for "a request with this Idempotency-Key is still being processed".
inline constexpr std::string_view k_idempotency_in_flight = "704";

// Decides the outcome of a /payments call from its HTTP status and body (DESIGN section 5: unknown
// unless positively recognised). A 2xx must be a PaymentResponse whose merchantReference and
// amount, when present, equal our operation ID and amount (a resultCode Refused is the decline:
// Adyen attempted the payment); 429 -> not_sent (rate limited: Adyen executes nothing); 409 or 422
// with errorCode 704 (the first request with our key is still running) -> unknown; 401, 403 and
// another 4xx ServiceError of errorType validation, configuration or security (missing or invalid
// fields, the account's set-up: Adyen attempted nothing) -> rejected with Adyen's errorCode and
// message; 5xx, other 4xx, anything unparseable -> unknown.
SubmitResult interpret_payment(const PaymentOrder& order, int http_status, std::string_view body);

// Refunds (POST /payments/{paymentPspReference}/refunds, DESIGN section 16).

// The JSON body of a refund: `merchantAccount`, `amount` in Adyen's units, `reference` = the
// refund's operation ID (Adyen echoes it as the REFUND notification's merchantReference) and
// `merchantRefundReason` for a reason Adyen has a word for (duplicate DUPLICATE, fraudulent FRAUD,
// requested_by_customer "CUSTOMER REQUEST"). nullopt if the amount is not expressible in Adyen's
// units.
std::optional<std::string> refund_body(const RefundOrder& order, std::string_view merchant_account);

// Adyen's errorCodes that refuse the refund itself as asked -- the payment cannot be refunded by
// this amount -- rather than our request's form: such a refund (or capture) is declined (nothing
// refunded, and sending it again cannot help). Our reading of Adyen's error-code list, see
// README.md.
bool refund_not_possible(std::string_view error_code);

// The outcome of a refund call. Adyen always answers 201 `status` "received" naming our reference
// and the payment: pending (the refund's outcome comes only by the REFUND notification), the
// provider reference the refund's own pspReference; a 201 we cannot match to our request
// (another reference, amount or payment, no pspReference, another status) is unknown. The errors
// as a payment's (interpret_payment), but a 422 whose errorCode refund_not_possible() says so is
// declined.
SubmitResult interpret_refund(const RefundOrder& order, int http_status, std::string_view body);

// Captures and cancels (issue 32, DESIGN section 16): POST /payments/{paymentPspReference}/captures
// and /cancels, each answered 201 `status` "received"; the outcome comes only by the CAPTURE (later
// perhaps CAPTURE_FAILED) or CANCELLATION notification. No lookup of either.

// The longest `reference` a modification takes ("Maximum length: 80 characters"): our operation ID.
inline constexpr std::size_t k_max_modification_reference = 80;

// The JSON body of a capture: `merchantAccount`, `amount` in Adyen's units, `reference` = the
// capture's operation ID (echoed as the CAPTURE notification's merchantReference). Nothing says
// final or not: without multiple partial captures (enabled per account by Adyen's support) a
// capture is the last one and Adyen cancels what it leaves. nullopt if the amount is not
// expressible in Adyen's units or the operation ID is longer than a reference.
std::optional<std::string> capture_body(const AuthorizationOrder& order,
                                        std::string_view merchant_account);
// The JSON body of a cancel: `merchantAccount` and `reference` = the void's operation ID (a cancel
// releases the whole authorisation: PaymentCancelRequest has no amount). nullopt as capture_body's.
std::optional<std::string> cancel_body(const AuthorizationOrder& order,
                                       std::string_view merchant_account);

// The outcome of a capture or a cancel call (order.kind says which; README.md has the table): 201
// `received` naming our reference, the payment and (a capture) our amount -> pending, the provider
// reference the modification's own pspReference; a 201 we cannot match (an amount on a cancel's
// included) -> unknown. Errors as a payment's (interpret_payment), but a capture's 422 whose
// errorCode refund_not_possible() names (137, more than is left) is declined.
SubmitResult interpret_authorization_action(const AuthorizationOrder& order, int http_status,
                                            std::string_view body);

} // namespace payrecon::providers::adyen
