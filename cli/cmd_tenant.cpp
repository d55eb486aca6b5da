// payrecon tenant create|list
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/table.hpp"
#include "core/errors.hpp"
#include "services/admin.hpp"

#include <iostream>

namespace payrecon::cli {
namespace {

nlohmann::json to_json(const store::TenantRecord& t) {
    return {{"tenant_id", t.tenant_id}, {"name", t.name}, {"created_at", t.created_at}};
}

} // namespace

void setup_tenant(CLI::App& app, AppState& state) {
    CLI::App* tenant = app.add_subcommand("tenant", "tenants: the top of every key and every row");
    tenant->require_subcommand(1);

    struct CreateOptions {
        std::string name;
        bool json = false;
    };
    auto create = std::make_shared<CreateOptions>();
    CLI::App* c = tenant->add_subcommand("create", "create a tenant");
    c->add_option("name", create->name, "tenant name: letters, digits, '.', '_', '-'")->required();
    c->add_flag("--json", create->json, "print JSON");
    c->callback([&state, create] {
        OpenDatabase opened = open_database(state.global);
        const auto created =
            payrecon::create_tenant(*opened.db, create->name, operator_name(state.global));
        if (!created) {
            refuse_admin(created.error(), "`payrecon tenant list` shows the tenants");
        }
        const store::TenantRecord& t = *created;
        if (create->json) {
            print_json(to_json(t));
        } else {
            std::cout << "tenant " << printable(t.name) << " created: " << t.tenant_id << "\n";
        }
    });

    auto list_json = std::make_shared<bool>(false);
    CLI::App* l = tenant->add_subcommand("list", "list tenants");
    l->add_flag("--json", *list_json, "print JSON");
    l->callback([&state, list_json] {
        OpenDatabase opened = open_database(state.global);
        const auto all = tenants(*opened.db);
        if (*list_json) {
            nlohmann::json arr = nlohmann::json::array();
            for (const auto& t : all) {
                arr.push_back(to_json(t));
            }
            print_json(arr);
            return;
        }
        if (all.empty()) {
            std::cout << "no tenants yet: create one with `payrecon tenant create NAME`\n";
            return;
        }
        Table table({"TENANT ID", "NAME", "CREATED"});
        for (const auto& t : all) {
            table.add_row({t.tenant_id, t.name, t.created_at});
        }
        table.print(std::cout);
    });
}

} // namespace payrecon::cli
