#include "engine/executor.hpp"

#include "core/crash_point.hpp"
#include "core/credential_refusal.hpp"
#include "core/errors.hpp"
#include "core/fingerprint.hpp"
#include "core/reconcile_policy.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

namespace payrecon::engine {
namespace {

double jitter() {
    const std::string b = random_bytes(4);
    std::uint32_t v = 0;
    for (const char c : b) {
        v = (v << 8) | static_cast<unsigned char>(c);
    }
    return static_cast<double>(v) / 4294967296.0;
}

} // namespace

providers::PaymentOrder order_for(const store::ClaimedPayment& payment) {
    providers::PaymentOrder order;
    order.operation_id = payment.operation_id;
    order.payment_id = payment.payment_id;
    order.merchant_reference = payment.merchant_reference;
    order.amount = Money{payment.amount_minor, payment.currency};
    order.payment_method = payment.payment_method;
    order.customer = payment.customer;
    order.description = payment.description;
    order.metadata = payment.metadata;
    order.created_at = payment.created_at;
    order.manual_capture = payment.manual_capture;
    return order;
}

providers::RefundOrder refund_order_for(const store::ClaimedPayment& refund) {
    providers::RefundOrder order;
    order.operation_id = refund.operation_id;
    order.refund_id = refund.operation_row_id;
    order.payment_id = refund.payment_id;
    order.payment_reference = refund.charge_reference.value_or("");
    if (!refund.merchant_reference.empty()) {
        order.merchant_reference = refund.merchant_reference;
    }
    order.amount = Money{refund.amount_minor, refund.currency};
    order.reason = refund.refund_reason;
    order.metadata = refund.metadata;
    order.created_at = refund.created_at;
    return order;
}

providers::AuthorizationOrder authorization_order_for(const store::ClaimedPayment& operation) {
    providers::AuthorizationOrder order;
    order.kind = operation.kind;
    order.operation_id = operation.operation_id;
    order.operation_row_id = operation.operation_row_id;
    order.payment_id = operation.payment_id;
    order.payment_operation_id = operation.payment_operation_id;
    order.payment_reference = operation.charge_reference.value_or("");
    if (!operation.merchant_reference.empty()) {
        order.merchant_reference = operation.merchant_reference;
    }
    order.amount = Money{operation.amount_minor, operation.currency};
    order.final = operation.final.value_or(true);
    order.authorized_minor = operation.authorized_minor;
    order.captured_before_minor = operation.captured_before_minor;
    order.metadata = operation.metadata;
    order.created_at = operation.created_at;
    return order;
}

providers::SubmitResult
send_operation(providers::Provider& provider, const store::ClaimedPayment& claim,
               std::optional<std::chrono::steady_clock::time_point> deadline) {
    switch (claim.kind) {
    case OperationKind::charge: {
        if (claim.manual_capture && !provider.capabilities().manual_capture) {
            // Sent as it is, an authorisation would be charged at once: nothing is sent, and the
            // payment waits for an operator (request_rejected) instead of charging the customer.
            return providers::rejected_request(
                0, "manual_capture_not_supported",
                "payment " + claim.payment_id +
                    " asks to be authorised only (capture manual), "
                    "which payrecon cannot do with provider kind '" +
                    std::string(provider.kind()) +
                    "' yet: nothing was sent; cancel it, or send it to a provider that can",
                "");
        }
        providers::PaymentOrder order = order_for(claim);
        order.deadline = deadline;
        return provider.submit(order);
    }
    case OperationKind::refund: {
        providers::RefundOrder order = refund_order_for(claim);
        order.deadline = deadline;
        return provider.refund(order);
    }
    case OperationKind::capture: {
        providers::AuthorizationOrder order = authorization_order_for(claim);
        order.deadline = deadline;
        return provider.capture(order);
    }
    case OperationKind::void_authorization: {
        providers::AuthorizationOrder order = authorization_order_for(claim);
        order.deadline = deadline;
        return provider.void_authorization(order);
    }
    }
    throw std::logic_error("send_operation: an operation kind out of range");
}

providers::LookupResult look_up_operation(providers::Provider& provider,
                                          const store::ClaimedPayment& claim) {
    switch (claim.kind) {
    case OperationKind::charge:
        return provider.lookup(order_for(claim));
    case OperationKind::refund:
        return provider.lookup_refund(refund_order_for(claim));
    case OperationKind::capture:
    case OperationKind::void_authorization:
        return provider.lookup_capture(authorization_order_for(claim));
    }
    throw std::logic_error("look_up_operation: an operation kind out of range");
}

bool can_look_up(const providers::Capabilities& caps, OperationKind kind) {
    switch (kind) {
    case OperationKind::charge:
        return caps.lookup_by_operation_id;
    case OperationKind::refund:
        return caps.refund_lookup;
    case OperationKind::capture:
    case OperationKind::void_authorization:
        return caps.capture_lookup;
    }
    return false;
}

std::chrono::seconds lookup_staleness(const providers::Capabilities& caps, OperationKind kind) {
    switch (kind) {
    case OperationKind::charge:
        return caps.lookup_staleness;
    case OperationKind::refund:
        return caps.refund_lookup_staleness;
    case OperationKind::capture:
    case OperationKind::void_authorization:
        // An authorisation is read where it is kept, current: only the configured settle delay.
        return caps.refund_lookup_staleness;
    }
    return caps.lookup_staleness;
}

store::Settlement decide_settlement(providers::Outcome outcome, int attempt_no,
                                    const Backoff& backoff, double jitter01,
                                    const std::optional<providers::Rejection>& rejection) {
    using providers::Outcome;
    store::Settlement s;
    switch (outcome) {
    case Outcome::succeeded:
        s.to = PaymentState::succeeded;
        return s;
    case Outcome::declined:
        s.to = PaymentState::failed;
        return s;
    case Outcome::not_sent: {
        s.to = PaymentState::retry_scheduled;
        s.retry_in = backoff.delay(attempt_no - 1, jitter01);
        s.reason =
            "the provider was not reached; a re-send with the same operation ID is scheduled";
        return s;
    }
    case Outcome::pending:
        s.to = PaymentState::unknown;
        s.reason = "the provider has not finished the payment; the reconciler will look again";
        return s;
    case Outcome::rejected: {
        if (rejection && refuses_credentials(rejection->http_status)) {
            s.to = PaymentState::retry_scheduled;
            s.retry_in = std::chrono::milliseconds(0);
            s.reason = "the provider refused our credentials (HTTP " +
                       std::to_string(rejection->http_status) + " " + rejection->code +
                       (rejection->message.empty() ? "" : ": " + rejection->message) +
                       ") before executing anything; nothing was charged. Sent again with the "
                       "same operation ID once the credentials are fixed";
            return s;
        }
        s.to = PaymentState::needs_review;
        s.review_code = std::string(to_string(ReviewCode::request_rejected));
        const std::string said =
            rejection
                ? rejection->code + (rejection->message.empty() ? "" : ": " + rejection->message)
                : "no code given";
        s.reason = "the provider refused the request before executing it (" + said +
                   "); nothing was charged. Fix the integration or configuration, then resolve "
                   "it --as retry (same operation ID): review show prints the command";
        return s;
    }
    case Outcome::unknown:
        break;
    }
    s.to = PaymentState::unknown;
    s.reason = "the provider may or may not have charged; the reconciler will ask it";
    return s;
}

// What a default lease adds to the minimum: the renewal's round trips before each call.
constexpr std::chrono::seconds k_lease_headroom{10};

std::chrono::milliseconds minimum_lease(const std::vector<providers::Provider*>& providers,
                                        std::chrono::milliseconds call_margin) {
    std::chrono::milliseconds slowest{0};
    for (const auto* p : providers) {
        slowest = std::max(slowest, p->capabilities().worst_case_call);
    }
    return minimum_lease(slowest, call_margin);
}

std::chrono::milliseconds minimum_lease(std::chrono::milliseconds slowest_call,
                                        std::chrono::milliseconds call_margin) {
    return slowest_call + call_margin;
}

std::chrono::milliseconds default_lease(std::chrono::milliseconds slowest_call,
                                        std::chrono::milliseconds call_margin) {
    return minimum_lease(slowest_call, call_margin) + k_lease_headroom;
}

std::chrono::milliseconds default_lease(const std::vector<providers::Provider*>& providers,
                                        std::chrono::milliseconds call_margin) {
    return minimum_lease(providers, call_margin) + k_lease_headroom;
}

struct SettleGroup::Waiter {
    store::SettleRequest request;
    bool done = false;
    bool settled = false;
    std::exception_ptr error;
};

bool SettleGroup::settle(store::Db& db, const store::ClaimedPayment& claim,
                         const store::AttemptResult& result, const store::Settlement& settlement) {
    Waiter me;
    me.request = {&claim, &result, &settlement};
    std::unique_lock lock(m_mutex);
    m_queue.push_back(&me);
    while (!me.done) {
        if (m_writing) {
            m_written.wait(lock);
            continue;
        }
        // No write in progress: this caller writes everything queued, itself included -- but a
        // payment once per statement (a stale claim of one of this worker's threads may settle
        // beside its newer claim): a second settlement of it waits for the next.
        m_writing = true;
        std::vector<Waiter*> group;
        std::vector<Waiter*> later;
        std::set<std::pair<std::string, std::string>> payments;
        for (Waiter* w : m_queue) {
            const store::ClaimedPayment& c = *w->request.claim;
            (payments.emplace(c.tenant_id, c.payment_id).second ? group : later).push_back(w);
        }
        m_queue.swap(later);
        lock.unlock();
        std::vector<store::SettleRequest> requests;
        requests.reserve(group.size());
        for (const Waiter* w : group) {
            requests.push_back(w->request);
        }
        std::vector<bool> settled;
        std::exception_ptr error;
        try {
            settled = store::settle_attempts(db, requests);
        } catch (...) {
            error = std::current_exception();
        }
        lock.lock();
        for (std::size_t i = 0; i < group.size(); ++i) {
            group[i]->error = error;
            group[i]->settled = error == nullptr && settled[i];
            group[i]->done = true;
        }
        if (error == nullptr) {
            ++m_counts.statements;
            m_counts.settlements += static_cast<long long>(group.size());
            m_counts.largest = std::max(m_counts.largest, group.size());
        }
        m_writing = false;
        m_written.notify_all();
    }
    if (me.error) {
        std::rethrow_exception(me.error);
    }
    return me.settled;
}

std::size_t SettleGroup::queued() const {
    const std::lock_guard lock(m_mutex);
    return m_queue.size();
}

SettleGroup::Counts SettleGroup::counts() const {
    const std::lock_guard lock(m_mutex);
    return m_counts;
}

Executor::Executor(store::Db& db, std::vector<providers::Provider*> providers,
                   ExecutorOptions options)
    : m_db(db), m_providers(std::move(providers)), m_options(std::move(options)),
      m_own_gate(m_options.credentials == nullptr ? std::make_unique<CredentialGate>() : nullptr),
      m_gate(m_options.credentials != nullptr ? m_options.credentials : m_own_gate.get()) {
    if (m_providers.empty()) {
        throw std::invalid_argument("an executor needs at least one provider");
    }
    for (const auto* p : m_providers) {
        m_names.push_back(p->name());
    }
    const auto needed = minimum_lease(m_providers, m_options.call_margin);
    if (m_options.lease <= needed) {
        throw ConfigError("a lease of " + std::to_string(m_options.lease.count()) +
                              " ms cannot cover the slowest provider call: its connect and total "
                              "timeouts plus a margin of " +
                              std::to_string(m_options.call_margin.count()) + " ms take " +
                              std::to_string(needed.count()) + " ms",
                          "give a lease longer than " + std::to_string(needed.count()) +
                              " ms (it must also cover the renewal's round trip), or lower the "
                              "provider's connect_timeout_ms/timeout_ms");
    }
}

int Executor::run_once() {
    std::vector<std::string> callable;
    for (const auto& name : m_names) {
        if (!m_gate->refused(name)) {
            callable.push_back(name);
        }
    }
    if (callable.empty()) {
        return 0;
    }
    const auto claims = store::claim_payments(m_db, m_options.worker_id, m_options.lease,
                                              m_options.batch, callable);
    for (std::size_t i = 0; i < claims.size(); ++i) {
        execute(claims, i);
    }
    return static_cast<int>(claims.size());
}

bool Executor::settle(const store::ClaimedPayment& claim, const store::AttemptResult& attempt,
                      const store::Settlement& settlement) {
    // A charge's settlement joins those of calls that ended with it; an operation's is written on
    // its own (two of one payment would meet in one update of their payment).
    if (m_options.settle_group != nullptr && claim.kind == OperationKind::charge) {
        return m_options.settle_group->settle(m_db, claim, attempt, settlement);
    }
    return store::settle_attempt(m_db, claim, attempt, settlement);
}

void Executor::report_unfinished(const store::ClaimedPayment& claim, UnfinishedAttempt attempt,
                                 bool settled, PaymentState to) {
    if (!m_options.on_unfinished) {
        return;
    }
    if (settled) {
        attempt.became = to;
    }
    m_options.on_unfinished(claim, attempt);
}

void Executor::release_uncalled(const store::ClaimedPayment& claim, const std::string& error_class,
                                const std::string& why, bool immediately) {
    ++m_counts.not_called;
    store::AttemptResult attempt;
    attempt.outcome = std::string(providers::to_string(providers::Outcome::not_sent));
    attempt.error_class = error_class;
    attempt.detail = why;
    // Nothing was sent: if no one else owns the payment now, it is due again; if another
    // generation does, this write affects nothing and only the attempt is recorded.
    store::Settlement settlement = decide_settlement(providers::Outcome::not_sent, claim.attempt_no,
                                                     m_options.backoff, jitter());
    if (immediately) {
        settlement.retry_in = std::chrono::milliseconds(0);
    }
    const bool settled = settle(claim, attempt, settlement);
    if (!settled) {
        ++m_counts.fenced_out;
    }
    UnfinishedAttempt u;
    u.outcome = providers::Outcome::not_sent;
    u.error_class = error_class;
    u.reason = why;
    report_unfinished(claim, std::move(u), settled, settlement.to);
}

namespace {

// Holds one of `slots`' permits for its lifetime (none when `slots` is null).
class CallSlot {
public:
    explicit CallSlot(std::counting_semaphore<>* slots) : m_slots(slots) {
        if (m_slots != nullptr) {
            m_slots->acquire();
        }
    }
    ~CallSlot() {
        if (m_slots != nullptr) {
            m_slots->release();
        }
    }
    CallSlot(const CallSlot&) = delete;
    CallSlot& operator=(const CallSlot&) = delete;

private:
    std::counting_semaphore<>* m_slots;
};

} // namespace

std::optional<std::chrono::steady_clock::time_point>
Executor::fence(const store::ClaimedPayment& claim, const std::vector<store::ClaimedPayment>& rest,
                std::chrono::milliseconds worst_case, std::string& not_called) {
    // The database proves the claim is still ours (and says what is left of the rest of the
    // batch's leases); the local monotonic clock, read before asking, bounds when the lease ends,
    // whatever pause comes after. The proof writes nothing while the leases are long enough: for
    // this call, and for the next payment's after it. When they are not, the same proof renews
    // them all.
    crash_point("executor.before_fence");
    auto asked = std::chrono::steady_clock::now();
    auto held = store::check_claims(m_db, m_options.worker_id, rest);
    const auto renew_below =
        (rest.size() > 1 ? 2 * worst_case : worst_case) + m_options.call_margin;
    const bool short_lease = std::any_of(held.begin(), held.end(),
                                         [&](const auto& h) { return h.second < renew_below; });
    if (held.count(claim.subject_id()) != 0 && short_lease) {
        asked = std::chrono::steady_clock::now();
        held = store::renew_claims(m_db, m_options.worker_id, m_options.lease, rest);
    }
    const auto mine = held.find(claim.subject_id());
    if (mine == held.end()) {
        not_called = "not sent: just before the call the claim was no longer this worker's "
                     "(lease expired, or another generation owns the " +
                     std::string(subject_noun(claim.kind)) + ")";
        return std::nullopt;
    }
    return asked + mine->second - m_options.call_margin;
}

std::optional<providers::SubmitResult>
Executor::fence_and_call(const store::ClaimedPayment& claim,
                         const std::vector<store::ClaimedPayment>& rest,
                         providers::Provider& provider, std::string& not_called) {
    // The pre-call fence (DESIGN section 6) runs before the wait for a call slot, so that a slot
    // is held for the call alone. That is safe because nothing but the lease holder changes a
    // processing payment before its lease has ended by the database's clock (section 6's
    // invariant, tests/execution/test_lease_invariant.cpp): what the fence proved holds until the
    // deadline it gave, which the local monotonic clock checks again inside the slot. A wait
    // that left too little of the lease for the call's worst case fences again, in the slot.
    const auto worst_case = provider.capabilities().worst_case_call;
    auto deadline = fence(claim, rest, worst_case, not_called);
    if (!deadline) {
        return std::nullopt;
    }
    const CallSlot slot(m_options.call_slots);
    if (std::chrono::steady_clock::now() + worst_case > *deadline) {
        deadline = fence(claim, rest, worst_case, not_called);
        if (!deadline) {
            return std::nullopt;
        }
    }
    crash_point("executor.before_submit");
    if (std::chrono::steady_clock::now() + worst_case > *deadline) {
        not_called = "not sent: the claim's lease no longer covered the call's worst case (the "
                     "worker was paused or slow after its fence)";
        return std::nullopt;
    }
    providers::SubmitResult result = send_operation(provider, claim, *deadline);
    crash_point("executor.after_submit");
    return result;
}

void Executor::execute(const std::vector<store::ClaimedPayment>& batch, std::size_t index) {
    const store::ClaimedPayment& claim = batch[index];
    providers::Provider* provider = nullptr;
    for (auto* p : m_providers) {
        if (p->name() == claim.provider) {
            provider = p;
        }
    }
    if (provider == nullptr) {
        throw std::logic_error("claimed a payment of a provider this executor does not have");
    }

    // The account's credentials first (one caller at a time until they are proven), then the
    // call slot and the fence (fence_and_submit): a caller waiting here holds no slot.
    std::optional<CredentialGate::Pass> pass = m_gate->enter(claim.provider);
    if (!pass) {
        const std::string check = m_gate->check_of(claim.provider);
        release_uncalled(claim, "not_sent:credentials_refused",
                         "not sent: provider " + claim.provider +
                             " refused our credentials in this run" +
                             (check.empty() ? "" : "; check " + check),
                         true);
        return;
    }
    const std::vector<store::ClaimedPayment> rest(
        batch.begin() + static_cast<std::ptrdiff_t>(index), batch.end());
    std::string not_called;
    const std::optional<providers::SubmitResult> called =
        fence_and_call(claim, rest, *provider, not_called);
    if (!called) {
        release_uncalled(claim, "not_sent:claim_not_held", not_called);
        return;
    }
    const providers::SubmitResult& result = *called;
    const bool credentials_refused = result.outcome == providers::Outcome::rejected &&
                                     result.rejection &&
                                     refuses_credentials(result.rejection->http_status);
    CredentialRefusal refusal;
    if (credentials_refused) {
        refusal.code = result.rejection->code;
        refusal.message = result.rejection->message;
        refusal.payment_id = claim.payment_id;
        refusal.call = "sending a " + std::string(subject_noun(claim.kind));
    }
    pass->answered(result.outcome != providers::Outcome::not_sent,
                   credentials_refused ? result.rejection->http_status : 0, refusal);
    pass.reset();
    store::AttemptResult attempt;
    attempt.outcome = std::string(providers::to_string(result.outcome));
    if (result.call.http_status != 0) {
        attempt.http_status = result.call.http_status;
    }
    attempt.error_class = result.call.error_class;
    attempt.provider_reference = result.provider_reference;
    attempt.detail = result.call.detail;
    store::Settlement settlement = decide_settlement(result.outcome, claim.attempt_no,
                                                     m_options.backoff, jitter(), result.rejection);
    if (claim.kind != OperationKind::charge && settlement.to == PaymentState::failed) {
        // An operation's failure is kept with it (operations.failure_reason) and said in its
        // event.
        settlement.reason =
            "the provider declined the " + std::string(subject_noun(claim.kind)) +
            (result.call.error_class.empty() ? std::string()
                                             : " (" + result.call.error_class + ")");
    }
    ++m_counts.attempted;
    const bool settled = settle(claim, attempt, settlement);
    if (!settled) {
        ++m_counts.fenced_out; // a newer generation owns the payment; our observation is recorded
    } else {
        ++m_counts.settled_as[std::string(to_string(settlement.to))];
    }
    if (result.outcome == providers::Outcome::not_sent) {
        ++m_counts.not_sent;
    }
    if (result.outcome == providers::Outcome::not_sent ||
        result.outcome == providers::Outcome::unknown) {
        UnfinishedAttempt u;
        u.outcome = result.outcome;
        u.called = true;
        u.http_status = result.call.http_status;
        u.error_class = result.call.error_class;
        u.reason = !result.call.reason.empty() ? result.call.reason
                   : result.call.http_status != 0
                       ? "the provider answered HTTP " + std::to_string(result.call.http_status)
                       : result.call.error_class;
        u.detail = result.call.detail;
        report_unfinished(claim, std::move(u), settled, settlement.to);
    }
    if (credentials_refused) {
        // Our refusal, if the gate took it as the account's (a caller racing past an unproven
        // gate cannot: it is held by one at a time).
        for (const CredentialRefusal& r : m_gate->refusals()) {
            if (r.provider == claim.provider && r.payment_id == claim.payment_id) {
                m_counts.credentials_refused.push_back(r);
                if (m_options.on_credentials_refused) {
                    m_options.on_credentials_refused(r);
                }
            }
        }
        return;
    }
    if (result.outcome == providers::Outcome::rejected) {
        ++m_counts.rejected;
        if (m_options.on_rejected) {
            m_options.on_rejected(claim, result.rejection.value_or(providers::Rejection{}));
        }
    }
}

} // namespace payrecon::engine
