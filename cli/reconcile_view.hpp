#pragma once
// What `reconcile`, `nightly` and `review recheck` share: the reconciler's options on the command
// line, and how one payment's reconciliation is printed.

#include "engine/reconciler.hpp"
#include "providers/config.hpp"

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace payrecon::cli {

struct PolicyCliOptions {
    int lookup_failures = 3;
    int max_checks = 12;
    int max_resends = 3;
    std::string recheck_base = "1m";
    std::string recheck_cap = "6h";
};

void add_policy_options(CLI::App& cmd, PolicyCliOptions& opts);
// Throws UsageError for a value out of range.
ReconcilePolicy to_policy(const PolicyCliOptions& opts);

// The providers of `chosen`, made from their configuration, and plain pointers to them.
struct ProviderSet {
    std::vector<std::unique_ptr<providers::Provider>> owned;
    std::vector<providers::Provider*> pointers;
};
ProviderSet make_providers(const std::vector<const providers::ProviderConfig*>& chosen);

nlohmann::ordered_json outcome_json(const engine::ReconcileOutcome& o);
// "<payment_id>  stripe  49.99 EUR  unknown -> succeeded  (found: succeeded)  reason"
std::string outcome_line(const engine::ReconcileOutcome& o); // control characters escaped

} // namespace payrecon::cli
