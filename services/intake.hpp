#pragma once
// The intake protocol (DESIGN section 4): "create payment" accepted exactly once per
// (tenant, principal, operation, idempotency key), however often a client retries.

#include "core/fingerprint.hpp"
#include "core/principal.hpp"
#include "core/provider_catalog.hpp"
#include "services/auth.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon {

namespace store {
class Db;
}

struct IntakeSettings {
    // How long a key is remembered (expires_at = created_at + retention). Must exceed the longest
    // client retry window.
    std::chrono::seconds retention{std::chrono::hours(24 * 7)};
    // How often a client should poll the payment resource (Retry-After on 202).
    std::chrono::seconds poll_interval{2};
    // The configured providers. With them, a new request naming another provider, or holding what
    // its provider cannot carry (carry_problem), is refused (422, the field named, nothing stored,
    // the key left free); nullopt: neither is checked.
    std::optional<ProviderCatalog> providers;
};

// An operator's operation (payrecon refunds create, payments capture|void): who, and why, kept in
// the audit log with it.
struct OperatorAudit {
    std::string actor;
    std::string note;
};

struct IntakeResponse {
    int status = 500;
    std::string body;      // JSON; application/problem+json when status >= 400
    bool replayed = false; // a stored response, returned again (Idempotent-Replayed: true)
    std::optional<std::string> location; // "/v1/payments/{id}" with 202
    std::optional<int> retry_after;      // seconds, with 202 and 503
    std::string outcome; // for logs and metrics: "created", "replayed", "conflict", ...
    // For the operator's log, never the client: what went wrong inside (the database lost, a
    // stored record without its response). Empty when nothing did. The service writes no log of
    // its own; the API and the CLI write this to theirs.
    std::string incident;

    std::string content_type() const;
};

// What the API and the CLI answer a credential authenticate() refused: 401 unauthorized when none
// was given or no principal has it (the API adds WWW-Authenticate: Bearer), 403
// credential_revoked when its principal was revoked. `outcome` is "unauthorized" or "forbidden".
IntakeResponse refusal_for(AuthFailure failure);

class IntakeService {
public:
    IntakeService(store::Db& db, const FingerprintKeys& keys, IntakeSettings settings = {});

    // `principal` is already authenticated (its tenant and role come from its credential).
    // Never throws for bad input: every outcome is a response. Database failures before commit
    // become 503 with Retry-After (nothing stored; retry with the same key); a connection lost
    // during COMMIT is a 503 too, whose detail says the outcome is unknown (outcome "in_doubt").
    IntakeResponse create_payment(const Principal& principal, std::string_view idempotency_key,
                                  std::string_view body, std::string_view api_version);

private:
    store::Db& m_db;
    const FingerprintKeys& m_keys;
    IntakeSettings m_settings;
};

// The payment resource as the API shows it.
struct PaymentView {
    std::string id;
    std::string status;
    long long amount_minor = 0;
    std::string currency;
    std::string merchant_reference;
    std::string provider;
    std::string created_at;
};
std::string payment_resource_json(const PaymentView& view);

// A new operation ID: "pr_" + 32 hex characters (35 in all, within every provider's key limit), the
// bytes of a time-ordered UUID (core/uuid): payments_operation_id grows at its right edge.
std::string new_operation_id();
// A new payment ID: a time-ordered (version 7) UUID in canonical text form (core/uuid).
std::string new_uuid();

// Prepares on `db`'s connection the statement create_payment runs for a fresh request or a replay,
// so that the first request on a new connection does not pay for it (serve's database workers
// call it as they start). Throws DatabaseUnavailable, or an SQL error if the schema is not current.
void prepare_intake(store::Db& db);

} // namespace payrecon
