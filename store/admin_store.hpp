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

// The tenant created, with its audit row; nullopt if a tenant of that name exists (nothing
// written). The name is not checked here: services/admin says what a name may be.
std::optional<TenantRecord> create_tenant(Db& db, const std::string& name,
                                          const std::string& actor);
std::vector<TenantRecord> list_tenants(Db& db);
// By ID or by name; nullopt if neither matches.
std::optional<TenantRecord> find_tenant(Db& db, const std::string& id_or_name);

// Principal names are shown in terminals and logs: at most this many bytes, and printable.
inline constexpr std::size_t k_max_principal_name = 128;

// The principal created, with its audit row; nullopt if the tenant has a principal of that name
// (nothing written). The name is not checked here (services/admin).
std::optional<PrincipalRecord> create_principal(Db& db, const std::string& tenant_id,
                                                const std::string& name, Role role,
                                                const std::string& api_key_digest_hex,
                                                const std::string& actor);
// The principal as it is now (`principal_id` a UUID); nullopt if there is no such principal.
// Revoking a revoked principal changes nothing and is not audited again.
std::optional<PrincipalRecord> revoke_principal(Db& db, const std::string& principal_id,
                                                const std::string& actor);
std::vector<PrincipalRecord> list_principals(Db& db, const std::string& tenant_id);
std::optional<PrincipalRecord> find_principal_by_key_digest(Db& db, const std::string& digest_hex);

} // namespace payrecon::store
