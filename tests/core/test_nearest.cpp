// "Did you mean": the nearest known word to a mistyped one, and no guess when none is near.
#include "core/nearest.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;

TEST_CASE("nearest: edit distance counts insertions, deletions, substitutions and swaps",
          "[core][nearest]") {
    CHECK(edit_distance("", "") == 0);
    CHECK(edit_distance("review", "review") == 0);
    CHECK(edit_distance("revew", "review") == 1);   // a deletion
    CHECK(edit_distance("reviews", "review") == 1); // an insertion
    CHECK(edit_distance("revuew", "review") == 1);  // a substitution
    CHECK(edit_distance("strpie", "stripe") == 1);  // a swap
    CHECK(edit_distance("Review", "review") == 0);  // case is not a difference
    CHECK(edit_distance("abc", "") == 3);
    CHECK(edit_distance("kitten", "sitting") == 3);
}

TEST_CASE("nearest: the near word is offered, a far one is not, a unique prefix is",
          "[core][nearest]") {
    const std::vector<std::string> commands = {"payments", "review",    "reconcile", "relay",
                                               "nightly",  "statement", "events"};
    CHECK(nearest("revew", commands) == "review");
    CHECK(nearest("nightley", commands) == "nightly");
    CHECK(nearest("statment", commands) == "statement");
    CHECK(nearest("recon", commands) == "reconcile"); // the only word it begins
    CHECK(nearest("re", commands) == std::nullopt);   // too short to be a prefix worth guessing
    CHECK(nearest("xyzzy", commands) == std::nullopt);
    CHECK(nearest("", commands) == std::nullopt);
    CHECK(nearest("anything", {}) == std::nullopt);
    // A short word allows one edit only: "ab" is not "relay".
    CHECK(nearest("rela", commands) == "relay");
    CHECK(nearest("ab", {"abcd"}) == std::nullopt);
    CHECK(did_you_mean("revew", commands) == "; did you mean 'review'?");
    CHECK(did_you_mean("xyzzy", commands).empty());
}
