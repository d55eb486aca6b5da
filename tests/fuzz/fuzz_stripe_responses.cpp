// Fuzz target for Stripe's response parsers (providers/stripe/wire.hpp). The input is a response
// body; its first byte also picks an HTTP status. The invariant, checked on every input:
//   - no parser crashes, throws, or trips a sanitizer, whatever the bytes;
//   - interpret_create answers `succeeded` only for a 2xx whose body parses as a PaymentIntent
//     echoing the order's amount and operation ID (and then reports that PaymentIntent's id).
// A broken invariant aborts, which libFuzzer and the corpus replay both report as a failure.
//
// Built as a libFuzzer binary with -DPAYRECON_FUZZ=ON under clang, and always as
// fuzz_stripe_responses_corpus (fuzz_corpus_main.cpp), which replays tests/fuzz/corpus/stripe/.
#include "providers/stripe/wire.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

using namespace payrecon;
using namespace payrecon::providers;

void require(bool ok, const char* what, int http_status) {
    if (!ok) {
        std::fprintf(stderr, "fuzz_stripe_responses: invariant broken at HTTP %d: %s\n",
                     http_status, what);
        std::abort();
    }
}

const PaymentOrder& fixed_order() {
    static const PaymentOrder order = [] {
        PaymentOrder o;
        o.operation_id = "pr_0123456789abcdef0123456789abcdef"; // as in the recorded fixtures
        o.payment_id = "3aabbe24-9c9c-40ea-819f-7766897ccdda";
        o.merchant_reference = "order-1001";
        o.amount = Money{4999, "EUR"};
        o.payment_method = "pm_card_visa";
        return o;
    }();
    return order;
}

void check_create(std::string_view body, int http_status) {
    const PaymentOrder& order = fixed_order();
    const SubmitResult r = stripe::interpret_create(order, http_status, body);
    require(r.call.http_status == http_status, "the call record lost the HTTP status", http_status);
    if (r.outcome != Outcome::succeeded) {
        return;
    }
    require(http_status >= 200 && http_status < 300, "succeeded without a 2xx", http_status);
    const auto p = stripe::parse_payment_intent(body);
    require(p.has_value(), "succeeded, but the body is not a PaymentIntent", http_status);
    require(p->amount == order.amount, "succeeded with another amount", http_status);
    require(p->operation_id == order.operation_id, "succeeded without our operation ID",
            http_status);
    require(p->state == Outcome::succeeded, "succeeded, but the PaymentIntent's status is not",
            http_status);
    require(r.provider_reference == p->provider_reference,
            "succeeded with another PaymentIntent id", http_status);
}

// Statuses the adapter distinguishes, and neighbours it must not confuse with them.
constexpr std::array<int, 16> k_statuses = {200, 201, 204, 299, 300, 400, 401, 402,
                                            403, 404, 409, 429, 500, 502, 503, 0};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view body(reinterpret_cast<const char*>(data), size);
    (void)stripe::parse_payment_intent(body);
    (void)stripe::parse_error(body);
    (void)stripe::parse_list(body);
    const int picked = size == 0 ? 200 : k_statuses[data[0] % k_statuses.size()];
    check_create(body, picked);
    check_create(body, 200);
    check_create(body, 402);
    return 0;
}
