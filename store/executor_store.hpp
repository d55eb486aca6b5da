#pragma once
// Leases and fencing (DESIGN section 6): workers claim payments with FOR UPDATE SKIP LOCKED,
// a lease and generation + 1; every later write is conditioned on that generation, so a worker
// that was paused past its lease cannot overwrite the one that took over.

#include "core/payment_state.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace payrecon::store {

class Db;

// One claimed operation of a payment: its charge, or one of its operations (a refund).
struct ClaimedPayment {
    // What the claim moves (DESIGN section 16): the charge -- the payments row itself -- or one
    // of the payment's operations (a refund: the operations row `operation_row_id`). Every kind
    // is claimed, fenced, settled and expired alike; only the call differs.
    OperationKind kind = OperationKind::charge;
    std::string operation_row_id;                // a refund's ID; empty for the charge
    std::optional<std::string> charge_reference; // a refund: the charge's provider reference
    std::optional<std::string> refund_reason;    // a refund: why, when the merchant said
    // Authorisations (issue 32): whether the payment was made with capture "manual" (its charge
    // authorises only); a capture's `final`; the charge's operation ID; what it authorised and
    // what its captures that succeeded took before this claim.
    bool manual_capture = false;
    std::optional<bool> final;
    std::string payment_operation_id;
    long long authorized_minor = 0;
    long long captured_before_minor = 0;
    // The row the claim holds, fences and settles: the payment's ID for the charge, else the
    // operation's.
    const std::string& subject_id() const {
        return kind == OperationKind::charge ? payment_id : operation_row_id;
    }

    std::string tenant_id;
    std::string payment_id;
    long long generation = 0;       // the fencing token of this claim
    int attempt_no = 0;             // the payment_attempts row opened by this claim
    std::string operation_id;       // the operation's: the charge's, or the refund's own
    std::string merchant_reference; // the operation's (a refund's may be empty)
    long long amount_minor = 0;     // the operation's
    std::string currency;
    std::string provider;
    std::string payment_method; // the payment's
    std::optional<std::string> customer;
    std::optional<std::string> description;
    std::map<std::string, std::string> metadata;
    std::chrono::system_clock::time_point created_at{}; // when intake accepted the payment
};

// Claims up to `batch` charges and up to `batch` refunds of `providers` (the ones this worker can
// call) that are `pending`, or `retry_scheduled` and due, oldest first: state processing, lease to
// `worker` for `lease`, generation + 1, and an attempt row opened (outcome unknown until finished)
// -- all in one statement (one transaction). Rows other workers hold are skipped, never waited
// for. Charges come first, then refunds, each oldest first.
std::vector<ClaimedPayment> claim_payments(Db& db, const std::string& worker,
                                           std::chrono::milliseconds lease, int batch,
                                           const std::vector<std::string>& providers);

// Immediately before a provider call (DESIGN section 6): proves, by the database's clock, which of
// `claims` are still `worker`'s -- same generation, `processing`, leased to `worker`, lease not
// expired -- in one read-only statement (no write, so no commit to wait for). Returns the lease
// left on each claim still held, by subject_id(); a claim missing from the result is no longer this
// worker's and must not be sent.
std::map<std::string, std::chrono::milliseconds>
check_claims(Db& db, const std::string& worker, const std::vector<ClaimedPayment>& claims);

// The same proof, and the lease of each claim still held renewed to `lease` from now, in one
// statement: what the fence runs when the leases left are too short for the calls still to make
// (a long batch, slow calls). Returns the lease left on each claim still held, after renewal.
std::map<std::string, std::chrono::milliseconds>
renew_claims(Db& db, const std::string& worker, std::chrono::milliseconds lease,
             const std::vector<ClaimedPayment>& claims);

// What a worker observed for one attempt.
struct AttemptResult {
    std::string outcome; // providers::Outcome name
    std::optional<int> http_status;
    std::string error_class;
    std::optional<std::string> provider_reference;
    std::string detail; // redacted excerpt, at most 4096 bytes
};

struct Settlement {
    PaymentState to = PaymentState::unknown;           // from processing
    std::optional<std::chrono::milliseconds> retry_in; // with retry_scheduled
    std::optional<std::string> reason;                 // review or unknown reason, for operators
    std::optional<std::string>
        review_code; // with needs_review (request_rejected), and only with it
};

// Records the attempt (always: the observation is kept even when fenced out) and, if the payment
// is still `processing` at `claim.generation`, applies `settlement` with its outbox event, in one
// statement. Returns false if the worker was fenced out (another generation owns it now).
// Throws std::logic_error if the transition is not processing -> settlement.to, or retry_in or
// review_code does not go with settlement.to.
bool settle_attempt(Db& db, const ClaimedPayment& claim, const AttemptResult& result,
                    const Settlement& settlement);

// One settlement of settle_attempts: pointers into the caller's own values.
struct SettleRequest {
    const ClaimedPayment* claim = nullptr;
    const AttemptResult* result = nullptr;
    const Settlement* settlement = nullptr;
};
// settle_attempt for several charges at once (calls that ended together, issue 33), in one
// statement: each attempt recorded, each payment settled only at its own claim's generation, with
// its event. Returns, in `items`' order, whether each was settled (false: fenced out). Charges
// only, each payment at most once (std::logic_error otherwise: two operations of one payment
// would meet in one update of their payment's row); the same checks of each settlement as
// settle_attempt.
std::vector<bool> settle_attempts(Db& db, const std::vector<SettleRequest>& items);

// Payments left `processing` past their lease (a worker died mid-call) become `unknown` (never
// `pending`), generation + 1, with an outbox event and an audit row. Returns how many.
int expire_leases(Db& db, const std::string& actor);

} // namespace payrecon::store
