#include "services/retention.hpp"

#include "core/settings.hpp"

namespace payrecon {

IdempotencyRetentionFloor idempotency_retention_floor() {
    IdempotencyRetentionFloor f;
    f.minimum = minimum_idempotency_retention();
    f.default_minimum = k_default_minimum_idempotency_retention;
    f.lowered = f.minimum < f.default_minimum;
    return f;
}

std::optional<std::string> idempotency_retention_problem(std::chrono::seconds retention) {
    const auto minimum = minimum_idempotency_retention();
    if (retention < minimum) {
        return "is shorter than the minimum of " + std::to_string(minimum.count() / 3600) + "h";
    }
    return std::nullopt;
}

store::PurgeResult purge_idempotency_records(store::Db& db,
                                             std::optional<std::chrono::seconds> retention,
                                             bool dry_run, const std::string& actor) {
    const IdempotencyRetentionFloor floor = idempotency_retention_floor();
    store::PurgeAudit audit;
    audit.actor = actor;
    audit.minimum_retention = floor.minimum;
    audit.default_minimum_retention = floor.default_minimum;
    return store::purge_idempotency_records(db, retention, dry_run, audit);
}

std::optional<std::string> provider_event_retention_problem(std::chrono::seconds retention) {
    if (retention < k_minimum_provider_event_retention) {
        return "is shorter than 31d";
    }
    return std::nullopt;
}

store::ProviderEventPurgeResult purge_provider_events(store::Db& db, std::chrono::seconds retention,
                                                      bool dry_run, const std::string& actor) {
    return store::purge_provider_events(db, retention, dry_run, actor);
}

} // namespace payrecon
