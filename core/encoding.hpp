#pragma once
// Text encodings shared across layers.

#include <string>
#include <string_view>

namespace payrecon {

// RFC 3986 percent-encoding: every byte except unreserved characters (A-Z a-z 0-9 - _ . ~)
// becomes %XX (upper-case hex). Suitable for URI components and form fields.
std::string percent_encode(std::string_view text);

// True if `text` is a UUID in its 36-character text form (8-4-4-4-12 hex digits, either case), the
// only form PostgreSQL's uuid input is guaranteed to accept; check before casting text to uuid.
bool is_uuid_text(std::string_view text);

} // namespace payrecon
