#include "store/executor_store.hpp"

#include "store/payment_event.hpp"
#include "store/pq.hpp"
#include "store/statements.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace payrecon::store {
namespace {

constexpr const char* k_claim = "executor_claim";
const std::string k_claim_sql = R"sql(
WITH due AS (
    SELECT tenant_id, payment_id
      FROM payments
     WHERE (state = 'pending' OR (state = 'retry_scheduled' AND next_attempt_at <= now()))
       AND provider = ANY($4::text[])
     ORDER BY coalesce(next_attempt_at, created_at)
     LIMIT $3
       FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE payments p
       SET state = 'processing', generation = p.generation + 1, lease_owner = $1,
           lease_expires_at = now() + make_interval(secs => $2::double precision / 1000),
           attempt_count = p.attempt_count + 1, next_attempt_at = NULL, updated_at = now(),
           first_attempt_at = coalesce(p.first_attempt_at, now()), last_attempt_at = now()
      FROM due
     WHERE p.tenant_id = due.tenant_id AND p.payment_id = due.payment_id
 RETURNING p.*
), attempt AS (
    INSERT INTO payment_attempts (tenant_id, payment_id, attempt_no, generation, worker,
                                  operation_id, started_at)
    SELECT tenant_id, payment_id, attempt_count, generation, $1, operation_id, now() FROM claimed
)
SELECT )sql" + std::string(k_payment_columns) +
                                " FROM claimed p";

constexpr const char* k_renew = "executor_renew";
const std::string k_renew_sql = R"sql(
UPDATE payments p
   SET lease_expires_at = clock_timestamp() + make_interval(secs => $2::double precision / 1000)
  FROM unnest($3::uuid[], $4::uuid[], $5::bigint[]) AS c(tenant_id, payment_id, generation)
 WHERE p.tenant_id = c.tenant_id AND p.payment_id = c.payment_id AND p.generation = c.generation
   AND p.state = 'processing' AND p.lease_owner = $1 AND p.lease_expires_at > clock_timestamp()
RETURNING p.payment_id::text,
          floor(extract(epoch FROM p.lease_expires_at - clock_timestamp()) * 1000)::bigint)sql";

constexpr const char* k_check = "executor_check";
const std::string k_check_sql = R"sql(
SELECT p.payment_id::text,
       floor(extract(epoch FROM p.lease_expires_at - clock_timestamp()) * 1000)::bigint
  FROM payments p
  JOIN unnest($2::uuid[], $3::uuid[], $4::bigint[]) AS c(tenant_id, payment_id, generation)
    ON p.tenant_id = c.tenant_id AND p.payment_id = c.payment_id AND p.generation = c.generation
 WHERE p.state = 'processing' AND p.lease_owner = $1 AND p.lease_expires_at > clock_timestamp())sql";

// The attempt is finished whatever the fence says (a fenced-out worker's observation is kept);
// the payment is settled only at the claim's generation. One statement: atomic without a
// transaction block, one round trip.
constexpr const char* k_settle = "executor_settle";
const std::string k_settle_sql = R"sql(
WITH attempt AS (
    UPDATE payment_attempts
       SET finished_at = now(), outcome = $10::text, http_status = $11, error_class = nullif($12, ''),
           provider_reference = $6, detail = left($13, 4096)
     WHERE tenant_id = $1::uuid AND payment_id = $2::uuid AND attempt_no = $9
), settled AS (
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
)
SELECT count(*) FROM expired)sql";

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
            out.push_back(payment_from_row(row));
        }
        return out;
    });
}

namespace {

// The claims as the three arrays the fence's statements unnest. UUIDs and integers need no
// quoting inside an array literal.
struct ClaimArrays {
    std::string tenants = "{", payments = "{", generations = "{";
    explicit ClaimArrays(const std::vector<ClaimedPayment>& claims) {
        for (const auto& c : claims) {
            const char* sep = tenants.size() > 1 ? "," : "";
            tenants += sep + c.tenant_id;
            payments += sep + c.payment_id;
            generations += sep + std::to_string(c.generation);
        }
        tenants += "}";
        payments += "}";
        generations += "}";
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
        return held_from(
            tx.exec_prepared(k_check, worker, arrays.tenants, arrays.payments, arrays.generations));
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
                                          arrays.tenants, arrays.payments, arrays.generations));
    });
}

bool settle_attempt(Db& db, const ClaimedPayment& claim, const AttemptResult& result,
                    const Settlement& settlement) {
    require_transition(PaymentState::processing, settlement.to);
    if ((settlement.to == PaymentState::retry_scheduled) != settlement.retry_in.has_value()) {
        throw std::logic_error(
            "settle_attempt: retry_in goes with retry_scheduled, and only with it");
    }
    if ((settlement.to == PaymentState::needs_review) != settlement.review_code.has_value()) {
        throw std::logic_error(
            "settle_attempt: review_code goes with needs_review, and only with it");
    }
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_settle, k_settle_sql);
        pqxx::nontransaction tx(impl.connection());
        const std::string http = result.http_status ? std::to_string(*result.http_status) : "";
        const std::string retry =
            settlement.retry_in ? std::to_string(settlement.retry_in->count()) : "";
        const pqxx::row r = tx.exec_prepared1(
            k_settle, claim.tenant_id, claim.payment_id, claim.generation,
            std::string(to_string(settlement.to)), settlement.retry_in ? retry.c_str() : nullptr,
            or_null(result.provider_reference), or_null(settlement.reason),
            or_null(settlement.review_code), claim.attempt_no, result.outcome,
            result.http_status ? http.c_str() : nullptr, result.error_class, result.detail);
        return r[0].as<long long>() == 1;
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
