// The operator commands as the real binary (PAYRECON_BIN): reconcile, nightly, review resolve and
// review recheck, and the worker sending what an operator scheduled. Each test runs an in-process
// fake Stripe provider on loopback and writes a provider configuration naming a provider of its
// own ("st" + 16 hex), so the reconciler claims only that test's payments. The API key reaches
// the child through its environment only. Tests whose exit code depends on the whole database
// (nightly counts every open payment, and takes over every expired lease) run on a scratch
// database of their own. Outcomes are counted in payments, payment_lookups, audit_log and outbox,
// and in the fake provider's ledger.
#include "reports/report.hpp"
#include "tests/support/operated.hpp"
#include "tests/support/wait.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>

using namespace payrecon;
using namespace payrecon::testing;

namespace {
// Everything a payment has written so far, to show that a refused command wrote nothing.
struct Footprint {
    std::string state;
    long long generation = 0;
    long long lookups = 0;
    long long events = 0;
    long long audits = 0;
    bool operator==(const Footprint& o) const {
        return state == o.state && generation == o.generation && lookups == o.lookups &&
               events == o.events && audits == o.audits;
    }
};
std::ostream& operator<<(std::ostream& os, const Footprint& f) {
    return os << "{" << f.state << ", generation " << f.generation << ", lookups " << f.lookups
              << ", events " << f.events << ", audits " << f.audits << "}";
}
Footprint footprint(Operated& w, const std::string& ref) {
    return {w.state_of(ref), w.generation_of(ref), w.lookups(ref), w.events(ref), w.audits(ref)};
}

int payments_in(const nlohmann::json& summary, const std::string& bucket) {
    const auto& r = summary.at("reconciled");
    return r.contains(bucket) ? r.at(bucket).at("payments").get<int>() : 0;
}

} // namespace

TEST_CASE("operator cli: reconcile --dry-run --json prints the decision and changes nothing, then "
          "reconcile --json applies it and exits 0",
          "[cli][db][reconcile]") {
    Operated w;
    const std::string ref = w.unknown_payment(fake::Fault::execute_then_fin);
    const Footprint before = footprint(w, ref);

    const Run dry = w.payrecon({"reconcile", "--dry-run", "--json"});
    REQUIRE(dry.exit_code == 0);
    const auto d = nlohmann::json::parse(dry.out);
    CHECK(d["dry_run"] == true);
    CHECK(d["reconciled"] == 1);
    CHECK(d["to_review"] == 0);
    REQUIRE(d["payments"].size() == 1);
    const auto& decided = d["payments"][0];
    CHECK(decided["payment_id"] == w.payment_id_of(ref));
    CHECK(decided["operation_id"] == w.op_of(ref));
    CHECK(decided["provider"] == w.config.name);
    CHECK(decided["from"] == "unknown");
    CHECK(decided["to"] == "succeeded");
    CHECK(decided["lookup"] == "found");
    CHECK(decided["decision"] == "adopt_succeeded");
    CHECK(decided["applied"] == false);
    CHECK(footprint(w, ref) == before); // state, generation, lookups, outbox, audit
    CHECK(w.lookups(ref) == 0);

    const Run applied = w.payrecon({"reconcile", "--json"});
    REQUIRE(applied.exit_code == 0);
    const auto a = nlohmann::json::parse(applied.out);
    CHECK(a["dry_run"] == false);
    CHECK(a["reconciled"] == 1);
    REQUIRE(a["payments"].size() == 1);
    CHECK(a["payments"][0]["applied"] == true);
    CHECK(w.state_of(ref) == "succeeded");
    CHECK(w.column(ref, "provider_reference").rfind("pi_", 0) == 0);
    CHECK(w.generation_of(ref) > before.generation);
    CHECK(w.lookups(ref) == 1);
    CHECK(w.lookups(ref, "actor LIKE 'reconcile:%' AND applied") == 1);
    CHECK(w.events(ref) == before.events + 1);
    CHECK(w.events(ref, "event_type = 'payment.succeeded'") == 1);
    CHECK(w.audits(ref, "action = 'payment.reconciled'") == 1);
    CHECK(w.executions(ref) == 1);
    CHECK(w.deliveries(ref) == 1);

    // Nothing is due any more.
    const Run again = w.payrecon({"reconcile", "--json"});
    CHECK(again.exit_code == 0);
    CHECK(nlohmann::json::parse(again.out)["reconciled"] == 0);
    CHECK(w.lookups(ref) == 1);
}

TEST_CASE("operator cli: reconcile sending a payment to review exits 3", "[cli][db][reconcile]") {
    Operated w;
    const std::string ref = w.unknown_payment(fake::Fault::drop_before_execute);
    w.write_config({{"capabilities", {{"lookup", false}}}});

    const Run r = w.payrecon({"reconcile"});
    CHECK(r.exit_code == 3);
    CHECK(contains(r.out, w.payment_id_of(ref)));
    CHECK(contains(r.out, "no_lookup"));
    CHECK(contains(r.out, "1 to review"));
    CHECK(contains(r.out, "payrecon review list"));
    CHECK(w.state_of(ref) == "needs_review");
    CHECK(w.column(ref, "review_code") == "no_lookup");
    CHECK(w.lookups(ref, "status = 'not_asked' AND applied") == 1);
    CHECK(w.events(ref, "event_type = 'payment.needs_review'") == 1);
    CHECK(w.deliveries(ref) == 1); // never sent again
    CHECK(w.executions(ref) == 0);

    // Review is for people: the next run leaves it alone and exits 0.
    const Run next = w.payrecon({"reconcile", "--json"});
    CHECK(next.exit_code == 0);
    CHECK(nlohmann::json::parse(next.out)["reconciled"] == 0);
    CHECK(w.lookups(ref) == 1);
}

TEST_CASE("operator cli: a clean nightly exits 0, prints 'result: clean' and its --json summary "
          "counts what it did",
          "[cli][db][reconcile]") {
    MigratedScratch scratch;
    Operated w(scratch.url());
    const std::string found = w.unknown_payment(fake::Fault::execute_then_fin);
    const std::string absent = w.unknown_payment(fake::Fault::drop_before_execute);

    const Run r = w.payrecon({"nightly"});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "result: clean"));
    CHECK(contains(r.out, "unknown payments reconciled: 2"));
    CHECK(contains(r.out, "review queue: 0 payment(s)"));
    // The provider had one: adopted. The other it never got: sent again with the same operation
    // ID in the same run.
    CHECK(w.state_of(found) == "succeeded");
    CHECK(w.state_of(absent) == "succeeded");
    CHECK(w.executions(found) == 1);
    CHECK(w.deliveries(found) == 1);
    CHECK(w.executions(absent) == 1);
    CHECK(w.deliveries(absent) == 2);
    CHECK(w.lookups(found) == 1);
    CHECK(w.lookups(absent) == 1);
    CHECK(w.events(found, "event_type = 'payment.succeeded'") == 1);
    CHECK(w.events(absent, "event_type = 'payment.retry_scheduled'") == 1);
    CHECK(w.events(absent, "event_type = 'payment.succeeded'") == 1);

    // Again, with nothing left to do, as JSON.
    const Run j = w.payrecon({"nightly", "--json"});
    CHECK(j.exit_code == 0);
    const auto s = nlohmann::json::parse(j.out);
    CHECK(s["exit_code"] == 0);
    CHECK(s["result"] == "clean");
    CHECK(s["providers"] == nlohmann::json::array({w.config.name}));
    CHECK(s["reconciled"] == nlohmann::json::object());
    CHECK(s["in_review"] == 0);
    CHECK(s["still_unknown"] == 0);
    CHECK(s["open"] == nlohmann::json::array());
    CHECK(s["sent"]["attempted"] == 0);
    CHECK(w.lookups(found) == 1);
}

TEST_CASE("operator cli: a nightly that leaves a payment in review exits 3 and names the review "
          "code",
          "[cli][db][reconcile]") {
    MigratedScratch scratch;
    Operated w(scratch.url());
    const std::string found = w.unknown_payment(fake::Fault::execute_then_fin);
    const std::string resent = w.unknown_payment(fake::Fault::drop_before_execute);
    const std::string late = w.unknown_payment(fake::Fault::drop_before_execute);
    // Its first attempt was 23.5 hours ago: past Stripe's 24 h key retention minus the margin, a
    // re-send could charge twice.
    w.exec("UPDATE payments SET first_attempt_at = now() - interval '23 hours 30 minutes' "
           "WHERE merchant_reference = $1",
           late);

    const Run r = w.payrecon({"nightly"});
    CHECK(r.exit_code == 3);
    CHECK(contains(r.out, "review queue: 1 payment(s), 1 new in this run"));
    CHECK(contains(r.out, "outside_key_window"));
    CHECK(contains(r.out, w.payment_id_of(late)));
    CHECK(contains(r.out, "result: attention needed"));
    CHECK(w.state_of(found) == "succeeded");
    CHECK(w.state_of(resent) == "succeeded");
    CHECK(w.state_of(late) == "needs_review");
    CHECK(w.column(late, "review_code") == "outside_key_window");
    CHECK(w.deliveries(late) == 1); // not sent again
    CHECK(w.executions(late) == 0);
    CHECK(w.executions(resent) == 1);
    CHECK(w.events(late, "event_type = 'payment.needs_review'") == 1);

    // The next night: nothing to reconcile, the review queue still waits.
    const Run j = w.payrecon({"nightly", "--json"});
    CHECK(j.exit_code == 3);
    const auto s = nlohmann::json::parse(j.out);
    CHECK(s["exit_code"] == 3);
    CHECK(s["result"] == "attention");
    CHECK(s["reconciled"] == nlohmann::json::object());
    CHECK(s["to_review"] == nlohmann::json::array());
    CHECK(s["in_review"] == 1);
    CHECK(s["still_unknown"] == 0);
    REQUIRE(s["open"].size() == 1);
    CHECK(s["open"][0]["state"] == "needs_review");
    CHECK(s["open"][0]["provider"] == w.config.name);
    CHECK(s["open"][0]["review_code"] == "outside_key_window");
    CHECK(s["open"][0]["payments"] == 1);
    CHECK(s["open"][0]["amount"] == 2500);
    CHECK(w.lookups(late) == 1);
}

TEST_CASE("operator cli: nightly --json on a run that sends payments to review lists them with "
          "their code",
          "[cli][db][reconcile]") {
    MigratedScratch scratch;
    Operated w(scratch.url());
    const std::string found = w.unknown_payment(fake::Fault::execute_then_fin);
    const std::string blind = w.unknown_payment(fake::Fault::execute_then_rst);
    w.write_config({{"capabilities", {{"lookup", false}}}});

    const Run j = w.payrecon({"nightly", "--json"});
    CHECK(j.exit_code == 3);
    const auto s = nlohmann::json::parse(j.out);
    CHECK(s["exit_code"] == 3);
    CHECK(s["result"] == "attention");
    CHECK(payments_in(s, "to review") == 2);
    CHECK(s["reconciled"]["to review"]["amounts"]["EUR"] == 5000);
    REQUIRE(s["to_review"].size() == 2);
    for (const auto& p : s["to_review"]) {
        CHECK(p["review_code"] == "no_lookup");
        CHECK(p["to"] == "needs_review");
    }
    CHECK(s["in_review"] == 2);
    CHECK(s["still_unknown"] == 0);
    REQUIRE(s["open"].size() == 1);
    CHECK(s["open"][0]["review_code"] == "no_lookup");
    CHECK(s["open"][0]["payments"] == 2);
    CHECK(w.state_of(found) == "needs_review");
    CHECK(w.state_of(blind) == "needs_review");
    CHECK(w.executions(found) == 1);
    CHECK(w.executions(blind) == 1);
    CHECK(w.deliveries(blind) == 1);
}

TEST_CASE("operator cli: nightly with the database unreachable exits 5 and says so",
          "[cli][db][reconcile]") {
    Operated w;
    const Run r = w.payrecon_raw({"--database", "postgresql:///x?host=/nonexistent", "--config",
                                  w.config_file.string(), "nightly"},
                                 w.env());
    CHECK(r.exit_code == 5);
    CHECK(contains(r.err, "cannot connect to the database"));
    CHECK(contains(r.err, "what to do:"));
    CHECK_FALSE(
        contains(r.all(), std::get<providers::ApiKey>(w.config.credentials).value.reveal()));
    CHECK(r.out.empty()); // no summary of a run that never started
}

TEST_CASE("operator cli: nightly with the provider unreachable exits 3: failed status queries need "
          "attention, are checked later, then go to review",
          "[cli][db][reconcile]") {
    MigratedScratch scratch;
    Operated w(scratch.url());
    const std::string ref = w.unknown_payment(fake::Fault::execute_then_fin);
    w.write_config({}, "http://127.0.0.1:" + std::to_string(closed_port()));

    // (--no-statement: the statement listing would fail too, and fail the run; that path is
    // tested in tests/execution/test_statement.cpp.)
    const Run first = w.payrecon({"nightly", "--json", "--no-statement"});
    // Nothing in review yet and the payment is checked again later, but a status query that
    // failed is not "clean": the operator hears about it tonight, not when it reaches review.
    CHECK(first.exit_code == 3);
    const auto s = nlohmann::json::parse(first.out);
    CHECK(s["status_queries_failed"] == 1);
    REQUIRE(s["attention"].size() == 1);
    CHECK(contains(s["attention"][0].get<std::string>(), "status queries FAILED"));
    CHECK(payments_in(s, "check again later") == 1);
    CHECK(s["still_unknown"] == 1);
    CHECK(s["in_review"] == 0);
    CHECK(w.state_of(ref) == "unknown");
    CHECK(w.column(ref, "lookup_failures") == "1");
    CHECK(w.lookups(ref, "status = 'failed'") == 1);
    CHECK(w.deliveries(ref) == 1);

    // Due again (as after its backoff): the second failure in a row sends it to review.
    w.exec("UPDATE payments SET next_attempt_at = now() - interval '1 second' "
           "WHERE merchant_reference = $1",
           ref);
    const Run second = w.payrecon({"nightly", "--lookup-failures", "2", "--no-statement"});
    CHECK(second.exit_code == 3);
    CHECK(contains(second.out, "lookup_failing"));
    CHECK(w.state_of(ref) == "needs_review");
    CHECK(w.column(ref, "review_code") == "lookup_failing");
    CHECK(w.lookups(ref, "status = 'failed'") == 2);
    CHECK(w.executions(ref) == 1);
    CHECK(w.deliveries(ref) == 1);
}

TEST_CASE("operator cli: two nightly processes at once handle each of 30 unknown payments "
          "exactly once",
          "[cli][db][reconcile][race]") {
    // Two nightlies of different windows (one of the same window says another run holds it and
    // does nothing: test_run_locks.cpp): both reconcile at once.
    MigratedScratch scratch;
    Operated w(scratch.url());
    const auto refs = w.unknown_payments(30, fake::Fault::execute_then_fin);
    const long long events_before = w.count("outbox");
    auto slow = w.fake->faults();
    slow.latency = std::chrono::milliseconds(20); // lookups take a while: the runs overlap
    w.fake->set_faults(slow);

    auto a = w.start({"nightly", "--json"});
    auto b = w.start({"nightly", "--no-statement", "--json"});
    const Run ra = a->wait();
    const Run rb = b->wait();
    CHECK(ra.exit_code == 0);
    CHECK(rb.exit_code == 0);
    const auto sa = nlohmann::json::parse(ra.out);
    const auto sb = nlohmann::json::parse(rb.out);
    CHECK(payments_in(sa, "succeeded") + payments_in(sb, "succeeded") == 30);
    CHECK(payments_in(sa, "changed meanwhile") + payments_in(sb, "changed meanwhile") == 0);
    CHECK(sa["sent"]["attempted"] == 0);
    CHECK(sb["sent"]["attempted"] == 0);

    CHECK(w.count("payments", "state = 'succeeded'") == 30);
    CHECK(w.count("payment_lookups") == 30);
    CHECK(w.count("payment_lookups", "applied") == 30);
    CHECK(w.count("audit_log", "action = 'payment.reconciled'") == 30);
    CHECK(w.count("outbox") == events_before + 30); // one event per state change
    CHECK(w.count("outbox", "event_type = 'payment.succeeded'") == 30);
    for (const auto& ref : refs) {
        INFO(ref);
        CHECK(w.executions(ref) == 1);
        CHECK(w.deliveries(ref) == 1);
    }
}

TEST_CASE(
    "operator cli: review resolve refuses a retry without --confirm-no-charge, a success "
    "without a reference and a stale generation, and --as retry is sent by the worker with the "
    "same operation ID",
    "[cli][db][reconcile]") {
    Operated w;
    const std::string ref = w.unknown_payment(fake::Fault::drop_before_execute);
    w.write_config({{"capabilities", {{"lookup", false}}}});
    REQUIRE(w.payrecon({"reconcile"}).exit_code == 3);
    REQUIRE(w.state_of(ref) == "needs_review");
    const std::string id = w.payment_id_of(ref);
    const long long shown = w.generation_of(ref);
    const auto resolve = [&](long long generation, std::vector<std::string> decision,
                             const Env& env = {}) {
        std::vector<std::string> args{"review",
                                      "resolve",
                                      id,
                                      "--generation",
                                      std::to_string(generation),
                                      "--note",
                                      "no charge in the Stripe dashboard"};
        args.insert(args.end(), decision.begin(), decision.end());
        return w.payrecon(args, env);
    };
    const Footprint before = footprint(w, ref);

    const Run unconfirmed = resolve(shown, {"--as", "retry"});
    CHECK(unconfirmed.exit_code == 2);
    CHECK(contains(unconfirmed.err, "--confirm-no-charge"));
    CHECK(footprint(w, ref) == before);

    const Run no_reference = resolve(shown, {"--as", "succeeded"});
    CHECK(no_reference.exit_code == 2);
    CHECK(contains(no_reference.err, "--provider-reference"));
    CHECK(footprint(w, ref) == before);

    // Someone else changed the payment after the operator was shown it.
    w.exec("UPDATE payments SET generation = generation + 1 WHERE merchant_reference = $1", ref);
    const Footprint moved = footprint(w, ref);
    const Run stale = resolve(shown, {"--as", "retry", "--confirm-no-charge"});
    CHECK(stale.exit_code == 7);
    CHECK(contains(stale.err, "changed since it was shown"));
    // ... and who touched it last, as the audit log has it (here the reconciler's decision).
    CHECK(contains(stale.err, "last recorded: payment.reconciled by "));
    CHECK(footprint(w, ref) == moved);
    CHECK(w.audits(ref, "action = 'review.resolve'") == 0);

    const Run retry = resolve(shown + 1, {"--as", "retry", "--confirm-no-charge"},
                              {{"PAYRECON_OPERATOR", "carol"}});
    CHECK(retry.exit_code == 0);
    CHECK(contains(retry.out, "retry_scheduled"));
    CHECK(w.state_of(ref) == "retry_scheduled");
    CHECK(w.generation_of(ref) == shown + 2);
    CHECK(w.audits(ref, "action = 'review.resolve'") == 1);
    CHECK(w.value("SELECT actor FROM audit_log WHERE subject_id = $1 AND action = 'review.resolve'",
                  id) == "carol");
    CHECK(w.events(ref) == moved.events + 1);
    CHECK(w.events(ref, "event_type = 'payment.retry_scheduled'") == 1);

    // A worker sends it again, with the same operation ID: one execution at the provider.
    const Run worker = w.payrecon({"worker", "--once"});
    CHECK(worker.exit_code == 0);
    CHECK(w.state_of(ref) == "succeeded");
    CHECK(w.executions(ref) == 1);
    CHECK(w.deliveries(ref) == 2);
    CHECK(w.fake->ledger()["executions"].size() == 1);
    // The worker says what its calls came to, not only how many it made.
    CHECK(contains(worker.out, R"("settled_as":{"succeeded":1})"));
    // The trail goes on past the resolution: the re-send and what it came to (it ended at
    // review.resolve -> retry_scheduled).
    const Run trail = w.payrecon({"audit", "--payment", id, "--json"});
    REQUIRE(trail.exit_code == 0);
    const auto rows = nlohmann::json::parse(trail.out);
    std::vector<std::string> actions;
    for (const auto& row : rows) {
        actions.push_back(row["action"]);
    }
    INFO(trail.out);
    const auto resolved = std::find(actions.begin(), actions.end(), "review.resolve");
    REQUIRE(resolved != actions.end());
    REQUIRE(std::next(resolved) != actions.end());
    CHECK(*std::next(resolved) == "provider.attempt");
    const auto& resend = rows[static_cast<std::size_t>(std::next(resolved) - actions.begin())];
    CHECK(resend["detail"]["outcome"] == "succeeded");
    CHECK(resend["detail"]["attempt"] == 2);
    CHECK(std::count(actions.begin(), actions.end(), "provider.attempt") == 2);
    CHECK(contains(w.payrecon({"audit", "--payment", id}).out, "provider.attempt"));

    // A succeeded payment is not resolved by hand.
    const Footprint done = footprint(w, ref);
    const Run late = resolve(done.generation, {"--as", "failed"});
    CHECK(late.exit_code == 7);
    CHECK(contains(late.err, "is succeeded"));
    CHECK(footprint(w, ref) == done);
}

TEST_CASE("operator cli: review resolve --as succeeded records the operator, the reference, one "
          "audit row and one outbox event",
          "[cli][db][reconcile]") {
    Operated w;
    const std::string ref = w.unknown_payment(fake::Fault::execute_then_hang);
    w.write_config({{"capabilities", {{"lookup", false}}}});
    REQUIRE(w.payrecon({"reconcile"}).exit_code == 3);
    const std::string id = w.payment_id_of(ref);
    const Footprint before = footprint(w, ref);

    // The provider cannot be asked and nothing it sent names the payment: the operator's word.
    const Run r = w.payrecon({"--operator", "alice", "review", "resolve", id, "--generation",
                              std::to_string(before.generation), "--as", "succeeded",
                              "--provider-reference", "pi_from_dashboard", "--note",
                              "found in the Stripe dashboard", "--unverified", "--json"},
                             {{"PAYRECON_OPERATOR", "mallory"}});
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["state"] == "succeeded");
    CHECK(j["operator"] == "alice");
    CHECK(j["generation"] == before.generation + 1);
    CHECK(w.state_of(ref) == "succeeded");
    CHECK(w.column(ref, "provider_reference") == "pi_from_dashboard");
    CHECK(w.column(ref, "review_code").empty());
    CHECK(w.audits(ref) == before.audits + 1);
    CHECK(w.audits(ref, "action = 'review.resolve' AND actor = 'alice'") == 1);
    CHECK(w.audits(ref,
                   "action = 'review.resolve' AND detail->>'note' = 'found in the Stripe dashboard "
                   "[reference not checked with the provider: unverified]'") == 1);
    CHECK(w.events(ref) == before.events + 1);
    CHECK(w.events(ref, "event_type = 'payment.succeeded'") == 1);
    CHECK(w.executions(ref) == 1);
    CHECK(w.deliveries(ref) == 1);

    const Footprint done = footprint(w, ref);
    const Run again =
        w.payrecon({"--operator", "alice", "review", "resolve", id, "--generation",
                    std::to_string(done.generation), "--as", "succeeded", "--provider-reference",
                    "pi_from_dashboard", "--note", "again", "--unverified"});
    CHECK(again.exit_code == 7);
    CHECK(footprint(w, ref) == done);
    // A generation the payment never had is not "changed since it was shown".
    const Run never =
        w.payrecon({"--operator", "alice", "review", "resolve", id, "--generation",
                    std::to_string(done.generation + 90), "--as", "failed", "--note", "x"});
    INFO(never.all());
    CHECK(never.exit_code == 7);
    CHECK(contains(never.err, "generation " + std::to_string(done.generation + 90) +
                                  " is not payment " + id + "'s: it is at generation " +
                                  std::to_string(done.generation)));
    CHECK_FALSE(contains(never.err, "changed since it was shown"));
    CHECK(footprint(w, ref) == done);
}

TEST_CASE("operator cli: resolve --as succeeded checks the reference with the provider: a typo, a "
          "confirmed absence and another payment's reference are refused, the right one is taken",
          "[cli][db][reconcile][regression]") {
    // `--as succeeded --provider-reference pi_typo` was accepted although the provider had just
    // confirmed the payment absent, and a reference bound to another payment was accepted too.
    Operated w;
    const std::string charged = w.unknown_payment(fake::Fault::execute_then_fin);
    const std::string absent = w.unknown_payment(fake::Fault::drop_before_execute);
    w.write_config({{"capabilities", {{"lookup", false}}}});
    REQUIRE(w.payrecon({"reconcile"}).exit_code == 3); // both to review: no_lookup
    // The provider can be asked again: references are checked. Four lookups follow, each in a
    // process of its own: a generous timeout, so a loaded machine cannot turn an answer into a
    // failed check (once in two full runs at -j2 one of them did not pass here).
    w.write_config({{"timeout_ms", 10000}});
    const std::string reference = w.intent_of(charged);
    const auto resolve = [&](const std::string& ref, const std::string& provider_reference,
                             const std::vector<std::string>& more = {}) {
        return w.resolve_succeeded(ref, provider_reference, "seen in the dashboard", more);
    };

    const Footprint before = footprint(w, charged);
    const Run typo = resolve(charged, "pi_typo");
    INFO(typo.all());
    CHECK(typo.exit_code == 7);
    CHECK(contains(typo.err, "not pi_typo"));
    CHECK(contains(typo.err, "--provider-reference " + reference));
    CHECK(footprint(w, charged) == before);

    const Footprint gone = footprint(w, absent);
    const Run nothing = resolve(absent, "pi_whatever");
    INFO(nothing.all());
    CHECK(nothing.exit_code == 7);
    CHECK(contains(nothing.err, "has no payment for operation ID " + w.op_of(absent)));
    CHECK(footprint(w, absent) == gone);

    // The right reference, but another payment already holds it (resolved by mistake before).
    const std::string other = w.payments(1)[0];
    w.exec("UPDATE payments SET state = 'succeeded', provider_reference = '" + reference +
               "' WHERE merchant_reference = $1",
           other);
    const Run taken = resolve(charged, reference);
    INFO(taken.all());
    CHECK(taken.exit_code == 7);
    CHECK(contains(taken.err, "already belongs to payment " + w.payment_id_of(other)));
    CHECK(footprint(w, charged) == before);
    w.exec("UPDATE payments SET provider_reference = NULL WHERE merchant_reference = $1", other);

    // The provider's own reference: taken, once.
    const Run right = resolve(charged, reference);
    INFO(right.all());
    CHECK(right.exit_code == 0);
    CHECK(w.state_of(charged) == "succeeded");
    CHECK(w.column(charged, "provider_reference") == reference);
    CHECK(w.events(charged, "event_type = 'payment.succeeded'") == 1);

    // On the operator's word alone, said so in the audit note; still with a note of their own.
    const Run blank =
        w.payrecon({"review", "resolve", w.payment_id_of(absent), "--generation",
                    std::to_string(w.generation_of(absent)), "--as", "succeeded",
                    "--provider-reference", "pi_seen_by_hand", "--note", "  ", "--unverified"});
    INFO(blank.all());
    CHECK(blank.exit_code == 2);
    CHECK(footprint(w, absent) == gone);
    const Run unverified = resolve(absent, "pi_seen_by_hand", {"--unverified"});
    INFO(unverified.all());
    CHECK(unverified.exit_code == 0);
    CHECK(w.state_of(absent) == "succeeded");
    CHECK(w.audits(absent, "action = 'review.resolve' AND detail->>'note' LIKE "
                           "'%reference not checked with the provider%'") == 1);
    CHECK(w.executions(charged) == 1);
    CHECK(w.executions(absent) == 0);
}

TEST_CASE("operator cli: resolve --as succeeded --amount records what the provider really "
          "charged, checked with it, and the statement matches that amount from then on",
          "[cli][db][reconcile][statement][regression]") {
    // A remote_mismatch resolved as succeeded came back as amount_mismatch every night: there was
    // no way to record that the provider charged 8.80 EUR of the 25.00 asked.
    Operated w;
    const std::string ref = w.unknown_payment(fake::Fault::execute_then_fin);
    w.fake->seed_amount_mismatch({{"", w.op_of(ref)}, 880});
    w.write_config({{"timeout_ms", 10000}});
    REQUIRE(w.payrecon({"reconcile"}).exit_code == 3);
    REQUIRE(w.column(ref, "review_code") == "remote_mismatch");
    const std::string reference = w.intent_of(ref);
    const auto resolve = [&](const std::vector<std::string>& more) {
        return w.resolve_succeeded(ref, reference, "customer accepted the partial charge", more);
    };
    const Footprint before = footprint(w, ref);
    // review show offers the command with what the lookup saw filled in.
    const Run show = w.payrecon({"review", "show", w.payment_id_of(ref)});
    CHECK(contains(show.out,
                   "--as succeeded --provider-reference " + reference + " --amount 8.80 --note"));

    const Run plain = resolve({});
    INFO(plain.all());
    CHECK(plain.exit_code == 7);
    CHECK(contains(plain.err, "8.80 EUR at the provider; ours is 25.00 EUR"));
    CHECK(contains(plain.err, "--amount"));
    const Run wrong = resolve({"--amount", "9.99"});
    INFO(wrong.all());
    CHECK(wrong.exit_code == 7);
    CHECK(contains(wrong.err, "--amount says 9.99 EUR"));
    for (const char* bad : {"8.801", "8,80", "-8.80", "880 EUR"}) {
        const Run r = resolve({"--amount", bad});
        INFO(bad << ": " << r.all());
        CHECK(r.exit_code == 2);
        CHECK(contains(r.err, "write it in major units of the payment's currency"));
    }
    const Run failed_with_amount =
        w.payrecon({"review", "resolve", w.payment_id_of(ref), "--generation",
                    std::to_string(w.generation_of(ref)), "--as", "failed", "--note", "x",
                    "--amount", "8.80"});
    CHECK(failed_with_amount.exit_code == 2);
    CHECK(footprint(w, ref) == before);

    const Run right = resolve({"--amount", "8.80"});
    INFO(right.all());
    CHECK(right.exit_code == 0);
    CHECK(w.state_of(ref) == "succeeded");
    CHECK(w.column(ref, "amount_minor") == "2500"); // what was asked stays
    CHECK(w.column(ref, "charged_amount_minor") == "880");
    CHECK(w.audits(ref, "action = 'review.resolve' AND (detail->>'charged_amount_minor')::bigint "
                        "= 880 AND (detail->>'amount_minor')::bigint = 2500") == 1);
    const Run shown = w.payrecon({"payments", "show", w.payment_id_of(ref)});
    CHECK(
        contains(shown.out, "25.00 EUR; the provider charged 8.80 EUR (recorded by an operator)"));

    // Tonight's statement: the provider's 8.80 EUR matches what we recorded.
    const std::string today = reports::format_utc(std::chrono::system_clock::now()).substr(0, 10);
    const Run statement =
        w.payrecon({"statement", "--provider", w.config.name, "--from", today, "--format", "json"});
    INFO(statement.all());
    const auto j = nlohmann::json::parse(statement.out);
    CHECK(j["totals"]["amount_mismatch"]["count"] == 0);
    CHECK(j["totals"]["matched"]["count"] >= 1);
    CHECK(j["at_risk"].empty());
    CHECK(w.executions(ref) == 1);
}

TEST_CASE("operator cli: review recheck adopts what the provider has for a payment in review",
          "[cli][db][reconcile]") {
    Operated w;
    const std::string ref = w.unknown_payment(fake::Fault::execute_then_fin);
    // The provider's search is down: the lookup fails and, with one failure allowed, the payment
    // goes to review.
    w.set_lookup_down(true);
    REQUIRE(w.payrecon({"reconcile", "--lookup-failures", "1"}).exit_code == 3);
    REQUIRE(w.state_of(ref) == "needs_review");
    REQUIRE(w.column(ref, "review_code") == "lookup_failing");
    REQUIRE(w.lookups(ref, "status = 'failed'") == 1);

    w.set_lookup_down(false);
    const Run r =
        w.payrecon({"--operator", "dave", "review", "recheck", w.payment_id_of(ref), "--json"});
    CHECK(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["from"] == "needs_review");
    CHECK(j["to"] == "succeeded");
    CHECK(j["lookup"] == "found");
    CHECK(j["applied"] == true);
    CHECK(j["generation"] == w.generation_of(ref)); // what a resolve would now give
    CHECK(w.state_of(ref) == "succeeded");
    CHECK(w.column(ref, "review_code").empty());
    CHECK(w.lookups(ref) == 2);
    CHECK(w.lookups(ref, "status = 'found' AND applied AND actor = 'recheck:dave'") == 1);
    CHECK(w.events(ref, "event_type = 'payment.succeeded'") == 1);
    CHECK(w.executions(ref) == 1);
    CHECK(w.deliveries(ref) == 1);

    // Nothing left to recheck.
    const Run done = w.payrecon({"review", "recheck", w.payment_id_of(ref)});
    CHECK(done.exit_code == 7);
    CHECK(w.lookups(ref) == 2);
}

TEST_CASE("operator cli: bad input exits 2, a missing configuration 4, naming what to fix",
          "[cli][db][reconcile]") {
    Operated w;
    SECTION("reconcile --limit 0: 2") {
        const Run r = w.payrecon({"reconcile", "--limit", "0"});
        CHECK(r.exit_code == 2);
        CHECK(contains(r.err, "--limit"));
    }
    SECTION("nightly without any configuration: 4, naming --config and PAYRECON_CONFIG") {
        const Run r = w.payrecon_raw({"--database", w.url, "nightly"}, w.env());
        CHECK(r.exit_code == 4);
        CHECK(contains(r.err, "--config"));
        CHECK(contains(r.err, "PAYRECON_CONFIG"));
    }
    SECTION("a provider the configuration does not have: 2") {
        for (const char* command : {"reconcile", "nightly"}) {
            INFO(command);
            const Run r = w.payrecon({command, "--provider", "nosuch"});
            CHECK(r.exit_code == 2);
            CHECK(contains(r.err, "nosuch"));
        }
    }
    SECTION("the configuration names a key variable that is not set: 4") {
        const Run r = w.payrecon_raw(
            {"--database", w.url, "--config", w.config_file.string(), "reconcile"}, {});
        CHECK(r.exit_code == 4);
        CHECK(contains(r.err, k_key_env));
    }
}

TEST_CASE("operator cli: statement finds a seeded orphan charge, writes every format, and a rerun "
          "replaces its findings",
          "[cli][db][statement]") {
    Operated w;
    const auto refs = w.payments(2);
    {
        auto provider = providers::create_provider(w.config);
        engine::ExecutorOptions o;
        o.worker_id = "clitest-executor";
        engine::Executor ex(*w.db, {provider.get()}, o);
        while (ex.run_once() > 0) {
        }
    }
    fake::OrphanCharge orphan;
    orphan.amount = 7300;
    orphan.currency = "usd";
    const std::string orphan_id = w.fake->seed_orphan_charge(orphan).front();
    const std::string today = reports::format_utc(std::chrono::system_clock::now()).substr(0, 10);
    const std::vector<std::string> base = {"statement", "--provider", w.config.name, "--from",
                                           today};

    const Run text = w.payrecon(base);
    CHECK(text.exit_code == 3);
    CHECK(contains(text.out, "missing_local"));
    CHECK(contains(text.out, orphan_id));
    CHECK(contains(text.out, "73.00 USD"));

    auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = base;
        args.insert(args.end(), extra.begin(), extra.end());
        return args;
    };
    const Run json = w.payrecon(with({"--format", "json"}));
    CHECK(json.exit_code == 3);
    const auto j = nlohmann::json::parse(json.out);
    CHECK(j["schema"] == "payrecon.report/2");
    CHECK(j["totals"]["matched"]["count"] == 2);
    CHECK(j["totals"]["missing_local"]["count"] == 1);
    CHECK(j["findings"].size() == 1);
    // A charge we have no record of puts its whole amount at risk; it carries the provider's time,
    // and no dashboard link: a loopback test server has no dashboard.
    CHECK(j["at_risk"] == nlohmann::json{{"USD", 7300}});
    CHECK(j["findings"][0]["remote_at"].get<std::string>().rfind(today, 0) == 0);
    CHECK(j["findings"][0]["provider_link"].is_null());

    const auto html = w.dir.path() / "report.html";
    const Run file = w.payrecon(with({"--format", "html", "--output", html.string()}));
    CHECK(file.exit_code == 3);
    CHECK(file.out == "wrote " + html.string() + ": 1 finding needs attention\n");
    std::ifstream in(html);
    const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(contains(page, "<!doctype html>"));
    CHECK(contains(page, orphan_id));

    const Run csv = w.payrecon(with({"--format", "csv"}));
    CHECK(contains(csv.out, orphan_id));
    // Four runs of one window: one run row, its findings replaced each time.
    CHECK(w.value("SELECT runs FROM recon_runs WHERE provider = $1", w.config.name) == "4");
    CHECK(w.value("SELECT count(*) FROM recon_findings f JOIN recon_runs r USING (run_id) WHERE "
                  "r.provider = $1",
                  w.config.name) == "1");

    CHECK(w.payrecon(with({"--format", "pdf"})).exit_code == 2);
    CHECK(
        w.payrecon({"statement", "--provider", w.config.name, "--from", "2026-13-01"}).exit_code ==
        2);
    CHECK(w.payrecon(with({"--output", "/nonexistent-dir/report.txt"})).exit_code == 1);
}

TEST_CASE(
    "operator cli: one run writes several report files, each in its extension's format, 0600, "
    "with one line each, and a quiet window says clean",
    "[cli][db][statement][report]") {
    Operated w;
    // A window with nothing in it: yesterday of a fresh provider account.
    const std::string day =
        reports::format_utc(std::chrono::system_clock::now() - std::chrono::hours(24 * 400))
            .substr(0, 10);
    const std::vector<std::string> base = {"statement", "--provider", w.config.name, "--from", day};
    const Run quiet = w.payrecon(base);
    CHECK(quiet.exit_code == 0);
    const auto dir = w.dir.path();
    const auto html = dir / "Report.HTML";
    const auto csv = dir / "report.csv";
    const auto json = dir / "report.json";
    const auto plain = dir / "report.txt";
    const Run several = w.payrecon([&] {
        auto args = base;
        for (const auto& p : {html, csv, json, plain}) {
            args.insert(args.end(), {"--output", p.string()});
        }
        return args;
    }());
    CHECK(several.exit_code == 0);
    for (const auto& p : {html, csv, json, plain}) {
        INFO(p.string());
        CHECK(contains(several.out, "wrote " + p.string() + ": clean, 0 records\n"));
        const auto perms = std::filesystem::status(p).permissions();
        CHECK((perms & std::filesystem::perms::all) ==
              (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
    }
    const auto read = [](const std::filesystem::path& p) {
        std::ifstream in(p);
        return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    CHECK(contains(read(html), "<!doctype html>"));
    CHECK(nlohmann::json::parse(read(json))["schema"] == "payrecon.report/2");
    CHECK(read(csv).rfind("category,", 0) == 0);
    CHECK(contains(read(plain), "payrecon statement"));
    // A --format that contradicts a file's extension is refused before anything is written.
    const auto refused = dir / "refused.csv";
    const Run contradicted = w.payrecon([&] {
        auto args = base;
        args.insert(args.end(), {"--format", "html", "--output", refused.string()});
        return args;
    }());
    CHECK(contradicted.exit_code == 2);
    CHECK(contains(contradicted.err, "extension"));
    CHECK_FALSE(std::filesystem::exists(refused));
}

TEST_CASE(
    "operator cli: statement and nightly with a wrong API key exit 4 naming the key variable, "
    "retry nothing, and keep the window's stored findings",
    "[cli][db][statement][regression]") {
    Operated w;
    fake::OrphanCharge orphan;
    orphan.amount = 880;
    orphan.currency = "eur";
    w.fake->seed_orphan_charge(orphan);
    const std::string today = reports::format_utc(std::chrono::system_clock::now()).substr(0, 10);
    const std::vector<std::string> statement = {"statement", "--provider", w.config.name, "--from",
                                                today};
    REQUIRE(w.payrecon(statement).exit_code == 3);
    const auto findings = [&w] {
        return w.value("SELECT count(*) FROM recon_findings f JOIN recon_runs r USING (run_id) "
                       "WHERE r.provider = $1 AND r.status = 'done'",
                       w.config.name);
    };
    REQUIRE(findings() == "1");
    const Env wrong_key = {{k_key_env, "sk_test_rotated_away"}};
    std::vector<std::string> args = {"--database", w.url, "--config", w.config_file.string()};
    args.insert(args.end(), statement.begin(), statement.end());
    const Run refused = w.payrecon_raw(args, wrong_key);
    CHECK(refused.exit_code == 4);
    const std::string said = refused.out + refused.err;
    CHECK(contains(said, "HTTP 401"));
    CHECK(contains(said, k_key_env));
    CHECK_FALSE(contains(said, "resume"));
    CHECK_FALSE(contains(said, "sk_test_rotated_away"));
    CHECK(findings() == "1");

    const Run nightly = w.payrecon_raw({"--database", w.url, "--config", w.config_file.string(),
                                        "nightly", "--statement-date", today},
                                       wrong_key);
    CHECK(nightly.exit_code == 4);
    CHECK(contains(nightly.out + nightly.err, k_key_env));
    // The last line agrees with the exit code (it said "attention needed -- work the queue").
    CHECK(contains(nightly.out, "result: CONFIGURATION ERROR (exit 4)"));
    CHECK_FALSE(contains(nightly.out, "attention needed"));
    CHECK(findings() == "1");
}

TEST_CASE("operator cli: nightly lists the first findings of each category, points to the report "
          "for the rest, and its last line says attention with the report",
          "[cli][db][statement][regression]") {
    Operated w;
    fake::OrphanCharge orphan;
    orphan.amount = 1000;
    orphan.currency = "eur";
    for (int i = 0; i < 12; ++i) {
        w.fake->seed_orphan_charge(orphan);
    }
    const std::string today = reports::format_utc(std::chrono::system_clock::now()).substr(0, 10);
    const auto html = w.dir.path() / "nightly.html";
    const Run r = w.payrecon(
        {"nightly", "--statement-date", today, "--list-findings", "3", "--output", html.string()});
    CHECK(r.exit_code == 3);
    std::size_t listed = 0;
    for (std::size_t at = r.out.find("\n    missing_local  "); at != std::string::npos;
         at = r.out.find("\n    missing_local  ", at + 1)) {
        ++listed;
    }
    CHECK(listed == 3);
    CHECK(contains(r.out, "... and 9 more finding(s)"));
    CHECK(contains(r.out, "all of them are in " + html.string()));
    CHECK(contains(r.out, "result: attention needed (exit 3); the report: " + html.string()));
    CHECK(contains(r.out, "12 finding(s) in the provider's books"));
    // The cron mail: the amount beside the count, the report pointed to is the one given (not the
    // advice to write one), and the result line is the last line.
    CHECK(contains(r.out, " missing_local 12 (120.00 EUR)"));
    CHECK(contains(r.out, "(listed above; all of them are in " + html.string() + ")"));
    CHECK_FALSE(contains(r.out, "--output report.html"));
    const std::string trimmed = r.out.substr(0, r.out.find_last_not_of('\n') + 1);
    CHECK(trimmed.substr(trimmed.rfind('\n') + 1).rfind("result: attention needed (exit 3)", 0) ==
          0);
    // A window with nothing on either side says so, instead of a bare title.
    const Run quiet = w.payrecon({"nightly", "--statement-date", "2026-01-01"});
    INFO(quiet.out << quiet.err);
    CHECK(contains(quiet.out, "no records on either side in this window"));
    // A window that has not begun is refused, not diffed to nothing.
    const Run future =
        w.payrecon({"statement", "--provider", w.config.name, "--from", "2099-01-01"});
    CHECK(future.exit_code == 2);
    CHECK(contains(future.err, "--from 2099-01-01T00:00:00Z is in the future"));
    // A mistyped provider is named, with the nearest known one, instead of listing nothing.
    std::string typo = w.config.name;
    typo.back() = typo.back() == 'x' ? 'y' : 'x';
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"review", "list", "--provider", typo},
          std::vector<std::string>{"payments", "list", "--provider", typo, "--json"}}) {
        const Run refused = w.payrecon(args);
        INFO(refused.all());
        CHECK(refused.exit_code == 2);
        CHECK(contains(refused.err, "no payment names the provider '" + typo + "'"));
        CHECK(contains(refused.err, "did you mean '" + w.config.name + "'?"));
    }
    // A known provider with nothing to list is no error.
    CHECK(w.payrecon({"review", "list", "--provider", w.config.name}).exit_code == 0);
    CHECK(std::filesystem::exists(html));
    CHECK(contains(r.out, "wrote " + html.string() + ": "));
    CHECK_FALSE(contains(r.out, "wrote " + html.string() + ": clean"));
}

TEST_CASE("operator cli: the nightly report counts a payment sent to review once, with the "
          "statement's evidence on it",
          "[cli][db][statement][regression]") {
    // A payment the reconciler sent to review and the statement then found as unresolved_unknown
    // was two findings of the report, and two of its count of findings needing attention.
    MigratedScratch scratch;
    Operated w(scratch.url());
    const std::string charged = w.unknown_payment(fake::Fault::execute_then_fin);
    w.write_config({{"capabilities", {{"lookup", false}}}}); // no lookup: review (no_lookup)
    const std::string today = reports::format_utc(std::chrono::system_clock::now()).substr(0, 10);
    const auto json = w.dir.path() / "nightly.json";
    const Run r = w.payrecon({"nightly", "--statement-date", today, "--output", json.string()});
    INFO(r.all());
    CHECK(r.exit_code == 3);
    REQUIRE(w.state_of(charged) == "needs_review");
    std::ifstream in(json);
    const auto report = nlohmann::json::parse(in);
    const std::string id = w.payment_id_of(charged);
    int entries = 0;
    for (const auto& f : report["findings"]) {
        if (f["payment_id"] == id) {
            ++entries;
            CHECK(f["category"] == "review");
            CHECK(f["remote_amount"] == 2500); // the statement's evidence, on the one entry
            CHECK(f["provider_reference"].is_string());
            CHECK(f["detail"].get<std::string>().find("the statement: ") != std::string::npos);
        }
    }
    CHECK(entries == 1);
    CHECK(report["totals"]["unresolved_unknown"]["count"] == 0);
    CHECK(report["totals"]["review"]["count"] == 1);
    CHECK(contains(r.out, "wrote " + json.string() + ": 1 finding needs attention"));

    // The review entry shows the statement's evidence, and its suggested command the reference
    // the statement found (it said "the reconciler settles it" of a payment the reconciler had
    // just sent to review, and offered `--provider-reference REF`).
    const Run shown = w.payrecon({"review", "show", id, "--json"});
    REQUIRE(shown.exit_code == 0);
    const auto j = nlohmann::json::parse(shown.out);
    REQUIRE(j["statement_findings"].size() == 1);
    const auto& evidence = j["statement_findings"][0];
    CHECK(evidence["category"] == "unresolved_unknown");
    const std::string reference = evidence["provider_reference"];
    CHECK(reference.rfind("pi_", 0) == 0);
    CHECK(evidence["detail"].get<std::string>().find("an operator decides it") !=
          std::string::npos);
    bool filled = false;
    for (const auto& c : j["commands"]) {
        filled = filled || c.get<std::string>().find("--provider-reference " + reference + " ") !=
                               std::string::npos;
        CHECK(c.get<std::string>().find("review recheck") == std::string::npos); // no_lookup
    }
    CHECK(filled);
    CHECK(contains(w.payrecon({"review", "show", id}).out, "Statement findings (1)"));
}

TEST_CASE(
    "operator cli: nightly exits 3 for a payment naming a provider the configuration does not "
    "have, and for one pending past --stuck-after, naming each and the command",
    "[cli][db][reconcile][attention]") {
    MigratedScratch scratch;
    Operated w(scratch.url());
    // A payment for a provider nobody configured: no worker will ever send it.
    const std::string ref = unique_name("orphan");
    {
        IntakeService intake(*w.db, test_keys());
        const std::string body = R"({"amount": 700, "currency": "EUR", "merchant_reference": ")" +
                                 ref +
                                 R"(", "provider": "nosuchpsp", "payment_method": "pm_card_visa"})";
        REQUIRE(intake.create_payment(w.writer.principal, "k-" + ref, body, "").status == 202);
    }
    const Run orphan = w.payrecon({"nightly", "--no-statement", "--no-send"});
    INFO(orphan.all());
    CHECK(orphan.exit_code == 3);
    CHECK(contains(orphan.out, "NOT CONFIGURED"));
    CHECK(contains(orphan.out, "nosuchpsp"));
    CHECK_FALSE(contains(orphan.out, "result: clean"));
    // The way to cancel it, complete: the command its payments show prints runs as printed (the
    // nightly named `payrecon payments cancel <id>`, without a generation or a note: exit 2).
    CHECK_FALSE(contains(orphan.out, "<id>"));
    CHECK(contains(orphan.out, "payrecon payments list --state pending"));
    CHECK(contains(orphan.out, "the cancel command each one's payments show prints"));
    const Run shown = w.payrecon({"payments", "show", w.payment_id_of(ref)});
    const std::string cancel = shown.out.substr(shown.out.find("payrecon payments cancel "));
    const Run canceled =
        w.payrecon(pasted(cancel.substr(0, cancel.find('\n')), "no provider will ever send it"));
    INFO(canceled.all());
    CHECK(canceled.exit_code == 0);
    CHECK(w.state_of(ref) == "failed");

    // A configured provider's payment nobody sent for longer than --stuck-after.
    MigratedScratch scratch2;
    Operated v(scratch2.url());
    const auto refs = v.payments(1);
    v.exec("UPDATE payments SET updated_at = now() - interval '2 hours', created_at = now() - "
           "interval '2 hours' WHERE merchant_reference = $1",
           refs[0]);
    const Run stuck = v.payrecon({"nightly", "--no-statement", "--no-send", "--json"});
    INFO(stuck.all());
    CHECK(stuck.exit_code == 3);
    const auto j = nlohmann::json::parse(stuck.out);
    CHECK(j["waiting_too_long"] == 1);
    CHECK(j["not_configured"] == 0);
    // Under the threshold it is just in flight: clean.
    const Run patient =
        v.payrecon({"nightly", "--no-statement", "--no-send", "--stuck-after", "3h"});
    CHECK(patient.exit_code == 0);
    CHECK(v.state_of(refs[0]) == "pending");
}

TEST_CASE("operator cli: payments cancel fails a payment never sent, fenced by generation, with an "
          "audit row and a payment.failed event, and refuses one that may have been sent",
          "[cli][db][cancel]") {
    Operated w;
    const auto refs = w.payments(1);
    const std::string& ref = refs[0];
    const std::string id = w.payment_id_of(ref);
    const long long generation = w.generation_of(ref);

    const Run stale =
        w.payrecon({"payments", "cancel", id, "--generation", std::to_string(generation + 1),
                    "--note", "customer withdrew the order"});
    CHECK(stale.exit_code == 7);
    // A generation it never had: named as such, not as a change since it was shown.
    CHECK(contains(stale.all(), "generation " + std::to_string(generation + 1) +
                                    " is not payment " + id + "'s: it is at generation " +
                                    std::to_string(generation)));
    CHECK(w.state_of(ref) == "pending");

    const Run done =
        w.payrecon({"payments", "cancel", id, "--generation", std::to_string(generation), "--note",
                    "customer withdrew the order"});
    INFO(done.all());
    CHECK(done.exit_code == 0);
    CHECK(w.state_of(ref) == "failed");
    CHECK(w.generation_of(ref) == generation + 1);
    CHECK(
        w.audits(ref,
                 "action = 'payment.cancel' AND detail->>'note' = 'customer withdrew the order'") ==
        1);
    CHECK(w.events(ref, "event_type = 'payment.failed'") == 1);
    CHECK(w.deliveries(ref) == 0);

    // Canceled twice: refused, nothing more written.
    const Run again = w.payrecon({"payments", "cancel", id, "--generation",
                                  std::to_string(generation + 1), "--note", "again"});
    CHECK(again.exit_code == 7);
    CHECK(w.audits(ref, "action = 'payment.cancel'") == 1);

    // A payment whose attempt may have reached the provider is never "canceled as never sent",
    // even back in retry_scheduled.
    const std::string sent = w.unknown_payment(fake::Fault::execute_then_fin);
    w.exec("UPDATE payments SET state = 'retry_scheduled', next_attempt_at = now() + interval '1 "
           "hour' "
           "WHERE merchant_reference = $1",
           sent);
    const Run refused = w.payrecon({"payments", "cancel", w.payment_id_of(sent), "--generation",
                                    std::to_string(w.generation_of(sent)), "--note", "try"});
    CHECK(refused.exit_code == 7);
    CHECK(contains(refused.all(), "may have reached the provider"));
    CHECK(w.state_of(sent) == "retry_scheduled");
    CHECK(w.audits(sent, "action = 'payment.cancel'") == 0);
}

TEST_CASE("operator cli: reconcile whose every status query fails exits 1, and a nightly right "
          "after is not clean while those payments are still unknown",
          "[cli][db][reconcile][regression]") {
    // Issue 36: both said nothing was wrong -- reconcile exited 0, and the nightly after it,
    // finding nothing due, printed "result: clean" over two payments nobody could look up.
    MigratedScratch scratch;
    Operated w(scratch.url());
    const auto refs = w.unknown_payments(2, fake::Fault::execute_then_fin);
    w.write_config({}, "http://127.0.0.1:" + std::to_string(closed_port()));
    const Run failed = w.payrecon({"reconcile"});
    INFO(failed.all());
    CHECK(failed.exit_code == 1);
    CHECK(contains(failed.err, "every one of the 2 status queries FAILED"));
    for (const auto& ref : refs) {
        CHECK(w.state_of(ref) == "unknown");
        CHECK(w.lookups(ref, "status = 'failed'") == 1);
    }

    // The provider reachable again; the payments' next check is later than this nightly.
    w.write_config();
    const Run nightly = w.payrecon({"nightly", "--no-statement", "--json"});
    INFO(nightly.all());
    CHECK(nightly.exit_code == 3);
    const auto s = nlohmann::json::parse(nightly.out);
    CHECK(s["result"] == "attention");
    CHECK(s["status_queries_failed"] == 0); // this run asked nothing
    CHECK(s["unknown_after_failed_queries"] == 2);
    REQUIRE(s["attention"].size() == 1);
    CHECK(contains(s["attention"][0].get<std::string>(), "whose last status query FAILED"));
    for (const auto& ref : refs) {
        CHECK(w.lookups(ref) == 1);
    }
    CHECK_FALSE(contains(w.payrecon({"nightly", "--no-statement"}).out, "result: clean"));
}

TEST_CASE("operator cli: reconcile with a wrong API key asks one payment, exits 4 naming the key "
          "variable, and leaves the others for the next run",
          "[cli][db][reconcile][credentials]") {
    Operated w;
    const auto refs = w.unknown_payments(3, fake::Fault::execute_then_fin);
    const std::string wrong = "sk_test_rotated_away_" + to_hex(random_bytes(4));
    const Run refused =
        w.payrecon_raw({"--database", w.url, "--config", w.config_file.string(), "reconcile"},
                       {{k_key_env, wrong}});
    INFO(refused.all());
    CHECK(refused.exit_code == 4);
    CHECK(contains(refused.err, k_key_env));
    CHECK(contains(refused.err, "HTTP 401"));
    CHECK_FALSE(contains(refused.all(), wrong));
    long long asked = 0;
    for (const auto& ref : refs) {
        asked += w.lookups(ref);
        CHECK(w.state_of(ref) == "unknown");
    }
    CHECK(asked == 1);
    CHECK(w.count("payment_lookups", "http_status = 401") == 1);

    // The key fixed: each of them is found (the fake executed each) and adopted.
    w.exec("UPDATE payments SET next_attempt_at = now() - interval '1 second' "
           "WHERE tenant_id = $1::uuid AND state = 'unknown'",
           w.tenant.tenant_id);
    const Run fixed = w.payrecon({"reconcile"});
    INFO(fixed.all());
    CHECK(fixed.exit_code == 0);
    for (const auto& ref : refs) {
        CHECK(w.state_of(ref) == "succeeded");
        CHECK(w.executions(ref) == 1);
    }
}

TEST_CASE("operator cli: Ctrl-C stops nightly after the payment in hand, and the summary says what "
          "it did and what it left",
          "[cli][db][reconcile][regression]") {
    // Ctrl-C killed nightly where it stood and said nothing: which payments were decided, which
    // were claimed and left, whether the statement ran.
    Operated w;
    const auto refs = w.unknown_payments(12, fake::Fault::execute_then_fin);
    auto faults = w.fake->faults();
    faults.latency = std::chrono::milliseconds(400); // each status query takes a while
    w.fake->set_faults(faults);
    auto nightly = w.start({"nightly", "--no-statement"}, {}, ProcessGroup::own);
    REQUIRE(payrecon::testing::wait_until([&] { return w.count("payment_lookups", "true") >= 2; },
                                          std::chrono::seconds(60)));
    nightly->signal(SIGINT);
    const Run r = nightly->wait();
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "SIGINT: stopping after the payment in hand"));
    CHECK(contains(r.out, "result: INTERRUPTED (exit 1) interrupted while reconciling, after "));
    CHECK(
        contains(r.out, "the unknown payments this run claimed and did not ask are due again in"));
    CHECK(contains(r.out, "run payrecon nightly again to finish"));
    // What it says is what it did: the decided ones succeeded, the rest are still unknown and
    // none was sent twice or left half-written.
    long long decided = 0;
    for (const auto& ref : refs) {
        const std::string state = w.state_of(ref);
        CHECK((state == "succeeded" || state == "unknown"));
        decided += state == "succeeded" ? 1 : 0;
        CHECK(w.executions(ref) == 1);
    }
    CHECK(decided >= 2);
    CHECK(decided < 12);
    CHECK(contains(r.out, "after " + std::to_string(decided) + " payment(s) reconciled"));
}
