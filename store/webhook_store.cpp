#include "store/webhook_store.hpp"

#include "core/fingerprint.hpp"
#include "store/payment_event.hpp"
#include "store/pq.hpp"

#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace payrecon::store {
namespace {

constexpr const char* k_store_event = "webhook_store_event";
constexpr const char* k_store_event_sql = R"sql(
INSERT INTO provider_events (provider, event_key, event_type, outcome, operation_id,
                             provider_reference, amount_minor, currency, occurred_at, body,
                             tenant_id, payment_id, refund_id)
SELECT $1, $2, $3, $4, $5, $6, $7::bigint, $8, to_timestamp($9::double precision),
       decode($10, 'hex'), coalesce(p.tenant_id, o.tenant_id), coalesce(p.payment_id, o.payment_id),
       o.id
  FROM (SELECT 1) AS one
  LEFT JOIN payments p ON $11::text = 'charge' AND p.operation_id = $5 AND p.provider = $1
  LEFT JOIN operations o ON $11::text <> 'charge' AND o.operation_id = $5 AND o.provider = $1
                        AND o.kind = $11::text
ON CONFLICT (provider, event_key) DO UPDATE
   SET deliveries = provider_events.deliveries + 1, last_received_at = now()
RETURNING event_id, (xmax = 0) AS inserted, deliveries, payment_id::text)sql";

constexpr const char* k_evidence = "webhook_evidence_candidates";
const std::string k_evidence_sql = R"sql(
SELECT p.tenant_id::text, p.payment_id::text, p.generation, p.operation_id, p.merchant_reference,
       p.provider, coalesce(p.charged_amount_minor, p.amount_minor), p.currency,
       e.event_id, e.event_key, e.event_type, e.outcome, e.provider_reference, e.amount_minor,
       e.currency, floor(date_part('epoch', e.occurred_at))::bigint
  FROM provider_events e
  JOIN payments p ON p.tenant_id = e.tenant_id AND p.payment_id = e.payment_id
 WHERE e.payment_id IS NOT NULL AND e.refund_id IS NULL AND e.applied_at IS NULL
   AND e.outcome IN ('succeeded', 'failed')
   AND p.state = 'unknown' AND p.provider = ANY($1::text[])
 ORDER BY e.received_at, e.event_id
 LIMIT $2
   FOR UPDATE OF p SKIP LOCKED)sql";

constexpr const char* k_apply_evidence = "webhook_apply_evidence";
const std::string k_apply_evidence_sql = R"sql(
WITH u AS (
    UPDATE payments
       SET state = $4::text, generation = generation + 1, next_attempt_at = NULL,
           review_code = $5::text, review_reason = $6,
           provider_reference = coalesce($7, provider_reference), updated_at = now()
     WHERE tenant_id = $1::uuid AND payment_id = $2::uuid AND generation = $3
       AND state = 'unknown'
 RETURNING *
), event AS (
    )sql" + payment_event_insert("u") + R"sql(
), audit AS (
    INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail)
    SELECT u.tenant_id, $8, 'payment.reconciled', 'payment', u.payment_id::text,
           jsonb_build_object('from', 'unknown', 'to', u.state, 'decision', $9::text,
                              'evidence', 'webhook', 'event_id', $10::bigint,
                              'event_key', $11::text, 'review_code', u.review_code,
                              'reason', $6::text, 'generation', u.generation)
      FROM u
), mark AS (
    UPDATE provider_events SET applied_at = now(), applied_result = $9
     WHERE event_id = $10 AND EXISTS (SELECT 1 FROM u)
)
SELECT count(*) FROM u)sql";

// Events of payments that settled without them (the worker heard the answer; an operator
// decided) leave the queue: `consistent` when they agree with the payment, `contradicts` when
// they do not (another outcome, amount or currency: nightly and operators see them).
constexpr const char* k_settled_events = "webhook_settled_events";
constexpr const char* k_settled_events_sql = R"sql(
UPDATE provider_events e
   SET applied_at = now(),
       applied_result = CASE WHEN p.capture_method = 'manual' AND p.state = 'succeeded' THEN
                                 -- An authorisation (issue 32): its capture's news is a success
                                 -- of what captures hold (or of what was authorised), and a
                                 -- cancellation is its void's or its expiry's.
                                 CASE WHEN e.outcome = 'succeeded'
                                       AND upper(e.currency) = upper(p.currency)
                                       AND (e.amount_minor = p.amount_minor
                                            OR e.amount_minor <= p.capture_held_minor)
                                      THEN 'consistent'
                                      WHEN e.outcome = 'failed'
                                       AND (p.void_held OR p.voided_at IS NOT NULL
                                            OR p.authorization_expired_at IS NOT NULL
                                            OR p.authorization_expires_at <= now())
                                      THEN 'consistent' ELSE 'contradicts' END
                             WHEN e.outcome = p.state
                              AND e.amount_minor = coalesce(p.charged_amount_minor, p.amount_minor)
                              AND upper(e.currency) = upper(p.currency)
                             THEN 'consistent' ELSE 'contradicts' END
  FROM payments p
 WHERE e.applied_at IS NULL AND e.payment_id IS NOT NULL AND e.refund_id IS NULL
   AND e.outcome IN ('succeeded', 'failed')
   AND p.tenant_id = e.tenant_id AND p.payment_id = e.payment_id
   AND p.state IN ('succeeded', 'failed') AND p.provider = ANY($1::text[]))sql";

// The same for the other operations (refunds, captures, voids): an unknown operation and its
// first unapplied terminal event (the operation's columns as the payment's above, then its row ID,
// its charge's reference and its kind). provider_events.refund_id is any operation's row.
constexpr const char* k_refund_evidence = "webhook_refund_evidence_candidates";
const std::string k_refund_evidence_sql = R"sql(
SELECT o.tenant_id::text, o.payment_id::text, o.generation, o.operation_id,
       coalesce(o.merchant_reference, ''), o.provider, o.amount_minor, o.currency,
       e.event_id, e.event_key, e.event_type, e.outcome, e.provider_reference, e.amount_minor,
       e.currency, floor(date_part('epoch', e.occurred_at))::bigint, o.id::text,
       p.provider_reference, o.kind
  FROM provider_events e
  JOIN operations o ON o.tenant_id = e.tenant_id AND o.id = e.refund_id
  JOIN payments p ON p.tenant_id = o.tenant_id AND p.payment_id = o.payment_id
 WHERE e.payment_id IS NOT NULL AND e.refund_id IS NOT NULL AND e.applied_at IS NULL
   AND e.outcome IN ('succeeded', 'failed')
   AND o.state = $3 AND e.outcome = ANY($4::text[]) AND o.kind = ANY($5::text[])
   AND o.provider = ANY($1::text[])
 ORDER BY e.received_at, e.event_id
 LIMIT $2)sql";
const std::string k_refund_evidence_locked_sql =
    k_refund_evidence_sql + " FOR UPDATE OF o SKIP LOCKED";

// A refund's decision from its event ($2 the refund, $12 its payment); a refund that becomes
// failed gives its amount back.
constexpr const char* k_apply_refund_evidence = "webhook_apply_refund_evidence";
const std::string k_apply_refund_evidence_sql = R"sql(
WITH u AS (
    UPDATE operations
       SET state = $4::text, generation = generation + 1, next_attempt_at = NULL,
           review_code = $5::text,
           review_reason = CASE WHEN $4::text = 'failed' THEN NULL ELSE $6 END,
           failure_reason = CASE WHEN $4::text = 'failed' THEN left($6, 1000) END,
           provider_reference = coalesce($7, provider_reference), updated_at = now()
     WHERE tenant_id = $1::uuid AND id = $2::uuid AND generation = $3 AND state = 'unknown'
 RETURNING *
), effect AS ()sql" + operation_effect_update("u") +
                                                R"sql(
), event AS (
    )sql" + operation_event_insert("u") + R"sql(
), audit AS (
    INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail)
    SELECT u.tenant_id, $8, u.kind || '.reconciled', u.kind, u.id::text,
           jsonb_build_object('from', 'unknown', 'to', u.state, 'decision', $9::text,
                              'evidence', 'webhook', 'event_id', $10::bigint,
                              'event_key', $11::text, 'review_code', u.review_code,
                              'reason', $6::text, 'generation', u.generation,
                              'payment_id', $12::uuid)
      FROM u
), mark AS (
    UPDATE provider_events SET applied_at = now(), applied_result = $9
     WHERE event_id = $10 AND EXISTS (SELECT 1 FROM u)
)
SELECT count(*) FROM u)sql";

// Events of refunds that settled without them, as the payments' above; a failed event of a
// succeeded refund waits for the reversal pass, and a success reported before a reversal is
// superseded.
constexpr const char* k_settled_refund_events = "webhook_settled_refund_events";
constexpr const char* k_settled_refund_events_sql = R"sql(
UPDATE provider_events e
   SET applied_at = now(),
       applied_result = CASE WHEN e.outcome = o.state
                              AND ((e.amount_minor = o.amount_minor
                                    AND upper(e.currency) = upper(o.currency))
                                   OR (o.kind = 'void' AND e.amount_minor IS NULL))
                             THEN 'consistent'
                             WHEN e.outcome = 'succeeded' AND o.reversed_at IS NOT NULL
                              AND e.amount_minor = o.amount_minor
                              AND upper(e.currency) = upper(o.currency) THEN 'superseded'
                             ELSE 'contradicts' END
  FROM operations o
 WHERE e.applied_at IS NULL AND e.refund_id IS NOT NULL AND e.outcome IN ('succeeded', 'failed')
   AND o.tenant_id = e.tenant_id AND o.id = e.refund_id
   AND o.state IN ('succeeded', 'failed') AND o.provider = ANY($1::text[])
   AND NOT (e.outcome = 'failed' AND o.state = 'succeeded' AND o.kind = ANY($2::text[])))sql";

// A late reversal ($2 the operation, $3 its generation, $4 the reason, $5 the actor, $6 the
// event). A capture whose amount refunds already hold is not reversed (what was refunded would
// exceed what was captured): the event is marked `contradicts` for an operator instead.
constexpr const char* k_reverse_refund = "webhook_reverse_refund";
const std::string k_reverse_refund_sql = R"sql(
WITH current AS (
    SELECT o.id, o.kind,
           o.kind = 'capture' AND p.refund_held_minor > p.captured_minor - o.amount_minor
               AS refunded
      FROM operations o
      JOIN payments p ON p.tenant_id = o.tenant_id AND p.payment_id = o.payment_id
     WHERE o.tenant_id = $1::uuid AND o.id = $2::uuid AND o.generation = $3
       AND o.state = 'succeeded'
       -- the payment's newest row, held: no refund takes room while the capture is judged
       FOR UPDATE OF p
), u AS (
    UPDATE operations
       SET state = 'failed', generation = generation + 1, failure_reason = left($4, 1000),
           reversed_at = now(), updated_at = now()
     WHERE tenant_id = $1::uuid AND id = $2::uuid AND generation = $3 AND state = 'succeeded'
       AND NOT (SELECT refunded FROM current)
 RETURNING *
), blocked AS (
    UPDATE provider_events SET applied_at = now(), applied_result = 'contradicts'
     WHERE event_id = $6 AND (SELECT refunded FROM current)
), effect AS ()sql" + operation_effect_update("u") +
                                         R"sql(
), event AS (
    )sql" + operation_event_insert("u") + R"sql(
), audit AS (
    INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail)
    SELECT u.tenant_id, $5, u.kind || '.reversed', u.kind, u.id::text,
           jsonb_build_object('from', 'succeeded', 'to', 'failed', 'evidence', 'webhook',
                              'event_id', $6::bigint, 'reason', $4::text,
                              'generation', u.generation, 'payment_id', u.payment_id,
                              'amount', u.amount_minor)
      FROM u
), mark AS (
    UPDATE provider_events SET applied_at = now(), applied_result = 'reversal'
     WHERE event_id = $6 AND EXISTS (SELECT 1 FROM u)
)
SELECT (SELECT count(*) FROM u), coalesce((SELECT refunded FROM current), false))sql";

// The operations beyond the charge, and those of them whose success a provider may take back
// later (core's find_reversal), as text arrays for the queries above.
std::string operation_kinds(bool reversible_only) {
    std::vector<std::string> out;
    for (const OperationKind kind :
         {OperationKind::refund, OperationKind::capture, OperationKind::void_authorization}) {
        if (!reversible_only || find_reversal(kind)) {
            out.emplace_back(to_string(kind));
        }
    }
    return text_array(out);
}

PaymentState state_for(const ReconcileDecision& d) {
    switch (d.action) {
    case ReconcileAction::adopt_succeeded:
        return PaymentState::succeeded;
    case ReconcileAction::adopt_failed:
        return PaymentState::failed;
    case ReconcileAction::review:
        return PaymentState::needs_review;
    case ReconcileAction::check_later:
    case ReconcileAction::resend:
        break;
    }
    throw std::logic_error("a webhook event decides succeeded, failed or review, never " +
                           std::string(to_string(d.action)));
}

EvidenceCandidate evidence_from_row(const pqxx::row& r) {
    EvidenceCandidate c;
    c.tenant_id = r[0].as<std::string>();
    c.payment_id = r[1].as<std::string>();
    c.generation = r[2].as<long long>();
    c.operation_id = r[3].as<std::string>();
    c.merchant_reference = r[4].as<std::string>();
    c.provider = r[5].as<std::string>();
    c.amount_minor = r[6].as<long long>();
    c.currency = r[7].as<std::string>();
    c.event_id = r[8].as<long long>();
    c.event.event_key = r[9].as<std::string>();
    c.event.event_type = r[10].as<std::string>();
    c.event.outcome =
        parse_evidence_outcome(r[11].as<std::string>()).value_or(EvidenceOutcome::other);
    c.event.operation_id = c.operation_id;
    if (!r[12].is_null()) {
        c.event.provider_reference = r[12].as<std::string>();
    }
    if (!r[13].is_null()) {
        c.event.amount_minor = r[13].as<long long>();
    }
    if (!r[14].is_null()) {
        c.event.currency = r[14].as<std::string>();
    }
    if (!r[15].is_null()) {
        c.event.occurred_at = r[15].as<long long>();
    }
    if (r.size() > 16) { // an operation's row (a refund, a capture, a void)
        c.kind = parse_operation_kind(r[18].as<std::string>()).value();
        c.event.kind = c.kind;
        c.refund_id = r[16].as<std::string>();
        if (!r[17].is_null()) {
            c.charge_reference = r[17].as<std::string>();
        }
    }
    return c;
}

// The columns of a ProviderEventRow, over provider_events e LEFT JOIN payments p.
const std::string k_event_columns =
    "e.event_id, e.provider, e.event_key, e.event_type, e.outcome, e.operation_id, "
    "e.provider_reference, e.amount_minor, e.currency, " +
    iso_utc("e.occurred_at") + ", " + iso_utc("e.received_at") + ", " +
    iso_utc("e.last_received_at") +
    ", e.deliveries, e.tenant_id::text, e.payment_id::text, p.state, "
    "coalesce(p.charged_amount_minor, p.amount_minor), p.currency, " +
    iso_utc("e.applied_at") + ", e.applied_result, " + iso_utc("e.acknowledged_at") +
    ", e.acknowledged_by, e.acknowledge_note";
const std::string k_event_from =
    " FROM provider_events e LEFT JOIN payments p ON p.tenant_id = e.tenant_id AND p.payment_id = "
    "e.payment_id";

ProviderEventRow event_row(const pqxx::row& r) {
    const auto text = [&](int i) {
        return r[i].is_null() ? std::nullopt : std::optional<std::string>(r[i].as<std::string>());
    };
    const auto number = [&](int i) {
        return r[i].is_null() ? std::nullopt : std::optional<long long>(r[i].as<long long>());
    };
    ProviderEventRow e;
    e.event_id = r[0].as<long long>();
    e.provider = r[1].as<std::string>();
    e.event_key = r[2].as<std::string>();
    e.event_type = r[3].as<std::string>();
    e.outcome = r[4].as<std::string>();
    e.operation_id = text(5);
    e.provider_reference = text(6);
    e.amount_minor = number(7);
    e.currency = text(8);
    e.occurred_at = text(9);
    e.received_at = r[10].as<std::string>();
    e.last_received_at = r[11].as<std::string>();
    e.deliveries = r[12].as<int>();
    e.tenant_id = text(13);
    e.payment_id = text(14);
    e.payment_state = text(15);
    e.payment_amount_minor = number(16);
    e.payment_currency = text(17);
    e.applied_at = text(18);
    e.applied_result = text(19);
    e.acknowledged_at = text(20);
    e.acknowledged_by = text(21);
    e.acknowledge_note = text(22);
    return e;
}

} // namespace

ProviderEventList list_provider_events(Db& db, const ProviderEventFilter& filter) {
    Db::Impl& impl = db.impl();
    // count(*) OVER () is taken before the LIMIT: how many match in all, for "100 of 156".
    const std::string sql =
        "SELECT " + k_event_columns +
        ", e.matching FROM (SELECT *, count(*) OVER () AS matching FROM provider_events"
        " WHERE ($1::text IS NULL OR provider = $1)"
        "   AND ($3::uuid IS NULL OR (tenant_id = $2::uuid AND payment_id = $3::uuid))"
        "   AND (NOT $4 OR payment_id IS NULL)"
        "   AND (NOT $5 OR (applied_result = 'contradicts' AND acknowledged_at IS NULL))"
        " ORDER BY received_at DESC, event_id DESC LIMIT $6) e"
        " LEFT JOIN payments p ON p.tenant_id = e.tenant_id AND p.payment_id = e.payment_id"
        " ORDER BY e.received_at, e.event_id";
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        ProviderEventList out;
        for (const auto& r : tx.exec_params(sql, or_null(filter.provider),
                                            or_null(filter.tenant_id), or_null(filter.payment_id),
                                            filter.unmatched, filter.contradicting, filter.limit)) {
            out.rows.push_back(event_row(r));
            out.matching = r["matching"].as<long long>();
        }
        return out;
    });
}

std::optional<ProviderEventRow> find_provider_event(Db& db, long long event_id) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<ProviderEventRow> {
        pqxx::read_transaction tx(impl.connection());
        const pqxx::result r = tx.exec_params("SELECT " + k_event_columns + ", e.body" +
                                                  k_event_from + " WHERE e.event_id = $1",
                                              event_id);
        if (r.empty()) {
            return std::nullopt;
        }
        ProviderEventRow e = event_row(r[0]);
        const pqxx::binarystring body(r[0][23]);
        e.body = body.str();
        return e;
    });
}

AcknowledgeResult acknowledge_provider_event(Db& db, long long event_id, const std::string& actor,
                                             const std::string& note) {
    Db::Impl& impl = db.impl();
    AcknowledgeResult out;
    translate_errors(impl, [&] {
        pqxx::work tx(impl.connection());
        const pqxx::result r = tx.exec_params(
            "SELECT applied_result, acknowledged_at IS NOT NULL FROM provider_events WHERE "
            "event_id = $1 FOR UPDATE",
            event_id);
        if (r.empty()) {
            out.status = AcknowledgeStatus::not_found;
            return;
        }
        if (r[0][1].as<bool>()) {
            out.status = AcknowledgeStatus::already;
        } else if (r[0][0].is_null() || r[0][0].as<std::string>() != "contradicts") {
            out.status = AcknowledgeStatus::not_contradicting;
        } else {
            tx.exec_params0(
                "WITH ack AS (UPDATE provider_events SET acknowledged_at = now(), "
                "acknowledged_by = $2, acknowledge_note = $3 WHERE event_id = $1 RETURNING *) "
                "INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, "
                "detail) "
                "SELECT tenant_id, $2, 'provider_event.acknowledged', 'payment', "
                "payment_id::text, jsonb_build_object('event_id', event_id, 'provider', provider, "
                "'event_key', event_key, 'event_type', event_type, 'outcome', outcome, "
                "'amount_minor', amount_minor, 'currency', currency, 'note', $3::text) FROM ack",
                event_id, actor, note);
            out.status = AcknowledgeStatus::acknowledged;
        }
        tx.commit();
    });
    out.event = find_provider_event(db, event_id);
    return out;
}

std::vector<std::pair<std::string, long long>>
contradicting_event_counts(Db& db, const std::vector<std::string>& providers,
                           const std::optional<std::string>& tenant_id) {
    Db::Impl& impl = db.impl();
    const std::optional<std::string> names =
        providers.empty() ? std::nullopt : std::optional<std::string>(text_array(providers));
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        std::vector<std::pair<std::string, long long>> out;
        for (const auto& r : tx.exec_params(
                 "SELECT provider, count(*) FROM provider_events WHERE applied_result = "
                 "'contradicts' AND acknowledged_at IS NULL AND ($1::text[] IS NULL OR provider "
                 "= ANY($1::text[])) AND ($2::uuid IS NULL OR tenant_id = $2::uuid) "
                 "GROUP BY provider ORDER BY provider",
                 or_null(names), or_null(tenant_id))) {
            out.emplace_back(r[0].as<std::string>(), r[1].as<long long>());
        }
        return out;
    });
}

std::vector<ProviderEventCount> provider_event_results(Db& db) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        std::vector<ProviderEventCount> out;
        for (const auto& r :
             tx.exec("SELECT provider, CASE WHEN payment_id IS NULL THEN 'unmatched' "
                     "WHEN acknowledged_at IS NOT NULL THEN 'acknowledged' "
                     "WHEN applied_result IS NOT NULL THEN applied_result "
                     "WHEN outcome IN ('succeeded', 'failed') THEN 'waiting' ELSE 'kept' END AS "
                     "result, "
                     "count(*) FROM provider_events GROUP BY 1, 2 ORDER BY 1, 2")) {
            out.push_back({r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<long long>()});
        }
        return out;
    });
}

std::vector<AppliedEvidence>
apply_webhook_evidence(Db& db, const std::string& actor, const std::vector<std::string>& providers,
                       int limit,
                       const std::function<ReconcileDecision(const EvidenceCandidate&)>& decide) {
    if (providers.empty() || limit <= 0) {
        return {};
    }
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_evidence, k_evidence_sql);
        impl.prepare(k_apply_evidence, k_apply_evidence_sql);
        impl.prepare(k_settled_events, k_settled_events_sql);
        impl.prepare(k_refund_evidence, k_refund_evidence_locked_sql);
        impl.prepare(k_apply_refund_evidence, k_apply_refund_evidence_sql);
        impl.prepare(k_settled_refund_events, k_settled_refund_events_sql);
        pqxx::work tx(impl.connection());
        const std::string names = text_array(providers);
        tx.exec_prepared0(k_settled_events, names);
        tx.exec_prepared0(k_settled_refund_events, names, operation_kinds(true));
        std::vector<AppliedEvidence> out;
        std::set<std::string> decided; // a payment's later events wait for the next pass
        for (const auto& row : tx.exec_prepared(k_evidence, names, limit)) {
            EvidenceCandidate c = evidence_from_row(row);
            if (!decided.insert(c.payment_id).second) {
                continue;
            }
            const ReconcileDecision d = decide(c);
            const PaymentState to = state_for(d);
            require_transition(PaymentState::unknown, to);
            const std::string code = d.review ? std::string(to_string(*d.review)) : std::string();
            const pqxx::row r =
                tx.exec_prepared1(k_apply_evidence, c.tenant_id, c.payment_id, c.generation,
                                  std::string(to_string(to)), d.review ? code.c_str() : nullptr,
                                  d.reason, or_null(d.provider_reference), actor,
                                  std::string(to_string(d.action)), c.event_id, c.event.event_key);
            if (r[0].as<long long>() == 1) {
                out.push_back({std::move(c), d, to});
            }
        }
        const int left = limit - static_cast<int>(out.size());
        for (const auto& row :
             left <= 0 ? pqxx::result()
                       : tx.exec_prepared(k_refund_evidence, names, left, "unknown",
                                          "{succeeded,failed}", operation_kinds(false))) {
            EvidenceCandidate c = evidence_from_row(row);
            if (!decided.insert(c.refund_id).second) {
                continue;
            }
            const ReconcileDecision d = decide(c);
            const PaymentState to = state_for(d);
            require_transition(PaymentState::unknown, to);
            const std::string code = d.review ? std::string(to_string(*d.review)) : std::string();
            const pqxx::row r = tx.exec_prepared1(
                k_apply_refund_evidence, c.tenant_id, c.refund_id, c.generation,
                std::string(to_string(to)), d.review ? code.c_str() : nullptr, d.reason,
                or_null(d.provider_reference), actor, std::string(to_string(d.action)), c.event_id,
                c.event.event_key, c.payment_id);
            if (r[0].as<long long>() == 1) {
                out.push_back({std::move(c), d, to});
            }
        }
        tx.commit();
        return out;
    });
}

std::vector<EvidenceCandidate>
reversal_candidates(Db& db, const std::vector<std::string>& providers, int limit) {
    if (providers.empty() || limit <= 0) {
        return {};
    }
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        std::vector<EvidenceCandidate> out;
        // The plain select (no row lock): the provider is asked before anything is written.
        for (const auto& row : tx.exec_params(k_refund_evidence_sql, text_array(providers), limit,
                                              "succeeded", "{failed}", operation_kinds(true))) {
            out.push_back(evidence_from_row(row));
        }
        return out;
    });
}

Reversal reverse_operation(Db& db, const EvidenceCandidate& candidate, const std::string& actor,
                           const std::string& reason) {
    require_reversal(candidate.kind);
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_reverse_refund, k_reverse_refund_sql);
        pqxx::work tx(impl.connection());
        const pqxx::row r =
            tx.exec_prepared1(k_reverse_refund, candidate.tenant_id, candidate.refund_id,
                              candidate.generation, reason, actor, candidate.event_id);
        tx.commit();
        if (r[0].as<long long>() == 1) {
            return Reversal::reversed;
        }
        return r[1].as<bool>() ? Reversal::refunded : Reversal::changed;
    });
}

void mark_provider_event(Db& db, long long event_id, const std::string& result) {
    Db::Impl& impl = db.impl();
    translate_errors(impl, [&] {
        pqxx::work tx(impl.connection());
        tx.exec_params0("UPDATE provider_events SET applied_at = now(), applied_result = $2 "
                        "WHERE event_id = $1 AND applied_at IS NULL",
                        event_id, result);
        tx.commit();
    });
}

std::vector<StoredEvent> store_provider_events(Db& db, const std::string& provider,
                                               const std::vector<WebhookEvent>& events,
                                               std::string_view body) {
    Db::Impl& impl = db.impl();
    const std::string body_hex = to_hex(body);
    return translate_errors(impl, [&] {
        impl.prepare(k_store_event, k_store_event_sql);
        pqxx::work tx(impl.connection());
        std::vector<StoredEvent> out;
        for (const WebhookEvent& e : events) {
            const std::string amount = e.amount_minor ? std::to_string(*e.amount_minor) : "";
            const std::string at = e.occurred_at ? std::to_string(*e.occurred_at) : "";
            const pqxx::row r = tx.exec_prepared1(
                k_store_event, provider, e.event_key, e.event_type,
                std::string(to_string(e.outcome)), or_null(e.operation_id),
                or_null(e.provider_reference), e.amount_minor ? amount.c_str() : nullptr,
                or_null(e.currency), e.occurred_at ? at.c_str() : nullptr, body_hex,
                std::string(to_string(e.kind)));
            StoredEvent s;
            s.event_id = r[0].as<long long>();
            s.inserted = r[1].as<bool>();
            s.deliveries = r[2].as<int>();
            if (!r[3].is_null()) {
                s.payment_id = r[3].as<std::string>();
            }
            out.push_back(std::move(s));
        }
        tx.commit();
        return out;
    });
}

ProviderEventPurgeResult purge_provider_events(Db& db, std::chrono::seconds retention, bool dry_run,
                                               const std::string& actor, int batch_size) {
    Db::Impl& impl = db.impl();
    const long long secs = retention.count();
    // Why an old event stays, first reason first: NULL when none holds and it may go. Terminal
    // states never change (core/payment_state), a contradiction is only ever acknowledged and an
    // unexamined event only ever examined: each reason can only lapse, so a batch that decides on
    // its snapshot never deletes what a concurrent transaction made evidence again.
    const std::string kept_because = R"sql(
CASE WHEN p.payment_id IS NOT NULL AND coalesce(o.state, p.state) NOT IN ('succeeded', 'failed')
     THEN 'unsettled'
     WHEN e.applied_result = 'contradicts' AND e.acknowledged_at IS NULL THEN 'contradicting'
     WHEN e.payment_id IS NOT NULL AND e.applied_at IS NULL
          AND e.outcome IN ('succeeded', 'failed') THEN 'unexamined'
END)sql";
    // Old enough by the first delivery (provider_events_by_age bounds the read) and the last.
    const std::string old_enough =
        "e.received_at <= now() - make_interval(secs => $1::bigint) AND "
        "e.last_received_at <= now() - make_interval(secs => $1::bigint)";
    const std::string payment_join = " LEFT JOIN payments p ON p.tenant_id = e.tenant_id "
                                     "AND p.payment_id = e.payment_id "
                                     "LEFT JOIN operations o ON o.tenant_id = e.tenant_id "
                                     "AND o.id = e.refund_id ";
    nlohmann::json run;
    run["retention_s"] = secs;
    return translate_errors(impl, [&] {
        ProviderEventPurgeResult out;
        {
            pqxx::read_transaction tx(impl.connection());
            const pqxx::row r =
                tx.exec_params1("SELECT count(*) FILTER (WHERE why = 'unsettled'), "
                                "count(*) FILTER (WHERE why = 'contradicting'), "
                                "count(*) FILTER (WHERE why = 'unexamined'), "
                                "count(*) FILTER (WHERE why IS NULL), "
                                "count(*) FILTER (WHERE why IS NULL AND payment_id IS NULL) "
                                "FROM (SELECT e.payment_id, " +
                                    kept_because + " AS why FROM provider_events e" + payment_join +
                                    "WHERE " + old_enough + ") x",
                                secs);
            out.kept_unsettled = r[0].as<long long>();
            out.kept_contradicting = r[1].as<long long>();
            out.kept_unexamined = r[2].as<long long>();
            if (dry_run) {
                out.events = r[3].as<long long>();
                out.unmatched = r[4].as<long long>();
                return out;
            }
            out.run_id = tx.exec1("SELECT gen_random_uuid()::text")[0].as<std::string>();
        }
        run["run_id"] = out.run_id;
        // Keyset batches over provider_events_by_age: each scans the next `batch_size` events old
        // enough by their first delivery (the last can only be later), locks those that may go --
        // skipping rows a redelivery or an acknowledgement holds -- and deletes them with their
        // audit rows. The scan ends where the events are too young, never reading them.
        const std::string del =
            "WITH scanned AS (SELECT e.event_id, e.received_at FROM provider_events e "
            "WHERE (e.received_at, e.event_id) > ($7::timestamptz, $6::bigint) "
            "AND e.received_at <= now() - make_interval(secs => $1::bigint) "
            "ORDER BY e.received_at, e.event_id LIMIT $2), "
            "doomed AS (SELECT e.event_id FROM provider_events e JOIN scanned s "
            "ON s.event_id = e.event_id" +
            payment_join + "WHERE " + old_enough + " AND " + kept_because +
            " IS NULL FOR UPDATE OF e SKIP LOCKED), "
            "gone AS (DELETE FROM provider_events e USING doomed d WHERE e.event_id = d.event_id "
            "RETURNING e.tenant_id), "
            "per_tenant AS (SELECT tenant_id, count(*) AS n FROM gone GROUP BY tenant_id), "
            "audited AS (INSERT INTO audit_log (tenant_id, actor, action, subject_type, "
            "subject_id, detail) SELECT tenant_id, $3, 'provider_events.purge', 'purge_run', $4, "
            "$5::jsonb || jsonb_build_object('events', n) FROM per_tenant "
            "WHERE tenant_id IS NOT NULL) "
            "SELECT (SELECT count(*) FROM scanned), "
            "(SELECT event_id FROM scanned ORDER BY received_at DESC, event_id DESC LIMIT 1), "
            "(SELECT received_at FROM scanned ORDER BY received_at DESC, event_id DESC LIMIT 1), "
            "coalesce(sum(n), 0)::bigint, "
            "coalesce(sum(n) FILTER (WHERE tenant_id IS NULL), 0)::bigint, "
            "coalesce(string_agg(tenant_id::text, ',') FILTER (WHERE tenant_id IS NOT NULL), '') "
            "FROM per_tenant";
        std::set<std::string> tenants;
        long long after_id = 0;
        std::string after_at = "-infinity";
        for (;;) {
            pqxx::work tx(impl.connection());
            const pqxx::row r = tx.exec_params1(del, secs, batch_size, actor, out.run_id,
                                                run.dump(), after_id, after_at);
            tx.commit();
            out.events += r[3].as<long long>();
            out.unmatched += r[4].as<long long>();
            add_listed(tenants, r[5].as<std::string>());
            if (r[0].as<long long>() < batch_size) {
                break;
            }
            after_id = r[1].as<long long>();
            after_at = r[2].as<std::string>(); // the server's own text: read back exactly
        }
        out.tenants = static_cast<long long>(tenants.size());
        nlohmann::json totals = run;
        totals["events"] = out.events;
        totals["unmatched"] = out.unmatched;
        totals["kept_unsettled"] = out.kept_unsettled;
        totals["kept_contradicting"] = out.kept_contradicting;
        totals["kept_unexamined"] = out.kept_unexamined;
        totals["tenants"] = out.tenants;
        audit_purge_run(impl, "provider_events.purge_run", actor, out.run_id, totals.dump());
        return out;
    });
}

} // namespace payrecon::store
