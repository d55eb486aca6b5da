#pragma once
// The outbox event of a payment's change, one shape for every writer -- the intake, the executor,
// lease expiry, the reconciler and operators' resolutions -- built in SQL from the payment row the
// same statement just wrote, so the event and the row cannot disagree. Internal to store/*.cpp.
//
// Payload: payment_id, tenant_id, operation_id, state, amount (minor units), currency,
// merchant_reference, provider, provider_reference, generation, reason, review_code, created_at,
// updated_at (RFC 3339 UTC, milliseconds). Absent values are JSON null.

#include <string>
#include <string_view>

namespace payrecon::store {

// `INSERT INTO outbox ... SELECT ... FROM <rows> r <where>`: one event per row of `rows`, under
// the payment's aggregate, of type `event_type` with payload `payload` (SQL expressions over `r`).
inline std::string outbox_event_insert(std::string_view rows, std::string_view where,
                                       std::string_view event_type, std::string_view payload) {
    std::string sql = R"sql(
    INSERT INTO outbox (tenant_id, aggregate_type, aggregate_id, event_type, payload)
    SELECT r.tenant_id, 'payment', r.payment_id, )sql";
    sql += event_type;
    sql += ",\n           ";
    sql += payload;
    sql += "\n      FROM ";
    sql += rows;
    sql += " r";
    if (!where.empty()) {
        sql += " WHERE ";
        sql += where;
    }
    return sql;
}

inline constexpr std::string_view k_event_created_updated =
    R"sql('created_at', to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
               'updated_at', to_char(r.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))sql";

// One event per row of `rows` (a CTE returning payments' columns), of type `event_type` (by
// default 'payment.' || r.state). `where` (SQL, may be empty) filters the rows.
inline std::string payment_event_insert(std::string_view rows, std::string_view where = {},
                                        std::string_view event_type = "'payment.' || r.state") {
    const std::string payload = R"sql(jsonb_build_object(
               'payment_id', r.payment_id, 'tenant_id', r.tenant_id,
               'operation_id', r.operation_id, 'state', r.state, 'amount', r.amount_minor,
               'currency', r.currency, 'merchant_reference', r.merchant_reference,
               'provider', r.provider, 'provider_reference', r.provider_reference,
               'generation', r.generation, 'reason', r.review_reason,
               'review_code', r.review_code,
               )sql" + std::string(k_event_created_updated) +
                                ")";
    return outbox_event_insert(rows, where, event_type, payload);
}

// The outbox event of a refund's change (DESIGN section 16), built the same way from the
// `operations` rows `rows` returns: type `event_type` (by default 'refund.' || r.state), under
// the payment's aggregate, so that a payment's events and its refunds' go out in one order.
// Payload: refund_id, payment_id, tenant_id, operation_id, state, amount, currency, reason,
// merchant_reference, provider, provider_reference, failure_reason, generation, review_code,
// created_at, updated_at.
inline std::string refund_event_insert(std::string_view rows, std::string_view where = {},
                                       std::string_view event_type = "'refund.' || r.state") {
    const std::string payload = R"sql(jsonb_build_object(
               'refund_id', r.id, 'payment_id', r.payment_id, 'tenant_id', r.tenant_id,
               'operation_id', r.operation_id, 'state', r.state, 'amount', r.amount_minor,
               'currency', r.currency, 'reason', r.reason,
               'merchant_reference', r.merchant_reference, 'provider', r.provider,
               'provider_reference', r.provider_reference, 'failure_reason', r.failure_reason,
               'generation', r.generation, 'review_code', r.review_code,
               )sql" + std::string(k_event_created_updated) +
                                ")";
    return outbox_event_insert(rows, where, event_type, payload);
}

} // namespace payrecon::store
