#include "store/authorization_store.hpp"

#include "store/payment_event.hpp"
#include "store/pq.hpp"

namespace payrecon::store {
namespace {

// Open: something of it may still be captured (store/operation_store's capture guard, less the
// expiry it is about to test).
constexpr const char* k_open = R"sql(
       p.capture_method = 'manual' AND p.state = 'succeeded'
   AND p.authorization_expired_at IS NULL AND p.voided_at IS NULL AND NOT p.void_held
   AND NOT p.final_capture_held AND p.capture_held_minor < p.amount_minor
   AND p.provider = ANY($1::text[]))sql";

const std::string k_watched_columns =
    "r.tenant_id::text, r.payment_id::text, r.merchant_reference, r.provider, r.amount_minor, "
    "r.capture_held_minor, r.captured_minor, r.currency, " +
    iso_utc("r.authorization_expires_at");

constexpr const char* k_expire = "authorization_watch_expire";
const std::string k_expire_sql = R"sql(
WITH x AS (
    UPDATE payments p
       SET authorization_expired_at = now(), updated_at = now()
     WHERE )sql" + std::string(k_open) +
                                 R"sql( AND p.authorization_expires_at <= now()
 RETURNING p.*
), event AS ()sql" + payment_event_insert("x", {}, "'payment.authorization_expired'") +
                                 R"sql(
), audit AS (
    INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail)
    SELECT r.tenant_id, $2, 'payment.authorization_expired', 'payment', r.payment_id::text,
           jsonb_build_object('expires_at', r.authorization_expires_at,
                              'authorized', r.amount_minor, 'captured', r.captured_minor,
                              'capture_held', r.capture_held_minor,
                              'uncaptured', r.amount_minor - r.capture_held_minor)
      FROM x r
)
SELECT )sql" + k_watched_columns +
                                 R"sql(, true FROM x r
 ORDER BY r.authorization_expires_at, r.payment_id)sql";

// Those expiring within $2 seconds; each told once (authorization_expiry_warned_at).
constexpr const char* k_expiring = "authorization_watch_expiring";
const std::string k_expiring_sql = R"sql(
WITH due AS (
    SELECT p.tenant_id, p.payment_id FROM payments p
     WHERE )sql" + std::string(k_open) +
                                   R"sql( AND p.authorization_expires_at > now()
       AND p.authorization_expires_at <= now() + make_interval(secs => $2::bigint)
), told AS (
    UPDATE payments p SET authorization_expiry_warned_at = now()
      FROM due
     WHERE p.tenant_id = due.tenant_id AND p.payment_id = due.payment_id
       AND p.authorization_expiry_warned_at IS NULL
 RETURNING p.*
), event AS ()sql" + payment_event_insert("told", {}, "'payment.authorization_expiring'") +
                                   R"sql(
)
SELECT )sql" + k_watched_columns +
                                   R"sql(, EXISTS (SELECT 1 FROM told t
                                    WHERE t.tenant_id = r.tenant_id
                                      AND t.payment_id = r.payment_id)
  FROM payments r JOIN due USING (tenant_id, payment_id)
 ORDER BY r.authorization_expires_at, r.payment_id)sql";

WatchedAuthorization watched_of(const pqxx::row& r) {
    WatchedAuthorization w;
    w.tenant_id = r[0].as<std::string>();
    w.payment_id = r[1].as<std::string>();
    w.merchant_reference = r[2].as<std::string>();
    w.provider = r[3].as<std::string>();
    w.amount_minor = r[4].as<long long>();
    w.capture_held_minor = r[5].as<long long>();
    w.captured_minor = r[6].as<long long>();
    w.currency = r[7].as<std::string>();
    w.expires_at = r[8].as<std::string>();
    w.told = r[9].as<bool>();
    return w;
}

} // namespace

AuthorizationWatch watch_authorizations(Db& db, const std::vector<std::string>& providers,
                                        std::chrono::seconds horizon, const std::string& actor) {
    AuthorizationWatch out;
    if (providers.empty()) {
        return out;
    }
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_expire, k_expire_sql);
        impl.prepare(k_expiring, k_expiring_sql);
        pqxx::work tx(impl.connection());
        const std::string names = text_array(providers);
        for (const auto& r : tx.exec_prepared(k_expire, names, actor)) {
            out.expired.push_back(watched_of(r));
        }
        for (const auto& r :
             tx.exec_prepared(k_expiring, names, static_cast<long long>(horizon.count()))) {
            out.expiring.push_back(watched_of(r));
        }
        tx.commit();
        return out;
    });
}

} // namespace payrecon::store
