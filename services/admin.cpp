#include "services/admin.hpp"

#include "core/encoding.hpp"

#include <regex>

namespace payrecon {

std::vector<store::TenantRecord> tenants(store::Db& db) {
    return store::list_tenants(db);
}

std::optional<store::TenantRecord> tenant_by_id_or_name(store::Db& db,
                                                        const std::string& id_or_name) {
    return store::find_tenant(db, id_or_name);
}

std::vector<store::PrincipalRecord> principals_of(store::Db& db, const std::string& tenant_id) {
    return store::list_principals(db, tenant_id);
}

tl::expected<store::TenantRecord, AdminRefusal>
create_tenant(store::Db& db, const std::string& name, const std::string& actor) {
    static const std::regex k_name("^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$");
    if (!std::regex_match(name, k_name)) {
        return tl::unexpected(AdminRefusal{
            AdminRefusal::Kind::invalid, "tenant name '" + printable(name) + "' is not allowed",
            "use 1 to 64 characters: letters, digits, '.', '_' and '-', starting with a letter "
            "or digit"});
    }
    auto created = store::create_tenant(db, name, actor);
    if (!created) {
        return tl::unexpected(AdminRefusal{AdminRefusal::Kind::taken,
                                           "a tenant named '" + name + "' exists already", ""});
    }
    return *created;
}

tl::expected<NewPrincipal, AdminRefusal> create_principal(store::Db& db,
                                                          const std::string& tenant_id,
                                                          const std::string& name, Role role,
                                                          const std::string& actor) {
    if (const auto problem = display_name_problem(name, store::k_max_principal_name)) {
        // Never echo it: the name is printed in operators' terminals, which is why it is checked.
        return tl::unexpected(
            AdminRefusal{AdminRefusal::Kind::invalid, "the principal name " + *problem,
                         "use 1 to " + std::to_string(store::k_max_principal_name) +
                             " bytes of printable text (letters, digits, punctuation, spaces "
                             "inside), e.g. web-shop"});
    }
    Secret key = generate_api_key();
    auto created = store::create_principal(db, tenant_id, name, role, api_key_digest(key), actor);
    if (!created) {
        return tl::unexpected(
            AdminRefusal{AdminRefusal::Kind::taken,
                         "the tenant has a principal named '" + printable(name) + "' already", ""});
    }
    return NewPrincipal{std::move(*created), std::move(key)};
}

tl::expected<store::PrincipalRecord, AdminRefusal>
revoke_principal(store::Db& db, const std::string& principal_id, const std::string& actor) {
    if (!is_uuid_text(principal_id)) {
        return tl::unexpected(
            AdminRefusal{AdminRefusal::Kind::invalid,
                         "'" + printable(principal_id) + "' is not a principal ID", ""});
    }
    auto revoked = store::revoke_principal(db, principal_id, actor);
    if (!revoked) {
        return tl::unexpected(AdminRefusal{AdminRefusal::Kind::not_found,
                                           "there is no principal " + principal_id, ""});
    }
    return *revoked;
}

} // namespace payrecon
