#include "tests/providers/loopback_server.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstdint>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <system_error>
#include <tuple>
#include <unistd.h>

namespace payrecon::test {

namespace {

[[noreturn]] void throw_errno(const char* what) {
    throw std::system_error(errno, std::generic_category(), what);
}

sockaddr_in loopback_address(int port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    if (inet_pton(AF_INET, "127.0.0.1", &address.sin_addr) != 1) {
        throw_errno("inet_pton");
    }
    return address;
}

// A socket listening on 127.0.0.1 at an ephemeral port; returns {fd, port}.
std::pair<int, int> listen_on_loopback(int backlog) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        throw_errno("socket");
    }
    sockaddr_in address = loopback_address(0);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(fd, backlog) != 0) {
        const int saved = errno;
        ::close(fd);
        errno = saved;
        throw_errno("bind/listen");
    }
    socklen_t length = sizeof address;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
        ::close(fd);
        throw_errno("getsockname");
    }
    return {fd, ntohs(address.sin_port)};
}

bool equals_ignore_case(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        const auto lower = [](char c) {
            return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
        };
        if (lower(a[i]) != lower(b[i])) {
            return false;
        }
    }
    return true;
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
        text.remove_prefix(1);
    }
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
        text.remove_suffix(1);
    }
    return text;
}

std::string_view reason(int status) {
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 302:
        return "Found";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 500:
        return "Internal Server Error";
    default:
        return "Status";
    }
}

} // namespace

std::optional<std::string> ReceivedRequest::header(std::string_view name) const {
    for (const auto& [key, value] : headers) {
        if (equals_ignore_case(key, name)) {
            return value;
        }
    }
    return std::nullopt;
}

std::string http_response(int status, std::string_view body, const TestHeaders& headers) {
    std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason(status)) +
                      "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    for (const auto& [name, value] : headers) {
        out += name + ": " + value + "\r\n";
    }
    out += "\r\n";
    out += body;
    return out;
}

// --- LoopbackConnection ---

std::string LoopbackConnection::read_some() {
    if (m_fd < 0) {
        return {};
    }
    pollfd fds[2] = {{m_fd, POLLIN, 0}, {m_server.m_stop_pipe[0], POLLIN, 0}};
    while (true) {
        const int ready = ::poll(fds, 2, -1);
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        if (ready < 0 || (fds[1].revents & POLLIN) != 0) {
            return {};
        }
        char chunk[65536];
        const ssize_t got = ::recv(m_fd, chunk, sizeof chunk, 0);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0) {
            return {};
        }
        return std::string(chunk, static_cast<std::size_t>(got));
    }
}

std::optional<ReceivedRequest> LoopbackConnection::read_request() {
    std::size_t end = m_buffer.find("\r\n\r\n");
    while (end == std::string::npos) {
        const std::string more = read_some();
        if (more.empty()) {
            return std::nullopt;
        }
        m_buffer += more;
        end = m_buffer.find("\r\n\r\n");
    }
    ReceivedRequest request;
    request.connection = m_index;
    const std::string_view head = std::string_view(m_buffer).substr(0, end);
    std::size_t line_end = head.find("\r\n");
    const std::string_view request_line = head.substr(0, line_end);
    const std::size_t first_space = request_line.find(' ');
    const std::size_t second_space = request_line.find(' ', first_space + 1);
    request.method = std::string(request_line.substr(0, first_space));
    request.target =
        std::string(request_line.substr(first_space + 1, second_space - first_space - 1));
    std::size_t content_length = 0;
    while (line_end != std::string_view::npos && line_end < head.size()) {
        const std::size_t start = line_end + 2;
        line_end = head.find("\r\n", start);
        const std::string_view line = head.substr(start, line_end - start);
        const std::size_t colon = line.find(':');
        if (colon == std::string_view::npos) {
            continue;
        }
        request.headers.emplace_back(std::string(trim(line.substr(0, colon))),
                                     std::string(trim(line.substr(colon + 1))));
        if (equals_ignore_case(request.headers.back().first, "Content-Length")) {
            content_length = std::stoul(request.headers.back().second);
        }
    }
    m_buffer.erase(0, end + 4);
    while (m_buffer.size() < content_length) {
        const std::string more = read_some();
        if (more.empty()) {
            return std::nullopt;
        }
        m_buffer += more;
    }
    request.body = m_buffer.substr(0, content_length);
    m_buffer.erase(0, content_length);
    {
        const std::lock_guard lock(m_server.m_mutex);
        m_server.m_received.push_back(request);
        ++m_server.m_requests;
    }
    m_server.notify();
    return request;
}

bool LoopbackConnection::write(std::string_view bytes) {
    while (!bytes.empty() && m_fd >= 0) {
        const ssize_t sent = ::send(m_fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR) {
            continue;
        }
        if (sent <= 0) {
            return false;
        }
        bytes.remove_prefix(static_cast<std::size_t>(sent));
    }
    return bytes.empty();
}

std::size_t LoopbackConnection::unread_bytes() const {
    int pending = 0;
    if (m_fd < 0 || ::ioctl(m_fd, FIONREAD, &pending) != 0 || pending < 0) {
        return 0;
    }
    return m_buffer.size() + static_cast<std::size_t>(pending);
}

void LoopbackConnection::hang() {
    std::unique_lock lock(m_server.m_mutex);
    m_server.m_changed.wait(lock,
                            [this] { return m_server.m_released.load() || m_server.stopping(); });
}

void LoopbackConnection::close_with_fin() {
    if (m_fd >= 0) {
        ::close(m_fd);
        m_fd = -1;
    }
}

void LoopbackConnection::close_with_rst() {
    if (m_fd >= 0) {
        const linger abort_on_close{1, 0};
        ::setsockopt(m_fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
        ::close(m_fd);
        m_fd = -1;
    }
}

// --- LoopbackServer ---

LoopbackServer::LoopbackServer(Handler handler) : m_handler(std::move(handler)) {
    if (::pipe2(m_stop_pipe, O_CLOEXEC) != 0) {
        throw_errno("pipe2");
    }
    if (::pipe2(m_listen_pipe, O_CLOEXEC) != 0) {
        throw_errno("pipe2");
    }
    std::tie(m_listen_fd, m_port) = listen_on_loopback(64);
    m_accept_thread = std::thread([this] { accept_loop(); });
}

LoopbackServer::~LoopbackServer() {
    m_stopping = true;
    static_cast<void>(::write(m_stop_pipe[1], "x", 1));
    notify();
    stop_listening();
    for (std::thread& thread : m_connection_threads) {
        thread.join();
    }
    for (const int fd : {m_stop_pipe[0], m_stop_pipe[1], m_listen_pipe[0], m_listen_pipe[1]}) {
        ::close(fd);
    }
}

std::string LoopbackServer::url(std::string_view path) const {
    return "http://127.0.0.1:" + std::to_string(m_port) + std::string(path);
}

void LoopbackServer::stop_listening() {
    if (!m_accept_thread.joinable()) {
        return;
    }
    static_cast<void>(::write(m_listen_pipe[1], "x", 1));
    m_accept_thread.join();
    ::close(m_listen_fd);
    m_listen_fd = -1;
}

void LoopbackServer::release() {
    m_released = true;
    notify();
}

std::vector<ReceivedRequest> LoopbackServer::requests() const {
    const std::lock_guard lock(m_mutex);
    return m_received;
}

bool LoopbackServer::wait_until(const std::function<bool()>& condition,
                                std::chrono::milliseconds limit) {
    std::unique_lock lock(m_mutex);
    return m_changed.wait_for(lock, limit, condition);
}

void LoopbackServer::notify() {
    { const std::lock_guard lock(m_mutex); }
    m_changed.notify_all();
}

void LoopbackServer::accept_loop() {
    while (true) {
        pollfd fds[2] = {{m_listen_fd, POLLIN, 0}, {m_listen_pipe[0], POLLIN, 0}};
        const int ready = ::poll(fds, 2, -1);
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        if (ready < 0 || (fds[1].revents & POLLIN) != 0) {
            return;
        }
        const int fd = ::accept4(m_listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
            continue;
        }
        const int index = ++m_accepted;
        notify();
        m_connection_threads.emplace_back([this, fd, index] { serve(fd, index); });
    }
}

void LoopbackServer::serve(int fd, int index) {
    LoopbackConnection connection(*this, fd, index);
    try {
        m_handler(connection);
    } catch (...) {
        // A handler failure shows up as what the client sees: the connection closes.
    }
    connection.close_with_fin();
    ++m_finished;
    notify();
}

// --- FullBacklogListener ---

FullBacklogListener::FullBacklogListener() {
    std::tie(m_listen_fd, m_port) = listen_on_loopback(0);
    m_parked_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_in address = loopback_address(m_port);
    if (m_parked_fd < 0 ||
        ::connect(m_parked_fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
        const int saved = errno;
        ::close(m_listen_fd);
        if (m_parked_fd >= 0) {
            ::close(m_parked_fd);
        }
        errno = saved;
        throw_errno("connect (parking a connection in the accept queue)");
    }
}

FullBacklogListener::~FullBacklogListener() {
    ::close(m_parked_fd);
    ::close(m_listen_fd);
}

int FullBacklogListener::drain_completed_connections() {
    const int flags = ::fcntl(m_listen_fd, F_GETFL);
    if (flags < 0 || ::fcntl(m_listen_fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        throw_errno("fcntl");
    }
    int count = 0;
    while (true) {
        const int fd = ::accept4(m_listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            return count;
        }
        ::close(fd);
        ++count;
    }
}

int unused_port() {
    const auto [fd, port] = listen_on_loopback(1);
    ::close(fd);
    return port;
}

} // namespace payrecon::test
