// Refunds on the executor and the reconciler (issue 31, DESIGN sections 6, 7 and 16): a refund
// accepted by the real intake is claimed, fenced and sent by the same executor as the charge,
// under its own operation ID; a lost answer is settled by the refund lookup before any re-send,
// or goes to review when the lookups keep failing; a declined refund gives its amount back. Counted
// from the fake's ledger, the operations and attempts tables, the payment's held amount and the
// outbox -- not from status codes. Each case runs for every kind whose adapter refunds
// (refunds.hpp).
#include "services/refunds.hpp"
#include "store/executor_store.hpp"
#include "tests/execution/refunds.hpp"
#include "tests/support/stripe_webhooks.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// One payment of `kind` charged through the executor, and refunds of it through the real intake.
struct Refunds {
    explicit Refunds(const std::string& kind) : p(kind, {}) {}

    OnePayment p;

    // Accepts a refund of `amount` cents; returns its ID.
    std::string refund(long long amount) {
        return accept_refund(p.w, p.w.payment_id_of(p.ref), amount);
    }
    std::string column(const std::string& refund_id, const std::string& name) {
        return query_value("SELECT coalesce(" + name + "::text, '') FROM operations WHERE id = $1",
                           refund_id);
    }
    std::string state(const std::string& refund_id) { return column(refund_id, "state"); }
    std::string op(const std::string& refund_id) { return column(refund_id, "operation_id"); }
    long long held() { return std::stoll(p.column("refund_held_minor")); }
    // After the executor sent refund `id` and the provider accepted it: where the provider answers
    // the outcome at once there is nothing to do; Checkout.com's 202 leaves it `unknown` (pending
    // at the provider), and the reconciler's lookup finds it succeeded -- once, with no re-send.
    void settle_accepted(const std::string& id) {
        if (accepted_refund(std::string(p.provider->kind())) == providers::Outcome::succeeded) {
            return;
        }
        CHECK(state(id) == "unknown");
        CHECK(attempts(id, "outcome = 'pending'") == 1);
        const auto deliveries = p.w.deliveries(op(id));
        const auto outcomes = p.reconcile();
        REQUIRE(outcomes.size() == 1);
        CHECK(outcomes[0].refund_id == id);
        CHECK(outcomes[0].to == PaymentState::succeeded);
        CHECK(p.w.deliveries(op(id)) == deliveries);
    }
    long long refunded_eur() {
        const auto l = p.w.fake->ledger();
        return l.contains("refunded") && l["refunded"].contains("eur")
                   ? l["refunded"]["eur"].get<long long>()
                   : 0;
    }
    long long events(const std::string& refund_id, const std::string& type) {
        return count_rows("outbox", p.w.tenant.tenant_id,
                          "event_type = '" + type + "' AND payload->>'refund_id' = '" + refund_id +
                              "'");
    }
    long long attempts(const std::string& refund_id, const std::string& where = "true") {
        return count_rows("payment_attempts", p.w.tenant.tenant_id,
                          "operation_id = '" + op(refund_id) + "' AND " + where);
    }
    // How long after its last attempt the reconciler trusts the provider's refund lookup: the
    // configured settle delay (0 here) for every kind -- PayPal's 3 h search lag is its charges',
    // not its refunds', found at once among the capture's order's refunds.
    std::chrono::seconds lookup_delay() const {
        return p.provider->capabilities().refund_lookup_staleness;
    }
    // The refund's attempts, lookups and next check as if `by` had passed (the fake's clock too).
    void pass(const std::string& refund_id, std::chrono::seconds by) {
        p.w.fake->advance_clock(by);
        const std::string s = std::to_string(by.count());
        exec_sql("UPDATE operations SET first_attempt_at = first_attempt_at - interval '" + s +
                 " seconds', last_attempt_at = last_attempt_at - interval '" + s +
                 " seconds', next_attempt_at = now() - interval '1 second' WHERE id = '" +
                 refund_id + "'");
    }

    // The refund as the fake holds it now (its re_ ID, status), asked outside our records.
    providers::RemotePayment at_provider(const std::string& refund_id) {
        providers::RefundOrder o;
        o.operation_id = op(refund_id);
        o.payment_reference = p.column("provider_reference");
        o.amount = Money{std::stoll(column(refund_id, "amount_minor")), "EUR"};
        const auto found = p.provider->lookup_refund(o);
        REQUIRE(found.status == providers::LookupResult::Status::found);
        return *found.payment;
    }
    // The provider's event about the refund in its kind's shape (refunded or not), signed and
    // received as serve receives it.
    WebhookReceipt deliver_kind(const std::string& refund_id, bool succeeded) {
        const auto remote = at_provider(refund_id);
        return deliver_refund_event(*p.w.db, std::string(p.provider->kind()), p.w.config.name,
                                    remote.provider_reference, op(refund_id),
                                    std::stoll(column(refund_id, "amount_minor")), succeeded);
    }
    // Stripe's event about the refund, signed and received as serve receives it.
    WebhookReceipt deliver(const std::string& refund_id, const std::string& type,
                           const std::string& status) {
        const auto remote = at_provider(refund_id);
        const nlohmann::json refund = {{"id", remote.provider_reference},
                                       {"object", "refund"},
                                       {"amount", std::stoll(column(refund_id, "amount_minor"))},
                                       {"currency", "eur"},
                                       {"status", status},
                                       {"payment_intent", p.column("provider_reference")},
                                       {"metadata", {{"operation_id", op(refund_id)}}}};
        return deliver_stripe(*p.w.db, p.w.config.name, stripe_event(type, refund));
    }
    long long lookups(const std::string& refund_id) {
        return count_rows("payment_lookups", p.w.tenant.tenant_id,
                          "operation_id = '" + op(refund_id) + "'");
    }
    long long events_applied(const std::string& refund_id, const std::string& result) {
        return count_rows("provider_events", p.w.tenant.tenant_id,
                          "refund_id = '" + refund_id + "' AND applied_result = '" + result + "'");
    }
};

} // namespace

TEST_CASE("refund execution: the executor sends an accepted refund once under its own operation "
          "ID, and it succeeds with its event",
          "[execution][refunds]") {
    const std::string kind = GENERATE(from_range(refunding_kinds()));
    INFO(kind);
    Refunds r(kind);
    REQUIRE(r.p.state() == "succeeded");
    const std::string id = r.refund(1000);
    CHECK(r.state(id) == "pending");
    CHECK(r.held() == 1000);

    engine::Executor ex(*r.p.w.db, {r.p.provider.get()}, r.p.w.options());
    CHECK(ex.run_once() == 1);
    CHECK(ex.counts().attempted == 1);
    r.settle_accepted(id);
    CHECK(r.state(id) == "succeeded");
    // The refund's own reference, never the charge's: the lookup finds it by it.
    const std::string reference = r.column(id, "provider_reference");
    CHECK_FALSE(reference.empty());
    CHECK(reference != r.p.column("provider_reference"));
    // One claim by the executor; a refund settled by the reconciler (Checkout.com's) adds the
    // reconciler's fence and its settlement.
    CHECK(r.column(id, "generation") ==
          (accepted_refund(kind) == providers::Outcome::succeeded ? "1" : "3"));
    CHECK(r.p.w.executions(r.op(id)) == 1);
    CHECK(r.refunded_eur() == 1000);
    CHECK(r.held() == 1000); // a succeeded refund stays spent
    CHECK(r.events(id, "refund.created") == 1);
    CHECK(r.events(id, "refund.succeeded") == 1);
    CHECK(r.attempts(id) == 1);
    CHECK(r.attempts(id, "outcome = '" + std::string(providers::to_string(accepted_refund(kind))) +
                             "' AND finished_at IS NOT NULL") == 1);
    // The charge is untouched: its one attempt, its state, its single execution.
    CHECK(r.p.state() == "succeeded");
    CHECK(r.p.executions() == 1);
    CHECK(count_rows("payment_attempts", r.p.w.tenant.tenant_id,
                     "operation_id = '" + r.p.op + "'") == 1);
    // Nothing is left to claim.
    CHECK(ex.run_once() == 0);
}

TEST_CASE("refund execution: executed, then the connection hangs, closes, is reset or answers "
          "500 -- unknown, settled by the refund lookup, one execution and no re-send",
          "[execution][refunds][fault]") {
    // DESIGN section 12's rows for a refund, per provider: every way the answer of an executed
    // refund is lost.
    const std::string kind = GENERATE(from_range(refunding_kinds()));
    const fake::Fault fault =
        GENERATE(fake::Fault::execute_then_hang, fake::Fault::execute_then_fin,
                 fake::Fault::execute_then_rst, fake::Fault::http_500_after_execute);
    INFO(kind << " " << fake::to_string(fault));
    Refunds r(kind);
    const std::string id = r.refund(700);
    fake::FaultConfig faults;
    faults.next = {fault};
    faults.hang = std::chrono::milliseconds(1500); // past the adapter's 800 ms
    r.p.w.fake->set_faults(faults);
    engine::Executor ex(*r.p.w.db, {r.p.provider.get()}, r.p.w.options());
    CHECK(ex.run_once() == 1);
    CHECK(r.state(id) == "unknown");
    CHECK(r.attempts(id, "outcome = 'unknown'") == 1);
    CHECK(r.p.w.executions(r.op(id)) == 1);
    CHECK(r.events(id, "refund.unknown") == 1);

    r.pass(id, r.lookup_delay()); // the lookup is trusted from then on
    const auto outcomes = r.p.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].kind == OperationKind::refund);
    CHECK(outcomes[0].refund_id == id);
    CHECK(outcomes[0].to == PaymentState::succeeded);
    CHECK(r.state(id) == "succeeded");
    CHECK(r.p.w.executions(r.op(id)) == 1);
    CHECK(r.p.w.deliveries(r.op(id)) == 1);
    CHECK(r.refunded_eur() == 700);
    CHECK(r.events(id, "refund.succeeded") == 1);
    CHECK(count_rows("payment_lookups", r.p.w.tenant.tenant_id,
                     "operation_id = '" + r.op(id) + "' AND status = 'found' AND applied") == 1);
    CHECK(count_rows("audit_log", r.p.w.tenant.tenant_id,
                     "action = 'refund.reconciled' AND subject_id = '" + id + "'") == 1);
    // The charge's record holds no lookup of the refund.
    CHECK(count_rows("payment_lookups", r.p.w.tenant.tenant_id,
                     "operation_id = '" + r.p.op + "'") == 0);
    CHECK(ex.run_once() == 0); // nothing is sent again
    CHECK(r.p.w.deliveries(r.op(id)) == 1);
}

TEST_CASE("refund execution: executed, then the answer is lost while the provider's lookups "
          "fail -- checked again, then needs_review (lookup_failing), never sent again",
          "[execution][refunds][fault]") {
    // DESIGN section 12's "lookup down -> review, no re-send" for a refund, per provider: a failed
    // lookup never reads as absence, so the refund the provider executed is not sent again.
    const std::string kind = GENERATE(from_range(refunding_kinds()));
    const fake::Fault fault =
        GENERATE(fake::Fault::execute_then_rst, fake::Fault::execute_then_hang);
    INFO(kind << " " << fake::to_string(fault));
    Refunds r(kind);
    const std::string id = r.refund(700);
    fake::FaultConfig faults;
    faults.next = {fault};
    faults.hang = std::chrono::milliseconds(1500); // past the adapter's 800 ms
    r.p.w.fake->set_faults(faults);
    engine::Executor ex(*r.p.w.db, {r.p.provider.get()}, r.p.w.options());
    CHECK(ex.run_once() == 1);
    REQUIRE(r.state(id) == "unknown");
    REQUIRE(r.p.w.executions(r.op(id)) == 1);
    // The provider's reads go down once the refund was sent (PayPal's refund reads the capture
    // before it is sent).
    auto down = r.p.w.fake->faults();
    down.lookup_down = true;
    r.p.w.fake->set_faults(down);

    r.pass(id, r.lookup_delay());
    const ReconcilePolicy policy; // its tries: max_lookup_failures failed lookups in a row
    for (int i = 1; i < policy.max_lookup_failures; ++i) {
        const auto outcomes = r.p.reconcile(policy);
        REQUIRE(outcomes.size() == 1);
        CHECK(outcomes[0].refund_id == id);
        CHECK(outcomes[0].lookup == LookupStatus::failed);
        CHECK(outcomes[0].decision.action == ReconcileAction::check_later);
        CHECK(r.state(id) == "unknown");
        CHECK(r.column(id, "lookup_failures") == std::to_string(i));
        CHECK(r.p.reconcile(policy).empty()); // not due again before its backoff
        CHECK(ex.run_once() == 0);
        r.pass(id, std::chrono::seconds(0)); // due now
    }
    const auto outcomes = r.p.reconcile(policy);
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].kind == OperationKind::refund);
    CHECK(outcomes[0].refund_id == id);
    CHECK(outcomes[0].lookup == LookupStatus::failed);
    CHECK(outcomes[0].decision.action == ReconcileAction::review);
    CHECK(outcomes[0].to == PaymentState::needs_review);
    CHECK(r.state(id) == "needs_review");
    CHECK(r.column(id, "review_code") == "lookup_failing");
    CHECK_FALSE(r.column(id, "review_reason").empty());
    CHECK(r.events(id, "refund.needs_review") == 1);
    CHECK(count_rows("outbox", r.p.w.tenant.tenant_id,
                     "event_type = 'refund.needs_review' AND payload->>'refund_id' = '" + id +
                         "' AND payload->>'review_code' = 'lookup_failing'") == 1);
    CHECK(count_rows("payment_lookups", r.p.w.tenant.tenant_id,
                     "operation_id = '" + r.op(id) + "' AND status = 'failed'") ==
          policy.max_lookup_failures);
    CHECK(r.lookups(id) == policy.max_lookup_failures);
    // Review is for people: neither the reconciler nor the executor touches it again.
    CHECK(r.p.reconcile(policy).empty());
    CHECK(ex.run_once() == 0);
    // Executed once, sent once; still spent, as the provider refunded it.
    CHECK(r.p.w.executions(r.op(id)) == 1);
    CHECK(r.p.w.deliveries(r.op(id)) == 1);
    CHECK(r.attempts(id) == 1);
    CHECK(r.refunded_eur() == 700);
    CHECK(r.held() == 700);
    // The charge is untouched.
    CHECK(r.p.state() == "succeeded");
    CHECK(r.p.executions() == 1);
}

TEST_CASE("refund execution: dropped before executing -- confirmed absent by the lookup, sent "
          "again with the same key, one execution and two deliveries",
          "[execution][refunds]") {
    const std::string kind = GENERATE(from_range(refunding_kinds()));
    INFO(kind);
    Refunds r(kind);
    const std::string id = r.refund(2500);
    fake::FaultConfig faults;
    faults.next = {fake::Fault::drop_before_execute};
    r.p.w.fake->set_faults(faults);
    engine::Executor ex(*r.p.w.db, {r.p.provider.get()}, r.p.w.options());
    CHECK(ex.run_once() == 1);
    CHECK(r.state(id) == "unknown");
    CHECK(r.p.w.executions(r.op(id)) == 0);

    r.pass(id, std::chrono::seconds(60) + r.lookup_delay());
    const auto outcomes = r.p.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].decision.action == ReconcileAction::resend);
    CHECK(r.state(id) == "retry_scheduled");
    CHECK(r.column(id, "resend_count") == "1");

    CHECK(ex.run_once() == 1);
    r.settle_accepted(id);
    CHECK(r.state(id) == "succeeded");
    CHECK(r.p.w.executions(r.op(id)) == 1);
    CHECK(r.p.w.deliveries(r.op(id)) == 2);
    CHECK(r.refunded_eur() == 2500);
    CHECK(r.attempts(id) == 2);
    CHECK(r.held() == 2500);
}

TEST_CASE("refund execution: a refund the provider declines fails with its reason, and what "
          "may be refunded grows back",
          "[execution][refunds]") {
    const std::string kind = GENERATE(from_range(refunding_kinds()));
    INFO(kind);
    Refunds r(kind);
    // The whole charge refunded at the provider by someone else (its dashboard): ours is refused
    // as nothing left to refund, a final answer.
    REQUIRE(r.p.provider->refund(refund_of(r.p, new_operation_id(), 2500)).outcome ==
            accepted_refund(kind));

    const std::string id = r.refund(400);
    CHECK(r.held() == 400);
    engine::Executor ex(*r.p.w.db, {r.p.provider.get()}, r.p.w.options());
    CHECK(ex.run_once() == 1);
    CHECK(r.state(id) == "failed");
    const std::string code = over_refund_error(kind).substr(over_refund_error(kind).find(':') + 1);
    CHECK(r.column(id, "failure_reason").find(code) != std::string::npos);
    CHECK(r.held() == 0);
    CHECK(r.p.w.executions(r.op(id)) == 0);
    CHECK(r.events(id, "refund.failed") == 1);
    CHECK(count_rows("outbox", r.p.w.tenant.tenant_id,
                     "event_type = 'refund.failed' AND payload->>'failure_reason' LIKE '%" + code +
                         "%'") == 1);
}

TEST_CASE("refund execution: a refund left processing past its lease becomes unknown, never "
          "pending, with its event and an audit row",
          "[execution][refunds]") {
    const std::string kind = GENERATE(from_range(refunding_kinds()));
    INFO(kind);
    Refunds r(kind);
    const std::string id = r.refund(300);
    const auto claims = store::claim_payments(
        *r.p.w.db, "dies-mid-call", std::chrono::milliseconds(20000), 8, {r.p.w.config.name});
    REQUIRE(claims.size() == 1);
    CHECK(claims[0].kind == OperationKind::refund);
    CHECK(claims[0].subject_id() == id);
    CHECK(claims[0].amount_minor == 300);
    CHECK(claims[0].charge_reference == r.p.column("provider_reference"));
    CHECK(store::check_claims(*r.p.w.db, "dies-mid-call", claims).count(id) == 1);
    CHECK(store::check_claims(*r.p.w.db, "someone-else", claims).empty());
    exec_sql("UPDATE operations SET lease_expires_at = now() - interval '1 second' WHERE id = '" +
             id + "'");
    CHECK(store::check_claims(*r.p.w.db, "dies-mid-call", claims).empty());
    // At least this one: a test running beside this one may leave an expired lease too.
    CHECK(store::expire_leases(*r.p.w.db, "test-expiry") >= 1);
    CHECK(r.state(id) == "unknown");
    CHECK(r.column(id, "generation") == "2");
    CHECK(r.held() == 300); // an unknown refund counts as spent
    CHECK(r.events(id, "refund.unknown") == 1);
    CHECK(count_rows("audit_log", r.p.w.tenant.tenant_id,
                     "action = 'refund.lease_expired' AND subject_id = '" + id + "'") == 1);
    // The paused worker's settlement is fenced out; its observation is kept.
    store::AttemptResult late;
    late.outcome = "succeeded";
    store::Settlement settle;
    settle.to = PaymentState::succeeded;
    CHECK_FALSE(store::settle_attempt(*r.p.w.db, claims[0], late, settle));
    CHECK(r.state(id) == "unknown");
    CHECK(r.attempts(id, "outcome = 'succeeded'") == 1);
    CHECK(r.p.w.executions(r.op(id)) == 0);
}

TEST_CASE("refund execution: a verified refund event settles an unknown refund with no lookup, "
          "once, and leaves the charge's evidence alone",
          "[execution][refunds][webhooks]") {
    const std::string kind = GENERATE(from_range(refunding_kinds()));
    INFO(kind);
    Refunds r(kind);
    const std::string id = r.refund(900);
    fake::FaultConfig faults;
    faults.next = {fake::Fault::execute_then_fin};
    r.p.w.fake->set_faults(faults);
    engine::Executor ex(*r.p.w.db, {r.p.provider.get()}, r.p.w.options());
    CHECK(ex.run_once() == 1);
    REQUIRE(r.state(id) == "unknown");

    const auto receipt = r.deliver_kind(id, true);
    REQUIRE(receipt.status == WebhookVerdict::Status::verified);
    CHECK(count_rows("provider_events", r.p.w.tenant.tenant_id,
                     "refund_id = '" + id + "' AND payment_id = '" + r.p.w.payment_id_of(r.p.ref) +
                         "' AND outcome = 'succeeded'") == 1);
    const auto outcomes = r.p.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].kind == OperationKind::refund);
    CHECK(outcomes[0].to == PaymentState::succeeded);
    CHECK(r.state(id) == "succeeded");
    CHECK(r.lookups(id) == 0); // the event was the evidence: nobody asked the provider
    CHECK(r.column(id, "provider_reference") == r.at_provider(id).provider_reference);
    CHECK(r.events(id, "refund.succeeded") == 1);
    CHECK(r.events_applied(id, "adopt_succeeded") == 1);
    CHECK(count_rows("audit_log", r.p.w.tenant.tenant_id,
                     "action = 'refund.reconciled' AND subject_id = '" + id +
                         "' AND detail->>'evidence' = 'webhook'") == 1);
    CHECK(r.p.w.executions(r.op(id)) == 1);
    // The same success again is consistent; the charge is not touched by either.
    REQUIRE(r.deliver_kind(id, true).new_events == 1);
    CHECK(r.p.reconcile().empty());
    CHECK(r.events_applied(id, "consistent") == 1);
    CHECK(r.p.state() == "succeeded");
    // The charge's own events: its creation and its success, nothing after.
    CHECK(count_rows("outbox", r.p.w.tenant.tenant_id, "event_type LIKE 'payment.%'") == 2);
}

TEST_CASE("refund execution: a late reversal -- the provider fails a refund it reported "
          "succeeded: confirmed by the lookup, the refund fails and the amount is refundable "
          "again",
          "[execution][refunds][webhooks]") {
    // Stripe's refund.failed, Square's refund.updated with the refund FAILED (Adyen's
    // REFUND_FAILED: test_adyen_refunds.cpp).
    const std::string kind = GENERATE(as<std::string>{}, "stripe", "square");
    INFO(kind);
    Refunds r(kind);
    const std::string id = r.refund(2500);
    engine::Executor ex(*r.p.w.db, {r.p.provider.get()}, r.p.w.options());
    CHECK(ex.run_once() == 1);
    REQUIRE(r.state(id) == "succeeded");
    REQUIRE(r.held() == 2500);
    REQUIRE(r.refunded_eur() == 2500);

    r.p.w.fake->seed(fake::RefundReversed{r.op(id), "expired_or_canceled_card"});
    CHECK(r.refunded_eur() == 0);
    const std::string raw_failed = kind == "square" ? "FAILED" : "failed";
    CHECK(r.at_provider(id).raw_status == raw_failed);
    const std::string event_type = kind == "square" ? "refund.updated" : "refund.failed";
    const WebhookReceipt reversal =
        kind == "square" ? r.deliver_kind(id, false) : r.deliver(id, "refund.failed", "failed");
    REQUIRE(reversal.status == WebhookVerdict::Status::verified);
    const auto outcomes = r.p.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].kind == OperationKind::refund);
    CHECK(outcomes[0].refund_id == id);
    CHECK(outcomes[0].from == PaymentState::succeeded);
    CHECK(outcomes[0].to == PaymentState::failed);
    CHECK(outcomes[0].applied);
    CHECK(r.state(id) == "failed");
    CHECK(r.column(id, "reversed_at") != "");
    // The provider's words: the event that told it and the status its lookup read.
    const std::string reason = r.column(id, "failure_reason");
    CHECK(reason.find(event_type) != std::string::npos);
    CHECK(reason.find("confirms: " + raw_failed) != std::string::npos);
    CHECK(r.held() == 0);
    CHECK(r.events(id, "refund.failed") == 1);
    CHECK(r.events_applied(id, "reversal") == 1);
    // The provider was asked before the final state moved, and the question is kept with it.
    CHECK(r.lookups(id) == 1);
    CHECK(count_rows("payment_lookups", r.p.w.tenant.tenant_id,
                     "operation_id = '" + r.op(id) +
                         "' AND status = 'found' AND remote_state = 'declined' AND decision = "
                         "'adopt_failed' AND applied") == 1);
    CHECK(count_rows("audit_log", r.p.w.tenant.tenant_id,
                     "action = 'refund.reversed' AND subject_id = '" + id + "'") == 1);
    CHECK(r.p.w.executions(r.op(id)) == 1);
    // Once: a second run finds nothing; an earlier success reported again is superseded.
    REQUIRE(r.deliver_kind(id, true).new_events == 1);
    CHECK(r.p.reconcile().empty());
    CHECK(r.events_applied(id, "superseded") == 1);
    CHECK(r.events(id, "refund.failed") == 1);
    CHECK(r.state(id) == "failed");
    // The whole charge may be refunded again: accepted, held, and sent once.
    const std::string again = r.refund(2500);
    CHECK(r.held() == 2500);
    CHECK(ex.run_once() == 1);
    CHECK(r.p.w.deliveries(r.op(again)) == 1);
    if (kind == "square") {
        // Square allows no refund of a payment after one of its refunds FAILED ("the buyer
        // should be reimbursed by other means"): refused, a final answer, nothing refunded.
        CHECK(r.state(again) == "failed");
        CHECK(r.column(again, "failure_reason").find("PAYMENT_NOT_REFUNDABLE") !=
              std::string::npos);
        CHECK(r.p.w.executions(r.op(again)) == 0);
        CHECK(r.refunded_eur() == 0);
        CHECK(r.held() == 0);
        CHECK(r.events(again, "refund.failed") == 1);
    } else {
        CHECK(r.state(again) == "succeeded");
        CHECK(r.p.w.executions(r.op(again)) == 1);
        CHECK(r.refunded_eur() == 2500);
        CHECK(r.held() == 2500);
    }
}

TEST_CASE("refund execution: a reversal event the provider's lookup contradicts moves nothing, "
          "and waits for an operator",
          "[execution][refunds][webhooks]") {
    Refunds r("stripe"); // Stripe's refund events; the other kinds' come with their webhooks
    const std::string id = r.refund(1200);
    engine::Executor ex(*r.p.w.db, {r.p.provider.get()}, r.p.w.options());
    CHECK(ex.run_once() == 1);
    REQUIRE(r.state(id) == "succeeded");
    REQUIRE(r.deliver(id, "refund.failed", "failed").status == WebhookVerdict::Status::verified);
    const auto outcomes = r.p.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].to == PaymentState::succeeded);
    CHECK(r.state(id) == "succeeded");
    CHECK(r.held() == 1200);
    CHECK(r.events(id, "refund.failed") == 0);
    CHECK(r.events_applied(id, "contradicts") == 1);
    CHECK(r.refunded_eur() == 1200);
    CHECK(count_rows("payment_lookups", r.p.w.tenant.tenant_id,
                     "operation_id = '" + r.op(id) +
                         "' AND status = 'found' AND remote_state = 'succeeded' AND NOT applied") ==
          1);
}
