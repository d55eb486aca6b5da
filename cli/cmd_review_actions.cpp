// payrecon review resolve | recheck | requeue, and payments cancel: an operator's decisions (DESIGN
// section 8). All are fenced: a payment that changed since it was shown is refused, never
// overwritten; each decision is one transaction with its audit row and outbox event. What a resolve
// needs and whether it is written is services/resolution's; this maps the flags onto its request
// and words its refusals in them, each next step a complete command. The bulk forms are loops over
// the single decision: `resolve --from FILE` (services/resolution_batch: one line, one resolve)
// and `recheck --provider P --code C` (engine's recheck_in_review: one payment, one recheck).
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/payment_view.hpp"
#include "cli/reconcile_view.hpp"
#include "cli/table.hpp"
#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "core/money.hpp"
#include "core/operator_commands.hpp"
#include "core/reconcile_policy.hpp"
#include "core/resolution_policy.hpp"
#include "engine/credential_gate.hpp"
#include "engine/reconciler.hpp"
#include "providers/config.hpp"
#include "providers/registry.hpp"
#include "services/inspect.hpp"
#include "services/requeue.hpp"
#include "services/resolution.hpp"
#include "services/resolution_batch.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>

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
    std::string from; // a file of decisions, one per line ("-": standard input)
    bool dry_run = false;
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
    std::string provider; // with code: every payment of it in review with that code
    std::string code;
    std::optional<std::string> tenant;
    int limit = 1000;
    bool dry_run = false;
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
    case ResolutionProblem::Part::amount:
        return "--amount";
    case ResolutionProblem::Part::unverified:
        return "--unverified";
    }
    return "";
}

// What a decision is about, for the operator's eyes: "payment <id>", "refund <id>", "capture
// <id>", "void <id>".
std::string noun_of(const ResolveOutcome& out) {
    return std::string(subject_noun(out.kind));
}
// The ID the commands that decide it take.
const std::string& subject_id(const ResolveOutcome& out) {
    return out.refund_id ? *out.refund_id : out.ref.payment_id;
}
std::string subject_of(const ResolveOutcome& out) {
    return noun_of(out) + " " + subject_id(out);
}
// Where an operator reads everything about it: payrecon payments|refunds|captures|voids show.
std::string show_command(const ResolveOutcome& out) {
    return "payrecon " + noun_of(out) + "s show " + subject_id(out);
}

// "8.80 EUR": an amount from anywhere, printable.
std::string money(long long minor, const std::string& currency) {
    return printable(describe_money(minor, currency));
}

// The complete command that resolves the payment of `out` as `request` asked, at its generation
// now, with `reference` and `charged_minor` in place of what was given where set.
std::string command_for(const ResolveRequest& request, const ResolveOutcome& out,
                        OperatorDecision decision,
                        const std::optional<std::string>& reference = std::nullopt,
                        std::optional<long long> charged_minor = std::nullopt,
                        bool unverified = false) {
    ResolveCommand c;
    c.payment_id = subject_id(out);
    c.generation = out.generation;
    c.decision = decision;
    if (decision == OperatorDecision::succeeded) {
        c.reference = reference ? reference : request.provider_reference;
        if (charged_minor) {
            c.charged_amount = major_units(*charged_minor, out.currency);
        } else if (!reference) {
            c.charged_amount = request.charged_amount;
        }
        c.unverified = unverified;
    }
    return printable(command_line(c));
}

// The refusal of a reference that what the provider was seen to hold contradicts.
Refused contradicted(const ResolveRequest& request, const ResolveOutcome& out) {
    using V = EvidenceCheck::Verdict;
    const SeenRecord& seen = *out.evidence.record;
    const std::string reference = printable(*request.provider_reference);
    const std::string where = " (seen in " + printable(seen.seen_in) + ")";
    const std::string nothing = "; nothing was written";
    const std::string failed = command_for(request, out, OperatorDecision::failed);
    switch (out.evidence.verdict) {
    case V::declined:
        return Refused(reference + " was declined at the provider" + where + ": it cannot make " +
                           subject_of(out) + " succeeded" + nothing,
                       "resolve it as failed: " + failed +
                           "; if it moved the money under another reference, resolve with that "
                           "one");
    case V::refunded:
        return Refused(reference + " was refunded at the provider" + where +
                           ": the charge no longer stands" + nothing,
                       "resolve it as failed: " + failed);
    case V::other_amount: {
        const long long theirs = seen.amount_minor.value_or(0);
        const bool given = out.charged_minor.has_value();
        const long long ours = out.charged_minor.value_or(out.amount_minor);
        return Refused(
            reference + " is " + money(theirs, out.currency) + " at the provider; " +
                (given ? "--amount says " : "ours is ") + money(ours, out.currency) + where +
                nothing,
            "if the customer paid what the provider charged and that stands, record it: " +
                command_for(request, out, OperatorDecision::succeeded, request.provider_reference,
                            theirs) +
                "; else settle the difference at the provider first (a refund)");
    }
    case V::other_currency:
        return Refused(reference + " is " +
                           money(seen.amount_minor.value_or(0), seen.currency.value_or("")) +
                           " at the provider, not in " + out.currency + where + nothing,
                       "settle it at the provider first (a refund), then: " + failed);
    case V::other_reference:
        return Refused("the provider's " + (out.refund_id ? noun_of(out) : "charge") +
                           " for this " + noun_of(out) + " is " +
                           printable(seen.reference.value_or("")) + where + ", not " + reference +
                           nothing,
                       "resolve with the provider's reference: " +
                           command_for(request, out, OperatorDecision::succeeded, seen.reference));
    case V::silent:
    case V::confirmed:
        break;
    }
    throw std::logic_error("contradicted: the evidence does not contradict the reference");
}

// The refusal of a reference nothing could check (and no --unverified).
Refused unchecked(const ResolveRequest& request, const ResolveOutcome& out) {
    const std::string why = !out.provider.detail.empty()
                                ? printable(out.provider.detail)
                                : std::string("no provider configuration to ask it with (--config, "
                                              "PAYRECON_CONFIG)");
    return Refused("the reference " + printable(*request.provider_reference) +
                       " could not be checked: " + why +
                       ", and nothing the provider sent (statements, webhooks, status queries) "
                       "names it; nothing was written",
                   "check the payment at the provider yourself (" + provider_reference_names() +
                       "); if it charged under this reference, take it on your word and say in "
                       "--note what you saw there: " +
                       command_for(request, out, OperatorDecision::succeeded, std::nullopt,
                                   std::nullopt, true));
}

// The refusal of a reference the provider, asked just now, does not confirm.
Refused provider_refused(const ResolveRequest& request, const ResolveOutcome& out) {
    using V = ReferenceCheck::Verdict;
    const ReferenceCheck& check = out.provider;
    const std::string detail = printable(check.detail);
    const std::string override_hint =
        "if you checked the payment at the provider yourself, take it on your word and say in "
        "--note what you saw: " +
        command_for(request, out, OperatorDecision::succeeded, std::nullopt, std::nullopt, true);
    switch (check.verdict) {
    case V::lookup_failed:
        return Refused("the reference could not be checked: " + detail + "; nothing was written",
                       "try again when the provider answers; " + override_hint);
    case V::absent:
        return Refused(detail + " (asked just now): " + printable(*request.provider_reference) +
                           " cannot make it succeeded; nothing was written",
                       "check the reference; a provider's search can lag behind its charges, so "
                       "try again later, or " +
                           override_hint);
    case V::other_reference:
        return Refused(detail + "; nothing was written",
                       check.references.size() == 1
                           ? "resolve with the provider's reference: " +
                                 command_for(request, out, OperatorDecision::succeeded,
                                             check.references.front())
                           : "the provider holds several payments for it: refund the extra ones, "
                             "then resolve with the one that stands");
    case V::mismatch: {
        const bool same =
            check.remote_amount_minor && same_currency(check.remote_currency, out.currency);
        return Refused(detail + "; nothing was written",
                       same ? "if the customer paid what the provider charged and that stands, "
                              "record it with --amount: " +
                                  command_for(request, out, OperatorDecision::succeeded,
                                              request.provider_reference,
                                              *check.remote_amount_minor) +
                                  "; else settle the difference at the provider first (a refund)"
                            : "settle the difference at the provider first (a refund), then: " +
                                  command_for(request, out, OperatorDecision::failed));
    }
    case V::not_charged:
        return Refused(
            detail + "; nothing was written",
            "if it will not charge: " + command_for(request, out, OperatorDecision::failed) +
                "; once the provider has finished: " + recheck_command(subject_id(out)));
    case V::confirmed:
    case V::not_checked:
        break;
    }
    throw std::logic_error("provider_refused: the provider confirmed the reference");
}

// The payment or operation changed since it was shown (or never had the generation given).
Refused changed(const ResolveRequest& request, const ResolveOutcome& out, const std::string& show) {
    if (request.generation > out.generation) {
        // Not a change since it was shown: the payment never had that generation.
        return Refused("generation " + std::to_string(request.generation) + " is not " +
                           subject_of(out) + "'s: it is at generation " +
                           std::to_string(out.generation) + " (" + out.state +
                           "), and generations only grow; nothing was written",
                       "give the generation `" + show + subject_id(out) + "` prints");
    }
    std::string last;
    if (out.last_change) {
        last = "; last recorded: " + out.last_change->action + " by " +
               printable(out.last_change->actor) + " at " + out.last_change->at;
    }
    return Refused(subject_of(out) + " changed since it was shown: generation " +
                       std::to_string(request.generation) + " was given, it is now " +
                       std::to_string(out.generation) + " (" + out.state + ")" + last +
                       "; nothing was written",
                   "look again with: " + show + subject_id(out));
}

// The provider reference given already settles another payment or operation of ours.
Refused reference_taken(const ResolveRequest& request, const ResolveOutcome& out) {
    if (out.refund_id) {
        return Refused("the provider reference " + printable(*request.provider_reference) +
                           " already belongs to " + noun_of(out) + " " + out.holder + "; one " +
                           noun_of(out) +
                           " at the provider settles one of ours, and nothing was written",
                       "compare both: payrecon " + noun_of(out) + "s show " + out.holder +
                           "; give this " + noun_of(out) + "'s own reference");
    }
    return Refused("the provider reference " + printable(*request.provider_reference) +
                       " already belongs to payment " + out.holder +
                       "; one charge settles one payment, and nothing was written",
                   "compare both: payrecon payments show " + out.holder +
                       "; give this payment's own reference");
}

// The provider holds the charge or operation an operator asked to record as never sent: sending it
// again would do it twice.
Refused provider_holds(const ResolveRequest& request, const ResolveOutcome& out) {
    const SeenRecord& seen = *out.evidence.record;
    if (out.refund_id) {
        const bool refund = out.kind == OperationKind::refund;
        return Refused("the provider holds a " + noun_of(out) + " for " + subject_of(out) + ": " +
                           printable(seen.reference.value_or("(no reference)")) +
                           (refund ? " refunded" : " done") + " (seen in " +
                           printable(seen.seen_in) + "); sending it again would " +
                           (refund ? std::string("refund the customer twice")
                                   : "do it twice at the provider") +
                           ", and nothing was written",
                       "resolve it as succeeded with that reference: " +
                           command_for(request, out, OperatorDecision::succeeded, seen.reference));
    }
    return Refused("the provider holds a charge for payment " + out.ref.payment_id + ": " +
                       printable(seen.reference.value_or("(no reference)")) +
                       (seen.amount_minor && seen.currency
                            ? " of " + money(*seen.amount_minor, *seen.currency)
                            : std::string()) +
                       " charged (seen in " + printable(seen.seen_in) +
                       "); sending it again would charge the customer twice, and nothing was "
                       "written",
                   "resolve it as succeeded with that reference: " +
                       command_for(request, out, OperatorDecision::succeeded, seen.reference,
                                   seen.amount_minor && *seen.amount_minor != out.amount_minor
                                       ? seen.amount_minor
                                       : std::nullopt));
}

// Throws the refusal of `out` (not applied), in the flags of the command `request` came from.
[[noreturn]] void refuse(const ResolveRequest& request, const ResolveOutcome& out) {
    using S = ResolveOutcome::Status;
    const bool cancel = request.decision == OperatorDecision::cancel;
    const std::string show = cancel ? "payrecon payments show " : "payrecon review show ";
    switch (out.status) {
    case S::applied:
    case S::would_apply:
        break;
    case S::invalid: {
        std::string hint;
        if (out.problem->part == ResolutionProblem::Part::generation) {
            hint = "give the generation `" + show + shell_word(request.id) + "` prints";
        } else if (out.problem->part == ResolutionProblem::Part::provider_reference &&
                   request.decision == OperatorDecision::succeeded) {
            hint = "the provider's ID of the charge: " + provider_reference_names();
        }
        throw UsageError(flag_of(out.problem->part) + " " + out.problem->rule, hint);
    }
    case S::bad_amount:
        throw UsageError("--amount " + printable(*request.charged_amount) +
                             " is not an amount in " + out.currency,
                         "write it in major units of the payment's currency, as its amount is "
                         "written: " +
                             *out.amount_example);
    case S::not_found:
        throw Refused("no payment or refund has the ID " + printable(request.id),
                      cancel ? "find it with: payrecon payments list"
                             : "find it with: payrecon review list");
    case S::changed:
        throw changed(request, out, show);
    case S::not_resolvable:
        throw Refused(subject_of(out) + " is " + out.state +
                          (cancel ? ": only pending and retry_scheduled payments are canceled; a "
                                    "payment in review is decided with review resolve"
                                  : ": only unknown payments and refunds and those in review are "
                                    "resolved by hand"),
                      out.state == to_string(PaymentState::needs_review)
                          ? "its decisions, complete: " + review_show_command(subject_id(out))
                          : show_command(out));
    case S::reference_taken:
        throw reference_taken(request, out);
    case S::not_for_refund:
        throw UsageError("--amount records what a charge took; a " + noun_of(out) +
                             " is decided for its own amount (" +
                             money(out.amount_minor, out.currency) + ")",
                         std::string("if the provider ") +
                             (out.kind == OperationKind::refund ? "refunded" : "captured") +
                             " another amount, resolve the " + noun_of(out) +
                             " as failed and create one for what it did");
    case S::maybe_sent:
        throw Refused("payment " + out.ref.payment_id +
                          " has an attempt that may have reached the provider; "
                          "it cannot be canceled as never sent, and nothing was written",
                      "let the worker and the reconciler finish it, or check the provider and "
                      "decide it once it is in review: payrecon payments show " +
                          out.ref.payment_id);
    case S::charge_seen:
        throw provider_holds(request, out);
    case S::contradicted:
        throw contradicted(request, out);
    case S::unchecked:
        throw unchecked(request, out);
    case S::provider_refused:
        throw provider_refused(request, out);
    }
    throw std::logic_error("refuse: the resolution was applied");
}

// The provider of the payment asked about a reference through `db`, from the configuration
// (--config), read and its providers made at the first question only (a file of decisions asks
// many); empty without a configuration.
AskProvider ask_provider(AppState& state, store::Db& db) {
    if (state.global.config_file.empty()) {
        return {};
    }
    struct Asking {
        ProviderSet set;
        std::unique_ptr<engine::Reconciler> reconciler;
    };
    auto asking = std::make_shared<Asking>();
    return [&state, &db, asking](const store::PaymentRef& ref, OperationKind kind,
                                 const std::string& subject, const std::string& reference,
                                 std::optional<long long> charged_minor) {
        if (!asking->reconciler) {
            const providers::Config config = load_provider_config(state.global);
            asking->set = make_providers(choose_providers(config, {}));
            asking->reconciler = std::make_unique<engine::Reconciler>(db, asking->set.pointers,
                                                                      engine::ReconcilerOptions{});
        }
        const auto check = asking->reconciler->check_reference(ref.tenant_id, subject, reference,
                                                               charged_minor, kind);
        if (!check) {
            throw Refused(std::string(subject_noun(kind)) + " " + subject + " is gone",
                          "find it with: payrecon review list");
        }
        return *check;
    };
}

// "evidence", "provider", "unverified", or null: how the reference of a decision was checked.
nlohmann::json checked_json(ReferenceChecked checked) {
    switch (checked) {
    case ReferenceChecked::not_needed:
        break;
    case ReferenceChecked::evidence:
        return "evidence";
    case ReferenceChecked::provider:
        return "provider";
    case ReferenceChecked::unverified:
        return "unverified";
    }
    return nullptr;
}

// How the reference of an applied decision was checked, in words; empty where none was needed.
std::string checked_text(const ResolveOutcome& out) {
    switch (out.checked) {
    case ReferenceChecked::not_needed:
        break;
    case ReferenceChecked::evidence:
        return "the reference agrees with " + printable(out.evidence.record->seen_in);
    case ReferenceChecked::provider:
        return "the provider confirmed the reference: " + printable(out.provider.detail);
    case ReferenceChecked::unverified:
        return "the reference was taken on your word (--unverified); the audit note says so";
    }
    return "";
}

// Decides `request` (the service's rules) and prints what was done, or throws why nothing was.
void decide(AppState& state, ResolveRequest request, bool json, const std::string& label) {
    request.operator_name = operator_name(state.global);
    OpenDatabase opened = open_database(state.global);
    const ResolveOutcome out = resolve(*opened.db, request, ask_provider(state, *opened.db));
    const bool dry_run = out.status == ResolveOutcome::Status::would_apply;
    if (out.status != ResolveOutcome::Status::applied && !dry_run) {
        refuse(request, out);
    }
    const bool cancel = request.decision == OperatorDecision::cancel;
    if (json) {
        nlohmann::json j = {{"payment_id", out.ref.payment_id},
                            {"state", out.state},
                            {"generation", out.generation},
                            {"operator", request.operator_name},
                            {"decision", label},
                            {"dry_run", dry_run},
                            {"reference_checked", checked_json(out.checked)}};
        if (out.refund_id) {
            j[noun_of(out) + "_id"] = *out.refund_id;
        }
        print_json(j);
        return;
    }
    if (dry_run) {
        std::cout << "dry run: " << subject_of(out) << " would become " << out.state
                  << " (generation " << out.generation
                  << "); every check passed, nothing was written\n";
    } else {
        std::cout << subject_of(out) << " is now " << out.state << " (generation " << out.generation
                  << "), " << (cancel ? "canceled" : "decided") << " by "
                  << printable(request.operator_name) << "; recorded in the audit log\n";
        if (out.refund_id && out.state == to_string(PaymentState::failed)) {
            std::cout << "its amount is "
                      << (out.kind == OperationKind::refund ? "refundable" : "free")
                      << " again on payment " << out.ref.payment_id << "\n";
        }
    }
    if (const std::string checked = checked_text(out); !checked.empty()) {
        std::cout << checked << "\n";
    }
    if (dry_run) {
        return;
    }
    if (request.decision == OperatorDecision::retry) {
        std::cout << "scheduled for a re-send with the same operation ID: the next worker run "
                     "sends it (payrecon worker --once sends what is due now)\n";
    }
}

// The refusal of one decided line, as the single command words it: what, and what to do.
std::pair<std::string, std::string> refusal_of(const DecidedLine& d) {
    if (d.refused) {
        return {printable(*d.refused), printable(d.hint)};
    }
    try {
        refuse(d.request, d.outcome);
    } catch (const OperatorError& e) {
        return {e.what(), e.hint()};
    }
    return {"refused", ""};
}

// `review resolve --from FILE`: the file checked whole, then each line decided on its own
// (services/resolution_batch), each printed as it is decided, and the count.
void run_resolve_from(AppState& state, const ResolveCliOptions& opts) {
    DecisionFile file;
    const std::string source = opts.from == "-" ? "standard input" : opts.from;
    if (opts.from == "-") {
        file = read_decisions(std::cin);
    } else {
        std::ifstream in(opts.from);
        if (!in) {
            throw UsageError("cannot read --from " + printable(opts.from) + ": " +
                                 std::strerror(errno),
                             "give a file of decisions, one per line, or - for standard input");
        }
        file = read_decisions(in);
    }
    const std::string format_hint = "one JSON object per line: {\"payment_id\": \"...\", "
                                    "\"generation\": 3, \"as\": \"failed\", \"note\": "
                                    "\"...\"}; docs/operations.md, \"Deciding many payments at "
                                    "once\"";
    if (!file.problems.empty()) {
        constexpr std::size_t k_shown = 20;
        std::string what = printable(source) + ": " + std::to_string(file.problems.size()) +
                           " line(s) are not a decision; nothing was decided:";
        for (std::size_t i = 0; i < file.problems.size() && i < k_shown; ++i) {
            what +=
                "\n  line " + std::to_string(file.problems[i].line) + ": " + file.problems[i].what;
        }
        if (file.problems.size() > k_shown) {
            what += "\n  ... and " + std::to_string(file.problems.size() - k_shown) + " more";
        }
        throw UsageError(what, "correct those lines and run it again; " + format_hint);
    }
    if (file.decisions.empty()) {
        throw UsageError(printable(source) + " holds no decision", format_hint);
    }
    const std::string actor = operator_name(state.global);
    OpenDatabase opened = open_database(state.global);
    nlohmann::ordered_json lines = nlohmann::ordered_json::array();
    const std::vector<DecidedLine> decided = resolve_each(
        *opened.db, file.decisions, actor, opts.dry_run, ask_provider(state, *opened.db),
        [&](const DecidedLine& d) {
            nlohmann::ordered_json j;
            j["line"] = d.line;
            j["payment_id"] =
                d.outcome.ref.payment_id.empty() ? d.request.id : d.outcome.ref.payment_id;
            j["decision"] = std::string(to_string(d.request.decision));
            if (d.applied()) {
                j["status"] = opts.dry_run ? "would_apply" : "applied";
                j["state"] = d.outcome.state;
                j["generation"] = d.outcome.generation;
                j["reference_checked"] = checked_json(d.outcome.checked);
                if (!opts.json) {
                    std::cout << "line " << d.line << ": payment " << d.outcome.ref.payment_id
                              << (opts.dry_run ? " would become " : " is now ") << d.outcome.state
                              << " (generation " << d.outcome.generation << ")";
                    if (const std::string checked = checked_text(d.outcome); !checked.empty()) {
                        std::cout << "; " << checked;
                    }
                    std::cout << std::endl;
                }
            } else {
                const auto [what, hint] = refusal_of(d);
                j["status"] = "refused";
                j["error"] = what;
                j["hint"] = hint;
                if (!opts.json) {
                    std::cout << "line " << d.line << ": REFUSED: " << what << "\n"
                              << "  what to do: " << hint << std::endl;
                }
            }
            lines.push_back(std::move(j));
        });
    const auto applied = static_cast<long long>(std::count_if(
        decided.begin(), decided.end(), [](const DecidedLine& d) { return d.applied(); }));
    const long long refused = static_cast<long long>(decided.size()) - applied;
    if (opts.json) {
        nlohmann::ordered_json j;
        j["dry_run"] = opts.dry_run;
        j["operator"] = actor;
        j["decisions"] = decided.size();
        j[opts.dry_run ? "would_apply" : "applied"] = applied;
        j["refused"] = refused;
        j["lines"] = std::move(lines);
        std::cout << j.dump(2) << std::endl;
    } else if (opts.dry_run) {
        std::cout << "dry run: " << applied << " of " << decided.size()
                  << " decision(s) would be applied, " << refused
                  << " refused; nothing was written\n";
    } else {
        std::cout << applied << " of " << decided.size() << " decision(s) applied, " << refused
                  << " refused; each applied one is recorded in the audit log on its own\n";
    }
    if (refused > 0) {
        throw Refused(std::to_string(refused) + " of " + std::to_string(decided.size()) +
                          " decision(s) " + (opts.dry_run ? "would be " : "were ") +
                          "refused (each above, with what to do)" +
                          (opts.dry_run || applied == 0 ? "" : "; the others were applied"),
                      "correct those lines, or decide those payments one by one: payrecon review "
                      "show <id>");
    }
}

void run_resolve(AppState& state, const ResolveCliOptions& opts, const CLI::App& command) {
    const std::vector<std::string> per_decision = {
        "--generation",        "--as",        "--note", "--provider-reference", "--amount",
        "--confirm-no-charge", "--unverified"};
    if (!opts.from.empty()) {
        for (const auto& flag : per_decision) {
            if (command.count(flag) > 0) {
                throw UsageError("with --from, each line carries its own decision: " + flag +
                                 " goes into the line's JSON, not on the command line");
            }
        }
        if (!opts.id.empty()) {
            throw UsageError("give either a payment ID or --from FILE, not both");
        }
        run_resolve_from(state, opts);
        return;
    }
    if (opts.id.empty()) {
        throw UsageError("review resolve decides the payment its ID names, or every line of "
                         "--from FILE",
                         "payrecon review show <id> prints the complete command for a payment");
    }
    for (const char* flag : {"--generation", "--as", "--note"}) {
        if (command.count(flag) == 0) {
            throw UsageError(std::string(flag) + " is required",
                             "payrecon review show " + shell_word(opts.id) +
                                 " prints the complete command");
        }
    }
    const auto decision = parse_resolution(opts.as);
    if (!decision) {
        throw UsageError("--as must be succeeded, failed or retry");
    }
    ResolveRequest r;
    r.id = opts.id;
    r.decision = *decision;
    r.generation = opts.generation;
    r.note = opts.note;
    if (!opts.provider_reference.empty()) {
        r.provider_reference = opts.provider_reference;
    }
    if (!opts.amount.empty()) {
        r.charged_amount = opts.amount;
    }
    r.confirmed_no_charge = opts.confirm_no_charge;
    r.unverified = opts.unverified;
    r.dry_run = opts.dry_run;
    decide(state, std::move(r), opts.json, opts.as);
}

void run_cancel(AppState& state, const CancelCliOptions& opts) {
    ResolveRequest r;
    r.id = opts.id;
    r.decision = OperatorDecision::cancel;
    r.generation = opts.generation;
    r.note = opts.note;
    decide(state, std::move(r), opts.json, "cancel");
}

std::string rechecked_status(engine::Reconciler::Rechecked::Status status) {
    using S = engine::Reconciler::Rechecked::Status;
    switch (status) {
    case S::rechecked:
        return "rechecked";
    case S::would_recheck:
        return "would_recheck";
    case S::changed:
        return "changed";
    case S::not_asked:
        return "not_asked";
    }
    return "changed";
}

// The review code `review recheck --provider P --code C` selects by, once its flags are checked.
ReviewCode selected_code(const RecheckCliOptions& opts) {
    if (opts.provider.empty() && opts.code.empty()) {
        throw UsageError("review recheck asks about the payment its ID names, or about every "
                         "payment of --provider in review with --code",
                         "payrecon review recheck <id>, or e.g. payrecon review recheck "
                         "--provider stripe --code lookup_failing --dry-run");
    }
    if (opts.provider.empty() || opts.code.empty()) {
        throw UsageError("a recheck of many payments selects them with both --provider and --code",
                         "e.g. payrecon review recheck --provider stripe --code lookup_failing "
                         "--dry-run");
    }
    const auto code = parse_review_code(opts.code);
    if (!code) {
        std::string codes;
        for (const ReviewCode c : k_all_review_codes) {
            codes += (codes.empty() ? "" : ", ") + std::string(to_string(c));
        }
        throw UsageError("--code " + printable(opts.code) + " is not a review code",
                         "one of: " + codes);
    }
    if (opts.limit < 1) {
        throw UsageError("--limit must be at least 1");
    }
    return *code;
}

// "refund 0193..." or the payment's ID.
std::string subject_of(const store::ReviewItem& p) {
    return p.kind == OperationKind::charge ? p.payment_id
                                           : std::string(subject_noun(p.kind)) + " " + p.refund_id;
}

// One payment or refund of a recheck of many, as it is handled.
void print_rechecked(const engine::Reconciler::Rechecked& r) {
    using S = engine::Reconciler::Rechecked::Status;
    const store::ReviewItem& p = r.payment;
    switch (r.status) {
    case S::would_recheck:
        std::cout << "would recheck  " << subject_of(p) << "  " << money(p.amount_minor, p.currency)
                  << "  in review since " << p.in_review_since << "  generation " << p.generation
                  << "  " << printable(p.review_reason) << "\n";
        break;
    case S::rechecked:
        std::cout << "rechecked  " << outcome_line(*r.outcome) << "  generation now "
                  << r.generation << "\n";
        break;
    case S::changed:
        std::cout << "changed  " << subject_of(p) << "  generation " << p.generation
                  << " was selected, it is now " << r.generation << " (" << r.state
                  << "): asked nothing, wrote nothing\n";
        break;
    case S::not_asked:
        std::cout << "not asked  " << subject_of(p) << "  (the provider refused our credentials)\n";
        break;
    }
    std::cout << std::flush;
}

// What a recheck of many came to, counted.
struct RecheckTally {
    long long rechecked = 0;
    long long still_in_review = 0;
    long long changed = 0;
    long long not_asked = 0;
    std::map<std::string, long long> settled; // state -> payments
};

RecheckTally tally(const std::vector<engine::Reconciler::Rechecked>& payments) {
    using S = engine::Reconciler::Rechecked::Status;
    RecheckTally t;
    for (const auto& r : payments) {
        switch (r.status) {
        case S::would_recheck:
            break;
        case S::rechecked:
            ++t.rechecked;
            if (r.outcome->to == PaymentState::needs_review) {
                ++t.still_in_review;
            } else {
                ++t.settled[std::string(to_string(r.outcome->to))];
            }
            break;
        case S::changed:
            ++t.changed;
            break;
        case S::not_asked:
            ++t.not_asked;
            break;
        }
    }
    return t;
}

void print_recheck_json(const RecheckCliOptions& opts,
                        const engine::Reconciler::InReviewResult& result, const RecheckTally& t) {
    using S = engine::Reconciler::Rechecked::Status;
    nlohmann::ordered_json j;
    j["provider"] = opts.provider;
    j["code"] = opts.code;
    j["dry_run"] = opts.dry_run;
    j["selected"] = result.payments.size();
    j["more"] = result.more;
    j["rechecked"] = t.rechecked;
    j["settled"] = t.settled;
    j["still_in_review"] = t.still_in_review;
    j["changed"] = t.changed;
    j["not_asked"] = t.not_asked;
    j["payments"] = nlohmann::ordered_json::array();
    for (const auto& r : result.payments) {
        nlohmann::ordered_json e;
        e["kind"] = to_string(r.payment.kind);
        e["payment_id"] = r.payment.payment_id;
        if (r.payment.kind != OperationKind::charge) {
            e[std::string(subject_noun(r.payment.kind)) + "_id"] = r.payment.refund_id;
        }
        e["tenant_id"] = r.payment.tenant_id;
        e["status"] = rechecked_status(r.status);
        e["selected_generation"] = r.payment.generation;
        e["state"] = r.state;
        e["generation"] = r.generation;
        if (r.outcome && r.status == S::rechecked) {
            e["outcome"] = outcome_json(*r.outcome);
        }
        j["payments"].push_back(std::move(e));
    }
    std::cout << j.dump(2) << std::endl;
}

void print_recheck_summary(const RecheckCliOptions& opts,
                           const engine::Reconciler::InReviewResult& result,
                           const RecheckTally& t) {
    // "3 payment(s)", "2 payment(s) and 1 refund(s)", "1 refund(s)", in the kinds' order.
    std::map<OperationKind, long long> by_kind;
    for (const auto& r : result.payments) {
        ++by_kind[r.payment.kind];
    }
    std::string counted;
    std::size_t told = 0;
    for (const auto& [kind, n] : by_kind) {
        ++told;
        counted += (counted.empty()          ? ""
                    : told == by_kind.size() ? " and "
                                             : ", ") +
                   std::to_string(n) + " " + std::string(subject_noun(kind)) + "(s)";
    }
    const std::string what = " of " + opts.provider + " in review as " + opts.code;
    if (result.payments.empty()) {
        std::cout << "no payment(s) or refund(s)" << what << "\n";
    } else if (opts.dry_run) {
        std::cout << "dry run: " << counted << what
                  << " would be rechecked, each asked on its own and fenced by the generation "
                     "shown; nothing was asked or written\n";
    } else {
        std::string outcomes;
        for (const auto& [to, n] : t.settled) {
            outcomes += (outcomes.empty() ? "" : ", ") + std::to_string(n) + " " + to;
        }
        std::cout << t.rechecked << " of " << counted << what
                  << " rechecked: " << (outcomes.empty() ? "none settled" : outcomes) << ", "
                  << t.still_in_review
                  << " still in review; each recheck is recorded in the audit log on its own\n";
    }
}

// `review recheck --provider P --code C`: each payment of P in review as C rechecked on its own
// (engine's recheck_in_review), printed as it is, and the count.
void run_recheck_selected(AppState& state, const RecheckCliOptions& opts) {
    const ReviewCode code = selected_code(opts);
    const providers::Config config = load_provider_config(state.global);
    const auto chosen = choose_providers(config, {opts.provider});
    ProviderSet set = make_providers(chosen);
    engine::CredentialGate credentials(
        std::map<std::string, std::string>{{opts.provider, credentials_hint(*chosen.front())}});
    OpenDatabase opened = open_database(state.global);
    engine::ReconcilerOptions ro;
    ro.actor = "recheck:" + operator_name(state.global);
    ro.credentials = &credentials;
    engine::Reconciler reconciler(*opened.db, set.pointers, ro);
    engine::Reconciler::InReview selection;
    selection.provider = opts.provider;
    selection.code = code;
    selection.tenant_id = tenant_id_or_refuse(*opened.db, opts.tenant);
    selection.limit = opts.limit;
    selection.dry_run = opts.dry_run;
    const auto result =
        reconciler.recheck_in_review(selection, [&](const engine::Reconciler::Rechecked& r) {
            if (!opts.json) {
                print_rechecked(r);
            }
        });
    const RecheckTally t = tally(result.payments);
    if (opts.json) {
        print_recheck_json(opts, result, t);
    } else {
        print_recheck_summary(opts, result, t);
    }
    // A selection cut short by --limit is said after the JSON too: it must not pass unnoticed.
    if (result.more) {
        std::cout << "more payments match than --limit " << opts.limit
                  << " let through: run it again for the next ones\n";
    }
    if (!reconciler.credentials_refused().empty()) {
        throw engine::credentials_error(reconciler.credentials_refused(),
                                        std::to_string(t.not_asked) +
                                            " payment(s) after it were asked nothing and stay in "
                                            "review",
                                        "run the same command again");
    }
    if (t.changed > 0) {
        throw Refused(std::to_string(t.changed) +
                          " payment(s) changed since they were selected (decided or rechecked "
                          "meanwhile); nothing was asked or written for them",
                      "look again: payrecon review list --provider " + opts.provider);
    }
    if (t.still_in_review > 0) {
        state.exit_code = static_cast<int>(ExitCode::attention);
    }
}

void run_recheck(AppState& state, const RecheckCliOptions& opts) {
    if (opts.id.empty() || !opts.provider.empty() || !opts.code.empty()) {
        if (!opts.id.empty()) {
            throw UsageError("give either a payment ID or --provider and --code, not both");
        }
        run_recheck_selected(state, opts);
        return;
    }
    if (opts.tenant || opts.dry_run) {
        throw UsageError("--tenant and --dry-run go with --provider and --code");
    }
    const providers::Config config = load_provider_config(state.global);
    ProviderSet set = make_providers(choose_providers(config, {}));
    OpenDatabase opened = open_database(state.global);
    // A payment's ID, or a refund's, capture's or void's: rechecked alike, each with its kind's
    // lookup.
    store::PaymentRef ref;
    std::optional<store::OperationRow> operation;
    if (const auto found = find_payment_ref(*opened.db, opts.id)) {
        ref = *found;
    } else if ((operation = find_any_operation(*opened.db, opts.id))) {
        ref = {operation->tenant_id, operation->payment_id};
    } else {
        throw Refused("no payment, refund, capture or void has the ID " + opts.id,
                      "find it with: payrecon review list");
    }
    const OperationKind kind = operation ? operation->kind : OperationKind::charge;
    const std::string subject = operation ? operation->id : ref.payment_id;
    const std::string what(subject_noun(kind));
    engine::ReconcilerOptions ro;
    ro.actor = "recheck:" + operator_name(state.global);
    engine::Reconciler reconciler(*opened.db, set.pointers, ro);
    const auto outcome = reconciler.recheck(ref.tenant_id, subject, std::nullopt, kind);
    if (!outcome) {
        throw Refused("no " + what + " has the ID " + opts.id,
                      "find it with: payrecon review list");
    }
    // The generation after the recheck: what the next resolve of it must give.
    long long generation = 0;
    if (operation) {
        const auto now = find_any_operation(*opened.db, subject);
        generation = now ? now->generation : 0;
    } else {
        const auto now = payment_record(*opened.db, ref);
        generation = now ? now->payment.generation : 0;
    }
    if (opts.json) {
        nlohmann::ordered_json j = outcome_json(*outcome);
        j["generation"] = generation;
        std::cout << j.dump(2) << std::endl;
    } else {
        std::cout << outcome_line(*outcome) << "\n"
                  << "generation now " << generation << " (a resolve of this " << what
                  << " gives --generation " << generation << ")\n";
        // What the recheck did, and what it did not: it asks, it never sends.
        if (outcome->applied && outcome->to == PaymentState::retry_scheduled) {
            std::cout << "nothing was sent: the " << what
                      << " is scheduled for a re-send with the same operation ID by the next "
                         "worker run (payrecon worker --once sends what is due now)\n";
        } else if (outcome->applied && outcome->to == PaymentState::needs_review) {
            std::cout << "still in review; its decisions, complete: "
                      << review_show_command(subject) << "\n";
        }
    }
    if (outcome->fenced_out) {
        throw Refused(what + " " + subject +
                          " changed while it was being rechecked; nothing was written",
                      "look again with: payrecon review show " + subject);
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
    RequeueRequest request;
    request.provider = opts.provider;
    request.note = opts.note;
    request.dry_run = opts.dry_run;
    if (note_missing(request)) {
        throw UsageError("--note is needed: say what you fixed (recorded with every payment)",
                         "or look first with --dry-run");
    }
    OpenDatabase opened = open_database(state.global);
    request.tenant_id = tenant_id_or_refuse(*opened.db, opts.tenant);
    request.operator_name = operator_name(state.global);
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
    resolve->add_option("id", ro->id, "payment ID or operation ID (or --from FILE)");
    resolve->add_option(
        "--generation", ro->generation,
        "the generation `review show` printed: refused if the payment changed since (required)");
    resolve->add_option("--as", ro->as, "succeeded | failed | retry (required)")
        ->check(CLI::IsMember({"succeeded", "failed", "retry"}));
    resolve->add_option("--note", ro->note,
                        "what you checked and why (recorded in the audit log; required)");
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
                      "with --as succeeded: take the reference on your word where nothing can "
                      "check it (no lookup, no configuration, the provider unreachable: you "
                      "checked it yourself); recorded in the audit note; never over a record of "
                      "the provider that contradicts it");
    resolve->add_option("--from", ro->from,
                        "decide many payments: a file (- for standard input) of JSON lines, one "
                        "decision each: {\"payment_id\", \"generation\", \"as\", \"note\", "
                        "\"provider_reference\", \"amount\", \"confirm_no_charge\", "
                        "\"unverified\"}; the file is checked whole first, then each line decided "
                        "on its own (docs/operations.md)");
    resolve->add_flag("--dry-run", ro->dry_run,
                      "make every check (generation, evidence, provider), write nothing");
    resolve->add_flag("--json", ro->json, "print JSON");
    resolve->callback([&state, ro, resolve] { run_resolve(state, *ro, *resolve); });

    auto rc = std::make_shared<RecheckCliOptions>();
    CLI::App* recheck = review.add_subcommand(
        "recheck", "ask the provider about one payment now (or each of a provider's payments in "
                   "review with one code); adopts what it has (succeeded, declined), else leaves "
                   "the payment where it is with the new finding");
    recheck->add_option("id", rc->id, "payment ID or operation ID (or --provider and --code)");
    recheck->add_option("--provider", rc->provider,
                        "with --code: every payment of this configured provider in review with "
                        "that code, each rechecked, fenced and audited on its own");
    recheck->add_option("--code", rc->code,
                        "with --provider: the review code (lookup_failing, schedule_exhausted, "
                        "...; review list shows them)");
    recheck->add_option("--tenant", rc->tenant, "with --provider: only this tenant's payments");
    recheck->add_option("--limit", rc->limit, "with --provider: at most this many (default 1000)");
    recheck->add_flag("--dry-run", rc->dry_run,
                      "with --provider: list what would be rechecked; ask and write nothing");
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
