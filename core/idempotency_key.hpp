#pragma once
// The idempotency key grammar: 1 to 255 characters, each visible ASCII (0x21-0x7E). No space,
// no control character, no byte >= 0x80.

#include "core/validation.hpp"

#include <optional>
#include <string_view>

namespace payrecon {

inline constexpr std::size_t k_max_idempotency_key_length = 255;

// Returns nullopt if `key` is valid, else the error (kind invalid, field "Idempotency-Key",
// code "empty" | "too_long" | "invalid_character"; the message gives the offending position, not the byte).
std::optional<ValidationError> validate_idempotency_key(std::string_view key);

} // namespace payrecon
