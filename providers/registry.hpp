#pragma once
// Every provider kind this build has, in one explicit list: registry.cpp names each kind's
// descriptor, one line per kind (no self-registering statics: the linker would drop them). Kinds,
// and every message that names them, come from here.

#include "core/provider_catalog.hpp"
#include "providers/config.hpp"
#include "providers/descriptor.hpp"
#include "providers/provider.hpp"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon::providers {

// The registered kinds' descriptors, in the registry's order (then any a test added).
const std::vector<const ProviderDescriptor*>& registered();

// The registered kinds' names, in the same order.
const std::vector<std::string_view>& known_kinds();

// The descriptor of `kind`, or nullptr if no such kind is registered.
const ProviderDescriptor* find_descriptor(std::string_view kind);

// The descriptor of `kind`. Throws ConfigError naming the kinds there are if it is not registered.
const ProviderDescriptor& descriptor_of(std::string_view kind);

// The registered kinds for which `which` holds (every kind without it), comma-separated for
// messages: "stripe, square"; "none" when there is none.
std::string kinds_where(const std::function<bool(const ProviderDescriptor&)>& which = {});

// A provider client for `config`, with its own HTTP transport (use it from one thread at a time).
// Throws ConfigError for a kind this build does not have.
std::unique_ptr<Provider> create_provider(const ProviderConfig& config);

// What an adapter kind can carry of a payment (each adapter declares its own). Throws ConfigError
// for a kind this build does not have.
const CarryLimits& carry_limits_of(std::string_view kind);

// The configured providers as the intake checks requests against them, each with its kind's
// limits. Throws ConfigError for a kind this build does not have.
ProviderCatalog provider_catalog(const Config& config);

// The dashboard page template of `config`'s charges: its dashboard_url, else its kind's default
// for an account on the provider's own (https) API; empty if neither applies (a loopback fake).
std::string dashboard_url(const ProviderConfig& config);

// `url_template` with "{reference}" replaced by `reference` percent-encoded; nullopt when the
// template is empty or has no "{reference}".
std::optional<std::string> dashboard_link(std::string_view url_template,
                                          std::string_view reference);

// The webhook verifier of every configured provider that names webhook_secret_env, by provider
// name, with the secrets read from the environment (`environment`; getenv when null). Throws
// ConfigError naming the variable if one is unset or empty.
std::map<std::string, std::shared_ptr<const WebhookVerifier>>
webhook_verifiers(const Config& config, const char* (*environment)(const char*) = nullptr);

namespace test_hook {

// Adds `descriptor` to the registry until destroyed: a test's extra kind (a fourth provider that
// is not part of payrecon). Tests only: construct and destroy it while no other thread reads the
// registry. The descriptor must outlive it. Throws std::invalid_argument if the kind is taken.
class ScopedRegistration {
public:
    explicit ScopedRegistration(const ProviderDescriptor& descriptor);
    ~ScopedRegistration();
    ScopedRegistration(const ScopedRegistration&) = delete;
    ScopedRegistration& operator=(const ScopedRegistration&) = delete;

private:
    const ProviderDescriptor* m_descriptor;
};

} // namespace test_hook

} // namespace payrecon::providers
