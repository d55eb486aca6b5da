#include "providers/adapter_support.hpp"

#include <iterator>
#include <utility>

namespace payrecon::providers {

ProviderClient::ProviderClient(const ProviderConfig& config, SendFunction send,
                               ClientOptions options)
    : m_base_url(config.base_url), m_credentials(config.credentials), m_options(std::move(options)),
      m_send(std::move(send)) {
    if (const auto* o = std::get_if<OAuth2ClientCredentials>(&m_credentials)) {
        m_tokens.emplace(*o, m_send);
    }
}

net::HttpRequest ProviderClient::request(std::string method, std::string_view path_and_query,
                                         bool mutating) const {
    net::HttpRequest r;
    r.method = std::move(method);
    r.url = m_base_url + std::string(path_and_query);
    r.mutating = mutating;
    r.headers = m_options.headers;
    r.headers.emplace_back("Accept", "application/json");
    return r;
}

net::HttpResult ProviderClient::send(net::HttpRequest request) {
    for (const Secret& s : secrets_of(m_credentials)) {
        request.secrets_to_redact.push_back(s);
    }
    const auto with_header = [&request](std::string name, std::string value) {
        request.headers.insert(request.headers.begin(), {std::move(name), std::move(value)});
    };
    if (const auto* k = std::get_if<ApiKey>(&m_credentials)) {
        with_header(m_options.api_key_header, m_options.api_key_prefix + k->value.reveal());
        return m_send(request);
    }
    if (const auto* b = std::get_if<BasicAuth>(&m_credentials)) {
        with_header("Authorization", basic_authorization(b->user, b->password).reveal());
        return m_send(request);
    }
    // OAuth2: a token, then the call; a 401 with a cached token once more with a fresh one.
    const int fetched_before = m_tokens->requests_sent();
    auto token = m_tokens->token(request.deadline);
    if (!token) {
        return token.error();
    }
    net::HttpRequest first = request;
    first.headers.insert(first.headers.begin(), {"Authorization", "Bearer " + token->reveal()});
    first.secrets_to_redact.push_back(*token);
    net::HttpResult result = m_send(first);
    const bool was_cached = m_tokens->requests_sent() == fetched_before;
    if (result.cls != net::SendClass::response || result.http_status != 401 || !was_cached) {
        return result;
    }
    m_tokens->invalidate();
    auto fresh = m_tokens->token(request.deadline);
    if (!fresh) {
        return result; // the API's own 401 says more than the token endpoint's failure
    }
    request.headers.insert(request.headers.begin(), {"Authorization", "Bearer " + fresh->reveal()});
    request.secrets_to_redact.push_back(*token);
    request.secrets_to_redact.push_back(*fresh);
    return m_send(request);
}

SubmitResult create_outcome(const net::HttpResult& result,
                            const std::function<SubmitResult(int, std::string_view)>& interpret) {
    if (result.cls != net::SendClass::response) {
        SubmitResult r;
        r.outcome = result.cls == net::SendClass::not_sent ? Outcome::not_sent : Outcome::unknown;
        r.call = call_record_of(result);
        return r;
    }
    SubmitResult r = interpret(result.http_status, result.body);
    r.call.duration = result.total_time;
    return r;
}

ReadCall read_call(const net::HttpResult& result) {
    ReadCall out;
    out.call = call_record_of(result);
    out.ok = result.cls == net::SendClass::response && result.http_status == 200;
    if (!out.ok) {
        out.retry_after = retry_after_of(result);
        if (result.cls == net::SendClass::response) {
            out.call.error_class = "http_" + std::to_string(result.http_status);
        }
    }
    return out;
}

SubmitResult not_expressible(std::string error_class, std::string detail) {
    SubmitResult r;
    r.outcome = Outcome::declined;
    r.call.error_class = std::move(error_class);
    r.call.detail = std::move(detail);
    return r;
}

std::optional<SubmitResult> unsendable_refund(const RefundOrder& order, const CarryLimits* limits,
                                              std::string_view charge_name,
                                              const std::optional<std::string>& body,
                                              std::string unexpressible_class,
                                              std::string unexpressible) {
    if (limits != nullptr) {
        if (const auto problem =
                carry_problem(*limits, order.merchant_reference.value_or(""), order.metadata)) {
            return not_carried(*problem);
        }
    }
    if (order.payment_reference.empty()) {
        return not_expressible("no_payment_reference",
                               "the payment has no " + std::string(charge_name) + " to refund");
    }
    if (!body) {
        return not_expressible(std::move(unexpressible_class), std::move(unexpressible));
    }
    return std::nullopt;
}

std::optional<LookupResult> unaskable_refund(const RefundOrder& order, const Capabilities& caps) {
    if (caps.refund_lookup && !order.payment_reference.empty()) {
        return std::nullopt;
    }
    LookupResult out;
    out.call.error_class = caps.refund_lookup ? "no_payment_reference" : "lookup_not_supported";
    return out;
}

void answer_from_matches(LookupResult& out, std::vector<RemotePayment> matches) {
    if (matches.empty()) {
        out.status = LookupResult::Status::not_found;
        return;
    }
    out.status = LookupResult::Status::found;
    out.payment = std::move(matches.front());
    out.duplicates.assign(std::make_move_iterator(matches.begin() + 1),
                          std::make_move_iterator(matches.end()));
}

} // namespace payrecon::providers
