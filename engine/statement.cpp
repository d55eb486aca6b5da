#include "engine/statement.hpp"

#include "core/backoff.hpp"
#include "core/credential_refusal.hpp"
#include "core/errors.hpp"
#include "engine/executor.hpp"
#include "providers/registry.hpp"
#include "store/db.hpp"
#include "store/run_lock.hpp"

#include <optional>
#include <thread>
#include <variant>

namespace payrecon::engine {

store::StatementRecord statement_record_of(const providers::RemotePayment& p, OperationKind kind) {
    store::StatementRecord s;
    RemoteRecord& r = s.record;
    r.kind = p.listed_capture ? OperationKind::capture : kind;
    r.provider_reference = p.provider_reference;
    r.operation_id = p.operation_id;
    r.match_key = p.operation_id ? *p.operation_id : "ref:" + p.provider_reference;
    r.amount_minor = p.amount.minor;
    r.currency = p.amount.currency;
    r.raw_status = p.raw_status;
    switch (p.state) {
    case providers::Outcome::succeeded:
        // A charge the provider refunded (partly or all) is a charge still; a refund is not.
        r.status = kind == OperationKind::charge && p.amount_refunded_minor > 0
                       ? RemoteStatus::refunded
                       : RemoteStatus::succeeded;
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
    if (kind == OperationKind::charge && p.awaiting_capture) {
        // An authorisation the provider holds with nothing captured, whatever the adapter reads
        // its status as without the order (Stripe's requires_capture: unknown).
        r.status = RemoteStatus::authorized;
    }
    r.at =
        std::chrono::duration_cast<std::chrono::seconds>(p.created_at.time_since_epoch()).count();
    r.amount_refunded = kind == OperationKind::charge ? p.amount_refunded_minor : 0;
    if (kind == OperationKind::charge && !p.captured_unsaid) {
        r.amount_captured = p.amount_captured_minor;
    }
    s.raw = p.raw;
    return s;
}

reports::Finding report_finding(const DiffFinding& f, const std::string& provider,
                                const std::string& dashboard_url) {
    reports::Finding out;
    out.category = f.category;
    out.handled = f.acknowledged;
    out.needs_attention = f.category != to_string(FindingCategory::matched) && !out.handled;
    out.provider = provider;
    out.detail = f.detail;
    if (!f.finding_id.empty()) {
        out.finding_id = f.finding_id;
    }
    out.provider_references = remote_references(f);
    const RemoteRecord* r = shown_remote(f);
    if (f.local) {
        out.payment_id = f.local->payment_id;
        if (f.local->kind == OperationKind::refund && !f.local->refund_id.empty()) {
            out.refund_id = f.local->refund_id;
        }
        out.operation_id = f.local->operation_id;
        out.local_amount = f.local->amount_minor;
        out.local_currency = f.local->currency;
        out.local_state = std::string(to_string(f.local->state));
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

// Failed provider calls in a row, and what comes after one: a wait (the provider's Retry-After,
// else 1 s doubling up to 64 s; never over max_wait) and another try, or the end of the run.
// 401/403 end it at once: credentials or permissions, which asking again cannot fix.
class Retrying {
public:
    Retrying(const StatementOptions& options, std::string permission,
             std::function<void(const std::string&)> say)
        : m_options(options), m_permission(std::move(permission)), m_say(std::move(say)) {}

    void succeeded() { m_failures = 0; }

    // After a failed call (`what`: "listing page 3"): nullopt once it has waited to try again.
    std::optional<ListingStop> failed(const providers::CallRecord& call,
                                      std::optional<std::chrono::seconds> retry_after,
                                      const std::string& what, const store::StatementRun& run) {
        const int status = call.http_status;
        if (refuses_credentials(status)) {
            return ListingStop{
                "the provider refused our " +
                    std::string(status == 401 ? "credentials (HTTP 401)"
                                              : "request as not permitted (HTTP 403)") +
                    " " + what + (call.detail.empty() ? "" : ": " + call.detail),
                "not retried. Check " +
                    (m_options.credentials.empty() ? "the provider's API key"
                                                   : m_options.credentials) +
                    " and that the key may " + m_permission + ", then run the same window again" +
                    (run.complete_kept ? " (its last complete result is kept until then)" : ""),
                ExitCode::config};
        }
        ++m_failures;
        const std::string why = call.error_class.empty() ? "no answer" : call.error_class;
        if (m_failures > m_options.max_page_retries) {
            return ListingStop{"the provider failed " + std::to_string(m_failures) +
                                   " times in a row " + what + " (" + why + ")",
                               "run the same window again to resume where it stopped",
                               ExitCode::failure};
        }
        const std::chrono::seconds delay = std::min(
            retry_after
                ? *retry_after
                : std::chrono::duration_cast<std::chrono::seconds>(m_backoff.delay(m_failures - 1)),
            m_options.max_wait);
        m_say(what + ": " + why + ", waiting " + std::to_string(delay.count()) + " s");
        const auto wait = m_options.wait ? m_options.wait : [](std::chrono::milliseconds d) {
            std::this_thread::sleep_for(d);
        };
        wait(std::chrono::duration_cast<std::chrono::milliseconds>(delay));
        return std::nullopt;
    }

private:
    const StatementOptions& m_options;
    std::string m_permission; // what the key must be allowed: "list payments"
    std::function<void(const std::string&)> m_say;
    const Backoff m_backoff{std::chrono::seconds(1), std::chrono::seconds(64)};
    int m_failures = 0;
};

// A run's list cursor once its listing of charges is done and its refunds are being listed
// (list_refunds): this prefix, then the provider's own cursor of its refunds (none: the first
// page). A provider's cursor of its charges never starts so (an object ID, an opaque token, a
// page position).
constexpr std::string_view k_refunds_cursor = "refunds:";

bool lists_refunds(const std::optional<std::string>& cursor) {
    return cursor && cursor->starts_with(k_refunds_cursor);
}

// Lists the provider's records of the window (widened by the margin) page by page into the run,
// from where the run's listing stands: its charges, then, where it lists them, its refunds;
// retries a failed page (Retrying), at most max_page_retries times in a row.
std::optional<ListingStop> list_statement(store::Db& db, providers::Provider& provider,
                                          const StatementOptions& options, store::StatementRun& run,
                                          const std::function<void(const std::string&)>& say) {
    providers::TimeWindow window;
    window.from = std::chrono::system_clock::time_point(
        std::chrono::seconds(options.window_from - options.margin.count()));
    window.to = std::chrono::system_clock::time_point(
        std::chrono::seconds(options.window_to + options.margin.count()));
    const bool with_refunds = provider.capabilities().list_refunds;
    Retrying retrying(options, with_refunds ? "list payments and refunds" : "list payments", say);
    while (run.status == StatementRunStatus::listing) {
        const bool refunds = lists_refunds(run.list_cursor);
        std::optional<std::string> cursor = run.list_cursor;
        if (refunds) {
            cursor = cursor->size() > k_refunds_cursor.size()
                         ? std::optional<std::string>(cursor->substr(k_refunds_cursor.size()))
                         : std::nullopt;
        }
        const providers::ListPage page =
            refunds ? provider.list_refunds(window, cursor) : provider.list(window, cursor);
        if (page.ok) {
            retrying.succeeded();
            std::vector<store::StatementRecord> records;
            records.reserve(page.items.size());
            for (const auto& item : page.items) {
                records.push_back(statement_record_of(item, refunds ? OperationKind::refund
                                                                    : OperationKind::charge));
            }
            // After the last page of charges, the refunds' first; after their last, the end.
            std::optional<std::string> next;
            if (page.next_cursor) {
                next =
                    refunds ? std::string(k_refunds_cursor) + *page.next_cursor : *page.next_cursor;
            } else if (!refunds && with_refunds) {
                next = std::string(k_refunds_cursor);
            }
            store::store_statement_page(db, run, records, next);
            say("listed " + std::to_string(run.remote_records) + " provider records (" +
                std::to_string(run.pages) + " pages)");
            continue;
        }
        if (auto stop = retrying.failed(page.call, page.retry_after,
                                        std::string(refunds ? "listing refunds, " : "listing ") +
                                            "page " + std::to_string(run.pages + 1),
                                        run)) {
            return stop;
        }
    }
    return std::nullopt;
}

// What a lookup by `operation_id` found (the payment or refund, and any duplicates) into
// `records`, each ours by that operation ID whether or not the provider echoes it. False if it
// found nothing.
bool add_found(const providers::LookupResult& found, const std::string& operation_id,
               std::vector<store::StatementRecord>& records,
               OperationKind kind = OperationKind::charge) {
    if (found.status != providers::LookupResult::Status::found || !found.payment) {
        return false;
    }
    const auto ours_of = [&](providers::RemotePayment p) {
        p.operation_id = p.operation_id.value_or(operation_id);
        return statement_record_of(p, kind);
    };
    records.push_back(ours_of(*found.payment));
    for (const auto& d : found.duplicates) {
        records.push_back(ours_of(d));
    }
    return true;
}

// For a provider that cannot list: looks up each of our payments sent inside the window (not the
// margin: the diff reports only on the window, and what a lookup finds is ours by its operation
// ID), page by page of our payments, storing what the provider has of each, from where the run
// stands. A lookup that fails is retried (Retrying); when it stops the run, the lookups done
// before it are kept and the next run goes on from the payment that failed. Counts the lookups in
// `lookups`.
std::optional<ListingStop> lookup_statement(store::Db& db, providers::Provider& provider,
                                            const StatementOptions& options,
                                            store::StatementRun& run, long long& lookups,
                                            const std::function<void(const std::string&)>& say) {
    Retrying retrying(options, "read payments", say);
    const int limit = std::max(1, options.lookups_per_page);
    while (run.status == StatementRunStatus::listing) {
        const std::vector<store::StatementLookup> ours =
            store::statement_lookup_page(db, run, run.list_cursor, limit);
        std::vector<store::StatementRecord> records;
        std::optional<std::string> cursor = run.list_cursor;
        for (const auto& l : ours) {
            providers::LookupResult found;
            for (;;) {
                found = provider.lookup(order_for(l.payment));
                ++lookups;
                if (found.status != providers::LookupResult::Status::failed) {
                    retrying.succeeded();
                    break;
                }
                if (auto stop =
                        retrying.failed(found.call, std::nullopt,
                                        "looking up payment " + l.payment.payment_id, run)) {
                    if (cursor != run.list_cursor) {
                        store::store_statement_page(db, run, records, cursor);
                    }
                    return stop;
                }
            }
            add_found(found, l.payment.operation_id, records);
            cursor = l.cursor;
        }
        // A short page is the last; a full one may be followed by an empty one.
        store::store_statement_page(db, run, records,
                                    static_cast<int>(ours.size()) < limit
                                        ? std::nullopt
                                        : std::optional<std::string>(cursor));
        say("looked up " + std::to_string(lookups) + " payments, " +
            std::to_string(run.remote_records) + " provider records");
    }
    return std::nullopt;
}

// The report's frame: title, every category (so that a clean run shows its zeros), and the run.
reports::Report statement_report(const std::string& provider, const StatementOptions& options,
                                 const store::StatementRun& run, bool refunds_listed) {
    const std::string window = reports::format_utc_seconds(options.window_from) + " .. " +
                               reports::format_utc_seconds(options.window_to);
    reports::Report report;
    report.kind = "statement";
    report.title = "payrecon statement: " + provider + ", " + window;
    report.generated_at = reports::format_utc(std::chrono::system_clock::now());
    for (const auto c : reports::statement_categories(refunds_listed)) {
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
// code to the report; the operation IDs of the payments found missing_remote (and, with
// `refunds_listed`, of the refunds found refund_missing_remote) into `missing_remote` (at most
// options.counterpart_lookups), if given.
void diff_into_report(store::Db& db, store::StatementRun& run, const StatementOptions& options,
                      const std::string& provider, bool refunds_listed, reports::Report& report,
                      std::vector<std::string>* missing_remote = nullptr) {
    std::size_t listed = 0;
    const std::string missing_remote_name(to_string(FindingCategory::missing_remote));
    const std::string refund_missing_remote_name(to_string(FindingCategory::refund_missing_remote));
    const store::StatementTotals totals = store::diff_statement_run(
        db, run, options.amount_tolerance_minor, refunds_listed,
        [&](const DiffFinding& f) {
            if (is_match(f.category)) {
                return; // a match across windows: counted with the matches, stored with its times
            }
            if (missing_remote &&
                (f.category == missing_remote_name || f.category == refund_missing_remote_name) &&
                f.local && missing_remote->size() < options.counterpart_lookups) {
                missing_remote->push_back(f.local->operation_id);
            }
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
    if (refunds_listed) {
        const std::string refund_matched_name(to_string(FindingCategory::refund_matched));
        const auto refunds_matched = totals.by_category.find(refund_matched_name);
        report.add_counted(refund_matched_name,
                           refunds_matched == totals.by_category.end() ? 0
                                                                       : refunds_matched->second,
                           totals.refund_matched_amounts);
    }
    report.facts.emplace_back("provider records", std::to_string(totals.counts.remote_records));
    report.facts.emplace_back(refunds_listed ? "our payments and refunds" : "our payments",
                              std::to_string(totals.counts.local_records));
    report.facts.emplace_back("pages read", std::to_string(run.pages));
    report.facts.emplace_back("runs of this window", std::to_string(run.runs));
    if (totals.matched_across_windows > 0) {
        report.facts.emplace_back(
            "matched across windows",
            std::to_string(totals.matched_across_windows) +
                " (one side dated outside this window: a re-send, or a late charge; matched by "
                "operation ID, both times in payrecon payments show)");
    }
    // A finding an operator acknowledged (in an earlier run of the window) is handled.
    long long attention = -totals.acknowledged;
    for (const auto& [category, n] : totals.by_category) {
        attention += is_match(category) ? 0 : n;
    }
    if (totals.acknowledged > 0) {
        report.facts.emplace_back("acknowledgements carried",
                                  std::to_string(totals.acknowledged) +
                                      " finding(s) an operator acknowledged in the window's "
                                      "earlier run, found again the same: handled");
    }
    report.exit_code =
        attention > 0 ? static_cast<int>(ExitCode::attention) : static_cast<int>(ExitCode::ok);
}

// Looks up, by operation ID, the payments the diff found missing_remote (and the refunds it found
// refund_missing_remote, where the provider finds a refund), for a counterpart outside the
// window's reading (a re-send, or a charge the provider made late): stores what it finds in the
// run. One try each: one whose lookup fails stays missing, as it was. Returns the records stored;
// adds what it did to the report's facts.
std::size_t look_up_counterparts(store::Db& db, providers::Provider& provider,
                                 store::StatementRun& run,
                                 const std::vector<std::string>& operation_ids,
                                 reports::Report& report,
                                 const std::function<void(const std::string&)>& say) {
    std::vector<store::StatementRecord> records;
    long long found = 0;
    long long failed = 0;
    for (const auto& payment : store::statement_payments(db, run, operation_ids)) {
        const bool refund = payment.kind == OperationKind::refund;
        if (refund && !provider.capabilities().refund_lookup) {
            continue; // not askable: it stays refund_missing_remote
        }
        const providers::LookupResult looked = look_up_operation(provider, payment);
        if (looked.status == providers::LookupResult::Status::failed) {
            ++failed;
            const int status = looked.call.http_status;
            if (status == 401 || status == 403) {
                break; // the same answer for every payment
            }
            continue;
        }
        found += add_found(looked, payment.operation_id, records, payment.kind) ? 1 : 0;
    }
    say("looked up " + std::to_string(operation_ids.size()) +
        " operations missing from the provider's window: " + std::to_string(found) + " found");
    report.facts.emplace_back(
        "missing looked up",
        std::to_string(operation_ids.size()) +
            " payments or refunds the window's listing lacks, by operation ID: " +
            std::to_string(found) + " found outside it" +
            (failed > 0 ? ", " + std::to_string(failed) + " lookups failed (still missing_remote)"
                        : ""));
    if (!records.empty()) {
        store::store_statement_counterparts(db, run, records);
    }
    return records.size();
}

} // namespace

reports::Finding report_finding(const store::StoredFinding& f, const std::string& dashboard_url) {
    reports::Finding out;
    out.category = f.category;
    out.handled = f.acknowledged;
    out.needs_attention = f.category != to_string(FindingCategory::matched) && !out.handled;
    out.provider = f.provider;
    out.detail = f.detail;
    out.finding_id = f.finding_id;
    out.payment_id = f.payment_id;
    out.refund_id = f.refund_id;
    out.operation_id = f.operation_id;
    out.merchant_reference = f.merchant_reference;
    out.provider_reference = f.provider_reference;
    out.provider_references = f.provider_references;
    out.local_amount = f.local_amount;
    out.local_currency = f.local_currency;
    out.local_state = f.local_state;
    out.remote_amount = f.remote_amount;
    out.remote_currency = f.remote_currency;
    out.remote_state = f.remote_state;
    if (out.provider_reference) {
        out.provider_link = providers::dashboard_link(dashboard_url, *out.provider_reference);
    }
    return out;
}

reports::Report stored_statement_report(store::Db& db, const std::string& provider,
                                        long long window_from, long long window_to,
                                        const std::string& dashboard_url) {
    const std::optional<store::StoredStatement> stored =
        store::load_statement(db, provider, window_from, window_to);
    if (!stored) {
        throw Refused("provider " + provider + " has no complete statement run of the window " +
                          reports::format_utc_seconds(window_from) + " .. " +
                          reports::format_utc_seconds(window_to),
                      "run it: payrecon statement --provider " + provider + " --from " +
                          reports::format_utc_seconds(window_from) + " --to " +
                          reports::format_utc_seconds(window_to));
    }
    StatementOptions options;
    options.window_from = window_from;
    options.window_to = window_to;
    options.margin = std::chrono::seconds(stored->margin_s);
    store::StatementRun run;
    run.run_id = stored->run_id;
    reports::Report report = statement_report(provider, options, run, stored->refunds_listed);
    report.title += " (as stored)";
    report.facts.emplace_back("read from", "the window's complete run as stored, finished " +
                                               stored->finished_at +
                                               "; the provider was not asked");
    for (const store::StoredFinding& f : stored->findings) {
        if (is_match(f.category)) {
            continue; // a match across windows: in the matched count below
        }
        report.add(report_finding(f, dashboard_url));
    }
    for (const FindingCategory c : {FindingCategory::matched, FindingCategory::refund_matched}) {
        const std::string name(to_string(c));
        const auto matched = stored->counts.find(name);
        if (matched != stored->counts.end() || c == FindingCategory::matched) {
            report.add_counted(name, matched == stored->counts.end() ? 0 : matched->second, {});
        }
    }
    report.facts.emplace_back("provider records", std::to_string(stored->remote_records));
    report.facts.emplace_back("our payments", std::to_string(stored->local_records));
    report.facts.emplace_back("runs of this window", std::to_string(stored->runs));
    report.exit_code = report.needing_attention > 0 ? static_cast<int>(ExitCode::attention)
                                                    : static_cast<int>(ExitCode::ok);
    return report;
}

reports::Report run_statement(store::Db& db, providers::Provider& provider,
                              const StatementOptions& options,
                              const std::function<void(const std::string&)>& progress) {
    const providers::Capabilities& caps = provider.capabilities();
    const bool by_lookup = !caps.list_transactions;
    if (by_lookup && !caps.lookup_by_operation_id) {
        throw Refused("provider " + provider.name() +
                          " can neither list its transactions nor look a payment up",
                      "statement reconciliation needs a provider that lists (" +
                          providers::kinds_where(
                              [](const providers::ProviderDescriptor& d) { return d.api.list; }) +
                          ") or finds a payment by our operation ID (" +
                          providers::kinds_where([](const providers::ProviderDescriptor& d) {
                              return d.api.lookup && !d.api.list;
                          }) +
                          "); check its capabilities in the configuration");
    }
    if (options.window_to <= options.window_from) {
        throw UsageError("the statement window is empty: its end must be after its start");
    }
    if (by_lookup && caps.lookup_staleness.count() > 0) {
        // A payment sent less than the lookup's staleness ago may not be findable yet: its "not
        // found" would be a false missing_remote.
        const long long now = std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
        const long long ready = options.window_to + caps.lookup_staleness.count();
        if (ready > now) {
            throw Refused("the window ends too recently to look " + provider.name() +
                              "'s payments up: a payment sent in its last " +
                              std::to_string(caps.lookup_staleness.count()) +
                              " s may not be findable yet, and its absence would prove nothing",
                          "run it after " + reports::format_utc_seconds(ready) +
                              ", or end the window earlier");
        }
    }
    const auto say = [&](const std::string& s) {
        if (progress) {
            progress(s);
        }
    };
    // One run of a window at a time: a second one would list and report everything again.
    auto lock = store::try_run_lock(db.url(), "statement " + provider.name() + " " +
                                                  std::to_string(options.window_from) + " " +
                                                  std::to_string(options.window_to));
    if (const auto* held = std::get_if<store::RunLockHeld>(&lock)) {
        throw StatementBusy(
            "another run is diffing " + provider.name() + "'s statement of " +
                reports::format_utc_seconds(options.window_from) + " to " +
                reports::format_utc_seconds(options.window_to) + " now: " + held->holder +
                "; this one did nothing",
            "its result is payrecon statement findings list --provider " + provider.name() +
                " --from " + reports::format_utc_seconds(options.window_from) + " --to " +
                reports::format_utc_seconds(options.window_to) + " once it is done");
    }
    store::StatementRun run = store::open_statement_run(db, provider.name(), options.window_from,
                                                        options.window_to, options.margin.count());
    const bool refunds_listed = !by_lookup && caps.list_refunds;
    if (lists_refunds(run.list_cursor) && !refunds_listed) {
        throw UsageError("the unfinished statement run of this window for " + provider.name() +
                             " was listing the provider's refunds, and its configuration now "
                             "says it lists none",
                         "switch its \"list\" capability back on to finish that run, then run "
                         "the window again");
    }
    if (run.list_cursor && store::is_lookup_cursor(*run.list_cursor) != by_lookup) {
        throw UsageError(
            "the unfinished statement run of this window for " + provider.name() + " was " +
                (by_lookup ? "reading the provider's listing" : "looking our payments up") +
                ", and the provider's configuration now says to " +
                (by_lookup ? "look them up" : "read its listing"),
            "switch its \"list\" capability back to finish that run, then run the window again");
    }
    reports::Report report = statement_report(provider.name(), options, run, refunds_listed);
    report.facts.emplace_back(
        "refunds",
        refunds_listed
            ? "the provider's refunds of the window listed and diffed against ours, one by one"
            : provider.name() + " lists no refunds by window: our refunds are not diffed here (the "
                                "reconciler settles each by lookup or webhook; a refund made "
                                "outside payrecon shows in the provider's own reports)");
    long long lookups = 0;
    if (by_lookup) {
        report.facts.emplace_back(
            "read by", "looking up each of our payments sent in the window (" + provider.name() +
                           " lists no payments by window): a charge made outside payrecon is not "
                           "seen this way; find those in the provider's own reports");
    }
    const auto stop = by_lookup ? lookup_statement(db, provider, options, run, lookups, say)
                                : list_statement(db, provider, options, run, say);
    if (by_lookup) {
        report.facts.emplace_back("lookups made", std::to_string(lookups));
    }
    if (stop) {
        store::fail_statement_run(db, run, stop->error);
        report.failure = stop->error + "; " + stop->next;
        report.exit_code = static_cast<int>(stop->code);
        report.facts.emplace_back("pages read", std::to_string(run.pages));
        return report;
    }
    say("diffing");
    // A payment the listing lacks may have been charged outside the window's reading (re-sent
    // later, or charged late): before it is called missing_remote, a provider that can look it
    // up is asked, and the run is diffed again with what it found. (A statement read by lookups
    // has looked every payment up already.)
    const reports::Report before_diff = report;
    std::vector<std::string> missing_remote;
    diff_into_report(db, run, options, provider.name(), refunds_listed, report,
                     by_lookup || !caps.lookup_by_operation_id ? nullptr : &missing_remote);
    if (!missing_remote.empty()) {
        reports::Report again = before_diff;
        if (look_up_counterparts(db, provider, run, missing_remote, again, say) > 0) {
            say("diffing again with what the lookups found");
            diff_into_report(db, run, options, provider.name(), refunds_listed, again);
            return again;
        }
        report.facts.push_back(again.facts.back());
    }
    return report;
}

} // namespace payrecon::engine
