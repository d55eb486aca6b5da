#pragma once
// Events out (migration 0016, DESIGN section 15): webhook endpoints and their sealed signing
// secrets, publishing the outbox (numbering each committed event once and fanning it out to the
// endpoints subscribed), the relay's claims of due deliveries and the record of its attempts, the
// operators' view and replays, and the pull side (GET /v1/events).

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace payrecon::store {

class Db;

struct EndpointRow {
    std::string tenant_id;
    std::string tenant_name;
    std::string endpoint_id;
    std::string url;
    std::vector<std::string> event_types;
    std::optional<std::string> description;
    std::string state; // enabled, disabled
    std::optional<std::string> disabled_at;
    std::optional<std::string> disabled_reason;
    std::string created_at;
    std::string created_by;
    int signing_secrets = 0; // how many sign now (2 during a rotation's overlap)
    long long pending = 0;
    long long dead = 0;
    std::optional<std::string> oldest_due_at; // the oldest pending delivery that is due
};

// The AAD an endpoint's secret number `secret_no` is sealed with (core/sealed).
std::string endpoint_secret_aad(const std::string& tenant_id, const std::string& endpoint_id,
                                int secret_no);

// Seals a secret for (tenant, endpoint, secret number): the caller's SealingKeys.
using SealFunction = std::function<std::string(const std::string& tenant_id,
                                               const std::string& endpoint_id, int secret_no)>;

// Adds an endpoint of `tenant_id` with ID `endpoint_id` (time-ordered, made by the caller), its
// first signing secret (sealed by `seal`), and an audit row by `actor`, in one transaction.
EndpointRow add_endpoint(Db& db, const std::string& tenant_id, const std::string& endpoint_id,
                         const std::string& url, const std::vector<std::string>& event_types,
                         const std::optional<std::string>& description, const std::string& actor,
                         const SealFunction& seal);

// Endpoints, of one tenant or all, oldest first.
std::vector<EndpointRow> list_endpoints(Db& db, const std::optional<std::string>& tenant_id);
std::optional<EndpointRow> find_endpoint(Db& db, const std::string& endpoint_id);

enum class EndpointChange { changed, unchanged, not_found };
// Disables (or enables) an endpoint, audited with `reason`. Enabling makes what waited for it due
// at once, and never sends what was published while it was disabled: `replay_since` does, when
// asked.
EndpointChange set_endpoint_enabled(Db& db, const std::string& endpoint_id, bool enabled,
                                    const std::string& actor, const std::string& reason);

// A new signing secret for the endpoint (the next number, sealed by `seal`); every secret that
// signs now retires after `overlap` (they sign beside the new one until then). Audited. Returns
// the new secret's number, or nullopt if there is no such endpoint.
std::optional<int> rotate_endpoint_secret(Db& db, const std::string& endpoint_id,
                                          std::chrono::seconds overlap, const std::string& actor,
                                          const SealFunction& seal);

// Re-seals every endpoint signing secret that still signs: `reseal` gets (tenant, endpoint,
// secret number, sealed bytes) and returns them sealed under the current key, or nullopt if they
// do not open with the caller's keys. In one transaction, audited once (endpoint.secrets_resealed
// under the deployment tenant). Returns {re-sealed, (endpoint ID, secret number) that did not
// open}.
using ResealFunction = std::function<std::optional<std::string>(
    const std::string& tenant_id, const std::string& endpoint_id, int secret_no,
    const std::string& sealed)>;
struct ResealResult {
    long long resealed = 0;
    std::vector<std::pair<std::string, int>> unopened;
};
ResealResult reseal_endpoint_secrets(Db& db, const std::string& actor,
                                     const ResealFunction& reseal);

// Publishes up to `limit` committed, unpublished outbox events in seq order: numbers each
// (publish_seq, the pull cursor) and adds a pending delivery for every enabled endpoint of its
// tenant whose patterns match its type. Only one publisher runs at a time (a transaction-scoped
// advisory lock): nullopt when another publisher holds it now. Returns {events, deliveries}.
std::optional<std::pair<long long, long long>> publish_events(Db& db, int limit);

// Is there anything a relay could send now or soon: an unpublished event, or a due pending
// delivery of an enabled endpoint that heads its payment (leased or not)? `relay --once` runs
// until there is not.
bool deliveries_remaining(Db& db);

struct ClaimedDelivery {
    long long delivery_id = 0;
    long long generation = 0; // the lease's generation: fences the attempt's record
    std::string event_id;
    std::string event_type;
    std::string aggregate_id;
    long long publish_seq = 0;
    int attempts = 0; // recorded before this claim
    int tries = 0;    // of the current schedule (a replay starts a new one)
    std::string body; // the event as sent: the same bytes on every attempt
};

struct DeliveryBatch {
    std::string tenant_id;
    std::string endpoint_id;
    std::string url;
    // The endpoint's signing secrets as sealed (secret number, sealed bytes), newest first.
    std::vector<std::pair<int, std::string>> sealed_secrets;
    std::vector<ClaimedDelivery> deliveries; // in publish order; one per payment at most
    int slot = 0;                            // the endpoint slot held (release_endpoint_slot)
};

// Claims, for `owner`, up to `limit` due deliveries of one enabled endpoint, leased for `lease`:
// the endpoint is the first (in an order that rotates) that has due deliveries and a free slot of
// its `per_endpoint` (a session advisory lock this connection holds until release_endpoint_slot,
// or until it closes: a relay that dies frees it). Only the earliest pending delivery of each
// payment is due: a later event of a payment waits for the earlier one. nullopt: nothing due.
std::optional<DeliveryBatch> claim_deliveries(Db& db, const std::string& owner, int limit,
                                              std::chrono::milliseconds lease, int per_endpoint);
void release_endpoint_slot(Db& db, const DeliveryBatch& batch);

// One attempt as the relay saw it, and what it means for its delivery.
struct DeliveryAttemptRecord {
    long long delivery_id = 0;
    long long generation = 0;
    long long started_unix_ms = 0;
    int latency_ms = 0;
    std::optional<int> http_status;
    // delivered, retry, gone (410: the endpoint is disabled), dead (the last try failed), refused
    // (the address check refused to connect; then retried or dead by the schedule)
    std::string outcome;
    std::string response_excerpt; // the start of the answer's body
    std::string error;
    // retry / gone / refused: when the next try is due (unix ms); dead for the last try
    long long next_attempt_unix_ms = 0;
    bool dead = false;
};

// Records `attempts` of `batch` by `owner`, in one transaction: each attempt's row (numbered per
// delivery), and -- where `owner` still holds the delivery at its generation -- its new state:
// delivered (a 2xx marks it delivered even for a relay that lost the lease: it was), due again at
// the next try, or dead; a `gone` disables the endpoint (audited). `release` are deliveries not
// attempted: their lease ends and they are due at once. `renew` are still to be sent: their lease
// is extended by `lease` where `owner` still holds them.
struct RecordedAttempts {
    int changed = 0;                // attempts that changed their delivery
    std::vector<long long> renewed; // of `renew`, the deliveries `owner` still holds
};
RecordedAttempts record_attempts(Db& db, const DeliveryBatch& batch, const std::string& owner,
                                 const std::vector<DeliveryAttemptRecord>& attempts,
                                 const std::vector<ClaimedDelivery>& release,
                                 const std::vector<ClaimedDelivery>& renew,
                                 std::chrono::milliseconds lease);

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
