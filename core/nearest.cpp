#include "core/nearest.hpp"

#include <algorithm>
#include <cctype>

namespace payrecon {

namespace {
char fold(char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}
} // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
    // Three rows of the dynamic programme: the one before last (for swaps), the last, this one.
    std::vector<std::size_t> before(b.size() + 1), last(b.size() + 1), row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) {
        last[j] = j;
    }
    for (std::size_t i = 1; i <= a.size(); ++i) {
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t cost = fold(a[i - 1]) == fold(b[j - 1]) ? 0 : 1;
            row[j] = std::min({last[j] + 1, row[j - 1] + 1, last[j - 1] + cost});
            if (i > 1 && j > 1 && fold(a[i - 1]) == fold(b[j - 2]) &&
                fold(a[i - 2]) == fold(b[j - 1])) {
                row[j] = std::min(row[j], before[j - 2] + 1);
            }
        }
        std::swap(before, last);
        std::swap(last, row);
    }
    return last[b.size()];
}

std::optional<std::string> nearest(std::string_view word,
                                   const std::vector<std::string>& candidates) {
    if (word.empty()) {
        return std::nullopt;
    }
    const std::size_t allowed = word.size() <= 4 ? 1 : word.size() <= 8 ? 2 : 3;
    const std::string* best = nullptr;
    std::size_t best_distance = allowed + 1;
    for (const auto& c : candidates) {
        const std::size_t d = edit_distance(word, c);
        if (d < best_distance) {
            best = &c;
            best_distance = d;
        }
    }
    if (best != nullptr) {
        return *best;
    }
    // A prefix of one candidate only: "recon" means "reconcile" when nothing else starts so.
    const std::string* prefixed = nullptr;
    for (const auto& c : candidates) {
        if (c.size() > word.size() &&
            std::equal(word.begin(), word.end(), c.begin(),
                       [](char x, char y) { return fold(x) == fold(y); })) {
            if (prefixed != nullptr) {
                return std::nullopt;
            }
            prefixed = &c;
        }
    }
    if (prefixed != nullptr && word.size() >= 3) {
        return *prefixed;
    }
    return std::nullopt;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
    const auto n = nearest(word, candidates);
    return n ? "; did you mean '" + *n + "'?" : "";
}

} // namespace payrecon
