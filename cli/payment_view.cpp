#include "cli/payment_view.hpp"

#include "cli/context.hpp"
#include "cli/table.hpp"
#include "core/errors.hpp"
#include "core/money.hpp"
#include "services/captures.hpp"
#include "services/refunds.hpp"

namespace payrecon::cli {
namespace {

std::string or_dash(const std::optional<std::string>& v) {
    return v ? *v : "-";
}

template <typename T>
std::string num_or_dash(const std::optional<T>& v) {
    return v ? std::to_string(*v) : "-";
}

// Stored JSON text as JSON; text that does not parse (it always should) stays a string.
nlohmann::json json_text(const std::string& text) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    return j.is_discarded() ? nlohmann::json(text) : j;
}

nlohmann::json to_json(const store::AttemptRecord& a) {
    return {{"attempt_no", a.attempt_no},
            {"generation", a.generation},
            {"worker", a.worker},
            {"operation_id", a.operation_id},
            {"started_at", a.started_at},
            {"finished_at", json_or_null(a.finished_at)},
            {"outcome", a.outcome},
            {"http_status", json_or_null(a.http_status)},
            {"error_class", json_or_null(a.error_class)},
            {"provider_reference", json_or_null(a.provider_reference)},
            {"detail", json_or_null(a.detail)}};
}

nlohmann::json to_json(const store::LookupRecord& l) {
    return {{"lookup_id", l.lookup_id},
            {"generation", l.generation},
            {"actor", l.actor},
            {"at", l.at},
            {"status", l.status},
            {"remote_state", json_or_null(l.remote_state)},
            {"remote_raw_status", json_or_null(l.remote_raw_status)},
            {"remote_amount", json_or_null(l.remote_amount)},
            {"remote_currency", json_or_null(l.remote_currency)},
            {"provider_reference", json_or_null(l.provider_reference)},
            {"duplicates", l.duplicates},
            {"http_status", json_or_null(l.http_status)},
            {"error_class", json_or_null(l.error_class)},
            {"detail", json_or_null(l.detail)},
            {"decision", l.decision},
            {"reason", json_or_null(l.reason)},
            {"applied", l.applied}};
}

Refused no_such_payment(const std::string& id) {
    return Refused("there is no payment " + printable(id),
                   "give a payment ID or an operation ID (pr_...); `payrecon payments list` shows "
                   "them");
}

// The payment's own fields, one a line.
void print_payment_fields(std::ostream& out, const store::PaymentRecord& r) {
    const store::PaymentRow& p = r.payment;
    out << "Payment " << p.payment_id << "\n";
    print_fields(out,
                 {{"tenant", p.tenant + " (" + p.tenant_id + ")"},
                  {"state", p.state},
                  {"amount", describe_money(p.amount_minor, p.currency) +
                                 (r.charged_amount_minor
                                      ? "; the provider charged " +
                                            describe_money(*r.charged_amount_minor, p.currency) +
                                            " (recorded by an operator)"
                                      : std::string())},
                  {"provider", p.provider},
                  {"merchant reference", p.merchant_reference},
                  {"operation ID", p.operation_id},
                  {"provider reference", or_dash(p.provider_reference)},
                  {"payment method", r.payment_method},
                  {"customer", or_dash(r.customer)},
                  {"description", or_dash(r.description)},
                  {"metadata", r.metadata_json},
                  {"generation", std::to_string(p.generation)},
                  {"attempts", std::to_string(p.attempt_count)},
                  {"lookups", std::to_string(r.lookup_count) + " (" +
                                  std::to_string(r.lookup_failures) + " failed in a row)"},
                  {"review code", or_dash(p.review_code)},
                  {"reason", or_dash(p.review_reason)},
                  {"created by", r.created_by},
                  {"created at", p.created_at},
                  {"updated at", p.updated_at},
                  {"first attempt at", or_dash(r.first_attempt_at)},
                  {"last attempt at", or_dash(r.last_attempt_at)},
                  {"next attempt at", or_dash(r.next_attempt_at)},
                  {"lease", r.lease_owner ? *r.lease_owner + " until " + or_dash(r.lease_expires_at)
                                          : std::string("-")}},
                 "  ");
}

// The calls made to the provider for it, with the detail of each that has one.
void print_attempts(std::ostream& out, const store::PaymentRecord& r) {
    out << "\nAttempts (" << r.attempts.size() << ")\n";
    if (r.attempts.empty()) {
        out << "  none: never sent to the provider\n";
    } else {
        Table t({"NO", "GEN", "WORKER", "STARTED", "FINISHED", "OUTCOME", "HTTP", "ERROR",
                 "PROVIDER REF"});
        for (const auto& a : r.attempts) {
            t.add_row({std::to_string(a.attempt_no), std::to_string(a.generation), a.worker,
                       a.started_at, or_dash(a.finished_at), a.outcome, num_or_dash(a.http_status),
                       or_dash(a.error_class), or_dash(a.provider_reference)});
        }
        t.print(out);
        for (const auto& a : r.attempts) {
            if (a.detail && !a.detail->empty()) {
                out << "  attempt " << a.attempt_no << " detail: " << printable(*a.detail) << "\n";
            }
        }
    }
}

// The status queries about it, with the reason and the detail of each that has them.
void print_lookups(std::ostream& out, const store::PaymentRecord& r) {
    out << "\nLookups (" << r.lookups.size() << ")\n";
    if (r.lookups.empty()) {
        out << "  none: nobody asked the provider about it\n";
    } else {
        Table t({"ID", "GEN", "AT", "ACTOR", "STATUS", "REMOTE STATE", "REMOTE AMOUNT", "DUPS",
                 "HTTP", "ERROR", "PROVIDER REF", "DECISION", "APPLIED"});
        for (const auto& l : r.lookups) {
            std::string remote_state = or_dash(l.remote_state);
            if (l.remote_raw_status) {
                remote_state += " (" + *l.remote_raw_status + ")";
            }
            std::string remote_amount = "-";
            if (l.remote_amount) {
                remote_amount = l.remote_currency
                                    ? describe_money(*l.remote_amount, *l.remote_currency)
                                    : std::to_string(*l.remote_amount) + " (minor units)";
            }
            t.add_row({std::to_string(l.lookup_id), std::to_string(l.generation), l.at, l.actor,
                       l.status, remote_state, remote_amount, std::to_string(l.duplicates),
                       num_or_dash(l.http_status), or_dash(l.error_class),
                       or_dash(l.provider_reference), l.decision, l.applied ? "yes" : "no"});
        }
        t.print(out);
        for (const auto& l : r.lookups) {
            if (l.reason && !l.reason->empty()) {
                out << "  lookup " << l.lookup_id << " reason: " << printable(*l.reason) << "\n";
            }
            if (l.detail && !l.detail->empty()) {
                out << "  lookup " << l.lookup_id << " detail: " << printable(*l.detail) << "\n";
            }
        }
    }
}

// What the provider's own books said of it: evidence for the decision.
void print_statement_findings(std::ostream& out, const store::PaymentRecord& r) {
    if (r.statement_findings.empty()) {
        return;
    }
    out << "\nStatement findings (" << r.statement_findings.size() << ")\n";
    Table t({"WINDOW", "CATEGORY", "PROVIDER REF", "REMOTE AMOUNT", "REMOTE STATE"});
    for (const auto& f : r.statement_findings) {
        t.add_row({f.window_from + " .. " + f.window_to, f.category, or_dash(f.provider_reference),
                   f.remote_amount && f.remote_currency
                       ? describe_money(*f.remote_amount, *f.remote_currency)
                       : std::string("-"),
                   or_dash(f.remote_state)});
    }
    t.print(out);
    for (const auto& f : r.statement_findings) {
        out << "  " << f.category << " (finding " << f.finding_id << "): " << printable(f.detail)
            << (f.acknowledged_by ? " [handled by " + printable(*f.acknowledged_by) + ": " +
                                        printable(f.acknowledge_note.value_or("")) + "]"
                                  : std::string())
            << "\n";
    }
}

// What the provider told us unasked (webhooks), and what payrecon did with it.
void print_provider_events(std::ostream& out, const store::PaymentRecord& r) {
    if (r.events.empty()) {
        return;
    }
    out << "\nProvider events (" << r.events.size() << ")\n";
    Table t(
        {"RECEIVED", "EVENT", "TYPE", "SAYS", "AMOUNT", "PROVIDER REF", "DELIVERIES", "APPLIED"});
    for (const auto& e : r.events) {
        t.add_row({e.received_at, e.event_key, e.event_type, e.outcome,
                   e.amount_minor && e.currency ? describe_money(*e.amount_minor, *e.currency)
                                                : std::string("-"),
                   or_dash(e.provider_reference), std::to_string(e.deliveries),
                   e.applied_result.value_or("not yet")});
    }
    t.print(out);
}

} // namespace

store::PaymentRef payment_ref_or_refuse(store::Db& db, const std::string& id) {
    auto ref = find_payment_ref(db, id);
    if (!ref) {
        throw no_such_payment(id);
    }
    return std::move(*ref);
}

store::PaymentRecord load_record_or_refuse(store::Db& db, const std::string& id) {
    auto record = payment_record(db, payment_ref_or_refuse(db, id));
    if (!record) {
        throw no_such_payment(id); // gone between the two reads: only by hand, payments stay
    }
    return std::move(*record);
}

std::optional<std::string> tenant_id_or_refuse(store::Db& db,
                                               const std::optional<std::string>& tenant) {
    if (!tenant) {
        return std::nullopt;
    }
    auto tenant_id = find_tenant_id(db, *tenant);
    if (!tenant_id) {
        throw Refused("there is no tenant '" + printable(*tenant) + "'",
                      "`payrecon tenant list` shows the tenants");
    }
    return tenant_id;
}

nlohmann::json to_json(const store::PaymentRow& p) {
    return {{"payment_id", p.payment_id},
            {"tenant_id", p.tenant_id},
            {"tenant", p.tenant},
            {"state", p.state},
            {"amount", p.amount_minor},
            {"currency", p.currency},
            {"provider", p.provider},
            {"merchant_reference", p.merchant_reference},
            {"operation_id", p.operation_id},
            {"provider_reference", json_or_null(p.provider_reference)},
            {"review_code", json_or_null(p.review_code)},
            {"review_reason", json_or_null(p.review_reason)},
            {"attempt_count", p.attempt_count},
            {"generation", p.generation},
            {"created_at", p.created_at},
            {"updated_at", p.updated_at}};
}

void print_rows_json(const std::vector<store::PaymentRow>& rows) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& p : rows) {
        arr.push_back(to_json(p));
    }
    print_json(arr);
}

nlohmann::json to_json(const store::AuditRecord& a) {
    return {{"audit_id", a.audit_id},
            {"tenant_id", a.tenant_id},
            {"tenant", a.tenant},
            {"at", a.at},
            {"actor", a.actor},
            {"action", a.action},
            {"subject_type", a.subject_type},
            {"subject_id", a.subject_id},
            {"detail", json_text(a.detail_json)}};
}

nlohmann::json to_json(const store::PaymentRecord& r) {
    nlohmann::json payment = to_json(r.payment);
    payment["payment_method"] = r.payment_method;
    payment["customer"] = json_or_null(r.customer);
    payment["description"] = json_or_null(r.description);
    payment["metadata"] = json_text(r.metadata_json);
    payment["created_by"] = r.created_by;
    payment["next_attempt_at"] = json_or_null(r.next_attempt_at);
    payment["lease_owner"] = json_or_null(r.lease_owner);
    payment["lease_expires_at"] = json_or_null(r.lease_expires_at);
    payment["first_attempt_at"] = json_or_null(r.first_attempt_at);
    payment["last_attempt_at"] = json_or_null(r.last_attempt_at);
    payment["lookup_count"] = r.lookup_count;
    payment["lookup_failures"] = r.lookup_failures;
    payment["charged_amount"] = json_or_null(r.charged_amount_minor);
    nlohmann::json attempts = nlohmann::json::array();
    for (const auto& a : r.attempts) {
        attempts.push_back(to_json(a));
    }
    nlohmann::json lookups = nlohmann::json::array();
    for (const auto& l : r.lookups) {
        lookups.push_back(to_json(l));
    }
    nlohmann::json audit = nlohmann::json::array();
    for (const auto& a : r.audit) {
        audit.push_back(to_json(a));
    }
    nlohmann::json findings = nlohmann::json::array();
    for (const auto& f : r.statement_findings) {
        findings.push_back({{"provider", f.provider},
                            {"window_from", f.window_from},
                            {"window_to", f.window_to},
                            {"category", f.category},
                            {"provider_reference", json_or_null(f.provider_reference)},
                            {"remote_amount", json_or_null(f.remote_amount)},
                            {"remote_currency", json_or_null(f.remote_currency)},
                            {"remote_state", json_or_null(f.remote_state)},
                            {"detail", f.detail},
                            {"finding_id", f.finding_id},
                            {"acknowledged_by", json_or_null(f.acknowledged_by)},
                            {"acknowledge_note", json_or_null(f.acknowledge_note)}});
    }
    nlohmann::json events = nlohmann::json::array();
    for (const auto& e : r.events) {
        events.push_back({{"event_id", e.event_id},
                          {"event_key", e.event_key},
                          {"event_type", e.event_type},
                          {"outcome", e.outcome},
                          {"provider_reference", json_or_null(e.provider_reference)},
                          {"amount", json_or_null(e.amount_minor)},
                          {"currency", json_or_null(e.currency)},
                          {"received_at", e.received_at},
                          {"deliveries", e.deliveries},
                          {"applied_result", json_or_null(e.applied_result)}});
    }
    return {{"payment", payment}, {"attempts", attempts},           {"lookups", lookups},
            {"audit", audit},     {"statement_findings", findings}, {"provider_events", events}};
}

void print_record(std::ostream& out, const store::PaymentRecord& r) {
    print_payment_fields(out, r);
    print_attempts(out, r);
    print_lookups(out, r);
    print_statement_findings(out, r);
    print_provider_events(out, r);
    out << "\nAudit trail (" << r.audit.size() << ")\n";
    if (r.audit.empty()) {
        out << "  none\n";
    } else {
        print_audit_table(out, r.audit);
    }
}

void print_audit_table(std::ostream& out, const std::vector<store::AuditRecord>& rows) {
    Table t({"AT", "TENANT", "ACTOR", "ACTION", "SUBJECT", "DETAIL"});
    for (const auto& a : rows) {
        t.add_row({a.at, a.tenant, a.actor, a.action, a.subject_type + " " + a.subject_id,
                   a.detail_json});
    }
    t.print(out);
}

void print_more_note(std::ostream& out, std::size_t shown) {
    out << "(the first " << shown << " shown; more match: raise --limit or narrow the filter)\n";
}

PaymentState state_or_usage_error(const std::string& name) {
    if (const auto s = parse_payment_state(name)) {
        return *s;
    }
    std::string names;
    for (const PaymentState s : k_all_payment_states) {
        names += (names.empty() ? "" : ", ") + std::string(to_string(s));
    }
    throw UsageError("--state: '" + name + "' is not a payment state", "use one of: " + names);
}

nlohmann::json to_json(const store::OperationRow& r) {
    nlohmann::json j = nlohmann::json::parse(
        r.kind == OperationKind::refund ? refund_resource_json(r) : capture_resource_json(r));
    j["tenant_id"] = r.tenant_id;
    j["operation_id"] = r.operation_id;
    j["attempt_count"] = r.attempt_count;
    j["generation"] = r.generation;
    j["review_code"] = r.review_code ? nlohmann::json(*r.review_code) : nlohmann::json();
    j["review_reason"] = r.review_reason ? nlohmann::json(*r.review_reason) : nlohmann::json();
    return j;
}

void print_operation(std::ostream& out, const store::OperationRow& r) {
    Table t({"FIELD", "VALUE"});
    t.add_row({std::string(subject_noun(r.kind)), r.id});
    t.add_row({"payment", r.payment_id});
    t.add_row({"tenant", r.tenant_id});
    t.add_row({"state", r.state});
    t.add_row({"amount", describe_money(r.amount_minor, r.currency)});
    t.add_row({"provider", r.provider});
    t.add_row({"operation ID", r.operation_id});
    t.add_row({"provider reference", r.provider_reference.value_or("-")});
    if (r.kind == OperationKind::refund) {
        t.add_row({"reason", r.reason.value_or("-")});
    }
    if (r.final) {
        t.add_row({"final", *r.final ? "yes (what is left of the authorisation is released)"
                                     : "no (more may be captured)"});
    }
    t.add_row({"merchant reference", r.merchant_reference.value_or("-")});
    t.add_row({"failure reason", r.failure_reason.value_or("-")});
    if (r.reversed_at) {
        t.add_row({"reversed", *r.reversed_at + " (by the provider, after it had succeeded)"});
    }
    t.add_row({"review", r.review_code ? *r.review_code + ": " + r.review_reason.value_or("")
                                       : std::string("-")});
    t.add_row({"attempts", std::to_string(r.attempt_count)});
    t.add_row({"generation", std::to_string(r.generation)});
    t.add_row({"created", r.created_at});
    t.add_row({"updated", r.updated_at});
    t.print(out);
}

} // namespace payrecon::cli
