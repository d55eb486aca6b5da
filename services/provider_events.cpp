#include "services/provider_events.hpp"

namespace payrecon {

store::ProviderEventList provider_events(store::Db& db, const store::ProviderEventFilter& filter) {
    return store::list_provider_events(db, filter);
}

std::optional<store::ProviderEventRow> provider_event(store::Db& db, long long event_id) {
    return store::find_provider_event(db, event_id);
}

store::AcknowledgeResult acknowledge_contradiction(store::Db& db, long long event_id,
                                                   const std::string& actor,
                                                   const std::string& note) {
    return store::acknowledge_provider_event(db, event_id, actor, note);
}

} // namespace payrecon
