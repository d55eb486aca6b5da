#include "engine/statement.hpp"

#include "core/backoff.hpp"
#include "core/errors.hpp"
#include "providers/registry.hpp"

#include <optional>
#include <thread>

namespace payrecon::engine {

store::StatementRecord statement_record_of(const providers::RemotePayment& p) {
    store::StatementRecord s;
    RemoteRecord& r = s.record;
    r.provider_reference = p.provider_reference;
    r.operation_id = p.operation_id;
    r.match_key = p.operation_id ? *p.operation_id : "ref:" + p.provider_reference;
    r.amount_minor = p.amount.minor;
    r.currency = p.amount.currency;
    r.raw_status = p.raw_status;
    switch (p.state) {
    case providers::Outcome::succeeded:
        r.status = p.amount_refunded_minor > 0 ? RemoteStatus::refunded : RemoteStatus::succeeded;
        break;
    case providers::Outcome::declined:
        r.status = RemoteStatus::declined;
        break;
    case providers::Outcome::pending:
        r.status = RemoteStatus::pending;
        break;
    case providers::Outcome::not_sent:
    case providers::Outcome::rejected:
    case providers::Outcome::unknown:
        r.status = RemoteStatus::other;
        break;
    }
    r.at =
        std::chrono::duration_cast<std::chrono::seconds>(p.created_at.time_since_epoch()).count();
    s.amount_refunded = p.amount_refunded_minor;
    s.raw = p.raw;
    return s;
}

reports::Finding report_finding(const DiffFinding& f, const std::string& provider,
                                const std::string& dashboard_url) {
    reports::Finding out;
    out.category = f.category;
    out.needs_attention = f.category != to_string(FindingCategory::matched);
    out.provider = provider;
    out.detail = f.detail;
    const RemoteRecord* r = shown_remote(f);
    if (f.local) {
        out.payment_id = f.local->payment_id;
        out.operation_id = f.local->operation_id;
        out.local_amount = f.local->amount_minor;
        out.local_currency = f.local->currency;
        out.local_state = f.local->state;
        out.local_at = f.local->at;
        out.provider_reference = f.local->provider_reference;
        out.merchant_reference = f.local->merchant_reference;
    }
    if (r != nullptr) {
        if (!out.operation_id && r->operation_id) {
            out.operation_id = r->operation_id;
        }
        out.provider_reference = r->provider_reference;
        out.remote_amount = r->amount_minor;
        out.remote_currency = r->currency;
        out.remote_state = r->raw_status.empty() || r->status == RemoteStatus::refunded
                               ? std::string(to_string(r->status))
                               : r->raw_status;
        out.remote_at = r->at;
    }
    if (out.provider_reference) {
        out.provider_link = providers::dashboard_link(dashboard_url, *out.provider_reference);
    }
    return out;
}

namespace {

// Why a listing stopped for good: recorded on the run (which stays resumable) and in the report.
struct ListingStop {
    std::string error;
    std::string next; // what the operator does about it
    ExitCode code;
};

// Lists the provider's records of the window (widened by the margin) page by page into the run,
// from where the run's listing stands; retries a failed page on the provider's Retry-After, else a
// doubling backoff, at most max_page_retries times in a row. 401/403 stop at once.
std::optional<ListingStop> list_statement(store::Db& db, providers::Provider& provider,
                                          const StatementOptions& options, store::StatementRun& run,
                                          const std::function<void(const std::string&)>& say) {
    const auto wait = options.wait ? options.wait : [](std::chrono::milliseconds d) {
        std::this_thread::sleep_for(d);
    };
    providers::TimeWindow window;
    window.from = std::chrono::system_clock::time_point(
        std::chrono::seconds(options.window_from - options.margin.count()));
    window.to = std::chrono::system_clock::time_point(
        std::chrono::seconds(options.window_to + options.margin.count()));
    // The provider's Retry-After, else 1 s doubling up to 64 s; never over max_wait.
    const Backoff backoff{std::chrono::seconds(1), std::chrono::seconds(64)};
    int failures = 0;
    while (run.status == StatementRunStatus::listing) {
        const providers::ListPage page = provider.list(window, run.list_cursor);
        if (page.ok) {
            failures = 0;
            std::vector<store::StatementRecord> records;
            records.reserve(page.items.size());
            for (const auto& item : page.items) {
                records.push_back(statement_record_of(item));
            }
            store::store_statement_page(db, run, records, page.next_cursor);
            say("listed " + std::to_string(run.remote_records) + " provider records (" +
                std::to_string(run.pages) + " pages)");
            continue;
        }
        const int status = page.call.http_status;
        if (status == 401 || status == 403) {
            // Credentials or permissions: asking again cannot help, and the operator must act.
            return ListingStop{
                "the provider refused our " +
                    std::string(status == 401 ? "credentials (HTTP 401)"
                                              : "request as not permitted (HTTP 403)") +
                    " listing page " + std::to_string(run.pages + 1) +
                    (page.call.detail.empty() ? "" : ": " + page.call.detail),
                "not retried. Check " +
                    (options.credentials.empty() ? "the provider's API key" : options.credentials) +
                    " and that the key may list payments, then run the same window again" +
                    (run.complete_kept ? " (its last complete result is kept until then)" : ""),
                ExitCode::config};
        }
        ++failures;
        const std::string why = page.call.error_class.empty() ? "no answer" : page.call.error_class;
        if (failures > options.max_page_retries) {
            return ListingStop{
                "the provider's listing failed " + std::to_string(failures) +
                    " times in a row at page " + std::to_string(run.pages + 1) + " (" + why + ")",
                "run the same window again to resume where it stopped", ExitCode::failure};
        }
        const std::chrono::seconds delay = std::min(
            page.retry_after
                ? *page.retry_after
                : std::chrono::duration_cast<std::chrono::seconds>(backoff.delay(failures - 1)),
            options.max_wait);
        say("page " + std::to_string(run.pages + 1) + ": " + why + ", waiting " +
            std::to_string(delay.count()) + " s");
        wait(std::chrono::duration_cast<std::chrono::milliseconds>(delay));
    }
    return std::nullopt;
}

// The report's frame: title, every category (so that a clean run shows its zeros), and the run.
reports::Report statement_report(const std::string& provider, const StatementOptions& options,
                                 const store::StatementRun& run) {
    const std::string window = reports::format_utc_seconds(options.window_from) + " .. " +
                               reports::format_utc_seconds(options.window_to);
    reports::Report report;
    report.kind = "statement";
    report.title = "payrecon statement: " + provider + ", " + window;
    report.generated_at = reports::format_utc(std::chrono::system_clock::now());
    for (const auto c : reports::statement_categories()) {
        report.categories.emplace_back(c);
        report.totals[std::string(c)];
    }
    report.facts = {{"run", run.run_id},
                    {"provider", provider},
                    {"window", window},
                    {"margin", std::to_string(options.margin.count()) + " s"}};
    if (run.resumed) {
        report.facts.emplace_back("resumed",
                                  "the listing went on from page " + std::to_string(run.pages + 1));
    }
    return report;
}

// Diffs the listed run and adds its findings (the first listed_findings in full), totals and exit
// code to the report.
void diff_into_report(store::Db& db, store::StatementRun& run, const StatementOptions& options,
                      const std::string& provider, reports::Report& report) {
    std::size_t listed = 0;
    const store::StatementTotals totals = store::diff_statement_run(
        db, run, options.amount_tolerance_minor,
        [&](const DiffFinding& f) {
            const bool list = listed < options.listed_findings;
            listed += list;
            report.findings_truncated = report.findings_truncated || !list;
            report.add(report_finding(f, provider, options.dashboard_url), list);
        },
        options.sorting);
    // Matches are counted, never listed.
    const std::string matched_name(to_string(FindingCategory::matched));
    const auto matched = totals.by_category.find(matched_name);
    report.add_counted(matched_name, matched == totals.by_category.end() ? 0 : matched->second,
                       totals.matched_amounts);
    report.facts.emplace_back("provider records", std::to_string(totals.counts.remote_records));
    report.facts.emplace_back("our payments", std::to_string(totals.counts.local_records));
    report.facts.emplace_back("pages read", std::to_string(run.pages));
    report.facts.emplace_back("runs of this window", std::to_string(run.runs));
    long long attention = 0;
    for (const auto& [category, n] : totals.by_category) {
        attention += category == matched_name ? 0 : n;
    }
    report.exit_code =
        attention > 0 ? static_cast<int>(ExitCode::attention) : static_cast<int>(ExitCode::ok);
}

} // namespace

reports::Report run_statement(store::Db& db, providers::Provider& provider,
                              const StatementOptions& options,
                              const std::function<void(const std::string&)>& progress) {
    if (!provider.capabilities().list_transactions) {
        throw Refused("provider " + provider.name() + " cannot list its transactions",
                      "statement reconciliation needs a provider that lists (" +
                          providers::kinds_where(
                              [](const providers::ProviderDescriptor& d) { return d.api.list; }) +
                          "); check its capabilities in the configuration");
    }
    if (options.window_to <= options.window_from) {
        throw UsageError("the statement window is empty: its end must be after its start");
    }
    const auto say = [&](const std::string& s) {
        if (progress) {
            progress(s);
        }
    };
    store::StatementRun run = store::open_statement_run(db, provider.name(), options.window_from,
                                                        options.window_to, options.margin.count());
    reports::Report report = statement_report(provider.name(), options, run);
    if (const auto stop = list_statement(db, provider, options, run, say)) {
        store::fail_statement_run(db, run, stop->error);
        report.failure = stop->error + "; " + stop->next;
        report.exit_code = static_cast<int>(stop->code);
        report.facts.emplace_back("pages read", std::to_string(run.pages));
        return report;
    }
    say("diffing");
    diff_into_report(db, run, options, provider.name(), report);
    return report;
}

} // namespace payrecon::engine
