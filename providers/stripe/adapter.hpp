#pragma once
// Stripe, through PaymentIntents.
//
// Quirks that matter for charging once:
// - Idempotency: the `Idempotency-Key` header (up to 255 characters), remembered for at least
//   24 hours. A replay returns the first status and body -- 500s included -- with
//   `Idempotent-Replayed: true`. The same key with other parameters is 400 `idempotency_error`;
//   while the first request is still running, 409 `idempotency_key_in_use`. Both mean "the first
//   may have charged": unknown, never declined.
// - We create and confirm in one call (`confirm=true`, `off_session=true`) with our operation ID
//   and merchant reference in `metadata`, so the charge can be found again. Metadata holds at most
//   50 keys (ours included), keys <= 40 and values <= 500 characters (wire.hpp: carry_limits()); a
//   payment that does not fit is never sent with entries left out: not_carried, declined.
// - Lookup: Search (`metadata['operation_id']:'...'`) lags behind writes -- under a minute
//   normally, up to an hour in incidents -- so "not found" means nothing within the settle delay.
//   Listing by `created` window does not lag and drives the statement reconciliation.
// - Amounts are in Stripe's minor units, which differ from ISO 4217 for ISK (2 vs 0) and MGA
//   (0 vs 2); see wire.hpp.
// - A refused card is 402 card_error (declined). An invalid_request_error (unknown, missing or
//   invalid parameters) and 401/403 (the API key) mean Stripe executed nothing, and it saves no
//   idempotent result for them ("If incoming parameters fail validation ... we don't save the
//   idempotent result", docs.stripe.com/idempotency): rejected, an integration fault for review,
//   sent again with the same key once fixed. amount_too_small/amount_too_large are final:
//   declined. 429 is not executed (sent again); 5xx and anything unrecognised are unknown.
// - Refunds: POST /v1/refunds {payment_intent, amount, reason, metadata} under the refund's own
//   operation ID as the Idempotency-Key; the same answers as a charge's but card errors, and
//   charge_already_refunded / charge_disputed are final (declined). Search does not cover
//   refunds: a refund is found by listing the PaymentIntent's (GET /v1/refunds?payment_intent=)
//   and matching metadata.operation_id. A succeeded refund can still fail later (refund.failed).
//   Listing: GET /v1/refunds by created window pages every refund of the account (list_refunds).
// - Authorise, then capture or void (README.md, "Captures and voids"): an order that only
//   authorises is created with capture_method=manual, and its requires_capture is succeeded (the
//   amount held). A capture has no object of its own: it turns the PaymentIntent succeeded, so
//   the pi_... is its reference and the PaymentIntent, read by ID (current, unlike Search), is
//   where it is found again; the capture writes its operation ID into the PaymentIntent's metadata
//   (capture_operation_id), which tells another payrecon capture apart (one made in the Dashboard
//   writes none: it is read by the amount received). So a payment that only authorises carries 47
//   caller entries, none named capture_operation_id (authorisation_carry_problem, checked before
//   the call: the intake checks the 48 of carry_limits()).
//   One capture per authorisation: multicapture is an opt-in feature of some accounts and card
//   networks, not offered here. Stripe cancels an uncaptured PaymentIntent after 7 days by
//   default -- earlier for some cards: Visa merchant-initiated (our off-session) authorisations
//   last 4 days 18 hours. A retry after the key's 24 hours of a capture or void that executed gets
//   400 payment_intent_unexpected_state: never read as declined when the PaymentIntent shows the
//   operation may be ours (captured, canceled) -- unknown, for the lookup to decide.

#include "providers/adapter_support.hpp"
#include "providers/config.hpp"
#include "providers/descriptor.hpp"
#include "providers/provider.hpp"

namespace payrecon::providers::stripe {

inline constexpr const char* k_api_version = "2020-08-27";

// Kind "stripe": an API key (api_key_env) sent as a bearer token; keys up to 255 characters;
// lookup by Search, listing by created window; status words of the PaymentIntent.
const ProviderDescriptor& descriptor();

// Verifies Stripe-Signature with any of `secrets` (the endpoint's signing secrets, whsec_...) and
// reads the event (webhook.cpp).
std::unique_ptr<WebhookVerifier> webhook_verifier(std::vector<Secret> secrets);

class StripeAdapter : public Provider {
public:
    StripeAdapter(const ProviderConfig& config, SendFunction send);

    const std::string& name() const override { return m_name; }
    std::string_view kind() const override { return "stripe"; }
    const Capabilities& capabilities() const override { return m_caps; }

    SubmitResult submit(const PaymentOrder& order) override;
    LookupResult lookup(const PaymentOrder& order) override;
    ListPage list(const TimeWindow& window, const std::optional<std::string>& cursor) override;
    SubmitResult refund(const RefundOrder& order) override;
    LookupResult lookup_refund(const RefundOrder& order) override;
    // POST /v1/payment_intents/{payment_reference}/capture (amount_to_capture, our operation ID in
    // metadata[capture_operation_id]) and /cancel (no parameters), under the order's own operation
    // ID as the Idempotency-Key; a capture with final = false is rejected without a call
    // (multicapture is not offered). lookup_capture reads the PaymentIntent (GET, current: no
    // Search lag).
    SubmitResult capture(const AuthorizationOrder& order) override;
    SubmitResult void_authorization(const AuthorizationOrder& order) override;
    LookupResult lookup_capture(const AuthorizationOrder& order) override;
    // GET /v1/refunds by created window, 100 a page, newest first (as list()): the cursor is the
    // last refund's re_...; another, or one Stripe does not know (400 resource_missing), is a
    // failed page (bad_cursor).
    ListPage list_refunds(const TimeWindow& window,
                          const std::optional<std::string>& cursor) override;

private:
    // A form POST that moves money, `operation_id` its Idempotency-Key, sent by `deadline`, its
    // answer decided by `interpret`.
    SubmitResult post_form(const std::string& path, const std::string& body,
                           const std::string& operation_id,
                           const std::optional<std::chrono::steady_clock::time_point>& deadline,
                           const std::function<SubmitResult(int, std::string_view)>& interpret);

    std::string m_name;
    Capabilities m_caps;
    ProviderClient m_client;
};

} // namespace payrecon::providers::stripe
