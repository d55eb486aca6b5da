#pragma once
// Secrets at rest: AES-256-GCM under keys kept outside the database (webhook endpoints' signing
// secrets; the relay needs them back to sign, so a digest cannot do). A sealed value is
// version (1 byte, 1) || nonce (12 random bytes) || ciphertext || tag (16 bytes), and its
// additional data (what it belongs to: tenant and endpoint) is authenticated, so a sealed value
// copied onto another row does not open.

#include "core/secret.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon {

class SealingKeys {
public:
    // `secrets`: the current one first, then earlier ones kept to open what they sealed (each at
    // least 32 bytes; the AES key is SHA-256 of the secret's text). Throws std::invalid_argument
    // if there is none or one is shorter.
    explicit SealingKeys(std::vector<Secret> secrets);

    // `plaintext` sealed under the current key, bound to `aad`. Throws std::runtime_error if
    // OpenSSL fails.
    std::string seal(std::string_view plaintext, std::string_view aad) const;
    // The plaintext, if `sealed` was sealed under one of the keys with this `aad`; nullopt if not
    // (another key file, another row, or altered).
    std::optional<Secret> open(std::string_view sealed, std::string_view aad) const;

private:
    std::vector<Secret> m_keys; // 32-byte AES keys, current first
};

} // namespace payrecon
