#pragma once
// What the execution and reconciliation acceptance tests share: a fake provider on loopback, a
// Stripe adapter configuration pointing at it, a tenant, payments through the real intake, and
// counts from the fake's ledger.
#include "core/fingerprint.hpp"
#include "engine/executor.hpp"
#include "providers/config.hpp"
#include "services/intake.hpp"
#include "tests/fake_provider/fake_provider.hpp"
#include "tests/support/test_db.hpp"

#include <catch2/catch.hpp>
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

    explicit World(fake::FaultConfig faults = {}, bool idempotency = true) {
        fake::FakeProviderOptions o;
        o.stripe.api_key = Secret("sk_test_fake_" + to_hex(random_bytes(8)));
        o.stripe.idempotency = idempotency;
        o.faults = std::move(faults);
        fake = std::make_unique<fake::FakeProvider>(o, provider_log);
        fake->start();
        config.name = "st" + to_hex(random_bytes(8));
        config.kind = "stripe";
        config.base_url = "http://127.0.0.1:" + std::to_string(fake->port());
        config.credentials = providers::ApiKey{"STRIPE_API_KEY", o.stripe.api_key};
        config.connect_timeout = std::chrono::milliseconds(500);
        config.timeout = std::chrono::milliseconds(800);
    }

    std::vector<std::string> payments(int n, const std::string& payment_method = "pm_card_visa") {
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

inline fake::FaultConfig next(std::vector<fake::Fault> faults) {
    fake::FaultConfig f;
    f.next = std::move(faults);
    f.hang = std::chrono::milliseconds(2000); // past the client's 800 ms
    f.refuse = std::chrono::milliseconds(300);
    return f;
}

} // namespace payrecon::testing
