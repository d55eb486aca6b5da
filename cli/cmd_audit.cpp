// payrecon audit: who did what, when, to what -- the append-only audit log, newest last.
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/payment_view.hpp"
#include "store/inspect_store.hpp"

#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace payrecon::cli {
namespace {

// A payment's trail is more than the audit log: the provider calls the workers made (a re-send an
// operator scheduled, and what it came to) and the reconciler's status queries, as entries of the
// same shape (action provider.attempt / provider.lookup), merged oldest first.
std::vector<store::AuditRecord> with_calls(std::vector<store::AuditRecord> rows,
                                           const store::PaymentRecord& record, std::size_t limit) {
    const auto entry = [&](const std::string& at, const std::string& actor,
                           const std::string& action, const nlohmann::json& detail) {
        store::AuditRecord a;
        a.tenant_id = record.payment.tenant_id;
        a.tenant = record.payment.tenant;
        a.at = at;
        a.actor = actor;
        a.action = action;
        a.subject_type = "payment";
        a.subject_id = record.payment.payment_id;
        a.detail_json = detail.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        return a;
    };
    for (const auto& t : record.attempts) {
        nlohmann::ordered_json d;
        d["attempt"] = t.attempt_no;
        d["generation"] = t.generation;
        d["outcome"] = t.finished_at ? t.outcome : "in flight";
        d["http_status"] = json_or_null(t.http_status);
        d["error_class"] = json_or_null(t.error_class);
        d["provider_reference"] = json_or_null(t.provider_reference);
        d["started_at"] = t.started_at;
        rows.push_back(
            entry(t.finished_at.value_or(t.started_at), t.worker, "provider.attempt", d));
    }
    for (const auto& l : record.lookups) {
        nlohmann::ordered_json d;
        d["generation"] = l.generation;
        d["status"] = l.status;
        d["remote_state"] = json_or_null(l.remote_state);
        d["provider_reference"] = json_or_null(l.provider_reference);
        d["remote_amount"] = json_or_null(l.remote_amount);
        d["remote_currency"] = json_or_null(l.remote_currency);
        rows.push_back(entry(l.at, l.actor, "provider.lookup", d));
    }
    // ISO 8601 UTC text of one format: sorts as time does; equal times keep the log's order.
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto& a, const auto& b) { return a.at < b.at; });
    if (rows.size() > limit) {
        rows.erase(rows.begin(), rows.end() - static_cast<std::ptrdiff_t>(limit));
    }
    return rows;
}

} // namespace

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
        auto rows = store::list_audit(*opened.db, filter);
        if (filter.payment) {
            if (const auto record = store::load_payment_record(*opened.db, *filter.payment)) {
                rows = with_calls(std::move(rows), *record, static_cast<std::size_t>(opts->limit));
            }
        }
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
