// Checkout.com and PayPal through the real binary (PAYRECON_BIN), configured as an operator writes
// them -- a checkout entry with its processing channel, a paypal entry naming its client ID and
// secret flat -- against the in-process fake provider speaking their dialects: `worker --once`
// sends, an ambiguous answer becomes unknown, `reconcile` finds the charge without re-sending,
// `statement` reads PayPal's books and looks Checkout.com's payments up (it lists nothing by
// window). Secrets reach the child
// through its environment only. Counted in payments and in the fake's ledger.
#include "tests/support/operated.hpp"

#include <catch2/catch.hpp>
#include <fstream>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

struct TwoProviders {
    Operated w;
    std::string checkout = "co" + to_hex(random_bytes(8));
    std::string paypal = "pp" + to_hex(random_bytes(8));

    TwoProviders() {
        const nlohmann::json file = {{"providers",
                                      {{checkout,
                                        {{"kind", "checkout"},
                                         {"base_url", w.config.base_url},
                                         {"api_key_env", "CLITEST_CKO_SECRET_KEY"},
                                         {"processing_channel_id", "pc_q4dbxom5jbgudnjzjpz7j2z6uq"},
                                         {"connect_timeout_ms", 500},
                                         {"timeout_ms", 2000},
                                         {"settle_delay_s", 0}}},
                                       {paypal,
                                        {{"kind", "paypal"},
                                         {"base_url", w.config.base_url},
                                         {"client_id_env", "CLITEST_PAYPAL_CLIENT_ID"},
                                         {"client_secret_env", "CLITEST_PAYPAL_CLIENT_SECRET"},
                                         {"connect_timeout_ms", 500},
                                         {"timeout_ms", 2000}}}}}};
        std::ofstream(w.config_file) << file.dump(2);
    }
    Env env() const {
        return {{"CLITEST_CKO_SECRET_KEY",
                 std::get<providers::ApiKey>(w.config.credentials).value.reveal()},
                {"CLITEST_PAYPAL_CLIENT_ID", w.paypal_client_id},
                {"CLITEST_PAYPAL_CLIENT_SECRET", w.paypal_secret.reveal()}};
    }
    Run payrecon(const std::vector<std::string>& args) { return w.payrecon(args, env()); }
    std::string pay(const std::string& provider, const std::string& method) {
        IntakeService intake(*w.db, test_keys());
        const std::string ref = unique_name("np");
        const std::string body = R"({"amount": 2500, "currency": "EUR", "merchant_reference": ")" +
                                 ref + R"(", "provider": ")" + provider +
                                 R"(", "payment_method": ")" + method + R"("})";
        REQUIRE(intake.create_payment(w.writer.principal, "k-" + ref, body, "").status == 202);
        return ref;
    }
    int executions(const std::string& ref) {
        const auto l = w.fake->ledger();
        const std::string op = w.column(ref, "operation_id");
        return l["executions"].contains(op) ? l["executions"][op].get<int>() : 0;
    }
};

} // namespace

TEST_CASE("cli: Checkout.com and PayPal configured as an operator writes them -- worker sends, "
          "reconcile finds what a lost answer hid, statement reads PayPal's books and looks "
          "Checkout.com's payments up",
          "[cli][db][checkout][paypal]") {
    TwoProviders t;
    const std::string co_ok = t.pay(t.checkout, "src_nwd3m4in3hkuddfpjsaevunhdy");
    const std::string pp_ok = t.pay(t.paypal, "vault_8ab3c2d1");
    const std::string co_lost = t.pay(t.checkout, "src_nwd3m4in3hkuddfpjsaevunhdy");
    const std::string pp_declined = t.pay(t.paypal, "vault_declined");

    // The third POST (co_lost, in creation order) executes and its answer is lost.
    auto faults = t.w.fake->faults();
    faults.next = {fake::Fault::none, fake::Fault::none, fake::Fault::execute_then_fin};
    t.w.fake->set_faults(faults);
    const Run sent = t.payrecon({"worker", "--once", "--concurrency", "1"});
    INFO(sent.all());
    CHECK(sent.exit_code == 0);
    CHECK(t.w.state_of(co_ok) == "succeeded");
    CHECK(t.w.state_of(pp_ok) == "succeeded");
    CHECK(t.w.state_of(pp_declined) == "failed");
    CHECK(t.w.state_of(co_lost) == "unknown");
    CHECK(t.w.column(co_ok, "provider_reference").rfind("pay_", 0) == 0);
    CHECK_FALSE(t.w.column(pp_ok, "provider_reference").empty());

    const Run reconciled = t.payrecon({"reconcile"});
    INFO(reconciled.all());
    CHECK(reconciled.exit_code == 0);
    CHECK(t.w.state_of(co_lost) == "succeeded");
    for (const auto& ref : {co_ok, pp_ok, co_lost, pp_declined}) {
        CHECK(t.executions(ref) == 1);
    }
    const nlohmann::json ledger = t.w.fake->ledger();
    CHECK(ledger["charged"]["eur"] == 7500);
    CHECK(ledger["paypal_tokens_issued"].get<int>() >= 1);

    const Run statement = t.payrecon({"statement", "--provider", t.paypal, "--from", "2000-01-01",
                                      "--to", "2100-01-01", "--format", "json"});
    INFO(statement.all());
    CHECK(statement.exit_code == 0);
    const auto report = nlohmann::json::parse(statement.out);
    CHECK(report.dump().find("\"matched\"") != std::string::npos);

    // Checkout.com lists nothing by window: its statement looks each of our payments up.
    const Run by_lookup = t.payrecon({"statement", "--provider", t.checkout, "--from", "2000-01-01",
                                      "--to", "2100-01-01", "--format", "json"});
    INFO(by_lookup.all());
    CHECK(by_lookup.exit_code == 0);
    const auto looked_up = nlohmann::json::parse(by_lookup.out);
    CHECK(looked_up.dump().find("lookups made") != std::string::npos);
    CHECK(looked_up.dump().find("a charge made outside payrecon is not seen") != std::string::npos);
    CHECK(t.w.fake->ledger()["charged"]["eur"] == 7500); // it charged nothing

    // The nightly diffs PayPal's books and says that it did not diff Checkout.com's, and why.
    // (Its exit code counts the shared database's other payments too: not asserted here.)
    const Run nightly = t.payrecon({"nightly", "--json"});
    INFO(nightly.all());
    REQUIRE_FALSE(nightly.out.empty());
    const auto summary = nlohmann::json::parse(nightly.out);
    CHECK(summary["statements"].size() == 1);
    REQUIRE(summary["statements_not_run"].size() == 1);
    CHECK(summary["statements_not_run"][0]["provider"] == t.checkout);
    CHECK(summary["statements_not_run"][0]["why"].get<std::string>().find(
              "payrecon statement --provider " + t.checkout) != std::string::npos);

    // Nothing secret in what the binary printed.
    for (const Run* r : {&sent, &reconciled, &statement, &by_lookup, &nightly}) {
        CHECK(r->all().find(t.w.paypal_secret.reveal()) == std::string::npos);
        CHECK(r->all().find(std::get<providers::ApiKey>(t.w.config.credentials).value.reveal()) ==
              std::string::npos);
    }
}
