// Square's webhook signature (developer.squareup.com/docs/webhooks/step3validate): the header
// `x-square-hmacsha256-signature` is the base64 HMAC-SHA256, keyed with the subscription's
// signature key, of the notification URL exactly as registered with Square followed by the raw
// body. The URL is part of what is signed, so it comes from the configuration (`webhook_url`),
// never from the request: behind a proxy serve sees another. Any configured key may match (a key
// being replaced has two). No timestamp is signed: redeliveries are told apart by `event_id`.
//
// `payment.created` and `payment.updated` carry the Payment: its `reference_id` is our operation
// ID (the adapter sends it), its `status` the outcome in the adapter's own words (map_status):
// COMPLETED charged, FAILED or CANCELED not, APPROVED or PENDING not final. `refund.created` and
// `refund.updated` carry the PaymentRefund (data.object.refund): its reason ends with our refund's
// operation ID (the adapter writes "[pr_...]" there), its status the refund's outcome
// (map_refund_status: COMPLETED refunded, REJECTED or FAILED not -- FAILED after COMPLETED is a
// late reversal --, PENDING not final).

#include "core/encoding.hpp"
#include "core/external_json.hpp"
#include "core/fingerprint.hpp"
#include "providers/square/adapter.hpp"
#include "providers/square/wire.hpp"

#include <nlohmann/json.hpp>

namespace payrecon::providers::square {
namespace {

using nlohmann::json;

std::optional<std::string> text(const json& j, const char* name) {
    const auto it = j.find(name);
    return it != j.end() && it->is_string() ? std::optional<std::string>(it->get<std::string>())
                                            : std::nullopt;
}

EvidenceOutcome evidence_of_outcome(Outcome outcome) {
    switch (outcome) {
    case Outcome::succeeded:
        return EvidenceOutcome::succeeded;
    case Outcome::declined:
        return EvidenceOutcome::failed;
    case Outcome::pending:
        return EvidenceOutcome::pending;
    default:
        return EvidenceOutcome::other;
    }
}

EvidenceOutcome evidence_of(std::string_view status) {
    return evidence_of_outcome(map_status(status));
}

// The event Square's body tells, or nullopt if it is not one (no event_id or type).
std::optional<WebhookEvent> parse_event(std::string_view body) {
    const auto parsed = parse_external_json(body);
    if (!parsed || !parsed->is_object()) {
        return std::nullopt;
    }
    const json& j = *parsed;
    const auto id = text(j, "event_id");
    const auto type = text(j, "type");
    if (!id || id->empty() || id->size() > 255 || !type) {
        return std::nullopt;
    }
    WebhookEvent e;
    e.event_key = *id;
    e.event_type = *type;
    const json* payment = nullptr;
    if (j.contains("data") && j["data"].is_object() && j["data"].contains("object") &&
        j["data"]["object"].is_object() && j["data"]["object"].contains("payment") &&
        j["data"]["object"]["payment"].is_object()) {
        payment = &j["data"]["object"]["payment"];
    }
    if ((*type == "refund.created" || *type == "refund.updated") && j.contains("data") &&
        j["data"].is_object() && j["data"].contains("object") && j["data"]["object"].is_object() &&
        j["data"]["object"].contains("refund")) {
        // A refund we cannot read is kept, not an outcome.
        if (const auto refund = parse_refund(j["data"]["object"]["refund"].dump())) {
            e.kind = OperationKind::refund;
            e.operation_id = refund->operation_id;
            e.provider_reference = refund->provider_reference;
            e.outcome = evidence_of_outcome(refund->state);
            e.amount_minor = refund->amount.minor;
            e.currency = refund->amount.currency;
        }
        return e;
    }
    if (payment == nullptr || (*type != "payment.created" && *type != "payment.updated")) {
        return e; // kept, not an outcome
    }
    e.operation_id = text(*payment, "reference_id");
    e.provider_reference = text(*payment, "id");
    if (const auto status = text(*payment, "status")) {
        e.outcome = evidence_of(*status);
    }
    if (payment->contains("amount_money") && (*payment)["amount_money"].is_object()) {
        const json& m = (*payment)["amount_money"];
        if (m.contains("amount") && m["amount"].is_number_integer() && text(m, "currency")) {
            if (const auto money =
                    from_square_money(m["amount"].get<long long>(), *text(m, "currency"))) {
                e.amount_minor = money->minor;
                e.currency = money->currency;
            }
        }
    }
    return e;
}

class SquareWebhookVerifier final : public WebhookVerifier {
public:
    SquareWebhookVerifier(std::vector<Secret> secrets, std::string notification_url)
        : m_secrets(std::move(secrets)), m_url(std::move(notification_url)) {}

    WebhookVerdict verify(const WebhookRequest& request) const override {
        WebhookVerdict out;
        out.status = WebhookVerdict::Status::bad_signature;
        const auto header = request.header("x-square-hmacsha256-signature");
        if (!header || header->empty()) {
            out.reason = "no x-square-hmacsha256-signature header";
            return out;
        }
        const std::string signed_payload = m_url + std::string(request.body);
        bool matched = false;
        for (const Secret& secret : m_secrets) {
            // Every comparison runs: how many failed says nothing about which key is used.
            matched = constant_time_equal(base64(hmac_sha256(secret.reveal(), signed_payload)),
                                          *header) ||
                      matched;
        }
        if (!matched) {
            out.reason = "the signature matches no configured signature key over the configured "
                         "webhook_url and the body";
            return out;
        }
        auto event = parse_event(request.body);
        if (!event) {
            out.status = WebhookVerdict::Status::malformed;
            out.reason = "the signed body is not a Square event (JSON with event_id and type, "
                         "nested at most 64 levels)";
            return out;
        }
        out.status = WebhookVerdict::Status::verified;
        out.events.push_back(std::move(*event));
        return out;
    }

private:
    std::vector<Secret> m_secrets;
    std::string m_url;
};

} // namespace

std::unique_ptr<WebhookVerifier> webhook_verifier(std::vector<Secret> secrets,
                                                  std::string notification_url) {
    return std::make_unique<SquareWebhookVerifier>(std::move(secrets), std::move(notification_url));
}

} // namespace payrecon::providers::square
