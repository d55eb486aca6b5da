#pragma once
// The request fingerprint: HMAC-SHA256 over the canonical request bytes, keyed by the server's
// fingerprint secret. Rotating the secret keeps previous secrets for verification.

#include "core/secret.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace payrecon {

// HMAC-SHA256(key, message): 32 raw bytes, any key length (a provider's webhook secret; the
// fingerprint's own secrets go through hmac_sha256_hex, which enforces their length).
std::string hmac_sha256(std::string_view key, std::string_view message);

// Lower-case hex of HMAC-SHA256(secret, message): 64 characters. Throws std::invalid_argument if
// the secret is shorter than 32 bytes.
std::string hmac_sha256_hex(const Secret& secret, std::string_view message);

// Lower-case hex SHA-256 of `data`: 64 characters.
std::string sha256_hex(std::string_view data);

// Constant-time equality for equal-length strings (false, quickly, for different lengths).
bool constant_time_equal(std::string_view a, std::string_view b);

// `n` cryptographically random bytes (OpenSSL RAND_bytes). Throws std::runtime_error if the
// random generator fails.
std::string random_bytes(std::size_t n);

// Lower-case hex.
std::string to_hex(std::string_view bytes);

// The secrets the fingerprint is computed with: current() for new rows, and every one (current
// first) when checking a stored fingerprint.
class FingerprintKeys {
public:
    // Throws std::invalid_argument if `current` is shorter than 32 bytes or any previous one is.
    explicit FingerprintKeys(Secret current, std::vector<Secret> previous = {});

    std::string fingerprint(std::string_view canonical) const; // with the current secret
    // True if `stored_hex` is the fingerprint of `canonical` under the current or a previous
    // secret.
    bool matches(std::string_view canonical, std::string_view stored_hex) const;

private:
    Secret m_current;
    std::vector<Secret> m_previous;
};

} // namespace payrecon
