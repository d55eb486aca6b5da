#include "core/webhook.hpp"

namespace payrecon {

std::string_view to_string(EvidenceOutcome outcome) {
    switch (outcome) {
    case EvidenceOutcome::succeeded:
        return "succeeded";
    case EvidenceOutcome::failed:
        return "failed";
    case EvidenceOutcome::pending:
        return "pending";
    case EvidenceOutcome::other:
        return "other";
    }
    return "other";
}

std::optional<EvidenceOutcome> parse_evidence_outcome(std::string_view name) {
    for (const EvidenceOutcome o : {EvidenceOutcome::succeeded, EvidenceOutcome::failed,
                                    EvidenceOutcome::pending, EvidenceOutcome::other}) {
        if (to_string(o) == name) {
            return o;
        }
    }
    return std::nullopt;
}

std::optional<std::string_view> WebhookRequest::header(std::string_view name) const {
    for (const auto& [key, value] : headers) {
        if (key == name) {
            return std::string_view(value);
        }
    }
    return std::nullopt;
}

} // namespace payrecon
