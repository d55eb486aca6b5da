#pragma once
// Provider webhook events (migration 0012): stored as received, once per the provider's event
// identity, before anything interprets them.

#include "core/webhook.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon::store {

class Db;

struct StoredEvent {
    long long event_id = 0;
    bool inserted = false; // false: a redelivery of an event stored before (counted in deliveries)
    int deliveries = 1;
    std::optional<std::string> payment_id; // ours, when the event names one of our operation IDs
};

// Stores `events` of one verified notification of `provider` (whose raw `body` each keeps), in
// one transaction, linking each to our payment of its operation ID at that provider. Returns one
// StoredEvent per event, in order. Throws DatabaseUnavailable.
std::vector<StoredEvent> store_provider_events(Db& db, const std::string& provider,
                                               const std::vector<WebhookEvent>& events,
                                               std::string_view body);

} // namespace payrecon::store
