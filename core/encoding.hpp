#pragma once
// Text encodings shared across layers.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace payrecon {

// RFC 3986 percent-encoding: every byte except unreserved characters (A-Z a-z 0-9 - _ . ~)
// becomes %XX (upper-case hex). Suitable for URI components and form fields.
std::string percent_encode(std::string_view text);

// `text` with control characters written as \n, \t, \r, \xNN (C0 and DEL), \u00NN (C1, in UTF-8)
// and backslashes doubled, so that one value stays one line and cannot move the cursor or recolour
// a terminal. For every stored or received text (names, notes, reasons, provider text) that
// reaches a terminal or a plain-text log.
std::string printable(std::string_view text);

// Why `text` cannot be a name people read in a terminal or a log (a principal's, an operator's),
// or nullopt if it can: it must be 1 to `max_bytes` bytes of valid UTF-8 with no control character
// (C0, DEL, C1: newlines, tabs and escapes included), no invisible or text-direction character
// (U+200B..U+200F, U+202A..U+202E, U+2060..U+2064, U+2066..U+2069, U+FEFF), and no space at
// either end. The reason never echoes the text.
std::optional<std::string> display_name_problem(std::string_view text, std::size_t max_bytes);

// The bytes that hex `text` spells (either case, an even number of digits), or nullopt.
std::optional<std::string> from_hex(std::string_view text);

// RFC 4648 base64 with padding (HTTP basic authentication, HMAC signatures in webhooks).
std::string base64(std::string_view bytes);
// RFC 4648 URL-safe base64 without padding (API keys, secrets in files).
std::string base64url(std::string_view bytes);
// The bytes that standard base64 `text` spells (RFC 4648 alphabet, padded to a multiple of 4, no
// whitespace, zero pad bits), or nullopt.
std::optional<std::string> from_base64(std::string_view text);

// True if `text` is a UUID in its 36-character text form (8-4-4-4-12 hex digits, either case), the
// only form PostgreSQL's uuid input is guaranteed to accept; check before casting text to uuid.
bool is_uuid_text(std::string_view text);

} // namespace payrecon
