#include "core/fingerprint.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdexcept>

namespace payrecon {
namespace {

constexpr std::size_t k_min_secret_length = 32;

const unsigned char* bytes_of(std::string_view text) {
    return reinterpret_cast<const unsigned char*>(text.data());
}

void require_secret_length(const Secret& secret) {
    if (secret.reveal().size() < k_min_secret_length) {
        // Never the secret itself, not even its length beyond the rule.
        throw std::invalid_argument("fingerprint secret is shorter than 32 bytes");
    }
}

std::string hex_of(const unsigned char* data, std::size_t size) {
    static constexpr char k_digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(size * 2);
    for (std::size_t i = 0; i < size; ++i) {
        out += k_digits[data[i] >> 4];
        out += k_digits[data[i] & 0x0F];
    }
    return out;
}

} // namespace

std::string hmac_sha256(std::string_view key, std::string_view message) {
    if (key.size() > static_cast<std::size_t>(INT_MAX)) {
        throw std::invalid_argument("HMAC key is too long");
    }
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int digest_length = 0;
    if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), bytes_of(message),
             message.size(), digest, &digest_length) == nullptr) {
        throw std::runtime_error("HMAC-SHA256 failed (OpenSSL)");
    }
    return std::string(reinterpret_cast<const char*>(digest), digest_length);
}

std::string hmac_sha256_hex(const Secret& secret, std::string_view message) {
    require_secret_length(secret);
    return to_hex(hmac_sha256(secret.reveal(), message));
}

std::string sha256_hex(std::string_view data) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int digest_length = 0;
    if (EVP_Digest(data.data(), data.size(), digest, &digest_length, EVP_sha256(), nullptr) != 1) {
        throw std::runtime_error("SHA-256 failed (OpenSSL)");
    }
    return hex_of(digest, digest_length);
}

bool constant_time_equal(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) {
        return false;
    }
    return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string random_bytes(std::size_t n) {
    std::string out(n, '\0');
    auto* cursor = reinterpret_cast<unsigned char*>(out.data());
    std::size_t remaining = n;
    while (remaining > 0) {
        const std::size_t chunk = std::min<std::size_t>(remaining, INT_MAX);
        if (RAND_bytes(cursor, static_cast<int>(chunk)) != 1) {
            throw std::runtime_error("the random generator failed (OpenSSL RAND_bytes)");
        }
        cursor += chunk;
        remaining -= chunk;
    }
    return out;
}

std::string to_hex(std::string_view bytes) {
    return hex_of(bytes_of(bytes), bytes.size());
}

FingerprintKeys::FingerprintKeys(Secret current, std::vector<Secret> previous)
    : m_current(std::move(current)), m_previous(std::move(previous)) {
    require_secret_length(m_current);
    for (const Secret& secret : m_previous) {
        require_secret_length(secret);
    }
}

std::string FingerprintKeys::fingerprint(std::string_view canonical) const {
    return hmac_sha256_hex(m_current, canonical);
}

bool FingerprintKeys::matches(std::string_view canonical, std::string_view stored_hex) const {
    if (constant_time_equal(hmac_sha256_hex(m_current, canonical), stored_hex)) {
        return true;
    }
    return std::any_of(m_previous.begin(), m_previous.end(), [&](const Secret& secret) {
        return constant_time_equal(hmac_sha256_hex(secret, canonical), stored_hex);
    });
}

} // namespace payrecon
