#pragma once
// The provider configuration: a JSON file (--config or PAYRECON_CONFIG) naming each provider
// account by key. Credentials never sit in the file: it names the environment variables that hold
// them (providers/credentials.hpp). A bad file is one ConfigError naming the field and what to
// write instead. The kinds, and the settings only one kind takes, come from the registry: each
// kind's descriptor parses its own (providers/<kind>/).
//
// {"providers": {"stripe": {"kind": "stripe", "base_url": "https://api.stripe.com",
//   "api_key_env": "STRIPE_API_KEY", "connect_timeout_ms": 2000, "timeout_ms": 10000,
//   "settle_delay_s": 120, "key_retention_h": 24, "amount_tolerance_minor": 0,
//   "notification_wait_s": 14400,
//   "capabilities": {"lookup": false}},
//   "adyen": {"kind": "adyen", "base_url": "https://checkout-test.adyen.com",
//   "api_key_env": "ADYEN_API_KEY", "merchant_account": "AcmeShopECOM",
//   "return_url": "https://shop.example.com/checkout/return"}}}

#include "providers/credentials.hpp"
#include "providers/provider.hpp"

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon::providers {

// Optional per-account overrides of what the adapter kind can do (a merchant account without
// search, a provider that does not honour idempotency keys).
struct CapabilityOverrides {
    std::optional<bool> idempotency_keys;
    std::optional<bool> lookup;
    std::optional<bool> list;
};

// The settings only one kind takes, as its descriptor parsed them (adyen::Settings: the merchant
// account and return URL). The kind's folder defines the derived type and reads it back.
struct ProviderSettings {
    virtual ~ProviderSettings() = default;
};

struct ProviderConfig {
    std::string name;     // the key in "providers": [a-z0-9_-]{1,32}; what payments name
    std::string kind;     // the adapter: one the registry lists
    std::string base_url; // http(s)://host[:port]; plain http only for loopback
    // Read from the environment variables the entry names when the config is loaded (empty
    // secrets with ApiKeys::not_read). An api_key_env entry is an ApiKey.
    Credentials credentials;
    std::chrono::milliseconds connect_timeout{2000};
    std::chrono::milliseconds timeout{10000};
    std::chrono::seconds settle_delay{120}; // wait this long after an attempt before a lookup
    std::chrono::hours key_retention{24};   // how long the provider remembers idempotency keys
    // `notification_wait_s`: how long an accepted operation that cannot be looked up waits for the
    // provider's notification before review (Capabilities::notification_wait); unset: the kind's
    // default (ApiCapabilities::notification_wait).
    std::optional<std::chrono::seconds> notification_wait;
    // Statement diff: our amount and the provider's differ by at most this much and still match
    // (a provider that rounds converted amounts); 0 by default.
    long long amount_tolerance_minor = 0;
    CapabilityOverrides overrides;
    // The provider's dashboard page of a charge, "{reference}" standing for its reference; empty
    // when the file gives none (providers::dashboard_url() then falls back to the kind's).
    std::string dashboard_url;
    // The environment variables holding the secrets this account's webhooks are signed with
    // (`webhook_secret_env`: one name, or several while a secret is rotated). Read only by
    // `serve`, which receives the webhooks (providers::webhook_verifiers()).
    std::vector<std::string> webhook_secret_envs;
    // `webhook_url`: the address the provider posts its notifications to, exactly as registered
    // with it (Square signs it with the body); empty when the file gives none.
    std::string webhook_url;
    // The kind's own settings; null for a kind that has none.
    std::shared_ptr<const ProviderSettings> settings;
};

struct Config {
    std::map<std::string, ProviderConfig> providers;
    std::filesystem::path source; // the file it came from
};

// An adapter's capabilities for one configured account: what its API offers (`api`, from its
// descriptor) with the account's key retention and settle delay, and the overrides, which can
// switch a capability off -- never on where the API has none.
Capabilities configured_capabilities(const ProviderConfig& config, const ApiCapabilities& api);

// The longest one call to this provider can take: its connect timeout plus its total timeout.
std::chrono::milliseconds worst_case_call(const ProviderConfig& config);

// Whether loading a configuration reads the credentials. A process that never calls a provider
// (`serve`, `payments create`: they only need the provider names) does not hold them.
enum class ApiKeys { read, not_read };

// Parses `text` (from `source`, for messages). `environment` looks up the variables the credentials
// name (nullptr if unset); with ApiKeys::not_read they are neither read nor required (the secrets
// stay empty), their names are still checked. Throws ConfigError naming the field
// ("providers.stripe.timeout_ms: ...").
Config parse_config(std::string_view text, const std::filesystem::path& source,
                    const char* (*environment)(const char*) = nullptr,
                    ApiKeys keys = ApiKeys::read);

// Reads and parses the file at `path`. Throws ConfigError if it cannot be read or is invalid.
Config load_config(const std::filesystem::path& path, ApiKeys keys = ApiKeys::read);

} // namespace payrecon::providers
