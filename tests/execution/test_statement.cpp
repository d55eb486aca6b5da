// Statement reconciliation against the fake provider over loopback HTTP (DESIGN section 9): the
// provider's listing, stored and diffed against our payments, one finding per discrepancy.
#include "core/errors.hpp"
#include "core/store/statement_store.hpp"
#include "engine/statement.hpp"
#include "providers/registry.hpp"
#include "tests/execution/world.hpp"

#include <catch2/catch.hpp>

#include <map>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

long long now_s() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

engine::StatementOptions window_around_now() {
    engine::StatementOptions o;
    o.window_from = now_s() - 3600;
    o.window_to = now_s() + 3600;
    o.margin = std::chrono::seconds(60);
    o.wait = [](std::chrono::milliseconds) {};
    return o;
}

std::map<std::string, long long> counts_of(const reports::Report& r) {
    std::map<std::string, long long> out;
    for (const auto& [category, t] : r.totals) {
        if (t.count > 0) {
            out[category] = t.count;
        }
    }
    return out;
}

// Sends every pending payment of the world once.
void send_all(World& w, providers::Provider& p) {
    engine::Executor ex(*w.db, {&p}, w.options());
    while (ex.run_once() > 0) {
    }
}

} // namespace

TEST_CASE("statement: one discrepancy of each kind is found exactly once, and nothing else",
          "[statement][db]") {
    World w(next({}), /*idempotency=*/false); // without keys a second send charges again: a duplicate
    auto provider = providers::create_provider(w.config);
    const auto refs = w.payments(7);
    send_all(w, *provider);
    for (const auto& ref : refs) {
        REQUIRE(w.state_of(ref) == "succeeded");
    }
    const auto set = [](const std::string& assignment, const std::string& ref) {
        exec_sql("UPDATE payments SET " + assignment + " WHERE merchant_reference = '" + ref + "'");
    };
    // refs[0] stays matched.
    set("amount_minor = amount_minor + 100", refs[1]);                       // amount_mismatch
    set("currency = 'USD'", refs[2]);                                         // currency_mismatch
    set("state = 'failed'", refs[3]);                                         // status_mismatch
    set("state = 'unknown', provider_reference = NULL", refs[4]);             // unresolved_unknown
    set("state = 'retry_scheduled', next_attempt_at = now()", refs[5]);       // sent again: duplicate_remote
    send_all(w, *provider);
    REQUIRE(w.executions(w.op_of(refs[5])) == 2);
    // refs[6]: the provider charged it, and our record of it is gone (a restore from an older
    // backup): a payment of another provider name is invisible to this statement.
    set("provider = 'restored-elsewhere'", refs[6]);
    // missing_remote: we say succeeded, the provider never saw it.
    const std::string never_sent = w.payments(1)[0];
    set("state = 'succeeded', attempt_count = 1, first_attempt_at = now(), last_attempt_at = now()", never_sent);

    const reports::Report report = engine::run_statement(*w.db, *provider, window_around_now());
    REQUIRE_FALSE(report.failure);
    const std::map<std::string, long long> want = {
        {"matched", 1},         {"amount_mismatch", 1},    {"currency_mismatch", 1}, {"status_mismatch", 1},
        {"unresolved_unknown", 1}, {"duplicate_remote", 1}, {"missing_local", 1},     {"missing_remote", 1}};
    CHECK(counts_of(report) == want);
    CHECK(report.exit_code == 3);
    CHECK(report.findings.size() == 7); // matched ones are counted, not listed
    for (const auto& f : report.findings) {
        INFO(f.category << ": " << f.detail);
        CHECK_FALSE(f.detail.empty());
        if (f.category == "missing_local") {
            CHECK(f.remote_amount == 2500);
            CHECK(f.provider_reference.value_or("").rfind("pi_", 0) == 0);
            CHECK_FALSE(f.payment_id);
        }
    }
    const std::string run = query_value("SELECT run_id::text FROM recon_runs WHERE provider = $1", w.config.name);
    CHECK(query_value("SELECT count(*) FROM recon_findings WHERE run_id = $1::uuid", run) == "7");
    CHECK(query_value("SELECT status FROM recon_runs WHERE run_id = $1::uuid", run) == "done");
    CHECK(query_value("SELECT count(*) FROM statement_records WHERE run_id = $1::uuid AND raw IS NOT NULL", run) == "8");

    // The same window again replaces its findings instead of adding to them.
    const reports::Report again = engine::run_statement(*w.db, *provider, window_around_now());
    CHECK(counts_of(again) == want);
    CHECK(query_value("SELECT count(*) FROM recon_findings WHERE run_id = $1::uuid", run) == "7");
    CHECK(query_value("SELECT count(*) FROM recon_runs WHERE provider = $1", w.config.name) == "1");
    CHECK(query_value("SELECT runs FROM recon_runs WHERE run_id = $1::uuid", run) == "2");
}

TEST_CASE("statement: a listing that fails stops with exit 1 and resumes where it stopped",
          "[statement][db][fault]") {
    World w(next({}));
    auto provider = providers::create_provider(w.config);
    w.payments(3);
    send_all(w, *provider);
    auto faults = w.fake->faults();
    faults.lookup_down = true; // search and list answer 503
    w.fake->set_faults(faults);
    std::vector<std::chrono::milliseconds> waits;
    auto options = window_around_now();
    options.max_page_retries = 2;
    options.wait = [&](std::chrono::milliseconds d) { waits.push_back(d); };
    const reports::Report failed = engine::run_statement(*w.db, *provider, options);
    REQUIRE(failed.failure);
    CHECK(failed.exit_code == 1);
    CHECK(waits.size() == 2);
    CHECK(query_value("SELECT status FROM recon_runs WHERE provider = $1", w.config.name) == "listing");

    faults.lookup_down = false;
    w.fake->set_faults(faults);
    const reports::Report resumed = engine::run_statement(*w.db, *provider, options);
    CHECK_FALSE(resumed.failure);
    CHECK(resumed.exit_code == 0);
    CHECK(resumed.totals.at("matched").count == 3);
    CHECK(query_value("SELECT status FROM recon_runs WHERE provider = $1", w.config.name) == "done");
}

TEST_CASE("statement: a provider that cannot list is refused", "[statement][db]") {
    World w;
    w.config.overrides.list = false;
    auto provider = providers::create_provider(w.config);
    CHECK_THROWS_AS(engine::run_statement(*w.db, *provider, window_around_now()), Refused);
}
