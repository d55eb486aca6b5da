#include "engine/nightly.hpp"

#include "core/errors.hpp"
#include "core/money.hpp"
#include "core/operator_commands.hpp"
#include "core/statement_diff.hpp"
#include "providers/registry.hpp"
#include "store/db.hpp"
#include "store/run_lock.hpp"

#include <algorithm>
#include <exception>
#include <map>
#include <optional>
#include <variant>

namespace payrecon::engine {

std::vector<store::QueueCount> NightlyReport::orphaned() const {
    std::vector<store::QueueCount> out;
    const auto& known = configured.empty() ? providers : configured;
    for (const auto& q : open) {
        if (std::find(known.begin(), known.end(), q.provider) == known.end()) {
            out.push_back(q);
        }
    }
    return out;
}

std::vector<store::QueueCount> NightlyReport::stuck() const {
    std::vector<store::QueueCount> out;
    const auto& known = configured.empty() ? providers : configured;
    for (const auto& q : open) {
        if (q.stuck > 0 && std::find(known.begin(), known.end(), q.provider) != known.end()) {
            out.push_back(q);
        }
    }
    return out;
}

long long NightlyReport::lookups_failed() const {
    long long n = 0;
    for (const auto& o : reconciled) {
        n += o.lookup == LookupStatus::failed ? 1 : 0;
    }
    return n;
}

long long NightlyReport::lookups_failing() const {
    long long n = 0;
    for (const auto& q : open) {
        n += q.state == "unknown" ? q.lookups_failing : 0;
    }
    return n;
}

std::vector<std::string> NightlyReport::configuration_errors() const {
    std::vector<std::string> out;
    for (const CredentialRefusal& r : credentials_refused) {
        out.push_back("provider " + r.provider + " REFUSED our credentials (HTTP " +
                      std::to_string(r.http_status) + (r.code.empty() ? "" : " " + r.code) + ") " +
                      (r.call.empty() ? "" : r.call + " ") +
                      "and was called no more in this run: its payments wait as they were, nothing "
                      "was charged. Check " +
                      (r.check.empty() ? "its credentials" : r.check) +
                      ", then run payrecon nightly (or a worker) again; payments an earlier run "
                      "sent to review for it: payrecon review requeue --provider " +
                      r.provider + " --auth-failures --note \"...\"");
    }
    for (const auto& s : statements) {
        if (s.failure && s.exit_code == static_cast<int>(ExitCode::config)) {
            out.push_back(s.title + ": " + *s.failure);
        }
    }
    return out;
}

long long NightlyReport::in_review() const {
    long long n = 0;
    for (const auto& q : open) {
        n += q.state == "needs_review" ? q.payments : 0;
    }
    return n;
}

long long NightlyReport::refunds_in_review() const {
    long long n = 0;
    for (const auto& q : open) {
        n += q.state == "needs_review" && q.kind != "charge" ? q.payments : 0;
    }
    return n;
}

std::vector<const ReconcileOutcome*> NightlyReport::reversed() const {
    std::vector<const ReconcileOutcome*> out;
    for (const auto& o : reconciled) {
        if (o.reversed()) {
            out.push_back(&o);
        }
    }
    return out;
}

long long NightlyReport::rejected_requests() const {
    long long n = 0;
    for (const auto& r : rejected) {
        n += r.payments;
    }
    return n;
}

long long NightlyReport::contradictions() const {
    long long n = 0;
    for (const auto& c : contradicting_events) {
        n += c.second;
    }
    return n;
}

long long NightlyReport::still_unknown() const {
    long long n = 0;
    for (const auto& q : open) {
        n += q.state == "unknown" ? q.payments : 0;
    }
    return n;
}

long long NightlyReport::dead_deliveries() const {
    long long n = 0;
    for (const auto& e : endpoints) {
        n += e.dead;
    }
    return n;
}

long long NightlyReport::disabled_endpoints() const {
    return std::count_if(
        endpoints.begin(), endpoints.end(),
        [](const store::EndpointDeliveryStats& e) { return e.state != "enabled"; });
}

namespace {

// A refund or capture the provider reversed after it had succeeded: what it means and what to do.
void reversal_lines(const std::vector<const ReconcileOutcome*>& reversed,
                    std::vector<std::string>& out) {
    for (const ReconcileOutcome* o : reversed) {
        const std::string noun(subject_noun(o->kind));
        out.push_back(noun + " " + o->refund_id + " of payment " + o->payment_id + " (" +
                      describe_money(o->amount_minor, o->currency) + ", " + o->provider +
                      ") was REVERSED by the provider after it had succeeded: " +
                      (o->kind == OperationKind::capture
                           ? "nothing was taken; capture again while the authorisation lasts, "
                             "or tell the customer"
                           : "the money stays with the merchant and is refundable again; tell "
                             "the customer, or refund again") +
                      " (payrecon " + noun + "s show " + o->refund_id + ")");
    }
}

// The authorisation watch: those that expired uncaptured in this run (their amounts), and those
// that expire within the horizon.
void authorization_lines(const store::AuthorizationWatch& watch, std::chrono::seconds horizon,
                         std::vector<std::string>& out) {
    if (!watch.expired.empty()) {
        std::map<std::string, long long> lost; // currency -> minor units never captured
        for (const auto& a : watch.expired) {
            lost[a.currency] += a.amount_minor - a.capture_held_minor;
        }
        std::string amounts;
        for (const auto& [currency, minor] : lost) {
            amounts += (amounts.empty() ? "" : ", ") + describe_money(minor, currency);
        }
        out.push_back(std::to_string(watch.expired.size()) +
                      " authorisation(s) EXPIRED uncaptured in this run (" + amounts +
                      " never captured; the provider releases it to the customer): listed "
                      "above as authorization_expired; nothing more can be captured of them");
    }
    if (!watch.expiring.empty()) {
        out.push_back(std::to_string(watch.expiring.size()) + " authorisation(s) expire within " +
                      std::to_string(horizon.count() / 3600) +
                      " h with something left to capture (listed above as "
                      "authorization_expiring): payrecon payments capture <id> ..., or payments "
                      "void <id> ... if the order will not ship");
    }
}

// Events out: each endpoint's dead deliveries, and a disabled endpoint.
void endpoint_lines(const std::vector<store::EndpointDeliveryStats>& endpoints,
                    std::vector<std::string>& out) {
    for (const auto& e : endpoints) {
        if (e.dead > 0) {
            out.push_back(std::to_string(e.dead) + " event deliveries to endpoint " +
                          e.endpoint_id +
                          " are DEAD (every try failed): payrecon deliveries list "
                          "--dead --endpoint " +
                          e.endpoint_id +
                          "; once it answers again: payrecon deliveries replay <id> --note ...");
        }
        if (e.state != "enabled") {
            out.push_back("webhook endpoint " + e.endpoint_id + " of tenant " + e.tenant_id +
                          " is DISABLED: nothing is delivered to it (payrecon endpoint show " +
                          e.endpoint_id +
                          " says why); when the merchant is ready: payrecon "
                          "endpoint enable " +
                          e.endpoint_id + ", then deliveries replay --endpoint ... --since ...");
        }
    }
}

} // namespace

long long NightlyReport::waiting_too_long() const {
    long long n = 0;
    for (const auto& q : stuck()) {
        n += q.stuck;
    }
    return n;
}

long long NightlyReport::not_configured() const {
    long long n = 0;
    for (const auto& q : orphaned()) {
        n += q.payments;
    }
    return n;
}

std::vector<std::string>
NightlyReport::attention(const std::vector<std::string>& report_files) const {
    const NightlyReport& r = *this;
    std::vector<std::string> out;
    for (const auto& g : r.rejected) {
        out.push_back(std::to_string(g.payments) + " payment(s) of " + g.provider +
                      " REJECTED by the provider (" + g.code +
                      "): an integration or configuration fault, nothing was charged; fix it "
                      "(docs/operations.md, request_rejected), then send each again with the "
                      "command its review show prints (payrecon review list --provider " +
                      g.provider +
                      " lists them; the latest: " + review_show_command(g.latest_payment_id) + ")");
    }
    reversal_lines(r.reversed(), out);
    authorization_lines(r.authorizations, r.authorization_horizon, out);
    if (r.in_review() > 0) {
        const long long refunds = r.refunds_in_review();
        out.push_back(std::to_string(r.in_review() - refunds) + " payment(s)" +
                      (refunds > 0
                           ? " and " + std::to_string(refunds) + " refund(s), capture(s) or void(s)"
                           : "") +
                      " in review: payrecon review list");
    }
    for (const auto& [provider, n] : r.contradicting_events) {
        out.push_back(std::to_string(n) + " event(s) from " + provider +
                      " CONTRADICT a settled payment (another outcome or amount; the payment kept "
                      "its state): payrecon events list --contradicting");
    }
    endpoint_lines(r.endpoints, out);
    if (const long long stuck = r.waiting_too_long(); stuck > 0) {
        out.push_back(std::to_string(stuck) +
                      " payment(s) pending or retry_scheduled for more than " +
                      std::to_string(r.stuck_after.count()) +
                      " s: is a worker running for their provider? payrecon payments list --state "
                      "pending; one that must not be sent: the cancel command its payments show "
                      "prints");
    }
    if (const long long orphaned = r.not_configured(); orphaned > 0) {
        out.push_back(
            std::to_string(orphaned) +
            " open payment(s) name a provider the configuration does not have: add it to "
            "the --config file, or cancel those never sent (payrecon payments list --state "
            "pending lists them; the cancel command each one's payments show prints)");
    }
    if (r.lookups_failed() > 0) {
        out.push_back(std::to_string(r.lookups_failed()) +
                      " status queries FAILED: check the provider's status page and credentials; "
                      "they are asked again next run (payrecon payments list --state unknown lists "
                      "them; review recheck with one's ID asks now)");
    }
    if (r.lookups_failing() > r.lookups_failed()) {
        out.push_back(std::to_string(r.lookups_failing()) +
                      " unknown payment(s) whose last status query FAILED are still unknown "
                      "(asked again at their next check; payrecon payments list --state unknown, "
                      "payrecon review recheck <id> asks now)");
    }
    for (const auto& st : r.statements) {
        if (st.exit_code == static_cast<int>(ExitCode::attention)) {
            out.push_back(st.title + " has " + std::to_string(st.needing_attention) +
                          " finding(s) in the provider's books (listed above; " +
                          (report_files.empty()
                               ? std::string("write them all with --output report.html")
                               : "all of them are in " + report_files.front()) +
                          ")");
        }
    }
    return out;
}

int NightlyReport::exit_code() const {
    if (failure) {
        return static_cast<int>(ExitCode::failure);
    }
    // A provider refused our credentials: a configuration error (4), unless a statement failed
    // otherwise.
    for (const auto& s : statements) {
        if (s.failure && s.exit_code != static_cast<int>(ExitCode::config)) {
            return static_cast<int>(ExitCode::failure);
        }
    }
    if (!configuration_errors().empty()) {
        return static_cast<int>(ExitCode::config);
    }
    // What the summary lists as needing attention is what makes the exit code 3: one list.
    return attention({}).empty() ? static_cast<int>(ExitCode::ok)
                                 : static_cast<int>(ExitCode::attention);
}

reports::Finding report_finding(const ReconcileOutcome& o, const std::string& dashboard_url) {
    reports::Finding f;
    f.category = o.fenced_out   ? "changed_meanwhile"
                 : o.reversed() ? "refund_reversed"
                                : std::string(to_string(o.decision.action));
    f.needs_attention = o.newly_in_review() || o.reversed();
    f.provider = o.provider;
    f.payment_id = o.payment_id;
    f.operation_id = o.operation_id;
    f.merchant_reference = o.merchant_reference;
    f.local_amount = o.amount_minor;
    f.local_currency = o.currency;
    if (o.remote) {
        f.provider_reference = o.remote->provider_reference;
        f.remote_amount = o.remote->amount.minor;
        f.remote_currency = o.remote->amount.currency;
        f.remote_at = std::chrono::duration_cast<std::chrono::seconds>(
                          o.remote->created_at.time_since_epoch())
                          .count();
        f.provider_link = providers::dashboard_link(dashboard_url, o.remote->provider_reference);
    }
    f.local_state = std::string(to_string(o.from)) + " -> " + std::string(to_string(o.to));
    f.remote_state =
        std::string(to_string(o.lookup)) + (o.lookup_detail.empty() ? "" : ": " + o.lookup_detail);
    f.detail = (o.decision.review ? std::string(to_string(*o.decision.review)) + ": " : "") +
               o.decision.reason;
    return f;
}

void Tally::add(long long amount_minor, const std::string& currency, long long count) {
    payments += count;
    amounts[currency] += amount_minor;
}

std::string outcome_bucket(const ReconcileOutcome& o) {
    if (o.fenced_out) {
        return "changed meanwhile";
    }
    if (o.reversed()) {
        return "refund reversed";
    }
    switch (o.decision.action) {
    case ReconcileAction::adopt_succeeded:
        return "succeeded";
    case ReconcileAction::adopt_failed:
        return "failed (declined)";
    case ReconcileAction::resend:
        return "re-sent";
    case ReconcileAction::check_later:
        return "check again later";
    case ReconcileAction::review:
        return "to review";
    }
    return "to review";
}

std::optional<OperatorError> ReconcileSummary::problem() const {
    if (!credentials_refused.empty()) {
        return credentials_error(credentials_refused,
                                 "it was asked nothing more in this run; its unknown payments wait "
                                 "for the next run",
                                 "run payrecon reconcile again");
    }
    if (lookups_asked > 0 && lookups_failed == lookups_asked && to_review == 0) {
        return OperatorError(ExitCode::failure,
                             (lookups_asked == 1
                                  ? std::string("the one status query FAILED: nothing was "
                                                "learned, and the payment is still unknown")
                                  : "every one of the " + std::to_string(lookups_asked) +
                                        " status queries FAILED: nothing was learned, and the "
                                        "payments are still unknown"),
                             "check the providers' status pages, base_url and the network; the "
                             "payments are asked again at their next check (payrecon review "
                             "recheck <id> asks now)");
    }
    return std::nullopt;
}

int ReconcileSummary::exit_code() const {
    if (const auto p = problem()) {
        return static_cast<int>(p->code());
    }
    return to_review > 0 ? static_cast<int>(ExitCode::attention) : 0;
}

ReconcileSummary summarize(const std::vector<ReconcileOutcome>& outcomes,
                           std::vector<CredentialRefusal> credentials_refused) {
    ReconcileSummary s;
    s.reconciled = outcomes.size();
    s.credentials_refused = std::move(credentials_refused);
    for (const auto& o : outcomes) {
        s.fenced_out += o.fenced_out;
        s.lookups_asked += o.lookup != LookupStatus::not_asked;
        s.lookups_failed += o.lookup == LookupStatus::failed;
        s.by_outcome[outcome_bucket(o)].add(o.amount_minor, o.currency);
        if (o.newly_in_review()) {
            ++s.to_review;
            s.newly_in_review.push_back(&o);
        }
    }
    return s;
}

reports::Report reconcile_report(const std::vector<ReconcileOutcome>& outcomes, bool dry_run,
                                 std::vector<CredentialRefusal> credentials_refused) {
    const ReconcileSummary s = summarize(outcomes, std::move(credentials_refused));
    reports::Report report;
    report.kind = "reconcile";
    report.generated_at = reports::format_utc(std::chrono::system_clock::now());
    report.title =
        std::string("payrecon reconcile") + (dry_run ? " (dry run: nothing written)" : "");
    for (const auto& o : outcomes) {
        report.add(report_finding(o));
    }
    report.facts = {{"reconciled", std::to_string(s.reconciled)},
                    {"to review", std::to_string(s.to_review)},
                    {"changed meanwhile", std::to_string(s.fenced_out)},
                    {"status queries failed",
                     std::to_string(s.lookups_failed) + " of " + std::to_string(s.lookups_asked)}};
    if (const auto p = s.problem()) {
        report.failure = std::string(p->what()) + " (" + p->hint() + ")";
    }
    report.exit_code = s.exit_code();
    return report;
}

namespace {

// The authorisation watch's payments as findings, each needing attention.
void add_authorization_findings(const store::AuthorizationWatch& watch, reports::Report& out) {
    for (const auto* watched : {&watch.expired, &watch.expiring}) {
        const bool expired = watched == &watch.expired;
        for (const auto& a : *watched) {
            reports::Finding f;
            f.category = expired ? "authorization_expired" : "authorization_expiring";
            f.needs_attention = true;
            f.provider = a.provider;
            f.payment_id = a.payment_id;
            f.merchant_reference = a.merchant_reference;
            f.local_amount = a.amount_minor - a.capture_held_minor;
            f.local_currency = a.currency;
            f.local_state = "authorized, " + describe_money(a.captured_minor, a.currency) +
                            " captured of " + describe_money(a.amount_minor, a.currency);
            f.detail = expired ? "the authorisation lapsed at " + a.expires_at +
                                     " by the provider's rules with this amount never captured; "
                                     "nothing more can be captured of it"
                               : "the authorisation lapses at " + a.expires_at +
                                     ": capture what ships before then (payrecon payments "
                                     "capture " +
                                     a.payment_id + " ...), or void it";
            out.add(std::move(f));
        }
    }
}

// A statement's categories and totals added to the night's.
void merge_totals(const reports::Report& s, reports::Report& out) {
    for (const auto& c : s.categories) {
        if (std::find(out.categories.begin(), out.categories.end(), c) == out.categories.end()) {
            out.categories.push_back(c);
        }
        auto& total = out.totals[c];
        const auto& t = s.totals.at(c);
        total.count += t.count;
        for (const auto& [currency, minor] : t.amounts) {
            total.amounts[currency] += minor;
        }
    }
}

// A statement's findings and money added to the night's report. A payment this run reconciled is
// one finding (`reconciled_at`: its index in out.findings): the statement's unresolved_unknown of
// it adds its evidence to that finding instead of counting the payment a second time.
void merge_statement(const reports::Report& s,
                     const std::map<std::string, std::size_t>& reconciled_at,
                     reports::Report& out) {
    merge_totals(s, out);
    const std::string unresolved(to_string(FindingCategory::unresolved_unknown));
    out.needing_attention += s.needing_attention;
    for (const auto& [currency, minor] : s.at_risk) {
        out.at_risk[currency] += minor;
    }
    out.handled += s.handled;
    for (const auto& [currency, minor] : s.handled_amounts) {
        out.handled_amounts[currency] += minor;
    }
    for (const auto& f : s.findings) {
        const auto at = f.category == unresolved && f.payment_id ? reconciled_at.find(*f.payment_id)
                                                                 : reconciled_at.end();
        if (at == reconciled_at.end()) {
            out.findings.push_back(f);
            continue;
        }
        out.subtract(f);
        // Its money at risk may change with the provider's amount beside ours.
        reports::Finding& mine = out.findings[at->second];
        out.subtract(mine);
        mine.provider_reference = f.provider_reference;
        mine.provider_link = f.provider_link;
        mine.remote_amount = f.remote_amount;
        mine.remote_currency = f.remote_currency;
        mine.remote_at = f.remote_at;
        mine.merchant_reference =
            mine.merchant_reference ? mine.merchant_reference : f.merchant_reference;
        mine.detail += "; the statement: " + f.detail;
        out.add(mine, false);
    }
    out.findings_truncated = out.findings_truncated || s.findings_truncated;
}

} // namespace

reports::Report nightly_report(const NightlyReport& r) {
    reports::Report out;
    out.kind = "nightly";
    out.title = "payrecon nightly " + reports::format_utc(r.started);
    out.generated_at = reports::format_utc(r.finished);
    std::string names;
    for (const auto& p : r.providers) {
        names += (names.empty() ? "" : ", ") + p;
    }
    out.facts = {
        {"providers", names.empty() ? "(none)" : names},
        {"expired leases taken over", std::to_string(r.leases_expired)},
        {"unknown payments reconciled", std::to_string(r.reconciled.size())},
        {"sent", std::to_string(r.sent.attempted)},
        {"in review after the run", std::to_string(r.in_review())},
        {"still unknown after the run", std::to_string(r.still_unknown())},
        {"status queries failed", std::to_string(r.lookups_failed())},
        {"unknown payments whose last status query failed", std::to_string(r.lookups_failing())},
        {"requests the provider rejected (in review)", std::to_string(r.rejected_requests())},
        {"provider events contradicting a settled payment", std::to_string(r.contradictions())},
        {"dead event deliveries", std::to_string(r.dead_deliveries())},
        {"disabled webhook endpoints", std::to_string(r.disabled_endpoints())},
        {"authorisations expired uncaptured in this run",
         std::to_string(r.authorizations.expired.size())},
        {"authorisations expiring within the horizon",
         std::to_string(r.authorizations.expiring.size())}};
    for (const auto& e : r.configuration_errors()) {
        out.facts.emplace_back("configuration error", e);
    }
    for (const auto& g : r.rejected) {
        out.facts.emplace_back("rejected by " + g.provider,
                               g.code + ": " + std::to_string(g.payments) + " payment(s), e.g. " +
                                   g.latest_payment_id + ": " + g.latest_reason);
    }
    out.facts.emplace_back("waiting too long (pending or retry_scheduled)",
                           std::to_string(r.waiting_too_long()));
    out.facts.emplace_back("open payments of providers not configured",
                           std::to_string(r.not_configured()));
    // A payment this run reconciled is one finding: a statement's unresolved_unknown of it adds
    // its evidence (the provider's reference and amount) to that finding instead of counting the
    // payment a second time.
    std::map<std::string, std::size_t> reconciled_at; // payment ID -> index in out.findings
    for (const auto& o : r.reconciled) {
        const auto d = r.dashboard_urls.find(o.provider);
        out.add(report_finding(o, d == r.dashboard_urls.end() ? "" : d->second));
        reconciled_at[o.payment_id] = out.findings.size() - 1;
    }
    add_authorization_findings(r.authorizations, out);
    for (const auto& [provider, why] : r.statements_not_run) {
        out.facts.emplace_back("statement not run", provider + ": " + why);
    }
    for (const auto& s : r.statements) {
        out.facts.emplace_back("statement", s.title);
        merge_statement(s, reconciled_at, out);
        if (s.failure) {
            out.facts.emplace_back("statement failed", *s.failure);
        }
    }
    out.failure = r.failure;
    out.exit_code = r.exit_code();
    return out;
}

namespace {

// Thrown by a nightly's step when its stop flag is set: the run ends where it is.
struct Interrupted {};

// Takes the lock of this nightly's window and providers: a nightly of other providers
// (`--provider`) shares nothing with this one but statements, and each statement has a lock of its
// own. nullopt, with `report.failure` (and `not_run` if another nightly holds it) saying why, if it
// cannot be had.
std::optional<store::RunLock> take_nightly_lock(store::Db& db, const NightlyOptions& options,
                                                NightlyReport& report) {
    const bool window = options.statement_to > options.statement_from;
    std::vector<std::string> covered = report.providers;
    std::sort(covered.begin(), covered.end());
    std::string name = "nightly";
    if (window) {
        name += " " + std::to_string(options.statement_from) + " " +
                std::to_string(options.statement_to);
    }
    for (const auto& provider : covered) {
        name += " " + provider;
    }
    try {
        auto lock = store::try_run_lock(db.url(), name);
        if (auto* held = std::get_if<store::RunLock>(&lock)) {
            return std::move(*held);
        }
        report.not_run = true;
        report.failure = "another nightly of the same providers is running" +
                         (window ? " on the statement window of " +
                                       reports::format_utc_seconds(options.statement_from) +
                                       " to " + reports::format_utc_seconds(options.statement_to)
                                 : std::string()) +
                         ": " + std::get<store::RunLockHeld>(lock).holder +
                         "; this one did nothing (its summary says how the night went)";
    } catch (const std::exception& e) {
        report.failure = std::string("while taking the nightly's lock: ") + e.what();
    }
    return std::nullopt;
}

// The statement diff of each provider that can list its transactions, for the options' window;
// the others are named in `report.statements_not_run` with why. `step` is called before each.
void diff_statements(store::Db& db, const std::vector<providers::Provider*>& providers,
                     const NightlyOptions& options, const CredentialGate& credentials,
                     NightlyReport& report, std::string& phase,
                     const std::function<void(const std::string&)>& step) {
    for (auto* p : providers) {
        if (credentials.refused(p->name())) {
            report.statements_not_run.emplace_back(
                p->name(), "it refused our credentials earlier in this run");
            continue;
        }
        if (!p->capabilities().list_transactions) {
            report.statements_not_run.emplace_back(
                p->name(), p->capabilities().lookup_by_operation_id
                               ? "it lists nothing by window; payrecon statement --provider " +
                                     p->name() + " looks each of our payments up (a call each)"
                               : "it can neither list its payments nor look one up: compare its "
                                 "own reports");
            continue;
        }
        phase = "diffing the statement of " + p->name();
        step(phase);
        StatementOptions so;
        so.window_from = options.statement_from;
        so.window_to = options.statement_to;
        so.margin = options.statement_margin;
        const auto t = options.amount_tolerance_minor.find(p->name());
        so.amount_tolerance_minor = t == options.amount_tolerance_minor.end() ? 0 : t->second;
        const auto c = options.credentials.find(p->name());
        so.credentials = c == options.credentials.end() ? "" : c->second;
        const auto d = options.dashboard_urls.find(p->name());
        so.dashboard_url = d == options.dashboard_urls.end() ? "" : d->second;
        try {
            report.statements.push_back(run_statement(db, *p, so));
        } catch (const StatementBusy& busy) {
            report.statements_not_run.emplace_back(p->name(), busy.what());
        }
    }
}

} // namespace

NightlyReport run_nightly(store::Db& db, const std::vector<providers::Provider*>& providers,
                          const NightlyOptions& options, const NightlyProgress& progress) {
    NightlyReport report;
    report.started = std::chrono::system_clock::now();
    report.dashboard_urls = options.dashboard_urls;
    for (const auto* p : providers) {
        report.providers.push_back(p->name());
    }
    report.configured = options.configured;
    report.stuck_after = options.stuck_after;
    report.authorization_horizon = options.authorization_horizon;
    const std::function<void(const std::string&)> step = [&](const std::string& phase) {
        if (progress) {
            progress(phase, report);
        }
        if (options.stop != nullptr && options.stop->load() && phase != "done") {
            throw Interrupted{};
        }
    };
    // One record of the providers' credentials for the reconciler and the send pass: an account
    // whose lookup refused them is not called to send either.
    CredentialGate credentials(options.credentials);
    std::string phase = "expiring leases";
    // One nightly of a window at a time: a second, started meanwhile (cron beside an operator),
    // would reconcile beside it safely but list and report everything again.
    std::optional<store::RunLock> lock = take_nightly_lock(db, options, report);
    if (report.failure) {
        report.finished = std::chrono::system_clock::now();
        step("done");
        return report;
    }
    try {
        step(phase);
        report.leases_expired = store::expire_leases(db, options.actor);
        phase = "reconciling";
        step(phase);
        ReconcilerOptions ro = options.reconcile;
        ro.actor = options.actor;
        ro.credentials = &credentials;
        Reconciler reconciler(db, providers, ro);
        reconciler.run([&](const ReconcileOutcome& o) {
            report.reconciled.push_back(o);
            step(phase);
        });
        if (options.send_due && !providers.empty() && !ro.dry_run) {
            phase = "sending";
            step(phase);
            ExecutorOptions eo = options.send;
            eo.worker_id = options.actor;
            eo.lease = default_lease(providers, eo.call_margin);
            eo.credentials = &credentials;
            Executor executor(db, providers, eo);
            while (executor.run_once() > 0 &&
                   executor.counts().attempted < options.reconcile.limit) {
                report.sent = executor.counts();
                step(phase);
            }
            report.sent = executor.counts();
        }
        report.credentials_refused = credentials.refusals();
        if (!ro.dry_run) {
            phase = "watching authorisations";
            step(phase);
            report.authorizations = store::watch_authorizations(
                db, report.providers, options.authorization_horizon, options.actor);
        }
        if (options.statement_to > options.statement_from && !ro.dry_run) {
            diff_statements(db, providers, options, credentials, report, phase, step);
        }
        phase = "counting what is left";
        report.open = store::open_queue_counts(db, options.stuck_after);
        report.rejected = store::rejected_in_review(db);
        report.contradicting_events = store::contradicting_event_counts(db, report.providers);
        report.endpoints = store::endpoint_delivery_stats(db);
    } catch (const Interrupted&) {
        report.credentials_refused = credentials.refusals();
        report.interrupted = true;
        report.failure =
            "interrupted while " + phase + ", after " + std::to_string(report.reconciled.size()) +
            " payment(s) reconciled and " + std::to_string(report.sent.attempted) +
            " sent, each recorded; what it left: the unknown payments this run claimed and did "
            "not ask are due again in " +
            std::to_string(options.reconcile.hold.count()) +
            " s, the rest of the queue waits as it was" +
            (options.statement_to > options.statement_from && report.statements.empty()
                 ? ", and no statement was diffed"
                 : "");
        // What is open now, so the summary says what is left.
        try {
            report.open = store::open_queue_counts(db, options.stuck_after);
        } catch (const std::exception& e) {
            *report.failure += std::string("; what is open could not be counted (") + e.what() +
                               "): payrecon payments list --state unknown shows it";
        }
    } catch (const OperatorError& e) {
        report.credentials_refused = credentials.refusals();
        report.failure =
            "while " + phase + ": " + e.what() + (e.hint().empty() ? "" : " (" + e.hint() + ")");
    } catch (const std::exception& e) {
        report.credentials_refused = credentials.refusals();
        report.failure = "while " + phase + ": " + e.what();
    }
    report.finished = std::chrono::system_clock::now();
    step("done");
    return report;
}

} // namespace payrecon::engine
