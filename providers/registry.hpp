#pragma once
// Every adapter this build has, in one explicit list (no self-registering statics).

#include "core/provider_catalog.hpp"
#include "providers/config.hpp"
#include "providers/provider.hpp"

#include <memory>

namespace payrecon::providers {

// A provider client for `config`, with its own HTTP transport (use it from one thread at a time).
// Throws ConfigError for a kind this build does not have.
std::unique_ptr<Provider> create_provider(const ProviderConfig& config);

// What an adapter kind can carry of a payment (each adapter declares its own). Throws ConfigError
// for a kind this build does not have.
const CarryLimits& carry_limits_of(std::string_view kind);

// The configured providers as the intake checks requests against them, each with its kind's
// limits. Throws ConfigError for a kind this build does not have.
ProviderCatalog provider_catalog(const Config& config);

} // namespace payrecon::providers
