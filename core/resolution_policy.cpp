#include "core/resolution_policy.hpp"

#include "core/credential_refusal.hpp"
#include "core/reconcile_policy.hpp"

namespace payrecon {

std::string_view to_string(OperatorDecision decision) {
    switch (decision) {
    case OperatorDecision::succeeded:
        return "succeeded";
    case OperatorDecision::failed:
        return "failed";
    case OperatorDecision::retry:
        return "retry";
    case OperatorDecision::cancel:
        return "cancel";
    }
    return "failed";
}

std::optional<OperatorDecision> parse_resolution(std::string_view name) {
    if (name == "succeeded") {
        return OperatorDecision::succeeded;
    }
    if (name == "failed") {
        return OperatorDecision::failed;
    }
    if (name == "retry") {
        return OperatorDecision::retry;
    }
    return std::nullopt;
}

PaymentState target_state(OperatorDecision decision) {
    switch (decision) {
    case OperatorDecision::succeeded:
        return PaymentState::succeeded;
    case OperatorDecision::retry:
        return PaymentState::retry_scheduled;
    case OperatorDecision::failed:
    case OperatorDecision::cancel:
        return PaymentState::failed;
    }
    return PaymentState::failed;
}

bool decidable_from(OperatorDecision decision, PaymentState from) {
    if (decision == OperatorDecision::cancel) {
        return from == PaymentState::pending || from == PaymentState::retry_scheduled;
    }
    return from == PaymentState::unknown || from == PaymentState::needs_review;
}

std::string trimmed_note(std::string_view note) {
    const auto b = note.find_first_not_of(" \t\r\n");
    if (b == std::string_view::npos) {
        return {};
    }
    return std::string(note.substr(b, note.find_last_not_of(" \t\r\n") - b + 1));
}

std::optional<ResolutionProblem> check_resolution(const ResolutionRequest& request) {
    using Part = ResolutionProblem::Part;
    const std::string note = trimmed_note(request.note);
    if (note.empty() || note.size() > k_max_note_length) {
        return ResolutionProblem{Part::note, "must say, in 1.." +
                                                 std::to_string(k_max_note_length) +
                                                 " characters, what you checked and why you "
                                                 "decided so"};
    }
    if (request.generation < 0) {
        return ResolutionProblem{Part::generation,
                                 "must be the generation the payment was shown with"};
    }
    const bool has_reference = request.provider_reference && !request.provider_reference->empty();
    if (request.decision == OperatorDecision::succeeded && !has_reference) {
        return ResolutionProblem{Part::provider_reference,
                                 "is needed to decide a payment succeeded: the provider's ID of "
                                 "the charge"};
    }
    if (request.decision != OperatorDecision::succeeded && has_reference) {
        return ResolutionProblem{Part::provider_reference,
                                 "goes with a payment decided succeeded only"};
    }
    if (request.decision == OperatorDecision::retry && !request.confirmed_no_charge) {
        return ResolutionProblem{Part::confirmation,
                                 "is needed to send a payment again: confirm that the provider "
                                 "holds no charge for it, and say how you checked in the note"};
    }
    if (request.charged_amount && request.decision != OperatorDecision::succeeded) {
        return ResolutionProblem{Part::amount,
                                 "goes with a payment decided succeeded only: what the provider "
                                 "really charged for it"};
    }
    if (request.unverified && request.decision != OperatorDecision::succeeded) {
        return ResolutionProblem{Part::unverified,
                                 "goes with a payment decided succeeded only: it takes your word "
                                 "for the provider reference"};
    }
    return std::nullopt;
}

std::string describe(const ResolutionProblem& problem) {
    switch (problem.part) {
    case ResolutionProblem::Part::note:
        return "the note " + problem.rule;
    case ResolutionProblem::Part::generation:
        return "the generation " + problem.rule;
    case ResolutionProblem::Part::provider_reference:
        return "the provider reference " + problem.rule;
    case ResolutionProblem::Part::confirmation:
        return "a confirmation " + problem.rule;
    case ResolutionProblem::Part::amount:
        return "an amount charged " + problem.rule;
    case ResolutionProblem::Part::unverified:
        return "the operator's word alone " + problem.rule;
    }
    return problem.rule;
}

std::optional<std::string> requeue_refusal(const RequeueEvidence& evidence) {
    if (evidence.state != PaymentState::needs_review) {
        return "it is " + std::string(to_string(evidence.state)) + ", not in review";
    }
    const std::string_view rejected = to_string(ReviewCode::request_rejected);
    if (evidence.review_code.value_or("") != rejected) {
        return "it is in review as " + evidence.review_code.value_or("(no code)") + ", not as " +
               std::string(rejected);
    }
    if (evidence.last_outcome != "rejected" || !evidence.last_http_status ||
        !refuses_credentials(*evidence.last_http_status)) {
        return "its provider refused the request for another reason than our credentials (" +
               (evidence.last_http_status ? "HTTP " + std::to_string(*evidence.last_http_status)
                                          : std::string("no HTTP status recorded")) +
               "): an operator decides whether it can be sent again as it is";
    }
    return std::nullopt;
}

} // namespace payrecon
