#pragma once
// Deliveries as operators see them and act on them (migration 0016, DESIGN section 15): the list,
// one delivery with its attempts and body, replays and discards (audited); the pull side (GET
// /v1/events); the per-endpoint statistics for /metrics and nightly; and retention's purge of
// delivered events.

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace payrecon::store {

class Db;

// Operators: deliveries and their attempts.
struct DeliveryRow {
    long long delivery_id = 0;
    std::string tenant_id;
    std::string endpoint_id;
    std::string url;
    std::string event_id;
    std::string event_type;
    std::string payment_id;
    std::string state;
    int attempts = 0;
    int tries = 0;
    std::string next_attempt_at;
    std::optional<int> last_status;
    std::optional<std::string> last_error;
    std::string created_at;
    std::optional<std::string> delivered_at;
    std::optional<std::string> dead_at;
    bool leased = false;
    // A pending delivery: whether next_attempt_at has come; the pending delivery of the same
    // payment to the same endpoint it waits behind (events of a payment go out in order, so it is
    // not tried before that one is delivered or dead, whatever next_attempt_at says); and whether
    // its endpoint is disabled (nothing goes out until it is enabled).
    bool due = false;
    std::optional<long long> waits_behind;
    bool endpoint_disabled = false;
};
struct DeliveryAttemptRow {
    int attempt_no = 0;
    std::string started_at;
    int latency_ms = 0;
    std::optional<int> http_status;
    std::string outcome;
    std::optional<std::string> response_excerpt;
    std::optional<std::string> error;
    std::string relay;
};

struct DeliveryFilter {
    std::optional<std::string> tenant_id;
    std::optional<std::string> endpoint_id;
    std::optional<std::string> state; // pending, delivered, dead
    std::optional<std::string> event_id;
    int limit = 100;
};
std::vector<DeliveryRow> list_deliveries(Db& db, const DeliveryFilter& filter);
std::optional<DeliveryRow> find_delivery(Db& db, long long delivery_id);
std::vector<DeliveryAttemptRow> delivery_attempts(Db& db, const std::string& tenant_id,
                                                  long long delivery_id);
// The event body a delivery sends (as the relay builds it).
std::optional<std::string> delivery_body(Db& db, long long delivery_id);

enum class ReplayStatus { replayed, not_found, in_flight };
// Makes a delivered, dead or discarded delivery pending again with a new schedule, due now (the
// same event ID and body), audited. `in_flight`: it is pending already (the relay will try it).
ReplayStatus replay_delivery(Db& db, long long delivery_id, const std::string& actor,
                             const std::string& note);
enum class DiscardStatus { discarded, not_found, not_dead };
// Marks a dead delivery discarded: never to be sent (unless replayed), no longer counted dead by
// nightly and /metrics, purgeable by retention. Audited with `note`.
DiscardStatus discard_delivery(Db& db, long long delivery_id, const std::string& actor,
                               const std::string& note);
// Every event of the endpoint's tenant created at or after `since_unix` that its patterns
// match: a delivery that was delivered or dead is made pending again and due now (as is one
// waiting for its next try, unless it is in flight), a missing one (published while the endpoint
// was disabled, or before it existed) is added. Audited once. Returns how many
// deliveries were made pending; nullopt if there is no such endpoint.
std::optional<long long> replay_since(Db& db, const std::string& endpoint_id, long long since_unix,
                                      const std::string& actor, const std::string& note);

// Pull: a tenant's published events after cursor `after` (a publish_seq; 0 = the start), at most
// `limit`, in publish order: (publish_seq, the event body as the relay sends it).
std::vector<std::pair<long long, std::string>> events_after(Db& db, const std::string& tenant_id,
                                                            long long after, int limit);

// The highest publish_seq of the tenant's that retention purged (0: none): a cursor below it
// has missed events.
long long purged_through(Db& db, const std::string& tenant_id);

// For /metrics and nightly, per endpoint.
struct EndpointDeliveryStats {
    std::string tenant_id;
    std::string endpoint_id;
    std::string state;
    long long pending = 0;
    long long dead = 0;
    double lag_seconds = 0;           // age of the oldest due pending delivery; 0 when none
    long long attempts_delivered = 0; // attempts recorded since the endpoint was added
    long long attempts_failed = 0;
};
std::vector<EndpointDeliveryStats> endpoint_delivery_stats(Db& db);
// Published events not yet fanned out count as lag too: the oldest unpublished event's age.
double unpublished_lag_seconds(Db& db);

// Retention: events older than `retention` that are published and whose every delivery is
// delivered go, with their deliveries and attempts; an event with a pending or dead delivery is
// never purged. In batches of `batch_size` events, each one transaction with an audit row per
// tenant it purged from (events.purge); then one row for the run under the deployment tenant
// (events.purge_run, written even when nothing was purged). `dry_run` counts and writes nothing.
struct EventPurgeResult {
    long long events = 0;
    long long deliveries = 0;
    long long attempts = 0;         // 0 for a dry run (not counted)
    long long kept_undelivered = 0; // old enough, but a delivery is pending or dead
    long long tenants = 0;          // tenants whose events were purged
    std::string run_id;             // the audit log's subject_id; empty for a dry run
};
EventPurgeResult purge_delivered_events(Db& db, std::chrono::seconds retention, bool dry_run,
                                        const std::string& actor, int batch_size = 2000);

} // namespace payrecon::store
