#include "engine/worker.hpp"

#include "core/backoff.hpp"
#include "core/errors.hpp"
#include "core/operator_commands.hpp"
#include "engine/reconciler.hpp"
#include "store/db.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>

namespace payrecon::engine {

Worker::Worker(WorkerOptions options, ProviderFactory factory, std::ostream& log)
    : m_options(std::move(options)), m_factory(std::move(factory)), m_log(log),
      m_credentials(std::make_unique<CredentialGate>(m_options.credentials)) {}

void Worker::stop() {
    m_stop = true;
    m_wake.notify_all();
}

bool Worker::wait_or_stop(std::chrono::milliseconds how_long) {
    std::unique_lock lock(m_mutex);
    return m_wake.wait_for(lock, how_long, [this] { return m_stop.load(); });
}

void Worker::log_event(const std::string& json_line) {
    std::lock_guard lock(m_mutex);
    m_log << (json_line + '\n') << std::flush; // one write: a relay's lines may share the stream
}

long Worker::run() {
    m_call_slots = std::make_unique<std::counting_semaphore<>>(m_options.concurrency);
    const int n = m_options.executor_threads();
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
        threads.emplace_back([this, i] { thread_main(i); });
    }
    for (auto& t : threads) {
        t.join();
    }
    nlohmann::ordered_json done;
    done["event"] = "worker_stopped";
    done["worker"] = m_options.worker_id;
    done["attempted"] = m_attempted.load();
    done["not_sent"] = m_not_sent.load();
    done["not_called"] = m_not_called.load();
    done["fenced_out"] = m_fenced.load();
    std::vector<std::string> refused;
    for (const auto& r : m_credentials->refusals()) {
        refused.push_back(r.provider);
    }
    if (!refused.empty()) {
        done["credentials_refused"] = refused;
    }
    {
        // What the calls came to, by the state each settled its payment in ("succeeded": 9,
        // "unknown": 2, ...): the operator sees the outcome of a run, not only its size.
        std::lock_guard lock(m_mutex);
        done["settled_as"] = m_settled_as;
    }
    log_event(done.dump());
    return m_attempted.load();
}

std::optional<OperatorError> Worker::problem() const {
    if (const auto refused = m_credentials->refusals(); !refused.empty()) {
        return credentials_error(refused,
                                 "the worker stopped calling it after that one call; its payments "
                                 "stay queued and nothing was charged",
                                 "run the worker again: it sends each with the same operation ID");
    }
    if (m_options.once && m_attempted.load() > 0 && m_not_sent.load() == m_attempted.load()) {
        return OperatorError(
            ExitCode::failure,
            "no call reached a provider: every one of the " + std::to_string(m_attempted.load()) +
                " calls was not sent (the attempt_not_sent lines say why)",
            "the payments are retry_scheduled and go out with the same operation ID once the "
            "provider is reachable: check base_url in the configuration, DNS and the network");
    }
    return std::nullopt;
}

void Worker::log_evidence(const std::vector<ReconcileOutcome>& applied) {
    for (const ReconcileOutcome& o : applied) {
        nlohmann::ordered_json line;
        line["event"] = "webhook_evidence_applied";
        line["payment_id"] = o.payment_id;
        line["provider"] = o.provider;
        line["became"] = std::string(to_string(o.to));
        line["evidence"] = o.lookup_detail;
        log_event(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        std::lock_guard lock(m_mutex);
        ++m_settled_as[std::string(to_string(o.to))];
    }
}

namespace {

// The log line of a request the provider rejected before executing it.
std::string rejected_line(const store::ClaimedPayment& claim,
                          const providers::Rejection& rejection) {
    // An integration or configuration fault: every payment to this provider may be refused
    // alike. The message is the provider's, already redacted and made printable; JSON escapes
    // whatever else it holds.
    nlohmann::ordered_json line;
    line["level"] = "error";
    line["event"] = "request_rejected";
    line["provider"] = claim.provider;
    line["code"] = rejection.code;
    line["message"] = rejection.message;
    line["payment_id"] = claim.payment_id;
    if (claim.kind != OperationKind::charge) {
        line["refund_id"] = claim.operation_row_id;
    }
    line["operation_id"] = claim.operation_id;
    line["became"] = "needs_review";
    if (claim.kind != OperationKind::charge) {
        line["next"] = "fix the integration or configuration (docs/operations.md, "
                       "request_rejected); the refund stays in review with its amount held "
                       "(payrecon refunds show " +
                       claim.operation_row_id +
                       "): no operator command resolves a refund yet (issue 31)";
        return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    // The payment's generation is still the claim's: a settlement does not move it.
    ResolveCommand retry;
    retry.payment_id = claim.payment_id;
    retry.generation = claim.generation;
    retry.decision = OperatorDecision::retry;
    line["next"] = "fix the integration or configuration (docs/operations.md, "
                   "request_rejected), then: " +
                   command_line(retry);
    return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The log line of a provider account that refused our credentials.
std::string credentials_refused_line(const CredentialRefusal& r) {
    // Every payment of the account would be refused alike: the worker calls it no more and
    // leaves its payments queued; nothing about them needs deciding.
    nlohmann::ordered_json line;
    line["level"] = "error";
    line["event"] = "credentials_refused";
    line["provider"] = r.provider;
    line["http_status"] = r.http_status;
    line["code"] = r.code;
    line["message"] = r.message;
    line["payment_id"] = r.payment_id;
    line["check"] = r.check.empty() ? "the provider's credentials" : r.check;
    line["effect"] = "this worker calls provider " + r.provider +
                     " no more; its payments stay queued (pending, or retry_scheduled and due), "
                     "nothing was charged";
    line["next"] = "fix the credentials, then start the worker again (it reads them at start); "
                   "payments an earlier run sent to review for this: payrecon review requeue "
                   "--provider " +
                   r.provider + " --auth-failures --note \"...\" (docs/operations.md)";
    return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The log line of an attempt that did not end the payment's story.
std::string unfinished_line(const store::ClaimedPayment& claim, const UnfinishedAttempt& a) {
    // What went wrong, in words, for each attempt that did not end the payment's story.
    nlohmann::ordered_json line;
    line["level"] = "warning";
    line["event"] =
        a.outcome == providers::Outcome::not_sent ? "attempt_not_sent" : "attempt_unknown";
    line["provider"] = claim.provider;
    line["payment_id"] = claim.payment_id;
    if (claim.kind != OperationKind::charge) {
        line["refund_id"] = claim.operation_row_id;
    }
    line["operation_id"] = claim.operation_id;
    line["called"] = a.called;
    line["reason"] = a.reason;
    line["error_class"] = a.error_class;
    if (a.http_status != 0) {
        line["http_status"] = a.http_status;
    }
    if (!a.detail.empty()) {
        line["detail"] = a.detail;
    }
    line["became"] = a.became ? std::string(to_string(*a.became))
                              : std::string("unchanged (another generation owns it)");
    return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace

ExecutorOptions Worker::executor_options(int index) {
    ExecutorOptions eo;
    eo.worker_id = m_options.worker_id + "/" + std::to_string(index);
    eo.lease = m_options.lease;
    eo.batch = m_options.batch;
    eo.call_slots = m_call_slots.get();
    eo.settle_group = &m_settle_group;
    eo.backoff = m_options.backoff;
    eo.on_rejected = [this](const store::ClaimedPayment& claim,
                            const providers::Rejection& rejection) {
        log_event(rejected_line(claim, rejection));
    };
    eo.credentials = m_credentials.get();
    eo.on_credentials_refused = [this](const CredentialRefusal& r) {
        log_event(credentials_refused_line(r));
    };
    eo.on_unfinished = [this](const store::ClaimedPayment& claim, const UnfinishedAttempt& a) {
        log_event(unfinished_line(claim, a));
    };
    return eo;
}

void Worker::thread_main(int index) {
    std::unique_ptr<store::Db> db;
    std::vector<std::unique_ptr<providers::Provider>> owned = m_factory();
    std::vector<providers::Provider*> providers;
    for (auto& p : owned) {
        providers.push_back(p.get());
    }
    std::vector<std::string> provider_names;
    for (const auto* p : providers) {
        provider_names.push_back(p->name());
    }
    const ExecutorOptions eo = executor_options(index);
    auto last_expiry = std::chrono::steady_clock::now() - std::chrono::hours(1);
    auto last_evidence = last_expiry;
    // Reconnecting: 200 ms doubling up to 10 s, from 200 ms again once connected.
    const Backoff reconnect{std::chrono::milliseconds(200), std::chrono::milliseconds(10000)};
    int reconnect_failures = 0;
    // Drops the connection, logs why, and waits (`reconnect`); false: the thread ends
    // (a stop, or a run with `once`, which records the failure).
    const auto after_failure = [&](bool unexpected, const char* what) {
        db.reset();
        nlohmann::ordered_json line;
        if (unexpected) {
            line["level"] = "error";
        }
        line["event"] = unexpected ? "worker_error" : "database_unavailable";
        line["error"] = what;
        const std::chrono::milliseconds wait = reconnect.delay(reconnect_failures);
        line["retry_in_ms"] = wait.count();
        log_event(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        if (m_options.once) {
            (unexpected ? m_failed : m_db_failed) = true;
            return false;
        }
        if (wait_or_stop(wait)) {
            return false;
        }
        ++reconnect_failures;
        return true;
    };
    while (!m_stop) {
        try {
            if (!db) {
                db = std::make_unique<store::Db>(m_options.database_url);
                reconnect_failures = 0;
            }
            // One thread takes over what dead workers left behind: processing past the lease.
            if (index == 0 &&
                std::chrono::steady_clock::now() - last_expiry > m_options.lease / 4) {
                const int expired = store::expire_leases(*db, m_options.worker_id);
                last_expiry = std::chrono::steady_clock::now();
                if (expired > 0) {
                    nlohmann::ordered_json line;
                    line["event"] = "leases_expired";
                    line["payments"] = expired;
                    line["became"] = "unknown";
                    log_event(line.dump());
                }
            }
            // And settles at once what a provider's webhook has told us about unknown payments
            // (the reconciler does the same at the start of every run).
            if (index == 0 &&
                std::chrono::steady_clock::now() - last_evidence >= m_options.idle_poll) {
                log_evidence(apply_webhook_evidence(*db, m_options.worker_id, provider_names,
                                                    m_options.batch));
                last_evidence = std::chrono::steady_clock::now();
            }
            Executor executor(*db, providers, eo);
            const int n = executor.run_once();
            m_attempted += executor.counts().attempted;
            m_not_sent += executor.counts().not_sent;
            m_fenced += executor.counts().fenced_out;
            m_not_called += executor.counts().not_called;
            if (!executor.counts().settled_as.empty()) {
                std::lock_guard lock(m_mutex);
                for (const auto& [state, count] : executor.counts().settled_as) {
                    m_settled_as[state] += count;
                }
            }
            if (std::all_of(provider_names.begin(), provider_names.end(),
                            [this](const std::string& p) { return m_credentials->refused(p); })) {
                // Nothing left that this process may call: a daemon stops rather than idle.
                stop();
                return;
            }
            if (n == 0) {
                if (m_options.once || wait_or_stop(m_options.idle_poll)) {
                    return;
                }
            }
        } catch (const DatabaseUnavailable& e) {
            if (!after_failure(false, e.what())) {
                return;
            }
        } catch (const std::exception& e) {
            // Anything else (a driver error without an SQLSTATE as the server goes down, a bug):
            // never std::terminate with claims held. The connection is dropped, the error logged,
            // and the thread goes on after a pause; what it had claimed is fenced by its
            // generation and taken over when the lease ends.
            if (!after_failure(true, e.what())) {
                return;
            }
        }
    }
}

} // namespace payrecon::engine
