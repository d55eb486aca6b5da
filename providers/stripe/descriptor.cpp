// Kind "stripe": what the registry, the configuration and the conformance suite know of it.
#include "providers/stripe/adapter.hpp"
#include "providers/stripe/wire.hpp"

namespace payrecon::providers::stripe {

const ProviderDescriptor& descriptor() {
    static const ProviderDescriptor k_descriptor{
        .kind = "stripe",
        .display_name = "Stripe",
        .reference_name = "pi_...",
        // A test-mode account's pages are under /test/payments/: set dashboard_url for one.
        .dashboard_url = "https://dashboard.stripe.com/payments/{reference}",
        .credentials = {CredentialKind::api_key},
        .settings = {},
        .parse_settings = nullptr,
        // Idempotency-Key up to 255 characters; Search finds by metadata, List by created window.
        // Authorise with capture_method=manual, capture once (multicapture is an opt-in feature
        // payrecon does not use), found again by reading the PaymentIntent. Stripe cancels an
        // uncaptured PaymentIntent after 7 days by default; some cards' authorisations end sooner
        // (Visa merchant-initiated: 4 days 18 hours -- README.md).
        .api = {.max_key_length = 255,
                .lookup = true,
                .list = true,
                .list_refunds = true,
                .refund_lookup = true,
                .manual_capture = true,
                .multiple_captures = false,
                .authorization_validity = std::chrono::days(7),
                .capture_lookup = true},
        .carry_limits = &carry_limits,
        .statuses = {.contract_pointer =
                         "/components/schemas/payment_intent/properties/status/enum",
                     .map = &map_status,
                     .rules = rules_list(status_rules())},
        .secret_patterns = {R"((sk|rk)_(live|test)_[A-Za-z0-9]{8,})", R"(whsec_[A-Za-z0-9]{8,})"},
        .create = [](const ProviderConfig& config, SendFunction send) -> std::unique_ptr<Provider> {
            return std::make_unique<StripeAdapter>(config, std::move(send));
        },
        .webhook_verifier =
            [](std::vector<Secret> secrets, const ProviderConfig&) {
                return webhook_verifier(std::move(secrets));
            },
        .webhook_url_signed = false,
        .oauth2_token_path = "",
    };
    return k_descriptor;
}

} // namespace payrecon::providers::stripe
