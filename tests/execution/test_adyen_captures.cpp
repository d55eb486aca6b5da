// Adyen captures and voids on the executor and the reconciler (issue 32, DESIGN sections 7, 14 and
// 16): Adyen answers every capture and cancel 201 `received` and tells its outcome only by the
// CAPTURE (later perhaps CAPTURE_FAILED) or CANCELLATION notification, and it has no lookup -- so
// the generic cases of test_capture_execution (which settle an accepted or lost answer by a lookup)
// do not fit it. Here the fake's Adyen dialect authorises, captures and cancels on the shared
// ledger and sends its signed notifications to a loopback receiver; each is received as serve
// receives it (Adyen's own verifier, services/webhooks) and the reconciler applies it. Counted from
// the fake's ledger, the operations, payments, attempts and provider_events tables and the outbox
// -- not from status codes.
#include "providers/adyen/adapter.hpp"
#include "services/captures.hpp"
#include "services/payments.hpp"
#include "services/webhooks.hpp"
#include "tests/execution/world.hpp"
#include "tests/support/receiver.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// The account's HMAC key (hex), as Adyen's Customer Area shows one.
const std::string k_hmac_key = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";

// One Adyen payment made with capture "manual" and authorised by the executor; its captures and
// void through the real intake; the fake's notifications of them caught by a receiver.
struct AdyenAuthorisation {
    World w{"adyen", {}};
    std::unique_ptr<providers::Provider> provider;
    std::string ref = unique_name("auth");
    std::string payment_id;
    Receiver rx;
    std::size_t delivered = 0; // notifications of rx handed to our receiving side so far

    explicit AdyenAuthorisation(long long amount = 10000) {
        w.config.settle_delay = std::chrono::seconds(0);
        provider = providers::create_provider(w.config);
        IntakeService intake(*w.db, test_keys());
        const std::string body =
            R"({"amount": )" + std::to_string(amount) +
            R"(, "currency": "EUR", "merchant_reference": ")" + ref + R"(", "provider": ")" +
            w.config.name + R"(", "payment_method": ")" + w.method + R"(", "capture": "manual"})";
        const auto r = intake.create_payment(w.writer.principal, "k-" + ref, body, "");
        REQUIRE(r.status == 202);
        payment_id = nlohmann::json::parse(r.body)["id"].get<std::string>();
        REQUIRE(send() == 1);
        REQUIRE(payment("state") == "succeeded"); // authorised: Adyen's Authorised
        fake::WebhookOptions hooks;
        hooks.url = rx.url("/adyen");
        hooks.secret = k_hmac_key;
        w.fake->set_webhooks(hooks); // from the captures on: the authorisation's went nowhere
    }

    int send(fake::FaultConfig faults = {}) {
        w.fake->set_faults(faults);
        engine::Executor ex(*w.db, {provider.get()}, w.options());
        return ex.run_once();
    }
    std::vector<engine::ReconcileOutcome> reconcile() {
        engine::ReconcilerOptions o;
        o.actor = "test-reconciler";
        engine::Reconciler r(*w.db, {provider.get()}, o);
        return r.run();
    }
    std::string capture(long long amount) {
        CaptureService captures(*w.db, test_keys());
        const auto r = captures.create_capture(w.writer.principal, payment_id, unique_name("ck"),
                                               R"({"amount": )" + std::to_string(amount) + "}", "");
        REQUIRE(r.status == 202);
        return nlohmann::json::parse(r.body)["id"].get<std::string>();
    }
    std::string void_it() {
        CaptureService captures(*w.db, test_keys());
        const auto r =
            captures.create_void(w.writer.principal, payment_id, unique_name("vk"), "", "");
        REQUIRE(r.status == 202);
        return nlohmann::json::parse(r.body)["id"].get<std::string>();
    }
    // Every notification the fake has sent since the last call, received as serve receives them;
    // returns how many new events were stored.
    std::size_t deliver() {
        REQUIRE(w.fake->wait_webhooks_idle(std::chrono::seconds(10)));
        const auto verifier = providers::adyen::webhook_verifier({Secret(k_hmac_key)});
        std::size_t stored = 0;
        const auto all = rx.received();
        for (; delivered < all.size(); ++delivered) {
            WebhookRequest r;
            r.body = all[delivered].body;
            r.received_at = std::chrono::system_clock::now();
            const WebhookReceipt receipt = receive_webhook(*w.db, w.config.name, *verifier, r);
            REQUIRE(receipt.status == WebhookVerdict::Status::verified);
            stored += receipt.new_events;
        }
        return stored;
    }
    // Notifications the fake sent so far (of this world's captures and voids).
    std::size_t sent() {
        REQUIRE(w.fake->wait_webhooks_idle(std::chrono::seconds(10)));
        return rx.count();
    }
    std::string payment(const std::string& column) {
        return query_value("SELECT coalesce(" + column +
                               "::text, '') FROM payments WHERE payment_id = $1::uuid",
                           payment_id);
    }
    std::string operation(const std::string& id, const std::string& column) {
        return query_value(
            "SELECT coalesce(" + column + "::text, '') FROM operations WHERE id = $1", id);
    }
    std::string state(const std::string& id) { return operation(id, "state"); }
    std::string op(const std::string& id) { return operation(id, "operation_id"); }
    long long attempts(const std::string& id, const std::string& where = "true") {
        return count_rows("payment_attempts", w.tenant.tenant_id,
                          "operation_id = '" + op(id) + "' AND " + where);
    }
    long long events(const std::string& type) {
        return count_rows("outbox", w.tenant.tenant_id,
                          "aggregate_id = '" + payment_id + "' AND event_type = '" + type + "'");
    }
    // The provider events about operation `id` (by the operation ID Adyen echoed).
    long long provider_events(const std::string& id, const std::string& where) {
        return count_rows("provider_events", w.tenant.tenant_id,
                          "operation_id = '" + op(id) + "' AND " + where);
    }
    long long charged_eur() {
        const auto l = w.fake->ledger();
        return l.contains("charged") && l["charged"].contains("eur")
                   ? l["charged"]["eur"].get<long long>()
                   : 0;
    }
    long long executions(const std::string& id) { return w.executions(op(id)); }
    long long deliveries(const std::string& id) { return w.deliveries(op(id)); }
    // Operation `id`'s last attempt as if `by` had passed: its notification window closes.
    void pass(const std::string& id, std::chrono::seconds by) {
        const std::string s = std::to_string(by.count());
        exec_sql("UPDATE operations SET first_attempt_at = first_attempt_at - interval '" + s +
                 " seconds', last_attempt_at = last_attempt_at - interval '" + s +
                 " seconds', next_attempt_at = now() - interval '1 second' WHERE id = '" + id +
                 "'");
    }
};

} // namespace

TEST_CASE("adyen capture execution: a received capture waits for its CAPTURE notification, and "
          "the signed success settles it once -- captured, payment.captured, one execution",
          "[execution][captures][adyen][webhooks]") {
    AdyenAuthorisation a;
    CHECK(a.charged_eur() == 0); // an authorisation charges nothing
    CHECK(a.events("payment.authorized") == 1);
    const std::string c = a.capture(6000);
    REQUIRE(a.send() == 1);
    // Received: pending with the capture's pspReference, unknown, the amount held.
    CHECK(a.state(c) == "unknown");
    CHECK(a.attempts(c, "outcome = 'pending' AND provider_reference IS NOT NULL") == 1);
    const std::string psp = a.operation(c, "provider_reference");
    CHECK(psp.size() == 16);
    CHECK(psp != a.payment("provider_reference"));
    CHECK(a.payment("capture_held_minor") == "6000");
    CHECK(a.payment("captured_minor") == "0");
    CHECK(a.executions(c) == 1);
    CHECK(a.charged_eur() == 6000);

    // Before the notification: the reconciler waits for it, the notification window ahead.
    auto outcomes = a.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].decision.action == ReconcileAction::check_later);
    CHECK(outcomes[0].decision.check_in > std::chrono::hours(3));
    CHECK(a.state(c) == "unknown");
    CHECK(a.events("payment.captured") == 0);

    // The notification: CAPTURE success "true", about this capture.
    CHECK(a.sent() == 1);
    CHECK(a.deliver() == 1);
    CHECK(a.provider_events(c, "event_type = 'CAPTURE' AND outcome = 'succeeded' AND "
                               "provider_reference = '" +
                                   psp + "'") == 1);
    outcomes = a.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].kind == OperationKind::capture);
    CHECK(outcomes[0].to == PaymentState::succeeded);
    CHECK(a.state(c) == "succeeded");
    CHECK(a.payment("captured_minor") == "6000");
    CHECK(a.payment("capture_held_minor") == "6000");
    CHECK(a.events("payment.captured") == 1);
    CHECK(a.executions(c) == 1);
    CHECK(a.deliveries(c) == 1);
    CHECK(a.reconcile().empty());
    // A redelivery of the same notification stores nothing new and settles nothing twice.
    a.delivered = 0;
    CHECK(a.deliver() == 0);
    CHECK(a.reconcile().empty());
    CHECK(a.events("payment.captured") == 1);
}

TEST_CASE("adyen capture execution: a CAPTURE success false fails the capture and gives back what "
          "it held, and the authorisation is captured later, once",
          "[execution][captures][adyen][webhooks]") {
    AdyenAuthorisation a;
    const std::string c = a.capture(4000);
    fake::FaultConfig decline;
    decline.next = {fake::Fault::decline}; // Adyen receives it, and cannot capture it
    REQUIRE(a.send(decline) == 1);
    CHECK(a.state(c) == "unknown");
    CHECK(a.executions(c) == 0);
    CHECK(a.charged_eur() == 0);
    CHECK(a.deliver() == 1);
    const auto outcomes = a.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].to == PaymentState::failed);
    CHECK(a.state(c) == "failed");
    CHECK_FALSE(a.operation(c, "failure_reason").empty());
    CHECK(a.payment("capture_held_minor") == "0");
    CHECK(a.payment("final_capture_held") == "false");
    CHECK(a.payment("captured_minor") == "0");
    CHECK(a.events("payment.captured") == 0);
    // The whole authorisation is capturable again, and is captured, once.
    const std::string again = a.capture(10000);
    REQUIRE(a.send() == 1);
    CHECK(a.deliver() == 1);
    CHECK(a.reconcile().size() == 1);
    CHECK(a.state(again) == "succeeded");
    CHECK(a.executions(again) == 1);
    CHECK(a.charged_eur() == 10000);
    CHECK(a.payment("captured_minor") == "10000");
    CHECK(a.events("payment.captured") == 1);
}

TEST_CASE("adyen capture execution: no notification within the window -- review "
          "notification_missing, never sent again",
          "[execution][captures][adyen]") {
    AdyenAuthorisation a;
    const std::string c = a.capture(7000);
    REQUIRE(a.send() == 1);
    REQUIRE(a.state(c) == "unknown");
    CHECK(a.sent() == 1); // sent by the fake, never received by us
    CHECK(a.reconcile().size() == 1);
    CHECK(a.state(c) == "unknown");
    a.pass(c, std::chrono::hours(4));
    const auto outcomes = a.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].to == PaymentState::needs_review);
    CHECK(a.state(c) == "needs_review");
    CHECK(a.operation(c, "review_code") == "notification_missing");
    CHECK(a.payment("capture_held_minor") == "7000"); // held until an operator decides
    CHECK(a.deliveries(c) == 1);
    CHECK(a.executions(c) == 1);
    CHECK(a.send() == 0);
    CHECK(a.reconcile().empty());
    CHECK(a.deliveries(c) == 1);
}

TEST_CASE("adyen capture execution: the answer lost and no notification -- review no_lookup, never "
          "sent again",
          "[execution][captures][adyen]") {
    AdyenAuthorisation a;
    const std::string c = a.capture(1200);
    fake::FaultConfig lost;
    lost.next = {fake::Fault::execute_then_rst};
    REQUIRE(a.send(lost) == 1);
    REQUIRE(a.state(c) == "unknown");
    CHECK(a.attempts(c, "outcome = 'unknown'") == 1);
    const auto outcomes = a.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].to == PaymentState::needs_review);
    CHECK(a.operation(c, "review_code") == "no_lookup"); // not accepted: nothing was promised
    CHECK(a.send() == 0);
    CHECK(a.reconcile().empty());
    CHECK(a.deliveries(c) == 1);
    CHECK(a.executions(c) == 1);
    CHECK(a.payment("capture_held_minor") == "1200");
}

TEST_CASE("adyen capture execution: executed, then the answer lost -- unknown, settled by the "
          "CAPTURE notification, one execution, never sent again",
          "[execution][captures][adyen][webhooks]") {
    const fake::Fault fault =
        GENERATE(fake::Fault::execute_then_rst, fake::Fault::execute_then_hang,
                 fake::Fault::http_500_after_execute);
    INFO(fake::to_string(fault));
    AdyenAuthorisation a;
    const std::string c = a.capture(2500);
    fake::FaultConfig lost;
    lost.next = {fault};
    lost.hang = std::chrono::milliseconds(1500); // past the adapter's 800 ms
    REQUIRE(a.send(lost) == 1);
    CHECK(a.state(c) == "unknown");
    CHECK(a.attempts(c, "outcome = 'unknown'") == 1);
    CHECK(a.send() == 0); // an unknown capture is never sent again by a worker
    CHECK(a.executions(c) == 1);
    CHECK(a.deliver() == 1);
    const auto outcomes = a.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].to == PaymentState::succeeded);
    CHECK(a.state(c) == "succeeded");
    CHECK(a.operation(c, "provider_reference").size() == 16); // the notification's pspReference
    CHECK(a.payment("captured_minor") == "2500");
    CHECK(a.events("payment.captured") == 1);
    CHECK(a.executions(c) == 1);
    CHECK(a.deliveries(c) == 1);
    CHECK(a.charged_eur() == 2500);
}

TEST_CASE("adyen capture execution: CAPTURE_FAILED after success -- the capture is reversed, what "
          "it held given back",
          "[execution][captures][adyen][webhooks]") {
    AdyenAuthorisation a;
    const std::string c = a.capture(10000);
    REQUIRE(a.send() == 1);
    REQUIRE(a.deliver() == 1);
    REQUIRE(a.reconcile().size() == 1);
    REQUIRE(a.state(c) == "succeeded");
    REQUIRE(a.payment("captured_minor") == "10000");
    REQUIRE(a.charged_eur() == 10000);

    // The scheme rejects the capture later: Adyen's CAPTURE_FAILED, signed, through the fake.
    a.w.fake->seed(fake::CaptureReversed{a.op(c), "Capture rejected by the scheme"});
    CHECK(a.charged_eur() == 0);
    CHECK(a.deliver() == 1);
    CHECK(a.provider_events(c, "event_type = 'CAPTURE_FAILED' AND outcome = 'failed'") == 1);
    const auto outcomes = a.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].from == PaymentState::succeeded);
    CHECK(outcomes[0].to == PaymentState::failed);
    CHECK(outcomes[0].applied);
    CHECK(a.state(c) == "failed");
    CHECK(a.operation(c, "reversed_at") != "");
    CHECK(a.operation(c, "failure_reason").find("CAPTURE_FAILED") != std::string::npos);
    CHECK(a.payment("captured_minor") == "0");
    CHECK(a.payment("capture_held_minor") == "0");
    CHECK(a.provider_events(c, "applied_result = 'reversal'") == 1);
    CHECK(a.events("capture.failed") == 1);
    CHECK(a.reconcile().empty());
}

TEST_CASE("adyen capture execution: a received cancel waits for its CANCELLATION notification -- "
          "voided, payment.voided, one execution, nothing charged",
          "[execution][captures][adyen][webhooks]") {
    AdyenAuthorisation a;
    const std::string v = a.void_it();
    REQUIRE(a.send() == 1);
    CHECK(a.state(v) == "unknown");
    CHECK(a.attempts(v, "outcome = 'pending' AND provider_reference IS NOT NULL") == 1);
    CHECK(a.payment("voided_at").empty());
    CHECK(a.executions(v) == 1);
    CHECK(a.deliver() == 1);
    CHECK(a.provider_events(v, "event_type = 'CANCELLATION' AND outcome = 'succeeded'") == 1);
    const auto outcomes = a.reconcile();
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].kind == OperationKind::void_authorization);
    CHECK(outcomes[0].to == PaymentState::succeeded);
    CHECK(a.state(v) == "succeeded");
    CHECK_FALSE(a.payment("voided_at").empty());
    CHECK(a.events("payment.voided") == 1);
    const auto shown = payment_resource(*a.w.db, a.w.tenant.tenant_id, a.payment_id);
    REQUIRE(shown);
    CHECK(nlohmann::json::parse(*shown)["status"] == "voided");
    CHECK(a.executions(v) == 1);
    CHECK(a.deliveries(v) == 1);
    CHECK(a.charged_eur() == 0);
    CHECK(a.reconcile().empty());
}

TEST_CASE("adyen capture execution: a cancel whose answer was lost is settled by its "
          "CANCELLATION, never sent again",
          "[execution][captures][adyen][webhooks]") {
    AdyenAuthorisation a;
    const std::string v = a.void_it();
    fake::FaultConfig lost;
    lost.next = {fake::Fault::execute_then_hang};
    lost.hang = std::chrono::milliseconds(1500);
    REQUIRE(a.send(lost) == 1);
    CHECK(a.state(v) == "unknown");
    CHECK(a.send() == 0);
    CHECK(a.deliver() == 1);
    REQUIRE(a.reconcile().size() == 1);
    CHECK(a.state(v) == "succeeded");
    CHECK_FALSE(a.payment("voided_at").empty());
    CHECK(a.events("payment.voided") == 1);
    CHECK(a.executions(v) == 1);
    CHECK(a.deliveries(v) == 1);
}

TEST_CASE("adyen capture execution: a capture Adyen refuses after the authorisation lapsed on its "
          "clock -- received, CAPTURE success false, failed and given back",
          "[execution][captures][adyen][webhooks]") {
    AdyenAuthorisation a;
    const std::string c = a.capture(3000);
    // The provider's clock passes its validity; ours was not told.
    a.w.fake->advance_clock(a.provider->capabilities().authorization_validity +
                            std::chrono::hours(1));
    REQUIRE(a.send() == 1);
    CHECK(a.state(c) == "unknown");
    CHECK(a.executions(c) == 0);
    CHECK(a.deliver() == 1);
    REQUIRE(a.reconcile().size() == 1);
    CHECK(a.state(c) == "failed");
    CHECK(a.payment("capture_held_minor") == "0");
    CHECK(a.payment("captured_minor") == "0");
    CHECK(a.charged_eur() == 0);
    CHECK(a.events("capture.failed") == 1);
}
