#pragma once
// Square, through the Payments API (Connect v2).
//
// Quirks that matter for charging once:
// - Idempotency: `idempotency_key` is a field of the JSON body, not a header, at most 45
//   characters (our operation IDs fit). A replay returns the first success. The same key with
//   another body is 400 `IDEMPOTENCY_KEY_REUSED`: the first may have charged, so unknown, never
//   declined. What a request racing an in-flight first one gets is undocumented, and so is how
//   long keys are kept: the retention comes from the config (`key_retention_h`).
// - We create and complete in one call (`autocomplete: true`), so APPROVED (authorised, not
//   captured) is read as pending -- except for an order that only authorises (manual_capture):
//   `autocomplete: false`, `delay_action: CANCEL` and `delay_duration: P7D` sent explicitly (an
//   authorisation nobody captures is released, never completed; 7 days is Square's documented
//   card-not-present threshold), its APPROVED read as succeeded with awaiting_capture. Our
//   operation ID also goes in `reference_id` (at most 40 characters; ours are 35) so the charge
//   can be found again.
// - Lookup: there is no search by reference_id. We list payments created in
//   [created_at - 5 min, created_at + 24 h) and match reference_id, paging through every page
//   (at most 50, else failed). That needs PaymentOrder::created_at; without it the lookup fails.
//   How soon a new payment shows in the list is not published: "not found" means nothing within
//   the settle delay.
// - Amounts are in the currency's smallest ISO 4217 unit (USD cents, JPY yen): no exceptions.
// - CreatePayment has no metadata: a payment with metadata is never sent without it (not_carried,
//   declined); the intake refuses it up front when it knows the provider is a Square one.
// - Declines are 400 (some integrations see 402) with category PAYMENT_METHOD_ERROR, often with
//   the FAILED Payment attached. An INVALID_REQUEST_ERROR (missing, unknown or invalid
//   parameters) and 401/403 (AUTHENTICATION_ERROR) mean Square executed nothing: rejected (an
//   integration fault, the payment goes to review), except UNSUPPORTED_CURRENCY, final: declined.
//   429 (RATE_LIMIT_ERROR) is not executed (sent again); 5xx and anything unrecognised are
//   unknown. Square documents replaying the first *successful* response for a key; whether a
//   rejected request holds its key is not documented (README.md).
// - Refunds: POST /v2/refunds {idempotency_key, payment_id, amount_money, reason} under the
//   refund's own operation ID as the key. A PaymentRefund has no reference field: our operation ID
//   rides in `reason` ("requested_by_customer [pr_...]", wire.hpp refund_reason). A refund is found
//   by reading the payment (GET /v2/payments/{id}: its refund_ids) and each of its refunds
//   (GET /v2/refunds/{id}), matching the reason; Square allows 20 refunds per payment, so past
//   k_max_lookup_refunds the lookup fails. The same key answers the same refund. A refund
//   refused is 400 REFUND_ERROR (REFUND_AMOUNT_INVALID past what is left): declined. A COMPLETED
//   refund's funds can still fail to be secured (FAILED later). ListPaymentRefunds (GET
//   /v2/refunds, by created_at window and cursor, as ListPayments) lists every refund of the
//   account: the statement's refunds (list_refunds).
// - Captures and voids: POST /v2/payments/{id}/complete and /cancel take NO idempotency key. A
//   lost answer is unknown; lookup_capture reads the payment (GET /v2/payments/{id}): COMPLETED
//   the capture happened, CANCELED the void (or the lapse), APPROVED neither -- confirmed absent,
//   and only that read lets the reconciler send the call again. Square completes a payment once
//   and whole (multiple_captures false): a smaller final capture first lowers amount_money with
//   UpdatePayment (PUT /v2/payments/{id}, keyed `<operation ID>-amount`; Square documents that
//   an APPROVED payment's amount_money can be updated, down where the payment's capabilities
//   name EDIT_AMOUNT_DOWN), then completes exactly that version (`version_token`: a payment
//   changed since is refused VERSION_MISMATCH, never captured at another amount). A 400 refusal
//   of either call is classified by reading the payment (refusal_by_status): CANCELED declined
//   for a capture, COMPLETED declined for a void, the other way round unknown (the lookup
//   decides), APPROVED rejected.

#include "providers/adapter_support.hpp"
#include "providers/config.hpp"
#include "providers/descriptor.hpp"
#include "providers/provider.hpp"
#include "providers/square/wire.hpp"

#include <chrono>

namespace payrecon::providers::square {

// The Square-Version header: the spec's default (square/connect-api-specification, 5733f66).
inline constexpr const char* k_api_version = "2025-08-20";
inline constexpr std::size_t k_max_key_length = 45;
// The lookup window around PaymentOrder::created_at, and how many list pages it may take.
inline constexpr std::chrono::minutes k_lookup_before{5};
inline constexpr std::chrono::hours k_lookup_after{24};
inline constexpr int k_max_lookup_pages = 50;
// The most refunds of one payment a refund lookup reads (Square allows 20 per payment).
inline constexpr std::size_t k_max_lookup_refunds = 50;

// Kind "square": an access token (api_key_env) sent as a bearer token; keys up to 45 characters;
// lookup by listing a window, listing; Payment status words.
const ProviderDescriptor& descriptor();

// Square's webhook verifier (webhook.cpp): `secrets` the subscription's signature keys,
// `notification_url` the URL exactly as registered with Square (it is signed with the body).
std::unique_ptr<WebhookVerifier> webhook_verifier(std::vector<Secret> secrets,
                                                  std::string notification_url);

class SquareAdapter : public Provider {
public:
    SquareAdapter(const ProviderConfig& config, SendFunction send);

    const std::string& name() const override { return m_name; }
    std::string_view kind() const override { return "square"; }
    const Capabilities& capabilities() const override { return m_caps; }

    SubmitResult submit(const PaymentOrder& order) override;
    // Lists the window around order.created_at; failed with error_class "lookup_needs_time" if it
    // is absent, "too_many_pages" past k_max_lookup_pages, and on any page that fails.
    LookupResult lookup(const PaymentOrder& order) override;
    ListPage list(const TimeWindow& window, const std::optional<std::string>& cursor) override;
    SubmitResult refund(const RefundOrder& order) override;
    // Reads the payment's refund_ids and each refund, matching our operation ID in its reason;
    // failed ("too_many_refunds") past k_max_lookup_refunds, and on any read that fails.
    LookupResult lookup_refund(const RefundOrder& order) override;
    // ListPaymentRefunds (GET /v2/refunds) over `window`, as list() pages payments: oldest first,
    // 100 a page, Square's cursor; each refund's operation ID from its reason.
    ListPage list_refunds(const TimeWindow& window,
                          const std::optional<std::string>& cursor) override;
    // A capture: final only (Square completes a payment once); below what is left authorised,
    // UpdatePayment lowers amount_money first (keyed update_key), then CompletePayment with the
    // version it answered; the whole amount: CompletePayment alone. No key on the complete.
    SubmitResult capture(const AuthorizationOrder& order) override;
    // CancelPayment: no body, no key.
    SubmitResult void_authorization(const AuthorizationOrder& order) override;
    // Reads the payment (GET /v2/payments/{id}): capture_lookup_answer.
    LookupResult lookup_capture(const AuthorizationOrder& order) override;

private:
    // One call of a capture or a void (`method` `path` with the JSON `body`, by the order's
    // deadline, decided by `interpret`); a 400 refusal is then classified by reading the payment
    // (refusal_by_status), unknown if it cannot be read. Never sends the call twice.
    SubmitResult
    send_authorisation_call(const AuthorizationOrder& order, std::string method,
                            const std::string& path, std::string body,
                            const std::function<SubmitResult(int, std::string_view)>& interpret);

    // A JSON POST that moves money (the key is in `body`), sent by `deadline`, its answer decided
    // by `interpret`.
    SubmitResult post_json(const std::string& path, std::string body,
                           const std::optional<std::chrono::steady_clock::time_point>& deadline,
                           const std::function<SubmitResult(int, std::string_view)>& interpret);

    // GET `path` (/v2/payments, /v2/refunds) for `window`, oldest first, 100 per page, from
    // `cursor`; the page's items are the envelope's `items`. A 400 INVALID_CURSOR for a cursor
    // is a failed page (bad_cursor).
    ListPage fetch_page(const std::string& path, std::vector<RemotePayment> Envelope::*items,
                        const TimeWindow& window, const std::optional<std::string>& cursor);

    std::string m_name;
    Capabilities m_caps;
    ProviderClient m_client;
};

} // namespace payrecon::providers::square
