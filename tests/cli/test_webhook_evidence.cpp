// Provider webhooks as evidence (issue 16 item 4), through the real `payrecon reconcile`: a
// verified Stripe event stored as serve stores it (services/webhooks with Stripe's own verifier)
// settles an unknown payment without any lookup; another amount sends it to review; a pending
// event settles nothing; a redelivered event is applied once.

#include "core/encoding.hpp"
#include "core/fingerprint.hpp"
#include "providers/adyen/adapter.hpp"
#include "providers/stripe/adapter.hpp"
#include "services/webhooks.hpp"
#include "tests/api/serve_process.hpp"
#include "tests/support/operated.hpp"
#include "tests/support/stripe_webhooks.hpp"

#include <catch2/catch.hpp>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <pqxx/pqxx>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// Stripe's event about the PaymentIntent of `ref` at the fake (its ID, our operation ID), as
// Stripe would send it.
std::string event_body(Operated& w, const std::string& ref, const std::string& event_id,
                       const std::string& type, const std::string& status, long long amount) {
    const std::string pi = w.intent_of(ref);
    return nlohmann::json{{"id", event_id},
                          {"object", "event"},
                          {"type", type},
                          {"created", std::time(nullptr)},
                          {"data",
                           {{"object",
                             {{"id", pi},
                              {"object", "payment_intent"},
                              {"amount", amount},
                              {"currency", "eur"},
                              {"status", status},
                              {"metadata", {{"operation_id", w.op_of(ref)}}}}}}}}
        .dump();
}

// Receives `body` as serve does: Stripe's verifier with the account's secret, then the store.
WebhookReceipt deliver(Operated& w, const std::string& body) {
    return deliver_stripe(*w.db, w.config.name, body);
}

} // namespace

TEST_CASE("webhook evidence: a verified payment_intent.succeeded settles an unknown payment with "
          "no lookup, once, audited with the event",
          "[cli][db][reconcile][webhooks]") {
    Operated w;
    const std::string ref = w.unknown_payment(fake::Fault::execute_then_fin);
    const std::string body =
        event_body(w, ref, unique_name("evt"), "payment_intent.succeeded", "succeeded", 2500);
    REQUIRE(deliver(w, body).status == WebhookVerdict::Status::verified);
    REQUIRE(deliver(w, body).new_events == 0); // Stripe redelivers until it sees a 2xx

    const Run r = w.payrecon({"reconcile"});
    INFO(r.all());
    CHECK(r.exit_code == 0);
    CHECK(w.state_of(ref) == "succeeded");
    CHECK(w.lookups(ref) == 0); // the event was the evidence: nobody asked the provider
    CHECK(w.executions(ref) == 1);
    CHECK(!w.column(ref, "provider_reference").empty());
    CHECK(w.events(ref, "event_type = 'payment.succeeded'") == 1);
    CHECK(w.audits(ref, "action = 'payment.reconciled' AND detail->>'evidence' = 'webhook' AND "
                        "detail->>'event_key' LIKE 'evt%'") == 1);
    CHECK(w.count("provider_events", "payment_id = '" + w.payment_id_of(ref) +
                                         "'::uuid AND applied_at IS NOT NULL AND applied_result = "
                                         "'adopt_succeeded' AND deliveries = 2") == 1);
    // Applied once: a second run finds nothing to do.
    CHECK(w.payrecon({"reconcile"}).exit_code == 0);
    CHECK(w.events(ref, "event_type = 'payment.succeeded'") == 1);
    CHECK(w.lookups(ref) == 0);

    // Events that come after the payment settled change nothing: one that agrees is marked
    // consistent, one that contradicts (the provider says failed) is marked so for operators.
    REQUIRE(deliver(w, event_body(w, ref, unique_name("evt"), "payment_intent.succeeded",
                                  "succeeded", 2500))
                .new_events == 1);
    REQUIRE(deliver(w, event_body(w, ref, unique_name("evt"), "payment_intent.canceled", "canceled",
                                  2500))
                .new_events == 1);
    CHECK(w.payrecon({"reconcile"}).exit_code == 0);
    CHECK(w.state_of(ref) == "succeeded");
    const std::string mine = "payment_id = '" + w.payment_id_of(ref) + "'::uuid AND ";
    CHECK(w.count("provider_events", mine + "applied_result = 'consistent'") == 1);
    CHECK(w.count("provider_events", mine + "applied_result = 'contradicts'") == 1);
    CHECK(w.events(ref) == 3); // created, unknown, succeeded: nothing after

    // payments show lists them, with what became of each.
    const Run shown = w.payrecon({"payments", "show", w.payment_id_of(ref)});
    CHECK(shown.out.find("Provider events (3)") != std::string::npos);
    CHECK(shown.out.find("adopt_succeeded") != std::string::npos);
    CHECK(shown.out.find("contradicts") != std::string::npos);
    const Run json = w.payrecon({"payments", "show", w.payment_id_of(ref), "--json"});
    const auto j = nlohmann::json::parse(json.out);
    REQUIRE(j["provider_events"].size() == 3);
    CHECK(j["provider_events"][0]["deliveries"] == 2);
    CHECK(j["provider_events"][0]["applied_result"] == "adopt_succeeded");
}

TEST_CASE("webhook evidence: a running worker settles an unknown payment from its event at once",
          "[cli][db][worker][webhooks]") {
    Operated w;
    const std::string ref = w.unknown_payment(fake::Fault::execute_then_fin);
    REQUIRE(deliver(w, event_body(w, ref, unique_name("evt"), "payment_intent.succeeded",
                                  "succeeded", 2500))
                .status == WebhookVerdict::Status::verified);
    const Run r = w.payrecon({"worker", "--once"});
    INFO(r.all());
    CHECK(r.exit_code == 0);
    CHECK(w.state_of(ref) == "succeeded");
    CHECK(r.out.find("\"event\":\"webhook_evidence_applied\"") != std::string::npos);
    CHECK(w.lookups(ref) == 0);
    CHECK(w.executions(ref) == 1);
}

TEST_CASE("webhook evidence: a failed event fails the payment, another amount goes to review, and "
          "a pending one settles nothing",
          "[cli][db][reconcile][webhooks]") {
    Operated w;
    const auto refs = w.unknown_payments(3, fake::Fault::execute_then_fin);
    // The lookup would find each charged: take it away, so only the events can settle them.
    w.write_config({{"capabilities", {{"lookup", false}}}});
    REQUIRE(deliver(w, event_body(w, refs[0], unique_name("evt"), "payment_intent.payment_failed",
                                  "requires_payment_method", 2500))
                .status == WebhookVerdict::Status::verified);
    REQUIRE(deliver(w, event_body(w, refs[1], unique_name("evt"), "payment_intent.succeeded",
                                  "succeeded", 880))
                .status == WebhookVerdict::Status::verified);
    REQUIRE(deliver(w, event_body(w, refs[2], unique_name("evt"), "payment_intent.processing",
                                  "processing", 2500))
                .status == WebhookVerdict::Status::verified);

    const Run r = w.payrecon({"reconcile"});
    INFO(r.all());
    CHECK(r.exit_code == 3); // the mismatch and the one with no lookup are in review
    CHECK(w.state_of(refs[0]) == "failed");
    CHECK(w.state_of(refs[1]) == "needs_review");
    CHECK(w.column(refs[1], "review_code") == "remote_mismatch");
    CHECK(w.column(refs[1], "review_reason").find("8.80 EUR; ours is 25.00 EUR") !=
          std::string::npos);
    // The processing event proved nothing: the payment went the way it goes without one.
    CHECK(w.state_of(refs[2]) == "needs_review");
    CHECK(w.column(refs[2], "review_code") == "no_lookup");
    for (const auto& ref : refs) {
        CHECK(w.lookups(ref, "status <> 'not_asked'") == 0);
        CHECK(w.executions(ref) == 1);
    }
}

TEST_CASE("webhook evidence: an Adyen payment whose answer was lost is settled by its "
          "AUTHORISATION notification instead of going to a human",
          "[cli][db][reconcile][webhooks][adyen]") {
    // Adyen has no status lookup: without the notification this payment goes to review no_lookup
    // (the second one shows it), as every Adyen payment with a lost answer did.
    Operated w;
    const std::string adyen = "ady" + to_hex(random_bytes(6));
    const std::string key_hex = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";
    nlohmann::json config = nlohmann::json::parse(std::ifstream(w.config_file));
    config["providers"][adyen] = {{"kind", "adyen"},
                                  {"base_url", "http://127.0.0.1:9"}, // never called
                                  {"api_key_env", "PAYRECON_TEST_ADYEN_KEY"},
                                  {"merchant_account", "AcmeShopECOM"},
                                  {"return_url", "https://shop.example.com/return"}};
    std::ofstream(w.config_file) << config.dump(2);
    const Env env{{"PAYRECON_TEST_ADYEN_KEY", "AQE_test_key_for_the_evidence_test"}};

    IntakeService intake(*w.db, test_keys());
    std::vector<std::string> refs;
    for (int i = 0; i < 2; ++i) {
        const std::string ref = unique_name("ady");
        REQUIRE(
            intake
                .create_payment(w.writer.principal, "k-" + ref,
                                R"({"amount": 2500, "currency": "EUR", "merchant_reference": ")" +
                                    ref + R"(", "provider": ")" + adyen +
                                    R"(", "payment_method": "pm_card_visa"})",
                                "")
                .status == 202);
        // Sent, and the connection hung after Adyen executed it: unknown (as the executor leaves
        // such a payment; the Adyen fake that plays this through the worker comes with item 6).
        w.exec("UPDATE payments SET state = 'unknown', attempt_count = 1, first_attempt_at = "
               "now(), last_attempt_at = now(), generation = generation + 1 "
               "WHERE merchant_reference = $1",
               ref);
        refs.push_back(ref);
    }
    nlohmann::json item = {{"additionalData", nlohmann::json::object()},
                           {"amount", {{"currency", "EUR"}, {"value", 2500}}},
                           {"eventCode", "AUTHORISATION"},
                           {"merchantAccountCode", "AcmeShopECOM"},
                           {"merchantReference", w.op_of(refs[0])},
                           {"originalReference", ""},
                           {"pspReference", "QFQTPCQ8HXSKGK82"},
                           {"success", "true"}};
    const std::string signed_fields =
        "QFQTPCQ8HXSKGK82::AcmeShopECOM:" + w.op_of(refs[0]) + ":2500:EUR:AUTHORISATION:true";
    item["additionalData"]["hmacSignature"] =
        base64(hmac_sha256(*from_hex(key_hex), signed_fields));
    const std::string body =
        nlohmann::json{
            {"live", "false"},
            {"notificationItems", nlohmann::json::array({{{"NotificationRequestItem", item}}})}}
            .dump();
    WebhookRequest request;
    request.body = body;
    request.received_at = std::chrono::system_clock::now();
    const auto verifier = providers::adyen::webhook_verifier({Secret(key_hex)});
    const WebhookReceipt receipt = receive_webhook(*w.db, adyen, *verifier, request);
    REQUIRE(receipt.status == WebhookVerdict::Status::verified);
    REQUIRE(receipt.unmatched == 0);

    const Run r = w.payrecon({"reconcile"}, env);
    INFO(r.all());
    CHECK(r.exit_code == 3); // the one without a notification is in review
    CHECK(w.state_of(refs[0]) == "succeeded");
    CHECK(w.column(refs[0], "provider_reference") == "QFQTPCQ8HXSKGK82");
    CHECK(w.column(refs[0], "review_code").empty());
    CHECK(w.state_of(refs[1]) == "needs_review");
    CHECK(w.column(refs[1], "review_code") == "no_lookup");
}

TEST_CASE("webhook evidence: an event contradicting a settled payment waits in the review queue "
          "until an operator acknowledges it, and the payment keeps its state",
          "[cli][db][reconcile][webhooks][review]") {
    Operated w;
    // A payment the worker settled as succeeded, and the provider's event saying it was canceled.
    const std::string ref = w.unknown_payment(fake::Fault::execute_then_fin);
    REQUIRE(deliver(w, event_body(w, ref, unique_name("evt"), "payment_intent.succeeded",
                                  "succeeded", 2500))
                .new_events == 1);
    REQUIRE(w.payrecon({"reconcile"}).exit_code == 0);
    REQUIRE(w.state_of(ref) == "succeeded");
    const std::string contradicting = unique_name("evt");
    REQUIRE(
        deliver(w, event_body(w, ref, contradicting, "payment_intent.canceled", "canceled", 2500))
            .new_events == 1);
    // An event about a payment that is not ours is kept and listed as unmatched.
    const std::string stranger = unique_name("evt");
    REQUIRE(deliver(w, nlohmann::json{{"id", stranger},
                                      {"object", "event"},
                                      {"type", "payment_intent.succeeded"},
                                      {"created", std::time(nullptr)},
                                      {"data",
                                       {{"object",
                                         {{"id", "pi_not_ours"},
                                          {"object", "payment_intent"},
                                          {"amount", 700},
                                          {"currency", "eur"},
                                          {"status", "succeeded"},
                                          {"metadata", {{"operation_id", "pr_not_ours"}}}}}}}}
                           .dump())
                .new_events == 1);

    const Run nightly = w.payrecon({"nightly", "--json"});
    INFO(nightly.all());
    CHECK(nightly.exit_code == 3);
    CHECK(w.state_of(ref) == "succeeded");
    // Other tests' providers share the database: this test's provider is its own.
    const std::string provider = w.config.name;
    const auto contradictions_of = [&](const nlohmann::json& report) {
        for (const auto& c : report["contradicting_events"]) {
            if (c["provider"] == provider) {
                return c["events"].get<long long>();
            }
        }
        return 0LL;
    };
    CHECK(contradictions_of(nlohmann::json::parse(nightly.out)) == 1);
    const Run review = w.payrecon({"review", "list", "--provider", provider});
    CHECK(review.out.find("1 provider event(s) contradict a settled payment") != std::string::npos);

    const Run listed =
        w.payrecon({"events", "list", "--contradicting", "--provider", provider, "--json"});
    INFO(listed.all());
    const auto events = nlohmann::json::parse(listed.out);
    REQUIRE(events.size() == 1);
    CHECK(events[0]["event_key"] == contradicting);
    CHECK(events[0]["outcome"] == "failed");
    CHECK(events[0]["payment_state"] == "succeeded");
    CHECK(events[0]["awaiting_acknowledgement"] == true);
    const std::string id = std::to_string(events[0]["event_id"].get<long long>());
    const auto unmatched = nlohmann::json::parse(
        w.payrecon({"events", "list", "--unmatched", "--provider", provider, "--json"}).out);
    REQUIRE(unmatched.size() == 1);
    CHECK(unmatched[0]["event_key"] == stranger);
    CHECK(unmatched[0]["payment_id"].is_null());
    const auto mine = nlohmann::json::parse(
        w.payrecon({"events", "list", "--payment", w.payment_id_of(ref), "--json"}).out);
    CHECK(mine.size() == 2);
    // A page that is not all of them says so.
    const Run newest =
        w.payrecon({"events", "list", "--payment", w.payment_id_of(ref), "--limit", "1"});
    CHECK(newest.out.find("showing the newest 1 of 2 matching events; --limit 2 shows them all") !=
          std::string::npos);
    const Run all = w.payrecon({"events", "list", "--payment", w.payment_id_of(ref)});
    CHECK(all.out.find("showing the newest") == std::string::npos);

    const Run shown = w.payrecon({"events", "show", id});
    INFO(shown.all());
    CHECK(shown.out.find("CONTRADICTS the payment") != std::string::npos);
    CHECK(shown.out.find("payrecon events acknowledge " + id) != std::string::npos);
    CHECK(shown.out.find("\"type\":\"payment_intent.canceled\"") != std::string::npos); // the body

    // Refusals: no note, an event that contradicts nothing, an unknown ID.
    CHECK(w.payrecon({"events", "acknowledge", id, "--note", "  "}).exit_code == 2);
    const std::string agreeing =
        std::to_string(mine[0]["event_id"].get<long long>()); // the succeeded one, applied
    CHECK(w.payrecon({"events", "acknowledge", agreeing, "--note", "x"}).exit_code == 7);
    CHECK(w.payrecon({"events", "acknowledge", "999999999", "--note", "x"}).exit_code == 7);

    const Run ack = w.payrecon({"--operator", "alice", "events", "acknowledge", id, "--note",
                                "checked the dashboard: charged; the cancel event was for a "
                                "second attempt"});
    INFO(ack.all());
    CHECK(ack.exit_code == 0);
    CHECK(ack.out.find("stays succeeded") != std::string::npos);
    CHECK(w.payrecon({"events", "acknowledge", id, "--note", "again"}).exit_code == 7);
    CHECK(w.state_of(ref) == "succeeded");
    CHECK(w.audits(ref, "action = 'provider_event.acknowledged' AND actor = 'alice' AND "
                        "detail->>'event_key' = '" +
                            contradicting + "'") == 1);
    CHECK(
        nlohmann::json::parse(
            w.payrecon({"events", "list", "--contradicting", "--provider", provider, "--json"}).out)
            .empty());
    CHECK(contradictions_of(nlohmann::json::parse(w.payrecon({"nightly", "--json"}).out)) == 0);
}

namespace {

const std::string k_adyen_hmac = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";

// This test's Operated with an Adyen account at the same fake (its Adyen dialect), `payrecon
// serve` receiving that account's notifications, and the fake sending them there with `faults`.
struct AdyenWorld {
    Operated w;
    std::string adyen = "ady" + to_hex(random_bytes(6));
    SecretFile secret;
    std::unique_ptr<ServeProcess> serve;

    explicit AdyenWorld(fake::WebhookOptions faults = {}) {
        nlohmann::json config = nlohmann::json::parse(std::ifstream(w.config_file));
        config["providers"][adyen] = {{"kind", "adyen"},
                                      {"base_url", w.config.base_url},
                                      {"api_key_env", k_key_env},
                                      {"merchant_account", "AcmeShopECOM"},
                                      {"return_url", "https://shop.example.com/return"},
                                      {"connect_timeout_ms", 500},
                                      {"timeout_ms", 1000},
                                      {"settle_delay_s", 0},
                                      {"webhook_secret_env", "PAYRECON_TEST_ADYEN_HMAC"}};
        std::ofstream(w.config_file) << config.dump(2);
        serve = std::make_unique<ServeProcess>(
            secret, 4,
            std::vector<std::string>{
                "PAYRECON_CONFIG=" + w.config_file.string(),
                "PAYRECON_TEST_ADYEN_HMAC=" + k_adyen_hmac,
                std::string(k_key_env) + "=" +
                    std::get<providers::ApiKey>(w.config.credentials).value.reveal()});
        faults.url = "http://127.0.0.1:" + std::to_string(serve->port()) + "/v1/providers/" +
                     adyen + "/webhooks";
        faults.secret = k_adyen_hmac;
        w.fake->set_webhooks(faults);
    }

    // Payments of 25.00 EUR at the Adyen account (`method` declines with pm_card_chargeDeclined).
    std::vector<std::string> payments(int n, const std::string& method = "pm_card_visa") {
        IntakeService intake(*w.db, test_keys());
        std::vector<std::string> refs;
        for (int i = 0; i < n; ++i) {
            const std::string ref = unique_name("ady");
            REQUIRE(intake
                        .create_payment(w.writer.principal, "k-" + ref,
                                        R"({"amount": 2500, "currency": "EUR", )"
                                        R"("merchant_reference": ")" +
                                            ref + R"(", "provider": ")" + adyen +
                                            R"(", "payment_method": ")" + method + R"("})",
                                        "")
                        .status == 202);
            refs.push_back(ref);
        }
        return refs;
    }
    // The next `n` creates at the fake execute and then hang past the adapter's timeout.
    void hang_next(int n) {
        auto f = w.fake->faults();
        f.next.assign(static_cast<std::size_t>(n), fake::Fault::execute_then_hang);
        f.hang = std::chrono::milliseconds(1500);
        w.fake->set_faults(f);
    }
    long long in_review() { return w.count("payments", "state = 'needs_review'"); }
};

} // namespace

TEST_CASE("webhook evidence: Adyen end to end -- executed, the connection hung, unknown, and its "
          "AUTHORISATION notification from the provider settles it, success=false too",
          "[cli][db][worker][webhooks][adyen]") {
    // The fake sends each notification twice: stored once, applied once.
    fake::WebhookOptions faults;
    faults.duplicate_rate = 1.0;
    AdyenWorld a(faults);
    const std::string paid = a.payments(1)[0];
    const std::string refused = a.payments(1, "pm_card_chargeDeclined")[0];
    a.hang_next(2);
    const Run sent = a.w.payrecon({"worker", "--once", "--provider", a.adyen},
                                  {{"PAYRECON_TEST_ADYEN_HMAC", k_adyen_hmac}});
    INFO(sent.all());
    CHECK(sent.exit_code == 0);
    // The notifications may arrive before the worker recorded unknown: kept, applied after.
    REQUIRE(a.w.fake->wait_webhooks_idle(std::chrono::seconds(20)));
    const auto ledger = a.w.fake->webhook_ledger();
    INFO(ledger.dump());
    CHECK(ledger["notifications"] == 2);
    CHECK(ledger["delivered"] == 4);
    // Unknown, or already settled from its notification: a worker thread that executed one of
    // the two loops once more, and its evidence pass applies what arrived meanwhile (the
    // reconciler below then finds nothing left to do for it). Never anything else.
    const std::map<std::string, std::string> settled{{paid, "succeeded"}, {refused, "failed"}};
    for (const auto& [ref, outcome] : settled) {
        const std::string state = a.w.state_of(ref);
        CHECK((state == "unknown" || state == outcome));
        CHECK(a.w.count("provider_events", "payment_id = '" + a.w.payment_id_of(ref) +
                                               "'::uuid AND deliveries = 2") == 1);
    }

    const Run r = a.w.payrecon({"reconcile", "--provider", a.adyen});
    INFO(r.all());
    CHECK(r.exit_code == 0);
    CHECK(a.w.state_of(paid) == "succeeded");
    CHECK(a.w.state_of(refused) == "failed");
    CHECK(a.w.executions(paid) == 1);
    CHECK(a.w.executions(refused) == 1);
    CHECK(a.w.deliveries(paid) == 1); // never sent again
    CHECK(a.in_review() == 0);
    CHECK(!a.w.column(paid, "provider_reference").empty());
    CHECK(a.w.audits(paid, "action = 'payment.reconciled' AND detail->>'evidence' = 'webhook'") ==
          1);
    a.serve->terminate();
}

TEST_CASE("webhook evidence: Adyen notifications badly signed or dropped settle nothing -- the "
          "payment goes to a human as before",
          "[cli][db][worker][webhooks][adyen]") {
    fake::WebhookOptions faults;
    faults.bad_signature_rate = 1.0;
    AdyenWorld a(faults);
    const std::string forged = a.payments(1)[0];
    a.hang_next(1);
    REQUIRE(a.w.payrecon({"worker", "--once", "--provider", a.adyen}).exit_code == 0);
    REQUIRE(a.w.fake->wait_webhooks_idle(std::chrono::seconds(20)));
    CHECK(a.w.fake->webhook_ledger()["refused"] == 1); // 401 from serve, not sent again
    CHECK(a.w.count("provider_events", "payment_id = '" + a.w.payment_id_of(forged) + "'::uuid") ==
          0);

    fake::WebhookOptions dropped = faults;
    dropped.bad_signature_rate = 0;
    dropped.drop_rate = 1.0;
    dropped.url = "http://127.0.0.1:" + std::to_string(a.serve->port()) + "/v1/providers/" +
                  a.adyen + "/webhooks";
    dropped.secret = k_adyen_hmac;
    a.w.fake->set_webhooks(dropped);
    const std::string lost = a.payments(1)[0];
    a.hang_next(1);
    REQUIRE(a.w.payrecon({"worker", "--once", "--provider", a.adyen}).exit_code == 0);
    REQUIRE(a.w.fake->wait_webhooks_idle(std::chrono::seconds(20)));
    CHECK(a.w.fake->webhook_ledger()["dropped"] == 1);

    // No notification is no evidence: Adyen cannot be asked, so both go to review, no re-send.
    const Run r = a.w.payrecon({"reconcile", "--provider", a.adyen});
    INFO(r.all());
    CHECK(r.exit_code == 3);
    for (const auto& ref : {forged, lost}) {
        CHECK(a.w.state_of(ref) == "needs_review");
        CHECK(a.w.column(ref, "review_code") == "no_lookup");
        CHECK(a.w.executions(ref) == 1);
        CHECK(a.w.deliveries(ref) == 1);
    }
    a.serve->terminate();
}

TEST_CASE("webhook evidence: 1,000 Adyen payments under every after-execute fault with the "
          "notifications dropped at 5%, duplicated at 10% and delayed: each charged at most "
          "once, and only a dropped notification leaves a payment to a human",
          "[cli][db][worker][webhooks][adyen][mixed]") {
    fake::WebhookOptions faults;
    faults.drop_rate = 0.05;
    faults.duplicate_rate = 0.10;
    faults.delay = std::chrono::milliseconds(50);
    faults.seed = 20261204;
    AdyenWorld a(faults);
    const int n = 1000;
    auto refs = a.payments(n * 9 / 10);
    const auto declined = a.payments(n / 10, "pm_card_chargeDeclined");
    refs.insert(refs.end(), declined.begin(), declined.end());
    auto f = a.w.fake->faults();
    f.seed = 1204;
    f.rates = {{fake::Fault::execute_then_fin, 0.2},
               {fake::Fault::execute_then_rst, 0.1},
               {fake::Fault::execute_then_partial, 0.05},
               {fake::Fault::http_500_after_execute, 0.1}};
    a.w.fake->set_faults(f);
    const Run sent =
        a.w.payrecon({"worker", "--once", "--concurrency", "16", "--provider", a.adyen});
    INFO(sent.all());
    REQUIRE(sent.exit_code == 0);
    REQUIRE(a.w.fake->wait_webhooks_idle(std::chrono::seconds(60)));
    // The worker applies notifications too, as they come: count what was ever unknown.
    const long long unknown = a.w.count("payment_attempts", "outcome = 'unknown'");
    const Run r = a.w.payrecon({"reconcile", "--provider", a.adyen});
    INFO(r.all());

    const auto ledger = a.w.fake->webhook_ledger();
    const auto provider = a.w.fake->ledger();
    long long charged_twice = 0;
    for (const auto& [op, count] : provider["executions"].items()) {
        charged_twice += count.get<int>() > 1;
    }
    const long long by_event =
        a.w.count("audit_log", "action = 'payment.reconciled' AND detail->>'evidence' = 'webhook'");
    const long long review = a.in_review();
    INFO("webhooks " << ledger.dump());
    // What the closing note reports: the share of unknown payments that still need a human.
    std::cout << "adyen mixed run: " << n << " payments, " << unknown << " unknown, " << by_event
              << " settled by their notification, " << review << " to a human ("
              << ledger["dropped"] << " notifications dropped, " << ledger["duplicated"]
              << " duplicated)\n";
    CHECK(charged_twice == 0);
    CHECK(unknown > 200); // the faults made many
    CHECK(a.w.count("payments", "state = 'unknown'") == 0);
    CHECK(by_event + review == unknown);
    // Every payment whose notification arrived is settled from it; only the dropped ones wait,
    // and a dropped notification of a payment the worker heard about changes nothing.
    CHECK(review <= ledger["dropped"].get<long long>());
    CHECK(a.w.count("payments", "state = 'needs_review' AND review_code <> 'no_lookup'") == 0);
    CHECK(ledger["badly_signed"] == 0);
    CHECK(ledger["given_up"] == 0);
    // Our books against the provider's: a succeeded payment is one the provider charged.
    long long succeeded = a.w.count("payments", "state = 'succeeded'");
    long long charged = 0;
    for (const auto& pi : provider["payment_intents"]) {
        charged += pi["status"] == "succeeded";
    }
    CHECK(succeeded <= charged);
    CHECK(succeeded + review >= charged);
    a.serve->terminate();
}

TEST_CASE("webhook evidence: Stripe's events from the provider, delivered three times and out of "
          "order, settle an unknown payment once and never move it backwards",
          "[cli][db][webhooks]") {
    Operated w;
    w.write_config({{"webhook_secret_env", "PAYRECON_TEST_STRIPE_WHSEC"}});
    SecretFile secret;
    ServeProcess serve(secret, 4,
                       {"PAYRECON_CONFIG=" + w.config_file.string(),
                        "PAYRECON_TEST_STRIPE_WHSEC=" + k_stripe_webhook_secret,
                        std::string(k_key_env) + "=" +
                            std::get<providers::ApiKey>(w.config.credentials).value.reveal()});
    fake::WebhookOptions faults;
    faults.url = "http://127.0.0.1:" + std::to_string(serve.port()) + "/v1/providers/" +
                 w.config.name + "/webhooks";
    faults.secret = k_stripe_webhook_secret;
    faults.duplicate_rate = 1.0;    // payment_intent.succeeded twice
    faults.out_of_order_rate = 1.0; // then payment_intent.processing, which came first at Stripe
    w.fake->set_webhooks(faults);
    const std::string ref = w.unknown_payment(fake::Fault::execute_then_fin);
    REQUIRE(w.fake->wait_webhooks_idle(std::chrono::seconds(20)));
    CHECK(w.fake->webhook_ledger()["delivered"] == 3);
    const std::string mine = "payment_id = '" + w.payment_id_of(ref) + "'::uuid";
    CHECK(w.count("provider_events", mine) == 2);
    CHECK(w.count("provider_events", mine + " AND outcome = 'succeeded' AND deliveries = 2") == 1);

    for (int run = 0; run < 2; ++run) {
        const Run r = w.payrecon({"reconcile"});
        INFO(r.all());
        CHECK(r.exit_code == 0);
        CHECK(w.state_of(ref) == "succeeded");
    }
    CHECK(w.lookups(ref) == 0); // before any lookup
    CHECK(w.executions(ref) == 1);
    CHECK(w.events(ref, "event_type = 'payment.succeeded'") == 1);
    CHECK(w.events(ref) == 3); // created, unknown, succeeded: the late processing moved nothing
    CHECK(w.count("provider_events", mine + " AND outcome = 'pending' AND applied_at IS NULL") ==
          1);
    serve.terminate();
}

TEST_CASE("events purge: provider events older than the retention go, audited with a count, and "
          "never the evidence of a payment not settled, an unacknowledged contradiction or an "
          "event not yet compared",
          "[cli][db][webhooks][purge][regression]") {
    // provider_events kept every raw body forever (issue 36 item 10). A database of its own: the
    // purge is global, and every count here is of the whole table.
    MigratedScratch scratch;
    Operated w(scratch.url());
    pqxx::connection c(scratch.url());
    const auto number = [&](const std::string& sql) {
        pqxx::nontransaction tx(c);
        return tx.exec1(sql)[0].as<long long>();
    };
    const auto exec = [&](const std::string& sql) {
        pqxx::nontransaction tx(c);
        tx.exec0(sql);
    };
    const auto events_of = [&](const std::string& ref, const std::string& where = "true") {
        return number("SELECT count(*) FROM provider_events WHERE payment_id = '" +
                      w.payment_id_of(ref) + "'::uuid AND (" + where + ")");
    };
    const auto refs = w.unknown_payments(4, fake::Fault::execute_then_fin);
    const std::string& unsettled = refs[0];
    const std::string& consistent = refs[1];
    const std::string& contradicted = refs[2];
    const std::string& acknowledged = refs[3];
    w.set_lookup_down(true); // `unsettled` stays unknown: only its event speaks of it

    // Still unknown: a pending event is all there is about it.
    REQUIRE(deliver(w, event_body(w, unsettled, unique_name("evt"), "payment_intent.processing",
                                  "processing", 2500))
                .new_events == 1);
    // Three settle from their events; then one agrees, two contradict (one of them acknowledged).
    std::map<std::string, std::string> adopted;
    for (const std::string& ref : {consistent, contradicted, acknowledged}) {
        adopted[ref] =
            event_body(w, ref, unique_name("evt"), "payment_intent.succeeded", "succeeded", 2500);
        REQUIRE(deliver(w, adopted[ref]).new_events == 1);
    }
    w.payrecon({"reconcile"});
    REQUIRE(deliver(w, event_body(w, consistent, unique_name("evt"), "payment_intent.succeeded",
                                  "succeeded", 2500))
                .new_events == 1);
    for (const std::string& ref : {contradicted, acknowledged}) {
        REQUIRE(deliver(w, event_body(w, ref, unique_name("evt"), "payment_intent.canceled",
                                      "canceled", 2500))
                    .new_events == 1);
    }
    w.payrecon({"reconcile"});
    REQUIRE(w.state_of(unsettled) == "unknown");
    for (const std::string& ref : {consistent, contradicted, acknowledged}) {
        REQUIRE(w.state_of(ref) == "succeeded");
    }
    REQUIRE(events_of(contradicted, "applied_result = 'contradicts'") == 1);
    const std::string contradiction = std::to_string(
        number("SELECT event_id FROM provider_events WHERE payment_id = '" +
               w.payment_id_of(acknowledged) + "'::uuid AND applied_result = 'contradicts'"));
    REQUIRE(w.payrecon({"events", "acknowledge", contradiction, "--note", "refunded by hand"})
                .exit_code == 0);
    // Received after the last comparison: not yet compared with its settled payment.
    REQUIRE(deliver(w, event_body(w, consistent, unique_name("evt"), "payment_intent.succeeded",
                                  "succeeded", 2500))
                .new_events == 1);
    REQUIRE(events_of(consistent, "applied_at IS NULL") == 1);
    // About a payment that is not ours.
    const auto not_ours = [&](const std::string& id) {
        return nlohmann::json{{"id", id},
                              {"object", "event"},
                              {"type", "payment_intent.succeeded"},
                              {"created", std::time(nullptr)},
                              {"data",
                               {{"object",
                                 {{"id", "pi_" + unique_name("other")},
                                  {"object", "payment_intent"},
                                  {"amount", 700},
                                  {"currency", "eur"},
                                  {"status", "succeeded"},
                                  {"metadata", {{"operation_id", unique_name("pr_other")}}}}}}}}
            .dump();
    };
    REQUIRE(deliver(w, not_ours(unique_name("evt"))).unmatched == 1);
    REQUIRE(number("SELECT count(*) FROM provider_events") == 9);

    // All of them 100 days old; then one more unmatched event, new, and one old event delivered
    // again today (the provider still sends it: it stays).
    exec("UPDATE provider_events SET received_at = now() - interval '100 days', "
         "last_received_at = now() - interval '100 days'");
    REQUIRE(deliver(w, not_ours(unique_name("evt"))).unmatched == 1);
    REQUIRE(deliver(w, adopted[acknowledged]).new_events == 0);
    REQUIRE(number("SELECT count(*) FROM provider_events") == 10);
    // What goes under the default 90 days: of `consistent` the adopted and the consistent event,
    // of `contradicted` the adopted one, of `acknowledged` the acknowledged contradiction, and
    // the old unmatched event.
    const auto counted = [](const Run& r) {
        INFO(r.all());
        REQUIRE(r.exit_code == 0);
        return nlohmann::json::parse(r.out);
    };
    const auto dry = counted(w.payrecon({"events", "purge", "--dry-run", "--json"}));
    CHECK(dry["events"] == 5);
    CHECK(dry["unmatched"] == 1);
    CHECK(dry["kept_unsettled"] == 1);
    CHECK(dry["kept_contradicting"] == 1);
    CHECK(dry["kept_unexamined"] == 1);
    CHECK(dry["retention_s"] == 90 * 24 * 3600);
    CHECK(dry["run_id"].is_null());
    CHECK(number("SELECT count(*) FROM provider_events") == 10); // a dry run deletes nothing
    CHECK(number("SELECT count(*) FROM audit_log WHERE action LIKE 'provider_events.%'") == 0);

    const auto purged = counted(w.payrecon({"events", "purge", "--json"}));
    CHECK(purged["events"] == 5);
    CHECK(purged["unmatched"] == 1);
    CHECK(purged["tenants"] == 1);
    CHECK(number("SELECT count(*) FROM provider_events") == 5);
    CHECK(events_of(unsettled) == 1);
    CHECK(events_of(consistent) == 1);
    CHECK(events_of(consistent, "applied_at IS NULL") == 1);
    CHECK(events_of(contradicted) == 1);
    CHECK(events_of(contradicted, "applied_result = 'contradicts'") == 1);
    CHECK(events_of(acknowledged) == 1);
    CHECK(events_of(acknowledged, "deliveries = 2 AND applied_result = 'adopt_succeeded'") == 1);
    CHECK(number("SELECT count(*) FROM provider_events WHERE payment_id IS NULL") == 1);
    CHECK(number("SELECT count(*) FROM provider_events WHERE payment_id IS NULL AND "
                 "received_at > now() - interval '1 day'") == 1);
    // Audited: one row for the tenant with its count, one for the run with the totals.
    const std::string run_id = purged["run_id"];
    CHECK(w.count("audit_log", "action = 'provider_events.purge' AND subject_id = '" + run_id +
                                   "' AND (detail->>'events')::int = 4 AND detail->>'retention_s' "
                                   "= '7776000'") == 1);
    CHECK(number("SELECT count(*) FROM audit_log WHERE action = 'provider_events.purge_run' AND "
                 "tenant_id = '00000000-0000-0000-0000-000000000000' AND subject_id = '" +
                 run_id +
                 "' AND (detail->>'events')::int = 5 AND (detail->>'unmatched')::int = 1 AND "
                 "(detail->>'kept_contradicting')::int = 1") == 1);
    // Nothing left to purge; the run is on record all the same.
    const auto again = counted(w.payrecon({"events", "purge", "--json"}));
    CHECK(again["events"] == 0);
    CHECK(number("SELECT count(*) FROM provider_events") == 5);
    CHECK(number("SELECT count(*) FROM audit_log WHERE action = 'provider_events.purge_run'") == 2);
    // Once acknowledged, the contradiction goes too.
    const std::string second =
        std::to_string(number("SELECT event_id FROM provider_events WHERE payment_id = '" +
                              w.payment_id_of(contradicted) + "'::uuid"));
    REQUIRE(
        w.payrecon({"events", "acknowledge", second, "--note", "customer refunded"}).exit_code ==
        0);
    CHECK(counted(w.payrecon({"events", "purge", "--json"}))["events"] == 1);
    CHECK(events_of(contradicted) == 0);

    // A retention under the minimum is refused, from the option and from the environment.
    const Run short_option = w.payrecon({"events", "purge", "--retention", "7d"});
    CHECK(short_option.exit_code == 2);
    CHECK(contains(short_option.err, "shorter than 31d"));
    const Run short_env =
        w.payrecon({"events", "purge", "--dry-run"}, {{"PAYRECON_PROVIDER_EVENT_RETENTION", "7d"}});
    CHECK(short_env.exit_code == 4);
    CHECK(number("SELECT count(*) FROM provider_events") == 4);
}
