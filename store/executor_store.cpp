#include "store/executor_store.hpp"

#include "store/payment_event.hpp"
#include "store/pq.hpp"
#include "store/statements.hpp"

#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace payrecon::store {
namespace {

// One kind's claim as three CTEs: `<name>_due` (due, oldest first, skipping what others hold),
// `<name>` (the rows claimed, RETURNING *) and `<name>_attempt` (their attempts opened). `table`
// is payments or operations, `key` its row's ID column. $1 worker, $2 lease ms, $3 batch, $4
// providers. `also`: a further condition on the due rows.
std::string claim_ctes(const std::string& name, const std::string& table, const std::string& key,
                       const std::string& also = "") {
    return name + "_due AS (\n    SELECT tenant_id, " + key + "\n      FROM " + table + R"sql(
     WHERE (state = 'pending' OR (state = 'retry_scheduled' AND next_attempt_at <= now()))
       AND provider = ANY($4::text[]))sql" +
           also + R"sql(
     ORDER BY coalesce(next_attempt_at, created_at)
     LIMIT $3
       FOR UPDATE SKIP LOCKED
), )sql" + name +
           " AS (\n    UPDATE " + table + R"sql( t
       SET state = 'processing', generation = t.generation + 1, lease_owner = $1,
           lease_expires_at = now() + make_interval(secs => $2::double precision / 1000),
           attempt_count = t.attempt_count + 1, next_attempt_at = NULL, updated_at = now(),
           first_attempt_at = coalesce(t.first_attempt_at, now()), last_attempt_at = now()
      FROM )sql" +
           name + "_due d\n     WHERE t.tenant_id = d.tenant_id AND t." + key + " = d." + key +
           R"sql(
 RETURNING t.*
), )sql" + name +
           R"sql(_attempt AS (
    INSERT INTO payment_attempts (tenant_id, payment_id, attempt_no, generation, worker,
                                  operation_id, started_at)
    SELECT tenant_id, payment_id, attempt_count, generation, $1, operation_id, now()
      FROM )sql" +
           name + "\n)";
}

// The captures and the void of one authorisation reach the provider in the order the intake took
// them: one is not claimed while an older one of its payment is open (in flight, due again,
// unknown or in review). Claimed together, a final capture sent before the parts asked ahead of
// it closed the authorisation at the provider (PayPal, Checkout.com), which then refused the
// parts -- each of them answered 202 by the intake (test_capture_matrix).
constexpr const char* k_in_intake_order = R"sql(
       AND NOT (kind IN ('capture', 'void') AND EXISTS (
               SELECT 1 FROM operations e
                WHERE e.tenant_id = operations.tenant_id AND e.payment_id = operations.payment_id
                  AND e.kind IN ('capture', 'void')
                  AND (e.created_at, e.id) < (operations.created_at, operations.id)
                  AND e.state IN ('pending', 'processing', 'retry_scheduled', 'unknown',
                                  'needs_review'))))sql";

constexpr const char* k_claim = "executor_claim";
// Charges (payments) and refunds, captures and voids (operations) in one statement: one round
// trip for an idle worker's poll, each kind's claim the same (claim_ctes). Every row is a claim's
// columns (store/pq.hpp, k_claim_column_count).
const std::string k_claim_sql = "\nWITH " + claim_ctes("claimed", "payments", "payment_id") + ", " +
                                claim_ctes("claimed_operations", "operations", "id",
                                           k_in_intake_order) +
                                R"sql(
SELECT )sql" + std::string(k_charge_claim_columns) +
                                R"sql(
  FROM claimed p
UNION ALL
SELECT )sql" + std::string(k_operation_claim_columns) +
                                R"sql(
  FROM claimed_operations o
  JOIN payments p ON p.tenant_id = o.tenant_id AND p.payment_id = o.payment_id)sql";

// The fence's statements take the claims as four arrays (tenant, subject ID, generation, kind)
// and answer (subject ID, lease left in ms) for each claim still held: the charges' from
// payments, the refunds' from operations.
constexpr const char* k_renew = "executor_renew";
const std::string k_renew_sql = R"sql(
WITH c AS (
    SELECT * FROM unnest($3::uuid[], $4::uuid[], $5::bigint[], $6::text[])
                  AS c(tenant_id, subject_id, generation, kind)
), charges AS (
    UPDATE payments p
       SET lease_expires_at = clock_timestamp() + make_interval(secs => $2::double precision / 1000)
      FROM c
     WHERE c.kind = 'charge' AND p.tenant_id = c.tenant_id AND p.payment_id = c.subject_id
       AND p.generation = c.generation AND p.state = 'processing' AND p.lease_owner = $1
       AND p.lease_expires_at > clock_timestamp()
    RETURNING p.payment_id, p.lease_expires_at
), operations_renewed AS (
    UPDATE operations o
       SET lease_expires_at = clock_timestamp() + make_interval(secs => $2::double precision / 1000)
      FROM c
     WHERE c.kind <> 'charge' AND o.tenant_id = c.tenant_id AND o.id = c.subject_id
       AND o.generation = c.generation AND o.state = 'processing' AND o.lease_owner = $1
       AND o.lease_expires_at > clock_timestamp()
    RETURNING o.id, o.lease_expires_at
)
SELECT payment_id::text,
       floor(extract(epoch FROM lease_expires_at - clock_timestamp()) * 1000)::bigint
  FROM charges
UNION ALL
SELECT id::text, floor(extract(epoch FROM lease_expires_at - clock_timestamp()) * 1000)::bigint
  FROM operations_renewed)sql";

constexpr const char* k_check = "executor_check";
const std::string k_check_sql = R"sql(
SELECT p.payment_id::text,
       floor(extract(epoch FROM p.lease_expires_at - clock_timestamp()) * 1000)::bigint
  FROM payments p
  JOIN unnest($2::uuid[], $3::uuid[], $4::bigint[], $5::text[])
           AS c(tenant_id, subject_id, generation, kind)
    ON c.kind = 'charge' AND p.tenant_id = c.tenant_id AND p.payment_id = c.subject_id
   AND p.generation = c.generation
 WHERE p.state = 'processing' AND p.lease_owner = $1 AND p.lease_expires_at > clock_timestamp()
UNION ALL
SELECT o.id::text, floor(extract(epoch FROM o.lease_expires_at - clock_timestamp()) * 1000)::bigint
  FROM operations o
  JOIN unnest($2::uuid[], $3::uuid[], $4::bigint[], $5::text[])
           AS c(tenant_id, subject_id, generation, kind)
    ON c.kind <> 'charge' AND o.tenant_id = c.tenant_id AND o.id = c.subject_id
   AND o.generation = c.generation
 WHERE o.state = 'processing' AND o.lease_owner = $1 AND o.lease_expires_at > clock_timestamp())sql";

// The attempt is finished whatever the fence says (a fenced-out worker's observation is kept):
// the head of both settlements ($6 provider reference, $9 attempt, $10 outcome, $11 HTTP status,
// $12 error class, $13 detail, $14 operation ID, $15 payment).
constexpr const char* k_finish_attempt = R"sql(
WITH attempt AS (
    UPDATE payment_attempts
       SET finished_at = now(), outcome = $10::text, http_status = $11, error_class = nullif($12, ''),
           provider_reference = $6, detail = left($13, 4096)
     WHERE tenant_id = $1::uuid AND payment_id = $15::uuid AND operation_id = $14
       AND attempt_no = $9
), settled AS (
)sql";

// The payment is settled only at the claim's generation. One statement: atomic without a
// transaction block, one round trip.
constexpr const char* k_settle = "executor_settle";
const std::string k_settle_sql = std::string(k_finish_attempt) + R"sql(
    UPDATE payments
       SET state = $4::text, lease_owner = NULL, lease_expires_at = NULL,
           next_attempt_at = CASE WHEN $5::bigint IS NULL THEN NULL
                                  ELSE now() + make_interval(secs => $5::double precision / 1000) END,
           provider_reference = coalesce($6, provider_reference),
           review_reason = $7, review_code = $8::text, lookup_count = 0, lookup_failures = 0,
           updated_at = now()
     WHERE tenant_id = $1::uuid AND payment_id = $2::uuid AND generation = $3
       AND state = 'processing'
 RETURNING *
), event AS ()sql" + payment_event_insert("settled") +
                                 R"sql(
)
SELECT count(*) FROM settled)sql";

// The same for a refund: the operations row settled at the claim's generation; a refund that
// failed gives its amount back to its payment in the same statement (what may still be refunded
// grows again), and its event goes out under the payment. $7 is the review or unknown reason, or
// with failed the provider's reason ($14 the refund's operation ID, $15 its payment).
constexpr const char* k_settle_operation = "executor_settle_operation";
const std::string k_settle_operation_sql = std::string(k_finish_attempt) + R"sql(
    UPDATE operations
       SET state = $4::text, lease_owner = NULL, lease_expires_at = NULL,
           next_attempt_at = CASE WHEN $5::bigint IS NULL THEN NULL
                                  ELSE now() + make_interval(secs => $5::double precision / 1000) END,
           provider_reference = coalesce($6, provider_reference),
           review_reason = CASE WHEN $4::text = 'failed' THEN NULL ELSE $7 END,
           failure_reason = CASE WHEN $4::text = 'failed' THEN left($7, 1000) END,
           review_code = $8::text, lookup_count = 0, lookup_failures = 0, updated_at = now()
     WHERE tenant_id = $1::uuid AND id = $2::uuid AND generation = $3 AND state = 'processing'
 RETURNING *
), effect AS ()sql" + operation_effect_update("settled") +
                                           R"sql(
), event AS ()sql" + operation_event_insert("settled") +
                                           R"sql(
)
SELECT count(*) FROM settled)sql";

// Several charges settled at once (settle_attempts, issue 33): the settlements of calls that
// ended together, each exactly as k_settle writes one -- its attempt finished whatever the fence
// says, its payment settled only at its claim's generation, with its event -- in one statement and
// one commit. $1: a JSON array of the settlements (a record each, as jsonb_to_recordset reads
// them). Returns the payments it settled.
constexpr const char* k_settle_many = "executor_settle_many";
const std::string k_settle_many_sql = R"sql(
WITH i AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS i(
        tenant_id uuid, payment_id uuid, generation bigint, state text, retry_ms bigint,
        provider_reference text, reason text, review_code text, attempt_no integer, outcome text,
        http_status integer, error_class text, detail text, operation_id text)
), attempt AS (
    UPDATE payment_attempts a
       SET finished_at = now(), outcome = i.outcome, http_status = i.http_status,
           error_class = nullif(i.error_class, ''), provider_reference = i.provider_reference,
           detail = left(i.detail, 4096)
      FROM i
     WHERE a.tenant_id = i.tenant_id AND a.payment_id = i.payment_id
       AND a.operation_id = i.operation_id AND a.attempt_no = i.attempt_no
), settled AS (
    UPDATE payments p
       SET state = i.state, lease_owner = NULL, lease_expires_at = NULL,
           next_attempt_at = CASE WHEN i.retry_ms IS NULL THEN NULL
                                  ELSE now() + make_interval(secs => i.retry_ms::double precision / 1000) END,
           provider_reference = coalesce(i.provider_reference, p.provider_reference),
           review_reason = i.reason, review_code = i.review_code, lookup_count = 0,
           lookup_failures = 0, updated_at = now()
      FROM i
     WHERE p.tenant_id = i.tenant_id AND p.payment_id = i.payment_id
       AND p.generation = i.generation AND p.state = 'processing'
 RETURNING p.*
), event AS ()sql" + payment_event_insert("settled") +
                                      R"sql(
)
SELECT payment_id::text FROM settled)sql";

constexpr const char* k_expire = "executor_expire";
const std::string k_expire_sql = R"sql(
WITH stale AS (
    SELECT tenant_id, payment_id FROM payments
     WHERE state = 'processing' AND lease_expires_at < now()
     FOR UPDATE SKIP LOCKED
), expired AS (
    UPDATE payments p
       SET state = 'unknown', generation = p.generation + 1, lease_owner = NULL,
           lease_expires_at = NULL,
           review_reason = 'the worker''s lease expired during the provider call', review_code = NULL,
           lookup_count = 0, lookup_failures = 0, updated_at = now()
      FROM stale
     WHERE p.tenant_id = stale.tenant_id AND p.payment_id = stale.payment_id
 RETURNING p.*
), event AS ()sql" + payment_event_insert("expired") +
                                 R"sql(
), audit AS (
    INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail)
    SELECT tenant_id, $1, 'payment.lease_expired', 'payment', payment_id::text,
           jsonb_build_object('from', 'processing', 'to', 'unknown', 'generation', generation)
      FROM expired
), stale_operations AS (
    SELECT tenant_id, id FROM operations
     WHERE state = 'processing' AND lease_expires_at < now()
     FOR UPDATE SKIP LOCKED
), expired_operations AS (
    UPDATE operations o
       SET state = 'unknown', generation = o.generation + 1, lease_owner = NULL,
           lease_expires_at = NULL,
           review_reason = 'the worker''s lease expired during the provider call', review_code = NULL,
           lookup_count = 0, lookup_failures = 0, updated_at = now()
      FROM stale_operations s
     WHERE o.tenant_id = s.tenant_id AND o.id = s.id
 RETURNING o.*
), operation_event AS ()sql" + operation_event_insert("expired_operations") +
                                 R"sql(
), operation_audit AS (
    INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail)
    SELECT tenant_id, $1, kind || '.lease_expired', kind, id::text,
           jsonb_build_object('from', 'processing', 'to', 'unknown', 'generation', generation,
                              'payment_id', payment_id)
      FROM expired_operations
)
SELECT (SELECT count(*) FROM expired) + (SELECT count(*) FROM expired_operations))sql";

} // namespace

const std::string& statements::executor_claim() {
    return k_claim_sql;
}
const std::string& statements::executor_renew() {
    return k_renew_sql;
}
const std::string& statements::executor_check() {
    return k_check_sql;
}
const std::string& statements::executor_settle() {
    return k_settle_sql;
}
const std::string& statements::executor_settle_many() {
    return k_settle_many_sql;
}

ClaimedPayment payment_from_row(const pqxx::row& row, int first) {
    ClaimedPayment c;
    c.tenant_id = row[first + 0].as<std::string>();
    c.payment_id = row[first + 1].as<std::string>();
    c.generation = row[first + 2].as<long long>();
    c.attempt_no = row[first + 3].as<int>();
    c.operation_id = row[first + 4].as<std::string>();
    c.merchant_reference = row[first + 5].as<std::string>();
    c.amount_minor = row[first + 6].as<long long>();
    c.currency = row[first + 7].as<std::string>();
    c.provider = row[first + 8].as<std::string>();
    c.payment_method = row[first + 9].as<std::string>();
    if (!row[first + 10].is_null()) {
        c.customer = row[first + 10].as<std::string>();
    }
    if (!row[first + 11].is_null()) {
        c.description = row[first + 11].as<std::string>();
    }
    const nlohmann::json metadata = nlohmann::json::parse(row[first + 12].as<std::string>());
    c.metadata = metadata.get<std::map<std::string, std::string>>();
    c.created_at = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::microseconds(row[first + 13].as<long long>())));
    return c;
}

ClaimedPayment claim_from_row(const pqxx::row& row) {
    ClaimedPayment c = payment_from_row(row, 9);
    const auto kind = parse_operation_kind(row[0].as<std::string>());
    if (!kind) {
        throw std::logic_error("an operation of a kind this build does not know: " +
                               row[0].as<std::string>());
    }
    c.kind = *kind;
    if (c.kind != OperationKind::charge) {
        c.operation_row_id = row[1].as<std::string>();
    }
    if (!row[2].is_null()) {
        c.charge_reference = row[2].as<std::string>();
    }
    if (!row[3].is_null()) {
        c.refund_reason = row[3].as<std::string>();
    }
    c.manual_capture = row[4].as<bool>();
    if (!row[5].is_null()) {
        c.final = row[5].as<bool>();
    }
    c.payment_operation_id = row[6].as<std::string>();
    c.authorized_minor = row[7].as<long long>();
    c.captured_before_minor = row[8].as<long long>();
    return c;
}

std::vector<ClaimedPayment> claim_payments(Db& db, const std::string& worker,
                                           std::chrono::milliseconds lease, int batch,
                                           const std::vector<std::string>& providers) {
    require_transition(PaymentState::pending, PaymentState::processing);
    require_transition(PaymentState::retry_scheduled, PaymentState::processing);
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_claim, k_claim_sql);
        // Provider names are [a-z0-9_-]: safe inside an array literal without quoting.
        std::string names = "{";
        for (const auto& p : providers) {
            if (p.empty() || p.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") !=
                                 std::string::npos) {
                throw std::logic_error("claim_payments: bad provider name '" + p + "'");
            }
            names += (names.size() > 1 ? "," : "") + p;
        }
        names += "}";
        // One statement: atomic without a transaction block, one round trip.
        pqxx::nontransaction tx(impl.connection());
        const pqxx::result r =
            tx.exec_prepared(k_claim, worker, static_cast<long long>(lease.count()), batch, names);
        std::vector<ClaimedPayment> out;
        for (const auto& row : r) {
            out.push_back(claim_from_row(row));
        }
        return out;
    });
}

namespace {

// The claims as the four arrays the fence's statements unnest. UUIDs, integers and kind names
// need no quoting inside an array literal.
struct ClaimArrays {
    std::string tenants = "{", subjects = "{", generations = "{", kinds = "{";
    explicit ClaimArrays(const std::vector<ClaimedPayment>& claims) {
        for (const auto& c : claims) {
            const char* sep = tenants.size() > 1 ? "," : "";
            tenants += sep + c.tenant_id;
            subjects += sep + c.subject_id();
            generations += sep + std::to_string(c.generation);
            kinds += sep + std::string(to_string(c.kind));
        }
        tenants += "}";
        subjects += "}";
        generations += "}";
        kinds += "}";
    }
};

std::map<std::string, std::chrono::milliseconds> held_from(const pqxx::result& r) {
    std::map<std::string, std::chrono::milliseconds> held;
    for (const auto& row : r) {
        held.emplace(row[0].as<std::string>(), std::chrono::milliseconds(row[1].as<long long>()));
    }
    return held;
}

} // namespace

std::map<std::string, std::chrono::milliseconds>
check_claims(Db& db, const std::string& worker, const std::vector<ClaimedPayment>& claims) {
    if (claims.empty()) {
        return {};
    }
    const ClaimArrays arrays(claims);
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_check, k_check_sql);
        pqxx::nontransaction tx(impl.connection());
        return held_from(tx.exec_prepared(k_check, worker, arrays.tenants, arrays.subjects,
                                          arrays.generations, arrays.kinds));
    });
}

std::map<std::string, std::chrono::milliseconds>
renew_claims(Db& db, const std::string& worker, std::chrono::milliseconds lease,
             const std::vector<ClaimedPayment>& claims) {
    if (claims.empty()) {
        return {};
    }
    const ClaimArrays arrays(claims);
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_renew, k_renew_sql);
        pqxx::nontransaction tx(impl.connection());
        return held_from(tx.exec_prepared(k_renew, worker, static_cast<long long>(lease.count()),
                                          arrays.tenants, arrays.subjects, arrays.generations,
                                          arrays.kinds));
    });
}

namespace {

void check_settlement(const Settlement& settlement) {
    require_transition(PaymentState::processing, settlement.to);
    if ((settlement.to == PaymentState::retry_scheduled) != settlement.retry_in.has_value()) {
        throw std::logic_error(
            "settle_attempt: retry_in goes with retry_scheduled, and only with it");
    }
    if ((settlement.to == PaymentState::needs_review) != settlement.review_code.has_value()) {
        throw std::logic_error(
            "settle_attempt: review_code goes with needs_review, and only with it");
    }
}

nlohmann::json optional_json(const std::optional<std::string>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json();
}

} // namespace

bool settle_attempt(Db& db, const ClaimedPayment& claim, const AttemptResult& result,
                    const Settlement& settlement) {
    check_settlement(settlement);
    const bool charge = claim.kind == OperationKind::charge;
    const char* name = charge ? k_settle : k_settle_operation;
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(name, charge ? k_settle_sql : k_settle_operation_sql);
        pqxx::nontransaction tx(impl.connection());
        const std::string http = result.http_status ? std::to_string(*result.http_status) : "";
        const std::string retry =
            settlement.retry_in ? std::to_string(settlement.retry_in->count()) : "";
        const pqxx::row r = tx.exec_prepared1(
            name, claim.tenant_id, claim.subject_id(), claim.generation,
            std::string(to_string(settlement.to)), settlement.retry_in ? retry.c_str() : nullptr,
            or_null(result.provider_reference), or_null(settlement.reason),
            or_null(settlement.review_code), claim.attempt_no, result.outcome,
            result.http_status ? http.c_str() : nullptr, result.error_class, result.detail,
            claim.operation_id, claim.payment_id);
        return r[0].as<long long>() == 1;
    });
}

std::vector<bool> settle_attempts(Db& db, const std::vector<SettleRequest>& items) {
    nlohmann::json rows = nlohmann::json::array();
    std::set<std::pair<std::string, std::string>> seen;
    for (const SettleRequest& item : items) {
        const ClaimedPayment& claim = *item.claim;
        if (claim.kind != OperationKind::charge) {
            throw std::logic_error("settle_attempts: charges only (two operations of one payment "
                                   "would meet in one update of their payment)");
        }
        if (!seen.emplace(claim.tenant_id, claim.payment_id).second) {
            throw std::logic_error("settle_attempts: a payment settled twice in one statement");
        }
        check_settlement(*item.settlement);
        const Settlement& s = *item.settlement;
        const AttemptResult& r = *item.result;
        rows.push_back(
            {{"tenant_id", claim.tenant_id},
             {"payment_id", claim.payment_id},
             {"generation", claim.generation},
             {"state", std::string(to_string(s.to))},
             {"retry_ms", s.retry_in ? nlohmann::json(s.retry_in->count()) : nlohmann::json()},
             {"provider_reference", optional_json(r.provider_reference)},
             {"reason", optional_json(s.reason)},
             {"review_code", optional_json(s.review_code)},
             {"attempt_no", claim.attempt_no},
             {"outcome", r.outcome},
             {"http_status", r.http_status ? nlohmann::json(*r.http_status) : nlohmann::json()},
             {"error_class", r.error_class},
             {"detail", r.detail},
             {"operation_id", claim.operation_id}});
    }
    if (items.empty()) {
        return {};
    }
    // A provider's excerpt that is not UTF-8 is stored with U+FFFD where its bytes were not.
    const std::string json = rows.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_settle_many, k_settle_many_sql);
        pqxx::nontransaction tx(impl.connection());
        const pqxx::result r = tx.exec_prepared(k_settle_many, json);
        std::set<std::string> settled;
        for (const auto& row : r) {
            settled.insert(row[0].as<std::string>());
        }
        std::vector<bool> out;
        out.reserve(items.size());
        for (const SettleRequest& item : items) {
            out.push_back(settled.count(item.claim->payment_id) != 0);
        }
        return out;
    });
}

int expire_leases(Db& db, const std::string& actor) {
    require_transition(PaymentState::processing, PaymentState::unknown);
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_expire, k_expire_sql);
        pqxx::work tx(impl.connection());
        const pqxx::row r = tx.exec_prepared1(k_expire, actor);
        tx.commit();
        return r[0].as<int>();
    });
}

} // namespace payrecon::store
