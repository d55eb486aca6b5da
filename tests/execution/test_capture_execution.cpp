// Captures and voids on the executor and the reconciler (issue 32, DESIGN sections 6, 7, 12 and
// 16): a payment made with capture "manual" is authorised by the executor (nothing charged), and
// its captures and its void -- accepted by the real intake -- are claimed, fenced and sent by the
// same executor under their own operation IDs; a lost answer is settled by reading the
// authorisation before any re-send. Counted from the fake's ledger (what it captured, executions
// and deliveries per operation ID), the operations and attempts tables, what the payment row
// holds and the outbox. Each case runs for every kind whose adapter authorises only and whose
// captures are settled by their answer or a lookup (Adyen's, by notification: test_adyen_captures).
#include "providers/registry.hpp"
#include "services/captures.hpp"
#include "services/payments.hpp"
#include "services/refunds.hpp"
#include "tests/execution/world.hpp"
#include "tests/support/stripe_webhooks.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <thread>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// The kinds whose adapters authorise only and capture later (their descriptors say so).
std::vector<std::string> manual_kinds() {
    std::vector<std::string> out;
    for (const std::string kind : {"stripe", "checkout", "paypal", "adyen", "square"}) {
        if (providers::descriptor_of(kind).api.manual_capture) {
            out.push_back(kind);
        }
    }
    return out;
}

// Those of manual_kinds() whose captures and voids are settled by the answer or by a lookup of
// the authorisation (capture_lookup). A kind that finds none (Adyen: received, then its CAPTURE
// or CANCELLATION notification) settles them by notification only: its own file covers it
// (test_adyen_captures).
std::vector<std::string> lookup_kinds() {
    std::vector<std::string> out;
    for (const std::string& kind : manual_kinds()) {
        if (providers::descriptor_of(kind).api.capture_lookup) {
            out.push_back(kind);
        }
    }
    return out;
}

// One payment of `kind` made with capture "manual" and authorised by the executor.
struct Authorisation {
    World w;
    std::unique_ptr<providers::Provider> provider;
    std::string ref = unique_name("auth");
    std::string payment_id;

    explicit Authorisation(const std::string& kind, long long amount = 10000) : w(kind, {}) {
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
    }

    int send() {
        engine::Executor ex(*w.db, {provider.get()}, w.options());
        return ex.run_once();
    }
    std::vector<engine::ReconcileOutcome> reconcile() {
        engine::ReconcilerOptions o;
        o.actor = "test-reconciler";
        engine::Reconciler r(*w.db, {provider.get()}, o);
        return r.run();
    }
    std::string capture(const std::string& body) {
        CaptureService captures(*w.db, test_keys());
        const auto r =
            captures.create_capture(w.writer.principal, payment_id, unique_name("ck"), body, "");
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
    std::string payment(const std::string& column) {
        return query_value("SELECT coalesce(" + column +
                               "::text, '') FROM payments WHERE payment_id = $1::uuid",
                           payment_id);
    }
    std::string operation(const std::string& id, const std::string& column) {
        return query_value(
            "SELECT coalesce(" + column + "::text, '') FROM operations WHERE id = $1", id);
    }
    std::string op(const std::string& id) { return operation(id, "operation_id"); }
    // What the fake's ledger counts operation `id`'s deliveries and executions under: its
    // operation ID, which the call carries as its key -- but Square's CompletePayment and
    // CancelPayment carry no key and no reference of ours, and the fake counts them by the
    // payment they name.
    std::string counted(const std::string& id) {
        if (w.config.kind != "square") {
            return op(id);
        }
        return (operation(id, "kind") == "capture" ? "complete:" : "cancel:") +
               payment("provider_reference");
    }
    long long events(const std::string& type) {
        return count_rows("outbox", w.tenant.tenant_id,
                          "aggregate_id = '" + payment_id + "' AND event_type = '" + type + "'");
    }
    // What the fake charged in EUR: captures only, never an authorisation.
    long long charged_eur() {
        const auto l = w.fake->ledger();
        return l.contains("charged") && l["charged"].contains("eur")
                   ? l["charged"]["eur"].get<long long>()
                   : 0;
    }
    long long executions(const std::string& operation_id) {
        const auto l = w.fake->ledger();
        return l["executions"].value(operation_id, 0LL);
    }
    long long deliveries(const std::string& operation_id) { return w.deliveries(operation_id); }
    nlohmann::json resource() {
        const auto body = payment_resource(*w.db, w.tenant.tenant_id, payment_id);
        REQUIRE(body);
        return nlohmann::json::parse(*body);
    }
    // After the executor sent operation `id` and the provider accepted it: where the provider
    // answers the outcome at once there is nothing to do; Checkout.com's 202 leaves it `unknown`
    // (pending at the provider), and the reconciler's lookup finds it -- once, with no re-send.
    void settle_accepted(const std::string& id) {
        if (operation(id, "state") != "unknown") {
            return;
        }
        CHECK(count_rows("payment_attempts", w.tenant.tenant_id,
                         "operation_id = '" + op(id) + "' AND outcome = 'pending'") >= 1);
        const auto sent = deliveries(counted(id));
        const auto out = reconcile();
        REQUIRE(out.size() == 1);
        CHECK(out[0].to == PaymentState::succeeded);
        CHECK(deliveries(counted(id)) == sent);
    }
    void next_fault(fake::Fault f) {
        auto faults = w.fake->faults();
        faults.next = {f};
        w.fake->set_faults(faults);
    }
};

} // namespace

TEST_CASE("captures: the executor authorises only, then captures once under the capture's own "
          "operation ID",
          "[execution][db][captures]") {
    for (const std::string& kind : lookup_kinds()) {
        INFO(kind);
        Authorisation a(kind);
        CHECK(a.payment("state") == "succeeded");
        CHECK(a.resource()["status"] == "authorized");
        CHECK(a.events("payment.authorized") == 1);
        CHECK(a.events("payment.succeeded") == 0);
        CHECK(a.charged_eur() == 0); // an authorisation charges nothing

        const std::string c = a.capture(R"({"amount": 6000})");
        CHECK(a.send() == 1);
        a.settle_accepted(c);
        CHECK(a.operation(c, "state") == "succeeded");
        CHECK(a.executions(a.counted(c)) == 1);
        CHECK(a.deliveries(a.counted(c)) == 1);
        CHECK(a.charged_eur() == 6000);
        CHECK(a.payment("captured_minor") == "6000");
        CHECK(a.payment("capture_held_minor") == "6000");
        CHECK(a.events("payment.captured") == 1);
        const auto shown = a.resource();
        CHECK(shown["status"] == "captured");
        CHECK(shown["amount_captured"] == 6000);
        CHECK(shown["amount_refundable"] == 6000);
        CHECK(shown["amount_capturable"] == 0);
        // Attempts are recorded per operation: the capture's own, one.
        CHECK(count_rows("payment_attempts", a.w.tenant.tenant_id,
                         "operation_id = '" + a.op(c) + "'") == 1);
        // What was captured can be refunded, and no more.
        RefundService refunds(*a.w.db, test_keys());
        CHECK(refunds
                  .create_refund(a.w.writer.principal, a.payment_id, "r-over",
                                 R"({"amount": 6001})", "")
                  .status == 409);
        CHECK(refunds.create_refund(a.w.writer.principal, a.payment_id, "r-all", "{}", "").status ==
              202);
        CHECK(a.send() == 1);
        CHECK(a.payment("refund_held_minor") == "6000");
        CHECK(a.w.fake->ledger()["refunded"].value("eur", 0LL) == 6000);
    }
}

TEST_CASE("captures: the parts and the final capture of one authorisation reach the provider one "
          "at a time, in the order the intake took them",
          "[execution][db][captures][regression]") {
    // Claimed in one batch, the final capture went out beside (or before) the parts asked ahead of
    // it; where it arrived first it closed the authorisation and the provider refused the parts,
    // which the intake had taken (test_capture_matrix: a part lost on most such payments).
    for (const std::string& kind : lookup_kinds()) {
        if (!providers::descriptor_of(kind).api.multiple_captures) {
            continue;
        }
        INFO(kind);
        Authorisation a(kind, 10000);
        const std::vector<std::string> captures = {a.capture(R"({"amount": 2000, "final": false})"),
                                                   a.capture(R"({"amount": 3000, "final": false})"),
                                                   a.capture(R"({"amount": 4000})")};
        for (std::size_t i = 0; i < captures.size(); ++i) {
            INFO("capture " << i);
            CHECK(a.send() == 1); // this one only: the later ones wait for it
            for (std::size_t later = i + 1; later < captures.size(); ++later) {
                CHECK(a.operation(captures[later], "state") == "pending");
                CHECK(a.deliveries(a.counted(captures[later])) == 0);
            }
            // Accepted and not yet settled (Checkout.com's 202): the next still waits.
            if (a.operation(captures[i], "state") == "unknown") {
                CHECK(a.send() == 0);
            }
            a.settle_accepted(captures[i]);
            CHECK(a.operation(captures[i], "state") == "succeeded");
            CHECK(a.executions(a.counted(captures[i])) == 1);
        }
        CHECK(a.send() == 0);
        CHECK(a.charged_eur() == 9000);
        CHECK(a.payment("captured_minor") == "9000");
    }
}

TEST_CASE("captures: a void releases the authorisation at the provider, nothing charged",
          "[execution][db][captures]") {
    for (const std::string& kind : lookup_kinds()) {
        INFO(kind);
        Authorisation a(kind);
        const std::string v = a.void_it();
        CHECK(a.send() == 1);
        a.settle_accepted(v);
        CHECK(a.operation(v, "state") == "succeeded");
        CHECK(a.executions(a.counted(v)) == 1);
        CHECK_FALSE(a.payment("voided_at").empty());
        CHECK(a.events("payment.voided") == 1);
        CHECK(a.resource()["status"] == "voided");
        CHECK(a.charged_eur() == 0);
    }
}

TEST_CASE("captures: executed, then the answer lost -- unknown, found captured by the lookup, "
          "succeeded once, never sent again",
          "[execution][db][captures][fault]") {
    for (const std::string& kind : lookup_kinds()) {
        for (const fake::Fault fault :
             {fake::Fault::execute_then_hang, fake::Fault::execute_then_rst,
              fake::Fault::http_500_after_execute}) {
            INFO(kind << " " << fake::to_string(fault));
            Authorisation a(kind);
            const std::string c = a.capture(R"({"amount": 2500})");
            a.next_fault(fault);
            CHECK(a.send() == 1);
            CHECK(a.operation(c, "state") == "unknown");
            CHECK(a.send() == 0); // an unknown capture is never sent again by a worker
            const auto out = a.reconcile();
            REQUIRE(out.size() == 1);
            CHECK(out[0].to == PaymentState::succeeded);
            CHECK(a.operation(c, "state") == "succeeded");
            CHECK(a.executions(a.counted(c)) == 1);
            CHECK(a.deliveries(a.counted(c)) == 1);
            CHECK(a.charged_eur() == 2500);
            CHECK(a.payment("captured_minor") == "2500");
            CHECK(a.events("payment.captured") == 1);
        }
    }
}

TEST_CASE("captures: dropped before executing -- unknown, the authorisation still untouched, sent "
          "again with the same key, captured once",
          "[execution][db][captures][fault]") {
    for (const std::string& kind : lookup_kinds()) {
        INFO(kind);
        Authorisation a(kind);
        const std::string c = a.capture(R"({"amount": 4000})");
        a.next_fault(fake::Fault::drop_before_execute);
        CHECK(a.send() == 1);
        CHECK(a.operation(c, "state") == "unknown");
        CHECK(a.executions(a.counted(c)) == 0);
        const auto out = a.reconcile();
        REQUIRE(out.size() == 1);
        CHECK(a.operation(c, "state") == "retry_scheduled");
        CHECK(a.send() == 1);
        a.settle_accepted(c);
        CHECK(a.operation(c, "state") == "succeeded");
        CHECK(a.executions(a.counted(c)) == 1);
        CHECK(a.deliveries(a.counted(c)) == 2);
        CHECK(a.charged_eur() == 4000);
        CHECK(count_rows("payment_attempts", a.w.tenant.tenant_id,
                         "operation_id <> '" + a.op(c) + "' AND operation_id <> '" +
                             a.payment("operation_id") + "'") == 0);
    }
}

TEST_CASE("captures: a void whose answer was lost is found voided by the lookup, once",
          "[execution][db][captures][fault]") {
    for (const std::string& kind : lookup_kinds()) {
        INFO(kind);
        Authorisation a(kind);
        const std::string v = a.void_it();
        a.next_fault(fake::Fault::execute_then_hang);
        CHECK(a.send() == 1);
        CHECK(a.operation(v, "state") == "unknown");
        const auto out = a.reconcile();
        REQUIRE(out.size() == 1);
        CHECK(a.operation(v, "state") == "succeeded");
        CHECK(a.executions(a.counted(v)) == 1);
        CHECK(a.deliveries(a.counted(v)) == 1);
        CHECK_FALSE(a.payment("voided_at").empty());
        CHECK(a.events("payment.voided") == 1);
    }
}

TEST_CASE("captures: Square's unkeyed complete is never re-sent without reading the payment first "
          "-- found completed, no re-send -- absent, exactly one",
          "[execution][db][captures][fault][square]") {
    // CompletePayment takes no idempotency key: a second complete of an APPROVED payment would
    // capture it, so only a read of the payment (GET /v2/payments/{id}) may let one go again.
    const auto reads = [](Authorisation& a) {
        return a.w.fake->ledger()["square_payment_reads"].value(a.payment("provider_reference"),
                                                                0LL);
    };
    SECTION("executed, the answer lost: the read finds it COMPLETED, nothing sent again") {
        Authorisation a("square");
        const std::string c = a.capture(R"({"amount": 10000})");
        a.next_fault(fake::Fault::execute_then_rst);
        CHECK(a.send() == 1);
        CHECK(a.operation(c, "state") == "unknown");
        CHECK(a.executions(a.counted(c)) == 1);
        CHECK(reads(a) == 0); // the capture itself read nothing: its answer was lost, not refused
        CHECK(a.send() == 0);
        CHECK(a.deliveries(a.counted(c)) == 1);
        const auto out = a.reconcile();
        REQUIRE(out.size() == 1);
        CHECK(out[0].to == PaymentState::succeeded);
        CHECK(reads(a) == 1);
        CHECK(a.send() == 0);
        CHECK(a.deliveries(a.counted(c)) == 1);
        CHECK(a.executions(a.counted(c)) == 1);
        CHECK(a.charged_eur() == 10000);
        CHECK(a.payment("captured_minor") == "10000");
    }
    SECTION("dropped before executing: the read finds it APPROVED, then exactly one re-send") {
        Authorisation a("square");
        const std::string c = a.capture(R"({"amount": 10000})");
        a.next_fault(fake::Fault::drop_before_execute);
        CHECK(a.send() == 1);
        CHECK(a.operation(c, "state") == "unknown");
        CHECK(a.deliveries(a.counted(c)) == 1);
        CHECK(a.executions(a.counted(c)) == 0);
        CHECK(reads(a) == 0);
        CHECK(a.send() == 0); // unknown: no worker sends it before the read
        CHECK(a.deliveries(a.counted(c)) == 1);
        const auto out = a.reconcile();
        REQUIRE(out.size() == 1);
        CHECK(a.operation(c, "state") == "retry_scheduled");
        CHECK(reads(a) == 1);
        CHECK(a.deliveries(a.counted(c)) == 1); // the read came first, and sent nothing
        CHECK(a.send() == 1);
        CHECK(a.operation(c, "state") == "succeeded");
        CHECK(a.deliveries(a.counted(c)) == 2);
        CHECK(a.executions(a.counted(c)) == 1);
        CHECK(a.send() == 0);
        CHECK(a.charged_eur() == 10000);
    }
    SECTION("a void's answer lost: read CANCELED, nothing sent again") {
        Authorisation a("square");
        const std::string v = a.void_it();
        a.next_fault(fake::Fault::http_500_after_execute);
        CHECK(a.send() == 1);
        CHECK(a.operation(v, "state") == "unknown");
        const auto out = a.reconcile();
        REQUIRE(out.size() == 1);
        CHECK(a.operation(v, "state") == "succeeded");
        CHECK(reads(a) == 1);
        CHECK(a.deliveries(a.counted(v)) == 1);
        CHECK(a.executions(a.counted(v)) == 1);
        CHECK(a.charged_eur() == 0);
    }
}

TEST_CASE("captures: the provider refuses a capture of an authorisation it let lapse -- failed, "
          "and what it held is given back",
          "[execution][db][captures]") {
    for (const std::string& kind : lookup_kinds()) {
        INFO(kind);
        Authorisation a(kind);
        const std::string c = a.capture(R"({"amount": 3000})");
        // The provider's clock passes its validity; ours was not told (an expiry it counts
        // longer than the provider did).
        a.w.fake->advance_clock(a.provider->capabilities().authorization_validity +
                                std::chrono::hours(1));
        CHECK(a.send() == 1);
        CHECK(a.operation(c, "state") == "failed");
        CHECK_FALSE(a.operation(c, "failure_reason").empty());
        CHECK(a.executions(a.counted(c)) == 0);
        CHECK(a.charged_eur() == 0);
        CHECK(a.payment("capture_held_minor") == "0");
        CHECK(a.payment("final_capture_held") == "false");
        CHECK(a.payment("captured_minor") == "0");
        CHECK(a.events("capture.failed") == 1);
    }
}

TEST_CASE("captures: Stripe's news of a capture and of a void is consistent with the "
          "authorisation, a cancellation nobody asked for contradicts it",
          "[execution][db][captures][webhooks]") {
    Authorisation a("stripe");
    const std::string pi = a.payment("provider_reference");
    const auto intent = [&](const std::string& status, long long received) {
        return nlohmann::json{{"id", pi},
                              {"object", "payment_intent"},
                              {"amount", 10000},
                              {"amount_received", received},
                              {"currency", "eur"},
                              {"status", status},
                              {"capture_method", "manual"},
                              {"metadata", {{"operation_id", a.payment("operation_id")}}}};
    };
    const auto applied = [&](const std::string& result) {
        return count_rows("provider_events", a.w.tenant.tenant_id,
                          "payment_id = '" + a.payment_id + "' AND applied_result = '" + result +
                              "'");
    };
    SECTION("a partial capture's payment_intent.succeeded, then a void's payment_intent.canceled") {
        const std::string c = a.capture(R"({"amount": 6000})");
        CHECK(a.send() == 1);
        REQUIRE(deliver_stripe(*a.w.db, a.w.config.name,
                               stripe_event("payment_intent.succeeded", intent("succeeded", 6000)))
                    .new_events == 1);
        a.reconcile();
        CHECK(applied("consistent") == 1);
        CHECK(applied("contradicts") == 0);
        CHECK(a.operation(c, "state") == "succeeded");
    }
    SECTION("a void's payment_intent.canceled") {
        a.void_it();
        CHECK(a.send() == 1);
        REQUIRE(deliver_stripe(*a.w.db, a.w.config.name,
                               stripe_event("payment_intent.canceled", intent("canceled", 0)))
                    .new_events == 1);
        a.reconcile();
        CHECK(applied("consistent") == 1);
        CHECK(applied("contradicts") == 0);
    }
    SECTION("a cancellation of an authorisation payrecon neither voided nor saw expire") {
        REQUIRE(deliver_stripe(*a.w.db, a.w.config.name,
                               stripe_event("payment_intent.canceled", intent("canceled", 0)))
                    .new_events == 1);
        a.reconcile();
        CHECK(applied("contradicts") == 1);
        CHECK(a.payment("state") == "succeeded"); // a final state moves for no notification
    }
}

TEST_CASE("captures: an authorisation asked of a provider that cannot authorise only is never "
          "sent -- charged at once it would take the money -- and waits for an operator",
          "[execution][db][captures]") {
    for (const std::string kind : {"stripe", "checkout", "paypal", "adyen", "square"}) {
        if (providers::descriptor_of(kind).api.manual_capture) {
            continue;
        }
        INFO(kind);
        // Accepted without a provider configuration (nothing checked it at intake).
        World w(kind, {});
        w.config.settle_delay = std::chrono::seconds(0);
        const auto provider = providers::create_provider(w.config);
        IntakeService intake(*w.db, test_keys());
        const std::string ref = unique_name("auth");
        REQUIRE(intake
                    .create_payment(
                        w.writer.principal, "k-" + ref,
                        R"({"amount": 2500, "currency": "EUR", "merchant_reference": ")" + ref +
                            R"(", "provider": ")" + w.config.name + R"(", "payment_method": ")" +
                            w.method + R"(", "capture": "manual"})",
                        "")
                    .status == 202);
        engine::Executor ex(*w.db, {provider.get()}, w.options());
        CHECK(ex.run_once() == 1);
        CHECK(w.state_of(ref) == "needs_review");
        CHECK(query_value("SELECT review_code FROM payments WHERE merchant_reference = $1", ref) ==
              "request_rejected");
        CHECK(w.deliveries(w.op_of(ref)) == 0);
        CHECK(w.fake->ledger()["deliveries"] == 0);
    }
}

TEST_CASE("captures: races -- a final capture, a second capture, a void and a refund asked at "
          "once: whatever wins, the provider captures no more than was authorised and refunds "
          "no more than was captured, and its books equal ours",
          "[execution][db][captures][races]") {
    for (const std::string& kind : lookup_kinds()) {
        const bool in_parts = providers::descriptor_of(kind).api.multiple_captures;
        for (int round = 0; round < 3; ++round) {
            INFO(kind << " round " << round);
            Authorisation a(kind, 10000);
            // Four requests at once, each on its own connection: what the intake takes is
            // decided by the payment row's lock and its kind's guard.
            std::vector<int> status(4, 0);
            std::vector<std::thread> threads;
            const auto ask = [&](int i) {
                const auto db = connect();
                CaptureService captures(*db, test_keys());
                RefundService refunds(*db, test_keys());
                const auto& p = a.w.writer.principal;
                switch (i) {
                case 0:
                    status[0] = captures
                                    .create_capture(p, a.payment_id, unique_name("ck"),
                                                    R"({"amount": 6000})", "")
                                    .status;
                    break;
                case 1:
                    status[1] = captures
                                    .create_capture(p, a.payment_id, unique_name("ck"),
                                                    in_parts ? R"({"amount": 5000, "final": false})"
                                                             : R"({"amount": 5000})",
                                                    "")
                                    .status;
                    break;
                case 2:
                    status[2] =
                        captures.create_void(p, a.payment_id, unique_name("vk"), "", "").status;
                    break;
                default:
                    status[3] = refunds
                                    .create_refund(p, a.payment_id, unique_name("rk"),
                                                   R"({"amount": 1000})", "")
                                    .status;
                }
            };
            for (int i = 0; i < 4; ++i) {
                threads.emplace_back(ask, i);
            }
            for (auto& t : threads) {
                t.join();
            }
            // Nothing is captured yet when they race: the refund has nothing to refund.
            CHECK(status[3] == 409);
            // The two captures cannot both fit, and a void and a final capture exclude each
            // other.
            CHECK(!(status[0] == 202 && status[1] == 202));
            CHECK(!(status[0] == 202 && status[2] == 202));
            for (const int s : status) {
                CHECK((s == 202 || s == 409));
            }
            // Sent, and settled by the answer or the reconciler's lookup: a capture the provider
            // refused after a void (Checkout.com: no action of it) is confirmed absent, sent
            // again and declined -- a few rounds of worker and reconciler at most.
            const auto open = [&] {
                return count_rows("operations", a.w.tenant.tenant_id,
                                  "payment_id = '" + a.payment_id +
                                      "' AND state NOT IN ('succeeded', 'failed')");
            };
            for (int pass = 0; pass < 4 && (pass == 0 || open() > 0); ++pass) {
                while (a.send() > 0) {
                }
                a.reconcile();
            }
            INFO(query_value("SELECT string_agg(kind || ' ' || state || ' ' || amount_minor, ', ') "
                             "FROM operations WHERE payment_id = $1::uuid",
                             a.payment_id));
            CHECK(open() == 0);
            const long long captured = std::stoll(a.payment("captured_minor"));
            CHECK(captured <= 10000);
            CHECK(a.charged_eur() == captured); // the provider's books are ours
            // Now a refund of what was captured fits, and one cent more never does.
            if (captured > 0) {
                RefundService refunds(*a.w.db, test_keys());
                CHECK(refunds
                          .create_refund(a.w.writer.principal, a.payment_id, unique_name("rk"),
                                         R"({"amount": )" + std::to_string(captured + 1) + "}", "")
                          .status == 409);
                CHECK(refunds
                          .create_refund(a.w.writer.principal, a.payment_id, unique_name("rk"),
                                         R"({"amount": )" + std::to_string(captured) + "}", "")
                          .status == 202);
                while (a.send() > 0) {
                }
                a.reconcile();
                const auto l = a.w.fake->ledger();
                const long long refunded = l.contains("refunded") && l["refunded"].contains("eur")
                                               ? l["refunded"]["eur"].get<long long>()
                                               : 0;
                CHECK(refunded == captured);
                CHECK(std::stoll(a.payment("refund_held_minor")) == captured);
            }
        }
    }
}
