// The reconciler with the real Stripe adapter over loopback HTTP against the fake provider
// (DESIGN sections 7, 8 and 12). Counts come from the provider's own ledger.
#include "core/errors.hpp"
#include "engine/nightly.hpp"
#include "engine/reconciler.hpp"
#include "engine/worker.hpp"
#include "providers/adyen/adapter.hpp"
#include "providers/registry.hpp"
#include "store/reconcile_store.hpp"
#include "tests/execution/matrix.hpp"
#include "tests/execution/world.hpp"
#include "tests/support/wait.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <sstream>
#include <thread>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// A payment made unknown by `fault` on its first send (settle delay 0 unless said otherwise).
struct UnknownPayment {
    World w;
    std::unique_ptr<providers::Provider> provider;
    std::string ref;
    std::string op;

    explicit UnknownPayment(fake::Fault fault,
                            std::chrono::seconds settle = std::chrono::seconds(0),
                            bool idempotency = true)
        : w(next({fault})) {
        w.config.settle_delay = settle;
        if (!idempotency) {
            w.config.overrides.idempotency_keys = false;
        }
        provider = providers::create_provider(w.config);
        ref = w.payments(1)[0];
        op = w.op_of(ref);
        engine::Executor ex(*w.db, {provider.get()}, w.options());
        REQUIRE(ex.run_once() == 1);
        REQUIRE(w.state_of(ref) == "unknown");
    }

    std::vector<engine::ReconcileOutcome> reconcile(ReconcilePolicy policy = {},
                                                    bool dry_run = false) {
        engine::ReconcilerOptions o;
        o.actor = "test-reconciler";
        o.policy = policy;
        o.dry_run = dry_run;
        engine::Reconciler r(*w.db, {provider.get()}, o);
        return r.run();
    }
    // Sends what is due (a re-send the reconciler scheduled).
    int send() {
        engine::Executor ex(*w.db, {provider.get()}, w.options());
        return ex.run_once();
    }
    std::string column(const std::string& name) {
        return query_value("SELECT coalesce(" + name +
                               "::text, '') FROM payments WHERE merchant_reference = $1",
                           ref);
    }
    long long lookups() {
        return std::stoll(
            query_value("SELECT count(*) FROM payment_lookups l JOIN payments p USING "
                        "(tenant_id, payment_id) WHERE p.merchant_reference = $1",
                        ref));
    }
    long long events(const std::string& type) {
        return count_rows("outbox", w.tenant.tenant_id, "event_type = '" + type + "'");
    }
    long long audits(const std::string& action) {
        return count_rows("audit_log", w.tenant.tenant_id, "action = '" + action + "'");
    }
};

} // namespace

TEST_CASE("reconcile: executed, then the connection broke: the lookup finds it, succeeded, "
          "1 execution, no re-send",
          "[reconcile][db][fault]") {
    const fake::Fault fault =
        GENERATE(fake::Fault::execute_then_hang, fake::Fault::execute_then_fin,
                 fake::Fault::execute_then_rst, fake::Fault::execute_then_partial,
                 fake::Fault::http_500_after_execute);
    INFO(fake::to_string(fault));
    UnknownPayment u(fault);
    const auto out = u.reconcile();
    REQUIRE(out.size() == 1);
    CHECK(out[0].decision.action == ReconcileAction::adopt_succeeded);
    CHECK(out[0].applied);
    CHECK(u.w.state_of(u.ref) == "succeeded");
    CHECK(u.column("provider_reference").rfind("pi_", 0) == 0);
    CHECK(u.w.executions(u.op) == 1);
    CHECK(u.w.deliveries(u.op) == 1);
    CHECK(u.lookups() == 1);
    CHECK(u.events("payment.succeeded") == 1);
    CHECK(u.audits("payment.reconciled") == 1);
    CHECK(u.send() == 0);
    CHECK(u.reconcile().empty());
    CHECK(u.w.deliveries(u.op) == 1);
}

TEST_CASE("reconcile: lookup stale through the settle delay: no 'not found' conclusion inside it, "
          "resolved after it, 1 execution",
          "[reconcile][db][fault]") {
    UnknownPayment u(fake::Fault::execute_then_fin, std::chrono::seconds(30));
    auto faults = u.w.fake->faults();
    faults.lookup_stale = std::chrono::seconds(20);
    u.w.fake->set_faults(faults);

    // Inside the settle delay the payment is not due: nobody asks.
    CHECK(u.reconcile().empty());
    CHECK(u.lookups() == 0);
    // An operator's recheck asks at once; "not found" inside the delay proves nothing.
    engine::Reconciler operator_recheck(*u.w.db, {u.provider.get()}, {});
    const auto early = operator_recheck.recheck(u.w.tenant.tenant_id, u.w.payment_id_of(u.ref));
    REQUIRE(early);
    CHECK(early->lookup == LookupStatus::not_found);
    CHECK(early->decision.action == ReconcileAction::check_later);
    CHECK(u.w.state_of(u.ref) == "unknown");
    CHECK(u.w.deliveries(u.op) == 1);

    // The delay passes (on both clocks): the search index has caught up.
    u.w.fake->advance_clock(std::chrono::seconds(31));
    exec_sql("UPDATE payments SET last_attempt_at = last_attempt_at - interval '31 seconds', "
             "next_attempt_at = now() - interval '1 second' WHERE merchant_reference = '" +
             u.ref + "'");
    const auto out = u.reconcile();
    REQUIRE(out.size() == 1);
    CHECK(out[0].decision.action == ReconcileAction::adopt_succeeded);
    CHECK(u.w.state_of(u.ref) == "succeeded");
    CHECK(u.w.executions(u.op) == 1);
    CHECK(u.w.deliveries(u.op) == 1);
    CHECK(u.lookups() == 2);
}

TEST_CASE("reconcile: lookup down: checked again, then needs_review (lookup_failing), 1 execution, "
          "an operator resolves it as succeeded with an audit row and an outbox event",
          "[reconcile][db][fault]") {
    UnknownPayment u(fake::Fault::execute_then_hang);
    auto faults = u.w.fake->faults();
    faults.lookup_down = true;
    u.w.fake->set_faults(faults);

    for (int i = 1; i <= 2; ++i) {
        const auto out = u.reconcile();
        REQUIRE(out.size() == 1);
        CHECK(out[0].lookup == LookupStatus::failed);
        CHECK(out[0].decision.action == ReconcileAction::check_later);
        CHECK(u.w.state_of(u.ref) == "unknown");
        CHECK(u.column("lookup_failures") == std::to_string(i));
        // Not due again before its backoff; then make it due.
        CHECK(u.reconcile().empty());
        exec_sql("UPDATE payments SET next_attempt_at = now() - interval '1 second' "
                 "WHERE merchant_reference = '" +
                 u.ref + "'");
    }
    const auto out = u.reconcile();
    REQUIRE(out.size() == 1);
    CHECK(out[0].decision.action == ReconcileAction::review);
    CHECK(u.w.state_of(u.ref) == "needs_review");
    CHECK(u.column("review_code") == "lookup_failing");
    CHECK(u.lookups() == 3);
    CHECK(u.events("payment.needs_review") == 1);
    CHECK(u.w.executions(u.op) == 1);
    CHECK(u.w.deliveries(u.op) == 1);
    CHECK(u.reconcile().empty()); // review is for people: the reconciler leaves it alone
    CHECK(u.send() == 0);

    // The store holds to the resolution rules whoever calls it: a retry without the operator's
    // confirmation that no charge exists, or a success without the provider's reference, is
    // refused and writes nothing.
    store::Resolution unconfirmed;
    unconfirmed.tenant_id = u.w.tenant.tenant_id;
    unconfirmed.payment_id = u.w.payment_id_of(u.ref);
    unconfirmed.generation = u.w.generation_of(u.ref);
    unconfirmed.decision = OperatorDecision::retry;
    unconfirmed.note = "looked";
    unconfirmed.operator_name = "alice";
    CHECK_THROWS_AS(store::resolve_payment(*u.w.db, unconfirmed), UsageError);
    unconfirmed.decision = OperatorDecision::succeeded;
    CHECK_THROWS_AS(store::resolve_payment(*u.w.db, unconfirmed), UsageError);
    CHECK(u.w.state_of(u.ref) == "needs_review");
    CHECK(u.w.generation_of(u.ref) == unconfirmed.generation);
    CHECK(count_rows("audit_log", u.w.tenant.tenant_id, "action = 'review.resolve'") == 0);

    store::Resolution r;
    r.tenant_id = u.w.tenant.tenant_id;
    r.payment_id = u.w.payment_id_of(u.ref);
    r.generation = u.w.generation_of(u.ref);
    r.decision = OperatorDecision::succeeded;
    r.note = "found in the Stripe dashboard";
    r.operator_name = "alice";
    r.provider_reference = "pi_from_dashboard";
    const auto result = store::resolve_payment(*u.w.db, r);
    CHECK(result.status == store::ResolveResult::Status::applied);
    CHECK(result.state == "succeeded");
    CHECK(u.w.state_of(u.ref) == "succeeded");
    CHECK(u.column("provider_reference") == "pi_from_dashboard");
    CHECK(u.column("review_code").empty());
    CHECK(u.audits("review.resolve") == 1);
    CHECK(
        query_value(
            "SELECT actor FROM audit_log WHERE tenant_id = $1::uuid AND action = 'review.resolve'",
            u.w.tenant.tenant_id) == "alice");
    CHECK(u.events("payment.succeeded") == 1);
    CHECK(u.w.executions(u.op) == 1);
    // The same resolution again: the generation moved on.
    CHECK(store::resolve_payment(*u.w.db, r).status == store::ResolveResult::Status::changed);
    CHECK(u.audits("review.resolve") == 1);
}

TEST_CASE("reconcile: confirmed absent inside the key window: sent again with the same operation "
          "ID, succeeded, 1 execution",
          "[reconcile][db][fault]") {
    const fake::Fault fault =
        GENERATE(fake::Fault::drop_before_execute, fake::Fault::http_500_before_execute);
    INFO(fake::to_string(fault));
    UnknownPayment u(fault);
    CHECK(u.w.executions(u.op) == 0);
    const auto out = u.reconcile();
    REQUIRE(out.size() == 1);
    CHECK(out[0].lookup == LookupStatus::not_found);
    CHECK(out[0].decision.action == ReconcileAction::resend);
    CHECK(u.w.state_of(u.ref) == "retry_scheduled");
    CHECK(u.send() == 1);
    CHECK(u.w.state_of(u.ref) == "succeeded");
    CHECK(u.w.executions(u.op) == 1);
    CHECK(u.w.deliveries(u.op) == 2);
    CHECK(count_rows("payment_attempts", u.w.tenant.tenant_id, "operation_id = '" + u.op + "'") ==
          2);
}

TEST_CASE(
    "reconcile: confirmed absent outside the key window, or at a provider without idempotency "
    "keys: needs_review, no new send",
    "[reconcile][db][fault]") {
    const bool outside_window = GENERATE(true, false);
    INFO((outside_window ? "outside the key window" : "no idempotency keys"));
    UnknownPayment u(fake::Fault::drop_before_execute, std::chrono::seconds(0), outside_window);
    if (outside_window) {
        // The first attempt was 23.5 hours ago: past 24 h retention minus the 1 h margin.
        exec_sql("UPDATE payments SET first_attempt_at = now() - interval '23 hours 30 minutes' "
                 "WHERE merchant_reference = '" +
                 u.ref + "'");
    }
    const auto out = u.reconcile();
    REQUIRE(out.size() == 1);
    CHECK(out[0].lookup == LookupStatus::not_found);
    CHECK(u.w.state_of(u.ref) == "needs_review");
    CHECK(u.column("review_code") == (outside_window ? "outside_key_window" : "no_idempotency"));
    CHECK(u.send() == 0);
    CHECK(u.w.deliveries(u.op) == 1);
    CHECK(u.w.executions(u.op) == 0);
}

TEST_CASE("reconcile: a provider without lookup (adyen): needs_review at once, nothing asked",
          "[reconcile][db]") {
    World w;
    providers::ProviderConfig adyen;
    adyen.name = "ad" + to_hex(random_bytes(8));
    adyen.kind = "adyen";
    adyen.base_url = "http://127.0.0.1:9"; // never called
    adyen.settings =
        providers::adyen::settings("TestMerchant", "https://shop.example.com/checkout/return");
    adyen.credentials = providers::ApiKey{"ADYEN_API_KEY", Secret("test_adyen_key")};
    auto provider = providers::create_provider(adyen);
    w.config.name = adyen.name;
    const std::string ref = w.payments(1)[0];
    exec_sql("UPDATE payments SET state = 'unknown', attempt_count = 1, first_attempt_at = now(), "
             "last_attempt_at = now() WHERE merchant_reference = '" +
             ref + "'");
    engine::Reconciler r(*w.db, {provider.get()}, {});
    const auto out = r.run();
    REQUIRE(out.size() == 1);
    CHECK(out[0].lookup == LookupStatus::not_asked);
    CHECK(w.state_of(ref) == "needs_review");
    CHECK(query_value("SELECT review_code FROM payments WHERE merchant_reference = $1", ref) ==
          "no_lookup");
    CHECK(count_rows("payment_lookups", w.tenant.tenant_id, "status = 'not_asked' AND applied") ==
          1);
}

TEST_CASE("reconcile: --dry-run decides and changes nothing", "[reconcile][db]") {
    UnknownPayment u(fake::Fault::execute_then_fin);
    const long long generation = u.w.generation_of(u.ref);
    const auto out = u.reconcile({}, true);
    REQUIRE(out.size() == 1);
    CHECK(out[0].decision.action == ReconcileAction::adopt_succeeded);
    CHECK_FALSE(out[0].applied);
    CHECK(u.w.state_of(u.ref) == "unknown");
    CHECK(u.w.generation_of(u.ref) == generation);
    CHECK(u.lookups() == 0);
    CHECK(u.events("payment.succeeded") == 0);
}

TEST_CASE("reconcile: an operator's resolution racing the reconciler: exactly one wins, the other "
          "is refused",
          "[reconcile][db][race]") {
    const bool operator_first = GENERATE(true, false);
    INFO((operator_first ? "the operator resolves during the reconciler's lookup"
                         : "the operator resolves with what they were shown before the claim"));
    UnknownPayment u(fake::Fault::execute_then_fin);
    // The fake's gate holds the reconciler's lookup in flight while the operator acts (it was a
    // 600 ms latency against an 800 ms client timeout: on a loaded machine the lookup could end
    // before the operator acted). The client waits up to 30 s for the gate.
    providers::ProviderConfig patient = u.w.config;
    patient.timeout = std::chrono::seconds(30);
    const auto provider = providers::create_provider(patient);
    u.w.fake->close_gate();
    const long long shown = u.w.generation_of(u.ref);

    std::vector<engine::ReconcileOutcome> out;
    std::thread reconciler([&] {
        auto db = connect();
        engine::Reconciler r(*db, {provider.get()}, {});
        out = r.run();
    });
    struct Join {
        std::thread& t;
        ~Join() {
            if (t.joinable()) {
                t.join();
            }
        }
    } join{reconciler};
    // The reconciler has claimed the payment (generation + 1) and its lookup waits at the gate.
    struct Open {
        fake::FakeProvider& fake;
        ~Open() { fake.open_gate(); } // never leave the reconciler waiting, whatever fails below
    } gate_opens{*u.w.fake};
    REQUIRE(wait_until([&] { return u.w.fake->held() == 1; }, std::chrono::seconds(10)));
    REQUIRE(u.w.generation_of(u.ref) == shown + 1);
    store::Resolution r;
    r.tenant_id = u.w.tenant.tenant_id;
    r.payment_id = u.w.payment_id_of(u.ref);
    r.generation = operator_first ? u.w.generation_of(u.ref) : shown;
    r.decision = OperatorDecision::failed;
    r.note = "customer cancelled";
    r.operator_name = "bob";
    const auto result = store::resolve_payment(*u.w.db, r);
    u.w.fake->open_gate();
    reconciler.join();
    REQUIRE(out.size() == 1);
    if (operator_first) {
        CHECK(result.status == store::ResolveResult::Status::applied);
        CHECK(out[0].fenced_out);
        CHECK(u.w.state_of(u.ref) == "failed");
    } else {
        CHECK(result.status == store::ResolveResult::Status::changed);
        CHECK(out[0].applied);
        CHECK(u.w.state_of(u.ref) == "succeeded");
    }
    // Exactly one state change, one event, whoever won.
    CHECK(count_rows("outbox", u.w.tenant.tenant_id,
                     "event_type IN ('payment.succeeded', 'payment.failed')") == 1);
    CHECK(u.lookups() == 1); // the losing reconciler's observation is still recorded
}

TEST_CASE("reconcile: several reconcilers at once never handle one payment twice",
          "[reconcile][db][race]") {
    World w(next({}));
    w.config.settle_delay = std::chrono::seconds(0);
    const auto refs = w.payments(40);
    exec_sql("UPDATE payments SET state = 'unknown', attempt_count = 1, first_attempt_at = now(), "
             "last_attempt_at = now() WHERE tenant_id = '" +
             w.tenant.tenant_id + "'");
    std::vector<std::thread> threads;
    std::atomic<int> handled{0};
    for (int i = 0; i < 4; ++i) {
        threads.emplace_back([&] {
            auto db = connect();
            auto provider = providers::create_provider(w.config);
            engine::ReconcilerOptions o;
            o.batch = 3;
            engine::Reconciler r(*db, {provider.get()}, o);
            handled += static_cast<int>(r.run().size());
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    CHECK(handled == 40);
    CHECK(count_rows("payment_lookups", w.tenant.tenant_id, "true") == 40);
    CHECK(count_rows("payments", w.tenant.tenant_id, "state = 'retry_scheduled'") == 40);
}

TEST_CASE("reconcile: a mixed run of 1,000 payments with every fault mode ends with the invariants "
          "of DESIGN section 12",
          "[reconcile][db][fault][slow]") {
    const fake::FaultConfig faults = every_fault_at_rates(20261202);
    World w(faults);
    w.config.settle_delay = std::chrono::seconds(0);

    // 1,000 payments in three currencies through the real intake.
    const std::vector<std::pair<std::string, long long>> kinds = {
        {"EUR", 2500}, {"USD", 1999}, {"JPY", 1200}};
    IntakeService intake(*w.db, test_keys());
    for (int i = 0; i < 1000; ++i) {
        const auto& [currency, amount] = kinds[static_cast<std::size_t>(i) % kinds.size()];
        const std::string ref = unique_name("mix");
        const std::string body = R"({"amount": )" + std::to_string(amount + i) +
                                 R"(, "currency": ")" + currency + R"(", "merchant_reference": ")" +
                                 ref + R"(", "provider": ")" + w.config.name +
                                 R"(", "payment_method": "pm_card_visa"})";
        REQUIRE(intake.create_payment(w.writer.principal, "k-" + ref, body, "").status == 202);
    }

    // Workers send everything once (8 threads), faults and all.
    std::ostringstream worker_log;
    engine::Worker worker(mixed_worker_options("mixed-worker"), providers_of({w.config}),
                          worker_log);
    worker.run();
    const long long unknown_after_send =
        count_rows("payments", w.tenant.tenant_id, "state = 'unknown'");
    CHECK(unknown_after_send > 50);

    auto provider = providers::create_provider(w.config);
    engine::NightlyOptions no;
    no.send = w.options();
    no.reconcile.policy.max_lookup_failures = 1;

    // Night 1: the provider's search is down. Nothing unknown is concluded: all of it goes to
    // review.
    auto down = w.fake->faults();
    down.lookup_down = true;
    w.fake->set_faults(down);
    const auto night1 = engine::run_nightly(*w.db, {provider.get()}, no);
    REQUIRE_FALSE(night1.failure);
    CHECK(night1.exit_code() == 3);
    CHECK(count_rows("payments", w.tenant.tenant_id, "state = 'unknown'") == 0);
    CHECK(count_rows("payments", w.tenant.tenant_id,
                     "state = 'needs_review' AND review_code = 'lookup_failing'") >=
          unknown_after_send);

    // Morning: search is back. An operator rechecks the queue: what the provider has is adopted;
    // what it confirms absent the operator sends again (a recorded decision).
    auto up = w.fake->faults();
    up.lookup_down = false;
    w.fake->set_faults(up);
    engine::Reconciler rechecker(*w.db, {provider.get()}, {});
    const std::string in_review = "SELECT string_agg(payment_id::text, ',') FROM payments "
                                  "WHERE tenant_id = $1::uuid AND state = 'needs_review'";
    std::stringstream ids(
        query_value("SELECT coalesce((" + in_review + "), '')", w.tenant.tenant_id));
    for (std::string id; std::getline(ids, id, ',');) {
        const auto out = rechecker.recheck(w.tenant.tenant_id, id);
        REQUIRE(out);
        if (out->to == PaymentState::needs_review && out->lookup == LookupStatus::not_found) {
            store::Resolution r;
            r.tenant_id = w.tenant.tenant_id;
            r.payment_id = id;
            r.generation = std::stoll(
                query_value("SELECT generation FROM payments WHERE payment_id = $1::uuid", id));
            r.decision = OperatorDecision::retry;
            r.confirmed_no_charge = true;
            r.note = "recheck confirmed no charge";
            r.operator_name = "test-operator";
            CHECK(store::resolve_payment(*w.db, r).status == store::ResolveResult::Status::applied);
        }
    }
    // Following nights, until nothing is left to do (re-sends meet faults too).
    no.reconcile.policy.max_lookup_failures = 3;
    for (int night = 2; night < 12; ++night) {
        const auto report = engine::run_nightly(*w.db, {provider.get()}, no);
        REQUIRE_FALSE(report.failure);
        if (report.reconciled.empty() && report.sent.attempted == 0 &&
            count_rows("payments", w.tenant.tenant_id,
                       "state IN ('unknown', 'retry_scheduled', 'pending')") == 0) {
            break;
        }
    }

    // The invariants.
    check_invariants(w, {"EUR", "USD", "JPY"});
    CHECK(count_rows("payments", w.tenant.tenant_id,
                     "state IN ('succeeded', 'failed', 'needs_review')") == 1000);
    CHECK(count_rows("payments", w.tenant.tenant_id, "state = 'failed'") > 0);
    // Every reconciler decision has its lookup record.
    CHECK(count_rows("payment_lookups", w.tenant.tenant_id, "true") >= unknown_after_send);
}
