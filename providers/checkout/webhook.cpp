// Checkout.com's webhooks (checkout.com/docs/developer-resources/webhooks/manage-webhooks: "the
// Cko-Signature header ... HMAC-SHA256 hash of the notification body, using the signature key"):
// the header holds the hex HMAC-SHA256 of the raw body, keyed with the webhook's signature key.
// Several keys may be configured during a rotation; any may match. No timestamp is signed:
// redeliveries are told apart by the event's `id` ("evt_...").
//
// The body is an event {"id", "type", "created_on", "data": {"id": "pay_...", "amount",
// "currency", "reference", ...}}. payrecon captures automatically, so payment_approved (the
// authorisation), payment_captured and payment_paid are charges; payment_declined,
// payment_canceled and payment_expired are refusals; payment_pending is not final; every other
// type (disputes, capture_pending...) is kept, never applied. `data.reference` is our operation
// ID (the adapter sends it as `reference`). A refund's events -- payment_refunded (refunded),
// payment_refund_declined (not), payment_refund_pending (not final) -- are about the refund
// action: `data.action_id` is its reference, `data.reference` the reference its request carried
// (our refund's operation ID), `data.amount` what it refunded; `data.id` is the payment's.

#include "core/external_json.hpp"
#include "core/fingerprint.hpp"
#include "providers/checkout/adapter.hpp"
#include "providers/checkout/wire.hpp"
#include "providers/wire_util.hpp"

#include <nlohmann/json.hpp>

namespace payrecon::providers::checkout {
namespace {

using nlohmann::json;

bool refund_event(std::string_view type) {
    return type == "payment_refunded" || type == "payment_refund_declined" ||
           type == "payment_refund_pending";
}

EvidenceOutcome outcome_of(std::string_view type) {
    if (type == "payment_refunded") {
        return EvidenceOutcome::succeeded;
    }
    if (type == "payment_refund_declined") {
        return EvidenceOutcome::failed;
    }
    if (type == "payment_refund_pending") {
        return EvidenceOutcome::pending;
    }
    if (type == "payment_approved" || type == "payment_captured" || type == "payment_paid") {
        return EvidenceOutcome::succeeded;
    }
    if (type == "payment_declined" || type == "payment_canceled" || type == "payment_expired") {
        return EvidenceOutcome::failed;
    }
    if (type == "payment_pending") {
        return EvidenceOutcome::pending;
    }
    return EvidenceOutcome::other;
}

class CheckoutWebhookVerifier final : public WebhookVerifier {
public:
    explicit CheckoutWebhookVerifier(std::vector<Secret> secrets) : m_secrets(std::move(secrets)) {}

    WebhookVerdict verify(const WebhookRequest& request) const override {
        WebhookVerdict out;
        out.status = WebhookVerdict::Status::bad_signature;
        const auto header = request.header("cko-signature");
        if (!header || header->empty()) {
            out.reason = "no Cko-Signature header";
            return out;
        }
        const std::string given = wire::lower(*header);
        bool matched = false;
        for (const Secret& secret : m_secrets) {
            // Every comparison runs: how many failed says nothing about which key is used.
            matched =
                constant_time_equal(to_hex(hmac_sha256(secret.reveal(), request.body)), given) ||
                matched;
        }
        if (!matched) {
            out.reason = "Cko-Signature matches no configured signature key";
            return out;
        }
        const auto parsed = parse_external_json(request.body);
        if (!parsed || !parsed->is_object() || !wire::string_member(*parsed, "id") ||
            !wire::string_member(*parsed, "type") || !parsed->contains("data") ||
            !(*parsed)["data"].is_object()) {
            out.status = WebhookVerdict::Status::malformed;
            out.reason = "the body is not a Checkout.com event (JSON with id, type and a data "
                         "object, nested at most 64 levels)";
            return out;
        }
        const json& event = *parsed;
        const json& data = event["data"];
        WebhookEvent e;
        e.event_key = *wire::string_member(event, "id");
        e.event_type = *wire::string_member(event, "type");
        e.outcome = outcome_of(e.event_type);
        if (refund_event(e.event_type)) {
            e.kind = OperationKind::refund;
            e.provider_reference = wire::string_member(data, "action_id");
        } else {
            e.provider_reference = wire::string_member(data, "id");
        }
        e.operation_id = wire::string_member(data, "reference");
        if (data.contains("amount") && data["amount"].is_number_integer()) {
            if (const auto money =
                    from_checkout_amount(data["amount"].get<std::int64_t>(),
                                         wire::string_member(data, "currency").value_or(""))) {
                e.amount_minor = money->minor;
                e.currency = money->currency;
            }
        }
        if (const auto created = wire::string_member(event, "created_on")) {
            if (const auto t = wire::parse_rfc3339(*created)) {
                e.occurred_at =
                    std::chrono::duration_cast<std::chrono::seconds>(t->time_since_epoch()).count();
            }
        }
        out.status = WebhookVerdict::Status::verified;
        out.events.push_back(std::move(e));
        return out;
    }

private:
    std::vector<Secret> m_secrets;
};

} // namespace

std::unique_ptr<WebhookVerifier> webhook_verifier(std::vector<Secret> secrets) {
    return std::make_unique<CheckoutWebhookVerifier>(std::move(secrets));
}

} // namespace payrecon::providers::checkout
