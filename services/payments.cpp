#include "services/payments.hpp"

#include "core/encoding.hpp"
#include "services/intake.hpp"
#include "store/payment_store.hpp"

#include <nlohmann/json.hpp>

namespace payrecon {

std::optional<std::string> payment_resource(store::Db& db, const std::string& tenant_id,
                                            std::string_view payment_id) {
    if (!is_uuid_text(payment_id)) {
        return std::nullopt;
    }
    const auto payment = store::find_payment(db, tenant_id, std::string(payment_id));
    if (!payment) {
        return std::nullopt;
    }
    nlohmann::ordered_json body = nlohmann::ordered_json::parse(payment_resource_json(
        PaymentView{payment->payment_id, payment->state, payment->amount_minor, payment->currency,
                    payment->merchant_reference, payment->provider, payment->created_at}));
    body["updated_at"] = payment->updated_at;
    body["provider_reference"] = payment->provider_reference
                                     ? nlohmann::ordered_json(*payment->provider_reference)
                                     : nullptr;
    nlohmann::ordered_json attempts = nlohmann::ordered_json::array();
    for (const auto& a : payment->attempts) {
        nlohmann::ordered_json j;
        j["attempt"] = a.attempt_no;
        j["outcome"] = a.outcome;
        j["http_status"] = a.http_status ? nlohmann::ordered_json(*a.http_status) : nullptr;
        j["started_at"] = a.started_at;
        j["finished_at"] = a.finished_at ? nlohmann::ordered_json(*a.finished_at) : nullptr;
        attempts.push_back(std::move(j));
    }
    body["attempt_count"] = payment->attempts.size();
    body["attempts"] = std::move(attempts);
    return body.dump();
}

bool store_ready(store::Db& db) {
    return store::database_ready(db);
}

ProviderRejections provider_rejections(store::Db& db) {
    return {store::rejected_attempt_counts(db), store::rejected_in_review(db),
            store::provider_event_results(db)};
}

} // namespace payrecon
