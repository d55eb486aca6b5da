#pragma once
// `payrecon review resolve --from FILE`: many decisions at once, one per line, each of them the
// single `review resolve` (services/resolution's resolve()): fenced by the generation its line
// gives, its reference checked against the evidence and the provider, written with its own audit
// row and outbox event. The file is read and checked whole first -- a line that is not a complete
// decision refuses the file before anything is read from the database -- and then each line is
// decided on its own: a line refused (changed since it was shown, a reference the evidence
// contradicts, ...) leaves the others to be decided.
//
// The file: JSON lines (docs/operations.md, "Deciding many payments at once"). One JSON object per
// line with the members
//   payment_id          string: the payment ID or operation ID (required)
//   generation          integer: the generation `review show` printed (required)
//   as                  "succeeded" | "failed" | "retry" (required)
//   note                string: what was checked, 1..2000 characters (required)
//   provider_reference  string: with "as": "succeeded"
//   amount              string, major units ("8.80"): with "as": "succeeded", what was charged
//   confirm_no_charge   boolean: with "as": "retry"
//   unverified          boolean: with "as": "succeeded", the reference on the operator's word
// and no other; blank lines and lines whose first non-blank character is `#` are skipped.

#include "services/resolution.hpp"

#include <cstddef>
#include <functional>
#include <istream>
#include <optional>
#include <string>
#include <vector>

namespace payrecon {

// A line longer than this is refused (a decision is a few hundred bytes).
inline constexpr std::size_t k_max_decision_line = 64 * 1024;

struct DecisionLine {
    int line = 0; // 1-based, in the file
    ResolveRequest request;
};

struct DecisionProblem {
    int line = 0;
    std::string what; // names the member and the rule it breaks, or what the line is instead
};

struct DecisionFile {
    std::vector<DecisionLine> decisions;   // in file order
    std::vector<DecisionProblem> problems; // every line that is not a decision; empty: all are
};

// Reads every line of `in` as above: each decision with its line number, or the problems of the
// lines that are not one (each line checked against core's resolution rules, and a payment named
// by two lines). Reads nothing from anywhere else; never throws for the file's content.
DecisionFile read_decisions(std::istream& in);

struct DecidedLine {
    int line = 0;
    ResolveRequest request; // as resolve() was given it (operator, dry run)
    ResolveOutcome outcome; // when resolve() returned
    // When deciding the line threw a refusal that concerns it alone (its provider not in the
    // configuration, the payment gone while its reference was checked): what and what to do.
    std::optional<std::string> refused;
    std::string hint;

    bool applied() const; // applied, or would be (a dry run)
};

// Decides each of `decisions` in file order with resolve(), as `operator_name`, a dry run if
// `dry_run`, calling `on_each` after each line. Throws DatabaseUnavailable (the lines decided
// before stay decided), and whatever `ask_provider` throws other than Refused.
std::vector<DecidedLine> resolve_each(store::Db& db, const std::vector<DecisionLine>& decisions,
                                      const std::string& operator_name, bool dry_run,
                                      const AskProvider& ask_provider,
                                      const std::function<void(const DecidedLine&)>& on_each = {});

} // namespace payrecon
