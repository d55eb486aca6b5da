#include "providers/adyen/adapter.hpp"

#include "providers/adyen/wire.hpp"
#include "providers/call_record.hpp"

namespace payrecon::providers::adyen {

AdyenAdapter::AdyenAdapter(const ProviderConfig& config, SendFunction send)
    : m_name(config.name), m_base_url(config.base_url), m_merchant_account(config.merchant_account),
      m_return_url(config.return_url), m_api_key(config.api_key), m_send(std::move(send)) {
    // The Checkout API can neither look a payment up nor list them; an override cannot add it.
    m_caps = configured_capabilities(config, k_max_key_length, false, false);
}

SubmitResult AdyenAdapter::submit(const PaymentOrder& order) {
    if (const auto problem =
            carry_problem(carry_limits(), order.merchant_reference, order.metadata)) {
        return not_carried(*problem);
    }
    const auto body = payment_body(order, m_merchant_account, m_return_url);
    if (!body ||
        (m_caps.honours_idempotency_keys && order.operation_id.size() > k_max_key_length)) {
        // Nothing was sent, and sending again cannot help.
        SubmitResult r;
        r.outcome = Outcome::declined;
        r.call.error_class = body ? "operation_id_too_long" : "amount_not_expressible";
        r.call.detail =
            body ? "the operation ID is longer than Adyen's 64-character Idempotency-Key"
                 : "the amount cannot be expressed in Adyen's units for " + order.amount.currency;
        return r;
    }
    http::HttpRequest req;
    req.method = "POST";
    req.url = m_base_url + "/" + k_api_version + "/payments";
    req.mutating = true;
    req.headers = {{"X-API-Key", m_api_key.reveal()},
                   {"Content-Type", "application/json"},
                   {"Accept", "application/json"}};
    if (m_caps.honours_idempotency_keys) {
        req.headers.emplace_back("Idempotency-Key", order.operation_id);
    }
    req.secrets_to_redact = {m_api_key};
    req.body = *body;
    req.deadline = order.deadline;
    const http::HttpResult res = m_send(req);
    if (res.cls != http::SendClass::response) {
        SubmitResult r;
        r.outcome = res.cls == http::SendClass::not_sent ? Outcome::not_sent : Outcome::unknown;
        r.call = call_record_of(res);
        return r;
    }
    SubmitResult r = interpret_payment(order, res.http_status, res.body);
    r.call.duration = res.total_time;
    return r;
}

LookupResult AdyenAdapter::lookup(const PaymentOrder& /*order*/) {
    LookupResult out; // failed: never read as absence
    out.call.error_class = "lookup_not_supported";
    out.call.detail = "Adyen's Checkout API cannot find a payment by our reference";
    return out;
}

ListPage AdyenAdapter::list(const TimeWindow& /*window*/,
                            const std::optional<std::string>& /*cursor*/) {
    ListPage out;
    out.call.error_class = "list_not_supported";
    out.call.detail = "Adyen's Checkout API cannot list transactions";
    return out;
}

} // namespace payrecon::providers::adyen
