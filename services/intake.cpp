#include "services/intake.hpp"

#include "core/errors.hpp"
#include "core/idempotency_key.hpp"
#include "core/payment_request.hpp"
#include "core/payment_state.hpp"
#include "core/problem.hpp"
#include "core/uuid.hpp"
#include "services/intake_protocol.hpp"
#include "store/intake_store.hpp"

#include <nlohmann/json.hpp>

namespace payrecon {

using namespace intake_protocol;

namespace intake_protocol {

IntakeResponse problem(int status, std::string_view type, std::string_view title,
                       std::string_view detail, std::string outcome,
                       std::optional<std::string_view> field) {
    IntakeResponse r;
    r.status = status;
    r.body = problem_json(status, type, title, detail, field);
    r.outcome = std::move(outcome);
    return r;
}

IntakeResponse validation_problem(const ValidationError& e) {
    switch (e.kind) {
    case ValidationKind::malformed:
        return problem(400, "malformed_request", "The request body is not acceptable JSON",
                       e.message, "invalid",
                       e.field.empty() ? std::nullopt : std::optional<std::string_view>(e.field));
    case ValidationKind::unsupported_version:
        return problem(400, "unsupported_api_version", "Unsupported API version", e.message,
                       "invalid", std::string_view("Payrecon-Version"));
    case ValidationKind::card_data:
        return problem(422, "card_data_refused", "Card data is not accepted", e.message,
                       "card_data_refused",
                       e.field.empty() ? std::nullopt : std::optional<std::string_view>(e.field));
    case ValidationKind::invalid:
        break;
    }
    return problem(422, "invalid_request", "A field of the request is invalid", e.message,
                   "invalid",
                   e.field.empty() ? std::nullopt : std::optional<std::string_view>(e.field));
}

} // namespace intake_protocol

namespace {

constexpr std::string_view k_operation = "create_payment";

// The provider a first request names must be one the deployment sends to: otherwise no worker
// ever claims the payment and it stays pending for good.
// And what it names must reach that provider whole: nothing is dropped on the way.
std::optional<ValidationError> provider_refusal(const PaymentRequest& request,
                                                const std::optional<ProviderCatalog>& catalog) {
    if (!catalog) {
        return std::nullopt;
    }
    const auto known = catalog->providers.find(request.provider);
    if (known != catalog->providers.end() && request.manual_capture &&
        !known->second.manual_capture) {
        ValidationError e;
        e.kind = ValidationKind::invalid;
        e.field = "capture";
        e.code = "manual_capture_not_supported";
        e.message = "provider '" + request.provider + "' (kind " + known->second.kind +
                    ") cannot authorise now and capture later through payrecon yet: send this "
                    "payment with capture \"automatic\", or to a provider that can";
        return e;
    }
    if (known != catalog->providers.end()) {
        const auto problem =
            carry_problem(known->second.limits, request.merchant_reference, request.metadata);
        if (!problem) {
            return std::nullopt;
        }
        ValidationError e;
        e.kind = ValidationKind::invalid;
        e.field = problem->field;
        e.code = "not_carried";
        e.message = "provider '" + request.provider +
                    "' cannot carry this payment whole: " + problem->message;
        return e;
    }
    ValidationError e;
    e.kind = ValidationKind::invalid;
    e.field = "provider";
    e.code = "unknown_provider";
    e.message = "provider '" + request.provider +
                "' is not configured in this deployment, so no "
                "payment to it could ever be sent; the configured providers are: " +
                catalog->names() + ". Name one of them, or ask the operator to add '" +
                request.provider + "' to the provider configuration first.";
    return e;
}

} // namespace

namespace intake_protocol {

// What the keyed digest of an Idempotency-Key kept with its payment is taken over: the key, set
// apart from canonical request bytes, which are fingerprinted under the same secrets.
std::string key_digest_input(std::string_view idempotency_key) {
    return "payrecon.idempotency_key:" + std::string(idempotency_key);
}

// "7 days", "36 hours", "90 seconds".
std::string duration_text(std::chrono::seconds d) {
    const long long s = d.count();
    if (s % 86400 == 0) {
        return std::to_string(s / 86400) + (s == 86400 ? " day" : " days");
    }
    if (s % 3600 == 0) {
        return std::to_string(s / 3600) + (s == 3600 ? " hour" : " hours");
    }
    return std::to_string(s) + " seconds";
}

// A problem body that also names the payment: {..., "payment_id", "payment"}.
std::string problem_with_payment(int status, std::string_view type, std::string_view title,
                                 std::string_view detail, std::string_view field,
                                 const std::string& payment_id) {
    auto j = nlohmann::ordered_json::parse(problem_json(status, type, title, detail, field));
    j["payment_id"] = payment_id;
    j["payment"] = "/v1/payments/" + payment_id;
    return j.dump();
}

IntakeResponse unavailable(const DatabaseUnavailable& e) {
    // A lost COMMIT acknowledgement: the payment may exist. The record under this key holds the
    // answer if it committed; if it did not, the key is free. Either way the same request with
    // the same key is what settles it.
    const bool in_doubt = e.commit_outcome_unknown();
    IntakeResponse r = problem(
        503, "service_unavailable", "The payment store is unavailable",
        in_doubt
            ? "The outcome is unknown: the connection to the database was lost while the "
              "payment was being committed, so it may or may not have been stored. Retry "
              "the same request with the same Idempotency-Key: it returns the stored result "
              "if it was committed, and is a fresh attempt if it was not. Do not use a new key."
            : "Nothing was stored. Retry the same request with the same Idempotency-Key.",
        in_doubt ? "in_doubt" : "unavailable");
    r.retry_after = 1;
    r.incident =
        std::string(in_doubt ? "commit outcome unknown: " : "database unavailable: ") + e.what();
    return r;
}

} // namespace intake_protocol

IntakeResponse refusal_for(AuthFailure failure) {
    IntakeResponse r;
    switch (failure) {
    case AuthFailure::missing:
        r.status = 401;
        r.body = problem_json(401, "unauthorized", "Authentication required",
                              "Send Authorization: Bearer <API key>.");
        r.outcome = "unauthorized";
        break;
    case AuthFailure::unknown:
        r.status = 401;
        r.body = problem_json(401, "unauthorized", "Unknown credential",
                              "No principal has this API key.");
        r.outcome = "unauthorized";
        break;
    case AuthFailure::revoked:
        r.status = 403;
        r.body = problem_json(403, "credential_revoked", "Credential revoked",
                              "This API key was revoked.");
        r.outcome = "forbidden";
        break;
    }
    return r;
}

std::string IntakeResponse::content_type() const {
    return status >= 400 ? std::string(k_problem_content_type) : std::string("application/json");
}

std::string payment_resource_json(const PaymentView& v) {
    nlohmann::ordered_json j;
    j["id"] = v.id;
    j["object"] = "payment";
    j["status"] = v.status;
    if (const auto state = parse_payment_state(v.status)) {
        j["status_category"] = to_string(status_category(*state));
    }
    j["amount"] = v.amount_minor;
    j["currency"] = v.currency;
    j["merchant_reference"] = v.merchant_reference;
    j["provider"] = v.provider;
    j["created_at"] = v.created_at;
    return j.dump();
}

std::string new_operation_id() {
    const auto b = uuid_v7_bytes(std::chrono::system_clock::now());
    return "pr_" + to_hex(std::string(reinterpret_cast<const char*>(b.data()), b.size()));
}

std::string new_uuid() {
    return uuid_v7();
}

IntakeService::IntakeService(store::Db& db, const FingerprintKeys& keys, IntakeSettings settings)
    : m_db(db), m_keys(keys), m_settings(settings) {}

namespace {

// The answer to a create whose merchant_reference a payment of the tenant holds: that payment's
// ID, and why (this key's record expired -- `key_expired` set --, another key of this API key, or
// another API key of the tenant, as after a rotation).
std::string duplicate_reference_answer(const store::ExistingPayment& holder,
                                       const Principal& principal, const std::string& key_input,
                                       const FingerprintKeys& keys, std::chrono::seconds retention,
                                       bool& key_expired) {
    const bool ours = holder.created_by == principal.principal_id;
    // The payment was made under this very key, whose record purge has deleted since.
    if (ours && holder.idempotency_key_hash &&
        keys.matches(key_input, *holder.idempotency_key_hash)) {
        key_expired = true;
        return problem_with_payment(
            409, "idempotency_key_expired", "Idempotency-Key record expired",
            "The record of this Idempotency-Key has expired (keys are remembered for " +
                duration_text(retention) +
                "), so its first answer cannot be replayed. The payment it created "
                "exists: " +
                holder.payment_id + " (GET /v1/payments/" + holder.payment_id +
                "); it was not created again. Use a new key for a new payment.",
            "Idempotency-Key", holder.payment_id);
    }
    if (ours && !holder.idempotency_key_hash) {
        // Made before payments kept their key's digest: which key it was is unknown.
        return problem_with_payment(
            409, "duplicate_merchant_reference", "Duplicate merchant reference",
            "A payment with this merchant_reference exists already: " + holder.payment_id +
                ", created under another Idempotency-Key or under this one before its "
                "record expired; it was not created again.",
            "merchant_reference", holder.payment_id);
    }
    // The holder is always of this tenant (merchant references are unique per tenant),
    // whose every credential may read it: its ID leaks nothing, and a retry sent under a
    // rotated API key finds its payment by it.
    const std::string where = holder.payment_id + " (GET /v1/payments/" + holder.payment_id + ")";
    return problem_with_payment(
        409, "duplicate_merchant_reference", "Duplicate merchant reference",
        ours ? "This merchant_reference is taken by payment " + where +
                   ", created with another Idempotency-Key of this API key; it was not "
                   "created again."
             : "This merchant_reference is taken by payment " + where +
                   ", created with another API key of this tenant -- after a key "
                   "rotation, a retry of a request the old key sent gets this answer, "
                   "and that payment is its result; it was not created again.",
        "merchant_reference", holder.payment_id);
}

} // namespace

namespace intake_protocol {

std::optional<IntakeResponse> refuse_before_reading(const Principal& principal,
                                                    std::string_view idempotency_key,
                                                    Permission permission, std::string_view what) {
    // Authorization first: the role comes from the credential, checked again on every replay.
    if (!role_allows(principal.role, permission)) {
        return problem(403, "forbidden", "Not allowed",
                       "This credential's role may not create " + std::string(what) + ".",
                       "forbidden");
    }
    if (idempotency_key.empty()) {
        return problem(400, "idempotency_key_missing", "Idempotency-Key is required",
                       "Send a unique Idempotency-Key (1 to 255 visible ASCII characters) with "
                       "every create request, and the same key when you retry it.",
                       "invalid", std::string_view("Idempotency-Key"));
    }
    if (const auto bad_key = validate_idempotency_key(idempotency_key)) {
        if (bad_key->kind == ValidationKind::card_data) {
            return validation_problem(
                *bad_key); // 422 card_data_refused, like card data in the body
        }
        return problem(400, "invalid_idempotency_key", "Idempotency-Key is invalid",
                       bad_key->message, "invalid", std::string_view("Idempotency-Key"));
    }
    return std::nullopt;
}

store::IntakeClaim claim_of(const Principal& principal, std::string_view operation,
                            std::string_view idempotency_key, const std::string& canonical,
                            const FingerprintKeys& keys, std::chrono::seconds retention) {
    store::IntakeClaim claim;
    claim.tenant_id = principal.tenant_id;
    claim.principal_id = principal.principal_id;
    claim.operation = std::string(operation);
    claim.idempotency_key = std::string(idempotency_key);
    claim.request_hash = keys.fingerprint(canonical);
    claim.retention = retention;
    return claim;
}

IntakeResponse answer_of(const store::IntakeWrite& write, const std::string& canonical,
                         const FingerprintKeys& keys, const Principal& principal,
                         const Answering& answering) {
    IntakeResponse response;
    response.status = write.status;
    response.body = write.body;
    switch (write.kind) {
    case store::IntakeWrite::Kind::created:
        response.outcome = "created";
        break;
    case store::IntakeWrite::Kind::duplicate_reference:
        response.outcome = answering.key_expired ? "key_expired" : "duplicate_reference";
        break;
    case store::IntakeWrite::Kind::refused:
        response.outcome = answering.refused_outcome;
        break;
    case store::IntakeWrite::Kind::principal_revoked:
        return problem(403, "credential_revoked", "Credential revoked", "This API key was revoked.",
                       "forbidden");
    case store::IntakeWrite::Kind::existing:
        if (!keys.matches(canonical, write.stored_hash)) {
            return problem(409, "idempotency_key_reused", "Idempotency-Key reused",
                           "This Idempotency-Key was used with a different request. Use a new key "
                           "for a new " +
                               std::string(answering.resource) +
                               "; resend the original body to retry the first one.",
                           "conflict", std::string_view("Idempotency-Key"));
        }
        if (write.status == 0) {
            IntakeResponse r =
                problem(500, "idempotency_record_incomplete", "Internal error",
                        "The first request with this key has no stored response. It was logged "
                        "for investigation; do not retry with another key.",
                        "incomplete");
            r.incident = "idempotency record without a response (tenant " + principal.tenant_id +
                         ", principal " + principal.principal_id + "); investigate";
            return r;
        }
        if (write.principal_revoked) {
            return problem(403, "credential_revoked", "Credential revoked",
                           "This credential was revoked; stored responses are not replayed to it.",
                           "forbidden");
        }
        response.replayed = true;
        response.outcome = "replayed";
        break;
    }
    if (response.status == 202 && write.resource_id) {
        response.location = std::string(answering.location_prefix) + *write.resource_id;
        response.retry_after = static_cast<int>(answering.poll_interval.count());
    }
    return response;
}

} // namespace intake_protocol

IntakeResponse IntakeService::create_payment(const Principal& principal,
                                             std::string_view idempotency_key,
                                             std::string_view body, std::string_view api_version) {
    if (auto refused = refuse_before_reading(principal, idempotency_key, Permission::create_payment,
                                             "payments")) {
        return std::move(*refused);
    }
    const auto request = parse_payment_request(body, api_version);
    if (!request) {
        return validation_problem(request.error());
    }
    const std::string canonical = canonical_bytes(*request);

    const store::IntakeClaim claim =
        claim_of(principal, k_operation, idempotency_key, canonical, m_keys, m_settings.retention);

    store::NewPayment payment;
    payment.payment_id = new_uuid();
    payment.operation_id = new_operation_id();
    payment.request = &*request;
    const std::string key_input = key_digest_input(idempotency_key);
    payment.idempotency_key_hash = m_keys.fingerprint(key_input);
    if (request->manual_capture && m_settings.providers) {
        if (const auto known = m_settings.providers->providers.find(request->provider);
            known != m_settings.providers->providers.end()) {
            payment.authorization_validity = known->second.authorization_validity;
        }
    }
    bool key_expired = false;

    auto make_bodies = [&](const std::string& created_at) {
        store::IntakeBodies bodies;
        // Checked here, once the key is known to be new: a retry of a request stored before the
        // configuration changed still gets its stored answer.
        if (const auto refusal = provider_refusal(*request, m_settings.providers)) {
            bodies.refused = validation_problem(*refusal).body;
            return bodies;
        }
        bodies.accepted = payment_resource_json(
            PaymentView{payment.payment_id, std::string(to_string(PaymentState::pending)),
                        request->amount_minor, request->currency, request->merchant_reference,
                        request->provider, created_at});
        bodies.duplicate_reference = [&](const store::ExistingPayment& holder) {
            return duplicate_reference_answer(holder, principal, key_input, m_keys,
                                              m_settings.retention, key_expired);
        };
        return bodies;
    };

    store::IntakeWrite write;
    try {
        write = store::write_intake(m_db, claim, payment, make_bodies);
    } catch (const DatabaseUnavailable& e) {
        return unavailable(e);
    }

    Answering answering;
    answering.resource = "payment";
    answering.location_prefix = "/v1/payments/";
    answering.poll_interval = m_settings.poll_interval;
    answering.key_expired = key_expired;
    answering.refused_outcome = "invalid";
    return answer_of(write, canonical, m_keys, principal, answering);
}

void prepare_intake(store::Db& db) {
    store::prepare_intake(db);
}

} // namespace payrecon
