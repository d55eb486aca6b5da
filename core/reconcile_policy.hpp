#pragma once
// The reconciler's policy (DESIGN section 7) as one pure function: given what we know of an
// `unknown` payment, what its provider can do, and what a status query found, decide what happens
// to it. No I/O: the engine asks the provider and the store writes the decision around it.
//
// The rules, in order:
//   1. The provider cannot look the operation up: if its last attempt was accepted (pending, with
//      the provider's reference: Adyen's refund `received`) and the provider has a notification
//      window (notification_wait > 0), its notification is awaited -> check later, when the window
//      closes; after it -> review (notification_missing). Otherwise -> review (no_lookup). A
//      verified notification settles the operation before this policy is asked (decide_from_event).
//   2. Nobody asked the provider (still inside the settle delay) -> check later.
//   3. Found: more than one payment for our operation ID  -> review (remote_duplicate);
//      its amount or currency differs from ours           -> review (remote_mismatch);
//      succeeded -> succeeded; declined -> failed; needs the customer -> review (requires_action);
//      a state the adapter does not recognise             -> review (remote_unrecognised);
//      still processing -> check later, until the schedule is exhausted -> review.
//   4. The query failed -> check later, until it failed max_lookup_failures times in a row
//      -> review (lookup_failing). A failed query never reads as absence.
//   5. Not found: inside the settle delay it proves nothing -> check later. After it, a re-send
//   with
//      the same operation ID only if the provider honours idempotency keys (else no_idempotency),
//      the first attempt is younger than the key retention minus a margin (else outside_key_window)
//      and the reconciler has not already sent it again max_resends times (else
//      schedule_exhausted).
// Nothing is ever failed automatically and nothing is dropped. decide_reconciliation never answers
// request_rejected: that code is the executor's (engine/executor decide_settlement).

#include "core/webhook.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon {

// Why a payment sits in the review queue. Stable names: stored, printed, and documented one runbook
// entry each in docs/operations.md.
enum class ReviewCode {
    no_lookup,          // the provider cannot be asked about a payment (Adyen)
    lookup_failing,     // status queries kept failing
    outside_key_window, // not found, but a re-send could charge again: the provider forgot the key
    no_idempotency,     // not found, but the provider does not honour idempotency keys
    schedule_exhausted, // still processing, or sent too often, after every check the schedule
                        // allows
    remote_mismatch,    // the provider's payment differs from ours in amount or currency
    remote_duplicate,   // the provider holds more than one payment for our operation ID
    requires_action, // the provider waits for the customer (3-D Secure): cannot finish off-session
    remote_unrecognised, // the provider answered a state payrecon does not know
    // Not the policy's: the executor's, when the provider refused our request before executing it
    // (providers::Outcome::rejected). Nothing was charged; an integration or configuration fault.
    request_rejected,
    // The provider accepted the operation (an Adyen refund `received`) and cannot be asked about
    // it, and its notification did not come within the provider's notification window.
    notification_missing,
};

inline constexpr ReviewCode k_all_review_codes[] = {
    ReviewCode::no_lookup,        ReviewCode::lookup_failing,      ReviewCode::outside_key_window,
    ReviewCode::no_idempotency,   ReviewCode::schedule_exhausted,  ReviewCode::remote_mismatch,
    ReviewCode::remote_duplicate, ReviewCode::requires_action,     ReviewCode::remote_unrecognised,
    ReviewCode::request_rejected, ReviewCode::notification_missing};

std::string_view to_string(ReviewCode code);
// Returns nullopt if `name` is not one of the names to_string() gives.
std::optional<ReviewCode> parse_review_code(std::string_view name);

// What a status query came to.
enum class LookupStatus { found, not_found, failed, not_asked };
std::string_view to_string(LookupStatus status);

// The provider's state of a payment it found, in payrecon's words.
enum class RemoteState { succeeded, declined, pending, requires_action, unrecognised };
std::string_view to_string(RemoteState state);

struct ReconcileInput {
    // What the provider can do.
    bool can_lookup = false;
    bool honours_idempotency_keys = false;
    std::chrono::seconds key_retention{0};
    std::chrono::seconds settle_delay{0};
    // Without a lookup: how long an accepted operation waits for the provider's notification.
    std::chrono::seconds notification_wait{0};

    // The payment, as we have it.
    long long amount_minor = 0;
    std::string currency; // ISO 4217, upper case
    // Whether what the provider holds must be of `amount_minor`. Not for a void: it releases the
    // authorisation, whatever is left of it when it executes -- its amount is only what was
    // capturable when it was asked, and captures failing or settling since change that.
    bool amount_decides = true;
    std::chrono::seconds since_first_attempt{0};
    std::chrono::seconds since_last_attempt{0};
    int resends = 0;                // times the reconciler already sent it again
    int lookups_before = 0;         // status queries since it became unknown
    int lookup_failures_before = 0; // of those, failed in a row just before this one
    // Its last attempt was accepted by the provider: answered pending with the provider's
    // reference (an Adyen refund `received`), so a notification of its outcome is due.
    bool accepted = false;

    // What the status query found.
    LookupStatus lookup = LookupStatus::not_asked;
    RemoteState remote_state = RemoteState::unrecognised; // with `found`
    long long remote_amount_minor = 0;                    // with `found`
    std::string remote_currency;                          // with `found`, any case
    std::optional<std::string> remote_reference;          // with `found`
    int remote_duplicates = 0;                            // further matches beyond the first
    // Their references, where the provider gave them: the review reason names every one.
    std::vector<std::string> remote_duplicate_references;
};

struct ReconcilePolicy {
    int max_lookup_failures = 3;                // failed queries in a row before review
    int max_checks = 12;                        // queries finding "still processing" before review
    int max_resends = 3;                        // re-sends after a confirmed absence before review
    std::chrono::seconds recheck_base{60};      // first "check later" wait; doubles
    std::chrono::seconds recheck_cap{6 * 3600}; // longest "check later" wait
};

// The margin kept inside a provider's key retention: min(1 h, retention / 4). A re-send is allowed
// only while the first attempt is younger than retention - margin.
std::chrono::seconds key_window_margin(std::chrono::seconds retention);

enum class ReconcileAction {
    adopt_succeeded, // the provider charged: succeeded, with its reference
    adopt_failed,    // the provider declined: failed
    check_later,     // stays unknown; look again after `check_in`
    resend,          // confirmed absent inside the key window: retry_scheduled, same operation ID
    review,          // needs_review with `review` and `reason`
};
std::string_view to_string(ReconcileAction action);

struct ReconcileDecision {
    ReconcileAction action = ReconcileAction::review;
    std::optional<ReviewCode> review;              // with `review`
    std::string reason;                            // one sentence for the operator, always set
    std::chrono::seconds check_in{0};              // with `check_later`, at least 1 s
    std::optional<std::string> provider_reference; // with adopt_*, when the provider gave one
};

ReconcileDecision decide_reconciliation(const ReconcileInput& input, const ReconcilePolicy& policy);

// What a verified terminal webhook event (core/webhook.hpp) decides for an `unknown` payment of
// `amount_minor` in `currency` (what the provider charged, if an operator recorded another): the
// same currency and amount are positive evidence -- adopt_succeeded (with the event's reference)
// or adopt_failed, no lookup and no settle delay needed; another amount or currency is review
// remote_mismatch, the event named in the reason. A void's amount decides nothing (what the
// provider released is what was left when it executed); its currency does. Requires event.outcome
// succeeded or failed.
ReconcileDecision decide_from_event(long long amount_minor, std::string_view currency,
                                    const WebhookEvent& event);

} // namespace payrecon
