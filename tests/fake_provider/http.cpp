#include "tests/fake_provider/http.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <sys/socket.h>
#include <sys/types.h>

namespace payrecon::fake::http {
namespace {

constexpr std::string_view k_crlf = "\r\n";
constexpr std::string_view k_end_of_headers = "\r\n\r\n";

bool is_token_char(char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
        return true;
    }
    return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), is_token_char);
}

char to_lower(char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), to_lower);
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

bool has_token(std::string_view list, std::string_view token) {
    // Connection: keep-alive, Upgrade -> comma separated, case-insensitive.
    std::size_t start = 0;
    while (start <= list.size()) {
        const std::size_t comma = list.find(',', start);
        const std::string_view item =
            trim(list.substr(start, comma == std::string_view::npos ? list.npos : comma - start));
        if (lower(item) == token) {
            return true;
        }
        if (comma == std::string_view::npos) {
            break;
        }
        start = comma + 1;
    }
    return false;
}

ReadResult invalid(int status, std::string error) {
    ReadResult r;
    r.status = ReadStatus::invalid;
    r.error_status = status;
    r.error = std::move(error);
    return r;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

} // namespace

const std::string* Request::header(std::string_view name) const {
    for (const auto& [key, value] : headers) {
        if (key == name) {
            return &value;
        }
    }
    return nullptr;
}

std::string_view reason_phrase(int status) {
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 204:
        return "No Content";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 402:
        return "Payment Required";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 413:
        return "Payload Too Large";
    case 422:
        return "Unprocessable Entity";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}

std::string serialize(const Response& response, bool keep_alive) {
    std::string out;
    out.reserve(response.body.size() + 256);
    out += "HTTP/1.1 ";
    out += std::to_string(response.status);
    out += ' ';
    out += reason_phrase(response.status);
    out += k_crlf;
    out += "Content-Type: ";
    out += response.content_type;
    out += k_crlf;
    out += "Content-Length: ";
    out += std::to_string(response.body.size());
    out += k_crlf;
    out += keep_alive ? "Connection: keep-alive" : "Connection: close";
    out += k_crlf;
    for (const auto& [name, value] : response.headers) {
        out += name;
        out += ": ";
        out += value;
        out += k_crlf;
    }
    out += k_crlf;
    out += response.body;
    return out;
}

bool Connection::fill() {
    char chunk[8192];
    for (;;) {
        const ssize_t n = ::recv(m_fd, chunk, sizeof chunk, 0);
        if (n > 0) {
            m_buffer.append(chunk, static_cast<std::size_t>(n));
            return true;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        return false; // EOF, reset, shut down, or SO_RCVTIMEO passed
    }
}

bool Connection::write_all(std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::send(m_fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return false;
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

ReadResult Connection::read_request() {
    // Headers: up to the blank line, within the limit.
    std::size_t end = m_buffer.find(k_end_of_headers);
    while (end == std::string::npos) {
        if (m_buffer.size() > m_limits.max_header_bytes) {
            return invalid(431, "request headers exceed " +
                                    std::to_string(m_limits.max_header_bytes) + " bytes");
        }
        const bool had_bytes = !m_buffer.empty();
        if (!fill()) {
            if (had_bytes) {
                ReadResult r;
                r.status = ReadStatus::closed;
                r.error = "connection ended inside a request";
                return r;
            }
            return ReadResult{};
        }
        end = m_buffer.find(k_end_of_headers);
    }
    if (end + k_end_of_headers.size() > m_limits.max_header_bytes) {
        return invalid(431, "request headers exceed " + std::to_string(m_limits.max_header_bytes) +
                                " bytes");
    }
    const std::string head = m_buffer.substr(0, end);
    m_buffer.erase(0, end + k_end_of_headers.size());

    ReadResult result;
    Request& req = result.request;

    // Request line: METHOD SP target SP HTTP/1.x
    const std::size_t line_end = head.find(k_crlf);
    const std::string_view line = std::string_view(head).substr(0, line_end);
    const std::size_t sp1 = line.find(' ');
    const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp1 == std::string_view::npos || sp2 == std::string_view::npos ||
        line.find(' ', sp2 + 1) != std::string_view::npos) {
        return invalid(400, "malformed request line");
    }
    req.method = std::string(line.substr(0, sp1));
    const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string_view version = line.substr(sp2 + 1);
    if (!is_token(req.method) || !std::all_of(req.method.begin(), req.method.end(),
                                              [](char c) { return c >= 'A' && c <= 'Z'; })) {
        return invalid(400, "malformed method");
    }
    if (target.empty() || target.front() != '/' ||
        !std::all_of(target.begin(), target.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
        return invalid(400, "malformed request target");
    }
    bool http10 = false;
    if (version == "HTTP/1.0") {
        http10 = true;
    } else if (version != "HTTP/1.1") {
        return invalid(505, "only HTTP/1.1 and HTTP/1.0 are supported");
    }
    const std::size_t question = target.find('?');
    req.path = std::string(target.substr(0, question));
    if (question != std::string_view::npos) {
        req.query = std::string(target.substr(question + 1));
    }

    // Header fields: name ":" OWS value OWS, no folding, no bare LF.
    std::size_t pos = line_end == std::string::npos ? head.size() : line_end + k_crlf.size();
    while (pos < head.size()) {
        const std::size_t next = head.find(k_crlf, pos);
        const std::string_view field =
            std::string_view(head).substr(pos, next == std::string::npos ? head.npos : next - pos);
        pos = next == std::string::npos ? head.size() : next + k_crlf.size();
        if (field.find('\n') != std::string_view::npos ||
            field.find('\r') != std::string_view::npos) {
            return invalid(400, "bare CR or LF in a header");
        }
        const std::size_t colon = field.find(':');
        if (colon == std::string_view::npos || !is_token(field.substr(0, colon))) {
            return invalid(400, "malformed header field");
        }
        if (req.headers.size() >= m_limits.max_headers) {
            return invalid(431, "more than " + std::to_string(m_limits.max_headers) + " headers");
        }
        req.headers.emplace_back(lower(field.substr(0, colon)),
                                 std::string(trim(field.substr(colon + 1))));
    }

    if (req.header("transfer-encoding") != nullptr) {
        return invalid(501, "Transfer-Encoding is not supported; send Content-Length");
    }
    std::size_t length = 0;
    int lengths = 0;
    for (const auto& [name, value] : req.headers) {
        if (name != "content-length") {
            continue;
        }
        ++lengths;
        const char* first = value.data();
        const char* last = value.data() + value.size();
        const auto [ptr, ec] = std::from_chars(first, last, length);
        if (value.empty() || ec != std::errc{} || ptr != last) {
            return invalid(400, "malformed Content-Length");
        }
    }
    if (lengths > 1) {
        return invalid(400, "more than one Content-Length");
    }
    if (length > m_limits.max_body_bytes) {
        return invalid(413, "body exceeds " + std::to_string(m_limits.max_body_bytes) + " bytes");
    }

    const std::string* connection = req.header("connection");
    if (http10) {
        req.keep_alive = connection != nullptr && has_token(*connection, "keep-alive");
    } else {
        req.keep_alive = connection == nullptr || !has_token(*connection, "close");
    }

    if (length > m_buffer.size()) {
        const std::string* expect = req.header("expect");
        if (expect != nullptr && lower(*expect) == "100-continue" &&
            !write_all("HTTP/1.1 100 Continue\r\n\r\n")) {
            return ReadResult{};
        }
    }
    while (m_buffer.size() < length) {
        if (!fill()) {
            ReadResult r;
            r.status = ReadStatus::closed;
            r.error = "connection ended inside a request body";
            return r;
        }
    }
    req.body = m_buffer.substr(0, length);
    m_buffer.erase(0, length);
    result.status = ReadStatus::ok;
    return result;
}

std::optional<std::string> percent_decode(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '+') {
            out += ' ';
        } else if (c == '%') {
            if (i + 2 >= text.size()) {
                return std::nullopt;
            }
            const int hi = hex_value(text[i + 1]);
            const int lo = hex_value(text[i + 2]);
            if (hi < 0 || lo < 0) {
                return std::nullopt;
            }
            out += static_cast<char>(hi * 16 + lo);
            i += 2;
        } else {
            out += c;
        }
    }
    return out;
}

std::optional<Fields> parse_form(std::string_view text) {
    Fields out;
    if (text.empty()) {
        return out;
    }
    std::size_t start = 0;
    for (;;) {
        const std::size_t amp = text.find('&', start);
        const std::string_view pair =
            text.substr(start, amp == std::string_view::npos ? text.npos : amp - start);
        const std::size_t eq = pair.find('=');
        if (eq == std::string_view::npos || eq == 0) {
            return std::nullopt;
        }
        auto name = percent_decode(pair.substr(0, eq));
        auto value = percent_decode(pair.substr(eq + 1));
        if (!name || !value) {
            return std::nullopt;
        }
        out.emplace_back(std::move(*name), std::move(*value));
        if (amp == std::string_view::npos) {
            break;
        }
        start = amp + 1;
    }
    return out;
}

std::string percent_encode(std::string_view text) {
    static constexpr char k_hex[] = "0123456789ABCDEF";
    std::string out;
    for (const char c : text) {
        const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
                                c == '~';
        if (unreserved) {
            out += c;
        } else {
            const auto byte = static_cast<unsigned char>(c);
            out += '%';
            out += k_hex[byte >> 4];
            out += k_hex[byte & 0x0f];
        }
    }
    return out;
}

} // namespace payrecon::fake::http
