#pragma once
// The fake provider's own HTTP/1.1, server side only, on a connected POSIX socket. Small and
// strict: one request line, CRLF-terminated headers within `Limits`, a body only by
// Content-Length (no chunked encoding), keep-alive by default on HTTP/1.1. It exists because the
// faults need the socket itself: answer, close with FIN, reset with RST, hang, or send half a body.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace payrecon::fake::http {

struct Limits {
    std::size_t max_header_bytes = 16 * 1024; // request line and headers together
    std::size_t max_headers = 64;
    std::size_t max_body_bytes = 64 * 1024;
};

using Fields = std::vector<std::pair<std::string, std::string>>;

struct Request {
    std::string method; // as sent: "GET", "POST"
    std::string path;   // the target before '?', not decoded
    std::string query;  // the target after '?', not decoded
    Fields headers;     // names lower case, values trimmed
    std::string body;
    bool keep_alive = true;

    // The first header called `name` (lower case), or nullptr.
    const std::string* header(std::string_view name) const;
};

struct Response {
    int status = 200;
    Fields
        headers; // besides Content-Type, Content-Length and Connection, which are written for you
    std::string body;
    std::string content_type = "application/json";
};

// Reason phrase for the statuses the fake sends ("OK", "Payment Required", ...).
std::string_view reason_phrase(int status);

// The bytes of `response` on the wire.
std::string serialize(const Response& response, bool keep_alive);

enum class ReadStatus {
    ok,
    closed,  // the peer closed, the socket was shut down, or the idle timeout passed between
             // requests
    invalid, // the request broke the grammar or a limit: answer `error_status` and close
};

struct ReadResult {
    ReadStatus status = ReadStatus::closed;
    Request request;
    int error_status = 0; // 400, 413, 431, 501 or 505 when `invalid`
    std::string error;    // for the log
};

// One server-side connection over a socket it does not own (the caller closes it). Reads block;
// the socket's SO_RCVTIMEO bounds them, and shutdown() from another thread wakes them.
class Connection {
public:
    Connection(int fd, Limits limits) : m_fd(fd), m_limits(limits) {}

    // Reads the next request. Sends "100 Continue" when the client asked for it.
    ReadResult read_request();

    // Writes all of `bytes`; false if the peer is gone (never raises SIGPIPE).
    bool write_all(std::string_view bytes);

private:
    // Reads more bytes into m_buffer; false on EOF, error or timeout.
    bool fill();

    int m_fd;
    Limits m_limits;
    std::string m_buffer; // bytes read past the current request (pipelining)
};

// Decodes %XX escapes, and '+' as a space. nullopt on a malformed escape.
std::optional<std::string> percent_decode(std::string_view text);

// Parses "a=1&b=2" (application/x-www-form-urlencoded, also a query string) into decoded pairs in
// order. nullopt on a malformed escape or a pair without '='. An empty text gives no pairs.
std::optional<Fields> parse_form(std::string_view text);

// Percent-encodes `text` for a form value or query (unreserved characters kept).
std::string percent_encode(std::string_view text);

} // namespace payrecon::fake::http
