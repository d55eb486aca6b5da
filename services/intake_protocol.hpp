#pragma once
// Services-internal: what every intake of a money movement shares (DESIGN section 4) -- the
// payment's and the refund's alike: problem answers, the refusals before a body is read, the
// digest kept of a key, the 503s, and the answer made of what the store wrote. Included only by
// services/*.cpp.

#include "core/fingerprint.hpp"
#include "core/principal.hpp"
#include "core/validation.hpp"
#include "services/intake.hpp"
#include "store/intake_store.hpp"
#include "store/operation_store.hpp"

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace payrecon {

class DatabaseUnavailable;

namespace intake_protocol {

// A problem+json answer with its outcome (for logs and metrics).
IntakeResponse problem(int status, std::string_view type, std::string_view title,
                       std::string_view detail, std::string outcome,
                       std::optional<std::string_view> field = std::nullopt);

// 400 malformed or unsupported version, 422 card data or an invalid field.
IntakeResponse validation_problem(const ValidationError& e);

// What is refused before the body is read: a role without `permission` (`what`: "payments",
// "refunds"), a missing or invalid Idempotency-Key. None of it touches the database, so none of
// it occupies the key.
std::optional<IntakeResponse> refuse_before_reading(const Principal& principal,
                                                    std::string_view idempotency_key,
                                                    Permission permission, std::string_view what);

// What the keyed digest of an Idempotency-Key kept with its resource is taken over.
std::string key_digest_input(std::string_view idempotency_key);

// "7 days", "36 hours", "90 seconds".
std::string duration_text(std::chrono::seconds d);

// The claim of `idempotency_key` for `operation` ("create_payment", "create_refund") by
// `principal`, bound to the fingerprint of `canonical`.
store::IntakeClaim claim_of(const Principal& principal, std::string_view operation,
                            std::string_view idempotency_key, const std::string& canonical,
                            const FingerprintKeys& keys, std::chrono::seconds retention);

// 503 with Retry-After: nothing stored, or (a lost COMMIT) perhaps stored: retry with the key.
IntakeResponse unavailable(const DatabaseUnavailable& e);

// How answer_of words what the store wrote.
struct Answering {
    std::string_view resource = "payment";              // "a new payment"
    std::string_view location_prefix = "/v1/payments/"; // Location of a 202
    std::chrono::seconds poll_interval{2};              // Retry-After of a 202
    bool key_expired = false;                           // the 409 was idempotency_key_expired
    std::string refused_outcome = "invalid";            // the outcome of a refusal
};

// The answer to a request from what the store wrote: created, the stored 409 of a taken
// reference, a refusal, a revoked principal, or the key's record -- replayed if `canonical` is
// the request it was made for (409 idempotency_key_reused if not; 500 if it has no response; 403
// if its principal was revoked).
IntakeResponse answer_of(const store::IntakeWrite& write, const std::string& canonical,
                         const FingerprintKeys& keys, const Principal& principal,
                         const Answering& answering);

// A problem body with members of its own beside the standard ones.
std::string problem_with(int status, std::string_view type, std::string_view title,
                         std::string_view detail, std::optional<std::string_view> field,
                         const nlohmann::ordered_json& extra);

// The path's payment ID in lower case, or nullopt when it is not a UUID (then the payment is
// simply not found: nothing leaks).
std::optional<std::string> path_payment_id(std::string_view payment_id);

// 404: the tenant has no such payment (another tenant's, or a malformed ID, alike).
IntakeResponse payment_not_found();

// What every operation's intake does before its kind decides: the refusals before the body is
// read (a role without `permission`, a bad key), the path's payment ID (404 if it is not one),
// the request parsed by `parse` (400, 422). The request, or the answer that ends the intake.
template <typename Request>
tl::expected<Request, IntakeResponse>
read_operation_request(const Principal& principal, std::string_view idempotency_key,
                       Permission permission, std::string_view what, std::string_view payment_id,
                       std::string_view body, std::string_view api_version,
                       tl::expected<Request, ValidationError> (*parse)(std::string_view,
                                                                       std::string_view,
                                                                       std::string_view)) {
    if (auto refused = refuse_before_reading(principal, idempotency_key, permission, what)) {
        return tl::make_unexpected(std::move(*refused));
    }
    const auto id = path_payment_id(payment_id);
    if (!id) {
        return tl::make_unexpected(payment_not_found());
    }
    auto request = parse(*id, body, api_version);
    if (!request) {
        return tl::make_unexpected(validation_problem(request.error()));
    }
    return std::move(*request);
}

// An operation's intake (a refund, a capture, a void) once its request parsed: the key claimed for
// `operation` bound to `canonical`, the payment locked, `decide` (the kind's decisions, made on
// what the lock read), the operation written with what it holds, and the answer of what the store
// wrote, worded for `answering`.
IntakeResponse take_operation(store::Db& db, const FingerprintKeys& keys,
                              const IntakeSettings& settings, const Principal& principal,
                              std::string_view operation, std::string_view idempotency_key,
                              const std::string& canonical, store::NewOperation& written,
                              const std::optional<OperatorAudit>& audit, Answering answering,
                              const std::function<store::OperationDecision(
                                  const std::string& created_at,
                                  const std::optional<store::OperablePayment>& payment)>& decide);

} // namespace intake_protocol
} // namespace payrecon
