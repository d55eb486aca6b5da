#pragma once
// What the read-side commands (payments list/show, review list/show, audit) share: finding a
// payment or a tenant by what an operator typed, amounts with their currency exponent, the JSON
// shapes (snake_case keys, amounts as integer minor units plus currency), and the human layout of
// one payment's record.

#include "core/payment_state.hpp"
#include "services/inspect.hpp"

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace payrecon::store {
class Db;
}

namespace payrecon::cli {

// `v` as JSON, or null: the optional fields of every JSON shape the read-side commands print.
template <typename T>
nlohmann::json json_or_null(const std::optional<T>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json();
}

// The payment `id` names (payment ID or operation ID), and its record. Throw Refused, with a hint
// to `payrecon payments list`, if there is none.
store::PaymentRef payment_ref_or_refuse(store::Db& db, const std::string& id);
store::PaymentRecord load_record_or_refuse(store::Db& db, const std::string& id);

// The tenant's ID for a name or an ID; nullopt for nullopt. Throws Refused if there is no such
// tenant (a mistyped --tenant must not read as "no payments").
std::optional<std::string> tenant_id_or_refuse(store::Db& db,
                                               const std::optional<std::string>& tenant);

nlohmann::json to_json(const store::PaymentRow& p);
// Prints the rows as one JSON array (print_json).
void print_rows_json(const std::vector<store::PaymentRow>& rows);
nlohmann::json to_json(const store::AuditRecord& a);
// {"payment": {...}, "attempts": [...], "lookups": [...], "audit": [...]}
nlohmann::json to_json(const store::PaymentRecord& r);

// The payment's fields, then its attempts, lookups and audit trail, each a section.
void print_record(std::ostream& out, const store::PaymentRecord& r);

// A refund, capture or void as JSON (the API's resource with the operator's fields: tenant,
// operation ID, attempts, generation, review), and as a table of its fields.
nlohmann::json to_json(const store::OperationRow& r);
void print_operation(std::ostream& out, const store::OperationRow& r);

// The audit rows as a table: time, tenant, actor, action, subject, detail.
void print_audit_table(std::ostream& out, const std::vector<store::AuditRecord>& rows);

// The state `name` names (a payment's or a refund's: they share the lifecycle); UsageError naming
// every state if it names none.
PaymentState state_or_usage_error(const std::string& name);

// After a listing cut short by --limit: says so, and how to see more.
void print_more_note(std::ostream& out, std::size_t shown);

} // namespace payrecon::cli
