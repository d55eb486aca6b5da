#include "engine/reconciler.hpp"

#include "core/errors.hpp"
#include "core/money.hpp"
#include "core/review_guidance.hpp"
#include "engine/executor.hpp"
#include "store/webhook_store.hpp"

#include <set>
#include <stdexcept>

namespace payrecon::engine {
namespace {

RemoteState remote_state_of(const providers::RemotePayment& remote) {
    switch (remote.state) {
    case providers::Outcome::succeeded:
        return RemoteState::succeeded;
    case providers::Outcome::declined:
        return RemoteState::declined;
    case providers::Outcome::pending:
        // A payment waiting for the customer (3-D Secure) cannot complete off-session.
        return remote.raw_status == "requires_action" ? RemoteState::requires_action
                                                      : RemoteState::pending;
    case providers::Outcome::not_sent:
    case providers::Outcome::rejected:
    case providers::Outcome::unknown:
        break;
    }
    return RemoteState::unrecognised;
}

LookupStatus status_of(const providers::LookupResult& r) {
    switch (r.status) {
    case providers::LookupResult::Status::found:
        return r.payment ? LookupStatus::found : LookupStatus::failed;
    case providers::LookupResult::Status::not_found:
        return LookupStatus::not_found;
    case providers::LookupResult::Status::failed:
        break;
    }
    return LookupStatus::failed;
}

store::LookupObservation record_of(const providers::LookupResult* r, LookupStatus status) {
    store::LookupObservation rec;
    rec.status = std::string(to_string(status));
    if (r == nullptr) {
        return rec;
    }
    if (status == LookupStatus::found) {
        const providers::RemotePayment& p = *r->payment;
        rec.remote_state = std::string(to_string(remote_state_of(p)));
        rec.remote_raw_status = p.raw_status;
        rec.remote_amount = p.amount.minor;
        rec.remote_currency = p.amount.currency;
        rec.provider_reference = p.provider_reference;
        rec.duplicates = static_cast<int>(r->duplicates.size());
    }
    if (r->call.http_status != 0) {
        rec.http_status = r->call.http_status;
    }
    rec.error_class = r->call.error_class;
    rec.detail = r->call.detail;
    return rec;
}

// What the decision does to a payment in `from`. From needs_review (an operator's recheck) only
// the provider's own answer moves it; anything else keeps it in review.
store::ReconcileWrite write_for(const ReconcileDecision& d, PaymentState from,
                                const std::optional<std::string>& current_code) {
    store::ReconcileWrite w;
    w.decision = std::string(to_string(d.action));
    w.reason = d.reason;
    switch (d.action) {
    case ReconcileAction::adopt_succeeded:
        w.to = PaymentState::succeeded;
        w.provider_reference = d.provider_reference;
        return w;
    case ReconcileAction::adopt_failed:
        w.to = PaymentState::failed;
        w.provider_reference = d.provider_reference;
        return w;
    case ReconcileAction::review:
        w.to = PaymentState::needs_review;
        w.review_code = std::string(to_string(*d.review));
        return w;
    case ReconcileAction::check_later:
    case ReconcileAction::resend:
        break;
    }
    if (from == PaymentState::needs_review) {
        w.to = PaymentState::needs_review;
        w.review_code =
            current_code.value_or(std::string(to_string(ReviewCode::remote_unrecognised)));
        w.reason = d.action == ReconcileAction::resend
                       ? "recheck: confirmed absent inside the key window; an operator may resolve "
                         "it with --as retry"
                       : "recheck: " + d.reason;
        return w;
    }
    if (d.action == ReconcileAction::resend) {
        w.to = PaymentState::retry_scheduled;
        w.resend_now = true;
        return w;
    }
    w.to = PaymentState::unknown;
    w.next_check_in = d.check_in;
    return w;
}

} // namespace

ReconcileInput reconcile_input(const store::ReconcileCandidate& c,
                               const providers::Capabilities& caps,
                               std::chrono::seconds settle_delay,
                               const providers::LookupResult* lookup) {
    ReconcileInput in;
    in.can_lookup = can_look_up(caps, c.payment.kind);
    in.honours_idempotency_keys = caps.honours_idempotency_keys;
    in.key_retention = caps.key_retention;
    in.settle_delay = settle_delay;
    in.amount_minor = c.payment.amount_minor;
    in.currency = c.payment.currency;
    in.amount_decides = c.payment.kind != OperationKind::void_authorization;
    in.since_first_attempt = c.since_first_attempt;
    in.since_last_attempt = c.since_last_attempt;
    in.resends = c.resends;
    in.lookups_before = c.lookup_count;
    in.lookup_failures_before = c.lookup_failures;
    in.accepted = c.last_attempt_accepted;
    in.notification_wait = caps.notification_wait;
    if (lookup == nullptr) {
        in.lookup = LookupStatus::not_asked;
        return in;
    }
    in.lookup = status_of(*lookup);
    if (in.lookup == LookupStatus::found) {
        const providers::RemotePayment& p = *lookup->payment;
        in.remote_state = remote_state_of(p);
        in.remote_amount_minor = p.amount.minor;
        in.remote_currency = p.amount.currency;
        if (!p.provider_reference.empty()) {
            in.remote_reference = p.provider_reference;
        }
        in.remote_duplicates = static_cast<int>(lookup->duplicates.size());
        for (const auto& d : lookup->duplicates) {
            if (!d.provider_reference.empty()) {
                in.remote_duplicate_references.push_back(d.provider_reference);
            }
        }
    }
    return in;
}

Reconciler::Reconciler(store::Db& db, std::vector<providers::Provider*> providers,
                       ReconcilerOptions options)
    : m_db(db), m_providers(std::move(providers)), m_options(std::move(options)),
      m_own_gate(m_options.credentials == nullptr ? std::make_unique<CredentialGate>() : nullptr),
      m_gate(m_options.credentials != nullptr ? m_options.credentials : m_own_gate.get()) {}

std::vector<CredentialRefusal> Reconciler::credentials_refused() const {
    std::vector<CredentialRefusal> out;
    for (CredentialRefusal& r : m_gate->refusals()) {
        if (provider_named(r.provider) != nullptr) {
            out.push_back(std::move(r));
        }
    }
    return out;
}

providers::Provider* Reconciler::provider_named(const std::string& name) const {
    for (auto* p : m_providers) {
        if (p->name() == name) {
            return p;
        }
    }
    return nullptr;
}

ReconcileOutcome Reconciler::handle(const store::ReconcileCandidate& c, bool operator_recheck) {
    providers::Provider* provider = provider_named(c.payment.provider);
    if (provider == nullptr) {
        throw std::logic_error("reconciling a payment of a provider this reconciler does not have");
    }
    const providers::Capabilities& caps = provider->capabilities();
    // The claim waited out the settle delay; an operator's recheck asks at once, and a "not found"
    // inside the delay then proves nothing (the policy keeps it).
    const bool can_lookup = can_look_up(caps, c.payment.kind);
    std::optional<providers::LookupResult> lookup;
    const std::chrono::seconds staleness = lookup_staleness(caps, c.payment.kind);
    if (can_lookup && (operator_recheck || c.since_last_attempt >= staleness)) {
        std::optional<CredentialGate::Pass> pass = m_gate->enter(provider->name());
        if (!pass) {
            throw std::logic_error("reconciling a payment of a provider that refused our "
                                   "credentials in this run");
        }
        lookup = look_up_operation(*provider, c.payment);
        CredentialRefusal refusal;
        refusal.payment_id = c.payment.payment_id;
        refusal.call = "looking a " + std::string(subject_noun(c.payment.kind)) + " up";
        refusal.message = lookup->call.detail;
        pass->answered(lookup->status != providers::LookupResult::Status::failed ||
                           lookup->call.http_status != 0,
                       lookup->call.http_status, refusal);
    }
    const ReconcileInput input = reconcile_input(c, caps, staleness, lookup ? &*lookup : nullptr);
    ReconcileOutcome out;
    out.tenant_id = c.payment.tenant_id;
    out.payment_id = c.payment.payment_id;
    out.kind = c.payment.kind;
    out.refund_id = c.payment.operation_row_id;
    out.operation_id = c.payment.operation_id;
    out.merchant_reference = c.payment.merchant_reference;
    out.provider = c.payment.provider;
    out.amount_minor = c.payment.amount_minor;
    out.currency = c.payment.currency;
    out.from = c.state;
    out.lookup = input.lookup;
    if (lookup) {
        out.lookup_detail = input.lookup == LookupStatus::found ? lookup->payment->raw_status
                                                                : lookup->call.error_class;
        if (input.lookup == LookupStatus::found) {
            out.remote = *lookup->payment;
            out.remote->raw.clear(); // a report needs the facts, not the provider's document
        }
    }
    out.decision = decide_reconciliation(input, m_options.policy);
    const store::ReconcileWrite write = write_for(out.decision, c.state, c.review_code);
    out.to = write.to;
    if (m_options.dry_run) {
        return out;
    }
    out.applied = store::apply_reconciliation(
        m_db, c, m_options.actor, record_of(lookup ? &*lookup : nullptr, input.lookup), write);
    out.fenced_out = !out.applied;
    return out;
}

std::vector<ReconcileOutcome>
Reconciler::run(const std::function<void(const ReconcileOutcome&)>& on_outcome) {
    // The providers still to be asked: one that refused our credentials is left out.
    const auto schedules = [this] {
        std::vector<store::ProviderSchedule> out;
        for (const auto* p : m_providers) {
            if (m_gate->refused(p->name())) {
                continue;
            }
            const auto& caps = p->capabilities();
            // Without a lookup there is nothing to wait for: the payment goes to review at once.
            out.push_back(
                {p->name(),
                 caps.lookup_by_operation_id ? caps.lookup_staleness : std::chrono::seconds(0),
                 caps.refund_lookup || caps.capture_lookup ? caps.refund_lookup_staleness
                                                           : std::chrono::seconds(0)});
        }
        return out;
    };
    std::vector<ReconcileOutcome> outcomes;
    // First what providers told us unasked: a verified terminal webhook event settles an unknown
    // payment without a lookup or a settle delay (DESIGN section 14).
    if (!m_options.dry_run) {
        for (ReconcileOutcome& o : apply_evidence()) {
            outcomes.push_back(std::move(o));
            if (on_outcome) {
                on_outcome(outcomes.back());
            }
        }
    }
    std::set<std::string> seen;
    // A payment this run decides to check again later is the next run's, however short the wait.
    const auto started = std::chrono::system_clock::now();
    while (static_cast<int>(outcomes.size()) < m_options.limit) {
        const int want =
            m_options.dry_run
                ? m_options.limit
                : std::min(m_options.batch, m_options.limit - static_cast<int>(outcomes.size()));
        const auto batch = m_options.dry_run ? store::peek_unknown(m_db, want, schedules())
                                             : store::claim_unknown(m_db, m_options.hold, want,
                                                                    schedules(), started);
        int fresh = 0;
        for (const auto& c : batch) {
            // Cannot happen (claims are due by the run's start); kept as a guard against a loop.
            // By the row claimed: a payment's refunds share its payment ID.
            if (!seen.insert(std::string(to_string(c.payment.kind)) + " " + c.payment.subject_id())
                     .second) {
                continue;
            }
            ++fresh;
            if (m_gate->refused(c.payment.provider)) {
                continue; // claimed before the refusal: due again after `hold`
            }
            outcomes.push_back(handle(c, false));
            if (on_outcome) {
                on_outcome(outcomes.back());
            }
        }
        if (m_options.dry_run || fresh == 0) {
            break;
        }
    }
    return outcomes;
}

std::vector<ReconcileOutcome> Reconciler::apply_evidence() {
    std::vector<std::string> names;
    for (const auto* p : m_providers) {
        names.push_back(p->name());
    }
    std::vector<ReconcileOutcome> out =
        apply_webhook_evidence(m_db, m_options.actor, names, m_options.limit);
    for (ReconcileOutcome& o : apply_reversals(names)) {
        out.push_back(std::move(o));
    }
    return out;
}

std::vector<ReconcileOutcome> Reconciler::apply_reversals(const std::vector<std::string>& names) {
    // A verified event says a refund or capture that succeeded has failed since (DESIGN section
    // 16). A final state is not moved by a notification alone: where the provider can find the
    // operation, it is asked first, and the reversal is written only if it says failed too (if it
    // says succeeded, the event contradicts it and waits for an operator); where it cannot
    // (Adyen), its documented reversal notification is the provider's own record.
    std::vector<ReconcileOutcome> out;
    for (const store::EvidenceCandidate& c :
         store::reversal_candidates(m_db, names, m_options.limit)) {
        providers::Provider* provider = provider_named(c.provider);
        if (provider == nullptr || m_gate->refused(c.provider)) {
            continue;
        }
        const std::string noun(subject_noun(c.kind));
        ReconcileOutcome o;
        o.tenant_id = c.tenant_id;
        o.payment_id = c.payment_id;
        o.kind = c.kind;
        o.refund_id = c.refund_id;
        o.operation_id = c.operation_id;
        o.merchant_reference = c.merchant_reference;
        o.provider = c.provider;
        o.amount_minor = c.amount_minor;
        o.currency = c.currency;
        o.from = PaymentState::succeeded;
        o.to = PaymentState::succeeded;
        o.lookup = LookupStatus::not_asked;
        std::string reason = "the provider reversed the " + noun + " (" + c.event.event_type +
                             ", event " + c.event.event_key + ")";
        const auto reverse = [&] {
            const store::Reversal done = store::reverse_operation(m_db, c, m_options.actor, reason);
            if (done == store::Reversal::refunded) {
                o.decision.action = ReconcileAction::review;
                o.decision.reason = "the event says the capture failed, but refunds of the "
                                    "payment already hold what it captured: the capture stays "
                                    "succeeded, the event waits for an operator";
                return true;
            }
            return done == store::Reversal::reversed;
        };
        if (can_look_up(provider->capabilities(), c.kind)) {
            const std::optional<store::ReconcileCandidate> loaded =
                store::load_candidate(m_db, c.tenant_id, c.refund_id, c.kind);
            if (!loaded || loaded->state != PaymentState::succeeded) {
                continue; // it changed since it was listed: the next run sees it as it is
            }
            std::optional<CredentialGate::Pass> pass = m_gate->enter(provider->name());
            if (!pass) {
                continue;
            }
            const providers::LookupResult found = look_up_operation(*provider, loaded->payment);
            CredentialRefusal refusal;
            refusal.payment_id = c.payment_id;
            refusal.call = "looking a " + noun + " up";
            refusal.message = found.call.detail;
            pass->answered(found.status != providers::LookupResult::Status::failed ||
                               found.call.http_status != 0,
                           found.call.http_status, refusal);
            o.lookup = status_of(found);
            // The question is kept with what it decided, as every status query is.
            const auto record = [&](bool applied) {
                store::record_lookup(m_db, c.tenant_id, c.payment_id, c.operation_id, c.generation,
                                     m_options.actor, record_of(&found, o.lookup),
                                     std::string(to_string(o.decision.action)), o.decision.reason,
                                     applied);
            };
            if (o.lookup != LookupStatus::found) {
                o.lookup_detail = found.call.error_class;
                o.decision.action = ReconcileAction::check_later;
                o.decision.check_in = std::chrono::seconds(60);
                o.decision.reason = "a reversal event waits: the provider's lookup of the " + noun +
                                    " did not answer; asked again next run";
                record(false);
                out.push_back(std::move(o));
                continue;
            }
            o.lookup_detail = found.payment->raw_status;
            if (found.payment->state != providers::Outcome::declined) {
                store::mark_provider_event(m_db, c.event_id, "contradicts");
                o.decision.action = ReconcileAction::review;
                o.decision.reason = "the event says the " + noun +
                                    " failed but the provider's lookup says " +
                                    found.payment->raw_status + ": the " + noun +
                                    " stays succeeded, the event waits for an operator";
                o.applied = true;
                record(false); // the operation did not move
                out.push_back(std::move(o));
                continue;
            }
            reason += "; the provider's lookup confirms: " + found.payment->raw_status;
            o.decision.action = ReconcileAction::adopt_failed;
            o.decision.reason = reason;
            o.applied = reverse();
            record(o.applied && o.decision.action == ReconcileAction::adopt_failed);
        } else {
            o.decision.action = ReconcileAction::adopt_failed;
            o.decision.reason = reason;
            o.applied = reverse();
        }
        o.fenced_out = !o.applied;
        o.to = o.applied && o.decision.action == ReconcileAction::adopt_failed
                   ? PaymentState::failed
                   : PaymentState::succeeded;
        out.push_back(std::move(o));
    }
    return out;
}

std::vector<ReconcileOutcome> apply_webhook_evidence(store::Db& db, const std::string& actor,
                                                     const std::vector<std::string>& providers,
                                                     int limit) {
    std::vector<ReconcileOutcome> out;
    for (const auto& a : store::apply_webhook_evidence(
             db, actor, providers, limit, [](const store::EvidenceCandidate& c) {
                 return decide_from_event(c.amount_minor, c.currency, c.event);
             })) {
        const store::EvidenceCandidate& c = a.candidate;
        ReconcileOutcome o;
        o.tenant_id = c.tenant_id;
        o.payment_id = c.payment_id;
        o.kind = c.kind;
        o.refund_id = c.refund_id;
        o.operation_id = c.operation_id;
        o.merchant_reference = c.merchant_reference;
        o.provider = c.provider;
        o.amount_minor = c.amount_minor;
        o.currency = c.currency;
        o.from = PaymentState::unknown;
        o.to = a.to;
        o.lookup = LookupStatus::not_asked;
        o.lookup_detail = "webhook " + c.event.event_key;
        o.decision = a.decision;
        o.applied = true;
        out.push_back(std::move(o));
    }
    return out;
}

std::optional<ReconcileOutcome> Reconciler::recheck(const std::string& tenant_id,
                                                    const std::string& subject_id,
                                                    std::optional<long long> expected_generation,
                                                    OperationKind kind) {
    const auto c = store::load_candidate(m_db, tenant_id, subject_id, kind);
    const std::string what = std::string(subject_noun(kind)) + " ";
    if (!c) {
        return std::nullopt;
    }
    if (expected_generation && c->payment.generation != *expected_generation) {
        // Decided, rechecked or requeued since it was selected: the fence, before anyone is asked.
        ReconcileOutcome out;
        out.tenant_id = c->payment.tenant_id;
        out.payment_id = c->payment.payment_id;
        out.operation_id = c->payment.operation_id;
        out.merchant_reference = c->payment.merchant_reference;
        out.provider = c->payment.provider;
        out.amount_minor = c->payment.amount_minor;
        out.currency = c->payment.currency;
        out.from = c->state;
        out.to = c->state;
        out.lookup_detail = "changed since it was selected";
        out.fenced_out = true;
        return out;
    }
    if (c->state != PaymentState::unknown && c->state != PaymentState::needs_review) {
        throw Refused(
            what + subject_id + " is " + std::string(to_string(c->state)) +
                ": only unknown payments and operations and those in review are rechecked",
            "payrecon " + std::string(subject_noun(kind)) + "s show " + subject_id);
    }
    if (provider_named(c->payment.provider) == nullptr) {
        throw Refused(what + subject_id + " belongs to provider '" + c->payment.provider +
                          "', which the configuration does not have",
                      "add it to the provider configuration, or resolve it by hand");
    }
    return handle(*c, true);
}

Reconciler::InReviewResult
Reconciler::recheck_in_review(const InReview& selection,
                              const std::function<void(const Rechecked&)>& on_each) {
    const providers::Provider* provider = provider_named(selection.provider);
    if (provider == nullptr) {
        throw Refused("provider '" + selection.provider + "' is not in the configuration",
                      "name one of the providers the configuration file has");
    }
    const std::string code(to_string(selection.code));
    // A payment that cannot be asked about waits for an operator whatever a recheck finds, unless
    // the provider can be asked by now (its configuration changed since).
    const bool can_ask_now = provider->capabilities().lookup_by_operation_id;
    if (!review_guidance(selection.code).recheck &&
        !(selection.code == ReviewCode::no_lookup && can_ask_now)) {
        throw UsageError(
            "asking the provider again cannot settle a payment in review as " + code + ": " +
                std::string(review_guidance(selection.code).means),
            "decide each as docs/operations.md (" + code + ") says: payrecon review list " +
                "--provider " + selection.provider +
                (selection.code == ReviewCode::request_rejected
                     ? "; after fixing refused credentials: payrecon review requeue --provider " +
                           selection.provider + " --auth-failures --note \"...\""
                     : std::string()));
    }
    InReviewResult out;
    store::ReviewItems selected =
        store::review_items(m_db, selection.provider, code, selection.tenant_id, selection.limit);
    out.more = selected.more;
    for (store::ReviewItem& item : selected.items) {
        Rechecked r;
        r.state = std::string(to_string(PaymentState::needs_review));
        r.generation = item.generation;
        if (selection.dry_run) {
            r.status = Rechecked::Status::would_recheck;
        } else if (m_gate->refused(selection.provider)) {
            r.status = Rechecked::Status::not_asked;
        } else {
            r.outcome = recheck(item.tenant_id, item.subject_id(), item.generation, item.kind);
            r.status = !r.outcome || r.outcome->fenced_out ? Rechecked::Status::changed
                                                           : Rechecked::Status::rechecked;
            if (const auto now =
                    store::load_candidate(m_db, item.tenant_id, item.subject_id(), item.kind)) {
                r.state = std::string(to_string(now->state));
                r.generation = now->payment.generation;
            }
        }
        r.payment = std::move(item);
        out.payments.push_back(std::move(r));
        if (on_each) {
            on_each(out.payments.back());
        }
    }
    return out;
}

std::optional<ReferenceCheck> Reconciler::check_reference(const std::string& tenant_id,
                                                          const std::string& subject_id,
                                                          const std::string& reference,
                                                          std::optional<long long> charged_minor,
                                                          OperationKind kind) {
    const auto c = store::load_candidate(m_db, tenant_id, subject_id, kind);
    if (!c) {
        return std::nullopt;
    }
    // A refund, capture or void is checked at its own amount; a charge at what an operator says
    // it charged, where one does.
    const bool refund = kind != OperationKind::charge;
    const std::string what(subject_noun(kind));
    const std::string verb = kind == OperationKind::refund               ? "refund"
                             : kind == OperationKind::capture            ? "capture"
                             : kind == OperationKind::void_authorization ? "void"
                                                                         : "charge";
    providers::Provider* provider = provider_named(c->payment.provider);
    if (provider == nullptr) {
        throw Refused(what + " " + subject_id + " belongs to provider '" + c->payment.provider +
                          "', which the configuration does not have",
                      "add it to the provider configuration to check the reference");
    }
    ReferenceCheck out;
    if (!can_look_up(provider->capabilities(), kind)) {
        out.detail = "provider " + provider->name() + " cannot be asked about a " + what;
        return out;
    }
    const providers::LookupResult lookup = look_up_operation(*provider, c->payment);
    switch (lookup.status) {
    case providers::LookupResult::Status::failed:
        out.verdict = ReferenceCheck::Verdict::lookup_failed;
        out.detail =
            "the provider's status query failed (" +
            (lookup.call.error_class.empty() ? std::string("no answer") : lookup.call.error_class) +
            ")";
        return out;
    case providers::LookupResult::Status::not_found:
        out.verdict = ReferenceCheck::Verdict::absent;
        out.detail = "the provider has no " + what + " for operation ID " + c->payment.operation_id;
        return out;
    case providers::LookupResult::Status::found:
        break;
    }
    std::vector<const providers::RemotePayment*> found{&*lookup.payment};
    for (const auto& d : lookup.duplicates) {
        found.push_back(&d);
    }
    const providers::RemotePayment* match = nullptr;
    for (const auto* p : found) {
        out.references.push_back(p->provider_reference);
        match = p->provider_reference == reference ? p : match;
    }
    if (match == nullptr) {
        out.verdict = ReferenceCheck::Verdict::other_reference;
        std::string refs;
        for (const auto& r : out.references) {
            refs += (refs.empty() ? "" : ", ") + r;
        }
        out.detail = "the provider's " + what + " for operation ID " + c->payment.operation_id +
                     " is " + refs + ", not " + reference;
        return out;
    }
    const long long expected =
        refund ? c->payment.amount_minor : charged_minor.value_or(c->payment.amount_minor);
    // A void releases the authorisation: what the provider says of its amount decides nothing.
    if (kind != OperationKind::void_authorization &&
        (match->amount.minor != expected ||
         !same_currency(match->amount.currency, c->payment.currency))) {
        out.verdict = ReferenceCheck::Verdict::mismatch;
        out.remote_amount_minor = match->amount.minor;
        out.remote_currency = match->amount.currency;
        out.detail =
            reference + " is " + describe_money(match->amount.minor, match->amount.currency) +
            " at the provider; " + (charged_minor && !refund ? "--amount says " : "ours is ") +
            describe_money(expected, c->payment.currency);
        return out;
    }
    if (remote_state_of(*match) != RemoteState::succeeded) {
        out.verdict = ReferenceCheck::Verdict::not_charged;
        out.detail =
            reference + " is " + match->raw_status + " at the provider: it did not " + verb;
        return out;
    }
    out.verdict = ReferenceCheck::Verdict::confirmed;
    out.detail = reference + " " + verb + (verb.back() == 'e' ? "d " : "ed ") +
                 describe_money(match->amount.minor, match->amount.currency) + " at the provider";
    return out;
}

} // namespace payrecon::engine
