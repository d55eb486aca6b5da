#include "providers/square/adapter.hpp"

#include "core/encoding.hpp"
#include "providers/square/wire.hpp"
#include "providers/wire_util.hpp"

namespace payrecon::providers::square {

SquareAdapter::SquareAdapter(const ProviderConfig& config, SendFunction send)
    : m_name(config.name), m_caps(configured_capabilities(config, descriptor().api)),
      m_client(config, std::move(send), ClientOptions{{{"Square-Version", k_api_version}}}) {}

SubmitResult SquareAdapter::submit(const PaymentOrder& order) {
    if (const auto problem =
            carry_problem(carry_limits(), order.merchant_reference, order.metadata)) {
        return not_carried(*problem);
    }
    const auto body = create_body(order);
    if (!body) {
        // Nothing was sent, and sending again cannot help.
        return not_expressible("not_expressible",
                               "the amount (" + order.amount.currency +
                                   ") or the operation ID cannot be expressed in Square's "
                                   "CreatePayment");
    }
    // The idempotency key is in the body: Square has no way to send without one, so the
    // idempotency_keys override changes only what the reconciler trusts.
    net::HttpRequest req = m_client.request("POST", "/v2/payments", true);
    req.headers.emplace_back("Content-Type", "application/json");
    req.body = *body;
    req.deadline = order.deadline;
    return create_outcome(m_client.send(std::move(req)), [&order](int status, std::string_view b) {
        return interpret_create(order, status, b);
    });
}

ListPage SquareAdapter::fetch_page(const TimeWindow& window,
                                   const std::optional<std::string>& cursor) {
    std::string query =
        "/v2/payments?begin_time=" + percent_encode(wire::format_rfc3339(window.from)) +
        "&end_time=" + percent_encode(wire::format_rfc3339(window.to)) +
        "&sort_order=ASC&limit=100";
    if (cursor) {
        query += "&cursor=" + percent_encode(*cursor);
    }
    ListPage out;
    const net::HttpResult res = m_client.send(m_client.request("GET", query, false));
    const ReadCall read = read_call(res);
    out.call = read.call;
    if (!read.ok) {
        out.retry_after = read.retry_after;
        return out;
    }
    const auto page = parse_envelope(res.body);
    if (!page || !page->errors.empty()) {
        out.call.error_class = "unrecognised_response";
        return out;
    }
    out.ok = true;
    out.items = page->payments;
    out.next_cursor = page->cursor;
    return out;
}

LookupResult SquareAdapter::lookup(const PaymentOrder& order) {
    LookupResult out;
    if (!m_caps.lookup_by_operation_id) {
        out.call.error_class = "lookup_not_supported";
        return out;
    }
    if (!order.created_at) {
        out.call.error_class = "lookup_needs_time";
        out.call.detail = "Square is searched by time window: the payment has no created_at";
        return out;
    }
    const TimeWindow window{*order.created_at - k_lookup_before,
                            *order.created_at + k_lookup_after};
    std::vector<RemotePayment> matches;
    std::optional<std::string> cursor;
    for (int pages = 0;; ++pages) {
        if (pages == k_max_lookup_pages) {
            out.call.error_class = "too_many_pages";
            out.call.detail = "more than " + std::to_string(k_max_lookup_pages) +
                              " pages of payments in the lookup window";
            return out; // failed: never read as absence
        }
        ListPage page = fetch_page(window, cursor);
        out.call = page.call;
        if (!page.ok) {
            return out; // failed: never read as absence
        }
        for (auto& p : page.items) {
            if (p.operation_id == order.operation_id) {
                matches.push_back(std::move(p));
            }
        }
        if (!page.next_cursor) {
            break;
        }
        cursor = std::move(page.next_cursor);
    }
    answer_from_matches(out, std::move(matches));
    return out;
}

ListPage SquareAdapter::list(const TimeWindow& window, const std::optional<std::string>& cursor) {
    if (!m_caps.list_transactions) {
        ListPage out;
        out.call.error_class = "list_not_supported";
        return out;
    }
    return fetch_page(window, cursor);
}

} // namespace payrecon::providers::square
