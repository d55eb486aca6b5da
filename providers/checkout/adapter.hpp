#pragma once
// Checkout.com, through the unified Payments API (new account structure).
//
// Quirks that matter for charging once:
// - Idempotency: the `Cko-Idempotency-Key` header (our operation ID). Checkout.com keeps a key for
//   24 hours (a newer page says 72: plan for 24, the configuration's default), but saves ONLY 2xx
//   answers under it: a request whose answer was a 4xx or 5xx is executed again when the same key
//   comes back. So a 5xx, a timeout or a lost answer is `unknown`, never "safe to retry": the
//   reconciler looks the payment up first, and re-sends only after a confirmed absence. The
//   original still in flight answers 409.
// - Our operation ID is also `reference` (at most 50 characters), the field
//   `GET /payments?reference=` finds a payment by: the lookup. Its answer is newest first; several
//   payments for one reference are a duplicate (a finding, never one picked silently). The lookup
//   is a beta endpoint that Checkout.com's published reference does not list yet (README.md).
//   Checkout.com has no listing by time window for the statement (its reports are files).
// - Amounts are integers in Checkout.com's own exponents: 0 for ISK, JPY, KRW..., 3 for BHD, KWD,
//   ... (whose last digit must be 0), 2 for every other currency, CLP included (ISO 4217 says 0).
// - We charge a stored instrument (`source` {type "id", id "src_..."}) as a merchant-initiated
//   payment with automatic capture, so Authorized is the charge we asked for.
// - A decline is a 201 with `approved: false` and status Declined (the card was tried); a 422
//   `request_invalid` and 401/403 mean nothing was executed: rejected (an integration fault, the
//   payment goes to review). A 429 is "too many requests or duplicate request detected", which
//   does not say whether the duplicate was our earlier request: unknown.
// - Refunds: POST /payments/{id}/refunds {amount, reference, metadata} under the refund's own
//   operation ID as Cko-Idempotency-Key, answered 202 {action_id, reference}: accepted, processed
//   asynchronously, so pending. Only a 2xx is kept under the key here too: after a 5xx, a timeout
//   or any other non-2xx the refund is unknown and never re-sent without a lookup. 403 is "Refund
//   not allowed" (declined); 404 the payment not found and 422 an invalid request (rejected). A
//   refund is found in GET /payments/{id}/actions: the Refund action whose `reference` is our
//   operation ID (`approved` decides; absent: pending).
// - Authorise, then capture or void (README.md, "Captures and voids"): an order that only
//   authorises is created with `capture: false`, and its Authorized is succeeded (the amount
//   held). POST /payments/{id}/captures {amount, capture_type Final/NonFinal, reference} and
//   /voids {reference}, each under its own operation ID as Cko-Idempotency-Key, are answered 202
//   {action_id}: accepted, processed asynchronously, so pending until the payment's actions show
//   the Capture or Void action with our reference approved (or not). Several partial captures of
//   one authorisation (NonFinal; Final voids what is left) for Amex, Discover, Mastercard and
//   Visa; at most 150 partial actions (captures and refunds) a payment. Checkout.com voids an
//   authorisation not captured within 7 days. As for refunds, only a 2xx is kept under the key:
//   after any other answer a capture or void is unknown and never re-sent without a lookup.

#include "providers/adapter_support.hpp"
#include "providers/config.hpp"
#include "providers/descriptor.hpp"
#include "providers/provider.hpp"

#include <chrono>
#include <functional>
#include <optional>

namespace payrecon::providers::checkout {

inline constexpr std::size_t k_max_key_length = 50; // `reference`'s limit; the header sets none
// The lookup reads at most this many pages of 100 payments for one reference.
inline constexpr int k_lookup_page_size = 100;
inline constexpr int k_max_lookup_pages = 10;

// Kind "checkout": a secret key (api_key_env) sent as a bearer token; Cko-Idempotency-Key; lookup
// by reference, no listing; payment status words; one setting of its own, parsed here
// (descriptor.cpp): "processing_channel_id", required.
const ProviderDescriptor& descriptor();

// Verifies `Cko-Signature` (hex HMAC-SHA256 of the body) with any of `secrets` (the webhook's
// signature keys) and reads the payment events (webhook.cpp).
std::unique_ptr<WebhookVerifier> webhook_verifier(std::vector<Secret> secrets);

// What a checkout provider's configuration says beyond the common settings.
struct Settings : ProviderSettings {
    // `processing_channel_id`, sent in every payment body: "pc_" and 26 characters.
    std::string processing_channel_id;
};

// Settings for ProviderConfig::settings, for code that builds a configuration itself (tests).
std::shared_ptr<const ProviderSettings> settings(std::string processing_channel_id);

// The checkout settings of `config`. Throws ConfigError if it has none.
const Settings& settings_of(const ProviderConfig& config);

class CheckoutAdapter : public Provider {
public:
    CheckoutAdapter(const ProviderConfig& config, SendFunction send);

    const std::string& name() const override { return m_name; }
    std::string_view kind() const override { return "checkout"; }
    const Capabilities& capabilities() const override { return m_caps; }

    SubmitResult submit(const PaymentOrder& order) override;
    SubmitResult refund(const RefundOrder& order) override;
    // GET /payments/{id}/actions, the Refund actions carrying our reference: the oldest is the
    // refund, later ones (a key re-executed after a non-2xx) duplicates.
    LookupResult lookup_refund(const RefundOrder& order) override;
    // GET /payments?reference=<operation ID>, paged by `skip`; failed past k_max_lookup_pages and
    // on any page that fails.
    LookupResult lookup(const PaymentOrder& order) override;
    // POST /payments/{payment_reference}/captures and /voids under the operation's own ID as
    // Cko-Idempotency-Key, by the order's deadline.
    SubmitResult capture(const AuthorizationOrder& order) override;
    SubmitResult void_authorization(const AuthorizationOrder& order) override;
    // GET /payments/{payment_reference}/actions: the Capture (or Void) action carrying our
    // reference, the oldest one if the key executed more than once.
    LookupResult lookup_capture(const AuthorizationOrder& order) override;
    // Always not ok (`list_not_supported`).
    ListPage list(const TimeWindow& window, const std::optional<std::string>& cursor) override;

private:
    // A call that moves money: POST `path` with the JSON `body` under the operation's
    // Cko-Idempotency-Key (when keys are honoured), by `deadline`, its answer read by `interpret`.
    SubmitResult post_json(const std::string& path, const std::string& body,
                           const std::string& operation_id,
                           const std::optional<std::chrono::steady_clock::time_point>& deadline,
                           const std::function<SubmitResult(int, std::string_view)>& interpret);

    std::string m_name;
    Settings m_settings;
    Capabilities m_caps;
    ProviderClient m_client;
};

} // namespace payrecon::providers::checkout
