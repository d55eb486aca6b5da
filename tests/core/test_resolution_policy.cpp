// The operator's resolution rules (core/resolution_policy), which the store enforces and the CLI
// words in its flags.
#include "core/resolution_policy.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;
using Part = ResolutionProblem::Part;

namespace {

ResolutionRequest request(OperatorDecision d) {
    ResolutionRequest r;
    r.decision = d;
    r.note = "checked the provider's dashboard";
    r.generation = 3;
    if (d == OperatorDecision::succeeded) {
        r.provider_reference = "pi_123";
    }
    r.confirmed_no_charge = d == OperatorDecision::retry;
    return r;
}

std::optional<Part> part_of(const ResolutionRequest& r) {
    const auto p = check_resolution(r);
    return p ? std::optional<Part>(p->part) : std::nullopt;
}

} // namespace

TEST_CASE("resolution policy: a complete request of each decision passes", "[core][resolution]") {
    for (const auto d : {OperatorDecision::succeeded, OperatorDecision::failed,
                         OperatorDecision::retry, OperatorDecision::cancel}) {
        INFO(to_string(d));
        CHECK_FALSE(check_resolution(request(d)));
    }
}

TEST_CASE("resolution policy: each rule refuses what breaks it, naming the part",
          "[core][resolution]") {
    auto r = request(OperatorDecision::failed);
    r.note = " \t\n ";
    CHECK(part_of(r) == Part::note);
    r.note = std::string(k_max_note_length + 1, 'x');
    CHECK(part_of(r) == Part::note);
    r.note = "  " + std::string(k_max_note_length, 'x') + "  "; // trimmed, it fits
    CHECK_FALSE(part_of(r));

    r = request(OperatorDecision::failed);
    r.generation = -1;
    CHECK(part_of(r) == Part::generation);

    r = request(OperatorDecision::succeeded);
    r.provider_reference.reset();
    CHECK(part_of(r) == Part::provider_reference);
    r.provider_reference = "";
    CHECK(part_of(r) == Part::provider_reference);

    for (const auto d :
         {OperatorDecision::failed, OperatorDecision::retry, OperatorDecision::cancel}) {
        r = request(d);
        r.provider_reference = "pi_123";
        INFO(to_string(d));
        CHECK(part_of(r) == Part::provider_reference);
    }

    r = request(OperatorDecision::retry);
    r.confirmed_no_charge = false;
    CHECK(part_of(r) == Part::confirmation);
    CHECK(describe(*check_resolution(r)).starts_with("a confirmation is needed"));

    // An amount charged, and the operator's word for the reference, go with succeeded only.
    for (const auto d : {OperatorDecision::succeeded, OperatorDecision::failed,
                         OperatorDecision::retry, OperatorDecision::cancel}) {
        INFO(to_string(d));
        r = request(d);
        r.charged_amount = true;
        CHECK(part_of(r) ==
              (d == OperatorDecision::succeeded ? std::nullopt : std::optional(Part::amount)));
        r = request(d);
        r.unverified = true;
        CHECK(part_of(r) ==
              (d == OperatorDecision::succeeded ? std::nullopt : std::optional(Part::unverified)));
    }
}

TEST_CASE("resolution policy: from which states each decision is taken, and where it leads",
          "[core][resolution]") {
    const PaymentState all[] = {PaymentState::pending,         PaymentState::processing,
                                PaymentState::succeeded,       PaymentState::failed,
                                PaymentState::retry_scheduled, PaymentState::unknown,
                                PaymentState::needs_review};
    for (const auto from : all) {
        INFO(to_string(from));
        const bool in_doubt = from == PaymentState::unknown || from == PaymentState::needs_review;
        const bool unsent = from == PaymentState::pending || from == PaymentState::retry_scheduled;
        CHECK(decidable_from(OperatorDecision::succeeded, from) == in_doubt);
        CHECK(decidable_from(OperatorDecision::failed, from) == in_doubt);
        CHECK(decidable_from(OperatorDecision::retry, from) == in_doubt);
        CHECK(decidable_from(OperatorDecision::cancel, from) == unsent);
    }
    CHECK(target_state(OperatorDecision::succeeded) == PaymentState::succeeded);
    CHECK(target_state(OperatorDecision::failed) == PaymentState::failed);
    CHECK(target_state(OperatorDecision::retry) == PaymentState::retry_scheduled);
    CHECK(target_state(OperatorDecision::cancel) == PaymentState::failed);
    CHECK(parse_resolution("retry") == OperatorDecision::retry);
    CHECK_FALSE(parse_resolution("cancel")); // its own command
    CHECK_FALSE(parse_resolution("Retry"));
}
