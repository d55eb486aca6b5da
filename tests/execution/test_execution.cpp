// The executor with the real Stripe adapter over real HTTP on loopback, against the fake provider
// with fault injection. Counts come from the provider's own ledger: executions (charges made) and
// deliveries (requests that reached it).
#include "core/intake.hpp"
#include "core/store/executor_store.hpp"
#include "engine/executor.hpp"
#include "providers/registry.hpp"
#include "tests/execution/world.hpp"
#include "tests/fake_provider/fake_provider.hpp"
#include "tests/support/test_db.hpp"

#include <catch2/catch.hpp>
#include <sstream>
#include <thread>

using namespace payrecon;
using namespace payrecon::testing;

TEST_CASE("execution: a charge goes through once, with the operation ID as the provider's key",
          "[execution][db]") {
    World w;
    const auto refs = w.payments(1);
    auto provider = providers::create_provider(w.config);
    engine::Executor ex(*w.db, {provider.get()}, w.options());
    CHECK(ex.run_once() == 1);
    CHECK(w.state_of(refs[0]) == "succeeded");
    const std::string op = w.op_of(refs[0]);
    CHECK(w.executions(op) == 1);
    CHECK(w.deliveries(op) == 1);
    CHECK(query_value("SELECT provider_reference FROM payments WHERE merchant_reference = $1",
                      refs[0])
              .rfind("pi_", 0) == 0);
    CHECK(w.fake->ledger()["charged"]["eur"] == 2500); // in Stripe's units and spelling
}

TEST_CASE("execution: executed, then the connection hangs past the timeout: unknown, 1 execution, "
          "1 delivery, never sent again by a worker",
          "[execution][db][fault]") {
    const fake::Fault fault =
        GENERATE(fake::Fault::execute_then_hang, fake::Fault::execute_then_fin,
                 fake::Fault::execute_then_rst, fake::Fault::execute_then_partial,
                 fake::Fault::http_500_after_execute);
    INFO(fake::to_string(fault));
    World w(next({fault}));
    const auto refs = w.payments(1);
    auto provider = providers::create_provider(w.config);
    engine::Executor ex(*w.db, {provider.get()}, w.options());
    CHECK(ex.run_once() == 1);
    CHECK(ex.run_once() == 0);
    const std::string op = w.op_of(refs[0]);
    CHECK(w.state_of(refs[0]) == "unknown");
    CHECK(w.executions(op) == 1);
    CHECK(w.deliveries(op) == 1);
    CHECK(count_rows("payment_attempts", w.tenant.tenant_id,
                     "outcome = 'unknown' AND finished_at IS NOT NULL") == 1);
}

TEST_CASE("execution: connection refused is not_sent, sent again later with the same operation ID, "
          "succeeded, 1 execution",
          "[execution][db][fault]") {
    World w(next({fake::Fault::refuse}));
    const auto refs = w.payments(1);
    const std::string op = w.op_of(refs[0]);
    auto provider = providers::create_provider(w.config);
    engine::Executor ex(*w.db, {provider.get()}, w.options());
    REQUIRE_FALSE(w.fake->listening());
    CHECK(ex.run_once() == 1);
    CHECK(w.state_of(refs[0]) == "retry_scheduled");
    CHECK(w.deliveries(op) == 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (w.state_of(refs[0]) != "succeeded" && std::chrono::steady_clock::now() < deadline) {
        if (ex.run_once() == 0) {
            std::this_thread::sleep_for(
                std::chrono::milliseconds(50)); // the listener reopens after 300 ms
        }
    }
    CHECK(w.state_of(refs[0]) == "succeeded");
    CHECK(w.executions(op) == 1);
    CHECK(count_rows("payment_attempts", w.tenant.tenant_id, "outcome = 'not_sent'") >= 1);
    CHECK(count_rows("payment_attempts", w.tenant.tenant_id, "operation_id <> '" + op + "'") == 0);
}

TEST_CASE(
    "execution: dropped before executing, or 500 before executing: unknown to us, 0 executions",
    "[execution][db][fault]") {
    const fake::Fault fault =
        GENERATE(fake::Fault::drop_before_execute, fake::Fault::http_500_before_execute);
    INFO(fake::to_string(fault));
    World w(next({fault}));
    const auto refs = w.payments(1);
    auto provider = providers::create_provider(w.config);
    engine::Executor ex(*w.db, {provider.get()}, w.options());
    CHECK(ex.run_once() == 1);
    // We cannot tell this apart from an execution: unknown, left to the reconciler's lookup.
    CHECK(w.state_of(refs[0]) == "unknown");
    CHECK(w.executions(w.op_of(refs[0])) == 0);
    CHECK(w.deliveries(w.op_of(refs[0])) == 1);
}

TEST_CASE("execution: a decline fails the payment", "[execution][db]") {
    World w(next({fake::Fault::decline}));
    const auto refs = w.payments(1);
    auto provider = providers::create_provider(w.config);
    engine::Executor ex(*w.db, {provider.get()}, w.options());
    CHECK(ex.run_once() == 1);
    CHECK(w.state_of(refs[0]) == "failed");
    CHECK(count_rows("outbox", w.tenant.tenant_id, "event_type = 'payment.failed'") == 1);
    CHECK(w.fake->ledger()["charged"].empty());
}

TEST_CASE(
    "execution: a fenced-out worker's late send is absorbed by the provider's idempotency key",
    "[execution][db][fencing]") {
    World w;
    const auto refs = w.payments(1);
    const std::string op = w.op_of(refs[0]);
    auto provider = providers::create_provider(w.config);
    // Worker A claims and is paused past its lease; the takeover turns the payment unknown.
    const auto a =
        store::claim_payments(*w.db, "paused", std::chrono::milliseconds(1), 1, {w.config.name});
    REQUIRE(a.size() == 1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (w.state_of(refs[0]) != "unknown" && std::chrono::steady_clock::now() < deadline) {
        store::expire_leases(*w.db, "test");
    }
    REQUIRE(w.state_of(refs[0]) == "unknown");
    // A resumes and sends anyway (its call was already in flight), twice for good measure.
    providers::PaymentOrder order;
    order.operation_id = op;
    order.payment_id = a[0].payment_id;
    order.merchant_reference = refs[0];
    order.amount = Money{2500, "EUR"};
    order.payment_method = "pm_card_visa";
    CHECK(provider->submit(order).outcome == providers::Outcome::succeeded);
    CHECK(provider->submit(order).outcome == providers::Outcome::succeeded);
    CHECK_FALSE(store::settle_attempt(*w.db, a[0],
                                      store::AttemptResult{"succeeded", 200, "", std::nullopt, ""},
                                      store::Settlement{PaymentState::succeeded, {}, {}, {}}));
    CHECK(w.state_of(refs[0]) == "unknown"); // its write affected 0 rows
    CHECK(w.executions(op) == 1);
    CHECK(w.deliveries(op) <= 2);
}
