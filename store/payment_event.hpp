#pragma once
// The outbox event of a payment's change, one shape for every writer -- the intake, the executor,
// lease expiry, the reconciler and operators' resolutions -- built in SQL from the payment row the
// same statement just wrote, so the event and the row cannot disagree. Internal to store/*.cpp.
//
// Payload: payment_id, tenant_id, operation_id, state, amount (minor units), currency,
// merchant_reference, provider, provider_reference, generation, reason, review_code, created_at,
// updated_at (RFC 3339 UTC, milliseconds); an authorisation's (capture "manual") also capture,
// amount_captured and authorization_expires_at. Absent values are JSON null.

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
// default 'payment.' || the state, an authorisation's success being 'payment.authorized'). `where`
// (SQL, may be empty) filters the rows.
inline constexpr std::string_view k_payment_event_type =
    "'payment.' || CASE WHEN r.state = 'succeeded' AND r.capture_method = 'manual' "
    "THEN 'authorized' ELSE r.state END";

inline std::string payment_event_insert(std::string_view rows, std::string_view where = {},
                                        std::string_view event_type = k_payment_event_type) {
    const std::string payload = R"sql(jsonb_build_object(
               'payment_id', r.payment_id, 'tenant_id', r.tenant_id,
               'operation_id', r.operation_id, 'state', r.state, 'amount', r.amount_minor,
               'currency', r.currency, 'merchant_reference', r.merchant_reference,
               'provider', r.provider, 'provider_reference', r.provider_reference,
               'generation', r.generation, 'reason', r.review_reason,
               'review_code', r.review_code,
               )sql" + std::string(k_event_created_updated) +
                                ") || CASE WHEN r.capture_method = 'manual' THEN "
                                "jsonb_build_object('capture', 'manual', "
                                "'amount_captured', r.captured_minor, "
                                "'authorization_expires_at', to_char(r.authorization_expires_at "
                                "AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')) "
                                "ELSE '{}'::jsonb END";
    return outbox_event_insert(rows, where, event_type, payload);
}

// The type of an operation's event: a capture's and a void's success are the payment's news
// (payment.captured, payment.voided, issue 32); everything else is the operation's own
// (refund.succeeded, capture.failed, void.unknown, ...).
inline constexpr std::string_view k_operation_event_type =
    "CASE WHEN r.kind = 'capture' AND r.state = 'succeeded' THEN 'payment.captured' "
    "WHEN r.kind = 'void' AND r.state = 'succeeded' THEN 'payment.voided' "
    "ELSE r.kind || '.' || r.state END";

// The outbox event of an operation's change (DESIGN section 16), built the same way from the
// `operations` rows `rows` returns: type `event_type` (by default k_operation_event_type), under
// the payment's aggregate, so that a payment's events and its operations' go out in one order.
// Payload: <kind>_id (refund_id, capture_id, void_id), payment_id, tenant_id, operation_id, state,
// amount, currency, reason, merchant_reference, provider, provider_reference, failure_reason,
// generation, review_code, created_at, updated_at; a capture's `final` too.
inline std::string operation_event_insert(std::string_view rows, std::string_view where = {},
                                          std::string_view event_type = k_operation_event_type) {
    const std::string payload = R"sql(jsonb_build_object(
               r.kind || '_id', r.id, 'payment_id', r.payment_id, 'tenant_id', r.tenant_id,
               'operation_id', r.operation_id, 'state', r.state, 'amount', r.amount_minor,
               'currency', r.currency, 'reason', r.reason,
               'merchant_reference', r.merchant_reference, 'provider', r.provider,
               'provider_reference', r.provider_reference, 'failure_reason', r.failure_reason,
               'generation', r.generation, 'review_code', r.review_code,
               )sql" + std::string(k_event_created_updated) +
                                ") || CASE WHEN r.kind = 'capture' THEN "
                                "jsonb_build_object('final', r.final) ELSE '{}'::jsonb END";
    return outbox_event_insert(rows, where, event_type, payload);
}

// What an operation that just settled does to its payment, as one UPDATE over `rows` (a CTE of
// operations rows as they are now, from a non-final state, or just reversed from succeeded):
// a refund, capture or void that failed
// gives back what it held (the refund's amount refundable again, the capture's capturable, a
// final capture's or a void's hold released); a capture that succeeded adds to what was captured
// (and so to what may be refunded), and a reversed one takes it off again; a void that succeeded
// marks the authorisation voided. The one place these effects are written: the executor's
// settlement, the reconciler's and a webhook's decision, an operator's resolution and a late
// reversal all use it.
inline std::string operation_effect_update(std::string_view rows) {
    std::string sql = R"sql(
    UPDATE payments p
       SET refund_held_minor = p.refund_held_minor
               - CASE WHEN u.kind = 'refund' AND u.state = 'failed' THEN u.amount_minor ELSE 0 END,
           capture_held_minor = p.capture_held_minor
               - CASE WHEN u.kind = 'capture' AND u.state = 'failed' THEN u.amount_minor ELSE 0 END,
           captured_minor = p.captured_minor
               + CASE WHEN u.kind = 'capture' AND u.state = 'succeeded' THEN u.amount_minor
                      -- a late reversal takes back what its success added
                      WHEN u.kind = 'capture' AND u.reversed_at IS NOT NULL THEN -u.amount_minor
                      ELSE 0 END,
           final_capture_held = p.final_capture_held
               AND NOT (u.kind = 'capture' AND u.final AND u.state = 'failed'),
           void_held = p.void_held AND NOT (u.kind = 'void' AND u.state = 'failed'),
           voided_at = CASE WHEN u.kind = 'void' AND u.state = 'succeeded'
                            THEN coalesce(p.voided_at, now()) ELSE p.voided_at END
      FROM )sql";
    sql += rows;
    sql += R"sql( u
     WHERE u.state IN ('succeeded', 'failed') AND p.tenant_id = u.tenant_id
       AND p.payment_id = u.payment_id)sql";
    return sql;
}

} // namespace payrecon::store
