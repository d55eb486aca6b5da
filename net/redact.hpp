#pragma once
// Redaction of secrets from text that leaves the transport: error messages, response headers and
// bodies, anything that may reach a log line, an attempt row or an exception.

#include "core/secret.hpp"

#include <string>
#include <vector>

namespace payrecon::net {

inline constexpr const char* k_redacted = "***";

// `text` with every occurrence of every non-empty secret replaced by "***". Longer secrets are
// replaced first, so a secret that contains another one leaves no fragment behind. Only literal
// occurrences are found: a secret that was encoded (base64 in Basic auth, percent-encoding) must be
// passed in its encoded form too. Never throws except std::bad_alloc.
std::string redact(std::string text, const std::vector<Secret>& secrets);

} // namespace payrecon::net
