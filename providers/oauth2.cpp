#include "providers/oauth2.hpp"

#include "core/external_json.hpp"
#include "providers/wire_util.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace payrecon::providers {
namespace {

using nlohmann::json;

constexpr std::chrono::seconds k_refresh_margin{60};

bool visible_ascii(std::string_view text) {
    return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
        return static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7f;
    });
}

// The token endpoint's error code ("invalid_client"), if its body is an RFC 6749 error answer.
std::string error_code(std::string_view body) {
    const auto parsed = parse_external_json(body);
    if (!parsed) {
        return {};
    }
    return wire::string_member(*parsed, "error").value_or("");
}

// The result a caller reports when no token could be had and nothing was sent: not_sent.
net::HttpResult unavailable(const net::HttpResult& token_call, std::string why) {
    net::HttpResult r;
    r.cls = net::SendClass::not_sent;
    r.curl_code = token_call.curl_code;
    r.total_time = token_call.total_time;
    r.deadline_passed = token_call.deadline_passed;
    r.token_unavailable = !token_call.deadline_passed;
    r.error = "no OAuth2 access token: " + std::move(why);
    return r;
}

} // namespace

std::optional<TokenAnswer> parse_token_answer(std::string_view body) {
    const auto parsed = parse_external_json(body);
    if (!parsed || !parsed->is_object()) {
        return std::nullopt;
    }
    const json& j = *parsed;
    const auto token = wire::string_member(j, "access_token");
    if (!token || !visible_ascii(*token)) {
        return std::nullopt;
    }
    if (j.contains("token_type")) {
        const auto type = wire::string_member(j, "token_type");
        if (!type || wire::lower(*type) != "bearer") {
            return std::nullopt; // a token we would not know how to present
        }
    }
    TokenAnswer out;
    out.access_token = Secret(*token);
    if (j.contains("expires_in")) {
        const json& e = j["expires_in"];
        if (!e.is_number_integer() || e.get<long long>() <= 0) {
            return std::nullopt;
        }
        out.expires_in = std::chrono::seconds(e.get<long long>());
    }
    return out;
}

OAuth2TokenSource::OAuth2TokenSource(OAuth2ClientCredentials credentials, net::SendFunction send,
                                     Clock clock)
    : m_credentials(std::move(credentials)), m_send(std::move(send)), m_clock(std::move(clock)) {
    if (!m_clock) {
        m_clock = [] { return std::chrono::steady_clock::now(); };
    }
}

void OAuth2TokenSource::invalidate() {
    m_token.reset();
}

tl::expected<Secret, net::HttpResult>
OAuth2TokenSource::token(std::optional<std::chrono::steady_clock::time_point> deadline) {
    const auto now = m_clock();
    if (m_token && now < m_refresh_at) {
        return *m_token;
    }
    m_token.reset();
    net::HttpRequest r;
    r.method = "POST";
    r.url = m_credentials.token_url;
    // Asking for a token charges nothing: libcurl may reuse a kept-alive connection, and re-send
    // the request on one that died, at no cost.
    r.mutating = false;
    r.headers = {
        {"Authorization",
         basic_authorization(m_credentials.client_id, m_credentials.client_secret).reveal()},
        {"Content-Type", "application/x-www-form-urlencoded"},
        {"Accept", "application/json"}};
    r.body = "grant_type=client_credentials";
    r.secrets_to_redact = secrets_of(m_credentials);
    r.deadline = deadline;
    ++m_requests;
    const net::HttpResult res = m_send(r);
    if (res.cls != net::SendClass::response) {
        return tl::make_unexpected(unavailable(res, "the token URL " + m_credentials.token_url +
                                                        " did not answer (" + res.error + ")"));
    }
    const std::string code = error_code(res.body);
    if (res.http_status == 401 || res.http_status == 403 ||
        (res.http_status == 400 && (code == "invalid_client" || code == "unauthorized_client"))) {
        net::HttpResult refused = res;
        refused.http_status = 401;
        return tl::make_unexpected(std::move(refused));
    }
    if (res.http_status != 200) {
        return tl::make_unexpected(unavailable(
            res, "the token URL answered HTTP " + std::to_string(res.http_status) +
                     (code.empty() ? "" : " " + code) + ": " + wire::excerpt(res.body)));
    }
    auto answer = parse_token_answer(res.body);
    if (!answer) {
        return tl::make_unexpected(unavailable(res, "the token URL's answer is not a token"));
    }
    const std::chrono::seconds lifetime = answer->expires_in.value_or(std::chrono::seconds(0));
    m_refresh_at = now + lifetime - std::min(k_refresh_margin, lifetime / 4);
    if (lifetime.count() > 0) {
        m_token = answer->access_token;
    }
    return answer->access_token;
}

} // namespace payrecon::providers
