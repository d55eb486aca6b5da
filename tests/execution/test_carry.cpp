// What a provider cannot carry never reaches it cut short: the real Stripe adapter against the fake
// provider, counted in the provider's own ledger.
#include "engine/executor.hpp"
#include "providers/registry.hpp"
#include "services/intake.hpp"
#include "tests/execution/world.hpp"
#include "tests/fake_provider/fake_provider.hpp"
#include "tests/support/test_db.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// A payment to the world's provider with `n` metadata entries, accepted by an intake that has no
// provider configuration (so nothing checks it before the worker).
std::string accept_with_metadata(World& w, int n) {
    const std::string ref = unique_name("meta");
    nlohmann::json body = {{"amount", 2500},
                           {"currency", "EUR"},
                           {"merchant_reference", ref},
                           {"provider", w.config.name},
                           {"payment_method", "pm_card_visa"}};
    for (int i = 0; i < n; ++i) {
        body["metadata"]["k" + std::to_string(i)] = "v" + std::to_string(i);
    }
    IntakeService intake(*w.db, test_keys());
    REQUIRE(intake.create_payment(w.writer.principal, "k-" + ref, body.dump(), "").status == 202);
    return ref;
}

} // namespace

TEST_CASE("execution: a payment with more metadata than Stripe carries fails not_carried and never "
          "reaches it, 48 entries arrive whole",
          "[execution][db][regression]") {
    // A payment with 50 metadata keys was stored and only 48 of them reached Stripe.
    World w;
    auto provider = providers::create_provider(w.config);
    engine::Executor ex(*w.db, {provider.get()}, w.options());

    const std::string fifty = accept_with_metadata(w, 50);
    CHECK(query_value("SELECT count(*) FROM payments p, jsonb_object_keys(p.metadata) "
                      "WHERE p.merchant_reference = $1",
                      fifty) == "50");
    CHECK(ex.run_once() == 1);
    CHECK(w.state_of(fifty) == "failed");
    CHECK(w.deliveries(w.op_of(fifty)) == 0);
    CHECK(w.executions(w.op_of(fifty)) == 0);
    CHECK(count_rows("payment_attempts", w.tenant.tenant_id,
                     "error_class = 'not_carried' AND detail LIKE '%at most 48%'") == 1);

    const std::string fortyeight = accept_with_metadata(w, 48);
    CHECK(ex.run_once() == 1);
    CHECK(w.state_of(fortyeight) == "succeeded");
    const std::string op = w.op_of(fortyeight);
    CHECK(w.executions(op) == 1);
    int found = 0;
    const auto ledger = w.fake->ledger();
    for (const auto& intent : ledger["payment_intents"]) {
        if (intent["metadata"].value("operation_id", "") == op) {
            ++found;
            CHECK(intent["metadata"].size() == 50); // all 48 of the caller's, and payrecon's 2
            CHECK(intent["metadata"]["k47"] == "v47");
        }
    }
    CHECK(found == 1);
}
