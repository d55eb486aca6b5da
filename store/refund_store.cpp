#include "store/refund_store.hpp"

#include "core/crash_point.hpp"
#include "store/intake_record.hpp"
#include "store/payment_event.hpp"
#include "store/pq.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace payrecon::store {
namespace {

// The key, for a principal not revoked. Empty: the key has a record, or the principal is revoked.
constexpr const char* k_refund_claim_key = "refund_claim_key";
const std::string k_refund_claim_key_sql = R"sql(
INSERT INTO idempotency_records
    (tenant_id, principal_id, operation, idempotency_key, request_hash, expires_at)
SELECT $1::uuid, $2::uuid, $3, $4, decode($5, 'hex'), now() + make_interval(secs => $6::bigint)
  FROM principals
 WHERE tenant_id = $1::uuid AND principal_id = $2::uuid AND revoked_at IS NULL
ON CONFLICT DO NOTHING
RETURNING )sql" + iso_utc("created_at");

constexpr const char* k_principal_revoked = "refund_principal_revoked";
const std::string k_principal_revoked_sql = R"sql(
SELECT revoked_at IS NOT NULL FROM principals WHERE tenant_id = $1::uuid AND principal_id = $2::uuid)sql";

// The payment, locked: every refund of it, and every change of what it charged, waits here.
constexpr const char* k_lock_payment = "refund_lock_payment";
const std::string k_lock_payment_sql = R"sql(
SELECT payment_id::text, state, amount_minor, charged_amount_minor, refund_held_minor, currency,
       provider
  FROM payments WHERE tenant_id = $1::uuid AND payment_id = $2::uuid
   FOR UPDATE)sql";

// The refund, the amount held for it on its payment (the guard: it fits what is left), its
// event, an operator's audit row and the 202 under the key, in one statement. One row: whether
// the refund was inserted (its merchant reference free) and whether its amount was held.
constexpr const char* k_create_refund = "refund_create";
const std::string k_create_refund_sql = R"sql(
WITH r AS (
    INSERT INTO operations (tenant_id, id, payment_id, kind, operation_id, amount_minor, currency,
                            provider, reason, merchant_reference, metadata, created_by,
                            idempotency_key_hash)
    SELECT p.tenant_id, $5::uuid, p.payment_id, 'refund', $6, $7::bigint, p.currency, p.provider,
           $8, $9, $10::jsonb, $2::uuid, decode($11, 'hex')
      FROM payments p
     WHERE p.tenant_id = $1::uuid AND p.payment_id = $12::uuid
    ON CONFLICT (tenant_id, kind, merchant_reference) WHERE merchant_reference IS NOT NULL
    DO NOTHING
    RETURNING *
), held AS (
    UPDATE payments p
       SET refund_held_minor = p.refund_held_minor + r.amount_minor
      FROM r
     WHERE p.tenant_id = r.tenant_id AND p.payment_id = r.payment_id AND p.state = 'succeeded'
       AND coalesce(p.charged_amount_minor, p.amount_minor) - p.refund_held_minor >= r.amount_minor
    RETURNING p.payment_id
), event AS ()sql" + refund_event_insert("r", {}, "'refund.created'") +
                                        R"sql(
), audit AS (
    INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail)
    SELECT r.tenant_id, $13, 'refund.create', 'refund', r.id::text,
           jsonb_build_object('payment_id', r.payment_id, 'amount', r.amount_minor,
                              'currency', r.currency, 'note', $14::text)
      FROM r WHERE $13::text IS NOT NULL
), k AS (
    UPDATE idempotency_records
       SET response_status = 202, response_body = $15, resource_type = 'refund', resource_id = r.id
      FROM r
     WHERE idempotency_records.tenant_id = $1::uuid AND principal_id = $2::uuid AND operation = $3
       AND idempotency_key = $4
)
SELECT EXISTS (SELECT 1 FROM r), EXISTS (SELECT 1 FROM held))sql";

// The refund holding a merchant reference: a statement of its own, to see a row committed by
// another transaction after this one's snapshot.
constexpr const char* k_refund_holder = "refund_reference_holder";
const std::string k_refund_holder_sql = R"sql(
SELECT id::text, payment_id::text FROM operations
 WHERE tenant_id = $1::uuid AND kind = 'refund' AND merchant_reference = $2)sql";

const std::string k_refund_columns =
    "o.id::text, o.tenant_id::text, o.payment_id::text, o.operation_id, o.state, o.amount_minor, "
    "o.currency, o.provider, o.reason, o.merchant_reference, o.metadata::text, "
    "o.provider_reference, o.failure_reason, o.review_reason, o.review_code, o.attempt_count, " +
    iso_utc("o.created_at") + ", " + iso_utc("o.updated_at") + ", " + iso_utc("o.reversed_at") +
    ", o.generation";

RefundRow refund_from_row(const pqxx::row& row) {
    auto opt = [&](int i) {
        return row[i].is_null() ? std::nullopt
                                : std::optional<std::string>(row[i].as<std::string>());
    };
    RefundRow r;
    r.refund_id = row[0].as<std::string>();
    r.tenant_id = row[1].as<std::string>();
    r.payment_id = row[2].as<std::string>();
    r.operation_id = row[3].as<std::string>();
    r.state = row[4].as<std::string>();
    r.amount_minor = row[5].as<long long>();
    r.currency = row[6].as<std::string>();
    r.provider = row[7].as<std::string>();
    r.reason = opt(8);
    r.merchant_reference = opt(9);
    r.metadata = row[10].as<std::string>();
    r.provider_reference = opt(11);
    r.failure_reason = opt(12);
    r.review_reason = opt(13);
    r.review_code = opt(14);
    r.attempt_count = row[15].as<int>();
    r.created_at = row[16].as<std::string>();
    r.updated_at = row[17].as<std::string>();
    r.reversed_at = opt(18);
    r.generation = row[19].as<long long>();
    return r;
}

} // namespace

IntakeWrite write_refund_intake(
    Db& db, const IntakeClaim& claim, const NewRefund& refund,
    const std::function<RefundDecision(const std::string&,
                                       const std::optional<RefundablePayment>&)>& decide) {
    Db::Impl& impl = db.impl();
    const RefundRequest& req = *refund.request;
    // A record found by conflict can vanish before it is read only if purge removed it in
    // between; then the key is free again, so claim it anew.
    for (int round = 0; round < 3; ++round) {
        auto result = translate_errors(impl, [&]() -> std::optional<IntakeWrite> {
            impl.prepare(k_refund_claim_key, k_refund_claim_key_sql);
            impl.prepare(k_principal_revoked, k_principal_revoked_sql);
            impl.prepare(k_lock_payment, k_lock_payment_sql);
            impl.prepare(k_create_refund, k_create_refund_sql);
            impl.prepare(k_refund_holder, k_refund_holder_sql);
            pqxx::work tx(impl.connection());
            const pqxx::result claimed =
                tx.exec_prepared(k_refund_claim_key, claim.tenant_id, claim.principal_id,
                                 claim.operation, claim.idempotency_key, claim.request_hash,
                                 static_cast<long long>(claim.retention.count()));
            IntakeWrite out;
            if (claimed.empty()) {
                if (auto existing = read_intake_record(impl, tx, claim)) {
                    tx.commit();
                    return existing;
                }
                const pqxx::result revoked =
                    tx.exec_prepared(k_principal_revoked, claim.tenant_id, claim.principal_id);
                if (revoked.empty() || revoked[0][0].as<bool>()) {
                    out.kind = IntakeWrite::Kind::principal_revoked;
                    out.status = 403;
                    return out;
                }
                return std::nullopt; // purged between the claim and the read: claim anew
            }
            crash_point("refund.after_key_claim");
            std::optional<RefundablePayment> payment;
            const pqxx::result locked =
                tx.exec_prepared(k_lock_payment, claim.tenant_id, req.payment_id);
            if (!locked.empty()) {
                const pqxx::row p = locked[0];
                RefundablePayment rp;
                rp.payment_id = p[0].as<std::string>();
                rp.state = p[1].as<std::string>();
                rp.amount_minor = p[2].as<long long>();
                if (!p[3].is_null()) {
                    rp.charged_amount_minor = p[3].as<long long>();
                }
                rp.refund_held_minor = p[4].as<long long>();
                rp.currency = p[5].as<std::string>();
                rp.provider = p[6].as<std::string>();
                payment = std::move(rp);
            }
            const RefundDecision decision = decide(claimed[0][0].as<std::string>(), payment);
            if (decision.refused_status) {
                tx.abort(); // the key claim goes with it
                out.kind = IntakeWrite::Kind::refused;
                out.status = *decision.refused_status;
                out.body = decision.refused_body;
                return out;
            }
            if (!payment) {
                throw std::logic_error("write_refund_intake: a refund of no payment was accepted");
            }
            check_stored_size(decision.accepted);
            const nlohmann::json metadata(req.metadata);
            const char* key_hash =
                refund.idempotency_key_hash.empty() ? nullptr : refund.idempotency_key_hash.c_str();
            const pqxx::row r = tx.exec_prepared1(
                k_create_refund, claim.tenant_id, claim.principal_id, claim.operation,
                claim.idempotency_key, refund.refund_id, refund.operation_id, decision.amount_minor,
                or_null(req.reason), or_null(req.merchant_reference), metadata.dump(), key_hash,
                req.payment_id, or_null(refund.audit_actor), or_null(refund.audit_note),
                decision.accepted);
            if (r[0].as<bool>()) {
                if (!r[1].as<bool>()) {
                    // Under the payment's row lock the decision saw what is held: a refund that
                    // does not fit now was accepted against a stale read. Nothing is committed.
                    throw std::logic_error(
                        "write_refund_intake: the refund was decided against a payment that "
                        "changed under its lock");
                }
                out.kind = IntakeWrite::Kind::created;
                out.status = 202;
                out.body = decision.accepted;
                out.resource_id = refund.refund_id;
            } else {
                const pqxx::row holder =
                    tx.exec_prepared1(k_refund_holder, claim.tenant_id, *req.merchant_reference);
                out.kind = IntakeWrite::Kind::duplicate_reference;
                out.status = 409;
                out.body = decision.duplicate_reference(
                    ExistingRefund{holder[0].as<std::string>(), holder[1].as<std::string>()});
                check_stored_size(out.body);
                store_intake_conflict(impl, tx, claim, out.body);
            }
            crash_point("refund.before_commit");
            tx.commit();
            crash_point("refund.after_commit");
            return out;
        });
        if (result) {
            return *result;
        }
    }
    throw TransientStoreError("the idempotency record kept disappearing while being read", false);
}

std::vector<RefundRow> refunds_of_payment(pqxx::transaction_base& tx, const std::string& tenant_id,
                                          const std::string& payment_id) {
    const pqxx::result r = tx.exec_params(
        "SELECT " + k_refund_columns +
            " FROM operations o WHERE o.tenant_id = $1::uuid AND o.payment_id = $2::uuid"
            " AND o.kind = 'refund' ORDER BY o.created_at, o.id",
        tenant_id, payment_id);
    std::vector<RefundRow> out;
    for (const auto& row : r) {
        out.push_back(refund_from_row(row));
    }
    return out;
}

std::optional<RefundRow> find_refund(Db& db, const std::string& tenant_id,
                                     const std::string& refund_id) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<RefundRow> {
        pqxx::read_transaction tx(impl.connection());
        const pqxx::result r =
            tx.exec_params("SELECT " + k_refund_columns +
                               " FROM operations o WHERE o.tenant_id = $1::uuid AND o.id = $2::uuid"
                               " AND o.kind = 'refund'",
                           tenant_id, refund_id);
        if (r.empty()) {
            return std::nullopt;
        }
        return refund_from_row(r[0]);
    });
}

std::optional<RefundRow> find_refund_any_tenant(Db& db, const std::string& id_or_operation_id) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<RefundRow> {
        pqxx::read_transaction tx(impl.connection());
        const pqxx::result r =
            tx.exec_params("SELECT " + k_refund_columns +
                               " FROM operations o WHERE o.kind = 'refund' AND (o.operation_id = $1"
                               " OR (o.id::text = lower($1)))",
                           id_or_operation_id);
        if (r.empty()) {
            return std::nullopt;
        }
        return refund_from_row(r[0]);
    });
}

std::vector<RefundRow> list_refunds(Db& db, const RefundFilter& filter) {
    const std::string older_than =
        filter.older_than ? std::to_string(filter.older_than->count()) : std::string();
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        const pqxx::result r =
            tx.exec_params("SELECT " + k_refund_columns +
                               " FROM operations o WHERE o.kind = 'refund'"
                               " AND ($1::uuid IS NULL OR o.tenant_id = $1::uuid)"
                               " AND ($2::uuid IS NULL OR o.payment_id = $2::uuid)"
                               " AND ($3::text IS NULL OR o.state = $3::text)"
                               " AND ($5::text IS NULL OR o.provider = $5::text)"
                               " AND ($6::bigint IS NULL OR o.updated_at <= now() - "
                               "make_interval(secs => $6::double precision))"
                               " ORDER BY CASE WHEN $7 THEN o.updated_at ELSE o.created_at END,"
                               " o.id LIMIT $4",
                           or_null(filter.tenant_id), or_null(filter.payment_id),
                           or_null(filter.state), filter.limit + 1, or_null(filter.provider),
                           filter.older_than ? older_than.c_str() : nullptr, filter.by_updated_at);
        std::vector<RefundRow> out;
        for (const auto& row : r) {
            out.push_back(refund_from_row(row));
        }
        return out;
    });
}

} // namespace payrecon::store
