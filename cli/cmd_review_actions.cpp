// payrecon review resolve | recheck | requeue, and payments cancel: an operator's decisions (DESIGN
// section 8). All are fenced: a payment that changed since it was shown is refused, never
// overwritten; each decision is one transaction with its audit row and outbox event.
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/payment_view.hpp"
#include "cli/reconcile_view.hpp"
#include "cli/table.hpp"
#include "core/errors.hpp"
#include "core/money.hpp"
#include "core/resolution_policy.hpp"
#include "engine/reconciler.hpp"
#include "providers/config.hpp"
#include "providers/registry.hpp"
#include "services/requeue.hpp"
#include "store/inspect_store.hpp"
#include "store/payment_store.hpp"
#include "store/reconcile_store.hpp"

#include <iostream>

namespace payrecon::cli {
namespace {

struct ResolveCliOptions {
    std::string id;
    long long generation = -1;
    std::string as;
    std::string note;
    std::string provider_reference;
    std::string amount; // major units of the payment's currency: what the provider charged
    bool confirm_no_charge = false;
    bool unverified = false;
    bool json = false;
};

struct CancelCliOptions {
    std::string id;
    long long generation = -1;
    std::string note;
    bool json = false;
};

struct RecheckCliOptions {
    std::string id;
    bool json = false;
};

struct RequeueCliOptions {
    std::string provider;
    std::optional<std::string> tenant;
    bool auth_failures = false;
    std::string note;
    bool dry_run = false;
    bool json = false;
};

store::PaymentRef find_ref(store::Db& db, const std::string& id) {
    const auto ref = store::resolve_payment_ref(db, id);
    if (!ref) {
        throw Refused("no payment has the ID " + id, "find it with: payrecon review list");
    }
    return *ref;
}

// What each registered kind calls its ID of a charge: "Stripe pi_..., Adyen pspReference, ...".
std::string provider_reference_names() {
    std::string out;
    for (const auto* d : providers::registered()) {
        out += (out.empty() ? "" : ", ") + std::string(d->display_name) + " " +
               std::string(d->reference_name);
    }
    return out;
}

// The flag an operator gives each part of a resolution with, for refusals.
std::string flag_of(ResolutionProblem::Part part) {
    switch (part) {
    case ResolutionProblem::Part::note:
        return "--note";
    case ResolutionProblem::Part::generation:
        return "--generation";
    case ResolutionProblem::Part::provider_reference:
        return "--provider-reference";
    case ResolutionProblem::Part::confirmation:
        return "--confirm-no-charge";
    }
    return "";
}

// Who touched the payment last, as the audit log has it: "; last recorded: review.recheck by
// recheck:alice at ...", or "" if nothing about it is recorded.
std::string last_change(store::Db& db, const store::PaymentRef& ref) {
    store::AuditFilter filter;
    filter.payment = ref;
    filter.limit = 1;
    const auto rows = store::list_audit(db, filter);
    if (rows.empty()) {
        return "";
    }
    return "; last recorded: " + rows.back().action + " by " + printable(rows.back().actor) +
           " at " + rows.back().at;
}

// Applies `r` (its decision set) to the payment `id` at `generation`, with the operator's note;
// prints the result, or throws saying why nothing was written. The rules are core's
// (resolution_policy); this only words a broken one in flags.
void decide(AppState& state, const std::string& id, long long generation, const std::string& note,
            store::Resolution r, bool json, const std::string& label) {
    const bool cancel = r.decision == OperatorDecision::cancel;
    const std::string show = cancel ? "payrecon payments show " : "payrecon review show ";
    r.note = note;
    r.generation = generation;
    if (const auto problem = check_resolution(
            {r.decision, r.note, r.provider_reference, r.confirmed_no_charge, r.generation})) {
        std::string hint;
        if (problem->part == ResolutionProblem::Part::generation) {
            hint = "give the generation `" + show + "<id>` printed";
        } else if (problem->part == ResolutionProblem::Part::provider_reference &&
                   r.decision == OperatorDecision::succeeded) {
            hint = "the provider's ID of the charge: " + provider_reference_names();
        }
        throw UsageError(flag_of(problem->part) + " " + problem->rule, hint);
    }
    r.operator_name = operator_name(state.global);

    OpenDatabase opened = open_database(state.global);
    const store::PaymentRef ref = find_ref(*opened.db, id);
    r.tenant_id = ref.tenant_id;
    r.payment_id = ref.payment_id;
    const store::ResolveResult result = store::resolve_payment(*opened.db, r);
    switch (result.status) {
    case store::ResolveResult::Status::applied:
        break;
    case store::ResolveResult::Status::not_found:
        throw Refused("no payment has the ID " + id, "find it with: payrecon payments list");
    case store::ResolveResult::Status::changed:
        throw Refused("payment " + ref.payment_id + " changed since it was shown: generation " +
                          std::to_string(generation) + " was given, it is now " +
                          std::to_string(result.generation) + " (" + result.state + ")" +
                          last_change(*opened.db, ref) + "; nothing was written",
                      "look again with: " + show + ref.payment_id);
    case store::ResolveResult::Status::not_resolvable:
        throw Refused(
            "payment " + ref.payment_id + " is " + result.state +
                (cancel ? ": only pending and retry_scheduled payments are canceled; a "
                          "payment in review is decided with payrecon review resolve"
                        : ": only unknown payments and payments in review are resolved by hand"),
            "payrecon payments show " + ref.payment_id);
    case store::ResolveResult::Status::reference_taken:
        throw Refused("the provider reference " + printable(*r.provider_reference) +
                          " already belongs to payment " + result.holder +
                          "; one charge settles one payment, and nothing was written",
                      "compare both: payrecon payments show " + result.holder +
                          "; give this payment's own reference");
    case store::ResolveResult::Status::maybe_sent:
        throw Refused("payment " + ref.payment_id +
                          " has an attempt that may have reached the provider; "
                          "it cannot be canceled as never sent, and nothing was written",
                      "let the worker and the reconciler finish it, or check the provider and "
                      "decide it once it is in review: payrecon payments show " +
                          ref.payment_id);
    }
    if (json) {
        print_json({{"payment_id", ref.payment_id},
                    {"state", result.state},
                    {"generation", result.generation},
                    {"operator", r.operator_name},
                    {"decision", label}});
        return;
    }
    std::cout << "payment " << ref.payment_id << " is now " << result.state << " (generation "
              << result.generation << "), " << (cancel ? "canceled" : "decided") << " by "
              << printable(r.operator_name) << "; recorded in the audit log\n";
    if (r.decision == OperatorDecision::retry) {
        std::cout << "a worker sends it again with the same operation ID\n";
    }
}

// Before a payment is resolved succeeded with a reference, the provider is asked what it holds
// for the payment's operation ID (where it can be asked, and a configuration names it): a typo, a
// reference the provider does not have for this payment, another amount, or a charge that did
// not happen is refused. --unverified takes the operator's word (the provider unreachable, or no
// configuration at hand), and says so in the audit note.
void check_reference_with_provider(AppState& state, const ResolveCliOptions& opts,
                                   std::optional<long long> charged_minor) {
    if (state.global.config_file.empty()) {
        std::cerr << "payrecon: the reference was not checked with the provider: no provider "
                     "configuration (--config, PAYRECON_CONFIG)\n";
        return;
    }
    const providers::Config config = load_provider_config(state.global);
    ProviderSet set = make_providers(choose_providers(config, {}));
    OpenDatabase opened = open_database(state.global);
    const store::PaymentRef ref = find_ref(*opened.db, opts.id);
    engine::Reconciler reconciler(*opened.db, set.pointers, {});
    const auto check = reconciler.check_reference(ref.tenant_id, ref.payment_id,
                                                  opts.provider_reference, charged_minor);
    if (!check) {
        throw Refused("no payment has the ID " + opts.id, "find it with: payrecon review list");
    }
    using V = engine::ReferenceCheck::Verdict;
    const std::string detail = printable(check->detail);
    const std::string override_hint =
        "if you checked the payment at the provider yourself, add --unverified and say what you "
        "saw in --note";
    switch (check->verdict) {
    case V::confirmed:
        return;
    case V::not_checked:
        std::cerr << "payrecon: the reference was not checked: " << detail << "\n";
        return;
    case V::lookup_failed:
        throw Refused("the reference could not be checked: " + detail + "; nothing was written",
                      "try again when the provider answers; " + override_hint);
    case V::absent:
        throw Refused(detail + " (asked just now): " + printable(opts.provider_reference) +
                          " cannot make it succeeded; nothing was written",
                      "check the reference; a provider's search can lag behind its charges, so "
                      "try again later, or " +
                          override_hint);
    case V::other_reference: {
        const std::string first = check->references.empty() ? "" : check->references.front();
        throw Refused(detail + "; nothing was written",
                      check->references.size() == 1
                          ? "resolve with the provider's reference: --provider-reference " +
                                printable(first)
                          : "the provider holds several payments for it: refund the extra ones, "
                            "then resolve with the one that stands");
    }
    case V::mismatch:
        throw Refused(detail + "; nothing was written",
                      "if the customer paid what the provider charged and that stands, record it "
                      "with --amount (in major units, e.g. --amount 8.80); else settle the "
                      "difference at the provider first (a refund), or " +
                          override_hint + ", both amounts included");
    case V::not_charged:
        throw Refused(detail + "; nothing was written",
                      "resolve --as failed if it will not charge, or payrecon review recheck " +
                          ref.payment_id + " once the provider has finished");
    }
}

// --amount in minor units of the payment's currency, or a UsageError saying how to write it.
long long charged_amount(AppState& state, const ResolveCliOptions& opts) {
    if (opts.as != "succeeded" || opts.provider_reference.empty()) {
        throw UsageError("--amount goes with --as succeeded and --provider-reference",
                         "it records what the provider really charged for this payment");
    }
    OpenDatabase opened = open_database(state.global);
    const store::PaymentRef ref = find_ref(*opened.db, opts.id);
    const auto payment = store::find_payment(*opened.db, ref.tenant_id, ref.payment_id);
    if (!payment) {
        throw Refused("no payment has the ID " + opts.id, "find it with: payrecon review list");
    }
    const auto minor = parse_major_units(opts.amount, payment->currency);
    if (!minor) {
        const auto example = major_units(payment->amount_minor, payment->currency);
        throw UsageError("--amount " + printable(opts.amount) + " is not an amount in " +
                             payment->currency,
                         "write it in major units of the payment's currency, as its amount is "
                         "written: " +
                             example.value_or(std::to_string(payment->amount_minor)));
    }
    return *minor;
}

void run_resolve(AppState& state, const ResolveCliOptions& opts) {
    const auto decision = parse_resolution(opts.as);
    if (!decision) {
        throw UsageError("--as must be succeeded, failed or retry");
    }
    if (opts.unverified && *decision != OperatorDecision::succeeded) {
        throw UsageError("--unverified goes with --as succeeded only",
                         "it takes your word for the provider reference");
    }
    std::optional<long long> charged;
    if (!opts.amount.empty()) {
        charged = charged_amount(state, opts);
    }
    if (*decision == OperatorDecision::succeeded && !opts.provider_reference.empty() &&
        !opts.unverified) {
        check_reference_with_provider(state, opts, charged);
    }
    store::Resolution r;
    r.decision = *decision;
    r.charged_amount_minor = charged;
    if (!opts.provider_reference.empty()) {
        r.provider_reference = opts.provider_reference;
    }
    r.confirmed_no_charge = opts.confirm_no_charge;
    // The audit note says when the reference was taken on the operator's word alone.
    // An empty note stays empty, so the rule that a note says what was checked still refuses it.
    const std::string note =
        opts.unverified && !trimmed_note(opts.note).empty()
            ? opts.note + " [reference not checked with the provider: --unverified]"
            : opts.note;
    decide(state, opts.id, opts.generation, note, r, opts.json, opts.as);
}

void run_cancel(AppState& state, const CancelCliOptions& opts) {
    store::Resolution r;
    r.decision = OperatorDecision::cancel;
    decide(state, opts.id, opts.generation, opts.note, r, opts.json, "cancel");
}

void run_recheck(AppState& state, const RecheckCliOptions& opts) {
    const providers::Config config = load_provider_config(state.global);
    ProviderSet set = make_providers(choose_providers(config, {}));
    OpenDatabase opened = open_database(state.global);
    const store::PaymentRef ref = find_ref(*opened.db, opts.id);
    engine::ReconcilerOptions ro;
    ro.actor = "recheck:" + operator_name(state.global);
    engine::Reconciler reconciler(*opened.db, set.pointers, ro);
    const auto outcome = reconciler.recheck(ref.tenant_id, ref.payment_id);
    if (!outcome) {
        throw Refused("no payment has the ID " + opts.id, "find it with: payrecon review list");
    }
    // The generation after the recheck: what the next resolve of it must give.
    const auto now = store::load_payment_record(*opened.db, ref);
    const long long generation = now ? now->payment.generation : 0;
    if (opts.json) {
        nlohmann::ordered_json j = outcome_json(*outcome);
        j["generation"] = generation;
        std::cout << j.dump(2) << std::endl;
    } else {
        std::cout << outcome_line(*outcome) << "\n"
                  << "generation now " << generation
                  << " (a resolve of this payment gives --generation " << generation << ")\n";
    }
    if (outcome->fenced_out) {
        throw Refused("payment " + ref.payment_id +
                          " changed while it was being rechecked; nothing was written",
                      "look again with: payrecon review show " + ref.payment_id);
    }
    if (outcome->to == PaymentState::needs_review) {
        state.exit_code = static_cast<int>(ExitCode::attention);
    }
}

std::string requeue_status(RequeuedPayment::Status status) {
    switch (status) {
    case RequeuedPayment::Status::requeued:
        return "requeued";
    case RequeuedPayment::Status::would_requeue:
        return "would_requeue";
    case RequeuedPayment::Status::changed:
        return "changed";
    case RequeuedPayment::Status::not_eligible:
        return "not_eligible";
    }
    return "changed";
}

void run_requeue(AppState& state, const RequeueCliOptions& opts) {
    if (!opts.auth_failures) {
        throw UsageError("review requeue sends again only payments whose provider refused our "
                         "credentials: give --auth-failures",
                         "any other request_rejected payment is decided one by one: payrecon "
                         "review show <id>");
    }
    if (!state.global.config_file.empty()) {
        const providers::Config config =
            providers::load_config(state.global.config_file, providers::ApiKeys::not_read);
        if (config.providers.find(opts.provider) == config.providers.end()) {
            throw UsageError("--provider " + opts.provider + " is not in " + config.source.string(),
                             "name one of the providers that file configures");
        }
    }
    if (!opts.dry_run && trimmed_note(opts.note).empty()) {
        throw UsageError("--note is needed: say what you fixed (recorded with every payment)",
                         "or look first with --dry-run");
    }
    OpenDatabase opened = open_database(state.global);
    RequeueRequest request;
    request.provider = opts.provider;
    request.tenant_id = tenant_id_or_refuse(*opened.db, opts.tenant);
    request.note = opts.note;
    request.operator_name = operator_name(state.global);
    request.dry_run = opts.dry_run;
    const RequeueResult result = requeue_credential_refusals(*opened.db, request);
    if (opts.json) {
        nlohmann::ordered_json j;
        j["provider"] = opts.provider;
        j["dry_run"] = opts.dry_run;
        j["requeued"] = result.requeued();
        j["changed"] = result.changed();
        j["left"] = result.left.size();
        j["payments"] = nlohmann::ordered_json::array();
        for (const auto& r : result.payments) {
            nlohmann::ordered_json e;
            e["payment_id"] = r.payment.payment_id;
            e["tenant_id"] = r.payment.tenant_id;
            e["status"] = requeue_status(r.status);
            e["http_status"] = r.payment.http_status.value_or(0);
            e["error_class"] = r.payment.error_class;
            e["state"] = r.state;
            e["generation"] = r.generation;
            if (!r.why.empty()) {
                e["why"] = r.why;
            }
            j["payments"].push_back(e);
        }
        j["left_payments"] = nlohmann::ordered_json::array();
        for (const auto& l : result.left) {
            j["left_payments"].push_back(l.payment_id);
        }
        print_json(j);
    } else {
        for (const auto& r : result.payments) {
            const store::RejectedPayment& p = r.payment;
            std::cout << requeue_status(r.status) << "  " << p.payment_id << "  "
                      << describe_money(p.amount_minor, p.currency) << "  refused with HTTP "
                      << p.http_status.value_or(0) << " (" << printable(p.error_class) << ") at "
                      << p.attempt_at << "  now " << r.state << ", generation " << r.generation
                      << (r.why.empty() ? "" : ": " + printable(r.why)) << "\n";
        }
        if (result.payments.empty()) {
            std::cout << "no payment of provider " << opts.provider
                      << " is in review because it refused our credentials\n";
        } else if (opts.dry_run) {
            std::cout << result.payments.size()
                      << " payment(s) would be requeued (dry run: nothing was written); without "
                         "--dry-run, and with --note, each becomes retry_scheduled\n";
        } else {
            std::cout << result.requeued()
                      << " payment(s) requeued: retry_scheduled and due now, each recorded in the "
                         "audit log (review.requeue); a worker sends each again with the same "
                         "operation ID\n";
        }
        if (!result.left.empty()) {
            std::cout << result.left.size() << " other payment(s) of " << opts.provider
                      << " in review as request_rejected were refused for another reason and are "
                         "left for you: payrecon review list --provider "
                      << opts.provider << "\n";
        }
    }
    if (result.changed() > 0) {
        throw Refused(std::to_string(result.changed()) +
                          " payment(s) changed since they were selected (decided or rechecked "
                          "meanwhile); nothing was written for them",
                      "look again: payrecon review list --provider " + opts.provider);
    }
}

} // namespace

void setup_review_actions(CLI::App& review, AppState& state) {
    auto ro = std::make_shared<ResolveCliOptions>();
    CLI::App* resolve = review.add_subcommand(
        "resolve", "decide an unknown or in-review payment: succeeded (with the provider's "
                   "reference), failed, or retry (send again: only when no charge exists)");
    resolve->add_option("id", ro->id, "payment ID or operation ID")->required();
    resolve
        ->add_option("--generation", ro->generation,
                     "the generation `review show` printed: refused if the payment changed since")
        ->required();
    resolve->add_option("--as", ro->as, "succeeded | failed | retry")
        ->required()
        ->check(CLI::IsMember({"succeeded", "failed", "retry"}));
    resolve->add_option("--note", ro->note, "what you checked and why (recorded in the audit log)")
        ->required();
    resolve->add_option("--provider-reference", ro->provider_reference,
                        "the provider's ID of the charge (with --as succeeded)");
    resolve->add_option("--amount", ro->amount,
                        "with --as succeeded: what the provider really charged, in major units of "
                        "the payment's currency (8.80), where it differs from what was asked; "
                        "checked with the provider, kept beside the amount asked, used by the "
                        "statement");
    resolve->add_flag(
        "--confirm-no-charge", ro->confirm_no_charge,
        "with --as retry: you confirmed the provider holds no charge for this payment");
    resolve->add_flag("--unverified", ro->unverified,
                      "with --as succeeded: take the reference without asking the provider "
                      "(unreachable, or you checked it yourself); recorded in the audit note");
    resolve->add_flag("--json", ro->json, "print JSON");
    resolve->callback([&state, ro] { run_resolve(state, *ro); });

    auto rc = std::make_shared<RecheckCliOptions>();
    CLI::App* recheck = review.add_subcommand(
        "recheck", "ask the provider about one payment now; adopts what it has (succeeded, "
                   "declined), else leaves the payment where it is with the new finding");
    recheck->add_option("id", rc->id, "payment ID or operation ID")->required();
    recheck->add_flag("--json", rc->json, "print JSON");
    recheck->callback([&state, rc] { run_recheck(state, *rc); });

    auto qo = std::make_shared<RequeueCliOptions>();
    CLI::App* requeue = review.add_subcommand(
        "requeue", "after a provider's credentials are fixed: send again every payment it put in "
                   "review by refusing them (request_rejected with HTTP 401/403: nothing was "
                   "executed), each fenced and audited on its own");
    requeue->add_option("--provider", qo->provider, "the configured provider")->required();
    requeue->add_flag("--auth-failures", qo->auth_failures,
                      "only payments whose latest attempt the provider refused with 401 or 403 "
                      "(required: other rejections are decided one by one)");
    requeue->add_option("--tenant", qo->tenant, "only this tenant's payments (name or ID)");
    requeue->add_option("--note", qo->note,
                        "what you fixed (recorded in the audit log with every payment)");
    requeue->add_flag("--dry-run", qo->dry_run, "list what would be requeued; write nothing");
    requeue->add_flag("--json", qo->json, "print JSON");
    requeue->callback([&state, qo] { run_requeue(state, *qo); });
}

void setup_payment_actions(CLI::App& payments, AppState& state) {
    auto co = std::make_shared<CancelCliOptions>();
    CLI::App* cancel = payments.add_subcommand(
        "cancel",
        "cancel a payment that was never sent (pending, or retry_scheduled with every "
        "attempt not sent): it becomes failed, with an audit row and a payment.failed event");
    cancel->add_option("id", co->id, "payment ID or operation ID")->required();
    cancel
        ->add_option("--generation", co->generation,
                     "the generation `payments show` printed: refused if the payment changed since")
        ->required();
    cancel->add_option("--note", co->note, "why (recorded in the audit log)")->required();
    cancel->add_flag("--json", co->json, "print JSON");
    cancel->callback([&state, co] { run_cancel(state, *co); });
}

} // namespace payrecon::cli
