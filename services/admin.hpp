#pragma once
// Tenant and principal administration (`payrecon tenant`, `payrecon principal`): what a name may
// be, the API key a new principal gets (shown once; only its digest is stored), and the store's
// audited writes. What refuses a request is returned, in words that name no command: the caller
// says what to do next in its own.

#include "core/principal.hpp"
#include "core/secret.hpp"
#include "store/admin_store.hpp"

#include <optional>
#include <string>
#include <tl/expected.hpp>
#include <vector>

namespace payrecon {

namespace store {
class Db;
}

struct AdminRefusal {
    enum class Kind {
        invalid,   // a name or an ID that can never be right: `message` says what it must be
        taken,     // the name is someone's already
        not_found, // nothing has that ID
    };
    Kind kind = Kind::invalid;
    std::string message;
    // With invalid: what a valid one is ("use 1 to 64 characters: ..."), where saying so helps.
    std::string rule;
};

// Every tenant, oldest first.
std::vector<store::TenantRecord> tenants(store::Db& db);
// The tenant of that ID or name; nullopt if there is none.
std::optional<store::TenantRecord> tenant_by_id_or_name(store::Db& db,
                                                        const std::string& id_or_name);
// A tenant's principals, revoked ones included, oldest first.
std::vector<store::PrincipalRecord> principals_of(store::Db& db, const std::string& tenant_id);

// A tenant named `name`: 1 to 64 characters, letters, digits, '.', '_' and '-', starting with a
// letter or digit. Audited as `actor`. Throws DatabaseUnavailable.
tl::expected<store::TenantRecord, AdminRefusal>
create_tenant(store::Db& db, const std::string& name, const std::string& actor);

struct NewPrincipal {
    store::PrincipalRecord principal;
    Secret api_key; // the only time it exists outside its holder's hands
};

// A principal of `tenant_id` named `name` (printable text of 1 to store::k_max_principal_name
// bytes, unique in the tenant), with a new API key. Audited as `actor`.
tl::expected<NewPrincipal, AdminRefusal> create_principal(store::Db& db,
                                                          const std::string& tenant_id,
                                                          const std::string& name, Role role,
                                                          const std::string& actor);

// Revokes the principal `principal_id` (a UUID): its requests, replays included, are refused from
// now on. Returns it as it is now; revoking a revoked one changes nothing.
tl::expected<store::PrincipalRecord, AdminRefusal>
revoke_principal(store::Db& db, const std::string& principal_id, const std::string& actor);

} // namespace payrecon
