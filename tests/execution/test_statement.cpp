// Statement reconciliation against the fake provider over loopback HTTP (DESIGN section 9): the
// provider's listing, stored and diffed against our payments, one finding per discrepancy.
#include "core/errors.hpp"
#include "engine/statement.hpp"
#include "providers/registry.hpp"
#include "store/statement_store.hpp"
#include "tests/execution/statement_support.hpp"
#include "tests/execution/world.hpp"
#include "tests/support/scripted_provider.hpp"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <thread>
#include <unistd.h>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// An orphan charge (one missing_local finding) seeded at the fake provider; its reference.
std::string seed_orphan(World& w, long long amount) {
    fake::OrphanCharge orphan;
    orphan.amount = amount;
    orphan.currency = "eur";
    return w.fake->seed_orphan_charge(orphan).front();
}

// The findings stored for the provider's last complete run of a window.
std::string complete_findings(const World& w) {
    return query_value("SELECT count(*) FROM recon_findings f JOIN recon_runs r USING (run_id) "
                       "WHERE r.provider = $1 AND r.status = 'done'",
                       w.config.name);
}

} // namespace

TEST_CASE("statement: a seeded ledger with one discrepancy of each category: each found exactly "
          "once, and nothing else",
          "[statement][db]") {
    World w(next({}));
    auto provider = providers::create_provider(w.config);
    const auto refs = w.payments(6);
    send_all(w, *provider);
    for (const auto& ref : refs) {
        REQUIRE(w.state_of(ref) == "succeeded");
    }
    // refs[0] stays matched though refunded in the provider's dashboard: the refund, made outside
    // payrecon, is the provider's listed refunds' finding (refund_missing_local), not the charge's.
    // The provider's side, seeded into its ledger:
    w.fake->seed_refunded({{"", w.op_of(refs[0])}, std::nullopt, std::nullopt});
    w.fake->seed_amount_mismatch({{"", w.op_of(refs[1])}, 2400});    // amount_mismatch
    w.fake->seed_duplicate_charge({w.op_of(refs[2]), std::nullopt}); // duplicate_remote
    fake::OrphanCharge orphan;                                       // missing_local
    orphan.amount = 7300;
    orphan.currency = "usd";
    const std::string orphan_id = w.fake->seed_orphan_charge(orphan).front();
    // Our side:
    const auto set = [](const std::string& assignment, const std::string& ref) {
        exec_sql("UPDATE payments SET " + assignment + " WHERE merchant_reference = '" + ref + "'");
    };
    set("state = 'failed'", refs[3]);                             // status_mismatch
    set("currency = 'USD'", refs[4]);                             // currency_mismatch
    set("state = 'unknown', provider_reference = NULL", refs[5]); // unresolved_unknown
    const std::string never_sent = w.payments(1)[0];              // missing_remote
    set("state = 'succeeded', attempt_count = 1, first_attempt_at = now(), last_attempt_at = now()",
        never_sent);

    const engine::StatementOptions window = window_around_now();
    const reports::Report report = engine::run_statement(*w.db, *provider, window);
    REQUIRE_FALSE(report.failure);
    const std::map<std::string, long long> want = {
        {"matched", 1},         {"amount_mismatch", 1},    {"currency_mismatch", 1},
        {"status_mismatch", 1}, {"unresolved_unknown", 1}, {"duplicate_remote", 1},
        {"missing_local", 1},   {"missing_remote", 1},     {"refund_missing_local", 1}};
    CHECK(counts_of(report) == want);
    CHECK(report.exit_code == 3);
    CHECK(report.findings.size() == 8); // matched ones are counted, not listed
    for (const auto& f : report.findings) {
        INFO(f.category << ": " << f.detail);
        CHECK_FALSE(f.detail.empty());
        if (f.category == "missing_local") {
            // The orphan, with its amount and the provider's reference.
            CHECK(f.remote_amount == 7300);
            CHECK(f.remote_currency == "USD");
            CHECK(f.provider_reference == orphan_id);
            CHECK_FALSE(f.payment_id);
        }
        if (f.category == "status_mismatch") {
            CHECK(f.operation_id == w.op_of(refs[3]));
            CHECK(f.remote_state == "succeeded");
        }
        if (f.category == "refund_missing_local") {
            CHECK(f.remote_amount == 2500);
            CHECK_FALSE(f.refund_id);
        }
    }
    const std::string run =
        query_value("SELECT run_id::text FROM recon_runs WHERE provider = $1", w.config.name);
    CHECK(query_value("SELECT count(*) FROM recon_findings WHERE run_id = $1::uuid", run) == "8");
    CHECK(query_value("SELECT status FROM recon_runs WHERE run_id = $1::uuid", run) == "done");
    // Raw and normalised: every listed PaymentIntent (6 of ours, the duplicate, the orphan) and
    // Refund.
    CHECK(query_value(
              "SELECT count(*) FROM statement_records WHERE run_id = $1::uuid AND raw IS NOT NULL",
              run) == "9");
    CHECK(query_value("SELECT count(*) FROM statement_records WHERE run_id = $1::uuid AND status = "
                      "'refunded' "
                      "AND amount_refunded = 2500",
                      run) == "1");

    // The same window again replaces its run and findings instead of adding to them.
    const reports::Report again = engine::run_statement(*w.db, *provider, window);
    CHECK(counts_of(again) == want);
    CHECK(query_value("SELECT count(*) FROM recon_findings WHERE run_id = $1::uuid", run) == "0");
    CHECK(query_value("SELECT count(*) FROM recon_findings f JOIN recon_runs r USING (run_id) "
                      "WHERE r.provider = $1",
                      w.config.name) == "8");
    CHECK(query_value("SELECT count(*) FROM recon_runs WHERE provider = $1", w.config.name) == "1");
    CHECK(query_value("SELECT runs FROM recon_runs WHERE provider = $1", w.config.name) == "2");
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
    CHECK(query_value("SELECT status FROM recon_runs WHERE provider = $1", w.config.name) ==
          "listing");

    faults.lookup_down = false;
    w.fake->set_faults(faults);
    const reports::Report resumed = engine::run_statement(*w.db, *provider, options);
    CHECK_FALSE(resumed.failure);
    CHECK(resumed.exit_code == 0);
    CHECK(resumed.totals.at("matched").count == 3);
    CHECK(query_value("SELECT status FROM recon_runs WHERE provider = $1", w.config.name) ==
          "done");
}

TEST_CASE("statement: a wrong API key is a configuration error, not retried, and the window's "
          "last complete result is kept until a run of it completes",
          "[statement][db][fault][regression]") {
    World w(next({}));
    auto provider = providers::create_provider(w.config);
    w.payments(2);
    send_all(w, *provider);
    const std::string orphan_id = seed_orphan(w, 1200);
    const auto window = window_around_now();
    const reports::Report first = engine::run_statement(*w.db, *provider, window);
    REQUIRE(first.exit_code == 3);
    REQUIRE(complete_findings(w) == "1");
    const std::string done_run =
        query_value("SELECT run_id::text FROM recon_runs WHERE provider = $1", w.config.name);

    // The key was rotated and the configuration not: every listing answers 401.
    providers::ProviderConfig wrong = w.config;
    wrong.credentials = providers::ApiKey{"STRIPE_API_KEY", Secret("sk_test_rotated_away")};
    auto refused_provider = providers::create_provider(wrong);
    std::vector<std::chrono::milliseconds> waits;
    auto options = window;
    options.credentials = "the API key in STRIPE_API_KEY (provider " + w.config.name + ")";
    options.wait = [&](std::chrono::milliseconds d) { waits.push_back(d); };
    const reports::Report refused = engine::run_statement(*w.db, *refused_provider, options);
    REQUIRE(refused.failure);
    CHECK(refused.exit_code == 4);
    CHECK(waits.empty()); // not retried
    CHECK(refused.failure->find("HTTP 401") != std::string::npos);
    CHECK(refused.failure->find("STRIPE_API_KEY") != std::string::npos);
    CHECK(refused.failure->find("resume") == std::string::npos);
    CHECK(refused.failure->find("last complete result is kept") != std::string::npos);
    // What the last complete run found is still there: its run, its records and its finding.
    CHECK(complete_findings(w) == "1");
    CHECK(query_value("SELECT status FROM recon_runs WHERE run_id = $1::uuid", done_run) == "done");
    CHECK(query_value("SELECT count(*) FROM statement_records WHERE run_id = $1::uuid", done_run) ==
          "3");
    CHECK(query_value("SELECT count(*) FROM recon_runs WHERE provider = $1", w.config.name) == "2");

    // Fixed: the next run completes and replaces the last result whole (one run row again).
    seed_orphan(w, 1200);
    const reports::Report fixed = engine::run_statement(*w.db, *provider, window);
    CHECK_FALSE(fixed.failure);
    CHECK(fixed.totals.at("missing_local").count == 2);
    CHECK(complete_findings(w) == "2");
    CHECK(query_value("SELECT count(*) FROM recon_runs WHERE provider = $1", w.config.name) == "1");
    // The refused run was resumed and completed: two runs of this window.
    CHECK(query_value("SELECT runs FROM recon_runs WHERE provider = $1", w.config.name) == "2");
    CHECK(query_value("SELECT count(*) FROM recon_runs WHERE run_id = $1::uuid", done_run) == "0");
    CHECK(query_value("SELECT count(*) FROM statement_records WHERE run_id = $1::uuid", done_run) ==
          "0");
    CHECK(query_value("SELECT count(*) FROM recon_findings WHERE provider_reference = $1",
                      orphan_id) == "1");
}

TEST_CASE("statement: a re-run whose listing fails keeps the last complete result",
          "[statement][db][fault][regression]") {
    World w(next({}));
    auto provider = providers::create_provider(w.config);
    w.payments(3);
    send_all(w, *provider);
    seed_orphan(w, 500);
    const auto window = window_around_now();
    REQUIRE(engine::run_statement(*w.db, *provider, window).exit_code == 3);
    auto faults = w.fake->faults();
    faults.lookup_down = true;
    w.fake->set_faults(faults);
    auto options = window;
    options.max_page_retries = 1;
    const reports::Report failed = engine::run_statement(*w.db, *provider, options);
    REQUIRE(failed.failure);
    CHECK(failed.exit_code == 1);
    CHECK(complete_findings(w) == "1");
    CHECK(query_value(
              "SELECT string_agg(status, ',' ORDER BY status) FROM recon_runs WHERE provider = $1",
              w.config.name) == "done,listing");
}

TEST_CASE("statement: a provider that can neither list nor look a payment up is refused",
          "[statement][db]") {
    World w;
    w.config.overrides.list = false;
    w.config.overrides.lookup = false;
    auto provider = providers::create_provider(w.config);
    CHECK_THROWS_AS(engine::run_statement(*w.db, *provider, window_around_now()), Refused);
}

TEST_CASE("statement: two statements of one window at once (two nightly jobs): one diffs it, the "
          "other says which session holds it and does nothing, each finding stored once",
          "[statement][db][race]") {
    World w(next({}));
    auto provider = providers::create_provider(w.config);
    const auto refs = w.payments(40);
    send_all(w, *provider);
    exec_sql("UPDATE payments SET currency = 'USD' WHERE merchant_reference IN ('" + refs[0] +
             "', '" + refs[1] + "')"); // two currency mismatches
    auto slow = w.fake->faults();
    slow.latency = std::chrono::milliseconds(5); // the listings overlap
    w.fake->set_faults(slow);
    auto db = connect();
    auto p = providers::create_provider(w.config);
    int busy = 0;
    // Each round a window of its own, so that both start its run at the same moment.
    for (int round = 0; round < 8; ++round) {
        engine::StatementOptions window = window_around_now();
        window.window_from -= round;
        std::optional<reports::Report> reports[2];
        std::string refused[2];
        std::atomic<int> ready{0};
        const auto together = [&] {
            ++ready;
            while (ready < 2) {
            }
        };
        const auto run = [&](int i, store::Db& on, providers::Provider& via) {
            try {
                reports[i] = engine::run_statement(on, via, window);
            } catch (const engine::StatementBusy& e) {
                refused[i] = e.what();
            } catch (const std::exception& e) {
                refused[i] = std::string("unexpected: ") + e.what(); // reported below
            }
        };
        std::thread other([&] {
            together();
            run(1, *db, *p);
        });
        together();
        run(0, *w.db, *provider);
        other.join();
        // One diffed the window (or both, one after the other, if they did not overlap); the
        // other, if it found the window held, says so and who holds it.
        int complete = 0;
        for (int i = 0; i < 2; ++i) {
            INFO(round << ": " << refused[i]);
            if (reports[i]) {
                ++complete;
                REQUIRE_FALSE(reports[i]->failure);
                CHECK(counts_of(*reports[i]) ==
                      std::map<std::string, long long>{{"matched", 38}, {"currency_mismatch", 2}});
            } else {
                ++busy;
                CHECK(refused[i].find("another run is diffing " + w.config.name +
                                      "'s statement of ") == 0);
                CHECK(refused[i].find("database session ") != std::string::npos);
                CHECK(refused[i].find("this one did nothing") != std::string::npos);
            }
        }
        CHECK(complete >= 1);
        const std::string run_id =
            query_value("SELECT run_id::text FROM recon_runs WHERE provider = $1 AND window_from = "
                        "to_timestamp(" +
                            std::to_string(window.window_from) + ") AND status = 'done'",
                        w.config.name);
        CHECK(query_value("SELECT count(*) FROM statement_records WHERE run_id = $1::uuid",
                          run_id) == "40");
        CHECK(query_value("SELECT count(*) FROM recon_findings WHERE run_id = $1::uuid", run_id) ==
              "2");
    }
    CHECK(query_value("SELECT count(*) FROM recon_runs WHERE provider = $1", w.config.name) == "8");
    WARN(busy << " of 8 rounds found the window held by the other statement");
}

TEST_CASE("statement: sides larger than the sort memory spill sorted runs and find the same, and a "
          "temporary directory that cannot be written fails the diff with where and what to do",
          "[statement][db]") {
    World w(next({}));
    auto provider = providers::create_provider(w.config);
    const auto refs = w.payments(300);
    send_all(w, *provider);
    w.fake->seed_amount_mismatch({{"", w.op_of(refs[7])}, 999});
    w.fake->seed_duplicate_charge({w.op_of(refs[150]), std::nullopt});
    w.fake->seed_refunded({{"", w.op_of(refs[299])}, std::nullopt, std::nullopt});
    fake::OrphanCharge orphan;
    orphan.amount = 4100;
    orphan.currency = "eur";
    w.fake->seed_orphan_charge(orphan);
    exec_sql("UPDATE payments SET currency = 'USD' WHERE merchant_reference = '" + refs[42] + "'");
    const std::map<std::string, long long> want = {
        {"matched", 297},        {"amount_mismatch", 1},
        {"duplicate_remote", 1}, {"refund_missing_local", 1},
        {"missing_local", 1},    {"currency_mismatch", 1}};
    const auto stored_findings = [&] {
        return query_value(
            "SELECT string_agg(category || ' ' || coalesce(operation_id, '-') || ' ' || "
            "coalesce(provider_reference, '-') || ' ' || coalesce(remote_amount::text, '-'), ', ' "
            "ORDER BY finding_no) FROM recon_findings f JOIN recon_runs r USING (run_id) "
            "WHERE r.provider = $1",
            w.config.name);
    };

    // All in memory (the default: 32 MiB for our side; the provider's comes from its index).
    engine::StatementOptions window = window_around_now();
    const reports::Report in_memory = engine::run_statement(*w.db, *provider, window);
    REQUIRE_FALSE(in_memory.failure);
    CHECK(counts_of(in_memory) == want);
    const std::string findings = stored_findings();

    // 4 KiB: about 100 records a run, so our side is written as sorted runs and merged.
    // A directory that does not exist proves the runs are written; the diff fails, and says so.
    window.sorting.memory_bytes = 4096;
    window.sorting.temp_dir = "/nonexistent/payrecon-statement-spill";
    try {
        engine::run_statement(*w.db, *provider, window);
        FAIL("the diff wrote its sorted runs into a directory that does not exist");
    } catch (const std::runtime_error& e) {
        const std::string message = e.what();
        INFO(message);
        CHECK_THAT(message, Catch::Contains("/nonexistent/payrecon-statement-spill") &&
                                Catch::Contains("No such file or directory") &&
                                Catch::Contains("TMPDIR"));
    }
    // Nothing half-done: the new run is still listed, for a diff to try again, and the last
    // complete one is kept beside it.
    CHECK(query_value(
              "SELECT string_agg(status, ',' ORDER BY status) FROM recon_runs WHERE provider = $1",
              w.config.name) == "done,listed");

    char dir[] = "/tmp/payrecon-statement-spill-XXXXXX";
    REQUIRE(::mkdtemp(dir) != nullptr);
    window.sorting.temp_dir = dir;
    const reports::Report spilled = engine::run_statement(*w.db, *provider, window);
    REQUIRE_FALSE(spilled.failure);
    CHECK(counts_of(spilled) == want);
    CHECK(stored_findings() == findings); // the same findings, in the same order
    CHECK(query_value("SELECT status FROM recon_runs WHERE provider = $1", w.config.name) ==
          "done");
    // The runs' file was unlinked when it was created: the directory is empty again.
    CHECK(::rmdir(dir) == 0);
}

TEST_CASE("statement: PayPal's books through Transaction Search -- every payment matched, a "
          "charge made outside payrecon found missing_local",
          "[statement][db][paypal]") {
    World w("paypal", next({fake::Fault::decline}));
    auto provider = providers::create_provider(w.config);
    const auto refs = w.payments(5);
    send_all(w, *provider);
    CHECK(count_rows("payments", w.tenant.tenant_id, "state = 'succeeded'") == 4);
    CHECK(count_rows("payments", w.tenant.tenant_id, "state = 'failed'") == 1);
    // A charge someone made in PayPal with no payment of ours behind it.
    providers::PaymentOrder orphan;
    orphan.operation_id = "pr_made_in_the_paypal_dashboard";
    orphan.payment_id = "00000000-0000-7000-8000-000000000001";
    orphan.merchant_reference = "manual-1";
    orphan.amount = Money{777, "EUR"};
    orphan.payment_method = w.method;
    REQUIRE(provider->submit(orphan).outcome == providers::Outcome::succeeded);

    const reports::Report report = engine::run_statement(*w.db, *provider, window_around_now());
    INFO(report.failure.value_or(""));
    CHECK_FALSE(report.failure);
    // The four charges, and the declined one: its DECLINED capture (status D) agrees with us.
    // Nothing else found.
    CHECK(counts_of(report) ==
          std::map<std::string, long long>{{"matched", 5}, {"missing_local", 1}});
    CHECK(report.exit_code == 3); // the orphan needs a person
}

namespace {

// A provider as the statement sees it, counting its lookups and calling `before_lookup` (with the
// lookup's number, from 1) ahead of each one: a test turns the fake's faults on mid-run with it.
class WatchedProvider : public ForwardingProvider {
public:
    WatchedProvider(providers::Provider& inner, std::function<void(int)> before_lookup = {})
        : ForwardingProvider(inner), m_before_lookup(std::move(before_lookup)) {}
    providers::LookupResult lookup(const providers::PaymentOrder& order) override {
        ++lookups;
        looked_up.push_back(order.operation_id);
        if (m_before_lookup) {
            m_before_lookup(lookups);
        }
        return ForwardingProvider::lookup(order);
    }
    providers::ListPage list(const providers::TimeWindow& window,
                             const std::optional<std::string>& cursor) override {
        ++lists;
        return ForwardingProvider::list(window, cursor);
    }
    int lookups = 0;
    int lists = 0;
    std::vector<std::string> looked_up; // operation IDs, in order

private:
    std::function<void(int)> m_before_lookup;
};

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

} // namespace

TEST_CASE("statement: Checkout.com's books by looking up each of our payments -- matched, a "
          "reference it charged twice duplicate_remote, another amount amount_mismatch, a payment "
          "we call succeeded that it never had missing_remote, and nothing charged by it",
          "[statement][db][checkout]") {
    World w("checkout", next({fake::Fault::decline}));
    w.config.settle_delay = std::chrono::seconds(0);
    auto checkout = providers::create_provider(w.config);
    REQUIRE_FALSE(checkout->capabilities().list_transactions);
    const auto refs = w.payments(5);
    send_all(w, *checkout);
    REQUIRE(w.state_of(refs[0]) == "failed"); // declined
    for (std::size_t i = 1; i < refs.size(); ++i) {
        REQUIRE(w.state_of(refs[i]) == "succeeded");
    }
    // refs[1] charged a second time under its reference: a day later, the key forgotten, a blind
    // retry (what payrecon never does) made another payment.
    w.fake->advance_clock(std::chrono::hours(25));
    providers::PaymentOrder again;
    again.operation_id = w.op_of(refs[1]);
    again.payment_id = w.payment_id_of(refs[1]);
    again.merchant_reference = refs[1];
    again.amount = Money{2500, "EUR"};
    again.payment_method = w.method;
    REQUIRE(checkout->submit(again).outcome == providers::Outcome::succeeded);
    REQUIRE(w.executions(again.operation_id) == 2);
    // refs[2]: our record says 26.00 where the provider charged 25.00.
    exec_sql("UPDATE payments SET amount_minor = 2600 WHERE merchant_reference = '" + refs[2] +
             "'");
    // A payment we say succeeded that never reached the provider (sent, by its first attempt).
    const std::string never = w.payments(1)[0];
    exec_sql("UPDATE payments SET state = 'succeeded', first_attempt_at = now() "
             "WHERE merchant_reference = '" +
             never + "'");
    // One that was never sent is not looked up: the provider cannot have it.
    const std::string unsent = w.payments(1)[0];
    const nlohmann::json before = w.fake->ledger();

    WatchedProvider watched(*checkout);
    const reports::Report report = engine::run_statement(*w.db, watched, window_around_now());
    INFO(report.failure.value_or(""));
    REQUIRE_FALSE(report.failure);
    // Matched: refs[3] and refs[4]; refs[0], declined on both sides; the unsent one, charged on
    // neither. Nothing else found.
    CHECK(counts_of(report) == std::map<std::string, long long>{{"matched", 4},
                                                                {"duplicate_remote", 1},
                                                                {"amount_mismatch", 1},
                                                                {"missing_remote", 1}});
    CHECK(report.exit_code == 3);
    // One lookup for each payment sent, none for the unsent one, and no listing asked for.
    CHECK(watched.lookups == 6);
    CHECK(watched.lists == 0);
    CHECK(std::find(watched.looked_up.begin(), watched.looked_up.end(), w.op_of(unsent)) ==
          watched.looked_up.end());
    CHECK(fact_of(report, "lookups made") == "6");
    CHECK(contains(fact_of(report, "read by"), "a charge made outside payrecon is not seen"));
    // The statement read, and charged nothing.
    const nlohmann::json after = w.fake->ledger();
    CHECK(after["charged"] == before["charged"]);
    CHECK(after["executions"] == before["executions"]);
    CHECK(query_value("SELECT count(*) FROM statement_records s JOIN recon_runs r USING (run_id) "
                      "WHERE r.provider = $1",
                      w.config.name) == "6"); // 5 charges or declines, and the duplicate
    CHECK(complete_findings(w) == "3");
}

TEST_CASE("statement: a Checkout.com lookup that keeps failing stops the run (exit 1) with the "
          "pages before it kept, and the next run goes on from the payment that failed",
          "[statement][db][checkout][fault]") {
    World w("checkout", {});
    w.config.settle_delay = std::chrono::seconds(0);
    auto checkout = providers::create_provider(w.config);
    const auto refs = w.payments(5);
    send_all(w, *checkout);
    // The lookup endpoint goes down before the third lookup (the second page's first).
    WatchedProvider failing(*checkout, [&](int n) {
        if (n == 3) {
            auto faults = w.fake->faults();
            faults.lookup_down = true;
            w.fake->set_faults(faults);
        }
    });
    auto options = window_around_now();
    options.lookups_per_page = 2;
    options.max_page_retries = 1;
    std::vector<std::chrono::milliseconds> waits;
    options.wait = [&](std::chrono::milliseconds d) { waits.push_back(d); };
    const reports::Report failed = engine::run_statement(*w.db, failing, options);
    REQUIRE(failed.failure);
    CHECK(failed.exit_code == 1);
    CHECK(contains(*failed.failure, "looking up payment"));
    CHECK(contains(*failed.failure, "resume where it stopped"));
    CHECK(failing.lookups == 4); // two found, then the third tried twice
    CHECK(waits.size() == 1);
    CHECK(query_value("SELECT status || ' ' || pages || ' ' || remote_records FROM recon_runs "
                      "WHERE provider = $1",
                      w.config.name) == "listing 1 2");

    auto faults = w.fake->faults();
    faults.lookup_down = false;
    w.fake->set_faults(faults);
    WatchedProvider resumed_by(*checkout);
    const reports::Report resumed = engine::run_statement(*w.db, resumed_by, options);
    INFO(resumed.failure.value_or(""));
    CHECK_FALSE(resumed.failure);
    CHECK(resumed.exit_code == 0);
    CHECK(resumed.totals.at("matched").count == 5);
    CHECK(contains(fact_of(resumed, "resumed"), "page 2"));
    // Only the three not read before, from the one that failed on.
    CHECK(resumed_by.lookups == 3);
    REQUIRE(failing.looked_up.size() == 4);
    REQUIRE_FALSE(resumed_by.looked_up.empty());
    CHECK(resumed_by.looked_up.front() == failing.looked_up[2]);
    CHECK(query_value("SELECT status FROM recon_runs WHERE provider = $1", w.config.name) ==
          "done");
}

TEST_CASE("statement: a run left unfinished by lookups is not finished by a listing once the "
          "provider's configuration lets it list again",
          "[statement][db][fault]") {
    World w;
    w.config.settle_delay = std::chrono::seconds(0);
    w.config.overrides.list = false; // an account without listing: read by lookups
    auto by_lookup = providers::create_provider(w.config);
    w.payments(3);
    send_all(w, *by_lookup);
    WatchedProvider failing(*by_lookup, [&](int n) {
        if (n == 2) {
            auto faults = w.fake->faults();
            faults.lookup_down = true;
            w.fake->set_faults(faults);
        }
    });
    auto options = window_around_now();
    options.lookups_per_page = 1;
    options.max_page_retries = 0;
    REQUIRE(engine::run_statement(*w.db, failing, options).exit_code == 1);
    REQUIRE(query_value("SELECT status || ' ' || pages FROM recon_runs WHERE provider = $1",
                        w.config.name) == "listing 1");

    auto faults = w.fake->faults();
    faults.lookup_down = false;
    w.fake->set_faults(faults);
    w.config.overrides.list.reset();
    auto listing = providers::create_provider(w.config);
    WatchedProvider watched(*listing);
    try {
        engine::run_statement(*w.db, watched, options);
        FAIL("a listing went on from a lookup's cursor");
    } catch (const UsageError& e) {
        CHECK(contains(e.what(), "was looking our payments up"));
        CHECK(contains(e.hint(), "\"list\" capability back"));
    }
    CHECK(watched.lists == 0);
    CHECK(watched.lookups == 0);
}

TEST_CASE("statement: Checkout.com's window must end longer ago than its lookup's lag, or an "
          "absence would prove nothing",
          "[statement][db][checkout]") {
    World w("checkout", {});
    w.config.settle_delay = std::chrono::seconds(600);
    auto checkout = providers::create_provider(w.config);
    REQUIRE(checkout->capabilities().lookup_staleness == std::chrono::seconds(600));
    WatchedProvider watched(*checkout);
    auto options = window_around_now(); // ends in an hour
    try {
        engine::run_statement(*w.db, watched, options);
        FAIL("a window ending now was read by lookups");
    } catch (const Refused& e) {
        CHECK(contains(e.what(), "too recently"));
        CHECK(contains(e.hint(), "run it after"));
    }
    options.window_from = now_s() - 7200;
    options.window_to = now_s() - 601;
    const reports::Report report = engine::run_statement(*w.db, watched, options);
    CHECK_FALSE(report.failure);
    CHECK(report.exit_code == 0);
    CHECK(watched.lookups == 0); // no payment of ours in that window
    CHECK(query_value("SELECT count(*) FROM recon_runs WHERE provider = $1", w.config.name) == "1");
}

TEST_CASE("statement: a payment re-sent or charged late across a window's edge is matched by its "
          "operation ID, never missing_remote in one window and missing_local in the next -- a "
          "sweep of edges, delays and margins",
          "[statement][db]") {
    // Our side is dated by the first attempt, the provider's by its charge. Each payment here was
    // first sent `delay` before the provider charged it: a re-send by the nightly, or a late
    // charge. Before the fix, every delay longer than the margin was a false missing_remote in the
    // window of the first attempt and a false missing_local in the window of the charge.
    World w(next({}));
    auto provider = providers::create_provider(w.config);
    const std::vector<long long> delays = {30, 59, 61, 599, 3 * 3600, 5 * 3600 + 17, 25 * 3600};
    const auto refs = w.payments(static_cast<int>(delays.size()));
    send_all(w, *provider);
    for (std::size_t i = 0; i < refs.size(); ++i) {
        REQUIRE(w.state_of(refs[i]) == "succeeded");
        exec_sql(
            "UPDATE payments SET first_attempt_at = first_attempt_at - make_interval(secs => " +
            std::to_string(delays[i]) + ") WHERE merchant_reference = '" + refs[i] + "'");
    }
    const long long charged = now_s();
    const long long width = 2 * 3600;
    const long long first = charged - 26 * 3600 - width;
    long long windows = 0;
    for (const long long margin : {0LL, 60LL}) {
        for (const long long offset : {0LL, 20 * 60 + 7LL, 40 * 60 + 13LL, 7199LL}) {
            long long matched = 0;
            // Oldest window first, as a nightly meets them: the window of a first attempt is
            // diffed before the provider's record of its charge is in any run.
            for (long long from = first + offset; from < charged + 60; from += width) {
                engine::StatementOptions o;
                o.window_from = from;
                o.window_to = from + width;
                o.margin = std::chrono::seconds(margin);
                o.wait = [](std::chrono::milliseconds) {};
                const reports::Report report = engine::run_statement(*w.db, *provider, o);
                ++windows;
                INFO("margin " << margin << " s, window " << o.window_from << ".." << o.window_to
                               << ": " << report.failure.value_or(""));
                REQUIRE_FALSE(report.failure);
                auto counts = counts_of(report);
                matched += counts["matched"];
                counts.erase("matched");
                CHECK(counts.empty()); // nothing missing, nothing else
                CHECK(report.exit_code == 0);
            }
            INFO("margin " << margin << " s, offset " << offset << " s");
            // Each payment is matched in its first attempt's window, and again in its charge's
            // window when its first attempt lies outside that window's reading.
            CHECK(matched >= static_cast<long long>(refs.size()));
            CHECK(matched <= 2 * static_cast<long long>(refs.size()));
        }
    }
    CHECK(windows > 100);
    // A match across windows is stored with both times; the statement charged nothing.
    const std::string across = query_value(
        "SELECT count(*) FROM recon_findings f JOIN recon_runs r USING (run_id) WHERE r.provider = "
        "$1 AND f.category = 'matched' AND f.detail LIKE 'matched by operation ID across windows: "
        "payrecon first sent it at %; the provider''s record is of %'",
        w.config.name);
    CHECK(std::stoll(across) > 0);
    CHECK(query_value("SELECT count(*) FROM recon_findings f JOIN recon_runs r USING (run_id) "
                      "WHERE r.provider = $1 AND f.category <> 'matched'",
                      w.config.name) == "0");
    for (const auto& ref : refs) {
        CHECK(w.executions(w.op_of(ref)) == 1);
        CHECK(w.deliveries(w.op_of(ref)) == 1);
    }
}

TEST_CASE("statement: a payment the provider never charged is still missing_remote after its "
          "counterpart was looked for in other windows and by lookup",
          "[statement][db]") {
    World w(next({}));
    auto provider = providers::create_provider(w.config);
    const std::string never_sent = w.payments(1)[0];
    exec_sql(
        "UPDATE payments SET state = 'succeeded', attempt_count = 1, first_attempt_at = now(), "
        "last_attempt_at = now() WHERE merchant_reference = '" +
        never_sent + "'");
    WatchedProvider watched(*provider);
    const reports::Report report = engine::run_statement(*w.db, watched, window_around_now());
    CHECK(counts_of(report) == std::map<std::string, long long>{{"missing_remote", 1}});
    CHECK(watched.looked_up == std::vector<std::string>{w.op_of(never_sent)});
    CHECK(contains(fact_of(report, "missing looked up"),
                   "1 payments or refunds the window's listing lacks"));
    CHECK(report.exit_code == 3);
}
