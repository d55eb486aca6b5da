#pragma once
// Every adapter this build has, in one explicit list (no self-registering statics).

#include "core/intake.hpp"
#include "providers/config.hpp"
#include "providers/provider.hpp"

#include <memory>

namespace payrecon::providers {

// A provider client for `config`, with its own HTTP transport (use it from one thread at a time).
// Throws ConfigError for a kind this build does not have.
std::unique_ptr<Provider> create_provider(const ProviderConfig& config);

// The configured providers as the intake checks requests against them. Throws ConfigError for a
// kind this build does not have.
ProviderCatalog provider_catalog(const Config& config);

} // namespace payrecon::providers
