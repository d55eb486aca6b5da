#pragma once
// The fake provider's faults and latency: what `POST /__admin/faults` and the command line set.
// Every fault is honest in the ledger: a request that reached the handler counts as a delivery,
// and an execution is counted exactly when a PaymentIntent was created.

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon::fake {

enum class Fault {
    none,
    refuse,                  // the main listener closes for refuse_ms: connects get ECONNREFUSED
    drop_before_execute,     // read the request, close (FIN) without executing or answering
    execute_then_hang,       // execute, hold the connection hang_ms without answering, then FIN
    execute_then_fin,        // execute, close with FIN, no response
    execute_then_rst,        // execute, reset the connection (SO_LINGER 0), no response
    execute_then_partial,    // execute, send the headers and half the body, then FIN
    http_500_after_execute,  // execute, answer 500 (and the key keeps that 500, as Stripe does)
    http_500_before_execute, // answer 500 without executing (the key stays free)
    decline,                 // execute as a decline: 402 card_declined / insufficient_funds
};

std::string_view to_string(Fault fault);
std::optional<Fault> parse_fault(std::string_view name);

// Every fault name except "none", in declaration order (the order rates are drawn in).
const std::vector<Fault>& all_faults();

struct FaultConfig {
    std::chrono::milliseconds latency{
        0};                  // added to every main-port request; a POST holds its key meanwhile
    std::uint64_t seed = 42; // seeds the draws for `rates`
    std::vector<Fault> next; // applied to the next POSTs, in order (refuse: see README)
    std::map<Fault, double> rates; // per POST probability, drawn once per POST; sum <= 1
    std::chrono::milliseconds hang{3000};
    std::chrono::milliseconds refuse{1000};
    std::chrono::seconds lookup_stale{0}; // search misses a PaymentIntent this long after creation
    bool lookup_down = false;             // search and list answer 503
    // The listings (Stripe's PaymentIntents and refunds, Square's ListPayments and
    // ListPaymentRefunds, PayPal's Transaction Search) answer 429, the dialect's rate limit
    // error, with Retry-After: 1: a listing that must wait and ask again.
    bool list_rate_limited = false;
    // Create parameters this account does not know (as if its API version or feature set lacked
    // them): a POST /v1/payment_intents carrying one (`name` or `name[...]`) gets Stripe's 400
    // invalid_request_error parameter_unknown before anything executes; the key stays free. What
    // a provider-side configuration mistake looks like to payrecon: every request rejected.
    std::vector<std::string> unknown_parameters;

    // Parses the admin JSON; omitted fields keep their defaults. Throws std::invalid_argument
    // naming the field on an unknown field, an unknown fault, a negative duration, or rates that
    // are outside [0, 1] or sum past 1.
    static FaultConfig from_json(const nlohmann::json& j);
    nlohmann::json to_json() const;
};

} // namespace payrecon::fake
