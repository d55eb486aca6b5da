#include "store/operation_store.hpp"

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

// The payment, locked: every operation of it, and every change of what it charged, waits here.
constexpr const char* k_lock_payment = "operation_lock_payment";
const std::string k_lock_payment_sql = R"sql(
SELECT payment_id::text, state, amount_minor, charged_amount_minor, refund_held_minor, currency,
       provider, capture_method = 'manual', capture_held_minor, captured_minor, final_capture_held,
       void_held, voided_at IS NOT NULL,
       authorization_expired_at IS NOT NULL OR authorization_expires_at <= now(),
       )sql" + iso_utc("authorization_expires_at") +
                                       R"sql(
  FROM payments WHERE tenant_id = $1::uuid AND payment_id = $2::uuid
   FOR UPDATE)sql";

// What an operation of `kind` takes on its payment (SET), and the guard that it may (WHERE): the
// amount rules of DESIGN section 16, in the database. The guard is re-read on the row's newest
// version when the UPDATE waited for another writer, so no two operations take the same room.
struct KindRule {
    const char* set;
    const char* guard;
};

KindRule rule_of(OperationKind kind) {
    switch (kind) {
    case OperationKind::refund:
        return {"refund_held_minor = p.refund_held_minor + r.amount_minor",
                "CASE WHEN p.capture_method = 'manual' THEN p.captured_minor"
                " ELSE coalesce(p.charged_amount_minor, p.amount_minor) END"
                " - p.refund_held_minor >= r.amount_minor"};
    case OperationKind::capture:
        return {"capture_held_minor = p.capture_held_minor + r.amount_minor,"
                " final_capture_held = r.final",
                "p.capture_method = 'manual' AND NOT p.void_held AND NOT p.final_capture_held"
                " AND p.voided_at IS NULL AND p.authorization_expired_at IS NULL"
                " AND (p.authorization_expires_at IS NULL OR p.authorization_expires_at > now())"
                " AND p.amount_minor - p.capture_held_minor >= r.amount_minor"};
    case OperationKind::void_authorization:
        return {"void_held = true",
                "p.capture_method = 'manual' AND NOT p.void_held AND NOT p.final_capture_held"
                " AND p.voided_at IS NULL AND p.authorization_expired_at IS NULL"};
    case OperationKind::charge:
        break;
    }
    throw std::logic_error("write_operation_intake: a charge is not an operations row");
}

std::string statement_name(std::string_view head, OperationKind kind) {
    return std::string(head) + "_" + std::string(to_string(kind));
}

// The operation, what it takes held on its payment (its kind's rule), its event, an operator's
// audit row and the 202 under the key, in one statement. One row: whether the operation was
// inserted (its merchant reference free) and whether its rule let it take what it asked.
std::string create_operation_sql(OperationKind kind) {
    const KindRule rule = rule_of(kind);
    const std::string name(to_string(kind));
    return R"sql(
WITH r AS (
    INSERT INTO operations (tenant_id, id, payment_id, kind, operation_id, amount_minor, currency,
                            provider, reason, final, merchant_reference, metadata, created_by,
                            idempotency_key_hash)
    SELECT p.tenant_id, $5::uuid, p.payment_id, ')sql" +
           name + R"sql(', $6, $7::bigint, p.currency, p.provider,
           $8, $16::boolean, $9, $10::jsonb, $2::uuid, decode($11, 'hex')
      FROM payments p
     WHERE p.tenant_id = $1::uuid AND p.payment_id = $12::uuid
    ON CONFLICT (tenant_id, kind, merchant_reference) WHERE merchant_reference IS NOT NULL
    DO NOTHING
    RETURNING *
), held AS (
    UPDATE payments p
       SET )sql" +
           rule.set +
           R"sql(
      FROM r
     WHERE p.tenant_id = r.tenant_id AND p.payment_id = r.payment_id AND p.state = 'succeeded'
       AND )sql" +
           rule.guard + R"sql(
    RETURNING p.payment_id
), event AS ()sql" +
           operation_event_insert("r", {}, "'" + name + ".created'") +
           R"sql(
), audit AS (
    INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail)
    SELECT r.tenant_id, $13, ')sql" +
           name + R"sql(.create', ')sql" + name + R"sql(', r.id::text,
           jsonb_build_object('payment_id', r.payment_id, 'amount', r.amount_minor,
                              'currency', r.currency, 'note', $14::text)
      FROM r WHERE $13::text IS NOT NULL
), k AS (
    UPDATE idempotency_records
       SET response_status = 202, response_body = $15, resource_type = ')sql" +
           name + R"sql(', resource_id = r.id
      FROM r
     WHERE idempotency_records.tenant_id = $1::uuid AND principal_id = $2::uuid AND operation = $3
       AND idempotency_key = $4
)
SELECT EXISTS (SELECT 1 FROM r), EXISTS (SELECT 1 FROM held))sql";
}

// The operation of the kind holding a merchant reference: a statement of its own, to see a row
// committed by another transaction after this one's snapshot.
constexpr const char* k_reference_holder_sql = R"sql(
SELECT id::text, payment_id::text FROM operations
 WHERE tenant_id = $1::uuid AND kind = $2 AND merchant_reference = $3)sql";
constexpr const char* k_reference_holder = "operation_reference_holder";

const std::string k_operation_columns =
    "o.id::text, o.tenant_id::text, o.payment_id::text, o.operation_id, o.state, o.amount_minor, "
    "o.currency, o.provider, o.reason, o.merchant_reference, o.metadata::text, "
    "o.provider_reference, o.failure_reason, o.review_reason, o.review_code, o.attempt_count, " +
    iso_utc("o.created_at") + ", " + iso_utc("o.updated_at") + ", " + iso_utc("o.reversed_at") +
    ", o.generation, o.kind, o.final";

OperationRow operation_from_row(const pqxx::row& row) {
    auto opt = [&](int i) {
        return row[i].is_null() ? std::nullopt
                                : std::optional<std::string>(row[i].as<std::string>());
    };
    OperationRow r;
    r.id = row[0].as<std::string>();
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
    const auto kind = parse_operation_kind(row[20].as<std::string>());
    if (!kind) {
        throw std::logic_error("an operation of a kind this build does not know: " +
                               row[20].as<std::string>());
    }
    r.kind = *kind;
    if (!row[21].is_null()) {
        r.final = row[21].as<bool>();
    }
    return r;
}

OperablePayment operable_from_row(const pqxx::row& p) {
    OperablePayment op;
    op.payment_id = p[0].as<std::string>();
    op.state = p[1].as<std::string>();
    op.amount_minor = p[2].as<long long>();
    if (!p[3].is_null()) {
        op.charged_amount_minor = p[3].as<long long>();
    }
    op.refund_held_minor = p[4].as<long long>();
    op.currency = p[5].as<std::string>();
    op.provider = p[6].as<std::string>();
    op.manual_capture = p[7].as<bool>();
    op.capture_held_minor = p[8].as<long long>();
    op.captured_minor = p[9].as<long long>();
    op.final_capture_held = p[10].as<bool>();
    op.void_held = p[11].as<bool>();
    op.voided = p[12].as<bool>();
    op.expired = !p[13].is_null() && p[13].as<bool>();
    if (!p[14].is_null()) {
        op.authorization_expires_at = p[14].as<std::string>();
    }
    return op;
}

} // namespace

IntakeWrite write_operation_intake(
    Db& db, const IntakeClaim& claim, const NewOperation& operation,
    const std::function<OperationDecision(const std::string&,
                                          const std::optional<OperablePayment>&)>& decide) {
    Db::Impl& impl = db.impl();
    const std::string create = statement_name("operation_create", operation.kind);
    const std::string create_sql = create_operation_sql(operation.kind);
    const std::string kind_name(to_string(operation.kind));
    // A record found by conflict can vanish before it is read only if purge removed it in
    // between; then the key is free again, so claim it anew.
    for (int round = 0; round < 3; ++round) {
        auto result = translate_errors(impl, [&]() -> std::optional<IntakeWrite> {
            impl.prepare(k_refund_claim_key, k_refund_claim_key_sql);
            impl.prepare(k_principal_revoked, k_principal_revoked_sql);
            impl.prepare(k_lock_payment, k_lock_payment_sql);
            impl.prepare(create.c_str(), create_sql);
            impl.prepare(k_reference_holder, k_reference_holder_sql);
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
            std::optional<OperablePayment> payment;
            const pqxx::result locked =
                tx.exec_prepared(k_lock_payment, claim.tenant_id, operation.payment_id);
            if (!locked.empty()) {
                payment = operable_from_row(locked[0]);
            }
            const OperationDecision decision = decide(claimed[0][0].as<std::string>(), payment);
            if (decision.refused_status) {
                tx.abort(); // the key claim goes with it
                out.kind = IntakeWrite::Kind::refused;
                out.status = *decision.refused_status;
                out.body = decision.refused_body;
                return out;
            }
            if (!payment) {
                throw std::logic_error(
                    "write_operation_intake: an operation of no payment was accepted");
            }
            check_stored_size(decision.accepted);
            const nlohmann::json metadata(operation.metadata);
            const char* key_hash = operation.idempotency_key_hash.empty()
                                       ? nullptr
                                       : operation.idempotency_key_hash.c_str();
            const pqxx::row r = tx.exec_prepared1(
                create.c_str(), claim.tenant_id, claim.principal_id, claim.operation,
                claim.idempotency_key, operation.id, operation.operation_id, decision.amount_minor,
                or_null(operation.reason), or_null(operation.merchant_reference), metadata.dump(),
                key_hash, operation.payment_id, or_null(operation.audit_actor),
                or_null(operation.audit_note), decision.accepted, operation.final);
            if (r[0].as<bool>()) {
                if (!r[1].as<bool>()) {
                    // Under the payment's row lock the decision saw what is held: an operation
                    // its rule refuses now was accepted against a stale read. Nothing is
                    // committed.
                    throw std::logic_error(
                        "write_operation_intake: the " + kind_name +
                        " was decided against a payment that changed under its lock");
                }
                out.kind = IntakeWrite::Kind::created;
                out.status = 202;
                out.body = decision.accepted;
                out.resource_id = operation.id;
            } else {
                const pqxx::row holder = tx.exec_prepared1(
                    k_reference_holder, claim.tenant_id, kind_name, *operation.merchant_reference);
                out.kind = IntakeWrite::Kind::duplicate_reference;
                out.status = 409;
                out.body = decision.duplicate_reference(
                    ExistingOperation{holder[0].as<std::string>(), holder[1].as<std::string>()});
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

std::vector<OperationRow> operations_of_payment(pqxx::transaction_base& tx,
                                                const std::string& tenant_id,
                                                const std::string& payment_id) {
    const pqxx::result r = tx.exec_params(
        "SELECT " + k_operation_columns +
            " FROM operations o WHERE o.tenant_id = $1::uuid AND o.payment_id = $2::uuid"
            " ORDER BY o.created_at, o.id",
        tenant_id, payment_id);
    std::vector<OperationRow> out;
    for (const auto& row : r) {
        out.push_back(operation_from_row(row));
    }
    return out;
}

std::optional<OperationRow> find_operation(Db& db, OperationKind kind, const std::string& tenant_id,
                                           const std::string& id) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<OperationRow> {
        pqxx::read_transaction tx(impl.connection());
        const pqxx::result r =
            tx.exec_params("SELECT " + k_operation_columns +
                               " FROM operations o WHERE o.tenant_id = $1::uuid AND o.id = $2::uuid"
                               " AND o.kind = $3",
                           tenant_id, id, std::string(to_string(kind)));
        if (r.empty()) {
            return std::nullopt;
        }
        return operation_from_row(r[0]);
    });
}

std::optional<OperationRow> find_operation_any_tenant(Db& db, std::optional<OperationKind> kind,
                                                      const std::string& id_or_operation_id) {
    const std::optional<std::string> kind_name =
        kind ? std::optional<std::string>(to_string(*kind)) : std::nullopt;
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<OperationRow> {
        pqxx::read_transaction tx(impl.connection());
        const pqxx::result r =
            tx.exec_params("SELECT " + k_operation_columns +
                               " FROM operations o WHERE ($2::text IS NULL OR o.kind = $2) AND"
                               " (o.operation_id = $1 OR (o.id::text = lower($1)))",
                           id_or_operation_id, or_null(kind_name));
        if (r.empty()) {
            return std::nullopt;
        }
        return operation_from_row(r[0]);
    });
}

std::vector<OperationRow> list_operations(Db& db, const OperationFilter& filter) {
    const std::string older_than =
        filter.older_than ? std::to_string(filter.older_than->count()) : std::string();
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        const pqxx::result r =
            tx.exec_params("SELECT " + k_operation_columns +
                               " FROM operations o WHERE ($8::text IS NULL OR o.kind = $8)"
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
                           filter.older_than ? older_than.c_str() : nullptr, filter.by_updated_at,
                           filter.kind ? std::string(to_string(*filter.kind)).c_str() : nullptr);
        std::vector<OperationRow> out;
        for (const auto& row : r) {
            out.push_back(operation_from_row(row));
        }
        return out;
    });
}

} // namespace payrecon::store
