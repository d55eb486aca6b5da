#pragma once
// The HTTP transport every provider adapter sends through (DESIGN section 5). It sends one request
// over libcurl and says what is known about it: `not_sent` (the provider cannot have received it;
// safe to send again), `unknown` (it may have; never re-send blindly), or `response` (a complete
// response, for the adapter to interpret by the provider's contract).
//
// Policy, not options: TLS peer and host verification on, redirects off (a 3xx is a response the
// adapter decides about), http and https only, no proxy (the environment's http_proxy/https_proxy
// are ignored: through a proxy "could not connect" would no longer mean "not sent"), no
// Expect: 100-continue, no signals (CURLOPT_NOSIGNAL), no compression (the size cap counts the
// bytes on the wire).
//
// Connections: a mutating request (the default) always opens a fresh connection and closes it
// afterwards (CURLOPT_FRESH_CONNECT + CURLOPT_FORBID_REUSE): libcurl silently re-sends a request
// when a reused keep-alive connection dies before the response, which for a POST is a second
// charge. A lookup (`mutating = false`) may reuse a kept-alive connection, and may therefore be
// sent twice by libcurl; only idempotent requests may be lookups.
//
// Threads: a Transport owns one libcurl easy handle and its connection cache; it is used by one
// thread at a time (give each worker its own Transport). Distinct Transports are independent.

#include "core/secret.hpp"
#include "net/classify.hpp"
#include "net/endpoint_address.hpp"
#include "net/redact.hpp"

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace payrecon::net {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
    std::string method = "GET"; // GET, POST, PUT, PATCH, DELETE, HEAD, ...
    std::string url;            // http:// or https://
    HeaderList headers;         // sent as given; a name or value with CR, LF or NUL is refused
    // Sent with Content-Length when non-empty or the method is POST. Without a Content-Type header
    // libcurl labels it application/x-www-form-urlencoded.
    std::string body;
    // true: a fresh connection, closed afterwards. false (a lookup): may reuse a connection, and
    // libcurl may send it twice.
    bool mutating = true;
    // Values that must never appear in the result (API keys sent in headers). The values of
    // Authorization and Proxy-Authorization headers are always redacted, listed here or not.
    std::vector<Secret> secrets_to_redact;
    // The instant (local monotonic clock) after which this request must not be sent, nor still be
    // running: for a payment, the end of its claim's lease. The call's timeouts are cut to end by
    // then; a request whose deadline has passed is refused before any I/O, and one whose deadline
    // passes while it connects is aborted in libcurl's pre-request callback -- after the connect
    // and TLS handshake, before the first request byte -- so a worker that was paused cannot send
    // after its claim ended. Both are `not_sent` with error_class "deadline_passed".
    std::optional<std::chrono::steady_clock::time_point> deadline;
    // Asked about every address libcurl is about to open a socket to (after its own DNS lookup,
    // for each address it tries): a reason refuses it, and no socket is opened. The relay's
    // server-side request forgery check (net/endpoint_address); empty: every address.
    std::function<std::optional<std::string>(const IpAddress&)> connect_guard;
};

struct Timeouts {
    std::chrono::milliseconds connect{2000}; // TCP connect and TLS handshake
    std::chrono::milliseconds total{10000};  // the whole call, connect included
};

struct TransportOptions {
    Timeouts timeouts;
    // A larger body (or header block) is cut off: `unknown`, truncated. Refused as soon as a
    // Content-Length announces it (CURLcode 63), else when the bytes arrive (CURLcode 23).
    std::size_t max_response_bytes = 1024 * 1024;
    std::string ca_bundle; // a PEM file of trusted CAs; empty: system default
    std::string user_agent = "payrecon/0.1";
};

struct HttpResult {
    SendClass cls = SendClass::unknown;
    int http_status = 0; // the status line's code, when one arrived (even if cls is not response)
    // The body as received. Only complete when cls == response; with `unknown` it is whatever
    // arrived (for diagnostics, never for parsing). Secrets are redacted.
    std::string body;
    HeaderList headers; // the final response's headers, in order; secrets are redacted
    int curl_code = 0;  // the CURLcode; 0 also when refused before libcurl ran
    std::string error;  // empty on success; libcurl's message or ours, secrets redacted
    // Request bytes handed to the socket: the larger of CURLINFO_REQUEST_SIZE (headers and the
    // body sent with them) and CURLINFO_SIZE_UPLOAD_T, summed over libcurl's internal attempts (a
    // lookup silently re-sent on a fresh connection counts twice). 0: nothing was written.
    long request_bytes_sent = 0;
    // From the start until the connection was up (CURLINFO_CONNECT_TIME_T) and until the TLS
    // handshake completed (CURLINFO_APPCONNECT_TIME_T). 0 when none was made, and also on a reused
    // connection; with https, libcurl 7.88 records connect_time only once TLS also succeeded.
    std::chrono::microseconds connect_time{};
    std::chrono::microseconds tls_time{};
    std::chrono::microseconds total_time{};
    bool truncated = false; // the response exceeded max_response_bytes and was cut off
    bool deadline_passed =
        false; // refused or aborted before sending: the request's deadline passed
    // Never sent because no OAuth2 access token could be had (providers/oauth2.hpp; `error` says
    // why): not_sent. Set by the token source, never by the transport.
    bool token_unavailable = false;
    // The connect guard refused every address the host had: not_sent, `error` says why.
    bool address_refused = false;
};

// The seam between an adapter and the transport: production sends through a Transport
// (registry.cpp's create_provider); tests replay recorded responses and assert on the request.
using SendFunction = std::function<HttpResult(const HttpRequest&)>;

class Transport {
public:
    // Throws std::runtime_error if libcurl cannot be initialised (out of memory).
    explicit Transport(TransportOptions options = {});
    ~Transport();
    Transport(Transport&&) noexcept;
    Transport& operator=(Transport&&) noexcept;
    Transport(const Transport&) = delete;
    Transport& operator=(const Transport&) = delete;

    // Sends `request` and classifies the outcome. Never throws for network failures or bad
    // requests (std::bad_alloc aside): a request refused before any I/O (a header with CR/LF, an
    // option libcurl rejects) is `not_sent` with `error` saying why.
    HttpResult send(const HttpRequest& request);

    const TransportOptions& options() const noexcept;

private:
    class Impl;
    std::unique_ptr<Impl> m_impl;
};

} // namespace payrecon::net
