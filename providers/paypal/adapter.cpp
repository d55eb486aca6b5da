#include "providers/paypal/adapter.hpp"

#include "core/encoding.hpp"
#include "providers/wire_util.hpp"

#include <algorithm>
#include <cctype>

namespace payrecon::providers::paypal {
namespace {

using std::chrono::system_clock;

Capabilities capabilities_of(const ProviderConfig& config) {
    Capabilities caps = configured_capabilities(config, descriptor().api);
    caps.key_retention = settings_of(config).key_retention;
    caps.lookup_staleness =
        std::max<std::chrono::seconds>(config.settle_delay, std::chrono::seconds(k_search_delay));
    return caps;
}

std::int64_t unix_seconds(system_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

// "<unix seconds>/<page>" -> (seconds, page); nullopt if it is not that.
std::optional<std::pair<std::int64_t, std::int64_t>> parse_cursor(std::string_view cursor) {
    const auto slash = cursor.find('/');
    if (slash == std::string_view::npos || slash == 0 || slash + 1 == cursor.size() || slash > 12 ||
        cursor.size() - slash - 1 > 9) {
        return std::nullopt;
    }
    const auto number = [](std::string_view digits) -> std::optional<std::int64_t> {
        std::int64_t v = 0;
        for (const char c : digits) {
            if (std::isdigit(static_cast<unsigned char>(c)) == 0) {
                return std::nullopt;
            }
            v = v * 10 + (c - '0');
        }
        return v;
    };
    const auto from = number(cursor.substr(0, slash));
    const auto page = number(cursor.substr(slash + 1));
    if (!from || !page || *page < 1) {
        return std::nullopt;
    }
    return std::make_pair(*from, *page);
}

std::string cursor_of(system_clock::time_point from, std::int64_t page) {
    return std::to_string(unix_seconds(from)) + "/" + std::to_string(page);
}

} // namespace

PaypalAdapter::PaypalAdapter(const ProviderConfig& config, SendFunction send, Clock clock)
    : m_name(config.name), m_caps(capabilities_of(config)), m_client(config, std::move(send)),
      m_clock(clock ? std::move(clock) : Clock([] { return system_clock::now(); })) {}

SubmitResult PaypalAdapter::submit(const PaymentOrder& order) {
    if (const auto problem =
            carry_problem(carry_limits(), order.merchant_reference, order.metadata)) {
        return not_carried(*problem);
    }
    const auto body = create_body(order);
    if (!body) {
        // Nothing was sent, and sending again cannot help.
        return not_expressible("not_expressible",
                               "the amount (" + order.amount.currency +
                                   "), the description, the payment method or the operation ID "
                                   "cannot be expressed in PayPal's Orders v2 create");
    }
    // PayPal-Request-Id is sent whatever the idempotency_keys override says: PayPal requires it
    // for an order that processes a payment (400 PAYPAL_REQUEST_ID_REQUIRED); the override changes
    // only what the reconciler trusts.
    net::HttpRequest req = m_client.request("POST", "/v2/checkout/orders", true);
    req.headers.emplace_back("Content-Type", "application/json");
    req.headers.emplace_back("PayPal-Request-Id", order.operation_id);
    req.headers.emplace_back("Prefer", "return=representation");
    req.body = *body;
    req.deadline = order.deadline;
    return create_outcome(m_client.send(std::move(req)), [&order](int status, std::string_view b) {
        return interpret_create(order, status, b);
    });
}

std::variant<std::string, SubmitResult> PaypalAdapter::refund_target(const RefundOrder& order) {
    net::HttpRequest req = m_client.request(
        "GET", "/v2/payments/captures/" + percent_encode(order.payment_reference), false);
    req.deadline = order.deadline;
    const net::HttpResult res = m_client.send(std::move(req));
    ReadCall read = read_call(res);
    if (read.ok) {
        const auto capture = parse_capture(res.body);
        if (capture && capture->id == order.payment_reference) {
            return order.payment_reference; // a capture: the refund can be sent
        }
    }
    if (read.call.http_status == 404) {
        // Not a capture: the authorization of a payment that only authorised, whose capture is
        // refunded, or an order's ID.
        const AuthorizationRead held =
            read_authorization(order.payment_reference, true, order.deadline);
        if (held.ok) {
            std::vector<std::string> took;
            if (const auto o = parse_order(*held.order_body)) {
                for (const Capture& c : o->captures) {
                    if (map_capture_status(c.status) == Outcome::succeeded && !c.id.empty()) {
                        took.push_back(c.id);
                    }
                }
            }
            if (took.size() == 1) {
                return took.front();
            }
            return rejected_request(
                404, "refund_needs_one_capture",
                "the authorization " + order.payment_reference + " has " +
                    std::to_string(took.size()) +
                    " captures that took money, not one: refund the capture meant in PayPal "
                    "and resolve the refund there; nothing was sent",
                "");
        }
        if (held.not_found) {
            return rejected_request(
                404, "not_a_capture",
                "PayPal knows no capture or authorization " + order.payment_reference +
                    ": the payment's reference is neither (an order ID, from an order that was "
                    "never captured?); nothing was sent",
                read.call.detail);
        }
        if (held.call.http_status == 401 || held.call.http_status == 403) {
            return rejected_request(held.call.http_status,
                                    held.call.http_status == 401 ? "AUTHENTICATION_FAILURE"
                                                                 : "NOT_AUTHORIZED",
                                    "PayPal refused our credentials reading the authorization " +
                                        order.payment_reference + "; nothing was sent",
                                    held.call.detail);
        }
        read.ok = false;
        read.call = held.call;
    }
    if (read.call.http_status == 401 || read.call.http_status == 403) {
        return interpret_refund(order, read.call.http_status, res.body); // rejected
    }
    // No answer we can read: the refund itself was never sent, so it can be sent later.
    SubmitResult out;
    out.outcome = Outcome::not_sent;
    out.call = read.call;
    out.call.error_class =
        "capture_check:" + (read.ok ? std::string("unrecognised_response") : read.call.error_class);
    return out;
}

SubmitResult PaypalAdapter::refund(const RefundOrder& order) {
    const auto body = refund_body(order);
    if (auto refused =
            unsendable_refund(order, &carry_limits(), "PayPal capture ID", body, "not_expressible",
                              "the amount (" + order.amount.currency +
                                  ") or the operation ID cannot be expressed in "
                                  "PayPal's refund request")) {
        return *refused;
    }
    // The reference is the capture's ID, the authorization's (a payment that only authorised), or
    // the order's when the charge never had a capture: they look alike, so PayPal is asked first,
    // and an order's ID is refused unsent.
    auto target = refund_target(order);
    if (auto* refused = std::get_if<SubmitResult>(&target)) {
        return *refused;
    }
    net::HttpRequest req = m_client.request(
        "POST",
        "/v2/payments/captures/" + percent_encode(std::get<std::string>(target)) + "/refund", true);
    req.headers.emplace_back("Content-Type", "application/json");
    req.headers.emplace_back("PayPal-Request-Id", order.operation_id);
    req.headers.emplace_back("Prefer", "return=representation");
    req.body = *body;
    req.deadline = order.deadline;
    return create_outcome(m_client.send(std::move(req)), [&order](int status, std::string_view b) {
        return interpret_refund(order, status, b);
    });
}

LookupResult PaypalAdapter::lookup_refund(const RefundOrder& order) {
    if (auto refused = unaskable_refund(order, m_caps)) {
        return *refused;
    }
    LookupResult out;
    // The capture names its order -- or, for a payment that only authorised, the authorization
    // does; the order lists every refund of its captures with their invoice IDs.
    const net::HttpResult capture_res = m_client.send(m_client.request(
        "GET", "/v2/payments/captures/" + percent_encode(order.payment_reference), false));
    const ReadCall capture_read = read_call(capture_res);
    out.call = capture_read.call;
    std::optional<std::string> order_body;
    if (capture_read.call.http_status == 404) {
        AuthorizationRead held = read_authorization(order.payment_reference, true);
        out.call = held.call;
        if (!held.ok) {
            return out; // failed: never read as absence
        }
        order_body = std::move(held.order_body);
    } else {
        if (!capture_read.ok) {
            return out; // failed: never read as absence
        }
        const auto capture = parse_capture(capture_res.body);
        if (!capture || capture->id != order.payment_reference || !capture->order_id) {
            out.call.error_class = "unrecognised_response";
            out.call.detail = "the capture does not name its order";
            return out;
        }
        const net::HttpResult order_res = m_client.send(m_client.request(
            "GET", "/v2/checkout/orders/" + percent_encode(*capture->order_id), false));
        const ReadCall order_read = read_call(order_res);
        out.call = order_read.call;
        if (!order_read.ok) {
            return out;
        }
        order_body = order_res.body;
    }
    auto refunds = parse_order_refunds(*order_body);
    if (!refunds) {
        out.call.error_class = "unrecognised_response";
        out.call.detail = wire::excerpt(*order_body);
        return out;
    }
    std::vector<RemotePayment> matches;
    for (auto& r : *refunds) { // as PayPal lists them: oldest first
        if (r.operation_id == order.operation_id) {
            matches.push_back(std::move(r));
        }
    }
    answer_from_matches(out, std::move(matches));
    return out;
}

PaypalAdapter::AuthorizationRead
PaypalAdapter::read_authorization(const std::string& id, bool with_order,
                                  std::optional<std::chrono::steady_clock::time_point> deadline) {
    AuthorizationRead out;
    net::HttpRequest req =
        m_client.request("GET", "/v2/payments/authorizations/" + percent_encode(id), false);
    req.deadline = deadline;
    const net::HttpResult res = m_client.send(std::move(req));
    const ReadCall read = read_call(res);
    out.call = read.call;
    if (!read.ok) {
        out.not_found = read.call.http_status == 404 && parse_error(res.body).has_value();
        return out;
    }
    const auto a = parse_authorization(res.body);
    if (!a || a->id != id) {
        out.call.error_class = "unrecognised_response";
        out.call.detail = "not the authorization " + id;
        return out;
    }
    out.authorization_body = res.body;
    if (with_order) {
        if (!a->order_id) {
            out.call.error_class = "unrecognised_response";
            out.call.detail = "the authorization does not name its order";
            return out;
        }
        net::HttpRequest order_req =
            m_client.request("GET", "/v2/checkout/orders/" + percent_encode(*a->order_id), false);
        order_req.deadline = deadline;
        const net::HttpResult order_res = m_client.send(std::move(order_req));
        const ReadCall order_read = read_call(order_res);
        out.call = order_read.call;
        if (!order_read.ok) {
            return out;
        }
        out.order_body = order_res.body;
    }
    out.ok = true;
    return out;
}

bool PaypalAdapter::read_held(RemotePayment& p, CallRecord& call) {
    const AuthorizationRead held = read_authorization(p.provider_reference, false);
    if (held.not_found) {
        return true; // not an authorization: the search's reading stands
    }
    call = held.call;
    if (!held.ok) {
        return false;
    }
    const auto a = parse_authorization(held.authorization_body);
    p.raw_status = a->status;
    p.state = map_authorization_status(a->status);
    p.awaiting_capture = a->status == "CREATED";
    p.raw = held.authorization_body;
    if (a->status != "CREATED" && a->status != "PENDING" && a->status != "DENIED") {
        // What was captured: the order's captures that took money.
        const AuthorizationRead with_order = read_authorization(p.provider_reference, true);
        call = with_order.call;
        const auto captured =
            with_order.ok ? captured_minor(*with_order.order_body) : std::optional<long long>();
        if (!captured) {
            if (with_order.ok) {
                call.error_class = "unrecognised_response";
                call.detail = "the authorization's order has a capture without its amount";
            }
            return false;
        }
        p.amount_captured_minor = *captured;
        if (*captured > 0) {
            // Voided or expired after a capture: it was authorised, and what was captured stays.
            p.state = Outcome::succeeded;
        }
    }
    return true;
}

ListPage PaypalAdapter::fetch_page(system_clock::time_point from, system_clock::time_point to,
                                   std::int64_t page, std::int64_t& total_pages, bool refunds) {
    const std::string query =
        "/v1/reporting/transactions?start_date=" + percent_encode(wire::format_rfc3339(from)) +
        "&end_date=" + percent_encode(wire::format_rfc3339(to)) +
        "&fields=transaction_info&page_size=" + std::to_string(k_page_size) +
        "&page=" + std::to_string(page);
    ListPage out;
    const net::HttpResult res = m_client.send(m_client.request("GET", query, false));
    const ReadCall read = read_call(res);
    out.call = read.call;
    if (!read.ok) {
        out.retry_after = read.retry_after;
        return out;
    }
    auto parsed = refunds ? parse_refund_search_page(res.body) : parse_search_page(res.body);
    if (!parsed) {
        out.call.error_class = "unrecognised_response";
        out.call.detail = wire::excerpt(res.body);
        return out;
    }
    out.ok = true;
    out.items = std::move(parsed->items);
    total_pages = parsed->total_pages;
    return out;
}

LookupResult PaypalAdapter::lookup(const PaymentOrder& order) {
    LookupResult out;
    if (!m_caps.lookup_by_operation_id) {
        out.call.error_class = "lookup_not_supported";
        return out;
    }
    if (!order.created_at) {
        out.call.error_class = "lookup_needs_time";
        out.call.detail = "PayPal is searched by time window: the payment has no created_at";
        return out;
    }
    const system_clock::time_point from = *order.created_at - k_lookup_before;
    // Whole seconds on the wire (RFC 3339): the end rounded up, so that what the provider
    // recorded in the current second is inside the window rather than cut off with its fraction.
    const system_clock::time_point to =
        std::chrono::ceil<std::chrono::seconds>(std::min(m_clock(), from + k_max_search_window));
    if (to <= from) {
        out.call.error_class = "lookup_window_empty";
        out.call.detail = "the clock is before the payment's acceptance: nothing to search yet";
        return out; // failed: never read as absence
    }
    std::vector<RemotePayment> matches;
    for (std::int64_t page = 1;; ++page) {
        if (page > k_max_lookup_pages) {
            out.call.error_class = "too_many_pages";
            out.call.detail = "more than " + std::to_string(k_max_lookup_pages) +
                              " pages of transactions in the lookup window";
            return out; // failed: never read as absence
        }
        std::int64_t total_pages = 0;
        ListPage p = fetch_page(from, to, page, total_pages);
        out.call = p.call;
        if (!p.ok) {
            return out; // failed: never read as absence
        }
        for (auto& item : p.items) {
            if (item.operation_id == order.operation_id) {
                matches.push_back(std::move(item));
            }
        }

        if (page >= total_pages) {
            break;
        }
    }
    // Transaction Search does not say whether an authorization is still held, was voided or
    // expired: a payment that only authorises is read by its authorization's ID.
    if (order.manual_capture) {
        for (auto& m : matches) {
            if (!read_held(m, out.call)) {
                return out; // failed: never read as absence
            }
        }
    }
    answer_from_matches(out, std::move(matches));
    return out;
}

ListPage PaypalAdapter::list(const TimeWindow& window, const std::optional<std::string>& cursor) {
    if (!m_caps.list_transactions) {
        ListPage out;
        out.call.error_class = "list_not_supported";
        return out;
    }
    return search_window(window, cursor, false);
}

ListPage PaypalAdapter::list_refunds(const TimeWindow& window,
                                     const std::optional<std::string>& cursor) {
    if (!m_caps.list_refunds) {
        ListPage out;
        out.call.error_class = "list_not_supported";
        return out;
    }
    return search_window(window, cursor, true);
}

ListPage PaypalAdapter::search_window(const TimeWindow& window,
                                      const std::optional<std::string>& cursor, bool refunds) {
    system_clock::time_point from = window.from;
    std::int64_t page = 1;
    if (cursor) {
        const auto c = parse_cursor(*cursor);
        const system_clock::time_point at{std::chrono::seconds(c ? c->first : 0)};
        if (!c || at < window.from - std::chrono::seconds(1) || at >= window.to) {
            ListPage out;
            out.call.error_class = "bad_cursor";
            out.call.detail = "the cursor is not one this adapter gave for this window";
            return out;
        }
        from = std::max(at, window.from);
        page = c->second;
    }
    const system_clock::time_point to = std::min(window.to, from + k_max_search_window);
    std::int64_t total_pages = 0;
    ListPage out = fetch_page(from, to, page, total_pages, refunds);
    if (!out.ok) {
        return out;
    }
    if (page < total_pages) {
        out.next_cursor = cursor_of(from, page + 1);
    } else if (to < window.to) {
        out.next_cursor = cursor_of(to, 1);
    }
    return out;
}

namespace {

std::string authorization_path(const AuthorizationOrder& order, std::string_view action) {
    return "/v2/payments/authorizations/" + percent_encode(order.payment_reference) + "/" +
           std::string(action);
}

} // namespace

SubmitResult PaypalAdapter::capture(const AuthorizationOrder& order) {
    if (order.payment_reference.empty()) {
        return not_expressible("no_payment_reference",
                               "the payment has no PayPal authorization to capture");
    }
    const auto body = capture_body(order);
    if (!body) {
        return not_expressible("not_expressible", "the amount (" + order.amount.currency +
                                                      ") or the operation ID cannot be expressed "
                                                      "in PayPal's capture request");
    }
    net::HttpRequest req = m_client.request("POST", authorization_path(order, "capture"), true);
    req.headers.emplace_back("Content-Type", "application/json");
    req.headers.emplace_back("PayPal-Request-Id", order.operation_id);
    req.headers.emplace_back("Prefer", "return=representation");
    req.body = *body;
    req.deadline = order.deadline;
    return create_outcome(m_client.send(std::move(req)), [&order](int status, std::string_view b) {
        return interpret_capture(order, status, b);
    });
}

SubmitResult PaypalAdapter::void_authorization(const AuthorizationOrder& order) {
    if (order.payment_reference.empty()) {
        return not_expressible("no_payment_reference",
                               "the payment has no PayPal authorization to void");
    }
    if (order.operation_id.empty() || order.operation_id.size() > k_max_key_length) {
        return not_expressible("not_expressible",
                               "the operation ID cannot be PayPal's PayPal-Request-Id");
    }
    net::HttpRequest req = m_client.request("POST", authorization_path(order, "void"), true);
    req.headers.emplace_back("PayPal-Request-Id", order.operation_id);
    req.headers.emplace_back("Prefer", "return=representation");
    req.deadline = order.deadline;
    return create_outcome(m_client.send(std::move(req)), [&order](int status, std::string_view b) {
        return interpret_void(order, status, b);
    });
}

LookupResult PaypalAdapter::lookup_capture(const AuthorizationOrder& order) {
    LookupResult out;
    if (!m_caps.capture_lookup || order.payment_reference.empty()) {
        out.call.error_class =
            m_caps.capture_lookup ? "no_payment_reference" : "lookup_not_supported";
        return out;
    }
    const AuthorizationRead held =
        read_authorization(order.payment_reference, order.kind == OperationKind::capture);
    if (!held.ok) {
        out.call = held.call;
        return out; // failed: never read as absence
    }
    out = capture_lookup_answer(order, held.authorization_body, held.order_body);
    const std::string error_class = out.call.error_class;
    const std::string detail = out.call.detail;
    out.call = held.call;
    out.call.error_class = error_class;
    if (!detail.empty()) {
        out.call.detail = detail;
    }
    return out;
}

} // namespace payrecon::providers::paypal
