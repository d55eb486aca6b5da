#include "services/captures.hpp"

#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "core/money.hpp"
#include "core/payment_request.hpp"
#include "core/problem.hpp"
#include "core/resolution_policy.hpp"
#include "services/intake_protocol.hpp"

#include <nlohmann/json.hpp>

namespace payrecon {

using namespace intake_protocol;

namespace {

constexpr std::string_view k_capture_operation = "create_capture";
constexpr std::string_view k_void_operation = "create_void";

store::OperationDecision refused(int status, std::string body) {
    store::OperationDecision d;
    d.refused_status = status;
    d.refused_body = std::move(body);
    return d;
}

// Why the authorisation of `p` cannot take a capture (what = "captured") or a void (what =
// "voided") now, and what to do; nullopt when it can as far as its state goes.
std::optional<std::string> not_operable_detail(const store::OperablePayment& p,
                                               std::string_view what) {
    const std::string id = p.payment_id;
    const std::string verb(what);
    if (!p.manual_capture) {
        return "Payment " + id +
               " was captured when it was charged (capture \"automatic\"): there is no "
               "authorisation to be " +
               verb + ". Create payments with \"capture\": \"manual\" to authorise only.";
    }
    const auto state = parse_payment_state(p.state);
    if (state == PaymentState::failed) {
        return "Payment " + id + " failed: nothing was authorised, so nothing can be " + verb + ".";
    }
    if (state == PaymentState::unknown || state == PaymentState::needs_review) {
        return "Payment " + id + " is " + p.state +
               ": whether it was authorised is not settled yet. Retry this request (same key) "
               "once the payment is authorized (GET /v1/payments/" +
               id + ").";
    }
    if (state != PaymentState::succeeded) {
        return "Payment " + id + " is " + p.state +
               ": it has not been authorised yet. Retry this request (same key) once it is "
               "authorized (GET /v1/payments/" +
               id + ").";
    }
    if (p.voided || p.void_held) {
        return "Payment " + id + (p.voided ? " was voided" : " is being voided") +
               ": its authorisation is released, so nothing more can be " + verb + ".";
    }
    if (p.final_capture_held) {
        return "Payment " + id +
               " has a final capture (succeeded, in flight or not yet settled): what it did not "
               "capture is released, so nothing more can be " +
               verb + ".";
    }
    return std::nullopt;
}

store::OperationDecision expired(const store::OperablePayment& p, std::string_view what) {
    return refused(
        409, problem_with(
                 409, "authorization_expired", "The authorisation has expired",
                 "Payment " + p.payment_id + "'s authorisation " +
                     (p.authorization_expires_at
                          ? "lapsed by the provider's rules at " + *p.authorization_expires_at
                          : std::string("has lapsed")) +
                     ": the provider no longer holds the money, so it cannot be " +
                     std::string(what) + ". Create a new payment to charge the customer.",
                 std::nullopt,
                 {{"payment_id", p.payment_id},
                  {"authorization_expires_at",
                   p.authorization_expires_at ? nlohmann::ordered_json(*p.authorization_expires_at)
                                              : nullptr}}));
}

std::function<std::string(const store::ExistingOperation&)>
duplicate_reference(std::string_view kind, std::string_view path) {
    return [kind = std::string(kind), path = std::string(path)](const store::ExistingOperation& h) {
        return problem_with(
            409, "duplicate_merchant_reference", "Duplicate merchant reference",
            "This merchant_reference is taken by " + kind + " " + h.id + " (GET " + path + h.id +
                ") of payment " + h.payment_id + "; it was not created again.",
            std::string_view("merchant_reference"), {{kind + "_id", h.id}, {kind, path + h.id}});
    };
}

// The 202's resource: the operation as it will be read back, pending.
std::string accepted_json(OperationKind kind, const std::string& id,
                          const store::OperablePayment& p, long long amount,
                          std::optional<bool> final,
                          const std::optional<std::string>& merchant_reference,
                          const std::map<std::string, std::string>& metadata,
                          const std::string& created_at) {
    store::OperationRow shown;
    shown.kind = kind;
    shown.id = id;
    shown.payment_id = p.payment_id;
    shown.state = std::string(to_string(PaymentState::pending));
    shown.amount_minor = amount;
    shown.currency = p.currency;
    shown.provider = p.provider;
    shown.final = final;
    shown.merchant_reference = merchant_reference;
    shown.metadata = nlohmann::json(metadata).dump();
    shown.created_at = created_at;
    shown.updated_at = created_at;
    return capture_resource_json(shown);
}

store::OperationDecision decide_capture(const CaptureRequest& request, const std::string& id,
                                        const std::string& created_at,
                                        const std::optional<store::OperablePayment>& payment,
                                        const std::optional<KnownProvider>& provider) {
    if (!payment) {
        return refused(404,
                       problem_json(404, "not_found", "Not found", "No payment with this ID."));
    }
    const store::OperablePayment& p = *payment;
    if (const auto detail = not_operable_detail(p, "captured")) {
        return refused(409,
                       problem_with(409, "payment_not_capturable",
                                    "The payment cannot be captured now", *detail, std::nullopt,
                                    {{"payment_id", p.payment_id}, {"payment_status", p.state}}));
    }
    if (p.expired) {
        return expired(p, "captured");
    }
    if (!request.final && provider && !provider->multiple_captures) {
        return refused(
            422, problem_json(422, "final_capture_required", "The provider captures once",
                              "Provider '" + p.provider + "' (kind " + provider->kind +
                                  ") captures an authorisation once: what a capture leaves is "
                                  "released. Send final true (the default), with the whole "
                                  "amount to take.",
                              std::string_view("final")));
    }
    const long long capturable = p.capturable();
    const long long amount = request.amount_minor.value_or(capturable);
    if (amount <= 0 || amount > capturable) {
        const std::string asked =
            request.amount_minor ? describe_money(amount, p.currency) : "the rest";
        return refused(
            409,
            problem_with(
                409, "capture_exceeds_authorization",
                "The capture exceeds what the authorisation has left",
                "A capture of " + asked + " does not fit payment " + p.payment_id +
                    ": it authorised " + describe_money(p.amount_minor, p.currency) +
                    ", of which " + describe_money(p.capture_held_minor, p.currency) +
                    " is captured or being captured; " + describe_money(capturable, p.currency) +
                    " is capturable. Captures that are unknown or in review count until they "
                    "are settled.",
                request.amount_minor ? std::optional<std::string_view>("amount") : std::nullopt,
                {{"payment_id", p.payment_id},
                 {"capturable", capturable},
                 {"currency", p.currency}}));
    }
    store::OperationDecision d;
    d.amount_minor = amount;
    d.accepted = accepted_json(OperationKind::capture, id, p, amount, request.final,
                               request.merchant_reference, request.metadata, created_at);
    d.duplicate_reference = duplicate_reference("capture", "/v1/captures/");
    return d;
}

store::OperationDecision decide_void(const VoidRequest& request, const std::string& id,
                                     const std::string& created_at,
                                     const std::optional<store::OperablePayment>& payment) {
    if (!payment) {
        return refused(404,
                       problem_json(404, "not_found", "Not found", "No payment with this ID."));
    }
    const store::OperablePayment& p = *payment;
    if (const auto detail = not_operable_detail(p, "voided")) {
        return refused(409,
                       problem_with(409, "payment_not_voidable", "The payment cannot be voided now",
                                    *detail, std::nullopt,
                                    {{"payment_id", p.payment_id}, {"payment_status", p.state}}));
    }
    if (p.expired) {
        return expired(p, "voided");
    }
    store::OperationDecision d;
    // A void releases what is left of the authorisation: its amount is what no capture holds.
    d.amount_minor = p.capturable() > 0 ? p.capturable() : p.amount_minor;
    d.accepted =
        accepted_json(OperationKind::void_authorization, id, p, d.amount_minor, std::nullopt,
                      request.merchant_reference, request.metadata, created_at);
    d.duplicate_reference = duplicate_reference("void", "/v1/voids/");
    return d;
}

std::optional<KnownProvider> known_provider(const IntakeSettings& settings,
                                            const std::optional<store::OperablePayment>& p) {
    if (!p || !settings.providers) {
        return std::nullopt;
    }
    const auto it = settings.providers->providers.find(p->provider);
    if (it == settings.providers->providers.end()) {
        return std::nullopt;
    }
    return it->second;
}

} // namespace

CaptureService::CaptureService(store::Db& db, const FingerprintKeys& keys, IntakeSettings settings)
    : m_db(db), m_keys(keys), m_settings(std::move(settings)) {}

IntakeResponse CaptureService::create_capture(const Principal& principal,
                                              std::string_view payment_id,
                                              std::string_view idempotency_key,
                                              std::string_view body, std::string_view api_version,
                                              const std::optional<CaptureAudit>& audit) {
    const auto request = read_operation_request<CaptureRequest>(
        principal, idempotency_key, Permission::capture_payment, "captures", payment_id, body,
        api_version, parse_capture_request);
    if (!request) {
        return request.error();
    }
    store::NewOperation capture;
    capture.kind = OperationKind::capture;
    capture.payment_id = request->payment_id;
    capture.final = request->final;
    capture.merchant_reference = request->merchant_reference;
    capture.metadata = request->metadata;
    Answering answering;
    answering.resource = "capture";
    answering.location_prefix = "/v1/captures/";
    return take_operation(
        m_db, m_keys, m_settings, principal, k_capture_operation, idempotency_key,
        canonical_bytes(*request), capture, audit, answering,
        [&](const std::string& created_at, const std::optional<store::OperablePayment>& payment) {
            return decide_capture(*request, capture.id, created_at, payment,
                                  known_provider(m_settings, payment));
        });
}

IntakeResponse CaptureService::create_void(const Principal& principal, std::string_view payment_id,
                                           std::string_view idempotency_key, std::string_view body,
                                           std::string_view api_version,
                                           const std::optional<CaptureAudit>& audit) {
    const auto request = read_operation_request<VoidRequest>(
        principal, idempotency_key, Permission::capture_payment, "voids", payment_id, body,
        api_version, parse_void_request);
    if (!request) {
        return request.error();
    }
    store::NewOperation void_op;
    void_op.kind = OperationKind::void_authorization;
    void_op.payment_id = request->payment_id;
    void_op.merchant_reference = request->merchant_reference;
    void_op.metadata = request->metadata;
    Answering answering;
    answering.resource = "void";
    answering.location_prefix = "/v1/voids/";
    return take_operation(
        m_db, m_keys, m_settings, principal, k_void_operation, idempotency_key,
        canonical_bytes(*request), void_op, audit, answering,
        [&](const std::string& created_at, const std::optional<store::OperablePayment>& payment) {
            return decide_void(*request, void_op.id, created_at, payment);
        });
}

std::string capture_resource_json(const store::OperationRow& r) {
    nlohmann::ordered_json j;
    j["id"] = r.id;
    j["object"] = to_string(r.kind);
    j["payment_id"] = r.payment_id;
    j["status"] = r.state;
    if (const auto state = parse_payment_state(r.state)) {
        j["status_category"] = to_string(status_category(*state));
    }
    j["amount"] = r.amount_minor;
    j["currency"] = r.currency;
    if (r.kind == OperationKind::capture) {
        j["final"] = r.final.value_or(true);
    }
    j["merchant_reference"] =
        r.merchant_reference ? nlohmann::ordered_json(*r.merchant_reference) : nullptr;
    j["metadata"] = nlohmann::ordered_json::parse(r.metadata);
    j["provider"] = r.provider;
    j["provider_reference"] =
        r.provider_reference ? nlohmann::ordered_json(*r.provider_reference) : nullptr;
    j["failure_reason"] = r.failure_reason ? nlohmann::ordered_json(*r.failure_reason) : nullptr;
    j["created_at"] = r.created_at;
    j["updated_at"] = r.updated_at;
    return j.dump();
}

std::optional<std::string> capture_resource(store::Db& db, OperationKind kind,
                                            const std::string& tenant_id, std::string_view id) {
    if (!is_uuid_text(id)) {
        return std::nullopt;
    }
    const auto operation = store::find_operation(db, kind, tenant_id, std::string(id));
    if (!operation) {
        return std::nullopt;
    }
    return capture_resource_json(*operation);
}

CaptureAmounts capture_amounts(const store::PaymentDetail& payment) {
    CaptureAmounts out;
    if (!payment.manual_capture) {
        return out;
    }
    out.authorized = payment.state == to_string(PaymentState::succeeded) ? payment.amount_minor : 0;
    for (const auto& c : payment.captures) {
        const auto state = parse_payment_state(c.state);
        if (state == PaymentState::succeeded) {
            out.captured += c.amount_minor;
        } else if (state != PaymentState::failed) {
            out.pending += c.amount_minor;
        }
    }
    out.voided = payment.voided_at.has_value();
    if (out.authorized > 0 && !payment.void_held && !payment.voided_at &&
        !payment.final_capture_held && !payment.authorization_lapsed) {
        out.capturable = payment.amount_minor - payment.capture_held_minor;
    }
    return out;
}

std::string payment_status(const store::PaymentDetail& payment) {
    if (!payment.manual_capture || payment.state != to_string(PaymentState::succeeded)) {
        return payment.state;
    }
    if (payment.voided_at) {
        return "voided";
    }
    if (payment.captured_minor > 0) {
        return payment.captured_minor < payment.amount_minor && !payment.final_capture_held
                   ? "partially_captured"
                   : "captured";
    }
    if (payment.authorization_lapsed && payment.capture_held_minor == 0) {
        return "authorization_expired";
    }
    return "authorized";
}

std::string operator_capture_body(store::Db& db, const Principal& principal,
                                  const std::string& payment_id,
                                  const std::optional<std::string>& amount, bool final,
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
    body["final"] = final;
    if (merchant_reference) {
        body["merchant_reference"] = *merchant_reference;
    }
    return body.dump();
}

std::string capture_note(std::string_view typed) {
    std::string note = trimmed_note(typed);
    if (note.empty() || note.size() > k_max_note_length) {
        throw UsageError("--note must say why, in 1 to " + std::to_string(k_max_note_length) +
                             " characters",
                         "the note is kept in the audit log with the capture or void");
    }
    return note;
}

} // namespace payrecon
