// payrecon refunds create: a refund under the intake protocol from the command line, authenticated
// by PAYRECON_API_KEY (never an argument) and audited with the operator's note. refunds|captures|
// voids list|show: the operator's view of each kind of operation across tenants (captures and
// voids are made by payrecon payments capture|void).
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/intake_view.hpp"
#include "cli/payment_view.hpp"
#include "cli/table.hpp"
#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "core/money.hpp"
#include "core/operator_commands.hpp"
#include "core/payment_state.hpp"
#include "core/settings.hpp"
#include "services/auth.hpp"
#include "services/refunds.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

namespace payrecon::cli {
namespace {

struct CreateOptions {
    std::string payment;
    std::optional<std::string> amount;
    std::optional<std::string> reason;
    std::optional<std::string> merchant_reference;
    std::string key;
    std::string note;
    bool json = false;
};

void run_create(AppState& state, const CreateOptions& opts) {
    const Secret api_key = api_key_from_environment();
    // Asked before the database is opened: a refund without its reason is never sent.
    const std::string note = refund_note(opts.note);
    const std::string actor = operator_name(state.global);
    OpenDatabase opened = open_database(state.global);
    const FingerprintKeys keys = fingerprint_keys(state.global, opened.embedded);
    IntakeResponse response;
    const auto principal = authenticate(*opened.db, api_key);
    if (!principal) {
        response = refusal_for(principal.error());
    } else {
        const std::string body =
            operator_refund_body(*opened.db, *principal, opts.payment, opts.amount, opts.reason,
                                 opts.merchant_reference);
        IntakeSettings settings;
        settings.retention = idempotency_retention();
        RefundService refunds(*opened.db, keys, settings);
        response = refunds.create_refund(*principal, opts.payment, opts.key, body, "",
                                         RefundAudit{actor, note});
    }
    state.exit_code = print_intake(response, opts.json);
}

struct ListOptions {
    OperationKind kind = OperationKind::refund;
    std::optional<std::string> payment;
    std::optional<std::string> state;
    std::optional<std::string> tenant;
    int limit = 100;
    bool json = false;
};

void run_list(AppState& state, const ListOptions& opts) {
    store::OperationFilter filter;
    filter.kind = opts.kind;
    const std::string noun(subject_noun(opts.kind));
    if (opts.state) {
        filter.state = std::string(to_string(state_or_usage_error(*opts.state)));
    }
    if (opts.payment) {
        if (!is_uuid_text(*opts.payment)) {
            throw UsageError("--payment: '" + printable(*opts.payment) + "' is not a payment ID");
        }
        filter.payment_id = *opts.payment;
    }
    filter.limit = opts.limit;
    OpenDatabase opened = open_database(state.global);
    filter.tenant_id = tenant_id_or_refuse(*opened.db, opts.tenant);
    std::vector<store::OperationRow> rows = list_operations(*opened.db, filter);
    const bool more = rows.size() > static_cast<std::size_t>(opts.limit);
    if (more) {
        rows.pop_back();
    }
    if (opts.json) {
        nlohmann::json all = nlohmann::json::array();
        for (const auto& r : rows) {
            all.push_back(to_json(r));
        }
        print_json(all);
        return;
    }
    if (rows.empty()) {
        std::cout << "no " << noun << "s match\n";
        return;
    }
    // A refund's reason; a capture's finality; a void has neither.
    const bool refund = opts.kind == OperationKind::refund;
    const bool capture = opts.kind == OperationKind::capture;
    std::string title = noun + " ID";
    std::transform(title.begin(), title.end(), title.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    std::vector<std::string> head{title, "PAYMENT ID", "STATE", "AMOUNT", "PROVIDER"};
    if (refund || capture) {
        head.emplace_back(refund ? "REASON" : "FINAL");
    }
    head.insert(head.end(), {"CREATED", "UPDATED"});
    Table t(head);
    for (const auto& r : rows) {
        std::vector<std::string> row{r.id, r.payment_id, r.state,
                                     describe_money(r.amount_minor, r.currency), r.provider};
        if (refund) {
            row.push_back(r.reason.value_or("-"));
        } else if (capture) {
            row.emplace_back(r.final.value_or(true) ? "yes" : "no");
        }
        row.insert(row.end(), {r.created_at, r.updated_at});
        t.add_row(row);
    }
    t.print(std::cout);
    if (more) {
        print_more_note(std::cout, rows.size());
    }
}

void run_show(AppState& state, OperationKind kind, const std::string& id, bool json) {
    OpenDatabase opened = open_database(state.global);
    const store::OperationRow r = operation_or_refuse(*opened.db, kind, id);
    if (json) {
        print_json(to_json(r));
        return;
    }
    print_operation(std::cout, r);
    const std::string noun(subject_noun(kind));
    std::cout << "\nEvery " << noun << " of its payment: payrecon " << noun << "s list --payment "
              << r.payment_id << "\nIts payment: payrecon payments show " << r.payment_id << "\n";
    if (r.state == to_string(PaymentState::needs_review)) {
        std::cout << "It waits for a decision: " << review_show_command(r.id) << "\n";
    } else if (r.state == to_string(PaymentState::unknown)) {
        std::cout << "Its outcome is unknown; ask the provider now: " << recheck_command(r.id)
                  << "\n";
    }
}

// `<noun>s list` and `<noun>s show` for operations of `kind`.
void add_list_and_show(CLI::App& parent, AppState& state, OperationKind kind) {
    const std::string noun(subject_noun(kind));
    auto list = std::make_shared<ListOptions>();
    list->kind = kind;
    CLI::App* l = parent.add_subcommand("list", "list " + noun + "s across tenants, oldest first");
    l->add_option("--payment", list->payment, "only this payment's " + noun + "s (its ID)");
    l->add_option("--state", list->state, "only " + noun + "s in this state");
    l->add_option("--tenant", list->tenant, "only this tenant's " + noun + "s (name or ID)");
    l->add_option("--limit", list->limit, "at most this many (default 100)")
        ->check(CLI::Range(1, 1000000));
    l->add_flag("--json", list->json, "print a JSON array (amount in minor units)");
    l->callback([&state, list] { run_list(state, *list); });

    struct ShowOptions {
        std::string id;
        bool json = false;
    };
    auto show = std::make_shared<ShowOptions>();
    CLI::App* s = parent.add_subcommand("show", "one " + noun);
    s->add_option("id", show->id, noun + " ID or operation ID (pr_...)")->required();
    s->add_flag("--json", show->json, "print the " + noun + " as JSON");
    s->callback([&state, kind, show] { run_show(state, kind, show->id, show->json); });
}

} // namespace

void setup_refunds(CLI::App& app, AppState& state) {
    CLI::App* refunds = app.add_subcommand(
        "refunds", "refunds: create one as the API does (audited), list them across tenants, "
                   "show one");
    refunds->require_subcommand(1);

    auto opts = std::make_shared<CreateOptions>();
    CLI::App* c = refunds->add_subcommand(
        "create", "refund a payment exactly once per idempotency key, as POST "
                  "/v1/payments/{id}/refunds does, never more than it charged; the credential "
                  "comes from PAYRECON_API_KEY, the note goes to the audit log");
    c->add_option("--payment", opts->payment, "the payment's ID")->required();
    c->add_option("--amount", opts->amount,
                  "in major units of the payment's currency, e.g. 5.00 (default: all that is "
                  "still refundable)");
    c->add_option("--reason", opts->reason, "duplicate, fraudulent or requested_by_customer");
    c->add_option("--merchant-reference", opts->merchant_reference,
                  "your reference for the refund, unique among the tenant's refunds");
    c->add_option("--idempotency-key", opts->key, "the key; reuse it, unchanged, on every retry")
        ->required();
    c->add_option("--note", opts->note, "why the money goes back (kept in the audit log)")
        ->required();
    c->add_flag("--json", opts->json, "print {status, replayed, location, body} as JSON");
    c->callback([&state, opts] { run_create(state, *opts); });

    add_list_and_show(*refunds, state, OperationKind::refund);
}

void setup_captures(CLI::App& app, AppState& state) {
    CLI::App* captures = app.add_subcommand(
        "captures", "captures of authorised payments (made by payrecon payments capture): list "
                    "them across tenants, show one");
    captures->require_subcommand(1);
    add_list_and_show(*captures, state, OperationKind::capture);
    CLI::App* voids = app.add_subcommand(
        "voids", "voids of authorised payments (made by payrecon payments void): list them "
                 "across tenants, show one");
    voids->require_subcommand(1);
    add_list_and_show(*voids, state, OperationKind::void_authorization);
}

} // namespace payrecon::cli
