#include "services/deliveries.hpp"

#include "core/resolution_policy.hpp"
#include "core/settings.hpp"

namespace payrecon {

std::vector<store::DeliveryRow> list_deliveries(store::Db& db,
                                                const store::DeliveryFilter& filter) {
    return store::list_deliveries(db, filter);
}

NextTry next_try(const store::DeliveryRow& d) {
    if (d.state != "pending") {
        return NextTry::not_pending;
    }
    if (d.leased) {
        return NextTry::in_flight;
    }
    if (d.endpoint_disabled) {
        return NextTry::endpoint_disabled;
    }
    if (d.waits_behind) {
        return NextTry::waits_behind;
    }
    return d.due ? NextTry::due : NextTry::scheduled;
}

std::optional<DeliveryRecord> delivery_record(store::Db& db, long long delivery_id) {
    auto d = store::find_delivery(db, delivery_id);
    if (!d) {
        return std::nullopt;
    }
    DeliveryRecord out;
    out.attempts = store::delivery_attempts(db, d->tenant_id, delivery_id);
    // Its event may be purged between the two reads: then there is no body to show.
    out.body = store::delivery_body(db, delivery_id).value_or("");
    out.delivery = std::move(*d);
    return out;
}

std::optional<std::string> delivery_note(std::string_view typed) {
    std::string note = trimmed_note(typed);
    if (note.empty() || note.size() > k_max_note_length) {
        return std::nullopt;
    }
    return note;
}

store::ReplayStatus replay_delivery(store::Db& db, long long delivery_id, const std::string& actor,
                                    const std::string& note) {
    return store::replay_delivery(db, delivery_id, actor, note);
}

std::optional<long long> replay_since(store::Db& db, const std::string& endpoint_id,
                                      long long since_unix, const std::string& actor,
                                      const std::string& note) {
    return store::replay_since(db, endpoint_id, since_unix, actor, note);
}

store::DiscardStatus discard_delivery(store::Db& db, long long delivery_id,
                                      const std::string& actor, const std::string& note) {
    return store::discard_delivery(db, delivery_id, actor, note);
}

std::optional<std::chrono::seconds>
purge_retention(const std::optional<std::chrono::seconds>& requested) {
    if (!requested) {
        return event_retention();
    }
    if (*requested < k_minimum_event_retention) {
        return std::nullopt;
    }
    return *requested;
}

store::EventPurgeResult purge_delivered_events(store::Db& db, std::chrono::seconds retention,
                                               bool dry_run, const std::string& actor) {
    return store::purge_delivered_events(db, retention, dry_run, actor);
}

} // namespace payrecon
