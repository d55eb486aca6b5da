// A worker paused mid-batch (SIGSTOP) and resumed (SIGCONT), as real processes: `payrecon worker`
// against the in-process fake provider (300 ms per call), `payrecon nightly` and `payrecon review
// resolve` acting while it is stopped. What the stale worker may do after it resumes is counted in
// the provider's ledger: a provider call is made only after a fenced statement proved, immediately
// before it, that the claim is still the worker's (DESIGN section 6, and section 12's rows "worker
// paused past its lease, resumes after takeover" and "worker paused, operator resolves failed,
// worker resumes"). Each test has a scratch database: nightly takes over every expired lease.
#include "tests/support/operated.hpp"
#include "tests/support/wait.hpp"

#include <catch2/catch.hpp>
#include <thread>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// One paused-worker scenario: 4 payments, each provider call taking 300 ms, a 3 s lease
// (the calls' worst case is 0.2 s connect + 1 s total, plus the 1 s margin).
struct PausedWorker {
    MigratedScratch scratch;
    Operated w{scratch.url()};
    std::vector<std::string> refs;
    std::unique_ptr<Payrecon> worker;

    explicit PausedWorker(bool lookup) {
        nlohmann::json extra = {{"connect_timeout_ms", 200}, {"timeout_ms", 1000}};
        if (!lookup) {
            extra["capabilities"] = {{"lookup", false}};
        }
        w.write_config(extra);
        auto faults = w.fake->faults();
        faults.latency = std::chrono::milliseconds(300);
        w.fake->set_faults(faults);
        refs = w.payments(4);
        worker =
            w.start({"worker", "--once", "--concurrency", "1", "--batch", "4", "--lease", "3s"}, {},
                    ProcessGroup::own); // it is stopped: see ProcessGroup
    }

    int deliveries() { return w.fake->ledger()["deliveries"].get<int>(); }

    // Stops the worker while its second call is at the provider: the first payment is settled,
    // the second in flight, the last two claimed and never sent.
    void stop_during_second_call() {
        REQUIRE(wait_until([&] { return deliveries() >= 2; }, std::chrono::seconds(30)));
        worker->signal(SIGSTOP);
        REQUIRE(deliveries() == 2);
    }

    // Waits until the database's clock says the three claims still held have expired.
    void await_lease_expiry() {
        REQUIRE(wait_until(
            [&] {
                return w.count("payments", "state = 'processing' AND lease_expires_at < now()") ==
                       3;
            },
            std::chrono::seconds(30)));
    }

    Run resume() {
        worker->signal(SIGCONT);
        return worker->wait();
    }
};

} // namespace

TEST_CASE("fencing: a worker paused past its lease while an operator resolved its unsent payments "
          "as failed makes no call when it resumes, and they stay failed",
          "[execution][db][processes][fencing]") {
    PausedWorker p(false); // no lookup: the nightly sends every taken-over payment to review
    p.stop_during_second_call();
    p.await_lease_expiry();

    const Run nightly = p.w.payrecon({"nightly", "--no-statement"});
    INFO(nightly.all());
    CHECK(nightly.exit_code == 3); // three payments in review
    for (int i = 1; i < 4; ++i) {
        REQUIRE(p.w.state_of(p.refs[static_cast<std::size_t>(i)]) == "needs_review");
    }
    // The operator checked the provider's dashboard: the last two were never charged.
    for (int i = 2; i < 4; ++i) {
        const std::string& ref = p.refs[static_cast<std::size_t>(i)];
        const Run resolved =
            p.w.payrecon({"review", "resolve", p.w.payment_id_of(ref), "--generation",
                          std::to_string(p.w.generation_of(ref)), "--as", "failed", "--note",
                          "no charge at the provider for this operation ID"});
        INFO(resolved.all());
        REQUIRE(resolved.exit_code == 0);
        REQUIRE(p.w.state_of(ref) == "failed");
    }
    const long long generation2 = p.w.generation_of(p.refs[2]);

    const Run stale = p.resume();
    INFO(stale.all());
    CHECK(stale.exit_code == 0);
    // The stale worker made no call for the payments it had claimed and never sent.
    for (int i = 2; i < 4; ++i) {
        const std::string& ref = p.refs[static_cast<std::size_t>(i)];
        CHECK(p.w.deliveries(ref) == 0);
        CHECK(p.w.executions(ref) == 0);
        CHECK(p.w.state_of(ref) == "failed");
    }
    CHECK(p.w.generation_of(p.refs[2]) == generation2); // its writes affected nothing
    CHECK(p.deliveries() == 2);
    // The call in flight when it stopped came back to a payment in review: recorded, not applied.
    CHECK(p.w.state_of(p.refs[1]) == "needs_review");
    CHECK(p.w.executions(p.refs[1]) == 1);
    CHECK(p.w.state_of(p.refs[0]) == "succeeded");
    // Its attempts for the last two are recorded as not sent, and nothing is left processing.
    CHECK(p.w.count("payment_attempts",
                    "outcome = 'not_sent' AND error_class = 'not_sent:claim_not_held'") == 2);
    CHECK(p.w.count("payments", "state = 'processing'") == 0);
}

TEST_CASE(
    "fencing: a worker paused past its lease, resuming after the takeover re-sent its payments "
    "and the provider forgot their keys, makes no call: one delivery and one execution per "
    "operation ID",
    "[execution][db][processes][fencing]") {
    PausedWorker p(true);
    p.stop_during_second_call();
    p.await_lease_expiry();

    // The takeover: leases expired, the one in flight found succeeded, the two never sent
    // confirmed absent inside the key window and sent again with the same operation IDs.
    const Run nightly = p.w.payrecon({"nightly", "--no-statement"});
    INFO(nightly.all());
    CHECK(nightly.exit_code == 0);
    for (const auto& ref : p.refs) {
        REQUIRE(p.w.state_of(ref) == "succeeded");
        REQUIRE(p.w.executions(ref) == 1);
    }
    // The provider forgets idempotency keys after its retention: a late send would charge again.
    p.w.fake->advance_clock(std::chrono::hours(25));

    const Run stale = p.resume();
    INFO(stale.all());
    CHECK(stale.exit_code == 0);
    for (const auto& ref : p.refs) {
        INFO(ref);
        CHECK(p.w.executions(ref) == 1);
        CHECK(p.w.state_of(ref) == "succeeded");
    }
    CHECK(p.w.deliveries(p.refs[2]) == 1);
    CHECK(p.w.deliveries(p.refs[3]) == 1);
    CHECK(p.w.fake->ledger()["charged"]["eur"].get<long long>() == 4 * 2500);
    CHECK(p.w.count("payments", "state = 'processing'") == 0);
}

TEST_CASE("fencing: a worker paused inside its lease completes normally when it resumes",
          "[execution][db][processes][fencing]") {
    PausedWorker p(true);
    p.stop_during_second_call();
    std::this_thread::sleep_for(std::chrono::milliseconds(500)); // the pause, well inside 3 s
    const Run resumed = p.resume();
    INFO(resumed.all());
    CHECK(resumed.exit_code == 0);
    for (const auto& ref : p.refs) {
        INFO(ref);
        CHECK(p.w.state_of(ref) == "succeeded");
        CHECK(p.w.executions(ref) == 1);
        CHECK(p.w.deliveries(ref) == 1);
    }
    CHECK(p.w.count("payment_attempts", "outcome = 'not_sent'") == 0);
}
