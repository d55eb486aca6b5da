#pragma once
// The commands payrecon prints for an operator to paste -- in `review show`, in refusals, in the
// nightly summary, in the worker's log -- built in one place so that each is complete as printed:
// the payment's ID, its generation where the command is fenced by one, and `--note "..."` where a
// note is required (the "..." to be replaced by what was checked). A value from outside (a
// provider's reference) is quoted for a POSIX shell unless it is made of [A-Za-z0-9_.:/@%+=,-]
// only.

#include "core/resolution_policy.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace payrecon {

// Where the operator must fill in the provider's reference themselves.
inline constexpr std::string_view k_reference_placeholder = "REF";

// `text` as one word of a POSIX shell command line: as it is, or in single quotes ('' for empty).
std::string shell_word(std::string_view text);

struct ResolveCommand {
    std::string payment_id;
    long long generation = 0;
    OperatorDecision decision = OperatorDecision::failed; // succeeded, failed or retry
    // With succeeded: the provider's reference (k_reference_placeholder where none is known) and
    // what it charged, in major units of the payment's currency, where that differs from ours.
    std::optional<std::string> reference;
    std::optional<std::string> charged_amount;
    bool unverified = false; // with succeeded: taken on the operator's word
};

// `payrecon review resolve ID --generation G --as D [...] --note "..."`; retry carries
// --confirm-no-charge. Throws std::invalid_argument for a cancel (cancel_command()).
std::string command_line(const ResolveCommand& command);
// `payrecon payments cancel ID --generation G --note "..."`.
std::string cancel_command(std::string_view payment_id, long long generation);
// `payrecon review show ID`: a payment in review with the commands that decide it.
std::string review_show_command(std::string_view payment_id);
// `payrecon review recheck ID`.
std::string recheck_command(std::string_view payment_id);

} // namespace payrecon
