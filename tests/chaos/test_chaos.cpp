// The chaos run (tests/chaos/chaos.hpp) in the suite: about 35 s of chaos on a private PostgreSQL
// of its own, then quiescing and DESIGN section 12's invariants, each a CHECK, and a check that
// every kind of event and every fault mode happened. The seed is printed first;
// PAYRECON_CHAOS_SEED=<seed> repeats the schedule. bench/chaos runs the hidden long case.
//
// "No call from a fenced-out worker" is proved delivery by delivery (invariants.hpp), not by
// counting. Deliveries per operation ID against the attempts that passed the fence cannot see a
// stale call: the stale worker's attempt row was opened by its claim and counts among them. At most
// one execution per operation ID sees one only if the provider executes it again -- so the provider
// forgets every idempotency key before a worker paused past its lease resumes -- and still misses a
// stale call that lands before the takeover's re-send, which then replays it. With the pre-call
// check taken out of engine/executor.cpp, both runs tried failed the delivery row (4 and 8 stale
// calls) while the execution count held. So the provider's log says when it read each request,
// and each delivery must lie inside the live claim of one attempt of its payment -- from the claim
// until the first record of a newer generation (a lease expiry, a reconciler's decision or lookup,
// a newer claim) -- at most one per attempt, none for an attempt the fence stopped. A legitimate
// call is read before its lease's end less the 1 s margin and a lease expires after that end: no
// tolerance is needed. What it cannot tell from a fenced-out call is a worker stopped between
// libcurl's pre-request callback and its write of the request, microseconds of a call that no
// client-side fence can close.
//
// The checks themselves are tested too, on rows made up to break each one: a check that cannot
// fail proves nothing.
#include "tests/chaos/chaos.hpp"
#include "tests/fake_provider/faults.hpp"

#include <catch2/catch.hpp>
#include <iostream>

using namespace payrecon;
using namespace payrecon::chaos;

namespace {

void run_and_check(const ChaosOptions& options) {
    const ChaosReport report = run_chaos(options, std::cout);
    INFO("seed " << options.seed << ": PAYRECON_CHAOS_SEED=" << options.seed
                 << " repeats this schedule");
    for (const auto& i : report.invariants) {
        INFO(i.name << ": " << i.detail);
        CHECK(i.held);
    }
    // Every kind of event happened (the schedule holds each kind in every round of eight), and
    // every fault mode (each is queued once at the start).
    for (const auto& name : k_event_names) {
        INFO(name);
        CHECK((report.events.count(name) == 1 ? report.events.at(name) : 0) > 0);
    }
    for (const fake::Fault f : fake::all_faults()) {
        INFO(fake::to_string(f));
        CHECK(report.faults_applied.count(std::string(fake::to_string(f))) == 1);
    }
}

PaymentRow payment(const std::string& id, const std::string& op, const std::string& state) {
    return PaymentRow{id, "ref-" + id, op, state, 1000, "EUR", "", ""};
}

AttemptRow attempt(const std::string& id, const std::string& op, int no, long long generation,
                   Micros started, const std::string& error_class = "") {
    return AttemptRow{id,         op,      no,   generation,
                      "host:1/0", started, true, error_class.empty() ? "succeeded" : "not_sent",
                      error_class};
}

nlohmann::json ledger_of(const std::vector<Delivery>& deliveries) {
    nlohmann::json l;
    l["deliveries_by_operation"] = nlohmann::json::object();
    for (const auto& d : deliveries) {
        l["deliveries_by_operation"][d.operation_id] =
            l["deliveries_by_operation"].value(d.operation_id, 0) + 1;
    }
    return l;
}

} // namespace

TEST_CASE("chaos: serve, workers, reconcile and nightly under SIGKILL, SIGSTOP past and inside "
          "the lease, serve restarts and PostgreSQL immediate stops, with every provider fault: "
          "DESIGN section 12's invariants hold after quiescing",
          "[chaos][processes][db]") {
    run_and_check(options_from_environment(ChaosOptions{}));
}

TEST_CASE("chaos: the long run of bench/chaos (PAYRECON_CHAOS_SECONDS)", "[.][chaos-long]") {
    ChaosOptions defaults;
    defaults.duration = std::chrono::seconds(600);
    defaults.workers = 4;
    defaults.clients = 4;
    run_and_check(options_from_environment(defaults));
}

TEST_CASE("chaos checks: a call after the claim was taken over is found, whether it lands before "
          "the next claim or beside it",
          "[chaos]") {
    // One payment: attempt 1 (generation 1, claimed at 1 s) by a worker that paused; its lease
    // expired at 5 s (generation 2); attempt 2 (generation 3) claimed at 6 s and called at 6.1 s.
    const std::vector<PaymentRow> payments = {payment("p1", "op1", "succeeded")};
    const std::vector<GenerationMark> expiry = {{"p1", 2, 5'000'000}};
    const std::vector<AttemptRow> attempts = {attempt("p1", "op1", 1, 1, 1'000'000),
                                              attempt("p1", "op1", 2, 3, 6'000'000)};
    const auto check = [&](const std::vector<Delivery>& d, const std::vector<AttemptRow>& a = {}) {
        return check_no_fenced_out_call(payments, a.empty() ? attempts : a, expiry, d,
                                        ledger_of(d));
    };
    // The legitimate history: one call per attempt, each inside its claim.
    CHECK(check({{"op1", 1'100'000}, {"op1", 6'100'000}}).held);
    // The stale worker called after its lease was taken over, before the next claim...
    const auto before = check({{"op1", 1'100'000}, {"op1", 5'500'000}, {"op1", 6'100'000}});
    CHECK_FALSE(before.held);
    CHECK(before.detail.find("outside every live claim") != std::string::npos);
    // ... or after it: a second delivery inside attempt 2's claim.
    const auto beside = check({{"op1", 6'100'000}, {"op1", 7'000'000}});
    CHECK_FALSE(beside.held);
    CHECK(beside.detail.find("second delivery") != std::string::npos);
    // A delivery while the claim belonged to an attempt whose fence recorded no call.
    const std::vector<AttemptRow> fenced = {
        attempt("p1", "op1", 1, 1, 1'000'000),
        attempt("p1", "op1", 2, 3, 6'000'000, "not_sent:claim_not_held")};
    const auto stopped = check({{"op1", 1'100'000}, {"op1", 6'100'000}}, fenced);
    CHECK_FALSE(stopped.held);
    CHECK(stopped.detail.find("recorded no call") != std::string::npos);
    // A delivery the log has and the ledger does not (or the reverse): the evidence is incomplete.
    nlohmann::json short_ledger = ledger_of({{"op1", 1'100'000}});
    CHECK_FALSE(check_no_fenced_out_call(payments, attempts, expiry,
                                         {{"op1", 1'100'000}, {"op1", 6'100'000}}, short_ledger)
                    .held);
}

TEST_CASE("chaos checks: a lost, duplicated or never-acknowledged payment, a changed replay, a "
          "second execution, a sum off by one, and a payment left unknown are each found",
          "[chaos]") {
    ClientRecord clients;
    clients.acknowledged = {Acknowledged{"ref-p1", "EUR", 1000, 202, "{}", "p1"},
                            Acknowledged{"ref-p2", "EUR", 1000, 202, "{}", "p2"}};
    std::vector<PaymentRow> payments = {payment("p1", "op1", "succeeded"),
                                        payment("p2", "op2", "succeeded")};
    CHECK(check_acknowledged_once(clients, payments).held);
    CHECK_FALSE(check_acknowledged_once(clients, {payments[0]}).held); // p2 lost
    auto extra = payments;
    extra.push_back(payment("p3", "op3", "pending"));
    CHECK_FALSE(check_acknowledged_once(clients, extra).held); // p3 never acknowledged

    CHECK(check_replays(clients).held);
    clients.replay_mismatches.push_back("ref-p1: first 202 {}, replayed 202 {\"x\":1}");
    CHECK_FALSE(check_replays(clients).held);

    nlohmann::json ledger;
    ledger["executions"] = {{"op1", 1}, {"op2", 1}};
    ledger["charged"] = {{"eur", 2000}};
    CHECK(check_one_execution(ledger, payments).held);
    CHECK(check_sums(payments, ledger).held);
    ledger["executions"]["op2"] = 2;
    ledger["charged"]["eur"] = 2001;
    CHECK_FALSE(check_one_execution(ledger, payments).held);
    CHECK_FALSE(check_sums(payments, ledger).held);

    CHECK(check_nothing_open_without_reason(payments).held);
    auto review = payments;
    review[0].state = "needs_review";
    review[0].review_code = "lookup_failing";
    review[0].review_reason = "the provider's status lookups kept failing";
    CHECK(check_nothing_open_without_reason(review).held);
    review[0].review_reason.clear();
    CHECK_FALSE(check_nothing_open_without_reason(review).held);
    review[0].state = "unknown";
    CHECK_FALSE(check_nothing_open_without_reason(review).held);
    review[0].state = "processing";
    CHECK_FALSE(check_nothing_processing(review).held);
}
