// payrecon statement: the provider's transactions for a window against our payments, every
// discrepancy found and reported (DESIGN section 9). Exit 0 clean, 3 findings need attention,
// 1 the run failed (a failed listing resumes when the same window is run again). A provider that
// cannot list is read by looking our payments up, one call each (engine/statement).
// `statement findings list` prints a window's stored findings (the provider is not asked), and
// `statement findings acknowledge ID --note` records that an operator handled one (services/
// findings): it stays in the report, marked handled, out of the money at risk.
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/reconcile_view.hpp"
#include "cli/report_output.hpp"
#include "core/errors.hpp"
#include "core/money.hpp"
#include "core/settings.hpp"
#include "engine/statement.hpp"
#include "providers/config.hpp"
#include "providers/registry.hpp"
#include "reports/writers.hpp"
#include "services/findings.hpp"

#include <iostream>
#include <unistd.h>

namespace payrecon::cli {
namespace {

struct StatementCliOptions {
    std::string provider;
    std::string from;
    std::string to;
    std::string margin = "1h";
    int list = 10000;
    ReportOutputOptions output;
};

struct StatementWindow {
    long long from = 0; // unix seconds
    long long to = 0;
};

// --from and --to: yesterday (UTC) by default, a day from --from without --to.
StatementWindow statement_window(const std::string& from, const std::string& to) {
    const long long now = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
    const long long today = utc_day_start(now);
    StatementWindow w;
    w.from = from.empty() ? today - 86400 : parse_utc_time(from, "--from");
    if (w.from > now) {
        // Nothing can be on either side yet: a typo in the year, most often.
        throw UsageError("--from " + reports::format_utc_seconds(w.from) +
                             " is in the future: neither side has anything there yet",
                         "give a window that has begun, e.g. yesterday: --from " +
                             reports::format_utc_seconds(today - 86400).substr(0, 10));
    }
    w.to = to.empty() ? w.from + 86400 : parse_utc_time(to, "--to");
    if (w.to <= w.from) {
        throw UsageError("the statement window is empty: --to must be after --from");
    }
    return w;
}

void run_statement_cmd(AppState& state, const StatementCliOptions& opts) {
    if (opts.provider.empty()) {
        throw UsageError("--provider is required: the configured provider whose statement to read");
    }
    const StatementWindow window = statement_window(opts.from, opts.to);
    engine::StatementOptions so;
    so.window_from = window.from;
    so.window_to = window.to;
    so.margin = parse_duration(opts.margin, "--margin");
    if (opts.list < 0) {
        throw UsageError("--list must be at least 0");
    }
    so.listed_findings = static_cast<std::size_t>(opts.list);
    const providers::Config config = load_provider_config(state.global);
    const auto chosen = choose_providers(config, {opts.provider});
    so.amount_tolerance_minor = chosen.front()->amount_tolerance_minor;
    so.credentials = credentials_hint(*chosen.front());
    so.dashboard_url = providers::dashboard_url(*chosen.front());
    ProviderSet set = make_providers(chosen);
    OpenDatabase opened = open_database(state.global);
    const bool tty = ::isatty(STDERR_FILENO) == 1;
    const reports::Report report = engine::run_statement(
        *opened.db, *set.pointers.front(), so, [tty](const std::string& line) {
            if (tty) {
                std::cerr << "\r\033[K" << line << std::flush;
            }
        });
    if (tty) {
        std::cerr << "\r\033[K";
    }
    emit_report(report, opts.output);
    state.exit_code = report.exit_code;
}

struct FindingsListOptions {
    std::string provider;
    std::string from;
    std::string to;
    ReportOutputOptions output;
};

// The provider's dashboard page template, from the configuration where one is given; empty
// without (the findings are listed without links).
std::string dashboard_of(const AppState& state, const std::string& provider) {
    if (state.global.config_file.empty()) {
        return {};
    }
    const providers::Config config =
        providers::load_config(state.global.config_file, providers::ApiKeys::not_read);
    const auto p = config.providers.find(provider);
    return p == config.providers.end() ? std::string() : providers::dashboard_url(p->second);
}

void run_findings_list(AppState& state, const FindingsListOptions& opts) {
    const StatementWindow window = statement_window(opts.from, opts.to);
    const std::string dashboard = dashboard_of(state, opts.provider);
    OpenDatabase opened = open_database(state.global);
    const reports::Report report = engine::stored_statement_report(
        *opened.db, opts.provider, window.from, window.to, dashboard);
    emit_report(report, opts.output);
    state.exit_code = report.exit_code;
}

struct FindingsAcknowledgeOptions {
    std::string id;
    std::string note;
    bool json = false;
};

// "stripe 2026-12-01T00:00:00Z .. 2026-12-02T00:00:00Z"
std::string window_of(const store::StoredFinding& f) {
    return f.provider + " " + reports::format_utc_seconds(f.window_from) + " .. " +
           reports::format_utc_seconds(f.window_to);
}

// `payrecon statement findings list` for the finding's window, complete.
std::string list_command(const store::StoredFinding& f) {
    return "payrecon statement findings list --provider " + f.provider + " --from " +
           reports::format_utc_seconds(f.window_from) + " --to " +
           reports::format_utc_seconds(f.window_to);
}

void run_findings_acknowledge(AppState& state, const FindingsAcknowledgeOptions& opts) {
    const std::string actor = operator_name(state.global);
    OpenDatabase opened = open_database(state.global);
    const store::FindingAcknowledgeResult r =
        acknowledge_finding(*opened.db, opts.id, actor, opts.note);
    switch (r.status) {
    case store::FindingAcknowledgeStatus::not_found:
        throw Refused("no statement finding has the ID " + printable(opts.id),
                      "a report lists each finding's ID (column finding; JSON finding_id), and so "
                      "does: payrecon statement findings list --provider <name> --from <day>");
    case store::FindingAcknowledgeStatus::already: {
        const auto& a = *r.finding->acknowledged;
        throw Refused("finding " + r.finding->finding_id + " was acknowledged already, by " +
                          printable(a.by) + " at " + a.at + ": " + printable(a.note) +
                          "; nothing was written",
                      "see it: " + list_command(*r.finding));
    }
    case store::FindingAcknowledgeStatus::not_needed:
        throw Refused("finding " + r.finding->finding_id +
                          " is a match across windows (both sides agree): there is nothing to "
                          "handle, and nothing was written",
                      "see the window: " + list_command(*r.finding));
    case store::FindingAcknowledgeStatus::acknowledged:
        break;
    }
    const store::StoredFinding& f = *r.finding;
    const reports::Finding shown = engine::report_finding(f);
    const auto risk = reports::handled_at_risk(shown);
    if (opts.json) {
        const reports::Report one = [&] {
            reports::Report rep;
            rep.findings.push_back(shown);
            return rep;
        }();
        nlohmann::ordered_json j = reports::report_json(one)["findings"][0];
        j["window_from"] = reports::format_utc_seconds(f.window_from);
        j["window_to"] = reports::format_utc_seconds(f.window_to);
        j["run_id"] = f.run_id;
        std::cout << j.dump(2) << std::endl;
        return;
    }
    std::string references;
    for (const auto& ref : f.provider_references) {
        references += (references.empty() ? "" : ", ") + printable(ref);
    }
    std::cout << "finding " << f.finding_id << " (" << f.category << ", " << window_of(f)
              << (f.refund_id ? ", refund " + *f.refund_id : std::string())
              << (f.payment_id ? ", payment " + *f.payment_id : std::string())
              << (references.empty() ? std::string() : ", provider references " + references)
              << ") acknowledged by " << printable(actor) << ": handled, out of the money at risk"
              << (risk ? " (" + describe_money(risk->minor, risk->currency) + ")" : std::string())
              << " in this window's report and its later runs; recorded in the audit log\n"
              << "the window as it stands: " << list_command(f) << "\n";
}

} // namespace

void setup_statement(CLI::App& app, AppState& state) {
    auto opts = std::make_shared<StatementCliOptions>();
    CLI::App* s = app.add_subcommand(
        "statement",
        "diff a provider's transactions for a window against our payments and report every "
        "discrepancy (exit 0 clean, 3 findings, 1 failed); a provider that lists nothing by "
        "window (Checkout.com) is read by looking each of our payments up");
    s->add_option("--provider", opts->provider, "the configured provider (required)");
    s->add_option("--from", opts->from,
                  "window start, UTC: 2026-12-01 or 2026-12-01T06:00:00Z (default: yesterday)");
    s->add_option("--to", opts->to, "window end (exclusive), UTC (default: a day after --from)");
    s->add_option(
         "--margin", opts->margin,
         "read both sides this much wider than the window, so payments near its edges pair up")
        ->capture_default_str();
    s->add_option("--list", opts->list,
                  "findings listed in full at most (all are counted and stored)")
        ->capture_default_str();
    add_report_options(*s, opts->output);
    s->require_subcommand(0, 1);

    CLI::App* findings = s->add_subcommand(
        "findings", "the findings of a window's complete run as stored, and an operator's "
                    "acknowledgement of one (handled: out of the money at risk)");
    findings->require_subcommand(1);
    auto lo = std::make_shared<FindingsListOptions>();
    CLI::App* list = findings->add_subcommand(
        "list", "the window's findings as stored, each with its ID and whether it was handled, "
                "as a report (exit 0 nothing needs attention, 3 findings do); the provider is "
                "not asked");
    list->add_option("--provider", lo->provider, "the configured provider")->required();
    list->add_option("--from", lo->from,
                     "window start, UTC: 2026-12-01 or 2026-12-01T06:00:00Z (default: yesterday)");
    list->add_option("--to", lo->to, "window end (exclusive), UTC (default: a day after --from)");
    add_report_options(*list, lo->output);
    list->callback([&state, lo] { run_findings_list(state, *lo); });

    auto ao = std::make_shared<FindingsAcknowledgeOptions>();
    CLI::App* ack = findings->add_subcommand(
        "acknowledge", "record that a finding was handled and how (audited): it stays in the "
                       "report, marked handled, out of the money at risk, also when the window is "
                       "run again");
    ack->add_option("id", ao->id, "the finding's ID (a report's finding column, JSON finding_id)")
        ->required();
    ack->add_option("--note", ao->note, "what you checked and did, 1..2000 characters")->required();
    ack->add_flag("--json", ao->json, "print the finding as JSON");
    ack->callback([&state, ao] { run_findings_acknowledge(state, *ao); });

    s->callback([&state, opts, s] {
        if (s->get_subcommands().empty()) {
            run_statement_cmd(state, *opts);
        }
    });
}

} // namespace payrecon::cli
