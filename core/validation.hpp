#pragma once
// A rejected input, named precisely enough for the caller to fix it.

#include <string>

namespace payrecon {

enum class ValidationKind {
    malformed, // not parseable at all (bad JSON, duplicate keys, too deep): HTTP 400
    invalid,   // parseable, but a field is wrong: HTTP 422
    card_data, // looks like it carries card data (PAN, CVC): HTTP 422, never stored or logged
    unsupported_version // an API version this server does not speak: HTTP 400
};

struct ValidationError {
    ValidationKind kind = ValidationKind::invalid;
    std::string
        field; // JSON field name ("amount", "metadata.order"), header name, or "" for the body
    std::string code;    // stable machine-readable code: "required", "not_integer", "too_long", ...
    std::string message; // one sentence for a human; never echoes a value that may be card data
};

} // namespace payrecon
