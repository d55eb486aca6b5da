// A worker paused mid-batch (SIGSTOP) and resumed (SIGCONT), as real processes: `payrecon worker`
// against the in-process fake provider (300 ms per call), `payrecon nightly` and `payrecon review
// resolve` acting while it is stopped. What the stale worker may do after it resumes is counted in
// the provider's ledger: a provider call is made only after a fenced statement proved, immediately
// before it, that the claim is still the worker's (DESIGN section 6, and section 12's rows "worker
// paused past its lease, resumes after takeover" and "worker paused, operator resolves failed,
// worker resumes"). The same for refunds (issue 31's acceptance, "a worker paused past its lease
// sends nothing"): refunds made with `payrecon refunds create` of payments a first worker run
// charged, fenced by the refunds' own generations. Each test has a scratch database: nightly takes
// over every expired lease.
#include "tests/support/operated.hpp"
#include "tests/support/wait.hpp"

#include <catch2/catch.hpp>
#include <thread>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// What the paused worker sends: the payments' charges, or a refund of each payment.
enum class Moves { charges, refunds };

// One paused-worker scenario: 4 payments (or a refund of each), each provider call taking 300 ms,
// a 3 s lease (the calls' worst case is 0.2 s connect + 1 s total, plus the 1 s margin).
struct PausedWorker {
    MigratedScratch scratch;
    Operated w{scratch.url()};
    Moves moves;
    std::vector<std::string> refs;    // the payments' merchant references
    std::vector<std::string> refunds; // Moves::refunds: the refund of refs[i], by its ID
    int delivered_before = 0;         // the fake's deliveries before the paused worker started
    std::unique_ptr<Payrecon> worker;

    explicit PausedWorker(bool lookup, Moves what = Moves::charges) : moves(what) {
        nlohmann::json extra = {{"connect_timeout_ms", 200}, {"timeout_ms", 1000}};
        if (!lookup) {
            extra["capabilities"] = {{"lookup", false}};
        }
        w.write_config(extra);
        refs = w.payments(4);
        if (moves == Moves::refunds) {
            charge_and_refund();
        }
        delivered_before = deliveries();
        auto faults = w.fake->faults();
        faults.latency = std::chrono::milliseconds(300);
        w.fake->set_faults(faults);
        worker =
            w.start({"worker", "--once", "--concurrency", "1", "--batch", "4", "--lease", "3s"}, {},
                    ProcessGroup::own); // it is stopped: see ProcessGroup
    }

    // The payments charged by a worker run of their own, then a refund of 5.00 of each made as an
    // operator makes one. Partial, so that a second execution of a refund would show in the
    // provider's books instead of being refused as past the charge.
    void charge_and_refund() {
        const Run charged = w.payrecon({"worker", "--once", "--batch", "4"});
        INFO(charged.all());
        REQUIRE(charged.exit_code == 0);
        for (const auto& ref : refs) {
            REQUIRE(w.state_of(ref) == "succeeded");
            refunds.push_back(w.create_refund(w.payment_id_of(ref), "5.00", "rk-" + ref,
                                              "the customer returned the goods"));
        }
    }

    int deliveries() { return w.fake->ledger()["deliveries"].get<int>(); }

    // The rows the paused worker claims: payments (their charges) or refunds.
    std::string table() const { return moves == Moves::charges ? "payments" : "operations"; }
    // The i-th claimed row's ID (the payment's, or the refund's) and its columns.
    std::string id(std::size_t i) {
        return moves == Moves::charges ? w.payment_id_of(refs[i]) : refunds[i];
    }
    std::string column(std::size_t i, const std::string& name) {
        return w.value("SELECT coalesce(" + name + "::text, '') FROM " + table() + " WHERE " +
                           (moves == Moves::charges ? "payment_id" : "id") + " = $1::uuid",
                       id(i));
    }
    std::string state(std::size_t i) { return column(i, "state"); }
    long long generation(std::size_t i) { return std::stoll(column(i, "generation")); }
    int executions(std::size_t i) { return w.executions_of(column(i, "operation_id")); }
    int deliveries(std::size_t i) { return w.deliveries_of(column(i, "operation_id")); }
    // `payrecon review resolve <ID> --generation <now> --as failed --note <note>`.
    Run resolve_failed(std::size_t i, const std::string& note) {
        return w.payrecon({"review", "resolve", id(i), "--generation",
                           std::to_string(generation(i)), "--as", "failed", "--note", note});
    }
    // The amount of this test's refunds in `state`, in cents.
    long long refunds_in(const std::string& state) {
        return std::stoll(w.value("SELECT coalesce(sum(amount_minor), 0)::text FROM operations "
                                  "WHERE tenant_id = $1::uuid AND state = '" +
                                      state + "'",
                                  w.tenant.tenant_id));
    }

    // Stops the worker while its second call is at the provider: the first payment (or refund) is
    // settled, the second in flight, the last two claimed and never sent.
    void stop_during_second_call() {
        REQUIRE(wait_until([&] { return deliveries() >= delivered_before + 2; },
                           std::chrono::seconds(30)));
        worker->signal(SIGSTOP);
        REQUIRE(deliveries() == delivered_before + 2);
    }

    // Waits until the database's clock says the three claims still held have expired.
    void await_lease_expiry() {
        REQUIRE(wait_until(
            [&] {
                return w.count(table(), "state = 'processing' AND lease_expires_at < now()") == 3;
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
    for (std::size_t i = 2; i < 4; ++i) {
        const Run resolved = p.resolve_failed(i, "no charge at the provider for this operation ID");
        INFO(resolved.all());
        REQUIRE(resolved.exit_code == 0);
        REQUIRE(p.state(i) == "failed");
    }
    const long long generation2 = p.generation(2);

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
    CHECK(p.generation(2) == generation2); // its writes affected nothing
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

// The same three for refunds. A refund's claim is fenced by its own generation (the operations
// row), so the stale worker's late calls are refunds sent twice unless the fence holds: each
// refund is 5.00 of a 25.00 charge, so a second execution would show in the fake's books.

TEST_CASE("fencing, refunds: a worker paused past its lease while an operator resolved its unsent "
          "refunds as failed makes no call when it resumes, and they stay failed",
          "[execution][db][processes][fencing][refunds]") {
    // No lookup: the nightly sends every taken-over refund to review.
    PausedWorker p(false, Moves::refunds);
    p.stop_during_second_call();
    p.await_lease_expiry();

    const Run nightly = p.w.payrecon({"nightly", "--no-statement"});
    INFO(nightly.all());
    CHECK(nightly.exit_code == 3); // three refunds in review
    for (std::size_t i = 1; i < 4; ++i) {
        INFO(p.id(i));
        REQUIRE(p.state(i) == "needs_review");
        CHECK(p.column(i, "review_code") == "no_lookup");
    }
    // The operator checked the provider's dashboard: the last two were never refunded. Failed,
    // each gives its 5.00 back to its payment.
    for (std::size_t i = 2; i < 4; ++i) {
        const Run resolved = p.resolve_failed(i, "no refund at the provider for this operation ID");
        INFO(resolved.all());
        REQUIRE(resolved.exit_code == 0);
        REQUIRE(p.state(i) == "failed");
        REQUIRE(p.w.column(p.refs[i], "refund_held_minor") == "0");
    }
    std::vector<long long> generations;
    for (std::size_t i = 0; i < 4; ++i) {
        generations.push_back(p.generation(i));
    }

    const Run stale = p.resume();
    INFO(stale.all());
    CHECK(stale.exit_code == 0);
    // The stale worker made no call for the refunds it had claimed and never sent.
    for (std::size_t i = 2; i < 4; ++i) {
        INFO(p.id(i));
        CHECK(p.deliveries(i) == 0);
        CHECK(p.executions(i) == 0);
        CHECK(p.state(i) == "failed");
        CHECK(p.w.column(p.refs[i], "refund_held_minor") == "0");
    }
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(p.generation(i) == generations[i]); // its writes affected nothing
    }
    CHECK(p.deliveries() == p.delivered_before + 2);
    // The call in flight when it stopped came back to a refund in review: recorded, not applied.
    CHECK(p.state(1) == "needs_review");
    CHECK(p.executions(1) == 1);
    CHECK(p.state(0) == "succeeded");
    CHECK(p.executions(0) == 1);
    // Its attempts for the last two are recorded as not sent, and nothing is left processing.
    for (std::size_t i = 2; i < 4; ++i) {
        CHECK(p.w.count("payment_attempts", "operation_id = '" + p.column(i, "operation_id") +
                                                "' AND outcome = 'not_sent' AND error_class = "
                                                "'not_sent:claim_not_held'") == 1);
    }
    CHECK(p.w.count("payment_attempts",
                    "outcome = 'not_sent' AND error_class = 'not_sent:claim_not_held'") == 2);
    CHECK(p.w.count("operations", "state = 'processing'") == 0);

    // The operator settles the one the provider did refund, under the reference the provider
    // confirms (lookups back on to check it): its books and ours agree.
    p.w.write_config();
    const Run settled = p.w.payrecon(
        {"review", "resolve", p.id(1), "--generation", std::to_string(p.generation(1)), "--as",
         "succeeded", "--provider-reference", p.w.provider_refund_of(p.column(1, "operation_id")),
         "--note", "refunded, seen on the dashboard"});
    INFO(settled.all());
    CHECK(settled.exit_code == 0);
    CHECK(p.state(1) == "succeeded");
    CHECK(p.w.refunded_eur() == 2 * 500);
    CHECK(p.refunds_in("succeeded") == p.w.refunded_eur());
    CHECK(p.refunds_in("failed") == 2 * 500);
}

TEST_CASE("fencing, refunds: a worker paused past its lease, resuming after the takeover re-sent "
          "its refunds and the provider forgot their keys, makes no call: one delivery and one "
          "execution per refund operation ID",
          "[execution][db][processes][fencing][refunds]") {
    PausedWorker p(true, Moves::refunds);
    p.stop_during_second_call();
    p.await_lease_expiry();

    // The takeover: leases expired, the refund in flight found succeeded by the refund lookup,
    // the two never sent confirmed absent inside the key window and sent again with the same
    // operation IDs.
    const Run nightly = p.w.payrecon({"nightly", "--no-statement"});
    INFO(nightly.all());
    CHECK(nightly.exit_code == 0);
    std::vector<long long> generations;
    for (std::size_t i = 0; i < 4; ++i) {
        INFO(p.id(i));
        REQUIRE(p.state(i) == "succeeded");
        REQUIRE(p.executions(i) == 1);
        generations.push_back(p.generation(i));
    }
    CHECK(p.column(1, "resend_count") == "0");
    CHECK(p.column(2, "resend_count") == "1");
    CHECK(p.column(3, "resend_count") == "1");
    // The provider forgets idempotency keys after its retention: a late send would refund again.
    p.w.fake->advance_clock(std::chrono::hours(25));

    const Run stale = p.resume();
    INFO(stale.all());
    CHECK(stale.exit_code == 0);
    for (std::size_t i = 0; i < 4; ++i) {
        INFO(p.id(i));
        CHECK(p.executions(i) == 1);
        CHECK(p.deliveries(i) == 1);
        CHECK(p.state(i) == "succeeded");
        CHECK(p.generation(i) == generations[i]);
        CHECK(p.w.column(p.refs[i], "refund_held_minor") == "500");
    }
    CHECK(p.w.count("payment_attempts",
                    "outcome = 'not_sent' AND error_class = 'not_sent:claim_not_held'") == 2);
    CHECK(p.w.refunded_eur() == 4 * 500);
    CHECK(p.refunds_in("succeeded") == p.w.refunded_eur());
    CHECK(p.w.fake->ledger()["charged"]["eur"].get<long long>() == 4 * 2500 - 4 * 500);
    CHECK(p.w.count("operations", "state = 'processing'") == 0);
}

TEST_CASE("fencing, refunds: a worker paused inside its lease completes its refunds normally when "
          "it resumes",
          "[execution][db][processes][fencing][refunds]") {
    PausedWorker p(true, Moves::refunds);
    p.stop_during_second_call();
    std::this_thread::sleep_for(std::chrono::milliseconds(500)); // the pause, well inside 3 s
    const Run resumed = p.resume();
    INFO(resumed.all());
    CHECK(resumed.exit_code == 0);
    for (std::size_t i = 0; i < 4; ++i) {
        INFO(p.id(i));
        CHECK(p.state(i) == "succeeded");
        CHECK(p.executions(i) == 1);
        CHECK(p.deliveries(i) == 1);
    }
    CHECK(p.w.count("payment_attempts", "outcome = 'not_sent'") == 0);
    CHECK(p.w.refunded_eur() == 4 * 500);
    CHECK(p.refunds_in("succeeded") == p.w.refunded_eur());
}
