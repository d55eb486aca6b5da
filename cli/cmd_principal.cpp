// payrecon principal create|revoke|list
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/table.hpp"
#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "services/admin.hpp"

#include <iostream>

namespace payrecon::cli {
namespace {

nlohmann::json to_json(const store::PrincipalRecord& p) {
    nlohmann::json j = {{"principal_id", p.principal_id},
                        {"tenant_id", p.tenant_id},
                        {"name", p.name},
                        {"role", std::string(to_string(p.role))},
                        {"created_at", p.created_at},
                        {"revoked_at", nullptr}};
    if (p.revoked_at) {
        j["revoked_at"] = *p.revoked_at;
    }
    return j;
}

store::TenantRecord require_tenant(store::Db& db, const std::string& tenant) {
    auto t = tenant_by_id_or_name(db, tenant);
    if (!t) {
        throw Refused("there is no tenant '" + printable(tenant) + "'",
                      "`payrecon tenant list` shows them");
    }
    return *t;
}

} // namespace

void setup_principal(CLI::App& app, AppState& state) {
    CLI::App* principal = app.add_subcommand("principal", "API credentials of a tenant");
    principal->require_subcommand(1);

    struct CreateOptions {
        std::string tenant;
        std::string name;
        std::string role;
        bool json = false;
    };
    auto create = std::make_shared<CreateOptions>();
    CLI::App* c = principal->add_subcommand(
        "create", "create a principal and print its API key, once (only a digest is stored)");
    c->add_option("--tenant", create->tenant, "tenant name or ID")->required();
    c->add_option("--name", create->name, "principal name, unique in the tenant")->required();
    c->add_option("--role", create->role, "admin, writer (create and read payments) or reader")
        ->required()
        ->check(CLI::IsMember({"admin", "writer", "reader"}));
    c->add_flag("--json", create->json, "print JSON");
    c->callback([&state, create] {
        OpenDatabase opened = open_database(state.global);
        const auto tenant = require_tenant(*opened.db, create->tenant);
        const auto created =
            payrecon::create_principal(*opened.db, tenant.tenant_id, create->name,
                                       *parse_role(create->role), operator_name(state.global));
        if (!created) {
            refuse_admin(created.error(),
                         "choose another name, or revoke the old one and create a new one");
        }
        const store::PrincipalRecord& p = created->principal;
        const Secret& key = created->api_key;
        if (create->json) {
            nlohmann::json j = to_json(p);
            j["api_key"] = key.reveal();
            print_json(j);
            return;
        }
        std::cout << "principal " << printable(p.name) << " (" << to_string(p.role)
                  << ") created: " << p.principal_id << "\n"
                  << "API key (shown once; store it now -- only its digest is kept):\n"
                  << key.reveal() << "\n";
    });

    auto revoke_id = std::make_shared<std::string>();
    CLI::App* r = principal->add_subcommand(
        "revoke", "revoke a principal: its requests, replays included, are refused from now on");
    r->add_option("id", *revoke_id, "principal ID")->required();
    r->callback([&state, revoke_id] {
        OpenDatabase opened = open_database(state.global);
        const auto revoked =
            payrecon::revoke_principal(*opened.db, *revoke_id, operator_name(state.global));
        if (!revoked) {
            refuse_admin(revoked.error(), "`payrecon principal list --tenant T` shows the IDs");
        }
        const store::PrincipalRecord& p = *revoked;
        std::cout << "principal " << printable(p.name) << " (" << p.principal_id << ") revoked at "
                  << p.revoked_at.value_or("?") << "\n";
    });

    struct ListOptions {
        std::string tenant;
        bool json = false;
    };
    auto list = std::make_shared<ListOptions>();
    CLI::App* l = principal->add_subcommand("list", "list a tenant's principals");
    l->add_option("--tenant", list->tenant, "tenant name or ID")->required();
    l->add_flag("--json", list->json, "print JSON");
    l->callback([&state, list] {
        OpenDatabase opened = open_database(state.global);
        const auto tenant = require_tenant(*opened.db, list->tenant);
        const auto all = principals_of(*opened.db, tenant.tenant_id);
        if (list->json) {
            nlohmann::json arr = nlohmann::json::array();
            for (const auto& p : all) {
                arr.push_back(to_json(p));
            }
            print_json(arr);
            return;
        }
        if (all.empty()) {
            std::cout << "tenant " << printable(tenant.name)
                      << " has no principals yet: create one with `payrecon principal create "
                         "--tenant "
                      << printable(tenant.name) << " --name NAME --role writer`\n";
            return;
        }
        // Names stored before they were checked may hold control characters: Table escapes them.
        Table table({"PRINCIPAL ID", "NAME", "ROLE", "STATUS"});
        for (const auto& p : all) {
            table.add_row({p.principal_id, p.name, std::string(to_string(p.role)),
                           p.revoked_at ? "revoked " + *p.revoked_at : std::string("active")});
        }
        table.print(std::cout);
    });
}

} // namespace payrecon::cli
