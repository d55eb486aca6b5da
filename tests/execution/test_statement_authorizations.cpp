// The statement diff of authorisations (issue 32, DESIGN section 16) against the fake provider over
// loopback HTTP, for each provider that lists its payments by window (Stripe, Square, PayPal):
// payments made with capture "manual", authorised by the executor, then held, captured in full or
// in part, or voided through payrecon -- each matched on its payment's key -- beside one captured
// in the provider's dashboard and one we hold voided that the provider still holds, each an
// authorization_mismatch, counted in recon_findings and the report.
#include "engine/statement.hpp"
#include "providers/registry.hpp"
#include "services/captures.hpp"
#include "services/intake.hpp"
#include "tests/execution/statement_support.hpp"

#include <catch2/catch.hpp>
#include <map>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// A world of `n` payments of 100.00 EUR made with capture "manual", each authorised.
struct Authorisations {
    World w;
    std::unique_ptr<providers::Provider> provider;
    std::vector<std::string> ids; // payment IDs

    Authorisations(const std::string& kind, int n) : w(kind, {}) {
        w.config.settle_delay = std::chrono::seconds(0);
        provider = providers::create_provider(w.config);
        IntakeService intake(*w.db, test_keys());
        for (int i = 0; i < n; ++i) {
            const std::string ref = unique_name("auth");
            const std::string body =
                R"({"amount": 10000, "currency": "EUR", "merchant_reference": ")" + ref +
                R"(", "provider": ")" + w.config.name + R"(", "payment_method": ")" + w.method +
                R"(", "capture": "manual"})";
            const auto r = intake.create_payment(w.writer.principal, "k-" + ref, body, "");
            REQUIRE(r.status == 202);
            ids.push_back(nlohmann::json::parse(r.body)["id"].get<std::string>());
        }
        send_all(w, *provider);
        for (const auto& id : ids) {
            REQUIRE(payment(id, "state") == "succeeded");
        }
    }
    std::string payment(const std::string& id, const std::string& column) {
        return query_value("SELECT coalesce(" + column +
                               "::text, '') FROM payments WHERE payment_id = $1::uuid",
                           id);
    }
    void capture(const std::string& id, long long amount) {
        CaptureService captures(*w.db, test_keys());
        REQUIRE(captures
                    .create_capture(w.writer.principal, id, unique_name("ck"),
                                    R"({"amount": )" + std::to_string(amount) + "}", "")
                    .status == 202);
    }
    void void_it(const std::string& id) {
        CaptureService captures(*w.db, test_keys());
        REQUIRE(captures.create_void(w.writer.principal, id, unique_name("vk"), "", "").status ==
                202);
    }
    // Sends what is due; what the provider accepted without an outcome (Checkout.com's 202) is
    // left to the reconciler, which none of the listing providers needs here.
    void settle() { send_all(w, *provider); }
};

} // namespace

TEST_CASE("statement authorisations: held, captured in full or in part, and voided match on "
          "each side, a dashboard capture and a void the provider never saw are "
          "authorization_mismatch",
          "[statement][db][captures]") {
    const std::string kind = GENERATE(as<std::string>{}, "stripe", "square", "paypal");
    INFO(kind);
    Authorisations a(kind, 6);
    REQUIRE(a.provider->capabilities().list_transactions);
    const auto& ids = a.ids;
    // ids[0]: held, nothing captured on either side                      -> matched
    // ids[1]: captured in full through payrecon                         -> matched
    a.capture(ids[1], 10000);
    // ids[2]: captured in part (40.00 of 100.00), the rest released      -> matched
    a.capture(ids[2], 4000);
    // ids[3]: voided through payrecon                                   -> matched
    a.void_it(ids[3]);
    a.settle();
    CHECK(a.payment(ids[1], "captured_minor") == "10000");
    CHECK(a.payment(ids[2], "captured_minor") == "4000");
    CHECK_FALSE(a.payment(ids[3], "voided_at").empty());
    // ids[4]: captured in the provider's dashboard, never through payrecon -> mismatch
    providers::AuthorizationOrder dashboard;
    dashboard.kind = OperationKind::capture;
    dashboard.operation_id = "dashboard-" + unique_name("c");
    dashboard.operation_row_id = new_uuid();
    dashboard.payment_id = ids[4];
    dashboard.payment_operation_id = a.payment(ids[4], "operation_id");
    dashboard.payment_reference = a.payment(ids[4], "provider_reference");
    dashboard.amount = Money{10000, "EUR"};
    dashboard.authorized_minor = 10000;
    REQUIRE(a.provider->capture(dashboard).outcome == providers::Outcome::succeeded);
    // ids[5]: voided in our books only (the void never reached the provider) -> mismatch
    exec_sql("UPDATE payments SET voided_at = now(), void_held = true WHERE payment_id = '" +
             ids[5] + "'");
    if (kind == "paypal") {
        a.w.fake->advance_clock(std::chrono::hours(4)); // past its transaction search's lag
    }

    const engine::StatementOptions window = window_around_now();
    const reports::Report report = engine::run_statement(*a.w.db, *a.provider, window);
    REQUIRE_FALSE(report.failure);
    for (const auto& f : report.findings) {
        UNSCOPED_INFO(f.category << ": " << f.detail);
    }
    CHECK(counts_of(report) ==
          std::map<std::string, long long>{{"matched", 4}, {"authorization_mismatch", 2}});
    CHECK(report.exit_code == 3);
    std::map<std::string, std::string> detail_of; // payment ID -> detail
    for (const auto& f : report.findings) {
        REQUIRE(f.payment_id);
        detail_of[*f.payment_id] = f.detail;
    }
    REQUIRE(detail_of.count(ids[4]) == 1);
    CHECK(detail_of[ids[4]].find("payrecon holds no capture") != std::string::npos);
    REQUIRE(detail_of.count(ids[5]) == 1);
    CHECK(detail_of[ids[5]].find("payrecon voided it, the provider still holds") !=
          std::string::npos);

    const std::string run =
        query_value("SELECT run_id::text FROM recon_runs WHERE provider = $1", a.w.config.name);
    CHECK(query_value("SELECT count(*) FROM recon_findings WHERE run_id = $1::uuid AND category = "
                      "'authorization_mismatch'",
                      run) == "2");
    // The provider's record of the held authorisation, as stored: authorised, nothing captured.
    const auto record_of = [&](const std::string& id, const std::string& column) {
        return query_value("SELECT " + column + " FROM statement_records WHERE run_id = '" + run +
                               "'::uuid AND match_key = $1",
                           a.payment(id, "operation_id"));
    };
    CHECK(record_of(ids[0], "status || ' ' || coalesce(amount_captured::text, 'unsaid')") ==
          (kind == "paypal" ? "authorized unsaid" : "authorized 0"));
    if (kind == "paypal") {
        // Its captures are entries of their own, kept with the run: ours of ids[1] and ids[2],
        // and the dashboard's.
        CHECK(query_value("SELECT count(*) FROM statement_records WHERE run_id = $1::uuid AND "
                          "kind = 'capture'",
                          run) == "3");
    } else {
        CHECK(record_of(ids[2], "amount_captured::text") == "4000");
    }
    // As stored: the same categories, read back without asking the provider.
    const reports::Report stored = engine::stored_statement_report(
        *a.w.db, a.w.config.name, window.window_from, window.window_to, "");
    CHECK(counts_of(stored) == counts_of(report));
}
