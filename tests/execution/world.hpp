#pragma once
// What the execution and reconciliation acceptance tests share: a fake provider on loopback, a
// Stripe adapter configuration pointing at it, a tenant, payments through the real intake, and
// counts from the fake's ledger.
#include "core/fingerprint.hpp"
#include "engine/executor.hpp"
#include "engine/reconciler.hpp"
#include "providers/adyen/adapter.hpp"
#include "providers/checkout/adapter.hpp"
#include "providers/config.hpp"
#include "providers/paypal/adapter.hpp"
#include "providers/registry.hpp"
#include "services/intake.hpp"
#include "tests/fake_provider/fake_provider.hpp"
#include "tests/support/test_db.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace payrecon::testing {

struct World {
    std::ostringstream provider_log;
    std::unique_ptr<fake::FakeProvider> fake;
    std::unique_ptr<store::Db> db = connect();
    TestTenant tenant = make_tenant(*db);
    TestPrincipal writer = make_principal(*db, tenant);
    providers::ProviderConfig config;

    // The payment method the fake charges, and the one it declines, in the kind's dialect.
    std::string method = "pm_card_visa";
    std::string declined_method = "pm_card_chargeDeclined";
    fake::FakeProviderOptions fake_options;

    explicit World(fake::FaultConfig faults = {}, bool idempotency = true)
        : World("stripe", std::move(faults), idempotency) {}

    // A world whose provider is of `kind` (stripe, adyen, checkout, paypal, square), speaking that
    // kind's dialect of the one fake provider.
    World(const std::string& kind, fake::FaultConfig faults, bool idempotency = true) {
        fake_options.account.api_key = Secret("sk_test_fake_" + to_hex(random_bytes(8)));
        fake_options.account.idempotency = idempotency;
        fake_options.paypal.client_secret = Secret("paypal-secret-" + to_hex(random_bytes(8)));
        fake_options.faults = std::move(faults);
        fake = std::make_unique<fake::FakeProvider>(fake_options, provider_log);
        fake->start();
        config = config_for(kind);
        method = method_for(kind);
        declined_method = kind == "checkout" ? "src_card_declined"
                          : kind == "paypal" ? "vault_declined"
                          : kind == "square" ? "cnon:card-nonce-declined"
                                             : "pm_card_chargeDeclined";
    }

    // A provider of `kind` on this world's fake, under a name of its own.
    providers::ProviderConfig config_for(const std::string& kind) const {
        providers::ProviderConfig c;
        c.name = kind.substr(0, 2) + to_hex(random_bytes(8));
        c.kind = kind;
        c.base_url = "http://127.0.0.1:" + std::to_string(fake->port());
        c.credentials = providers::ApiKey{"STRIPE_API_KEY", fake_options.account.api_key};
        c.connect_timeout = std::chrono::milliseconds(500);
        c.timeout = std::chrono::milliseconds(800);
        if (kind == "adyen") {
            c.settings =
                providers::adyen::settings("AcmeShopECOM", "https://shop.example.com/return");
        } else if (kind == "checkout") {
            c.settings = providers::checkout::settings("pc_q4dbxom5jbgudnjzjpz7j2z6uq");
        } else if (kind == "paypal") {
            c.credentials = providers::OAuth2ClientCredentials{
                "PAYPAL_CLIENT_ID", "PAYPAL_CLIENT_SECRET", c.base_url + "/v1/oauth2/token",
                Secret(fake_options.paypal.client_id), fake_options.paypal.client_secret};
            c.settings = providers::paypal::settings(std::chrono::hours(6));
        } else if (kind == "square") {
            // Square's access token: the fake takes the same key in every dialect.
            c.credentials = providers::ApiKey{"SQUARE_ACCESS_TOKEN", fake_options.account.api_key};
        }
        return c;
    }
    // The payment method the fake charges in `kind`'s dialect.
    static std::string method_for(const std::string& kind) {
        return kind == "adyen"      ? "8415718415172204"
               : kind == "checkout" ? "src_nwd3m4in3hkuddfpjsaevunhdy"
               : kind == "paypal"   ? "vault_8ab3c2d1"
               : kind == "square"   ? "cnon:card-nonce-ok"
                                    : "pm_card_visa";
    }

    std::vector<std::string> payments(int n) { return payments(n, method); }
    std::vector<std::string> payments(int n, const std::string& payment_method) {
        IntakeService intake(*db, test_keys());
        std::vector<std::string> refs;
        for (int i = 0; i < n; ++i) {
            const std::string ref = unique_name("ord");
            const std::string body =
                R"({"amount": 2500, "currency": "EUR", "merchant_reference": ")" + ref +
                R"(", "provider": ")" + config.name + R"(", "payment_method": ")" + payment_method +
                R"("})";
            REQUIRE(intake.create_payment(writer.principal, "k-" + ref, body, "").status == 202);
            refs.push_back(ref);
        }
        return refs;
    }
    std::string op_of(const std::string& ref) {
        return query_value("SELECT operation_id FROM payments WHERE merchant_reference = $1", ref);
    }
    std::string payment_id_of(const std::string& ref) {
        return query_value("SELECT payment_id::text FROM payments WHERE merchant_reference = $1",
                           ref);
    }
    long long generation_of(const std::string& ref) {
        return std::stoll(
            query_value("SELECT generation FROM payments WHERE merchant_reference = $1", ref));
    }
    std::string state_of(const std::string& ref) {
        return query_value("SELECT state FROM payments WHERE merchant_reference = $1", ref);
    }
    int executions(const std::string& op) {
        const auto l = fake->ledger();
        return l["executions"].contains(op) ? l["executions"][op].get<int>() : 0;
    }
    int deliveries(const std::string& op) {
        const auto l = fake->ledger();
        return l["deliveries_by_operation"].contains(op)
                   ? l["deliveries_by_operation"][op].get<int>()
                   : 0;
    }
    engine::ExecutorOptions options() {
        engine::ExecutorOptions o;
        o.worker_id = "exec-test";
        o.lease = std::chrono::seconds(30);
        o.backoff.base = std::chrono::milliseconds(1);
        o.backoff.cap = std::chrono::milliseconds(1);
        return o;
    }
};

// One payment of `kind` through the real intake, sent once by the executor (unless `send` is
// false) meeting `faults`, and what the execution tests ask of it: send again, reconcile, recheck,
// let time pass on both clocks, its columns and the fake's counts of its operation ID.
struct OnePayment {
    World w;
    std::unique_ptr<providers::Provider> provider;
    std::string ref;
    std::string op;

    OnePayment(const std::string& kind, fake::FaultConfig faults, bool send = true)
        : w(kind, std::move(faults)) {
        w.config.settle_delay = std::chrono::seconds(0); // PayPal's adapter raises it to 3 h
        provider = providers::create_provider(w.config);
        ref = w.payments(1)[0];
        op = w.op_of(ref);
        if (send) {
            REQUIRE(this->send() == 1);
        }
    }

    int send() {
        engine::Executor ex(*w.db, {provider.get()}, w.options());
        return ex.run_once();
    }
    std::vector<engine::ReconcileOutcome> reconcile(ReconcilePolicy policy = {}) {
        engine::ReconcilerOptions o;
        o.actor = "test-reconciler";
        o.policy = policy;
        engine::Reconciler r(*w.db, {provider.get()}, o);
        return r.run();
    }
    std::optional<engine::ReconcileOutcome> recheck() {
        engine::Reconciler r(*w.db, {provider.get()}, {});
        return r.recheck(w.tenant.tenant_id, w.payment_id_of(ref));
    }
    // `by` passes on both clocks: the payment's attempts are that much older, and the provider's
    // clock (its key retention, its search lag) that much later.
    void pass(std::chrono::seconds by) {
        w.fake->advance_clock(by);
        exec_sql("UPDATE payments SET first_attempt_at = first_attempt_at - interval '" +
                 std::to_string(by.count()) +
                 " seconds', last_attempt_at = last_attempt_at - interval '" +
                 std::to_string(by.count()) +
                 " seconds', next_attempt_at = now() - interval '1 second' "
                 "WHERE merchant_reference = '" +
                 ref + "'");
    }
    // The payment as a worker sends it: what a late or second send carries.
    providers::PaymentOrder order() {
        providers::PaymentOrder o;
        o.operation_id = op;
        o.payment_id = w.payment_id_of(ref);
        o.merchant_reference = ref;
        o.amount = Money{2500, "EUR"};
        o.payment_method = w.method;
        o.created_at = std::chrono::system_clock::now();
        return o;
    }
    std::string state() { return w.state_of(ref); }
    std::string column(const std::string& name) {
        return query_value("SELECT coalesce(" + name +
                               "::text, '') FROM payments WHERE merchant_reference = $1",
                           ref);
    }
    int executions() { return w.executions(op); }
    int deliveries() { return w.deliveries(op); }
    long long charged_eur() {
        const auto l = w.fake->ledger();
        return l["charged"].contains("eur") ? l["charged"]["eur"].get<long long>() : 0;
    }
};

// DESIGN section 12's invariants over `w`'s tenant and its fake's ledger, after a run has quiesced:
// at most one execution per operation ID (every dialect); per currency of `currencies`, what our
// succeeded payments took (a charge its amount, an authorisation what its captures took) less
// what our refunds gave back equals what the provider kept; nothing processing, unknown, pending or
// due again; review only with a code and a reason; every succeeded payment's event in the outbox
// (payment.succeeded for a charge, payment.authorized for an authorisation).
inline void check_invariants(World& w, const std::vector<std::string>& currencies) {
    const auto ledger = w.fake->ledger();
    for (const auto& [op, n] : ledger["executions"].items()) {
        INFO(op);
        CHECK(n.get<int>() <= 1);
    }
    for (const auto& currency : currencies) {
        const std::string ours = query_value(
            "SELECT (coalesce(sum(CASE WHEN capture_method = 'manual' THEN captured_minor "
            "ELSE amount_minor END), 0) - coalesce((SELECT sum(amount_minor) FROM operations "
            "WHERE tenant_id = $1::uuid AND kind = 'refund' AND state = 'succeeded' AND currency "
            "= '" +
                currency +
                "'), 0))::text FROM payments WHERE tenant_id = $1::uuid AND state = 'succeeded' "
                "AND currency = '" +
                currency + "'",
            w.tenant.tenant_id);
        std::string lower = currency;
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        const long long theirs =
            ledger["charged"].contains(lower) ? ledger["charged"][lower].get<long long>() : 0;
        INFO(currency);
        CHECK(std::stoll(ours) == theirs);
    }
    CHECK(count_rows("payments", w.tenant.tenant_id,
                     "state IN ('processing', 'unknown', 'pending', 'retry_scheduled')") == 0);
    CHECK(count_rows("payments", w.tenant.tenant_id,
                     "state = 'needs_review' AND (review_code IS NULL OR review_reason IS NULL)") ==
          0);
    CHECK(count_rows("outbox", w.tenant.tenant_id, "event_type = 'payment.succeeded'") ==
          count_rows("payments", w.tenant.tenant_id,
                     "state = 'succeeded' AND capture_method = 'automatic'"));
    CHECK(count_rows("outbox", w.tenant.tenant_id, "event_type = 'payment.authorized'") ==
          count_rows("payments", w.tenant.tenant_id,
                     "state = 'succeeded' AND capture_method = 'manual'"));
}

// Every fault mode drawn at rates (seeded): what the mixed 1,000-payment runs meet.
inline fake::FaultConfig every_fault_at_rates(std::uint64_t seed) {
    fake::FaultConfig faults;
    faults.seed = seed;
    faults.hang = std::chrono::milliseconds(1200);
    faults.refuse = std::chrono::milliseconds(150);
    faults.rates = {{fake::Fault::refuse, 0.01},
                    {fake::Fault::drop_before_execute, 0.04},
                    {fake::Fault::execute_then_hang, 0.02},
                    {fake::Fault::execute_then_fin, 0.03},
                    {fake::Fault::execute_then_rst, 0.03},
                    {fake::Fault::execute_then_partial, 0.03},
                    {fake::Fault::http_500_after_execute, 0.03},
                    {fake::Fault::http_500_before_execute, 0.03},
                    {fake::Fault::decline, 0.03}};
    return faults;
}

inline fake::FaultConfig next(std::vector<fake::Fault> faults) {
    fake::FaultConfig f;
    f.next = std::move(faults);
    f.hang = std::chrono::milliseconds(2000); // past the client's 800 ms
    // The listener closes when the faults are set, before the payment is made: long enough that
    // the first send still finds it closed on a loaded machine (300 ms did not, and a case that
    // expected retry_scheduled found the payment succeeded), short enough for the waits after it.
    f.refuse = std::chrono::seconds(3);
    return f;
}

} // namespace payrecon::testing
