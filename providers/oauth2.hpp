#pragma once
// An OAuth2 client-credentials access token (RFC 6749 section 4.4) for one adapter: POST to the
// token URL with HTTP basic authentication client_id:client_secret and the form body
// grant_type=client_credentials; the answer is {"access_token": "...", "token_type": "Bearer",
// "expires_in": seconds}. PayPal's POST /v1/oauth2/token is this.
//
// The token is cached and fetched again once less than a margin of its lifetime is left (60 s, or
// a quarter of a shorter lifetime; counted from before the token request was sent), so a call never
// starts with a token about to expire; invalidate() drops it when the API refused it (401). A token
// without expires_in is used for one call only. The client secret and the token are secrets: they
// are listed for redaction on every request that carries them, and never appear in a result.
//
// Not thread-safe: one per adapter, used by the one thread that uses its Transport.

#include "net/transport.hpp"
#include "providers/credentials.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <string_view>
#include <tl/expected.hpp>

namespace payrecon::providers {

// A token endpoint's answer, parsed. nullopt if it is not one: not a JSON object, no non-empty
// access_token of visible ASCII, a token_type other than Bearer (any case; absent is accepted), or
// an expires_in that is not a positive integer.
struct TokenAnswer {
    Secret access_token;
    std::optional<std::chrono::seconds> expires_in;
};
std::optional<TokenAnswer> parse_token_answer(std::string_view body);

class OAuth2TokenSource {
public:
    using Clock = std::function<std::chrono::steady_clock::time_point()>;

    // `clock` is the steady clock unless given (tests move time on).
    OAuth2TokenSource(OAuth2ClientCredentials credentials, net::SendFunction send,
                      Clock clock = {});

    // The cached access token, or a new one from the token URL, its request cut to `deadline`.
    // Without one, the result the caller reports for its own call, which it did not send:
    // - the token endpoint refused the client credentials (400 invalid_client or
    //   unauthorized_client, 401, 403): a response with status 401 and the endpoint's body, as if
    //   the API had refused them -- which is what it means, and adapters map 401 already;
    // - anything else (unreachable, a timeout, 5xx, an answer that is not a token): not_sent with
    //   token_unavailable set and `error` saying why. Nothing was sent to the API.
    tl::expected<Secret, net::HttpResult>
    token(std::optional<std::chrono::steady_clock::time_point> deadline);

    // Forgets the cached token: the API answered 401 with it.
    void invalidate();

    // Token requests sent so far.
    int requests_sent() const noexcept { return m_requests; }

private:
    OAuth2ClientCredentials m_credentials;
    net::SendFunction m_send;
    Clock m_clock;
    std::optional<Secret> m_token;
    std::chrono::steady_clock::time_point m_refresh_at{};
    int m_requests = 0;
};

} // namespace payrecon::providers
