// Kind "checkout": what the registry, the configuration and the conformance suite know of it, and
// the parser of its own setting.
#include "core/errors.hpp"
#include "providers/checkout/adapter.hpp"
#include "providers/checkout/wire.hpp"

#include <regex>

namespace payrecon::providers::checkout {
namespace {

std::shared_ptr<const ProviderSettings> parse_settings(const SettingsInput& input) {
    // The processing channel's ID as Checkout.com's Dashboard shows it: "pc_" and 26 characters of
    // lower-case base32 (the schema's example is an older "mer_" ID; both are taken).
    static const std::regex k_channel("^(pc|mer)_[a-z0-9]{26}$");
    auto out = std::make_shared<Settings>();
    const auto channel = input.string("processing_channel_id");
    if (!channel || !std::regex_match(*channel, k_channel)) {
        input.bad("processing_channel_id",
                  "is required for kind checkout: the processing channel payments are made on, "
                  "\"pc_\" and 26 lower-case letters and digits",
                  "copy it from Checkout.com's Dashboard (Settings, Processing channels), e.g. "
                  "\"processing_channel_id\": \"pc_q4dbxom5jbgudnjzjpz7j2z6uq\"");
    }
    out->processing_channel_id = *channel;
    return out;
}

} // namespace

std::shared_ptr<const ProviderSettings> settings(std::string processing_channel_id) {
    auto out = std::make_shared<Settings>();
    out->processing_channel_id = std::move(processing_channel_id);
    return out;
}

const Settings& settings_of(const ProviderConfig& config) {
    const auto* s = dynamic_cast<const Settings*>(config.settings.get());
    if (s == nullptr) {
        throw ConfigError("provider " + config.name +
                              ": a checkout provider needs its processing_channel_id",
                          "name it in its entry of the provider configuration");
    }
    return *s;
}

const ProviderDescriptor& descriptor() {
    static const ProviderDescriptor k_descriptor{
        .kind = "checkout",
        .display_name = "Checkout.com",
        .reference_name = "payment ID (pay_...)",
        // The Dashboard's address of one payment is not published: set dashboard_url for one.
        .dashboard_url = "",
        .credentials = {CredentialKind::api_key},
        .settings = {{"processing_channel_id", "pc_q4dbxom5jbgudnjzjpz7j2z6uq"}},
        .parse_settings = &parse_settings,
        // Cko-Idempotency-Key (our operation ID, also `reference`: at most 50 characters); lookup
        // by reference; no listing by time window. Authorise with `capture: false`, capture in
        // several parts (NonFinal: Amex, Discover, Mastercard, Visa), found again in the payment's
        // actions; an authorisation not captured within 7 days is voided.
        .api = {.max_key_length = k_max_key_length,
                .lookup = true,
                .list = false,
                .refund_lookup = true,
                .manual_capture = true,
                .multiple_captures = true,
                .authorization_validity = std::chrono::days(7),
                .capture_lookup = true},
        .carry_limits = &carry_limits,
        .statuses = {.contract_pointer =
                         "/components/schemas/PaymentDetails/properties/status/enum",
                     .map = &map_status,
                     .rules = rules_list(status_rules())},
        .secret_patterns = {R"(sk_(sbox_)?[a-z0-9]{20,})", R"(sk_(test_)?[0-9a-f-]{30,})"},
        .create = [](const ProviderConfig& config, SendFunction send) -> std::unique_ptr<Provider> {
            return std::make_unique<CheckoutAdapter>(config, std::move(send));
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

} // namespace payrecon::providers::checkout
