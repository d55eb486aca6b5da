#include "store/relay_store.hpp"

#include "core/encoding.hpp"
#include "core/fingerprint.hpp"
#include "store/intake_store.hpp"
#include "store/pq.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

namespace payrecon::store {

namespace {

// The event as the relay sends it and GET /v1/events returns it, built from the outbox row `o`:
// the same bytes on every attempt (jsonb's text form is canonical: keys sorted, one spacing).
const std::string k_event_body =
    "jsonb_build_object('id', o.event_id, 'type', o.event_type, 'timestamp', " +
    iso_utc("o.created_at") + ", 'data', o.payload)::text";

std::optional<std::string> opt_text(const pqxx::field& f) {
    return f.is_null() ? std::nullopt : std::optional<std::string>(f.as<std::string>());
}
std::optional<int> opt_int(const pqxx::field& f) {
    return f.is_null() ? std::nullopt : std::optional<int>(f.as<int>());
}

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

const std::string k_delivery_columns =
    "d.delivery_id, d.tenant_id::text, d.endpoint_id::text, e.url, d.event_id::text, "
    "o.event_type, d.aggregate_id::text, d.state, d.attempts, d.tries, " +
    iso_utc("d.next_attempt_at") + ", d.last_status, d.last_error, " + iso_utc("d.created_at") +
    ", " + iso_utc("d.delivered_at") + ", " + iso_utc("d.dead_at") +
    ", (d.lease_expires_at IS NOT NULL AND d.lease_expires_at > now()), "
    "(d.state = 'pending' AND d.next_attempt_at <= now()), "
    // the earliest pending delivery of the same payment to the same endpoint before this one
    // (event_deliveries_order)
    "CASE WHEN d.state = 'pending' THEN (SELECT p.delivery_id FROM event_deliveries p "
    "WHERE p.tenant_id = d.tenant_id AND p.endpoint_id = d.endpoint_id AND p.aggregate_id = "
    "d.aggregate_id AND p.state = 'pending' AND p.publish_seq < d.publish_seq "
    "ORDER BY p.publish_seq LIMIT 1) END, e.state <> 'enabled' "
    "FROM event_deliveries d JOIN webhook_endpoints e ON e.tenant_id = d.tenant_id AND "
    "e.endpoint_id = d.endpoint_id JOIN outbox o ON o.tenant_id = d.tenant_id AND o.event_id = "
    "d.event_id ";

DeliveryRow delivery_from_row(const pqxx::row& r) {
    DeliveryRow d;
    d.delivery_id = r[0].as<long long>();
    d.tenant_id = r[1].as<std::string>();
    d.endpoint_id = r[2].as<std::string>();
    d.url = r[3].as<std::string>();
    d.event_id = r[4].as<std::string>();
    d.event_type = r[5].as<std::string>();
    d.payment_id = r[6].as<std::string>();
    d.state = r[7].as<std::string>();
    d.attempts = r[8].as<int>();
    d.tries = r[9].as<int>();
    d.next_attempt_at = r[10].as<std::string>();
    d.last_status = opt_int(r[11]);
    d.last_error = opt_text(r[12]);
    d.created_at = r[13].as<std::string>();
    d.delivered_at = opt_text(r[14]);
    d.dead_at = opt_text(r[15]);
    d.leased = r[16].as<bool>();
    d.due = r[17].as<bool>();
    d.waits_behind =
        r[18].is_null() ? std::nullopt : std::optional<long long>(r[18].as<long long>());
    d.endpoint_disabled = r[19].as<bool>();
    return d;
}

// The tenant of an endpoint given by ID alone (operators name it so), or nullopt.
std::optional<std::string> endpoint_tenant(pqxx::transaction_base& tx,
                                           const std::string& endpoint_id) {
    const pqxx::result r = tx.exec_params(
        "SELECT tenant_id::text FROM webhook_endpoints WHERE endpoint_id = $1::uuid", endpoint_id);
    if (r.empty()) {
        return std::nullopt;
    }
    return r[0][0].as<std::string>();
}

// The advisory lock key of an endpoint's relay slots (the second key is the slot number).
constexpr const char* k_slot_key = "hashtext('payrecon.relay.' || $1::text)";
// One publisher at a time.
constexpr long long k_publish_lock = 0x7061797265636f6eLL; // "payrecon"

} // namespace

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

bool deliveries_remaining(Db& db) {
    Db::Impl& impl = db.impl();
    impl.prepare("payrecon_relay_remaining", R"sql(
    SELECT EXISTS (SELECT 1 FROM outbox WHERE published_at IS NULL)
        OR EXISTS (SELECT 1 FROM event_deliveries d JOIN webhook_endpoints e
                     ON e.tenant_id = d.tenant_id AND e.endpoint_id = d.endpoint_id
                    WHERE d.state = 'pending' AND d.next_attempt_at <= now()
                      AND e.state = 'enabled'
                      AND d.publish_seq = (SELECT min(p.publish_seq) FROM event_deliveries p
                                            WHERE p.tenant_id = d.tenant_id
                                              AND p.endpoint_id = d.endpoint_id
                                              AND p.aggregate_id = d.aggregate_id
                                              AND p.state = 'pending')))sql");
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        return tx.exec_prepared1("payrecon_relay_remaining")[0].as<bool>();
    });
}

std::optional<std::pair<long long, long long>> publish_events(Db& db, int limit) {
    Db::Impl& impl = db.impl();
    impl.prepare("payrecon_publish",
                 R"sql(
    WITH ev AS (
        SELECT tenant_id, event_id, seq, aggregate_id, event_type FROM outbox
         WHERE published_at IS NULL ORDER BY seq LIMIT $1 FOR UPDATE),
    per_tenant AS (
        SELECT tenant_id, count(*) AS n FROM ev GROUP BY tenant_id),
    c AS (
        INSERT INTO outbox_tenant_publish_counters AS t (tenant_id, last)
        SELECT tenant_id, n FROM per_tenant
        ON CONFLICT (tenant_id) DO UPDATE SET last = t.last + EXCLUDED.last
        RETURNING t.tenant_id, t.last),
    numbered AS (
        SELECT ev.*, c.last - per_tenant.n
                     + row_number() OVER (PARTITION BY ev.tenant_id ORDER BY ev.seq) AS ps
          FROM ev JOIN c USING (tenant_id) JOIN per_tenant USING (tenant_id)),
    pub AS (
        UPDATE outbox o SET publish_seq = n.ps, published_at = now() FROM numbered n
         WHERE o.tenant_id = n.tenant_id AND o.event_id = n.event_id
        RETURNING n.tenant_id, n.event_id, n.aggregate_id, n.event_type, n.ps),
    fan AS (
        INSERT INTO event_deliveries (tenant_id, endpoint_id, event_id, publish_seq, aggregate_id)
        SELECT p.tenant_id, e.endpoint_id, p.event_id, p.ps, p.aggregate_id
          FROM pub p JOIN webhook_endpoints e ON e.tenant_id = p.tenant_id
           AND e.state = 'enabled' AND payrecon_event_matches(e.event_types, p.event_type)
        ON CONFLICT DO NOTHING RETURNING 1)
    SELECT (SELECT count(*) FROM pub), (SELECT count(*) FROM fan))sql");
    return translate_errors(impl, [&]() -> std::optional<std::pair<long long, long long>> {
        pqxx::work tx(impl.connection());
        if (!tx.exec_params1("SELECT pg_try_advisory_xact_lock($1)", k_publish_lock)[0]
                 .as<bool>()) {
            return std::nullopt;
        }
        const pqxx::row r = tx.exec_prepared1("payrecon_publish", limit);
        tx.commit();
        return std::pair{r[0].as<long long>(), r[1].as<long long>()};
    });
}

std::optional<DeliveryBatch> claim_deliveries(Db& db, const std::string& owner, int limit,
                                              std::chrono::milliseconds lease, int per_endpoint) {
    Db::Impl& impl = db.impl();
    impl.prepare("payrecon_relay_candidates",
                 R"sql(
    SELECT e.tenant_id::text, e.endpoint_id::text, e.url FROM webhook_endpoints e
     WHERE e.state = 'enabled'
       AND EXISTS (SELECT 1 FROM event_deliveries d
                    WHERE d.tenant_id = e.tenant_id AND d.endpoint_id = e.endpoint_id
                      AND d.state = 'pending' AND d.next_attempt_at <= now()
                      AND (d.lease_expires_at IS NULL OR d.lease_expires_at <= now()))
     ORDER BY random() LIMIT 32)sql");
    // The limit is in the statement's text, not a parameter: the plan cached for it then expects
    // that many rows and updates them through the primary key, where a parameter's guess (a tenth
    // of the table) makes it hash the whole table at every claim.
    const std::string claim = "payrecon_relay_claim_" + std::to_string(limit);
    impl.prepare(claim, R"sql(
    WITH cand AS (
        SELECT d.tenant_id, d.delivery_id FROM event_deliveries d
         WHERE d.tenant_id = $1::uuid AND d.endpoint_id = $2::uuid AND d.state = 'pending'
           AND d.next_attempt_at <= now()
           AND (d.lease_expires_at IS NULL OR d.lease_expires_at <= now())
           -- the payment's earliest pending event for this endpoint: a min() the planner reads
           -- off event_deliveries_order whatever its statistics say (a NOT EXISTS was planned
           -- over the pending index, scanning the whole queue per row, when they were stale)
           AND d.publish_seq = (SELECT min(p.publish_seq) FROM event_deliveries p
                                 WHERE p.tenant_id = d.tenant_id
                                   AND p.endpoint_id = d.endpoint_id
                                   AND p.aggregate_id = d.aggregate_id AND p.state = 'pending')
         ORDER BY d.publish_seq LIMIT )sql" +
                            std::to_string(limit) + R"sql( FOR UPDATE SKIP LOCKED)
    UPDATE event_deliveries d SET lease_owner = $3, lease_generation = d.lease_generation + 1,
           lease_expires_at = now() + $4 * interval '1 millisecond'
      FROM cand, outbox o
     WHERE d.tenant_id = cand.tenant_id AND d.delivery_id = cand.delivery_id
       AND o.tenant_id = d.tenant_id AND o.event_id = d.event_id
    RETURNING d.delivery_id, d.lease_generation, d.event_id::text, o.event_type,
              d.aggregate_id::text, d.publish_seq, d.attempts, d.tries, )sql" +
                            k_event_body);
    impl.prepare(
        "payrecon_relay_secrets",
        "SELECT secret_no, encode(sealed, 'hex') FROM webhook_endpoint_secrets WHERE tenant_id = "
        "$1::uuid AND endpoint_id = $2::uuid AND (retire_at IS NULL OR retire_at > "
        "now()) ORDER BY secret_no DESC");
    return translate_errors(impl, [&]() -> std::optional<DeliveryBatch> {
        pqxx::connection& conn = impl.connection();
        pqxx::result candidates;
        {
            pqxx::read_transaction tx(conn);
            candidates = tx.exec_prepared("payrecon_relay_candidates");
        }
        for (const auto& c : candidates) {
            const std::string tenant = c[0].as<std::string>();
            const std::string endpoint = c[1].as<std::string>();
            int slot = -1;
            {
                pqxx::nontransaction nt(conn);
                for (int s = 0; s < per_endpoint && slot < 0; ++s) {
                    if (nt.exec_params1(std::string("SELECT pg_try_advisory_lock(") + k_slot_key +
                                            ", $2)",
                                        endpoint, s)[0]
                            .as<bool>()) {
                        slot = s;
                    }
                }
            }
            if (slot < 0) {
                continue; // every slot of this endpoint is sending
            }
            DeliveryBatch batch;
            batch.tenant_id = tenant;
            batch.endpoint_id = endpoint;
            batch.url = c[2].as<std::string>();
            batch.slot = slot;
            try {
                pqxx::work tx(conn);
                for (const auto& r : tx.exec_prepared(claim, tenant, endpoint, owner,
                                                      static_cast<long long>(lease.count()))) {
                    ClaimedDelivery d;
                    d.delivery_id = r[0].as<long long>();
                    d.generation = r[1].as<long long>();
                    d.event_id = r[2].as<std::string>();
                    d.event_type = r[3].as<std::string>();
                    d.aggregate_id = r[4].as<std::string>();
                    d.publish_seq = r[5].as<long long>();
                    d.attempts = r[6].as<int>();
                    d.tries = r[7].as<int>();
                    d.body = r[8].as<std::string>();
                    batch.deliveries.push_back(std::move(d));
                }
                for (const auto& r : tx.exec_prepared("payrecon_relay_secrets", tenant, endpoint)) {
                    batch.sealed_secrets.emplace_back(
                        r[0].as<int>(), from_hex(r[1].as<std::string>()).value_or(""));
                }
                tx.commit();
            } catch (...) {
                release_endpoint_slot(db, batch);
                throw;
            }
            if (batch.deliveries.empty()) {
                release_endpoint_slot(db, batch);
                continue;
            }
            std::sort(batch.deliveries.begin(), batch.deliveries.end(),
                      [](const ClaimedDelivery& a, const ClaimedDelivery& b) {
                          return a.publish_seq < b.publish_seq;
                      });
            return batch;
        }
        return std::nullopt;
    });
}

void release_endpoint_slot(Db& db, const DeliveryBatch& batch) {
    Db::Impl& impl = db.impl();
    try {
        translate_errors(impl, [&] {
            pqxx::nontransaction nt(impl.connection());
            nt.exec_params(std::string("SELECT pg_advisory_unlock(") + k_slot_key + ", $2)",
                           batch.endpoint_id, batch.slot);
        });
    } catch (const DatabaseUnavailable&) {
        // The connection is gone, and its session locks with it.
    }
}

RecordedAttempts record_attempts(Db& db, const DeliveryBatch& batch, const std::string& owner,
                                 const std::vector<DeliveryAttemptRecord>& attempts,
                                 const std::vector<ClaimedDelivery>& release,
                                 const std::vector<ClaimedDelivery>& renew,
                                 std::chrono::milliseconds lease) {
    Db::Impl& impl = db.impl();
    impl.prepare("payrecon_relay_record", R"sql(
    WITH input AS (
        SELECT * FROM jsonb_to_recordset($3::jsonb) AS t(
            delivery_id bigint, generation bigint, started_ms bigint, latency_ms int,
            http_status int, outcome text, excerpt text, error text, next_ms bigint, dead boolean)),
    cur AS (
        SELECT d.tenant_id, d.delivery_id, d.state,
               (d.lease_owner = $2 AND d.lease_generation = i.generation AND d.state = 'pending')
                   AS own
          FROM event_deliveries d JOIN input i ON d.delivery_id = i.delivery_id
         WHERE d.tenant_id = $1::uuid FOR UPDATE OF d),
    upd AS (
        UPDATE event_deliveries d SET
            attempts = d.attempts + 1,
            state = CASE WHEN c.state <> 'pending' THEN c.state
                         WHEN i.outcome = 'delivered' THEN 'delivered'
                         WHEN c.own AND i.dead THEN 'dead'
                         ELSE 'pending' END,
            delivered_at = CASE WHEN c.state = 'pending' AND i.outcome = 'delivered' THEN now()
                                ELSE d.delivered_at END,
            dead_at = CASE WHEN c.own AND i.outcome <> 'delivered' AND i.dead THEN now()
                           ELSE d.dead_at END,
            tries = CASE WHEN c.own AND i.outcome <> 'delivered' THEN d.tries + 1
                         ELSE d.tries END,
            next_attempt_at = CASE WHEN c.own AND i.outcome <> 'delivered' AND NOT i.dead
                                   THEN to_timestamp(i.next_ms / 1000.0) ELSE d.next_attempt_at END,
            lease_owner = CASE WHEN c.own OR i.outcome = 'delivered' THEN NULL ELSE d.lease_owner END,
            lease_expires_at = CASE WHEN c.own OR i.outcome = 'delivered' THEN NULL
                                    ELSE d.lease_expires_at END,
            last_status = i.http_status,
            last_error = left(i.error, 1024)
          FROM cur c, input i
         WHERE d.tenant_id = c.tenant_id AND d.delivery_id = c.delivery_id
           AND i.delivery_id = c.delivery_id
        RETURNING d.tenant_id, d.delivery_id, d.attempts, c.own OR
                  (c.state = 'pending' AND i.outcome = 'delivered') AS changed),
    att AS (
        INSERT INTO delivery_attempts (tenant_id, delivery_id, attempt_no, started_at, latency_ms,
                                       http_status, outcome, response_excerpt, error, relay)
        SELECT u.tenant_id, u.delivery_id, u.attempts, to_timestamp(i.started_ms / 1000.0),
               greatest(i.latency_ms, 0), i.http_status, i.outcome,
               nullif(left(i.excerpt, 1024), ''), nullif(left(i.error, 1024), ''), $2
          FROM upd u JOIN input i ON i.delivery_id = u.delivery_id
        RETURNING 1)
    SELECT (SELECT count(*) FROM upd WHERE changed), (SELECT count(*) FROM att))sql");
    impl.prepare("payrecon_relay_lease", R"sql(
    UPDATE event_deliveries SET
        lease_owner = CASE WHEN $4 THEN NULL ELSE lease_owner END,
        lease_expires_at = CASE WHEN $4 THEN NULL
                                ELSE now() + $5 * interval '1 millisecond' END
     WHERE tenant_id = $1::uuid AND lease_owner = $2 AND state = 'pending'
       AND (delivery_id, lease_generation) IN
           (SELECT * FROM jsonb_to_recordset($3::jsonb) AS t(delivery_id bigint,
                                                              generation bigint))
    RETURNING delivery_id)sql");
    nlohmann::json input = nlohmann::json::array();
    bool gone = false;
    for (const DeliveryAttemptRecord& a : attempts) {
        input.push_back({{"delivery_id", a.delivery_id},
                         {"generation", a.generation},
                         {"started_ms", a.started_unix_ms},
                         {"latency_ms", a.latency_ms},
                         {"http_status",
                          a.http_status ? nlohmann::json(*a.http_status) : nlohmann::json(nullptr)},
                         {"outcome", a.outcome},
                         {"excerpt", a.response_excerpt},
                         {"error", a.error},
                         {"next_ms", a.next_attempt_unix_ms},
                         {"dead", a.dead}});
        gone = gone || a.outcome == "gone";
    }
    const auto ids = [](const std::vector<ClaimedDelivery>& list) {
        nlohmann::json out = nlohmann::json::array();
        for (const ClaimedDelivery& d : list) {
            out.push_back({{"delivery_id", d.delivery_id}, {"generation", d.generation}});
        }
        return out.dump();
    };
    return translate_errors(impl, [&] {
        pqxx::work tx(impl.connection());
        RecordedAttempts out;
        if (!attempts.empty()) {
            const pqxx::row r = tx.exec_prepared1(
                "payrecon_relay_record", batch.tenant_id, owner,
                input.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
            out.changed = r[0].as<int>();
        }
        if (!release.empty()) {
            tx.exec_prepared("payrecon_relay_lease", batch.tenant_id, owner, ids(release), true,
                             0LL);
        }
        if (!renew.empty()) {
            for (const auto& r :
                 tx.exec_prepared("payrecon_relay_lease", batch.tenant_id, owner, ids(renew), false,
                                  static_cast<long long>(lease.count()))) {
                out.renewed.push_back(r[0].as<long long>());
            }
        }
        if (!attempts.empty()) {
            long long delivered = 0;
            for (const DeliveryAttemptRecord& a : attempts) {
                delivered += a.outcome == "delivered" ? 1 : 0;
            }
            tx.exec_params0("UPDATE webhook_endpoints SET attempts_delivered = attempts_delivered "
                            "+ $3, attempts_failed = attempts_failed + $4 "
                            "WHERE tenant_id = $1::uuid AND endpoint_id = $2::uuid",
                            batch.tenant_id, batch.endpoint_id, delivered,
                            static_cast<long long>(attempts.size()) - delivered);
        }
        if (gone) {
            tx.exec_params0(
                "WITH changed AS (UPDATE webhook_endpoints SET state = 'disabled', disabled_at = "
                "now(), disabled_reason = 'the endpoint answered 410 Gone: it asked us to stop' "
                "WHERE tenant_id = $1::uuid AND endpoint_id = $2::uuid AND state = 'enabled' "
                "RETURNING 1) "
                "INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, "
                "detail) SELECT $1::uuid, $3, 'endpoint.disabled', 'endpoint', $2, "
                "jsonb_build_object('reason', 'the endpoint answered 410 Gone') FROM changed",
                batch.tenant_id, batch.endpoint_id, owner);
        }
        tx.commit();
        return out;
    });
}

std::vector<DeliveryRow> list_deliveries(Db& db, const DeliveryFilter& f) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        std::vector<DeliveryRow> out;
        for (const auto& r :
             tx.exec_params("SELECT " + k_delivery_columns +
                                "WHERE ($1::uuid IS NULL OR d.tenant_id = $1::uuid) "
                                "AND ($2::uuid IS NULL OR d.endpoint_id = $2::uuid) "
                                "AND ($3::text IS NULL OR d.state = $3::text) "
                                "AND ($4::uuid IS NULL OR d.event_id = $4::uuid) "
                                "ORDER BY d.delivery_id DESC LIMIT $5",
                            or_null(f.tenant_id), or_null(f.endpoint_id), or_null(f.state),
                            or_null(f.event_id), f.limit)) {
            out.push_back(delivery_from_row(r));
        }
        return out;
    });
}

std::optional<DeliveryRow> find_delivery(Db& db, long long delivery_id) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<DeliveryRow> {
        pqxx::read_transaction tx(impl.connection());
        const pqxx::result r = tx.exec_params(
            "SELECT " + k_delivery_columns + "WHERE d.delivery_id = $1", delivery_id);
        if (r.empty()) {
            return std::nullopt;
        }
        return delivery_from_row(r[0]);
    });
}

std::vector<DeliveryAttemptRow> delivery_attempts(Db& db, const std::string& tenant_id,
                                                  long long delivery_id) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        std::vector<DeliveryAttemptRow> out;
        for (const auto& r : tx.exec_params(
                 "SELECT attempt_no, " + iso_utc("started_at") +
                     ", latency_ms, http_status, outcome, response_excerpt, error, relay "
                     "FROM delivery_attempts WHERE tenant_id = $1::uuid AND delivery_id = $2 "
                     "ORDER BY attempt_no",
                 tenant_id, delivery_id)) {
            DeliveryAttemptRow a;
            a.attempt_no = r[0].as<int>();
            a.started_at = r[1].as<std::string>();
            a.latency_ms = r[2].as<int>();
            a.http_status = opt_int(r[3]);
            a.outcome = r[4].as<std::string>();
            a.response_excerpt = opt_text(r[5]);
            a.error = opt_text(r[6]);
            a.relay = r[7].as<std::string>();
            out.push_back(std::move(a));
        }
        return out;
    });
}

std::optional<std::string> delivery_body(Db& db, long long delivery_id) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<std::string> {
        pqxx::read_transaction tx(impl.connection());
        const pqxx::result r =
            tx.exec_params("SELECT " + k_event_body +
                               " FROM event_deliveries d JOIN outbox o ON o.tenant_id = "
                               "d.tenant_id AND o.event_id = d.event_id WHERE d.delivery_id = $1",
                           delivery_id);
        if (r.empty()) {
            return std::nullopt;
        }
        return r[0][0].as<std::string>();
    });
}

ReplayStatus replay_delivery(Db& db, long long delivery_id, const std::string& actor,
                             const std::string& note) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::work tx(impl.connection());
        // The event first, then the delivery (the order purge_delivered_events locks them in): an
        // event purged meanwhile is not found, and a replayed one is not purged.
        const pqxx::result r = tx.exec_params(
            "SELECT d.state FROM event_deliveries d JOIN LATERAL (SELECT 1 FROM outbox o "
            "WHERE o.tenant_id = d.tenant_id AND o.event_id = d.event_id FOR KEY SHARE) o ON true "
            "WHERE d.delivery_id = $1",
            delivery_id);
        if (r.empty()) {
            return ReplayStatus::not_found;
        }
        tx.exec_params("SELECT 1 FROM event_deliveries WHERE delivery_id = $1 FOR UPDATE",
                       delivery_id);
        if (r[0][0].as<std::string>() == "pending") {
            return ReplayStatus::in_flight;
        }
        tx.exec_params0(
            "WITH d AS (UPDATE event_deliveries SET state = 'pending', tries = 0, "
            "next_attempt_at = now(), lease_owner = NULL, lease_expires_at = NULL, dead_at = NULL "
            "WHERE delivery_id = $1 RETURNING tenant_id, delivery_id, endpoint_id, event_id) "
            "INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail) "
            "SELECT tenant_id, $2, 'delivery.replayed', 'delivery', delivery_id::text, "
            "jsonb_build_object('endpoint_id', endpoint_id, 'event_id', event_id, 'previous', "
            "$4::text, 'note', $3::text) FROM d",
            delivery_id, actor, note, r[0][0].as<std::string>());
        tx.commit();
        return ReplayStatus::replayed;
    });
}

DiscardStatus discard_delivery(Db& db, long long delivery_id, const std::string& actor,
                               const std::string& note) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::work tx(impl.connection());
        const pqxx::result r = tx.exec_params(
            "SELECT state FROM event_deliveries WHERE delivery_id = $1 FOR UPDATE", delivery_id);
        if (r.empty()) {
            return DiscardStatus::not_found;
        }
        if (r[0][0].as<std::string>() != "dead") {
            return DiscardStatus::not_dead;
        }
        tx.exec_params0(
            "WITH d AS (UPDATE event_deliveries SET state = 'discarded' WHERE delivery_id = $1 "
            "RETURNING tenant_id, delivery_id, endpoint_id, event_id) "
            "INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail) "
            "SELECT tenant_id, $2, 'delivery.discarded', 'delivery', delivery_id::text, "
            "jsonb_build_object('endpoint_id', endpoint_id, 'event_id', event_id, 'note', "
            "$3::text) FROM d",
            delivery_id, actor, note);
        tx.commit();
        return DiscardStatus::discarded;
    });
}

std::optional<long long> replay_since(Db& db, const std::string& endpoint_id, long long since_unix,
                                      const std::string& actor, const std::string& note) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<long long> {
        pqxx::work tx(impl.connection());
        const auto tenant = endpoint_tenant(tx, endpoint_id);
        if (!tenant) {
            return std::nullopt;
        }
        const pqxx::row r = tx.exec_params1(
            R"sql(
    WITH ev AS (
        SELECT o.tenant_id, o.event_id, o.publish_seq, o.aggregate_id
          FROM outbox o JOIN webhook_endpoints e ON e.tenant_id = o.tenant_id
         WHERE e.tenant_id = $1::uuid AND e.endpoint_id = $2::uuid
           AND o.publish_seq IS NOT NULL AND o.created_at >= to_timestamp($3)
           AND payrecon_event_matches(e.event_types, o.event_type)
           FOR KEY SHARE OF o),
    again AS (
        UPDATE event_deliveries d SET state = 'pending', tries = 0, next_attempt_at = now(),
               lease_owner = NULL, lease_expires_at = NULL, dead_at = NULL
          FROM ev WHERE d.tenant_id = ev.tenant_id AND d.endpoint_id = $2::uuid
           AND d.event_id = ev.event_id
           AND (d.state <> 'pending' OR d.lease_expires_at IS NULL
                OR d.lease_expires_at <= now()) RETURNING 1),
    added AS (
        INSERT INTO event_deliveries (tenant_id, endpoint_id, event_id, publish_seq, aggregate_id)
        SELECT ev.tenant_id, $2::uuid, ev.event_id, ev.publish_seq, ev.aggregate_id FROM ev
        ON CONFLICT DO NOTHING RETURNING 1),
    audit AS (
        INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail)
        VALUES ($1::uuid, $4, 'delivery.replayed', 'endpoint', $2::text,
                jsonb_build_object('since', to_char(to_timestamp($3) AT TIME ZONE 'UTC',
                                                    'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                                   'again', (SELECT count(*) FROM again),
                                   'added', (SELECT count(*) FROM added), 'note', $5::text)))
    SELECT (SELECT count(*) FROM again) + (SELECT count(*) FROM added))sql",
            *tenant, endpoint_id, since_unix, actor, note);
        tx.commit();
        return r[0].as<long long>();
    });
}

long long purged_through(Db& db, const std::string& tenant_id) {
    Db::Impl& impl = db.impl();
    impl.prepare("payrecon_events_purged",
                 "SELECT coalesce((SELECT through_seq FROM outbox_purged WHERE tenant_id = "
                 "$1::uuid), 0)");
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        return tx.exec_prepared1("payrecon_events_purged", tenant_id)[0].as<long long>();
    });
}

std::vector<std::pair<long long, std::string>> events_after(Db& db, const std::string& tenant_id,
                                                            long long after, int limit) {
    Db::Impl& impl = db.impl();
    impl.prepare("payrecon_events_after", "SELECT o.publish_seq, " + k_event_body +
                                              " FROM outbox o WHERE o.tenant_id = $1::uuid AND "
                                              "o.publish_seq > $2 ORDER BY o.publish_seq LIMIT $3");
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        std::vector<std::pair<long long, std::string>> out;
        for (const auto& r : tx.exec_prepared("payrecon_events_after", tenant_id, after, limit)) {
            out.emplace_back(r[0].as<long long>(), r[1].as<std::string>());
        }
        return out;
    });
}

std::vector<EndpointDeliveryStats> endpoint_delivery_stats(Db& db) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        std::vector<EndpointDeliveryStats> out;
        for (const auto& r : tx.exec(R"sql(
    SELECT e.tenant_id::text, e.endpoint_id::text, e.state,
           (SELECT count(*) FROM event_deliveries d
             WHERE d.tenant_id = e.tenant_id AND d.endpoint_id = e.endpoint_id
               AND d.state = 'pending'),
           (SELECT count(*) FROM event_deliveries d
             WHERE d.tenant_id = e.tenant_id AND d.endpoint_id = e.endpoint_id
               AND d.state = 'dead'),
           coalesce((SELECT extract(epoch FROM now() - min(d.next_attempt_at))
                       FROM event_deliveries d
                      WHERE d.tenant_id = e.tenant_id AND d.endpoint_id = e.endpoint_id
                        AND d.state = 'pending' AND d.next_attempt_at <= now()), 0),
           e.attempts_delivered, e.attempts_failed
      FROM webhook_endpoints e
     ORDER BY e.tenant_id, e.endpoint_id)sql")) {
            EndpointDeliveryStats s;
            s.tenant_id = r[0].as<std::string>();
            s.endpoint_id = r[1].as<std::string>();
            s.state = r[2].as<std::string>();
            s.pending = r[3].as<long long>();
            s.dead = r[4].as<long long>();
            s.lag_seconds = r[5].as<double>();
            s.attempts_delivered = r[6].as<long long>();
            s.attempts_failed = r[7].as<long long>();
            out.push_back(s);
        }
        return out;
    });
}

double unpublished_lag_seconds(Db& db) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        return tx
            .exec("SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0) FROM outbox "
                  "WHERE published_at IS NULL")[0][0]
            .as<double>();
    });
}

EventPurgeResult purge_delivered_events(Db& db, std::chrono::seconds retention, bool dry_run,
                                        const std::string& actor, int batch_size) {
    Db::Impl& impl = db.impl();
    const long long secs = retention.count();
    // An event is purged when it is older than the retention, published, and none of its
    // deliveries is pending or dead. Locks: the event's outbox row first (FOR UPDATE, skipping one
    // a replay holds), then its deliveries -- the order replays lock them in.
    const std::string old_enough = "o.published_at IS NOT NULL AND o.created_at <= now() - "
                                   "make_interval(secs => $1::bigint)";
    const std::string undelivered =
        "EXISTS (SELECT 1 FROM event_deliveries d WHERE d.tenant_id = o.tenant_id "
        "AND d.event_id = o.event_id AND d.state NOT IN ('delivered', 'discarded'))";
    nlohmann::json run;
    run["retention_s"] = secs;
    return translate_errors(impl, [&] {
        EventPurgeResult out;
        {
            pqxx::read_transaction tx(impl.connection());
            out.kept_undelivered = tx.exec_params1("SELECT count(*) FROM outbox o WHERE " +
                                                       old_enough + " AND " + undelivered,
                                                   secs)[0]
                                       .as<long long>();
            if (dry_run) {
                const pqxx::row r = tx.exec_params1(
                    "SELECT count(*), (SELECT count(*) FROM event_deliveries d JOIN outbox o "
                    "ON o.tenant_id = d.tenant_id AND o.event_id = d.event_id WHERE " +
                        old_enough + " AND NOT " + undelivered + ") FROM outbox o WHERE " +
                        old_enough + " AND NOT " + undelivered,
                    secs);
                out.events = r[0].as<long long>();
                out.deliveries = r[1].as<long long>();
                return out;
            }
            out.run_id = tx.exec1("SELECT gen_random_uuid()::text")[0].as<std::string>();
        }
        run["run_id"] = out.run_id;
        const std::string del =
            "WITH doomed AS (SELECT o.tenant_id, o.event_id FROM outbox o WHERE " + old_enough +
            " AND NOT " + undelivered +
            " LIMIT $2 FOR UPDATE OF o SKIP LOCKED), "
            "dd AS (DELETE FROM event_deliveries d USING doomed x WHERE d.tenant_id = x.tenant_id "
            "AND d.event_id = x.event_id RETURNING d.tenant_id, d.delivery_id), "
            "da AS (DELETE FROM delivery_attempts a USING dd WHERE a.tenant_id = dd.tenant_id "
            "AND a.delivery_id = dd.delivery_id RETURNING a.tenant_id), "
            "gone AS (DELETE FROM outbox o USING doomed x WHERE o.tenant_id = x.tenant_id "
            "AND o.event_id = x.event_id RETURNING o.tenant_id, o.publish_seq), "
            "mark AS (INSERT INTO outbox_purged AS m (tenant_id, through_seq) "
            "SELECT tenant_id, max(publish_seq) FROM gone GROUP BY tenant_id "
            "ON CONFLICT (tenant_id) DO UPDATE SET through_seq = "
            "greatest(m.through_seq, excluded.through_seq)), "
            "per_tenant AS (SELECT g.tenant_id, count(*) AS events, "
            "(SELECT count(*) FROM dd WHERE dd.tenant_id = g.tenant_id) AS deliveries, "
            "(SELECT count(*) FROM da WHERE da.tenant_id = g.tenant_id) AS attempts "
            "FROM gone g GROUP BY g.tenant_id), "
            "audited AS (INSERT INTO audit_log (tenant_id, actor, action, subject_type, "
            "subject_id, detail) SELECT tenant_id, $3, 'events.purge', 'purge_run', $4, "
            "$5::jsonb || jsonb_build_object('events', events, 'deliveries', deliveries, "
            "'attempts', attempts) FROM per_tenant) "
            "SELECT coalesce(sum(events), 0)::bigint, coalesce(sum(deliveries), 0)::bigint, "
            "coalesce(sum(attempts), 0)::bigint, coalesce(string_agg(tenant_id::text, ','), '') "
            "FROM per_tenant";
        std::set<std::string> tenants;
        for (;;) {
            pqxx::work tx(impl.connection());
            const pqxx::row r =
                tx.exec_params1(del, secs, batch_size, actor, out.run_id, run.dump());
            tx.commit();
            const long long n = r[0].as<long long>();
            out.events += n;
            out.deliveries += r[1].as<long long>();
            out.attempts += r[2].as<long long>();
            const std::string ids = r[3].as<std::string>();
            add_listed(tenants, ids);
            if (n < batch_size) {
                break;
            }
        }
        out.tenants = static_cast<long long>(tenants.size());
        nlohmann::json totals = run;
        totals["events"] = out.events;
        totals["deliveries"] = out.deliveries;
        totals["attempts"] = out.attempts;
        totals["kept_undelivered"] = out.kept_undelivered;
        audit_purge_run(impl, "events.purge_run", actor, out.run_id, totals.dump());
        return out;
    });
}

} // namespace payrecon::store
