#pragma once
// An operator's resolution of a payment (DESIGN section 8) as pure rules, beside the reconciler's
// policy: which decisions exist, what each needs, from which states each may be taken and where it
// leads. The store applies a resolution only if these rules allow it; the CLI checks them first
// to word a refusal in its own flags.

#include "core/payment_state.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace payrecon {

enum class OperatorDecision {
    succeeded, // the provider charged: needs the provider's reference of the charge
    failed,    // no charge exists and none will be made
    retry,     // send again with the same operation ID: needs the operator's confirmation that the
               // provider holds no charge
    cancel,    // a payment never sent (pending, retry_scheduled) is not to be sent
};

// "succeeded", "failed", "retry", "cancel".
std::string_view to_string(OperatorDecision decision);
// The decisions `review resolve --as` takes: succeeded, failed, retry (cancel has its own command).
std::optional<OperatorDecision> parse_resolution(std::string_view name);

// The state a decision leaves the payment in.
PaymentState target_state(OperatorDecision decision);
// Whether a payment in `from` may be decided so: unknown and needs_review payments are resolved,
// pending and retry_scheduled ones canceled.
bool decidable_from(OperatorDecision decision, PaymentState from);

inline constexpr std::size_t k_max_note_length = 2000;

// What an operator asked, before anything is read from the database.
struct ResolutionRequest {
    OperatorDecision decision = OperatorDecision::failed;
    std::string note; // as typed; trimmed_note() is what is recorded
    std::optional<std::string> provider_reference;
    bool confirmed_no_charge = false;
    long long generation = -1;   // as the operator was shown it
    bool charged_amount = false; // an amount the provider charged is given
    bool unverified = false;     // the reference is to be taken on the operator's word
};

// The note without leading and trailing white space.
std::string trimmed_note(std::string_view note);

// Which part of a request breaks a rule, and the rule, in words that name no command-line flag.
struct ResolutionProblem {
    enum class Part { note, generation, provider_reference, confirmation, amount, unverified };
    Part part;
    std::string rule;
};

// The first rule `request` breaks, or nullopt: the note says, in 1..2000 characters, what was
// checked; the generation is given; succeeded needs the provider's reference and only succeeded
// takes one; retry needs the confirmation that the provider holds no charge; an amount charged,
// and the operator's word for the reference, go with succeeded only.
std::optional<ResolutionProblem> check_resolution(const ResolutionRequest& request);
// "the note must say ...": the problem as one sentence.
std::string describe(const ResolutionProblem& problem);

// What the record holds of a payment, for a requeue: its state and review code, and the outcome
// ("rejected", as payment_attempts stores it) and HTTP status of its latest attempt.
struct RequeueEvidence {
    PaymentState state = PaymentState::needs_review;
    std::optional<std::string> review_code;
    std::string last_outcome; // empty: no attempt
    std::optional<int> last_http_status;
};

// A requeue is a retry (same operation ID, retry_scheduled and due at once) whose confirmation
// that no charge exists is the record's own: the provider refused our credentials (401/403,
// core/credential_refusal) before executing anything. Returns why `evidence` does not allow one,
// in words that name no flag, or nullopt if it does: the payment is in review as request_rejected
// and its latest attempt was rejected with 401 or 403. Everything else a provider rejected (a
// parameter, a setting) needs an operator's own `retry` decision.
std::optional<std::string> requeue_refusal(const RequeueEvidence& evidence);

} // namespace payrecon
