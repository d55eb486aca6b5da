// payrecon reconcile: resolves unknown payments by asking their provider (DESIGN section 7).
// Exit 0: nothing went to review; 3: some payments need an operator; 4: a provider refused our
// credentials (asked nothing more); 1: every status query failed and nothing
// went to review.
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/reconcile_view.hpp"
#include "cli/report_output.hpp"
#include "core/errors.hpp"
#include "engine/nightly.hpp"
#include "engine/reconciler.hpp"

#include <iostream>
#include <map>

namespace payrecon::cli {
namespace {

struct ReconcileCliOptions {
    std::vector<std::string> only;
    int limit = 10000;
    bool dry_run = false;
    bool json = false;
    PolicyCliOptions policy;
    ReportOutputOptions report;
};

void run_reconcile(AppState& state, const ReconcileCliOptions& opts) {
    if (opts.limit < 1) {
        throw UsageError("--limit must be at least 1");
    }
    const providers::Config config = load_provider_config(state.global);
    const auto chosen = choose_providers(config, opts.only);
    ProviderSet set = make_providers(chosen);
    std::map<std::string, std::string> checks;
    for (const auto* p : chosen) {
        checks[p->name] = credentials_hint(*p);
    }
    engine::CredentialGate credentials(checks);
    engine::ReconcilerOptions ro;
    ro.credentials = &credentials;
    ro.actor = "reconcile:" + operator_name(state.global);
    ro.limit = opts.limit;
    ro.dry_run = opts.dry_run;
    ro.policy = to_policy(opts.policy);
    OpenDatabase opened = open_database(state.global);
    engine::Reconciler reconciler(*opened.db, set.pointers, ro);
    if (opts.dry_run && !opts.json) {
        std::cout << "dry run: every decision below is shown, none is written\n";
    }
    const bool lines = !opts.json && !(opts.report.wanted() && opts.report.outputs.empty());
    const auto outcomes = reconciler.run([&](const engine::ReconcileOutcome& o) {
        if (lines) {
            std::cout << outcome_line(o) << std::endl;
        }
    });
    const engine::ReconcileSummary summary =
        engine::summarize(outcomes, reconciler.credentials_refused());
    const long long to_review = summary.to_review;
    if (opts.report.wanted()) {
        const reports::Report report =
            engine::reconcile_report(outcomes, opts.dry_run, summary.credentials_refused);
        emit_report(report, opts.report);
        if (opts.report.outputs.empty()) {
            state.exit_code = report.exit_code;
            return;
        }
    }
    if (opts.json) {
        nlohmann::ordered_json j;
        j["dry_run"] = opts.dry_run;
        j["reconciled"] = outcomes.size();
        j["to_review"] = to_review;
        j["fenced_out"] = summary.fenced_out;
        j["status_queries"] = summary.lookups_asked;
        j["status_queries_failed"] = summary.lookups_failed;
        j["credentials_refused"] = nlohmann::ordered_json::array();
        for (const auto& r : summary.credentials_refused) {
            j["credentials_refused"].push_back(
                {{"provider", r.provider}, {"http_status", r.http_status}, {"check", r.check}});
        }
        j["payments"] = nlohmann::ordered_json::array();
        for (const auto& o : outcomes) {
            j["payments"].push_back(outcome_json(o));
        }
        std::cout << j.dump(2) << std::endl;
    } else {
        std::cout << (outcomes.empty() ? "no unknown payment is due for a check\n"
                                       : std::to_string(outcomes.size()) + " unknown payment(s) " +
                                             (opts.dry_run ? "examined" : "reconciled") + ", " +
                                             std::to_string(to_review) + " to review\n");
        if (to_review > 0) {
            std::cout << "work the queue: payrecon review list\n";
        }
    }
    if (auto problem = summary.problem()) {
        throw *problem;
    }
    state.exit_code = summary.exit_code();
}

} // namespace

void setup_reconcile(CLI::App& app, AppState& state) {
    auto opts = std::make_shared<ReconcileCliOptions>();
    CLI::App* r = app.add_subcommand(
        "reconcile",
        "ask providers about unknown payments and settle them: adopt what the provider "
        "has, re-send only after a confirmed absence inside its key window, else review");
    r->add_option("--provider", opts->only, "only these configured providers (repeatable)");
    r->add_option("--limit", opts->limit, "payments handled at most")->capture_default_str();
    r->add_flag("--dry-run", opts->dry_run, "ask and decide, but write nothing");
    r->add_flag("--json", opts->json, "print JSON");
    add_policy_options(*r, opts->policy);
    add_report_options(*r, opts->report);
    r->callback([&state, opts] { run_reconcile(state, *opts); });
}

} // namespace payrecon::cli
