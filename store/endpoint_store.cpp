#include "store/endpoint_store.hpp"

#include "core/encoding.hpp"
#include "core/fingerprint.hpp"
#include "store/events_out_sql.hpp"
#include "store/intake_store.hpp"

#include <nlohmann/json.hpp>

namespace payrecon::store {

namespace {

const std::string k_endpoint_columns =
    "e.tenant_id::text, t.name, e.endpoint_id::text, e.url, array_to_json(e.event_types)::text, "
    "e.description, e.state, " +
    iso_utc("e.disabled_at") + ", e.disabled_reason, " + iso_utc("e.created_at") +
    ", e.created_by, "
    "(SELECT count(*) FROM webhook_endpoint_secrets s WHERE s.tenant_id = e.tenant_id AND "
    "s.endpoint_id = e.endpoint_id AND (s.retire_at IS NULL OR s.retire_at > now())), "
    "(SELECT count(*) FROM event_deliveries d WHERE d.tenant_id = e.tenant_id AND d.endpoint_id "
    "= e.endpoint_id AND d.state = 'pending'), "
    "(SELECT count(*) FROM event_deliveries d WHERE d.tenant_id = e.tenant_id AND d.endpoint_id "
    "= e.endpoint_id AND d.state = 'dead'), "
    "(SELECT " +
    iso_utc("min(d.next_attempt_at)") +
    " FROM event_deliveries d WHERE d.tenant_id = e.tenant_id AND d.endpoint_id = e.endpoint_id "
    "AND d.state = 'pending' AND d.next_attempt_at <= now()) "
    "FROM webhook_endpoints e JOIN tenants t ON t.tenant_id = e.tenant_id ";

EndpointRow endpoint_from_row(const pqxx::row& r) {
    EndpointRow e;
    e.tenant_id = r[0].as<std::string>();
    e.tenant_name = r[1].as<std::string>();
    e.endpoint_id = r[2].as<std::string>();
    e.url = r[3].as<std::string>();
    e.event_types = nlohmann::json::parse(r[4].as<std::string>()).get<std::vector<std::string>>();
    e.description = opt_text(r[5]);
    e.state = r[6].as<std::string>();
    e.disabled_at = opt_text(r[7]);
    e.disabled_reason = opt_text(r[8]);
    e.created_at = r[9].as<std::string>();
    e.created_by = r[10].as<std::string>();
    e.signing_secrets = r[11].as<int>();
    e.pending = r[12].as<long long>();
    e.dead = r[13].as<long long>();
    e.oldest_due_at = opt_text(r[14]);
    return e;
}

} // namespace

std::optional<std::string> endpoint_tenant(pqxx::transaction_base& tx,
                                           const std::string& endpoint_id) {
    const pqxx::result r = tx.exec_params(
        "SELECT tenant_id::text FROM webhook_endpoints WHERE endpoint_id = $1::uuid", endpoint_id);
    if (r.empty()) {
        return std::nullopt;
    }
    return r[0][0].as<std::string>();
}

std::string endpoint_secret_aad(const std::string& tenant_id, const std::string& endpoint_id,
                                int secret_no) {
    return "payrecon.endpoint-secret/" + tenant_id + "/" + endpoint_id + "/" +
           std::to_string(secret_no);
}

EndpointRow add_endpoint(Db& db, const std::string& tenant_id, const std::string& endpoint_id,
                         const std::string& url, const std::vector<std::string>& event_types,
                         const std::optional<std::string>& description, const std::string& actor,
                         const SealFunction& seal) {
    Db::Impl& impl = db.impl();
    const std::string sealed = seal(tenant_id, endpoint_id, 1);
    translate_errors(impl, [&] {
        pqxx::work tx(impl.connection());
        tx.exec_params0("INSERT INTO webhook_endpoints (tenant_id, endpoint_id, url, event_types, "
                        "description, created_by) VALUES ($1::uuid, $2::uuid, $3, $4::text[], $5, "
                        "$6)",
                        tenant_id, endpoint_id, url, text_array(event_types), or_null(description),
                        actor);
        tx.exec_params0("INSERT INTO webhook_endpoint_secrets (tenant_id, endpoint_id, secret_no, "
                        "sealed) VALUES ($1::uuid, $2::uuid, 1, decode($3, 'hex'))",
                        tenant_id, endpoint_id, to_hex(sealed));
        tx.exec_params0(
            "INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail) "
            "VALUES ($1::uuid, $2, 'endpoint.added', 'endpoint', $3, jsonb_build_object('url', "
            "$4::text, 'event_types', $5::text[], 'description', $6::text))",
            tenant_id, actor, endpoint_id, url, text_array(event_types), or_null(description));
        tx.commit();
    });
    return *find_endpoint(db, endpoint_id);
}

std::vector<EndpointRow> list_endpoints(Db& db, const std::optional<std::string>& tenant_id) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        std::vector<EndpointRow> out;
        for (const auto& r :
             tx.exec_params("SELECT " + k_endpoint_columns +
                                "WHERE ($1::uuid IS NULL OR e.tenant_id = $1::uuid) "
                                "ORDER BY e.created_at, e.endpoint_id",
                            or_null(tenant_id))) {
            out.push_back(endpoint_from_row(r));
        }
        return out;
    });
}

std::optional<EndpointRow> find_endpoint(Db& db, const std::string& endpoint_id) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<EndpointRow> {
        pqxx::read_transaction tx(impl.connection());
        const pqxx::result r = tx.exec_params(
            "SELECT " + k_endpoint_columns + "WHERE e.endpoint_id = $1::uuid", endpoint_id);
        if (r.empty()) {
            return std::nullopt;
        }
        return endpoint_from_row(r[0]);
    });
}

EndpointChange set_endpoint_enabled(Db& db, const std::string& endpoint_id, bool enabled,
                                    const std::string& actor, const std::string& reason) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::work tx(impl.connection());
        const auto tenant = endpoint_tenant(tx, endpoint_id);
        if (!tenant) {
            return EndpointChange::not_found;
        }
        const pqxx::result r = tx.exec_params(
            "WITH changed AS (UPDATE webhook_endpoints SET state = $3, "
            "disabled_at = CASE WHEN $3 = 'disabled' THEN now() END, "
            "disabled_reason = CASE WHEN $3 = 'disabled' THEN $5::text END "
            "WHERE tenant_id = $1::uuid AND endpoint_id = $2::uuid AND state <> $3 RETURNING 1) "
            "INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail) "
            "SELECT $1::uuid, $4, 'endpoint.' || $3, 'endpoint', $2, "
            "jsonb_build_object('reason', $5::text) FROM changed RETURNING 1",
            *tenant, endpoint_id, enabled ? "enabled" : "disabled", actor, reason);
        if (enabled && !r.empty()) {
            // What waited while it was disabled is due at once, not at its next scheduled try.
            tx.exec_params0("UPDATE event_deliveries SET next_attempt_at = now() WHERE tenant_id = "
                            "$1::uuid AND endpoint_id = $2::uuid AND state = 'pending' AND "
                            "next_attempt_at > now()",
                            *tenant, endpoint_id);
        }
        tx.commit();
        return r.empty() ? EndpointChange::unchanged : EndpointChange::changed;
    });
}

std::optional<int> rotate_endpoint_secret(Db& db, const std::string& endpoint_id,
                                          std::chrono::seconds overlap, const std::string& actor,
                                          const SealFunction& seal) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<int> {
        pqxx::work tx(impl.connection());
        const auto tenant = endpoint_tenant(tx, endpoint_id);
        if (!tenant) {
            return std::nullopt;
        }
        // The endpoint row's lock orders concurrent rotations.
        tx.exec_params("SELECT 1 FROM webhook_endpoints WHERE tenant_id = $1::uuid AND "
                       "endpoint_id = $2::uuid FOR UPDATE",
                       *tenant, endpoint_id);
        const int next = tx.exec_params1("SELECT coalesce(max(secret_no), 0) + 1 FROM "
                                         "webhook_endpoint_secrets WHERE tenant_id = $1::uuid AND "
                                         "endpoint_id = $2::uuid",
                                         *tenant, endpoint_id)[0]
                             .as<int>();
        const std::string sealed = seal(*tenant, endpoint_id, next);
        tx.exec_params0("UPDATE webhook_endpoint_secrets SET retire_at = now() + $3 * interval '1 "
                        "second' WHERE tenant_id = $1::uuid AND endpoint_id = $2::uuid AND "
                        "(retire_at IS NULL OR retire_at > now() + $3 * interval '1 second')",
                        *tenant, endpoint_id, static_cast<long long>(overlap.count()));
        tx.exec_params0("INSERT INTO webhook_endpoint_secrets (tenant_id, endpoint_id, secret_no, "
                        "sealed) VALUES ($1::uuid, $2::uuid, $3, decode($4, 'hex'))",
                        *tenant, endpoint_id, next, to_hex(sealed));
        tx.exec_params0(
            "INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail) "
            "VALUES ($1::uuid, $2, 'endpoint.secret_rotated', 'endpoint', $3, "
            "jsonb_build_object('secret_no', $4::int, 'overlap_seconds', $5::bigint))",
            *tenant, actor, endpoint_id, next, static_cast<long long>(overlap.count()));
        tx.commit();
        return next;
    });
}

ResealResult reseal_endpoint_secrets(Db& db, const std::string& actor,
                                     const ResealFunction& reseal) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::work tx(impl.connection());
        ResealResult out;
        for (const auto& r : tx.exec("SELECT tenant_id::text, endpoint_id::text, secret_no, "
                                     "encode(sealed, 'hex') FROM webhook_endpoint_secrets "
                                     "WHERE retire_at IS NULL OR retire_at > now() "
                                     "ORDER BY tenant_id, endpoint_id, secret_no FOR UPDATE")) {
            const std::string tenant = r[0].as<std::string>();
            const std::string endpoint = r[1].as<std::string>();
            const int number = r[2].as<int>();
            const auto sealed =
                reseal(tenant, endpoint, number, from_hex(r[3].as<std::string>()).value_or(""));
            if (!sealed) {
                out.unopened.emplace_back(endpoint, number);
                continue;
            }
            tx.exec_params0("UPDATE webhook_endpoint_secrets SET sealed = decode($4, 'hex') "
                            "WHERE tenant_id = $1::uuid AND endpoint_id = $2::uuid AND "
                            "secret_no = $3",
                            tenant, endpoint, number, to_hex(*sealed));
            ++out.resealed;
        }
        tx.exec_params0(
            "INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail) "
            "VALUES ($1::uuid, $2, 'endpoint.secrets_resealed', 'endpoint_key', 'current', "
            "jsonb_build_object('resealed', $3::bigint, 'not_opened', $4::bigint))",
            k_deployment_tenant, actor, out.resealed, static_cast<long long>(out.unopened.size()));
        tx.commit();
        return out;
    });
}

} // namespace payrecon::store
