#pragma once
// Internal to providers/config*.cpp: the credentials of one provider entry of the configuration
// file -- an API key, basic or OAuth2 client credentials, each secret named by the environment
// variable that holds it (never in the file) -- checked field by field and read.

#include "providers/config.hpp"
#include "providers/descriptor.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace payrecon::providers::config_fields {

// The credentials of `entry` (at `path` in `source`) for a provider of descriptor `d`, their
// secrets read with `environment` (not read with ApiKeys::not_read). Throws ConfigError naming the
// field that is wrong.
Credentials read_credentials(const nlohmann::json& entry, const std::filesystem::path& source,
                             const std::string& path, const char* (*environment)(const char*),
                             ApiKeys keys, const ProviderDescriptor& d);

// The environment variables an entry's credentials name, as far as they can be read, for a hint
// that must not wait for the credentials' own validation: " (STRIPE_API_KEY)"; empty if none.
std::string named_variables(const nlohmann::json& entry);

} // namespace payrecon::providers::config_fields
