#pragma once
// The executor (DESIGN sections 5 and 6): claims payments, calls their provider with the stable
// operation ID, records every attempt, and applies the outcome fenced by generation.

#include "core/backoff.hpp"
#include "providers/provider.hpp"
#include "store/executor_store.hpp"

#include <chrono>
#include <functional>
#include <map>
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
//                with --as retry (the same operation ID).
store::Settlement
decide_settlement(providers::Outcome outcome, int attempt_no, const Backoff& backoff,
                  double jitter01,
                  const std::optional<providers::Rejection>& rejection = std::nullopt);

// The order a provider is sent (or asked about) for a claimed payment.
providers::PaymentOrder order_for(const store::ClaimedPayment& payment);

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
    // Shared by the executors of one worker: a permit is held from just before the fence until
    // the provider's answer, so that at most as many calls are in flight as it has permits while
    // the claims and settlements of other executors overlap them. Null: no limit.
    std::counting_semaphore<>* call_slots = nullptr;
    Backoff backoff;
    // Called for every attempt the provider rejected (Outcome::rejected) after it was settled or
    // fenced out, with the provider's code and message: `payrecon worker` logs it at error level.
    std::function<void(const store::ClaimedPayment&, const providers::Rejection&)> on_rejected;
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

    // Claims one batch and executes it, one payment at a time. Immediately before each provider
    // call a fenced statement proves the claim is still this executor's (store::check_claims,
    // read only; store::renew_claims instead when what is left of the batch's leases would not
    // cover this call and the next one's worst case), and the local monotonic clock confirms
    // that the lease still covers the call's worst case; a payment that fails either check is not
    // sent (its attempt is recorded as not sent, and it goes back to retry_scheduled unless
    // another generation owns it now). Returns the number of payments claimed. Throws
    // DatabaseUnavailable if the database went away (what was settled stays settled; a claimed
    // payment left behind turns unknown when its lease expires -- never pending).
    int run_once();

    struct Counts {
        int attempted = 0;  // provider calls made
        int not_called = 0; // claims found no longer held (or out of time) just before the call
        int fenced_out = 0;
        int rejected = 0; // calls the provider refused before executing anything
        std::map<std::string, int> settled_as; // by the state each attempt settled the payment in
    };
    const Counts& counts() const { return m_counts; }

private:
    void execute(const std::vector<store::ClaimedPayment>& batch, std::size_t index);
    // Takes a call slot, runs the fence and, if the claim is still held and its lease covers the
    // call, submits `order`. Returns nothing (and says why in `not_called`) if it did not call.
    std::optional<providers::SubmitResult>
    fence_and_submit(const store::ClaimedPayment& claim,
                     const std::vector<store::ClaimedPayment>& rest, providers::Provider& provider,
                     providers::PaymentOrder& order, std::string& not_called);
    void release_uncalled(const store::ClaimedPayment& claim, const std::string& why);

    store::Db& m_db;
    std::vector<providers::Provider*> m_providers;
    std::vector<std::string> m_names;
    ExecutorOptions m_options;
    Counts m_counts;
};

} // namespace payrecon::engine
