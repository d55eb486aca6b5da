#pragma once
// PayPal, through Orders v2 (create with a vaulted payment source, captured at once or only
// authorised), Payments v2 (refunds of the capture; capture and void of an authorization) and
// Transaction Search v1 (lookup and listing).
//
// Quirks that matter for charging once:
// - Credentials: OAuth2 client credentials only. The access token comes from
//   POST /v1/oauth2/token on base_url (the entry's client_id_env and client_secret_env; or the
//   credentials object's token_url) and is cached, refreshed before it expires and once after a
//   401 (providers/oauth2.hpp, through ProviderClient).
// - Idempotency: the `PayPal-Request-Id` header (1 to 108 characters; our operation ID). "The
//   server stores keys for 6 hours. The API callers can request the times to up to 72 hours by
//   speaking to their Account Manager" (the Orders v2 document): the retention is 6 h unless the
//   configuration's key_retention_h says more (descriptor.cpp refuses over 72). A replay returns
//   "the latest status of the previous request", not the first response. "When you send two
//   simultaneous API requests with same PayPal-Request-Id header, PayPal processes the first
//   request and might fail the second request": whatever that failure is, unknown. The same key
//   with another body is undocumented. PayPal also requires the header for an order that
//   processes a payment (400 PAYPAL_REQUEST_ID_REQUIRED), so it is always sent.
// - One call charges: intent CAPTURE with payment_source.card.vault_id (a card saved in PayPal's
//   vault: no buyer redirect), `Prefer: return=representation` for the whole order. The outcome is
//   the capture's status, not the order's: a COMPLETED order can hold a DECLINED capture. The
//   provider reference is the capture's ID (what Transaction Search, the dashboard and refunds
//   know), or the order's ID when there is no capture. Our operation ID is the purchase unit's
//   invoice_id and custom_id; its reference_id is our payment ID.
// - Lookup: there is none by request ID. Transaction Search (GET /v1/reporting/transactions) lists
//   a window of at most 31 days, and "it takes a maximum of three hours for executed transactions
//   to appear": the settle delay is at least 3 h (a shorter settle_delay_s is raised to it), and
//   "not found" before then proves nothing. Search has no invoice filter: we list
//   [created_at - 5 min, now rounded up to the second) (at most 31 days) and match invoice_id
//   (else custom_field) ourselves, page by page (at most 50 pages of 500, else failed). A re-send
//   after a confirmed absence is possible only between 3 h and the key window's end (6 h minus
//   the policy's 1 h margin).
// - Amounts are decimal strings in the currency's major unit, converted exactly: ISO 4217's
//   exponent except HUF, JPY and TWD, which have no decimals at PayPal (wire.hpp).
// - Orders carry no metadata: a payment with metadata is never sent (not_carried, declined).
// - Errors are {"name", "message", "debug_id", "details": [{"issue", "description"}]}. 422 with an
//   issue meaning PayPal tried and the source or payer was refused (INSTRUMENT_DECLINED,
//   TRANSACTION_REFUSED, ...) is declined; 422 DUPLICATE_INVOICE_ID is unknown (a transaction with
//   our invoice ID exists); 400 INVALID_REQUEST, other 422 issues, 401 (after the one refresh),
//   403 and 415 mean PayPal executed nothing: rejected. 429 RATE_LIMIT_REACHED ("Blocked due to
//   rate limiting") is not executed (sent again); 5xx ("might have created a PayPal transaction"),
//   404, 409 and anything unrecognised are unknown. Whether PayPal keeps a refused request's
//   answer under its PayPal-Request-Id is not documented (README.md).
// - Refunds (Payments v2.4): POST /v2/payments/captures/{capture_id}/refund with the refund's own
//   operation ID as PayPal-Request-Id ("The server stores keys for 45 days"; payrecon's re-send
//   window stays the 6 h of the capabilities, one retention per provider: conservative), and as
//   the body's invoice_id and custom_id; `amount`, `note_to_payer` the reason (at most 255),
//   `Prefer: return=representation`. The provider reference of a charge is the capture's ID, or
//   the order's when the order was never captured; the two look alike, so a refund first reads
//   GET /v2/payments/captures/{reference}: a 404 refuses the refund unsent (rejected,
//   not_a_capture), no answer leaves it not_sent. A refund's status: COMPLETED succeeded, PENDING
//   pending, FAILED and CANCELLED declined; 422 issues that refuse the refund (CAPTURE_FULLY_
//   REFUNDED, REFUND_AMOUNT_EXCEEDED, REFUND_NOT_ALLOWED, REFUND_TIME_LIMIT_EXCEEDED, ...) declined
//   as refund_declined:<ISSUE>; 422 DUPLICATE_INVOICE_ID ("Invoice ID was previously used to
//   refund a capture") unknown; 404 (no such capture) rejected; the rest as for the create.
// - Finding a refund: PayPal has no search by PayPal-Request-Id or invoice_id outside Transaction
//   Search (3 h behind, refunds as money-out entries), and re-sending the refund under its request
//   ID to read "the latest status" would execute a refund PayPal never received: a lookup must not
//   move money. A capture names its order (supplementary_data.related_ids.order_id, or its `up`
//   link), and the order (GET /v2/checkout/orders/{id}) lists every refund of its capture in
//   purchase_units[].payments.refunds with its invoice_id: lookup_refund reads those two, read-only
//   and current: a refund's lookup staleness is the configured settle delay, not raised to the
//   search's 3 h as the charges' is.
// - Authorise, then capture or void (README.md, "Captures and voids"): a payment that only
//   authorises is created with intent AUTHORIZE, and its reference is the authorization's ID
//   (PayPal's Payments v2 resource; the order has no capture to name). It is captured in parts
//   (final_capture), voided, and read by ID -- current, unlike Transaction Search -- with its
//   order for the captures; each capture and void under its own operation ID as
//   PayPal-Request-Id, a capture's also its invoice_id (how the order's captures are told apart).
//   An authorization is valid 29 days; the 3-day honor period is when funds are surest, not when
//   it lapses.

#include "providers/adapter_support.hpp"
#include "providers/config.hpp"
#include "providers/descriptor.hpp"
#include "providers/paypal/wire.hpp"
#include "providers/provider.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <variant>

namespace payrecon::providers::paypal {

// How long PayPal keeps a PayPal-Request-Id by default, and the most an account can have.
inline constexpr std::chrono::hours k_key_retention{6};
inline constexpr std::chrono::hours k_max_key_retention{72};
// "It takes a maximum of three hours for executed transactions to appear in the list
// transactions call": the shortest settle delay.
inline constexpr std::chrono::hours k_search_delay{3};
// Transaction Search's longest window ("The maximum supported range is 31 days").
inline constexpr std::chrono::hours k_max_search_window{31 * 24};
// The lookup window starts this long before PaymentOrder::created_at; at most this many pages of
// k_page_size are read for one lookup.
inline constexpr std::chrono::minutes k_lookup_before{5};
inline constexpr int k_max_lookup_pages = 50;
inline constexpr int k_page_size = 500;

// Kind "paypal": OAuth2 client credentials; PayPal-Request-Id up to 108 characters; lookup and
// listing through Transaction Search; the capture's status words.
const ProviderDescriptor& descriptor();

// What descriptor.cpp reads of a paypal entry: the key retention, 6 h unless key_retention_h is
// given (at most 72).
struct Settings : ProviderSettings {
    std::chrono::hours key_retention = k_key_retention;
};
// Settings for a configuration built in code (tests).
std::shared_ptr<const ProviderSettings> settings(std::chrono::hours key_retention);
// The configuration's Settings; PayPal's defaults when it has none (a configuration built in
// code).
Settings settings_of(const ProviderConfig& config);

class PaypalAdapter : public Provider {
public:
    using Clock = std::function<std::chrono::system_clock::time_point()>;

    // `clock` gives "now", the end of a lookup's window: the system clock unless given (tests).
    PaypalAdapter(const ProviderConfig& config, SendFunction send, Clock clock = {});

    const std::string& name() const override { return m_name; }
    std::string_view kind() const override { return "paypal"; }
    // The API's, with the key retention of settings_of(config) and a lookup staleness of at least
    // k_search_delay.
    const Capabilities& capabilities() const override { return m_caps; }

    SubmitResult submit(const PaymentOrder& order) override;
    // Searches [created_at - 5 min, now), at most 31 days, and matches our operation ID; failed
    // with error_class "lookup_needs_time" without created_at, "lookup_window_empty" if now is not
    // after the window's start, "too_many_pages" past k_max_lookup_pages, and on any page that
    // fails. Several matches: the first found, the others in duplicates.
    LookupResult lookup(const PaymentOrder& order) override;
    // One page of Transaction Search over `window`, split into windows of at most 31 days. The
    // cursor is "<start of the 31-day window, unix seconds>/<page>"; one that is not ours is a
    // failed page (error_class "bad_cursor").
    ListPage list(const TimeWindow& window, const std::optional<std::string>& cursor) override;
    // The same search, windows and cursor as list(), keeping the refunds (T1107 entries, money
    // out) instead of the charges: invoice_id our refund's operation ID, the amount positive.
    // Transaction Search's 3 h lag holds for them too: a window ending within 3 h of now may
    // not show its newest refunds yet.
    ListPage list_refunds(const TimeWindow& window,
                          const std::optional<std::string>& cursor) override;
    // GET /v2/payments/captures/{reference} first (an order's ID is refused unsent; an
    // authorization's ID is followed to its one capture: refund_target), then
    // POST /v2/payments/captures/{capture}/refund under the refund's operation ID as
    // PayPal-Request-Id, `Prefer: return=representation`; interpret_refund reads the answer.
    SubmitResult refund(const RefundOrder& order) override;
    // GET /v2/payments/captures/{reference} (or, on a 404, /v2/payments/authorizations/{reference})
    // for its order's ID, then GET /v2/checkout/orders/{id}:
    // the refund among the order's refunds whose invoice_id (else custom_id) is our operation ID.
    LookupResult lookup_refund(const RefundOrder& order) override;

    // POST /v2/payments/authorizations/{payment_reference}/capture (capture_body: amount,
    // final_capture, invoice_id) and /void (no body), under the order's own operation ID as
    // PayPal-Request-Id, `Prefer: return=representation`; interpret_capture and interpret_void read
    // the answers.
    SubmitResult capture(const AuthorizationOrder& order) override;
    SubmitResult void_authorization(const AuthorizationOrder& order) override;
    // GET /v2/payments/authorizations/{payment_reference} (current: no search lag), then, for a
    // capture, GET /v2/checkout/orders/{its order}: capture_lookup_answer decides.
    LookupResult lookup_capture(const AuthorizationOrder& order) override;

private:
    // An authorization and its order, read: `ok` false with `call` saying why when either read
    // failed; `not_found` when PayPal answered 404 for the authorization.
    struct AuthorizationRead {
        bool ok = false;
        bool not_found = false;
        std::string authorization_body;
        std::optional<std::string> order_body;
        CallRecord call;
    };
    // GET /v2/payments/authorizations/{id}, and with `with_order` the order it names.
    AuthorizationRead read_authorization(
        const std::string& id, bool with_order,
        std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);
    // A payment that only authorises, found by Transaction Search: its authorization read by ID
    // for the current status (CREATED: held, succeeded) and, unless nothing can have been
    // captured, its order for what was (a voided or expired one that captured something stays
    // succeeded). false
    // if the read failed (`call` says why); an entry PayPal knows no authorization for (404) is
    // left as the search has it.
    bool read_held(RemotePayment& p, CallRecord& call);
    // The capture a refund of `order` goes to: its reference when that is a capture; for a payment
    // that only authorised (the reference an authorization ID), the one capture of the
    // authorization's order that took money. The capture's ID, or what refund() answers without
    // sending (rejected, not_sent).
    std::variant<std::string, SubmitResult> refund_target(const RefundOrder& order);

    // GET /v1/reporting/transactions for [from, to), page `page` of k_page_size; on success
    // `total_pages` is PayPal's. Its items are the page's charges, or with `refunds` its
    // merchant refunds (parse_refund_search_page).
    ListPage fetch_page(std::chrono::system_clock::time_point from,
                        std::chrono::system_clock::time_point to, std::int64_t page,
                        std::int64_t& total_pages, bool refunds = false);
    // What list() and list_refunds() page: `window` in searches of at most 31 days, the cursor
    // "<start of the search, unix seconds>/<page>".
    ListPage search_window(const TimeWindow& window, const std::optional<std::string>& cursor,
                           bool refunds);

    std::string m_name;
    Capabilities m_caps;
    ProviderClient m_client;
    Clock m_clock;
};

} // namespace payrecon::providers::paypal
