// A refund's late reversal through the real `payrecon nightly` (issue 31): the provider fails a
// refund it had reported succeeded; its refund.failed event, checked with the provider's lookup,
// makes the refund failed, gives its amount back to the payment, sends refund.failed to the
// merchant, and makes nightly exit 3 naming the refund -- counted from our tables and the fake's.

#include "services/refunds.hpp"
#include "tests/support/operated.hpp"
#include "tests/support/stripe_webhooks.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;
using namespace payrecon::testing;

TEST_CASE("refund reversal: nightly reverses a refund the provider failed after success, gives "
          "its amount back, and exits 3 naming it",
          "[cli][db][refunds][nightly]") {
    MigratedScratch scratch; // nightly reads every tenant: a database of this test's own
    Operated w(scratch.url());
    const std::string ref = w.payments(1)[0];
    auto provider = providers::create_provider(w.config);
    engine::ExecutorOptions o;
    o.worker_id = "reversal-test";
    o.lease = std::chrono::seconds(60);
    engine::Executor ex(*w.db, {provider.get()}, o);
    REQUIRE(ex.run_once() == 1);
    REQUIRE(w.state_of(ref) == "succeeded");
    const std::string payment_id = w.payment_id_of(ref);

    RefundService refunds(*w.db, test_keys());
    const auto accepted = refunds.create_refund(w.writer.principal, payment_id, unique_name("rk"),
                                                R"({"amount": 1500})", "");
    REQUIRE(accepted.status == 202);
    const std::string refund_id = nlohmann::json::parse(accepted.body)["id"];
    REQUIRE(ex.run_once() == 1);
    const auto refund_column = [&](const std::string& name) {
        return w.value("SELECT coalesce(" + name +
                           "::text, '') FROM operations WHERE id = $1::uuid",
                       refund_id);
    };
    REQUIRE(refund_column("state") == "succeeded");
    const std::string op = refund_column("operation_id");

    // Clean before: nothing needs an operator.
    CHECK(w.payrecon({"nightly"}).exit_code == 0);

    w.fake->seed_refund_reversed({op, "lost_or_stolen_card"});
    const nlohmann::json failed = {{"id", refund_column("provider_reference")},
                                   {"object", "refund"},
                                   {"amount", 1500},
                                   {"currency", "eur"},
                                   {"status", "failed"},
                                   {"failure_reason", "lost_or_stolen_card"},
                                   {"payment_intent", w.column(ref, "provider_reference")},
                                   {"metadata", {{"operation_id", op}}}};
    REQUIRE(deliver_stripe(*w.db, w.config.name, stripe_event("refund.failed", failed)).status ==
            WebhookVerdict::Status::verified);

    const Run r = w.payrecon({"nightly"});
    INFO(r.all());
    CHECK(r.exit_code == 3);
    CHECK(r.out.find("REVERSED") != std::string::npos);
    CHECK(r.out.find(refund_id) != std::string::npos);
    CHECK(refund_column("state") == "failed");
    CHECK(w.column(ref, "refund_held_minor") == "0");
    CHECK(w.count("outbox", "event_type = 'refund.failed' AND payload->>'refund_id' = '" +
                                refund_id + "'") == 1);
    CHECK(w.count("audit_log", "action = 'refund.reversed' AND subject_id = '" + refund_id + "'") ==
          1);
    const auto ledger = w.fake->ledger();
    CHECK(ledger["refunded"]["eur"].get<long long>() == 0);

    // Said once: the next run has nothing new to say about it.
    CHECK(w.payrecon({"nightly"}).exit_code == 0);
    // And the refund shows why.
    const Run shown = w.payrecon({"refunds", "show", refund_id});
    INFO(shown.all());
    CHECK(shown.exit_code == 0);
    CHECK(shown.out.find("failed") != std::string::npos);
    CHECK(shown.out.find("refund.failed") != std::string::npos);
    CHECK(shown.out.find("reversed") != std::string::npos);
    const Run json = w.payrecon({"refunds", "show", refund_id, "--json"});
    CHECK(!nlohmann::json::parse(json.out)["reversed_at"].is_null());
}
