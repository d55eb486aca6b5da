#include "core/payment_state.hpp"

#include <catch2/catch.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

using namespace payrecon;

namespace {

using Pair = std::pair<PaymentState, PaymentState>;

// DESIGN section 3, written out independently of the table under test.
const std::set<Pair>& expected_allowed() {
    using enum PaymentState;
    static const std::set<Pair> allowed = {
        {pending, processing},
        {pending, failed}, // an operator's cancel of a payment never sent
        {processing, succeeded},
        {processing, failed},
        {processing, retry_scheduled},
        {processing, unknown},
        {processing, needs_review}, // the provider rejected the request: nothing executed
        {retry_scheduled, processing},
        {retry_scheduled, failed}, // an operator's cancel: every attempt provably not sent
        {unknown, succeeded},
        {unknown, failed},
        {unknown, retry_scheduled},
        {unknown, needs_review},
        {needs_review, succeeded},
        {needs_review, failed},
        {needs_review, retry_scheduled},
    };
    return allowed;
}

} // namespace

TEST_CASE("payment state: every one of the 7x7 transitions is allowed exactly when DESIGN says",
          "[core][state]") {
    int checked = 0;
    for (const PaymentState from : k_all_payment_states) {
        for (const PaymentState to : k_all_payment_states) {
            INFO(to_string(from) << " -> " << to_string(to));
            const bool allowed = expected_allowed().count({from, to}) == 1;
            const auto transition = find_transition(from, to);
            CHECK(transition.has_value() == allowed);
            if (allowed) {
                REQUIRE(transition);
                CHECK(transition->from == from);
                CHECK(transition->to == to);
                CHECK_FALSE(transition->cause.empty());
                CHECK_NOTHROW(require_transition(from, to));
            } else {
                CHECK_THROWS_AS(require_transition(from, to), std::logic_error);
            }
            ++checked;
        }
    }
    CHECK(checked == 49);
}

TEST_CASE("payment state: the table lists each allowed transition once and nothing else",
          "[core][state]") {
    std::set<Pair> seen;
    for (const Transition& transition : transition_table()) {
        INFO(to_string(transition.from) << " -> " << to_string(transition.to));
        CHECK(seen.insert({transition.from, transition.to}).second);
        CHECK_FALSE(transition.cause.empty());
    }
    CHECK(seen == expected_allowed());
    CHECK(transition_table().size() == 16);
}

TEST_CASE("payment state: the forbidden transitions that would charge twice or lose a charge",
          "[core][state]") {
    using enum PaymentState;
    CHECK_FALSE(find_transition(processing, pending)); // expired lease becomes unknown instead
    CHECK_FALSE(find_transition(unknown, processing)); // no provider call without a lookup
    CHECK_FALSE(find_transition(unknown, pending));
    CHECK_FALSE(find_transition(needs_review, processing)); // only through retry_scheduled
    CHECK_FALSE(find_transition(succeeded, failed));
    CHECK_FALSE(find_transition(failed, retry_scheduled));
    CHECK_FALSE(find_transition(pending, succeeded));
    for (const PaymentState state : k_all_payment_states) {
        INFO(to_string(state));
        CHECK_FALSE(find_transition(state, state));
    }
}

TEST_CASE("payment state: require_transition names both states when it refuses", "[core][state]") {
    try {
        require_transition(PaymentState::succeeded, PaymentState::pending);
        FAIL("require_transition did not throw");
    } catch (const std::logic_error& error) {
        const std::string message = error.what();
        CHECK(message.find("succeeded") != std::string::npos);
        CHECK(message.find("pending") != std::string::npos);
    }
}

TEST_CASE("payment state: only succeeded and failed are terminal, and nothing leaves them",
          "[core][state]") {
    for (const PaymentState state : k_all_payment_states) {
        INFO(to_string(state));
        const bool terminal = state == PaymentState::succeeded || state == PaymentState::failed;
        CHECK(is_terminal(state) == terminal);
        if (terminal) {
            for (const PaymentState to : k_all_payment_states) {
                CHECK_FALSE(find_transition(state, to));
            }
        }
    }
}

TEST_CASE("payment state: status categories tell in flight, done and not known yet apart",
          "[core][state]") {
    using enum PaymentState;
    CHECK(status_category(pending) == StatusCategory::in_flight);
    CHECK(status_category(processing) == StatusCategory::in_flight);
    CHECK(status_category(retry_scheduled) == StatusCategory::in_flight);
    CHECK(status_category(succeeded) == StatusCategory::done);
    CHECK(status_category(failed) == StatusCategory::done);
    CHECK(status_category(unknown) == StatusCategory::not_known_yet);
    CHECK(status_category(needs_review) == StatusCategory::not_known_yet);
    CHECK(to_string(StatusCategory::in_flight) == "in_flight");
    CHECK(to_string(StatusCategory::done) == "done");
    CHECK(to_string(StatusCategory::not_known_yet) == "not_known_yet");
}

TEST_CASE("payment state: names round-trip through to_string and parse_payment_state",
          "[core][state]") {
    std::set<std::string_view> names;
    for (const PaymentState state : k_all_payment_states) {
        const std::string_view name = to_string(state);
        INFO(name);
        CHECK(names.insert(name).second);
        REQUIRE(parse_payment_state(name));
        CHECK(*parse_payment_state(name) == state);
    }
    CHECK(to_string(PaymentState::retry_scheduled) == "retry_scheduled");
    CHECK(to_string(PaymentState::needs_review) == "needs_review");
}

TEST_CASE("payment state: unknown names do not parse", "[core][state]") {
    for (const char* name : {"", "Pending", "PENDING", "succeeded ", "success", "canceled",
                             "retry-scheduled", "needs review", "in_flight"}) {
        INFO(name);
        CHECK_FALSE(parse_payment_state(name));
    }
}

TEST_CASE("payment state: a refund's late reversal is the one way out of succeeded, and a charge "
          "has none",
          "[core][state]") {
    const auto reversal = find_reversal(OperationKind::refund);
    REQUIRE(reversal);
    CHECK(reversal->from == PaymentState::succeeded);
    CHECK(reversal->to == PaymentState::failed);
    CHECK_FALSE(reversal->cause.empty());
    CHECK_NOTHROW(require_reversal(OperationKind::refund));
    CHECK_FALSE(find_reversal(OperationKind::charge));
    CHECK_THROWS_AS(require_reversal(OperationKind::charge), std::logic_error);
    // The shared table still holds no way out of succeeded.
    CHECK_FALSE(find_transition(PaymentState::succeeded, PaymentState::failed));
}
