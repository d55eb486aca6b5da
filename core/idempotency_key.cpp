#include "core/idempotency_key.hpp"

#include "core/card_number.hpp"

#include <string>

namespace payrecon {
namespace {

constexpr std::string_view k_field = "Idempotency-Key";

ValidationError key_error(std::string code, std::string message) {
    return ValidationError{ValidationKind::invalid, std::string(k_field), std::move(code),
                           std::move(message)};
}

} // namespace

std::optional<ValidationError> validate_idempotency_key(std::string_view key) {
    if (key.empty()) {
        return key_error("empty",
                         "Idempotency-Key is empty; send 1 to 255 visible ASCII characters");
    }
    if (key.size() > k_max_idempotency_key_length) {
        return key_error("too_long", "Idempotency-Key is longer than 255 characters");
    }
    for (std::size_t i = 0; i < key.size(); ++i) {
        const auto byte = static_cast<unsigned char>(key[i]);
        if (byte < 0x21 || byte > 0x7E) {
            // The position, never the byte: the key is the client's and may be anything.
            return key_error("invalid_character",
                             "Idempotency-Key has a character outside visible ASCII (0x21-0x7E) at "
                             "position " +
                                 std::to_string(i + 1));
        }
    }
    if (contains_card_number(key)) {
        return ValidationError{
            ValidationKind::card_data, std::string(k_field), "card_number",
            "Idempotency-Key holds what looks like a card number. Card numbers are never accepted "
            "or stored: send a key that carries no card data, such as a UUID made for this "
            "payment, and the same key on each retry."};
    }
    return std::nullopt;
}

} // namespace payrecon
