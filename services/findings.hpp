#pragma once
// Statement findings an operator handles (`payrecon statement findings acknowledge`, DESIGN
// section 9): a finding acknowledged with a note -- who handled it, when, what was done, audited --
// stays in the report, marked handled, and is out of the money at risk from then on, also in the
// window's later runs (store/statement_store carries it to the same finding).

#include "store/statement_store.hpp"

#include <string>

namespace payrecon {

// Acknowledges finding `finding_id` as `operator_name` with `note` (recorded trimmed). Throws
// UsageError if the note is empty or longer than k_max_note_length once trimmed (nothing is
// read), DatabaseUnavailable. An unknown ID, a finding acknowledged before or one that needs no
// one come back as the result's status, nothing written.
store::FindingAcknowledgeResult acknowledge_finding(store::Db& db, const std::string& finding_id,
                                                    const std::string& operator_name,
                                                    const std::string& note);

} // namespace payrecon
