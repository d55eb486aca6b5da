#include "providers/status_rules.hpp"

#include <algorithm>

namespace payrecon::providers {

Outcome outcome_by_rules(std::span<const StatusRule> rules, std::string_view word) {
    const auto rule =
        std::find_if(rules.begin(), rules.end(), [word](const auto& r) { return r.word == word; });
    return rule == rules.end() ? Outcome::unknown : rule->outcome;
}

std::vector<StatusRule> rules_list(std::span<const StatusRule> rules) {
    return {rules.begin(), rules.end()};
}

} // namespace payrecon::providers
