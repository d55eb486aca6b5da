#pragma once
// "Did you mean": the known word nearest a mistyped one, for the CLI's commands and options and the
// configuration's keys.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon {

// The edit distance between a and b, counting an insertion, a deletion, a substitution and a swap
// of two neighbouring characters as one edit each (optimal string alignment), case-insensitively.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest `word`, when it is near enough to be what was meant: at most one edit for
// words of up to four characters, two up to eight, three beyond; or `word` a prefix of exactly one
// candidate ("recon" for "reconcile"). Ties go to the first candidate. Nothing when none is near.
std::optional<std::string> nearest(std::string_view word,
                                   const std::vector<std::string>& candidates);

// "; did you mean 'X'?" with the nearest candidate, or "" when none is near: for the end of a
// message ("unknown command 'revew'" + did_you_mean(...)).
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

} // namespace payrecon
