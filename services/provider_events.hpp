#pragma once
// The providers' webhook events as operators see them (`payrecon events`): listed and shown as
// stored, and a contradiction -- an event that disagrees with a payment that settled without it --
// acknowledged with a note, audited; the payment keeps its state. (Receiving them is
// services/webhooks'; their retention services/retention's.)

#include "store/webhook_store.hpp"

#include <optional>
#include <string>

namespace payrecon {

namespace store {
class Db;
}

// The newest events `filter` selects, with how many match in all. Throws DatabaseUnavailable.
store::ProviderEventList provider_events(store::Db& db, const store::ProviderEventFilter& filter);

// The event `event_id`; nullopt if there is none.
std::optional<store::ProviderEventRow> provider_event(store::Db& db, long long event_id);

// Records that `actor` looked at the contradicting event `event_id` and what was done (`note`,
// already checked by core's note rule), with an audit row; or why not (not found, contradicting
// nothing, acknowledged already), writing nothing.
store::AcknowledgeResult acknowledge_contradiction(store::Db& db, long long event_id,
                                                   const std::string& actor,
                                                   const std::string& note);

} // namespace payrecon
