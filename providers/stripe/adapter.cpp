#include "providers/stripe/adapter.hpp"

#include "core/encoding.hpp"
#include "providers/stripe/wire.hpp"
#include "providers/wire_util.hpp"

namespace payrecon::providers::stripe {

StripeAdapter::StripeAdapter(const ProviderConfig& config, SendFunction send)
    : m_name(config.name), m_caps(configured_capabilities(config, descriptor().api)),
      m_client(config, std::move(send), ClientOptions{{{"Stripe-Version", k_api_version}}}) {}

SubmitResult
StripeAdapter::post_form(const std::string& path, const std::string& body,
                         const std::string& operation_id,
                         const std::optional<std::chrono::steady_clock::time_point>& deadline,
                         const std::function<SubmitResult(int, std::string_view)>& interpret) {
    net::HttpRequest req = m_client.request("POST", path, true);
    req.headers.emplace_back("Content-Type", "application/x-www-form-urlencoded");
    if (m_caps.honours_idempotency_keys) {
        req.headers.emplace_back("Idempotency-Key", operation_id);
    }
    req.body = body;
    req.deadline = deadline;
    return create_outcome(m_client.send(std::move(req)), interpret);
}

SubmitResult StripeAdapter::submit(const PaymentOrder& order) {
    if (auto problem = carry_problem(carry_limits(), order.merchant_reference, order.metadata)) {
        return not_carried(*problem);
    }
    if (auto problem = authorisation_carry_problem(order)) {
        return not_carried(*problem);
    }
    const auto body = create_body(order);
    if (!body) {
        // Nothing was sent, and sending again cannot help: the amount has no Stripe form.
        return not_expressible("amount_not_expressible",
                               "the amount cannot be expressed in Stripe's units for " +
                                   order.amount.currency);
    }
    return post_form(
        "/v1/payment_intents", *body, order.operation_id, order.deadline,
        [&order](int status, std::string_view b) { return interpret_create(order, status, b); });
}

LookupResult StripeAdapter::lookup(const PaymentOrder& order) {
    LookupResult out;
    if (!m_caps.lookup_by_operation_id) {
        out.call.error_class = "lookup_not_supported";
        return out;
    }
    const net::HttpResult res = m_client.send(m_client.request(
        "GET",
        "/v1/payment_intents/search?query=" + percent_encode(search_query(order.operation_id)),
        false));
    const ReadCall read = read_call(res);
    out.call = read.call;
    if (!read.ok) {
        return out; // failed: never read as absence
    }
    const auto page = parse_list(res.body);
    if (!page || page->has_more) {
        out.call.error_class = page ? "too_many_matches" : "unrecognised_response";
        return out;
    }
    std::vector<RemotePayment> matches;
    for (const auto& p : page->items) {
        if (p.operation_id == order.operation_id) {
            matches.push_back(p);
            // An authorisation held is what an order that only authorises asked for.
            matches.back().state = map_status_for(p.raw_status, order.manual_capture);
        }
    }
    answer_from_matches(out, std::move(matches));
    return out;
}

namespace {

// `path` with Stripe's created window and, past the first page, starting_after: 100 a page,
// newest first (Stripe lists no other way).
std::string window_query(std::string_view path, const TimeWindow& window,
                         const std::optional<std::string>& cursor) {
    using std::chrono::duration_cast;
    using std::chrono::seconds;
    const auto from = duration_cast<seconds>(window.from.time_since_epoch()).count();
    const auto to = duration_cast<seconds>(window.to.time_since_epoch()).count();
    std::string query = std::string(path) + "?limit=100&" +
                        wire::form_encode({{"created[gte]", std::to_string(from)},
                                           {"created[lt]", std::to_string(to)}});
    if (cursor) {
        query += "&" + wire::form_encode({{"starting_after", *cursor}});
    }
    return query;
}

// The cursor of the page after `items`: the last one's ID while Stripe says there is more.
std::optional<std::string> next_cursor(const std::vector<RemotePayment>& items, bool has_more) {
    if (has_more && !items.empty()) {
        return items.back().provider_reference;
    }
    return std::nullopt;
}

} // namespace

ListPage StripeAdapter::list(const TimeWindow& window, const std::optional<std::string>& cursor) {
    ListPage out;
    if (!m_caps.list_transactions) {
        out.call.error_class = "list_not_supported";
        return out;
    }
    const net::HttpResult res = m_client.send(
        m_client.request("GET", window_query("/v1/payment_intents", window, cursor), false));
    const ReadCall read = read_call(res);
    out.call = read.call;
    if (!read.ok) {
        out.retry_after = read.retry_after;
        return out;
    }
    const auto page = parse_list(res.body);
    if (!page) {
        out.call.error_class = "unrecognised_response";
        return out;
    }
    out.ok = true;
    out.items = page->items;
    out.next_cursor = next_cursor(out.items, page->has_more);
    return out;
}

ListPage StripeAdapter::list_refunds(const TimeWindow& window,
                                     const std::optional<std::string>& cursor) {
    ListPage out;
    if (!m_caps.list_refunds) {
        out.call.error_class = "list_not_supported";
        return out;
    }
    if (cursor && cursor->rfind("re_", 0) != 0) {
        out.call.error_class = "bad_cursor";
        out.call.detail = "the cursor is not a refund's ID, as this adapter gives";
        return out;
    }
    const net::HttpResult res =
        m_client.send(m_client.request("GET", window_query("/v1/refunds", window, cursor), false));
    const ReadCall read = read_call(res);
    out.call = read.call;
    if (!read.ok) {
        out.retry_after = read.retry_after;
        // A starting_after Stripe does not know: the cursor is not one of this list's.
        const auto error =
            cursor && read.call.http_status == 400 ? parse_error(res.body) : std::nullopt;
        if (error && error->code == "resource_missing") {
            out.call.error_class = "bad_cursor";
        }
        return out;
    }
    bool has_more = false;
    auto refunds = parse_refund_list(res.body, has_more);
    if (!refunds) {
        out.call.error_class = "unrecognised_response";
        out.call.detail = wire::excerpt(res.body);
        return out;
    }
    out.ok = true;
    out.items = std::move(*refunds);
    out.next_cursor = next_cursor(out.items, has_more);
    return out;
}

SubmitResult StripeAdapter::refund(const RefundOrder& order) {
    const auto body = refund_body(order);
    if (auto refused = unsendable_refund(
            order, &carry_limits(), "Stripe PaymentIntent", body, "amount_not_expressible",
            "the amount cannot be expressed in Stripe's units for " + order.amount.currency)) {
        return *refused;
    }
    return post_form(
        "/v1/refunds", *body, order.operation_id, order.deadline,
        [&order](int status, std::string_view b) { return interpret_refund(order, status, b); });
}

LookupResult StripeAdapter::lookup_refund(const RefundOrder& order) {
    if (auto refused = unaskable_refund(order, m_caps)) {
        return *refused;
    }
    LookupResult out;
    // Not Search: it does not index refunds. A PaymentIntent's refunds, newest first.
    const net::HttpResult res = m_client.send(m_client.request(
        "GET",
        "/v1/refunds?" +
            wire::form_encode({{"payment_intent", order.payment_reference}, {"limit", "100"}}),
        false));
    const ReadCall read = read_call(res);
    out.call = read.call;
    if (!read.ok) {
        return out; // failed: never read as absence
    }
    bool has_more = false;
    const auto refunds = parse_refund_list(res.body, has_more);
    if (!refunds || has_more) {
        // With more pages than one, absence from this one proves nothing.
        out.call.error_class = refunds ? "too_many_matches" : "unrecognised_response";
        return out;
    }
    std::vector<RemotePayment> matches;
    for (const auto& r : *refunds) {
        if (r.operation_id == order.operation_id) {
            matches.push_back(r);
        }
    }
    answer_from_matches(out, std::move(matches));
    return out;
}

namespace {

std::string intent_path(const AuthorizationOrder& order, std::string_view action) {
    std::string path = "/v1/payment_intents/" + percent_encode(order.payment_reference);
    if (!action.empty()) {
        path += "/" + std::string(action);
    }
    return path;
}

} // namespace

SubmitResult StripeAdapter::capture(const AuthorizationOrder& order) {
    if (!order.final) {
        return rejected_request(0, "multiple_captures_not_supported",
                                "a capture that leaves the authorisation open (final = false) "
                                "needs Stripe's multicapture, which payrecon does not use: capture "
                                "once, the whole amount wanted",
                                "");
    }
    if (order.payment_reference.empty()) {
        return not_expressible("no_payment_reference",
                               "the payment has no Stripe PaymentIntent to capture");
    }
    const auto body = capture_body(order);
    if (!body) {
        return not_expressible("amount_not_expressible",
                               "the amount cannot be expressed in Stripe's units for " +
                                   order.amount.currency);
    }
    return post_form(
        intent_path(order, "capture"), *body, order.operation_id, order.deadline,
        [&order](int status, std::string_view b) { return interpret_capture(order, status, b); });
}

SubmitResult StripeAdapter::void_authorization(const AuthorizationOrder& order) {
    if (order.payment_reference.empty()) {
        return not_expressible("no_payment_reference",
                               "the payment has no Stripe PaymentIntent to cancel");
    }
    // No cancellation_reason: payrecon is not told why the merchant releases the hold, and the
    // reason left empty tells our cancel from Stripe's own on expiry (`automatic`).
    return post_form(
        intent_path(order, "cancel"), "", order.operation_id, order.deadline,
        [&order](int status, std::string_view b) { return interpret_void(order, status, b); });
}

LookupResult StripeAdapter::lookup_capture(const AuthorizationOrder& order) {
    LookupResult out;
    if (!m_caps.capture_lookup || order.payment_reference.empty()) {
        out.call.error_class =
            m_caps.capture_lookup ? "no_payment_reference" : "lookup_not_supported";
        return out;
    }
    const net::HttpResult res =
        m_client.send(m_client.request("GET", intent_path(order, ""), false));
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

} // namespace payrecon::providers::stripe
