#pragma once
// What the refund execution tests share: the provider kinds whose adapters refund, what each
// answers a refund past the charge, a refund of a payment as a worker sends it, and the fake's
// refunded total.
#include "tests/execution/world.hpp"

#include <string>
#include <vector>

namespace payrecon::testing {

// The kinds whose adapters refund: the refund tests run for each
// (GENERATE(from_range(refunding_kinds()))).
inline const std::vector<std::string>& refunding_kinds() {
    static const std::vector<std::string> k_kinds{"stripe", "square", "checkout", "paypal"};
    return k_kinds;
}

// What the provider's refund call answers for a refund it accepted. Checkout.com's protocol
// differs: every accepted refund is a 202 (`pending`: "for card payments, refund requests are
// processed asynchronously"), which the executor holds as `unknown` until the reconciler's lookup
// finds its Refund action approved. The others answer the refund's outcome at once.
inline providers::Outcome accepted_refund(const std::string& kind) {
    return kind == "checkout" ? providers::Outcome::pending : providers::Outcome::succeeded;
}

// The error class of a refund the provider refuses because the charge has nothing left (a final
// answer: declined), per kind. Checkout.com's document names one refusal of a refund, 403 "Refund
// not allowed" (no body, no code); a 422 is "Invalid data was sent", which the adapter sends to
// review. PayPal answers a capture with nothing left 422 CAPTURE_FULLY_REFUNDED.
inline std::string over_refund_error(const std::string& kind) {
    if (kind == "checkout") {
        return "refund_not_allowed";
    }
    if (kind == "paypal") {
        return "refund_declined:CAPTURE_FULLY_REFUNDED";
    }
    return kind == "square" ? "refund_declined:REFUND_AMOUNT_INVALID"
                            : "invalid_request:charge_already_refunded";
}

// A refund of `amount` cents of `p` under operation ID `op`, as the executor sends it.
inline providers::RefundOrder refund_of(OnePayment& p, const std::string& op, long long amount) {
    providers::RefundOrder o;
    o.operation_id = op;
    o.refund_id = new_uuid();
    o.payment_id = p.w.payment_id_of(p.ref);
    o.payment_reference = p.column("provider_reference");
    o.amount = Money{amount, "EUR"};
    o.reason = "requested_by_customer";
    return o;
}

// What the fake refunded in EUR, in every dialect.
inline long long refunded_eur(World& w) {
    const auto l = w.fake->ledger();
    return l.contains("refunded") && l["refunded"].contains("eur")
               ? l["refunded"]["eur"].get<long long>()
               : 0;
}

} // namespace payrecon::testing
