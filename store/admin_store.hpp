#pragma once
// Tenants and principals: created and revoked from the CLI, every change audited.

#include "core/principal.hpp"

#include <optional>
#include <string>
#include <vector>

namespace payrecon::store {

class Db;

struct TenantRecord {
    std::string tenant_id;
    std::string name;
    std::string created_at; // ISO 8601, UTC
};

struct PrincipalRecord {
    std::string tenant_id;
    std::string principal_id;
    std::string name;
    Role role = Role::reader;
    std::string created_at;
    std::optional<std::string> revoked_at;
};

// Throws Refused if a tenant of that name exists, UsageError if the name is not
// [A-Za-z0-9][A-Za-z0-9._-]{0,63}.
TenantRecord create_tenant(Db& db, const std::string& name, const std::string& actor);
std::vector<TenantRecord> list_tenants(Db& db);
// By ID or by name; nullopt if neither matches.
std::optional<TenantRecord> find_tenant(Db& db, const std::string& id_or_name);

// Principal names are shown in terminals and logs: at most this many bytes, and printable.
inline constexpr std::size_t k_max_principal_name = 128;

// Throws Refused if the tenant has a principal of that name, UsageError if the name is not
// printable text of 1 to k_max_principal_name bytes (display_name_problem in core/encoding.hpp).
PrincipalRecord create_principal(Db& db, const std::string& tenant_id, const std::string& name,
                                 Role role, const std::string& api_key_digest_hex,
                                 const std::string& actor);
// Returns the principal as it is now. Throws Refused if there is no such principal; revoking a
// revoked principal changes nothing and is not audited again.
PrincipalRecord revoke_principal(Db& db, const std::string& principal_id, const std::string& actor);
std::vector<PrincipalRecord> list_principals(Db& db, const std::string& tenant_id);
std::optional<PrincipalRecord> find_principal_by_key_digest(Db& db, const std::string& digest_hex);

} // namespace payrecon::store
