// payrecon review resolve | recheck: an operator's decisions on the review queue (DESIGN section 8).
// Both are fenced: a payment that changed since it was shown is refused, never overwritten.
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/reconcile_view.hpp"
#include "cli/table.hpp"
#include "core/errors.hpp"
#include "core/store/inspect_store.hpp"
#include "core/store/reconcile_store.hpp"
#include "engine/reconciler.hpp"

#include <iostream>

namespace payrecon::cli {
namespace {

struct ResolveCliOptions {
    std::string id;
    long long generation = -1;
    std::string as;
    std::string note;
    std::string provider_reference;
    bool confirm_no_charge = false;
    bool json = false;
};

struct RecheckCliOptions {
    std::string id;
    bool json = false;
};

std::string trimmed(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) {
        return {};
    }
    return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

store::PaymentRef find_ref(store::Db& db, const std::string& id) {
    const auto ref = store::resolve_payment_ref(db, id);
    if (!ref) {
        throw Refused("no payment has the ID " + id, "find it with: payrecon review list");
    }
    return *ref;
}

void run_resolve(AppState& state, const ResolveCliOptions& opts) {
    store::Resolution r;
    if (opts.as == "succeeded") {
        r.decision = store::OperatorDecision::succeeded;
        if (opts.provider_reference.empty()) {
            throw UsageError("--as succeeded needs --provider-reference: the provider's ID of the charge "
                             "(Stripe pi_..., Adyen pspReference, Square payment ID)");
        }
        r.provider_reference = opts.provider_reference;
    } else if (opts.as == "failed") {
        r.decision = store::OperatorDecision::failed;
    } else if (opts.as == "retry") {
        r.decision = store::OperatorDecision::retry;
        if (!opts.confirm_no_charge) {
            throw UsageError("--as retry sends the payment again: confirm that the provider holds no "
                             "charge for it with --confirm-no-charge, and say how you checked in --note");
        }
    } else {
        throw UsageError("--as must be succeeded, failed or retry");
    }
    if (!opts.provider_reference.empty() && r.decision != store::OperatorDecision::succeeded) {
        throw UsageError("--provider-reference goes with --as succeeded only");
    }
    r.note = trimmed(opts.note);
    if (r.note.empty() || r.note.size() > 2000) {
        throw UsageError("--note must say, in 1..2000 characters, what you checked and why you decided so");
    }
    if (opts.generation < 0) {
        throw UsageError("--generation is the one `payrecon review show` printed");
    }
    r.generation = opts.generation;
    r.operator_name = operator_name(state.global);

    OpenDatabase opened = open_database(state.global);
    const store::PaymentRef ref = find_ref(*opened.db, opts.id);
    r.tenant_id = ref.tenant_id;
    r.payment_id = ref.payment_id;
    const store::ResolveResult result = store::resolve_payment(*opened.db, r);
    switch (result.status) {
    case store::ResolveResult::Status::applied:
        break;
    case store::ResolveResult::Status::not_found:
        throw Refused("no payment has the ID " + opts.id, "find it with: payrecon review list");
    case store::ResolveResult::Status::changed:
        throw Refused("payment " + ref.payment_id + " changed since it was shown: generation " +
                          std::to_string(opts.generation) + " was given, it is now " +
                          std::to_string(result.generation) + " (" + result.state + "); nothing was written",
                      "look again with: payrecon review show " + ref.payment_id);
    case store::ResolveResult::Status::not_resolvable:
        throw Refused("payment " + ref.payment_id + " is " + result.state +
                          ": only unknown payments and payments in review are resolved by hand",
                      "payrecon payments show " + ref.payment_id);
    }
    if (opts.json) {
        print_json({{"payment_id", ref.payment_id}, {"state", result.state},
                    {"generation", result.generation}, {"operator", r.operator_name},
                    {"decision", opts.as}});
        return;
    }
    std::cout << "payment " << ref.payment_id << " is now " << result.state << " (generation "
              << result.generation << "), decided by " << printable(r.operator_name)
              << "; recorded in the audit log\n";
    if (r.decision == store::OperatorDecision::retry) {
        std::cout << "a worker sends it again with the same operation ID\n";
    }
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
    if (opts.json) {
        std::cout << outcome_json(*outcome).dump(2) << std::endl;
    } else {
        std::cout << outcome_line(*outcome) << "\n";
    }
    if (outcome->fenced_out) {
        throw Refused("payment " + ref.payment_id + " changed while it was being rechecked; nothing was written",
                      "look again with: payrecon review show " + ref.payment_id);
    }
    if (outcome->to == PaymentState::needs_review) {
        state.exit_code = static_cast<int>(ExitCode::attention);
    }
}

} // namespace

void setup_review_actions(CLI::App& review, AppState& state) {
    auto ro = std::make_shared<ResolveCliOptions>();
    CLI::App* resolve = review.add_subcommand(
        "resolve", "decide an unknown or in-review payment: succeeded (with the provider's "
                   "reference), failed, or retry (send again: only when no charge exists)");
    resolve->add_option("id", ro->id, "payment ID or operation ID")->required();
    resolve->add_option("--generation", ro->generation,
                        "the generation `review show` printed: refused if the payment changed since")
        ->required();
    resolve->add_option("--as", ro->as, "succeeded | failed | retry")
        ->required()
        ->check(CLI::IsMember({"succeeded", "failed", "retry"}));
    resolve->add_option("--note", ro->note, "what you checked and why (recorded in the audit log)")
        ->required();
    resolve->add_option("--provider-reference", ro->provider_reference,
                        "the provider's ID of the charge (with --as succeeded)");
    resolve->add_flag("--confirm-no-charge", ro->confirm_no_charge,
                      "with --as retry: you confirmed the provider holds no charge for this payment");
    resolve->add_flag("--json", ro->json, "print JSON");
    resolve->callback([&state, ro] { run_resolve(state, *ro); });

    auto rc = std::make_shared<RecheckCliOptions>();
    CLI::App* recheck = review.add_subcommand(
        "recheck", "ask the provider about one payment now; adopts what it has (succeeded, "
                   "declined), else leaves the payment where it is with the new finding");
    recheck->add_option("id", rc->id, "payment ID or operation ID")->required();
    recheck->add_flag("--json", rc->json, "print JSON");
    recheck->callback([&state, rc] { run_recheck(state, *rc); });
}

} // namespace payrecon::cli
