// payrecon relay: delivers the outbox to the tenants' webhook endpoints (DESIGN section 15), and
// payrecon deliveries: what was delivered, what is waiting, what died, and replays. SIGTERM or
// SIGINT lets the requests in flight finish and be recorded, then exits 0.
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/endpoint_view.hpp"
#include "cli/payment_view.hpp"
#include "cli/relay_launch.hpp"
#include "cli/signals.hpp"
#include "cli/table.hpp"
#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "core/resolution_policy.hpp"
#include "core/settings.hpp"
#include "engine/relay.hpp"
#include "services/deliveries.hpp"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace payrecon::cli {
namespace {

void run_relay(AppState& state, const RelayLaunch& launch) {
    OpenDatabase opened = open_database(state.global);
    const std::string url = opened.db->url();
    const bool embedded = opened.embedded;
    opened.db.reset();
    const std::unique_ptr<engine::Relay> relay =
        make_relay(state, launch, url, embedded, std::cout);
    engine::RelayCounts counts;
    {
        StopOnSignal stop_on_signal([&relay](int) { relay->stop(); });
        std::cout << relay_started_line(relay->options()) << std::endl;
        counts = relay->run();
    }
    std::cout << relay_stopped_line(counts) << std::endl;
    check_relay_outcome(*relay);
}

// When a delivery goes out next, in words: never a time already past that nothing will act on.
std::string next_try_text(const store::DeliveryRow& d) {
    switch (next_try(d)) {
    case NextTry::not_pending:
        return "-";
    case NextTry::in_flight:
        return "in flight now";
    case NextTry::endpoint_disabled:
        return "once the endpoint is enabled";
    case NextTry::waits_behind:
        return "after delivery " + std::to_string(*d.waits_behind);
    case NextTry::due:
        return "due now (since " + d.next_attempt_at + ")";
    case NextTry::scheduled:
        break;
    }
    return d.next_attempt_at;
}

nlohmann::ordered_json delivery_json(const store::DeliveryRow& d) {
    nlohmann::ordered_json j;
    j["delivery_id"] = d.delivery_id;
    j["tenant_id"] = d.tenant_id;
    j["endpoint_id"] = d.endpoint_id;
    j["url"] = d.url;
    j["event_id"] = d.event_id;
    j["event_type"] = d.event_type;
    j["payment_id"] = d.payment_id;
    j["state"] = d.state;
    j["attempts"] = d.attempts;
    j["tries"] = d.tries;
    j["next_attempt_at"] = d.state == "pending" ? nlohmann::ordered_json(d.next_attempt_at)
                                                : nlohmann::ordered_json(nullptr);
    j["last_status"] = json_or_null(d.last_status);
    j["last_error"] = json_or_null(d.last_error);
    j["created_at"] = d.created_at;
    j["delivered_at"] = json_or_null(d.delivered_at);
    j["dead_at"] = json_or_null(d.dead_at);
    j["in_flight"] = d.leased;
    // A pending delivery not tried before this one of the same payment is delivered or dead.
    j["waits_behind"] = d.state == "pending" && d.waits_behind
                            ? nlohmann::ordered_json(*d.waits_behind)
                            : nlohmann::ordered_json(nullptr);
    j["endpoint_enabled"] = !d.endpoint_disabled;
    return j;
}

nlohmann::ordered_json attempt_json(const store::DeliveryAttemptRow& a) {
    nlohmann::ordered_json j;
    j["attempt"] = a.attempt_no;
    j["started_at"] = a.started_at;
    j["latency_ms"] = a.latency_ms;
    j["http_status"] = json_or_null(a.http_status);
    j["outcome"] = a.outcome;
    j["response_excerpt"] = json_or_null(a.response_excerpt);
    j["error"] = json_or_null(a.error);
    j["relay"] = a.relay;
    return j;
}

long long delivery_id_or_refuse(const std::string& id) {
    try {
        std::size_t used = 0;
        const long long n = std::stoll(id, &used);
        if (used == id.size() && n > 0) {
            return n;
        }
    } catch (const std::exception&) {
    }
    throw UsageError("a delivery ID is a positive number, as payrecon deliveries list prints it: " +
                     printable(id));
}

std::string status_text(const std::optional<int>& s) {
    return s ? std::to_string(*s) : "-";
}

[[noreturn]] void refuse_unknown_delivery(long long id, const std::string& hint) {
    throw Refused("no delivery has the ID " + std::to_string(id), hint);
}

// The note of a replay or a discard as delivery_note() takes it, or UsageError.
std::string note_or_refuse(const std::string& typed) {
    auto note = delivery_note(typed);
    if (!note) {
        throw UsageError("--note must say, in 1.." + std::to_string(k_max_note_length) +
                         " characters, why");
    }
    return std::move(*note);
}

struct ListOptions {
    std::optional<std::string> tenant;
    std::optional<std::string> endpoint;
    std::optional<std::string> event;
    bool dead = false;
    bool pending = false;
    int limit = 100;
    bool json = false;
};

void run_list(AppState& state, const ListOptions& o) {
    if (o.dead && o.pending) {
        throw UsageError("--dead and --pending exclude each other");
    }
    store::DeliveryFilter f;
    if (o.endpoint) {
        f.endpoint_id = endpoint_id_or_refuse(*o.endpoint);
    }
    if (o.event) {
        if (!is_uuid_text(*o.event)) {
            throw UsageError("--event is an event ID (a UUID): " + printable(*o.event));
        }
        f.event_id = *o.event;
    }
    f.state = o.dead      ? std::optional<std::string>("dead")
              : o.pending ? std::optional<std::string>("pending")
                          : std::nullopt;
    f.limit = o.limit;
    OpenDatabase opened = open_database(state.global);
    f.tenant_id = tenant_id_or_refuse(*opened.db, o.tenant);
    const auto rows = payrecon::list_deliveries(*opened.db, f);
    if (o.json) {
        nlohmann::ordered_json arr = nlohmann::ordered_json::array();
        for (const auto& d : rows) {
            arr.push_back(delivery_json(d));
        }
        print_json(arr);
        return;
    }
    if (rows.empty()) {
        std::cout << "no deliveries\n";
        return;
    }
    Table t({"DELIVERY", "CREATED", "ENDPOINT", "EVENT", "TYPE", "STATE", "ATTEMPTS", "LAST STATUS",
             "NEXT TRY"});
    for (const auto& d : rows) {
        t.add_row({std::to_string(d.delivery_id), d.created_at, d.endpoint_id, d.event_id,
                   d.event_type, d.state, std::to_string(d.attempts), status_text(d.last_status),
                   next_try_text(d)});
    }
    t.print(std::cout);
    if (rows.size() == static_cast<std::size_t>(o.limit)) {
        print_more_note(std::cout, rows.size());
    }
}

void setup_deliveries_list(CLI::App& deliveries, AppState& state) {
    auto o = std::make_shared<ListOptions>();
    CLI::App* list = deliveries.add_subcommand("list", "deliveries, newest first");
    list->add_option("--tenant", o->tenant, "only this tenant's (name or ID)");
    list->add_option("--endpoint", o->endpoint, "only this endpoint's");
    list->add_option("--event", o->event, "only this event's (its ID: webhook-id)");
    list->add_flag("--dead", o->dead, "only dead deliveries (every try failed)");
    list->add_flag("--pending", o->pending, "only deliveries still to be made");
    list->add_option("--limit", o->limit, "the newest this many (default 100)")
        ->check(CLI::Range(1, 100000));
    list->add_flag("--json", o->json, "print a JSON array");
    list->callback([&state, o] { run_list(state, *o); });
}

void print_delivery_json(const DeliveryRecord& r) {
    nlohmann::ordered_json j = delivery_json(r.delivery);
    j["body"] = r.body;
    j["attempt_log"] = nlohmann::ordered_json::array();
    for (const auto& a : r.attempts) {
        j["attempt_log"].push_back(attempt_json(a));
    }
    print_json(j);
}

void print_delivery(const DeliveryRecord& r) {
    const store::DeliveryRow& d = r.delivery;
    Fields f{{"delivery", std::to_string(d.delivery_id)},
             {"endpoint", d.endpoint_id + " (" + d.url + ")"},
             {"event", d.event_id + " (" + d.event_type + ")"},
             {"payment", d.payment_id},
             {"state", d.state},
             {"attempts", std::to_string(d.attempts)},
             {"created", d.created_at}};
    if (d.state == "pending") {
        f.push_back({"next try", next_try_text(d)});
    }
    if (d.delivered_at) {
        f.push_back({"delivered", *d.delivered_at});
    }
    if (d.dead_at) {
        f.push_back({"dead since", *d.dead_at});
    }
    print_fields(std::cout, f);
    std::cout << "\nEvent as sent (" << r.body.size() << " bytes):\n" << printable(r.body) << "\n";
    if (!r.attempts.empty()) {
        std::cout << "\nAttempts:\n";
        Table t({"#", "STARTED", "MS", "STATUS", "OUTCOME", "RELAY", "ERROR / ANSWER"});
        for (const auto& a : r.attempts) {
            t.add_row({std::to_string(a.attempt_no), a.started_at, std::to_string(a.latency_ms),
                       status_text(a.http_status), a.outcome, a.relay,
                       a.error.value_or(a.response_excerpt.value_or(""))});
        }
        t.print(std::cout);
    }
    if (d.state == "dead") {
        std::cout << "\nEvery try failed. Once the endpoint works again:\n  payrecon "
                     "deliveries replay "
                  << d.delivery_id << " --note \"why\"\nIf it will never be taken:\n  "
                  << "payrecon deliveries discard " << d.delivery_id << " --note \"why\"\n";
    }
}

struct ShowOptions {
    std::string id;
    bool json = false;
};

void run_show(AppState& state, const ShowOptions& o) {
    const long long id = delivery_id_or_refuse(o.id);
    OpenDatabase opened = open_database(state.global);
    const auto record = delivery_record(*opened.db, id);
    if (!record) {
        refuse_unknown_delivery(id, "payrecon deliveries list");
    }
    if (o.json) {
        print_delivery_json(*record);
        return;
    }
    print_delivery(*record);
}

void setup_deliveries_show(CLI::App& deliveries, AppState& state) {
    auto o = std::make_shared<ShowOptions>();
    CLI::App* show =
        deliveries.add_subcommand("show", "one delivery: its event as sent and every attempt");
    show->add_option("id", o->id, "the delivery's ID")->required();
    show->add_flag("--json", o->json, "print JSON");
    show->callback([&state, o] { run_show(state, *o); });
}

struct ReplayOptions {
    std::optional<std::string> id;
    std::optional<std::string> endpoint;
    std::optional<std::string> since;
    std::string note;
};

void replay_one(AppState& state, const std::string& typed_id, const std::string& actor,
                const std::string& note) {
    const long long id = delivery_id_or_refuse(typed_id);
    OpenDatabase opened = open_database(state.global);
    switch (payrecon::replay_delivery(*opened.db, id, actor, note)) {
    case store::ReplayStatus::not_found:
        refuse_unknown_delivery(id, "payrecon deliveries list");
    case store::ReplayStatus::in_flight:
        throw Refused("delivery " + std::to_string(id) +
                          " is still pending: the relay tries it on its schedule",
                      "payrecon deliveries show " + std::to_string(id));
    case store::ReplayStatus::replayed:
        break;
    }
    std::cout << "delivery " << id << " is due again now (same event ID and body); "
              << "recorded in the audit log\n";
}

void replay_endpoint(AppState& state, const ReplayOptions& o, const std::string& actor,
                     const std::string& note) {
    if (!o.endpoint || !o.since) {
        throw UsageError("--endpoint and --since go together");
    }
    const std::string endpoint = endpoint_id_or_refuse(*o.endpoint);
    const long long since = parse_utc_time(*o.since, "--since");
    OpenDatabase opened = open_database(state.global);
    const auto n = payrecon::replay_since(*opened.db, endpoint, since, actor, note);
    if (!n) {
        throw Refused("no endpoint has the ID " + endpoint, "payrecon endpoint list");
    }
    std::cout << *n << " deliveries of endpoint " << endpoint
              << " are due again now; recorded in the audit log\n";
}

void run_replay(AppState& state, const ReplayOptions& o) {
    const std::string note = note_or_refuse(o.note);
    if (o.id.has_value() == (o.endpoint.has_value() || o.since.has_value())) {
        throw UsageError("give a delivery ID, or --endpoint E --since T",
                         "payrecon deliveries replay 42 --note ...; payrecon deliveries "
                         "replay --endpoint ID --since 2026-12-01 --note ...");
    }
    const std::string actor = operator_name(state.global);
    if (o.id) {
        replay_one(state, *o.id, actor, note);
    } else {
        replay_endpoint(state, o, actor, note);
    }
}

void setup_deliveries_replay(CLI::App& deliveries, AppState& state) {
    auto o = std::make_shared<ReplayOptions>();
    CLI::App* replay = deliveries.add_subcommand(
        "replay", "deliver again (the same event ID and body; audited): one delivery, or an "
                  "endpoint's events since a time");
    replay->add_option("id", o->id, "the delivery's ID");
    replay->add_option("--endpoint", o->endpoint, "every event of this endpoint ...");
    replay->add_option("--since", o->since,
                       "... created at or after this UTC time (2026-12-01 or "
                       "2026-12-01T06:30:00Z)");
    replay->add_option("--note", o->note, "why (audited)")->required();
    replay->callback([&state, o] { run_replay(state, *o); });
}

struct DiscardOptions {
    std::string id;
    std::string note;
};

void run_discard(AppState& state, const DiscardOptions& o) {
    const std::string note = note_or_refuse(o.note);
    const long long id = delivery_id_or_refuse(o.id);
    OpenDatabase opened = open_database(state.global);
    switch (payrecon::discard_delivery(*opened.db, id, operator_name(state.global), note)) {
    case store::DiscardStatus::not_found:
        refuse_unknown_delivery(id, "payrecon deliveries list --dead");
    case store::DiscardStatus::not_dead:
        throw Refused("delivery " + std::to_string(id) +
                          " is not dead: only a delivery whose every try failed is discarded",
                      "payrecon deliveries show " + std::to_string(id));
    case store::DiscardStatus::discarded:
        break;
    }
    std::cout << "delivery " << id
              << " is discarded: it will not be sent; recorded in the audit log\n";
}

void setup_deliveries_discard(CLI::App& deliveries, AppState& state) {
    auto o = std::make_shared<DiscardOptions>();
    CLI::App* discard = deliveries.add_subcommand(
        "discard", "give up on a dead delivery (the receiver will never take it): no longer "
                   "dead for nightly and /metrics; audited; deliveries replay still sends it");
    discard->add_option("id", o->id, "the dead delivery's ID")->required();
    discard->add_option("--note", o->note, "why (audited)")->required();
    discard->callback([&state, o] { run_discard(state, *o); });
}

struct PurgeOptions {
    std::string retention;
    bool dry_run = false;
    bool json = false;
};

void print_purge(const PurgeOptions& o, const store::EventPurgeResult& r,
                 std::chrono::seconds retention, const std::string& actor) {
    if (o.json) {
        print_json({{"events", r.events},
                    {"deliveries", r.deliveries},
                    {"attempts", r.attempts},
                    {"kept_undelivered", r.kept_undelivered},
                    {"tenants", r.tenants},
                    {"dry_run", o.dry_run},
                    {"retention_s", retention.count()},
                    {"operator", actor},
                    {"run_id", o.dry_run ? nlohmann::json() : nlohmann::json(r.run_id)}});
        return;
    }
    std::cout << (o.dry_run ? "would delete " : "deleted ") << r.events
              << " delivered event(s) older than " << retention.count() << "s, with "
              << r.deliveries << " deliveries";
    if (!o.dry_run) {
        std::cout << " and " << r.attempts << " attempts";
    }
    std::cout << "; kept " << r.kept_undelivered
              << " old event(s) with a pending or dead delivery\n";
    if (r.kept_undelivered > 0) {
        std::cout << "  those stay until delivered or replayed: payrecon deliveries list "
                     "--dead\n";
    }
    if (!o.dry_run) {
        std::cout << "recorded in the audit log as purge run " << r.run_id << " (" << r.tenants
                  << " tenant(s)): payrecon audit\n";
    }
}

void run_purge(AppState& state, const PurgeOptions& o) {
    std::optional<std::chrono::seconds> requested;
    if (!o.retention.empty()) {
        requested = parse_duration(o.retention, "--retention");
    }
    const auto retention = purge_retention(requested);
    if (!retention) {
        throw UsageError("--retention " + o.retention + " is shorter than 24h",
                         "delivered events are kept at least a day (a replay or a "
                         "consumer that pulls may still need them): use 24h or more");
    }
    const std::string actor = operator_name(state.global);
    OpenDatabase opened = open_database(state.global);
    const store::EventPurgeResult r =
        payrecon::purge_delivered_events(*opened.db, *retention, o.dry_run, actor);
    print_purge(o, r, *retention, actor);
}

void setup_deliveries_purge(CLI::App& deliveries, AppState& state) {
    auto o = std::make_shared<PurgeOptions>();
    CLI::App* purge = deliveries.add_subcommand(
        "purge", "delete delivered events older than the retention, with their deliveries and "
                 "attempts (audited); never an event with a pending or dead delivery");
    purge->add_option("--retention", o->retention,
                      "older than this (36h, 7d; at least 24h) instead of "
                      "PAYRECON_EVENT_RETENTION (default 30d)");
    purge->add_flag("--dry-run", o->dry_run, "count what would be deleted, delete nothing");
    purge->add_flag("--json", o->json, "print JSON");
    purge->callback([&state, o] { run_purge(state, *o); });
}

} // namespace

std::unique_ptr<engine::Relay> make_relay(AppState& state, const RelayLaunch& o,
                                          const std::string& database_url, bool embedded,
                                          std::ostream& log) {
    if (o.senders < 1 || o.senders > 256 || o.batch < 1 || o.batch > 1000 || o.per_endpoint < 1 ||
        o.per_endpoint > 64) {
        throw UsageError("--senders must be 1..256, --batch 1..1000 and --per-endpoint 1..64");
    }
    engine::RelayOptions ro;
    ro.timeout = parse_duration_ms(o.timeout, "--timeout");
    if (ro.timeout < std::chrono::milliseconds(100) || ro.timeout > std::chrono::minutes(5)) {
        throw UsageError("--timeout must be 100ms..5m (Standard Webhooks senders use 15s)");
    }
    if (!o.schedule.empty()) {
        ro.schedule = DeliverySchedule::parse(o.schedule, "--retry-schedule");
    }
    ro.allowance = endpoint_allowance();
    ro.event_retention = event_retention();
    ro.database_url = database_url;
    ro.relay_id = process_id_text();
    ro.senders = o.senders;
    ro.batch = o.batch;
    ro.per_endpoint = o.per_endpoint;
    ro.once = o.once;
    ro.ca_bundle = o.ca_bundle;
    return std::make_unique<engine::Relay>(ro, endpoint_keys(state.global, embedded), log);
}

std::string relay_started_line(const engine::RelayOptions& ro) {
    nlohmann::ordered_json started;
    started["event"] = "relay_started";
    started["relay"] = ro.relay_id;
    started["senders"] = ro.senders;
    started["per_endpoint"] = ro.per_endpoint;
    started["timeout_ms"] = ro.timeout.count();
    started["retry_schedule"] = ro.schedule.to_string();
    started["allowed_networks"] = ro.allowance.to_string();
    started["event_retention_s"] = ro.event_retention.count();
    return started.dump();
}

std::string relay_stopped_line(const engine::RelayCounts& counts) {
    nlohmann::ordered_json done;
    done["event"] = "relay_stopped";
    done["published"] = counts.published;
    done["deliveries_created"] = counts.fanned_out;
    done["attempts"] = counts.attempts;
    done["delivered"] = counts.delivered;
    done["failed"] = counts.failed;
    done["dead"] = counts.dead;
    done["endpoints_disabled"] = counts.gone;
    done["refused"] = counts.refused;
    return done.dump();
}

void check_relay_outcome(const engine::Relay& relay) {
    if (relay.database_failed()) {
        throw DatabaseUnavailable("the relay lost the database",
                                  "what it had claimed is delivered by the next relay once the "
                                  "lease ends (at least once: maybe twice)");
    }
    if (relay.failed()) {
        throw OperatorError(ExitCode::failure,
                            "the relay stopped on an error (see its relay_error log line)");
    }
}

void setup_relay(CLI::App& app, AppState& state) {
    auto o = std::make_shared<RelayLaunch>();
    CLI::App* r = app.add_subcommand(
        "relay", "deliver payment events to the tenants' webhook endpoints, signed, at least "
                 "once; SIGTERM finishes the requests in flight");
    r->add_flag("--once", o->once, "deliver what is due now, then exit");
    r->add_option("--senders", o->senders, "sender threads")->capture_default_str();
    r->add_option("--batch", o->batch, "deliveries of one endpoint claimed at once")
        ->capture_default_str();
    r->add_option("--per-endpoint", o->per_endpoint,
                  "senders one endpoint may hold at once: a slow endpoint holds no more")
        ->capture_default_str();
    r->add_option("--timeout", o->timeout, "per request, connect included")->capture_default_str();
    r->add_option("--retry-schedule", o->schedule,
                  "waits before each try, comma-separated, the first 0s (the first try is "
                  "at once; default 0s,5s,5m,30m,2h,5h,10h,10h; after the last, dead)");
    r->add_option("--ca-bundle", o->ca_bundle,
                  "PEM file of CAs trusted for endpoints' TLS (default: the system's)");
    r->callback([&state, o] { run_relay(state, *o); });
}

void setup_deliveries(CLI::App& app, AppState& state) {
    CLI::App* deliveries = app.add_subcommand(
        "deliveries", "events delivered to webhook endpoints: waiting, delivered, dead; replays");
    deliveries->require_subcommand(1);
    setup_deliveries_list(*deliveries, state);
    setup_deliveries_show(*deliveries, state);
    setup_deliveries_replay(*deliveries, state);
    setup_deliveries_discard(*deliveries, state);
    setup_deliveries_purge(*deliveries, state);
}

} // namespace payrecon::cli
