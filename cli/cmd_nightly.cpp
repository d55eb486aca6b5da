// payrecon nightly: the unattended job (cron, systemd timer). Expired leases -> unknown, every
// provider's unknown payments reconciled, due sends made, then one summary. Exit 0 clean, 3 an
// operator is needed, 4 a configuration error (a provider refused our credentials), 1 the run
// failed. On a terminal, progress goes to stderr; under cron only
// the summary is printed.
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/reconcile_view.hpp"
#include "cli/report_output.hpp"
#include "cli/signals.hpp"
#include "cli/table.hpp"
#include "core/errors.hpp"
#include "core/money.hpp"
#include "core/operator_commands.hpp"
#include "core/payment_state.hpp"
#include "core/settings.hpp"
#include "core/statement_diff.hpp"
#include "engine/nightly.hpp"
#include "providers/registry.hpp"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <unistd.h>

namespace payrecon::cli {
namespace {

struct NightlyCliOptions {
    std::vector<std::string> only;
    int limit = 100000;
    bool json = false;
    bool no_send = false;
    int list_review = 20;
    int list_findings = 5;
    bool no_statement = false;
    std::string statement_date; // UTC day; default yesterday
    std::string margin = "1h";
    std::string stuck_after = "1h";
    std::string authorization_horizon = "2d";
    PolicyCliOptions policy;
    ReportOutputOptions report;
};

// Amounts per currency, "49.99 EUR, 100 JPY".
std::string amounts(const std::map<std::string, long long>& by_currency) {
    std::string s;
    for (const auto& [currency, minor] : by_currency) {
        s += (s.empty() ? "" : ", ") + describe_money(minor, currency);
    }
    return s;
}

using engine::Tally;

// One line per group of payments and operations still open (kind, state, provider, currency).
nlohmann::ordered_json open_json(const std::vector<store::QueueCount>& open) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& q : open) {
        nlohmann::ordered_json e;
        e["kind"] = q.kind;
        e["state"] = q.state;
        e["provider"] = q.provider;
        if (!q.review_code.empty()) {
            e["review_code"] = q.review_code;
        }
        e["currency"] = q.currency;
        e["payments"] = q.payments;
        e["amount"] = q.amount_minor;
        if (q.state == "pending" || q.state == "retry_scheduled") {
            e["waiting_too_long"] = q.stuck;
        }
        out.push_back(e);
    }
    return out;
}

// Each statement diff of the night: its counts per category, and why it failed if it did.
nlohmann::ordered_json statements_json(const std::vector<reports::Report>& statements) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& st : statements) {
        nlohmann::ordered_json e;
        e["title"] = st.title;
        e["exit_code"] = st.exit_code;
        for (const auto& c : st.categories) {
            e["counts"][c] = st.totals.at(c).count;
        }
        if (st.failure) {
            e["failure"] = *st.failure;
        }
        out.push_back(e);
    }
    return out;
}

// The authorisation watch's payments: uncaptured authorisations expired, or expiring soon.
nlohmann::ordered_json authorizations_json(const std::vector<store::WatchedAuthorization>& all) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& a : all) {
        out.push_back({{"payment_id", a.payment_id},
                       {"tenant_id", a.tenant_id},
                       {"provider", a.provider},
                       {"merchant_reference", a.merchant_reference},
                       {"amount", a.amount_minor},
                       {"captured", a.captured_minor},
                       {"uncaptured", a.amount_minor - a.capture_held_minor},
                       {"currency", a.currency},
                       {"expires_at", a.expires_at},
                       {"told", a.told}});
    }
    return out;
}

nlohmann::ordered_json summary_json(const engine::NightlyReport& r,
                                    const std::vector<std::string>& report_files) {
    nlohmann::ordered_json j;
    j["started_at"] = reports::format_utc(r.started);
    j["finished_at"] = reports::format_utc(r.finished);
    j["providers"] = r.providers;
    j["exit_code"] = r.exit_code();
    j["result"] = r.not_run                                                ? "not_run"
                  : r.exit_code() == 0                                     ? "clean"
                  : r.exit_code() == static_cast<int>(ExitCode::attention) ? "attention"
                  : r.exit_code() == static_cast<int>(ExitCode::config)    ? "configuration_error"
                                                                           : "failed";
    if (r.failure) {
        j["failure"] = *r.failure;
    }
    j["leases_expired"] = r.leases_expired;
    const engine::ReconcileSummary summary = engine::summarize(r.reconciled);
    j["lookups_failed"] = summary.lookups_failed;
    j["reconciled"] = nlohmann::ordered_json::object();
    for (const auto& [name, t] : summary.by_outcome) {
        j["reconciled"][name] = {{"payments", t.payments}, {"amounts", t.amounts}};
    }
    j["sent"] = {{"attempted", r.sent.attempted},
                 {"fenced_out", r.sent.fenced_out},
                 {"settled_as", r.sent.settled_as}};
    j["to_review"] = nlohmann::ordered_json::array();
    for (const auto* o : summary.newly_in_review) {
        j["to_review"].push_back(outcome_json(*o));
    }
    j["open"] = open_json(r.open);
    j["statements"] = statements_json(r.statements);
    j["statements_not_run"] = nlohmann::ordered_json::array();
    for (const auto& [provider, why] : r.statements_not_run) {
        j["statements_not_run"].push_back({{"provider", provider}, {"why", why}});
    }
    j["rejected_requests"] = nlohmann::ordered_json::array();
    for (const auto& g : r.rejected) {
        j["rejected_requests"].push_back({{"provider", g.provider},
                                          {"code", g.code},
                                          {"payments", g.payments},
                                          {"latest_payment_id", g.latest_payment_id},
                                          {"latest_reason", g.latest_reason},
                                          {"runbook", "docs/operations.md#request_rejected"}});
    }
    j["contradicting_events"] = nlohmann::ordered_json::array();
    for (const auto& [provider, n] : r.contradicting_events) {
        j["contradicting_events"].push_back({{"provider", provider}, {"events", n}});
    }
    j["event_deliveries"] = nlohmann::ordered_json::array();
    for (const auto& e : r.endpoints) {
        if (e.dead > 0 || e.state != "enabled") {
            j["event_deliveries"].push_back({{"tenant_id", e.tenant_id},
                                             {"endpoint_id", e.endpoint_id},
                                             {"state", e.state},
                                             {"dead", e.dead},
                                             {"pending", e.pending}});
        }
    }
    j["dead_deliveries"] = r.dead_deliveries();
    j["disabled_endpoints"] = r.disabled_endpoints();
    j["in_review"] = r.in_review();
    j["still_unknown"] = r.still_unknown();
    j["status_queries_failed"] = r.lookups_failed();
    j["unknown_after_failed_queries"] = r.lookups_failing();
    j["configuration_errors"] = r.configuration_errors();
    j["credentials_refused"] = nlohmann::ordered_json::array();
    for (const auto& c : r.credentials_refused) {
        j["credentials_refused"].push_back({{"provider", c.provider},
                                            {"http_status", c.http_status},
                                            {"code", c.code},
                                            {"while", c.call},
                                            {"check", c.check}});
    }
    j["waiting_too_long"] = r.waiting_too_long();
    j["not_configured"] = r.not_configured();
    j["authorizations_expired"] = authorizations_json(r.authorizations.expired);
    j["authorizations_expiring"] = authorizations_json(r.authorizations.expiring);
    j["attention"] = r.attention(report_files);
    return j;
}

// The last lines of the summary: what needs attention, each with the command that starts the work,
// then the `result:` line, last, so that the end of a cron mail says how the night went.
std::string result_line(const engine::NightlyReport& r,
                        const std::vector<std::string>& report_files) {
    std::ostringstream out;
    const int code = r.exit_code();
    if (r.not_run) {
        out << "result: NOT RUN (exit " << code << ") " << printable(*r.failure)
            << "; run payrecon nightly again once that one is done, if its result needs it\n";
        return out.str();
    }
    if (r.interrupted) {
        out << "result: INTERRUPTED (exit " << code << ") " << printable(*r.failure)
            << "; run payrecon nightly again to finish\n";
        return out.str();
    }
    if (r.failure) {
        out << "result: FAILED (exit " << code << ") " << printable(*r.failure)
            << "; what was done before is recorded: run payrecon nightly again when it is fixed\n";
        return out.str();
    }
    const auto reasons = r.attention(report_files);
    if (!reasons.empty()) {
        out << "needing attention:\n";
    }
    for (const auto& reason : reasons) {
        out << "  - " << reason << "\n";
    }
    if (code == static_cast<int>(ExitCode::failure)) {
        for (const auto& st : r.statements) {
            if (st.failure) {
                out << "  - " << st.title << " FAILED: " << printable(*st.failure) << "\n";
            }
        }
        out << "result: FAILED (exit " << code
            << "): a statement did not complete; the rest of the run did\n";
    } else if (code == static_cast<int>(ExitCode::config)) {
        for (const auto& e : r.configuration_errors()) {
            out << "  - " << printable(e) << "\n";
        }
        out << "result: CONFIGURATION ERROR (exit " << code << ")\n";
    } else if (code == static_cast<int>(ExitCode::attention)) {
        out << "result: attention needed (exit 3)"
            << (report_files.empty() ? "" : "; the report: " + report_files.front()) << "\n";
    } else if (code == 0) {
        out << "result: clean (exit 0)\n";
    } else {
        out << "result: exit " << code << "\n";
    }
    return out.str();
}

// "    name                  count   amounts": one row of a per-name tally.
void tally_row(std::ostream& out, const std::string& name, const Tally& t,
               const std::string& suffix = "") {
    out << "    " << std::left << std::setw(20) << name << std::right << std::setw(6) << t.payments
        << "   " << amounts(t.amounts) << suffix << "\n";
}

bool in_state(const std::string& state, PaymentState s) {
    return state == to_string(s);
}

// What the run did: providers, leases taken over, unknown payments reconciled, sends.
void print_work(std::ostream& out, const engine::NightlyReport& r,
                const engine::ReconcileSummary& summary) {
    const auto seconds = std::chrono::duration<double>(r.finished - r.started).count();
    out << "payrecon nightly " << reports::format_utc(r.started) << " (" << std::fixed
        << std::setprecision(1) << seconds << " s)\n";
    std::string names;
    for (const auto& p : r.providers) {
        names += (names.empty() ? "" : ", ") + p;
    }
    out << "  providers: " << (names.empty() ? "(none configured)" : names) << "\n";
    out << "  expired leases taken over (a worker died mid-call): " << r.leases_expired << "\n";
    for (const auto& c : r.credentials_refused) {
        out << "  provider " << c.provider << " REFUSED our credentials (HTTP " << c.http_status
            << ") " << c.call << ": called no more in this run\n";
    }
    const auto operations =
        std::count_if(r.reconciled.begin(), r.reconciled.end(),
                      [](const auto& o) { return o.kind != OperationKind::charge; });
    out << "  unknown payments reconciled: " << r.reconciled.size();
    if (operations > 0) {
        out << " (" << operations << " of them refunds, captures or voids)";
    }
    if (summary.lookups_failed > 0) {
        out << " (" << summary.lookups_failed
            << " status queries FAILED: attention; those are asked again next "
            << "run, and go to review after --lookup-failures in a row)";
    }
    out << "\n";
    for (const auto& [name, t] : summary.by_outcome) {
        tally_row(out, name, t);
    }
    out << "  sent (re-sends and payments left due): " << r.sent.attempted;
    if (!r.sent.settled_as.empty()) {
        std::string parts;
        for (const auto& [state, n] : r.sent.settled_as) {
            parts += (parts.empty() ? "" : ", ") + state + " " + std::to_string(n);
        }
        out << " (" << parts << ")";
    }
    out << "\n";
}

// The review queue by code, what this run sent there (the first list_review), and the requests
// providers rejected.
void print_review(std::ostream& out, const engine::NightlyReport& r,
                  const engine::ReconcileSummary& summary, int list_review) {
    const std::vector<const engine::ReconcileOutcome*>& new_review = summary.newly_in_review;
    std::map<std::string, Tally> review_by_code;
    for (const auto& q : r.open) {
        if (in_state(q.state, PaymentState::needs_review)) {
            review_by_code[q.review_code].add(q.amount_minor, q.currency, q.payments);
        }
    }
    out << "  review queue: " << r.in_review() - r.refunds_in_review() << " payment(s)";
    if (r.refunds_in_review() > 0) {
        out << " and " << r.refunds_in_review() << " refund(s), capture(s) or void(s)";
    }
    out << ", " << new_review.size() << " new in this run\n";
    for (const auto& [code, t] : review_by_code) {
        tally_row(out, code, t);
    }
    if (!new_review.empty()) {
        out << "  sent to review in this run:\n";
        int shown = 0;
        for (const auto* o : new_review) {
            if (shown++ == list_review) {
                out << "    ... and " << new_review.size() - static_cast<std::size_t>(list_review)
                    << " more (payrecon review list)\n";
                break;
            }
            // A refund, capture or void by its own ID: what review show and resolve take.
            out << "    "
                << (o->kind == OperationKind::charge
                        ? o->payment_id
                        : std::string(subject_noun(o->kind)) + " " + o->refund_id)
                << "  " << o->provider << "  " << describe_money(o->amount_minor, o->currency)
                << "  " << (o->decision.review ? std::string(to_string(*o->decision.review)) : "")
                << ": " << o->decision.reason << "\n";
        }
    }
    if (!r.rejected.empty()) {
        out << "  REJECTED by the provider (our request refused before anything was executed: an "
               "integration or configuration fault; runbook: docs/operations.md, "
               "request_rejected):\n";
        for (const auto& g : r.rejected) {
            out << "    " << std::left << std::setw(20) << g.provider << " " << std::setw(28)
                << printable(g.code) << std::right << std::setw(6) << g.payments << "   latest "
                << g.latest_payment_id << ": " << printable(g.latest_reason) << "\n";
        }
    }
}

// Payments no run finished: still unknown, waiting too long for a worker, or of a provider that is
// not configured.
void print_open(std::ostream& out, const engine::NightlyReport& r) {
    std::map<std::string, Tally> unknown_by_provider;
    for (const auto& q : r.open) {
        if (in_state(q.state, PaymentState::unknown)) {
            unknown_by_provider[q.provider].add(q.amount_minor, q.currency, q.payments);
        }
    }
    if (!unknown_by_provider.empty()) {
        out << "  still unknown (checked again by the next run):\n";
        const auto& known = r.configured.empty() ? r.providers : r.configured;
        for (const auto& [provider, t] : unknown_by_provider) {
            const bool configured = std::find(known.begin(), known.end(), provider) != known.end();
            const bool covered =
                std::find(r.providers.begin(), r.providers.end(), provider) != r.providers.end();
            tally_row(out, provider, t,
                      !configured ? "   NOT CONFIGURED: no run can resolve these"
                      : !covered  ? "   (not covered by this run's --provider)"
                                  : "");
        }
    }
    const auto stuck = r.stuck();
    if (!stuck.empty()) {
        out << "  waiting too long (pending or retry_scheduled for more than "
            << r.stuck_after.count() << " s; no worker sent them):\n";
        for (const auto& q : stuck) {
            out << "    " << std::left << std::setw(20) << q.provider << std::right << std::setw(6)
                << q.stuck << "   " << q.state << "   payrecon payments list --state " << q.state
                << " --provider " << q.provider << "\n";
        }
    }
    std::map<std::string, Tally> orphaned_by_provider;
    for (const auto& q : r.orphaned()) {
        // unknown ones are listed above, marked NOT CONFIGURED
        if (!in_state(q.state, PaymentState::unknown)) {
            orphaned_by_provider[q.provider].add(q.amount_minor, q.currency, q.payments);
        }
    }
    if (!orphaned_by_provider.empty()) {
        out << "  open payments of providers NOT CONFIGURED (no worker can send them):\n";
        for (const auto& [provider, t] : orphaned_by_provider) {
            tally_row(out, provider, t, "   payrecon payments list --provider " + provider);
        }
    }
}

// Each statement's counts and the first list_findings findings of each category; the report has
// them all.
void print_statement(std::ostream& out, const reports::Report& st, int list_findings,
                     const std::vector<std::string>& report_files) {
    out << "  " << st.title << ":";
    long long records = 0;
    for (const auto& c : st.categories) {
        const auto& t = st.totals.at(c);
        records += t.count;
        if (t.count > 0) {
            // The money beside the count: "missing_remote 2 (126.56 EUR)"; matched is only counted.
            out << " " << c << " " << t.count
                << (is_match(c) || t.amounts.empty() ? "" : " (" + amounts(t.amounts) + ")");
        }
    }
    if (records == 0 && !st.failure) {
        out << " no records on either side in this window";
    }
    out << (st.failure ? "  FAILED: " + printable(*st.failure) : "") << "\n";
    // The first few of each category (the cron mail stays readable).
    std::map<std::string, long long> shown;
    long long left_out = 0;
    for (const auto& f : st.findings) {
        if (shown[f.category]++ >= list_findings) {
            ++left_out;
            continue;
        }
        out << "    " << f.category << "  " << printable(f.provider_reference.value_or("-")) << "  "
            << (f.refund_id ? "refund " + *f.refund_id
                            : f.payment_id.value_or("(no payment of ours)"))
            << "  " << printable(f.detail)
            << (f.handled ? "  [handled by " + printable(f.handled->by) + ": " +
                                printable(f.handled->note) + "]"
                          : std::string())
            << "\n";
    }
    long long counted = 0;
    for (const auto& c : st.categories) {
        counted += is_match(c) ? 0 : st.totals.at(c).count;
    }
    // And those the statement counted but did not list at all.
    left_out += std::max<long long>(0, counted - static_cast<long long>(st.findings.size()));
    if (left_out > 0) {
        out << "    ... and " << left_out << " more finding(s), at most " << list_findings
            << " of each category listed here (--list-findings): "
            << (report_files.empty() ? "write them all with --output report.html"
                                     : "all of them are in " + report_files.front())
            << "\n";
    }
}

// The authorisation watch: those that expired uncaptured in this run and those expiring within
// the horizon, the first `limit` of each listed.
void print_authorizations(std::ostream& out, const engine::NightlyReport& r, int limit) {
    const auto list = [&](const std::vector<store::WatchedAuthorization>& all,
                          const std::string& what) {
        if (all.empty()) {
            return;
        }
        out << "  authorisations " << what << ": " << all.size() << "\n";
        int shown = 0;
        for (const auto& a : all) {
            if (shown++ == limit) {
                out << "    ... and " << all.size() - static_cast<std::size_t>(limit)
                    << " more (nightly --output report.html lists them all)\n";
                break;
            }
            out << "    " << a.payment_id << "  " << a.provider << "  "
                << describe_money(a.amount_minor - a.capture_held_minor, a.currency)
                << " uncaptured of " << describe_money(a.amount_minor, a.currency) << ", expires "
                << a.expires_at << "  " << printable(a.merchant_reference) << "\n";
        }
    };
    list(r.authorizations.expired, "EXPIRED uncaptured in this run");
    list(r.authorizations.expiring,
         "expiring within " + std::to_string(r.authorization_horizon.count() / 3600) + " h");
}

void print_summary(std::ostream& out, const engine::NightlyReport& r, int list_review,
                   int list_findings, const std::vector<std::string>& report_files) {
    if (r.not_run) {
        out << result_line(r, report_files); // nothing was done: nothing else to say
        return;
    }
    const engine::ReconcileSummary summary = engine::summarize(r.reconciled);
    print_work(out, r, summary);
    print_review(out, r, summary, list_review);
    print_open(out, r);
    print_authorizations(out, r, list_review);
    for (const auto& st : r.statements) {
        print_statement(out, st, list_findings, report_files);
    }
    for (const auto& [provider, why] : r.statements_not_run) {
        out << "statement of " << printable(provider) << ": not run, " << why << "\n";
    }
    out << result_line(r, report_files);
}

void run_nightly_cmd(AppState& state, const NightlyCliOptions& opts) {
    if (opts.limit < 1 || opts.list_review < 0 || opts.list_findings < 0) {
        throw UsageError(
            "--limit must be at least 1, --list-review and --list-findings at least 0");
    }
    // Ctrl-C (or SIGTERM) stops after the payment in hand, and the summary says what was left; a
    // second one stops at once. Before any thread starts: they inherit the blocked signals.
    std::atomic<bool> stop{false};
    StopOnSignal on_signal([&stop](int sig) {
        std::cerr << "\npayrecon nightly: " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
                  << ": stopping after the payment in hand (again: stop at once)" << std::endl;
        stop = true;
    });
    const providers::Config config = load_provider_config(state.global);
    const auto chosen = choose_providers(config, opts.only);
    ProviderSet set = make_providers(chosen);
    engine::NightlyOptions no;
    no.stop = &stop;
    no.actor = "nightly:" + operator_name(state.global);
    no.reconcile.limit = opts.limit;
    no.reconcile.policy = to_policy(opts.policy);
    no.send_due = !opts.no_send;
    no.stuck_after = parse_duration(opts.stuck_after, "--stuck-after");
    no.authorization_horizon =
        parse_duration(opts.authorization_horizon, "--authorization-horizon");
    for (const auto& [name, p] : config.providers) {
        no.configured.push_back(name);
        no.amount_tolerance_minor[name] = p.amount_tolerance_minor;
        no.credentials[name] = credentials_hint(p);
        no.dashboard_urls[name] = providers::dashboard_url(p);
    }
    if (!opts.no_statement) {
        const long long today =
            utc_day_start(std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count());
        no.statement_from = opts.statement_date.empty()
                                ? today - 86400
                                : parse_utc_time(opts.statement_date, "--statement-date");
        no.statement_to = no.statement_from + 86400;
        no.statement_margin = parse_duration(opts.margin, "--margin");
    }

    const bool tty = ::isatty(STDERR_FILENO) == 1;
    engine::NightlyProgress progress;
    if (tty) {
        progress = [](const std::string& phase, const engine::NightlyReport& r) {
            std::cerr << "\r\033[K" << phase << ": " << r.reconciled.size() << " reconciled, "
                      << r.sent.attempted << " sent" << std::flush;
            if (phase == "done") {
                std::cerr << "\n";
            }
        };
    }
    std::optional<OpenDatabase> opened;
    try {
        opened = open_database(state.global, SchemaCheck::migrate_embedded,
                               [&stop] { return stop.load(); });
    } catch (const store::MigrationWaitStopped& e) {
        // Stopped while another process held the migration lock: nothing was done at all.
        std::cout << "result: INTERRUPTED (exit 1) " << e.what()
                  << " and nothing reconciled; run payrecon nightly again\n";
        state.exit_code = static_cast<int>(ExitCode::failure);
        return;
    }
    const engine::NightlyReport report =
        engine::run_nightly(*opened->db, set.pointers, no, progress);
    if (opts.report.wanted()) {
        emit_report(engine::nightly_report(report), opts.report);
    }
    if (opts.json) {
        std::cout << summary_json(report, opts.report.outputs).dump(2) << std::endl;
    } else if (!opts.report.wanted() || !opts.report.outputs.empty()) {
        print_summary(std::cout, report, opts.list_review, opts.list_findings, opts.report.outputs);
    }
    state.exit_code = report.exit_code();
}

} // namespace

void setup_nightly(CLI::App& app, AppState& state) {
    auto opts = std::make_shared<NightlyCliOptions>();
    CLI::App* n = app.add_subcommand(
        "nightly", "the nightly job: take over expired leases, reconcile every provider, send what "
                   "is due, print a summary (exit 0 clean, 3 attention needed, 4 configuration "
                   "error, 1 failed)");
    n->add_option("--provider", opts->only, "only these configured providers (repeatable)");
    n->add_option("--limit", opts->limit, "payments reconciled at most")->capture_default_str();
    n->add_flag("--no-send", opts->no_send, "schedule re-sends but leave the sending to workers");
    n->add_option("--list-review", opts->list_review,
                  "payments sent to review listed in the summary at most")
        ->capture_default_str();
    n->add_option("--list-findings", opts->list_findings,
                  "statement findings listed in the summary at most, per category (the report "
                  "written with --output has them all)")
        ->capture_default_str();
    n->add_flag("--json", opts->json, "print the summary as JSON");
    n->add_flag("--no-statement", opts->no_statement,
                "skip the statement diff of the providers that can list their transactions");
    n->add_option("--statement-date", opts->statement_date,
                  "the UTC day the statement diff covers, e.g. 2026-12-01 (default: yesterday)");
    n->add_option("--margin", opts->margin,
                  "statement: read both sides this much wider than the day")
        ->capture_default_str();
    n->add_option("--stuck-after", opts->stuck_after,
                  "a pending or retry_scheduled payment waiting longer than this needs attention")
        ->capture_default_str();
    n->add_option("--authorization-horizon", opts->authorization_horizon,
                  "list the authorisations (capture \"manual\") that expire within this with "
                  "something left to capture")
        ->capture_default_str();
    add_policy_options(*n, opts->policy);
    add_report_options(*n, opts->report);
    n->callback([&state, opts] { run_nightly_cmd(state, *opts); });
}

} // namespace payrecon::cli
