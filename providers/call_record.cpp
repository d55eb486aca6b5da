#include "providers/call_record.hpp"

#include <string>

namespace payrecon::providers {

CallRecord call_record_of(const http::HttpResult& r) {
    CallRecord c;
    c.http_status = r.http_status;
    c.duration = r.total_time;
    if (r.deadline_passed) {
        c.error_class = "not_sent:deadline_passed";
    } else if (r.token_unavailable) {
        c.error_class = "not_sent:token_unavailable";
    } else if (r.cls == http::SendClass::not_sent) {
        c.error_class = "not_sent:curl_" + std::to_string(r.curl_code);
    } else if (r.cls == http::SendClass::unknown) {
        c.error_class =
            r.truncated ? "response_too_large" : "unknown:curl_" + std::to_string(r.curl_code);
    }
    c.detail = r.error.substr(0, 300);
    return c;
}

std::optional<std::chrono::seconds> retry_after_of(const http::HttpResult& r) {
    for (const auto& [k, v] : r.headers) {
        if (k == "retry-after" || k == "Retry-After") {
            try {
                return std::chrono::seconds(std::stol(v));
            } catch (const std::exception&) {
                return std::chrono::seconds(1);
            }
        }
    }
    return r.http_status == 429 ? std::optional(std::chrono::seconds(1)) : std::nullopt;
}

SubmitResult not_carried(const CarryProblem& problem) {
    SubmitResult r;
    r.outcome = Outcome::declined;
    r.call.error_class = "not_carried";
    r.call.detail = problem.field + ": " + problem.message + " Nothing was sent.";
    return r;
}

} // namespace payrecon::providers
