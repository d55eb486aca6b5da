#pragma once
// Deliveries of events out as operators see them and act on them (DESIGN section 15): the list,
// one delivery with the event as sent and every attempt, when a pending delivery goes out next,
// replays and discards (audited), and retention's purge of delivered events. What happened comes
// back as data; the caller words it (the CLI in its own flags).

#include "store/delivery_store.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon::store {
class Db;
}

namespace payrecon {

// Deliveries as `filter` selects them, newest first. Throws DatabaseUnavailable.
std::vector<store::DeliveryRow> list_deliveries(store::Db& db, const store::DeliveryFilter& filter);

// When a delivery goes out next, as its row says: never a time already past that nothing will
// act on.
enum class NextTry {
    not_pending,       // delivered, dead or discarded: it does not go out again unless replayed
    in_flight,         // a relay holds it now
    endpoint_disabled, // once its endpoint is enabled
    waits_behind,      // after the earlier pending delivery of its payment, `waits_behind`
    due,               // now: next_attempt_at has come
    scheduled,         // at next_attempt_at
};
NextTry next_try(const store::DeliveryRow& d);

struct DeliveryRecord {
    store::DeliveryRow delivery;
    std::vector<store::DeliveryAttemptRow> attempts; // oldest first
    std::string body;                                // the event as the relay sends it
};

// One delivery with its attempts and body; nullopt if no delivery has the ID. Throws
// DatabaseUnavailable.
std::optional<DeliveryRecord> delivery_record(store::Db& db, long long delivery_id);

// The note a replay or a discard is audited with: `typed` trimmed, or nullopt if that is empty or
// longer than k_max_note_length (core/resolution_policy; the caller says so in its own words).
std::optional<std::string> delivery_note(std::string_view typed);

// Makes a delivered, dead or discarded delivery due again now, with the same event ID and body
// and a new schedule; audited with `note`. `in_flight`: it is pending already. Throws
// DatabaseUnavailable.
store::ReplayStatus replay_delivery(store::Db& db, long long delivery_id, const std::string& actor,
                                    const std::string& note);

// Every event of the endpoint's created at or after `since_unix` that its patterns match is due
// again now, those published while it was disabled included; audited once with `note`. Returns
// how many deliveries were made due; nullopt if there is no such endpoint. Throws
// DatabaseUnavailable.
std::optional<long long> replay_since(store::Db& db, const std::string& endpoint_id,
                                      long long since_unix, const std::string& actor,
                                      const std::string& note);

// Gives up on a dead delivery (its receiver will never take it): not sent, no longer counted
// dead; audited with `note`. Throws DatabaseUnavailable.
store::DiscardStatus discard_delivery(store::Db& db, long long delivery_id,
                                      const std::string& actor, const std::string& note);

// How long a purge keeps delivered events: `requested`, or PAYRECON_EVENT_RETENTION (default 30d;
// ConfigError if it is not a duration of 24h or more) when none is. nullopt: `requested` is
// shorter than k_minimum_event_retention (core/settings) -- a replay or a consumer that pulls may
// still need a day's events.
std::optional<std::chrono::seconds>
purge_retention(const std::optional<std::chrono::seconds>& requested);

// Deletes the delivered events older than `retention` (purge_retention()), with their deliveries
// and attempts, audited; `dry_run` counts them and deletes nothing. An event with a pending or
// dead delivery stays. Throws DatabaseUnavailable.
store::EventPurgeResult purge_delivered_events(store::Db& db, std::chrono::seconds retention,
                                               bool dry_run, const std::string& actor);

} // namespace payrecon
