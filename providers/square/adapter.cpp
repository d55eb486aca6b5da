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
    return post_json(
        "/v2/payments", *body, order.deadline,
        [&order](int status, std::string_view b) { return interpret_create(order, status, b); });
}

SubmitResult
SquareAdapter::post_json(const std::string& path, std::string body,
                         const std::optional<std::chrono::steady_clock::time_point>& deadline,
                         const std::function<SubmitResult(int, std::string_view)>& interpret) {
    // The idempotency key is in the body: Square has no way to send without one, so the
    // idempotency_keys override changes only what the reconciler trusts.
    net::HttpRequest req = m_client.request("POST", path, true);
    req.headers.emplace_back("Content-Type", "application/json");
    req.body = std::move(body);
    req.deadline = deadline;
    return create_outcome(m_client.send(std::move(req)), interpret);
}

ListPage SquareAdapter::fetch_page(const std::string& path,
                                   std::vector<RemotePayment> Envelope::*items,
                                   const TimeWindow& window,
                                   const std::optional<std::string>& cursor) {
    std::string query = path + "?begin_time=" + percent_encode(wire::format_rfc3339(window.from)) +
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
        if (cursor && read.call.http_status == 400) {
            // A cursor Square did not give for this query: the cursor is not this list's.
            const auto env = parse_envelope(res.body);
            if (env && !env->errors.empty() && env->errors.front().code == "INVALID_CURSOR") {
                out.call.error_class = "bad_cursor";
            }
        }
        return out;
    }
    auto page = parse_envelope(res.body);
    if (!page || !page->errors.empty()) {
        out.call.error_class = "unrecognised_response";
        out.call.detail = wire::excerpt(res.body);
        return out;
    }
    out.ok = true;
    out.items = std::move((*page).*items);
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
        ListPage page = fetch_page("/v2/payments", &Envelope::payments, window, cursor);
        out.call = page.call;
        if (!page.ok) {
            return out; // failed: never read as absence
        }
        for (auto& p : page.items) {
            if (p.operation_id == order.operation_id) {
                // An authorisation held is what an order that only authorises asked for.
                p.state = map_status_for(p.raw_status, order.manual_capture);
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
    return fetch_page("/v2/payments", &Envelope::payments, window, cursor);
}

ListPage SquareAdapter::list_refunds(const TimeWindow& window,
                                     const std::optional<std::string>& cursor) {
    if (!m_caps.list_refunds) {
        ListPage out;
        out.call.error_class = "list_not_supported";
        return out;
    }
    return fetch_page("/v2/refunds", &Envelope::refunds, window, cursor);
}

SubmitResult SquareAdapter::refund(const RefundOrder& order) {
    const auto body = refund_body(order);
    if (auto refused =
            unsendable_refund(order, &carry_limits(), "Square payment ID", body, "not_expressible",
                              "the amount (" + order.amount.currency +
                                  ") or the operation ID cannot be expressed in "
                                  "Square's RefundPayment")) {
        return *refused;
    }
    return post_json(
        "/v2/refunds", *body, order.deadline,
        [&order](int status, std::string_view b) { return interpret_refund(order, status, b); });
}

LookupResult SquareAdapter::lookup_refund(const RefundOrder& order) {
    if (auto refused = unaskable_refund(order, m_caps)) {
        return *refused;
    }
    LookupResult out;
    // The refund has no reference of ours to search by: its payment names its refunds.
    const net::HttpResult res = m_client.send(
        m_client.request("GET", "/v2/payments/" + percent_encode(order.payment_reference), false));
    const ReadCall read = read_call(res);
    out.call = read.call;
    if (!read.ok) {
        return out; // failed: never read as absence
    }
    const auto payment = parse_envelope(res.body);
    if (!payment || !payment->payment || !payment->errors.empty() ||
        payment->payment->provider_reference != order.payment_reference) {
        out.call.error_class = "unrecognised_response";
        return out;
    }
    if (payment->refund_ids.size() > k_max_lookup_refunds) {
        out.call.error_class = "too_many_refunds";
        out.call.detail =
            "more than " + std::to_string(k_max_lookup_refunds) + " refunds of the payment";
        return out;
    }
    std::vector<RemotePayment> matches;
    for (const std::string& id : payment->refund_ids) {
        const net::HttpResult one =
            m_client.send(m_client.request("GET", "/v2/refunds/" + percent_encode(id), false));
        const ReadCall got = read_call(one);
        out.call = got.call;
        if (!got.ok) {
            return out; // one refund unread: absence proves nothing
        }
        const auto env = parse_envelope(one.body);
        if (!env || !env->refund || !env->errors.empty() || env->refund->provider_reference != id) {
            out.call.error_class = "unrecognised_response";
            return out;
        }
        if (env->refund->operation_id == order.operation_id) {
            matches.push_back(std::move(*env->refund));
        }
    }
    answer_from_matches(out, std::move(matches));
    return out;
}

// Captures and voids.

namespace {

std::string payment_path(const AuthorizationOrder& order, std::string_view action) {
    std::string path = "/v2/payments/" + percent_encode(order.payment_reference);
    if (!action.empty()) {
        path += "/" + std::string(action);
    }
    return path;
}

} // namespace

SubmitResult SquareAdapter::send_authorisation_call(
    const AuthorizationOrder& order, std::string method, const std::string& path, std::string body,
    const std::function<SubmitResult(int, std::string_view)>& interpret) {
    net::HttpRequest req = m_client.request(std::move(method), path, true);
    if (!body.empty()) { // CancelPayment takes no body at all
        req.headers.emplace_back("Content-Type", "application/json");
    }
    req.body = std::move(body);
    req.deadline = order.deadline;
    SubmitResult r = create_outcome(m_client.send(std::move(req)), interpret);
    if (r.outcome != Outcome::rejected || !r.rejection || r.rejection->http_status != 400) {
        return r;
    }
    // Refused, nothing executed by this request: the payment's status says why -- voided or
    // lapsed (declined), or captured or released already, perhaps by this very operation whose
    // first answer was lost (unknown: the lookup decides). Read, never sent again here.
    const net::HttpResult res =
        m_client.send(m_client.request("GET", payment_path(order, ""), false));
    const ReadCall read = read_call(res);
    if (read.ok) {
        if (auto by_status = refusal_by_status(order, r, res.body)) {
            return *by_status;
        }
    }
    // Unread: what the refusal meant is not known yet, and the reconciler's lookup will read it.
    r.outcome = Outcome::unknown;
    r.call.error_class = "refused_unread:" + r.rejection->code;
    r.rejection.reset();
    return r;
}

SubmitResult SquareAdapter::capture(const AuthorizationOrder& order) {
    if (!order.final) {
        return rejected_request(0, "multiple_captures_not_supported",
                                "Square completes a payment once: a capture that leaves the "
                                "authorisation open (final = false) cannot be made",
                                "");
    }
    if (order.payment_reference.empty()) {
        return not_expressible("no_payment_reference", "the payment has no Square payment ID");
    }
    const auto update = update_body(order);
    if (!update) {
        return not_expressible("not_expressible",
                               "the amount (" + order.amount.currency +
                                   ") or the operation ID cannot be expressed in Square's "
                                   "UpdatePayment and CompletePayment");
    }
    std::optional<std::string> version_token;
    if (order.amount.minor < order.authorized_minor - order.captured_before_minor) {
        // Square completes the whole amount_money: a smaller capture lowers it first, under a key
        // of the capture's (a re-send sets the same amount again), and completes that version.
        UpdateAnswer lowered;
        const SubmitResult set =
            send_authorisation_call(order, "PUT", payment_path(order, ""), *update,
                                    [&order, &lowered](int status, std::string_view b) {
                                        lowered = interpret_update(order, status, b);
                                        return lowered.result;
                                    });
        if (set.outcome != Outcome::succeeded) {
            return set; // not_sent, unknown, rejected or declined: nothing completed
        }
        version_token = lowered.version_token;
    }
    return send_authorisation_call(
        order, "POST", payment_path(order, "complete"), complete_body(version_token),
        [&order](int status, std::string_view b) { return interpret_complete(order, status, b); });
}

SubmitResult SquareAdapter::void_authorization(const AuthorizationOrder& order) {
    if (order.payment_reference.empty()) {
        return not_expressible("no_payment_reference", "the payment has no Square payment ID");
    }
    return send_authorisation_call(
        order, "POST", payment_path(order, "cancel"), "",
        [&order](int status, std::string_view b) { return interpret_cancel(order, status, b); });
}

LookupResult SquareAdapter::lookup_capture(const AuthorizationOrder& order) {
    LookupResult out;
    if (!m_caps.capture_lookup || order.payment_reference.empty()) {
        out.call.error_class =
            m_caps.capture_lookup ? "no_payment_reference" : "lookup_not_supported";
        return out;
    }
    const net::HttpResult res =
        m_client.send(m_client.request("GET", payment_path(order, ""), false));
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

} // namespace payrecon::providers::square
