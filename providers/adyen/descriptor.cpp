// Kind "adyen": what the registry, the configuration and the conformance suite know of it, and the
// parser of its own settings.
#include "core/errors.hpp"
#include "providers/adyen/adapter.hpp"
#include "providers/adyen/wire.hpp"

#include <regex>

namespace payrecon::providers::adyen {
namespace {

std::shared_ptr<const ProviderSettings> parse_settings(const SettingsInput& input) {
    static const std::regex k_merchant_account("^[A-Za-z0-9_.-]{1,80}$");
    // Adyen's schema: "The URL to return to in case of a redirection", required on every
    // /payments request; it recommends at most 1024 characters, URL-encoded.
    static const std::regex k_return_url("^[A-Za-z][A-Za-z0-9+.-]*://[\\x21-\\x7e]{1,1000}$");
    auto out = std::make_shared<Settings>();
    const auto merchant_account = input.string("merchant_account");
    if (!merchant_account || !std::regex_match(*merchant_account, k_merchant_account)) {
        input.bad("merchant_account",
                  "is required for kind adyen: the merchant account's name (1 to 80 of A-Z, a-z, "
                  "0-9, '_', '.', '-')",
                  "copy it from Adyen's Customer Area, e.g. \"merchant_account\": "
                  "\"AcmeShopECOM\"");
    }
    out->merchant_account = *merchant_account;
    const auto return_url = input.string("return_url");
    if (!return_url || !std::regex_match(*return_url, k_return_url)) {
        input.bad("return_url",
                  "is required for kind adyen: the URL a redirected shopper returns to (Adyen "
                  "requires returnUrl on every payment, and refuses one without it with 422 "
                  "14_030), a scheme:// URL of visible ASCII, at most 1024 characters",
                  "e.g. \"return_url\": \"https://shop.example.com/checkout/return\"");
    }
    out->return_url = *return_url;
    return out;
}

} // namespace

std::shared_ptr<const ProviderSettings> settings(std::string merchant_account,
                                                 std::string return_url) {
    auto out = std::make_shared<Settings>();
    out->merchant_account = std::move(merchant_account);
    out->return_url = std::move(return_url);
    return out;
}

const Settings& settings_of(const ProviderConfig& config) {
    const auto* s = dynamic_cast<const Settings*>(config.settings.get());
    if (s == nullptr) {
        throw ConfigError("provider " + config.name +
                              ": an adyen provider needs its merchant_account and return_url",
                          "name both in its entry of the provider configuration");
    }
    return *s;
}

const ProviderDescriptor& descriptor() {
    static const ProviderDescriptor k_descriptor{
        .kind = "adyen",
        .display_name = "Adyen",
        .reference_name = "pspReference",
        // The Customer Area's address depends on the account: set dashboard_url for one.
        .dashboard_url = "",
        .credentials = {CredentialKind::api_key},
        .settings = {{"merchant_account", "AcmeShopECOM"},
                     {"return_url", "https://shop.example.com/checkout/return"}},
        .parse_settings = &parse_settings,
        // Idempotency-Key up to 64 characters; the Checkout API cannot look up nor list, nor find
        // a refund: an accepted refund waits for its REFUND notification (README.md, "Refunds").
        // It authorises only (manualCapture), captures once (multiple partial captures are an
        // account setting of Adyen's support), and finds no capture or cancel either: they wait
        // for their CAPTURE and CANCELLATION notifications (README.md, "Captures and voids").
        .api = {.max_key_length = k_max_key_length,
                .lookup = false,
                .list = false,
                .refund_lookup = false,
                .manual_capture = true,
                .multiple_captures = false,
                .authorization_validity = k_authorization_validity,
                .capture_lookup = false,
                .notification_wait = k_notification_wait},
        .carry_limits = &carry_limits,
        .statuses = {.contract_pointer =
                         "/components/schemas/PaymentResponse/properties/resultCode/enum",
                     .map = &map_result_code,
                     .rules = rules_list(result_code_rules())},
        .secret_patterns = {R"(AQE[A-Za-z0-9+/=_-]{20,})"},
        .create = [](const ProviderConfig& config, SendFunction send) -> std::unique_ptr<Provider> {
            return std::make_unique<AdyenAdapter>(config, std::move(send));
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

} // namespace payrecon::providers::adyen
