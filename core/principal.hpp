#pragma once
// Who is calling: a principal of a tenant, with a role. The tenant and role come from the
// principal's row alone, found by the digest of its API key -- never from a request body.

#include "core/secret.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace payrecon {

enum class Role {
    admin,  // everything
    writer, // create and read payments, refund them
    reader, // read payments
};

std::string_view to_string(Role role);
// Returns nullopt for a name to_string() does not give.
std::optional<Role> parse_role(std::string_view name);

enum class Permission { create_payment, create_refund, capture_payment, read_payment };
bool role_allows(Role role, Permission permission);

struct Principal {
    std::string tenant_id;
    std::string principal_id;
    std::string name;
    Role role = Role::reader;
};

// A new API key: "prk_" + 43 characters of URL-safe base64 of 32 random bytes. Shown once.
Secret generate_api_key();

// The stored form of an API key: lower-case hex SHA-256 digest (64 characters).
std::string api_key_digest(const Secret& api_key);

} // namespace payrecon
