#pragma once
// A payment's operations beyond its charge as the store keeps them (DESIGN section 16): refunds,
// captures and voids (table `operations`, one row each, by kind). Their intake transaction, whose
// amount rules are held on the payment row under concurrency -- refunds never beyond what was
// charged (or captured), captures never beyond what was authorised, nothing captured after a void
// or the authorisation's expiry, no void after a final capture --, and operations read back. The
// decisions -- 404, 409, the amount when none is given, the bodies -- are services'; this file runs
// the statements.

#include "core/payment_request.hpp"
#include "core/payment_state.hpp"
#include "store/intake_store.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace payrecon::store {

class Db;

// The payment an operation is asked of, read under its row lock: nothing else may take an
// operation of it, settle one or change what it charged until the operation's transaction ends.
struct OperablePayment {
    std::string payment_id;
    std::string state;
    long long amount_minor = 0;
    std::optional<long long> charged_amount_minor; // what an operator recorded it charged
    long long refund_held_minor = 0; // refunds that succeeded, in flight, unknown or in review
    std::string currency;
    std::string provider;
    // An authorisation's (issue 32): capture "manual", what its captures hold (succeeded, in
    // flight, unknown, in review) and what those that succeeded took, whether a final capture or
    // a void is held, whether it was voided, and whether it has expired (by the provider's
    // validity counted from acceptance, or as nightly found it) and when it does.
    bool manual_capture = false;
    long long capture_held_minor = 0;
    long long captured_minor = 0;
    bool final_capture_held = false;
    bool void_held = false;
    bool voided = false;
    bool expired = false;
    std::optional<std::string> authorization_expires_at; // ISO 8601 UTC

    // What a refund may be of: what was captured of an authorisation, else what was charged.
    long long charged() const {
        return manual_capture ? captured_minor : charged_amount_minor.value_or(amount_minor);
    }
    long long refundable() const { return charged() - refund_held_minor; }
    long long capturable() const { return amount_minor - capture_held_minor; }
};

struct NewOperation {
    OperationKind kind = OperationKind::refund; // refund, capture or void_authorization
    std::string id;           // uuid, made by the caller: the refund's, capture's or void's ID
    std::string operation_id; // the provider's idempotency key, made by the caller
    // What the request said: its payment, merchant reference and metadata; a refund's reason, a
    // capture's final.
    std::string payment_id;
    std::optional<std::string> reason;
    std::optional<bool> final;
    std::optional<std::string> merchant_reference;
    std::map<std::string, std::string> metadata;
    std::string idempotency_key_hash; // hex keyed digest of the Idempotency-Key
    // An operator's operation (payrecon refunds create, payments capture, payments void): audited
    // in the same transaction.
    std::optional<std::string> audit_actor;
    std::optional<std::string> audit_note;
};

// The operation that holds a merchant reference already (unique per tenant and kind).
struct ExistingOperation {
    std::string id;
    std::string payment_id;
};

// What the caller decides once the key is known to be new and the payment is locked.
struct OperationDecision {
    // A refusal (404, 409, 422): nothing is stored, the key stays free.
    std::optional<int> refused_status;
    std::string refused_body;
    // Or the operation: its amount and the 202 to store with it.
    long long amount_minor = 0;
    std::string accepted;
    // The 409 stored when the merchant reference is taken.
    std::function<std::string(const ExistingOperation&)> duplicate_reference;
};

// The intake of an operation, one transaction (READ COMMITTED):
// BEGIN; claim the key (INSERT ... ON CONFLICT DO NOTHING, only for a principal not revoked);
//   claimed: SELECT the payment FOR UPDATE (nullopt if the tenant has none); `decide`; a refusal
//            rolls back (the key stays free). Otherwise, in one statement: the operation (ON
//            CONFLICT on its merchant reference DO NOTHING), what it takes held on the payment
//            under its kind's guard, its outbox event (refund.created, capture.created,
//            void.created), the audit row of an operator's operation and the 202 under the key;
//            if the reference was taken, SELECT its holder (a new statement) and store
//            duplicate_reference(it) with 409.
//   not claimed: SELECT the key's record (a new statement), or the principal's revocation.
// COMMIT. `decide` gets the key's creation time (ISO 8601, UTC) and the payment.
// Throws TransientStoreError (DatabaseUnavailable) when nothing can be said to be stored, and
// std::length_error if a body exceeds k_max_stored_response (nothing stored).
IntakeWrite write_operation_intake(
    Db& db, const IntakeClaim& claim, const NewOperation& operation,
    const std::function<OperationDecision(const std::string& created_at,
                                          const std::optional<OperablePayment>& payment)>& decide);

// An operation as it is read back.
struct OperationRow {
    OperationKind kind = OperationKind::refund;
    std::string id; // the refund's, capture's or void's
    std::string tenant_id;
    std::string payment_id;
    std::string operation_id;
    std::string state;
    long long amount_minor = 0;
    std::string currency;
    std::string provider;
    std::optional<std::string> reason; // a refund's
    std::optional<bool> final;         // a capture's
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

// `tenant_id`'s operation `id` of `kind` (a UUID in text form: the caller validates); nullopt if
// the tenant has none -- another tenant's is "none". Throws DatabaseUnavailable.
std::optional<OperationRow> find_operation(Db& db, OperationKind kind, const std::string& tenant_id,
                                           const std::string& id);
inline std::optional<OperationRow> find_refund(Db& db, const std::string& tenant_id,
                                               const std::string& refund_id) {
    return find_operation(db, OperationKind::refund, tenant_id, refund_id);
}

// An operation of `kind` (nullopt: of any kind) of any tenant by its ID or operation ID, for
// operators; nullopt if none.
std::optional<OperationRow> find_operation_any_tenant(Db& db, std::optional<OperationKind> kind,
                                                      const std::string& id_or_operation_id);
inline std::optional<OperationRow> find_refund_any_tenant(Db& db,
                                                          const std::string& id_or_operation_id) {
    return find_operation_any_tenant(db, OperationKind::refund, id_or_operation_id);
}

struct OperationFilter {
    std::optional<OperationKind> kind = OperationKind::refund; // nullopt: every kind
    std::optional<std::string> tenant_id;
    std::optional<std::string> payment_id;
    std::optional<std::string> state;
    std::optional<std::string> provider;
    std::optional<std::chrono::seconds> older_than; // updated_at at least this long ago
    bool by_updated_at = false; // oldest by when it last changed (the review queue), not created
    int limit = 100;
};

// Operations of `filter.kind` across tenants, oldest first, at most `limit` + 1 (the caller says
// "more").
std::vector<OperationRow> list_operations(Db& db, const OperationFilter& filter);

} // namespace payrecon::store
