// Issue 36, item 11, through the real binary (PAYRECON_BIN) against the fake Stripe provider: bulk
// work with selectors, each payment fenced by its own generation and audited on its own.
// `review recheck --provider P --code C` rechecks every payment of P in review as C as the single
// `review recheck ID` does (a payment changed since it was selected is asked nothing), and
// `review resolve --from FILE` decides one payment per line as the single `review resolve` does
// (a stale generation or a reference nothing can check refuses that line; the others apply). A dry
// run of either changes nothing. Outcomes are counted in payments, audit_log, outbox and
// payment_lookups, and in the fake provider's ledger.
#include "tests/cli/cli_runner.hpp"
#include "tests/support/operated.hpp"
#include "tests/support/wait.hpp"

#include <catch2/catch.hpp>
#include <fstream>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// Everything a payment has written so far, to show that a command wrote nothing for it.
struct Footprint {
    std::string state;
    long long generation = 0;
    long long lookups = 0;
    long long events = 0;
    long long audits = 0;
    bool operator==(const Footprint& o) const {
        return state == o.state && generation == o.generation && lookups == o.lookups &&
               events == o.events && audits == o.audits;
    }
};
std::ostream& operator<<(std::ostream& os, const Footprint& f) {
    return os << "{" << f.state << ", generation " << f.generation << ", lookups " << f.lookups
              << ", events " << f.events << ", audits " << f.audits << "}";
}
Footprint footprint(Operated& w, const std::string& ref) {
    return {w.state_of(ref), w.generation_of(ref), w.lookups(ref), w.events(ref), w.audits(ref)};
}
std::vector<Footprint> footprints(Operated& w, const std::vector<std::string>& refs) {
    std::vector<Footprint> out;
    for (const auto& ref : refs) {
        out.push_back(footprint(w, ref));
    }
    return out;
}

// The tenant's rows in the tables an operator's decision writes to.
struct Rows {
    long long audits = 0;
    long long lookups = 0;
    long long events = 0;
    bool operator==(const Rows& o) const {
        return audits == o.audits && lookups == o.lookups && events == o.events;
    }
};
Rows rows(Operated& w) {
    return {w.count("audit_log"), w.count("payment_lookups"), w.count("outbox")};
}

// The merchant references of `refs` in the order a bulk recheck takes them: longest in review
// first (updated_at, then payment ID).
std::vector<std::string> in_review_order(Operated& w, std::vector<std::string> refs) {
    std::sort(refs.begin(), refs.end(), [&](const std::string& a, const std::string& b) {
        const auto key = [&](const std::string& ref) {
            return w.value("SELECT to_char(updated_at, 'YYYYMMDDHH24MISSUS') || payment_id::text "
                           "FROM payments WHERE merchant_reference = $1",
                           ref);
        };
        return key(a) < key(b);
    });
    return refs;
}

std::filesystem::path write_lines(Operated& w, const std::string& name,
                                  const std::vector<std::string>& lines) {
    const auto path = w.dir.path() / name;
    std::ofstream out(path);
    for (const auto& l : lines) {
        out << l << "\n";
    }
    return path;
}

// One decision of a --from file.
std::string decision(Operated& w, const std::string& ref, long long generation,
                     const std::string& as, const std::string& note,
                     nlohmann::json extra = nlohmann::json::object()) {
    nlohmann::json j = {{"payment_id", w.payment_id_of(ref)},
                        {"generation", generation},
                        {"as", as},
                        {"note", note}};
    j.update(extra);
    return j.dump();
}

} // namespace

TEST_CASE("bulk review: recheck --provider --code rechecks each payment in review with that code "
          "on its own, fenced by the generation it was selected at: a dry run writes nothing, a "
          "payment decided meanwhile is asked nothing, others are untouched",
          "[cli][db][review][bulk]") {
    Operated w;
    // Four payments the provider charged but whose answers were lost, in review as
    // lookup_failing (the provider's search was down); one of them moved to another code.
    const auto all = w.unknown_payments(4, fake::Fault::execute_then_fin);
    w.set_lookup_down(true);
    REQUIRE(w.payrecon({"reconcile", "--lookup-failures", "1"}).exit_code == 3);
    for (const auto& ref : all) {
        REQUIRE(w.state_of(ref) == "needs_review");
        REQUIRE(w.column(ref, "review_code") == "lookup_failing");
    }
    const std::string other = all[3];
    w.exec("UPDATE payments SET review_code = 'schedule_exhausted' WHERE merchant_reference = $1",
           other);
    const std::vector<std::string> refs =
        in_review_order(w, std::vector<std::string>(all.begin(), all.begin() + 3));
    w.set_lookup_down(false);
    const std::vector<std::string> selector = {"review",      "recheck", "--provider",
                                               w.config.name, "--code",  "lookup_failing"};
    const auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = selector;
        args.insert(args.end(), extra.begin(), extra.end());
        return args;
    };

    // The dry run: what it would recheck, and the count; nothing asked, nothing written.
    const Rows before = rows(w);
    const auto before_each = footprints(w, all);
    const Run dry = w.payrecon(with({"--dry-run"}));
    INFO(dry.all());
    CHECK(dry.exit_code == 0);
    for (const auto& ref : refs) {
        CHECK(contains(dry.out, "would recheck  " + w.payment_id_of(ref)));
    }
    CHECK_FALSE(contains(dry.out, w.payment_id_of(other)));
    CHECK(contains(dry.out, "dry run: 3 payment(s) of " + w.config.name +
                                " in review as lookup_failing would be rechecked"));
    CHECK(rows(w) == before);
    CHECK(footprints(w, all) == before_each);
    const Run dry_json = w.payrecon(with({"--dry-run", "--json"}));
    const auto dj = nlohmann::json::parse(dry_json.out);
    CHECK(dj["selected"] == 3);
    CHECK(dj["rechecked"] == 0);
    CHECK(rows(w) == before);

    // A code a recheck cannot settle is refused, naming what to do instead.
    const Run duplicate = w.payrecon(
        {"review", "recheck", "--provider", w.config.name, "--code", "remote_duplicate"});
    CHECK(duplicate.exit_code == 2);
    CHECK(contains(duplicate.err, "cannot settle a payment in review as remote_duplicate"));
    CHECK(w.payrecon({"review", "recheck", "--provider", w.config.name, "--code", "nope"})
              .exit_code == 2);
    CHECK(w.payrecon({"review", "recheck", "--code", "lookup_failing"}).exit_code == 2);
    CHECK(rows(w) == before);

    // The real run, slowed down at the provider so that the third payment can be decided by an
    // operator after the selection and before its turn: the recheck is stopped while it waits
    // for the second answer.
    w.write_config({{"timeout_ms", 60000}});
    auto faults = w.fake->faults();
    faults.latency = std::chrono::milliseconds(3000);
    w.fake->set_faults(faults);
    const auto before_refs = footprints(w, refs);
    auto bulk = w.start(with({"--json"}), {{"PAYRECON_OPERATOR", "dave"}}, ProcessGroup::own);
    REQUIRE(wait_until([&] { return w.lookups(refs[0]) == before_refs[0].lookups + 1; },
                       std::chrono::seconds(60)));
    bulk->signal(SIGSTOP);
    const Run decided = w.resolve_succeeded(refs[2], w.intent_of(refs[2]), "found it by hand");
    INFO(decided.all());
    REQUIRE(decided.exit_code == 0);
    const Footprint third = footprint(w, refs[2]);
    bulk->signal(SIGCONT);
    const Run run = bulk->wait();
    faults.latency = std::chrono::milliseconds(0);
    w.fake->set_faults(faults);

    // The changed one makes the run exit 7, after the others were rechecked.
    CHECK(run.exit_code == 7);
    CHECK(contains(run.err, "1 payment(s) changed since they were selected"));
    const auto j = nlohmann::json::parse(run.out);
    CHECK(j["selected"] == 3);
    CHECK(j["rechecked"] == 2);
    CHECK(j["changed"] == 1);
    CHECK(j["settled"] == nlohmann::json{{"succeeded", 2}});
    CHECK(j["still_in_review"] == 0);
    REQUIRE(j["payments"].size() == 3);
    for (std::size_t i = 0; i < 2; ++i) {
        INFO(refs[i]);
        const auto& p = j["payments"][i];
        CHECK(p["payment_id"] == w.payment_id_of(refs[i]));
        CHECK(p["status"] == "rechecked");
        CHECK(p["selected_generation"] == before_refs[i].generation);
        CHECK(p["generation"] == w.generation_of(refs[i]));
        // As the single recheck: adopted, one lookup, one audit row by the operator, one event.
        CHECK(w.state_of(refs[i]) == "succeeded");
        CHECK(w.generation_of(refs[i]) > before_refs[i].generation);
        CHECK(w.lookups(refs[i], "status = 'found' AND applied AND actor = 'recheck:dave'") == 1);
        CHECK(w.audits(refs[i], "action = 'payment.reconciled' AND actor = 'recheck:dave'") == 1);
        CHECK(w.events(refs[i], "event_type = 'payment.succeeded'") == 1);
        CHECK(w.executions(refs[i]) == 1);
    }
    // Decided meanwhile: asked nothing, nothing written by the recheck.
    CHECK(j["payments"][2]["status"] == "changed");
    CHECK(footprint(w, refs[2]) == third);
    CHECK(w.audits(refs[2], "actor = 'recheck:dave'") == 0);
    // Another code: untouched.
    CHECK(footprint(w, other) == before_each[3]);

    // Nothing left to recheck.
    const Run again = w.payrecon(selector);
    CHECK(again.exit_code == 0);
    CHECK(contains(again.out, "no payment(s) or refund(s) of " + w.config.name));
}

TEST_CASE("bulk review: resolve --from decides each line as the single resolve does -- a stale "
          "generation and an unchecked reference refused, the others applied, one audit row "
          "each -- and a dry run or a bad line changes nothing",
          "[cli][db][review][bulk]") {
    Operated w;
    // Five payments in review as no_lookup: sent once, nothing executed, the provider's lookups
    // switched off.
    const auto refs = w.unknown_payments(5, fake::Fault::drop_before_execute);
    w.write_config({{"capabilities", {{"lookup", false}}}});
    REQUIRE(w.payrecon({"reconcile"}).exit_code == 3);
    for (const auto& ref : refs) {
        REQUIRE(w.state_of(ref) == "needs_review");
    }
    const long long g = w.generation_of(refs[0]);
    const std::vector<std::string> lines = {
        "# tonight's decisions, checked at the provider",
        decision(w, refs[0], w.generation_of(refs[0]), "failed", "declined at the provider"),
        "",
        decision(w, refs[1], w.generation_of(refs[1]), "retry", "nothing there, key still kept",
                 {{"confirm_no_charge", true}}),
        // Shown before the last reconcile: a stale generation.
        decision(w, refs[2], w.generation_of(refs[2]) - 1, "failed", "declined"),
        // A reference nothing can check (no lookup, no evidence), without unverified.
        decision(w, refs[3], w.generation_of(refs[3]), "succeeded", "the customer says so",
                 {{"provider_reference", "pi_madeup000"}}),
        decision(w, refs[4], w.generation_of(refs[4]), "succeeded", "seen in the dashboard",
                 {{"provider_reference", "pi_checked_by_hand"}, {"unverified", true}}),
    };
    const auto file = write_lines(w, "decisions.jsonl", lines);

    // A file with one bad line refuses the whole file: the line named, nothing decided.
    const Rows before = rows(w);
    const auto before_each = footprints(w, refs);
    {
        std::vector<std::string> bad = lines;
        bad[4] = R"({"payment_id": "x", "generation": 1, "as": "maybe", "note": "n"})";
        bad.push_back(decision(w, refs[0], g, "failed", "twice"));
        const Run r =
            w.payrecon({"review", "resolve", "--from", write_lines(w, "bad.jsonl", bad).string()});
        INFO(r.all());
        CHECK(r.exit_code == 2);
        CHECK(contains(r.err, "2 line(s) are not a decision; nothing was decided"));
        CHECK(contains(r.err, "line 5: \"as\" must be \"succeeded\", \"failed\" or \"retry\""));
        CHECK(contains(r.err, "line 8: payment " + w.payment_id_of(refs[0]) +
                                  " is decided on line 2 already"));
        CHECK(rows(w) == before);
        CHECK(footprints(w, refs) == before_each);
    }
    // The flags of one decision do not go with a file.
    CHECK(w.payrecon({"review", "resolve", "--from", file.string(), "--as", "failed"}).exit_code ==
          2);

    // The dry run makes every check and writes nothing: the same lines refused.
    const Run dry = w.payrecon({"review", "resolve", "--from", file.string(), "--dry-run"});
    INFO(dry.all());
    CHECK(dry.exit_code == 7);
    CHECK(
        contains(dry.out, "line 2: payment " + w.payment_id_of(refs[0]) + " would become failed"));
    CHECK(contains(dry.out, "line 5: REFUSED: payment " + w.payment_id_of(refs[2]) +
                                " changed since it was shown"));
    CHECK(contains(dry.out, "line 6: REFUSED: the reference pi_madeup000 could not be checked"));
    CHECK(contains(dry.out, "dry run: 3 of 5 decision(s) would be applied, 2 refused"));
    CHECK(rows(w) == before);
    CHECK(footprints(w, refs) == before_each);
    // From standard input, the same.
    const auto piped =
        run_binary(std::string(k_key_env) + "=x",
                   "--database '" + w.url + "' --config '" + w.config_file.string() +
                       "' review resolve --from - --dry-run --json < '" + file.string() + "'");
    INFO(piped.output);
    CHECK(piped.exit_code == 7);
    CHECK(contains(piped.output, "\"would_apply\": 3"));
    CHECK(rows(w) == before);

    // The real run: three applied, two refused, each line on its own.
    const Run run =
        w.payrecon({"--operator", "erin", "review", "resolve", "--from", file.string(), "--json"});
    INFO(run.all());
    CHECK(run.exit_code == 7);
    CHECK(contains(run.err, "2 of 5 decision(s) were refused"));
    const auto j = nlohmann::json::parse(run.out);
    CHECK(j["decisions"] == 5);
    CHECK(j["applied"] == 3);
    CHECK(j["refused"] == 2);
    REQUIRE(j["lines"].size() == 5);
    CHECK(j["lines"][0]["line"] == 2);
    CHECK(j["lines"][2]["status"] == "refused");
    CHECK(contains(j["lines"][2]["hint"].get<std::string>(),
                   "payrecon review show " + w.payment_id_of(refs[2])));
    CHECK(j["lines"][3]["status"] == "refused");
    CHECK(j["lines"][4]["reference_checked"] == "unverified");

    const auto resolved = [&](const std::string& ref) {
        return w.audits(ref, "action = 'review.resolve' AND actor = 'erin'");
    };
    CHECK(w.state_of(refs[0]) == "failed");
    CHECK(w.generation_of(refs[0]) == before_each[0].generation + 1);
    CHECK(resolved(refs[0]) == 1);
    CHECK(w.events(refs[0], "event_type = 'payment.failed'") == 1);
    CHECK(w.state_of(refs[1]) == "retry_scheduled");
    CHECK(w.generation_of(refs[1]) == before_each[1].generation + 1);
    CHECK(resolved(refs[1]) == 1);
    CHECK(w.state_of(refs[4]) == "succeeded");
    CHECK(w.column(refs[4], "provider_reference") == "pi_checked_by_hand");
    CHECK(resolved(refs[4]) == 1);
    // Refused: exactly as before.
    CHECK(footprint(w, refs[2]) == before_each[2]);
    CHECK(footprint(w, refs[3]) == before_each[3]);
    CHECK(w.count("audit_log") == before.audits + 3);
    // Nothing was sent or charged by deciding.
    for (const auto& ref : refs) {
        CHECK(w.executions(ref) == 0);
    }

    // The same file again: every line is stale now or decided; nothing more is written.
    const Rows after = rows(w);
    const Run again = w.payrecon({"review", "resolve", "--from", file.string()});
    CHECK(again.exit_code == 7);
    CHECK(contains(again.out, "0 of 5 decision(s) applied, 5 refused"));
    CHECK(rows(w) == after);
}
