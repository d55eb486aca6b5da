#pragma once
// The payment state machine (DESIGN section 3) as one transition table. Nothing writes a payment's
// state without require_transition() agreeing.

#include <optional>
#include <span>
#include <string_view>

namespace payrecon {

enum class PaymentState {
    pending,    // accepted, not yet sent
    processing, // a worker holds the lease and is calling the provider
    succeeded,  // terminal: the provider charged
    failed,     // terminal: the provider declined, or an operator confirmed no charge and gave up
    retry_scheduled, // definitely not sent; will be sent again with the same operation ID
    unknown,      // the provider may or may not have charged; only a lookup or an operator decides
    needs_review, // a human must decide; never re-sent without a recorded decision
};

inline constexpr PaymentState k_all_payment_states[] = {
    PaymentState::pending,     PaymentState::processing,      PaymentState::succeeded,
    PaymentState::failed,      PaymentState::retry_scheduled, PaymentState::unknown,
    PaymentState::needs_review};

std::string_view to_string(PaymentState state);
// Returns nullopt if `name` is not one of the names to_string() gives.
std::optional<PaymentState> parse_payment_state(std::string_view name);

bool is_terminal(PaymentState state); // succeeded, failed

// What a client is told: in flight (pending, processing, retry_scheduled), done (succeeded,
// failed), or not known yet (unknown, needs_review).
enum class StatusCategory { in_flight, done, not_known_yet };
StatusCategory status_category(PaymentState state);
std::string_view to_string(StatusCategory category);

// What a money movement does (DESIGN section 16). Every kind runs through the one state machine
// below: the charge is its payment's own operation (the payments row), the others are the
// payment's operations (the operations table).
// A capture takes (part of) an authorisation -- a charge made with capture "manual" -- and a void
// releases what is left of it (issue 32).
enum class OperationKind { charge, refund, capture, void_authorization };
std::string_view to_string(OperationKind kind);
// Returns nullopt if `name` is not one of the names to_string() gives.
std::optional<OperationKind> parse_operation_kind(std::string_view name);
// "payment", "refund", "capture", "void": what the subject of `kind` is called in messages (a
// charge is decided on its payment).
std::string_view subject_noun(OperationKind kind);

struct Transition {
    PaymentState from;
    PaymentState to;
    std::string_view cause; // who takes it and why, e.g. "worker claims the payment"
};

// Every allowed transition, once each.
std::span<const Transition> transition_table();

// Returns the table entry, or nullopt if the transition is forbidden.
std::optional<Transition> find_transition(PaymentState from, PaymentState to);

// Throws std::logic_error (a bug in the caller) if the transition is forbidden.
void require_transition(PaymentState from, PaymentState to);

// The one way out of a final state (DESIGN section 16): a late reversal, succeeded -> failed, of
// an operation the provider reported done and undid later (Stripe's refund.failed, Adyen's
// REFUND_FAILED, CAPTURE_FAILED). Refunds and captures only: a charge taken back is a dispute,
// never a state change, and a void released what it released. Returns nullopt for a kind that
// cannot be reversed.
std::optional<Transition> find_reversal(OperationKind kind);
// Throws std::logic_error if `kind` cannot be reversed.
void require_reversal(OperationKind kind);

} // namespace payrecon
