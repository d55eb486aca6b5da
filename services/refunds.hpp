#pragma once
// Refunds (DESIGN section 16): "refund this payment" accepted exactly once per (tenant, principal,
// operation, idempotency key), under the payment intake's protocol, and never more than the
// payment charged -- however many refunds race for it. The refunds' read side for the API.

#include "core/fingerprint.hpp"
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

// An operator's refund (payrecon refunds create): who, and why, kept in the audit log with it.
using RefundAudit = OperatorAudit;

class RefundService {
public:
    // `settings`: the key retention and the poll interval of the payment intake.
    RefundService(store::Db& db, const FingerprintKeys& keys, IntakeSettings settings = {});

    // POST /v1/payments/{payment_id}/refunds. Every outcome is a response, as create_payment's:
    // 202 with the refund (Location /v1/refunds/{id}); a replay of the stored answer; 409
    // idempotency_key_reused; 404 when the tenant has no such payment; 409 payment_not_refundable
    // when it has not succeeded (an unknown charge is settled first); 409 refund_exceeds_payment
    // naming what is refundable; 409 duplicate_merchant_reference (stored under the key). Only
    // the 202 and the stored 409 occupy the key: a refusal leaves it free, so that the same
    // request may succeed once the payment can be refunded.
    IntakeResponse create_refund(const Principal& principal, std::string_view payment_id,
                                 std::string_view idempotency_key, std::string_view body,
                                 std::string_view api_version,
                                 const std::optional<RefundAudit>& audit = std::nullopt);

private:
    store::Db& m_db;
    const FingerprintKeys& m_keys;
    IntakeSettings m_settings;
};

// A refund as the API shows it: {id, object "refund", payment_id, status, status_category,
// amount, currency, reason, merchant_reference, metadata, provider, provider_reference,
// failure_reason, created_at, updated_at}.
std::string refund_resource_json(const store::OperationRow& refund);

// GET /v1/refunds/{id}: nullopt if `refund_id` is not a UUID or the tenant has no such refund
// (another tenant's is "none" too). Throws DatabaseUnavailable.
std::optional<std::string> refund_resource(store::Db& db, const std::string& tenant_id,
                                           std::string_view refund_id);

// What a payment's refunds add up to: succeeded, and still to settle (pending, processing,
// retry_scheduled, unknown, needs_review); refundable is what a new refund may take now (zero
// unless the payment succeeded).
struct RefundAmounts {
    long long refunded = 0;
    long long pending = 0;
    long long refundable = 0;
};
RefundAmounts refund_amounts(const store::PaymentDetail& payment);

// The request body of an operator's refund (payrecon refunds create): `amount` in major units of
// the payment's currency ("5.00"; none: what is refundable), the optional fields as given. Throws
// UsageError for an amount that is not one of the currency's (too many decimals, not a number,
// zero) and Refused when the tenant has no such payment. Throws DatabaseUnavailable.
std::string operator_refund_body(store::Db& db, const Principal& principal,
                                 const std::string& payment_id,
                                 const std::optional<std::string>& amount,
                                 const std::optional<std::string>& reason,
                                 const std::optional<std::string>& merchant_reference);

// The note an operator's refund is audited with: trimmed; UsageError if it is empty or longer
// than k_max_note_length.
std::string refund_note(std::string_view typed);

// A refund (capture, void: `kind`) of any tenant by its ID or operation ID, for operators;
// Refused if none.
store::OperationRow operation_or_refuse(store::Db& db, OperationKind kind, const std::string& id);

} // namespace payrecon
