// payrecon endpoint: a tenant's webhook endpoints, where the relay delivers its events (DESIGN
// section 15). Each has its own signing secret, shown once when it is made; payrecon keeps it
// sealed with the endpoint key (core/sealed), never in the clear.
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/endpoint_view.hpp"
#include "cli/payment_view.hpp"
#include "cli/table.hpp"
#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "core/resolution_policy.hpp"
#include "core/settings.hpp"
#include "core/standard_webhooks.hpp"
#include "core/uuid.hpp"
#include "net/resolve.hpp"
#include "store/endpoint_store.hpp"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace payrecon::cli {

nlohmann::ordered_json endpoint_json(const store::EndpointRow& e) {
    nlohmann::ordered_json j;
    j["endpoint_id"] = e.endpoint_id;
    j["tenant_id"] = e.tenant_id;
    j["tenant"] = e.tenant_name;
    j["url"] = e.url;
    j["event_types"] = e.event_types;
    j["description"] = json_or_null(e.description);
    j["state"] = e.state;
    j["disabled_at"] = json_or_null(e.disabled_at);
    j["disabled_reason"] = json_or_null(e.disabled_reason);
    j["created_at"] = e.created_at;
    j["created_by"] = e.created_by;
    j["signing_secrets"] = e.signing_secrets;
    j["pending"] = e.pending;
    j["dead"] = e.dead;
    j["oldest_due_at"] = json_or_null(e.oldest_due_at);
    return j;
}

std::string endpoint_id_or_refuse(const std::string& id) {
    if (!is_uuid_text(id)) {
        throw UsageError("an endpoint ID is a UUID, as payrecon endpoint list prints it: " +
                         printable(id));
    }
    return id;
}

namespace {

std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& i : items) {
        out += out.empty() ? "" : ",";
        out += i;
    }
    return out;
}

void print_endpoint(const store::EndpointRow& e) {
    Fields f{{"endpoint", e.endpoint_id},
             {"tenant", e.tenant_name + " (" + e.tenant_id + ")"},
             {"url", e.url},
             {"events", join(e.event_types)},
             {"state", e.state}};
    if (e.description) {
        f.push_back({"description", *e.description});
    }
    if (e.disabled_at) {
        f.push_back({"disabled", *e.disabled_at + ": " + e.disabled_reason.value_or("")});
    }
    f.push_back({"created", e.created_at + " by " + e.created_by});
    f.push_back({"signing secrets", std::to_string(e.signing_secrets) +
                                        (e.signing_secrets > 1 ? " (a rotation's overlap)" : "")});
    f.push_back({"pending deliveries", std::to_string(e.pending)});
    f.push_back({"dead deliveries", std::to_string(e.dead)});
    if (e.oldest_due_at) {
        f.push_back({"oldest due since", *e.oldest_due_at});
    }
    print_fields(std::cout, f);
}

// The secret, once: to the terminal (or the JSON), never to a log.
void print_secret_once(const Secret& secret) {
    std::cout << "\nSigning secret (shown once; payrecon keeps only a sealed copy):\n  "
              << secret.reveal()
              << "\nGive it to the merchant's receiver: it verifies each request's "
                 "webhook-signature (Standard Webhooks, docs/http-api.md).\n";
}

} // namespace

void setup_endpoint(CLI::App& app, AppState& state) {
    CLI::App* endpoint = app.add_subcommand(
        "endpoint", "a tenant's webhook endpoints: where payment events are delivered, signed");
    endpoint->require_subcommand(1);

    struct AddOptions {
        std::string tenant;
        std::string url;
        std::vector<std::string> events{"payment.*"};
        std::optional<std::string> description;
        bool json = false;
    };
    auto ao = std::make_shared<AddOptions>();
    CLI::App* add =
        endpoint->add_subcommand("add", "register an endpoint; prints its signing secret once");
    add->add_option("--tenant", ao->tenant, "the tenant (name or ID)")->required();
    add->add_option("--url", ao->url,
                    "https URL (http only to a loopback address); public addresses only unless "
                    "PAYRECON_ENDPOINT_ALLOWED_NETWORKS allows the network")
        ->required();
    add->add_option("--events", ao->events,
                    "event types or prefixes ending in '*' (repeatable; default payment.*)")
        ->delimiter(',');
    add->add_option("--description", ao->description, "what it is, for operators");
    add->add_flag("--json", ao->json, "print JSON (with the secret)");
    add->callback([&state, ao] {
        for (const auto& p : ao->events) {
            if (auto problem = event_pattern_problem(p)) {
                throw UsageError("--events " + printable(p) + ": " + *problem);
            }
        }
        if (ao->description && display_name_problem(*ao->description, 512)) {
            throw UsageError("--description: " + *display_name_problem(*ao->description, 512));
        }
        const net::NetworkAllowance allowance = endpoint_allowance();
        const auto checked = net::check_endpoint(ao->url, allowance, net::system_resolve);
        if (!checked) {
            throw Refused(checked.error(),
                          "an endpoint must be reachable on the public internet over https; "
                          "an operator may allow a private network explicitly with "
                          "PAYRECON_ENDPOINT_ALLOWED_NETWORKS");
        }
        const std::string actor = operator_name(state.global);
        OpenDatabase opened = open_database(state.global);
        const SealingKeys keys = endpoint_keys(state.global, opened.embedded);
        const std::string tenant_id = *tenant_id_or_refuse(*opened.db, ao->tenant);
        const Secret secret = new_endpoint_secret();
        const auto row = store::add_endpoint(
            *opened.db, tenant_id, uuid_v7(), ao->url, ao->events, ao->description, actor,
            [&](const std::string& t, const std::string& e, int n) {
                return keys.seal(secret.reveal(), store::endpoint_secret_aad(t, e, n));
            });
        if (ao->json) {
            nlohmann::ordered_json j = endpoint_json(row);
            j["signing_secret"] = secret.reveal();
            print_json(j);
            return;
        }
        std::cout << "endpoint " << row.endpoint_id << " added for tenant " << row.tenant_name
                  << ": " << row.url << " (" << join(row.event_types) << ")\n";
        print_secret_once(secret);
    });

    struct ListOptions {
        std::optional<std::string> tenant;
        bool json = false;
    };
    auto lo = std::make_shared<ListOptions>();
    CLI::App* list = endpoint->add_subcommand("list", "endpoints, oldest first");
    list->add_option("--tenant", lo->tenant, "only this tenant's (name or ID)");
    list->add_flag("--json", lo->json, "print a JSON array");
    list->callback([&state, lo] {
        OpenDatabase opened = open_database(state.global);
        const auto tenant = tenant_id_or_refuse(*opened.db, lo->tenant);
        const auto rows = store::list_endpoints(*opened.db, tenant);
        if (lo->json) {
            nlohmann::ordered_json arr = nlohmann::ordered_json::array();
            for (const auto& e : rows) {
                arr.push_back(endpoint_json(e));
            }
            print_json(arr);
            return;
        }
        if (rows.empty()) {
            std::cout << "no endpoints; add one with: payrecon endpoint add --tenant T --url U\n";
            return;
        }
        Table t({"ENDPOINT", "TENANT", "URL", "EVENTS", "STATE", "PENDING", "DEAD", "OLDEST DUE"});
        for (const auto& e : rows) {
            t.add_row({e.endpoint_id, e.tenant_name, e.url, join(e.event_types), e.state,
                       std::to_string(e.pending), std::to_string(e.dead),
                       e.oldest_due_at.value_or("-")});
        }
        t.print(std::cout);
    });

    struct IdOptions {
        std::string id;
        std::string reason;
        std::string overlap = "24h";
        bool json = false;
    };
    auto so = std::make_shared<IdOptions>();
    CLI::App* show = endpoint->add_subcommand("show", "one endpoint");
    show->add_option("id", so->id, "the endpoint's ID")->required();
    show->add_flag("--json", so->json, "print JSON");
    show->callback([&state, so] {
        const std::string id = endpoint_id_or_refuse(so->id);
        OpenDatabase opened = open_database(state.global);
        const auto e = store::find_endpoint(*opened.db, id);
        if (!e) {
            throw Refused("no endpoint has the ID " + id, "payrecon endpoint list");
        }
        if (so->json) {
            print_json(endpoint_json(*e));
            return;
        }
        print_endpoint(*e);
    });

    const auto toggle = [&state](const IdOptions& o, bool enabled) {
        const std::string id = endpoint_id_or_refuse(o.id);
        const std::string reason = trimmed_note(o.reason);
        if (!enabled && (reason.empty() || reason.size() > 1000)) {
            throw UsageError("--reason must say, in 1..1000 characters, why it is disabled");
        }
        const std::string actor = operator_name(state.global);
        OpenDatabase opened = open_database(state.global);
        switch (store::set_endpoint_enabled(*opened.db, id, enabled, actor,
                                            enabled ? "enabled by an operator" : reason)) {
        case store::EndpointChange::not_found:
            throw Refused("no endpoint has the ID " + id, "payrecon endpoint list");
        case store::EndpointChange::unchanged:
            std::cout << "endpoint " << id << " was " << (enabled ? "enabled" : "disabled")
                      << " already\n";
            return;
        case store::EndpointChange::changed:
            break;
        }
        if (enabled) {
            std::cout << "endpoint " << id << " enabled; events published while it was disabled "
                      << "are not sent unless you ask: payrecon deliveries replay --endpoint " << id
                      << " --since TIME\n";
        } else {
            std::cout << "endpoint " << id << " disabled; nothing is delivered to it until "
                      << "payrecon endpoint enable " << id << "\n";
        }
    };
    auto dopt = std::make_shared<IdOptions>();
    CLI::App* disable = endpoint->add_subcommand("disable", "stop delivering to an endpoint");
    disable->add_option("id", dopt->id, "the endpoint's ID")->required();
    disable->add_option("--reason", dopt->reason, "why (audited)")->required();
    disable->callback([toggle, dopt] { toggle(*dopt, false); });
    auto eopt = std::make_shared<IdOptions>();
    CLI::App* enable = endpoint->add_subcommand("enable", "deliver to an endpoint again");
    enable->add_option("id", eopt->id, "the endpoint's ID")->required();
    enable->callback([toggle, eopt] { toggle(*eopt, true); });

    auto ro = std::make_shared<IdOptions>();
    CLI::App* rotate = endpoint->add_subcommand(
        "rotate-secret", "a new signing secret, shown once; the old one signs beside it for "
                         "--overlap");
    rotate->add_option("id", ro->id, "the endpoint's ID")->required();
    rotate->add_option("--overlap", ro->overlap,
                       "how long the current secret keeps signing too (default 24h; 0s: none)");
    rotate->add_flag("--json", ro->json, "print JSON (with the secret)");
    rotate->callback([&state, ro] {
        const std::string id = endpoint_id_or_refuse(ro->id);
        const auto overlap = parse_duration(ro->overlap, "--overlap");
        const std::string actor = operator_name(state.global);
        OpenDatabase opened = open_database(state.global);
        const SealingKeys keys = endpoint_keys(state.global, opened.embedded);
        const Secret secret = new_endpoint_secret();
        const auto number = store::rotate_endpoint_secret(
            *opened.db, id, overlap, actor, [&](const std::string& t, const std::string& e, int n) {
                return keys.seal(secret.reveal(), store::endpoint_secret_aad(t, e, n));
            });
        if (!number) {
            throw Refused("no endpoint has the ID " + id, "payrecon endpoint list");
        }
        if (ro->json) {
            print_json(nlohmann::ordered_json{{"endpoint_id", id},
                                              {"secret_no", *number},
                                              {"overlap_seconds", overlap.count()},
                                              {"signing_secret", secret.reveal()}});
            return;
        }
        std::cout << "endpoint " << id << ": new signing secret " << *number
                  << "; the previous one keeps signing beside it for " << ro->overlap << "\n";
        print_secret_once(secret);
    });

    auto reseal_json = std::make_shared<bool>(false);
    CLI::App* reseal = endpoint->add_subcommand(
        "reseal", "seal every endpoint's signing secrets again under the endpoint key file's "
                  "first line (after adding a new key line; then the old line may go)");
    reseal->add_flag("--json", *reseal_json, "print JSON");
    reseal->callback([&state, reseal_json] {
        const std::string actor = operator_name(state.global);
        OpenDatabase opened = open_database(state.global);
        const SealingKeys keys = endpoint_keys(state.global, opened.embedded);
        const auto r = store::reseal_endpoint_secrets(
            *opened.db, actor,
            [&](const std::string& t, const std::string& e, int n,
                const std::string& sealed) -> std::optional<std::string> {
                const std::string aad = store::endpoint_secret_aad(t, e, n);
                const auto plain = keys.open(sealed, aad);
                if (!plain) {
                    return std::nullopt;
                }
                return keys.seal(plain->reveal(), aad);
            });
        if (*reseal_json) {
            nlohmann::ordered_json unopened = nlohmann::ordered_json::array();
            for (const auto& [e, n] : r.unopened) {
                unopened.push_back({{"endpoint_id", e}, {"secret_no", n}});
            }
            print_json(nlohmann::ordered_json{{"resealed", r.resealed}, {"not_opened", unopened}});
        } else {
            std::cout << "re-sealed " << r.resealed
                      << " signing secret(s) under the endpoint key file's first line; recorded "
                         "in the audit log\n";
            for (const auto& [e, n] : r.unopened) {
                std::cout << "  NOT OPENED: endpoint " << e << " secret " << n << "\n";
            }
        }
        if (!r.unopened.empty()) {
            throw OperatorError(
                ExitCode::failure,
                std::to_string(r.unopened.size()) +
                    " secret(s) did not open with any line of the endpoint key file: they were "
                    "sealed under a line that is no longer in it",
                "put the old line back (second or later) and run reseal again, or give those "
                "endpoints new secrets: payrecon endpoint rotate-secret ID --overlap 0s");
        }
    });
}

} // namespace payrecon::cli
