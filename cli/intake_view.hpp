#pragma once
// What `payments create` and `refunds create` print of an intake's answer, and its exit code.

#include "core/secret.hpp"
#include "services/intake.hpp"

namespace payrecon::cli {

// Prints the answer -- "202 Accepted", Location and the body; with `json` {status, replayed,
// location, body} -- and the incident, if any, on stderr ("payrecon: intake: ..."). Returns the
// exit code: 0 accepted or replayed, 2 a bad request, 7 refused (401, 403, 404, 409), 5 the
// database unavailable, 1 otherwise -- and 1 when the outcome is in doubt (it may be stored).
int print_intake(const IntakeResponse& response, bool json);

// The principal's API key from PAYRECON_API_KEY (never an argument); UsageError if it is unset.
Secret api_key_from_environment();

} // namespace payrecon::cli
