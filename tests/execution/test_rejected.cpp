// Issue 19 for Adyen: the real Adyen adapter and executor, on a real PostgreSQL, against an
// in-process Adyen that validates each /payments request by the required fields of Adyen's
// published schema (tests/providers/contracts/adyen.json) -- a request without returnUrl gets
// Adyen's own documented answer, 422 {"errorCode":"14_030","message":"Return URL is missing.",
// "errorType":"validation"} -- and keeps a ledger of what it executed. The configuration without
// return_url can no longer be loaded; the one built here in code, as before the fix, makes Adyen
// refuse every payment: review request_rejected, 0 executions, nightly exit 3 with the code. With
// the return URL configured, an operator's retry charges each once with the same operation ID.
// A card Adyen refuses is still a decline: failed, with its refusal reason.
#include "core/errors.hpp"
#include "engine/executor.hpp"
#include "engine/nightly.hpp"
#include "providers/adyen/adapter.hpp"
#include "services/intake.hpp"
#include "store/migrations.hpp"
#include "store/reconcile_store.hpp"
#include "tests/providers/adapter_testing.hpp"
#include "tests/support/test_db.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

using namespace payrecon;
using namespace payrecon::testing;
using net::HttpRequest;
using net::HttpResult;

namespace {

// Adyen's POST /v71/payments as far as these tests need it. A request missing a field the schema
// requires (or giving it as an empty string) is refused with 422 before anything executes --
// returnUrl with Adyen's documented 14_030, any other with a code of the fake's own -- and its
// Idempotency-Key keeps nothing. Otherwise it executes: storedPaymentMethodId "card_refused" is
// Refused, any other Authorised; the key keeps that answer.
class FakeAdyen {
public:
    HttpResult send(const HttpRequest& request) {
        const auto body = nlohmann::json::parse(request.body);
        const std::string reference = body.value("reference", "(none)");
        ++deliveries[reference];
        std::string key;
        for (const auto& [name, value] : request.headers) {
            if (name == "Idempotency-Key") {
                key = value;
            }
        }
        if (const auto saved = m_saved.find(key); !key.empty() && saved != m_saved.end()) {
            return saved->second;
        }
        const auto& required = provider_contract("adyen")
                                   .at("components")
                                   .at("schemas")
                                   .at("PaymentRequest")
                                   .at("required");
        for (const auto& name : required) {
            const std::string field = name.get<std::string>();
            if (!body.contains(field) ||
                (body[field].is_string() && body[field].get<std::string>().empty())) {
                const bool return_url = field == "returnUrl";
                return response(
                    422, nlohmann::json{{"status", 422},
                                        {"errorCode", return_url ? "14_030" : "fake_required"},
                                        {"message", return_url ? "Return URL is missing."
                                                               : field + " is missing."},
                                        {"errorType", "validation"}}
                             .dump());
            }
        }
        ++executions[reference];
        const bool refused =
            body["paymentMethod"].value("storedPaymentMethodId", "") == "card_refused";
        nlohmann::json answer = {{"pspReference", "PSP" + std::to_string(++m_psp)},
                                 {"merchantReference", reference},
                                 {"amount", body["amount"]},
                                 {"resultCode", refused ? "Refused" : "Authorised"}};
        if (refused) {
            answer["refusalReason"] = "Refused";
        }
        HttpResult out = response(200, answer.dump());
        if (!key.empty()) {
            m_saved.emplace(key, out);
        }
        return out;
    }
    std::map<std::string, int> deliveries;
    std::map<std::string, int> executions;

private:
    std::map<std::string, HttpResult> m_saved;
    int m_psp = 0;
};

providers::ProviderConfig adyen_config(const std::string& name, std::string return_url) {
    providers::ProviderConfig c;
    c.name = name;
    c.kind = "adyen";
    c.base_url = "https://checkout-test.adyen.test"; // never reached: FakeAdyen answers in-process
    c.credentials = providers::ApiKey{"ADYEN_API_KEY", Secret("AQE_test_not_a_real_key_0000")};
    c.settings = providers::adyen::settings("AcmeShopECOM", std::move(return_url));
    c.connect_timeout = std::chrono::milliseconds(500);
    c.timeout = std::chrono::milliseconds(800);
    return c;
}

struct AdyenWorld {
    ScratchDatabase scratch;
    std::unique_ptr<store::Db> db = migrated(scratch.url());
    TestTenant tenant = make_tenant(*db);
    TestPrincipal writer = make_principal(*db, tenant);
    pqxx::connection sql{scratch.url()};
    FakeAdyen fake_adyen;
    std::string provider = "ad" + to_hex(random_bytes(8));

    static std::unique_ptr<store::Db> migrated(const std::string& url) {
        auto db = std::make_unique<store::Db>(url);
        store::migrate(*db);
        return db;
    }
    std::string payment(const std::string& payment_method = "8415718415172204") {
        IntakeService intake(*db, test_keys());
        const std::string ref = unique_name("ord");
        const std::string body = R"({"amount": 4999, "currency": "EUR", "merchant_reference": ")" +
                                 ref + R"(", "provider": ")" + provider +
                                 R"(", "payment_method": ")" + payment_method + R"("})";
        REQUIRE(intake.create_payment(writer.principal, "k-" + ref, body, "").status == 202);
        return ref;
    }
    std::string column(const std::string& ref, const std::string& name) {
        pqxx::read_transaction tx(sql);
        const auto r = tx.exec_params(
            "SELECT " + name + "::text FROM payments WHERE merchant_reference = $1", ref);
        return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
    }
    long long count(const std::string& table, const std::string& where) {
        pqxx::read_transaction tx(sql);
        return tx.exec("SELECT count(*) FROM " + table + " WHERE " + where)[0][0].as<long long>();
    }
    // Sends whatever is due through the Adyen adapter configured with `return_url`.
    void send_due(const std::string& return_url) {
        providers::adyen::AdyenAdapter adapter(
            adyen_config(provider, return_url),
            [this](const HttpRequest& r) { return fake_adyen.send(r); });
        engine::ExecutorOptions o;
        o.worker_id = "rejected-test";
        o.lease = std::chrono::seconds(30);
        engine::Executor ex(*db, {&adapter}, o);
        while (ex.run_once() > 0) {
        }
    }
};

} // namespace

TEST_CASE("rejected requests: adyen without a return URL refuses every payment before executing "
          "it -- review request_rejected, nightly exit 3 with 14_030 -- and once configured a "
          "retry charges each once",
          "[execution][db][rejected][adyen]") {
    // The configuration file can no longer say it: an adyen provider without return_url is refused.
    const char* without =
        R"({"providers": {"a": {"kind": "adyen", "base_url": "https://checkout-test.adyen.com", "api_key_env": "ADYEN_KEY", "merchant_account": "AcmeShopECOM"}}})";
    CHECK_THROWS_AS(providers::parse_config(without, "providers.json",
                                            [](const char*) -> const char* { return "k"; }),
                    ConfigError);

    AdyenWorld w;
    const std::vector<std::string> refs = {w.payment(), w.payment()};
    w.send_due(""); // as configured before the fix: no return URL
    for (const auto& ref : refs) {
        INFO(ref);
        const std::string op = w.column(ref, "operation_id");
        CHECK(w.column(ref, "state") == "needs_review");
        CHECK(w.column(ref, "review_code") == "request_rejected");
        CHECK(w.column(ref, "review_reason").find("14_030: Return URL is missing.") !=
              std::string::npos);
        CHECK(w.fake_adyen.executions[op] == 0);
        CHECK(w.fake_adyen.deliveries[op] == 1);
    }
    CHECK(w.count("payment_attempts", "outcome = 'rejected' AND error_class = "
                                      "'request_rejected:14_030' AND http_status = 422") == 2);
    CHECK(w.count("payments", "state = 'failed'") == 0);

    engine::NightlyOptions no;
    no.send_due = false;
    providers::adyen::AdyenAdapter unconfigured(
        adyen_config(w.provider, ""), [&](const HttpRequest& r) { return w.fake_adyen.send(r); });
    const engine::NightlyReport night = engine::run_nightly(*w.db, {&unconfigured}, no);
    CHECK(night.exit_code() == 3);
    REQUIRE(night.rejected.size() == 1);
    CHECK(night.rejected[0].provider == w.provider);
    CHECK(night.rejected[0].code == "14_030");
    CHECK(night.rejected[0].payments == 2);
    bool named = false;
    for (const auto& [label, value] : engine::nightly_report(night).facts) {
        named = named ||
                (label == "rejected by " + w.provider && value.find("14_030: 2 payment(s)") == 0);
    }
    CHECK(named);

    // The return URL configured; the operator resolves each as retry.
    for (const auto& ref : refs) {
        store::Resolution r;
        r.tenant_id = w.tenant.tenant_id;
        r.payment_id = w.column(ref, "payment_id");
        r.generation = std::stoll(w.column(ref, "generation"));
        r.decision = OperatorDecision::retry;
        r.confirmed_no_charge = true;
        r.note = "return_url configured; Adyen executed nothing (422 14_030)";
        r.operator_name = "rejected-test";
        REQUIRE(store::resolve_payment(*w.db, r).status == store::ResolveResult::Status::applied);
    }
    w.send_due("https://shop.example.com/checkout/return");
    for (const auto& ref : refs) {
        INFO(ref);
        const std::string op = w.column(ref, "operation_id");
        CHECK(w.column(ref, "state") == "succeeded");
        CHECK(w.fake_adyen.executions[op] == 1);
        CHECK(w.fake_adyen.deliveries[op] == 2);
    }
    CHECK(engine::run_nightly(*w.db, {&unconfigured}, no).exit_code() == 0);

    // A card Adyen refuses is the customer's decline: failed, with the refusal reason.
    const std::string refused = w.payment("card_refused");
    w.send_due("https://shop.example.com/checkout/return");
    CHECK(w.column(refused, "state") == "failed");
    CHECK(w.column(refused, "review_code").empty());
    CHECK(w.fake_adyen.executions[w.column(refused, "operation_id")] == 1);
    CHECK(w.count("payment_attempts",
                  "outcome = 'declined' AND error_class = 'refused:Refused:Refused'") == 1);
}
