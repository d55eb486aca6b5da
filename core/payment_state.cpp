#include "core/payment_state.hpp"

#include <stdexcept>
#include <string>

namespace payrecon {
namespace {

using enum PaymentState;

// DESIGN section 3. Anything not listed is forbidden: no self-transitions, nothing out of a
// terminal state, and never back to pending. An expired lease on a processing row means a worker
// died mid-call, so the row becomes unknown (the provider may have charged), never pending.
constexpr Transition k_transitions[] = {
    {pending, processing, "worker claims the payment and calls the provider"},
    {pending, failed, "operator canceled a payment that was never sent"},
    {processing, succeeded, "provider confirmed the charge"},
    {processing, failed, "provider declined the payment"},
    {processing, retry_scheduled, "the call was definitely not sent; send again later"},
    {processing, unknown, "outcome unknown: transport failure after sending, or lease expired"},
    {processing, needs_review,
     "provider refused the request before executing it; an operator must fix the integration"},
    {retry_scheduled, processing, "worker claims the payment for another attempt"},
    {retry_scheduled, failed, "operator canceled a payment none of whose attempts was sent"},
    {unknown, succeeded, "reconciler found the charge at the provider"},
    {unknown, failed, "reconciler found the provider declined the payment"},
    {unknown, retry_scheduled, "reconciler confirmed absence inside the provider's key window"},
    {unknown, needs_review, "reconciler cannot decide; a human must"},
    {needs_review, succeeded, "operator confirmed the charge"},
    {needs_review, failed, "operator confirmed no charge and gave up"},
    {needs_review, retry_scheduled, "operator confirmed no charge exists; send again"},
};

} // namespace

std::string_view to_string(PaymentState state) {
    switch (state) {
    case pending:
        return "pending";
    case processing:
        return "processing";
    case succeeded:
        return "succeeded";
    case failed:
        return "failed";
    case retry_scheduled:
        return "retry_scheduled";
    case unknown:
        return "unknown";
    case needs_review:
        return "needs_review";
    }
    throw std::logic_error("to_string: PaymentState value out of range");
}

std::optional<PaymentState> parse_payment_state(std::string_view name) {
    for (const PaymentState state : k_all_payment_states) {
        if (to_string(state) == name) {
            return state;
        }
    }
    return std::nullopt;
}

bool is_terminal(PaymentState state) {
    return state == succeeded || state == failed;
}

StatusCategory status_category(PaymentState state) {
    switch (state) {
    case pending:
    case processing:
    case retry_scheduled:
        return StatusCategory::in_flight;
    case succeeded:
    case failed:
        return StatusCategory::done;
    case unknown:
    case needs_review:
        return StatusCategory::not_known_yet;
    }
    throw std::logic_error("status_category: PaymentState value out of range");
}

std::string_view to_string(StatusCategory category) {
    switch (category) {
    case StatusCategory::in_flight:
        return "in_flight";
    case StatusCategory::done:
        return "done";
    case StatusCategory::not_known_yet:
        return "not_known_yet";
    }
    throw std::logic_error("to_string: StatusCategory value out of range");
}

std::string_view to_string(OperationKind kind) {
    switch (kind) {
    case OperationKind::charge:
        return "charge";
    case OperationKind::refund:
        return "refund";
    case OperationKind::capture:
        return "capture";
    case OperationKind::void_authorization:
        return "void";
    }
    throw std::logic_error("to_string: OperationKind value out of range");
}

std::optional<OperationKind> parse_operation_kind(std::string_view name) {
    for (const OperationKind k : {OperationKind::charge, OperationKind::refund,
                                  OperationKind::capture, OperationKind::void_authorization}) {
        if (to_string(k) == name) {
            return k;
        }
    }
    return std::nullopt;
}

std::span<const Transition> transition_table() {
    return k_transitions;
}

std::optional<Transition> find_transition(PaymentState from, PaymentState to) {
    for (const Transition& transition : k_transitions) {
        if (transition.from == from && transition.to == to) {
            return transition;
        }
    }
    return std::nullopt;
}

std::string_view subject_noun(OperationKind kind) {
    return kind == OperationKind::charge ? "payment" : to_string(kind);
}

std::optional<Transition> find_reversal(OperationKind kind) {
    switch (kind) {
    case OperationKind::refund:
        return Transition{succeeded, failed,
                          "the provider reversed a refund it had reported succeeded; the money "
                          "stays with the merchant and may be refunded again"};
    case OperationKind::capture:
        // Adyen's CAPTURE_FAILED after CAPTURE (DESIGN section 16): the scheme refused it late.
        return Transition{succeeded, failed,
                          "the provider reversed a capture it had reported succeeded; nothing was "
                          "taken, and what it held may be captured again while the authorisation "
                          "lasts"};
    case OperationKind::charge:
    case OperationKind::void_authorization:
        break;
    }
    return std::nullopt;
}

void require_reversal(OperationKind kind) {
    if (!find_reversal(kind)) {
        throw std::logic_error("a " + std::string(to_string(kind)) +
                               " cannot be reversed: succeeded is final for it");
    }
}

void require_transition(PaymentState from, PaymentState to) {
    if (!find_transition(from, to)) {
        throw std::logic_error("forbidden payment state transition: " +
                               std::string(to_string(from)) + " -> " + std::string(to_string(to)));
    }
}

} // namespace payrecon
