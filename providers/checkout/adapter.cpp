#include "providers/checkout/adapter.hpp"

#include "core/encoding.hpp"
#include "providers/checkout/wire.hpp"
#include "providers/wire_util.hpp"

namespace payrecon::providers::checkout {

CheckoutAdapter::CheckoutAdapter(const ProviderConfig& config, SendFunction send)
    : m_name(config.name), m_settings(settings_of(config)),
      m_caps(configured_capabilities(config, descriptor().api)), m_client(config, std::move(send)) {
}

SubmitResult
CheckoutAdapter::post_json(const std::string& path, const std::string& body,
                           const std::string& operation_id,
                           const std::optional<std::chrono::steady_clock::time_point>& deadline,
                           const std::function<SubmitResult(int, std::string_view)>& interpret) {
    net::HttpRequest req = m_client.request("POST", path, true);
    req.headers.emplace_back("Content-Type", "application/json");
    if (m_caps.honours_idempotency_keys) {
        req.headers.emplace_back("Cko-Idempotency-Key", operation_id);
    }
    req.body = body;
    req.deadline = deadline;
    return create_outcome(m_client.send(std::move(req)), interpret);
}

SubmitResult CheckoutAdapter::submit(const PaymentOrder& order) {
    if (const auto problem =
            carry_problem(carry_limits(), order.merchant_reference, order.metadata)) {
        return not_carried(*problem);
    }
    const auto body = create_body(order, m_settings.processing_channel_id);
    if (!body) {
        // Nothing was sent, and sending again cannot help.
        // Say which part: the only one an operator can act on differs.
        if (!to_checkout_amount(order.amount)) {
            return not_expressible(
                "amount_not_expressible",
                "the amount cannot be sent in Checkout.com's units for " + order.amount.currency +
                    " (an integer of at most nine digits; for BHD, IQD, JOD, KWD, LYD, OMR and "
                    "TND its last digit 0): the client must create the payment with another "
                    "amount");
        }
        if (order.description && order.description->size() > k_max_description) {
            return not_expressible("description_too_long",
                                   "the description is longer than Checkout.com's 100 characters: "
                                   "the client must create the payment with a shorter one");
        }
        return not_expressible("operation_id_too_long",
                               "the operation ID is longer than Checkout.com's 50-character "
                               "reference");
    }
    return post_json(
        "/payments", *body, order.operation_id, order.deadline,
        [&order](int status, std::string_view b) { return interpret_create(order, status, b); });
}

LookupResult CheckoutAdapter::lookup(const PaymentOrder& order) {
    LookupResult out;
    if (!m_caps.lookup_by_operation_id) {
        out.call.error_class = "lookup_not_supported";
        return out;
    }
    std::vector<RemotePayment> matches;
    long long skip = 0;
    for (int pages = 0;; ++pages) {
        if (pages == k_max_lookup_pages) {
            out.call.error_class = "too_many_pages";
            out.call.detail = "more than " +
                              std::to_string(k_max_lookup_pages * k_lookup_page_size) +
                              " payments with our reference";
            return out; // failed: never read as absence
        }
        const std::string query = "/payments?reference=" + percent_encode(order.operation_id) +
                                  "&limit=" + std::to_string(k_lookup_page_size) +
                                  "&skip=" + std::to_string(skip);
        const net::HttpResult res = m_client.send(m_client.request("GET", query, false));
        const ReadCall read = read_call(res);
        out.call = read.call;
        if (!read.ok) {
            return out; // failed: never read as absence
        }
        const auto page = parse_payment_list(res.body);
        if (!page) {
            out.call.error_class = "unrecognised_response";
            return out;
        }
        for (const auto& p : page->data) {
            // The endpoint filters by reference; a payment it answers that is not ours (another
            // reference, or none) is not counted, and it is not proof of anything either.
            if (p.operation_id == order.operation_id) {
                matches.push_back(p);
                if (order.manual_capture && !p.raw_status.empty()) {
                    // An authorisation held is what an order that only authorises asked for.
                    matches.back().state = map_status_for(p.raw_status, true);
                }
            }
        }
        skip += static_cast<long long>(page->data.size());
        if (page->data.empty() || skip >= page->total_count) {
            break;
        }
    }
    if (matches.empty()) {
        out.status = LookupResult::Status::not_found;
        return out;
    }
    // Newest first, as Checkout.com answers: the payment is the oldest, as the first request with
    // our key made it; the others are duplicates.
    out.status = LookupResult::Status::found;
    out.payment = matches.back();
    matches.pop_back();
    out.duplicates = std::move(matches);
    return out;
}

SubmitResult CheckoutAdapter::refund(const RefundOrder& order) {
    const auto body = refund_body(order);
    if (auto refused = unsendable_refund(order, &carry_limits(), "Checkout.com payment ID", body,
                                         "not_expressible",
                                         "the amount (" + order.amount.currency +
                                             ") or the operation ID cannot be expressed in "
                                             "Checkout.com's refund request")) {
        return *refused;
    }
    return post_json("/payments/" + percent_encode(order.payment_reference) + "/refunds", *body,
                     order.operation_id, order.deadline, [&order](int status, std::string_view b) {
                         return interpret_refund(order, status, b);
                     });
}

LookupResult CheckoutAdapter::lookup_refund(const RefundOrder& order) {
    if (auto refused = unaskable_refund(order, m_caps)) {
        return *refused;
    }
    LookupResult out;
    const net::HttpResult res = m_client.send(m_client.request(
        "GET", "/payments/" + percent_encode(order.payment_reference) + "/actions", false));
    const ReadCall read = read_call(res);
    out.call = read.call;
    if (!read.ok) {
        return out; // failed: never read as absence
    }
    const auto refunds = parse_refund_actions(res.body, order.amount.currency);
    if (!refunds) {
        out.call.error_class = "unrecognised_response";
        return out;
    }
    std::vector<RemotePayment> matches;
    for (auto it = refunds->rbegin(); it != refunds->rend(); ++it) { // oldest first
        if (it->operation_id == order.operation_id) {
            matches.push_back(*it);
        }
    }
    answer_from_matches(out, std::move(matches));
    return out;
}

SubmitResult CheckoutAdapter::capture(const AuthorizationOrder& order) {
    if (auto problem =
            carry_problem(carry_limits(), order.merchant_reference.value_or(""), order.metadata)) {
        return not_carried(*problem);
    }
    if (order.payment_reference.empty()) {
        return not_expressible("no_payment_reference",
                               "the payment has no Checkout.com payment ID to capture");
    }
    const auto body = capture_body(order);
    if (!body) {
        return not_expressible("not_expressible",
                               "the amount (" + order.amount.currency +
                                   ") or the operation ID cannot be expressed in Checkout.com's "
                                   "capture request");
    }
    return post_json("/payments/" + percent_encode(order.payment_reference) + "/captures", *body,
                     order.operation_id, order.deadline, [&order](int status, std::string_view b) {
                         return interpret_authorization_action(order, status, b);
                     });
}

SubmitResult CheckoutAdapter::void_authorization(const AuthorizationOrder& order) {
    if (auto problem =
            carry_problem(carry_limits(), order.merchant_reference.value_or(""), order.metadata)) {
        return not_carried(*problem);
    }
    if (order.payment_reference.empty()) {
        return not_expressible("no_payment_reference",
                               "the payment has no Checkout.com payment ID to void");
    }
    const auto body = void_body(order);
    if (!body) {
        return not_expressible("not_expressible", "the operation ID cannot be expressed in "
                                                  "Checkout.com's void request");
    }
    return post_json("/payments/" + percent_encode(order.payment_reference) + "/voids", *body,
                     order.operation_id, order.deadline, [&order](int status, std::string_view b) {
                         return interpret_authorization_action(order, status, b);
                     });
}

LookupResult CheckoutAdapter::lookup_capture(const AuthorizationOrder& order) {
    LookupResult out;
    if (!m_caps.capture_lookup || order.payment_reference.empty()) {
        out.call.error_class =
            m_caps.capture_lookup ? "no_payment_reference" : "lookup_not_supported";
        return out;
    }
    const net::HttpResult res = m_client.send(m_client.request(
        "GET", "/payments/" + percent_encode(order.payment_reference) + "/actions", false));
    const ReadCall read = read_call(res);
    if (!read.ok) {
        out.call = read.call;
        return out; // failed: never read as absence
    }
    out = capture_lookup_answer(order, res.body);
    const std::string error_class = out.call.error_class;
    const std::string detail = out.call.detail;
    out.call = read.call;
    out.call.error_class = error_class;
    if (!detail.empty()) {
        out.call.detail = detail;
    }
    return out;
}

ListPage CheckoutAdapter::list(const TimeWindow& /*window*/,
                               const std::optional<std::string>& /*cursor*/) {
    ListPage out;
    out.call.error_class = "list_not_supported";
    out.call.detail = "Checkout.com's Payments API cannot list payments by time window";
    return out;
}

} // namespace payrecon::providers::checkout
