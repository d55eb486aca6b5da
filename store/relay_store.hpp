#pragma once
// The events-out queue (migration 0016, DESIGN section 15): publishing the outbox (numbering each
// committed event once and fanning it out to the endpoints subscribed), the relay's claims of due
// deliveries, and the record of its attempts. Endpoints are endpoint_store's; what operators see
// and do with deliveries, the pull side, the statistics and retention are delivery_store's.

#include "core/standard_webhooks.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace payrecon::store {

class Db;

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
    // gone: a 410, the endpoint is disabled; dead: the last try failed; refused: the address check
    // refused to connect (then retried, or dead, by the schedule)
    DeliveryOutcome outcome = DeliveryOutcome::retry;
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

} // namespace payrecon::store
