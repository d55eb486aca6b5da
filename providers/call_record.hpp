#pragma once
// What every adapter records of a transport call, shared so that attempt records and rate-limit
// handling read the same for every provider.

#include "core/carry_limits.hpp"
#include "net/transport.hpp"
#include "providers/provider.hpp"

#include <chrono>
#include <optional>

namespace payrecon::providers {

// The transport's observation as an attempt record: status, duration, an error class
// ("not_sent:curl_7", "unknown:curl_28", "response_too_large", "not_sent:token_unavailable") and a
// redacted excerpt.
CallRecord call_record_of(const net::HttpResult& result);

// How long a server asked us to wait: its Retry-After header (any case; delay-seconds, or an
// HTTP-date: the time until then, 0 if past; 1 s if unreadable), else 1 s for a 429, else nullopt.
std::optional<std::chrono::seconds> retry_after_of(const net::HttpResult& result);

// The result of a payment an adapter will not send because the provider cannot carry all of it
// (carry_problem): nothing was sent, and sending again cannot help, so declined -- loudly, with
// error class "not_carried" and the problem as the detail -- rather than sent with parts left out.
SubmitResult not_carried(const CarryProblem& problem);

} // namespace payrecon::providers
