#include "services/webhooks.hpp"

#include "store/webhook_store.hpp"

namespace payrecon {

WebhookReceipt receive_webhook(store::Db& db, const std::string& provider,
                               const WebhookVerifier& verifier, const WebhookRequest& request) {
    return record_webhook(db, provider, verifier.verify(request), request.body);
}

WebhookReceipt record_webhook(store::Db& db, const std::string& provider, WebhookVerdict verdict,
                              std::string_view body) {
    WebhookReceipt out;
    out.status = verdict.status;
    out.reason = std::move(verdict.reason);
    if (verdict.status != WebhookVerdict::Status::verified) {
        return out;
    }
    out.events = verdict.events.size();
    for (const auto& stored : store::store_provider_events(db, provider, verdict.events, body)) {
        out.new_events += stored.inserted ? 1U : 0U;
        out.unmatched += stored.payment_id ? 0U : 1U;
    }
    return out;
}

} // namespace payrecon
