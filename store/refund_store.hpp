#pragma once
// Refunds as the store keeps them (DESIGN section 16): the intake transaction of a refund, and
// refunds read back. A refund is an operation of its payment (table `operations`, kind refund);
// what may be refunded is held on the payment row (`refund_held_minor`), so that concurrent
// refunds of one payment never take more than it charged. The decisions -- 404, 409, the amount
// when none is given, the bodies -- are services/refunds.cpp's; this file runs the statements.

#include "core/payment_request.hpp"
#include "store/intake_store.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace payrecon::store {

class Db;

// The payment a refund is asked of, read under its row lock: nothing else may refund it, settle
// a refund of it or change what it charged until the refund's transaction ends.
struct RefundablePayment {
    std::string payment_id;
    std::string state;
    long long amount_minor = 0;
    std::optional<long long> charged_amount_minor; // what an operator recorded it charged
    long long refund_held_minor = 0; // refunds that succeeded, in flight, unknown or in review
    std::string currency;
    std::string provider;

    long long charged() const { return charged_amount_minor.value_or(amount_minor); }
    long long refundable() const { return charged() - refund_held_minor; }
};

struct NewRefund {
    std::string refund_id;    // uuid, made by the caller
    std::string operation_id; // the provider's idempotency key, made by the caller
    const RefundRequest* request = nullptr;
    std::string idempotency_key_hash; // hex keyed digest of the Idempotency-Key
    // An operator's refund (payrecon refunds create): audited in the same transaction.
    std::optional<std::string> audit_actor;
    std::optional<std::string> audit_note;
};

// The refund that holds a merchant reference already (unique per tenant among refunds).
struct ExistingRefund {
    std::string refund_id;
    std::string payment_id;
};

// What the caller decides once the key is known to be new and the payment is locked.
struct RefundDecision {
    // A refusal (404, 409, 422): nothing is stored, the key stays free.
    std::optional<int> refused_status;
    std::string refused_body;
    // Or the refund: its amount and the 202 to store with it.
    long long amount_minor = 0;
    std::string accepted;
    // The 409 stored when the merchant reference is taken.
    std::function<std::string(const ExistingRefund&)> duplicate_reference;
};

// The refund intake, one transaction (READ COMMITTED):
// BEGIN; claim the key (INSERT ... ON CONFLICT DO NOTHING, only for a principal not revoked);
//   claimed: SELECT the payment FOR UPDATE (nullopt if the tenant has none); `decide`; a refusal
//            rolls back (the key stays free). Otherwise, in one statement: the refund (ON CONFLICT
//            on its merchant reference DO NOTHING), the payment's held amount raised by the
//            refund's under the guard that it fits, its outbox event (refund.created), the audit
//            row of an operator's refund and the 202 under the key; if the reference was taken,
//            SELECT its holder (a new statement) and store duplicate_reference(it) with 409.
//   not claimed: SELECT the key's record (a new statement), or the principal's revocation.
// COMMIT. `decide` gets the key's creation time (ISO 8601, UTC) and the payment.
// Throws TransientStoreError (DatabaseUnavailable) when nothing can be said to be stored, and
// std::length_error if a body exceeds k_max_stored_response (nothing stored).
IntakeWrite write_refund_intake(
    Db& db, const IntakeClaim& claim, const NewRefund& refund,
    const std::function<RefundDecision(const std::string& created_at,
                                       const std::optional<RefundablePayment>& payment)>& decide);

// A refund as it is read back.
struct RefundRow {
    std::string refund_id;
    std::string tenant_id;
    std::string payment_id;
    std::string operation_id;
    std::string state;
    long long amount_minor = 0;
    std::string currency;
    std::string provider;
    std::optional<std::string> reason;
    std::optional<std::string> merchant_reference;
    std::string metadata = "{}"; // JSON object of strings
    std::optional<std::string> provider_reference;
    std::optional<std::string> failure_reason;
    std::optional<std::string> review_reason;
    std::optional<std::string> review_code;
    int attempt_count = 0;
    long long generation = 0; // what an operator's decision names it by
    std::string created_at;   // ISO 8601 UTC, milliseconds
    std::string updated_at;
    // When the provider reversed it after it had succeeded (a late reversal: it is failed now).
    std::optional<std::string> reversed_at;
};

// `tenant_id`'s refund `refund_id` (a UUID in text form: the caller validates); nullopt if the
// tenant has none -- another tenant's refund is "none". Throws DatabaseUnavailable.
std::optional<RefundRow> find_refund(Db& db, const std::string& tenant_id,
                                     const std::string& refund_id);

// A refund of any tenant by its ID or operation ID, for operators; nullopt if none.
std::optional<RefundRow> find_refund_any_tenant(Db& db, const std::string& id_or_operation_id);

struct RefundFilter {
    std::optional<std::string> tenant_id;
    std::optional<std::string> payment_id;
    std::optional<std::string> state;
    std::optional<std::string> provider;
    std::optional<std::chrono::seconds> older_than; // updated_at at least this long ago
    bool by_updated_at = false; // oldest by when it last changed (the review queue), not created
    int limit = 100;
};

// Refunds across tenants, oldest first, at most `limit` + 1 (the caller says "more").
std::vector<RefundRow> list_refunds(Db& db, const RefundFilter& filter);

} // namespace payrecon::store
