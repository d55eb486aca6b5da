// Stripe's webhook signature (docs.stripe.com/webhooks#verify-manually): the header
// `Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>...]`, each v1 the hex HMAC-SHA256 of
// "<t>.<raw body>" keyed with the endpoint's signing secret (the whole `whsec_...` string). Any v1
// may match any of the configured secrets (a secret being rolled has two). A timestamp more than
// 300 s from our clock is refused: a recorded request replayed later does not verify.

#include "core/fingerprint.hpp"
#include "providers/stripe/adapter.hpp"
#include "providers/stripe/wire.hpp"

#include <cstdlib>

namespace payrecon::providers::stripe {
namespace {

constexpr long long k_tolerance_s = 300;

class StripeWebhookVerifier final : public WebhookVerifier {
public:
    explicit StripeWebhookVerifier(std::vector<Secret> secrets) : m_secrets(std::move(secrets)) {}

    WebhookVerdict verify(const WebhookRequest& request) const override {
        WebhookVerdict out;
        out.status = WebhookVerdict::Status::bad_signature;
        const auto header = request.header("stripe-signature");
        if (!header) {
            out.reason = "no Stripe-Signature header";
            return out;
        }
        std::optional<long long> timestamp;
        std::vector<std::string_view> signatures;
        std::string_view rest = *header;
        while (!rest.empty()) {
            const auto comma = rest.find(',');
            const std::string_view part = rest.substr(0, comma);
            rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
            const auto eq = part.find('=');
            if (eq == std::string_view::npos) {
                continue;
            }
            const std::string_view key = part.substr(0, eq);
            const std::string_view value = part.substr(eq + 1);
            if (key == "t" && !timestamp) {
                timestamp = digits(value);
            } else if (key == "v1") {
                signatures.push_back(value);
            }
        }
        if (!timestamp || signatures.empty()) {
            out.reason = "Stripe-Signature has no t= timestamp or no v1= signature";
            return out;
        }
        const long long now =
            std::chrono::duration_cast<std::chrono::seconds>(request.received_at.time_since_epoch())
                .count();
        if (std::llabs(now - *timestamp) > k_tolerance_s) {
            out.reason = "the Stripe-Signature timestamp is " + std::to_string(now - *timestamp) +
                         " s from our clock, outside the 300 s tolerance";
            return out;
        }
        const std::string signed_payload =
            std::to_string(*timestamp) + "." + std::string(request.body);
        bool matched = false;
        for (const Secret& secret : m_secrets) {
            const std::string expected = to_hex(hmac_sha256(secret.reveal(), signed_payload));
            for (const std::string_view given : signatures) {
                // Every comparison runs: how many failed says nothing about which secret is used.
                matched = constant_time_equal(expected, given) || matched;
            }
        }
        if (!matched) {
            out.reason = "no v1 signature matches a configured webhook secret";
            return out;
        }
        auto event = parse_event(request.body);
        if (!event) {
            out.status = WebhookVerdict::Status::malformed;
            out.reason = "the signed body is not a Stripe event (JSON with id and type, nested at "
                         "most 64 levels)";
            return out;
        }
        out.status = WebhookVerdict::Status::verified;
        out.events.push_back(std::move(*event));
        return out;
    }

private:
    // A non-negative decimal without sign or spaces, or nullopt.
    static std::optional<long long> digits(std::string_view text) {
        if (text.empty() || text.size() > 18) {
            return std::nullopt;
        }
        long long v = 0;
        for (const char c : text) {
            if (c < '0' || c > '9') {
                return std::nullopt;
            }
            v = v * 10 + (c - '0');
        }
        return v;
    }

    std::vector<Secret> m_secrets;
};

} // namespace

std::unique_ptr<WebhookVerifier> webhook_verifier(std::vector<Secret> secrets) {
    return std::make_unique<StripeWebhookVerifier>(std::move(secrets));
}

} // namespace payrecon::providers::stripe
