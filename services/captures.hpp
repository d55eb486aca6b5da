#pragma once
// Captures and voids (issue 32, DESIGN section 16): "capture this authorisation" and "void it",
// each accepted exactly once per (tenant, principal, operation, idempotency key) under the payment
// intake's protocol, with the amount rules held in the database however many race: captures never
// beyond what was authorised, nothing captured after a void or the authorisation's expiry, no void
// after a final capture. Their read side for the API.

#include "core/fingerprint.hpp"
#include "core/payment_state.hpp"
#include "core/principal.hpp"
#include "services/intake.hpp"
#include "store/operation_store.hpp"
#include "store/payment_store.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace payrecon {

namespace store {
class Db;
}

// An operator's capture or void (payrecon payments capture|void): who, and why.
using CaptureAudit = OperatorAudit;

class CaptureService {
public:
    // `settings`: the key retention, the poll interval and the configured providers (whether one
    // takes a capture that is not final).
    CaptureService(store::Db& db, const FingerprintKeys& keys, IntakeSettings settings = {});

    // POST /v1/payments/{payment_id}/captures. 202 with the capture (Location /v1/captures/{id});
    // a replay of the stored answer; 409 idempotency_key_reused; 404 when the tenant has no such
    // payment; 409 payment_not_capturable (not an authorisation, not authorised yet or not
    // settled, voided, a final capture taken), 409 authorization_expired, 409
    // capture_exceeds_authorization naming what is capturable; 422 when `final` is false and the
    // provider captures an authorisation once only; 409 duplicate_merchant_reference (stored).
    // Only the 202 and the stored 409 occupy the key.
    IntakeResponse create_capture(const Principal& principal, std::string_view payment_id,
                                  std::string_view idempotency_key, std::string_view body,
                                  std::string_view api_version,
                                  const std::optional<CaptureAudit>& audit = std::nullopt);

    // POST /v1/payments/{payment_id}/void: 202 with the void (Location /v1/voids/{id}), or as
    // above: 409 payment_not_voidable (not an authorisation, not settled, voided already, a final
    // capture taken), 409 authorization_expired.
    IntakeResponse create_void(const Principal& principal, std::string_view payment_id,
                               std::string_view idempotency_key, std::string_view body,
                               std::string_view api_version,
                               const std::optional<CaptureAudit>& audit = std::nullopt);

private:
    store::Db& m_db;
    const FingerprintKeys& m_keys;
    IntakeSettings m_settings;
};

// A capture or a void as the API shows it: {id, object "capture"|"void", payment_id, status,
// status_category, amount, currency, final (a capture's), merchant_reference, metadata, provider,
// provider_reference, failure_reason, created_at, updated_at}.
std::string capture_resource_json(const store::OperationRow& operation);

// GET /v1/captures/{id} and /v1/voids/{id}: nullopt if `id` is not a UUID or the tenant has no
// such operation of `kind`. Throws DatabaseUnavailable.
std::optional<std::string> capture_resource(store::Db& db, OperationKind kind,
                                            const std::string& tenant_id, std::string_view id);

// What an authorisation's captures add up to: captured (succeeded), still to settle (pending,
// processing, retry_scheduled, unknown, needs_review) and capturable now (zero unless it is
// authorised, not voided, not expired and no final capture is held); whether it is voided.
struct CaptureAmounts {
    long long authorized = 0;
    long long captured = 0;
    long long pending = 0;
    long long capturable = 0;
    bool voided = false;
};
CaptureAmounts capture_amounts(const store::PaymentDetail& payment);

// What a payment is to a merchant, beyond its charge's state: a charge captured at once is its
// state; an authorisation that succeeded is "authorized", "partially_captured", "captured",
// "voided" or "authorization_expired".
std::string payment_status(const store::PaymentDetail& payment);

// The request body of an operator's capture (payrecon payments capture): `amount` in major units
// of the payment's currency (none: what is capturable), `final` as given. Throws UsageError for an
// amount that is not one of the currency's, Refused when the tenant has no such payment. Throws
// DatabaseUnavailable.
std::string operator_capture_body(store::Db& db, const Principal& principal,
                                  const std::string& payment_id,
                                  const std::optional<std::string>& amount, bool final,
                                  const std::optional<std::string>& merchant_reference);

// The note an operator's capture or void is audited with: trimmed; UsageError if it is empty or
// longer than k_max_note_length.
std::string capture_note(std::string_view typed);

} // namespace payrecon
