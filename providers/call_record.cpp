#include "providers/call_record.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <string>
#include <string_view>

namespace payrecon::providers {

CallRecord call_record_of(const net::HttpResult& r) {
    CallRecord c;
    c.http_status = r.http_status;
    c.duration = r.total_time;
    if (r.deadline_passed) {
        c.error_class = "not_sent:deadline_passed";
        c.reason = "the claim's lease ran out before the request was sent";
    } else if (r.token_unavailable) {
        c.error_class = "not_sent:token_unavailable";
        c.reason = "no OAuth2 access token could be had";
    } else if (r.cls == net::SendClass::not_sent) {
        c.error_class = "not_sent:curl_" + std::to_string(r.curl_code);
        c.reason = r.address_refused  ? "every address of the host was refused"
                   : r.curl_code == 0 ? "refused before sending"
                                      : net::describe_curl_code(r.curl_code);
    } else if (r.cls == net::SendClass::unknown) {
        c.error_class =
            r.truncated ? "response_too_large" : "unknown:curl_" + std::to_string(r.curl_code);
        c.reason = r.truncated                              ? "the response was larger than allowed"
                   : r.curl_code == 0 && r.http_status == 0 ? "no response"
                                                            : net::describe_curl_code(r.curl_code);
    }
    c.detail = r.error.substr(0, 300);
    return c;
}

std::optional<std::chrono::seconds> retry_after_of(const net::HttpResult& r) {
    for (const auto& [k, v] : r.headers) {
        if (!std::equal(k.begin(), k.end(), std::string_view("retry-after").begin(),
                        std::string_view("retry-after").end(), [](char a, char b) {
                            return std::tolower(static_cast<unsigned char>(a)) == b;
                        })) {
            continue;
        }
        // delay-seconds, or an HTTP-date (RFC 9110 section 10.2.3): the wait until then.
        std::size_t used = 0;
        try {
            const long seconds = std::stol(v, &used);
            if (used == v.size() && seconds >= 0) {
                return std::chrono::seconds(seconds);
            }
        } catch (const std::exception&) {
        }
        std::tm tm{};
        const char* end = ::strptime(v.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        if (end != nullptr && *end == '\0') {
            const auto at = std::chrono::system_clock::from_time_t(::timegm(&tm));
            const auto wait =
                std::chrono::ceil<std::chrono::seconds>(at - std::chrono::system_clock::now());
            return std::max(wait, std::chrono::seconds(0));
        }
        return std::chrono::seconds(1); // unreadable: a short wait, the schedule's own beyond it
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
