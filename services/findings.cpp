#include "services/findings.hpp"

#include "core/errors.hpp"
#include "core/resolution_policy.hpp"

namespace payrecon {

store::FindingAcknowledgeResult acknowledge_finding(store::Db& db, const std::string& finding_id,
                                                    const std::string& operator_name,
                                                    const std::string& note) {
    const std::string trimmed = trimmed_note(note);
    if (trimmed.empty() || trimmed.size() > k_max_note_length) {
        throw UsageError("--note must say, in 1.." + std::to_string(k_max_note_length) +
                             " characters, what you checked and did about the finding",
                         "e.g. --note \"refunded the second charge pi_... at the provider\"");
    }
    return store::acknowledge_statement_finding(db, finding_id, operator_name, trimmed);
}

} // namespace payrecon
