#pragma once
// `payrecon review requeue`: the payments a provider sent to review because it refused our
// credentials, sent again in one command once the credentials are fixed. A 401 or 403 means the
// provider executed nothing (core/credential_refusal), so the attempt record is the evidence an
// operator's `retry` otherwise confirms by hand; only payments whose latest attempt was refused so
// are requeued (core/resolution_policy's requeue_refusal), each fenced by the generation it was
// selected at and audited on its own (store::requeue_payment). Every other request_rejected
// payment of the provider is left for an operator, and counted.

#include "store/reconcile_store.hpp"

#include <optional>
#include <string>
#include <vector>

namespace payrecon {

namespace store {
class Db;
}

struct RequeueRequest {
    std::string provider;                 // the configured provider name
    std::optional<std::string> tenant_id; // only this tenant's payments
    std::string note;                     // what the operator fixed: recorded per payment
    std::string operator_name;
    bool dry_run = false; // select and report, write nothing (no note needed)
};

struct RequeuedPayment {
    enum class Status {
        requeued,      // now retry_scheduled, due at once
        would_requeue, // dry run
        changed,       // changed since it was selected: nothing written (another took it)
        not_eligible,  // re-read under its lock, the rule no longer allows it: nothing written
    };
    store::RejectedPayment payment; // as selected
    Status status = Status::would_requeue;
    std::string state;        // now
    long long generation = 0; // now
    std::string why;          // with not_eligible
};

struct RequeueResult {
    std::vector<RequeuedPayment> payments; // the credential refusals, in the order handled
    // The provider's other payments in review as request_rejected (refused for another reason):
    // left for an operator's own decision.
    std::vector<store::RejectedPayment> left;
    long long requeued() const;
    long long changed() const; // changed meanwhile or no longer eligible
};

// True if `request` lacks the note it needs: every requeue but a dry run records what the operator
// fixed. Reads nothing, so that the caller can refuse before it opens the database;
// requeue_credential_refusals() refuses such a request too.
bool note_missing(const RequeueRequest& request);

// Selects the provider's payments in review as request_rejected and requeues those whose latest
// attempt was a refusal of our credentials (a dry run only reports them). Throws UsageError if
// the provider name is empty, or (not a dry run) the note breaks the resolution rules; throws
// DatabaseUnavailable if the database went away (what was requeued stays requeued).
RequeueResult requeue_credential_refusals(store::Db& db, const RequeueRequest& request);

} // namespace payrecon
