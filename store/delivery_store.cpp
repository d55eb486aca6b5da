#include "store/delivery_store.hpp"

#include "store/events_out_sql.hpp"

#include <nlohmann/json.hpp>
#include <set>

namespace payrecon::store {

namespace {

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

} // namespace

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
