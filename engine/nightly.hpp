#pragma once
// `payrecon nightly`: take over what workers left behind (expired leases -> unknown), reconcile
// every provider's unknown payments, send what is due (the re-sends the reconciler scheduled, and
// anything workers left due), and report. One run of a statement window at a time (a second says
// which session holds it and does nothing); runs of different windows at once are safe: every step
// claims with SKIP LOCKED and writes fenced by generation.

#include "engine/executor.hpp"
#include "engine/reconciler.hpp"
#include "engine/statement.hpp"
#include "reports/report.hpp"
#include "store/authorization_store.hpp"
#include "store/delivery_store.hpp"
#include "store/reconcile_store.hpp"
#include "store/webhook_store.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace payrecon::engine {

struct NightlyOptions {
    std::string actor = "nightly";
    std::vector<std::string> configured; // every configured provider name (default: the ones run)
    ReconcilerOptions reconcile;
    ExecutorOptions send; // its lease is the providers' default_lease(): nightly takes no other
    bool send_due = true; // send the re-sends (and whatever is due) in this run
    // The statement diff of each provider that can list its transactions, for this window (unix
    // seconds; both 0: no statements). Tolerances by provider name.
    long long statement_from = 0;
    long long statement_to = 0;
    std::chrono::seconds statement_margin{3600};
    std::map<std::string, long long> amount_tolerance_minor;
    // What to check when a provider refuses our credentials, by provider name ("STRIPE_API_KEY").
    std::map<std::string, std::string> credentials;
    // The provider's dashboard page of a reference, by provider name (providers::dashboard_url()).
    std::map<std::string, std::string> dashboard_urls;
    // A pending or retry_scheduled payment waiting longer than this needs an operator: no worker
    // is sending it.
    std::chrono::seconds stuck_after{3600};
    // Authorisations (capture "manual") that expire within this are listed, each told once by
    // payment.authorization_expiring; those whose expiry has come are marked expired
    // (store::watch_authorizations). Two days: a daily run tells each at least a day ahead.
    std::chrono::seconds authorization_horizon{2 * 24 * 3600};
    // Set (by a signal, say) to stop after the step in hand: the payment being reconciled or sent
    // is finished and recorded, then the run ends with interrupted set and counts what it left.
    const std::atomic<bool>* stop = nullptr;
};

struct NightlyReport {
    std::chrono::system_clock::time_point started{};
    std::chrono::system_clock::time_point finished{};
    std::vector<std::string> providers;  // the providers this run covered
    std::vector<std::string> configured; // every provider of the configuration (covered or not)
    int leases_expired = 0;
    std::vector<ReconcileOutcome> reconciled;
    Executor::Counts sent;
    // The authorisation watch of this run: expired in it, and expiring within the horizon.
    store::AuthorizationWatch authorizations;
    std::chrono::seconds authorization_horizon{0}; // as in the options
    std::vector<store::QueueCount> open;           // after the run
    // Payments in review because their provider refused our request (request_rejected), per
    // provider and the provider's code, after the run: an integration fault, always attention.
    std::vector<store::RejectedInReview> rejected;
    // Provider events that contradict a payment that settled without them and that no operator
    // has acknowledged, per provider, after the run: always attention.
    std::vector<std::pair<std::string, long long>> contradicting_events;
    // Events out, after the run: every webhook endpoint with its dead deliveries; a dead
    // delivery or a disabled endpoint is attention.
    std::vector<store::EndpointDeliveryStats> endpoints;
    // The provider accounts that refused our credentials (401/403) in this run, reconciling or
    // sending: each was asked and called no more after that one call, its payments left as they
    // were (unknown ones for the next run, due ones queued). Always a configuration error.
    std::vector<CredentialRefusal> credentials_refused;
    std::vector<reports::Report> statements; // one per provider that can list
    // The providers whose statement the run did not diff, and why: one that lists nothing by
    // window (read by lookups, a call per payment: only when asked), or one that can neither list
    // nor look a payment up. Said in the summary, so that nobody takes their books as checked.
    std::vector<std::pair<std::string, std::string>> statements_not_run;
    std::optional<std::string> failure; // the run stopped: what happened and what to do
    bool interrupted = false;           // it stopped because options.stop was set
    // Another nightly of the same window held it (failure says which process): this run did
    // nothing at all.
    bool not_run = false;
    std::chrono::seconds stuck_after{3600};            // as in the options
    std::map<std::string, std::string> dashboard_urls; // as in the options

    // Open payments (any open state) of a provider the configuration does not have: no worker
    // can send them and no run can reconcile them.
    std::vector<store::QueueCount> orphaned() const;
    // Pending and retry_scheduled payments of configured providers waiting past stuck_after.
    std::vector<store::QueueCount> stuck() const;
    long long waiting_too_long() const;  // the payments stuck() counts
    long long not_configured() const;    // the payments orphaned() counts
    long long in_review() const;         // payments and their operations (refunds, captures, voids)
    long long refunds_in_review() const; // the operations among them
    // Refunds and captures the provider reversed after they had succeeded, in this run
    // (ReconcileOutcome::reversed): always attention, the customer was told otherwise.
    std::vector<const ReconcileOutcome*> reversed() const;
    long long still_unknown() const;
    long long lookups_failed() const; // status queries of this run that got no trustworthy answer
    // Unknown payments whose latest status query failed, after the run (whichever run asked):
    // waiting for their next check, and not clean meanwhile.
    long long lookups_failing() const;
    // What is wrong with the configuration, one sentence each with what to fix and what to run
    // then: a provider that refused our credentials (its variables named), a statement stopped by
    // a refusal. Empty when nothing is.
    std::vector<std::string> configuration_errors() const;
    long long rejected_requests() const; // payments in review as request_rejected
    long long contradictions() const;    // contradicting events awaiting acknowledgement
    long long dead_deliveries() const;   // events no endpoint try delivered (replay them)
    long long disabled_endpoints() const;
    // Why the run needs an operator, one sentence each with the command that starts the work;
    // empty when nothing does: requests the provider rejected, reversals, authorisations that
    // expired uncaptured in this run or expire within the horizon, the review queue, provider
    // events contradicting a settled payment, dead event deliveries and disabled webhook endpoints,
    // payments waiting too long or that nobody can send or reconcile, status queries that failed
    // in this run or before it for payments still unknown, statement findings. `report_files`:
    // the reports this run writes (--output), which the reasons point to.
    std::vector<std::string> attention(const std::vector<std::string>& report_files) const;
    // 0 clean; 3 something needs an operator (attention() is not empty); 4 a configuration error
    // (configuration_errors()); 1 the run failed.
    int exit_code() const;
};

// The whole run as one report (--format, --output): the reconciled payments (category: the
// decision) and every statement finding, with the run's facts.
reports::Report nightly_report(const NightlyReport& report);

// One reconciled payment as a report line.
reports::Finding report_finding(const ReconcileOutcome& outcome,
                                const std::string& dashboard_url = {});

// Payments and their amounts per currency.
struct Tally {
    long long payments = 0;
    std::map<std::string, long long> amounts; // currency -> minor units

    void add(long long amount_minor, const std::string& currency, long long count = 1);
};

// What a run of the reconciler came to, counted once for every rendering (the lines `reconcile`
// and `nightly` print, their JSON, their reports).
struct ReconcileSummary {
    std::size_t reconciled = 0;
    long long to_review = 0;      // newly in review (ReconcileOutcome::newly_in_review)
    long long fenced_out = 0;     // changed meanwhile by someone else: nothing written
    long long lookups_asked = 0;  // status queries made
    long long lookups_failed = 0; // status queries that got no trustworthy answer
    std::vector<CredentialRefusal>
        credentials_refused; // the providers that refused our credentials
    // By how each payment ended: "succeeded", "failed (declined)", "re-sent", "check again later",
    // "to review", "changed meanwhile".
    std::map<std::string, Tally> by_outcome;
    std::vector<const ReconcileOutcome*> newly_in_review; // in the order they were decided

    // What an operator must act on before anything else: a provider refused our credentials
    // (ConfigError, exit 4, naming what to fix), or status queries were made, every one failed and
    // nothing went to review (exit 1: the run learned and decided nothing; with a payment sent to
    // review for its failures, exit_code() is 3, as always). nullopt otherwise.
    std::optional<OperatorError> problem() const;
    // problem()'s code; else 3 (attention) when a payment went to review; else 0.
    int exit_code() const;
};
ReconcileSummary summarize(const std::vector<ReconcileOutcome>& outcomes,
                           std::vector<CredentialRefusal> credentials_refused = {});

// How a reconciled payment ended, as ReconcileSummary::by_outcome names it.
std::string outcome_bucket(const ReconcileOutcome& outcome);

// A `reconcile` run as one report (--format, --output): each payment (category: the decision),
// the counts as facts, exit code 3 when a payment went to review.
reports::Report reconcile_report(const std::vector<ReconcileOutcome>& outcomes, bool dry_run,
                                 std::vector<CredentialRefusal> credentials_refused = {});

// What happened so far, after each step and each payment (progress on a terminal).
using NightlyProgress = std::function<void(const std::string& phase, const NightlyReport& so_far)>;

// Never throws for a failure during the run: it is recorded in `failure` with what was done so far.
NightlyReport run_nightly(store::Db& db, const std::vector<providers::Provider*>& providers,
                          const NightlyOptions& options, const NightlyProgress& progress = {});

} // namespace payrecon::engine
