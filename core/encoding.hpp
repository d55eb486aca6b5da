#pragma once
// Text encodings shared across layers.

#include <string>
#include <string_view>

namespace payrecon {

// RFC 3986 percent-encoding: every byte except unreserved characters (A-Z a-z 0-9 - _ . ~)
// becomes %XX (upper-case hex). Suitable for URI components and form fields.
std::string percent_encode(std::string_view text);

} // namespace payrecon
