#pragma once
// What the provider was seen to hold for a payment, as evidence for an operator's resolution
// (DESIGN section 8), and the pure rules over it: whether a reference given to resolve a payment
// as succeeded agrees with that evidence, which decisions `review show` offers first, and what a
// resolution as succeeded needs before it is written.
//
// Evidence is the provider's own word about our operation ID: a record in its books (a complete
// statement run), a verified webhook, an answer to one of our status queries. A charge's record
// only moves one way -- declined, then perhaps charged (a PaymentIntent confirmed again), then
// perhaps refunded -- so of several records of one reference the furthest along says where it
// stands.

#include "core/resolution_policy.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon {

enum class EvidenceSource { statement, webhook, lookup };
// "statement", "webhook", "lookup".
std::string_view to_string(EvidenceSource source);

// What a record says of the money, in the order a charge moves through them.
enum class SeenOutcome {
    unsettled, // still processing, waiting for the customer, or a state nobody knows: says nothing
    declined,  // no charge was made under it
    charged,   // it charged
    refunded,  // it charged, and the money went back
};
std::string_view to_string(SeenOutcome outcome);

// What a stored state name says of the money, by where it was stored: a statement record's or
// finding's RemoteStatus (succeeded, refunded, declined, pending, other), a webhook event's outcome
// (succeeded, failed, pending, other), a status query's RemoteState (succeeded, declined, pending,
// requires_action, unrecognised). Any other name is unsettled: it says nothing.
SeenOutcome seen_outcome(EvidenceSource source, std::string_view state);

struct SeenRecord {
    EvidenceSource source = EvidenceSource::statement;
    std::string seen_in; // where, for the operator: "the statement of 2026-12-01 .. 2026-12-02"
    std::optional<std::string> reference; // the provider's ID of the charge, where it gave one
    SeenOutcome outcome = SeenOutcome::unsettled;
    std::optional<long long> amount_minor; // ISO 4217 minor units, where it gave one
    std::optional<std::string> currency;   // any case, with amount_minor
};

// What the evidence says of a reference an operator gives to resolve a payment as succeeded.
struct EvidenceCheck {
    enum class Verdict {
        silent,          // nothing seen says yes or no: the provider itself must be asked
        confirmed,       // a record of the reference charged the amount expected, in our currency
        declined,        // the reference's records say it declined and never charged
        refunded,        // the reference charged and was refunded: it no longer stands
        other_amount,    // the reference charged another amount in our currency
        other_currency,  // the reference charged in another currency
        other_reference, // nothing of the reference was seen; a charge under another one was
    };
    Verdict verdict = Verdict::silent;
    // The record that decided the verdict (every verdict but silent).
    std::optional<SeenRecord> record;
};
// "declined", "other_amount", ...
std::string_view to_string(EvidenceCheck::Verdict verdict);
// Whether the verdict refuses the reference: declined, refunded, another amount, currency or
// reference.
bool contradicts(EvidenceCheck::Verdict verdict);

// Checks `reference` against `seen`: the records of that reference decide by the furthest along
// (refunded, then charged, then declined; unsettled ones say nothing), a charge by its amount
// against `expected_minor` in `currency` (a charge seen without an amount neither confirms nor
// contradicts). With no record of the reference, a standing charge under another reference is
// other_reference (the first such in `seen`); a decline under another one says nothing of it.
EvidenceCheck check_reference_against(const std::vector<SeenRecord>& seen,
                                      std::string_view reference, long long expected_minor,
                                      std::string_view currency);

// The first reference of `seen` whose records stand charged (not declined, not refunded), with its
// first charged record; nullptr if none does. A payment with one is not sent again by hand: the
// provider holds its charge.
const SeenRecord* standing_charge(const std::vector<SeenRecord>& seen);

// A decision `review show` offers, with what the evidence fills in.
struct ResolutionSuggestion {
    OperatorDecision decision = OperatorDecision::failed;
    // With succeeded: the reference to give; nullopt where the operator must find it.
    std::optional<std::string> reference;
    // With succeeded: what the provider charged, where the evidence saw another amount in our
    // currency (minor units).
    std::optional<long long> charged_minor;
};

// The decisions to offer for a payment of `amount_minor` in `currency`, in order: `allowed` (its
// review code's, in the code's order) as the evidence reorders it.
//   - A standing charge seen in our currency (its reference known): succeeded with that reference
//     first (and the amount it charged, where that differs from ours), then failed; never retry
//     (there is a charge to find).
//   - A charge seen only in another currency: failed; no retry, and no succeeded (it would be
//     refused).
//   - Otherwise, a decline (or a refund) seen: failed first, then the rest of `allowed`,
//     succeeded last (a charge could stand under another reference: the operator finds it).
//   - Nothing seen: `allowed` as it is.
// Where no charge was seen, succeeded carries `own_reference` (the payment's own, from an
// attempt's answer) unless the evidence contradicts it, else no reference.
std::vector<ResolutionSuggestion>
suggest_resolutions(const std::vector<OperatorDecision>& allowed,
                    const std::vector<SeenRecord>& seen, long long amount_minor,
                    std::string_view currency, const std::optional<std::string>& own_reference);

// What the provider said when asked about a reference just now (engine's Reconciler).
struct ReferenceCheck {
    enum class Verdict {
        confirmed,       // the provider's payment for our operation ID, charged, our amount
        not_checked,     // the provider cannot be asked (no lookup)
        lookup_failed,   // no trustworthy answer now
        absent,          // the provider has no payment for our operation ID
        other_reference, // it has one (or more), under other references
        mismatch,        // that payment's amount or currency differs from ours (or the one given)
        not_charged, // that payment did not charge (declined, pending, waiting for the customer)
    };
    Verdict verdict = Verdict::not_checked;
    std::string detail;                  // for the operator: what the provider answered
    std::vector<std::string> references; // the references the provider has for our operation ID
    // With mismatch: what the provider's payment of the reference charged.
    std::optional<long long> remote_amount_minor;
    std::string remote_currency;
};

// What a resolution as succeeded with a reference needs next, from the evidence's verdict,
// whether the provider can be asked now (a configuration names it), and whether the operator gave
// their word alone (`unverified`).
enum class ReferenceGate {
    refuse_contradicted, // the evidence contradicts it: refused, whatever the operator says
    accept_evidence,     // the evidence confirms it
    accept_unverified,   // nothing checked it: the operator's word, said so in the audit note
    ask_provider,        // the evidence is silent: the provider is asked (ReferenceCheck)
    refuse_unchecked,    // nothing can check it and the operator did not take it on their word
};
ReferenceGate gate_reference(EvidenceCheck::Verdict evidence, bool can_ask_provider,
                             bool unverified);

} // namespace payrecon
