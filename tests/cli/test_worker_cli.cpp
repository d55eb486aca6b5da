// `payrecon worker` as an operator runs it (PAYRECON_BIN): started while the database is down (a
// daemon waits for it, as it does when the database goes away later; `--once` reports it); with a
// wrong API key (one call, the worker stops, every payment stays queued, exit 4 naming the
// variable; once the key is fixed each is charged once); payments an older worker sent to review
// for a refused key, requeued in one command; and what it says when no call gets through.

#include "store/executor_store.hpp"
#include "store/reconcile_store.hpp"
#include "tests/support/operated.hpp"
#include "tests/support/wait.hpp"

#include <catch2/catch.hpp>
#include <csignal>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// The JSON lines of `output` whose "event" is `event`.
std::vector<nlohmann::json> events_named(const std::string& output, const std::string& event) {
    std::vector<nlohmann::json> out;
    std::istringstream lines(output);
    for (std::string line; std::getline(lines, line);) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j.value("event", "") == event) {
            out.push_back(j);
        }
    }
    return out;
}

// `payrecon --database URL --config FILE args...` with `key` as the provider's API key.
Run with_key(Operated& w, const std::string& key, const std::vector<std::string>& args) {
    std::vector<std::string> all{"--database", w.url, "--config", w.config_file.string()};
    all.insert(all.end(), args.begin(), args.end());
    return w.payrecon_raw(all, {{k_key_env, key}});
}

} // namespace

TEST_CASE("worker: a daemon started while PostgreSQL is down waits for it instead of exiting, "
          "a SIGTERM meanwhile exits 0, and --once exits 5",
          "[cli][db][worker][regression]") {
    // Found by the chaos run under the sanitizers: a worker started just before PostgreSQL stopped
    // exited 5 at startup, while one already running would have waited and reconnected.
    Operated w;
    const std::string down = "postgresql://payrecon@127.0.0.1:1/payrecon"; // nothing listens
    Payrecon daemon(w.dir.path(), w.env(),
                    {"--database", down, "--config", w.config_file.string(), "worker"});
    const auto tries = [&] {
        const std::string out = daemon.output_so_far();
        std::size_t n = 0;
        for (auto at = out.find("\"database_unavailable\""); at != std::string::npos;
             at = out.find("\"database_unavailable\"", at + 1)) {
            ++n;
        }
        return n;
    };
    REQUIRE(wait_until([&] { return tries() >= 2; }, std::chrono::seconds(20)));
    CHECK_FALSE(daemon.poll().has_value()); // still there, waiting
    daemon.signal(SIGTERM);
    const Run stopped = daemon.wait();
    INFO(stopped.all());
    CHECK(stopped.exit_code == 0);
    CHECK(stopped.out.find("\"retry_in_ms\"") != std::string::npos);
    CHECK(stopped.out.find("stopped while waiting for the database") != std::string::npos);

    const Run once = w.payrecon_raw(
        {"--database", down, "--config", w.config_file.string(), "worker", "--once"}, w.env());
    INFO(once.all());
    CHECK(once.exit_code == 5);
}

TEST_CASE(
    "worker: a wrong API key costs one provider call, leaves every payment queued and "
    "nothing in review, exits 4 naming the variable (nightly too), and with the key fixed each "
    "payment is charged once",
    "[cli][db][worker][credentials][regression]") {
    // Issue 36: with a wrong key, worker --once put 7 of 7 payments into request_rejected review
    // and exited 0. A scratch database: nightly's exit code depends on every payment in it.
    MigratedScratch scratch;
    Operated w(scratch.url());
    const auto refs = w.payments(7);
    const std::string wrong = "sk_test_rotated_away_" + to_hex(random_bytes(4));

    // The defaults: 4 executor threads claiming batches of 4 at once, and still one call.
    const Run refused = with_key(w, wrong, {"worker", "--once"});
    INFO(refused.all());
    CHECK(refused.exit_code == 4);
    CHECK(contains(refused.err, k_key_env));
    CHECK(contains(refused.err, "HTTP 401"));
    CHECK(w.fake->ledger()["deliveries"] == 1);
    CHECK(w.count("payments", "state IN ('pending', 'retry_scheduled')") == 7);
    CHECK(w.count("payments", "state = 'needs_review'") == 0);
    // Due at once for the next worker: nothing about them waits for a backoff.
    CHECK(w.count("payments", "state = 'retry_scheduled' AND next_attempt_at > now()") == 0);
    CHECK(w.count("payment_attempts", "outcome = 'rejected' AND http_status = 401") == 1);
    CHECK(w.count("payment_attempts", "outcome NOT IN ('rejected', 'not_sent')") == 0);
    for (const auto& ref : refs) {
        CHECK(w.executions(ref) == 0);
    }
    const auto logged = events_named(refused.out, "credentials_refused");
    REQUIRE(logged.size() == 1);
    CHECK(logged[0]["level"] == "error");
    CHECK(logged[0]["provider"] == w.config.name);
    CHECK(logged[0]["http_status"] == 401);
    CHECK(contains(logged[0]["check"].get<std::string>(), k_key_env));
    CHECK(events_named(refused.out, "request_rejected").empty());
    const auto stopped = events_named(refused.out, "worker_stopped");
    REQUIRE(stopped.size() == 1);
    CHECK(stopped[0]["attempted"] == 1);
    CHECK(stopped[0]["credentials_refused"] == nlohmann::json::array({w.config.name}));
    CHECK_FALSE(contains(refused.all(), wrong));

    // nightly's send pass says the same, after one call of its own.
    const Run nightly = with_key(w, wrong, {"nightly", "--no-statement"});
    INFO(nightly.all());
    CHECK(nightly.exit_code == 4);
    CHECK(contains(nightly.out, "result: CONFIGURATION ERROR (exit 4)"));
    CHECK(contains(nightly.out, k_key_env));
    CHECK(contains(nightly.out, "REFUSED our credentials (HTTP 401"));
    CHECK(w.fake->ledger()["deliveries"] == 2);
    CHECK(w.count("payments", "state = 'needs_review'") == 0);
    const Run nightly_json = with_key(w, wrong, {"nightly", "--no-statement", "--json"});
    CHECK(nightly_json.exit_code == 4);
    const auto summary = nlohmann::json::parse(nightly_json.out);
    CHECK(summary["result"] == "configuration_error");
    REQUIRE(summary["credentials_refused"].size() == 1);
    CHECK(summary["credentials_refused"][0]["provider"] == w.config.name);
    CHECK(contains(summary["credentials_refused"][0]["check"].get<std::string>(), k_key_env));
    CHECK(w.fake->ledger()["deliveries"] == 3);

    // A payment whose only calls the provider refused for our key was never executed: it can be
    // canceled as never sent (it was refused as "may have reached the provider").
    const std::string refused_id =
        w.value("SELECT payment_id::text FROM payment_attempts WHERE tenant_id = $1::uuid AND "
                "outcome = 'rejected' ORDER BY attempt_no LIMIT 1",
                w.tenant.tenant_id);
    REQUIRE(!refused_id.empty());
    std::string canceled;
    for (const auto& ref : refs) {
        canceled = w.payment_id_of(ref) == refused_id ? ref : canceled;
    }
    const Run cancel = w.payrecon({"payments", "cancel", refused_id, "--generation",
                                   std::to_string(w.generation_of(canceled)), "--note",
                                   "the customer called it off; the provider refused our key"});
    INFO(cancel.all());
    CHECK(cancel.exit_code == 0);
    CHECK(w.state_of(canceled) == "failed");
    CHECK(w.events(canceled, "event_type = 'payment.failed'") == 1);

    // The key fixed: the next worker charges each of the others once, with its operation ID.
    const Run fixed = w.payrecon({"worker", "--once"});
    INFO(fixed.all());
    CHECK(fixed.exit_code == 0);
    for (const auto& ref : refs) {
        INFO(ref);
        CHECK(w.state_of(ref) == (ref == canceled ? "failed" : "succeeded"));
        CHECK(w.executions(ref) == (ref == canceled ? 0 : 1));
    }
    CHECK(w.fake->ledger()["deliveries"] == 3 + 6);
    CHECK(w.fake->ledger()["charged"]["eur"] == 6 * 2500);
    CHECK(w.payrecon({"nightly", "--no-statement"}).exit_code == 0);
}

TEST_CASE("review requeue --auth-failures: payments in review from a refused key go back to the "
          "queue, each fenced and audited, only those, and the worker then charges each once",
          "[cli][db][worker][credentials][review]") {
    Operated w;
    // What a worker before issue 36 made of a wrong key (two payments), and of a parameter the
    // provider did not know (one): in review as request_rejected, the attempt's HTTP status kept.
    const auto refs = w.payments(3);
    using namespace std::chrono_literals;
    const auto claims = store::claim_payments(*w.db, "old-worker", 60s, 3, {w.config.name});
    REQUIRE(claims.size() == 3);
    std::map<std::string, std::string> status_of; // payment ID -> what the provider answered
    for (std::size_t i = 0; i < claims.size(); ++i) {
        const bool parameter = i == 2;
        store::AttemptResult a;
        a.outcome = "rejected";
        a.http_status = parameter ? 400 : 401;
        a.error_class =
            parameter ? "request_rejected:parameter_unknown" : "request_rejected:authentication";
        store::Settlement s;
        s.to = PaymentState::needs_review;
        s.review_code = "request_rejected";
        s.reason = "the provider refused the request before executing it";
        REQUIRE(store::settle_attempt(*w.db, claims[i], a, s));
        status_of[claims[i].payment_id] = parameter ? "400" : "401";
    }
    std::vector<std::string> key_refused;
    std::string parameter_refused;
    for (const auto& ref : refs) {
        if (status_of[w.payment_id_of(ref)] == "401") {
            key_refused.push_back(ref);
        } else {
            parameter_refused = ref;
        }
    }
    REQUIRE(key_refused.size() == 2);
    const std::vector<std::string> requeue = {"review", "requeue", "--provider", w.config.name,
                                              "--auth-failures"};

    // Looking first writes nothing.
    auto dry = requeue;
    dry.insert(dry.end(), {"--dry-run", "--json"});
    const Run looked = w.payrecon(dry);
    INFO(looked.all());
    REQUIRE(looked.exit_code == 0);
    const auto listed = nlohmann::json::parse(looked.out);
    CHECK(listed["payments"].size() == 2);
    CHECK(listed["left"] == 1);
    CHECK(w.count("payments", "state = 'needs_review'") == 3);
    // A requeue says what was fixed, like every decision; without --auth-failures it refuses.
    CHECK(w.payrecon(requeue).exit_code == 2);
    CHECK(w.payrecon({"review", "requeue", "--provider", w.config.name, "--note", "x"}).exit_code ==
          2);
    CHECK(w.count("payments", "state = 'needs_review'") == 3);

    // A stale generation is fenced out: nothing written.
    const auto stale = store::requeue_payment(
        *w.db, {w.tenant.tenant_id, w.payment_id_of(key_refused[0]),
                w.generation_of(key_refused[0]) - 1, "key rotated", "alice"});
    CHECK(stale.status == store::ResolveResult::Status::changed);
    // A payment refused for another reason is not requeued, even when named alone.
    const auto other =
        store::requeue_payment(*w.db, {w.tenant.tenant_id, w.payment_id_of(parameter_refused),
                                       w.generation_of(parameter_refused), "key rotated", "alice"});
    CHECK(other.status == store::ResolveResult::Status::not_resolvable);
    CHECK(contains(other.why, "HTTP 400"));
    CHECK(w.count("audit_log", "action = 'review.requeue'") == 0);

    auto with_note = requeue;
    with_note.insert(with_note.end(), {"--note", "rotated the API key in CLITEST_STRIPE_API_KEY"});
    const Run done = w.payrecon(with_note);
    INFO(done.all());
    CHECK(done.exit_code == 0);
    CHECK(contains(done.out, "2 payment(s) requeued"));
    CHECK(contains(done.out, "1 other payment(s)"));
    for (const auto& ref : key_refused) {
        INFO(ref);
        CHECK(w.state_of(ref) == "retry_scheduled");
        CHECK(w.column(ref, "review_code").empty());
        CHECK(w.audits(ref, "action = 'review.requeue' AND actor <> '' AND "
                            "detail->>'note' LIKE 'rotated the API key%HTTP 401%'") == 1);
        CHECK(w.events(ref, "event_type = 'payment.retry_scheduled'") == 1);
    }
    CHECK(w.state_of(parameter_refused) == "needs_review");
    CHECK(w.audits(parameter_refused, "action = 'review.requeue'") == 0);
    // Again: nothing left to requeue.
    const Run again = w.payrecon(with_note);
    CHECK(again.exit_code == 0);
    CHECK(contains(again.out, "no payment of provider"));
    CHECK(w.count("audit_log", "action = 'review.requeue'") == 2);

    const Run sent = w.payrecon({"worker", "--once"});
    INFO(sent.all());
    CHECK(sent.exit_code == 0);
    for (const auto& ref : key_refused) {
        CHECK(w.state_of(ref) == "succeeded");
        CHECK(w.executions(ref) == 1);
        CHECK(w.deliveries(ref) == 1); // the old worker's attempts were written, never sent
    }
    CHECK(w.executions(parameter_refused) == 0);
    CHECK(w.state_of(parameter_refused) == "needs_review");
}

TEST_CASE("worker: an attempt not sent is logged with libcurl's reason in words, and --once "
          "exits 1 when no call got through",
          "[cli][db][worker][regression]") {
    Operated w;
    const auto refs = w.payments(2);
    w.write_config({}, "http://127.0.0.1:" + std::to_string(closed_port()));
    const Run r = w.payrecon({"worker", "--once", "--retry-base", "1h"});
    INFO(r.all());
    CHECK(r.exit_code == 1);
    CHECK(contains(r.err, "no call reached a provider"));
    const auto lines = events_named(r.out, "attempt_not_sent");
    REQUIRE(lines.size() == 2);
    for (const auto& line : lines) {
        CHECK(line["reason"] == "could not connect");
        CHECK(line["error_class"] == "not_sent:curl_7");
        CHECK(line["called"] == true);
        CHECK(line["became"] == "retry_scheduled");
        CHECK(line["provider"] == w.config.name);
    }
    for (const auto& ref : refs) {
        CHECK(w.state_of(ref) == "retry_scheduled");
    }

    // A call that gets through is not "nothing got through": exit 0.
    w.write_config();
    w.exec("UPDATE payments SET next_attempt_at = now() WHERE merchant_reference = $1", refs[0]);
    w.exec("UPDATE payments SET next_attempt_at = now() WHERE merchant_reference = $1", refs[1]);
    const Run ok = w.payrecon({"worker", "--once"});
    CHECK(ok.exit_code == 0);
    CHECK(events_named(ok.out, "attempt_not_sent").empty());
}
