// payrecon review list|show: the review queue, the payments a human must decide (state
// needs_review), and everything known about one of them with the commands that act on it.
// `review resolve` and `review recheck` (the decisions) live in cmd_review_actions.cpp.
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/payment_view.hpp"
#include "cli/table.hpp"
#include "core/encoding.hpp"
#include "core/money.hpp"
#include "core/operator_commands.hpp"
#include "core/review_guidance.hpp"
#include "core/settings.hpp"
#include "services/inspect.hpp"
#include "services/payments.hpp"

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace payrecon::cli {
namespace {

// The commands that can help a payment in review, one complete line each: the decisions
// services/inspect offers, then recheck where asking the provider again can settle it.
std::vector<std::string> review_commands(const store::PaymentRow& p, const ReviewCase& review) {
    std::vector<std::string> out;
    for (const auto& c : review.decisions) {
        out.push_back(printable(command_line(c)));
    }
    if (review.recheck) {
        out.push_back(recheck_command(p.payment_id));
    }
    return out;
}

// "pi_123 declined, 25.00 EUR (the statement of ... .. ...)": one record the provider was seen to
// hold, printable.
std::string seen_line(const SeenRecord& r) {
    std::string line =
        printable(r.reference.value_or("(no reference)")) + " " + std::string(to_string(r.outcome));
    if (r.amount_minor) {
        line += ", " + printable(describe_money(*r.amount_minor, r.currency.value_or("")));
    }
    return line + " (" + printable(r.seen_in) + ")";
}

void setup_review_list(CLI::App& review, AppState& state) {
    struct Options {
        std::optional<std::string> provider;
        std::optional<std::string> tenant;
        std::optional<std::string> older_than;
        int limit = 100;
        bool json = false;
    };
    auto opts = std::make_shared<Options>();
    CLI::App* l = review.add_subcommand(
        "list", "payments waiting for a decision, longest waiting first, with why (review code)");
    l->add_option("--provider", opts->provider, "only payments for this provider");
    l->add_option("--tenant", opts->tenant, "only this tenant's payments (name or ID)");
    l->add_option("--older-than", opts->older_than,
                  "only payments in review for at least this long: 30s, 15m, 36h, 7d");
    l->add_option("--limit", opts->limit, "at most this many (default 100)")
        ->check(CLI::Range(1, 1000000));
    l->add_flag("--json", opts->json, "print a JSON array (amount in minor units)");
    l->callback([&state, opts] {
        store::PaymentFilter filter;
        filter.provider = opts->provider;
        filter.limit = opts->limit;
        if (opts->older_than) {
            filter.older_than = parse_duration(*opts->older_than, "--older-than");
        }
        OpenDatabase opened = open_database(state.global);
        filter.tenant_id = tenant_id_or_refuse(*opened.db, opts->tenant);
        const ReviewQueue queue = review_queue(*opened.db, filter);
        const store::PaymentPage& page = queue.page;
        if (page.rows.empty() && queue.operations.empty() && opts->provider) {
            // A mistyped provider lists nothing too: say so rather than "none in review".
            refuse_unknown_provider(*opened.db, intake_provider_catalog(state.global),
                                    *opts->provider);
        }
        if (opts->json) {
            // The payments, then the refunds, captures and voids (each with its "kind").
            nlohmann::json all = nlohmann::json::array();
            for (const auto& p : page.rows) {
                all.push_back(to_json(p));
            }
            for (const auto& r : queue.operations) {
                nlohmann::json j = to_json(r);
                j["kind"] = to_string(r.kind);
                all.push_back(std::move(j));
            }
            print_json(all);
            return;
        }
        // Events that contradict a settled payment are in the queue too, though the payment is
        // not (succeeded and failed are final): an operator acknowledges each.
        const auto contradiction_note = [&] {
            if (queue.contradictions > 0) {
                std::cout << queue.contradictions
                          << " provider event(s) contradict a settled payment: payrecon events "
                             "list --contradicting\n";
            }
        };
        // Refunds, captures and voids wait in the same queue, decided by the same commands under
        // their own IDs.
        const auto operations_table = [&] {
            if (queue.operations.empty()) {
                return;
            }
            std::cout << (page.rows.empty() ? "" : "\n")
                      << "Refunds, captures and voids in review:\n";
            Table t({"KIND", "ID", "PAYMENT ID", "PROVIDER", "AMOUNT", "CODE", "IN REVIEW SINCE",
                     "GEN", "REASON"});
            for (const auto& r : queue.operations) {
                t.add_row({std::string(to_string(r.kind)), r.id, r.payment_id, r.provider,
                           describe_money(r.amount_minor, r.currency), r.review_code.value_or("-"),
                           r.updated_at, std::to_string(r.generation),
                           r.review_reason.value_or("-")});
            }
            t.print(std::cout);
            if (queue.operations_more) {
                print_more_note(std::cout, queue.operations.size());
            }
            std::cout << "`" << review_show_command(queue.operations.front().id)
                      << "` shows the first " << subject_noun(queue.operations.front().kind)
                      << " with the complete commands that decide it\n";
        };
        if (page.rows.empty()) {
            std::cout << (queue.operations.empty()
                              ? "no payments, refunds, captures or voids in review\n"
                              : "no payments in review\n");
            operations_table();
            contradiction_note();
            return;
        }
        Table t({"PAYMENT ID", "TENANT", "PROVIDER", "AMOUNT", "CODE", "IN REVIEW SINCE", "GEN",
                 "REASON"});
        for (const auto& p : page.rows) {
            t.add_row({p.payment_id, p.tenant, p.provider,
                       describe_money(p.amount_minor, p.currency), p.review_code.value_or("-"),
                       p.updated_at, std::to_string(p.generation), p.review_reason.value_or("-")});
        }
        t.print(std::cout);
        if (page.more) {
            print_more_note(std::cout, page.rows.size());
        }
        std::cout << "`" << review_show_command(page.rows.front().payment_id)
                  << "` shows the first with its attempts, lookups and the complete commands that "
                     "decide it\n";
        operations_table();
        contradiction_note();
    });
}

// Why it waits, what its code means, and what the provider was seen to hold: a payment's or a
// refund's case alike.
void print_case(const ReviewCase& shown, const std::optional<std::string>& code,
                const std::optional<std::string>& reason, long long generation,
                const std::string& what) {
    std::cout << "Why it waits: " << code.value_or("(no code)") << ": "
              << printable(reason.value_or("(no reason recorded)")) << "\n"
              << "Generation: " << generation << " (pass it as --generation: it names the " << what
              << " as shown here)\n";
    if (shown.guidance != nullptr) {
        std::cout << "What it means: " << shown.guidance->means << "\n"
                  << "Check: " << shown.guidance->check << "\n"
                  << "Then: " << shown.guidance->act << "\n"
                  << "Runbook: docs/operations.md, " << *code << "\n";
    }
    if (!shown.seen.empty()) {
        // What the provider was seen to hold orders the commands below, and resolve checks a
        // reference against it.
        std::cout << "What the provider was seen to hold:\n";
        for (const auto& r : shown.seen) {
            std::cout << "  " << seen_line(r) << "\n";
        }
    }
}

// `review show` of a refund: its fields, why it waits, and the commands that decide it.
void show_operation(store::Db& db, const store::OperationRow& r, bool json) {
    const std::string noun(subject_noun(r.kind));
    const ReviewCase shown = review_case(db, r);
    std::vector<std::string> commands;
    for (const auto& c : shown.decisions) {
        commands.push_back(printable(command_line(c)));
    }
    if (shown.in_review && shown.recheck) {
        commands.push_back(recheck_command(r.id));
    }
    if (json) {
        print_json({{noun, to_json(r)},
                    {"in_review", shown.in_review},
                    {"commands", commands},
                    {"guidance", shown.guidance ? nlohmann::json{{"means", shown.guidance->means},
                                                                 {"check", shown.guidance->check},
                                                                 {"do", shown.guidance->act}}
                                                : nlohmann::json()}});
        return;
    }
    print_operation(std::cout, r);
    std::cout << "\n";
    if (!shown.in_review) {
        std::cout << "Not in review: the " << noun << " is " << r.state
                  << "; there is nothing to decide.\n";
        return;
    }
    print_case(shown, r.review_code, r.review_reason, r.generation, noun);
    const auto [did, freed] = [&]() -> std::pair<std::string, std::string> {
        switch (r.kind) {
        case OperationKind::capture:
            return {"captured", "the amount is capturable again"};
        case OperationKind::void_authorization:
            return {"released the authorisation", "the authorisation stands"};
        case OperationKind::refund:
        case OperationKind::charge:
            break;
        }
        return {"refunded", "the amount is refundable again"};
    }();
    std::cout << "Check the " << noun << " at the provider (" << r.provider << ", operation ID "
              << r.operation_id << ", of the charge on payment " << r.payment_id
              << "), then one of (replace \"...\" with what you checked; --as succeeded: it " << did
              << ", under --provider-reference; failed: it did not, and " << freed
              << "; retry --confirm-no-charge: it holds no " << noun
              << " under the operation ID, send it again):\n";
    for (const auto& c : commands) {
        std::cout << "  " << c << "\n";
    }
}

void setup_review_show(CLI::App& review, AppState& state) {
    struct Options {
        std::string id;
        bool json = false;
    };
    auto opts = std::make_shared<Options>();
    CLI::App* s = review.add_subcommand(
        "show", "one payment in review: everything recorded about it, why it waits, and the "
                "commands that decide it");
    s->add_option("id", opts->id,
                  "payment ID, refund, capture or void ID, or an operation ID (pr_...)")
        ->required();
    s->add_flag("--json", opts->json,
                "print JSON: {payment, attempts, lookups, audit, in_review, commands} (a refund, "
                "capture or void: {refund|capture|void, in_review, commands, guidance})");
    s->callback([&state, opts] {
        OpenDatabase opened = open_database(state.global);
        if (!find_payment_ref(*opened.db, opts->id)) {
            if (const auto operation = find_any_operation(*opened.db, opts->id)) {
                show_operation(*opened.db, *operation, opts->json);
                return;
            }
        }
        const store::PaymentRecord record = load_record_or_refuse(*opened.db, opts->id);
        const store::PaymentRow& p = record.payment;
        const ReviewCase shown = review_case(*opened.db, record);
        const bool in_review = shown.in_review;
        const std::vector<std::string> commands =
            in_review ? review_commands(p, shown) : std::vector<std::string>{};
        const ReviewGuidance* guidance = shown.guidance;
        if (opts->json) {
            nlohmann::json j = to_json(record);
            j["in_review"] = in_review;
            j["commands"] = commands;
            j["guidance"] = guidance ? nlohmann::json{{"means", guidance->means},
                                                      {"check", guidance->check},
                                                      {"do", guidance->act}}
                                     : nlohmann::json();
            print_json(j);
            return;
        }
        print_record(std::cout, record);
        std::cout << "\n";
        if (!in_review) {
            std::cout << "Not in review: the payment is " << p.state
                      << "; there is nothing to decide.\n";
            return;
        }
        print_case(shown, p.review_code, p.review_reason, p.generation, "payment");
        std::cout << "Check the payment at the provider (" << p.provider << ", operation ID "
                  << p.operation_id << "), then one of (replace \"...\" with what you checked):\n";
        for (const auto& c : commands) {
            std::cout << "  " << c << "\n";
        }
    });
}

} // namespace

void setup_review(CLI::App& app, AppState& state) {
    CLI::App* review = app.add_subcommand(
        "review", "the review queue: payments only a human can decide (state needs_review)");
    review->require_subcommand(1);
    setup_review_list(*review, state);
    setup_review_show(*review, state);
    setup_review_actions(*review, state);
}

} // namespace payrecon::cli
