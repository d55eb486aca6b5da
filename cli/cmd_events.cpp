// payrecon events: the providers' webhook events as payrecon stored them (DESIGN section 14) --
// verified, deduplicated, linked to our payment when the operation ID is ours -- and what became
// of each. A contradiction (an event that disagrees with a payment that settled without it) waits
// in the review queue until an operator acknowledges it with a note. `events purge` deletes old
// events that are no longer anyone's evidence (services/retention), audited.
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/payment_view.hpp"
#include "cli/table.hpp"
#include "core/errors.hpp"
#include "core/money.hpp"
#include "core/resolution_policy.hpp"
#include "core/settings.hpp"
#include "services/provider_events.hpp"
#include "services/retention.hpp"

#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace payrecon::cli {
namespace {
// The most events one `events list` shows (--limit).
constexpr int k_max_events_listed = 100000;

nlohmann::ordered_json event_json(const store::ProviderEventRow& e, bool with_body) {
    nlohmann::ordered_json j;
    j["event_id"] = e.event_id;
    j["provider"] = e.provider;
    j["event_key"] = e.event_key;
    j["event_type"] = e.event_type;
    j["outcome"] = e.outcome;
    j["operation_id"] = json_or_null(e.operation_id);
    j["provider_reference"] = json_or_null(e.provider_reference);
    j["amount_minor"] = json_or_null(e.amount_minor);
    j["currency"] = json_or_null(e.currency);
    j["occurred_at"] = json_or_null(e.occurred_at);
    j["received_at"] = e.received_at;
    j["last_received_at"] = e.last_received_at;
    j["deliveries"] = e.deliveries;
    j["tenant_id"] = json_or_null(e.tenant_id);
    j["payment_id"] = json_or_null(e.payment_id);
    j["payment_state"] = json_or_null(e.payment_state);
    j["payment_amount_minor"] = json_or_null(e.payment_amount_minor);
    j["payment_currency"] = json_or_null(e.payment_currency);
    j["applied_at"] = json_or_null(e.applied_at);
    j["result"] = json_or_null(e.applied_result);
    j["awaiting_acknowledgement"] = e.awaiting_acknowledgement();
    j["acknowledged_at"] = json_or_null(e.acknowledged_at);
    j["acknowledged_by"] = json_or_null(e.acknowledged_by);
    j["acknowledge_note"] = json_or_null(e.acknowledge_note);
    if (with_body) {
        j["body"] = e.body; // as received (the JSON writer replaces invalid UTF-8)
    }
    return j;
}

std::string amount_text(const std::optional<long long>& minor,
                        const std::optional<std::string>& currency) {
    if (!minor) {
        return "-";
    }
    if (!currency) {
        return std::to_string(*minor);
    }
    return major_units(*minor, *currency).value_or(std::to_string(*minor) + " minor units") + " " +
           *currency;
}

// What became of the event, in an operator's words.
std::string result_text(const store::ProviderEventRow& e) {
    if (!e.payment_id) {
        return "unmatched: no payment of ours has this operation ID";
    }
    if (!e.applied_result) {
        if (e.outcome == "pending" || e.outcome == "other") {
            return "kept (not an outcome)";
        }
        return "waiting: applied once the payment is unknown or settled";
    }
    if (*e.applied_result == "contradicts") {
        return e.acknowledged_at ? "contradicts; acknowledged by " +
                                       e.acknowledged_by.value_or("") + " at " + *e.acknowledged_at
                                 : "CONTRADICTS the payment: acknowledge it once handled";
    }
    return *e.applied_result;
}

long long event_id_or_refuse(const std::string& id) {
    try {
        std::size_t used = 0;
        const long long n = std::stoll(id, &used);
        if (used == id.size() && n > 0) {
            return n;
        }
    } catch (const std::exception&) {
    }
    throw UsageError("an event ID is a positive number, as payrecon events list prints it: " +
                     printable(id));
}

store::ProviderEventRow event_or_refuse(store::Db& db, long long id) {
    auto e = provider_event(db, id);
    if (!e) {
        throw Refused("no provider event has the ID " + std::to_string(id),
                      "list them with: payrecon events list");
    }
    return *e;
}

void print_event(const store::ProviderEventRow& e) {
    Fields f{
        {"event", std::to_string(e.event_id)},
        {"provider", e.provider},
        {"provider's event", e.event_key},
        {"type", e.event_type},
        {"says", e.outcome},
        {"amount", amount_text(e.amount_minor, e.currency)},
        {"operation ID", e.operation_id.value_or("-")},
        {"provider reference", e.provider_reference.value_or("-")},
        {"occurred at", e.occurred_at.value_or("-")},
        {"received at", e.received_at},
        {"deliveries", std::to_string(e.deliveries) + " (last at " + e.last_received_at + ")"}};
    if (e.payment_id) {
        f.push_back({"payment", *e.payment_id + " (" + e.payment_state.value_or("?") + ", " +
                                    amount_text(e.payment_amount_minor, e.payment_currency) + ")"});
    }
    f.push_back({"result", result_text(e)});
    if (e.acknowledge_note) {
        f.push_back({"note", *e.acknowledge_note});
    }
    print_fields(std::cout, f);
    std::cout << "\nBody as received (" << e.body.size() << " bytes):\n"
              << printable(e.body) << "\n";
    if (e.awaiting_acknowledgement()) {
        std::cout << "\nThe payment keeps its state (succeeded and failed are final). Check the "
                     "provider's dashboard, do what the difference needs (refund, fulfil, tell "
                     "finance), then:\n  payrecon events acknowledge "
                  << e.event_id << " --note \"what you checked and did\"\n";
    }
}

void setup_events_list(CLI::App* events, AppState& state) {
    struct ListOptions {
        std::optional<std::string> provider;
        std::optional<std::string> payment;
        bool unmatched = false;
        bool contradicting = false;
        int limit = 100;
        bool json = false;
    };
    auto lo = std::make_shared<ListOptions>();
    CLI::App* list = events->add_subcommand("list", "stored events, newest last");
    list->add_option("--provider", lo->provider, "only this provider's (its configured name)");
    list->add_option("--payment", lo->payment,
                     "only the events of this payment (payment ID or operation ID)");
    list->add_flag("--unmatched", lo->unmatched,
                   "only events naming no payment of ours (they feed the statement's "
                   "missing_local)");
    list->add_flag("--contradicting", lo->contradicting,
                   "only events that contradict a settled payment and await acknowledgement");
    list->add_option("--limit", lo->limit, "the newest this many (default 100)")
        ->check(CLI::Range(1, k_max_events_listed));
    list->add_flag("--json", lo->json, "print a JSON array");
    list->callback([&state, lo] {
        if (lo->unmatched && lo->payment) {
            throw UsageError("--unmatched and --payment exclude each other: an unmatched event "
                             "names no payment of ours");
        }
        OpenDatabase opened = open_database(state.global);
        store::ProviderEventFilter filter;
        filter.provider = lo->provider;
        filter.unmatched = lo->unmatched;
        filter.contradicting = lo->contradicting;
        filter.limit = lo->limit;
        if (lo->payment) {
            const store::PaymentRef ref = payment_ref_or_refuse(*opened.db, *lo->payment);
            filter.tenant_id = ref.tenant_id;
            filter.payment_id = ref.payment_id;
        }
        const store::ProviderEventList listed = provider_events(*opened.db, filter);
        const auto& rows = listed.rows;
        if (lo->json) {
            nlohmann::ordered_json arr = nlohmann::ordered_json::array();
            for (const auto& e : rows) {
                arr.push_back(event_json(e, false));
            }
            print_json(arr);
            return;
        }
        if (rows.empty()) {
            std::cout << "no provider events\n";
            return;
        }
        Table t({"EVENT", "RECEIVED", "PROVIDER", "TYPE", "SAYS", "AMOUNT", "PAYMENT", "STATE",
                 "DELIVERIES", "RESULT"});
        for (const auto& e : rows) {
            t.add_row({std::to_string(e.event_id), e.received_at, e.provider, e.event_type,
                       e.outcome, amount_text(e.amount_minor, e.currency),
                       e.payment_id.value_or("-"), e.payment_state.value_or("-"),
                       std::to_string(e.deliveries), result_text(e)});
        }
        t.print(std::cout);
        if (listed.matching > static_cast<long long>(rows.size())) {
            std::cout << "showing the newest " << rows.size() << " of " << listed.matching
                      << " matching events; "
                      << (listed.matching <= k_max_events_listed
                              ? "--limit " + std::to_string(listed.matching) + " shows them all"
                              : std::string("--provider, --payment or --unmatched narrows them"))
                      << "\n";
        }
    });
}

void setup_events_show(CLI::App* events, AppState& state) {
    struct ShowOptions {
        std::string id;
        bool json = false;
    };
    auto so = std::make_shared<ShowOptions>();
    CLI::App* show = events->add_subcommand("show", "one event, with its body as received");
    show->add_option("id", so->id, "the event's ID (payrecon events list)")->required();
    show->add_flag("--json", so->json, "print JSON");
    show->callback([&state, so] {
        const long long id = event_id_or_refuse(so->id);
        OpenDatabase opened = open_database(state.global);
        const auto e = event_or_refuse(*opened.db, id);
        if (so->json) {
            print_json(event_json(e, true));
            return;
        }
        print_event(e);
    });
}

void setup_events_acknowledge(CLI::App* events, AppState& state) {
    struct AckOptions {
        std::string id;
        std::string note;
        bool json = false;
    };
    auto ao = std::make_shared<AckOptions>();
    CLI::App* ack = events->add_subcommand(
        "acknowledge", "record that a contradicting event was looked at and what was done "
                       "(audited; the payment keeps its state)");
    ack->add_option("id", ao->id, "the event's ID")->required();
    ack->add_option("--note", ao->note, "what you checked and did, 1..2000 characters")->required();
    ack->add_flag("--json", ao->json, "print JSON");
    ack->callback([&state, ao] {
        const long long id = event_id_or_refuse(ao->id);
        const std::string note = trimmed_note(ao->note);
        if (note.empty() || note.size() > k_max_note_length) {
            throw UsageError("--note must say, in 1.." + std::to_string(k_max_note_length) +
                             " characters, what you checked and did");
        }
        const std::string actor = operator_name(state.global);
        OpenDatabase opened = open_database(state.global);
        const auto r = acknowledge_contradiction(*opened.db, id, actor, note);
        switch (r.status) {
        case store::AcknowledgeStatus::not_found:
            throw Refused("no provider event has the ID " + std::to_string(id),
                          "list the contradictions with: payrecon events list --contradicting");
        case store::AcknowledgeStatus::not_contradicting:
            throw Refused("event " + std::to_string(id) + " contradicts nothing (its result: " +
                              (r.event ? result_text(*r.event) : std::string("?")) +
                              "); there is nothing to acknowledge",
                          "payrecon events show " + std::to_string(id));
        case store::AcknowledgeStatus::already:
            throw Refused("event " + std::to_string(id) + " was acknowledged already by " +
                              (r.event ? r.event->acknowledged_by.value_or("?") : "?") + " at " +
                              (r.event ? r.event->acknowledged_at.value_or("?") : "?"),
                          "payrecon events show " + std::to_string(id));
        case store::AcknowledgeStatus::acknowledged:
            break;
        }
        if (ao->json) {
            print_json(event_json(*r.event, false));
            return;
        }
        std::cout << "event " << id << " acknowledged by " << printable(actor) << "; payment "
                  << r.event->payment_id.value_or("-") << " stays "
                  << r.event->payment_state.value_or("-") << "; recorded in the audit log\n";
    });
}

void setup_events_purge(CLI::App* events, AppState& state) {
    struct PurgeOptions {
        std::string retention;
        bool dry_run = false;
        bool json = false;
    };
    auto po = std::make_shared<PurgeOptions>();
    CLI::App* purge = events->add_subcommand(
        "purge", "delete events last received longer ago than the retention (audited); never one "
                 "of a payment not settled, an unacknowledged contradiction, or one not yet "
                 "compared with its settled payment");
    purge->add_option("--retention", po->retention,
                      "older than this (31d, 90d; at least 31d) instead of "
                      "PAYRECON_PROVIDER_EVENT_RETENTION (default 90d)");
    purge->add_flag("--dry-run", po->dry_run, "count what would be deleted, delete nothing");
    purge->add_flag("--json", po->json, "print JSON");
    purge->callback([&state, po] {
        std::chrono::seconds retention{};
        if (po->retention.empty()) {
            retention = provider_event_retention();
        } else {
            retention = parse_duration(po->retention, "--retention");
            if (const auto problem = provider_event_retention_problem(retention)) {
                throw UsageError("--retention " + po->retention + " " + *problem,
                                 "providers redeliver an event for up to 30 days, and a purged "
                                 "event that comes again is stored as new: use 31d or more");
            }
        }
        const std::string actor = operator_name(state.global);
        OpenDatabase opened = open_database(state.global);
        const store::ProviderEventPurgeResult r =
            payrecon::purge_provider_events(*opened.db, retention, po->dry_run, actor);
        if (po->json) {
            print_json({{"events", r.events},
                        {"unmatched", r.unmatched},
                        {"kept_unsettled", r.kept_unsettled},
                        {"kept_contradicting", r.kept_contradicting},
                        {"kept_unexamined", r.kept_unexamined},
                        {"tenants", r.tenants},
                        {"dry_run", po->dry_run},
                        {"retention_s", retention.count()},
                        {"operator", actor},
                        {"run_id", po->dry_run ? nlohmann::json() : nlohmann::json(r.run_id)}});
            return;
        }
        std::cout << (po->dry_run ? "would delete " : "deleted ") << r.events
                  << " provider event(s) last received more than " << retention.count() << "s ago ("
                  << r.unmatched << " of them naming no payment of ours); kept " << r.kept_unsettled
                  << " of payments not settled, " << r.kept_contradicting
                  << " unacknowledged contradiction(s), " << r.kept_unexamined
                  << " not yet compared with their settled payment\n";
        if (r.kept_contradicting > 0) {
            std::cout << "  a contradiction goes once acknowledged: payrecon events list "
                         "--contradicting\n";
        }
        if (r.kept_unexamined > 0) {
            std::cout << "  the worker or `payrecon reconcile` compares them (a provider no "
                         "longer configured is never compared: configure it for one run)\n";
        }
        if (!po->dry_run) {
            std::cout << "recorded in the audit log as purge run " << r.run_id << " (" << r.tenants
                      << " tenant(s)): payrecon audit\n";
        }
    });
}

} // namespace

void setup_events(CLI::App& app, AppState& state) {
    CLI::App* events = app.add_subcommand(
        "events", "the providers' webhook events: what each said, and what became of it");
    events->require_subcommand(1);
    setup_events_list(events, state);
    setup_events_show(events, state);
    setup_events_acknowledge(events, state);
    setup_events_purge(events, state);
}

} // namespace payrecon::cli
