#include "core/review_guidance.hpp"

namespace payrecon {
namespace {

using D = OperatorDecision;

const ReviewGuidance k_no_lookup{
    "the call's outcome is unknown and this provider cannot be asked about a payment",
    "the payment at the provider by hand (its providers/<kind>/README.md, \"Finding a payment\")",
    "charged: succeeded with its reference; refused: failed; nothing there well after the "
    "attempt: retry (while the provider keeps the key) or failed",
    {D::succeeded, D::failed, D::retry},
    false};

const ReviewGuidance k_lookup_failing{
    "the provider's status query failed several times in a row; nothing was re-sent or adopted",
    "the provider's status page and our credentials for it (401/403), then the payment itself",
    "once lookups work again, recheck; if the provider stays unreachable, decide from its "
    "dashboard",
    {D::succeeded, D::failed, D::retry},
    true};

const ReviewGuidance k_outside_key_window{
    "the provider has no such payment, but a re-send now may not be recognised as the same "
    "payment: if the first attempt surfaces late, the customer is charged twice",
    "search the provider by hand past its search lag, also around the attempt times",
    "found and charged: succeeded; certain nothing exists: retry (your check is the only "
    "protection) or failed",
    {D::succeeded, D::failed, D::retry},
    true};

const ReviewGuidance k_no_idempotency{
    "the provider has no such payment, and it does not honour idempotency keys: a re-send is "
    "never automatic",
    "the provider, once its longest search lag has passed since the last attempt",
    "found and charged: succeeded; otherwise retry or failed",
    {D::succeeded, D::failed, D::retry},
    true};

const ReviewGuidance k_schedule_exhausted{
    "still in progress after every check the schedule allows, or absent again after the most "
    "re-sends allowed",
    "the payment's state at the provider; for repeated absences, why every attempt ended unknown",
    "recheck once the provider has finished; otherwise succeeded, failed, or retry once the "
    "cause is fixed",
    {D::succeeded, D::failed, D::retry},
    true};

const ReviewGuidance k_remote_mismatch{
    "the provider's payment for our operation ID has another amount or currency than ours",
    "amount and currency at the provider; a factor of 10, 100 or 1000 is a currency exponent bug: "
    "tell engineering",
    "settle the money at the provider first (refund, or accept the amount), then succeeded with "
    "--amount AMOUNT (what it charged) if the charge stands, failed if it was refunded; note both "
    "amounts",
    {D::succeeded, D::failed},
    false};

const ReviewGuidance k_remote_duplicate{
    "the provider holds more than one payment for our operation ID: the customer may have been "
    "charged more than once",
    "every one of them at the provider: which succeeded, for how much",
    "refund the extra charges at the provider, then succeeded with the one that stands (failed if "
    "all were refunded); note the refunded references",
    {D::succeeded, D::failed},
    false};

const ReviewGuidance k_requires_action{
    "the provider waits for the customer (3-D Secure); charged off-session, it cannot finish",
    "the payment at the provider: still waiting, or completed or failed since",
    "completed since: recheck; otherwise cancel it at the provider first, then failed",
    {D::failed},
    true};

const ReviewGuidance k_remote_unrecognised{
    "the provider answered with a state payrecon does not know",
    "the payment at the provider and what its documentation says the state means; tell "
    "engineering",
    "charged: succeeded; definitely not: failed; still moving: recheck later",
    {D::succeeded, D::failed},
    true};

const ReviewGuidance k_request_rejected{
    "the provider refused our request before executing anything: nobody was charged; an "
    "integration or configuration fault, usually for every payment to this provider",
    "the provider's code and message against our configuration, credentials and account",
    "fix the cause first and try one payment; then retry (same operation ID), or failed if the "
    "payment can never be sent as it is; refused with HTTP 401/403 (our credentials): all of "
    "them at once, payrecon review requeue --provider P --auth-failures",
    {D::failed, D::retry},
    false};

const ReviewGuidance k_notification_missing{
    "the provider accepted it (an Adyen refund `received`), cannot be asked about it, and sent "
    "no notification of its outcome within the provider's notification window",
    "the operation at the provider by hand (its providers/<kind>/README.md: an Adyen refund's "
    "pspReference is the attempt's provider reference), and that the provider's notifications "
    "reach payrecon (payrecon events list --provider P)",
    "refunded or settled: succeeded; failed or not there: failed; if notifications stopped "
    "reaching payrecon, fix that first: a notification still coming settles nothing in review",
    {D::succeeded, D::failed},
    false};

} // namespace

const ReviewGuidance& review_guidance(ReviewCode code) {
    switch (code) {
    case ReviewCode::no_lookup:
        return k_no_lookup;
    case ReviewCode::lookup_failing:
        return k_lookup_failing;
    case ReviewCode::outside_key_window:
        return k_outside_key_window;
    case ReviewCode::no_idempotency:
        return k_no_idempotency;
    case ReviewCode::schedule_exhausted:
        return k_schedule_exhausted;
    case ReviewCode::remote_mismatch:
        return k_remote_mismatch;
    case ReviewCode::remote_duplicate:
        return k_remote_duplicate;
    case ReviewCode::requires_action:
        return k_requires_action;
    case ReviewCode::remote_unrecognised:
        return k_remote_unrecognised;
    case ReviewCode::notification_missing:
        return k_notification_missing;
    case ReviewCode::request_rejected:
        break;
    }
    return k_request_rejected;
}

} // namespace payrecon
