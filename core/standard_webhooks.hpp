#pragma once
// Events out, the pure part (DESIGN section 15): the Standard Webhooks signature, endpoint signing
// secrets, what one delivery attempt's answer means, and the retry schedule.
//
// Standard Webhooks (standardwebhooks.com): three headers -- `webhook-id` (the event ID, the same
// on every retry: receivers deduplicate on it), `webhook-timestamp` (Unix seconds of this
// attempt) and `webhook-signature`: "v1,<base64 of HMAC-SHA256(key, id + '.' + timestamp + '.' +
// body)>", one per signing secret, separated by spaces (during a rotation both the new and the old
// secret sign). A secret is shown as "whsec_<base64 of its key bytes>"; the HMAC key is the
// decoded bytes.

#include "core/secret.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon {

// The key bytes of a new endpoint secret (and of each rotation).
inline constexpr std::size_t k_endpoint_secret_bytes = 32;

// A new random signing secret, "whsec_" + base64 of k_endpoint_secret_bytes random bytes.
Secret new_endpoint_secret();

// The HMAC key of a "whsec_..." secret (its base64 decoded), or nullopt if it is not one or its
// key is shorter than 24 bytes (Standard Webhooks' minimum).
std::optional<Secret> endpoint_secret_key(const Secret& whsec);

// The `webhook-signature` header value: "v1,<sig>" for each of `keys` (HMAC keys, as
// endpoint_secret_key returns them), in order, separated by one space.
std::string webhook_signature(const std::vector<Secret>& keys, std::string_view id,
                              long long timestamp, std::string_view body);

// Does `header` (a `webhook-signature` value) hold a v1 signature of (id, timestamp, body) under
// `key`? Compares in constant time. For our own tests and for consumers' documentation.
bool webhook_signature_matches(std::string_view header, const Secret& key, std::string_view id,
                               long long timestamp, std::string_view body);

// What one attempt's answer means for its delivery.
enum class AttemptVerdict {
    delivered, // a 2xx
    gone,      // 410: the endpoint asks us to stop; it is disabled
    retry,     // anything else: 429, 5xx, other 4xx, 3xx (redirects are never followed), no answer
};
AttemptVerdict attempt_verdict(int http_status);

// What became of one attempt, as it is recorded (delivery_attempts.outcome): its verdict, or --
// the endpoint not answering -- retry, or refused where the address check would not connect; dead
// where it was the schedule's last try and failed.
enum class DeliveryOutcome {
    delivered,
    retry,
    gone,
    dead,
    refused,
};
DeliveryOutcome delivery_outcome(AttemptVerdict verdict);
// "delivered", "retry", "gone", "dead", "refused".
const char* to_string(DeliveryOutcome outcome);

// When a failed delivery is tried again: before try k (0-based) it waits `delays[k]` after the
// previous one failed; try 0 is immediate. Default, as Svix's: immediately, 5 s, 5 min, 30 min,
// 2 h, 5 h, 10 h, 10 h (about 28 h); after the last try fails the delivery is dead.
struct DeliverySchedule {
    std::vector<std::chrono::milliseconds> delays;

    static DeliverySchedule standard();
    // "0s,5s,5m,30m,2h,5h,10h,10h" (each as settings' parse_duration_ms, "0s" too). Throws
    // UsageError naming `what` for anything else, an empty list, or more than 32 tries.
    static DeliverySchedule parse(std::string_view text, std::string_view what);
    std::string to_string() const;

    // After try number `tries_done` (1-based: 1 after the first) failed: how long until the next,
    // or nullopt if that was the last (the delivery is dead). A Retry-After the endpoint sent makes
    // the wait longer, never shorter, and is honoured up to the schedule's longest delay (at least
    // 1 h): an endpoint cannot park a delivery for longer than the schedule would.
    std::optional<std::chrono::milliseconds>
    next_delay(int tries_done, std::optional<std::chrono::seconds> retry_after = {}) const;
};

// Does `event_type` match `pattern`: the same type, or a prefix ending in '*' ("payment.*", "*")?
bool event_type_matches(std::string_view pattern, std::string_view event_type);
// Why `pattern` is not an event-type pattern ("payment.succeeded", "payment.*", "*"), or nullopt:
// 1-64 characters of [a-z0-9._], with an optional '*' at the end only.
std::optional<std::string> event_pattern_problem(std::string_view pattern);

} // namespace payrecon
