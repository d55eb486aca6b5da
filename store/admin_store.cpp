#include "store/admin_store.hpp"

#include "core/encoding.hpp"
#include "core/fingerprint.hpp"
#include "store/pq.hpp"

#include <nlohmann/json.hpp>

namespace payrecon::store {
namespace {

const std::string k_principal_columns = "tenant_id::text, principal_id::text, name, role, " +
                                        iso_utc("created_at") + ", " + iso_utc("revoked_at");

const std::string k_insert_tenant =
    "INSERT INTO tenants (name) VALUES ($1) ON CONFLICT (name) DO NOTHING "
    "RETURNING tenant_id::text, name, " +
    iso_utc("created_at");
const std::string k_insert_principal =
    "INSERT INTO principals (tenant_id, name, role, api_key_hash) "
    "VALUES ($1::uuid, $2, $3, decode($4, 'hex')) ON CONFLICT (tenant_id, name) DO NOTHING "
    "RETURNING " +
    k_principal_columns;
const std::string k_insert_audit =
    "INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail) "
    "VALUES ($1::uuid, $2, $3, $4, $5, $6::jsonb)";
const std::string k_revoke_principal =
    "UPDATE principals SET revoked_at = now() WHERE principal_id = $1::uuid AND revoked_at IS NULL "
    "RETURNING " +
    k_principal_columns;
const std::string k_select_principal_by_id =
    "SELECT " + k_principal_columns + " FROM principals WHERE principal_id = $1::uuid";
const std::string k_select_principal_by_digest = "SELECT " + k_principal_columns +
                                                 ", encode(api_key_hash, 'hex') FROM principals "
                                                 "WHERE api_key_hash = decode($1, 'hex')";

TenantRecord tenant_from(const pqxx::row& r) {
    return TenantRecord{r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<std::string>()};
}

PrincipalRecord principal_from(const pqxx::row& r) {
    PrincipalRecord p;
    p.tenant_id = r[0].as<std::string>();
    p.principal_id = r[1].as<std::string>();
    p.name = r[2].as<std::string>();
    p.role = parse_role(r[3].as<std::string>()).value_or(Role::reader);
    p.created_at = r[4].as<std::string>();
    if (!r[5].is_null()) {
        p.revoked_at = r[5].as<std::string>();
    }
    return p;
}

void audit(pqxx::work& tx, const std::string& tenant_id, const std::string& actor,
           const std::string& action, const std::string& subject_type,
           const std::string& subject_id, const nlohmann::json& detail) {
    tx.exec_params0(k_insert_audit, tenant_id, actor, action, subject_type, subject_id,
                    detail.dump());
}

} // namespace

std::optional<TenantRecord> create_tenant(Db& db, const std::string& name,
                                          const std::string& actor) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<TenantRecord> {
        pqxx::work tx(impl.connection());
        const pqxx::result r = tx.exec_params(k_insert_tenant, name);
        if (r.empty()) {
            return std::nullopt;
        }
        TenantRecord t = tenant_from(r[0]);
        audit(tx, t.tenant_id, actor, "tenant.create", "tenant", t.tenant_id, {{"name", name}});
        tx.commit();
        return t;
    });
}

std::vector<TenantRecord> list_tenants(Db& db) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        std::vector<TenantRecord> out;
        for (const auto& row : tx.exec("SELECT tenant_id::text, name, " + iso_utc("created_at") +
                                       " FROM tenants ORDER BY name")) {
            out.push_back(tenant_from(row));
        }
        return out;
    });
}

std::optional<TenantRecord> find_tenant(Db& db, const std::string& id_or_name) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<TenantRecord> {
        pqxx::read_transaction tx(impl.connection());
        const std::string where = is_uuid_text(id_or_name) ? "tenant_id = $1::uuid" : "name = $1";
        const pqxx::result r =
            tx.exec_params("SELECT tenant_id::text, name, " + iso_utc("created_at") +
                               " FROM tenants WHERE " + where,
                           id_or_name);
        if (r.empty()) {
            return std::nullopt;
        }
        return tenant_from(r[0]);
    });
}

std::optional<PrincipalRecord> create_principal(Db& db, const std::string& tenant_id,
                                                const std::string& name, Role role,
                                                const std::string& api_key_digest_hex,
                                                const std::string& actor) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<PrincipalRecord> {
        pqxx::work tx(impl.connection());
        const pqxx::result r = tx.exec_params(k_insert_principal, tenant_id, name,
                                              std::string(to_string(role)), api_key_digest_hex);
        if (r.empty()) {
            return std::nullopt;
        }
        PrincipalRecord p = principal_from(r[0]);
        audit(tx, tenant_id, actor, "principal.create", "principal", p.principal_id,
              {{"name", name}, {"role", std::string(to_string(role))}});
        tx.commit();
        return p;
    });
}

std::optional<PrincipalRecord> revoke_principal(Db& db, const std::string& principal_id,
                                                const std::string& actor) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<PrincipalRecord> {
        pqxx::work tx(impl.connection());
        const pqxx::result r = tx.exec_params(k_revoke_principal, principal_id);
        if (r.empty()) {
            const pqxx::result existing = tx.exec_params(k_select_principal_by_id, principal_id);
            if (existing.empty()) {
                return std::nullopt;
            }
            return principal_from(existing[0]); // revoked already
        }
        PrincipalRecord p = principal_from(r[0]);
        audit(tx, p.tenant_id, actor, "principal.revoke", "principal", p.principal_id,
              {{"name", p.name}});
        tx.commit();
        return p;
    });
}

std::vector<PrincipalRecord> list_principals(Db& db, const std::string& tenant_id) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        std::vector<PrincipalRecord> out;
        for (const auto& row : tx.exec_params("SELECT " + k_principal_columns +
                                                  " FROM principals WHERE tenant_id = $1::uuid "
                                                  "ORDER BY created_at, name",
                                              tenant_id)) {
            out.push_back(principal_from(row));
        }
        return out;
    });
}

std::optional<PrincipalRecord> find_principal_by_key_digest(Db& db, const std::string& digest_hex) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<PrincipalRecord> {
        impl.prepare("principal_by_digest", k_select_principal_by_digest);
        // On every request: one round trip, no BEGIN/COMMIT around a single read.
        pqxx::nontransaction tx(impl.connection());
        const pqxx::result r = tx.exec_prepared("principal_by_digest", digest_hex);
        // The index found the row by digest; compare in constant time all the same.
        if (r.empty() || !constant_time_equal(r[0][6].as<std::string>(), digest_hex)) {
            return std::nullopt;
        }
        return principal_from(r[0]);
    });
}

} // namespace payrecon::store
