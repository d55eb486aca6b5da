#pragma once
// The operator's read side: payments across tenants, one payment with everything recorded about
// it (attempts, status lookups, audit trail), and the audit log. Read-only; timestamps are ISO 8601
// UTC text with milliseconds ("2026-12-02T12:59:34.123Z"), absent ones nullopt.

#include "core/payment_state.hpp"
#include "core/resolution_evidence.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace payrecon::store {

class Db;

struct PaymentRef {
    std::string tenant_id;
    std::string payment_id;
};

// `id` is a payment ID (a UUID, any case) or an operation ID ("pr_..."). Returns nullopt if no
// payment has it; never throws for malformed text (it is simply not found). Throws Refused if a
// UUID names payments of more than one tenant (a payment ID holds 74 random bits besides its
// millisecond: it would take a hand-made row), DatabaseUnavailable.
std::optional<PaymentRef> resolve_payment_ref(Db& db, const std::string& id);

// Which end of the list is "oldest": by when the payment was accepted, or by when it last changed
// (the review queue: how long it has waited).
enum class PaymentOrder { created_at, updated_at };

struct PaymentFilter {
    std::optional<PaymentState> state;
    std::optional<std::string> provider;
    std::optional<std::chrono::seconds> older_than; // updated_at at least this long ago
    std::optional<std::string> tenant_id;           // the caller resolves a tenant name to its ID
    PaymentOrder order = PaymentOrder::created_at;
    int limit = 100; // at least 1
};

struct PaymentRow {
    std::string payment_id;
    std::string tenant_id;
    std::string tenant; // the tenant's name
    std::string state;
    long long amount_minor = 0;
    std::string currency;
    std::string provider;
    std::string merchant_reference;
    std::string operation_id;
    std::optional<std::string> provider_reference;
    std::optional<std::string> review_code;
    std::optional<std::string> review_reason;
    int attempt_count = 0;
    long long generation = 0;
    std::string created_at;
    std::string updated_at;
};

struct PaymentPage {
    std::vector<PaymentRow> rows; // oldest first, at most filter.limit
    bool more = false;            // more rows matched than the limit let through
};

// Throws std::invalid_argument if filter.limit < 1; DatabaseUnavailable.
PaymentPage list_payments(Db& db, const PaymentFilter& filter);

// The providers payments name, sorted: by skipping along the index on (provider, ...) from one
// name to the next, not by reading every payment. Throws DatabaseUnavailable.
std::vector<std::string> payment_providers(Db& db);

// One row of payment_attempts: every call to the provider.
struct AttemptRecord {
    int attempt_no = 0;
    long long generation = 0;
    std::string worker;
    std::string operation_id;
    std::string started_at;
    std::optional<std::string> finished_at;
    std::string outcome;
    std::optional<int> http_status;
    std::optional<std::string> error_class;
    std::optional<std::string> provider_reference;
    std::optional<std::string> detail;
};

// One row of payment_lookups: every status query, whatever it found.
struct LookupRecord {
    long long lookup_id = 0;
    long long generation = 0;
    std::string actor;
    std::string at;
    std::string status;
    std::optional<std::string> remote_state;
    std::optional<std::string> remote_raw_status;
    std::optional<long long> remote_amount;
    std::optional<std::string> remote_currency;
    std::optional<std::string> provider_reference;
    int duplicates = 0;
    std::optional<int> http_status;
    std::optional<std::string> error_class;
    std::optional<std::string> detail;
    std::string decision;
    std::optional<std::string> reason;
    bool applied = false;
};

struct AuditRecord {
    long long audit_id = 0;
    std::string tenant_id;
    std::string tenant; // the tenant's name ("" if the tenant row is gone)
    std::string at;
    std::string actor;
    std::string action;
    std::string subject_type;
    std::string subject_id;
    std::string detail_json; // a JSON object, as text
};

// A statement run's finding about one payment: what the provider's books said of it.
struct StatementEvidence {
    std::string provider;
    std::string window_from; // the run's window, ISO 8601 UTC
    std::string window_to;
    std::string category; // unresolved_unknown, amount_mismatch, ...
    std::optional<std::string> provider_reference;
    std::optional<long long> remote_amount; // minor units
    std::optional<std::string> remote_currency;
    std::optional<std::string> remote_state;
    std::string detail;
    std::string finding_id;                     // what `statement findings acknowledge` takes
    std::optional<std::string> acknowledged_by; // handled by an operator: who, and the note
    std::optional<std::string> acknowledge_note;
};

// A provider's webhook event about the payment (migration 0012), and what became of it.
struct ProviderEventRecord {
    long long event_id = 0;
    std::string event_key;
    std::string event_type;
    std::string outcome; // succeeded, failed, pending, other
    std::optional<std::string> provider_reference;
    std::optional<long long> amount_minor;
    std::optional<std::string> currency;
    std::string received_at; // ISO 8601 UTC
    int deliveries = 1;
    std::optional<std::string>
        applied_result; // adopt_succeeded, review, consistent, contradicts...
};

struct PaymentRecord {
    PaymentRow payment;
    std::string payment_method; // the provider's token (pm_...), never card data
    std::optional<std::string> customer;
    std::optional<std::string> description;
    std::string metadata_json; // a JSON object, as text
    std::string created_by;    // principal ID
    std::optional<std::string> next_attempt_at;
    std::optional<std::string> lease_owner;
    std::optional<std::string> lease_expires_at;
    std::optional<std::string> first_attempt_at;
    std::optional<std::string> last_attempt_at;
    int lookup_count = 0;
    int lookup_failures = 0;
    // What the provider really charged, as an operator recorded it (review resolve --amount), when
    // it differs from amount_minor; in the payment's currency.
    std::optional<long long> charged_amount_minor;
    std::vector<AttemptRecord> attempts; // by attempt_no
    std::vector<LookupRecord> lookups;   // in the order they were made
    std::vector<AuditRecord> audit;      // audit_log rows about this payment, oldest first
    // The newest complete statement runs' findings about it (at most 5, newest window first).
    std::vector<StatementEvidence> statement_findings;
    // The provider's webhook events about it, in the order received (at most 20, the newest).
    std::vector<ProviderEventRecord> events;
};

// The payment with its attempts, lookups and audit trail, read from one snapshot; nullopt if the
// tenant has no such payment. `ref` comes from resolve_payment_ref(). Throws DatabaseUnavailable.
std::optional<PaymentRecord> load_payment_record(Db& db, const PaymentRef& ref);

// What the provider was seen to hold for one payment (core/resolution_evidence), with the
// payment's fields its rules compare it with.
struct PaymentEvidence {
    std::string state;
    long long generation = 0;
    long long amount_minor = 0;
    std::string currency;
    std::optional<std::string> provider_reference; // the payment's own
    // The status queries that found it (newest first), the provider's records of its operation ID
    // (or of its own reference) in complete statement runs of its provider and those runs'
    // findings about it (newest window first), and its verified webhook events (newest first):
    // at most 50 of each.
    std::vector<SeenRecord> seen;
};

// The payment's evidence, read from one snapshot; nullopt if the tenant has no such payment.
// Throws DatabaseUnavailable.
std::optional<PaymentEvidence> load_payment_evidence(Db& db, const PaymentRef& ref);

// A refund's evidence, the same way: its state, generation, amount, currency and provider
// reference, and what the provider was seen to hold of its operation ID -- the refund status
// queries that found it and its verified webhook events (a statement run does not read refunds
// yet). A record's "charged" outcome is the refund's money moved back. nullopt if the tenant has
// no such refund. Throws DatabaseUnavailable.
std::optional<PaymentEvidence> load_refund_evidence(Db& db, const std::string& tenant_id,
                                                    const std::string& refund_id);

struct AuditFilter {
    std::optional<PaymentRef> payment;    // only rows about this payment
    std::optional<std::string> tenant_id; // only rows of this tenant
    int limit = 100;                      // the newest `limit` rows; at least 1
};

// Audit rows, the newest `filter.limit` of those that match, returned oldest first (newest last).
// Throws std::invalid_argument if filter.limit < 1; DatabaseUnavailable.
std::vector<AuditRecord> list_audit(Db& db, const AuditFilter& filter);

} // namespace payrecon::store
