// Retry-After as providers and webhook endpoints send it (RFC 9110 section 10.2.3): seconds or an
// HTTP-date, under any spelling of the name.
#include "providers/call_record.hpp"

#include <catch2/catch.hpp>
#include <ctime>

using namespace payrecon;
using namespace payrecon::providers;

namespace {

net::HttpResult answered(int status, const std::string& name, const std::string& value) {
    net::HttpResult r;
    r.http_status = status;
    r.headers.emplace_back(name, value);
    return r;
}

std::string http_date(std::time_t at) {
    std::tm tm{};
    ::gmtime_r(&at, &tm);
    char text[64];
    std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    return text;
}

} // namespace

TEST_CASE("retry-after: seconds or an HTTP-date, any case, and a 429 without one waits 1 s",
          "[providers][retry_after]") {
    CHECK(retry_after_of(answered(503, "Retry-After", "120")) == std::chrono::seconds(120));
    CHECK(retry_after_of(answered(503, "RETRY-AFTER", "7")) == std::chrono::seconds(7));
    const auto in_an_hour =
        retry_after_of(answered(503, "retry-after", http_date(std::time(nullptr) + 3600)));
    REQUIRE(in_an_hour);
    CHECK(in_an_hour->count() >= 3590);
    CHECK(in_an_hour->count() <= 3601);
    CHECK(retry_after_of(answered(503, "Retry-After", http_date(std::time(nullptr) - 60))) ==
          std::chrono::seconds(0));
    CHECK(retry_after_of(answered(503, "Retry-After", "soon")) == std::chrono::seconds(1));
    CHECK(retry_after_of(answered(503, "Retry-After", "-5")) == std::chrono::seconds(1));
    CHECK(retry_after_of(answered(429, "X-Other", "1")) == std::chrono::seconds(1));
    CHECK_FALSE(retry_after_of(answered(500, "X-Other", "1")));
}
