// payrecon statement: the provider's transactions for a window against our payments, every
// discrepancy found and reported (DESIGN section 9). Exit 0 clean, 3 findings need attention,
// 1 the run failed (a failed listing resumes when the same window is run again). A provider that
// cannot list is read by looking our payments up, one call each (engine/statement).
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/reconcile_view.hpp"
#include "cli/report_output.hpp"
#include "core/errors.hpp"
#include "core/settings.hpp"
#include "engine/statement.hpp"
#include "providers/registry.hpp"

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

void run_statement_cmd(AppState& state, const StatementCliOptions& opts) {
    const long long today = utc_day_start(std::chrono::duration_cast<std::chrono::seconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count());
    engine::StatementOptions so;
    so.window_from = opts.from.empty() ? today - 86400 : parse_utc_time(opts.from, "--from");
    so.window_to = opts.to.empty() ? so.window_from + 86400 : parse_utc_time(opts.to, "--to");
    if (so.window_to <= so.window_from) {
        throw UsageError("the statement window is empty: --to must be after --from");
    }
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

} // namespace

void setup_statement(CLI::App& app, AppState& state) {
    auto opts = std::make_shared<StatementCliOptions>();
    CLI::App* s = app.add_subcommand(
        "statement",
        "diff a provider's transactions for a window against our payments and report every "
        "discrepancy (exit 0 clean, 3 findings, 1 failed); a provider that lists nothing by "
        "window (Checkout.com) is read by looking each of our payments up");
    s->add_option("--provider", opts->provider, "the configured provider")->required();
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
    s->callback([&state, opts] { run_statement_cmd(state, *opts); });
}

} // namespace payrecon::cli
