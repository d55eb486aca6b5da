// payrecon payments create: the intake protocol from the command line, authenticated by
// PAYRECON_API_KEY (never an argument). payments list|show: the operator's view across tenants.
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/intake_view.hpp"
#include "cli/payment_view.hpp"
#include "cli/table.hpp"
#include "core/errors.hpp"
#include "core/money.hpp"
#include "core/operator_commands.hpp"
#include "core/payment_state.hpp"
#include "core/problem.hpp"
#include "core/settings.hpp"
#include "services/auth.hpp"
#include "services/captures.hpp"
#include "services/inspect.hpp"
#include "services/intake.hpp"
#include "services/payments.hpp"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

namespace payrecon::cli {
namespace {

std::string read_body(const std::string& file) {
    if (file.empty() || file == "-") {
        return std::string(std::istreambuf_iterator<char>(std::cin), {});
    }
    std::ifstream in(file, std::ios::binary);
    if (!in) {
        throw UsageError("cannot read the request body from " + file);
    }
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

struct ListOptions {
    std::optional<std::string> state;
    std::optional<std::string> provider;
    std::optional<std::string> tenant;
    std::optional<std::string> older_than;
    int limit = 100;
    bool json = false;
};

void run_list(AppState& state, const ListOptions& opts) {
    store::PaymentFilter filter;
    if (opts.state) {
        filter.state = state_or_usage_error(*opts.state);
    }
    if (opts.older_than) {
        filter.older_than = parse_duration(*opts.older_than, "--older-than");
    }
    filter.provider = opts.provider;
    filter.limit = opts.limit;
    OpenDatabase opened = open_database(state.global);
    filter.tenant_id = tenant_id_or_refuse(*opened.db, opts.tenant);
    const store::PaymentPage page = payments_page(*opened.db, filter);
    if (page.rows.empty() && opts.provider) {
        // A mistyped provider lists nothing too: say so rather than "none match".
        refuse_unknown_provider(*opened.db, intake_provider_catalog(state.global), *opts.provider);
    }
    if (opts.json) {
        print_rows_json(page.rows);
        return;
    }
    if (page.rows.empty()) {
        std::cout << "no payments match\n";
        return;
    }
    Table t({"PAYMENT ID", "TENANT", "STATE", "AMOUNT", "PROVIDER", "MERCHANT REF", "ATTEMPTS",
             "CREATED", "UPDATED"});
    for (const auto& p : page.rows) {
        t.add_row({p.payment_id, p.tenant, p.state, describe_money(p.amount_minor, p.currency),
                   p.provider, p.merchant_reference, std::to_string(p.attempt_count), p.created_at,
                   p.updated_at});
    }
    t.print(std::cout);
    if (page.more) {
        print_more_note(std::cout, page.rows.size());
    }
}

void run_show(AppState& state, const std::string& id, bool json) {
    OpenDatabase opened = open_database(state.global);
    const store::PaymentRecord record = load_record_or_refuse(*opened.db, id);
    if (json) {
        print_json(to_json(record));
        return;
    }
    print_record(std::cout, record);
    // What an operator can do with it now, as complete commands.
    const store::PaymentRow& p = record.payment;
    switch (next_step(p)) {
    case NextStep::review:
        std::cout << "\nIn review; its decisions, complete: " << review_show_command(p.payment_id)
                  << "\n";
        break;
    case NextStep::recheck:
        std::cout << "\nUnknown: the reconciler asks the provider; to ask now: "
                  << recheck_command(p.payment_id) << "\n";
        break;
    case NextStep::cancel:
        std::cout << "\nIf it must not be sent (refused if an attempt may have reached the "
                     "provider): "
                  << cancel_command(p.payment_id, p.generation) << "\n";
        break;
    case NextStep::none:
        break;
    }
}

struct CaptureOptions {
    std::string payment;
    std::optional<std::string> amount;
    bool not_final = false;
    std::optional<std::string> merchant_reference;
    std::string key;
    std::string note;
    bool json = false;
};

// payrecon payments capture|void: an operator's capture or void under the intake protocol,
// authenticated by PAYRECON_API_KEY and audited with the note.
void run_capture(AppState& state, const CaptureOptions& opts, bool is_void) {
    const Secret api_key = api_key_from_environment();
    // Asked before the database is opened: nothing moves without its reason.
    const std::string note = capture_note(opts.note);
    const std::string actor = operator_name(state.global);
    OpenDatabase opened = open_database(state.global);
    const FingerprintKeys keys = fingerprint_keys(state.global, opened.embedded);
    IntakeResponse response;
    const auto principal = authenticate(*opened.db, api_key);
    if (!principal) {
        response = refusal_for(principal.error());
    } else {
        IntakeSettings settings;
        settings.retention = idempotency_retention();
        settings.providers = intake_provider_catalog(state.global);
        CaptureService captures(*opened.db, keys, settings);
        if (is_void) {
            nlohmann::json body = nlohmann::json::object();
            if (opts.merchant_reference) {
                body["merchant_reference"] = *opts.merchant_reference;
            }
            response = captures.create_void(*principal, opts.payment, opts.key, body.dump(), "",
                                            CaptureAudit{actor, note});
        } else {
            const std::string body =
                operator_capture_body(*opened.db, *principal, opts.payment, opts.amount,
                                      !opts.not_final, opts.merchant_reference);
            response = captures.create_capture(*principal, opts.payment, opts.key, body, "",
                                               CaptureAudit{actor, note});
        }
    }
    state.exit_code = print_intake(response, opts.json);
}

void setup_capture(CLI::App& payments, AppState& state) {
    auto opts = std::make_shared<CaptureOptions>();
    CLI::App* c = payments.add_subcommand(
        "capture", "capture an authorisation (a payment made with capture manual) exactly once "
                   "per idempotency key, as POST /v1/payments/{id}/captures does, never more than "
                   "it authorised; the credential comes from PAYRECON_API_KEY, the note goes to "
                   "the audit log");
    c->add_option("--payment", opts->payment, "the payment's ID")->required();
    c->add_option("--amount", opts->amount,
                  "in major units of the payment's currency, e.g. 5.00 (default: all that is "
                  "still capturable)");
    c->add_flag("--not-final", opts->not_final,
                "more captures may follow (only where the provider captures in parts); by "
                "default the capture is final and the provider releases the rest");
    c->add_option("--merchant-reference", opts->merchant_reference,
                  "your reference for the capture, unique among the tenant's captures");
    c->add_option("--idempotency-key", opts->key, "the key; reuse it, unchanged, on every retry")
        ->required();
    c->add_option("--note", opts->note, "why it is captured now (kept in the audit log)")
        ->required();
    c->add_flag("--json", opts->json, "print {status, replayed, location, body} as JSON");
    c->callback([&state, opts] { run_capture(state, *opts, false); });

    auto v = std::make_shared<CaptureOptions>();
    CLI::App* vc = payments.add_subcommand(
        "void", "void an authorisation: the provider releases what no capture took, exactly once "
                "per idempotency key, as POST /v1/payments/{id}/void does; never after a final "
                "capture");
    vc->add_option("--payment", v->payment, "the payment's ID")->required();
    vc->add_option("--merchant-reference", v->merchant_reference,
                   "your reference for the void, unique among the tenant's voids");
    vc->add_option("--idempotency-key", v->key, "the key; reuse it, unchanged, on every retry")
        ->required();
    vc->add_option("--note", v->note, "why it is voided (kept in the audit log)")->required();
    vc->add_flag("--json", v->json, "print {status, replayed, location, body} as JSON");
    vc->callback([&state, v] { run_capture(state, *v, true); });
}

} // namespace

void setup_payments(CLI::App& app, AppState& state) {
    CLI::App* payments = app.add_subcommand(
        "payments", "payments: create one as the API does, list them across tenants, show one, "
                    "cancel one that was never sent, capture or void an authorisation");
    payments->require_subcommand(1);
    setup_payment_actions(*payments, state);
    setup_capture(*payments, state);

    struct CreateOptions {
        std::string key;
        std::string body_file;
        std::string api_version;
        bool json = false;
    };
    auto opts = std::make_shared<CreateOptions>();
    CLI::App* c = payments->add_subcommand(
        "create", "create a payment exactly once per idempotency key, as POST /v1/payments does; "
                  "the credential comes from PAYRECON_API_KEY; with --config (PAYRECON_CONFIG), a "
                  "provider it does not configure is refused");
    c->add_option("--idempotency-key", opts->key, "the key; reuse it, unchanged, on every retry")
        ->required();
    c->add_option("--body-file", opts->body_file, "JSON request body (default: standard input)");
    c->add_option("--api-version", opts->api_version,
                  "Payrecon-Version (default: the current one)");
    c->add_flag("--json", opts->json, "print {status, replayed, location, body} as JSON");
    c->callback([&state, opts] {
        const Secret api_key = api_key_from_environment();
        const std::string body = read_body(opts->body_file);
        OpenDatabase opened = open_database(state.global);
        const FingerprintKeys keys = fingerprint_keys(state.global, opened.embedded);
        IntakeResponse response;
        const auto principal = authenticate(*opened.db, api_key);
        if (!principal) {
            response = refusal_for(principal.error());
        } else {
            IntakeSettings settings;
            settings.retention = idempotency_retention();
            settings.providers = intake_provider_catalog(state.global);
            IntakeService intake(*opened.db, keys, settings);
            response = intake.create_payment(*principal, opts->key, body, opts->api_version);
        }
        state.exit_code = print_intake(response, opts->json);
    });

    auto list = std::make_shared<ListOptions>();
    CLI::App* l = payments->add_subcommand(
        "list", "list payments across tenants, oldest first (by when they were accepted)");
    l->add_option("--state", list->state,
                  "only payments in this state (pending, processing, succeeded, failed, "
                  "retry_scheduled, unknown, needs_review)");
    l->add_option("--provider", list->provider, "only payments for this provider");
    l->add_option("--tenant", list->tenant, "only this tenant's payments (name or ID)");
    l->add_option("--older-than", list->older_than,
                  "only payments unchanged for at least this long: 30s, 15m, 36h, 7d");
    l->add_option("--limit", list->limit, "at most this many (default 100)")
        ->check(CLI::Range(1, 1000000));
    l->add_flag("--json", list->json, "print a JSON array (amount in minor units)");
    l->callback([&state, list] { run_list(state, *list); });

    struct ShowOptions {
        std::string id;
        bool json = false;
    };
    auto show = std::make_shared<ShowOptions>();
    CLI::App* s = payments->add_subcommand(
        "show", "one payment with its attempts, status lookups and audit trail");
    s->add_option("id", show->id, "payment ID or operation ID (pr_...)")->required();
    s->add_flag("--json", show->json, "print JSON: {payment, attempts, lookups, audit}");
    s->callback([&state, show] { run_show(state, show->id, show->json); });
}

} // namespace payrecon::cli
