#include "services/requeue.hpp"

#include "core/errors.hpp"
#include "core/payment_state.hpp"
#include "core/reconcile_policy.hpp"
#include "core/resolution_policy.hpp"

#include <algorithm>

namespace payrecon {

long long RequeueResult::requeued() const {
    return std::count_if(payments.begin(), payments.end(), [](const RequeuedPayment& p) {
        return p.status == RequeuedPayment::Status::requeued;
    });
}

long long RequeueResult::changed() const {
    return std::count_if(payments.begin(), payments.end(), [](const RequeuedPayment& p) {
        return p.status == RequeuedPayment::Status::changed ||
               p.status == RequeuedPayment::Status::not_eligible;
    });
}

bool note_missing(const RequeueRequest& request) {
    return !request.dry_run && trimmed_note(request.note).empty();
}

RequeueResult requeue_credential_refusals(store::Db& db, const RequeueRequest& request) {
    if (request.provider.empty()) {
        throw UsageError("a requeue names the provider whose payments it sends again");
    }
    if (!request.dry_run) {
        // The same rule each payment's write checks, before anything is read.
        if (const auto problem =
                check_resolution({OperatorDecision::retry, request.note, std::nullopt, true, 0})) {
            throw UsageError(describe(*problem));
        }
    }
    RequeueResult out;
    for (store::RejectedPayment& p :
         store::rejected_payments(db, request.provider, request.tenant_id)) {
        RequeueEvidence evidence;
        evidence.state = PaymentState::needs_review;
        evidence.review_code = std::string(to_string(ReviewCode::request_rejected));
        evidence.last_outcome = p.outcome;
        evidence.last_http_status = p.http_status;
        if (requeue_refusal(evidence)) {
            out.left.push_back(std::move(p));
            continue;
        }
        RequeuedPayment r;
        r.state = std::string(to_string(PaymentState::needs_review));
        r.generation = p.generation;
        if (!request.dry_run) {
            const store::ResolveResult w = store::requeue_payment(
                db, {p.tenant_id, p.payment_id, p.generation, request.note, request.operator_name});
            r.state = w.state;
            r.generation = w.generation;
            r.why = w.why;
            switch (w.status) {
            case store::ResolveResult::Status::applied:
                r.status = RequeuedPayment::Status::requeued;
                break;
            case store::ResolveResult::Status::not_resolvable:
                r.status = RequeuedPayment::Status::not_eligible;
                break;
            case store::ResolveResult::Status::not_found:
            case store::ResolveResult::Status::changed:
            case store::ResolveResult::Status::maybe_sent:
            case store::ResolveResult::Status::reference_taken:
                r.status = RequeuedPayment::Status::changed;
                break;
            }
        }
        r.payment = std::move(p);
        out.payments.push_back(std::move(r));
    }
    return out;
}

} // namespace payrecon
