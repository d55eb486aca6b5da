#include "engine/statement.hpp"

#include "core/backoff.hpp"
#include "core/errors.hpp"
#include "providers/registry.hpp"

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

reports::Finding report_finding(const DiffFinding& f, const std::string& provider) {
    reports::Finding out;
    out.category = f.category;
    out.needs_attention = f.category != "matched";
    out.provider = provider;
    out.detail = f.detail;
    const RemoteRecord* r = shown_remote(f);
    if (f.local) {
        out.payment_id = f.local->payment_id;
        out.operation_id = f.local->operation_id;
        out.local_amount = f.local->amount_minor;
        out.local_currency = f.local->currency;
        out.local_state = f.local->state;
        out.provider_reference = f.local->provider_reference;
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
    }
    return out;
}

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
    const auto wait = options.wait ? options.wait : [](std::chrono::milliseconds d) {
        std::this_thread::sleep_for(d);
    };
    const auto say = [&](const std::string& s) {
        if (progress) {
            progress(s);
        }
    };
    reports::Report report;
    report.kind = "statement";
    report.title = "payrecon statement: " + provider.name() + ", " +
                   reports::format_utc_seconds(options.window_from) + " .. " +
                   reports::format_utc_seconds(options.window_to);
    report.generated_at = reports::format_utc(std::chrono::system_clock::now());
    for (const auto c : reports::statement_categories()) {
        report.categories.emplace_back(c);
        report.totals[std::string(c)];
    }

    store::StatementRun run = store::open_statement_run(db, provider.name(), options.window_from,
                                                        options.window_to, options.margin.count());
    report.facts = {{"run", run.run_id},
                    {"provider", provider.name()},
                    {"window", reports::format_utc_seconds(options.window_from) + " .. " +
                                   reports::format_utc_seconds(options.window_to)},
                    {"margin", std::to_string(options.margin.count()) + " s"}};
    if (run.resumed) {
        report.facts.emplace_back("resumed",
                                  "the listing went on from page " + std::to_string(run.pages + 1));
    }
    providers::TimeWindow window;
    window.from = std::chrono::system_clock::time_point(
        std::chrono::seconds(options.window_from - options.margin.count()));
    window.to = std::chrono::system_clock::time_point(
        std::chrono::seconds(options.window_to + options.margin.count()));
    // The listing stops for good: recorded on the run (which stays resumable) and in the report.
    const auto stop_listing = [&](const std::string& error, const std::string& next,
                                  ExitCode code) {
        store::fail_statement_run(db, run, error);
        report.failure = error + "; " + next;
        report.exit_code = static_cast<int>(code);
        report.facts.emplace_back("pages read", std::to_string(run.pages));
        return report;
    };
    int failures = 0;
    while (run.status == "listing") {
        const providers::ListPage page = provider.list(window, run.list_cursor);
        if (!page.ok) {
            const int status = page.call.http_status;
            if (status == 401 || status == 403) {
                // Credentials or permissions: asking again cannot help, and the operator must act.
                const std::string error =
                    "the provider refused our " +
                    std::string(status == 401 ? "credentials (HTTP 401)"
                                              : "request as not permitted (HTTP 403)") +
                    " listing page " + std::to_string(run.pages + 1) +
                    (page.call.detail.empty() ? "" : ": " + page.call.detail);
                return stop_listing(
                    error,
                    "not retried. Check " +
                        (options.credentials.empty() ? "the provider's API key"
                                                     : options.credentials) +
                        " and that the key may list payments, then run the same window again" +
                        (run.complete_kept ? " (its last complete result is kept until then)" : ""),
                    ExitCode::config);
            }
            ++failures;
            const std::string why =
                page.call.error_class.empty() ? "no answer" : page.call.error_class;
            if (failures > options.max_page_retries) {
                const std::string error = "the provider's listing failed " +
                                          std::to_string(failures) + " times in a row at page " +
                                          std::to_string(run.pages + 1) + " (" + why + ")";
                return stop_listing(error, "run the same window again to resume where it stopped",
                                    ExitCode::failure);
            }
            // The provider's Retry-After, else 1 s doubling up to 64 s; never over max_wait.
            const Backoff backoff{std::chrono::seconds(1), std::chrono::seconds(64)};
            std::chrono::seconds delay =
                page.retry_after
                    ? *page.retry_after
                    : std::chrono::duration_cast<std::chrono::seconds>(backoff.delay(failures - 1));
            delay = std::min(delay, options.max_wait);
            say("page " + std::to_string(run.pages + 1) + ": " + why + ", waiting " +
                std::to_string(delay.count()) + " s");
            wait(std::chrono::duration_cast<std::chrono::milliseconds>(delay));
            continue;
        }
        failures = 0;
        std::vector<store::StatementRecord> records;
        records.reserve(page.items.size());
        for (const auto& item : page.items) {
            records.push_back(statement_record_of(item));
        }
        store::store_statement_page(db, run, records, page.next_cursor);
        say("listed " + std::to_string(run.remote_records) + " provider records (" +
            std::to_string(run.pages) + " pages)");
    }
    say("diffing");
    std::size_t listed = 0;
    const store::StatementTotals totals = store::diff_statement_run(
        db, run, options.amount_tolerance_minor,
        [&](const DiffFinding& f) {
            const bool list = listed < options.listed_findings;
            listed += list;
            report.findings_truncated = report.findings_truncated || !list;
            report.add(report_finding(f, provider.name()), list);
        },
        options.sorting);
    // Matches are counted, never listed.
    const auto matched = totals.by_category.find("matched");
    report.add_counted("matched", matched == totals.by_category.end() ? 0 : matched->second,
                       totals.matched_amounts);
    report.facts.emplace_back("provider records", std::to_string(totals.counts.remote_records));
    report.facts.emplace_back("our payments", std::to_string(totals.counts.local_records));
    report.facts.emplace_back("pages read", std::to_string(run.pages));
    report.facts.emplace_back("runs of this window", std::to_string(run.runs));
    long long attention = 0;
    for (const auto& [category, n] : totals.by_category) {
        attention += category == "matched" ? 0 : n;
    }
    report.exit_code =
        attention > 0 ? static_cast<int>(ExitCode::attention) : static_cast<int>(ExitCode::ok);
    return report;
}

} // namespace payrecon::engine
