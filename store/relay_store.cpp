#include "store/relay_store.hpp"

#include "core/encoding.hpp"
#include "store/events_out_sql.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace payrecon::store {

namespace {

// The advisory lock key of an endpoint's relay slots (the second key is the slot number).
constexpr const char* k_slot_key = "hashtext('payrecon.relay.' || $1::text)";
// One publisher at a time.
constexpr long long k_publish_lock = 0x7061797265636f6eLL; // "payrecon"

// The statements record_attempts runs: each attempt's row and its delivery's new state, and the
// leases released or renewed.
void prepare_recording(Db::Impl& impl) {
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
}

// The attempts as the record statement reads them ($3, jsonb_to_recordset).
nlohmann::json attempts_input(const std::vector<DeliveryAttemptRecord>& attempts) {
    nlohmann::json input = nlohmann::json::array();
    for (const DeliveryAttemptRecord& a : attempts) {
        input.push_back({{"delivery_id", a.delivery_id},
                         {"generation", a.generation},
                         {"started_ms", a.started_unix_ms},
                         {"latency_ms", a.latency_ms},
                         {"http_status",
                          a.http_status ? nlohmann::json(*a.http_status) : nlohmann::json(nullptr)},
                         {"outcome", to_string(a.outcome)},
                         {"excerpt", a.response_excerpt},
                         {"error", a.error},
                         {"next_ms", a.next_attempt_unix_ms},
                         {"dead", a.dead}});
    }
    return input;
}

// The (delivery, lease generation) pairs the lease statement reads ($3, jsonb_to_recordset).
std::string lease_ids(const std::vector<ClaimedDelivery>& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const ClaimedDelivery& d : list) {
        out.push_back({{"delivery_id", d.delivery_id}, {"generation", d.generation}});
    }
    return out.dump();
}

} // namespace

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
    prepare_recording(impl);
    const nlohmann::json input = attempts_input(attempts);
    const bool gone =
        std::any_of(attempts.begin(), attempts.end(), [](const DeliveryAttemptRecord& a) {
            return a.outcome == DeliveryOutcome::gone;
        });
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
            tx.exec_prepared("payrecon_relay_lease", batch.tenant_id, owner, lease_ids(release),
                             true, 0LL);
        }
        if (!renew.empty()) {
            for (const auto& r :
                 tx.exec_prepared("payrecon_relay_lease", batch.tenant_id, owner, lease_ids(renew),
                                  false, static_cast<long long>(lease.count()))) {
                out.renewed.push_back(r[0].as<long long>());
            }
        }
        if (!attempts.empty()) {
            long long delivered = 0;
            for (const DeliveryAttemptRecord& a : attempts) {
                delivered += a.outcome == DeliveryOutcome::delivered ? 1 : 0;
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

} // namespace payrecon::store
