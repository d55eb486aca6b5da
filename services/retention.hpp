#pragma once
// What payrecon keeps and for how long: idempotency records (`payrecon purge`) and the providers'
// webhook events (`payrecon events purge`). Each retention has a floor below which a purge would
// forget what a client or a provider may still send again; a retention under it is refused before
// anything is read. (Delivered events out are services/deliveries'.)

#include "store/intake_store.hpp"
#include "store/webhook_store.hpp"

#include <chrono>
#include <optional>
#include <string>

namespace payrecon {

namespace store {
class Db;
}

// The floor of the idempotency retention in force (PAYRECON_MIN_IDEMPOTENCY_RETENTION), and
// whether the setting lowered it under the default -- which each purge records in its audit row.
struct IdempotencyRetentionFloor {
    std::chrono::seconds minimum{0};
    std::chrono::seconds default_minimum{0};
    bool lowered = false;
};
IdempotencyRetentionFloor idempotency_retention_floor();

// Why `retention` cannot purge idempotency records (shorter than the floor: a key must be
// remembered longer than any client retries it), in words that name no flag; nullopt if it can.
std::optional<std::string> idempotency_retention_problem(std::chrono::seconds retention);

// Deletes the idempotency records past their own expiry (no `retention`) or created longer ago
// than `retention`, never one whose payment is not terminal; audited as `actor` with the floor.
// `retention` must have passed idempotency_retention_problem().
store::PurgeResult purge_idempotency_records(store::Db& db,
                                             std::optional<std::chrono::seconds> retention,
                                             bool dry_run, const std::string& actor);

// Why `retention` cannot purge provider events (shorter than 31 days: providers redeliver an
// event for up to 30, and a purged event that comes again is stored as new); nullopt if it can.
std::optional<std::string> provider_event_retention_problem(std::chrono::seconds retention);

// Deletes the provider events last received longer ago than `retention` that are nobody's
// evidence any more (store::purge_provider_events says which); audited as `actor`.
store::ProviderEventPurgeResult purge_provider_events(store::Db& db, std::chrono::seconds retention,
                                                      bool dry_run, const std::string& actor);

} // namespace payrecon
