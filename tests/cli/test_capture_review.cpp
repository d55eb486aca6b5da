// Captures and voids in the review queue and under the nightly's authorisation watch (issue 32),
// through the real binary against the fake Stripe provider. A capture whose outcome nobody could
// learn (its provider's lookups switched off) waits in review beside payments and refunds;
// `review list|show` name it by its own ID, and `review resolve` decides it under the same rules
// as a refund's -- succeeded only under the reference the provider's capture lookup confirms,
// failed giving back what it held, retry only once the operator confirms the provider holds
// nothing -- each audited, with its event. The nightly marks the authorisations whose expiry
// has come expired (payment.authorization_expired, once) and lists those expiring within its
// horizon (payment.authorization_expiring, once). Counted in operations, payments, audit_log,
// outbox and the fake provider's ledger.

#include "services/captures.hpp"
#include "tests/support/operated.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

engine::ExecutorOptions executor_options() {
    engine::ExecutorOptions o;
    o.worker_id = "capture-review-test";
    o.lease = std::chrono::seconds(60);
    return o;
}

// A payment of 25.00 EUR made with capture "manual" and authorised by the executor at the fake
// Stripe; captures and voids of it through the real intake.
struct Authorised {
    Operated& w;
    std::string ref = unique_name("auth");
    std::string payment_id;
    std::unique_ptr<providers::Provider> provider;

    explicit Authorised(Operated& world) : w(world) {
        provider = providers::create_provider(w.config);
        IntakeService intake(*w.db, test_keys());
        const std::string body = R"({"amount": 2500, "currency": "EUR", "merchant_reference": ")" +
                                 ref + R"(", "provider": ")" + w.config.name +
                                 R"(", "payment_method": "pm_card_visa", "capture": "manual"})";
        REQUIRE(intake.create_payment(w.writer.principal, "k-" + ref, body, "").status == 202);
        payment_id = w.payment_id_of(ref);
        REQUIRE(send() == 1);
        REQUIRE(w.state_of(ref) == "succeeded");
    }

    int send() {
        engine::Executor ex(*w.db, {provider.get()}, executor_options());
        int sent = 0;
        while (const int k = ex.run_once()) {
            sent += k;
        }
        return sent;
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
    // Sends what is due, each POST meeting `fault`, then reconciles with the provider's lookups
    // switched off: every operation sent is in review as no_lookup. Lookups stay off.
    void into_review(const std::vector<std::string>& ids, fake::Fault fault) {
        auto faults = w.fake->faults();
        faults.next.assign(ids.size(), fault);
        faults.hang = std::chrono::milliseconds(3000); // past the adapter's 2 s
        w.fake->set_faults(faults);
        REQUIRE(send() == static_cast<int>(ids.size()));
        w.write_config({{"capabilities", {{"lookup", false}}}});
        const Run reconciled = w.payrecon({"reconcile"});
        INFO(reconciled.all());
        REQUIRE(reconciled.exit_code == 3);
        for (const auto& id : ids) {
            REQUIRE(column(id, "state") == "needs_review");
            REQUIRE(column(id, "review_code") == "no_lookup");
        }
    }
    std::string column(const std::string& id, const std::string& name) {
        return w.value(
            "SELECT coalesce(" + name + "::text, '') FROM operations WHERE id = $1::uuid", id);
    }
    std::string payment(const std::string& name) { return w.column(ref, name); }
    long long audits(const std::string& id, const std::string& action) {
        return w.count("audit_log", "subject_id = '" + id + "' AND action = '" + action + "'");
    }
    long long events(const std::string& type) {
        return w.count("outbox",
                       "aggregate_id = '" + payment_id + "' AND event_type = '" + type + "'");
    }
    int executions(const std::string& id) {
        const auto l = w.fake->ledger();
        const std::string op = column(id, "operation_id");
        return l["executions"].contains(op) ? l["executions"][op].get<int>() : 0;
    }
    long long charged_eur() {
        const auto l = w.fake->ledger();
        return l.contains("charged") && l["charged"].contains("eur")
                   ? l["charged"]["eur"].get<long long>()
                   : 0;
    }
    Run resolve(const std::string& id, const std::vector<std::string>& more) {
        std::vector<std::string> args{"review", "resolve", id, "--generation",
                                      column(id, "generation")};
        args.insert(args.end(), more.begin(), more.end());
        return w.payrecon(args);
    }
};

} // namespace

TEST_CASE("capture review: a capture in review is listed and shown by its own ID, and resolved "
          "succeeded only under the reference the provider's capture lookup confirms",
          "[cli][db][captures][review]") {
    Operated w;
    Authorised a(w);
    const std::string id = a.capture(1500);
    a.into_review({id}, fake::Fault::execute_then_rst);
    REQUIRE(a.executions(id) == 1);
    CHECK(a.payment("capture_held_minor") == "1500");
    CHECK(a.payment("captured_minor") == "0");

    const Run listed = w.payrecon({"review", "list", "--tenant", w.tenant.tenant_id});
    INFO(listed.all());
    CHECK(listed.exit_code == 0);
    CHECK(contains(listed.out, "Refunds, captures and voids in review"));
    CHECK(contains(listed.out, id));
    const auto rows = nlohmann::json::parse(
        w.payrecon({"review", "list", "--tenant", w.tenant.tenant_id, "--json"}).out);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0]["kind"] == "capture");
    CHECK(rows[0]["id"] == id);

    const Run shown = w.payrecon({"review", "show", id});
    INFO(shown.all());
    CHECK(shown.exit_code == 0);
    CHECK(contains(shown.out, "Why it waits: no_lookup"));
    CHECK(contains(shown.out, "Check the capture at the provider"));
    CHECK(contains(shown.out, "payrecon review resolve " + id + " --generation " +
                                  a.column(id, "generation") + " --as succeeded"));

    // Lookups back on: the reference is checked with the provider's capture lookup.
    w.write_config();
    const Run made_up = a.resolve(id, {"--as", "succeeded", "--provider-reference", "pi_madeup",
                                       "--note", "the dashboard says so"});
    INFO(made_up.all());
    CHECK(made_up.exit_code != 0);
    CHECK(a.column(id, "state") == "needs_review");
    CHECK(a.audits(id, "review.resolve") == 0);

    const std::string reference = w.intent_of(a.ref);
    REQUIRE(!reference.empty());
    const Run decided = a.resolve(id, {"--as", "succeeded", "--provider-reference", reference,
                                       "--note", "captured, seen on the dashboard"});
    INFO(decided.all());
    CHECK(decided.exit_code == 0);
    CHECK(contains(decided.out, "capture " + id + " is now succeeded"));
    CHECK(contains(decided.out, "the provider confirmed the reference"));
    CHECK(a.column(id, "state") == "succeeded");
    CHECK(a.audits(id, "review.resolve") == 1);
    // What the capture did to its payment, once: captured, refundable, the event out.
    CHECK(a.payment("captured_minor") == "1500");
    CHECK(a.payment("capture_held_minor") == "1500");
    CHECK(a.events("payment.captured") == 1);
    CHECK(a.executions(id) == 1);
    CHECK(a.charged_eur() == 1500);

    const Run show = w.payrecon({"captures", "show", id});
    INFO(show.all());
    CHECK(show.exit_code == 0);
    CHECK(contains(show.out, "capture"));
    CHECK(contains(show.out, "succeeded"));
    const Run list = w.payrecon({"captures", "list", "--payment", a.payment_id, "--json"});
    INFO(list.all());
    const auto captures = nlohmann::json::parse(list.out);
    REQUIRE(captures.size() == 1);
    CHECK(captures[0]["id"] == id);
    CHECK(captures[0]["final"] == true);
}

TEST_CASE("capture review: a capture resolved failed gives back what it held, and a void resolved "
          "retry after a confirmed absence is sent once under its own operation ID",
          "[cli][db][captures][review]") {
    Operated w;
    Authorised a(w);
    const std::string capture = a.capture(1000);
    a.into_review({capture}, fake::Fault::drop_before_execute);
    REQUIRE(a.executions(capture) == 0);

    const Run f = a.resolve(capture, {"--as", "failed", "--note", "no capture at the provider"});
    INFO(f.all());
    CHECK(f.exit_code == 0);
    CHECK(contains(f.out, "free again on payment " + a.payment_id));
    CHECK(a.column(capture, "state") == "failed");
    CHECK(a.payment("capture_held_minor") == "0");
    CHECK(a.payment("final_capture_held") == "false");
    CHECK(a.events("capture.failed") == 1);
    CHECK(a.audits(capture, "review.resolve") == 1);

    // Nothing is held any more: the void is taken, lost before it executed, and in review.
    const std::string void_id = a.void_it();
    a.into_review({void_id}, fake::Fault::drop_before_execute);
    const Run retry = a.resolve(void_id, {"--as", "retry", "--confirm-no-charge", "--note",
                                          "the provider has not voided it"});
    INFO(retry.all());
    CHECK(retry.exit_code == 0);
    CHECK(a.column(void_id, "state") == "retry_scheduled");
    CHECK(a.send() == 1);
    CHECK(a.column(void_id, "state") == "succeeded");
    CHECK(a.executions(void_id) == 1);
    CHECK(!a.payment("voided_at").empty());
    CHECK(a.events("payment.voided") == 1);
    CHECK(a.charged_eur() == 0);
    // Nothing can be captured of a voided authorisation.
    CaptureService captures(*w.db, test_keys());
    CHECK(captures
              .create_capture(w.writer.principal, a.payment_id, unique_name("ck"),
                              R"({"amount": 100})", "")
              .status == 409);
}

TEST_CASE("capture review: the nightly marks an authorisation past its expiry expired and tells "
          "one expiring within its horizon, each event once",
          "[cli][db][captures][nightly]") {
    Operated w;
    Authorised lapsed(w);
    Authorised soon(w);
    Authorised later(w);
    // A final capture releases the rest: nothing of it can lapse.
    Authorised captured(w);
    captured.capture(500);
    REQUIRE(captured.send() == 1);
    w.exec("UPDATE payments SET authorization_expires_at = now() - interval '1 minute' "
           "WHERE payment_id = $1::uuid",
           captured.payment_id);
    w.exec("UPDATE payments SET authorization_expires_at = now() - interval '1 minute' "
           "WHERE payment_id = $1::uuid",
           lapsed.payment_id);
    w.exec("UPDATE payments SET authorization_expires_at = now() + interval '5 hours' "
           "WHERE payment_id = $1::uuid",
           soon.payment_id);
    w.exec("UPDATE payments SET authorization_expires_at = now() + interval '5 days' "
           "WHERE payment_id = $1::uuid",
           later.payment_id);

    const Run first = w.payrecon({"nightly", "--no-statement", "--json"});
    INFO(first.all());
    CHECK(first.exit_code == 3);
    const auto j = nlohmann::json::parse(first.out);
    REQUIRE(j["authorizations_expired"].size() == 1);
    CHECK(j["authorizations_expired"][0]["payment_id"] == lapsed.payment_id);
    CHECK(j["authorizations_expired"][0]["uncaptured"] == 2500);
    CHECK(j["authorizations_expired"][0]["captured"] == 0);
    REQUIRE(j["authorizations_expiring"].size() == 1);
    CHECK(j["authorizations_expiring"][0]["payment_id"] == soon.payment_id);
    CHECK(j["authorizations_expiring"][0]["told"] == true);
    bool said = false;
    for (const auto& line : j["attention"]) {
        said = said || contains(line.get<std::string>(), "EXPIRED uncaptured");
    }
    CHECK(said);
    CHECK(!lapsed.payment("authorization_expired_at").empty());
    CHECK(lapsed.events("payment.authorization_expired") == 1);
    CHECK(lapsed.audits(lapsed.payment_id, "payment.authorization_expired") == 1);
    CHECK(soon.events("payment.authorization_expiring") == 1);
    CHECK(later.events("payment.authorization_expiring") == 0);
    CHECK(soon.payment("authorization_expired_at").empty());
    CHECK(captured.payment("authorization_expired_at").empty());
    CHECK(captured.events("payment.authorization_expired") == 0);

    // Nothing more is captured of the lapsed one; the one expiring may still be.
    CaptureService captures(*w.db, test_keys());
    CHECK(captures
              .create_capture(w.writer.principal, lapsed.payment_id, unique_name("ck"),
                              R"({"amount": 100})", "")
              .status == 409);

    // A second run tells nothing twice: the lapsed one is marked, the expiring one told.
    const Run second = w.payrecon({"nightly", "--no-statement", "--json"});
    INFO(second.all());
    const auto k = nlohmann::json::parse(second.out);
    CHECK(k["authorizations_expired"].empty());
    REQUIRE(k["authorizations_expiring"].size() == 1);
    CHECK(k["authorizations_expiring"][0]["told"] == false);
    CHECK(lapsed.events("payment.authorization_expired") == 1);
    CHECK(soon.events("payment.authorization_expiring") == 1);

    // Captured in full, it is no longer listed.
    soon.capture(2500);
    REQUIRE(soon.send() == 1);
    const auto third =
        nlohmann::json::parse(w.payrecon({"nightly", "--no-statement", "--json"}).out);
    CHECK(third["authorizations_expiring"].empty());
}
