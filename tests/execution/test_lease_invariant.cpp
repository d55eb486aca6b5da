// DESIGN section 6's invariant, on which the fence before the call slot rests (issue 33): nothing
// but the lease holder changes a `processing` payment or operation before its lease has ended by
// the database's clock. Every test database carries a guard trigger that refuses any other change
// of such a row (tests/support/test_db.cpp, install_lease_guard), so every test that drives a
// writer checks it; here each writer an operator or a schedule runs -- nightly, the reconciler,
// another worker, review resolve / recheck / requeue, payments cancel, refunds create, purge -- is
// run as a real process at a payment and a refund held under a live lease, and must leave them as
// the holder left them; and the guard itself is shown to refuse what would break the invariant,
// and to allow the holder's renewal and settlement and the expiry of an ended lease.
#include "engine/executor.hpp"
#include "services/refunds.hpp"
#include "store/executor_store.hpp"
#include "tests/support/operated.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// What the holder must find as it left it: each processing row's state, generation and lease.
std::string footprint(Operated& w) {
    return w.value(
        "SELECT string_agg(id || ' ' || state || ' ' || generation || ' ' || "
        "coalesce(lease_owner, '-') || ' ' || coalesce(lease_expires_at::text, '-'), '; ' "
        "ORDER BY id) FROM ("
        "SELECT payment_id::text AS id, state::text, generation, lease_owner, lease_expires_at "
        "FROM payments WHERE tenant_id = $1::uuid UNION ALL "
        "SELECT o.id::text, o.state::text, o.generation, o.lease_owner, o.lease_expires_at "
        "FROM operations o WHERE o.tenant_id = $1::uuid) AS rows",
        w.tenant.tenant_id);
}

bool guard_refused(const std::string& sql, const std::string& url) {
    try {
        exec_sql(sql, url);
    } catch (const std::exception& e) {
        INFO(e.what());
        CHECK(contains(e.what(), "lease invariant broken"));
        return true;
    }
    return false;
}

} // namespace

TEST_CASE("lease invariant: no writer but the holder changes a processing payment or refund "
          "before its lease ends, and the guard refuses one that would",
          "[execution][db][processes][fencing]") {
    MigratedScratch scratch; // nightly and purge act on every tenant: a database of its own
    Operated w{scratch.url()};

    // A payment charged, a refund of it, and a payment still to send: the refund and the new
    // payment then claimed by a holder under a lease far longer than the test.
    const std::string paid = w.payments(1)[0];
    auto provider = providers::create_provider(w.config);
    engine::ExecutorOptions options;
    options.worker_id = "invariant-setup";
    options.lease = std::chrono::seconds(60);
    engine::Executor setup(*w.db, {provider.get()}, options);
    REQUIRE(setup.run_once() == 1);
    REQUIRE(w.state_of(paid) == "succeeded");
    RefundService refunds(*w.db, test_keys());
    const auto accepted = refunds.create_refund(w.writer.principal, w.payment_id_of(paid),
                                                unique_name("rk"), R"({"amount": 500})", "");
    REQUIRE(accepted.status == 202);
    const std::string refund = nlohmann::json::parse(accepted.body)["id"];
    const std::string held = w.payments(1)[0];
    const std::string held_id = w.payment_id_of(held);
    const auto claims =
        store::claim_payments(*w.db, "holder", std::chrono::minutes(10), 8, {w.config.name});
    REQUIRE(claims.size() == 2);
    REQUIRE(w.state_of(held) == "processing");
    const std::string refund_generation =
        w.value("SELECT generation::text FROM operations WHERE id = $1::uuid", refund);
    const std::string held_generation = std::to_string(w.generation_of(held));
    const std::string before = footprint(w);

    const auto left_alone = [&](const std::string& what, const Run& run) {
        INFO(what << ":\n" << run.all());
        CHECK_FALSE(contains(run.all(), "lease invariant"));
        CHECK(footprint(w) == before);
    };
    // The schedules: nightly (lease expiry, the reconciler, the authorisation watch), a
    // reconciler of its own, another worker.
    const Run nightly = w.payrecon({"nightly", "--no-statement"});
    CHECK(nightly.exit_code == 0);
    left_alone("nightly", nightly);
    const Run reconcile = w.payrecon({"reconcile"});
    CHECK(reconcile.exit_code == 0);
    left_alone("reconcile", reconcile);
    const Run worker = w.payrecon({"worker", "--once"});
    CHECK(worker.exit_code == 0);
    left_alone("worker", worker);
    // Operators: each decision refused while the holder holds the row.
    for (const auto& [id, generation] :
         {std::pair{held_id, held_generation}, std::pair{refund, refund_generation}}) {
        const Run resolved = w.payrecon({"review", "resolve", id, "--generation", generation,
                                         "--as", "failed", "--note", "no charge at the provider"});
        CHECK(resolved.exit_code != 0);
        left_alone("review resolve " + id, resolved);
        const Run rechecked = w.payrecon({"review", "recheck", id});
        CHECK(rechecked.exit_code != 0);
        left_alone("review recheck " + id, rechecked);
    }
    const Run cancelled = w.payrecon(
        {"payments", "cancel", held_id, "--generation", held_generation, "--note", "not wanted"});
    CHECK(cancelled.exit_code != 0);
    left_alone("payments cancel", cancelled);
    const Run requeued = w.payrecon({"review", "requeue", "--provider", w.config.name,
                                     "--auth-failures", "--note", "credentials fixed"});
    CHECK(requeued.exit_code == 0);
    left_alone("review requeue", requeued);
    const Run refunded = w.payrecon({"refunds", "create", "--payment", held_id, "--amount", "5.00",
                                     "--idempotency-key", unique_name("rk"), "--note", "goodwill"});
    CHECK(refunded.exit_code != 0);
    left_alone("refunds create", refunded);
    const Run purged =
        w.payrecon({"purge", "--retention", "1s"}, {{"PAYRECON_MIN_IDEMPOTENCY_RETENTION", "1s"}});
    CHECK(purged.exit_code == 0);
    left_alone("purge", purged);
    CHECK(w.count("idempotency_records", "resource_id = '" + held_id + "'") == 1);

    // The guard refuses what would break the invariant: a new generation, another owner, a
    // deletion -- of the payment and of the refund.
    const std::string payment_row =
        " WHERE tenant_id = '" + w.tenant.tenant_id + "' AND payment_id = '" + held_id + "'";
    const std::string refund_row =
        " WHERE tenant_id = '" + w.tenant.tenant_id + "' AND id = '" + refund + "'";
    CHECK(guard_refused("UPDATE payments SET generation = generation + 1" + payment_row, w.url));
    CHECK(guard_refused("UPDATE payments SET lease_owner = 'thief'" + payment_row, w.url));
    CHECK(guard_refused(
        "UPDATE payments SET state = 'unknown', lease_owner = 'thief'" + payment_row, w.url));
    CHECK(guard_refused("DELETE FROM payments" + payment_row, w.url));
    CHECK(guard_refused("UPDATE operations SET generation = generation + 1" + refund_row, w.url));
    CHECK(guard_refused("DELETE FROM operations" + refund_row, w.url));
    CHECK(footprint(w) == before);

    // ... and allows the holder: its renewal, then its settlement of the payment.
    const auto renewed = store::renew_claims(*w.db, "holder", std::chrono::minutes(10), claims);
    CHECK(renewed.size() == 2);
    const store::ClaimedPayment& charge =
        claims[0].kind == OperationKind::charge ? claims[0] : claims[1];
    store::AttemptResult attempt;
    attempt.outcome = "succeeded";
    store::Settlement settlement;
    settlement.to = PaymentState::succeeded;
    CHECK(store::settle_attempt(*w.db, charge, attempt, settlement));
    CHECK(w.state_of(held) == "succeeded");
    // A lease that has ended is anyone's to take over: expire_leases turns the refund unknown.
    exec_sql("UPDATE operations SET lease_expires_at = now() - interval '1 second'" + refund_row,
             w.url);
    CHECK(store::expire_leases(*w.db, "invariant-test") == 1);
    CHECK(w.value("SELECT state::text FROM operations WHERE id = $1::uuid", refund) == "unknown");
}
