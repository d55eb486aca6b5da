#pragma once
// What a kind of provider is, in one place. Each folder providers/<kind>/ supplies one
// ProviderDescriptor (`descriptor()`, declared in its adapter.hpp), and providers/registry.cpp
// lists them, one line each. Everything that names kinds reads them from there: the
// configuration's validation and its messages, the engine's and the CLI's messages, the intake's
// carry limits, and the conformance suite (tests/providers/test_conformance.cpp), which runs for
// every registered kind.

#include "core/carry_limits.hpp"
#include "core/webhook.hpp"
#include "providers/adapter_support.hpp"
#include "providers/config.hpp"
#include "providers/credentials.hpp"
#include "providers/provider.hpp"
#include "providers/status_rules.hpp"

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon::providers {

// One setting only this kind takes, in its provider's configuration entry.
struct SettingSpec {
    std::string_view name;    // the member of the entry: "merchant_account"
    std::string_view example; // a valid value, for documentation and the conformance suite
};

// A provider's entry of the configuration file as the kind's settings parser sees it: its
// members, and bad(), which throws the ConfigError that names the field
// ("payrecon.json: providers.adyen.return_url: is required for kind adyen ...").
class SettingsInput {
public:
    SettingsInput(const nlohmann::json& entry, std::string path, std::filesystem::path source)
        : m_entry(entry), m_path(std::move(path)), m_source(std::move(source)) {}

    // The member `field`, or nullptr if the entry has none.
    const nlohmann::json* find(std::string_view field) const;
    // The member `field` if it is a string, else nullopt.
    std::optional<std::string> string(std::string_view field) const;
    // Throws ConfigError: "<source>: <path>.<field>: <what>", with `hint` saying what to write.
    [[noreturn]] void bad(std::string_view field, const std::string& what,
                          const std::string& hint) const;

private:
    const nlohmann::json& m_entry;
    std::string m_path; // "providers.adyen"
    std::filesystem::path m_source;
};

// Every status word the provider's published document lists for its payment object, each mapped
// on purpose: the table in the kind's wire.cpp, which `map` reads (providers/status_rules.hpp). The
// conformance suite checks `rules` against the contract (the words at `contract_pointer`: an enum,
// or prose that names them) and against `map`.
struct StatusTable {
    std::string_view contract_pointer; // in tests/providers/contracts/<kind>.json
    Outcome (*map)(std::string_view word) = nullptr;
    std::vector<StatusRule> rules;
};

struct ProviderDescriptor {
    std::string_view kind;           // the configuration's "kind" and the folder's name: "stripe"
    std::string_view display_name;   // for people: "Stripe"
    std::string_view reference_name; // the provider's ID of a charge: "pi_...", "pspReference"
    // The provider's dashboard page of a charge, "{reference}" standing for its reference, for an
    // account on the provider's own (https) API; empty where the page's address depends on the
    // account. The configuration's dashboard_url overrides it (providers::dashboard_url()).
    std::string_view dashboard_url;

    // The credentials it accepts; the first is the one its documentation shows.
    std::vector<CredentialKind> credentials;

    // The settings only this kind takes, and their parser (nullptr when there are none): it reads
    // them with `input`, refuses a bad one with input.bad(), and returns them for
    // ProviderConfig::settings. The configuration refuses these fields for every other kind.
    std::vector<SettingSpec> settings;
    std::shared_ptr<const ProviderSettings> (*parse_settings)(const SettingsInput& input) = nullptr;

    ApiCapabilities api;                            // what its API offers
    const CarryLimits& (*carry_limits)() = nullptr; // what it can carry of a payment (wire.hpp)
    StatusTable statuses;                           // its payment object's status words
    // What its secrets look like (regular expressions, ECMAScript): recorded fixtures must hold
    // none of them.
    std::vector<std::string_view> secret_patterns;

    // An adapter for `config` that sends through `send`.
    std::unique_ptr<Provider> (*create)(const ProviderConfig& config, SendFunction send) = nullptr;

    // The verifier of this kind's signed webhooks, with the account's secrets (several during a
    // rotation) and its configuration (the notification URL, for a kind that signs it); nullptr
    // for a kind whose webhooks payrecon does not read yet.
    std::unique_ptr<WebhookVerifier> (*webhook_verifier)(std::vector<Secret> secrets,
                                                         const ProviderConfig& config) = nullptr;
    // True if its notifications are signed over the notification URL: `webhook_url` is then
    // required with `webhook_secret_env`.
    bool webhook_url_signed = false;
    // Where the provider issues OAuth2 access tokens, on its base_url ("/v1/oauth2/token"), for a
    // kind that takes client credentials: an entry may then name them flat, `client_id_env` and
    // `client_secret_env`, beside `base_url` (the token URL is base_url + this path). Empty: only
    // the `credentials` object, with its `token_url`.
    std::string_view oauth2_token_path;
};

} // namespace payrecon::providers
