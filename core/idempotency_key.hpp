#pragma once
// The idempotency key grammar: 1 to 255 characters, each visible ASCII (0x21-0x7E). No space,
// no control character, no byte >= 0x80. And no card number (core/card_number.hpp): the key is
// stored in idempotency_records like any field of the request.

#include "core/validation.hpp"

#include <optional>
#include <string_view>

namespace payrecon {

inline constexpr std::size_t k_max_idempotency_key_length = 255;

// Returns nullopt if `key` is valid, else the error, field "Idempotency-Key": kind invalid with
// code "empty" | "too_long" | "invalid_character" (the message gives the offending position, not
// the byte), or kind card_data with code "card_number" if the key holds a card number (the message
// never echoes the key).
std::optional<ValidationError> validate_idempotency_key(std::string_view key);

} // namespace payrecon
