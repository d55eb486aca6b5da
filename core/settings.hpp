#pragma once
// Settings read from the environment and from files under $PAYRECON_HOME. Secrets are read from
// files or the environment, never from the command line.

#include "core/fingerprint.hpp"
#include "core/sealed.hpp"

#include <chrono>
#include <filesystem>
#include <string_view>

namespace payrecon {

// "30s", "15m", "36h", "7d" (a whole number and one unit). Throws UsageError otherwise, naming
// `what` (the option or variable it came from).
std::chrono::seconds parse_duration(std::string_view text, std::string_view what);
// As parse_duration, and also "250ms".
std::chrono::milliseconds parse_duration_ms(std::string_view text, std::string_view what);

// A UTC time as unix seconds: "2026-12-01" (midnight UTC) or "2026-12-01T06:30:00Z". Throws
// UsageError otherwise, naming `what`.
long long parse_utc_time(std::string_view text, std::string_view what);
// Midnight UTC that began the day of `unix_seconds`.
long long utc_day_start(long long unix_seconds);

// A duration from environment variable `name`, or `fallback` if it is unset or empty.
std::chrono::seconds duration_from_env(const char* name, std::chrono::seconds fallback);

// The minimum retention without PAYRECON_MIN_IDEMPOTENCY_RETENTION; a lower setting is recorded
// in the audit log by every purge run under it.
inline constexpr std::chrono::seconds k_default_minimum_idempotency_retention{24 * 3600};

// Idempotency records are kept at least this long; shorter retentions are refused.
// PAYRECON_MIN_IDEMPOTENCY_RETENTION, default 24h.
std::chrono::seconds minimum_idempotency_retention();
// PAYRECON_IDEMPOTENCY_RETENTION, default 7d. Throws ConfigError if under the minimum.
std::chrono::seconds idempotency_retention();

// Delivered events (and their deliveries and attempts) are kept at least this long.
inline constexpr std::chrono::seconds k_minimum_event_retention{24 * 3600};
// PAYRECON_EVENT_RETENTION, default 30d: how long delivered events are kept (the relay purges
// older ones; pull consumers must read within it). Throws ConfigError if under 24h.
std::chrono::seconds event_retention();

// Provider webhook events (raw bodies) are kept at least this long after their last delivery: a
// provider redelivers an unacknowledged event for up to 30 days (Adyen), and one purged before its
// last redelivery would be stored again as new -- a contradiction acknowledged long ago back in
// the review queue.
inline constexpr std::chrono::seconds k_minimum_provider_event_retention{31 * 24 * 3600};
// PAYRECON_PROVIDER_EVENT_RETENTION, default 90d: how long provider webhook events are kept after
// their last delivery (`payrecon events purge`). Throws ConfigError if not a duration or under
// the minimum.
std::chrono::seconds provider_event_retention();

// The fingerprint secrets: one per line in `file`, the first the current one, the others previous
// ones kept for verification after a rotation (each at least 32 bytes; '#' lines are comments).
// With `create_if_missing`, a missing file is created (mode 0600) with a new random secret.
// Throws ConfigError if the file is missing (and may not be created), readable by group or others,
// or holds no usable secret.
FingerprintKeys load_fingerprint_keys(const std::filesystem::path& file, bool create_if_missing);

// The endpoint keys that seal webhook endpoints' signing secrets at rest (core/sealed): the same
// file format and rules as the fingerprint secrets (the first line seals, every line opens).
SealingKeys load_sealing_keys(const std::filesystem::path& file, bool create_if_missing);

} // namespace payrecon
