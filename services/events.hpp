#pragma once
// GET /v1/events?after=CURSOR&limit=N: a tenant's payment events for consumers that pull (DESIGN
// section 15). The same event IDs and bodies the relay pushes, in publish order: a cursor never
// skips an event that committed late (publish order is assigned after commit), and per payment
// the order is the order of its changes.

#include "store/delivery_store.hpp"

#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

namespace payrecon {

inline constexpr int k_events_default_limit = 100;
inline constexpr int k_events_max_limit = 1000;

// Why there is no page: 400 invalid_query (not after=<cursor from next_cursor> and
// limit=1..1000), or 410 cursor_purged (events after the cursor were purged by retention before
// they were read: `detail` gives the cursor the kept events start after).
struct EventsPageProblem {
    int status = 400;
    std::string type;
    std::string detail;
};

// The page's JSON: {"data":[event...],"next_cursor":"N","has_more":bool}; `next_cursor` is
// the cursor to pass as `after` for the next page (the same as `after` when the page is empty:
// poll again with it). Throws DatabaseUnavailable.
tl::expected<std::string, EventsPageProblem>
events_page(store::Db& db, const std::string& tenant_id, std::string_view query);

// How events out is doing, for /metrics: every endpoint's pending, dead, lag and attempts, and
// the age of the oldest committed event no relay has published yet (0 when none: a relay runs and
// keeps up). Throws DatabaseUnavailable.
struct EventDeliveryHealth {
    std::vector<store::EndpointDeliveryStats> endpoints;
    double publish_lag_seconds = 0;
};
EventDeliveryHealth event_delivery_health(store::Db& db);

} // namespace payrecon
