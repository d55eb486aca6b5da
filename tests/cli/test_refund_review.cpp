// Refunds in the review queue (issue 31, item 5), through the real binary against the fake Stripe
// provider: a refund whose outcome nobody could learn (its provider's lookups switched off, as
// Adyen's are) waits in review; `review list` lists it, `review show` prints the complete
// commands that decide it, and `review resolve` decides it under the payment's rules -- succeeded
// only with the reference the provider confirms, failed giving its amount back to the payment,
// retry only once the operator confirms that the provider holds no refund -- each audited, with
// its refund.* event. `review recheck` asks the provider's refund lookup again. Outcomes are
// counted in operations, payments, audit_log, outbox and the fake provider's ledger.

#include "services/refunds.hpp"
#include "tests/support/operated.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// One succeeded payment of 25.00 EUR with `n` refunds of 5.00 EUR, each sent once and meeting
// `fault`, then reconciled with the provider's lookups switched off: every refund in review as
// no_lookup. The configuration is left with lookups off.
struct RefundsInReview {
    Operated& w;
    std::string ref; // the payment's merchant reference
    std::string payment_id;
    std::vector<std::string> refunds;

    RefundsInReview(Operated& world, int n, fake::Fault fault) : w(world) {
        ref = w.payments(1)[0];
        auto provider = providers::create_provider(w.config);
        engine::Executor ex(*w.db, {provider.get()}, options());
        REQUIRE(ex.run_once() == 1);
        REQUIRE(w.state_of(ref) == "succeeded");
        payment_id = w.payment_id_of(ref);
        RefundService service(*w.db, test_keys());
        for (int i = 0; i < n; ++i) {
            const auto accepted = service.create_refund(
                w.writer.principal, payment_id, unique_name("rk"), R"({"amount": 500})", "");
            REQUIRE(accepted.status == 202);
            refunds.push_back(nlohmann::json::parse(accepted.body)["id"]);
        }
        auto faults = w.fake->faults();
        faults.next.assign(static_cast<std::size_t>(n), fault);
        faults.hang = std::chrono::milliseconds(3000); // past the adapter's 2 s
        w.fake->set_faults(faults);
        int sent = 0;
        while (const int k = ex.run_once()) {
            sent += k;
        }
        REQUIRE(sent == n);
        w.write_config({{"capabilities", {{"lookup", false}}}});
        const Run reconciled = w.payrecon({"reconcile"});
        INFO(reconciled.all());
        REQUIRE(reconciled.exit_code == 3);
        for (const auto& id : refunds) {
            INFO(w.value("SELECT row_to_json(o)::text FROM operations o WHERE id = $1::uuid", id));
            REQUIRE(column(id, "state") == "needs_review");
            REQUIRE(column(id, "review_code") == "no_lookup");
            // The merchant hears of it: created, unknown, in review.
            CHECK(events(id, "refund.created") == 1);
            CHECK(events(id, "refund.unknown") == 1);
            CHECK(events(id, "refund.needs_review") == 1);
        }
    }

    static engine::ExecutorOptions options() {
        engine::ExecutorOptions o;
        o.worker_id = "refund-review-test";
        o.lease = std::chrono::seconds(60);
        return o;
    }
    std::string column(const std::string& refund_id, const std::string& name) {
        return w.value("SELECT coalesce(" + name +
                           "::text, '') FROM operations WHERE id = $1::uuid",
                       refund_id);
    }
    std::string generation(const std::string& refund_id) { return column(refund_id, "generation"); }
    long long audits(const std::string& refund_id, const std::string& action) {
        return w.count("audit_log", "subject_type = 'refund' AND subject_id = '" + refund_id +
                                        "' AND action = '" + action + "'");
    }
    long long events(const std::string& refund_id, const std::string& type) {
        return w.count("outbox", "event_type = '" + type + "' AND payload->>'refund_id' = '" +
                                     refund_id + "'");
    }
    int executions(const std::string& refund_id) {
        return w.executions_of(column(refund_id, "operation_id"));
    }
    long long refunded_eur() { return w.refunded_eur(); }
    // The fake's ID of the refund it made under `refund_id`'s operation ID ("" if none).
    std::string provider_refund_of(const std::string& refund_id) {
        return w.provider_refund_of(column(refund_id, "operation_id"));
    }
    Run resolve(const std::string& refund_id, const std::vector<std::string>& more) {
        std::vector<std::string> args{"review", "resolve", refund_id, "--generation",
                                      generation(refund_id)};
        args.insert(args.end(), more.begin(), more.end());
        return w.payrecon(args);
    }
};

} // namespace

TEST_CASE("refund review: a refund in review is listed and shown with the complete commands that "
          "decide it, and resolved succeeded only under the reference the provider confirms",
          "[cli][db][refunds][review]") {
    Operated w;
    RefundsInReview r(w, 1, fake::Fault::execute_then_rst);
    const std::string id = r.refunds[0];
    REQUIRE(r.executions(id) == 1);

    const Run listed = w.payrecon({"review", "list", "--tenant", w.tenant.tenant_id});
    INFO(listed.all());
    CHECK(listed.exit_code == 0);
    CHECK(contains(listed.out, "Refunds, captures and voids in review"));
    CHECK(contains(listed.out, id));
    CHECK(contains(listed.out, "no_lookup"));
    const Run listed_json =
        w.payrecon({"review", "list", "--tenant", w.tenant.tenant_id, "--json"});
    const auto rows = nlohmann::json::parse(listed_json.out);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0]["kind"] == "refund");
    CHECK(rows[0]["id"] == id);
    CHECK(rows[0]["generation"].get<long long>() == std::stoll(r.generation(id)));

    const Run shown = w.payrecon({"review", "show", id});
    INFO(shown.all());
    CHECK(shown.exit_code == 0);
    CHECK(contains(shown.out, "Why it waits: no_lookup"));
    CHECK(contains(shown.out, "payrecon review resolve " + id + " --generation " +
                                  r.generation(id) + " --as succeeded"));
    CHECK(contains(shown.out, "--as failed"));

    // Lookups back on: the reference is checked with the provider's refund lookup.
    w.write_config();
    const auto before = r.generation(id);
    const Run made_up = r.resolve(id, {"--as", "succeeded", "--provider-reference", "re_madeup",
                                       "--note", "the dashboard says so"});
    INFO(made_up.all());
    CHECK(made_up.exit_code != 0);
    CHECK(contains(made_up.err, "not re_madeup"));
    CHECK(r.generation(id) == before);
    CHECK(r.column(id, "state") == "needs_review");
    CHECK(r.audits(id, "review.resolve") == 0);

    const std::string reference = r.provider_refund_of(id);
    REQUIRE(!reference.empty());
    const Run decided = r.resolve(id, {"--as", "succeeded", "--provider-reference", reference,
                                       "--note", "refunded, seen on the dashboard"});
    INFO(decided.all());
    CHECK(decided.exit_code == 0);
    CHECK(contains(decided.out, "refund " + id + " is now succeeded"));
    CHECK(contains(decided.out, "the provider confirmed the reference"));
    CHECK(r.column(id, "state") == "succeeded");
    CHECK(r.column(id, "provider_reference") == reference);
    CHECK(r.column(id, "review_code").empty());
    CHECK(r.audits(id, "review.resolve") == 1);
    CHECK(r.events(id, "refund.succeeded") == 1);
    // Still held by the payment: the money went back once, and nothing was sent again.
    CHECK(w.column(r.ref, "refund_held_minor") == "500");
    CHECK(r.executions(id) == 1);
    CHECK(r.refunded_eur() == 500);

    // Decided once: the same command again is refused as changed.
    const Run again = w.payrecon({"review", "resolve", id, "--generation", before, "--as",
                                  "succeeded", "--provider-reference", reference, "--note", "x"});
    CHECK(again.exit_code != 0);
    CHECK(contains(again.err, "changed since it was shown"));
    CHECK(r.audits(id, "review.resolve") == 1);
}

TEST_CASE("refund review: a refund resolved failed gives its amount back to the payment, and "
          "retry after a confirmed absence sends it once under the same operation ID",
          "[cli][db][refunds][review]") {
    Operated w;
    RefundsInReview r(w, 2, fake::Fault::drop_before_execute);
    const std::string failed = r.refunds[0];
    const std::string retried = r.refunds[1];
    REQUIRE(r.executions(failed) == 0);
    REQUIRE(w.column(r.ref, "refund_held_minor") == "1000");

    // An amount is what a charge took, never a refund's.
    const Run amount = r.resolve(failed, {"--as", "succeeded", "--provider-reference", "re_x",
                                          "--amount", "4.00", "--note", "n", "--unverified"});
    CHECK(amount.exit_code == 2);
    CHECK(contains(amount.err, "--amount records what a charge took"));

    const Run f = r.resolve(failed, {"--as", "failed", "--note", "no refund at the provider"});
    INFO(f.all());
    CHECK(f.exit_code == 0);
    CHECK(contains(f.out, "refundable again on payment " + r.payment_id));
    CHECK(r.column(failed, "state") == "failed");
    CHECK(contains(r.column(failed, "failure_reason"), "no refund at the provider"));
    CHECK(w.column(r.ref, "refund_held_minor") == "500");
    CHECK(r.events(failed, "refund.failed") == 1);
    CHECK(r.audits(failed, "review.resolve") == 1);

    // Retry: sent again by the next worker run, once, with the same operation ID.
    const Run q = r.resolve(retried, {"--as", "retry", "--confirm-no-charge", "--note",
                                      "the provider has no refund for it"});
    INFO(q.all());
    CHECK(q.exit_code == 0);
    CHECK(r.column(retried, "state") == "retry_scheduled");
    auto provider = providers::create_provider(w.config);
    engine::Executor ex(*w.db, {provider.get()}, RefundsInReview::options());
    CHECK(ex.run_once() == 1);
    CHECK(r.column(retried, "state") == "succeeded");
    CHECK(r.executions(retried) == 1);
    CHECK(r.executions(failed) == 0);
    CHECK(r.refunded_eur() == 500);
    CHECK(r.events(retried, "refund.succeeded") == 1);

    // What failed is refundable again: 20.00 of 25.00 fits now, one cent more does not.
    RefundService service(*w.db, test_keys());
    CHECK(service
              .create_refund(w.writer.principal, r.payment_id, unique_name("rk"),
                             R"({"amount": 2001})", "")
              .status == 409);
    CHECK(service
              .create_refund(w.writer.principal, r.payment_id, unique_name("rk"),
                             R"({"amount": 2000})", "")
              .status == 202);
}

TEST_CASE("refund review: review recheck asks the provider's refund lookup again and settles a "
          "refund in review from its answer",
          "[cli][db][refunds][review]") {
    Operated w;
    RefundsInReview r(w, 1, fake::Fault::execute_then_fin);
    const std::string id = r.refunds[0];
    w.write_config(); // lookups back on
    const Run rechecked = w.payrecon({"review", "recheck", id});
    INFO(rechecked.all());
    CHECK(rechecked.exit_code == 0);
    CHECK(contains(rechecked.out, "a resolve of this refund"));
    CHECK(r.column(id, "state") == "succeeded");
    CHECK(r.column(id, "provider_reference") == r.provider_refund_of(id));
    CHECK(r.events(id, "refund.succeeded") == 1);
    CHECK(r.executions(id) == 1);
    CHECK(r.refunded_eur() == 500);
    CHECK(w.count("payment_lookups", "operation_id = '" + r.column(id, "operation_id") +
                                         "' AND status = 'found'") == 1);
}

TEST_CASE("refund review: review recheck --provider --code takes the provider's refunds in review "
          "with the code, each asked with the refund lookup and fenced by its own generation",
          "[cli][db][refunds][review]") {
    Operated w;
    RefundsInReview r(w, 2, fake::Fault::execute_then_fin);
    w.write_config(); // lookups back on: no_lookup may be asked again
    const std::vector<std::string> selection{"review",      "recheck", "--provider",
                                             w.config.name, "--code",  "no_lookup"};
    auto with = [&](const std::vector<std::string>& more) {
        std::vector<std::string> args = selection;
        args.insert(args.end(), more.begin(), more.end());
        return args;
    };
    const std::string generation = r.generation(r.refunds[0]);
    const Run dry = w.payrecon(with({"--dry-run"}));
    INFO(dry.all());
    CHECK(dry.exit_code == 0);
    for (const auto& id : r.refunds) {
        CHECK(contains(dry.out, "would recheck  refund " + id));
    }
    CHECK(contains(dry.out, "dry run: 2 refund(s) of " + w.config.name +
                                " in review as no_lookup would be rechecked"));
    CHECK(r.column(r.refunds[0], "state") == "needs_review");
    CHECK(r.generation(r.refunds[0]) == generation);

    const Run run = w.payrecon(with({"--json"}));
    INFO(run.all());
    CHECK(run.exit_code == 0);
    const auto j = nlohmann::json::parse(run.out);
    CHECK(j["selected"] == 2);
    CHECK(j["settled"]["succeeded"] == 2);
    REQUIRE(j["payments"].size() == 2);
    for (const auto& e : j["payments"]) {
        CHECK(e["kind"] == "refund");
        CHECK(e["payment_id"] == r.payment_id);
        CHECK(e["state"] == "succeeded");
    }
    for (const auto& id : r.refunds) {
        INFO(id);
        CHECK(r.column(id, "state") == "succeeded");
        CHECK(r.column(id, "provider_reference") == r.provider_refund_of(id));
        CHECK(r.events(id, "refund.succeeded") == 1);
        CHECK(r.executions(id) == 1);
    }
    CHECK(r.refunded_eur() == 1000);
    CHECK(w.value("SELECT refund_held_minor::text FROM payments WHERE payment_id = $1::uuid",
                  r.payment_id) == "1000");
    // Nothing left with the code: said so.
    const Run again = w.payrecon(selection);
    CHECK(contains(again.out, "no payment(s) or refund(s) of " + w.config.name));
}
