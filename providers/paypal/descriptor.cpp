// Kind "paypal": what the registry, the configuration and the conformance suite know of it, and the
// parser of what it reads of its entry.
#include "providers/paypal/adapter.hpp"
#include "providers/paypal/wire.hpp"

namespace payrecon::providers::paypal {
namespace {

// PayPal has no setting of its own; what it reads is the common key_retention_h, whose default
// (24 h) is not PayPal's: "The server stores keys for 6 hours. The API callers can request the
// times to up to 72 hours by speaking to their Account Manager" (the Orders v2 document). Absent:
// 6 h. Over 72: refused, naming the field. (The common parser has checked it is an integer of 1 to
// 720.) A settle_delay_s below PayPal's 3 h search delay is raised to it by the adapter.
std::shared_ptr<const ProviderSettings> parse_settings(const SettingsInput& input) {
    auto out = std::make_shared<Settings>();
    if (const nlohmann::json* given = input.find("key_retention_h");
        given != nullptr && given->is_number_integer()) {
        const auto hours = given->get<long long>();
        if (hours > k_max_key_retention.count()) {
            input.bad("key_retention_h",
                      "PayPal keeps a PayPal-Request-Id for 6 hours, or up to 72 hours where the "
                      "account manager extended it; not " +
                          std::to_string(hours),
                      "leave it out for PayPal's 6 h, or give the hours PayPal confirmed for the "
                      "account (at most 72)");
        }
        out->key_retention = std::chrono::hours(hours);
    }
    return out;
}

} // namespace

std::shared_ptr<const ProviderSettings> settings(std::chrono::hours key_retention) {
    auto out = std::make_shared<Settings>();
    out->key_retention = key_retention;
    return out;
}

Settings settings_of(const ProviderConfig& config) {
    if (const auto* s = dynamic_cast<const Settings*>(config.settings.get())) {
        return *s;
    }
    return Settings{};
}

const ProviderDescriptor& descriptor() {
    static const ProviderDescriptor k_descriptor{
        .kind = "paypal",
        .display_name = "PayPal",
        .reference_name = "capture ID (authorization ID if it only authorised; or order ID)",
        // The transaction's page for an account on PayPal's live site; a sandbox account's is on
        // www.sandbox.paypal.com: set dashboard_url for one.
        .dashboard_url = "https://www.paypal.com/activity/payment/{reference}",
        .credentials = {CredentialKind::oauth2_client_credentials},
        .settings = {},
        .parse_settings = &parse_settings,
        // PayPal-Request-Id up to 108 characters; lookup and listing through Transaction Search;
        // a refund found among its capture's order's refunds. Authorise (intent AUTHORIZE), then
        // capture in parts (final_capture) or void; an authorization is read by its ID. It is
        // valid 29 days -- the honor period's 3 days are when funds are surest, not when it lapses
        // (README.md, "Captures and voids").
        .api = {.max_key_length = k_max_key_length,
                .lookup = true,
                .list = true,
                .list_refunds = true,
                .refund_lookup = true,
                .manual_capture = true,
                .multiple_captures = true,
                .authorization_validity = std::chrono::days(29),
                .capture_lookup = true},
        .carry_limits = &carry_limits,
        // The payment object is the capture: its status decides (a COMPLETED order can hold a
        // DECLINED capture).
        .statuses = {.contract_pointer =
                         "/components/schemas/capture_status/properties/status/enum",
                     .map = &map_capture_status,
                     .rules = rules_list(capture_status_rules())},
        // Access tokens ("A21AA..."), and REST app client IDs and secrets (80 characters).
        .secret_patterns = {R"(A21AA[A-Za-z0-9_-]{20,})", R"(\b[AE][A-Za-z0-9_-]{79}\b)"},
        .create = [](const ProviderConfig& config, SendFunction send) -> std::unique_ptr<Provider> {
            return std::make_unique<PaypalAdapter>(config, std::move(send));
        },
        // PayPal's webhooks are verified by calling PayPal (verify-webhook-signature) or with its
        // certificate: not read yet.
        .webhook_verifier = nullptr,
        .webhook_url_signed = false,
        // "client_id_env" and "client_secret_env" beside base_url: the token from
        // POST /v1/oauth2/token on the same host.
        .oauth2_token_path = "/v1/oauth2/token",
    };
    return k_descriptor;
}

} // namespace payrecon::providers::paypal
