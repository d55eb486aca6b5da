#pragma once
// Store-internal: what endpoint_store, relay_store and delivery_store share -- the event body as
// it is sent, reading optional columns, and an endpoint's tenant. Included only by store/*.cpp.

#include "store/pq.hpp"

#include <optional>
#include <string>

namespace payrecon::store {

// The event as the relay sends it and GET /v1/events returns it, built from the outbox row `o`:
// the same bytes on every attempt (jsonb's text form is canonical: keys sorted, one spacing).
inline const std::string k_event_body =
    "jsonb_build_object('id', o.event_id, 'type', o.event_type, 'timestamp', " +
    iso_utc("o.created_at") + ", 'data', o.payload)::text";

inline std::optional<std::string> opt_text(const pqxx::field& f) {
    return f.is_null() ? std::nullopt : std::optional<std::string>(f.as<std::string>());
}
inline std::optional<int> opt_int(const pqxx::field& f) {
    return f.is_null() ? std::nullopt : std::optional<int>(f.as<int>());
}

// The tenant of an endpoint given by ID alone (operators name it so), or nullopt.
std::optional<std::string> endpoint_tenant(pqxx::transaction_base& tx,
                                           const std::string& endpoint_id);

} // namespace payrecon::store
