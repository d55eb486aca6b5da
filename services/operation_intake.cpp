// What the intakes of a payment's operations share (services/intake_protocol.hpp): refunds,
// captures and voids are taken by one path, each kind deciding on its own rules.
#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "core/fingerprint.hpp"
#include "core/problem.hpp"
#include "services/intake_protocol.hpp"

namespace payrecon::intake_protocol {

std::string problem_with(int status, std::string_view type, std::string_view title,
                         std::string_view detail, std::optional<std::string_view> field,
                         const nlohmann::ordered_json& extra) {
    auto j = nlohmann::ordered_json::parse(problem_json(status, type, title, detail, field));
    for (auto it = extra.begin(); it != extra.end(); ++it) {
        j[it.key()] = it.value();
    }
    return j.dump();
}

std::optional<std::string> path_payment_id(std::string_view payment_id) {
    if (!is_uuid_text(payment_id)) {
        return std::nullopt;
    }
    std::string id(payment_id);
    for (char& c : id) {
        c = (c >= 'A' && c <= 'F') ? static_cast<char>(c - 'A' + 'a') : c;
    }
    return id;
}

IntakeResponse payment_not_found() {
    IntakeResponse r;
    r.status = 404;
    r.body = problem_json(404, "not_found", "Not found", "No payment with this ID.");
    r.outcome = "not_found";
    return r;
}

IntakeResponse
take_operation(store::Db& db, const FingerprintKeys& keys, const IntakeSettings& settings,
               const Principal& principal, std::string_view operation,
               std::string_view idempotency_key, const std::string& canonical,
               store::NewOperation& written, const std::optional<OperatorAudit>& audit,
               Answering answering,
               const std::function<store::OperationDecision(
                   const std::string&, const std::optional<store::OperablePayment>&)>& decide) {
    const store::IntakeClaim claim =
        claim_of(principal, operation, idempotency_key, canonical, keys, settings.retention);
    if (audit) {
        written.audit_actor = audit->actor;
        written.audit_note = audit->note;
    }
    written.id = new_uuid();
    written.operation_id = new_operation_id();
    written.idempotency_key_hash = keys.fingerprint(key_digest_input(idempotency_key));

    std::string refused_outcome = "refused";
    store::IntakeWrite write;
    try {
        write = store::write_operation_intake(
            db, claim, written,
            [&](const std::string& created_at,
                const std::optional<store::OperablePayment>& payment) {
                store::OperationDecision d = decide(created_at, payment);
                if (d.refused_status) {
                    refused_outcome = *d.refused_status == 404 ? "not_found" : "refused";
                }
                return d;
            });
    } catch (const DatabaseUnavailable& e) {
        return unavailable(e);
    }
    answering.poll_interval = settings.poll_interval;
    answering.refused_outcome = refused_outcome;
    return answer_of(write, canonical, keys, principal, answering);
}

} // namespace payrecon::intake_protocol
