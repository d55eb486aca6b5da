#pragma once
// A provider's payment status words, each mapped to an outcome on purpose, in one table per kind
// (its wire.cpp): the wire's map function reads it, the descriptor lists it (StatusTable), and the
// conformance suite checks it against the provider's published document. A word the table does
// not hold is unknown: an operator decides what it meant.

#include "providers/provider.hpp"

#include <span>
#include <string_view>
#include <vector>

namespace payrecon::providers {

// How one of the provider's status words maps to an outcome. `why` says why, and is required
// where the outcome is unknown: a word mapped to unknown on purpose, with the reason documented.
struct StatusRule {
    std::string_view word;
    Outcome outcome = Outcome::unknown;
    std::string_view why;
};

// The outcome `rules` give `word` (compared exactly), unknown if no rule names it.
Outcome outcome_by_rules(std::span<const StatusRule> rules, std::string_view word);

// The rules as the descriptor holds them.
std::vector<StatusRule> rules_list(std::span<const StatusRule> rules);

} // namespace payrecon::providers
