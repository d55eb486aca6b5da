// The operator's resolution rules (core/resolution_policy), which the store enforces and the CLI
// words in its flags.
#include "core/credential_refusal.hpp"
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

TEST_CASE("resolution policy: a requeue only of a payment in review whose latest attempt the "
          "provider refused with 401 or 403",
          "[core][resolution][credentials]") {
    RequeueEvidence e;
    e.review_code = "request_rejected";
    e.last_outcome = "rejected";
    for (const int status : {401, 403}) {
        e.last_http_status = status;
        CHECK_FALSE(requeue_refusal(e));
    }
    for (const int status : {400, 404, 409, 422, 429, 500}) {
        INFO(status);
        e.last_http_status = status;
        REQUIRE(requeue_refusal(e));
        CHECK(requeue_refusal(e)->find("HTTP " + std::to_string(status)) != std::string::npos);
    }
    e.last_http_status = std::nullopt;
    CHECK(requeue_refusal(e));
    e.last_http_status = 401;
    e.last_outcome = "unknown"; // a 401 on an attempt whose outcome is unknown proves nothing
    CHECK(requeue_refusal(e));
    e.last_outcome = "rejected";
    e.review_code = "lookup_failing";
    CHECK(requeue_refusal(e));
    e.review_code = std::nullopt;
    CHECK(requeue_refusal(e));
    e.review_code = "request_rejected";
    for (const auto state :
         {PaymentState::pending, PaymentState::processing, PaymentState::succeeded,
          PaymentState::failed, PaymentState::retry_scheduled, PaymentState::unknown}) {
        INFO(to_string(state));
        e.state = state;
        CHECK(requeue_refusal(e));
    }
    CHECK(refuses_credentials(401));
    CHECK(refuses_credentials(403));
    CHECK_FALSE(refuses_credentials(400));
    CHECK_FALSE(refuses_credentials(407));
}
