#include "store/webhook_store.hpp"

#include "core/fingerprint.hpp"
#include "store/pq.hpp"

namespace payrecon::store {
namespace {

constexpr const char* k_store_event = "webhook_store_event";
constexpr const char* k_store_event_sql = R"sql(
INSERT INTO provider_events (provider, event_key, event_type, outcome, operation_id,
                             provider_reference, amount_minor, currency, occurred_at, body,
                             tenant_id, payment_id)
SELECT $1, $2, $3, $4, $5, $6, $7::bigint, $8, to_timestamp($9::double precision),
       decode($10, 'hex'), p.tenant_id, p.payment_id
  FROM (SELECT 1) AS one
  LEFT JOIN payments p ON p.operation_id = $5 AND p.provider = $1
ON CONFLICT (provider, event_key) DO UPDATE
   SET deliveries = provider_events.deliveries + 1, last_received_at = now()
RETURNING event_id, (xmax = 0) AS inserted, deliveries, payment_id::text)sql";

} // namespace

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
                or_null(e.currency), e.occurred_at ? at.c_str() : nullptr, body_hex);
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

} // namespace payrecon::store
