#include "providers/square/adapter.hpp"

#include "core/encoding.hpp"
#include "providers/call_record.hpp"
#include "providers/square/wire.hpp"

namespace payrecon::providers::square {

SquareAdapter::SquareAdapter(const ProviderConfig& config, SendFunction send)
    : m_name(config.name), m_base_url(config.base_url), m_api_key(config.api_key),
      m_send(std::move(send)) {
    m_caps = configured_capabilities(config, k_max_key_length, true, true);
}

http::HttpRequest SquareAdapter::request(std::string method, std::string path_and_query,
                                         bool mutating) const {
    http::HttpRequest r;
    r.method = std::move(method);
    r.url = m_base_url + path_and_query;
    r.mutating = mutating;
    r.headers = {{"Authorization", "Bearer " + m_api_key.reveal()},
                 {"Square-Version", k_api_version},
                 {"Accept", "application/json"}};
    r.secrets_to_redact = {m_api_key};
    return r;
}

SubmitResult SquareAdapter::submit(const PaymentOrder& order) {
    if (const auto problem =
            carry_problem(carry_limits(), order.merchant_reference, order.metadata)) {
        return not_carried(*problem);
    }
    const auto body = create_body(order);
    if (!body) {
        // Nothing was sent, and sending again cannot help.
        SubmitResult r;
        r.outcome = Outcome::declined;
        r.call.error_class = "not_expressible";
        r.call.detail = "the amount (" + order.amount.currency +
                        ") or the operation ID cannot be expressed in Square's CreatePayment";
        return r;
    }
    // The idempotency key is in the body: Square has no way to send without one, so the
    // idempotency_keys override changes only what the reconciler trusts.
    http::HttpRequest req = request("POST", "/v2/payments", true);
    req.headers.emplace_back("Content-Type", "application/json");
    req.body = *body;
    req.deadline = order.deadline;
    const http::HttpResult res = m_send(req);
    if (res.cls != http::SendClass::response) {
        SubmitResult r;
        r.outcome = res.cls == http::SendClass::not_sent ? Outcome::not_sent : Outcome::unknown;
        r.call = call_record_of(res);
        return r;
    }
    SubmitResult r = interpret_create(order, res.http_status, res.body);
    r.call.duration = res.total_time;
    return r;
}

ListPage SquareAdapter::fetch_page(const TimeWindow& window,
                                   const std::optional<std::string>& cursor) {
    std::string query = "/v2/payments?begin_time=" + percent_encode(format_rfc3339(window.from)) +
                        "&end_time=" + percent_encode(format_rfc3339(window.to)) +
                        "&sort_order=ASC&limit=100";
    if (cursor) {
        query += "&cursor=" + percent_encode(*cursor);
    }
    ListPage out;
    const http::HttpResult res = m_send(request("GET", query, false));
    out.call = call_record_of(res);
    if (res.cls != http::SendClass::response || res.http_status != 200) {
        out.retry_after = retry_after_of(res);
        if (res.cls == http::SendClass::response) {
            out.call.error_class = "http_" + std::to_string(res.http_status);
        }
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
    if (matches.empty()) {
        out.status = LookupResult::Status::not_found;
        return out;
    }
    out.status = LookupResult::Status::found;
    out.payment = matches.front();
    out.duplicates.assign(matches.begin() + 1, matches.end());
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
