#pragma once
// The Provider interface (DESIGN sections 5, 7, 11): what payrecon asks of a payment provider, and
// what it is told back. Outcomes are data; `unknown` is the default for anything an adapter does
// not positively recognise. A provider never touches SQL; the executor and the reconciler call it
// and record what it said.

#include "core/money.hpp"
#include "core/payment_state.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon::providers {

// What a provider call came to.
enum class Outcome {
    unknown,   // may or may not have charged: recorded durably, never re-sent blindly (the default)
    succeeded, // the provider charged
    declined,  // the provider refused; no charge
    pending,   // accepted, not final (3-D Secure, processing): look again later
    not_sent,  // definitely never reached the provider: safe to send again, same operation ID
    rejected,  // the provider refused our request before executing anything (malformed, missing or
               // unknown parameters, bad configuration or credentials): no charge, and not the
               // customer's outcome -- an integration fault for an operator (review:
               // request_rejected), never `failed`
};

std::string_view to_string(Outcome outcome);
std::optional<Outcome> parse_outcome(std::string_view name);

// What a provider can do, from its documentation, with per-account overrides from config.
struct Capabilities {
    // Does a repeated request with the same idempotency key return the first result instead of
    // charging again, and for how long after the first request?
    bool honours_idempotency_keys = false;
    std::chrono::seconds key_retention{0};
    std::size_t max_key_length = 0;

    // Can a payment be found by our operation ID, and how long until a new payment is findable
    // (search index lag)? Within `lookup_staleness` of the last attempt, "not found" proves
    // nothing.
    bool lookup_by_operation_id = false;
    std::chrono::seconds lookup_staleness{0};
    // Can a refund be found by its operation ID (lookup_refund)? Without, an unknown refund is
    // settled only by the provider's webhook, or by an operator.
    bool refund_lookup = false;
    // The refund lookup's `lookup_staleness`: a provider whose payment search lags may find a
    // refund at once (PayPal: 3 h for payments, none for refunds, read from the capture's order).
    std::chrono::seconds refund_lookup_staleness{0};
    // Where the operation cannot be looked up: how long one the provider accepted (its answer
    // pending, with the provider's reference: Adyen's refund `received`) waits for the provider's
    // notification before it goes to review (notification_missing). 0: nothing is awaited, review
    // (no_lookup) at once.
    std::chrono::seconds notification_wait{0};

    // Can the provider list its transactions in a time window (statement reconciliation)?
    bool list_transactions = false;
    // Can it list its refunds in a time window (list_refunds)? The statement diff then checks our
    // refunds one by one against the provider's (DESIGN section 16).
    bool list_refunds = false;

    // Authorisations (issue 32): can a payment be authorised only (PaymentOrder::manual_capture)
    // and captured or voided later? Can one authorisation be captured in several parts (a
    // capture with final = false)? How long does an authorisation last by the provider's rules
    // (0: unknown)? Can a capture or a void be found again (lookup_capture, lookup_void)?
    bool manual_capture = false;
    bool multiple_captures = false;
    std::chrono::seconds authorization_validity{0};
    bool capture_lookup = false;

    // The longest one submit() can take (connect timeout + total timeout of its one call): a
    // claim's lease must still cover this, plus a margin, immediately before the call.
    std::chrono::milliseconds worst_case_call{0};
};

// What a provider's API offers, before an account's overrides (ProviderDescriptor::api; the
// configuration turns it into Capabilities with configured_capabilities()).
struct ApiCapabilities {
    std::size_t max_key_length = 0; // the longest idempotency key it takes
    bool lookup = false;            // it can find a payment by our operation ID
    bool list = false;              // it can list its transactions in a time window
    bool list_refunds = false;      // it can list its refunds in a time window
    bool refund_lookup = false;     // it can find a refund by its operation ID
    bool manual_capture = false;    // it can authorise only, then capture or void
    bool multiple_captures = false; // several captures of one authorisation (final = false)
    std::chrono::seconds authorization_validity{0}; // an authorisation's life (0: unknown)
    bool capture_lookup = false; // a capture or a void can be found again by its operation ID
    // The default of Capabilities::notification_wait: how long its notification of an accepted
    // operation may take (the configuration's notification_wait_s overrides it).
    std::chrono::seconds notification_wait{0};
};

// One payment as payrecon sends it. `operation_id` is the idempotency key on every attempt.
struct PaymentOrder {
    std::string operation_id;
    std::string payment_id;
    std::string merchant_reference;
    Money amount;
    std::string payment_method;
    std::optional<std::string> customer;
    std::optional<std::string> description;
    std::map<std::string, std::string> metadata;
    // When payrecon accepted the payment; adapters that look up by time window need it (Square).
    std::optional<std::chrono::system_clock::time_point> created_at;
    // Authorise only (the payment's capture "manual", issue 32): the provider holds the amount
    // and captures nothing until capture(). A submit or lookup then answers succeeded for an
    // authorisation the provider holds (Stripe's requires_capture), whatever it captured since.
    bool manual_capture = false;
    // The end of the claim's lease on the local monotonic clock: submit() must not send after it,
    // and its call must not run past it (net::HttpRequest::deadline). Unset: no deadline.
    std::optional<std::chrono::steady_clock::time_point> deadline;
};

// One refund as payrecon sends it (DESIGN section 16). `operation_id` -- the refund's own, never
// its payment's -- is the idempotency key on every attempt; the provider finds the charge by
// `payment_reference`, its own reference of it (Stripe's pi_..., Adyen's pspReference).
struct RefundOrder {
    std::string operation_id;
    std::string refund_id;
    std::string payment_id;
    std::string payment_reference;
    std::optional<std::string> merchant_reference; // the refund's, when the merchant gave one
    Money amount;                                  // in the payment's currency
    std::optional<std::string> reason;             // duplicate, fraudulent, requested_by_customer
    std::map<std::string, std::string> metadata;
    std::optional<std::chrono::system_clock::time_point> created_at;
    // As PaymentOrder::deadline: the claim's lease end on the monotonic clock.
    std::optional<std::chrono::steady_clock::time_point> deadline;
};

// A capture or a void of an authorisation (issue 32, DESIGN section 16) as payrecon sends it.
// `operation_id` -- the capture's or void's own -- is the idempotency key where the provider takes
// one (Square's complete and cancel take none: a lost answer is settled by reading the payment,
// never by sending blindly); the provider finds the authorisation by `payment_reference`, its own
// reference of the charge (Stripe's pi_..., Adyen's pspReference, PayPal's authorization ID).
struct AuthorizationOrder {
    OperationKind kind = OperationKind::capture; // capture or void_authorization
    std::string operation_id;
    std::string operation_row_id; // the capture's or the void's ID
    std::string payment_id;
    std::string payment_operation_id; // the charge's (the authorisation's) operation ID
    std::string payment_reference;
    std::optional<std::string> merchant_reference; // the capture's, when the merchant gave one
    // A capture: the amount to capture, in the payment's currency. A void: the amount authorised.
    Money amount;
    // A capture: the last one of the authorisation (the provider releases what is left). Only a
    // provider with Capabilities::multiple_captures takes false.
    bool final = true;
    long long authorized_minor = 0;      // what the charge authorised
    long long captured_before_minor = 0; // what earlier captures of it took (succeeded)
    std::map<std::string, std::string> metadata;
    std::optional<std::chrono::system_clock::time_point> created_at;
    // As PaymentOrder::deadline: the claim's lease end on the monotonic clock.
    std::optional<std::chrono::steady_clock::time_point> deadline;
};

// What one call looked like, for the attempt record. `detail` is a redacted excerpt.
struct CallRecord {
    int http_status = 0;     // 0: no response
    std::string error_class; // "connect_refused", "timeout_after_send", "http_500", ...
    std::string detail;      // at most a few hundred bytes; never a secret or card data
    // Why a call got no response, in words for a log line ("could not resolve host", "timed out",
    // "no OAuth2 access token"); empty when a response came back.
    std::string reason;
    std::chrono::microseconds duration{0};
};

// What the provider said when it refused our request (Outcome::rejected): its own error code
// (Stripe `error.code`, Adyen `errorCode`, Square `errors[0].code`) and message, made printable
// (control characters replaced) and cut to a few hundred bytes; never a secret (the transport
// redacts the response before an adapter reads it).
struct Rejection {
    std::string code;
    std::string message;
    int http_status = 0; // the refusal's status; 401 and 403 refuse our credentials
};

struct SubmitResult {
    Outcome outcome = Outcome::unknown;
    std::optional<std::string> provider_reference; // e.g. Stripe's pi_...
    CallRecord call;
    std::optional<Rejection> rejection; // with Outcome::rejected
};

// A rejected result: outcome rejected, error class "request_rejected:<code>", the provider's code
// and message (sanitised as Rejection says). For adapters.
SubmitResult rejected_request(int http_status, std::string code, std::string_view message,
                              std::string detail);

// A payment as the provider has it.
struct RemotePayment {
    std::string provider_reference;
    std::optional<std::string> operation_id; // ours, when the provider echoes it
    Money amount;                            // converted to ISO 4217 minor units
    Outcome state = Outcome::unknown;        // succeeded, declined, pending (unknown if unmapped)
    std::string raw_status;                  // the provider's own word, for operators
    std::chrono::system_clock::time_point created_at{};
    long long amount_refunded_minor = 0; // refunded so far, ISO 4217 minor units
    // An authorisation (issue 32): captured so far (minor units), and whether it still awaits a
    // capture (authorised, nothing captured, not voided or expired: Stripe's requires_capture).
    // A voided or expired authorisation is declined with its raw_status.
    long long amount_captured_minor = 0;
    bool awaiting_capture = false;
    // A listing's record that does not say what was captured of the authorisation (PayPal's
    // authorization entry in Transaction Search: its captures are entries of their own), and a
    // listing's record that is such a capture (kept with the statement, judged by its
    // authorisation's record).
    bool captured_unsaid = false;
    bool listed_capture = false;
    std::string raw; // the provider's record as it sent it (JSON), if kept
};

struct LookupResult {
    enum class Status {
        found,     // `payment` holds it
        not_found, // the provider answered, and has no such payment (mind the staleness)
        failed,    // no trustworthy answer (network, 5xx, unparseable): never read as absence
    };
    Status status = Status::failed;
    std::optional<RemotePayment> payment;
    std::vector<RemotePayment>
        duplicates; // more than one match: a finding, never resolved silently
    CallRecord call;
};

struct TimeWindow {
    std::chrono::system_clock::time_point from; // inclusive
    std::chrono::system_clock::time_point to;   // exclusive
};

struct ListPage {
    bool ok = false; // false: the page could not be read; `call` says why
    std::vector<RemotePayment> items;
    std::optional<std::string> next_cursor;          // absent on the last page
    std::optional<std::chrono::seconds> retry_after; // rate limited: wait, then ask again
    CallRecord call;
};

class Provider {
public:
    virtual ~Provider() = default;

    // The configured name ("stripe", "stripe-eu") and the adapter kind ("stripe").
    virtual const std::string& name() const = 0;
    virtual std::string_view kind() const = 0;
    virtual const Capabilities& capabilities() const = 0;

    // Sends the payment with `order.operation_id` as the idempotency key. Never throws for
    // anything the network or the provider does: every failure is an outcome.
    virtual SubmitResult submit(const PaymentOrder& order) = 0;

    // Looks the payment up by our operation ID. Only meaningful if
    // capabilities().lookup_by_operation_id; otherwise returns failed.
    virtual LookupResult lookup(const PaymentOrder& order) = 0;

    // One page of the provider's transactions created in `window`, oldest first where the provider
    // allows. Only meaningful if capabilities().list_transactions.
    virtual ListPage list(const TimeWindow& window, const std::optional<std::string>& cursor) = 0;

    // Sends the refund with `order.operation_id` as the idempotency key; its outcome as submit()'s
    // (succeeded: refunded; declined: the provider refused the refund; pending: not final yet).
    // A kind whose adapter does not refund yet sends nothing and answers rejected
    // (refunds_not_supported): an operator's matter, never a customer's outcome.
    virtual SubmitResult refund(const RefundOrder& order);
    // Finds the refund by our operation ID (`payment` holds it: provider_reference is the
    // refund's own); failed where the kind cannot.
    virtual LookupResult lookup_refund(const RefundOrder& order);
    // One page of the provider's refunds created in `window`, as list() pages its charges: each
    // item a refund (provider_reference its own ID, operation_id ours where the provider carries
    // it, amount, state succeeded / declined / pending, raw_status, created_at). Only meaningful
    // if capabilities().list_refunds; the default answers a failed page (list_not_supported).
    virtual ListPage list_refunds(const TimeWindow& window,
                                  const std::optional<std::string>& cursor);

    // Captures (part of) the authorisation `order.payment_reference` with `order.operation_id` as
    // the key; its outcome as submit()'s (succeeded: captured; declined: the provider refused --
    // voided, expired, more than is left; pending: not final yet, the outcome comes by
    // notification or lookup). A kind that cannot capture sends nothing and answers rejected
    // (captures_not_supported).
    virtual SubmitResult capture(const AuthorizationOrder& order);
    // Voids (cancels) the authorisation: succeeded: released; declined: it cannot be (captured
    // already). A kind that cannot answers rejected (voids_not_supported) without a call.
    virtual SubmitResult void_authorization(const AuthorizationOrder& order);
    // Finds the capture or the void `order` asked for (order.kind says which) by reading what the
    // provider holds: found with `payment` (provider_reference the capture's own ID where the
    // provider gives one, else the authorisation's; amount what it captured; state succeeded,
    // declined or pending); not_found when the provider holds the authorisation untouched by it
    // (confirmed absent: the same key may be sent again inside its window); failed where the
    // kind cannot look (capture_lookup false) or no trustworthy answer came.
    virtual LookupResult lookup_capture(const AuthorizationOrder& order);
};

} // namespace payrecon::providers
