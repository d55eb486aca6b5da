// Adyen refunds on the executor and the reconciler (DESIGN sections 7, 14 and 16): Adyen answers
// every refund 201 `received` and tells its outcome only by the REFUND notification, and it has no
// lookup -- so the generic refund cases of test_refund_execution (which settle a lost answer by a
// lookup) do not fit it. Here the fake's Adyen dialect refunds on the shared ledger and sends its
// signed notifications to a loopback receiver; each is received as serve receives it (Adyen's own
// verifier, services/webhooks) and the reconciler applies it. Counted from the fake's ledger, the
// operations, attempts and provider_events tables and the outbox -- not from status codes.
#include "services/refunds.hpp"
#include "services/webhooks.hpp"
#include "tests/execution/refunds.hpp"
#include "tests/support/receiver.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// The account's HMAC key (hex), as Adyen's Customer Area shows one.
const std::string k_hmac_key = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";

// One Adyen payment charged through the executor; refunds of it through the real intake; the
// fake's notifications of them caught by a receiver.
struct AdyenRefunds {
    AdyenRefunds() : p("adyen", {}) {
        fake::WebhookOptions hooks;
        hooks.url = rx.url("/adyen");
        hooks.secret = k_hmac_key;
        p.w.fake->set_webhooks(hooks); // from the refunds on: the charge's went nowhere
    }

    OnePayment p;
    Receiver rx;
    std::size_t delivered = 0; // notifications of rx handed to our receiving side so far

    std::string refund(long long amount) {
        RefundService refunds(*p.w.db, test_keys());
        const auto r =
            refunds.create_refund(p.w.writer.principal, p.w.payment_id_of(p.ref), unique_name("rk"),
                                  R"({"amount": )" + std::to_string(amount) + "}", "");
        REQUIRE(r.status == 202);
        return nlohmann::json::parse(r.body)["id"].get<std::string>();
    }
    int send(fake::FaultConfig faults = {}) {
        p.w.fake->set_faults(faults);
        engine::Executor ex(*p.w.db, {p.provider.get()}, p.w.options());
        return ex.run_once();
    }
    // Every notification the fake has sent since the last call, received as serve receives them;
    // returns how many new events were stored.
    std::size_t deliver() {
        REQUIRE(p.w.fake->wait_webhooks_idle(std::chrono::seconds(10)));
        const auto verifier = providers::adyen::webhook_verifier({Secret(k_hmac_key)});
        std::size_t stored = 0;
        const auto all = rx.received();
        for (; delivered < all.size(); ++delivered) {
            WebhookRequest r;
            r.body = all[delivered].body;
            r.received_at = std::chrono::system_clock::now();
            const WebhookReceipt receipt = receive_webhook(*p.w.db, p.w.config.name, *verifier, r);
            REQUIRE(receipt.status == WebhookVerdict::Status::verified);
            stored += receipt.new_events;
        }
        return stored;
    }
    // Notifications the fake sent so far (of this world's refunds).
    std::size_t sent() {
        REQUIRE(p.w.fake->wait_webhooks_idle(std::chrono::seconds(10)));
        return rx.count();
    }
    std::string column(const std::string& id, const std::string& name) {
        return query_value("SELECT coalesce(" + name + "::text, '') FROM operations WHERE id = $1",
                           id);
    }
    std::string state(const std::string& id) { return column(id, "state"); }
    std::string op(const std::string& id) { return column(id, "operation_id"); }
    long long held() { return std::stoll(p.column("refund_held_minor")); }
    long long attempts(const std::string& id, const std::string& where = "true") {
        return count_rows("payment_attempts", p.w.tenant.tenant_id,
                          "operation_id = '" + op(id) + "' AND " + where);
    }
    long long events(const std::string& id, const std::string& type) {
        return count_rows("outbox", p.w.tenant.tenant_id,
                          "event_type = '" + type + "' AND payload->>'refund_id' = '" + id + "'");
    }
    long long applied(const std::string& id, const std::string& result) {
        return count_rows("provider_events", p.w.tenant.tenant_id,
                          "refund_id = '" + id + "' AND applied_result = '" + result + "'");
    }
    // The refund's last attempt as if `by` had passed: its notification window closes.
    void pass(const std::string& id, std::chrono::seconds by) {
        const std::string s = std::to_string(by.count());
        exec_sql("UPDATE operations SET first_attempt_at = first_attempt_at - interval '" + s +
                 " seconds', last_attempt_at = last_attempt_at - interval '" + s +
                 " seconds', next_attempt_at = now() - interval '1 second' WHERE id = '" + id +
                 "'");
    }
};

} // namespace

TEST_CASE("adyen refund execution: a received refund waits for its REFUND notification, and the "
          "signed success settles it succeeded with one execution at the provider",
          "[execution][refunds][adyen][webhooks]") {
    AdyenRefunds r;
    const std::string id = r.refund(900);
    REQUIRE(r.send() == 1);
    // Received: pending with the refund's pspReference, held as unknown, the amount held.
    CHECK(r.state(id) == "unknown");
    CHECK(r.attempts(id, "outcome = 'pending' AND provider_reference IS NOT NULL") == 1);
    const std::string psp = r.column(id, "provider_reference");
    CHECK(psp.size() == 16);
    CHECK(r.held() == 900);
    CHECK(r.p.w.executions(r.op(id)) == 1);
    CHECK(refunded_eur(r.p.w) == 900);

    // Before the notification: the reconciler waits for it, the notification window ahead.
    auto outcomes = r.p.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].decision.action == ReconcileAction::check_later);
    CHECK(outcomes[0].decision.check_in > std::chrono::hours(3));
    CHECK(r.state(id) == "unknown");
    CHECK(count_rows("operations", r.p.w.tenant.tenant_id,
                     "id = '" + id + "' AND next_attempt_at > now() + interval '3 hours'") == 1);

    // The notification: REFUND success "true", about this refund.
    CHECK(r.sent() == 1);
    CHECK(r.deliver() == 1);
    CHECK(count_rows("provider_events", r.p.w.tenant.tenant_id,
                     "refund_id = '" + id +
                         "' AND event_type = 'REFUND' AND outcome = "
                         "'succeeded' AND provider_reference = '" +
                         psp + "'") == 1);
    outcomes = r.p.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].kind == OperationKind::refund);
    CHECK(outcomes[0].to == PaymentState::succeeded);
    CHECK(r.state(id) == "succeeded");
    CHECK(r.applied(id, "adopt_succeeded") == 1);
    CHECK(r.events(id, "refund.succeeded") == 1);
    CHECK(r.p.w.executions(r.op(id)) == 1);
    CHECK(r.p.w.deliveries(r.op(id)) == 1);
    CHECK(r.held() == 900);
    CHECK(r.p.reconcile().empty());
}

TEST_CASE("adyen refund execution: a REFUND success false fails the refund and its amount is "
          "refundable again",
          "[execution][refunds][adyen][webhooks]") {
    AdyenRefunds r;
    const std::string id = r.refund(2500);
    fake::FaultConfig decline;
    decline.next = {fake::Fault::decline}; // Adyen receives it, and cannot refund it
    REQUIRE(r.send(decline) == 1);
    CHECK(r.state(id) == "unknown");
    CHECK(r.p.w.executions(r.op(id)) == 0);
    CHECK(refunded_eur(r.p.w) == 0);
    CHECK(r.deliver() == 1);
    const auto outcomes = r.p.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].to == PaymentState::failed);
    CHECK(r.state(id) == "failed");
    CHECK(r.column(id, "failure_reason").find("REFUND") != std::string::npos);
    CHECK(r.held() == 0);
    CHECK(r.events(id, "refund.failed") == 1);
    // The whole charge is refundable again, and is refunded, once.
    const std::string again = r.refund(2500);
    REQUIRE(r.send() == 1);
    CHECK(r.deliver() == 1);
    CHECK(r.p.reconcile().size() == 1);
    CHECK(r.state(again) == "succeeded");
    CHECK(r.p.w.executions(r.op(again)) == 1);
    CHECK(refunded_eur(r.p.w) == 2500);
    CHECK(r.held() == 2500);
}

TEST_CASE("adyen refund execution: no notification within the window -- review "
          "notification_missing, never sent again",
          "[execution][refunds][adyen]") {
    AdyenRefunds r;
    const std::string id = r.refund(700);
    REQUIRE(r.send() == 1);
    REQUIRE(r.state(id) == "unknown");
    CHECK(r.sent() == 1); // sent by the fake, never received by us
    CHECK(r.p.reconcile().size() == 1);
    CHECK(r.state(id) == "unknown");
    r.pass(id, std::chrono::hours(4));
    const auto outcomes = r.p.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].to == PaymentState::needs_review);
    CHECK(r.state(id) == "needs_review");
    CHECK(r.column(id, "review_code") == "notification_missing");
    CHECK(r.held() == 700); // held until an operator decides
    CHECK(r.p.w.deliveries(r.op(id)) == 1);
    CHECK(r.p.w.executions(r.op(id)) == 1);
    CHECK(r.send() == 0);
    CHECK(r.p.reconcile().empty());
    CHECK(r.p.w.deliveries(r.op(id)) == 1);
}

TEST_CASE("adyen refund execution: REFUND_FAILED after success -- the refund is reversed, its "
          "amount refundable again",
          "[execution][refunds][adyen][webhooks]") {
    AdyenRefunds r;
    const std::string id = r.refund(2500);
    REQUIRE(r.send() == 1);
    REQUIRE(r.deliver() == 1);
    REQUIRE(r.p.reconcile().size() == 1);
    REQUIRE(r.state(id) == "succeeded");
    REQUIRE(refunded_eur(r.p.w) == 2500);

    // The scheme rejects the refund later: Adyen's REFUND_FAILED, signed, through the fake.
    r.p.w.fake->seed(fake::RefundReversed{r.op(id), "Refund rejected by the scheme"});
    CHECK(refunded_eur(r.p.w) == 0);
    CHECK(r.deliver() == 1);
    CHECK(count_rows("provider_events", r.p.w.tenant.tenant_id,
                     "refund_id = '" + id +
                         "' AND event_type = 'REFUND_FAILED' AND outcome = "
                         "'failed'") == 1);
    const auto outcomes = r.p.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].from == PaymentState::succeeded);
    CHECK(outcomes[0].to == PaymentState::failed);
    CHECK(outcomes[0].applied);
    CHECK(r.state(id) == "failed");
    CHECK(r.column(id, "reversed_at") != "");
    CHECK(r.column(id, "failure_reason").find("REFUND_FAILED") != std::string::npos);
    CHECK(r.held() == 0);
    CHECK(r.applied(id, "reversal") == 1);
    CHECK(r.events(id, "refund.failed") == 1);
    CHECK(count_rows("audit_log", r.p.w.tenant.tenant_id,
                     "action = 'refund.reversed' AND subject_id = '" + id + "'") == 1);
    CHECK(r.p.reconcile().empty());
}

TEST_CASE("adyen refund execution: executed, then the answer is lost -- unknown, settled by the "
          "notification, one execution",
          "[execution][refunds][adyen][webhooks]") {
    const fake::Fault fault =
        GENERATE(fake::Fault::execute_then_rst, fake::Fault::execute_then_hang,
                 fake::Fault::http_500_after_execute);
    INFO(fake::to_string(fault));
    AdyenRefunds r;
    const std::string id = r.refund(1200);
    fake::FaultConfig lost;
    lost.next = {fault};
    lost.hang = std::chrono::milliseconds(1500); // past the adapter's 800 ms
    REQUIRE(r.send(lost) == 1);
    CHECK(r.state(id) == "unknown");
    CHECK(r.attempts(id, "outcome = 'unknown'") == 1);
    CHECK(r.p.w.executions(r.op(id)) == 1);
    CHECK(r.deliver() == 1);
    const auto outcomes = r.p.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].to == PaymentState::succeeded);
    CHECK(r.state(id) == "succeeded");
    CHECK(r.column(id, "provider_reference").size() == 16); // the notification's pspReference
    CHECK(r.p.w.executions(r.op(id)) == 1);
    CHECK(r.p.w.deliveries(r.op(id)) == 1);
}

TEST_CASE("adyen refund execution: the answer lost and no notification -- review no_lookup, "
          "never sent again",
          "[execution][refunds][adyen]") {
    AdyenRefunds r;
    const std::string id = r.refund(1200);
    fake::FaultConfig lost;
    lost.next = {fake::Fault::execute_then_rst};
    REQUIRE(r.send(lost) == 1);
    REQUIRE(r.state(id) == "unknown");
    const auto outcomes = r.p.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].to == PaymentState::needs_review);
    CHECK(r.column(id, "review_code") == "no_lookup"); // not accepted: nothing was promised
    CHECK(r.send() == 0);
    CHECK(r.p.reconcile().empty());
    CHECK(r.p.w.deliveries(r.op(id)) == 1);
    CHECK(r.p.w.executions(r.op(id)) == 1);
    CHECK(r.held() == 1200);
}
