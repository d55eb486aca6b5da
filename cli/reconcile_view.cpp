#include "cli/reconcile_view.hpp"

#include "cli/table.hpp"
#include "core/errors.hpp"
#include "core/money.hpp"
#include "core/settings.hpp"
#include "providers/registry.hpp"

namespace payrecon::cli {

void add_policy_options(CLI::App& cmd, PolicyCliOptions& opts) {
    cmd.add_option("--lookup-failures", opts.lookup_failures,
                   "failed status queries in a row before a payment goes to review")
        ->capture_default_str();
    cmd.add_option("--max-checks", opts.max_checks,
                   "status queries finding 'still processing' before review")
        ->capture_default_str();
    cmd.add_option("--max-resends", opts.max_resends,
                   "times a payment confirmed absent is sent again before review")
        ->capture_default_str();
    cmd.add_option("--recheck-base", opts.recheck_base, "first wait before asking again (doubles)")
        ->capture_default_str();
    cmd.add_option("--recheck-cap", opts.recheck_cap, "longest wait before asking again")
        ->capture_default_str();
}

ReconcilePolicy to_policy(const PolicyCliOptions& opts) {
    if (opts.lookup_failures < 1 || opts.lookup_failures > 100 || opts.max_checks < 1 ||
        opts.max_checks > 1000 || opts.max_resends < 0 || opts.max_resends > 100) {
        throw UsageError(
            "--lookup-failures must be 1..100, --max-checks 1..1000, --max-resends 0..100");
    }
    ReconcilePolicy p;
    p.max_lookup_failures = opts.lookup_failures;
    p.max_checks = opts.max_checks;
    p.max_resends = opts.max_resends;
    p.recheck_base = parse_duration(opts.recheck_base, "--recheck-base");
    p.recheck_cap = parse_duration(opts.recheck_cap, "--recheck-cap");
    if (p.recheck_base.count() < 1 || p.recheck_cap < p.recheck_base) {
        throw UsageError(
            "--recheck-base must be at least 1s and --recheck-cap at least --recheck-base");
    }
    return p;
}

ProviderSet make_providers(const std::vector<const providers::ProviderConfig*>& chosen) {
    ProviderSet set;
    for (const auto* p : chosen) {
        set.owned.push_back(providers::create_provider(*p));
        set.pointers.push_back(set.owned.back().get());
    }
    return set;
}

nlohmann::ordered_json outcome_json(const engine::ReconcileOutcome& o) {
    nlohmann::ordered_json j;
    j["payment_id"] = o.payment_id;
    if (o.kind == OperationKind::refund) {
        j["kind"] = "refund";
        j["refund_id"] = o.refund_id;
    }
    j["tenant_id"] = o.tenant_id;
    j["operation_id"] = o.operation_id;
    j["provider"] = o.provider;
    j["amount"] = o.amount_minor;
    j["currency"] = o.currency;
    j["from"] = std::string(to_string(o.from));
    j["to"] = std::string(to_string(o.to));
    j["lookup"] = std::string(to_string(o.lookup));
    if (!o.lookup_detail.empty()) {
        j["lookup_detail"] = o.lookup_detail;
    }
    j["decision"] = std::string(to_string(o.decision.action));
    if (o.decision.review) {
        j["review_code"] = std::string(to_string(*o.decision.review));
    }
    j["reason"] = o.decision.reason;
    if (o.decision.action == ReconcileAction::check_later) {
        j["check_in_s"] = o.decision.check_in.count();
    }
    j["applied"] = o.applied;
    if (o.fenced_out) {
        j["fenced_out"] = true;
    }
    return j;
}

std::string outcome_line(const engine::ReconcileOutcome& o) {
    const std::string amount = describe_money(o.amount_minor, o.currency);
    // A refund by its own ID: what review show, resolve and recheck take.
    const std::string subject =
        o.kind == OperationKind::refund ? "refund " + o.refund_id : o.payment_id;
    std::string line = subject + "  " + o.provider + "  " + amount + "  " +
                       std::string(to_string(o.from)) + " -> " + std::string(to_string(o.to));
    line += "  (" + std::string(to_string(o.lookup));
    if (!o.lookup_detail.empty()) {
        line += ": " + o.lookup_detail;
    }
    line += ")";
    if (o.decision.review) {
        line += "  [" + std::string(to_string(*o.decision.review)) + "]";
    }
    line += "  " + o.decision.reason;
    if (o.fenced_out) {
        line +=
            "  -- NOT APPLIED: the payment changed meanwhile (another reconciler or an operator)";
    }
    return printable(line); // the lookup's detail is the provider's text
}

} // namespace payrecon::cli
