#include "providers/provider.hpp"

namespace payrecon::providers {

std::string_view to_string(Outcome outcome) {
    switch (outcome) {
    case Outcome::unknown:
        return "unknown";
    case Outcome::succeeded:
        return "succeeded";
    case Outcome::declined:
        return "declined";
    case Outcome::pending:
        return "pending";
    case Outcome::not_sent:
        return "not_sent";
    case Outcome::rejected:
        return "rejected";
    }
    return "unknown";
}

std::optional<Outcome> parse_outcome(std::string_view name) {
    for (const Outcome o : {Outcome::unknown, Outcome::succeeded, Outcome::declined,
                            Outcome::pending, Outcome::not_sent, Outcome::rejected}) {
        if (to_string(o) == name) {
            return o;
        }
    }
    return std::nullopt;
}

SubmitResult rejected_request(int http_status, std::string code, std::string_view message,
                              std::string detail) {
    constexpr std::size_t k_max_message = 300;
    std::string printable;
    for (const char c : message.substr(0, k_max_message)) {
        const auto u = static_cast<unsigned char>(c);
        printable += u < 0x20 || u == 0x7f ? ' ' : c;
    }
    if (message.size() > k_max_message) {
        printable += "...";
    }
    if (code.empty()) {
        code = "http_" + std::to_string(http_status);
    }
    SubmitResult r;
    r.outcome = Outcome::rejected;
    r.call.http_status = http_status;
    r.call.error_class = "request_rejected:" + code;
    r.call.detail = std::move(detail);
    r.rejection = Rejection{std::move(code), std::move(printable), http_status};
    return r;
}

SubmitResult Provider::refund(const RefundOrder& /*order*/) {
    // Nothing is sent: rejected with a status of 0 (no call), which no credential check reads as
    // a refusal of our key.
    return rejected_request(0, "refunds_not_supported",
                            "payrecon does not send refunds to provider kind '" +
                                std::string(kind()) +
                                "' yet: refund it at the provider and record it, or wait for "
                                "its adapter",
                            "");
}

LookupResult Provider::lookup_refund(const RefundOrder& /*order*/) {
    LookupResult out;
    out.call.error_class = "lookup_not_supported";
    return out;
}

SubmitResult Provider::capture(const AuthorizationOrder& /*order*/) {
    return rejected_request(0, "captures_not_supported",
                            "payrecon does not send captures to provider kind '" +
                                std::string(kind()) +
                                "' yet: capture it at the provider and record it, or wait for "
                                "its adapter",
                            "");
}

SubmitResult Provider::void_authorization(const AuthorizationOrder& /*order*/) {
    return rejected_request(0, "voids_not_supported",
                            "payrecon does not send voids to provider kind '" +
                                std::string(kind()) +
                                "' yet: void it at the provider and record it, or wait for its "
                                "adapter",
                            "");
}

LookupResult Provider::lookup_capture(const AuthorizationOrder& /*order*/) {
    LookupResult out;
    out.call.error_class = "lookup_not_supported";
    return out;
}

ListPage Provider::list_refunds(const TimeWindow& /*window*/,
                                const std::optional<std::string>& /*cursor*/) {
    ListPage out;
    out.call.error_class = "list_not_supported";
    return out;
}

} // namespace payrecon::providers
