#include "core/crash_point.hpp"
#include "engine/worker.hpp"
#include "services/intake.hpp"
#include "tests/support/scripted_provider.hpp"
#include "tests/support/test_db.hpp"
#include "tests/support/wait.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <sstream>
#include <thread>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

engine::ProviderFactory factory_for(ScriptedProvider& shared) {
    return [&shared] {
        std::vector<std::unique_ptr<providers::Provider>> v;
        v.push_back(std::make_unique<SharedScriptedProvider>(shared));
        return v;
    };
}

void create_payments(store::Db& db, const TestPrincipal& writer, const std::string& provider,
                     int n) {
    IntakeService intake(db, test_keys());
    for (int i = 0; i < n; ++i) {
        const std::string ref = unique_name("w");
        REQUIRE(intake
                    .create_payment(
                        writer.principal, ref,
                        R"({"amount": 700, "currency": "USD", "merchant_reference": ")" + ref +
                            R"(", "provider": ")" + provider + R"(", "payment_method": "pm_x"})",
                        "")
                    .status == 202);
    }
}

} // namespace

TEST_CASE("worker: 4 threads process every due payment once and stop when nothing is due",
          "[engine][worker][db]") {
    auto db = connect();
    const auto tenant = make_tenant(*db);
    const auto writer = make_principal(*db, tenant);
    ScriptedProvider provider("s" + to_hex(random_bytes(8)));
    create_payments(*db, writer, provider.name(), 60);

    engine::WorkerOptions o;
    o.database_url = database_url();
    o.worker_id = "test-worker";
    o.concurrency = 4;
    o.batch = 3;
    o.once = true;
    std::ostringstream log;
    engine::Worker worker(o, factory_for(provider), log);
    CHECK(worker.run() == 60);
    CHECK_FALSE(worker.database_failed());
    CHECK(provider.total_submits() == 60);
    CHECK(count_rows("payments", tenant.tenant_id, "state = 'succeeded'") == 60);
    CHECK(count_rows("payment_attempts", tenant.tenant_id) == 60);
    CHECK(count_rows("outbox", tenant.tenant_id, "event_type = 'payment.succeeded'") == 60);
    CHECK(log.str().find("\"attempted\":60") != std::string::npos);
}

TEST_CASE("worker: stop() ends an idle worker promptly", "[engine][worker][db]") {
    ScriptedProvider provider("s" + to_hex(random_bytes(8)));
    engine::WorkerOptions o;
    o.database_url = database_url();
    o.worker_id = "idle-worker";
    o.concurrency = 2;
    // Were stop() not to wake the idle wait, this test would hang until ctest's timeout.
    o.idle_poll = std::chrono::hours(1);
    std::ostringstream log;
    engine::Worker worker(o, factory_for(provider), log);
    std::thread runner([&] { CHECK(worker.run() == 0); });
    worker.stop();
    runner.join();
    CHECK(log.str().find("worker_stopped") != std::string::npos);
}

TEST_CASE("worker: with --once and no database it reports the failure", "[engine][worker]") {
    ScriptedProvider provider("s" + to_hex(random_bytes(8)));
    engine::WorkerOptions o;
    o.database_url = "postgresql:///x?host=/nonexistent-dir&connect_timeout=2";
    o.worker_id = "lost-worker";
    o.concurrency = 1;
    o.once = true;
    std::ostringstream log;
    engine::Worker worker(o, factory_for(provider), log);
    CHECK(worker.run() == 0);
    CHECK(worker.database_failed());
    CHECK(log.str().find("database_unavailable") != std::string::npos);
}

TEST_CASE("worker: at most --concurrency provider calls are in flight while its other threads "
          "claim and settle beside them, and every payment is sent once",
          "[engine][worker][db]") {
    auto db = connect();
    const auto tenant = make_tenant(*db);
    const auto writer = make_principal(*db, tenant);
    ScriptedProvider provider("s" + to_hex(random_bytes(8)));
    create_payments(*db, writer, provider.name(), 30);
    std::atomic<int> in_flight{0};
    std::atomic<int> most{0};
    provider.on_submit = [&](const providers::PaymentOrder&) {
        const int now = ++in_flight;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        --in_flight;
    };
    engine::WorkerOptions o;
    o.database_url = database_url();
    o.worker_id = "slots-worker";
    o.concurrency = 2;
    o.threads = 6;
    o.batch = 1;
    o.once = true;
    std::ostringstream log;
    engine::Worker worker(o, factory_for(provider), log);
    CHECK(worker.run() == 30);
    CHECK(most.load() <= 2);
    CHECK(most.load() == 2); // six threads with payments to send: both slots were used at once
    CHECK(provider.total_submits() == 30);
    CHECK(count_rows("payments", tenant.tenant_id, "state = 'succeeded'") == 30);
    CHECK(count_rows("payment_attempts", tenant.tenant_id,
                     "outcome = 'succeeded' AND finished_at IS NOT NULL") == 30);
}

TEST_CASE("worker: an unexpected error in a thread is logged and the thread goes on, instead of "
          "std::terminate with claims held",
          "[engine][worker][db][regression]") {
    auto db = connect();
    const auto tenant = make_tenant(*db);
    const auto writer = make_principal(*db, tenant);
    ScriptedProvider provider("s" + to_hex(random_bytes(8)));
    create_payments(*db, writer, provider.name(), 3);
    // What libpq reports as the server goes down, thrown where no store call translates it.
    arm_crash_point("executor.before_fence",
                    [] { throw std::runtime_error("server closed the connection unexpectedly"); });
    engine::WorkerOptions o;
    o.database_url = database_url();
    o.worker_id = "erring-worker";
    o.concurrency = 1;
    o.batch = 1;
    o.idle_poll = std::chrono::milliseconds(20);
    std::ostringstream log;
    engine::Worker worker(o, factory_for(provider), log);
    std::thread runner([&] { worker.run(); });
    CHECK(testing::wait_until(
        [&] { return count_rows("payments", tenant.tenant_id, "state = 'succeeded'") >= 2; },
        std::chrono::seconds(30), std::chrono::milliseconds(20)));
    worker.stop();
    runner.join();
    arm_crash_point("");
    // The erring claim waits for its lease to end (then the reconciler has it); the others were
    // sent.
    CHECK(count_rows("payments", tenant.tenant_id, "state = 'succeeded'") == 2);
    CHECK(count_rows("payments", tenant.tenant_id, "state = 'processing'") == 1);
    CHECK(provider.total_submits() == 2);
    CHECK(log.str().find("\"event\":\"worker_error\"") != std::string::npos);
    CHECK(log.str().find("server closed the connection unexpectedly") != std::string::npos);
    CHECK(log.str().find("worker_stopped") != std::string::npos);
}
