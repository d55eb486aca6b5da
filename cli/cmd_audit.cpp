// payrecon audit: who did what, when, to what -- the append-only audit log, newest last.
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/payment_view.hpp"
#include "services/inspect.hpp"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace payrecon::cli {

void setup_audit(CLI::App& app, AppState& state) {
    struct Options {
        std::optional<std::string> payment;
        std::optional<std::string> tenant;
        int limit = 100;
        bool json = false;
    };
    auto opts = std::make_shared<Options>();
    CLI::App* a = app.add_subcommand(
        "audit",
        "the audit log, newest last: tenants, principals, payments and operators' decisions");
    a->add_option("--payment", opts->payment,
                  "only entries about this payment (payment ID or operation ID), with the "
                  "provider calls made for it and the status queries about it");
    a->add_option("--tenant", opts->tenant, "only this tenant's entries (name or ID)");
    a->add_option("--limit", opts->limit, "the newest this many (default 100)")
        ->check(CLI::Range(1, 1000000));
    a->add_flag("--json", opts->json, "print a JSON array");
    a->callback([&state, opts] {
        OpenDatabase opened = open_database(state.global);
        store::AuditFilter filter;
        filter.limit = opts->limit;
        filter.tenant_id = tenant_id_or_refuse(*opened.db, opts->tenant);
        if (opts->payment) {
            filter.payment = payment_ref_or_refuse(*opened.db, *opts->payment);
        }
        // A payment's trail holds the provider calls made for it too (services/inspect).
        const auto rows = audit_trail(*opened.db, filter);
        if (opts->json) {
            nlohmann::json arr = nlohmann::json::array();
            for (const auto& r : rows) {
                arr.push_back(to_json(r));
            }
            print_json(arr);
            return;
        }
        if (rows.empty()) {
            std::cout << "no audit entries\n";
            return;
        }
        print_audit_table(std::cout, rows);
    });
}

} // namespace payrecon::cli
