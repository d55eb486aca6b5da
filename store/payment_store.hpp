#pragma once
// Reading payments back: the status resource of the HTTP API and the CLI.

#include "store/operation_store.hpp"

#include <optional>
#include <string>
#include <vector>

namespace payrecon::store {

class Db;

struct AttemptSummary {
    int attempt_no = 0;
    std::string outcome;
    std::optional<int> http_status;
    std::string started_at;
    std::optional<std::string> finished_at;
};

struct PaymentDetail {
    std::string payment_id;
    std::string state;
    long long amount_minor = 0;
    std::string currency;
    std::string merchant_reference;
    std::string provider;
    std::string created_at;
    std::string updated_at;
    std::optional<std::string> provider_reference;
    std::vector<AttemptSummary> attempts;
    std::optional<long long> charged_amount_minor; // what an operator recorded it charged
    long long refund_held_minor = 0;   // refunds succeeded, in flight, unknown or in review
    std::vector<OperationRow> refunds; // oldest first
    // An authorisation's (capture "manual", issue 32): what its captures hold and took, whether a
    // final capture or a void is held, when it was voided, when it expires (the earliest the
    // provider may let it lapse) or was found expired; its captures and voids, oldest first.
    bool manual_capture = false;
    long long capture_held_minor = 0;
    long long captured_minor = 0;
    bool final_capture_held = false;
    bool void_held = false;
    std::optional<std::string> voided_at;
    std::optional<std::string> authorization_expires_at;
    std::optional<std::string> authorization_expired_at;
    bool authorization_lapsed = false; // expired by now, by its expiry time or as found
    std::vector<OperationRow> captures;
    std::vector<OperationRow> voids;
};

// The payment `payment_id` of `tenant_id`, with its attempts in order and its refunds; nullopt if
// the tenant has no such payment (another tenant's payment is "none": existence never leaks).
// `payment_id` must be a UUID in text form (the caller validates). Throws DatabaseUnavailable.
std::optional<PaymentDetail> find_payment(Db& db, const std::string& tenant_id,
                                          const std::string& payment_id);

// The ID of `tenant_id`'s payment with `merchant_reference` (unique per tenant); nullopt if it has
// none -- another tenant's payment with the same reference is never found. Throws
// DatabaseUnavailable.
std::optional<std::string> payment_id_by_reference(Db& db, const std::string& tenant_id,
                                                   const std::string& merchant_reference);

// True if the database answers and its schema is the one this binary knows; false if it answers
// otherwise. Throws DatabaseUnavailable if the connection is lost (the caller may reconnect and ask
// again).
bool database_ready(Db& db);

} // namespace payrecon::store
