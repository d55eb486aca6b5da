#pragma once
// Time-ordered IDs for rows inserted per request (payments, operation IDs). A random (version 4)
// UUID lands on a random leaf of every B-tree that holds it, so at intake rates each insert dirties
// (and at checkpoints writes out in full) pages all over the index; a time-ordered one lands at the
// right edge, on the few pages that are already hot. PostgreSQL 15 has no version 7 generator;
// migration 0010 adds uuid_generate_v7() for IDs made in SQL (outbox events).

#include <array>
#include <chrono>
#include <optional>
#include <string>

namespace payrecon {

// A UUID in the version 7 layout of RFC 9562: 48 bits of Unix milliseconds, the version (7), 12
// bits of the sub-millisecond fraction (RFC 9562 section 6.2, method 3: IDs made by one process
// sort in the order they were made, to about a quarter of a microsecond), the variant (binary 10),
// and 62 random bits (OpenSSL RAND_bytes). Big-endian, as PostgreSQL compares uuid values.
// Throws std::runtime_error if the random generator fails.
std::array<unsigned char, 16> uuid_v7_bytes(std::chrono::system_clock::time_point at);

// uuid_v7_bytes(at) in canonical text form (lower case, 8-4-4-4-12): sorts as text in the order
// PostgreSQL sorts the uuid.
std::string uuid_v7(std::chrono::system_clock::time_point at = std::chrono::system_clock::now());

// The Unix milliseconds a version 7 UUID in canonical lower-case text form carries; nullopt if `id`
// is not one (another version or variant, upper case, not a UUID).
std::optional<long long> uuid_v7_unix_ms(const std::string& id);

} // namespace payrecon
