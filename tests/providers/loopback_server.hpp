#pragma once
// A tiny HTTP/1.1 server on 127.0.0.1 for transport tests: POSIX sockets, port 0, one thread per
// connection running a test-supplied handler that decides, byte by byte, how the server misbehaves
// (hang, FIN, RST, half a body, ...). It counts what it really saw: accepted connections and
// complete requests, so tests assert on the server's side and not only on the client's verdict.
//
// Every blocking call (read, hang) returns when the server is destroyed, so a test never waits on
// a stuck handler. Failures of the server's own sockets throw std::system_error.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace payrecon::test {

using TestHeaders = std::vector<std::pair<std::string, std::string>>;

struct ReceivedRequest {
    int connection = 0; // 1 for the first accepted connection, 2 for the next, ...
    std::string method;
    std::string target;
    TestHeaders headers;
    std::string body;

    // The first header of that name (case-insensitive), or nullopt.
    std::optional<std::string> header(std::string_view name) const;
};

// "HTTP/1.1 <status> <reason>" with Content-Length and the given headers and body.
std::string http_response(int status, std::string_view body, const TestHeaders& headers = {});

class LoopbackServer;

class LoopbackConnection {
public:
    int index() const noexcept { return m_index; }
    // Reads one request (headers, then a Content-Length body). Records and counts it only once it
    // is complete. nullopt if the peer closed first or the server is stopping.
    std::optional<ReceivedRequest> read_request();
    // Whatever bytes arrive next (up to 64 KiB); empty if the peer closed or the server stops.
    std::string read_some();
    // Writes all of `bytes`; false if the peer is gone.
    bool write(std::string_view bytes);
    // Bytes the kernel received on this connection that nobody read yet (FIONREAD).
    std::size_t unread_bytes() const;
    // Blocks until LoopbackServer::release() or the server's destruction.
    void hang();
    // Orderly close: FIN.
    void close_with_fin();
    // Abortive close (SO_LINGER 0): RST.
    void close_with_rst();

private:
    friend class LoopbackServer;
    LoopbackConnection(LoopbackServer& server, int fd, int index)
        : m_server(server), m_fd(fd), m_index(index) {}

    LoopbackServer& m_server;
    int m_fd;
    int m_index;
    std::string m_buffer; // bytes read past the previous request
};

class LoopbackServer {
public:
    using Handler = std::function<void(LoopbackConnection&)>;

    // Listens on 127.0.0.1, port 0, and runs `handler` for each accepted connection in its own
    // thread; the connection is closed (FIN) when the handler returns, unless it closed it first.
    explicit LoopbackServer(Handler handler);
    ~LoopbackServer();
    LoopbackServer(const LoopbackServer&) = delete;
    LoopbackServer& operator=(const LoopbackServer&) = delete;

    int port() const noexcept { return m_port; }
    std::string url(std::string_view path = "/") const;

    // Closes the listening socket: from now on a connect to port() is refused.
    void stop_listening();
    // Ends every hang(), present and future.
    void release();

    int connections_accepted() const noexcept { return m_accepted.load(); }
    int connections_finished() const noexcept { return m_finished.load(); }
    int requests_received() const noexcept { return m_requests.load(); }
    std::vector<ReceivedRequest> requests() const;

    // Waits until `condition` holds (it must not call requests()); false after `limit`.
    bool wait_until(const std::function<bool()>& condition,
                    std::chrono::milliseconds limit = std::chrono::seconds(5));

private:
    friend class LoopbackConnection;
    void accept_loop();
    void serve(int fd, int index);
    void notify();
    bool stopping() const noexcept { return m_stopping.load(); }

    Handler m_handler;
    int m_listen_fd = -1;
    int m_port = 0;
    int m_stop_pipe[2] = {-1, -1};   // readable once the server stops: wakes every poll()
    int m_listen_pipe[2] = {-1, -1}; // readable once stop_listening() ran: wakes the accept loop
    std::atomic<bool> m_stopping{false};
    std::atomic<bool> m_released{false};
    std::atomic<int> m_accepted{0};
    std::atomic<int> m_finished{0};
    std::atomic<int> m_requests{0};
    mutable std::mutex m_mutex;
    std::condition_variable m_changed;
    std::vector<ReceivedRequest> m_received;
    std::vector<std::thread> m_connection_threads;
    std::thread m_accept_thread;
};

// A listener whose accept queue is full and never drained (backlog 0, one connection parked in
// it): the kernel drops further SYNs, so a connect to port() neither succeeds nor is refused; it
// times out. Nothing is ever accepted.
class FullBacklogListener {
public:
    FullBacklogListener();
    ~FullBacklogListener();
    FullBacklogListener(const FullBacklogListener&) = delete;
    FullBacklogListener& operator=(const FullBacklogListener&) = delete;

    int port() const noexcept { return m_port; }
    // Drains the accept queue without blocking; returns how many connections had completed their
    // handshake (the parked one, plus any that got through).
    int drain_completed_connections();

private:
    int m_listen_fd = -1;
    int m_parked_fd = -1;
    int m_port = 0;
};

// A port on 127.0.0.1 with nothing listening (bound once, then released).
int unused_port();

} // namespace payrecon::test
