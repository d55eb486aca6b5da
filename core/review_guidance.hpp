#pragma once
// What an operator is told beside a payment in review (`review show`): per reason code, the
// runbook entry of docs/operations.md in a few lines, and which decisions can help, so that the
// commands offered are only those. The runbook stays the long form; this is its summary.

#include "core/reconcile_policy.hpp"
#include "core/resolution_policy.hpp"

#include <string_view>
#include <vector>

namespace payrecon {

struct ReviewGuidance {
    std::string_view means; // what happened, one sentence
    std::string_view check; // what to look at before deciding
    std::string_view act;   // what to do, in order
    // The decisions that can be right for this code, in the order offered.
    std::vector<OperatorDecision> decisions;
    bool recheck = false; // asking the provider again can settle it
};

const ReviewGuidance& review_guidance(ReviewCode code);

} // namespace payrecon
