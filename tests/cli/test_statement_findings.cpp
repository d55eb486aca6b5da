// Issue 36, item 14, through the real binary (PAYRECON_BIN) against the fake Stripe provider:
// statement findings can be handled. A duplicate_remote names every reference the provider holds
// for the operation ID; `statement findings acknowledge ID --note` (audited) takes a finding out
// of the money at risk, and the report keeps it, marked handled with the note -- as stored
// (`statement findings list`) and when the window is run again. Counted in recon_findings,
// audit_log and the reports' at_risk and handled totals.
#include "reports/report.hpp"
#include "tests/support/operated.hpp"

#include <catch2/catch.hpp>
#include <fstream>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

nlohmann::json json_of(const Run& r) {
    INFO(r.all());
    REQUIRE(!r.out.empty());
    return nlohmann::json::parse(r.out);
}

// The listed finding of `category` in a JSON report; fails the test if there is not exactly one.
nlohmann::json finding_of(const nlohmann::json& report, const std::string& category) {
    nlohmann::json found;
    int n = 0;
    for (const auto& f : report["findings"]) {
        if (f["category"] == category) {
            found = f;
            ++n;
        }
    }
    INFO(report.dump(2));
    REQUIRE(n == 1);
    return found;
}

} // namespace

TEST_CASE(
    "statement findings: a duplicate_remote shows every reference, and acknowledging it (with "
    "a note, audited) takes it out of the money at risk, the report keeps it as handled, "
    "also after the window is run again, and twice or an unknown ID is refused",
    "[cli][db][statement][findings]") {
    Operated w;
    const auto refs = w.payments(2);
    {
        auto provider = providers::create_provider(w.config);
        engine::ExecutorOptions o;
        o.worker_id = "clitest-executor";
        engine::Executor ex(*w.db, {provider.get()}, o);
        while (ex.run_once() > 0) {
        }
    }
    REQUIRE(w.state_of(refs[0]) == "succeeded");
    // refs[0] charged twice at the provider; a charge of 73.00 USD we have no record of.
    const std::string first = w.intent_of(refs[0]);
    const std::string second = w.fake->seed_duplicate_charge({w.op_of(refs[0]), std::nullopt})[0];
    fake::OrphanCharge orphan;
    orphan.amount = 7300;
    orphan.currency = "usd";
    const std::string orphan_id = w.fake->seed_orphan_charge(orphan).front();
    const std::string today = reports::format_utc(std::chrono::system_clock::now()).substr(0, 10);
    const std::vector<std::string> statement = {"statement", "--provider", w.config.name, "--from",
                                                today,       "--format",   "json"};
    const std::vector<std::string> list = {"statement",  "findings",    "list",
                                           "--provider", w.config.name, "--from",
                                           today,        "--format",    "json"};

    const Run run = w.payrecon(statement);
    CHECK(run.exit_code == 3);
    const auto report = json_of(run);
    CHECK(report["at_risk"] == nlohmann::json{{"EUR", 2500}, {"USD", 7300}});
    CHECK(report["handled"] == nlohmann::json{{"count", 0}, {"amounts", nlohmann::json::object()}});
    const auto duplicate = finding_of(report, "duplicate_remote");
    // Every reference, not only the first charge's.
    CHECK(duplicate["provider_references"].size() == 2);
    for (const auto& ref : {first, second}) {
        INFO(ref);
        CHECK(std::find(duplicate["provider_references"].begin(),
                        duplicate["provider_references"].end(),
                        ref) != duplicate["provider_references"].end());
        CHECK(contains(duplicate["detail"].get<std::string>(), ref + " (25.00 EUR)"));
    }
    CHECK(duplicate["handled"].is_null());
    const std::string id = duplicate["finding_id"];
    const std::string orphan_finding = finding_of(report, "missing_local")["finding_id"];
    // The text report shows both references too.
    const Run text =
        w.payrecon({"statement", "findings", "list", "--provider", w.config.name, "--from", today});
    CHECK(contains(text.out, first));
    CHECK(contains(text.out, second));
    CHECK(contains(text.out, id));

    // As stored: the same findings, IDs and money at risk, without asking the provider.
    const auto stored = json_of(w.payrecon(list));
    CHECK(stored["at_risk"] == report["at_risk"]);
    CHECK(finding_of(stored, "duplicate_remote")["finding_id"] == id);
    CHECK(finding_of(stored, "duplicate_remote")["provider_references"].size() == 2);

    // Bad input: nothing written.
    const long long audits = w.count("audit_log");
    const Run no_note = w.payrecon({"statement", "findings", "acknowledge", id, "--note", "   "});
    CHECK(no_note.exit_code == 2);
    const Run unknown = w.payrecon({"statement", "findings", "acknowledge",
                                    "00000000-0000-7000-8000-000000000000", "--note", "x"});
    CHECK(unknown.exit_code == 7);
    CHECK(contains(unknown.err, "no statement finding has the ID"));
    CHECK(
        w.payrecon({"statement", "findings", "acknowledge", "nonsense", "--note", "x"}).exit_code ==
        7);
    CHECK(w.count("audit_log") == audits);

    // Acknowledged: who, when, the note, one audit row.
    const std::string note = "refunded " + second + " at the provider";
    const Run ack = w.payrecon(
        {"--operator", "frank", "statement", "findings", "acknowledge", id, "--note", note});
    INFO(ack.all());
    CHECK(ack.exit_code == 0);
    CHECK(contains(ack.out, "acknowledged by frank"));
    CHECK(contains(ack.out, "(25.00 EUR)"));
    CHECK(w.count("audit_log") == audits + 1);
    CHECK(w.count("audit_log", "action = 'statement_finding.acknowledged' AND actor = 'frank' AND "
                               "subject_id = '" +
                                   id + "' AND detail->>'note' = '" + note + "'") == 1);
    CHECK(w.value("SELECT acknowledged_by FROM recon_findings WHERE finding_id = $1::uuid", id) ==
          "frank");

    // Twice: refused, nothing more written.
    const Run twice = w.payrecon({"statement", "findings", "acknowledge", id, "--note", "again"});
    CHECK(twice.exit_code == 7);
    CHECK(contains(twice.err, "acknowledged already, by frank"));
    CHECK(w.count("audit_log") == audits + 1);

    // The report as stored: handled, out of the money at risk, still listed with its note.
    const Run after_run = w.payrecon(list);
    CHECK(after_run.exit_code == 3); // the orphan still needs attention
    const auto after = json_of(after_run);
    CHECK(after["at_risk"] == nlohmann::json{{"USD", 7300}});
    CHECK(after["handled"] == nlohmann::json{{"count", 1}, {"amounts", {{"EUR", 2500}}}});
    CHECK(after["totals"]["duplicate_remote"]["count"] == 1);
    const auto handled = finding_of(after, "duplicate_remote");
    CHECK(handled["needs_attention"] == false);
    CHECK(handled["handled"]["by"] == "frank");
    CHECK(handled["handled"]["note"] == note);
    const Run handled_text =
        w.payrecon({"statement", "findings", "list", "--provider", w.config.name, "--from", today});
    CHECK(contains(handled_text.out, "[handled by frank at "));
    CHECK(contains(handled_text.out, "handled:"));
    const auto html = w.dir.path() / "report.html";
    CHECK(w.payrecon({"statement", "findings", "list", "--provider", w.config.name, "--from", today,
                      "--output", html.string()})
              .exit_code == 3);
    std::ifstream in(html);
    const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(contains(page, "data-finding-id=\"" + id + "\" data-handled=\"true\""));
    CHECK(contains(page, "id=\"handled\" data-count=\"1\""));

    // The window run again: the same finding, a new row, still handled.
    const Run rerun = w.payrecon(statement);
    CHECK(rerun.exit_code == 3);
    const auto again = json_of(rerun);
    CHECK(again["at_risk"] == nlohmann::json{{"USD", 7300}});
    CHECK(again["handled"]["count"] == 1);
    const auto carried = finding_of(again, "duplicate_remote");
    CHECK(carried["finding_id"] != id);
    CHECK(carried["handled"]["by"] == "frank");
    CHECK(carried["handled"]["note"] == note);
    CHECK(w.count("audit_log") == audits + 1);
    CHECK(w.value("SELECT count(*) FROM recon_findings f JOIN recon_runs r USING (run_id) WHERE "
                  "r.provider = $1 AND f.acknowledged_at IS NOT NULL",
                  w.config.name) == "1");

    // The last one handled: nothing at risk, exit 0, in the stored report and in a rerun.
    const std::string orphan_now = finding_of(again, "missing_local")["finding_id"];
    CHECK(orphan_now != orphan_finding); // replaced by the rerun
    CHECK(w.payrecon({"statement", "findings", "acknowledge", orphan_now, "--note",
                      "a test charge made by hand in the dashboard"})
              .exit_code == 0);
    const Run clean = w.payrecon(list);
    CHECK(clean.exit_code == 0);
    CHECK(json_of(clean)["at_risk"].empty());
    const Run clean_rerun = w.payrecon(statement);
    CHECK(clean_rerun.exit_code == 0);
    const auto last = json_of(clean_rerun);
    CHECK(last["at_risk"].empty());
    CHECK(last["handled"] ==
          nlohmann::json{{"count", 2}, {"amounts", {{"EUR", 2500}, {"USD", 7300}}}});
    CHECK(w.count("audit_log", "action = 'statement_finding.acknowledged'") ==
          1); // the orphan's is
    // under the deployment's tenant: it names no payment of ours
    CHECK(w.value("SELECT count(*) FROM audit_log WHERE action = "
                  "'statement_finding.acknowledged' AND subject_id = $1",
                  orphan_now) == "1");
}
