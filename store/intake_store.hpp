#pragma once
// The intake transaction of DESIGN section 4, as SQL. The decisions (409, replay, 403) are made by
// services/intake.cpp from what this returns; this file only runs the statements in their order.

#include "core/payment_request.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace payrecon::store {

class Db;

inline constexpr std::size_t k_max_stored_response = 64 * 1024;

struct IntakeClaim {
    std::string tenant_id;
    std::string principal_id;
    std::string operation;       // "create_payment"
    std::string idempotency_key; // validated
    std::string request_hash;    // hex HMAC-SHA256 of the canonical request
    std::chrono::seconds retention{0};
};

struct NewPayment {
    std::string payment_id;   // uuid, made by the caller
    std::string operation_id; // the provider idempotency key, made by the caller
    const PaymentRequest* request = nullptr;
    std::string
        idempotency_key_hash; // hex keyed digest of the Idempotency-Key, kept with the payment
    // A manual capture's: how long the provider keeps the authorisation (none: not known).
    std::optional<std::chrono::seconds> authorization_validity;
};

// The payment that holds a merchant reference already.
struct ExistingPayment {
    std::string payment_id;
    std::string created_by;                          // the principal
    std::optional<std::string> idempotency_key_hash; // hex; none for payments from before schema 7
};

// The responses to store, made once the database has given the creation time.
struct IntakeBodies {
    std::string accepted; // stored with 202 when the payment row is inserted
    // The 409 stored when the merchant reference is taken, made from the payment that holds it.
    std::function<std::string(const ExistingPayment&)> duplicate_reference;
    // A 422 body instead: the request is refused now that it is known to be a first request (a
    // stored answer is replayed before anything is checked). Nothing is stored; the key stays free.
    std::optional<std::string> refused;
};

struct IntakeWrite {
    enum class Kind {
        created,             // key claimed, payment inserted, 202 stored: committed
        duplicate_reference, // key claimed, merchant reference taken, 409 stored: committed
        existing,            // the key had a record already: nothing written
        refused,             // make_bodies refused the first request: rolled back, 422 `body`
        principal_revoked, // the principal was revoked before the key was claimed: nothing written
    };
    Kind kind = Kind::existing;
    int status = 0;   // the stored status (for existing: 0 if the record has no response)
    std::string body; // the stored body
    std::optional<std::string> resource_id;
    // Only for existing:
    std::string stored_hash;
    bool principal_revoked = false;
};

// First one autocommit statement (intake_once): the idempotency row with its 202 (if the principal
// is not revoked), the payment and its outbox event -- or, if the key had a record, that record and
// its principal's revocation. It is idempotent: a connection lost under it is answered by running
// it again on a new connection (if that fails too, TransientStoreError in doubt).
// When it cannot decide -- a refusal, a merchant reference that is taken (the statement undoes
// itself), a record committed after its snapshot -- the transactional path:
// BEGIN; INSERT the idempotency row ON CONFLICT DO NOTHING;
//   inserted: make_bodies; if it refuses, ROLLBACK (the key stays free). Otherwise INSERT the
//             payment (ON CONFLICT on the merchant reference DO NOTHING), its outbox row and the
//             202; if the reference was taken, SELECT the payment holding it (a new statement) and
//             store duplicate_reference(it) with 409. COMMIT.
//   not inserted: SELECT the record (a new statement) and the principal's revocation; COMMIT.
// `make_bodies` gets the creation time (ISO 8601, UTC); the one statement calls it twice with
// placeholder times to find where the time stands in the 202. Crash points:
// intake.before_statement and intake.after_commit (the one statement), intake.after_key_claim,
// intake.before_commit and intake.after_commit (the transactional path).
// Throws TransientStoreError (DatabaseUnavailable) when nothing can be said to be stored, and
// std::length_error if a body exceeds k_max_stored_response (nothing stored).
IntakeWrite
write_intake(Db& db, const IntakeClaim& claim, const NewPayment& payment,
             const std::function<IntakeBodies(const std::string& created_at)>& make_bodies);

// Prepares on `db`'s connection the statement a fresh request or a replay runs (write_intake's one
// statement), so that the first request on a new connection does not pay for it. Throws what
// write_intake would (DatabaseUnavailable; an SQL error if the schema is not current).
void prepare_intake(Db& db);

// Who purges, under which minimum: what the audit log keeps of a purge run.
struct PurgeAudit {
    std::string actor;
    std::chrono::seconds minimum_retention{0}; // in force (PAYRECON_MIN_IDEMPOTENCY_RETENTION)
    std::chrono::seconds default_minimum_retention{0}; // without the setting; lower is "lowered"
};

inline constexpr const char* k_deployment_tenant = "00000000-0000-0000-0000-000000000000";

struct PurgeResult {
    long long deleted = 0;
    long long kept_unfinished = 0; // expired, but their payment is not terminal yet
    long long tenants = 0;         // tenants whose records were deleted
    std::string run_id;            // the audit log's subject_id for this run; empty for a dry run
};

// Deletes idempotency records past their expiry -- or, with `retention`, created longer ago than
// that -- except those whose payment or refund is not terminal. In batches, each in one transaction
// with an audit row per tenant it deleted from (action idempotency.purge: the run, the count,
// retention and minimum); then one row for the whole run under k_deployment_tenant
// (idempotency.purge_run: the totals, written even when nothing was deleted). `dry_run` only counts
// and writes nothing.
PurgeResult purge_idempotency_records(Db& db, std::optional<std::chrono::seconds> retention,
                                      bool dry_run, const PurgeAudit& audit, int batch_size = 5000);

} // namespace payrecon::store
