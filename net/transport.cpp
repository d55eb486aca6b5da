#include "net/transport.hpp"

#include <algorithm>
#include <cstring>
#include <curl/curl.h>
#include <mutex>
#include <netinet/in.h>
#include <stdexcept>
#include <string_view>
#include <sys/socket.h>

namespace payrecon::net {

// classify.cpp names these codes by number to stay free of curl headers.
static_assert(CURLE_UNSUPPORTED_PROTOCOL == 1 && CURLE_FAILED_INIT == 2 &&
              CURLE_URL_MALFORMAT == 3);
static_assert(CURLE_COULDNT_RESOLVE_PROXY == 5 && CURLE_COULDNT_RESOLVE_HOST == 6 &&
              CURLE_COULDNT_CONNECT == 7);
static_assert(CURLE_OPERATION_TIMEDOUT == 28 && CURLE_SSL_CONNECT_ERROR == 35 &&
              CURLE_PEER_FAILED_VERIFICATION == 60);
// And these for describe_curl_code's words.
static_assert(CURLE_WEIRD_SERVER_REPLY == 8 && CURLE_HTTP2 == 16 && CURLE_PARTIAL_FILE == 18 &&
              CURLE_WRITE_ERROR == 23 && CURLE_UPLOAD_FAILED == 25 && CURLE_READ_ERROR == 26 &&
              CURLE_OUT_OF_MEMORY == 27 && CURLE_ABORTED_BY_CALLBACK == 42 &&
              CURLE_TOO_MANY_REDIRECTS == 47 && CURLE_GOT_NOTHING == 52 && CURLE_SEND_ERROR == 55 &&
              CURLE_RECV_ERROR == 56 && CURLE_SSL_CERTPROBLEM == 58 &&
              CURLE_FILESIZE_EXCEEDED == 63 && CURLE_HTTP2_STREAM == 92);

namespace {

void global_init_once() {
    static std::once_flag once;
    static CURLcode code = CURLE_OK;
    std::call_once(once, [] { code = curl_global_init(CURL_GLOBAL_DEFAULT); });
    if (code != CURLE_OK) {
        throw std::runtime_error(std::string("libcurl initialisation failed: ") +
                                 curl_easy_strerror(code));
    }
}

struct EasyDeleter {
    void operator()(CURL* handle) const noexcept { curl_easy_cleanup(handle); }
};
struct SlistDeleter {
    void operator()(curl_slist* list) const noexcept { curl_slist_free_all(list); }
};
using SlistPtr = std::unique_ptr<curl_slist, SlistDeleter>;

bool equals_ignore_case(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               const auto lower = [](char c) {
                   return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
               };
               return lower(x) == lower(y);
           });
}

bool starts_with_ignore_case(std::string_view text, std::string_view prefix) {
    return text.size() >= prefix.size() &&
           equals_ignore_case(text.substr(0, prefix.size()), prefix);
}

bool has_control_break(std::string_view text) {
    return text.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos;
}

// An HTTP token (RFC 9110 tchar), for methods and header names.
bool is_token(std::string_view text) {
    return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    });
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
        text.remove_prefix(1);
    }
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r' ||
                             text.back() == '\n')) {
        text.remove_suffix(1);
    }
    return text;
}

// Returns a message if the request cannot be sent as given; nothing has been sent then. The URL is
// left to libcurl (a bad one is CURLcode 3, another scheme 1: both not_sent).
std::string validate(const HttpRequest& request) {
    if (!is_token(request.method)) {
        return "method is not an HTTP token";
    }
    for (const auto& [name, value] : request.headers) {
        if (!is_token(name)) {
            return "header name is not an HTTP token";
        }
        if (has_control_break(value)) {
            return "value of header " + name + " contains CR, LF or NUL";
        }
    }
    return {};
}

// The caller's secrets plus every credential carried in an authorization header: the whole value
// and, for "Scheme credentials", the credentials alone.
std::vector<Secret> secrets_of(const HttpRequest& request) {
    std::vector<Secret> secrets = request.secrets_to_redact;
    for (const auto& [name, value] : request.headers) {
        if (equals_ignore_case(name, "Authorization") ||
            equals_ignore_case(name, "Proxy-Authorization")) {
            const std::string_view whole = trim(value);
            secrets.emplace_back(std::string(whole));
            const auto space = whole.find(' ');
            if (space != std::string_view::npos) {
                secrets.emplace_back(std::string(trim(whole.substr(space + 1))));
            }
        }
    }
    return secrets;
}

std::chrono::microseconds info_micros(CURL* handle, CURLINFO info) {
    curl_off_t value = 0;
    if (curl_easy_getinfo(handle, info, &value) != CURLE_OK) {
        return {};
    }
    return std::chrono::microseconds{value};
}

} // namespace

class Transport::Impl {
public:
    explicit Impl(TransportOptions options) : m_options(std::move(options)) {
        global_init_once();
        m_handle.reset(curl_easy_init());
        if (!m_handle) {
            throw std::runtime_error("libcurl could not create an easy handle (out of memory)");
        }
    }

    HttpResult send(const HttpRequest& request);
    const TransportOptions& options() const noexcept { return m_options; }

private:
    // State of the transfer in progress, reached from libcurl's callbacks.
    struct Transfer {
        std::size_t cap = 0;
        std::string body;
        HeaderList headers;
        std::size_t header_bytes = 0;
        bool truncated = false;
        // libcurl had a connection ready for the request (connected, TLS done, or reused) and was
        // about to write it. CONNECT_TIME_T alone misses reused connections (it reads 0 there).
        bool connection_ready = false;
        // The request's deadline; past it, the pre-request callback aborts before sending.
        std::optional<std::chrono::steady_clock::time_point> deadline;
        bool deadline_passed = false;
        // The request's connect guard, and what it refused last.
        const std::function<std::optional<std::string>(const IpAddress&)>* guard = nullptr;
        std::string refused;
    };

    static std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user);
    static std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user);
    static int on_ready(void* user, char*, char*, int, int);
    static curl_socket_t on_open(void* user, curlsocktype purpose, struct curl_sockaddr* address);

    CURLcode configure(const HttpRequest& request, const curl_slist* headers, Timeouts timeouts);

    TransportOptions m_options;
    std::unique_ptr<CURL, EasyDeleter> m_handle;
    Transfer m_transfer;
    char m_error[CURL_ERROR_SIZE] = {};
};

std::size_t Transport::Impl::on_body(char* data, std::size_t size, std::size_t count, void* user) {
    auto& transfer = *static_cast<Transfer*>(user);
    const std::size_t length = size * count;
    try {
        const std::size_t room = transfer.cap - transfer.body.size();
        if (length > room) {
            transfer.body.append(data, room);
            transfer.truncated = true;
            return 0; // aborts the transfer: CURLE_WRITE_ERROR
        }
        transfer.body.append(data, length);
        return length;
    } catch (...) {
        return 0;
    }
}

std::size_t Transport::Impl::on_header(char* data, std::size_t size, std::size_t count,
                                       void* user) {
    auto& transfer = *static_cast<Transfer*>(user);
    const std::size_t length = size * count;
    try {
        transfer.header_bytes += length;
        if (transfer.header_bytes > transfer.cap) {
            transfer.truncated = true;
            return 0;
        }
        const std::string_view line = trim(std::string_view(data, length));
        if (line.starts_with("HTTP/")) {
            transfer.headers.clear(); // a new response (after a 1xx): keep only the final one
            return length;
        }
        const auto colon = line.find(':');
        if (colon != std::string_view::npos && colon > 0) {
            transfer.headers.emplace_back(std::string(trim(line.substr(0, colon))),
                                          std::string(trim(line.substr(colon + 1))));
        }
        return length;
    } catch (...) {
        return 0;
    }
}

int Transport::Impl::on_ready(void* user, char*, char*, int, int) {
    auto& transfer = *static_cast<Transfer*>(user);
    if (transfer.deadline && std::chrono::steady_clock::now() >= *transfer.deadline) {
        // The last moment before the first request byte: nothing has been written yet.
        transfer.deadline_passed = true;
        return CURL_PREREQFUNC_ABORT;
    }
    transfer.connection_ready = true;
    return CURL_PREREQFUNC_OK;
}

curl_socket_t Transport::Impl::on_open(void* user, curlsocktype, struct curl_sockaddr* address) {
    auto& transfer = *static_cast<Transfer*>(user);
    IpAddress ip;
    if (address->family == AF_INET &&
        address->addrlen >= static_cast<unsigned int>(sizeof(sockaddr_in))) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(&address->addr);
        std::memcpy(ip.bytes.data(), &in->sin_addr, 4);
    } else if (address->family == AF_INET6 &&
               address->addrlen >= static_cast<unsigned int>(sizeof(sockaddr_in6))) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address->addr);
        ip.v6 = true;
        std::memcpy(ip.bytes.data(), &in6->sin6_addr, 16);
    } else {
        transfer.refused = "an address of an unknown family";
        return CURL_SOCKET_BAD;
    }
    try {
        if (auto why = (*transfer.guard)(ip)) {
            transfer.refused = std::move(*why);
            return CURL_SOCKET_BAD;
        }
    } catch (...) {
        transfer.refused = "the connect guard failed";
        return CURL_SOCKET_BAD;
    }
    return ::socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

CURLcode Transport::Impl::configure(const HttpRequest& request, const curl_slist* headers,
                                    Timeouts timeouts) {
    CURL* h = m_handle.get();
    const auto millis = [](std::chrono::milliseconds d) { return static_cast<long>(d.count()); };
    const auto cap = static_cast<curl_off_t>(m_options.max_response_bytes);
    const auto body_size = static_cast<curl_off_t>(request.body.size());

    CURLcode code = CURLE_OK;
    const auto set = [&code](CURLcode step) {
        if (code == CURLE_OK) {
            code = step;
        }
    };
    set(curl_easy_setopt(h, CURLOPT_URL, request.url.c_str()));
    set(curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https"));
    set(curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https"));
    set(curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L));
    set(curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L));
    set(curl_easy_setopt(h, CURLOPT_PROXY, ""));
    set(curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, millis(timeouts.connect)));
    set(curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, millis(timeouts.total)));
    set(curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L));
    set(curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L));
    if (!m_options.ca_bundle.empty()) {
        set(curl_easy_setopt(h, CURLOPT_CAINFO, m_options.ca_bundle.c_str()));
    }
    set(curl_easy_setopt(h, CURLOPT_USERAGENT, m_options.user_agent.c_str()));
    set(curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, cap));
    set(curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &Impl::on_body));
    set(curl_easy_setopt(h, CURLOPT_WRITEDATA, &m_transfer));
    set(curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &Impl::on_header));
    set(curl_easy_setopt(h, CURLOPT_HEADERDATA, &m_transfer));
    set(curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, &Impl::on_ready));
    set(curl_easy_setopt(h, CURLOPT_PREREQDATA, &m_transfer));
    set(curl_easy_setopt(h, CURLOPT_ERRORBUFFER, m_error));
    set(curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers));
    if (request.connect_guard) {
        set(curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, &Impl::on_open));
        set(curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, &m_transfer));
    }

    if (request.method == "GET" && request.body.empty()) {
        set(curl_easy_setopt(h, CURLOPT_HTTPGET, 1L));
    } else if (request.method == "HEAD" && request.body.empty()) {
        set(curl_easy_setopt(h, CURLOPT_NOBODY, 1L));
    } else {
        if (request.method != "POST") {
            set(curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method.c_str()));
        }
        if (request.method == "POST" || !request.body.empty()) {
            set(curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, body_size));
            set(curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data()));
        }
    }
    if (request.mutating) {
        set(curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L));
        set(curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L));
    }
    return code;
}

HttpResult Transport::Impl::send(const HttpRequest& request) {
    HttpResult result;
    const std::vector<Secret> secrets = secrets_of(request);

    if (std::string problem = validate(request); !problem.empty()) {
        result.cls = SendClass::not_sent;
        result.error = redact("request refused before sending: " + problem, secrets);
        return result;
    }
    // The call ends by the deadline: its timeouts are cut to what is left of it.
    Timeouts timeouts = m_options.timeouts;
    if (request.deadline) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            *request.deadline - std::chrono::steady_clock::now());
        if (left < std::chrono::milliseconds(1)) {
            result.cls = SendClass::not_sent;
            result.deadline_passed = true;
            result.error =
                "request refused before sending: its deadline (the claim's lease) has passed";
            return result;
        }
        timeouts.connect = std::min(timeouts.connect, left);
        timeouts.total = std::min(timeouts.total, left);
    }

    SlistPtr headers;
    const auto append = [&headers](const std::string& line) {
        curl_slist* grown = curl_slist_append(headers.get(), line.c_str());
        if (grown == nullptr) {
            throw std::bad_alloc();
        }
        static_cast<void>(headers.release());
        headers.reset(grown);
    };
    for (const auto& [name, value] : request.headers) {
        // "Name;" is libcurl's spelling of a header sent with an empty value.
        append(value.empty() ? name + ";" : name + ": " + value);
    }
    append("Expect:"); // no 100-continue round trip (and no 1 s wait when a server ignores it)

    CURL* h = m_handle.get();
    curl_easy_reset(h); // options only: the connection cache survives
    m_transfer = Transfer{};
    m_transfer.cap = m_options.max_response_bytes;
    m_transfer.deadline = request.deadline;
    m_transfer.guard = request.connect_guard ? &request.connect_guard : nullptr;
    m_error[0] = '\0';

    if (const CURLcode setup = configure(request, headers.get(), timeouts); setup != CURLE_OK) {
        result.cls = SendClass::not_sent;
        result.curl_code = static_cast<int>(setup);
        result.error = redact(
            std::string("request refused before sending: ") + curl_easy_strerror(setup), secrets);
        return result;
    }

    const CURLcode code = curl_easy_perform(h);

    long status = 0;
    long request_size = 0;
    curl_off_t uploaded = 0;
    char* scheme = nullptr;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &request_size);
    curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &uploaded);
    curl_easy_getinfo(h, CURLINFO_SCHEME, &scheme);

    result.curl_code = static_cast<int>(code);
    result.http_status = static_cast<int>(status);
    result.request_bytes_sent = std::max(request_size, static_cast<long>(uploaded));
    result.connect_time = info_micros(h, CURLINFO_CONNECT_TIME_T);
    result.tls_time = info_micros(h, CURLINFO_APPCONNECT_TIME_T);
    result.total_time = info_micros(h, CURLINFO_TOTAL_TIME_T);
    result.truncated = m_transfer.truncated || code == CURLE_FILESIZE_EXCEEDED;

    CurlObservation observation;
    observation.curl_code = result.curl_code;
    observation.request_bytes = result.request_bytes_sent;
    observation.uses_tls = scheme != nullptr ? equals_ignore_case(scheme, "https")
                                             : starts_with_ignore_case(request.url, "https:");
    // libcurl 7.88 leaves CONNECT_TIME_T at 0 on a reused connection and, for https, when the TLS
    // handshake fails after the TCP connect: the pre-request callback fills the first gap.
    observation.connected = result.connect_time.count() > 0 || m_transfer.connection_ready;
    observation.tls_completed =
        result.tls_time.count() > 0 || (observation.uses_tls && m_transfer.connection_ready);
    observation.response_received = status != 0;
    result.cls = classify(observation);
    if (m_transfer.deadline_passed && code == CURLE_ABORTED_BY_CALLBACK) {
        // Aborted by on_ready, before the first request byte was written.
        result.cls = SendClass::not_sent;
        result.deadline_passed = true;
    }

    if (code != CURLE_OK) {
        std::string message = m_error[0] != '\0' ? std::string(m_error) : curl_easy_strerror(code);
        if (result.truncated) {
            message += " (response larger than " + std::to_string(m_options.max_response_bytes) +
                       " bytes: cut off)";
        }
        if (!m_transfer.refused.empty() && code == CURLE_COULDNT_CONNECT) {
            result.address_refused = true;
            result.cls = SendClass::not_sent;
            message = "refused to connect: " + m_transfer.refused;
        }
        if (result.deadline_passed) {
            message = "aborted before sending: the request's deadline (the claim's lease) passed "
                      "while connecting";
        }
        result.error = redact(std::move(message), secrets);
    }
    result.body = redact(std::move(m_transfer.body), secrets);
    result.headers = std::move(m_transfer.headers);
    for (auto& [name, value] : result.headers) {
        value = redact(std::move(value), secrets);
    }
    return result;
}

Transport::Transport(TransportOptions options)
    : m_impl(std::make_unique<Impl>(std::move(options))) {}
Transport::~Transport() = default;
Transport::Transport(Transport&&) noexcept = default;
Transport& Transport::operator=(Transport&&) noexcept = default;

HttpResult Transport::send(const HttpRequest& request) {
    return m_impl->send(request);
}

const TransportOptions& Transport::options() const noexcept {
    return m_impl->options();
}

} // namespace payrecon::net
