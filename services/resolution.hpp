#pragma once
// An operator's decision on one payment (DESIGN section 8), from the request to the fenced write:
// core's rules (resolution_policy), the amount charged read in the payment's currency, a reference
// given to resolve it as succeeded checked against what the provider was seen to hold
// (core/resolution_evidence) and, where that evidence is silent, with the provider itself, then
// store::resolve_payment. What happened comes back as data; the caller words it (the CLI in its
// own flags). And the other way: the decisions `review show` offers for a payment, ordered by the
// same evidence, so that what it offers is what resolve takes.

#include "core/resolution_evidence.hpp"
#include "core/resolution_policy.hpp"
#include "store/inspect_store.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace payrecon::store {
class Db;
}

namespace payrecon {

// Asks the payment's provider now what it holds for the payment's operation ID against
// `reference`, at `charged_minor` where given (else the payment's amount) -- or, for an operation
// of another `kind` (a refund, capture or void: `subject_id` its row ID, else the payment's), for
// that operation's ID at its amount. The caller supplies it, holding the providers (this layer
// reaches no network).
using AskProvider = std::function<ReferenceCheck(
    const store::PaymentRef& payment, OperationKind kind, const std::string& subject_id,
    const std::string& reference, std::optional<long long> charged_minor)>;

struct ResolveRequest {
    // A payment ID or operation ID, or a refund's, capture's or void's ID or operation ID: those
    // are decided by the same rules (succeeded: the provider refunded, captured or voided it under
    // the reference; failed: it did not, and what it held is free again; retry: the provider
    // holds nothing under its operation ID, send it again), the reference checked against its
    // own evidence and its kind's lookup.
    std::string id;
    OperatorDecision decision = OperatorDecision::failed;
    long long generation = -1; // as the operator was shown it
    std::string note;
    std::optional<std::string> provider_reference;
    std::optional<std::string> charged_amount; // major units of the payment's currency, as typed
    bool confirmed_no_charge = false;
    bool unverified = false; // take the reference on the operator's word where nothing checks it
    std::string operator_name;
    // Make every check (the evidence, the provider, the store's under the row lock) and write
    // nothing: `would_apply` instead of `applied`.
    bool dry_run = false;
};

// How a reference taken for a payment decided succeeded was checked.
enum class ReferenceChecked {
    not_needed, // no succeeded decision
    evidence,   // what the provider was seen to hold confirms it
    provider,   // the provider, asked just now, confirms it
    unverified, // nothing did: the operator's word, said so in the audit note
};

struct ResolveOutcome {
    enum class Status {
        applied,
        would_apply,      // a dry run that would be applied: `state`, `generation` as it would give
        invalid,          // the request breaks one of core's rules: `problem`; nothing was read
        bad_amount,       // `charged_amount` is not an amount in the payment's `currency`
        not_found,        // no payment has the ID
        changed,          // the payment changed since it was shown: `state`, `generation`
        not_resolvable,   // its state cannot be decided so: `state`
        maybe_sent,       // a cancel: an attempt of it may have reached the provider
        reference_taken,  // another payment holds the reference: `holder`
        contradicted,     // what the provider was seen to hold contradicts the reference
        unchecked,        // nothing could check the reference, and it was not unverified
        provider_refused, // the provider, asked just now, does not confirm it: `provider`
        charge_seen,      // a retry of a payment the provider was seen to hold a charge for:
                          // `evidence.record` is that charge's record (of a refund: the refund's)
        not_for_refund,   // `charged_amount` given for a refund, capture or void: an operator
                          // records what a charge took, nothing else
    };
    Status status = Status::not_found;
    store::PaymentRef ref; // once found (of a refund, capture or void: its payment)
    // What the ID named: the charge (the payment), or a refund, capture or void of it, whose own
    // row ID `refund_id` then is.
    OperationKind kind = OperationKind::charge;
    std::optional<std::string> refund_id;
    std::string state;        // the payment's now (after the write, when applied)
    long long generation = 0; // the payment's now
    long long amount_minor = 0;
    std::string currency;
    std::optional<ResolutionProblem> problem; // invalid
    // The amount charged the request gave, read in the payment's currency (from bad_amount's
    // check on): what a refusal compares with the provider's, so that the caller parses nothing.
    std::optional<long long> charged_minor;
    std::optional<std::string> amount_example;     // bad_amount: the payment's amount, as written
    std::optional<store::AuditRecord> last_change; // changed: the newest audit row about it
    std::string holder;                            // reference_taken
    EvidenceCheck evidence;                        // contradicted (and applied by evidence)
    ReferenceCheck provider;                       // provider_refused, unchecked, applied by it
    bool provider_asked = false;                   // unchecked: false when no provider could be
    ReferenceChecked checked = ReferenceChecked::not_needed; // applied, would_apply
};

// Decides `request` as described above. `ask_provider` may be empty (no provider configuration):
// a reference the evidence does not settle is then unchecked unless unverified. The audit note
// says how the reference was checked ("[checked against ...]", "[reference not checked with the
// provider: unverified]"). Throws DatabaseUnavailable, and whatever `ask_provider` throws.
ResolveOutcome resolve(store::Db& db, const ResolveRequest& request,
                       const AskProvider& ask_provider);

// What `review show` offers for a payment in review: its review code's decisions as the evidence
// orders them (core's suggest_resolutions), and the evidence itself. A payment out of review, or
// gone, gets none.
struct ReviewAdvice {
    std::vector<ResolutionSuggestion> suggestions;
    std::vector<SeenRecord> seen;
};
// With `refund_id`: that refund, capture or void of the payment, by its own evidence.
ReviewAdvice review_advice(store::Db& db, const store::PaymentRef& ref,
                           const std::optional<std::string>& review_code,
                           const std::optional<std::string>& refund_id = std::nullopt);

} // namespace payrecon
