// Adyen's standard webhooks (docs.adyen.com/development-resources/webhooks/verify-hmac-signatures):
// a JSON body of `notificationItems`, each a `NotificationRequestItem` signed on its own: its
// `additionalData.hmacSignature` is the base64 HMAC-SHA256, keyed with the hex-decoded HMAC key,
// of pspReference:originalReference:merchantAccountCode:merchantReference:value:currency:eventCode:
// success (an absent field as "", each `\` as `\\` and `:` as `\:`). The signature covers the
// item, not the request: the body is parsed (its nesting bounded) before anything is verified,
// and a request is taken only if every item verifies. No timestamp is signed: redeliveries are
// told apart by the event's identity, pspReference:eventCode:success.
//
// AUTHORISATION with success "true" is a charge (or the authorisation a payment that captures
// manually asked for), "false" a refusal; the merchantReference is our operation ID (the adapter
// sends it as `reference`). REFUND, REFUND_FAILED and REFUNDED_REVERSED are about a refund
// (WebhookEvent::kind refund): its merchantReference is the refund's operation ID, its pspReference
// the refund's own and its originalReference the payment's. REFUND success "true" refunded, "false"
// refused; REFUND_FAILED and REFUNDED_REVERSED (success "true") say a refund that succeeded has
// failed since: a late reversal (DESIGN section 16). CAPTURE and CAPTURE_FAILED are about a capture
// (kind capture), and CANCELLATION about a void (kind void_authorization), read alike:
// merchantReference the operation's ID, success "true" done and "false" refused; CAPTURE_FAILED
// (success "true") a capture that succeeded failed since. EXPIRE (success "true") is the charge's
// authorisation lapsed uncaptured: failed, as a cancellation of it. Every other eventCode (among
// them AUTHORISATION_ADJUSTMENT) is kept as `other`.

#include "core/encoding.hpp"
#include "core/external_json.hpp"
#include "core/fingerprint.hpp"
#include "providers/adyen/adapter.hpp"
#include "providers/adyen/wire.hpp"

#include <nlohmann/json.hpp>

namespace payrecon::providers::adyen {
namespace {

using nlohmann::json;

std::string field(const json& item, const char* name) {
    const auto it = item.find(name);
    return it != item.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string escaped(std::string_view text) {
    std::string out;
    for (const char c : text) {
        if (c == '\\' || c == ':') {
            out += '\\';
        }
        out += c;
    }
    return out;
}

class AdyenWebhookVerifier final : public WebhookVerifier {
public:
    explicit AdyenWebhookVerifier(std::vector<Secret> secrets) : m_secrets(std::move(secrets)) {}

    WebhookVerdict verify(const WebhookRequest& request) const override {
        WebhookVerdict out;
        const auto parsed = parse_external_json(request.body);
        const json* items = nullptr;
        if (parsed && parsed->is_object() && parsed->contains("notificationItems") &&
            (*parsed)["notificationItems"].is_array() && !(*parsed)["notificationItems"].empty()) {
            items = &(*parsed)["notificationItems"];
        }
        if (items == nullptr) {
            out.reason = "the body is not an Adyen notification (JSON with notificationItems, "
                         "nested at most 64 levels)";
            return out;
        }
        for (const json& wrapper : *items) {
            const json* item = wrapper.is_object() && wrapper.contains("NotificationRequestItem")
                                   ? &wrapper["NotificationRequestItem"]
                                   : nullptr;
            if (item == nullptr || !item->is_object() || !item->contains("amount") ||
                !(*item)["amount"].is_object() || !(*item)["amount"].contains("value") ||
                !(*item)["amount"]["value"].is_number_integer()) {
                out.status = WebhookVerdict::Status::malformed;
                out.events.clear();
                out.reason = "a notification item has no NotificationRequestItem with an amount";
                return out;
            }
            if (!signed_by_us(*item)) {
                out.status = WebhookVerdict::Status::bad_signature;
                out.events.clear();
                out.reason = "a notification item's hmacSignature matches no configured HMAC key";
                return out;
            }
            out.events.push_back(event_of(*item));
        }
        out.status = WebhookVerdict::Status::verified;
        return out;
    }

private:
    bool signed_by_us(const json& item) const {
        std::string given;
        if (item.contains("additionalData") && item["additionalData"].is_object()) {
            given = field(item["additionalData"], "hmacSignature");
        }
        if (given.empty()) {
            return false;
        }
        const json& amount = item["amount"];
        const std::string payload =
            escaped(field(item, "pspReference")) + ":" + escaped(field(item, "originalReference")) +
            ":" + escaped(field(item, "merchantAccountCode")) + ":" +
            escaped(field(item, "merchantReference")) + ":" +
            std::to_string(amount["value"].get<long long>()) + ":" +
            escaped(field(amount, "currency")) + ":" + escaped(field(item, "eventCode")) + ":" +
            escaped(field(item, "success"));
        bool matched = false;
        for (const Secret& secret : m_secrets) {
            const auto key = from_hex(secret.reveal());
            if (key) {
                // Every comparison runs: how many failed says nothing about which key is used.
                matched = constant_time_equal(base64(hmac_sha256(*key, payload)), given) || matched;
            }
        }
        return matched;
    }

    static WebhookEvent event_of(const json& item) {
        WebhookEvent e;
        const std::string psp = field(item, "pspReference");
        const std::string code = field(item, "eventCode");
        const std::string success = field(item, "success");
        e.event_key = psp + ":" + code + ":" + success;
        e.event_type = code;
        if (!psp.empty()) {
            e.provider_reference = psp;
        }
        if (const std::string ref = field(item, "merchantReference"); !ref.empty()) {
            e.operation_id = ref;
        }
        if (const auto money = from_adyen_amount(item["amount"]["value"].get<std::int64_t>(),
                                                 field(item["amount"], "currency"))) {
            e.amount_minor = money->minor;
            e.currency = money->currency;
        }
        if (code == "AUTHORISATION" || code == "REFUND" || code == "CAPTURE" ||
            code == "CANCELLATION") {
            e.outcome = success == "true"    ? EvidenceOutcome::succeeded
                        : success == "false" ? EvidenceOutcome::failed
                                             : EvidenceOutcome::other;
        } else if (code == "REFUND_FAILED" || code == "REFUNDED_REVERSED" ||
                   code == "CAPTURE_FAILED") {
            // Sent after a REFUND (CAPTURE) success "true": the scheme rejected it, or the funds
            // came back. Always success "true" (the failure happened); anything else says nothing.
            e.outcome = success == "true" ? EvidenceOutcome::failed : EvidenceOutcome::other;
        } else if (code == "EXPIRE") {
            // The authorisation's uncaptured amount lapsed: the charge's authorisation is
            // released, as a void would have released it (merchantReference: the payment's).
            e.outcome = success == "true" ? EvidenceOutcome::failed : EvidenceOutcome::other;
        }
        // A modification's merchantReference is its own operation ID (our `reference`), its
        // pspReference its own; originalReference is the payment's.
        if (code == "REFUND" || code == "REFUND_FAILED" || code == "REFUNDED_REVERSED") {
            e.kind = OperationKind::refund;
        } else if (code == "CAPTURE" || code == "CAPTURE_FAILED") {
            e.kind = OperationKind::capture;
        } else if (code == "CANCELLATION") {
            e.kind = OperationKind::void_authorization;
        }
        return e;
    }

    std::vector<Secret> m_secrets;
};

} // namespace

std::unique_ptr<WebhookVerifier> webhook_verifier(std::vector<Secret> secrets) {
    return std::make_unique<AdyenWebhookVerifier>(std::move(secrets));
}

} // namespace payrecon::providers::adyen
