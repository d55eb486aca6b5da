#pragma once
// The executor (DESIGN sections 5 and 6): claims payments, calls their provider with the stable
// operation ID, records every attempt, and applies the outcome fenced by generation.

#include "core/backoff.hpp"
#include "engine/credential_gate.hpp"
#include "providers/provider.hpp"
#include "store/executor_store.hpp"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <semaphore>
#include <string>
#include <vector>

namespace payrecon::store {
class Db;
}

namespace payrecon::engine {

// The pure decision: what a provider outcome does to a `processing` payment.
//   succeeded -> succeeded; declined -> failed;
//   not_sent  -> retry_scheduled after base * 2^(attempt-1), capped, times a jitter in [0.5, 1.0)
//                (`jitter01` in [0, 1) picks it);
//   pending   -> unknown (the reconciler looks again later);
//   unknown   -> unknown (never re-sent blindly);
//   rejected  -> needs_review with review code request_rejected, the reason naming the provider's
//                code and message (`rejection`) -- never failed: the provider executed nothing and
//                the customer refused nothing; an operator fixes the integration and resolves it
//                with --as retry (the same operation ID);
//                with 401 or 403 (`rejection->http_status`: our credentials, refused for every
//                payment alike, core/credential_refusal) -> retry_scheduled, due at once: nothing
//                about the payment needs deciding, and it is sent again with the same operation ID
//                by the first process whose credentials the provider accepts.
store::Settlement
decide_settlement(providers::Outcome outcome, int attempt_no, const Backoff& backoff,
                  double jitter01,
                  const std::optional<providers::Rejection>& rejection = std::nullopt);

// The order a provider is sent (or asked about) for a claimed charge.
providers::PaymentOrder order_for(const store::ClaimedPayment& payment);
// The same for a claimed refund (kind refund): the refund's operation ID, amount and reason, and
// the charge's provider reference.
providers::RefundOrder refund_order_for(const store::ClaimedPayment& refund);
// The same for a claimed capture or void (issue 32): its operation ID, amount and final, the
// charge's provider reference and operation ID, what it authorised and what was captured before.
providers::AuthorizationOrder authorization_order_for(const store::ClaimedPayment& operation);

// The one place a claimed operation's kind picks its provider call: submit for a charge (authorise
// only when manual), refund, capture, void_authorization; `deadline` is the claim's lease end.
providers::SubmitResult
send_operation(providers::Provider& provider, const store::ClaimedPayment& claim,
               std::optional<std::chrono::steady_clock::time_point> deadline);
// And its lookup: lookup, lookup_refund, or lookup_capture for a capture or a void.
providers::LookupResult look_up_operation(providers::Provider& provider,
                                          const store::ClaimedPayment& claim);
// Whether the provider can find an operation of `kind` again, and after how long "not found"
// means something.
bool can_look_up(const providers::Capabilities& caps, OperationKind kind);
std::chrono::seconds lookup_staleness(const providers::Capabilities& caps, OperationKind kind);

// An attempt that ended not_sent or unknown, for a log line.
struct UnfinishedAttempt {
    providers::Outcome outcome = providers::Outcome::unknown;
    bool called = false;     // false: released before the call (claim lost, credentials refused)
    int http_status = 0;     // 0: no response
    std::string error_class; // as recorded: "not_sent:curl_6", "http_500", ...
    std::string reason;      // in words: "could not resolve host", "the provider answered HTTP 500"
    std::string detail;      // the call's redacted excerpt (libcurl's own message)
    std::optional<PaymentState> became; // nullopt: fenced out, another generation owns it
};

// Group settlement (issue 33): the executors of one worker hand their charges' settlements here,
// and those that arrive while one is being written are written together by the next, in one
// statement (store::settle_attempts) -- a group commit, so that calls that end together cost one
// synchronous commit, not one each. The first caller to find no write in progress writes everything
// queued on its own connection, itself included, and wakes the others; a caller waits only while a
// write is in progress, so a lone settlement is written at once. Each caller gets its own answer
// (settled, or fenced out) or the write's exception (DatabaseUnavailable for all of that write).
// Thread-safe; shared by the executors of one process.
class SettleGroup {
public:
    bool settle(store::Db& db, const store::ClaimedPayment& claim,
                const store::AttemptResult& result, const store::Settlement& settlement);

    // How many statements wrote how many settlements, for the worker's summary and the tests.
    struct Counts {
        long long statements = 0;
        long long settlements = 0;
        std::size_t largest = 0;
    };
    Counts counts() const;
    // Settlements waiting for the write in progress (for the tests).
    std::size_t queued() const;

private:
    struct Waiter;
    mutable std::mutex m_mutex;
    std::condition_variable m_written;
    std::vector<Waiter*> m_queue;
    bool m_writing = false;
    Counts m_counts;
};

struct ExecutorOptions {
    std::string worker_id; // recorded as lease_owner and in every attempt
    // Each claim's lease, proved immediately before each call and renewed there when what is
    // left would not cover the call and the next one; longer than the slowest provider's
    // worst-case call plus `call_margin` (minimum_lease()) by at least the fence's round trip, or
    // every call is skipped.
    std::chrono::milliseconds lease{60000};
    // What the lease must still cover beyond a call's worst case when the call starts: the
    // settlement's round trip and the clocks' disagreement.
    std::chrono::milliseconds call_margin{1000};
    int batch = 8;
    // Shared by the executors of one worker: a permit is held from just after the fence until
    // the provider's answer, so that at most as many calls are in flight as it has permits while
    // the claims, fences and settlements of other executors overlap them. Null: no limit.
    std::counting_semaphore<>* call_slots = nullptr;
    // Shared by the executors of one worker: their charges' settlements written together where
    // their calls end together (SettleGroup). Null: each settled on its own.
    SettleGroup* settle_group = nullptr;
    Backoff backoff;
    // Called for every attempt the provider rejected (Outcome::rejected) after it was settled or
    // fenced out, with the provider's code and message: `payrecon worker` logs it at error level.
    // Not for a refusal of our credentials (on_credentials_refused).
    std::function<void(const store::ClaimedPayment&, const providers::Rejection&)> on_rejected;
    // What the executors of one process know of each provider account's credentials (shared by a
    // worker's threads). Null: the executor keeps its own.
    CredentialGate* credentials = nullptr;
    // Called once, by the executor whose call it was, when a provider refused our credentials: the
    // account is called no more by this process, and its claimed payments are released uncalled.
    std::function<void(const CredentialRefusal&)> on_credentials_refused;
    // Called for every attempt that ended not_sent or unknown (a call that did not get through or
    // whose outcome is not known, or a claim released uncalled), after it was recorded.
    std::function<void(const store::ClaimedPayment&, const UnfinishedAttempt&)> on_unfinished;
};

// The shortest lease under which `providers` can be called: the slowest worst-case call
// (Capabilities::worst_case_call) plus `call_margin`.
std::chrono::milliseconds minimum_lease(const std::vector<providers::Provider*>& providers,
                                        std::chrono::milliseconds call_margin);
// The lease a claim gets when none is asked for: minimum_lease() plus 10 s, which covers the
// renewal's round trips before each call.
std::chrono::milliseconds default_lease(const std::vector<providers::Provider*>& providers,
                                        std::chrono::milliseconds call_margin);
// The same from the slowest provider's worst-case call (for a process that has not made its
// provider clients yet).
std::chrono::milliseconds minimum_lease(std::chrono::milliseconds slowest_call,
                                        std::chrono::milliseconds call_margin);
std::chrono::milliseconds default_lease(std::chrono::milliseconds slowest_call,
                                        std::chrono::milliseconds call_margin);

class Executor {
public:
    // `providers` are the providers this executor may call, by configured name; it claims only
    // their payments. The executor uses them from one thread.
    // Throws ConfigError unless options.lease is longer than minimum_lease(providers, call_margin).
    Executor(store::Db& db, std::vector<providers::Provider*> providers, ExecutorOptions options);

    // Claims one batch of the providers whose credentials have not been refused (CredentialGate)
    // and executes it, one payment at a time; a payment whose provider refuses our credentials
    // meanwhile is released uncalled (not_sent, retry_scheduled due at once). Claims nothing, and
    // returns 0, once every provider refused them. Before each provider call
    // (before its wait for a call slot) a fenced statement proves the claim is still this
    // executor's (store::check_claims, read only; store::renew_claims instead when what is left
    // of the batch's leases would not cover this call and the next one's worst case), and
    // immediately before the call the local monotonic clock confirms that the lease proved still
    // covers the call's worst case (fencing again if the wait for the slot left too little); a
    // payment that fails either check is not sent (its attempt is recorded as not sent, and it goes
    // back to retry_scheduled unless another generation owns it now). Returns the number of
    // payments claimed. Throws DatabaseUnavailable if the database went away (what was settled
    // stays settled; a claimed payment left behind turns unknown when its lease expires -- never
    // pending).
    int run_once();

    struct Counts {
        int attempted = 0; // provider calls made
        int not_sent = 0;  // of them, calls that never reached the provider
        // Claims released without a call: no longer held (or out of time) just before it, or their
        // provider had refused our credentials.
        int not_called = 0;
        int fenced_out = 0;
        int rejected = 0; // calls the provider refused before executing anything
        std::map<std::string, int> settled_as; // by the state each attempt settled the payment in
        // The refusals of our credentials this executor's calls met (at most one per provider).
        std::vector<CredentialRefusal> credentials_refused;
    };
    const Counts& counts() const { return m_counts; }

private:
    void execute(const std::vector<store::ClaimedPayment>& batch, std::size_t index);
    // store::settle_attempt, through the settle group where there is one.
    bool settle(const store::ClaimedPayment& claim, const store::AttemptResult& attempt,
                const store::Settlement& settlement);
    // The pre-call fence: the deadline by the local monotonic clock before which the call must
    // end (the proved lease less the call margin), or nothing if the claim is no longer held.
    std::optional<std::chrono::steady_clock::time_point>
    fence(const store::ClaimedPayment& claim, const std::vector<store::ClaimedPayment>& rest,
          std::chrono::milliseconds worst_case, std::string& not_called);
    // Runs the fence, takes a call slot and, if the claim is still held and its lease still
    // covers the call by the local clock (else it fences again, in the slot), makes it: the
    // charge submitted, or the refund, capture or void sent. Returns nothing (and says why in
    // `not_called`) if it did not call.
    std::optional<providers::SubmitResult>
    fence_and_call(const store::ClaimedPayment& claim,
                   const std::vector<store::ClaimedPayment>& rest, providers::Provider& provider,
                   std::string& not_called);
    // `immediately`: due again at once (its provider refused our credentials: the next process
    // with working ones sends it), else after the backoff.
    void release_uncalled(const store::ClaimedPayment& claim, const std::string& error_class,
                          const std::string& why, bool immediately = false);
    void report_unfinished(const store::ClaimedPayment& claim, UnfinishedAttempt attempt,
                           bool settled, PaymentState to);

    store::Db& m_db;
    std::vector<providers::Provider*> m_providers;
    std::vector<std::string> m_names;
    ExecutorOptions m_options;
    std::unique_ptr<CredentialGate> m_own_gate; // when the options share none
    CredentialGate* m_gate;
    Counts m_counts;
};

} // namespace payrecon::engine
