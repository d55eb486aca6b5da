#include "services/resolution.hpp"

#include "core/money.hpp"
#include "core/review_guidance.hpp"
#include "store/operation_store.hpp"
#include "store/reconcile_store.hpp"

namespace payrecon {
namespace {

using Status = ResolveOutcome::Status;

ResolveOutcome with_status(ResolveOutcome out, Status status) {
    out.status = status;
    return out;
}

// The audit note: the operator's, and how the reference was checked.
std::string audit_note(const ResolveRequest& request, const ResolveOutcome& out) {
    switch (out.checked) {
    case ReferenceChecked::not_needed:
        break;
    case ReferenceChecked::evidence:
        return request.note + " [reference checked against " +
               (out.evidence.record ? out.evidence.record->seen_in : std::string("the evidence")) +
               "]";
    case ReferenceChecked::provider:
        return request.note + " [reference checked with the provider: " + out.provider.detail + "]";
    case ReferenceChecked::unverified:
        return request.note + " [reference not checked with the provider: unverified]";
    }
    return request.note;
}

// Whether the reference may be written, by the evidence first and the provider where the evidence
// is silent; sets `out.checked`, or returns the refusal.
std::optional<Status> check_reference(const ResolveRequest& request,
                                      const store::PaymentEvidence& evidence,
                                      std::optional<long long> charged,
                                      const AskProvider& ask_provider, ResolveOutcome& out) {
    const std::string& reference = *request.provider_reference;
    out.evidence = check_reference_against(
        evidence.seen, reference, charged.value_or(evidence.amount_minor), evidence.currency);
    switch (
        gate_reference(out.evidence.verdict, static_cast<bool>(ask_provider), request.unverified)) {
    case ReferenceGate::refuse_contradicted:
        return Status::contradicted;
    case ReferenceGate::accept_evidence:
        out.checked = ReferenceChecked::evidence;
        return std::nullopt;
    case ReferenceGate::accept_unverified:
        out.checked = ReferenceChecked::unverified;
        return std::nullopt;
    case ReferenceGate::refuse_unchecked:
        return Status::unchecked;
    case ReferenceGate::ask_provider:
        break;
    }
    out.provider = ask_provider(out.ref, out.kind, out.refund_id.value_or(out.ref.payment_id),
                                reference, charged);
    out.provider_asked = true;
    switch (out.provider.verdict) {
    case ReferenceCheck::Verdict::confirmed:
        out.checked = ReferenceChecked::provider;
        return std::nullopt;
    case ReferenceCheck::Verdict::not_checked:
        out.provider_asked = false;
        return Status::unchecked;
    case ReferenceCheck::Verdict::lookup_failed:
    case ReferenceCheck::Verdict::absent:
    case ReferenceCheck::Verdict::other_reference:
    case ReferenceCheck::Verdict::mismatch:
    case ReferenceCheck::Verdict::not_charged:
        break;
    }
    return Status::provider_refused;
}

// `out` as changed, with the newest audit row about the payment (who changed it).
ResolveOutcome changed(store::Db& db, ResolveOutcome out) {
    store::AuditFilter filter;
    filter.payment = out.ref;
    filter.limit = 1;
    const auto rows = store::list_audit(db, filter);
    if (!rows.empty()) {
        out.last_change = rows.back();
    }
    return with_status(std::move(out), Status::changed);
}

} // namespace

ResolveOutcome resolve(store::Db& db, const ResolveRequest& request,
                       const AskProvider& ask_provider) {
    ResolveOutcome out;
    out.problem = check_resolution({request.decision, request.note, request.provider_reference,
                                    request.confirmed_no_charge, request.generation,
                                    request.charged_amount.has_value(), request.unverified});
    if (out.problem) {
        return with_status(std::move(out), Status::invalid);
    }
    if (const auto ref = store::resolve_payment_ref(db, request.id)) {
        out.ref = *ref;
    } else if (const auto operation =
                   store::find_operation_any_tenant(db, std::nullopt, request.id)) {
        out.ref = store::PaymentRef{operation->tenant_id, operation->payment_id};
        out.kind = operation->kind;
        out.refund_id = operation->id;
    } else {
        return with_status(std::move(out), Status::not_found);
    }
    const auto evidence = out.refund_id
                              ? store::load_refund_evidence(db, out.ref.tenant_id, *out.refund_id)
                              : store::load_payment_evidence(db, out.ref);
    if (!evidence) {
        return with_status(std::move(out), Status::not_found);
    }
    out.state = evidence->state;
    out.generation = evidence->generation;
    out.amount_minor = evidence->amount_minor;
    out.currency = evidence->currency;
    // The store fences again as it writes; asked first, nobody is asked about a payment that
    // changed or cannot be decided so.
    if (evidence->generation != request.generation) {
        return changed(db, std::move(out));
    }
    const auto from = parse_payment_state(evidence->state);
    if (!from || !decidable_from(request.decision, *from)) {
        return with_status(std::move(out), Status::not_resolvable);
    }

    if (out.refund_id && request.charged_amount) {
        return with_status(std::move(out), Status::not_for_refund);
    }
    std::optional<long long> charged;
    if (request.charged_amount) {
        charged = parse_major_units(*request.charged_amount, evidence->currency);
        if (!charged) {
            out.amount_example = major_units(evidence->amount_minor, evidence->currency)
                                     .value_or(std::to_string(evidence->amount_minor));
            return with_status(std::move(out), Status::bad_amount);
        }
        out.charged_minor = charged;
    }
    if (request.decision == OperatorDecision::retry) {
        // The operator confirmed that the provider holds no charge; what it was seen to hold
        // says otherwise: sent again, the payment would be charged twice (outside the provider's
        // key window) or answered with the charge it has (inside it).
        if (const SeenRecord* charge = standing_charge(evidence->seen)) {
            out.evidence.record = *charge;
            return with_status(std::move(out), Status::charge_seen);
        }
    }
    if (request.decision == OperatorDecision::succeeded) {
        if (const auto refused = check_reference(request, *evidence, charged, ask_provider, out)) {
            return with_status(std::move(out), *refused);
        }
    }

    store::Resolution r;
    r.tenant_id = out.ref.tenant_id;
    r.payment_id = out.ref.payment_id;
    if (out.refund_id) {
        r.kind = out.kind;
        r.refund_id = *out.refund_id;
    }
    r.generation = request.generation;
    r.decision = request.decision;
    r.note = audit_note(request, out);
    r.operator_name = request.operator_name;
    r.provider_reference = request.provider_reference;
    r.charged_amount_minor = charged;
    r.confirmed_no_charge = request.confirmed_no_charge;
    r.dry_run = request.dry_run;
    const store::ResolveResult result = store::resolve_payment(db, r);
    out.state = result.state;
    out.generation = result.generation;
    switch (result.status) {
    case store::ResolveResult::Status::applied:
        return with_status(std::move(out), request.dry_run ? Status::would_apply : Status::applied);
    case store::ResolveResult::Status::not_found:
        return with_status(std::move(out), Status::not_found);
    case store::ResolveResult::Status::changed:
        return changed(db, std::move(out));
    case store::ResolveResult::Status::not_resolvable:
        return with_status(std::move(out), Status::not_resolvable);
    case store::ResolveResult::Status::maybe_sent:
        return with_status(std::move(out), Status::maybe_sent);
    case store::ResolveResult::Status::reference_taken:
        out.holder = result.holder;
        return with_status(std::move(out), Status::reference_taken);
    }
    return with_status(std::move(out), Status::not_found);
}

ReviewAdvice review_advice(store::Db& db, const store::PaymentRef& ref,
                           const std::optional<std::string>& review_code,
                           const std::optional<std::string>& refund_id) {
    ReviewAdvice out;
    const auto evidence = refund_id ? store::load_refund_evidence(db, ref.tenant_id, *refund_id)
                                    : store::load_payment_evidence(db, ref);
    if (!evidence || evidence->state != to_string(PaymentState::needs_review)) {
        return out;
    }
    const auto code = review_code ? parse_review_code(*review_code) : std::nullopt;
    const std::vector<OperatorDecision> allowed =
        code ? review_guidance(*code).decisions
             : std::vector<OperatorDecision>{OperatorDecision::succeeded, OperatorDecision::failed,
                                             OperatorDecision::retry};
    out.suggestions = suggest_resolutions(allowed, evidence->seen, evidence->amount_minor,
                                          evidence->currency, evidence->provider_reference);
    out.seen = evidence->seen;
    return out;
}

} // namespace payrecon
