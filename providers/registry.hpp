#pragma once
// Every adapter this build has, in one explicit list (no self-registering statics).

#include "providers/config.hpp"
#include "providers/provider.hpp"

#include <memory>

namespace payrecon::providers {

// A provider client for `config`, with its own HTTP transport (use it from one thread at a time).
// Throws ConfigError for a kind this build does not have.
std::unique_ptr<Provider> create_provider(const ProviderConfig& config);

} // namespace payrecon::providers
