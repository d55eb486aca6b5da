#include "providers/stripe/adapter.hpp"

#include "core/encoding.hpp"
#include "providers/call_record.hpp"
#include "providers/stripe/wire.hpp"

namespace payrecon::providers::stripe {

StripeAdapter::StripeAdapter(const ProviderConfig& config, SendFunction send)
    : m_name(config.name), m_base_url(config.base_url), m_api_key(config.api_key),
      m_send(std::move(send)) {
    m_caps = configured_capabilities(config, 255, true, true);
}

http::HttpRequest StripeAdapter::request(std::string method, std::string path_and_query,
                                         bool mutating) const {
    http::HttpRequest r;
    r.method = std::move(method);
    r.url = m_base_url + path_and_query;
    r.mutating = mutating;
    r.headers = {{"Authorization", "Bearer " + m_api_key.reveal()},
                 {"Stripe-Version", k_api_version},
                 {"Accept", "application/json"}};
    r.secrets_to_redact = {m_api_key};
    return r;
}

SubmitResult StripeAdapter::submit(const PaymentOrder& order) {
    if (const auto problem =
            carry_problem(carry_limits(), order.merchant_reference, order.metadata)) {
        return not_carried(*problem);
    }
    const auto body = create_body(order);
    if (!body) {
        // Nothing was sent, and sending again cannot help: the amount has no Stripe form.
        SubmitResult r;
        r.outcome = Outcome::declined;
        r.call.error_class = "amount_not_expressible";
        r.call.detail =
            "the amount cannot be expressed in Stripe's units for " + order.amount.currency;
        return r;
    }
    http::HttpRequest req = request("POST", "/v1/payment_intents", true);
    req.headers.emplace_back("Content-Type", "application/x-www-form-urlencoded");
    if (m_caps.honours_idempotency_keys) {
        req.headers.emplace_back("Idempotency-Key", order.operation_id);
    }
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

LookupResult StripeAdapter::lookup(const PaymentOrder& order) {
    LookupResult out;
    if (!m_caps.lookup_by_operation_id) {
        out.call.error_class = "lookup_not_supported";
        return out;
    }
    const http::HttpResult res = m_send(request(
        "GET",
        "/v1/payment_intents/search?query=" + percent_encode(search_query(order.operation_id)),
        false));
    out.call = call_record_of(res);
    if (res.cls != http::SendClass::response || res.http_status != 200) {
        if (res.cls == http::SendClass::response) {
            out.call.error_class = "http_" + std::to_string(res.http_status);
        }
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
        }
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

ListPage StripeAdapter::list(const TimeWindow& window, const std::optional<std::string>& cursor) {
    using std::chrono::duration_cast;
    using std::chrono::seconds;
    const auto from = duration_cast<seconds>(window.from.time_since_epoch()).count();
    const auto to = duration_cast<seconds>(window.to.time_since_epoch()).count();
    std::string query =
        "/v1/payment_intents?limit=100&" +
        form_encode({{"created[gte]", std::to_string(from)}, {"created[lt]", std::to_string(to)}});
    if (cursor) {
        query += "&" + form_encode({{"starting_after", *cursor}});
    }
    ListPage out;
    if (!m_caps.list_transactions) {
        out.call.error_class = "list_not_supported";
        return out;
    }
    const http::HttpResult res = m_send(request("GET", query, false));
    out.call = call_record_of(res);
    if (res.cls != http::SendClass::response || res.http_status != 200) {
        out.retry_after = retry_after_of(res);
        if (res.cls == http::SendClass::response) {
            out.call.error_class = "http_" + std::to_string(res.http_status);
        }
        return out;
    }
    const auto page = parse_list(res.body);
    if (!page) {
        out.call.error_class = "unrecognised_response";
        return out;
    }
    out.ok = true;
    out.items = page->items;
    if (page->has_more && !page->items.empty()) {
        out.next_cursor = page->items.back().provider_reference;
    }
    return out;
}

} // namespace payrecon::providers::stripe
