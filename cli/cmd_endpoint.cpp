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
#include "core/settings.hpp"
#include "core/uuid.hpp"
#include "net/resolve.hpp"
#include "services/endpoints.hpp"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

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

// The CLI's words for a request check_endpoint_request() refused, in its own flags.
[[noreturn]] void refuse_request(const EndpointProblem& problem) {
    switch (problem.part) {
    case EndpointProblem::Part::event_types:
        throw UsageError("--events " + printable(problem.pattern) + ": " + problem.rule);
    case EndpointProblem::Part::description:
        throw UsageError("--description: " + problem.rule);
    case EndpointProblem::Part::url:
        break;
    }
    throw Refused(problem.rule, "an endpoint must be reachable on the public internet over https; "
                                "an operator may allow a private network explicitly with "
                                "PAYRECON_ENDPOINT_ALLOWED_NETWORKS");
}

// Why the relay may not reach `url` (net/endpoint_address's rules, with the networks
// PAYRECON_ENDPOINT_ALLOWED_NETWORKS allows), its host resolved by the system: the check that
// check_endpoint_request() makes last. The setting is read only then, so that a bad flag is
// reported before a bad setting.
std::optional<std::string> url_refusal(const std::string& url) {
    const net::NetworkAllowance allowance = endpoint_allowance();
    const auto checked = net::check_endpoint(url, allowance, net::system_resolve);
    if (!checked) {
        return checked.error();
    }
    return std::nullopt;
}

[[noreturn]] void refuse_unknown_endpoint(const std::string& id) {
    throw Refused("no endpoint has the ID " + id, "payrecon endpoint list");
}

struct AddOptions {
    std::string tenant;
    std::string url;
    std::vector<std::string> events{"payment.*"};
    std::optional<std::string> description;
    bool json = false;
};

void run_add(AppState& state, const AddOptions& o) {
    const auto checked =
        check_endpoint_request(EndpointRequest{o.url, o.events, o.description}, url_refusal);
    if (!checked) {
        refuse_request(checked.error());
    }
    const std::string actor = operator_name(state.global);
    OpenDatabase opened = open_database(state.global);
    const SealingKeys keys = endpoint_keys(state.global, opened.embedded);
    const std::string tenant_id = *tenant_id_or_refuse(*opened.db, o.tenant);
    const AddedEndpoint added =
        payrecon::add_endpoint(*opened.db, keys, tenant_id, *checked, actor);
    const store::EndpointRow& row = added.endpoint;
    if (o.json) {
        nlohmann::ordered_json j = endpoint_json(row);
        j["signing_secret"] = added.secret.reveal();
        print_json(j);
        return;
    }
    std::cout << "endpoint " << row.endpoint_id << " added for tenant " << row.tenant_name << ": "
              << row.url << " (" << join(row.event_types) << ")\n";
    print_secret_once(added.secret);
}

void setup_endpoint_add(CLI::App& endpoint, AppState& state) {
    auto o = std::make_shared<AddOptions>();
    CLI::App* add =
        endpoint.add_subcommand("add", "register an endpoint; prints its signing secret once");
    add->add_option("--tenant", o->tenant, "the tenant (name or ID)")->required();
    add->add_option("--url", o->url,
                    "https URL (http only to a loopback address); public addresses only unless "
                    "PAYRECON_ENDPOINT_ALLOWED_NETWORKS allows the network")
        ->required();
    add->add_option("--events", o->events,
                    "event types or prefixes ending in '*' (repeatable; default payment.*)")
        ->delimiter(',');
    add->add_option("--description", o->description, "what it is, for operators");
    add->add_flag("--json", o->json, "print JSON (with the secret)");
    add->callback([&state, o] { run_add(state, *o); });
}

struct ListOptions {
    std::optional<std::string> tenant;
    bool json = false;
};

void run_list(AppState& state, const ListOptions& o) {
    OpenDatabase opened = open_database(state.global);
    const auto tenant = tenant_id_or_refuse(*opened.db, o.tenant);
    const auto rows = payrecon::list_endpoints(*opened.db, tenant);
    if (o.json) {
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
}

void setup_endpoint_list(CLI::App& endpoint, AppState& state) {
    auto o = std::make_shared<ListOptions>();
    CLI::App* list = endpoint.add_subcommand("list", "endpoints, oldest first");
    list->add_option("--tenant", o->tenant, "only this tenant's (name or ID)");
    list->add_flag("--json", o->json, "print a JSON array");
    list->callback([&state, o] { run_list(state, *o); });
}

struct IdOptions {
    std::string id;
    std::string reason;
    std::string overlap = "24h";
    bool json = false;
};

void run_show(AppState& state, const IdOptions& o) {
    const std::string id = endpoint_id_or_refuse(o.id);
    OpenDatabase opened = open_database(state.global);
    const auto e = payrecon::find_endpoint(*opened.db, id);
    if (!e) {
        refuse_unknown_endpoint(id);
    }
    if (o.json) {
        print_json(endpoint_json(*e));
        return;
    }
    print_endpoint(*e);
}

void setup_endpoint_show(CLI::App& endpoint, AppState& state) {
    auto o = std::make_shared<IdOptions>();
    CLI::App* show = endpoint.add_subcommand("show", "one endpoint");
    show->add_option("id", o->id, "the endpoint's ID")->required();
    show->add_flag("--json", o->json, "print JSON");
    show->callback([&state, o] { run_show(state, *o); });
}

// What `enable` and `disable` say of what they changed, or that there was nothing to change.
void print_toggled(store::EndpointChange change, const std::string& id, bool enabled) {
    switch (change) {
    case store::EndpointChange::not_found:
        refuse_unknown_endpoint(id);
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
}

void run_disable(AppState& state, const IdOptions& o) {
    const std::string id = endpoint_id_or_refuse(o.id);
    const auto reason = disable_reason(o.reason);
    if (!reason) {
        throw UsageError("--reason must say, in 1.." + std::to_string(k_max_disable_reason) +
                         " characters, why it is disabled");
    }
    const std::string actor = operator_name(state.global);
    OpenDatabase opened = open_database(state.global);
    print_toggled(disable_endpoint(*opened.db, id, actor, *reason), id, false);
}

void run_enable(AppState& state, const IdOptions& o) {
    const std::string id = endpoint_id_or_refuse(o.id);
    const std::string actor = operator_name(state.global);
    OpenDatabase opened = open_database(state.global);
    print_toggled(enable_endpoint(*opened.db, id, actor), id, true);
}

void setup_endpoint_toggles(CLI::App& endpoint, AppState& state) {
    auto dopt = std::make_shared<IdOptions>();
    CLI::App* disable = endpoint.add_subcommand("disable", "stop delivering to an endpoint");
    disable->add_option("id", dopt->id, "the endpoint's ID")->required();
    disable->add_option("--reason", dopt->reason, "why (audited)")->required();
    disable->callback([&state, dopt] { run_disable(state, *dopt); });
    auto eopt = std::make_shared<IdOptions>();
    CLI::App* enable = endpoint.add_subcommand("enable", "deliver to an endpoint again");
    enable->add_option("id", eopt->id, "the endpoint's ID")->required();
    enable->callback([&state, eopt] { run_enable(state, *eopt); });
}

void run_rotate(AppState& state, const IdOptions& o) {
    const std::string id = endpoint_id_or_refuse(o.id);
    const auto overlap = parse_duration(o.overlap, "--overlap");
    const std::string actor = operator_name(state.global);
    OpenDatabase opened = open_database(state.global);
    const SealingKeys keys = endpoint_keys(state.global, opened.embedded);
    const auto rotated = payrecon::rotate_endpoint_secret(*opened.db, keys, id, overlap, actor);
    if (!rotated) {
        refuse_unknown_endpoint(id);
    }
    if (o.json) {
        print_json(nlohmann::ordered_json{{"endpoint_id", id},
                                          {"secret_no", rotated->secret_no},
                                          {"overlap_seconds", overlap.count()},
                                          {"signing_secret", rotated->secret.reveal()}});
        return;
    }
    std::cout << "endpoint " << id << ": new signing secret " << rotated->secret_no
              << "; the previous one keeps signing beside it for " << o.overlap << "\n";
    print_secret_once(rotated->secret);
}

void setup_endpoint_rotate(CLI::App& endpoint, AppState& state) {
    auto o = std::make_shared<IdOptions>();
    CLI::App* rotate = endpoint.add_subcommand(
        "rotate-secret", "a new signing secret, shown once; the old one signs beside it for "
                         "--overlap");
    rotate->add_option("id", o->id, "the endpoint's ID")->required();
    rotate->add_option("--overlap", o->overlap,
                       "how long the current secret keeps signing too (default 24h; 0s: none)");
    rotate->add_flag("--json", o->json, "print JSON (with the secret)");
    rotate->callback([&state, o] { run_rotate(state, *o); });
}

void run_reseal(AppState& state, bool json) {
    const std::string actor = operator_name(state.global);
    OpenDatabase opened = open_database(state.global);
    const SealingKeys keys = endpoint_keys(state.global, opened.embedded);
    const auto r = payrecon::reseal_endpoint_secrets(*opened.db, keys, actor);
    if (json) {
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
}

void setup_endpoint_reseal(CLI::App& endpoint, AppState& state) {
    auto json = std::make_shared<bool>(false);
    CLI::App* reseal = endpoint.add_subcommand(
        "reseal", "seal every endpoint's signing secrets again under the endpoint key file's "
                  "first line (after adding a new key line; then the old line may go)");
    reseal->add_flag("--json", *json, "print JSON");
    reseal->callback([&state, json] { run_reseal(state, *json); });
}

} // namespace

void setup_endpoint(CLI::App& app, AppState& state) {
    CLI::App* endpoint = app.add_subcommand(
        "endpoint", "a tenant's webhook endpoints: where payment events are delivered, signed");
    endpoint->require_subcommand(1);
    setup_endpoint_add(*endpoint, state);
    setup_endpoint_list(*endpoint, state);
    setup_endpoint_show(*endpoint, state);
    setup_endpoint_toggles(*endpoint, state);
    setup_endpoint_rotate(*endpoint, state);
    setup_endpoint_reseal(*endpoint, state);
}

} // namespace payrecon::cli
