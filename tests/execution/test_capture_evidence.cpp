// Captures and voids settled by a provider's verified notification (issue 32, DESIGN sections 14
// and 16), whichever provider tells it (Adyen's CAPTURE and CANCELLATION are the ones that must:
// it has no lookup): an unknown capture or void and a terminal event naming its operation ID are
// decided as an unknown refund's are -- the same amount (a void's news need not repeat one) ->
// succeeded or failed, once, with what it does to its payment; another amount -> review. Events
// are stored as serve stores them (store_provider_events) and applied as the reconciler and the
// worker apply them (engine::apply_webhook_evidence). Counted from the operations, payments and
// provider_events tables, the outbox and the fake's ledger.
#include "engine/reconciler.hpp"
#include "providers/registry.hpp"
#include "services/captures.hpp"
#include "store/webhook_store.hpp"
#include "tests/execution/world.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// A payment of 50.00 EUR with capture "manual", authorised at the fake Stripe; its captures and
// voids sent once each, their answers lost after the fake executed them (or before).
struct LostAnswers {
    World w{"stripe", {}};
    std::unique_ptr<providers::Provider> provider = providers::create_provider(w.config);
    std::string ref = unique_name("evid");
    std::string payment_id;

    LostAnswers() {
        IntakeService intake(*w.db, test_keys());
        const std::string body = R"({"amount": 5000, "currency": "EUR", "merchant_reference": ")" +
                                 ref + R"(", "provider": ")" + w.config.name +
                                 R"(", "payment_method": "pm_card_visa", "capture": "manual"})";
        REQUIRE(intake.create_payment(w.writer.principal, "k-" + ref, body, "").status == 202);
        payment_id = w.payment_id_of(ref);
        REQUIRE(send() == 1);
    }
    int send(std::optional<fake::Fault> fault = std::nullopt) {
        if (fault) {
            auto faults = w.fake->faults();
            faults.next = {*fault};
            faults.hang = std::chrono::milliseconds(3000);
            w.fake->set_faults(faults);
        }
        engine::Executor ex(*w.db, {provider.get()}, w.options());
        return ex.run_once();
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
    std::string operation(const std::string& id, const std::string& column) {
        return query_value(
            "SELECT coalesce(" + column + "::text, '') FROM operations WHERE id = $1", id);
    }
    std::string payment(const std::string& column) {
        return query_value("SELECT coalesce(" + column +
                               "::text, '') FROM payments WHERE payment_id = $1::uuid",
                           payment_id);
    }
    long long events(const std::string& type) {
        return count_rows("outbox", w.tenant.tenant_id,
                          "aggregate_id = '" + payment_id + "' AND event_type = '" + type + "'");
    }
    // A verified notification of `kind` about operation `id`, stored as serve stores it.
    void notify(OperationKind kind, const std::string& id, EvidenceOutcome outcome,
                std::optional<long long> amount) {
        WebhookEvent e;
        e.event_key = unique_name("evt");
        e.event_type = "test." + std::string(to_string(kind));
        e.kind = kind;
        e.outcome = outcome;
        e.operation_id = operation(id, "operation_id");
        e.amount_minor = amount;
        e.currency = amount ? std::optional<std::string>("EUR") : std::nullopt;
        const auto stored = store::store_provider_events(*w.db, w.config.name, {e}, "{}");
        REQUIRE(stored.size() == 1);
        REQUIRE(stored[0].inserted);
        REQUIRE(stored[0].payment_id == payment_id); // linked by the operation's ID
    }
    std::vector<engine::ReconcileOutcome> apply() {
        return engine::apply_webhook_evidence(*w.db, "test-evidence", {w.config.name}, 100);
    }
};

} // namespace

TEST_CASE("capture evidence: an unknown capture and an unknown void are settled by their "
          "notifications, once, with what each does to the payment",
          "[execution][db][captures][webhooks]") {
    LostAnswers a;
    const std::string part = a.capture(2000);
    REQUIRE(a.send(fake::Fault::execute_then_rst) == 1);
    REQUIRE(a.operation(part, "state") == "unknown");

    a.notify(OperationKind::capture, part, EvidenceOutcome::succeeded, 2000);
    const auto settled = a.apply();
    REQUIRE(settled.size() == 1);
    CHECK(settled[0].kind == OperationKind::capture);
    CHECK(settled[0].to == PaymentState::succeeded);
    CHECK(settled[0].decision.reason.find("captured 20.00 EUR") != std::string::npos);
    CHECK(a.operation(part, "state") == "succeeded");
    CHECK(a.payment("captured_minor") == "2000");
    CHECK(a.events("payment.captured") == 1);
    CHECK(a.w.executions(a.operation(part, "operation_id")) == 1);
    // Applied once: a redelivery changes nothing.
    CHECK(a.apply().empty());
    CHECK(a.events("payment.captured") == 1);

    // Another authorisation released by a void whose answer was lost; its news names no amount.
    LostAnswers b;
    const std::string v = b.void_it();
    REQUIRE(b.send(fake::Fault::execute_then_rst) == 1);
    REQUIRE(b.operation(v, "state") == "unknown");
    b.notify(OperationKind::void_authorization, v, EvidenceOutcome::succeeded, std::nullopt);
    const auto voided = b.apply();
    REQUIRE(voided.size() == 1);
    CHECK(voided[0].to == PaymentState::succeeded);
    CHECK(b.operation(v, "state") == "succeeded");
    CHECK(!b.payment("voided_at").empty());
    CHECK(b.events("payment.voided") == 1);
    CHECK(b.payment("captured_minor") == "0");
}

TEST_CASE("capture evidence: a failed notification frees what the capture held, and one of "
          "another amount sends it to review",
          "[execution][db][captures][webhooks]") {
    LostAnswers a;
    const std::string refused = a.capture(3000);
    REQUIRE(a.send(fake::Fault::drop_before_execute) == 1);
    REQUIRE(a.operation(refused, "state") == "unknown");
    REQUIRE(a.payment("capture_held_minor") == "3000");
    REQUIRE(a.payment("final_capture_held") == "true");
    a.notify(OperationKind::capture, refused, EvidenceOutcome::failed, 3000);
    const auto failed = a.apply();
    REQUIRE(failed.size() == 1);
    CHECK(failed[0].to == PaymentState::failed);
    CHECK(a.operation(refused, "state") == "failed");
    CHECK(a.payment("capture_held_minor") == "0");
    CHECK(a.payment("final_capture_held") == "false");
    CHECK(a.events("capture.failed") == 1);

    const std::string odd = a.capture(1000);
    REQUIRE(a.send(fake::Fault::execute_then_rst) == 1);
    a.notify(OperationKind::capture, odd, EvidenceOutcome::succeeded, 999);
    const auto mismatch = a.apply();
    REQUIRE(mismatch.size() == 1);
    CHECK(mismatch[0].to == PaymentState::needs_review);
    CHECK(a.operation(odd, "review_code") == "remote_mismatch");
    CHECK(a.payment("captured_minor") == "0");
    CHECK(a.events("payment.captured") == 0);
}

TEST_CASE("capture evidence: a failed notification of a capture that succeeded is checked with "
          "the provider's capture lookup first, and contradicts it when the provider says "
          "captured",
          "[execution][db][captures][webhooks]") {
    LostAnswers a;
    const std::string c = a.capture(5000);
    REQUIRE(a.send() == 1);
    REQUIRE(a.operation(c, "state") == "succeeded");
    a.notify(OperationKind::capture, c, EvidenceOutcome::failed, 5000);
    engine::ReconcilerOptions o;
    o.actor = "test-reconciler";
    engine::Reconciler r(*a.w.db, {a.provider.get()}, o);
    const auto out = r.run(); // webhook evidence first, then late reversals
    REQUIRE(out.size() == 1);
    INFO(out[0].lookup_detail << " " << out[0].decision.reason);
    CHECK(out[0].kind == OperationKind::capture);
    CHECK(out[0].lookup == LookupStatus::found);
    CHECK(out[0].to == PaymentState::succeeded);
    CHECK(a.operation(c, "state") == "succeeded");
    CHECK(a.payment("captured_minor") == "5000");
    CHECK(query_value("SELECT applied_result FROM provider_events WHERE refund_id = $1::uuid", c) ==
          "contradicts");
}
