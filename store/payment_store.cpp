#include "store/payment_store.hpp"

#include "store/migrations.hpp"
#include "store/pq.hpp"

namespace payrecon::store {

// A payment's operations of every kind, oldest first, in `tx`'s snapshot
// (store/operation_store.cpp).
std::vector<OperationRow> operations_of_payment(pqxx::transaction_base& tx,
                                                const std::string& tenant_id,
                                                const std::string& payment_id);

namespace {

#define PAYRECON_ISO(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

constexpr const char* k_find_payment = "find_payment";
constexpr const char* k_find_payment_sql =
    "SELECT payment_id::text, state, amount_minor, currency, merchant_reference, "
    "provider, " PAYRECON_ISO("created_at") ", " PAYRECON_ISO(
        "updated_at") ", provider_reference, charged_amount_minor, refund_held_minor, "
                      "capture_method = 'manual', capture_held_minor, captured_minor, "
                      "final_capture_held, void_held, " PAYRECON_ISO("voided_at") ", " PAYRECON_ISO("authorization_expires_at") ", " PAYRECON_ISO(
                          "authorization_expired_at") ", "
                                                      "authorization_expired_at IS NOT NULL OR "
                                                      "authorization_expires_at <= now() "
                                                      "FROM payments WHERE tenant_id = $1::uuid "
                                                      "AND payment_id = $2::uuid";

constexpr const char* k_find_attempts = "find_attempts";
constexpr const char* k_find_attempts_sql =
    "SELECT attempt_no, outcome, http_status, " PAYRECON_ISO("started_at") ", " PAYRECON_ISO(
        "finished_at") " FROM payment_attempts "
                       "WHERE tenant_id = $1::uuid AND payment_id = $2::uuid AND operation_id = "
                       "(SELECT operation_id FROM payments WHERE tenant_id = $1::uuid AND "
                       "payment_id = $2::uuid) ORDER BY attempt_no";

// On payments_tenant_id_merchant_reference_key.
constexpr const char* k_payment_by_reference = "payment_by_reference";
constexpr const char* k_payment_by_reference_sql =
    "SELECT payment_id::text FROM payments WHERE tenant_id = $1::uuid AND merchant_reference = $2";

#undef PAYRECON_ISO

} // namespace

std::optional<PaymentDetail> find_payment(Db& db, const std::string& tenant_id,
                                          const std::string& payment_id) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<PaymentDetail> {
        impl.prepare(k_find_payment, k_find_payment_sql);
        impl.prepare(k_find_attempts, k_find_attempts_sql);
        // One snapshot for the payment and its attempts.
        pqxx::read_transaction tx(impl.connection());
        const pqxx::result r = tx.exec_prepared(k_find_payment, tenant_id, payment_id);
        if (r.empty()) {
            return std::nullopt;
        }
        const pqxx::row row = r[0];
        PaymentDetail p;
        p.payment_id = row[0].as<std::string>();
        p.state = row[1].as<std::string>();
        p.amount_minor = row[2].as<long long>();
        p.currency = row[3].as<std::string>();
        p.merchant_reference = row[4].as<std::string>();
        p.provider = row[5].as<std::string>();
        p.created_at = row[6].as<std::string>();
        p.updated_at = row[7].as<std::string>();
        if (!row[8].is_null()) {
            p.provider_reference = row[8].as<std::string>();
        }
        if (!row[9].is_null()) {
            p.charged_amount_minor = row[9].as<long long>();
        }
        p.refund_held_minor = row[10].as<long long>();
        p.manual_capture = row[11].as<bool>();
        p.capture_held_minor = row[12].as<long long>();
        p.captured_minor = row[13].as<long long>();
        p.final_capture_held = row[14].as<bool>();
        p.void_held = row[15].as<bool>();
        auto opt = [&](int i) {
            return row[i].is_null() ? std::nullopt
                                    : std::optional<std::string>(row[i].as<std::string>());
        };
        p.voided_at = opt(16);
        p.authorization_expires_at = opt(17);
        p.authorization_expired_at = opt(18);
        p.authorization_lapsed = !row[19].is_null() && row[19].as<bool>();
        for (auto& o : operations_of_payment(tx, tenant_id, payment_id)) {
            switch (o.kind) {
            case OperationKind::refund:
                p.refunds.push_back(std::move(o));
                break;
            case OperationKind::capture:
                p.captures.push_back(std::move(o));
                break;
            case OperationKind::void_authorization:
                p.voids.push_back(std::move(o));
                break;
            case OperationKind::charge:
                break;
            }
        }
        for (const auto& a : tx.exec_prepared(k_find_attempts, tenant_id, payment_id)) {
            AttemptSummary s;
            s.attempt_no = a[0].as<int>();
            s.outcome = a[1].as<std::string>();
            if (!a[2].is_null()) {
                s.http_status = a[2].as<int>();
            }
            s.started_at = a[3].as<std::string>();
            if (!a[4].is_null()) {
                s.finished_at = a[4].as<std::string>();
            }
            p.attempts.push_back(std::move(s));
        }
        return p;
    });
}

std::optional<std::string> payment_id_by_reference(Db& db, const std::string& tenant_id,
                                                   const std::string& merchant_reference) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<std::string> {
        impl.prepare(k_payment_by_reference, k_payment_by_reference_sql);
        pqxx::read_transaction tx(impl.connection());
        const pqxx::result r =
            tx.exec_prepared(k_payment_by_reference, tenant_id, merchant_reference);
        if (r.empty()) {
            return std::nullopt;
        }
        return r[0][0].as<std::string>();
    });
}

bool database_ready(Db& db) {
    try {
        return schema_version(db) == latest_known_version();
    } catch (const DatabaseUnavailable&) {
        throw;
    } catch (const std::exception&) {
        return false;
    }
}

} // namespace payrecon::store
