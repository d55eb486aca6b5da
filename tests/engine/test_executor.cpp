// The executor over the real PostgreSQL: claims, fenced settlement, expired leases. Each test uses
// a provider name of its own, so it claims only its own payments.
#include "core/crash_point.hpp"
#include "core/errors.hpp"
#include "engine/executor.hpp"
#include "services/intake.hpp"
#include "store/executor_store.hpp"
#include "tests/support/scripted_provider.hpp"
#include "tests/support/test_db.hpp"
#include "tests/support/wait.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <latch>
#include <map>
#include <pqxx/pqxx>
#include <semaphore>
#include <set>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace payrecon;
using namespace payrecon::testing;
using providers::Outcome;

namespace {

struct World {
    std::unique_ptr<store::Db> db = connect();
    TestTenant tenant = make_tenant(*db);
    TestPrincipal writer = make_principal(*db, tenant);
    std::string provider_name = "s" + to_hex(random_bytes(8));
    ScriptedProvider provider{provider_name};

    // Creates `n` pending payments through the intake protocol; returns their operation IDs.
    std::vector<std::string> payments(int n) {
        IntakeService intake(*db, test_keys());
        for (int i = 0; i < n; ++i) {
            const std::string ref = unique_name("ord");
            const std::string body =
                R"({"amount": 1000, "currency": "EUR", "merchant_reference": ")" + ref +
                R"(", "provider": ")" + provider_name + R"(", "payment_method": "pm_card_visa"})";
            REQUIRE(intake.create_payment(writer.principal, "key-" + ref, body, "").status == 202);
        }
        std::vector<std::string> ops;
        for (int i = 0; i < n; ++i) {
            ops.push_back(
                query_value("SELECT operation_id FROM payments WHERE tenant_id = $1::uuid "
                            "ORDER BY created_at, payment_id OFFSET " +
                                std::to_string(i) + " LIMIT 1",
                            tenant.tenant_id));
        }
        return ops;
    }
    std::string state_of(const std::string& op) {
        return query_value("SELECT state FROM payments WHERE operation_id = $1", op);
    }
    long long in_state(const std::string& state) {
        return count_rows("payments", tenant.tenant_id, "state = '" + state + "'");
    }
    engine::ExecutorOptions options(std::chrono::milliseconds lease = std::chrono::seconds(30)) {
        engine::ExecutorOptions o;
        o.worker_id = "test-worker-" + to_hex(random_bytes(3));
        o.lease = lease;
        o.backoff.base = std::chrono::milliseconds(1);
        o.backoff.cap = std::chrono::milliseconds(1);
        return o;
    }
};

} // namespace

TEST_CASE("executor: the settlement decision for every outcome", "[engine][executor]") {
    const Backoff backoff{std::chrono::milliseconds(1000), std::chrono::milliseconds(60000)};
    struct Row {
        Outcome outcome;
        PaymentState to;
    };
    for (const Row& row : {Row{Outcome::succeeded, PaymentState::succeeded},
                           Row{Outcome::declined, PaymentState::failed},
                           Row{Outcome::not_sent, PaymentState::retry_scheduled},
                           Row{Outcome::pending, PaymentState::unknown},
                           Row{Outcome::unknown, PaymentState::unknown},
                           Row{Outcome::rejected, PaymentState::needs_review}}) {
        const auto s = engine::decide_settlement(row.outcome, 1, backoff, 0.0);
        INFO(providers::to_string(row.outcome));
        CHECK(s.to == row.to);
        CHECK(s.retry_in.has_value() == (row.to == PaymentState::retry_scheduled));
        CHECK(s.review_code.has_value() == (row.to == PaymentState::needs_review));
        CHECK(find_transition(PaymentState::processing, s.to).has_value());
    }
    // A rejected request is never failed: review request_rejected, with the provider's words.
    const auto rejected = engine::decide_settlement(
        Outcome::rejected, 1, backoff, 0.0,
        providers::Rejection{"parameter_unknown", "Received unknown parameter: off_session"});
    CHECK(rejected.to == PaymentState::needs_review);
    CHECK(rejected.review_code == "request_rejected");
    REQUIRE(rejected.reason);
    CHECK(rejected.reason->find("parameter_unknown: Received unknown parameter: off_session") !=
          std::string::npos);
    CHECK(rejected.reason->find("--as retry (same operation ID)") != std::string::npos);
    // A refusal of our credentials is no payment's fault: queued again, due at once.
    for (const int status : {401, 403}) {
        const auto refused = engine::decide_settlement(
            Outcome::rejected, 1, backoff, 0.0,
            providers::Rejection{"authentication", "Invalid API Key provided.", status});
        CHECK(refused.to == PaymentState::retry_scheduled);
        CHECK(refused.retry_in == std::chrono::milliseconds(0));
        CHECK_FALSE(refused.review_code);
        REQUIRE(refused.reason);
        CHECK(refused.reason->find("refused our credentials (HTTP " + std::to_string(status)) !=
              std::string::npos);
    }
    // Exponential, jittered into [0.5, 1.0) of the step, capped.
    CHECK(engine::decide_settlement(Outcome::not_sent, 1, backoff, 0.0).retry_in ==
          std::chrono::milliseconds(500));
    CHECK(engine::decide_settlement(Outcome::not_sent, 3, backoff, 0.0).retry_in ==
          std::chrono::milliseconds(2000));
    CHECK(engine::decide_settlement(Outcome::not_sent, 3, backoff, 0.99).retry_in <
          std::chrono::milliseconds(4000));
    CHECK(engine::decide_settlement(Outcome::not_sent, 40, backoff, 0.99).retry_in <=
          std::chrono::milliseconds(60000));
}

TEST_CASE("executor: a succeeded submit settles the payment, closes the attempt, emits an event",
          "[engine][executor][db]") {
    World w;
    const auto ops = w.payments(1);
    engine::Executor ex(*w.db, {&w.provider}, w.options());
    CHECK(ex.run_once() == 1);
    CHECK(w.state_of(ops[0]) == "succeeded");
    CHECK(w.provider.submits(ops[0]) == 1);
    CHECK(count_rows("payment_attempts", w.tenant.tenant_id,
                     "outcome = 'succeeded' AND finished_at IS NOT NULL") == 1);
    CHECK(count_rows("outbox", w.tenant.tenant_id, "event_type = 'payment.succeeded'") == 1);
    CHECK(query_value("SELECT provider_reference FROM payments WHERE operation_id = $1", ops[0]) ==
          "ref_" + ops[0]);
    CHECK(ex.run_once() == 0); // nothing left to claim
}

TEST_CASE("executor: not_sent is sent again later with the same operation ID, once",
          "[engine][executor][db]") {
    World w;
    const auto ops = w.payments(1);
    w.provider.script({Outcome::not_sent, Outcome::not_sent});
    engine::Executor ex(*w.db, {&w.provider}, w.options());
    CHECK(ex.run_once() == 1);
    CHECK(w.state_of(ops[0]) == "retry_scheduled");
    REQUIRE(wait_until([&] {
        ex.run_once();
        return w.state_of(ops[0]) == "succeeded";
    }));
    CHECK(w.provider.submits(ops[0]) == 3);
    CHECK(count_rows("payment_attempts", w.tenant.tenant_id) == 3);
    CHECK(count_rows("payment_attempts", w.tenant.tenant_id, "operation_id = '" + ops[0] + "'") ==
          3);
    CHECK(count_rows("outbox", w.tenant.tenant_id, "event_type = 'payment.succeeded'") == 1);
}

TEST_CASE("executor: an unknown outcome stays unknown and is never sent again by a worker",
          "[engine][executor][db]") {
    World w;
    const auto ops = w.payments(1);
    w.provider.script({Outcome::unknown});
    engine::Executor ex(*w.db, {&w.provider}, w.options());
    CHECK(ex.run_once() == 1);
    CHECK(ex.run_once() == 0);
    CHECK(w.state_of(ops[0]) == "unknown");
    CHECK(w.provider.submits(ops[0]) == 1);
    CHECK(count_rows("outbox", w.tenant.tenant_id, "event_type = 'payment.unknown'") == 1);
}

TEST_CASE("executor: declined fails the payment, pending leaves it to the reconciler",
          "[engine][executor][db]") {
    World w;
    const auto ops = w.payments(2);
    w.provider.script({Outcome::declined, Outcome::pending});
    engine::Executor ex(*w.db, {&w.provider}, w.options());
    CHECK(ex.run_once() == 2);
    CHECK(w.in_state("failed") == 1);
    CHECK(w.in_state("unknown") == 1);
    CHECK(w.provider.total_submits() == 2);
}

TEST_CASE("fencing: a worker paused past its lease cannot overwrite the takeover, its observation "
          "is kept",
          "[engine][fencing][db]") {
    World w;
    const auto ops = w.payments(1);
    const auto claims = store::claim_payments(*w.db, "slow-worker", std::chrono::milliseconds(1), 1,
                                              {w.provider_name});
    REQUIRE(claims.size() == 1);
    // The lease runs out while the worker is "paused"; the takeover makes the payment unknown.
    REQUIRE(wait_until([&] {
        return store::expire_leases(*w.db, "test") >= 1 || w.state_of(ops[0]) == "unknown";
    }));
    CHECK(w.state_of(ops[0]) == "unknown");
    const std::string generation =
        query_value("SELECT generation::text FROM payments WHERE operation_id = $1", ops[0]);
    CHECK(std::stoll(generation) == claims[0].generation + 1);
    // The paused worker wakes up with a success: its write affects nothing.
    store::AttemptResult seen{"succeeded", 200, "", std::string("pi_late"), "late answer"};
    CHECK_FALSE(store::settle_attempt(*w.db, claims[0], seen,
                                      store::Settlement{PaymentState::succeeded, {}, {}, {}}));
    CHECK(w.state_of(ops[0]) == "unknown");
    CHECK(query_value("SELECT generation::text FROM payments WHERE operation_id = $1", ops[0]) ==
          generation);
    // ... but what it saw is on record for the reconciler and the operators.
    CHECK(count_rows("payment_attempts", w.tenant.tenant_id,
                     "outcome = 'succeeded' AND provider_reference = 'pi_late'") == 1);
    CHECK(count_rows("outbox", w.tenant.tenant_id, "event_type = 'payment.succeeded'") == 0);
    CHECK(count_rows("audit_log", w.tenant.tenant_id, "action = 'payment.lease_expired'") == 1);
}

TEST_CASE("leases: an expired processing lease becomes unknown, never pending",
          "[engine][fencing][db]") {
    World w;
    w.payments(3);
    const auto claims = store::claim_payments(*w.db, "dead-worker", std::chrono::milliseconds(1),
                                              10, {w.provider_name});
    REQUIRE(claims.size() == 3);
    CHECK(w.in_state("processing") == 3);
    REQUIRE(wait_until([&] {
        store::expire_leases(*w.db, "test");
        return w.in_state("unknown") == 3;
    }));
    CHECK(w.in_state("pending") == 0);
    // Unknown payments are not claimable: only a lookup or an operator moves them.
    engine::Executor ex(*w.db, {&w.provider}, w.options());
    CHECK(ex.run_once() == 0);
    CHECK(w.provider.total_submits() == 0);
}

TEST_CASE("claims: workers claiming at once never claim one payment twice",
          "[engine][concurrency][db]") {
    World w;
    w.payments(120);
    constexpr int k_workers = 8;
    std::vector<std::vector<store::ClaimedPayment>> got(k_workers);
    std::latch ready(k_workers);
    std::vector<std::thread> threads;
    for (int i = 0; i < k_workers; ++i) {
        threads.emplace_back([&, i] {
            store::Db db(database_url());
            ready.arrive_and_wait();
            for (;;) {
                auto batch = store::claim_payments(db, "w" + std::to_string(i),
                                                   std::chrono::seconds(30), 7, {w.provider_name});
                if (batch.empty()) {
                    break;
                }
                auto& mine = got[static_cast<std::size_t>(i)];
                mine.insert(mine.end(), batch.begin(), batch.end());
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    std::set<std::string> ids;
    std::size_t total = 0;
    for (const auto& mine : got) {
        total += mine.size();
        for (const auto& c : mine) {
            ids.insert(c.payment_id);
        }
    }
    CHECK(total == 120);
    CHECK(ids.size() == 120);
    CHECK(w.in_state("processing") == 120);
    CHECK(count_rows("payment_attempts", w.tenant.tenant_id) == 120);
}

TEST_CASE("executor: a worker killed after the provider answered, before the commit, leaves the "
          "payment unknown once its lease expires",
          "[engine][crash][db]") {
    World w;
    const auto ops = w.payments(1);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        arm_crash_point("executor.after_submit");
        try {
            store::Db db(database_url());
            engine::Executor ex(db, {&w.provider}, w.options(std::chrono::milliseconds(1500)));
            ex.run_once();
        } catch (...) {
        }
        ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);
    CHECK(w.state_of(ops[0]) == "processing");
    REQUIRE(wait_until([&] {
        store::expire_leases(*w.db, "test");
        return w.state_of(ops[0]) == "unknown";
    }));
    // The attempt row opened by the claim stays: outcome unknown, never finished.
    CHECK(count_rows("payment_attempts", w.tenant.tenant_id,
                     "outcome = 'unknown' AND finished_at IS NULL") == 1);
}

TEST_CASE(
    "fencing: a payment of the batch taken over before its call is not sent: no provider call, "
    "the attempt recorded as not sent, the takeover untouched",
    "[engine][fencing][db]") {
    World w;
    const auto ops = w.payments(2);
    // While the first payment is at the provider, the second's lease runs out (the worker was
    // "paused") and another worker takes it over.
    w.provider.on_submit = [&](const providers::PaymentOrder& order) {
        if (order.operation_id == ops[0]) {
            exec_sql("UPDATE payments SET lease_expires_at = now() - interval '1 second' "
                     "WHERE operation_id = '" +
                     ops[1] + "'");
            store::expire_leases(*connect(), "takeover"); // (another test's expiry may be first)
            REQUIRE(w.state_of(ops[1]) == "unknown");
        }
    };
    engine::Executor ex(*w.db, {&w.provider}, w.options());
    CHECK(ex.run_once() == 2);
    CHECK(w.provider.submits(ops[0]) == 1);
    CHECK(w.provider.submits(ops[1]) == 0);
    CHECK(ex.counts().attempted == 1);
    CHECK(ex.counts().not_called == 1);
    CHECK(ex.counts().fenced_out == 1);
    CHECK(w.state_of(ops[0]) == "succeeded");
    CHECK(w.state_of(ops[1]) == "unknown"); // the takeover's state, not overwritten
    CHECK(count_rows("payment_attempts", w.tenant.tenant_id,
                     "outcome = 'not_sent' AND error_class = 'not_sent:claim_not_held'") == 1);
}

TEST_CASE("leases: a claim whose lease ran out before its call, with no takeover, is not sent and "
          "is due again",
          "[engine][fencing][db]") {
    World w;
    const auto ops = w.payments(2);
    w.provider.on_submit = [&](const providers::PaymentOrder& order) {
        if (order.operation_id == ops[0]) {
            exec_sql("UPDATE payments SET lease_expires_at = now() - interval '1 second' "
                     "WHERE operation_id = '" +
                     ops[1] + "'");
        }
    };
    engine::Executor ex(*w.db, {&w.provider}, w.options());
    CHECK(ex.run_once() == 2);
    CHECK(w.provider.submits(ops[1]) == 0);
    CHECK(ex.counts().not_called == 1);
    // Tests share the database: another test's lease expiry may take the expired claim over in
    // the moment before the renewal refused it; then this executor's write was fenced out.
    if (ex.counts().fenced_out == 1) {
        CHECK(w.state_of(ops[1]) == "unknown");
        return;
    }
    CHECK(w.state_of(ops[1]) == "retry_scheduled");
    // Sent on the next run, once.
    w.provider.on_submit = nullptr;
    REQUIRE(wait_until([&] { return ex.run_once() == 1; }));
    CHECK(w.provider.submits(ops[1]) == 1);
    CHECK(w.state_of(ops[1]) == "succeeded");
}

namespace {

// The lease end of `operation_id`'s payment, in microseconds since the epoch.
long long lease_end_us(const std::string& operation_id) {
    return std::stoll(query_value(
        "SELECT (extract(epoch FROM lease_expires_at) * 1000000)::bigint::text FROM payments "
        "WHERE operation_id = $1",
        operation_id));
}

} // namespace

TEST_CASE("leases: while what is left of the batch's leases covers this call and the next, the "
          "fence before each call writes nothing, and each call is given the lease's end as its "
          "deadline",
          "[engine][fencing][db]") {
    World w;
    w.provider.capabilities().worst_case_call = std::chrono::seconds(2); // renew below 5 s
    const auto ops = w.payments(3);
    std::vector<long long> last_lease;
    w.provider.on_submit = [&](const providers::PaymentOrder&) {
        last_lease.push_back(lease_end_us(ops[2]));
    };
    engine::Executor ex(*w.db, {&w.provider}, w.options());
    const auto before = std::chrono::steady_clock::now();
    CHECK(ex.run_once() == 3);
    REQUIRE(last_lease.size() == 3);
    // The claim's lease, never renewed: the fences only read.
    CHECK(last_lease[0] == last_lease[1]);
    CHECK(last_lease[1] == last_lease[2]);
    for (const auto& deadline : w.provider.deadlines()) {
        REQUIRE(deadline.has_value());
        // The 30 s lease less the 1 s margin, from the moment the claim was made.
        CHECK(*deadline > before);
        CHECK(*deadline <= before + std::chrono::seconds(29) + std::chrono::milliseconds(500));
    }
    CHECK(w.state_of(ops[2]) == "succeeded");
}

TEST_CASE("leases: when what is left of the batch's leases would not cover this call and the "
          "next one's worst case, the fence renews the rest of the batch before each call",
          "[engine][fencing][db]") {
    World w;
    // 2 x 15 s + the 1 s margin is more than the 30 s lease: every fence with a next call to
    // cover renews.
    w.provider.capabilities().worst_case_call = std::chrono::seconds(15);
    const auto ops = w.payments(3);
    std::vector<long long> last_lease;
    w.provider.on_submit = [&](const providers::PaymentOrder&) {
        last_lease.push_back(lease_end_us(ops[2]));
    };
    engine::Executor ex(*w.db, {&w.provider}, w.options());
    CHECK(ex.run_once() == 3);
    REQUIRE(last_lease.size() == 3);
    // Renewed before the first and the second call; the last call, with no next one to cover,
    // needs 16 s of the 30 s just renewed: its fence only reads.
    CHECK(last_lease[0] < last_lease[1]);
    CHECK(last_lease[1] == last_lease[2]);
    CHECK(w.provider.submits(ops[2]) == 1);
    CHECK(ex.counts().attempted == 3);
    CHECK(ex.counts().not_called == 0);

    // A batch whose leases were cut short while its first payment was at the provider (the
    // worker was slow): the fence renews them instead of letting them lapse, and all are sent.
    World v;
    v.provider.capabilities().worst_case_call = std::chrono::seconds(2); // renew below 5 s
    const auto short_ops = v.payments(3);
    v.provider.on_submit = [&](const providers::PaymentOrder& order) {
        if (order.operation_id == short_ops[0]) {
            exec_sql("UPDATE payments SET lease_expires_at = now() + interval '4 seconds' "
                     "WHERE operation_id IN ('" +
                     short_ops[1] + "', '" + short_ops[2] + "')");
        }
    };
    engine::Executor short_ex(*v.db, {&v.provider}, v.options());
    const auto cut = std::chrono::steady_clock::now();
    CHECK(short_ex.run_once() == 3);
    CHECK(short_ex.counts().attempted == 3);
    for (const auto& op : short_ops) {
        CHECK(v.provider.submits(op) == 1);
        CHECK(v.state_of(op) == "succeeded");
    }
    // The last two calls' deadlines come from the renewed 30 s lease, not the 4 s left.
    const auto deadlines = v.provider.deadlines();
    REQUIRE(deadlines.size() == 3);
    CHECK(*deadlines[2] > cut + std::chrono::seconds(20));
}

TEST_CASE("leases: an executor whose lease cannot cover the slowest call's worst case plus the "
          "margin is refused",
          "[engine][fencing][db]") {
    World w;
    w.provider.capabilities().worst_case_call = std::chrono::seconds(12);
    CHECK_THROWS_AS(engine::Executor(*w.db, {&w.provider}, w.options(std::chrono::seconds(13))),
                    ConfigError);
    CHECK_NOTHROW(engine::Executor(*w.db, {&w.provider}, w.options(std::chrono::seconds(14))));
}

TEST_CASE("credential gate: however many threads call an account whose credentials are unproven, "
          "a refusal costs one call and a proof lets the rest go at once",
          "[engine][executor][credentials]") {
    for (const bool refuse : {true, false}) {
        INFO((refuse ? "refused" : "proven"));
        engine::CredentialGate gate(
            std::map<std::string, std::string>{{"stripe", "the API key in STRIPE_API_KEY"}});
        std::atomic<int> calls{0};
        std::atomic<int> turned_away{0};
        std::latch start(16);
        std::vector<std::thread> threads;
        for (int i = 0; i < 16; ++i) {
            threads.emplace_back([&, i] {
                start.arrive_and_wait();
                auto pass = gate.enter("stripe");
                if (!pass) {
                    ++turned_away;
                    return;
                }
                ++calls;
                engine::CredentialRefusal r;
                r.payment_id = "p" + std::to_string(i);
                pass->answered(true, refuse ? 401 : 200, r);
            });
        }
        for (auto& t : threads) {
            t.join();
        }
        if (refuse) {
            CHECK(calls == 1);
            CHECK(turned_away == 15);
            CHECK(gate.refused("stripe"));
            REQUIRE(gate.refusals().size() == 1);
            CHECK(gate.refusals()[0].check == "the API key in STRIPE_API_KEY");
            CHECK(gate.refusals()[0].http_status == 401);
        } else {
            CHECK(calls == 16);
            CHECK(turned_away == 0);
            CHECK_FALSE(gate.refused("stripe"));
        }
        CHECK_FALSE(gate.refused("adyen")); // accounts are apart
    }
    // A call that never reached the provider proves nothing: the next one still goes alone.
    engine::CredentialGate gate;
    gate.enter("stripe")->answered(false, 0);
    auto next = gate.enter("stripe");
    REQUIRE(next);
    next->answered(true, 403);
    CHECK(gate.refused("stripe"));
    CHECK_FALSE(gate.enter("stripe"));
}

TEST_CASE("fence before the slot: a wait for a call slot that leaves too little of the lease "
          "fences again in the slot, renewing the lease, and then calls",
          "[engine][fencing][db]") {
    World w;
    w.provider.capabilities().worst_case_call = std::chrono::seconds(1);
    const auto ops = w.payments(1);
    std::counting_semaphore<> slots(1);
    slots.acquire(); // every slot taken: the executor fences, then waits
    auto options = w.options(std::chrono::seconds(4));
    options.call_slots = &slots;
    long long lease_at_call = 0;
    w.provider.on_submit = [&](const providers::PaymentOrder&) {
        lease_at_call = lease_end_us(ops[0]);
    };
    engine::Executor ex(*w.db, {&w.provider}, options);
    std::thread runner([&] { ex.run_once(); });
    const long long claimed_until = [&] {
        REQUIRE(wait_until([&] { return w.state_of(ops[0]) == "processing"; }));
        return lease_end_us(ops[0]);
    }();
    // The fence proved 4 s; the slot is given back once less than the call's worst case plus
    // the margin (2 s) is left of it.
    REQUIRE(wait_until([&] {
        return query_value("SELECT (lease_expires_at - clock_timestamp() < interval '1.8 seconds')"
                           "::text FROM payments WHERE operation_id = $1",
                           ops[0]) == "true";
    }));
    CHECK(w.provider.total_submits() == 0);
    slots.release();
    runner.join();
    CHECK(w.provider.submits(ops[0]) == 1);
    CHECK(w.state_of(ops[0]) == "succeeded");
    // The second fence renewed the lease before the call: past the end the first one proved.
    CHECK(lease_at_call > claimed_until + 1000000);
    CHECK(count_rows("payment_attempts", w.tenant.tenant_id, "outcome = 'succeeded'") == 1);
}

TEST_CASE("fence before the slot: a claim taken over while its executor waited for a slot is "
          "not sent when the slot comes",
          "[engine][fencing][db]") {
    World w;
    w.provider.capabilities().worst_case_call = std::chrono::seconds(1);
    const auto ops = w.payments(1);
    std::counting_semaphore<> slots(1);
    slots.acquire();
    auto options = w.options(std::chrono::seconds(3));
    options.call_slots = &slots;
    engine::Executor ex(*w.db, {&w.provider}, options);
    std::thread runner([&] { ex.run_once(); });
    REQUIRE(wait_until([&] { return w.state_of(ops[0]) == "processing"; }));
    // The lease ends while the executor waits; the takeover makes the payment unknown (on a
    // connection of its own: the executor's is in use on its thread).
    const auto other = connect();
    REQUIRE(wait_until(
        [&] {
            store::expire_leases(*other, "test");
            return w.state_of(ops[0]) == "unknown";
        },
        std::chrono::seconds(20)));
    slots.release();
    runner.join();
    CHECK(w.provider.total_submits() == 0);
    CHECK(w.state_of(ops[0]) == "unknown");
    CHECK(count_rows("payment_attempts", w.tenant.tenant_id,
                     "outcome = 'not_sent' AND error_class = 'not_sent:claim_not_held'") == 1);
    CHECK(ex.counts().not_called == 1);
}

TEST_CASE("settlement: several charges settled in one statement, each at its own claim's "
          "generation, with its attempt and its event",
          "[engine][executor][db]") {
    World w;
    const auto ops = w.payments(5);
    auto claims = store::claim_payments(*w.db, "group-worker", std::chrono::seconds(30), 5,
                                        {w.provider_name});
    REQUIRE(claims.size() == 5);
    // The last claim is taken over: its settlement is fenced out, its observation kept.
    exec_sql("UPDATE payments SET lease_expires_at = now() - interval '1 second' WHERE "
             "payment_id = '" +
             claims[4].payment_id + "'");
    // Expired by this call, or by another test's nightly before it (expiry is global).
    store::expire_leases(*w.db, "test");
    REQUIRE(query_value("SELECT state FROM payments WHERE payment_id = $1::uuid",
                        claims[4].payment_id) == "unknown");
    const std::vector<store::AttemptResult> results = {
        {"succeeded", 200, "", std::string("pi_1"), ""},
        {"declined", 402, "http_402", std::nullopt, "card_declined"},
        {"not_sent", std::nullopt, "not_sent:curl_7", std::nullopt, "refused \xff bytes"},
        {"rejected", 400, "http_400", std::nullopt, "parameter_invalid"},
        {"succeeded", 200, "", std::string("pi_5"), ""}};
    const std::vector<store::Settlement> settlements = {
        {PaymentState::succeeded, {}, {}, {}},
        {PaymentState::failed, {}, {}, {}},
        {PaymentState::retry_scheduled, std::chrono::milliseconds(60000), std::string("later"), {}},
        {PaymentState::needs_review, {}, std::string("rejected"), std::string("request_rejected")},
        {PaymentState::succeeded, {}, {}, {}}};
    std::vector<store::SettleRequest> requests;
    for (std::size_t i = 0; i < claims.size(); ++i) {
        requests.push_back({&claims[i], &results[i], &settlements[i]});
    }
    const auto settled = store::settle_attempts(*w.db, requests);
    CHECK(settled == std::vector<bool>{true, true, true, true, false});
    const auto state = [&](const store::ClaimedPayment& c) {
        return query_value("SELECT state FROM payments WHERE payment_id = $1::uuid", c.payment_id);
    };
    CHECK(state(claims[0]) == "succeeded");
    CHECK(state(claims[1]) == "failed");
    CHECK(state(claims[2]) == "retry_scheduled");
    CHECK(state(claims[3]) == "needs_review");
    CHECK(state(claims[4]) == "unknown");
    CHECK(query_value("SELECT provider_reference FROM payments WHERE payment_id = $1::uuid",
                      claims[0].payment_id) == "pi_1");
    CHECK(query_value("SELECT review_code FROM payments WHERE payment_id = $1::uuid",
                      claims[3].payment_id) == "request_rejected");
    CHECK(count_rows("payments", w.tenant.tenant_id,
                     "state = 'retry_scheduled' AND next_attempt_at > now() + interval '50 "
                     "seconds'") == 1);
    // Every attempt finished, the fenced-out one's too; an event for each payment settled.
    CHECK(count_rows("payment_attempts", w.tenant.tenant_id, "finished_at IS NOT NULL") == 5);
    CHECK(count_rows("payment_attempts", w.tenant.tenant_id,
                     "provider_reference = 'pi_5' AND outcome = 'succeeded'") == 1);
    CHECK(count_rows("payment_attempts", w.tenant.tenant_id,
                     "detail = 'refused \xef\xbf\xbd bytes'") == 1);
    CHECK(count_rows("outbox", w.tenant.tenant_id,
                     "event_type IN ('payment.succeeded', 'payment.failed', "
                     "'payment.retry_scheduled', 'payment.needs_review')") == 4);
    CHECK(count_rows("outbox", w.tenant.tenant_id,
                     "aggregate_id = '" + claims[4].payment_id +
                         "' AND event_type = 'payment.succeeded'") == 0);
    // Charges only, each once.
    CHECK_THROWS_AS(store::settle_attempts(*w.db, {requests[0], requests[0]}), std::logic_error);
    CHECK(store::settle_attempts(*w.db, {}).empty());
}

TEST_CASE("settle group: settlements that arrive while one is written are written together in "
          "the next statement, each caller told its own outcome",
          "[engine][executor][db]") {
    World w;
    const auto ops = w.payments(8);
    auto claims = store::claim_payments(*w.db, "group-worker", std::chrono::seconds(60), 8,
                                        {w.provider_name});
    REQUIRE(claims.size() == 8);
    engine::SettleGroup group;
    const store::AttemptResult ok{"succeeded", 200, "", std::string("pi_g"), ""};
    const store::Settlement to_succeeded{PaymentState::succeeded, {}, {}, {}};
    // The first settlement's write waits on a row lock this test holds, so that the others
    // arrive while it is in progress.
    pqxx::connection blocker(database_url());
    pqxx::work hold(blocker);
    hold.exec("SELECT 1 FROM payments WHERE payment_id = '" + claims[0].payment_id +
              "' FOR UPDATE");
    std::vector<int> outcome(8, -1);
    std::vector<std::thread> threads;
    const auto settle = [&](std::size_t i) {
        auto db = connect();
        outcome[i] = group.settle(*db, claims[i], ok, to_succeeded) ? 1 : 0;
    };
    threads.emplace_back(settle, 0);
    REQUIRE(wait_until([&] {
        return query_value("SELECT count(*)::text FROM pg_stat_activity WHERE wait_event_type = "
                           "'Lock' AND datname = current_database() AND query LIKE $1",
                           "%jsonb_to_recordset%") != "0";
    }));
    for (std::size_t i = 1; i < 8; ++i) {
        threads.emplace_back(settle, i);
    }
    // And a stale claim of one of them (an earlier generation, as a paused thread of the same
    // worker would hold): never in one statement with the newer claim, and fenced out.
    store::ClaimedPayment stale = claims[1];
    --stale.generation;
    int stale_outcome = -1;
    REQUIRE(wait_until([&] { return group.queued() == 7; }));
    threads.emplace_back([&] {
        auto db = connect();
        stale_outcome = group.settle(*db, stale, ok, to_succeeded) ? 1 : 0;
    });
    REQUIRE(wait_until([&] { return group.queued() == 8; }));
    hold.commit();
    for (auto& t : threads) {
        t.join();
    }
    CHECK(outcome == std::vector<int>(8, 1));
    CHECK(stale_outcome == 0);
    CHECK(group.counts().statements == 3);
    CHECK(group.counts().settlements == 9);
    CHECK(group.counts().largest == 7);
    CHECK(w.in_state("succeeded") == 8);
    CHECK(count_rows("outbox", w.tenant.tenant_id, "event_type = 'payment.succeeded'") == 8);
}
