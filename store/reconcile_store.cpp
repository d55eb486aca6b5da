#include "store/reconcile_store.hpp"

#include "core/errors.hpp"
#include "store/payment_event.hpp"
#include "store/pq.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <tuple>

namespace payrecon::store {
namespace {

// Candidate columns: a claim's columns (store/pq.hpp), then state, seconds since the first and
// last attempt, attempt_count, resend_count, lookup_count, lookup_failures, review_code, and
// whether the latest attempt (attempt_no = attempt_count) was accepted: pending, with the
// provider's reference -- over payments `p` for the charge, over operations `o` (and their
// payments `p`) for the others.
std::string candidate_columns(const char* claim_columns, const char* t) {
    const std::string a(t);
    return std::string(claim_columns) + ", " + a + ".state, extract(epoch FROM now() - coalesce(" +
           a + ".first_attempt_at, " + a + ".created_at))::bigint, extract(epoch FROM now() - " +
           "coalesce(" + a + ".last_attempt_at, " + a + ".updated_at))::bigint, " + a +
           ".attempt_count, " + a + ".resend_count, " + a + ".lookup_count, " + a +
           ".lookup_failures, " + a + ".review_code, EXISTS (SELECT 1 FROM payment_attempts la " +
           "WHERE la.tenant_id = " + a + ".tenant_id AND la.payment_id = " + a +
           ".payment_id AND la.operation_id = " + a + ".operation_id AND la.attempt_no = " + a +
           ".attempt_count AND la.outcome = 'pending' AND la.provider_reference IS NOT NULL)";
}
const std::string k_candidate_columns = candidate_columns(k_charge_claim_columns, "p");
const std::string k_operation_candidate_columns = candidate_columns(k_operation_claim_columns, "o");

// Due: an explicit next check, else the last attempt plus the provider's settle delay (`delays`,
// the array parameter of that kind's: a refund's lookup may lag less than a charge's). `table` is
// payments or operations, `key` its row's ID column.
std::string due_sql(const std::string& due_by, const std::string& table = "payments",
                    const std::string& key = "payment_id", const std::string& limit = "$3",
                    const std::string& delays = "$2") {
    return R"sql(
    SELECT p.tenant_id, p.)sql" +
           key + "\n      FROM " + table + R"sql( p
      JOIN unnest($1::text[], )sql" +
           delays + R"sql(::bigint[]) AS cfg(provider, settle_s) ON cfg.provider = p.provider
     WHERE p.state = 'unknown'
       AND coalesce(p.next_attempt_at, coalesce(p.last_attempt_at, p.updated_at)
                                       + make_interval(secs => cfg.settle_s)) <= )sql" +
           due_by + R"sql(
     ORDER BY p.created_at
     LIMIT )sql" +
           limit;
}

// The refunds (operations) claimed take what the charges left of the limit.
const std::string k_operations_limit = "greatest($3 - (SELECT count(*) FROM due), 0)";

constexpr const char* k_claim = "reconcile_claim";
// Due by the run's start at the latest: a check a decision of this run scheduled is the next run's.
const std::string k_claim_sql = "WITH due AS (" +
                                due_sql("least(now(), to_timestamp($5::double precision))") + R"sql(
       FOR UPDATE OF p SKIP LOCKED
), claimed AS (
    UPDATE payments p
       SET generation = p.generation + 1,
           next_attempt_at = now() + make_interval(secs => $4::bigint)
      FROM due
     WHERE p.tenant_id = due.tenant_id AND p.payment_id = due.payment_id
 RETURNING p.*
), due_operations AS ()sql" +
                                due_sql("least(now(), to_timestamp($5::double precision))",
                                        "operations", "id", k_operations_limit, "$6") +
                                R"sql(
       FOR UPDATE OF p SKIP LOCKED
), claimed_operations AS (
    UPDATE operations o
       SET generation = o.generation + 1,
           next_attempt_at = now() + make_interval(secs => $4::bigint)
      FROM due_operations d
     WHERE o.tenant_id = d.tenant_id AND o.id = d.id
 RETURNING o.*
)
SELECT )sql" + k_candidate_columns +
                                R"sql( FROM claimed p
UNION ALL
SELECT )sql" + k_operation_candidate_columns +
                                R"sql( FROM claimed_operations o
  JOIN payments p ON p.tenant_id = o.tenant_id AND p.payment_id = o.payment_id
ORDER BY created_at_us)sql";

constexpr const char* k_peek = "reconcile_peek";
const std::string k_peek_sql =
    "WITH due AS (" + due_sql("now()") + "), due_operations AS (" +
    due_sql("now()", "operations", "id", k_operations_limit, "$4") + ")\nSELECT " +
    k_candidate_columns +
    " FROM payments p JOIN due USING (tenant_id, payment_id)\nUNION ALL\nSELECT " +
    k_operation_candidate_columns +
    " FROM operations o JOIN due_operations d ON d.tenant_id = o.tenant_id AND d.id = o.id"
    " JOIN payments p ON p.tenant_id = o.tenant_id AND p.payment_id = o.payment_id"
    " ORDER BY created_at_us";

constexpr const char* k_load = "reconcile_load";
const std::string k_load_sql =
    "SELECT " + k_candidate_columns +
    " FROM payments p WHERE p.tenant_id = $1::uuid AND p.payment_id = $2::uuid";
constexpr const char* k_load_refund = "reconcile_load_refund";
const std::string k_load_refund_sql =
    "SELECT " + k_operation_candidate_columns +
    " FROM operations o JOIN payments p ON p.tenant_id = o.tenant_id AND p.payment_id ="
    " o.payment_id WHERE o.tenant_id = $1::uuid AND o.id = $2::uuid";

// The tail of both decisions: the lookup recorded whether or not the decision applied ($1
// tenant, $24 payment, $23 operation ID, $3 generation, $12 actor, $7 status, $14-$22 what was
// found, $13 decision, $9 reason), and the count of rows the decision wrote (`u`).
constexpr const char* k_record_lookup = R"sql(
    INSERT INTO payment_lookups (tenant_id, payment_id, operation_id, generation, actor, status,
                                 remote_state, remote_raw_status, remote_amount, remote_currency,
                                 provider_reference, duplicates, http_status, error_class, detail,
                                 decision, reason, applied)
    VALUES ($1::uuid, $24::uuid, $23, $3, $12, $7, $14, $15, $16, $17, $18, $19, $20,
            nullif($21, ''), left($22, 4096), $13, $9, (SELECT count(*) = 1 FROM u))
)
SELECT count(*) FROM u)sql";

constexpr const char* k_apply = "reconcile_apply";
const std::string k_apply_sql = R"sql(
WITH u AS (
    UPDATE payments
       SET state = $4::text, generation = generation + 1,
           next_attempt_at = CASE WHEN $5::bigint IS NOT NULL THEN now() + make_interval(secs => $5::bigint)
                                  WHEN $6::boolean THEN now() ELSE NULL END,
           lookup_count = lookup_count + CASE WHEN $7::text = 'not_asked' THEN 0 ELSE 1 END,
           lookup_failures = CASE WHEN $7::text = 'failed' THEN lookup_failures + 1 ELSE 0 END,
           resend_count = resend_count + CASE WHEN $6::boolean THEN 1 ELSE 0 END,
           review_code = $8::text, review_reason = $9,
           provider_reference = coalesce($10, provider_reference),
           updated_at = CASE WHEN state = $4::text THEN updated_at ELSE now() END
     WHERE tenant_id = $1::uuid AND payment_id = $2::uuid AND generation = $3 AND state = $11
 RETURNING *
), event AS (
    )sql" + payment_event_insert("u", "r.state <> $11") +
                                R"sql(
), audit AS (
    INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail)
    SELECT u.tenant_id, $12, 'payment.reconciled', 'payment', u.payment_id::text,
           jsonb_build_object('from', $11::text, 'to', u.state, 'decision', $13::text,
                              'lookup', $7::text, 'review_code', u.review_code,
                              'reason', $9::text, 'generation', u.generation)
      FROM u
), lookup AS ()sql" + std::string(k_record_lookup);

// The same decision on a refund ($2 the refund, $24 its payment): a refund that becomes failed
// gives its amount back to its payment in the same statement; $9 is then the provider's reason.
constexpr const char* k_apply_operation = "reconcile_apply_operation";
const std::string k_apply_operation_sql = R"sql(
WITH u AS (
    UPDATE operations
       SET state = $4::text, generation = generation + 1,
           next_attempt_at = CASE WHEN $5::bigint IS NOT NULL THEN now() + make_interval(secs => $5::bigint)
                                  WHEN $6::boolean THEN now() ELSE NULL END,
           lookup_count = lookup_count + CASE WHEN $7::text = 'not_asked' THEN 0 ELSE 1 END,
           lookup_failures = CASE WHEN $7::text = 'failed' THEN lookup_failures + 1 ELSE 0 END,
           resend_count = resend_count + CASE WHEN $6::boolean THEN 1 ELSE 0 END,
           review_code = $8::text,
           review_reason = CASE WHEN $4::text = 'failed' THEN NULL ELSE $9 END,
           failure_reason = CASE WHEN $4::text = 'failed' THEN left($9, 1000) END,
           provider_reference = coalesce($10, provider_reference),
           updated_at = CASE WHEN state = $4::text THEN updated_at ELSE now() END
     WHERE tenant_id = $1::uuid AND id = $2::uuid AND generation = $3 AND state = $11
 RETURNING *
), effect AS ()sql" + operation_effect_update("u") +
                                          R"sql(
), event AS (
    )sql" + operation_event_insert("u", "r.state <> $11") +
                                          R"sql(
), audit AS (
    INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail)
    SELECT u.tenant_id, $12, u.kind || '.reconciled', u.kind, u.id::text,
           jsonb_build_object('from', $11::text, 'to', u.state, 'decision', $13::text,
                              'lookup', $7::text, 'review_code', u.review_code,
                              'reason', $9::text, 'generation', u.generation,
                              'payment_id', u.payment_id)
      FROM u
), lookup AS ()sql" + std::string(k_record_lookup);

constexpr const char* k_lock = "resolve_lock";
constexpr const char* k_lock_sql = R"sql(
SELECT state, generation FROM payments
 WHERE tenant_id = $1::uuid AND payment_id = $2::uuid FOR UPDATE)sql";

// An attempt that may have reached the provider: anything but not_sent, and but a refusal of our
// credentials (core/credential_refusal: the provider executed nothing).
constexpr const char* k_may_have_reached = R"sql(outcome IS DISTINCT FROM 'not_sent'
   AND NOT (outcome = 'rejected' AND coalesce(http_status, 0) IN (401, 403)))sql";

constexpr const char* k_maybe_sent = "resolve_maybe_sent";
const std::string k_maybe_sent_sql = R"sql(
SELECT count(*) FROM payment_attempts a
  JOIN payments p ON p.tenant_id = a.tenant_id AND p.payment_id = a.payment_id
                 AND p.operation_id = a.operation_id
 WHERE a.tenant_id = $1::uuid AND a.payment_id = $2::uuid AND )sql" +
                                     std::string(k_may_have_reached);

// The payment (of any tenant) that already holds a provider's reference, other than this one.
// Resolves binding one reference take turns on an advisory lock of (provider, reference), so two
// at once cannot both bind it.
constexpr const char* k_reference_holder = "resolve_reference_holder";
constexpr const char* k_reference_holder_sql = R"sql(
WITH lock AS (
    SELECT pg_advisory_xact_lock(hashtextextended(me.provider || ' ' || $3, 0)), me.provider
      FROM payments me WHERE me.tenant_id = $1::uuid AND me.payment_id = $2::uuid
)
SELECT p.payment_id::text FROM payments p, lock
 WHERE p.provider = lock.provider AND p.provider_reference = $3
   AND NOT (p.tenant_id = $1::uuid AND p.payment_id = $2::uuid)
 LIMIT 1)sql";

constexpr const char* k_resolve = "resolve_apply";
const std::string k_resolve_sql = R"sql(
WITH u AS (
    UPDATE payments
       SET state = $4::text, generation = generation + 1,
           next_attempt_at = CASE WHEN $4 = 'retry_scheduled' THEN now() ELSE NULL END,
           review_code = NULL, review_reason = $5, lookup_count = 0, lookup_failures = 0,
           provider_reference = coalesce($6, provider_reference),
           charged_amount_minor = coalesce($12::bigint, charged_amount_minor), updated_at = now()
     WHERE tenant_id = $1::uuid AND payment_id = $2::uuid AND generation = $3
 RETURNING *
), event AS (
    )sql" + payment_event_insert("u") +
                                  R"sql(
), audit AS (
    INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail)
    SELECT u.tenant_id, $7, $11, 'payment', u.payment_id::text,
           jsonb_build_object('from', $8::text, 'to', u.state, 'decision', $9::text,
                              'note', $10::text, 'provider_reference', $6::text,
                              'generation', u.generation, 'amount_minor', u.amount_minor,
                              'charged_amount_minor', $12::bigint)
      FROM u
)
SELECT u.state, u.generation FROM u)sql";

// A refund's resolution (kind refund): the same decisions on the `operations` row, its lock,
// its attempts (by its own operation ID), the refunds holding a reference, and the write: a
// refund decided failed gives its amount back to its payment in the statement that decides it.
constexpr const char* k_lock_refund = "resolve_lock_refund";
constexpr const char* k_lock_refund_sql = R"sql(
SELECT state, generation FROM operations
 WHERE tenant_id = $1::uuid AND id = $2::uuid FOR UPDATE)sql";

constexpr const char* k_maybe_sent_refund = "resolve_maybe_sent_refund";
const std::string k_maybe_sent_refund_sql = R"sql(
SELECT count(*) FROM payment_attempts a
  JOIN operations o ON o.tenant_id = a.tenant_id AND o.payment_id = a.payment_id
                   AND o.operation_id = a.operation_id
 WHERE o.tenant_id = $1::uuid AND o.id = $2::uuid AND )sql" +
                                            std::string(k_may_have_reached);

constexpr const char* k_refund_reference_holder = "resolve_refund_reference_holder";
constexpr const char* k_refund_reference_holder_sql = R"sql(
WITH lock AS (
    SELECT pg_advisory_xact_lock(hashtextextended(me.provider || ' ' || me.kind || ' ' || $3, 0)),
           me.provider, me.kind
      FROM operations me WHERE me.tenant_id = $1::uuid AND me.id = $2::uuid
)
SELECT o.id::text FROM operations o, lock
 WHERE o.provider = lock.provider AND o.kind = lock.kind AND o.provider_reference = $3
   AND NOT (o.tenant_id = $1::uuid AND o.id = $2::uuid)
 LIMIT 1)sql";

constexpr const char* k_resolve_refund = "resolve_apply_refund";
const std::string k_resolve_refund_sql = R"sql(
WITH u AS (
    UPDATE operations
       SET state = $4::text, generation = generation + 1,
           next_attempt_at = CASE WHEN $4 = 'retry_scheduled' THEN now() ELSE NULL END,
           review_code = NULL, review_reason = CASE WHEN $4 = 'failed' THEN NULL ELSE $5 END,
           failure_reason = CASE WHEN $4 = 'failed' THEN left($5, 1000) ELSE failure_reason END,
           lookup_count = 0, lookup_failures = 0,
           provider_reference = coalesce($6, provider_reference), updated_at = now()
     WHERE tenant_id = $1::uuid AND id = $2::uuid AND generation = $3
 RETURNING *
), effect AS ()sql" + operation_effect_update("u") +
                                         R"sql(
), event AS (
    )sql" + operation_event_insert("u") +
                                         R"sql(
), audit AS (
    INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail)
    SELECT u.tenant_id, $7, $11, u.kind, u.id::text,
           jsonb_build_object('from', $8::text, 'to', u.state, 'decision', $9::text,
                              'note', $10::text, 'provider_reference', $6::text,
                              'generation', u.generation, 'amount_minor', u.amount_minor,
                              'payment_id', u.payment_id)
      FROM u
)
SELECT u.state, u.generation FROM u)sql";

constexpr const char* k_queue = "reconcile_queue_counts";
constexpr const char* k_queue_sql = R"sql(
SELECT state, provider, coalesce(review_code, ''), currency, count(*), sum(amount_minor),
       count(*) FILTER (WHERE state IN ('pending', 'retry_scheduled')
                          AND updated_at < now() - make_interval(secs => $1::double precision)),
       count(*) FILTER (WHERE state = 'unknown' AND lookup_failures > 0), 'charge' AS kind
  FROM payments
 WHERE state IN ('pending', 'retry_scheduled', 'processing', 'unknown', 'needs_review')
 GROUP BY 1, 2, 3, 4
UNION ALL
SELECT state, provider, coalesce(review_code, ''), currency, count(*), sum(amount_minor),
       count(*) FILTER (WHERE state IN ('pending', 'retry_scheduled')
                          AND updated_at < now() - make_interval(secs => $1::double precision)),
       count(*) FILTER (WHERE state = 'unknown' AND lookup_failures > 0), kind
  FROM operations
 WHERE state IN ('pending', 'retry_scheduled', 'processing', 'unknown', 'needs_review')
 GROUP BY 1, 2, 3, 4, 9
 ORDER BY 9, 1, 2, 3, 4)sql";

// The rejected attempt is the payment's latest (attempt_no = attempt_count): nothing claims a
// payment in review. "request_rejected:" is 17 characters.
constexpr const char* k_rejected_review = "reconcile_rejected_in_review";
constexpr const char* k_rejected_review_sql = R"sql(
SELECT p.provider, coalesce(substr(a.error_class, 18), '') AS code, count(*),
       (array_agg(p.payment_id::text ORDER BY p.updated_at DESC, p.payment_id))[1],
       (array_agg(coalesce(p.review_reason, '') ORDER BY p.updated_at DESC, p.payment_id))[1]
  FROM payments p
  LEFT JOIN payment_attempts a
    ON a.tenant_id = p.tenant_id AND a.payment_id = p.payment_id
       AND a.operation_id = p.operation_id AND a.attempt_no = p.attempt_count
       AND a.outcome = 'rejected'
 WHERE p.state = 'needs_review' AND p.review_code = 'request_rejected'
 GROUP BY 1, 2
 ORDER BY 1, 2)sql";

// A provider's payments in review as request_rejected, each with its latest attempt
// (attempt_no = attempt_count: nothing claims a payment in review).
constexpr const char* k_rejected_payments = "review_rejected_payments";
const std::string k_rejected_payments_sql = R"sql(
SELECT p.tenant_id::text, p.payment_id::text, p.generation, p.amount_minor, p.currency,
       coalesce(p.review_reason, ''), coalesce(a.attempt_no, 0), coalesce(a.outcome, ''),
       a.http_status, coalesce(a.error_class, ''), )sql" +
                                            iso_utc("coalesce(a.finished_at, a.started_at)") +
                                            R"sql(
  FROM payments p
  LEFT JOIN payment_attempts a
    ON a.tenant_id = p.tenant_id AND a.payment_id = p.payment_id
       AND a.operation_id = p.operation_id AND a.attempt_no = p.attempt_count
 WHERE p.state = 'needs_review' AND p.review_code = 'request_rejected' AND p.provider = $1
   AND ($2::uuid IS NULL OR p.tenant_id = $2::uuid)
 ORDER BY p.updated_at, p.payment_id)sql";

// A provider's payments and operations (refunds, captures, voids) in review with one review code,
// longest waiting first: what a bulk recheck selects (the review queue's order).
constexpr const char* k_review_items = "review_items";
const std::string k_review_items_sql =
    R"sql(
SELECT kind, tenant_id, payment_id, refund_id, generation, amount_minor, currency, review_reason,
       )sql" +
    iso_utc("updated_at") + R"sql(
  FROM (SELECT 'charge' AS kind, p.tenant_id::text, p.payment_id::text, NULL::text AS refund_id,
               p.generation, p.amount_minor::bigint, p.currency::text,
               coalesce(p.review_reason, '') AS review_reason, p.updated_at,
               p.payment_id AS subject
          FROM payments p
         WHERE p.state = 'needs_review' AND p.provider = $1 AND p.review_code = $2
           AND ($3::uuid IS NULL OR p.tenant_id = $3::uuid)
        UNION ALL
        SELECT o.kind, o.tenant_id::text, o.payment_id::text, o.id::text, o.generation,
               o.amount_minor::bigint, o.currency::text, coalesce(o.review_reason, ''),
               o.updated_at, o.id
          FROM operations o
         WHERE o.state = 'needs_review' AND o.provider = $1
           AND o.review_code = $2 AND ($3::uuid IS NULL OR o.tenant_id = $3::uuid)) AS in_review
 ORDER BY updated_at, subject
 LIMIT $4)sql";

// The payment as a requeue must see it, its row locked: state, generation, review code, and its
// latest attempt's outcome, HTTP status, number and error class.
constexpr const char* k_requeue_lock = "requeue_lock";
constexpr const char* k_requeue_lock_sql = R"sql(
SELECT p.state, p.generation, p.review_code, coalesce(a.outcome, ''), a.http_status,
       coalesce(a.attempt_no, 0), coalesce(a.error_class, '')
  FROM payments p
  LEFT JOIN payment_attempts a
    ON a.tenant_id = p.tenant_id AND a.payment_id = p.payment_id
       AND a.operation_id = p.operation_id AND a.attempt_no = p.attempt_count
 WHERE p.tenant_id = $1::uuid AND p.payment_id = $2::uuid
   FOR UPDATE OF p)sql";

constexpr const char* k_rejected_attempts = "reconcile_rejected_attempts";
constexpr const char* k_rejected_attempts_sql = R"sql(
SELECT p.provider, coalesce(substr(a.error_class, 18), '') AS code, count(*)
  FROM payment_attempts a
  JOIN payments p ON p.tenant_id = a.tenant_id AND p.payment_id = a.payment_id
 WHERE a.outcome = 'rejected'
 GROUP BY 1, 2
 ORDER BY 1, 2)sql";

ReconcileCandidate candidate_from_row(const pqxx::row& row) {
    ReconcileCandidate c;
    c.payment = claim_from_row(row);
    c.payment.attempt_no = 0;
    int i = k_claim_column_count;
    const auto state = parse_payment_state(row[i++].as<std::string>());
    if (!state) {
        throw std::logic_error("a payment in a state this build does not know");
    }
    c.state = *state;
    c.since_first_attempt = std::chrono::seconds(row[i++].as<long long>());
    c.since_last_attempt = std::chrono::seconds(row[i++].as<long long>());
    c.attempt_count = row[i++].as<int>();
    c.resends = row[i++].as<int>();
    c.lookup_count = row[i++].as<int>();
    c.lookup_failures = row[i++].as<int>();
    if (!row[i].is_null()) {
        c.review_code = row[i].as<std::string>();
    }
    c.last_attempt_accepted = row[++i].as<bool>();
    return c;
}

// Provider names are [a-z0-9_-]: safe inside an array literal without quoting.
// The providers' names, their settle delays for charges, and for refunds, as array literals.
std::tuple<std::string, std::string, std::string>
schedule_arrays(const std::vector<ProviderSchedule>& providers) {
    std::string names = "{";
    std::string delays = "{";
    std::string refund_delays = "{";
    for (const auto& p : providers) {
        if (p.provider.empty() ||
            p.provider.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") !=
                std::string::npos) {
            throw std::logic_error("reconcile: bad provider name '" + p.provider + "'");
        }
        const bool first = names.size() == 1;
        names += (first ? "" : ",") + p.provider;
        delays += (first ? "" : ",") + std::to_string(p.settle_delay.count());
        refund_delays += (first ? "" : ",") + std::to_string(p.refund_settle_delay.count());
    }
    return {names + "}", delays + "}", refund_delays + "}"};
}

std::vector<ReconcileCandidate> candidates_of(const pqxx::result& r) {
    std::vector<ReconcileCandidate> out;
    out.reserve(r.size());
    for (const auto& row : r) {
        out.push_back(candidate_from_row(row));
    }
    return out;
}

} // namespace

std::vector<ReconcileCandidate> claim_unknown(Db& db, std::chrono::seconds hold, int limit,
                                              const std::vector<ProviderSchedule>& providers,
                                              std::chrono::system_clock::time_point due_by) {
    if (providers.empty() || limit <= 0) {
        return {};
    }
    const auto [names, delays, refund_delays] = schedule_arrays(providers);
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_claim, k_claim_sql);
        pqxx::work tx(impl.connection());
        const double due = std::chrono::duration<double>(due_by.time_since_epoch()).count();
        const pqxx::result r =
            tx.exec_prepared(k_claim, names, delays, limit, static_cast<long long>(hold.count()),
                             due, refund_delays);
        tx.commit();
        return candidates_of(r);
    });
}

std::vector<ReconcileCandidate> peek_unknown(Db& db, int limit,
                                             const std::vector<ProviderSchedule>& providers) {
    if (providers.empty() || limit <= 0) {
        return {};
    }
    const auto [names, delays, refund_delays] = schedule_arrays(providers);
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_peek, k_peek_sql);
        pqxx::read_transaction tx(impl.connection());
        return candidates_of(tx.exec_prepared(k_peek, names, delays, limit, refund_delays));
    });
}

std::optional<ReconcileCandidate> load_candidate(Db& db, const std::string& tenant_id,
                                                 const std::string& subject_id,
                                                 OperationKind kind) {
    const bool operation = kind != OperationKind::charge;
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<ReconcileCandidate> {
        if (operation) {
            impl.prepare(k_load_refund, k_load_refund_sql);
        } else {
            impl.prepare(k_load, k_load_sql);
        }
        pqxx::read_transaction tx(impl.connection());
        const pqxx::result r =
            tx.exec_prepared(operation ? k_load_refund : k_load, tenant_id, subject_id);
        if (r.empty()) {
            return std::nullopt;
        }
        ReconcileCandidate c = candidate_from_row(r[0]);
        if (c.payment.kind != kind) { // another kind's ID: not the one asked for
            return std::nullopt;
        }
        return c;
    });
}

void record_lookup(Db& db, const std::string& tenant_id, const std::string& payment_id,
                   const std::string& operation_id, long long generation, const std::string& actor,
                   const LookupObservation& lookup, const std::string& decision,
                   const std::string& reason, bool applied) {
    const std::string amount = lookup.remote_amount ? std::to_string(*lookup.remote_amount) : "";
    const std::string http = lookup.http_status ? std::to_string(*lookup.http_status) : "";
    Db::Impl& impl = db.impl();
    translate_errors(impl, [&] {
        pqxx::nontransaction tx(impl.connection());
        tx.exec_params0(
            "INSERT INTO payment_lookups (tenant_id, payment_id, operation_id, generation, actor, "
            "status, remote_state, remote_raw_status, remote_amount, remote_currency, "
            "provider_reference, duplicates, http_status, error_class, detail, decision, reason, "
            "applied) VALUES ($1::uuid, $2::uuid, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, "
            "nullif($14, ''), left($15, 4096), $16, $17, $18)",
            tenant_id, payment_id, operation_id, generation, actor, lookup.status,
            or_null(lookup.remote_state), or_null(lookup.remote_raw_status),
            lookup.remote_amount ? amount.c_str() : nullptr, or_null(lookup.remote_currency),
            or_null(lookup.provider_reference), lookup.duplicates,
            lookup.http_status ? http.c_str() : nullptr, lookup.error_class, lookup.detail,
            decision, reason, applied);
    });
}

bool apply_reconciliation(Db& db, const ReconcileCandidate& candidate, const std::string& actor,
                          const LookupObservation& lookup, const ReconcileWrite& write) {
    if (write.to != candidate.state) {
        require_transition(candidate.state, write.to);
    }
    if ((write.to == PaymentState::needs_review) != write.review_code.has_value()) {
        throw std::logic_error(
            "apply_reconciliation: a review code goes with needs_review, and only with it");
    }
    const bool charge = candidate.payment.kind == OperationKind::charge;
    const char* name = charge ? k_apply : k_apply_operation;
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(name, charge ? k_apply_sql : k_apply_operation_sql);
        pqxx::work tx(impl.connection());
        const std::string next =
            write.next_check_in ? std::to_string(write.next_check_in->count()) : "";
        const std::string amount =
            lookup.remote_amount ? std::to_string(*lookup.remote_amount) : "";
        const std::string http = lookup.http_status ? std::to_string(*lookup.http_status) : "";
        const pqxx::row r = tx.exec_prepared1(
            name, candidate.payment.tenant_id, candidate.payment.subject_id(),
            candidate.payment.generation, std::string(to_string(write.to)),
            write.next_check_in ? next.c_str() : nullptr, write.resend_now, lookup.status,
            or_null(write.review_code), write.reason, or_null(write.provider_reference),
            std::string(to_string(candidate.state)), actor, write.decision,
            or_null(lookup.remote_state), or_null(lookup.remote_raw_status),
            lookup.remote_amount ? amount.c_str() : nullptr, or_null(lookup.remote_currency),
            or_null(lookup.provider_reference), lookup.duplicates,
            lookup.http_status ? http.c_str() : nullptr, lookup.error_class, lookup.detail,
            candidate.payment.operation_id, candidate.payment.payment_id);
        tx.commit();
        return r[0].as<long long>() == 1;
    });
}

ResolveResult resolve_payment(Db& db, const Resolution& resolution) {
    // The rules are core's (resolution_policy); nothing breaking one is written.
    if (const auto problem =
            check_resolution({resolution.decision, resolution.note, resolution.provider_reference,
                              resolution.confirmed_no_charge, resolution.generation,
                              resolution.charged_amount_minor.has_value(), false})) {
        throw UsageError(describe(*problem));
    }
    // A refund, capture or void is decided on its own row (`operations`), a charge on the payment.
    const bool refund = resolution.kind != OperationKind::charge;
    if (resolution.charged_amount_minor &&
        (refund || resolution.decision != OperatorDecision::succeeded ||
         *resolution.charged_amount_minor < 0)) {
        throw UsageError("a charged amount goes with a payment decided succeeded only, and is "
                         "not negative");
    }
    if (refund && resolution.refund_id.empty()) {
        throw std::logic_error("resolve_payment: an operation's resolution names its row");
    }
    // The row decided: the payment's own, or its refund's.
    const std::string& subject = refund ? resolution.refund_id : resolution.payment_id;
    const char* lock = refund ? k_lock_refund : k_lock;
    const char* maybe_sent = refund ? k_maybe_sent_refund : k_maybe_sent;
    const char* holder_of = refund ? k_refund_reference_holder : k_reference_holder;
    const char* apply = refund ? k_resolve_refund : k_resolve;
    const PaymentState to = target_state(resolution.decision);
    const std::string decision(to_string(resolution.decision));
    const std::string charged = resolution.charged_amount_minor
                                    ? std::to_string(*resolution.charged_amount_minor)
                                    : std::string();
    const bool cancel = resolution.decision == OperatorDecision::cancel;
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        if (refund) {
            impl.prepare(k_lock_refund, k_lock_refund_sql);
            impl.prepare(k_resolve_refund, k_resolve_refund_sql);
            impl.prepare(k_maybe_sent_refund, k_maybe_sent_refund_sql);
            impl.prepare(k_refund_reference_holder, k_refund_reference_holder_sql);
        } else {
            impl.prepare(k_lock, k_lock_sql);
            impl.prepare(k_resolve, k_resolve_sql);
            impl.prepare(k_maybe_sent, k_maybe_sent_sql);
            impl.prepare(k_reference_holder, k_reference_holder_sql);
        }
        pqxx::work tx(impl.connection());
        ResolveResult out;
        const pqxx::result current = tx.exec_prepared(lock, resolution.tenant_id, subject);
        if (current.empty()) {
            return out;
        }
        out.state = current[0][0].as<std::string>();
        out.generation = current[0][1].as<long long>();
        if (out.generation != resolution.generation) {
            out.status = ResolveResult::Status::changed;
            return out;
        }
        const auto from = parse_payment_state(out.state);
        if (!from || !decidable_from(resolution.decision, *from)) {
            out.status = ResolveResult::Status::not_resolvable;
            return out;
        }
        // The row lock taken above keeps workers from claiming it meanwhile.
        if (cancel &&
            tx.exec_prepared1(maybe_sent, resolution.tenant_id, subject)[0].as<long long>() > 0) {
            out.status = ResolveResult::Status::maybe_sent;
            return out;
        }
        if (resolution.provider_reference) {
            const pqxx::result holder = tx.exec_prepared(holder_of, resolution.tenant_id, subject,
                                                         *resolution.provider_reference);
            if (!holder.empty()) {
                out.status = ResolveResult::Status::reference_taken;
                out.holder = holder[0][0].as<std::string>();
                return out;
            }
        }
        require_transition(*from, to);
        if (resolution.dry_run) {
            out.status = ResolveResult::Status::applied;
            out.state = std::string(to_string(to));
            ++out.generation;
            return out; // rolled back: nothing was written
        }
        const std::string note = trimmed_note(resolution.note);
        const std::string reason =
            (cancel ? "canceled by " : "resolved by ") + resolution.operator_name + ": " + note;
        const std::string action = refund ? (cancel ? "refund.cancel" : "review.resolve")
                                          : (cancel ? "payment.cancel" : "review.resolve");
        const pqxx::row r =
            refund ? tx.exec_prepared1(apply, resolution.tenant_id, subject, resolution.generation,
                                       std::string(to_string(to)), reason,
                                       or_null(resolution.provider_reference),
                                       resolution.operator_name, out.state, decision, note, action)
                   : tx.exec_prepared1(apply, resolution.tenant_id, subject, resolution.generation,
                                       std::string(to_string(to)), reason,
                                       or_null(resolution.provider_reference),
                                       resolution.operator_name, out.state, decision, note, action,
                                       resolution.charged_amount_minor ? charged.c_str() : nullptr);
        tx.commit();
        out.status = ResolveResult::Status::applied;
        out.state = r[0].as<std::string>();
        out.generation = r[1].as<long long>();
        return out;
    });
}

std::vector<RejectedPayment> rejected_payments(Db& db, const std::string& provider,
                                               const std::optional<std::string>& tenant_id) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_rejected_payments, k_rejected_payments_sql);
        pqxx::read_transaction tx(impl.connection());
        std::vector<RejectedPayment> out;
        for (const auto& row :
             tx.exec_prepared(k_rejected_payments, provider, or_null(tenant_id))) {
            RejectedPayment p;
            p.tenant_id = row[0].as<std::string>();
            p.payment_id = row[1].as<std::string>();
            p.generation = row[2].as<long long>();
            p.amount_minor = row[3].as<long long>();
            p.currency = row[4].as<std::string>();
            p.review_reason = row[5].as<std::string>();
            p.attempt_no = row[6].as<int>();
            p.outcome = row[7].as<std::string>();
            if (!row[8].is_null()) {
                p.http_status = row[8].as<int>();
            }
            p.error_class = row[9].as<std::string>();
            p.attempt_at = row[10].is_null() ? "" : row[10].as<std::string>();
            out.push_back(std::move(p));
        }
        return out;
    });
}

ReviewItems review_items(Db& db, const std::string& provider, const std::string& review_code,
                         const std::optional<std::string>& tenant_id, int limit) {
    if (limit < 1) {
        throw std::invalid_argument("review_items: limit must be at least 1");
    }
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_review_items, k_review_items_sql);
        pqxx::read_transaction tx(impl.connection());
        ReviewItems out;
        // One row past the limit says whether there are more.
        for (const auto& row :
             tx.exec_prepared(k_review_items, provider, review_code, or_null(tenant_id),
                              static_cast<long long>(limit) + 1)) {
            if (out.items.size() == static_cast<std::size_t>(limit)) {
                out.more = true;
                break;
            }
            ReviewItem i;
            i.kind = parse_operation_kind(row[0].as<std::string>()).value();
            i.tenant_id = row[1].as<std::string>();
            i.payment_id = row[2].as<std::string>();
            if (!row[3].is_null()) {
                i.refund_id = row[3].as<std::string>();
            }
            i.generation = row[4].as<long long>();
            i.amount_minor = row[5].as<long long>();
            i.currency = row[6].as<std::string>();
            i.review_reason = row[7].as<std::string>();
            i.in_review_since = row[8].as<std::string>();
            out.items.push_back(std::move(i));
        }
        return out;
    });
}

ResolveResult requeue_payment(Db& db, const Requeue& requeue) {
    // A requeue is a retry whose confirmation is the record's (core/resolution_policy).
    if (const auto problem = check_resolution(
            {OperatorDecision::retry, requeue.note, std::nullopt, true, requeue.generation})) {
        throw UsageError(describe(*problem));
    }
    const PaymentState to = target_state(OperatorDecision::retry);
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_requeue_lock, k_requeue_lock_sql);
        impl.prepare(k_resolve, k_resolve_sql);
        pqxx::work tx(impl.connection());
        ResolveResult out;
        const pqxx::result current =
            tx.exec_prepared(k_requeue_lock, requeue.tenant_id, requeue.payment_id);
        if (current.empty()) {
            return out;
        }
        const pqxx::row row = current[0];
        out.state = row[0].as<std::string>();
        out.generation = row[1].as<long long>();
        if (out.generation != requeue.generation) {
            out.status = ResolveResult::Status::changed;
            return out;
        }
        const auto from = parse_payment_state(out.state);
        if (!from) {
            throw std::logic_error("a payment in a state this build does not know");
        }
        RequeueEvidence evidence;
        evidence.state = *from;
        if (!row[2].is_null()) {
            evidence.review_code = row[2].as<std::string>();
        }
        evidence.last_outcome = row[3].as<std::string>();
        if (!row[4].is_null()) {
            evidence.last_http_status = row[4].as<int>();
        }
        if (const auto why = requeue_refusal(evidence)) {
            out.status = ResolveResult::Status::not_resolvable;
            out.why = *why;
            return out;
        }
        require_transition(*from, to);
        const std::string note = trimmed_note(requeue.note);
        const std::string evidence_note =
            note + " [requeued: attempt " + row[5].as<std::string>() + " was refused with HTTP " +
            std::to_string(*evidence.last_http_status) + " (" + row[6].as<std::string>() +
            "), our credentials, before the provider executed anything]";
        const pqxx::row r = tx.exec_prepared1(
            k_resolve, requeue.tenant_id, requeue.payment_id, requeue.generation,
            std::string(to_string(to)), "requeued by " + requeue.operator_name + ": " + note,
            static_cast<const char*>(nullptr), requeue.operator_name, out.state, "requeue",
            evidence_note, "review.requeue", static_cast<const char*>(nullptr));
        tx.commit();
        out.status = ResolveResult::Status::applied;
        out.state = r[0].as<std::string>();
        out.generation = r[1].as<long long>();
        return out;
    });
}

std::vector<QueueCount> open_queue_counts(Db& db, std::chrono::seconds stuck_after) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_queue, k_queue_sql);
        pqxx::read_transaction tx(impl.connection());
        std::vector<QueueCount> out;
        for (const auto& row :
             tx.exec_prepared(k_queue, static_cast<long long>(stuck_after.count()))) {
            out.push_back({row[0].as<std::string>(), row[1].as<std::string>(),
                           row[2].as<std::string>(), row[3].as<std::string>(),
                           row[4].as<long long>(), row[5].as<long long>(), row[6].as<long long>(),
                           row[7].as<long long>(), row[8].as<std::string>()});
        }
        return out;
    });
}

std::vector<RejectedInReview> rejected_in_review(Db& db) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_rejected_review, k_rejected_review_sql);
        pqxx::read_transaction tx(impl.connection());
        std::vector<RejectedInReview> out;
        for (const auto& row : tx.exec_prepared(k_rejected_review)) {
            out.push_back({row[0].as<std::string>(), row[1].as<std::string>(),
                           row[2].as<long long>(), row[3].as<std::string>(),
                           row[4].as<std::string>()});
        }
        return out;
    });
}

std::vector<RejectedAttempts> rejected_attempt_counts(Db& db) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_rejected_attempts, k_rejected_attempts_sql);
        pqxx::read_transaction tx(impl.connection());
        std::vector<RejectedAttempts> out;
        for (const auto& row : tx.exec_prepared(k_rejected_attempts)) {
            out.push_back(
                {row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<long long>()});
        }
        return out;
    });
}

} // namespace payrecon::store
