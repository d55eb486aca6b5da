#pragma once
// What every adapter shares of the HTTP side, written once (ActiveMerchant's Gateway base: the
// plumbing here, the provider's differences in its folder):
// - SendFunction (http/transport.hpp), the seam between an adapter and the transport (tests
//   replay recorded responses through it and assert on the request);
// - ProviderClient: a request against the configured base URL with the provider's fixed headers,
//   sent with the configured credentials in their place -- an API key in the header the provider
//   reads, HTTP basic, or an OAuth2 access token (fetched, cached, refreshed before it expires and
//   once when the API answers 401) -- and every secret listed for redaction;
// - create_outcome: a create call's result as an outcome, the transport's failures passed through
//   (`not_sent` stays `not_sent`, anything else that is not a response is `unknown`);
// - read_call: a lookup's or list page's call record, failed unless a 200 came back.

#include "core/carry_limits.hpp"
#include "net/transport.hpp"
#include "providers/call_record.hpp"
#include "providers/config.hpp"
#include "providers/oauth2.hpp"
#include "providers/provider.hpp"

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace payrecon::providers {

using net::SendFunction;

struct ClientOptions {
    // The provider's own headers on every request (Stripe-Version, Square-Version). Every request
    // also asks for JSON (Accept: application/json).
    net::HeaderList headers;
    // Where an ApiKey goes: "Authorization: Bearer <key>" unless the provider reads it elsewhere
    // (Adyen: "X-API-Key: <key>", no prefix).
    std::string api_key_header = "Authorization";
    std::string api_key_prefix = "Bearer ";
};

class ProviderClient {
public:
    // Sends through `send`; the token requests of OAuth2 credentials too.
    ProviderClient(const ProviderConfig& config, SendFunction send, ClientOptions options = {});

    // `method` on base_url + `path_and_query`, with the provider's headers. `mutating` as
    // net::HttpRequest says: true for anything that can charge.
    net::HttpRequest request(std::string method, std::string_view path_and_query,
                             bool mutating) const;

    // Sends `request` with the credentials added (first among the headers) and listed in
    // secrets_to_redact. With OAuth2: a request for which no token could be had is not sent --
    // the result is the token's failure (OAuth2TokenSource::token) -- and a 401 with a cached token
    // is sent once more with a fresh one (the API refused the request before executing anything).
    // Never throws for anything the network or the provider does.
    net::HttpResult send(net::HttpRequest request);

private:
    std::string m_base_url;
    Credentials m_credentials;
    ClientOptions m_options;
    SendFunction m_send;
    std::optional<OAuth2TokenSource> m_tokens; // with OAuth2ClientCredentials
};

// The outcome of a create call: a transport failure as the transport classified it (`not_sent`:
// the provider cannot have received it, safe to send again; anything else `unknown`) with its call
// record; a response as `interpret(http_status, body)` decides, with the call's duration.
SubmitResult create_outcome(const net::HttpResult& result,
                            const std::function<SubmitResult(int, std::string_view)>& interpret);

// A read (a lookup, a list page) as the attempt record sees it: ok only if a 200 came back;
// otherwise `call` says why -- the transport's class, or "http_<status>" -- and `retry_after` what
// the provider asked for (retry_after_of). A failed read is never an answer: not "not found".
struct ReadCall {
    bool ok = false;
    CallRecord call;
    std::optional<std::chrono::seconds> retry_after;
};
ReadCall read_call(const net::HttpResult& result);

// A payment the adapter will not send because it has no form in the provider's API (an amount
// not expressible in its units, an operation ID longer than its key): declined without a call --
// sending again cannot help -- with `error_class` and `detail` saying why.
SubmitResult not_expressible(std::string error_class, std::string detail);

// What every adapter checks before it sends a refund, in this order: what the refund carries fits
// `limits` (where given: not_carried), there is a charge to refund (`charge_name` says what the
// provider calls it: "Stripe PaymentIntent"), and its body was written (`body`; if not, declined
// as `unexpressible_class` with `unexpressible`). nullopt: send `*body`.
std::optional<SubmitResult> unsendable_refund(const RefundOrder& order, const CarryLimits* limits,
                                              std::string_view charge_name,
                                              const std::optional<std::string>& body,
                                              std::string unexpressible_class,
                                              std::string unexpressible);

// What every adapter checks before it looks a refund up: the configuration lets it
// (`caps.refund_lookup`, else failed `lookup_not_supported`) and there is a charge to look under
// (else failed `no_payment_reference`). nullopt: ask the provider.
std::optional<LookupResult> unaskable_refund(const RefundOrder& order, const Capabilities& caps);

// A lookup's answer from the records that carry our operation ID, in the provider's order:
// not_found if none, else found -- the first -- with the others as duplicates (a finding, never
// resolved silently).
void answer_from_matches(LookupResult& out, std::vector<RemotePayment> matches);

} // namespace payrecon::providers
