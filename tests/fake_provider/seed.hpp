#pragma once
// Discrepancies seeded into the fake provider's ledger: PaymentIntents (and refunds) that no
// request of ours made, as a reconciliation finds them at a real provider. In-process through
// StripeApi / FakeProvider, and over the admin API as `POST /__admin/seed` (see README). Every
// time is unix seconds on the fake clock; every seed answers the ids it created or changed.

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>

namespace payrecon::fake {

// A succeeded PaymentIntent no request of ours made (the dashboard, a system restored from an
// older backup). Counted in `executions` under metadata[operation_id] if it carries one, else
// under "(none)" (no Idempotency-Key either); counted in `charged`; never a delivery.
struct OrphanCharge {
    std::int64_t amount = 0; // minor units, 1..99999999
    std::string currency;    // three letters (answered lower case)
    std::map<std::string, std::string> metadata;
    std::optional<std::int64_t> created; // unix seconds; now on the fake clock when absent
    std::optional<std::string> customer;
    std::optional<std::string> description;
    std::string payment_method = "pm_card_visa";
};

// A second succeeded PaymentIntent for an operation ID that already has one (the provider
// executed twice): a copy of the oldest PaymentIntent of that operation (amount, currency,
// metadata, customer, description, payment method) with new ids. executions[op] + 1, charged +
// amount.
struct DuplicateCharge {
    std::string operation_id;
    std::optional<std::int64_t> created; // now when absent
};

// Which existing PaymentIntent a change applies to: by `id`, or by operation ID (the oldest
// PaymentIntent of that operation, in creation order). Exactly one of the two.
struct IntentRef {
    std::string id;
    std::string operation_id;
};

// The provider's amount differs from ours: `amount`, `amount_received` (if succeeded) and the
// charge's `amount` / `amount_captured` become `amount`. `charged` moves by the difference.
struct AmountMismatch {
    IntentRef intent;
    std::int64_t amount = 0; // 1..99999999, not below what is already refunded
};

// A refund on the PaymentIntent's charge (the PaymentIntent stays `succeeded`): the charge gets a
// Refund in `refunds`, `amount_refunded` grows, and `refunded` is true once fully refunded.
// `charged` loses the amount; `refunded` (per currency) gains it.
struct Refunded {
    IntentRef intent;
    std::optional<std::int64_t> amount;  // what is not yet refunded when absent (a full refund)
    std::optional<std::int64_t> created; // the Refund's created; now when absent
};

// A late reversal (Stripe's refund.failed after succeeded): the refund created through the API
// under `operation_id` becomes `failed` with `failure_reason`; the charge's `amount_refunded`
// shrinks by its amount, which goes back to `charged` and out of `refunded`.
struct RefundReversed {
    std::string operation_id;
    std::string failure_reason = "expired_or_canceled_card";
};
// A late reversal of a capture made through Adyen's dialect (Adyen's CAPTURE_FAILED after a CAPTURE
// success): the capture under `operation_id` failed at the scheme; what it took leaves `charged`.
struct CaptureReversed {
    std::string operation_id;
    std::string failure_reason = "Capture rejected by the scheme";
};
// n succeeded PaymentIntents for benchmarks, created at start_time + i * spacing (whole seconds
// shown, so several may share a second), metadata[operation_id] = operation_id_prefix + i
// (i = 0..n-1; no metadata when the prefix is empty: then they count under "(none)").
struct BulkSeed {
    std::size_t n = 0;
    std::int64_t start_time = 0; // unix seconds
    std::chrono::milliseconds spacing{1000};
    std::string currency = "eur";
    std::int64_t amount = 1000;
    std::string operation_id_prefix = "bulk-";
};

using Seed = std::variant<OrphanCharge, DuplicateCharge, AmountMismatch, Refunded, BulkSeed,
                          RefundReversed, CaptureReversed>;

// The admin JSON: {"kind": "orphan_charge" | "duplicate_charge" | "amount_mismatch" | "refunded" |
// "bulk" | "refund_reversed" | "capture_reversed", ...fields as above, `spacing_ms` for bulk}.
// Throws std::invalid_argument naming the field on an unknown kind or field, a missing or mistyped
// field.
Seed seed_from_json(const nlohmann::json& j);
std::string_view seed_kind(const Seed& seed);

// A seed that names a PaymentIntent or operation the fake does not have.
struct SeedNotFound : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

} // namespace payrecon::fake
