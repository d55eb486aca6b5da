#include "services/refunds.hpp"

#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "core/money.hpp"
#include "core/payment_request.hpp"
#include "core/payment_state.hpp"
#include "core/problem.hpp"
#include "core/resolution_policy.hpp"
#include "services/intake_protocol.hpp"
#include "store/payment_store.hpp"

#include <nlohmann/json.hpp>

namespace payrecon {

using namespace intake_protocol;

namespace {

constexpr std::string_view k_operation = "create_refund";

// Why a payment in `state` cannot be refunded now, and what to do.
std::string not_refundable_detail(const store::OperablePayment& p) {
    const auto state = parse_payment_state(p.state);
    const std::string id = p.payment_id;
    if (!state) {
        return "Payment " + id + " is in state '" + p.state + "', which cannot be refunded.";
    }
    switch (*state) {
    case PaymentState::failed:
        return "Payment " + id + " failed: it was never charged, so there is nothing to refund.";
    case PaymentState::unknown:
    case PaymentState::needs_review:
        return "Payment " + id + " is " + p.state +
               ": whether its charge happened is not settled yet, and a refund of a charge that "
               "may not exist cannot be sent. Retry this request (same key) once the payment "
               "has succeeded (GET /v1/payments/" +
               id + ").";
    case PaymentState::pending:
    case PaymentState::processing:
    case PaymentState::retry_scheduled:
        return "Payment " + id + " is " + p.state +
               ": it has not been charged yet. Retry this request (same key) once it has "
               "succeeded (GET /v1/payments/" +
               id + ").";
    case PaymentState::succeeded:
        break;
    }
    return "Payment " + id + " cannot be refunded now.";
}

// The decision once the key is new and the payment locked: a refusal, or the refund's amount and
// its 202.
store::OperationDecision decide(const RefundRequest& request, const std::string& refund_id,
                                const std::string& created_at,
                                const std::optional<store::OperablePayment>& payment) {
    store::OperationDecision d;
    if (!payment) {
        d.refused_status = 404;
        d.refused_body = problem_json(404, "not_found", "Not found", "No payment with this ID.");
        return d;
    }
    const store::OperablePayment& p = *payment;
    if (p.state != to_string(PaymentState::succeeded)) {
        d.refused_status = 409;
        d.refused_body =
            problem_with(409, "payment_not_refundable", "The payment cannot be refunded now",
                         not_refundable_detail(p), std::nullopt,
                         {{"payment_id", p.payment_id}, {"payment_status", p.state}});
        return d;
    }
    if (p.manual_capture && p.captured_minor == 0) {
        d.refused_status = 409;
        d.refused_body = problem_with(
            409, "payment_not_refundable", "The payment cannot be refunded now",
            "Payment " + p.payment_id +
                " is authorised only: nothing of it has been captured, so there is nothing to "
                "refund. Void the authorisation (POST /v1/payments/" +
                p.payment_id + "/void) to release it, or retry this request (same key) once a " +
                "capture has succeeded.",
            std::nullopt,
            {{"payment_id", p.payment_id}, {"payment_status", "authorized"}, {"captured", 0}});
        return d;
    }
    const long long refundable = p.refundable();
    const long long amount = request.amount_minor.value_or(refundable);
    if (amount <= 0 || amount > refundable) {
        d.refused_status = 409;
        const std::string asked =
            request.amount_minor ? describe_money(amount, p.currency) : "the rest";
        d.refused_body = problem_with(
            409, "refund_exceeds_payment", "The refund exceeds what the payment has left",
            "A refund of " + asked + " does not fit payment " + p.payment_id +
                (p.manual_capture ? ": it captured " : ": it charged ") +
                describe_money(p.charged(), p.currency) + ", of which " +
                describe_money(p.refund_held_minor, p.currency) +
                " is refunded or being refunded; " + describe_money(refundable, p.currency) +
                " is refundable. Refunds that are unknown or in review count until they are "
                "settled.",
            request.amount_minor ? std::optional<std::string_view>("amount") : std::nullopt,
            {{"payment_id", p.payment_id}, {"refundable", refundable}, {"currency", p.currency}});
        return d;
    }
    d.amount_minor = amount;
    store::OperationRow shown;
    shown.id = refund_id;
    shown.payment_id = p.payment_id;
    shown.state = std::string(to_string(PaymentState::pending));
    shown.amount_minor = amount;
    shown.currency = p.currency;
    shown.provider = p.provider;
    shown.reason = request.reason;
    shown.merchant_reference = request.merchant_reference;
    shown.metadata = nlohmann::json(request.metadata).dump();
    shown.created_at = created_at;
    shown.updated_at = created_at;
    d.accepted = refund_resource_json(shown);
    d.duplicate_reference = [](const store::ExistingOperation& holder) {
        return problem_with(409, "duplicate_merchant_reference", "Duplicate merchant reference",
                            "This merchant_reference is taken by refund " + holder.id +
                                " (GET /v1/refunds/" + holder.id + ") of payment " +
                                holder.payment_id + "; it was not created again.",
                            std::string_view("merchant_reference"),
                            {{"refund_id", holder.id}, {"refund", "/v1/refunds/" + holder.id}});
    };
    return d;
}

} // namespace

RefundService::RefundService(store::Db& db, const FingerprintKeys& keys, IntakeSettings settings)
    : m_db(db), m_keys(keys), m_settings(settings) {}

IntakeResponse RefundService::create_refund(const Principal& principal, std::string_view payment_id,
                                            std::string_view idempotency_key, std::string_view body,
                                            std::string_view api_version,
                                            const std::optional<RefundAudit>& audit) {
    // Another tenant's payment and a malformed ID are both simply not found: nothing leaks.
    const auto request = read_operation_request<RefundRequest>(
        principal, idempotency_key, Permission::create_refund, "refunds", payment_id, body,
        api_version, parse_refund_request);
    if (!request) {
        return request.error();
    }
    store::NewOperation refund;
    refund.kind = OperationKind::refund;
    refund.payment_id = request->payment_id;
    refund.reason = request->reason;
    refund.merchant_reference = request->merchant_reference;
    refund.metadata = request->metadata;
    Answering answering;
    answering.resource = "refund";
    answering.location_prefix = "/v1/refunds/";
    return take_operation(
        m_db, m_keys, m_settings, principal, k_operation, idempotency_key,
        canonical_bytes(*request), refund, audit, answering,
        [&](const std::string& created_at, const std::optional<store::OperablePayment>& payment) {
            return decide(*request, refund.id, created_at, payment);
        });
}

std::string refund_resource_json(const store::OperationRow& r) {
    nlohmann::ordered_json j;
    j["id"] = r.id;
    j["object"] = "refund";
    j["payment_id"] = r.payment_id;
    j["status"] = r.state;
    if (const auto state = parse_payment_state(r.state)) {
        j["status_category"] = to_string(status_category(*state));
    }
    j["amount"] = r.amount_minor;
    j["currency"] = r.currency;
    j["reason"] = r.reason ? nlohmann::ordered_json(*r.reason) : nullptr;
    j["merchant_reference"] =
        r.merchant_reference ? nlohmann::ordered_json(*r.merchant_reference) : nullptr;
    j["metadata"] = nlohmann::ordered_json::parse(r.metadata);
    j["provider"] = r.provider;
    j["provider_reference"] =
        r.provider_reference ? nlohmann::ordered_json(*r.provider_reference) : nullptr;
    j["failure_reason"] = r.failure_reason ? nlohmann::ordered_json(*r.failure_reason) : nullptr;
    j["reversed_at"] = r.reversed_at ? nlohmann::ordered_json(*r.reversed_at) : nullptr;
    j["created_at"] = r.created_at;
    j["updated_at"] = r.updated_at;
    return j.dump();
}

std::optional<std::string> refund_resource(store::Db& db, const std::string& tenant_id,
                                           std::string_view refund_id) {
    if (!is_uuid_text(refund_id)) {
        return std::nullopt;
    }
    const auto refund = store::find_refund(db, tenant_id, std::string(refund_id));
    if (!refund) {
        return std::nullopt;
    }
    return refund_resource_json(*refund);
}

RefundAmounts refund_amounts(const store::PaymentDetail& payment) {
    RefundAmounts out;
    for (const auto& r : payment.refunds) {
        const auto state = parse_payment_state(r.state);
        if (state == PaymentState::succeeded) {
            out.refunded += r.amount_minor;
        } else if (state != PaymentState::failed) {
            out.pending += r.amount_minor;
        }
    }
    if (payment.state == to_string(PaymentState::succeeded)) {
        const long long base = payment.manual_capture
                                   ? payment.captured_minor
                                   : payment.charged_amount_minor.value_or(payment.amount_minor);
        out.refundable = base - payment.refund_held_minor;
    }
    return out;
}

std::string operator_refund_body(store::Db& db, const Principal& principal,
                                 const std::string& payment_id,
                                 const std::optional<std::string>& amount,
                                 const std::optional<std::string>& reason,
                                 const std::optional<std::string>& merchant_reference) {
    if (!is_uuid_text(payment_id)) {
        throw UsageError("--payment: '" + printable(payment_id) + "' is not a payment ID",
                         "payment IDs look like 0193c6f0-...; `payrecon payments list` shows them");
    }
    const auto payment = store::find_payment(db, principal.tenant_id, payment_id);
    if (!payment) {
        throw Refused("the tenant of PAYRECON_API_KEY has no payment " + payment_id,
                      "`payrecon payments show " + payment_id + "` says whose it is");
    }
    nlohmann::ordered_json body = nlohmann::ordered_json::object();
    if (amount) {
        const auto minor = parse_major_units(*amount, payment->currency);
        if (!minor || *minor <= 0) {
            throw UsageError(
                "--amount: '" + printable(*amount) + "' is not an amount of " + payment->currency,
                "give it in major units with at most the currency's decimals, e.g. " +
                    major_units(payment->amount_minor, payment->currency).value_or("5.00"));
        }
        body["amount"] = *minor;
    }
    if (reason) {
        body["reason"] = *reason;
    }
    if (merchant_reference) {
        body["merchant_reference"] = *merchant_reference;
    }
    return body.dump();
}

std::string refund_note(std::string_view typed) {
    std::string note = trimmed_note(typed);
    if (note.empty() || note.size() > k_max_note_length) {
        throw UsageError("--note must say why the money goes back, in 1 to " +
                             std::to_string(k_max_note_length) + " characters",
                         "the note is kept in the audit log with the refund");
    }
    return note;
}

store::OperationRow operation_or_refuse(store::Db& db, OperationKind kind, const std::string& id) {
    const auto found = store::find_operation_any_tenant(db, kind, id);
    if (!found) {
        const std::string noun(subject_noun(kind));
        throw Refused("no " + noun + " has the ID or operation ID '" + printable(id) + "'",
                      "`payrecon " + noun + "s list` shows them");
    }
    return *found;
}

} // namespace payrecon
