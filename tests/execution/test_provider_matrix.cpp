// DESIGN section 12's execution rows for the providers added on the kit, Checkout.com and PayPal
// Orders v2: the real adapters over real HTTP on loopback against the fake provider speaking each
// one's dialect, the executor and the reconciler on a real PostgreSQL. Counts come from the fake's
// ledger: executions (E, charges made) and deliveries (D, create requests that reached it). The
// mixed run of every provider ends here too: 1,000 charges, then 600 refunds of them (issue 31).
//
// What differs between the two, and is tested here as the provider documents it:
// - Checkout.com saves only 2xx answers under Cko-Idempotency-Key: a request answered 500 after it
//   executed runs AGAIN if the same key comes back. The reconciler must find it by reference
//   instead; a blind re-send double-charges (shown against the fake, so the test can fail).
// - PayPal has no lookup by request ID: Transaction Search lags up to 3 h, and PayPal-Request-Id is
//   remembered 6 h. "Not found" means nothing before 3 h, allows a re-send between 3 h and the key
//   window's end (6 h less its 1 h margin), and sends the payment to review after that. Its OAuth2
//   access token expires: the adapter fetches a new one once, never sending the charge twice.
#include "core/fingerprint.hpp"
#include "core/reconcile_policy.hpp"
#include "engine/executor.hpp"
#include "engine/nightly.hpp"
#include "engine/reconciler.hpp"
#include "engine/worker.hpp"
#include "providers/registry.hpp"
#include "services/intake.hpp"
#include "services/refunds.hpp"
#include "services/webhooks.hpp"
#include "store/executor_store.hpp"
#include "store/reconcile_store.hpp"
#include "tests/execution/matrix.hpp"
#include "tests/execution/refunds.hpp"
#include "tests/support/wait.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <pqxx/pqxx>
#include <set>
#include <sstream>
#include <thread>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// PayPal's search lag, as the fake serves it for a PayPal world (DESIGN section 11).
constexpr std::chrono::seconds k_paypal_lag = std::chrono::hours(3);

fake::FaultConfig faults_for(const std::string& kind, std::vector<fake::Fault> first) {
    fake::FaultConfig f = next(std::move(first));
    if (kind == "paypal") {
        f.lookup_stale = k_paypal_lag;
    }
    return f;
}

// One payment of `kind`, its first send meeting `first` (and PayPal's search lagging 3 h).
struct Case : OnePayment {
    std::string kind;

    Case(const std::string& k, std::vector<fake::Fault> first, bool send = true)
        : OnePayment(k, faults_for(k, std::move(first)), send), kind(k) {}

    // Past the settle delay: Checkout.com's is 0 here, PayPal's its 3 h search lag.
    void settle() {
        if (kind == "paypal") {
            pass(k_paypal_lag + std::chrono::minutes(1));
        }
    }
};

} // namespace

TEST_CASE("provider matrix: a charge goes through once, with the operation ID as the key",
          "[execution][db][matrix]") {
    const std::string kind = GENERATE("checkout", "paypal");
    INFO(kind);
    Case c(kind, {});
    CHECK(c.state() == "succeeded");
    CHECK(c.executions() == 1);
    CHECK(c.deliveries() == 1);
    CHECK_FALSE(c.column("provider_reference").empty());
    CHECK(c.charged_eur() == 2500);
    CHECK(count_rows("outbox", c.w.tenant.tenant_id, "event_type = 'payment.succeeded'") == 1);
}

TEST_CASE("provider matrix: executed, then the connection hangs, FIN, RST, half a body or a 500: "
          "unknown, found by the lookup after the settle delay, succeeded, E=1 D=1, no re-send",
          "[execution][db][matrix][fault]") {
    const std::string kind = GENERATE("checkout", "paypal");
    const fake::Fault fault =
        GENERATE(fake::Fault::execute_then_hang, fake::Fault::execute_then_fin,
                 fake::Fault::execute_then_rst, fake::Fault::execute_then_partial,
                 fake::Fault::http_500_after_execute);
    INFO(kind << " " << fake::to_string(fault));
    Case c(kind, {fault});
    CHECK(c.state() == "unknown");
    CHECK(count_rows("payment_attempts", c.w.tenant.tenant_id,
                     "outcome = 'unknown' AND finished_at IS NOT NULL") == 1);
    CHECK(c.send() == 0); // an unknown payment is never sent again by a worker
    if (kind == "paypal") {
        CHECK(c.reconcile().empty()); // inside the 3 h search lag nobody asks
    }
    c.settle();
    const auto out = c.reconcile();
    REQUIRE(out.size() == 1);
    CHECK(out[0].lookup == LookupStatus::found);
    CHECK(out[0].decision.action == ReconcileAction::adopt_succeeded);
    CHECK(c.state() == "succeeded");
    CHECK_FALSE(c.column("provider_reference").empty());
    CHECK(c.send() == 0);
    CHECK(c.reconcile().empty());
    CHECK(c.executions() == 1);
    CHECK(c.deliveries() == 1);
    CHECK(c.charged_eur() == 2500);
}

TEST_CASE("provider matrix: the lookup stale through the settle window draws no 'not found' "
          "conclusion inside it, and finds the payment after it",
          "[execution][db][matrix][fault]") {
    const std::string kind = GENERATE("checkout", "paypal");
    INFO(kind);
    Case c(kind, {fake::Fault::execute_then_fin}, false);
    std::chrono::seconds window = k_paypal_lag;
    if (kind == "checkout") {
        // Checkout.com does not publish how soon a payment shows by reference: the configured
        // settle delay is the window, and the fake's index lags inside it.
        window = std::chrono::seconds(30);
        auto f = c.w.fake->faults();
        f.lookup_stale = std::chrono::seconds(20);
        c.w.fake->set_faults(f);
        c.w.config.settle_delay = window;
        c.provider = providers::create_provider(c.w.config);
    }
    REQUIRE(c.send() == 1);
    REQUIRE(c.state() == "unknown");
    CHECK(c.reconcile().empty()); // not due inside the window
    // An operator's recheck asks at once: "not found" inside the window proves nothing.
    const auto early = c.recheck();
    REQUIRE(early);
    CHECK(early->lookup == LookupStatus::not_found);
    CHECK(early->decision.action == ReconcileAction::check_later);
    CHECK(c.state() == "unknown");
    c.pass(window + std::chrono::seconds(60));
    const auto out = c.reconcile();
    INFO(c.w.provider_log.str());
    INFO(query_value("SELECT string_agg(detail || ' ' || coalesce(error_class,''), ' | ') FROM "
                     "payment_lookups WHERE tenant_id = $1::uuid",
                     c.w.tenant.tenant_id));
    REQUIRE(out.size() == 1);
    CHECK(out[0].decision.action == ReconcileAction::adopt_succeeded);
    CHECK(c.state() == "succeeded");
    CHECK(c.executions() == 1);
    CHECK(c.deliveries() == 1);
}

TEST_CASE("provider matrix: the lookup down: needs_review (lookup_failing), no re-send, E=1 D=1",
          "[execution][db][matrix][fault]") {
    const std::string kind = GENERATE("checkout", "paypal");
    INFO(kind);
    Case c(kind, {fake::Fault::execute_then_hang});
    auto f = c.w.fake->faults();
    f.lookup_down = true;
    c.w.fake->set_faults(f);
    c.settle();
    ReconcilePolicy policy;
    policy.max_lookup_failures = 1;
    const auto out = c.reconcile(policy);
    REQUIRE(out.size() == 1);
    CHECK(out[0].lookup == LookupStatus::failed);
    CHECK(c.state() == "needs_review");
    CHECK(c.column("review_code") == "lookup_failing");
    CHECK(c.send() == 0);
    CHECK(c.reconcile(policy).empty());
    CHECK(c.executions() == 1);
    CHECK(c.deliveries() == 1);
}

TEST_CASE("provider matrix: connection refused is not_sent, sent again with the same operation "
          "ID, succeeded, E=1",
          "[execution][db][matrix][fault]") {
    const std::string kind = GENERATE("checkout", "paypal");
    INFO(kind);
    Case c(kind, {fake::Fault::refuse}, false);
    REQUIRE_FALSE(c.w.fake->listening());
    CHECK(c.send() == 1);
    CHECK(c.state() == "retry_scheduled");
    CHECK(c.deliveries() == 0);
    // Sent again once the listener is back.
    CHECK(wait_until(
        [&] {
            c.send();
            return c.state() == "succeeded";
        },
        std::chrono::seconds(20), std::chrono::milliseconds(50)));
    CHECK(c.executions() == 1);
    CHECK(c.deliveries() == 1);
    CHECK(count_rows("payment_attempts", c.w.tenant.tenant_id, "outcome = 'not_sent'") >= 1);
    CHECK(count_rows("payment_attempts", c.w.tenant.tenant_id, "operation_id <> '" + c.op + "'") ==
          0);
}

TEST_CASE("provider matrix: dropped or answered 500 before executing: unknown, confirmed absent "
          "inside the key window, sent again with the same operation ID, E=1 D=2",
          "[execution][db][matrix][fault]") {
    const std::string kind = GENERATE("checkout", "paypal");
    const fake::Fault fault =
        GENERATE(fake::Fault::drop_before_execute, fake::Fault::http_500_before_execute);
    INFO(kind << " " << fake::to_string(fault));
    Case c(kind, {fault});
    CHECK(c.state() == "unknown");
    CHECK(c.executions() == 0);
    c.settle();
    const auto out = c.reconcile();
    REQUIRE(out.size() == 1);
    CHECK(out[0].lookup == LookupStatus::not_found);
    CHECK(out[0].decision.action == ReconcileAction::resend);
    CHECK(c.state() == "retry_scheduled");
    CHECK(c.send() == 1);
    CHECK(c.state() == "succeeded");
    CHECK(c.executions() == 1);
    CHECK(c.deliveries() == 2);
    CHECK(count_rows("payment_attempts", c.w.tenant.tenant_id, "operation_id = '" + c.op + "'") ==
          2);
}

TEST_CASE("provider matrix: PayPal's windows -- not found before 3 h proves nothing, between 3 h "
          "and 5 h allows the re-send, past the 6 h key window less its margin goes to review",
          "[execution][db][matrix][fault][paypal]") {
    const auto capabilities = Case("paypal", {}, false).provider->capabilities();
    CHECK(capabilities.key_retention == std::chrono::hours(6));
    CHECK(capabilities.lookup_staleness >= std::chrono::hours(3));
    CHECK(capabilities.lookup_by_operation_id);
    CHECK(capabilities.list_transactions);

    SECTION("at 2 h: not due, and an operator's recheck concludes nothing") {
        Case c("paypal", {fake::Fault::drop_before_execute});
        c.pass(std::chrono::hours(2));
        exec_sql("UPDATE payments SET next_attempt_at = now() + interval '1 hour' "
                 "WHERE merchant_reference = '" +
                 c.ref + "'");
        CHECK(c.reconcile().empty());
        const auto r = c.recheck();
        REQUIRE(r);
        CHECK(r->lookup == LookupStatus::not_found);
        CHECK(r->decision.action == ReconcileAction::check_later);
        CHECK(c.state() == "unknown");
        CHECK(c.deliveries() == 1);
    }
    SECTION("at 4 h: a confirmed absence inside the key window: re-sent with the same "
            "PayPal-Request-Id") {
        Case c("paypal", {fake::Fault::drop_before_execute});
        c.pass(std::chrono::hours(4));
        const auto out = c.reconcile();
        REQUIRE(out.size() == 1);
        CHECK(out[0].decision.action == ReconcileAction::resend);
        CHECK(c.send() == 1);
        CHECK(c.state() == "succeeded");
        CHECK(c.executions() == 1);
        CHECK(c.deliveries() == 2);
    }
    SECTION("at 5 h 30 min: past the key window less its margin: review, nothing sent") {
        Case c("paypal", {fake::Fault::drop_before_execute});
        c.pass(std::chrono::minutes(330));
        const auto out = c.reconcile();
        REQUIRE(out.size() == 1);
        CHECK(out[0].lookup == LookupStatus::not_found);
        CHECK(c.state() == "needs_review");
        CHECK(c.column("review_code") == "outside_key_window");
        CHECK(c.send() == 0);
        CHECK(c.deliveries() == 1);
        CHECK(c.executions() == 0);
    }
}

TEST_CASE("provider matrix: a decline fails the payment, nothing charged",
          "[execution][db][matrix]") {
    const std::string kind = GENERATE("checkout", "paypal");
    const bool by_method = GENERATE(false, true);
    INFO(kind << (by_method ? " declined payment method" : " decline fault"));
    Case c(kind, by_method ? std::vector<fake::Fault>{} : std::vector{fake::Fault::decline}, false);
    if (by_method) {
        exec_sql("UPDATE payments SET payment_method = '" + c.w.declined_method +
                 "' WHERE merchant_reference = '" + c.ref + "'");
    }
    CHECK(c.send() == 1);
    CHECK(c.state() == "failed");
    CHECK(c.executions() == 1); // the card was tried
    CHECK(c.charged_eur() == 0);
    CHECK(count_rows("outbox", c.w.tenant.tenant_id, "event_type = 'payment.failed'") == 1);
}

TEST_CASE("provider matrix: the worker died after the provider answered, before its result was "
          "committed: the lease expires, unknown, the lookup resolves it, E=1 D=1",
          "[execution][db][matrix][fault]") {
    const std::string kind = GENERATE("checkout", "paypal");
    INFO(kind);
    Case c(kind, {}, false);
    const auto claimed =
        store::claim_payments(*c.w.db, "dies", std::chrono::milliseconds(1), 1, {c.w.config.name});
    REQUIRE(claimed.size() == 1);
    CHECK(c.provider->submit(c.order()).outcome == providers::Outcome::succeeded);
    // ...and the worker is gone: nothing recorded. Its lease runs out.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (c.state() != "unknown" && std::chrono::steady_clock::now() < deadline) {
        store::expire_leases(*c.w.db, "test");
    }
    REQUIRE(c.state() == "unknown");
    c.settle();
    const auto out = c.reconcile();
    REQUIRE(out.size() == 1);
    CHECK(out[0].decision.action == ReconcileAction::adopt_succeeded);
    CHECK(c.state() == "succeeded");
    CHECK(c.executions() == 1);
    CHECK(c.deliveries() == 1);
}

TEST_CASE("provider matrix: a fenced-out worker's late sends are absorbed by the key: E=1",
          "[execution][db][matrix][fencing]") {
    const std::string kind = GENERATE("checkout", "paypal");
    INFO(kind);
    Case c(kind, {});
    REQUIRE(c.state() == "succeeded");
    // Checkout.com replays the saved 201; PayPal answers the order's current state.
    CHECK(c.provider->submit(c.order()).outcome == providers::Outcome::succeeded);
    CHECK(c.provider->submit(c.order()).outcome == providers::Outcome::succeeded);
    CHECK(c.executions() == 1);
    CHECK(c.deliveries() == 3);
    CHECK(c.charged_eur() == 2500);
}

TEST_CASE("provider matrix: Checkout.com re-executes a key whose answer was a 500, so the "
          "reconciler decides by lookup and never re-sends what it found",
          "[execution][db][matrix][fault][checkout]") {
    Case c("checkout", {fake::Fault::http_500_after_execute});
    REQUIRE(c.state() == "unknown");
    REQUIRE(c.executions() == 1);
    const auto out = c.reconcile();
    REQUIRE(out.size() == 1);
    CHECK(out[0].decision.action == ReconcileAction::adopt_succeeded);
    CHECK(c.send() == 0);
    CHECK(c.executions() == 1);
    CHECK(c.charged_eur() == 2500);
    // What a blind retry would have done: the same key, the same body -- a second charge. (The
    // hazard the protocol exists for; shown so that this test fails if the fake stops modelling
    // it.)
    CHECK(c.provider->submit(c.order()).outcome == providers::Outcome::succeeded);
    CHECK(c.executions() == 2);
}

TEST_CASE("provider matrix: PayPal's access token expires between payments: fetched again once, "
          "each payment executed once",
          "[execution][db][matrix][paypal]") {
    World w("paypal", {});
    auto provider = providers::create_provider(w.config);
    const auto refs = w.payments(2);
    engine::ExecutorOptions o = w.options();
    o.batch = 1;
    engine::Executor ex(*w.db, {provider.get()}, o);
    CHECK(ex.run_once() == 1);
    const auto issued = w.fake->ledger()["paypal_tokens_issued"];
    CHECK(w.fake->expire_paypal_tokens() >= 1);
    CHECK(ex.run_once() == 1);
    for (const auto& ref : refs) {
        CHECK(w.state_of(ref) == "succeeded");
        CHECK(w.executions(w.op_of(ref)) == 1);
        CHECK(w.deliveries(w.op_of(ref)) <= 2); // the refused one, then the sent one
    }
    REQUIRE(issued.is_number());
    CHECK(w.fake->ledger()["paypal_tokens_issued"].get<int>() == issued.get<int>() + 1);
}

TEST_CASE("provider matrix: a mixed run of 1,000 payments and 600 refunds of them across Stripe, "
          "Adyen, Checkout.com, PayPal and Square with every fault mode ends with the invariants "
          "of DESIGN section 12",
          "[execution][db][matrix][fault][refunds][slow]") {
    const fake::FaultConfig faults = every_fault_at_rates(20261204);
    World w("stripe", faults);
    const std::vector<std::string> kinds = {"stripe", "adyen", "checkout", "paypal", "square"};
    std::vector<providers::ProviderConfig> configs;
    for (const auto& kind : kinds) {
        configs.push_back(kind == "stripe" ? w.config : w.config_for(kind));
        configs.back().settle_delay = std::chrono::seconds(0); // PayPal's is raised to 3 h
    }

    // 1,000 payments in three currencies, a fifth to each provider, through the real intake.
    const std::vector<std::pair<std::string, long long>> currencies = {
        {"EUR", 2500}, {"USD", 1999}, {"JPY", 1200}};
    IntakeService intake(*w.db, test_keys());
    for (int i = 0; i < 1000; ++i) {
        const auto k = static_cast<std::size_t>(i) % kinds.size();
        const auto& [currency, amount] =
            currencies[static_cast<std::size_t>(i) / kinds.size() % currencies.size()];
        const std::string ref = unique_name("mix");
        const std::string body =
            R"({"amount": )" + std::to_string(amount + i) + R"(, "currency": ")" + currency +
            R"(", "merchant_reference": ")" + ref + R"(", "provider": ")" + configs[k].name +
            R"(", "payment_method": ")" + World::method_for(kinds[k]) + R"("})";
        REQUIRE(intake.create_payment(w.writer.principal, "k-" + ref, body, "").status == 202);
    }

    // Workers send everything once (8 threads), faults and all.
    const engine::WorkerOptions wo = mixed_worker_options("mixed-worker");
    std::ostringstream worker_log;
    const auto make_providers = providers_of(configs);
    engine::Worker worker(wo, make_providers, worker_log);
    worker.run();
    const long long unknown_after_send =
        count_rows("payments", w.tenant.tenant_id, "state = 'unknown'");
    CHECK(unknown_after_send > 50);

    std::vector<std::unique_ptr<providers::Provider>> owned;
    std::vector<providers::Provider*> providers;
    for (const auto& c : configs) {
        owned.push_back(providers::create_provider(c));
        providers.push_back(owned.back().get());
    }
    engine::NightlyOptions no;
    no.send = w.options();
    // Nights until nothing is left to do (PayPal's search lag passed before each).
    nights_until_quiet(w, providers, no);

    // Adyen cannot be asked: its unknown payments wait in review (no_lookup), and an operator
    // resolves each from what the provider's Customer Area shows.
    CHECK(resolve_adyen_payments_in_review(w) > 0);

    // The invariants.
    check_invariants(w, {"EUR", "USD", "JPY"});
    CHECK(count_rows("payments", w.tenant.tenant_id, "state IN ('succeeded', 'failed')") == 1000);
    for (std::size_t k = 0; k < kinds.size(); ++k) {
        INFO(kinds[k]);
        const std::string mine = "provider = '" + configs[k].name + "'";
        // Every provider took part: charges made, declines, and (but Adyen) unknowns resolved.
        CHECK(count_rows("payments", w.tenant.tenant_id, mine + " AND state = 'succeeded'") > 120);
        CHECK(count_rows("payments", w.tenant.tenant_id, mine + " AND state = 'failed'") > 0);
        if (kinds[k] == "adyen") {
            // No lookup: every unknown Adyen payment went to a person, never concluded.
            CHECK(count_rows("audit_log", w.tenant.tenant_id, "action = 'review.resolve'") > 0);
        } else {
            CHECK(count_rows("payment_lookups", w.tenant.tenant_id,
                             "payment_id IN (SELECT payment_id FROM payments WHERE " + mine + ")") >
                  0);
        }
    }

    // Refunds (issue 31): 600 of them through the real refund intake, full and partial, several
    // of one payment, and a few asking more than is left, which the intake refuses. Per provider,
    // its first 75 succeeded payments, the j-th of them refunded by pattern j % 5, eight refunds
    // a cycle, 120 a provider:
    //   0: in full (no amount: what is left)     1: half, then the rest
    //   2: three quarters, a quarter each         3: a third, then the whole charge again (409)
    //   4: a fifth
    // The same workers send them under the same faults; Adyen's outcomes come by its REFUND
    // notifications, received as serve receives them -- all but those of its refunds of a fifth
    // and the second of each three quarters (30 of its 120), which wait for an operator.
    const std::string& adyen = configs[1].name;
    // From the refunds on: the charges' notifications went nowhere.
    AdyenNotifications notifications(w, adyen);
    long long refused = 0;
    {
        std::map<std::string, std::vector<std::pair<std::string, long long>>> succeeded;
        pqxx::connection conn(database_url());
        {
            pqxx::read_transaction tx(conn);
            for (const auto& row : tx.exec_params(
                     "SELECT provider, payment_id::text, amount_minor FROM payments "
                     "WHERE tenant_id = $1::uuid AND state = 'succeeded' ORDER BY created_at, "
                     "payment_id",
                     w.tenant.tenant_id)) {
                succeeded[row[0].as<std::string>()].emplace_back(row[1].as<std::string>(),
                                                                 row[2].as<long long>());
            }
            tx.commit();
        }
        // The requests, in order per provider: a payment's refunds follow one another.
        struct Asked {
            std::string payment_id;
            std::optional<long long> amount; // none: what is left
            bool over = false;               // more than is left: to be refused
            bool withhold = false;           // Adyen's notification of it never received
            int status = 0;
            std::string body;
        };
        std::vector<std::vector<Asked>> asked(configs.size());
        for (std::size_t j = 0; j < 75; ++j) {
            for (std::size_t k = 0; k < configs.size(); ++k) {
                const auto& mine = succeeded[configs[k].name];
                REQUIRE(mine.size() > j);
                const std::string& id = mine[j].first;
                const long long a = mine[j].second;
                const bool adyen_kind = kinds[k] == "adyen";
                const auto ask = [&](std::optional<long long> amount, bool over = false,
                                     bool withhold = false) {
                    Asked one;
                    one.payment_id = id;
                    one.amount = amount;
                    one.over = over;
                    one.withhold = withhold;
                    asked[k].push_back(std::move(one));
                };
                switch (j % 5) {
                case 0:
                    ask(std::nullopt);
                    break;
                case 1:
                    ask(a / 2);
                    ask(std::nullopt);
                    break;
                case 2:
                    ask(a / 4);
                    ask(a / 4, false, adyen_kind);
                    ask(a / 4);
                    break;
                case 3:
                    ask(a / 3);
                    ask(a, true);
                    break;
                default:
                    ask(a / 5, false, adyen_kind);
                }
            }
        }
        // Each provider's refunds on a connection of their own, the five at once.
        std::vector<std::string> thrown(configs.size());
        std::vector<std::thread> clients;
        for (std::size_t k = 0; k < configs.size(); ++k) {
            clients.emplace_back([&, k] {
                try {
                    const auto db = connect();
                    RefundService intake_refunds(*db, test_keys());
                    for (auto& a : asked[k]) {
                        const auto r = intake_refunds.create_refund(
                            w.writer.principal, a.payment_id, unique_name("rk"),
                            a.amount ? R"({"amount": )" + std::to_string(*a.amount) + "}" : "{}",
                            "");
                        a.status = r.status;
                        a.body = r.body;
                    }
                } catch (const std::exception& e) {
                    thrown[k] = e.what();
                }
            });
        }
        for (auto& c : clients) {
            c.join();
        }
        pqxx::read_transaction ops(conn);
        for (std::size_t k = 0; k < configs.size(); ++k) {
            INFO(kinds[k]);
            REQUIRE(thrown[k].empty());
            for (const auto& a : asked[k]) {
                INFO(a.body);
                if (a.over) {
                    CHECK(a.status == 409);
                    CHECK(a.body.find("refund_exceeds_payment") != std::string::npos);
                    refused += a.status == 409 ? 1 : 0;
                    continue;
                }
                REQUIRE(a.status == 202);
                if (a.withhold) {
                    notifications.withheld.insert(
                        ops.exec_params("SELECT operation_id FROM operations WHERE id = $1::uuid",
                                        nlohmann::json::parse(a.body)["id"].get<std::string>())
                            .at(0)
                            .at(0)
                            .as<std::string>());
                }
            }
        }
        ops.commit();
    }
    CHECK(count_rows("operations", w.tenant.tenant_id, "kind = 'refund'") == 600);
    CHECK(refused == 75);
    CHECK(count_rows("operations", w.tenant.tenant_id, "state = 'pending'") == 600);

    engine::Worker refund_worker(wo, make_providers, worker_log);
    refund_worker.run();
    CHECK(count_rows("operations", w.tenant.tenant_id, "state = 'pending'") == 0);
    CHECK(count_rows("operations", w.tenant.tenant_id, "state = 'unknown'") > 50);

    std::map<std::string, int> review_codes; // refunds in review, by "provider review_code"
    const auto resolve_refunds_in_review = [&] {
        return resolve_operations_in_review(w, configs, providers, adyen, notifications,
                                            review_codes);
    };

    // Nights until nothing is left to do, with an operator after the last: each night receives
    // the notifications sent since the last and finds its refunds' last attempts 4 h older (past
    // Adyen's notification window).
    int nights = 0;
    for (; nights < 20; ++nights) {
        notifications.receive();
        exec_sql("UPDATE operations SET last_attempt_at = last_attempt_at - interval '4 hours 1 "
                 "minute', next_attempt_at = least(next_attempt_at, now()) WHERE tenant_id = '" +
                 w.tenant.tenant_id + "' AND state IN ('unknown', 'retry_scheduled')");
        const auto report = engine::run_nightly(*w.db, providers, no);
        INFO(report.failure.value_or(""));
        REQUIRE_FALSE(report.failure);
        if (count_rows("operations", w.tenant.tenant_id,
                       "state IN ('pending', 'processing', 'retry_scheduled', 'unknown')") == 0 &&
            resolve_refunds_in_review() == 0) {
            break;
        }
    }
    CHECK(nights < 20);
    {
        std::ostringstream codes;
        for (const auto& [code, n] : review_codes) {
            codes << code << ": " << n << "\n";
        }
        INFO(codes.str());
        // Adyen's withheld notifications: accepted refunds waited their window out.
        CHECK(review_codes[adyen + " notification_missing"] > 0);
    }

    check_refund_invariants(w, {"EUR", "USD", "JPY"});
    CHECK(count_rows("payments", w.tenant.tenant_id, "state = 'needs_review'") == 0);
    for (std::size_t k = 0; k < kinds.size(); ++k) {
        INFO(kinds[k]);
        const std::string mine = "provider = '" + configs[k].name + "'";
        CHECK(count_rows("operations", w.tenant.tenant_id, mine + " AND state = 'succeeded'") > 60);
        if (kinds[k] == "adyen") {
            // Settled by its notifications, and by an operator where none came.
            CHECK(count_rows("provider_events", w.tenant.tenant_id,
                             "refund_id IS NOT NULL AND event_type = 'REFUND'") > 60);
            CHECK(count_rows("audit_log", w.tenant.tenant_id,
                             "action = 'review.resolve' AND subject_id IN (SELECT id::text FROM "
                             "operations WHERE " +
                                 mine + ")") > 0);
        } else {
            CHECK(count_rows("payment_lookups", w.tenant.tenant_id,
                             "operation_id IN (SELECT operation_id FROM operations WHERE " + mine +
                                 ")") > 0);
        }
    }
}

TEST_CASE("provider matrix: a verified Checkout.com webhook for an unknown payment is adopted "
          "without a lookup or a re-send, a badly signed one stores nothing",
          "[execution][db][matrix][webhook][checkout]") {
    const bool captured = GENERATE(true, false);
    INFO((captured ? "payment_captured" : "payment_declined"));
    Case c("checkout", {fake::Fault::execute_then_rst});
    REQUIRE(c.state() == "unknown");
    const std::string key = "cko_signature_key_" + to_hex(random_bytes(8));
    const auto verifier =
        providers::descriptor_of("checkout").webhook_verifier({Secret(key)}, c.w.config);
    const std::string body =
        nlohmann::json{{"id", "evt_" + to_hex(random_bytes(13))},
                       {"type", captured ? "payment_captured" : "payment_declined"},
                       {"created_on", "2026-12-04T10:00:00Z"},
                       {"data",
                        {{"id", "pay_" + to_hex(random_bytes(13))},
                         {"amount", 2500},
                         {"currency", "EUR"},
                         {"reference", c.op},
                         {"response_code", captured ? "10000" : "20051"}}}}
            .dump();
    WebhookRequest forged;
    forged.body = body;
    forged.headers = {{"cko-signature", to_hex(hmac_sha256("not the key", body))}};
    forged.received_at = std::chrono::system_clock::now();
    CHECK(receive_webhook(*c.w.db, c.w.config.name, *verifier, forged).status ==
          WebhookVerdict::Status::bad_signature);
    CHECK(count_rows("provider_events", c.w.tenant.tenant_id, "true") == 0);

    WebhookRequest signed_request = forged;
    signed_request.headers = {{"cko-signature", to_hex(hmac_sha256(key, body))}};
    const auto receipt = receive_webhook(*c.w.db, c.w.config.name, *verifier, signed_request);
    CHECK(receipt.status == WebhookVerdict::Status::verified);
    CHECK(receipt.new_events == 1);
    CHECK(receipt.unmatched == 0);
    const auto applied = engine::apply_webhook_evidence(*c.w.db, "matrix", {c.w.config.name}, 10);
    REQUIRE(applied.size() == 1);
    CHECK(c.state() == (captured ? "succeeded" : "failed"));
    CHECK(count_rows("payment_lookups", c.w.tenant.tenant_id, "true") == 0); // nobody asked
    CHECK(c.send() == 0);
    CHECK(c.reconcile().empty());
    CHECK(c.executions() == 1);
    CHECK(c.deliveries() == 1);
}
