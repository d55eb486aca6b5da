#pragma once
// The HTTP/1.1 transport of `payrecon serve`, event-driven on Boost.Beast/Asio. Only
// http_server.cpp includes Boost: this header is all the rest of payrecon sees of it.
//
// Built for hostile networks: a connection, idle or slow, costs a socket and a few KiB, never a
// thread. Each phase of a request has a total deadline, not an idle timeout, so a client that drips
// one byte a second is cut at the deadline exactly like a silent one. Before a handler sees a
// request the transport has enforced:
//   - at most `max_connections` connections in all and `max_connections_per_peer` per remote
//     address; a connection beyond either is answered a best-effort 503 without being read, and
//     closed;
//   - the request line and headers complete within `header_timeout` (counted from the accept for a
//     connection's first request, from the request's first byte on a kept-alive connection), at
//     most `max_header_bytes` in all and `max_header_fields` fields (else 431);
//   - the body complete within `body_timeout` of the end of the headers and at most `max_body`
//     bytes (else 413): a Content-Length over the cap is refused before a byte of the body is read,
//     a chunked body as soon as its running total passes the cap; nothing beyond the cap is ever
//     buffered;
//   - a kept-alive connection idles at most `idle_timeout` between requests;
//   - a header value with a control character (CR, LF, NUL, ...) is a 400 naming that header;
//   - one remote address has at most `per_peer.max_requests` requests in hand (taken and not yet
//     fully answered) and `per_peer.max_unsent_bytes` of answers written but not yet read by it,
//     and all addresses together `per_peer.max_total_unsent_bytes`: a request beyond is answered
//     429 (handler.refused(), reason "peer_busy") without reaching the handler. The handler
//     bounds each credential the same way, with the hold it attaches to its answer.
// Memory freed as connections close is handed back to the system (malloc_trim) within seconds.
// Header values reach the handler exactly as sent (no percent-decoding; surrounding blanks
// trimmed, as RFC 9110 says). A connection cut at a deadline gets no answer: the socket is closed.
// After an answer that refuses a request whose bytes are still arriving (413, 431, 400), the
// transport closes its sending side and reads and discards for up to 2 s before closing, so the
// client reads the answer instead of a reset.

#include "api/allowance.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace payrecon::api {

struct HttpRequest {
    std::string method; // "" when the request line could not be read
    std::string target; // as sent, query string included
    std::vector<std::pair<std::string, std::string>> headers; // in order, names as sent
    std::string body;
    std::string remote; // the peer's address

    // The value of the first header called `name` (compared case-insensitively), "" if none.
    std::string header(std::string_view name) const;
    // How many headers are called `name`.
    std::size_t header_count(std::string_view name) const;
};

struct HttpResponse {
    int status = 200;
    std::string content_type;
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
    // Kept until the answer is sent or its connection is gone: the handler's own accounting of
    // what its clients have in hand (an Allowance::Hold).
    std::shared_ptr<void> hold;
};

// Why the transport answered a request itself.
struct HttpRefusal {
    int status = 400;   // 400 unreadable, 413 body too large, 431 header fields too large, 429 busy
    std::string reason; // for the log: "malformed", "body_too_large", "too_many_fields", ...
    std::string field;  // the header whose value could not be read, if that is why
    AllowanceUse use;   // 429 "peer_busy": what the address had in hand
};

struct HttpLimits {
    int max_connections = 4096;
    int max_connections_per_peer = 256;
    std::chrono::milliseconds header_timeout{5000};
    std::chrono::milliseconds body_timeout{5000};
    std::chrono::milliseconds idle_timeout{5000};
    std::chrono::milliseconds write_timeout{5000};
    std::uint32_t max_header_bytes = 16 * 1024; // request line and header fields together
    std::size_t max_header_fields = 100;
    std::uint64_t max_body = 64 * 1024;
    AllowanceLimits per_peer{256, 32u << 20u, 256u << 20u};
};

// Counters the transport keeps, for /metrics.
struct HttpStats {
    std::int64_t connections_open = 0;
    std::uint64_t refused_total = 0;    // over max_connections
    std::uint64_t refused_per_peer = 0; // over max_connections_per_peer
    std::uint64_t header_timeouts = 0;  // cut at the header deadline (or idle before a first byte)
    std::uint64_t body_timeouts = 0;
    std::uint64_t refused_peer_busy = 0; // requests answered 429 for their address's allowance
    std::size_t requests_in_hand = 0;    // taken and not yet fully answered
    std::size_t unsent_bytes = 0;        // of answers written and not yet read by their clients
};

class HttpHandler {
public:
    using Respond = std::function<void(HttpResponse)>;
    virtual ~HttpHandler() = default;
    // A complete request, called on an I/O thread: must not block. Call `respond` exactly once,
    // from any thread.
    virtual void handle(HttpRequest request, Respond respond) = 0;
    // A request the transport refuses itself; returns the answer to send. `request` holds what
    // could be read of it (method and target may be empty, the body always is). On an I/O thread.
    virtual HttpResponse refused(const HttpRequest& request, const HttpRefusal& refusal) = 0;
};

class HttpServer {
public:
    HttpServer(HttpLimits limits, HttpHandler& handler);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds and listens; returns the port (`port` 0: any free port). Throws ConfigError if it
    // cannot.
    int bind(const std::string& host, int port);
    // Serves on `io_threads` threads (this one among them) until stop(), then returns once every
    // request already received has been answered.
    void run(int io_threads);
    // Stops accepting and closes connections that wait for a request; requests already begun are
    // read (within their deadlines), answered with Connection: close, and their connections closed.
    // Safe from any thread.
    void stop();

    HttpStats stats() const;

    struct Impl; // opaque: Boost stays in http_server.cpp

private:
    std::unique_ptr<Impl> m_impl;
};

} // namespace payrecon::api
