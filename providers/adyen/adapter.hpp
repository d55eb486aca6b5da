#pragma once
// Adyen, through Checkout API v71 `POST /payments`.
//
// Quirks that matter for charging once:
// - Idempotency: the `Idempotency-Key` header, at most 64 characters, remembered for at least
//   7 days (we trust the config's key_retention_h). A replay returns the first response. While
//   the first request with the key is still being processed, Adyen answers an error with
//   errorCode "704" (HTTP 422 or 409): the first may be charging -- unknown, never declined.
// - `reference` is our operation ID and is echoed as `merchantReference`; our merchant reference
//   and operation ID also go in `metadata` (at most 20 entries, keys <= 20 and values <= 80
//   characters: wire.hpp carry_limits(); so a merchant reference over 80 cannot be carried). A
//   payment that does not fit is never sent with entries left out: not_carried, declined. The
//   body needs `merchantAccount` and `returnUrl` (required by the v71 schema even for a charge
//   that never redirects the shopper; without it Adyen answers 422 14_030 "Return URL is
//   missing."), so an adyen provider's config names both.
// - We charge a stored card merchant-initiated: paymentMethod {type scheme,
//   storedPaymentMethodId}, shopperInteraction ContAuth, recurringProcessingModel
//   UnscheduledCardOnFile, shopperReference = our customer.
// - A 200 does not mean charged: `resultCode` decides (Authorised; Refused/Cancelled/Error are
//   final refusals; Received, Pending and the shopper-action codes are pending; the rest unknown).
// - No lookup by our reference and no transaction listing in the Checkout API (Adyen reports by
//   webhook and settlement report): capabilities say so, `lookup` is failed and `list` is not ok,
//   so an unknown Adyen payment goes to review (no_lookup) unless a verified notification settled
//   it first (one answered pending with a pspReference waits for its notification first, as a
//   refund does): absence can never be confirmed.
// - Amounts are in Adyen's minor units, which differ from ISO 4217 for CLP and ISK (2 vs 0) and
//   CVE and IDR (0 vs 2); see wire.hpp.
// - A refused card is a 200 with resultCode Refused (declined). A 4xx ServiceError of errorType
//   validation, configuration or security, and 401/403, mean Adyen attempted nothing: rejected
//   (an integration fault, the payment goes to review). 429 is not executed (sent again); 5xx,
//   other errors and anything unrecognised are unknown. Whether Adyen keeps a rejected request's
//   response under its Idempotency-Key is not documented: see README.md.
// - Refunds: POST /payments/{paymentPspReference}/refunds {merchantAccount, amount, reference = the
//   refund's operation ID, merchantRefundReason} under the refund's own Idempotency-Key. Adyen
//   always answers 201 `status` "received": pending, with the refund's own pspReference; the
//   outcome comes only by the REFUND notification (success true or false; REFUND_FAILED or
//   REFUNDED_REVERSED later reverse a refund that succeeded), whose merchantReference is the
//   refund's operation ID. Errors as a payment's, but a 422 refusing the refund itself (errorCode
//   137, an amount the payment has not left) is declined. No refund lookup either: an accepted
//   refund waits for its notification for the provider's notification_wait_s (default 4 h), then
//   goes to review (notification_missing). One whose answer was lost (unknown: nothing was
//   promised) is settled by its notification if the reconciler has it, else goes to review
//   (no_lookup), as an Adyen payment does.
// - Authorise, then capture or cancel (README.md, "Captures and voids"): an order that only
//   authorises is sent with additionalData {manualCapture: "true"}, and its Authorised is succeeded
//   (the amount held). POST /payments/{pspReference}/captures {merchantAccount, amount, reference}
//   and /cancels {merchantAccount, reference}, each under its own operation ID as Idempotency-Key
//   and as `reference`, are answered 201 `status` "received": pending, the outcome only by the
//   CAPTURE (success true or false; CAPTURE_FAILED later reverses a capture that succeeded) or
//   CANCELLATION notification, whose merchantReference is the operation ID. One capture a payment:
//   Adyen cancels what a partial capture leaves unless the account has multiple partial captures
//   (enabled by Adyen's support), so the descriptor offers none. An authorisation lives 7 days by
//   the card schemes' rules that payrecon counts (Adyen itself lets it lapse after 28). No lookup:
//   a received capture or cancel waits for its notification as a refund does.

#include "providers/adapter_support.hpp"
#include "providers/config.hpp"
#include "providers/descriptor.hpp"
#include "providers/provider.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace payrecon::providers::adyen {

inline constexpr const char* k_api_version = "v71";
inline constexpr std::size_t k_max_key_length = 64;
// How long an accepted refund waits for its REFUND notification by default (README.md says why).
inline constexpr std::chrono::seconds k_notification_wait{4 * 3600};
// An authorisation's life as payrecon counts it (README.md, "Captures and voids", says why 7 days).
inline constexpr std::chrono::seconds k_authorization_validity{7 * 86400};

// Kind "adyen": an API key (api_key_env) sent as X-API-Key; keys up to 64 characters; no lookup
// and no listing; resultCode words; and two settings of its own, parsed here (descriptor.cpp):
// "merchant_account" and "return_url", both required.
const ProviderDescriptor& descriptor();

// Verifies each notification item's hmacSignature with any of `secrets` (HMAC keys, hex) and reads
// the items (webhook.cpp).
std::unique_ptr<WebhookVerifier> webhook_verifier(std::vector<Secret> secrets);

// What an adyen provider's configuration says beyond the common settings.
struct Settings : ProviderSettings {
    // `merchantAccount`, sent in every payment body: 1 to 80 of A-Z, a-z, 0-9, '_', '.', '-'.
    std::string merchant_account;
    // `returnUrl`, sent in every payment body (the v71 schema requires it even when the shopper is
    // never redirected): a scheme:// URL of visible ASCII.
    std::string return_url;
};

// Settings for ProviderConfig::settings, for code that builds a configuration itself (tests).
std::shared_ptr<const ProviderSettings> settings(std::string merchant_account,
                                                 std::string return_url);

// The adyen settings of `config`. Throws ConfigError if it has none (a configuration built in code
// without them).
const Settings& settings_of(const ProviderConfig& config);

class AdyenAdapter : public Provider {
public:
    AdyenAdapter(const ProviderConfig& config, SendFunction send);

    const std::string& name() const override { return m_name; }
    std::string_view kind() const override { return "adyen"; }
    const Capabilities& capabilities() const override { return m_caps; }

    SubmitResult submit(const PaymentOrder& order) override;
    // Always failed (`lookup_not_supported`): the Checkout API cannot find a payment by reference.
    LookupResult lookup(const PaymentOrder& order) override;
    // Always not ok (`list_not_supported`).
    ListPage list(const TimeWindow& window, const std::optional<std::string>& cursor) override;

    // POST /v71/payments/{pspReference}/refunds under the refund's own Idempotency-Key: pending
    // when Adyen received it (wire.hpp interpret_refund).
    SubmitResult refund(const RefundOrder& order) override;
    // Always failed (`lookup_not_supported`): Adyen cannot find a refund by our reference.
    LookupResult lookup_refund(const RefundOrder& order) override;

    // POST /v71/payments/{pspReference}/captures and /cancels under the operation's own
    // Idempotency-Key: pending when Adyen received it (wire.hpp interpret_authorization_action).
    SubmitResult capture(const AuthorizationOrder& order) override;
    SubmitResult void_authorization(const AuthorizationOrder& order) override;
    // Always failed (`lookup_not_supported`): Adyen cannot find a capture or a cancel by our
    // reference; its CAPTURE or CANCELLATION notification tells the outcome.
    LookupResult lookup_capture(const AuthorizationOrder& order) override;

private:
    // A capture or a cancel (`action` "/captures" or "/cancels") with `body` (nullopt: not
    // expressible), checked as every modification before it is sent.
    SubmitResult modify(const AuthorizationOrder& order, std::string_view action,
                        const std::optional<std::string>& body);

    // POSTs `body` as JSON to /v71`path` under `operation_id` as the Idempotency-Key: the one
    // request that moves money, for the payment and the refund.
    SubmitResult post_json(const std::string& path, const std::string& body,
                           const std::string& operation_id,
                           const std::optional<std::chrono::steady_clock::time_point>& deadline,
                           const std::function<SubmitResult(int, std::string_view)>& interpret);

    std::string m_name;
    Settings m_settings;
    Capabilities m_caps;
    ProviderClient m_client;
};

} // namespace payrecon::providers::adyen
