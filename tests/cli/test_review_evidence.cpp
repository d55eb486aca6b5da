// Issue 36, items 2 and 12, through the real binary (PAYRECON_BIN) against the fake Stripe
// provider with its lookups switched off (a no_lookup provider, as Adyen is): what the provider
// was seen to hold -- a record in a complete statement run, a verified webhook -- orders the
// commands `review show` offers and refuses a reference it contradicts; a reference nothing can
// check needs --unverified; every command payrecon prints runs as printed (its note filled in);
// `review recheck` says that it sent nothing. The evidence rows are written with SQL as the
// statement and the webhook receiver write them. Outcomes are counted in payments, audit_log,
// outbox and payment_lookups, and in the fake provider's ledger.
#include "tests/support/operated.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// Everything a payment has written so far, to show that a refused command wrote nothing.
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

// `n` payments of 25.00 EUR in review as no_lookup: sent once, their answers lost, and reconciled
// with the provider's lookups switched off.
std::vector<std::string> in_review_no_lookup(Operated& w, int n) {
    const auto refs = w.unknown_payments(n, fake::Fault::drop_before_execute);
    w.write_config({{"capabilities", {{"lookup", false}}}});
    REQUIRE(w.payrecon({"reconcile"}).exit_code == 3);
    for (const auto& ref : refs) {
        REQUIRE(w.state_of(ref) == "needs_review");
        REQUIRE(w.column(ref, "review_code") == "no_lookup");
    }
    return refs;
}

// Runs `sql` with `params` on the test's connection; returns the first column of the first row.
template <typename... Params>
std::string write_sql(Operated& w, const std::string& sql, Params&&... params) {
    pqxx::work tx(w.sql_connection);
    const pqxx::result r = tx.exec_params(sql, std::forward<Params>(params)...);
    tx.commit();
    return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
}

// A complete statement run of `w`'s provider: a window of its own (`day` days back), no records.
std::string done_run(Operated& w, int day) {
    return write_sql(w,
                     "INSERT INTO recon_runs (provider, window_from, window_to, margin_s, status, "
                     "finished_at) VALUES ($1, date_trunc('day', now()) - ($2 + 1) * interval "
                     "'1 day', date_trunc('day', now()) - $2 * interval '1 day', 3600, 'done', "
                     "now()) RETURNING run_id::text",
                     w.config.name, day);
}

// The run's finding about payment `ref`: unresolved_unknown, the provider's record `reference`
// in `remote_state` for `amount` minor units of EUR.
void finding(Operated& w, const std::string& run, const std::string& ref,
             const std::string& reference, const std::string& remote_state, long long amount) {
    write_sql(w,
              "INSERT INTO recon_findings (run_id, finding_no, category, tenant_id, payment_id, "
              "operation_id, provider_reference, local_amount, local_currency, local_state, "
              "remote_amount, remote_currency, remote_state, remote_count, detail) "
              "SELECT $1::uuid, coalesce((SELECT max(finding_no) FROM recon_findings WHERE run_id "
              "= $1::uuid), 0) + 1, 'unresolved_unknown', tenant_id, payment_id, operation_id, "
              "$3, amount_minor, currency, state, $5, 'EUR', $4, 1, 'we do not know yet' "
              "FROM payments WHERE merchant_reference = $2",
              run, ref, reference, remote_state, amount);
}

// The run's record of the provider's payment `reference` for payment `ref`'s operation ID.
void statement_record(Operated& w, const std::string& run, const std::string& ref,
                      const std::string& reference, const std::string& status, long long amount) {
    write_sql(w,
              "INSERT INTO statement_records (run_id, provider_reference, match_key, "
              "operation_id, amount_minor, currency, status, raw_status, created_at) "
              "SELECT $1::uuid, $3, operation_id, operation_id, $5, 'eur', $4, $4, now() "
              "FROM payments WHERE merchant_reference = $2",
              run, ref, reference, status, amount);
}

// A verified webhook event about payment `ref`, as services/webhooks stores one.
void webhook(Operated& w, const std::string& ref, const std::string& reference,
             const std::string& outcome, long long amount) {
    write_sql(w,
              "INSERT INTO provider_events (provider, event_key, event_type, outcome, "
              "operation_id, provider_reference, amount_minor, currency, body, tenant_id, "
              "payment_id) SELECT provider, 'evt_' || md5(random()::text), "
              "'payment_intent.' || $3, $3, operation_id, $2, $4, 'EUR', '\\x7b7d'::bytea, "
              "tenant_id, payment_id FROM payments WHERE merchant_reference = $1",
              ref, reference, outcome, amount);
}

// The commands `review show` prints for a payment, in order.
std::vector<std::string> shown_commands(Operated& w, const std::string& ref) {
    const Run show = w.payrecon({"review", "show", w.payment_id_of(ref)});
    INFO(show.all());
    REQUIRE(show.exit_code == 0);
    std::vector<std::string> out;
    std::istringstream lines(show.out);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("  payrecon ", 0) == 0) {
            out.push_back(line.substr(2));
        }
    }
    return out;
}

std::string unique_reference(const std::string& prefix) {
    return prefix + to_hex(random_bytes(6));
}

} // namespace

TEST_CASE("review evidence: a no_lookup payment whose statement record declined is offered "
          "--as failed first, and --as succeeded with the declined reference is refused, nothing "
          "written",
          "[cli][db][review][evidence][regression]") {
    // review show offered `--as succeeded --provider-reference pi_...` (the declined record's)
    // first, and pasting it exited 0: the payment became succeeded on a declined charge.
    Operated w;
    const std::string ref = in_review_no_lookup(w, 1)[0];
    const std::string declined = unique_reference("pi_declined_");
    finding(w, done_run(w, 1), ref, declined, "declined", 2500);

    const auto commands = shown_commands(w, ref);
    REQUIRE(!commands.empty());
    CHECK(contains(commands.front(), "--as failed --note \"...\""));
    for (const auto& c : commands) {
        INFO(c);
        CHECK_FALSE(contains(c, declined));
    }
    const Run show = w.payrecon({"review", "show", w.payment_id_of(ref)});
    CHECK(contains(show.out, "What the provider was seen to hold:"));
    CHECK(contains(show.out, declined + " declined, 25.00 EUR (the statement of "));

    const Footprint before = footprint(w, ref);
    const long long audits_before = w.count("audit_log");
    const Run succeeded = w.resolve_succeeded(ref, declined, "the customer says it was paid");
    INFO(succeeded.all());
    CHECK(succeeded.exit_code == 7);
    CHECK(contains(succeeded.err, declined + " was declined at the provider"));
    CHECK(contains(succeeded.err, "nothing was written"));
    // What to do, as a command that runs.
    CHECK(contains(succeeded.err, "payrecon review resolve " + w.payment_id_of(ref) +
                                      " --generation " + std::to_string(before.generation) +
                                      " --as failed --note \"...\""));
    CHECK(footprint(w, ref) == before);
    CHECK(w.count("audit_log") == audits_before);
    // The operator's word does not beat the provider's own books.
    const Run insisted =
        w.resolve_succeeded(ref, declined, "the customer says it was paid", {"--unverified"});
    CHECK(insisted.exit_code == 7);
    CHECK(footprint(w, ref) == before);
    CHECK(w.state_of(ref) == "needs_review");

    // The first command, as printed, decides it.
    const Run failed = w.payrecon(pasted(commands.front(), "statement: declined, " + declined));
    INFO(failed.all());
    CHECK(failed.exit_code == 0);
    CHECK(w.state_of(ref) == "failed");
    CHECK(w.audits(ref, "action = 'review.resolve'") == 1);
    CHECK(w.events(ref, "event_type = 'payment.failed'") == 1);
    CHECK(w.executions(ref) == 0);
}

TEST_CASE("review evidence: a made-up reference that nothing can check is refused without "
          "--unverified and taken with it, the audit note saying so",
          "[cli][db][review][evidence][regression]") {
    // `--as succeeded --provider-reference pi_madeup000` on a payment of a provider that cannot
    // be asked was accepted with a note on stderr.
    Operated w;
    const auto refs = in_review_no_lookup(w, 2);
    const std::string& ref = refs[0];
    const Footprint before = footprint(w, ref);

    const Run made_up = w.resolve_succeeded(ref, "pi_madeup000", "the customer says it was paid");
    INFO(made_up.all());
    CHECK(made_up.exit_code == 7);
    CHECK(contains(made_up.err, "pi_madeup000 could not be checked"));
    CHECK(contains(made_up.err, "--unverified"));
    CHECK(contains(made_up.err, "nothing was written"));
    CHECK(footprint(w, ref) == before);

    // No configuration at all: nothing to ask either.
    const Run no_config = w.payrecon_raw(
        {"--database", w.url, "review", "resolve", w.payment_id_of(ref), "--generation",
         std::to_string(before.generation), "--as", "succeeded", "--provider-reference",
         "pi_madeup000", "--note", "the customer says it was paid"},
        {});
    INFO(no_config.all());
    CHECK(no_config.exit_code == 7);
    CHECK(contains(no_config.err, "no provider configuration"));
    CHECK(footprint(w, ref) == before);

    // The hint's command, as printed (the operator's note filled in): taken on their word.
    const std::string hint = no_config.err.substr(no_config.err.find("payrecon review resolve"));
    const Run unverified = w.payrecon(
        pasted(hint.substr(0, hint.find('\n')), "Stripe dashboard: pi_madeup000 succeeded"));
    INFO(unverified.all());
    CHECK(unverified.exit_code == 0);
    CHECK(w.state_of(ref) == "succeeded");
    CHECK(w.column(ref, "provider_reference") == "pi_madeup000");
    CHECK(w.audits(ref, "action = 'review.resolve' AND detail->>'note' LIKE 'Stripe dashboard: "
                        "pi_madeup000 succeeded [reference not checked with the provider: "
                        "unverified]'") == 1);
    CHECK(w.events(ref, "event_type = 'payment.succeeded'") == 1);
    CHECK(w.state_of(refs[1]) == "needs_review");
}

TEST_CASE("review evidence: every command review show prints, run as printed on a fresh copy of "
          "the payment, exits 0 or is refused only because nothing can check a reference",
          "[cli][db][review][evidence]") {
    Operated w;
    struct Scenario {
        const char* name;
        // Writes the evidence of one payment; returns what the first command must contain.
        std::function<std::string(const std::string& ref, const std::string& run)> evidence;
    };
    const std::vector<Scenario> scenarios = {
        {"nothing seen",
         [](const std::string&, const std::string&) {
             return std::string("--as succeeded --provider-reference REF --note");
         }},
        {"a statement finding: declined",
         [&](const std::string& ref, const std::string& run) {
             finding(w, run, ref, unique_reference("pi_d_"), "declined", 2500);
             return std::string("--as failed --note");
         }},
        {"a statement record: charged our amount",
         [&](const std::string& ref, const std::string& run) {
             const std::string charged = unique_reference("pi_c_");
             statement_record(w, run, ref, charged, "succeeded", 2500);
             return "--as succeeded --provider-reference " + charged + " --note";
         }},
        {"a webhook: charged another amount",
         [&](const std::string& ref, const std::string&) {
             const std::string charged = unique_reference("pi_w_");
             webhook(w, ref, charged, "succeeded", 2400);
             return "--as succeeded --provider-reference " + charged + " --amount 24.00 --note";
         }},
        {"a webhook: failed",
         [&](const std::string& ref, const std::string&) {
             webhook(w, ref, unique_reference("pi_f_"), "failed", 2500);
             return std::string("--as failed --note");
         }},
    };
    const int copies = 4; // more than review show offers for no_lookup
    const auto refs = in_review_no_lookup(w, copies * static_cast<int>(scenarios.size()));
    int day = 1;
    for (std::size_t s = 0; s < scenarios.size(); ++s) {
        const auto& scenario = scenarios[s];
        INFO(scenario.name);
        const std::string run = done_run(w, day++);
        const std::vector<std::string> mine(refs.begin() + static_cast<long>(s) * copies,
                                            refs.begin() + static_cast<long>(s + 1) * copies);
        std::vector<std::string> firsts;
        for (const auto& ref : mine) {
            firsts.push_back(scenario.evidence(ref, run));
        }
        const std::size_t offered = shown_commands(w, mine[0]).size();
        REQUIRE(offered >= 1);
        REQUIRE(offered <= static_cast<std::size_t>(copies));
        int accepted = 0;
        // The i-th command of copy i, as its review show prints it.
        for (std::size_t i = 0; i < offered; ++i) {
            const std::string& copy = mine[i];
            const std::vector<std::string> commands = shown_commands(w, copy);
            REQUIRE(commands.size() == offered);
            CHECK(contains(commands.front(), firsts[i]));
            const Footprint before = footprint(w, copy);
            const Run r =
                w.payrecon(pasted(commands[i], "checked at the provider: see the ticket"));
            INFO(commands[i] << "\n" << r.all());
            if (r.exit_code == 0) {
                ++accepted;
                CHECK(w.state_of(copy) != "needs_review");
                CHECK(w.audits(copy, "action = 'review.resolve'") == 1);
                continue;
            }
            // The one refusal allowed: a reference to fill in that nothing can check.
            CHECK(r.exit_code == 7);
            CHECK(contains(commands[i], "--provider-reference REF "));
            CHECK(contains(r.err, "REF could not be checked"));
            CHECK(contains(r.err, "--unverified"));
            CHECK(footprint(w, copy) == before);
        }
        CHECK(accepted >= 1);
    }
    // What the charged evidence confirmed is said in the audit note; the amount is recorded.
    CHECK(w.count("audit_log", "action = 'review.resolve' AND detail->>'note' LIKE '%[reference "
                               "checked against the statement of %'") == 1);
    CHECK(w.count("audit_log", "action = 'review.resolve' AND detail->>'note' LIKE '%[reference "
                               "checked against webhook event evt_%'") == 1);
    CHECK(w.count("payments", "charged_amount_minor = 2400") == 1);
    CHECK(w.fake->ledger()["executions"].size() == 0);
}

TEST_CASE("review evidence: review recheck says it scheduled a re-send and sent nothing, and the "
          "worker sends it",
          "[cli][db][review][regression]") {
    // recheck printed "sending again with the same operation ID" and sent nothing: it only
    // schedules the re-send for a worker.
    Operated w;
    const std::string ref = w.unknown_payment(fake::Fault::drop_before_execute);
    const int delivered = w.deliveries(ref);
    const Run r = w.payrecon({"review", "recheck", w.payment_id_of(ref)});
    INFO(r.all());
    CHECK(r.exit_code == 0);
    CHECK(w.state_of(ref) == "retry_scheduled");
    CHECK_FALSE(contains(r.out, "sending again"));
    CHECK(contains(r.out, "nothing was sent: the payment is scheduled for a re-send with the same "
                          "operation ID by the next worker run"));
    CHECK(w.deliveries(ref) == delivered);
    CHECK(w.executions(ref) == 0);

    CHECK(w.payrecon({"worker", "--once"}).exit_code == 0);
    CHECK(w.state_of(ref) == "succeeded");
    CHECK(w.deliveries(ref) == delivered + 1);
    CHECK(w.executions(ref) == 1);
}

TEST_CASE("review evidence: payments show and review list print complete commands that run as "
          "printed",
          "[cli][db][review]") {
    Operated w;
    // A pending payment: payments show prints its cancel command.
    const std::string pending = w.payments(1)[0];
    const Run shown = w.payrecon({"payments", "show", w.payment_id_of(pending)});
    REQUIRE(shown.exit_code == 0);
    const std::string cancel = shown.out.substr(shown.out.find("payrecon payments cancel "));
    const Run canceled =
        w.payrecon(pasted(cancel.substr(0, cancel.find('\n')), "customer withdrew the order"));
    INFO(canceled.all());
    CHECK(canceled.exit_code == 0);
    CHECK(w.state_of(pending) == "failed");
    CHECK(w.audits(pending, "action = 'payment.cancel'") == 1);

    // A payment in review: payments show and review list name review show, with its ID.
    const std::string ref = in_review_no_lookup(w, 1)[0];
    const std::string show = "payrecon review show " + w.payment_id_of(ref);
    CHECK(contains(w.payrecon({"payments", "show", w.payment_id_of(ref)}).out, show));
    const Run list = w.payrecon({"review", "list", "--provider", w.config.name});
    CHECK(contains(list.out, "`" + show + "`"));
    CHECK(w.payrecon(pasted(show, "")).exit_code == 0);
}

TEST_CASE("review evidence: --as retry --confirm-no-charge is refused where the provider was seen "
          "to hold a standing charge, with the command that records it, and a declined or refunded "
          "one does not stop it",
          "[cli][db][review][evidence][regression]") {
    // The operator's confirmation that no charge exists was taken against the evidence: a payment
    // whose statement record (or webhook) showed a charge was scheduled to be sent again.
    Operated w;
    const auto refs = in_review_no_lookup(w, 3);
    const std::string run = done_run(w, 1);
    const std::string charged = unique_reference("pi_charged_");
    statement_record(w, run, refs[0], charged, "succeeded", 2600); // another amount than ours
    const std::string webhook_charge = unique_reference("pi_hooked_");
    webhook(w, refs[1], webhook_charge, "succeeded", 2500);
    // refs[2]: a declined charge, then one that was refunded: nothing stands.
    statement_record(w, run, refs[2], unique_reference("pi_declined_"), "declined", 2500);
    statement_record(w, run, refs[2], unique_reference("pi_refunded_"), "refunded", 2500);
    const auto retry = [&](const std::string& ref) {
        return w.payrecon({"review", "resolve", w.payment_id_of(ref), "--generation",
                           std::to_string(w.generation_of(ref)), "--as", "retry",
                           "--confirm-no-charge", "--note", "the dashboard shows nothing"});
    };
    for (const auto& [ref, reference] :
         {std::pair{refs[0], charged}, std::pair{refs[1], webhook_charge}}) {
        const Footprint before = footprint(w, ref);
        const Run refused = retry(ref);
        INFO(refused.all());
        CHECK(refused.exit_code == 7);
        CHECK(contains(refused.err, "the provider holds a charge for payment " +
                                        w.payment_id_of(ref) + ": " + reference));
        CHECK(contains(refused.err, "would charge the customer twice"));
        CHECK(contains(refused.err, "nothing was written"));
        // What to run instead: succeeded with that reference (and, where it differs, its amount).
        CHECK(contains(refused.err, "--as succeeded --provider-reference " + reference));
        CHECK(footprint(w, ref) == before);
    }
    CHECK(contains(retry(refs[0]).err, "--amount 26.00"));
    CHECK(w.executions(refs[0]) == 0); // dropped before the provider executed anything
    CHECK(w.executions(refs[1]) == 0);

    // Nothing standing: the retry is scheduled, and sent once.
    const Run scheduled = retry(refs[2]);
    INFO(scheduled.all());
    CHECK(scheduled.exit_code == 0);
    CHECK(w.state_of(refs[2]) == "retry_scheduled");
    CHECK(w.audits(refs[2], "action = 'review.resolve'") == 1);
}
