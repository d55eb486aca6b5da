// Issue 36, item 18, through the real binary (PAYRECON_BIN) against the fake Stripe provider: one
// nightly of a window at a time, and one diff of a provider's statement of a window. A second run
// started meanwhile (cron beside an operator) used to reconcile beside the first, safely, but list
// and report every finding twice; now it says which database session holds the window and does
// nothing. The test holds each lock from a session of its own, named as a payrecon process would
// be, and counts what the second run changed: the payments, the statement runs, the findings.
#include "reports/report.hpp"
#include "tests/support/operated.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// The lock payrecon takes for `name` (store::try_run_lock), held by a session of the test's
// until it goes.
struct HeldRunLock {
    pqxx::connection conn;
    HeldRunLock(const std::string& url, const std::string& name)
        : conn(url + (url.find('?') == std::string::npos ? "?" : "&") +
               "application_name=payrecon%20nightly%20%28pid%204242%29") {
        pqxx::nontransaction tx(conn);
        tx.exec_params("SELECT pg_advisory_lock(hashtextextended($1, 0))", "payrecon run " + name);
    }
};

} // namespace

TEST_CASE("run locks: a second nightly of the same window says which process holds it and does "
          "nothing, and a statement diffed elsewhere is neither diffed nor reported twice",
          "[cli][db][nightly][statement]") {
    MigratedScratch scratch; // nightly's exit code depends on every payment in the database
    Operated w(scratch.url());
    const auto refs = w.payments(2); // pending: a nightly that runs sends them
    const long long now = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
    const long long from = now / 86400 * 86400;
    const std::string day = reports::format_utc_seconds(from).substr(0, 10);
    const std::string window = std::to_string(from) + " " + std::to_string(from + 86400);
    const std::vector<std::string> nightly = {"nightly", "--statement-date", day, "--json"};
    const auto runs = [&] {
        return std::stoll(
            w.value("SELECT count(*) FROM recon_runs WHERE provider = $1", w.config.name));
    };
    const auto unchanged = [&] {
        CHECK(w.state_of(refs[0]) == "pending");
        CHECK(w.state_of(refs[1]) == "pending");
        CHECK(runs() == 0);
        CHECK(w.count("payment_attempts") == 0);
    };

    {
        HeldRunLock held(w.url, "nightly " + window + " " + w.config.name);
        const Run second = w.payrecon(nightly);
        INFO(second.all());
        CHECK(second.exit_code == 1);
        const auto j = nlohmann::json::parse(second.out);
        CHECK(j["result"] == "not_run");
        const std::string failure = j["failure"];
        CHECK(contains(
            failure,
            "another nightly of the same providers is running on the statement window of " + day));
        CHECK(contains(failure, "payrecon nightly (pid 4242)")); // who holds it
        CHECK(contains(failure, "this one did nothing"));
        unchanged();
        // The text summary ends in one result line that says so.
        const Run text = w.payrecon({"nightly", "--statement-date", day});
        CHECK(text.exit_code == 1);
        CHECK(contains(
            text.out, "result: NOT RUN (exit 1) another nightly of the same providers is running"));
        CHECK(text.out.find("reconciled") == std::string::npos);
        unchanged();
        // Another window, or other providers, is another run.
        const Run other = w.payrecon({"nightly", "--no-statement", "--no-send", "--json"});
        INFO(other.all());
        CHECK(other.exit_code == 0);
    }

    // A statement of the provider's window being diffed elsewhere: `statement` refuses, exit 7,
    // naming the holder and where the result will be; nightly runs the rest and says why that
    // statement was not run.
    {
        HeldRunLock held(w.url, "statement " + w.config.name + " " + window);
        const Run statement = w.payrecon({"statement", "--provider", w.config.name, "--from", day});
        INFO(statement.all());
        CHECK(statement.exit_code == 7);
        CHECK(contains(statement.err,
                       "another run is diffing " + w.config.name + "'s statement of " + day));
        CHECK(contains(statement.err, "payrecon nightly (pid 4242)"));
        CHECK(contains(statement.err, "statement findings list --provider " + w.config.name));
        CHECK(runs() == 0);
        const Run beside = w.payrecon(nightly);
        INFO(beside.all());
        const auto j = nlohmann::json::parse(beside.out);
        CHECK(j["statements"].empty());
        REQUIRE(j["statements_not_run"].size() == 1);
        CHECK(j["statements_not_run"][0]["provider"] == w.config.name);
        CHECK(contains(j["statements_not_run"][0]["why"].get<std::string>(),
                       "another run is diffing"));
        CHECK(runs() == 0);
        // The rest of the night was done: both payments sent and charged.
        CHECK(w.state_of(refs[0]) == "succeeded");
        CHECK(w.state_of(refs[1]) == "succeeded");
    }

    // Both let go: the window runs, once.
    const Run done = w.payrecon(nightly);
    INFO(done.all());
    CHECK(done.exit_code == 0);
    const auto j = nlohmann::json::parse(done.out);
    CHECK(j["result"] == "clean");
    REQUIRE(j["statements"].size() == 1);
    CHECK(runs() == 1);
}
