#pragma once
// The payment read side as the HTTP API shows it: one payment's resource for its tenant, whether
// the database behind it is ready, and the requests providers rejected (for /metrics).

#include "core/provider_catalog.hpp"
#include "store/reconcile_store.hpp"
#include "store/webhook_store.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

namespace payrecon {

namespace store {
class Db;
}

// GET /v1/payments/{id}: the payment `payment_id` of `tenant_id` as the API shows it (JSON: the
// resource of services/intake's shape with updated_at, provider_reference and its attempts);
// nullopt if `payment_id` is not a UUID or the tenant has no such payment -- another tenant's
// payment is "none" too, so existence never leaks. Throws DatabaseUnavailable.
std::optional<std::string> payment_resource(store::Db& db, const std::string& tenant_id,
                                            std::string_view payment_id);

// Why GET /v1/payments has no list: always 400 invalid_query, `detail` saying what is wrong.
struct PaymentsQueryProblem {
    int status = 400;
    std::string type = "invalid_query";
    std::string detail;
};

// GET /v1/payments?merchant_reference=REF: `tenant_id`'s payment with that merchant reference as
// {"object": "list", "data": [resource]} -- the resource as payment_resource() gives it -- or with
// "data" empty: merchant references are unique per tenant, and another tenant's payment is never
// found. `query` (the target's text after '?') must hold merchant_reference exactly once, and
// nothing else, its value percent-encoded as forms encode it ('+' is a space; a plus is %2B) and
// decoding to 1-255 bytes of UTF-8 with no control character. Throws DatabaseUnavailable.
tl::expected<std::string, PaymentsQueryProblem>
payments_by_query(store::Db& db, const std::string& tenant_id, std::string_view query);

// True if the database answers and its schema is the one this binary knows. Throws
// DatabaseUnavailable if the connection is lost.
bool store_ready(store::Db& db);

// What providers refused of our requests, read from the database: every rejected attempt per
// provider and code, and the payments in review for it. Throws DatabaseUnavailable.
struct ProviderRejections {
    std::vector<store::RejectedAttempts> attempts;
    std::vector<store::RejectedInReview> in_review;
    // Stored webhook events by provider and what became of them (store::provider_event_results).
    std::vector<store::ProviderEventCount> events;
};
ProviderRejections provider_rejections(store::Db& db);

// A list filtered by `provider` that found nothing: throws UsageError when no payment names that
// provider and the configuration (`configured`, when one was given) has none of that name either,
// with the nearest known name ("did you mean 'stripe'?") and the known ones; returns when the
// provider is known and simply has nothing to list. Throws DatabaseUnavailable.
void refuse_unknown_provider(store::Db& db, const std::optional<ProviderCatalog>& configured,
                             const std::string& provider);

} // namespace payrecon
