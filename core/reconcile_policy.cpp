#include "core/reconcile_policy.hpp"

#include "core/backoff.hpp"
#include "core/money.hpp"

#include <algorithm>
#include <cctype>

namespace payrecon {
namespace {

std::chrono::seconds backoff(int checks_before, const ReconcilePolicy& policy) {
    const Backoff b{std::max(policy.recheck_base, std::chrono::seconds(1)),
                    std::max(policy.recheck_cap, std::chrono::seconds(1))};
    return std::chrono::duration_cast<std::chrono::seconds>(b.delay(checks_before));
}

ReconcileDecision review(ReviewCode code, std::string reason) {
    ReconcileDecision d;
    d.action = ReconcileAction::review;
    d.review = code;
    d.reason = std::move(reason);
    return d;
}

ReconcileDecision check_later(std::chrono::seconds in, std::string reason) {
    ReconcileDecision d;
    d.action = ReconcileAction::check_later;
    d.check_in = std::max(in, std::chrono::seconds(1));
    d.reason = std::move(reason);
    return d;
}

} // namespace

std::string_view to_string(ReviewCode code) {
    switch (code) {
    case ReviewCode::no_lookup:
        return "no_lookup";
    case ReviewCode::lookup_failing:
        return "lookup_failing";
    case ReviewCode::outside_key_window:
        return "outside_key_window";
    case ReviewCode::no_idempotency:
        return "no_idempotency";
    case ReviewCode::schedule_exhausted:
        return "schedule_exhausted";
    case ReviewCode::remote_mismatch:
        return "remote_mismatch";
    case ReviewCode::remote_duplicate:
        return "remote_duplicate";
    case ReviewCode::requires_action:
        return "requires_action";
    case ReviewCode::remote_unrecognised:
        return "remote_unrecognised";
    case ReviewCode::request_rejected:
        return "request_rejected";
    case ReviewCode::notification_missing:
        return "notification_missing";
    }
    return "remote_unrecognised";
}

std::optional<ReviewCode> parse_review_code(std::string_view name) {
    for (const ReviewCode c : k_all_review_codes) {
        if (to_string(c) == name) {
            return c;
        }
    }
    return std::nullopt;
}

std::string_view to_string(LookupStatus status) {
    switch (status) {
    case LookupStatus::found:
        return "found";
    case LookupStatus::not_found:
        return "not_found";
    case LookupStatus::failed:
        return "failed";
    case LookupStatus::not_asked:
        return "not_asked";
    }
    return "failed";
}

std::string_view to_string(RemoteState state) {
    switch (state) {
    case RemoteState::succeeded:
        return "succeeded";
    case RemoteState::declined:
        return "declined";
    case RemoteState::pending:
        return "pending";
    case RemoteState::requires_action:
        return "requires_action";
    case RemoteState::unrecognised:
        return "unrecognised";
    }
    return "unrecognised";
}

std::string_view to_string(ReconcileAction action) {
    switch (action) {
    case ReconcileAction::adopt_succeeded:
        return "adopt_succeeded";
    case ReconcileAction::adopt_failed:
        return "adopt_failed";
    case ReconcileAction::check_later:
        return "check_later";
    case ReconcileAction::resend:
        return "resend";
    case ReconcileAction::review:
        return "review";
    }
    return "review";
}

std::chrono::seconds key_window_margin(std::chrono::seconds retention) {
    return std::min(std::chrono::seconds(3600), retention / 4);
}

ReconcileDecision decide_reconciliation(const ReconcileInput& in, const ReconcilePolicy& policy) {
    if (!in.can_lookup) {
        // Without a notification window (every kind but Adyen by default) nothing is awaited.
        if (!in.accepted || in.notification_wait <= std::chrono::seconds(0)) {
            return review(ReviewCode::no_lookup,
                          "the provider cannot be asked whether it charged; check its dashboard");
        }
        if (in.since_last_attempt < in.notification_wait) {
            return check_later(in.notification_wait - in.since_last_attempt,
                               "the provider accepted it and cannot be asked about it: waiting "
                               "for its notification until the notification window closes");
        }
        return review(ReviewCode::notification_missing,
                      "the provider accepted it, but no notification of its outcome came in " +
                          std::to_string(in.notification_wait.count()) +
                          " s; it cannot be asked: check its dashboard");
    }
    const std::chrono::seconds settle_left = in.settle_delay - in.since_last_attempt;
    switch (in.lookup) {
    case LookupStatus::not_asked:
        return check_later(settle_left > std::chrono::seconds(0) ? settle_left
                                                                 : policy.recheck_base,
                           "waiting for the provider's settle delay before asking it");
    case LookupStatus::failed:
        if (in.lookup_failures_before + 1 >= policy.max_lookup_failures) {
            return review(ReviewCode::lookup_failing,
                          "the provider's status query failed " +
                              std::to_string(in.lookup_failures_before + 1) +
                              " times in a row; a failure never counts as absence");
        }
        return check_later(backoff(in.lookup_failures_before, policy),
                           "the provider's status query failed; asking again later");
    case LookupStatus::found: {
        if (in.remote_duplicates > 0) {
            std::string references = in.remote_reference.value_or("");
            for (const auto& r : in.remote_duplicate_references) {
                references += (references.empty() ? "" : ", ") + r;
            }
            return review(ReviewCode::remote_duplicate,
                          "the provider holds " + std::to_string(in.remote_duplicates + 1) +
                              " payments for this operation ID" +
                              (references.empty() ? "" : ": " + references));
        }
        if ((in.amount_decides && in.remote_amount_minor != in.amount_minor) ||
            !same_currency(in.remote_currency, in.currency)) {
            return review(ReviewCode::remote_mismatch,
                          "the provider's payment is " +
                              describe_money(in.remote_amount_minor, in.remote_currency) +
                              ", ours is " + describe_money(in.amount_minor, in.currency));
        }
        ReconcileDecision d;
        d.provider_reference = in.remote_reference;
        switch (in.remote_state) {
        case RemoteState::succeeded:
            d.action = ReconcileAction::adopt_succeeded;
            d.reason = "the provider has the payment as succeeded";
            return d;
        case RemoteState::declined:
            d.action = ReconcileAction::adopt_failed;
            d.reason = "the provider has the payment as declined; no charge";
            return d;
        case RemoteState::requires_action:
            return review(ReviewCode::requires_action,
                          "the provider waits for the customer (e.g. 3-D Secure); it cannot finish "
                          "off-session");
        case RemoteState::unrecognised:
            return review(ReviewCode::remote_unrecognised,
                          "the provider answered a state payrecon does not recognise");
        case RemoteState::pending:
            break;
        }
        if (in.lookups_before + 1 >= policy.max_checks) {
            return review(ReviewCode::schedule_exhausted,
                          "the provider still has the payment in progress after " +
                              std::to_string(in.lookups_before + 1) + " checks");
        }
        return check_later(backoff(in.lookups_before, policy),
                           "the provider is still processing the payment; asking again later");
    }
    case LookupStatus::not_found:
        break;
    }
    if (settle_left > std::chrono::seconds(0)) {
        return check_later(settle_left, "not found yet, but inside the provider's settle delay: "
                                        "that proves nothing; asking again after it");
    }
    if (!in.honours_idempotency_keys) {
        return review(ReviewCode::no_idempotency,
                      "the provider has no such payment, but it does not honour idempotency keys: "
                      "a re-send could charge twice if the payment surfaces late");
    }
    if (in.since_first_attempt >= in.key_retention - key_window_margin(in.key_retention)) {
        return review(
            ReviewCode::outside_key_window,
            "the provider has no such payment, but the first attempt is older than its "
            "idempotency key window: a re-send would not be recognised as the same payment");
    }
    if (in.resends >= policy.max_resends) {
        return review(ReviewCode::schedule_exhausted,
                      "the provider confirmed the payment absent after " +
                          std::to_string(in.resends) +
                          " re-send(s) already: something keeps losing it");
    }
    ReconcileDecision d;
    d.action = ReconcileAction::resend;
    d.reason = "confirmed absent inside the provider's key window: scheduled for a re-send with "
               "the same operation ID; a worker sends it";
    return d;
}

} // namespace payrecon

namespace payrecon {

ReconcileDecision decide_from_event(long long amount_minor, std::string_view currency,
                                    const WebhookEvent& event) {
    ReconcileDecision d;
    const std::string named = "webhook event " + event.event_key + " (" + event.event_type + ")";
    // A void releases whatever is left of the authorisation when it executes -- more than was
    // capturable when it was asked, once a capture held meanwhile failed -- so its amount decides
    // nothing, as in decide_reconciliation (ReconcileInput::amount_decides); a currency it names
    // must be the authorisation's.
    const bool same = event.kind == OperationKind::void_authorization
                          ? !event.currency || same_currency(*event.currency, currency)
                          : event.amount_minor && event.currency &&
                                *event.amount_minor == amount_minor &&
                                same_currency(*event.currency, currency);
    if (!same) {
        d.action = ReconcileAction::review;
        d.review = ReviewCode::remote_mismatch;
        d.reason = named + " says " + std::string(to_string(event.outcome)) + " for " +
                   (event.amount_minor && event.currency
                        ? describe_money(*event.amount_minor, *event.currency)
                        : std::string("no amount")) +
                   "; ours is " + describe_money(amount_minor, currency);
        return d;
    }
    const auto [done, not_done] = [&]() -> std::pair<std::string, std::string> {
        switch (event.kind) {
        case OperationKind::refund:
            return {"refunded", "did not refund"};
        case OperationKind::capture:
            return {"captured", "did not capture"};
        case OperationKind::void_authorization:
            return {"released the authorisation of", "did not void the authorisation"};
        case OperationKind::charge:
            break;
        }
        return {"charged", "did not charge"};
    }();
    if (event.outcome == EvidenceOutcome::succeeded) {
        d.action = ReconcileAction::adopt_succeeded;
        d.provider_reference = event.provider_reference;
        d.reason = named + ": the provider " + done + " " + describe_money(amount_minor, currency);
    } else {
        d.action = ReconcileAction::adopt_failed;
        d.reason = named + ": the provider " + not_done;
    }
    return d;
}

} // namespace payrecon
