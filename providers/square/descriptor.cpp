// Kind "square": what the registry, the configuration and the conformance suite know of it.
#include "providers/square/adapter.hpp"
#include "providers/square/wire.hpp"

namespace payrecon::providers::square {

const ProviderDescriptor& descriptor() {
    static const ProviderDescriptor k_descriptor{
        .kind = "square",
        .display_name = "Square",
        .reference_name = "payment ID",
        // The Dashboard's address depends on the account: set dashboard_url for one.
        .dashboard_url = "",
        .credentials = {CredentialKind::api_key},
        .settings = {},
        .parse_settings = nullptr,
        // idempotency_key up to 45 characters; lookup by listing a window; listing; a refund
        // found among its payment's refund_ids; authorisations (autocomplete false) completed
        // once and whole, or canceled, 7 days (card not present), found by reading the payment.
        .api = {.max_key_length = k_max_key_length,
                .lookup = true,
                .list = true,
                .list_refunds = true,
                .refund_lookup = true,
                .manual_capture = true,
                .multiple_captures = false,
                .authorization_validity = std::chrono::hours(7 * 24),
                .capture_lookup = true},
        .carry_limits = &carry_limits,
        // The document lists the statuses in prose, not as an enum.
        .statuses = {.contract_pointer =
                         "/components/schemas/Payment/properties/status/description",
                     .map = &map_status,
                     .rules = rules_list(status_rules())},
        .secret_patterns = {R"(EAAA[A-Za-z0-9_-]{8,})", R"(sq0(atp|csp)-[A-Za-z0-9_-]{8,})"},
        .create = [](const ProviderConfig& config, SendFunction send) -> std::unique_ptr<Provider> {
            return std::make_unique<SquareAdapter>(config, std::move(send));
        },
        .webhook_verifier =
            [](std::vector<Secret> secrets, const ProviderConfig& config) {
                return webhook_verifier(std::move(secrets), config.webhook_url);
            },
        .webhook_url_signed = true,
        .oauth2_token_path = "",
    };
    return k_descriptor;
}

} // namespace payrecon::providers::square
