// The statement diff of refunds (issue 31, DESIGN section 16) against the fake provider over
// loopback HTTP, for each provider that lists its refunds by window (Stripe, Square, PayPal): the
// provider's refunds listed after its charges into the same run, each diffed against ours by its
// operation ID, one finding per discrepancy -- counted in recon_findings, statement_records and
// the report -- and the refunded charges themselves matched, not status_mismatch.
#include "engine/statement.hpp"
#include "providers/registry.hpp"
#include "services/refunds.hpp"
#include "tests/execution/refunds.hpp"
#include "tests/execution/statement_support.hpp"

#include <catch2/catch.hpp>
#include <map>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// The world's payments, sent, and what the test does to their refunds.
struct Books {
    World w;
    std::unique_ptr<providers::Provider> provider;
    std::vector<std::string> refs;

    explicit Books(const std::string& kind) : w(kind, {}) {
        w.config.settle_delay = std::chrono::seconds(0);
        provider = providers::create_provider(w.config);
        refs = w.payments(4);
        send();
        for (const auto& ref : refs) {
            REQUIRE(w.state_of(ref) == "succeeded");
        }
    }
    void send() {
        engine::Executor ex(*w.db, {provider.get()}, w.options());
        while (ex.run_once() > 0) {
        }
    }
    std::string refund(const std::string& ref, long long amount) {
        RefundService refunds(*w.db, test_keys());
        const auto r =
            refunds.create_refund(w.writer.principal, w.payment_id_of(ref), unique_name("rk"),
                                  R"({"amount": )" + std::to_string(amount) + "}", "");
        REQUIRE(r.status == 202);
        return nlohmann::json::parse(r.body)["id"].get<std::string>();
    }
    std::string column(const std::string& refund_id, const std::string& name) {
        return query_value("SELECT coalesce(" + name + "::text, '') FROM operations WHERE id = $1",
                           refund_id);
    }
};

} // namespace

TEST_CASE("statement refunds: a refund of each kind of discrepancy is found exactly once, the "
          "refunded charges stay matched, and each finding names its refund",
          "[statement][db][refunds]") {
    const std::string kind = GENERATE(as<std::string>{}, "stripe", "square", "paypal");
    INFO(kind);
    Books b(kind);
    REQUIRE(b.provider->capabilities().list_refunds);
    // refs[0]: refunded 5.00, both sides agree                      -> refund_matched
    const std::string matched = b.refund(b.refs[0], 500);
    // refs[1]: 4.00 refunded there, and we hold it as 3.00           -> refund_amount_mismatch
    const std::string smaller = b.refund(b.refs[1], 400);
    // refs[2]: a refund the provider made, whose answer we have not settled -> unresolved
    const std::string unsettled = b.refund(b.refs[2], 300);
    b.send();
    for (const auto& id : {matched, smaller, unsettled}) {
        REQUIRE(b.column(id, "state") == (kind == "checkout" ? "unknown" : "succeeded"));
    }
    exec_sql("UPDATE operations SET amount_minor = 300 WHERE id = '" + smaller + "'");
    exec_sql("UPDATE operations SET state = 'unknown', next_attempt_at = now() + interval '1 day' "
             "WHERE id = '" +
             unsettled + "'");
    // refs[3]: we say refunded, the provider never saw it               -> refund_missing_remote
    const std::string never_sent = b.refund(b.refs[3], 200);
    exec_sql("UPDATE operations SET state = 'succeeded', attempt_count = 1, "
             "first_attempt_at = now(), last_attempt_at = now() WHERE id = '" +
             never_sent + "'");
    // refs[3] again: refunded in the provider's dashboard, outside payrecon -> refund_missing_local
    providers::RefundOrder dashboard;
    dashboard.operation_id = "dashboard-" + unique_name("r");
    dashboard.refund_id = new_uuid();
    dashboard.payment_id = b.w.payment_id_of(b.refs[3]);
    dashboard.payment_reference =
        query_value("SELECT provider_reference FROM payments WHERE payment_id = $1::uuid",
                    dashboard.payment_id);
    dashboard.amount = Money{150, "EUR"};
    REQUIRE(b.provider->refund(dashboard).outcome == providers::Outcome::succeeded);
    if (kind == "paypal") {
        b.w.fake->advance_clock(std::chrono::hours(4)); // past its transaction search's lag
    }

    const engine::StatementOptions window = window_around_now();
    const reports::Report report = engine::run_statement(*b.w.db, *b.provider, window);
    INFO(reports::format_utc_seconds(window.window_from));
    REQUIRE_FALSE(report.failure);
    const std::map<std::string, long long> want = {{"matched", 4},
                                                   {"refund_matched", 1},
                                                   {"refund_amount_mismatch", 1},
                                                   {"refund_unresolved_unknown", 1},
                                                   {"refund_missing_remote", 1},
                                                   {"refund_missing_local", 1}};
    for (const auto& f : report.findings) {
        UNSCOPED_INFO(f.category << ": " << f.detail);
    }
    CHECK(counts_of(report) == want);
    CHECK(report.exit_code == 3);
    CHECK(fact_of(report, "refunds").find("listed and diffed") != std::string::npos);
    // Money at risk: 4.00 - 3.00, the 3.00 unsettled, the 2.00 never sent, the 1.50 outside.
    CHECK(report.at_risk == std::map<std::string, long long>{{"EUR", 100 + 300 + 200 + 150}});
    const std::map<std::string, std::string> refund_of = {{"refund_amount_mismatch", smaller},
                                                          {"refund_unresolved_unknown", unsettled},
                                                          {"refund_missing_remote", never_sent}};
    for (const auto& f : report.findings) {
        INFO(f.category << ": " << f.detail);
        if (f.category == "refund_missing_local") {
            CHECK_FALSE(f.refund_id);
            CHECK_FALSE(f.payment_id);
            CHECK(f.remote_amount == 150);
            CHECK(f.operation_id == dashboard.operation_id);
        } else {
            REQUIRE(refund_of.count(f.category) == 1);
            CHECK(f.refund_id == refund_of.at(f.category));
            CHECK(f.payment_id == b.column(refund_of.at(f.category), "payment_id"));
        }
    }
    // Stored: the refund records by kind, and the findings with their refunds.
    const std::string run =
        query_value("SELECT run_id::text FROM recon_runs WHERE provider = $1", b.w.config.name);
    CHECK(query_value("SELECT refunds_listed::text FROM recon_runs WHERE run_id = $1::uuid", run) ==
          "true");
    CHECK(query_value("SELECT count(*) FROM statement_records WHERE run_id = $1::uuid AND kind = "
                      "'refund'",
                      run) == "4");
    CHECK(query_value("SELECT count(*) FROM statement_records WHERE run_id = $1::uuid AND kind = "
                      "'charge'",
                      run) == "4");
    CHECK(query_value("SELECT count(*) FROM recon_findings WHERE run_id = $1::uuid AND refund_id "
                      "IS NOT NULL",
                      run) == "3");
    // As stored: the same categories, read back without asking the provider.
    const reports::Report stored = engine::stored_statement_report(
        *b.w.db, b.w.config.name, window.window_from, window.window_to, "");
    CHECK(counts_of(stored) == want);
    CHECK(stored.at_risk == report.at_risk);
}
