#include "core/standard_webhooks.hpp"

#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "core/fingerprint.hpp"
#include "core/settings.hpp"

#include <algorithm>

namespace payrecon {

namespace {

constexpr std::string_view k_whsec = "whsec_";
constexpr std::size_t k_min_key_bytes = 24;

std::string one_signature(const Secret& key, std::string_view id, long long timestamp,
                          std::string_view body) {
    std::string message;
    message.reserve(id.size() + body.size() + 24);
    message.append(id);
    message += '.';
    message += std::to_string(timestamp);
    message += '.';
    message.append(body);
    return base64(hmac_sha256(key.reveal(), message));
}

} // namespace

Secret new_endpoint_secret() {
    return Secret(std::string(k_whsec) + base64(random_bytes(k_endpoint_secret_bytes)));
}

std::optional<Secret> endpoint_secret_key(const Secret& whsec) {
    const std::string& text = whsec.reveal();
    if (text.compare(0, k_whsec.size(), k_whsec) != 0) {
        return std::nullopt;
    }
    auto key = from_base64(std::string_view(text).substr(k_whsec.size()));
    if (!key || key->size() < k_min_key_bytes) {
        return std::nullopt;
    }
    return Secret(std::move(*key));
}

std::string webhook_signature(const std::vector<Secret>& keys, std::string_view id,
                              long long timestamp, std::string_view body) {
    std::string out;
    for (const Secret& key : keys) {
        if (!out.empty()) {
            out += ' ';
        }
        out += "v1,";
        out += one_signature(key, id, timestamp, body);
    }
    return out;
}

bool webhook_signature_matches(std::string_view header, const Secret& key, std::string_view id,
                               long long timestamp, std::string_view body) {
    const std::string expected = one_signature(key, id, timestamp, body);
    bool found = false;
    while (!header.empty()) {
        const std::size_t space = header.find(' ');
        const std::string_view item = header.substr(0, space);
        header = space == std::string_view::npos ? std::string_view() : header.substr(space + 1);
        if (item.size() > 3 && item.substr(0, 3) == "v1,") {
            // No early exit: the time taken does not say which signature matched.
            found = constant_time_equal(item.substr(3), expected) || found;
        }
    }
    return found;
}

AttemptVerdict attempt_verdict(int http_status) {
    if (http_status >= 200 && http_status <= 299) {
        return AttemptVerdict::delivered;
    }
    if (http_status == 410) {
        return AttemptVerdict::gone;
    }
    return AttemptVerdict::retry;
}

DeliveryOutcome delivery_outcome(AttemptVerdict verdict) {
    switch (verdict) {
    case AttemptVerdict::delivered:
        return DeliveryOutcome::delivered;
    case AttemptVerdict::gone:
        return DeliveryOutcome::gone;
    case AttemptVerdict::retry:
        return DeliveryOutcome::retry;
    }
    return DeliveryOutcome::retry;
}

const char* to_string(DeliveryOutcome outcome) {
    switch (outcome) {
    case DeliveryOutcome::delivered:
        return "delivered";
    case DeliveryOutcome::retry:
        return "retry";
    case DeliveryOutcome::gone:
        return "gone";
    case DeliveryOutcome::dead:
        return "dead";
    case DeliveryOutcome::refused:
        return "refused";
    }
    return "retry";
}

DeliverySchedule DeliverySchedule::standard() {
    using namespace std::chrono;
    return DeliverySchedule{{milliseconds(0), seconds(5), minutes(5), minutes(30), hours(2),
                             hours(5), hours(10), hours(10)}};
}

DeliverySchedule DeliverySchedule::parse(std::string_view text, std::string_view what) {
    DeliverySchedule out;
    while (true) {
        const std::size_t comma = text.find(',');
        const std::string_view item = text.substr(0, comma);
        out.delays.push_back(parse_duration_ms(item, what));
        if (comma == std::string_view::npos) {
            break;
        }
        text = text.substr(comma + 1);
    }
    if (out.delays.front().count() != 0) {
        throw UsageError(std::string(what) + ": the first try is made at once: start with 0s",
                         "list the waits before each try, e.g. 0s,5s,5m,30m,2h,5h,10h,10h");
    }
    if (out.delays.size() > 32) {
        throw UsageError(std::string(what) + ": at most 32 tries",
                         "list the waits before each try, e.g. 0s,5s,5m,30m,2h,5h,10h,10h");
    }
    return out;
}

std::string DeliverySchedule::to_string() const {
    std::string out;
    for (const auto d : delays) {
        if (!out.empty()) {
            out += ',';
        }
        const long long ms = d.count();
        if (ms % 3600000 == 0 && ms > 0) {
            out += std::to_string(ms / 3600000) + "h";
        } else if (ms % 60000 == 0 && ms > 0) {
            out += std::to_string(ms / 60000) + "m";
        } else if (ms % 1000 == 0) {
            out += std::to_string(ms / 1000) + "s";
        } else {
            out += std::to_string(ms) + "ms";
        }
    }
    return out;
}

std::optional<std::chrono::milliseconds>
DeliverySchedule::next_delay(int tries_done,
                             std::optional<std::chrono::seconds> retry_after) const {
    if (tries_done < 1 || static_cast<std::size_t>(tries_done) >= delays.size()) {
        return std::nullopt;
    }
    std::chrono::milliseconds wait = delays[static_cast<std::size_t>(tries_done)];
    if (retry_after && *retry_after > wait) {
        const auto longest = std::max<std::chrono::milliseconds>(
            *std::max_element(delays.begin(), delays.end()), std::chrono::hours(1));
        wait = std::min<std::chrono::milliseconds>(*retry_after, longest);
    }
    return wait;
}

bool event_type_matches(std::string_view pattern, std::string_view event_type) {
    if (!pattern.empty() && pattern.back() == '*') {
        const std::string_view prefix = pattern.substr(0, pattern.size() - 1);
        return event_type.substr(0, prefix.size()) == prefix;
    }
    return pattern == event_type;
}

std::optional<std::string> event_pattern_problem(std::string_view pattern) {
    if (pattern.empty() || pattern.size() > 64) {
        return "an event type pattern has 1 to 64 characters";
    }
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        const char c = pattern[i];
        const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                        (c == '*' && i + 1 == pattern.size());
        if (!ok) {
            return "an event type pattern is an event type (payment.succeeded) or a prefix "
                   "ending in '*' (payment.*, *): lower-case letters, digits, '.', '_'";
        }
    }
    return std::nullopt;
}

} // namespace payrecon
