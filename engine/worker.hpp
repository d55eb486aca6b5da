#pragma once
// `payrecon worker`: executor threads, each with its own database connection and its own provider
// clients, sharing one database with any number of other workers in any number of processes.

#include "engine/executor.hpp"
#include "engine/reconciler.hpp"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <semaphore>
#include <string>
#include <vector>

namespace payrecon::engine {

// Makes one thread's provider clients (a provider client is used by one thread at a time).
using ProviderFactory = std::function<std::vector<std::unique_ptr<providers::Provider>>()>;

struct WorkerOptions {
    std::string database_url;
    std::string worker_id; // host:pid by default; recorded on every claim and attempt
    int concurrency = 4;   // provider calls in flight at most (call slots)
    // Executor threads, each with its own database connection; more than `concurrency` lets
    // claims and settlements overlap the calls in flight (bench/executor). 0: `concurrency`.
    int threads = 0;
    int executor_threads() const { return threads > 0 ? threads : concurrency; }
    int batch = 4; // payments claimed per transaction; a stop finishes the batch
    std::chrono::milliseconds lease{60000}; // per claim, renewed before each call (ExecutorOptions)
    std::chrono::milliseconds idle_poll{500}; // wait when nothing was due
    bool once = false;                        // process what is due now, then return
    Backoff backoff;
    // What to check when a provider refuses our credentials, by provider name (the variables that
    // hold them: "the API key in STRIPE_API_KEY (provider stripe)").
    std::map<std::string, std::string> credentials;
};

class Worker {
public:
    Worker(WorkerOptions options, ProviderFactory factory, std::ostream& log);

    // Runs until stop() (or, with `once`, until nothing is due). Calls in flight finish and are
    // settled before it returns: a claimed payment is never abandoned by a clean stop.
    // Returns the number of payments attempted.
    long run();

    // Safe from a signal-handling thread.
    void stop();

    // True if a run with `once` ended because the database could not be reached.
    bool database_failed() const { return m_db_failed.load(); }
    // True if a run with `once` ended on another error (logged as worker_error).
    bool failed() const { return m_failed.load(); }
    // The provider accounts that refused our credentials (HTTP 401/403), each after one call: the
    // worker called them no more, and left their payments queued (logged as credentials_refused).
    // A daemon whose every provider refused them stops by itself.
    std::vector<CredentialRefusal> credentials_refused() const { return m_credentials->refusals(); }
    // Provider calls made, and of them those that never reached the provider: with `once`, equal
    // and not 0 means no call got through.
    long calls() const { return m_attempted.load(); }
    long calls_not_sent() const { return m_not_sent.load(); }
    // What the run came to that an operator must act on, after run(): a provider refused our
    // credentials (ConfigError, exit 4, naming what to fix); with `once`, no call got through --
    // calls were made and every one was not sent (exit 1). nullopt otherwise.
    std::optional<OperatorError> problem() const;

private:
    void thread_main(int index);
    // The options of thread `index`'s executor: its ID, the shared call slots and credentials,
    // and the log lines of what it meets.
    ExecutorOptions executor_options(int index);
    bool wait_or_stop(std::chrono::milliseconds how_long);
    void log_event(const std::string& json_line);
    // One log line per payment a webhook event settled, counted in settled_as.
    void log_evidence(const std::vector<ReconcileOutcome>& applied);

    WorkerOptions m_options;
    ProviderFactory m_factory;
    std::ostream& m_log;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::atomic<bool> m_stop{false};
    std::atomic<long> m_attempted{0};
    std::atomic<long> m_fenced{0};
    std::atomic<long> m_not_called{0}; // claims found lost just before the call, and not sent
    std::atomic<long> m_not_sent{0};   // calls that never reached the provider
    std::unique_ptr<CredentialGate> m_credentials; // shared by the executor threads
    std::map<std::string, long> m_settled_as; // under m_mutex: attempts by the state they settled
    std::unique_ptr<std::counting_semaphore<>> m_call_slots;
    // The executor threads' charges settled together where their calls end together.
    SettleGroup m_settle_group;
    std::atomic<bool> m_db_failed{false};
    std::atomic<bool> m_failed{false};
};

} // namespace payrecon::engine
