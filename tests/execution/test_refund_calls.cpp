// The providers' refund calls against the fake provider over real HTTP (issue 31), for each kind
// whose adapter refunds: a refund executes once under its own operation ID, a lost answer is found
// by the lookup without a second execution, and the provider refuses a refund past the charge --
// counted from the fake's ledger.
#include "tests/execution/refunds.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;
using namespace payrecon::testing;

TEST_CASE("refund calls: a refund executes once under its own key, a replay answers the same, and "
          "the lookup finds it",
          "[execution][refunds]") {
    const std::string kind = GENERATE(from_range(refunding_kinds()));
    INFO(kind);
    OnePayment p(kind, {});
    REQUIRE(p.state() == "succeeded");
    const long long charged = p.charged_eur();
    const std::string op = new_operation_id();
    const auto order = refund_of(p, op, 500);
    const auto first = p.provider->refund(order);
    CHECK(first.outcome == accepted_refund(kind));
    REQUIRE(first.provider_reference);
    const auto again = p.provider->refund(order);
    CHECK(again.outcome == accepted_refund(kind));
    CHECK(again.provider_reference == first.provider_reference);
    CHECK(p.w.executions(op) == 1);
    CHECK(p.w.deliveries(op) == 2);
    CHECK(refunded_eur(p.w) == 500);
    CHECK(p.charged_eur() == charged - 500);
    // The charge's own operation executed once, and the refund did not count against it.
    CHECK(p.executions() == 1);

    const auto found = p.provider->lookup_refund(order);
    REQUIRE(found.status == providers::LookupResult::Status::found);
    CHECK(found.payment->state == providers::Outcome::succeeded);
    CHECK(found.payment->provider_reference == *first.provider_reference);
    CHECK(found.payment->amount == Money{500, "EUR"});
    // Another refund's operation ID is not found among this payment's refunds.
    CHECK(p.provider->lookup_refund(refund_of(p, new_operation_id(), 500)).status ==
          providers::LookupResult::Status::not_found);
}

TEST_CASE("refund calls: executed, then the connection is reset -- unknown, found by the lookup, "
          "one execution, and dropped before executing -- sent again, one execution",
          "[execution][refunds]") {
    const std::string kind = GENERATE(from_range(refunding_kinds()));
    INFO(kind);
    OnePayment p(kind, {});
    REQUIRE(p.state() == "succeeded");
    fake::FaultConfig faults;
    faults.next = {fake::Fault::execute_then_rst, fake::Fault::drop_before_execute};
    p.w.fake->set_faults(faults);

    const std::string lost = new_operation_id();
    const auto lost_order = refund_of(p, lost, 300);
    CHECK(p.provider->refund(lost_order).outcome == providers::Outcome::unknown);
    CHECK(p.w.executions(lost) == 1);
    const auto found = p.provider->lookup_refund(lost_order);
    REQUIRE(found.status == providers::LookupResult::Status::found);
    CHECK(found.payment->state == providers::Outcome::succeeded);

    const std::string dropped = new_operation_id();
    const auto dropped_order = refund_of(p, dropped, 200);
    const auto first = p.provider->refund(dropped_order);
    CHECK(first.outcome != providers::Outcome::succeeded);
    CHECK(p.w.executions(dropped) == 0);
    CHECK(p.provider->lookup_refund(dropped_order).status ==
          providers::LookupResult::Status::not_found);
    CHECK(p.provider->refund(dropped_order).outcome == accepted_refund(kind));
    CHECK(p.w.executions(dropped) == 1);
    CHECK(p.w.deliveries(dropped) == 2);
    CHECK(refunded_eur(p.w) == 500);
}

TEST_CASE("refund calls: the provider refuses a refund past what the charge has left, and "
          "executes nothing",
          "[execution][refunds]") {
    const std::string kind = GENERATE(from_range(refunding_kinds()));
    INFO(kind);
    OnePayment p(kind, {});
    REQUIRE(p.state() == "succeeded");
    const long long amount = std::stoll(p.column("amount_minor"));
    const std::string whole = new_operation_id();
    CHECK(p.provider->refund(refund_of(p, whole, amount)).outcome == accepted_refund(kind));
    const std::string more = new_operation_id();
    const auto over = p.provider->refund(refund_of(p, more, 1));
    CHECK(over.outcome == providers::Outcome::declined); // nothing left to refund: final
    CHECK(over.call.error_class == over_refund_error(kind));
    CHECK(p.w.executions(more) == 0);
    CHECK(refunded_eur(p.w) == amount);
    CHECK(p.charged_eur() == 0);
}
