// A refund's late reversal through the real `payrecon nightly` (issue 31): the provider fails a
// refund it had reported succeeded; its refund.failed event, checked with the provider's lookup,
// makes the refund failed, gives its amount back to the payment, sends refund.failed to the
// merchant -- delivered once by the real `payrecon relay` to the merchant's endpoint, signed, and
// the same event read from GET /v1/events -- and makes nightly exit 3 naming the refund --
// counted from our tables, the fake's ledger and what the merchant's receiver got.

#include "services/events.hpp"
#include "services/refunds.hpp"
#include "tests/support/operated.hpp"
#include "tests/support/receiver.hpp"
#include "tests/support/stripe_webhooks.hpp"

#include <catch2/catch.hpp>
#include <fstream>
#include <sys/stat.h>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// The received requests whose event is of `type` about refund `refund_id`.
std::vector<Received> received_of(const Receiver& rx, const std::string& type,
                                  const std::string& refund_id) {
    std::vector<Received> out;
    for (const auto& r : rx.received()) {
        const auto body = nlohmann::json::parse(r.body);
        if (body["type"] == type && body["data"].value("refund_id", "") == refund_id) {
            out.push_back(r);
        }
    }
    return out;
}

} // namespace

TEST_CASE("refund reversal: nightly reverses a refund the provider failed after success, gives "
          "its amount back, delivers refund.failed once, and exits 3 naming it",
          "[cli][db][refunds][nightly][events_out]") {
    MigratedScratch scratch; // nightly and the relay read every tenant: a database of its own
    Operated w(scratch.url());
    // The merchant's endpoint for its refund events, on loopback (allowed for the test), and the
    // key its signing secret is sealed under.
    const std::filesystem::path key_file = w.dir.path() / "endpoint.key";
    std::ofstream(key_file) << to_hex(random_bytes(32)) << "\n";
    ::chmod(key_file.c_str(), 0600);
    const Env events_env{{"PAYRECON_ENDPOINT_KEY_FILE", key_file.string()},
                         {"PAYRECON_ENDPOINT_ALLOWED_NETWORKS", "127.0.0.0/8,::1"}};
    Receiver rx(31);
    const Run added = w.payrecon({"endpoint", "add", "--tenant", w.tenant.name, "--url", rx.url(),
                                  "--events", "refund.*", "--json"},
                                 events_env);
    INFO(added.all());
    REQUIRE(added.exit_code == 0);
    const std::string secret = nlohmann::json::parse(added.out)["signing_secret"];
    const auto relay = [&] {
        const Run r = w.payrecon({"relay", "--once"}, events_env);
        INFO(r.all());
        REQUIRE(r.exit_code == 0);
    };

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

    // Clean before: nothing needs an operator. The merchant was told of the refund and its
    // success, and of no failure.
    CHECK(w.payrecon({"nightly"}).exit_code == 0);
    relay();
    CHECK(received_of(rx, "refund.created", refund_id).size() == 1);
    CHECK(received_of(rx, "refund.succeeded", refund_id).size() == 1);
    CHECK(received_of(rx, "refund.failed", refund_id).empty());
    const std::size_t before = rx.count();

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

    // Delivered to the merchant's endpoint by the relay: refund.failed once, about this refund,
    // signed with the endpoint's secret, under the outbox event's ID -- and nothing else new.
    relay();
    const auto failed_sent = received_of(rx, "refund.failed", refund_id);
    REQUIRE(failed_sent.size() == 1);
    CHECK(rx.count() == before + 1);
    const Received& told = failed_sent[0];
    CHECK(told.status == 200);
    CHECK(signed_by(told, secret));
    CHECK(told.content_type == "application/json");
    CHECK(told.id == w.value("SELECT event_id::text FROM outbox WHERE event_type = "
                             "'refund.failed' AND payload->>'refund_id' = $1",
                             refund_id));
    const auto told_body = nlohmann::json::parse(told.body);
    CHECK(told_body["data"]["payment_id"] == payment_id);
    CHECK(told_body["data"]["state"] == "failed");
    CHECK(told_body["data"]["failure_reason"] == refund_column("failure_reason"));
    CHECK(told_body["data"]["amount"] == 1500);
    CHECK(w.count("event_deliveries", "state = 'delivered'") == 3);
    CHECK(w.count("event_deliveries", "state <> 'delivered'") == 0);
    // The same event, the same body, for a merchant that pulls: GET /v1/events.
    const auto page = events_page(*w.db, w.tenant.tenant_id, "limit=1000");
    REQUIRE(page);
    const auto pulled_page = nlohmann::json::parse(*page); // not a temporary the loop outlives
    std::vector<nlohmann::json> pulled;
    for (const auto& e : pulled_page["data"]) {
        if (e["type"] == "refund.failed") {
            pulled.push_back(e);
        }
    }
    REQUIRE(pulled.size() == 1);
    CHECK(pulled[0] == told_body);

    // Said once: the next run has nothing new to say about it, nor the relay to deliver.
    CHECK(w.payrecon({"nightly"}).exit_code == 0);
    relay();
    CHECK(received_of(rx, "refund.failed", refund_id).size() == 1);
    CHECK(rx.count() == before + 1);
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
