#include "engine/nightly.hpp"

#include "core/errors.hpp"

#include <algorithm>
#include <exception>

namespace payrecon::engine {

std::vector<store::QueueCount> NightlyReport::orphaned() const {
    std::vector<store::QueueCount> out;
    for (const auto& q : open) {
        const auto& known = configured.empty() ? providers : configured;
        if (q.state == "unknown" && std::find(known.begin(), known.end(), q.provider) == known.end()) {
            out.push_back(q);
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

long long NightlyReport::still_unknown() const {
    long long n = 0;
    for (const auto& q : open) {
        n += q.state == "unknown" ? q.payments : 0;
    }
    return n;
}

int NightlyReport::exit_code() const {
    if (failure) {
        return static_cast<int>(ExitCode::failure);
    }
    if (in_review() > 0 || !orphaned().empty()) {
        return static_cast<int>(ExitCode::attention);
    }
    return static_cast<int>(ExitCode::ok);
}

NightlyReport run_nightly(store::Db& db, const std::vector<providers::Provider*>& providers,
                          const NightlyOptions& options, const NightlyProgress& progress) {
    NightlyReport report;
    report.started = std::chrono::system_clock::now();
    for (const auto* p : providers) {
        report.providers.push_back(p->name());
    }
    report.configured = options.configured;
    const auto step = [&](const std::string& phase) {
        if (progress) {
            progress(phase, report);
        }
    };
    std::string phase = "expiring leases";
    try {
        step(phase);
        report.leases_expired = store::expire_leases(db, options.actor);
        phase = "reconciling";
        step(phase);
        ReconcilerOptions ro = options.reconcile;
        ro.actor = options.actor;
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
            Executor executor(db, providers, eo);
            while (executor.run_once() > 0 &&
                   executor.counts().attempted < options.reconcile.limit) {
                report.sent = executor.counts();
                step(phase);
            }
            report.sent = executor.counts();
        }
        phase = "counting what is left";
        report.open = store::open_queue_counts(db);
    } catch (const OperatorError& e) {
        report.failure = "while " + phase + ": " + e.what() + (e.hint().empty() ? "" : " (" + e.hint() + ")");
    } catch (const std::exception& e) {
        report.failure = "while " + phase + ": " + e.what();
    }
    report.finished = std::chrono::system_clock::now();
    step("done");
    return report;
}

} // namespace payrecon::engine
