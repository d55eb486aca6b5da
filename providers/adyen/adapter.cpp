#include "providers/adyen/adapter.hpp"

#include "core/encoding.hpp"
#include "providers/adyen/wire.hpp"

namespace payrecon::providers::adyen {

AdyenAdapter::AdyenAdapter(const ProviderConfig& config, SendFunction send)
    : m_name(config.name), m_settings(settings_of(config)),
      // The Checkout API can neither look a payment up nor list them; an override cannot add it.
      m_caps(configured_capabilities(config, descriptor().api)),
      m_client(config, std::move(send),
               ClientOptions{.headers = {}, .api_key_header = "X-API-Key", .api_key_prefix = ""}) {}

SubmitResult AdyenAdapter::submit(const PaymentOrder& order) {
    if (const auto problem =
            carry_problem(carry_limits(), order.merchant_reference, order.metadata)) {
        return not_carried(*problem);
    }
    const auto body = payment_body(order, m_settings.merchant_account, m_settings.return_url);
    if (!body) {
        // Nothing was sent, and sending again cannot help.
        return not_expressible("amount_not_expressible",
                               "the amount cannot be expressed in Adyen's units for " +
                                   order.amount.currency);
    }
    if (m_caps.honours_idempotency_keys && order.operation_id.size() > k_max_key_length) {
        return not_expressible(
            "operation_id_too_long",
            "the operation ID is longer than Adyen's 64-character Idempotency-Key");
    }
    return post_json(
        "/payments", *body, order.operation_id, order.deadline,
        [&order](int status, std::string_view b) { return interpret_payment(order, status, b); });
}

SubmitResult
AdyenAdapter::post_json(const std::string& path, const std::string& body,
                        const std::string& operation_id,
                        const std::optional<std::chrono::steady_clock::time_point>& deadline,
                        const std::function<SubmitResult(int, std::string_view)>& interpret) {
    net::HttpRequest req = m_client.request("POST", std::string("/") + k_api_version + path, true);
    req.headers.emplace_back("Content-Type", "application/json");
    if (m_caps.honours_idempotency_keys) {
        req.headers.emplace_back("Idempotency-Key", operation_id);
    }
    req.body = body;
    req.deadline = deadline;
    return create_outcome(m_client.send(std::move(req)), interpret);
}

SubmitResult AdyenAdapter::refund(const RefundOrder& order) {
    const auto body = refund_body(order, m_settings.merchant_account);
    if (auto refused = unsendable_refund(
            order, nullptr, "Adyen pspReference", body, "amount_not_expressible",
            "the amount cannot be expressed in Adyen's units for " + order.amount.currency)) {
        return *refused;
    }
    if (m_caps.honours_idempotency_keys && order.operation_id.size() > k_max_key_length) {
        return not_expressible(
            "operation_id_too_long",
            "the operation ID is longer than Adyen's 64-character Idempotency-Key");
    }
    return post_json("/payments/" + percent_encode(order.payment_reference) + "/refunds", *body,
                     order.operation_id, order.deadline, [&order](int status, std::string_view b) {
                         return interpret_refund(order, status, b);
                     });
}

LookupResult AdyenAdapter::lookup_refund(const RefundOrder& /*order*/) {
    LookupResult out; // failed: never read as absence
    out.call.error_class = "lookup_not_supported";
    out.call.detail = "Adyen's Checkout API cannot find a refund by our reference: its REFUND "
                      "notification tells the outcome";
    return out;
}

SubmitResult AdyenAdapter::capture(const AuthorizationOrder& order) {
    return modify(order, "/captures", capture_body(order, m_settings.merchant_account));
}

SubmitResult AdyenAdapter::void_authorization(const AuthorizationOrder& order) {
    return modify(order, "/cancels", cancel_body(order, m_settings.merchant_account));
}

SubmitResult AdyenAdapter::modify(const AuthorizationOrder& order, std::string_view action,
                                  const std::optional<std::string>& body) {
    const bool capture = order.kind == OperationKind::capture;
    if (order.payment_reference.empty()) {
        return not_expressible("no_payment_reference",
                               std::string("the payment has no Adyen pspReference to ") +
                                   (capture ? "capture" : "cancel"));
    }
    if (!body) {
        return not_expressible("not_expressible",
                               capture ? "the amount (" + order.amount.currency +
                                             ") or the operation ID cannot be expressed in "
                                             "Adyen's capture request"
                                       : std::string("the operation ID cannot be expressed in "
                                                     "Adyen's cancel request"));
    }
    if (m_caps.honours_idempotency_keys && order.operation_id.size() > k_max_key_length) {
        return not_expressible(
            "operation_id_too_long",
            "the operation ID is longer than Adyen's 64-character Idempotency-Key");
    }
    return post_json("/payments/" + percent_encode(order.payment_reference) + std::string(action),
                     *body, order.operation_id, order.deadline,
                     [&order](int status, std::string_view b) {
                         return interpret_authorization_action(order, status, b);
                     });
}

LookupResult AdyenAdapter::lookup_capture(const AuthorizationOrder& order) {
    LookupResult out; // failed: never read as absence
    out.call.error_class = "lookup_not_supported";
    out.call.detail = order.kind == OperationKind::capture
                          ? "Adyen's Checkout API cannot find a capture by our reference: its "
                            "CAPTURE notification tells the outcome"
                          : "Adyen's Checkout API cannot find a cancel by our reference: its "
                            "CANCELLATION notification tells the outcome";
    return out;
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
