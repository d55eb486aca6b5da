#include "store/intake_store.hpp"

#include "core/crash_point.hpp"
#include "store/intake_record.hpp"
#include "store/payment_event.hpp"
#include "store/pq.hpp"
#include "store/statements.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace payrecon::store {
namespace {

constexpr const char* k_claim_key = "intake_claim_key";
const std::string k_claim_key_sql = R"sql(
INSERT INTO idempotency_records
    (tenant_id, principal_id, operation, idempotency_key, request_hash, expires_at)
VALUES ($1::uuid, $2::uuid, $3, $4, decode($5, 'hex'), now() + make_interval(secs => $6))
ON CONFLICT DO NOTHING
RETURNING to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))sql";

// One statement: the payment (unless the merchant reference is taken), its outbox event, and the
// 202 that goes with it. Every part sees the same snapshot. One row: whether the payment was made.
constexpr const char* k_create_payment = "intake_create_payment";
const std::string k_create_payment_sql = R"sql(
WITH p AS (
    INSERT INTO payments (tenant_id, payment_id, merchant_reference, amount_minor, currency, provider,
                          payment_method, customer, description, metadata, operation_id, state,
                          created_by, idempotency_key_hash, capture_method,
                          authorization_expires_at)
    VALUES ($1::uuid, $5::uuid, $6, $7, $8, $9, $10, $11, $12, $13::jsonb, $14, 'pending', $2::uuid,
            decode($16, 'hex'), $17::text,
            now() + make_interval(secs => $18::bigint))
    ON CONFLICT (tenant_id, merchant_reference) DO NOTHING
    RETURNING *
), o AS ()sql" + payment_event_insert("p", {}, "'payment.created'") +
                                         R"sql(
), r AS (
    UPDATE idempotency_records
       SET response_status = 202, response_body = $15, resource_type = 'payment',
           resource_id = p.payment_id
      FROM p
     WHERE idempotency_records.tenant_id = $1::uuid AND principal_id = $2::uuid AND operation = $3
       AND idempotency_key = $4
)
SELECT EXISTS (SELECT 1 FROM p))sql";

// A fresh request in one autocommit statement: the key claimed with its 202 already in the row
// (the creation time spliced into the body between $17 and $18) if the principal is not revoked,
// the payment and its outbox event; when the key was taken, its record as this statement's
// snapshot shows it. The caller may have its principal from a cache: revocation is checked here. A
// key claimed for a merchant reference that is taken undoes the statement
// (payrecon_intake_reference_taken, SQLSTATE PR409, migration 0013): the transactional path below
// stores that 409. One row: the stored 202 (NULL unless created), then the existing record's
// request hash, status, body, resource and whether its principal is revoked (NULLs unless the key
// had a record this snapshot sees), then whether the principal is revoked now (NULL if there is no
// such principal, or if the key was claimed). The record and the principal are read only when the
// key was not claimed: the condition on c inside the lateral subquery (kept a subquery of its own
// by its LIMIT, so that the condition is a one-time filter of its plan rather than a join filter
// above a scan that already ran) and the CASE's, so a fresh request's plan never runs those scans
// (it did, and found nothing: an index descent of idempotency_records and a read of principals
// per payment).
constexpr const char* k_intake_once = "intake_once";
const std::string k_intake_once_sql = R"sql(
WITH c AS (
    INSERT INTO idempotency_records
        (tenant_id, principal_id, operation, idempotency_key, request_hash, expires_at,
         response_status, response_body, resource_type, resource_id)
    SELECT $1::uuid, $2::uuid, $3::text, $4::text, decode($5, 'hex'),
           now() + make_interval(secs => $6::bigint),
           202, $17::text || to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
                || $18::text,
           'payment', $7::uuid
      FROM principals
     WHERE tenant_id = $1::uuid AND principal_id = $2::uuid AND revoked_at IS NULL
    ON CONFLICT DO NOTHING
    RETURNING response_body, resource_id
), p AS (
    INSERT INTO payments (tenant_id, payment_id, merchant_reference, amount_minor, currency, provider,
                          payment_method, customer, description, metadata, operation_id, state,
                          created_by, idempotency_key_hash, capture_method,
                          authorization_expires_at)
    SELECT $1::uuid, c.resource_id, $8::text, $9::bigint, $10::text, $11::text, $12::text, $13::text,
           $14::text, $15::jsonb, $16::text, 'pending', $2::uuid, decode($19, 'hex'), $20::text,
           now() + make_interval(secs => $21::bigint)
      FROM c
    ON CONFLICT (tenant_id, merchant_reference) DO NOTHING
    RETURNING *
), o AS ()sql" + payment_event_insert("p", {}, "'payment.created'") +
                                      R"sql(
)
SELECT c.response_body,
       CASE WHEN c.response_body IS NOT NULL AND NOT EXISTS (SELECT 1 FROM p)
            THEN payrecon_intake_reference_taken() END,
       encode(e.request_hash, 'hex'), e.response_status, e.response_body, e.resource_id::text,
       e.revoked,
       CASE WHEN c.response_body IS NULL
            THEN (SELECT revoked_at IS NOT NULL FROM principals
                   WHERE tenant_id = $1::uuid AND principal_id = $2::uuid) END
  FROM (SELECT 1) AS one
  LEFT JOIN c ON true
  LEFT JOIN LATERAL (
        SELECT r.request_hash, r.response_status, r.response_body, r.resource_id,
               pr.revoked_at IS NOT NULL AS revoked
          FROM idempotency_records r
          JOIN principals pr ON pr.tenant_id = r.tenant_id AND pr.principal_id = r.principal_id
         WHERE c.response_body IS NULL
           AND r.tenant_id = $1::uuid AND r.principal_id = $2::uuid AND r.operation = $3
           AND r.idempotency_key = $4
         LIMIT 1) AS e ON true)sql";

// The payment that holds the merchant reference. A statement of its own: it must see the row the
// INSERT above conflicted with, committed by another transaction after this one's snapshot.
constexpr const char* k_holder = "intake_reference_holder";
const std::string k_holder_sql = R"sql(
SELECT payment_id::text, created_by::text, encode(idempotency_key_hash, 'hex')
  FROM payments WHERE tenant_id = $1::uuid AND merchant_reference = $2)sql";

constexpr const char* k_store_conflict = "intake_store_conflict";
const std::string k_store_conflict_sql = R"sql(
UPDATE idempotency_records SET response_status = 409, response_body = $5
 WHERE tenant_id = $1::uuid AND principal_id = $2::uuid AND operation = $3 AND idempotency_key = $4)sql";

constexpr const char* k_read_record = "intake_read_record";
const std::string k_read_record_sql = R"sql(
SELECT encode(r.request_hash, 'hex'), r.response_status, r.response_body, r.resource_id::text,
       p.revoked_at IS NOT NULL
  FROM idempotency_records r
  JOIN principals p ON p.tenant_id = r.tenant_id AND p.principal_id = r.principal_id
 WHERE r.tenant_id = $1::uuid AND r.principal_id = $2::uuid AND r.operation = $3
   AND r.idempotency_key = $4)sql";

} // namespace

const std::string& statements::intake_once() {
    return k_intake_once_sql;
}

std::optional<IntakeWrite> read_intake_record(Db::Impl& impl, pqxx::transaction_base& tx,
                                              const IntakeClaim& claim) {
    impl.prepare(k_read_record, k_read_record_sql);
    const pqxx::result existing = tx.exec_prepared(
        k_read_record, claim.tenant_id, claim.principal_id, claim.operation, claim.idempotency_key);
    if (existing.empty()) {
        return std::nullopt;
    }
    const pqxx::row row = existing[0];
    IntakeWrite out;
    out.kind = IntakeWrite::Kind::existing;
    out.stored_hash = row[0].as<std::string>();
    out.status = row[1].is_null() ? 0 : row[1].as<int>();
    out.body = row[2].is_null() ? std::string() : row[2].as<std::string>();
    if (!row[3].is_null()) {
        out.resource_id = row[3].as<std::string>();
    }
    out.principal_revoked = row[4].as<bool>();
    return out;
}

void store_intake_conflict(Db::Impl& impl, pqxx::transaction_base& tx, const IntakeClaim& claim,
                           const std::string& body) {
    impl.prepare(k_store_conflict, k_store_conflict_sql);
    tx.exec_prepared0(k_store_conflict, claim.tenant_id, claim.principal_id, claim.operation,
                      claim.idempotency_key, body);
}

namespace {

const char* capture_method(const PaymentRequest& request) {
    return request.manual_capture ? "manual" : "automatic";
}

// An authorisation's validity in seconds (its expiry is counted from acceptance: the earliest the
// provider may let it lapse); none for a charge captured at once, or a provider whose rule is not
// known.
std::optional<long long> authorization_validity(const NewPayment& payment) {
    if (!payment.request->manual_capture || !payment.authorization_validity ||
        payment.authorization_validity->count() <= 0) {
        return std::nullopt;
    }
    return static_cast<long long>(payment.authorization_validity->count());
}

// Two creation times of the same length that differ in their first character: the 202 made with
// each tells where the time stands in it.
constexpr std::string_view k_time_a = "0000-00-00T00:00:00.000Z";
constexpr std::string_view k_time_b = "1111-11-11T11:11:11.111Z";

struct SplitBody {
    std::string before; // the 202 up to the creation time
    std::string after;  // and after it
};

std::optional<SplitBody> split_at_time(const std::string& a, const std::string& b) {
    if (a.size() != b.size()) {
        return std::nullopt;
    }
    const auto at =
        static_cast<std::size_t>(std::mismatch(a.begin(), a.end(), b.begin()).first - a.begin());
    if (at + k_time_a.size() > a.size() || a.compare(at, k_time_a.size(), k_time_a) != 0 ||
        a.compare(at + k_time_a.size(), std::string::npos, b, at + k_time_a.size()) != 0) {
        return std::nullopt;
    }
    return SplitBody{a.substr(0, at), a.substr(at + k_time_a.size())};
}

// The one-statement path: nullopt when the transactional path must decide (a refused request, a
// merchant reference that is taken, a key whose record this statement's snapshot cannot see).
// The statement is idempotent, so a connection lost while it ran -- it may have committed -- is
// answered by running it once more on a new connection: a commit shows as the key's record.
std::optional<IntakeWrite>
write_intake_once(Db& db, const IntakeClaim& claim, const NewPayment& payment,
                  const std::function<IntakeBodies(const std::string&)>& make_bodies) {
    const IntakeBodies a = make_bodies(std::string(k_time_a));
    if (a.refused) {
        return std::nullopt; // refused only if the key is new: the transactional path tells
    }
    const auto split = split_at_time(a.accepted, make_bodies(std::string(k_time_b)).accepted);
    if (!split) {
        return std::nullopt;
    }
    check_stored_size(a.accepted);
    Db::Impl& impl = db.impl();
    const PaymentRequest& req = *payment.request;
    const nlohmann::json metadata(req.metadata);
    const std::string metadata_text = metadata.dump();
    const char* key_hash =
        payment.idempotency_key_hash.empty() ? nullptr : payment.idempotency_key_hash.c_str();
    const std::optional<long long> validity = authorization_validity(payment);
    for (int attempt = 0;; ++attempt) {
        try {
            return translate_errors(impl, [&]() -> std::optional<IntakeWrite> {
                impl.prepare(k_intake_once, k_intake_once_sql);
                pqxx::nontransaction tx(impl.connection());
                crash_point("intake.before_statement");
                pqxx::result rows;
                try {
                    rows = tx.exec_prepared(
                        k_intake_once, claim.tenant_id, claim.principal_id, claim.operation,
                        claim.idempotency_key, claim.request_hash,
                        static_cast<long long>(claim.retention.count()), payment.payment_id,
                        req.merchant_reference, req.amount_minor, req.currency, req.provider,
                        req.payment_method, or_null(req.customer), or_null(req.description),
                        metadata_text, payment.operation_id, split->before, split->after, key_hash,
                        capture_method(req), validity);
                } catch (const pqxx::broken_connection& e) {
                    // Sent or not, committed or not: nobody can say.
                    throw pqxx::in_doubt_error(e.what());
                } catch (const pqxx::sql_error& e) {
                    if (e.sqlstate() == "PR409") {
                        return std::nullopt;
                    }
                    throw;
                }
                crash_point("intake.after_commit");
                const pqxx::row row = rows.at(0);
                IntakeWrite out;
                if (!row[0].is_null()) {
                    out.kind = IntakeWrite::Kind::created;
                    out.status = 202;
                    out.body = row[0].as<std::string>();
                    out.resource_id = payment.payment_id;
                    return out;
                }
                if (row[2].is_null()) {
                    if (row[7].is_null() || row[7].as<bool>()) {
                        // The credential was revoked (or its principal is gone) since it was
                        // looked up: nothing was written.
                        out.kind = IntakeWrite::Kind::principal_revoked;
                        out.status = 403;
                        return out;
                    }
                    return std::nullopt; // the record committed after this statement began
                }
                out.kind = IntakeWrite::Kind::existing;
                out.stored_hash = row[2].as<std::string>();
                out.status = row[3].is_null() ? 0 : row[3].as<int>();
                out.body = row[4].is_null() ? std::string() : row[4].as<std::string>();
                if (!row[5].is_null()) {
                    out.resource_id = row[5].as<std::string>();
                }
                out.principal_revoked = row[6].as<bool>();
                return out;
            });
        } catch (const DatabaseUnavailable& e) {
            if (attempt == 0 && e.commit_outcome_unknown()) {
                continue; // the retry finds the record if the first run committed
            }
            if (attempt > 0 && !e.commit_outcome_unknown()) {
                // The first run may have committed and this one could not look.
                throw TransientStoreError(e.what(), true);
            }
            throw;
        }
    }
}

} // namespace

// Round trips (bench/README.md): a fresh key and a replay are one statement each -- two with the
// credential lookup before it. The transactional path (BEGIN, the claim, the create statement or
// the read, COMMIT) runs only when that statement cannot decide. The IDs cost none: the caller
// makes the payment and operation IDs (core/uuid), the outbox event ID is the column's default
// (uuid_generate_v7(), migration 0010).
void prepare_intake(Db& db) {
    Db::Impl& impl = db.impl();
    translate_errors(impl, [&] {
        impl.prepare(k_intake_once, k_intake_once_sql);
        impl.connection().prepare_now(k_intake_once);
        return 0;
    });
}

IntakeWrite write_intake(Db& db, const IntakeClaim& claim, const NewPayment& payment,
                         const std::function<IntakeBodies(const std::string&)>& make_bodies) {
    if (auto once = write_intake_once(db, claim, payment, make_bodies)) {
        return *once;
    }
    Db::Impl& impl = db.impl();
    const PaymentRequest& req = *payment.request;
    // A record found by conflict can vanish before we read it only if purge removed it in
    // between; then the key is free again, so claim it anew.
    for (int round = 0; round < 3; ++round) {
        auto result = translate_errors(impl, [&]() -> std::optional<IntakeWrite> {
            impl.prepare(k_claim_key, k_claim_key_sql);
            impl.prepare(k_create_payment, k_create_payment_sql);
            impl.prepare(k_holder, k_holder_sql);
            pqxx::work tx(impl.connection());
            const pqxx::result claimed =
                tx.exec_prepared(k_claim_key, claim.tenant_id, claim.principal_id, claim.operation,
                                 claim.idempotency_key, claim.request_hash,
                                 static_cast<long long>(claim.retention.count()));
            IntakeWrite out;
            if (!claimed.empty()) {
                crash_point("intake.after_key_claim");
                const IntakeBodies bodies = make_bodies(claimed[0][0].as<std::string>());
                if (bodies.refused) {
                    tx.abort(); // the key claim goes with it
                    out.kind = IntakeWrite::Kind::refused;
                    out.status = 422;
                    out.body = *bodies.refused;
                    return out;
                }
                check_stored_size(bodies.accepted);
                const nlohmann::json metadata(req.metadata);
                const char* key_hash = payment.idempotency_key_hash.empty()
                                           ? nullptr
                                           : payment.idempotency_key_hash.c_str();
                const pqxx::row r = tx.exec_prepared1(
                    k_create_payment, claim.tenant_id, claim.principal_id, claim.operation,
                    claim.idempotency_key, payment.payment_id, req.merchant_reference,
                    req.amount_minor, req.currency, req.provider, req.payment_method,
                    or_null(req.customer), or_null(req.description), metadata.dump(),
                    payment.operation_id, bodies.accepted, key_hash, capture_method(req),
                    authorization_validity(payment));
                if (r[0].as<bool>()) {
                    out.kind = IntakeWrite::Kind::created;
                    out.status = 202;
                    out.body = bodies.accepted;
                    out.resource_id = payment.payment_id;
                } else {
                    const pqxx::row holder =
                        tx.exec_prepared1(k_holder, claim.tenant_id, req.merchant_reference);
                    ExistingPayment existing;
                    existing.payment_id = holder[0].as<std::string>();
                    existing.created_by = holder[1].as<std::string>();
                    if (!holder[2].is_null()) {
                        existing.idempotency_key_hash = holder[2].as<std::string>();
                    }
                    out.kind = IntakeWrite::Kind::duplicate_reference;
                    out.status = 409;
                    out.body = bodies.duplicate_reference(existing);
                    check_stored_size(out.body);
                    store_intake_conflict(impl, tx, claim, out.body);
                }
                crash_point("intake.before_commit");
                tx.commit();
                crash_point("intake.after_commit");
                return out;
            }
            // Not inserted: the key has a record. Read it in a new statement (a single-statement
            // read would see nothing under READ COMMITTED).
            auto existing = read_intake_record(impl, tx, claim);
            if (!existing) {
                return std::nullopt;
            }
            out = std::move(*existing);
            tx.commit();
            return out;
        });
        if (result) {
            return *result;
        }
    }
    throw TransientStoreError("the idempotency record kept disappearing while being read", false);
}

void audit_purge_run(Db::Impl& impl, const std::string& action, const std::string& actor,
                     const std::string& run_id, const std::string& detail_json) {
    pqxx::work tx(impl.connection());
    tx.exec_params0("INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, "
                    "detail) VALUES ($1::uuid, $2, $3, 'purge_run', $4, $5::jsonb)",
                    k_deployment_tenant, actor, action, run_id, detail_json);
    tx.commit();
}

PurgeResult purge_idempotency_records(Db& db, std::optional<std::chrono::seconds> retention,
                                      bool dry_run, const PurgeAudit& audit, int batch_size) {
    Db::Impl& impl = db.impl();
    const std::string expired = retention ? "r.created_at <= now() - make_interval(secs => $1)"
                                          : "r.expires_at <= now() AND $1::bigint IS NULL";
    // A payment's record, or a refund's (its resource an operation of kind refund).
    const std::string unfinished =
        "(EXISTS (SELECT 1 FROM payments p WHERE p.tenant_id = r.tenant_id "
        "AND p.payment_id = r.resource_id AND p.state NOT IN ('succeeded', 'failed')) "
        "OR EXISTS (SELECT 1 FROM operations o WHERE o.tenant_id = r.tenant_id "
        "AND o.id = r.resource_id AND o.state NOT IN ('succeeded', 'failed')))";
    const std::optional<long long> secs =
        retention ? std::optional<long long>(retention->count()) : std::nullopt;
    const char* secs_param = nullptr;
    const std::string secs_text = secs ? std::to_string(*secs) : std::string();
    if (secs) {
        secs_param = secs_text.c_str();
    }
    // What every audit row of the run says of it.
    nlohmann::json run;
    run["by"] = retention ? "age" : "expiry";
    run["retention_s"] = secs ? nlohmann::json(*secs) : nlohmann::json();
    run["minimum_retention_s"] = audit.minimum_retention.count();
    run["default_minimum_retention_s"] = audit.default_minimum_retention.count();
    run["minimum_lowered"] = audit.minimum_retention < audit.default_minimum_retention;
    return translate_errors(impl, [&] {
        PurgeResult out;
        {
            pqxx::read_transaction tx(impl.connection());
            out.kept_unfinished =
                tx.exec_params1("SELECT count(*) FROM idempotency_records r WHERE " + expired +
                                    " AND " + unfinished,
                                secs_param)[0]
                    .as<long long>();
            if (dry_run) {
                out.deleted = tx.exec_params1("SELECT count(*) FROM idempotency_records r WHERE " +
                                                  expired + " AND NOT " + unfinished,
                                              secs_param)[0]
                                  .as<long long>();
                return out;
            }
            out.run_id = tx.exec1("SELECT gen_random_uuid()::text")[0].as<std::string>();
        }
        run["run_id"] = out.run_id;
        // Batches keep each transaction short; SKIP LOCKED lets intake and other purges go on. Each
        // batch's deletions and their audit rows (one per tenant) commit together.
        const std::string del =
            "WITH doomed AS (SELECT r.tenant_id, r.principal_id, r.operation, r.idempotency_key "
            "FROM idempotency_records r WHERE " +
            expired + " AND NOT " + unfinished +
            " LIMIT $2 FOR UPDATE SKIP LOCKED), "
            "gone AS (DELETE FROM idempotency_records x USING doomed d "
            "WHERE x.tenant_id = d.tenant_id AND x.principal_id = d.principal_id "
            "AND x.operation = d.operation AND x.idempotency_key = d.idempotency_key "
            "RETURNING x.tenant_id), "
            "per_tenant AS (SELECT tenant_id, count(*) AS n FROM gone GROUP BY tenant_id), "
            "audited AS (INSERT INTO audit_log (tenant_id, actor, action, subject_type, "
            "subject_id, detail) "
            "SELECT tenant_id, $3, 'idempotency.purge', 'purge_run', $4, "
            "$5::jsonb || jsonb_build_object('deleted', n) FROM per_tenant) "
            "SELECT coalesce(sum(n), 0)::bigint, coalesce(string_agg(tenant_id::text, ','), '') "
            "FROM per_tenant";
        std::set<std::string> tenants;
        for (;;) {
            pqxx::work tx(impl.connection());
            const pqxx::row r =
                tx.exec_params1(del, secs_param, batch_size, audit.actor, out.run_id, run.dump());
            tx.commit();
            const long long n = r[0].as<long long>();
            out.deleted += n;
            const std::string ids = r[1].as<std::string>();
            add_listed(tenants, ids);
            if (n < batch_size) {
                break;
            }
        }
        out.tenants = static_cast<long long>(tenants.size());
        nlohmann::json totals = run;
        totals["deleted"] = out.deleted;
        totals["kept_unfinished"] = out.kept_unfinished;
        totals["tenants"] = out.tenants;
        audit_purge_run(impl, "idempotency.purge_run", audit.actor, out.run_id, totals.dump());
        return out;
    });
}

} // namespace payrecon::store
