// The executor with the real Stripe adapter over real HTTP on loopback, against the fake provider
// with fault injection. Counts come from the provider's own ledger: executions (charges made) and
// deliveries (requests that reached it).
#include "engine/executor.hpp"
#include "providers/registry.hpp"
#include "services/intake.hpp"
#include "store/executor_store.hpp"
#include "tests/execution/world.hpp"
#include "tests/fake_provider/fake_provider.hpp"
#include "tests/support/test_db.hpp"
#include "tests/support/wait.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

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
    // Sent again each time the listener is back (it reopens after 3 s).
    CHECK(testing::wait_until(
        [&] {
            ex.run_once();
            return w.state_of(refs[0]) == "succeeded";
        },
        std::chrono::seconds(20), std::chrono::milliseconds(50)));
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

TEST_CASE("outbox: every change of a payment writes one event of one shape, its payload the "
          "payment's row as that change wrote it",
          "[execution][db][outbox]") {
    // Four writers (intake, the executor's settlement, lease expiry, the reconciler's and
    // operators' decisions) built their payloads apart and with different fields.
    World w(next({fake::Fault::execute_then_hang}));
    const auto refs = w.payments(3);
    auto provider = providers::create_provider(w.config);
    engine::ExecutorOptions o = w.options();
    o.batch = 1;
    engine::Executor ex(*w.db, {provider.get()}, o);
    CHECK(ex.run_once() == 1); // the first: executed, the answer lost -> unknown
    CHECK(ex.run_once() == 1); // the second: succeeded
    // The third: claimed by a worker that died, its lease past.
    pqxx::connection c(database_url());
    pqxx::work tx(c);
    tx.exec_params("UPDATE payments SET state = 'processing', lease_owner = 'gone', "
                   "lease_expires_at = now() - interval '1 second' "
                   "WHERE tenant_id = $1::uuid AND state = 'pending'",
                   w.tenant.tenant_id);
    tx.commit();
    // Expiry is for every tenant: tests running beside this one may have leases past too.
    CHECK(store::expire_leases(*w.db, "test") >= 1);
    CHECK(w.state_of(refs[2]) == "unknown");

    const std::set<std::string> keys = {"payment_id",
                                        "tenant_id",
                                        "operation_id",
                                        "state",
                                        "amount",
                                        "currency",
                                        "merchant_reference",
                                        "provider",
                                        "provider_reference",
                                        "generation",
                                        "reason",
                                        "review_code",
                                        "created_at",
                                        "updated_at"};
    pqxx::read_transaction rt(c);
    const auto events = rt.exec_params(
        "SELECT o.event_type, o.payload::text, p.merchant_reference, p.state FROM outbox o "
        "JOIN payments p ON p.tenant_id = o.tenant_id AND p.payment_id = o.aggregate_id "
        "WHERE o.tenant_id = $1::uuid ORDER BY o.seq",
        w.tenant.tenant_id);
    std::map<std::string, std::vector<std::string>> types; // per merchant reference
    for (const auto& row : events) {
        const auto payload = nlohmann::json::parse(row[1].as<std::string>());
        INFO(row[0].as<std::string>() << ": " << payload.dump());
        std::set<std::string> have;
        for (const auto& [k, v] : payload.items()) {
            have.insert(k);
        }
        CHECK(have == keys);
        CHECK(payload["merchant_reference"] == row[2].as<std::string>());
        CHECK(payload["tenant_id"] == w.tenant.tenant_id);
        CHECK(payload["amount"] == 2500);
        CHECK(payload["currency"] == "EUR");
        CHECK(payload["created_at"].get<std::string>().ends_with("Z"));
        types[row[2].as<std::string>()].push_back(row[0].as<std::string>());
        if (row[0].as<std::string>() != "payment.created") {
            // The state the event names is the one its payload carries.
            CHECK(row[0].as<std::string>() == "payment." + payload["state"].get<std::string>());
        }
    }
    CHECK(types[refs[0]] == std::vector<std::string>{"payment.created", "payment.unknown"});
    CHECK(types[refs[1]] == std::vector<std::string>{"payment.created", "payment.succeeded"});
    CHECK(types[refs[2]] == std::vector<std::string>{"payment.created", "payment.unknown"});
    // The succeeded event carries the provider's reference as the row has it.
    CHECK(query_value("SELECT payload->>'provider_reference' FROM outbox WHERE event_type = "
                      "'payment.succeeded' AND aggregate_id = $1::uuid",
                      w.payment_id_of(refs[1])) ==
          query_value("SELECT provider_reference FROM payments WHERE payment_id = $1::uuid",
                      w.payment_id_of(refs[1])));
    // Lease expiry says why, and the generation it moved to.
    CHECK(query_value("SELECT payload->>'reason' FROM outbox WHERE event_type = 'payment.unknown' "
                      "AND aggregate_id = $1::uuid",
                      w.payment_id_of(refs[2])) ==
          "the worker's lease expired during the provider call");
    CHECK(query_value("SELECT payload->>'generation' FROM outbox WHERE event_type = "
                      "'payment.unknown' AND aggregate_id = $1::uuid",
                      w.payment_id_of(refs[2])) ==
          query_value("SELECT generation FROM payments WHERE payment_id = $1::uuid",
                      w.payment_id_of(refs[2])));
}
