#pragma once
// The reconciler (DESIGN section 7): for each `unknown` payment whose settle delay has passed, ask
// its provider, decide with the pure core/reconcile_policy, and write the decision fenced by
// generation. Any number of reconcilers may run at once: claims skip what another one holds.

#include "core/reconcile_policy.hpp"
#include "core/resolution_evidence.hpp"
#include "engine/credential_gate.hpp"
#include "engine/executor.hpp"
#include "providers/provider.hpp"
#include "store/reconcile_store.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace payrecon::store {
class Db;
}

namespace payrecon::engine {

struct ReconcilerOptions {
    std::string actor = "reconciler"; // recorded on every lookup and audit row
    int limit = 100000;               // payments handled per run at most
    int batch = 16;                   // payments claimed per transaction
    bool dry_run = false;             // ask and decide, write nothing
    std::chrono::seconds hold{300};   // a claimed payment is left alone this long by others
    ReconcilePolicy policy;
    // What this process knows of each provider account's credentials (nightly shares it with its
    // send pass). Null: the reconciler keeps its own.
    CredentialGate* credentials = nullptr;
};

// One payment's reconciliation, for progress lines and the run summary.
struct ReconcileOutcome {
    std::string tenant_id;
    std::string payment_id;
    OperationKind kind = OperationKind::charge; // what was reconciled: the charge, or a refund
    std::string refund_id;                      // with a refund
    // The operation's own (a refund's operation ID, merchant reference and amount are its own).
    std::string operation_id;
    std::string merchant_reference;
    std::string provider;
    long long amount_minor = 0;
    std::string currency;
    // What the lookup found (when it found the payment): the provider's record of it.
    std::optional<providers::RemotePayment> remote;
    PaymentState from = PaymentState::unknown;
    PaymentState to = PaymentState::unknown; // what the decision makes of it (dry run: would make)
    LookupStatus lookup = LookupStatus::not_asked;
    std::string lookup_detail; // error class or remote status, for operators
    ReconcileDecision decision;
    bool applied = false; // false: dry run, or fenced out
    bool fenced_out = false;

    // A refund the provider reversed after it had succeeded, written so in this run.
    bool reversed() const {
        return applied && kind != OperationKind::charge && from == PaymentState::succeeded &&
               to == PaymentState::failed;
    }

    // The one rule for "sent to review": the decision puts in review a payment that was not
    // (in a dry run: would); a fenced-out decision puts nothing anywhere.
    bool newly_in_review() const {
        return !fenced_out && to == PaymentState::needs_review &&
               from != PaymentState::needs_review;
    }
};

// Maps what the provider answered to the policy's input for `candidate`.
ReconcileInput reconcile_input(const store::ReconcileCandidate& candidate,
                               const providers::Capabilities& caps,
                               std::chrono::seconds settle_delay,
                               const providers::LookupResult* lookup);

// Applies the unapplied verified terminal webhook events of `providers`' unknown payments (at most
// `limit`; store::apply_webhook_evidence, decided by core's decide_from_event) and returns what
// each did, as the reconciler reports its decisions (lookup not_asked, the event in the detail).
// Throws DatabaseUnavailable.
std::vector<ReconcileOutcome> apply_webhook_evidence(store::Db& db, const std::string& actor,
                                                     const std::vector<std::string>& providers,
                                                     int limit);

class Reconciler {
public:
    // `providers` are the providers this reconciler may ask, by configured name. A provider's
    // settle delay is its capabilities' lookup_staleness.
    Reconciler(store::Db& db, std::vector<providers::Provider*> providers,
               ReconcilerOptions options);

    // Handles due unknown payments of its providers until none is due or `limit` is reached,
    // calling `on_outcome` after each. A provider whose lookup refuses our credentials (401/403)
    // is asked nothing more in this run: that lookup is recorded as failed, its other due payments
    // are left for the next run (claimed ones after `hold`), and credentials_refused() says so.
    // Throws DatabaseUnavailable if the database went away (what was written stays written; a
    // claimed payment is picked up again after `hold`).
    std::vector<ReconcileOutcome>
    run(const std::function<void(const ReconcileOutcome&)>& on_outcome = {});

    // An operator's recheck of one payment (unknown or needs_review), now, even inside the settle
    // delay (where "not found" still proves nothing). From needs_review only an answer the
    // provider gives (succeeded, declined) moves it; anything else keeps it in review with the
    // new reason. Returns nullopt if there is no such payment; throws Refused if its state is not
    // unknown or needs_review, or its provider is not one of this reconciler's.
    // `expected_generation`: the generation the payment was selected at; a payment that changed
    // since is asked nothing and written nothing (the outcome is fenced_out, from and to its
    // state now).
    // Kind refund: `subject_id` is a refund's ID, rechecked the same way with the provider's
    // refund lookup.
    std::optional<ReconcileOutcome>
    recheck(const std::string& tenant_id, const std::string& subject_id,
            std::optional<long long> expected_generation = std::nullopt,
            OperationKind kind = OperationKind::charge);

    // `review recheck --provider P --code C`: every payment and refund of `selection.provider` in
    // review with `selection.code`, longest waiting first, each rechecked as recheck() does --
    // fenced by the generation it was selected at, decided and audited on its own -- calling
    // `on_each` after each. A dry run selects and asks nothing. Once the provider refuses our
    // credentials the rest are asked nothing (credentials_refused() says so). Throws UsageError if
    // asking the provider again cannot settle a payment in review with that code
    // (core/review_guidance: it cannot be asked, or an operator must act first), Refused if the
    // provider is not one of this reconciler's, DatabaseUnavailable (what was rechecked stays so).
    struct InReview {
        std::string provider;
        ReviewCode code = ReviewCode::lookup_failing;
        std::optional<std::string> tenant_id;
        int limit = 1000;
        bool dry_run = false;
    };
    struct Rechecked {
        enum class Status {
            rechecked,     // asked and decided: `outcome`
            would_recheck, // dry run
            changed,       // changed since it was selected (or while asked): nothing written
            not_asked,     // the provider refused our credentials before its turn
        };
        store::ReviewItem payment; // as selected
        Status status = Status::would_recheck;
        std::optional<ReconcileOutcome> outcome;
        std::string state;        // now
        long long generation = 0; // now
    };
    struct InReviewResult {
        std::vector<Rechecked> payments;
        bool more = false; // more payments matched than `limit`
    };
    InReviewResult recheck_in_review(const InReview& selection,
                                     const std::function<void(const Rechecked&)>& on_each = {});

    // Asks the provider about the payment now and compares what it holds for our operation ID
    // with `reference` (amount, currency, charged): the amount is `charged_minor` where the
    // operator says the provider charged another amount than ours, else the payment's. Writes
    // nothing. Returns nullopt if there is no such payment; throws Refused if its provider is not
    // one of this reconciler's. Kind refund: `subject_id` is a refund's ID, asked about with the
    // provider's refund lookup and compared with the refund's amount (`charged_minor` unused);
    // confirmed means the provider refunded it under `reference`.
    std::optional<ReferenceCheck> check_reference(const std::string& tenant_id,
                                                  const std::string& subject_id,
                                                  const std::string& reference,
                                                  std::optional<long long> charged_minor = {},
                                                  OperationKind kind = OperationKind::charge);

    // The provider accounts whose lookups refused our credentials so far.
    std::vector<CredentialRefusal> credentials_refused() const;

private:
    // Applies the unapplied terminal webhook events of unknown payments (store/webhook_store).
    std::vector<ReconcileOutcome> apply_evidence();
    // Late reversals of refunds (store::reversal_candidates), checked with the provider where it
    // can find a refund: each written (to failed), found contradicted, or left for the next run.
    std::vector<ReconcileOutcome> apply_reversals(const std::vector<std::string>& providers);
    ReconcileOutcome handle(const store::ReconcileCandidate& candidate, bool operator_recheck);
    providers::Provider* provider_named(const std::string& name) const;

    store::Db& m_db;
    std::vector<providers::Provider*> m_providers;
    ReconcilerOptions m_options;
    std::unique_ptr<CredentialGate> m_own_gate; // when the options share none
    CredentialGate* m_gate;
};

} // namespace payrecon::engine
