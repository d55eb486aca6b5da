// The only translation unit that includes Boost.Beast/Asio (they are heavy to compile).
#include "api/http_server.hpp"

#include "core/errors.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <malloc.h>
#include <map>
#include <mutex>
#include <optional>
#include <sys/socket.h>
#include <thread>

namespace payrecon::api {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               auto lower = [](char c) {
                   return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
               };
               return lower(x) == lower(y);
           });
}

// After an answer that refuses a request still arriving: how long to read and discard before
// closing, so that the client reads the answer rather than a reset.
constexpr std::chrono::seconds k_linger{2};

constexpr std::string_view k_continue = "HTTP/1.1 100 Continue\r\n\r\n";

// The name of the first header line in `head` (what the parser left unconsumed: the request line
// and fields, or only the fields from the first one it refused) whose value holds a byte RFC 9110
// forbids there (a control character other than HTAB, or DEL). A bare LF ends no line here: it
// counts as such a byte.
std::string field_with_control_character(std::string_view head, bool starts_with_request_line) {
    std::size_t begin = 0;
    if (starts_with_request_line) {
        begin = head.find("\r\n");
        begin = begin == std::string_view::npos ? begin : begin + 2;
    }
    while (begin != std::string_view::npos && begin < head.size()) {
        const std::size_t end = head.find("\r\n", begin);
        const std::string_view line = head.substr(
            begin, end == std::string_view::npos ? std::string_view::npos : end - begin);
        if (line.empty()) {
            break;
        }
        const auto colon = line.find(':');
        if (colon != std::string_view::npos) {
            const std::string_view value = line.substr(colon + 1);
            const bool bad = std::any_of(value.begin(), value.end(), [](char c) {
                const auto u = static_cast<unsigned char>(c);
                return (u < 0x20 && u != '\t') || u == 0x7f;
            });
            if (bad) {
                return std::string(line.substr(0, colon));
            }
        }
        begin = end == std::string_view::npos ? end : end + 2;
    }
    return {};
}

} // namespace

std::string HttpRequest::header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
        if (iequals(n, name)) {
            return v;
        }
    }
    return {};
}

std::size_t HttpRequest::header_count(std::string_view name) const {
    return static_cast<std::size_t>(std::count_if(
        headers.begin(), headers.end(), [&](const auto& h) { return iequals(h.first, name); }));
}

class Session;

struct HttpServer::Impl {
    Impl(HttpLimits l, HttpHandler& h) : limits(l), handler(h) {}

    void accept();
    void on_accept(beast::error_code ec, tcp::socket socket);
    void release(const std::string& peer, Session* session);
    // Every second: memory freed by connections and answers since is handed back to the system.
    void trim_later();

    HttpLimits limits;
    HttpHandler& handler;
    Allowance peers{limits.per_peer}; // before the I/O context: its sessions hold holds
    net::io_context ioc;
    tcp::acceptor acceptor{net::make_strand(ioc)};
    net::steady_timer accept_pause{acceptor.get_executor()};
    net::steady_timer trim_timer{acceptor.get_executor()};
    std::atomic<bool> stopping{false};
    std::atomic<std::size_t> closed_since_trim{0};
    std::atomic<std::size_t> written_since_trim{0}; // bytes of answers

    mutable std::mutex mutex; // guards what follows
    std::map<std::string, int> per_peer;
    std::map<Session*, std::weak_ptr<Session>> live;
    HttpStats counters;
};

// One connection, on its own strand. Phases: waiting (no byte of the next request yet), header,
// body, processing (the handler has it), writing, lingering.
class Session : public std::enable_shared_from_this<Session> {
public:
    Session(HttpServer::Impl& server, tcp::socket socket, std::string peer)
        : m_server(server), m_stream(std::move(socket)), m_peer(std::move(peer)),
          m_buffer(static_cast<std::size_t>(server.limits.max_header_bytes) + 16 * 1024) {}
    ~Session() { m_server.release(m_peer, this); }

    void start() {
        net::dispatch(m_stream.get_executor(), [self = shared_from_this()] {
            // A new connection's first request: the header deadline counts from the accept.
            self->m_stream.expires_after(self->m_server.limits.header_timeout);
            self->wait_for_request(false);
        });
    }

    // On this session's strand: close it if it waits for a request; let a begun request finish.
    void on_stop() {
        if (m_phase == Phase::waiting) {
            close();
        }
    }

    net::any_io_executor executor() { return m_stream.get_executor(); }

private:
    enum class Phase { waiting, header, body, processing, writing, lingering };

    // Waits for the first byte of a request. On a kept-alive connection the idle timeout applies
    // until it comes, then the header deadline.
    void wait_for_request(bool kept_alive) {
        if (m_server.stopping.load()) {
            close();
            return;
        }
        m_phase = Phase::waiting;
        if (m_buffer.size() > 0) { // pipelined: the next request has begun
            m_stream.expires_after(m_server.limits.header_timeout);
            read_header();
            return;
        }
        if (kept_alive) {
            m_stream.expires_after(m_server.limits.idle_timeout);
        }
        m_stream.async_read_some(m_buffer.prepare(4096), [self = shared_from_this(), kept_alive](
                                                             beast::error_code ec, std::size_t n) {
            if (ec) {
                if (ec == beast::error::timeout) {
                    self->count([](HttpStats& s) { ++s.header_timeouts; });
                }
                self->close();
                return;
            }
            self->m_buffer.commit(n);
            if (kept_alive) {
                self->m_stream.expires_after(self->m_server.limits.header_timeout);
            }
            self->read_header();
        });
    }

    void read_header() {
        m_phase = Phase::header;
        m_parser.emplace();
        m_parser->header_limit(m_server.limits.max_header_bytes);
        m_parser->body_limit(m_server.limits.max_body);
        http::async_read_header(m_stream, m_buffer, *m_parser,
                                [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                    self->on_header(ec);
                                });
    }

    // A read of the request that failed: cut at its deadline, refused with an answer, or gone.
    void on_read_error(beast::error_code ec, bool in_header) {
        if (ec == beast::error::timeout) {
            count(
                [in_header](HttpStats& s) { ++(in_header ? s.header_timeouts : s.body_timeouts); });
            close();
        } else if (ec == http::error::header_limit ||
                   (in_header && ec == http::error::buffer_overflow)) { // trailers count too
            refuse({431, "header_too_large", "", {}});
        } else if (ec == http::error::body_limit) {
            refuse({413, "body_too_large", "", {}});
        } else if (ec == http::error::end_of_stream || ec == net::error::operation_aborted ||
                   ec == net::error::connection_reset || ec == net::error::eof) {
            close();
        } else if (in_header) {
            // Beast consumes the request line and each field it accepts, and stops at the first
            // it refuses.
            const auto data = m_buffer.data();
            const bool line_consumed = !m_parser->get().target().empty();
            refuse({400,
                    "malformed",
                    field_with_control_character(
                        std::string_view(static_cast<const char*>(data.data()), data.size()),
                        !line_consumed),
                    {}});
        } else {
            refuse({400, "malformed", "", {}});
        }
    }

    void on_header(beast::error_code ec) {
        if (ec) {
            on_read_error(ec, true);
            return;
        }
        const auto& req = m_parser->get();
        if (static_cast<std::size_t>(std::distance(req.begin(), req.end())) >
            m_server.limits.max_header_fields) {
            refuse({431, "too_many_fields", "", {}});
            return;
        }
        m_phase = Phase::body;
        m_stream.expires_after(m_server.limits.body_timeout);
        if (!m_parser->is_done() && iequals(req[http::field::expect], "100-continue")) {
            net::async_write(m_stream, net::buffer(k_continue.data(), k_continue.size()),
                             [self = shared_from_this()](beast::error_code wec, std::size_t) {
                                 if (wec) {
                                     self->close();
                                     return;
                                 }
                                 self->read_body();
                             });
            return;
        }
        read_body();
    }

    void read_body() {
        http::async_read(
            m_stream, m_buffer, *m_parser,
            [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_body(ec); });
    }

    void on_body(beast::error_code ec) {
        if (ec) {
            on_read_error(ec, false);
            return;
        }
        auto& req = m_parser->get();
        m_keep_alive = req.keep_alive();
        // The address's allowance: requests in hand and answers it has not read.
        AllowanceUse use;
        m_peer_hold = m_server.peers.admit(m_peer, &use);
        if (!m_peer_hold) {
            count([](HttpStats& s) { ++s.refused_peer_busy; });
            HttpRefusal refusal{429, "peer_busy", "", use};
            write(m_server.handler.refused(request_read(), refusal), false);
            return;
        }
        m_phase = Phase::processing;
        m_stream.expires_never();
        HttpRequest request = request_read();
        request.body = std::move(req.body());
        auto self = shared_from_this();
        auto work = net::make_work_guard(m_server.ioc);
        m_server.handler.handle(std::move(request), [self, work](HttpResponse response) mutable {
            net::post(self->m_stream.get_executor(),
                      [self, response = std::move(response)]() mutable {
                          self->write(std::move(response), false);
                      });
            work.reset();
        });
    }

    // What was read of the current request (all of it once the header is done).
    HttpRequest request_read() const {
        HttpRequest request;
        request.remote = m_peer;
        if (m_parser && m_parser->is_header_done()) {
            const auto& req = m_parser->get();
            request.method = std::string(req.method_string());
            request.target = std::string(req.target());
            for (const auto& f : req) {
                request.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
            }
        }
        return request;
    }

    // Answers the request the transport refuses, then lingers and closes.
    void refuse(const HttpRefusal& refusal) {
        m_keep_alive = false;
        write(m_server.handler.refused(request_read(), refusal), true);
    }

    void write(HttpResponse response, bool linger) {
        m_phase = Phase::writing;
        m_response = {};
        m_response.version(11);
        m_response.result(static_cast<unsigned>(response.status));
        if (!response.content_type.empty()) {
            m_response.set(http::field::content_type, response.content_type);
        }
        for (const auto& [name, value] : response.headers) {
            m_response.insert(name, value);
        }
        m_response.body() = std::move(response.body);
        // Until the answer is sent (or the connection is gone), its bytes are the address's and
        // the handler's to account for.
        m_response_hold = std::move(response.hold);
        if (m_peer_hold) {
            m_peer_hold->charge(m_response.body().size());
        }
        m_server.written_since_trim.fetch_add(m_response.body().size(), std::memory_order_relaxed);
        const bool keep = m_keep_alive && !m_server.stopping.load();
        m_response.keep_alive(keep);
        m_response.prepare_payload();
        m_stream.expires_after(m_server.limits.write_timeout);
        http::async_write(
            m_stream, m_response,
            [self = shared_from_this(), keep, linger](beast::error_code ec, std::size_t) {
                self->m_peer_hold.reset();
                self->m_response_hold.reset();
                self->m_response = {};
                if (ec) {
                    self->close();
                } else if (linger) {
                    self->linger();
                } else if (!keep) {
                    self->shutdown_and_close();
                } else {
                    self->m_parser.reset();
                    self->wait_for_request(true);
                }
            });
    }

    // Stop sending, then read and discard what the client still sends, for k_linger at most.
    void linger() {
        m_phase = Phase::lingering;
        beast::error_code ec;
        m_stream.socket().shutdown(tcp::socket::shutdown_send, ec);
        m_buffer.consume(m_buffer.size());
        m_stream.expires_after(k_linger);
        discard();
    }

    void discard() {
        m_stream.async_read_some(net::buffer(m_discard),
                                 [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                     if (ec) {
                                         self->close();
                                         return;
                                     }
                                     self->discard();
                                 });
    }

    void shutdown_and_close() {
        beast::error_code ec;
        m_stream.socket().shutdown(tcp::socket::shutdown_send, ec);
        close();
    }

    void close() {
        beast::error_code ec;
        m_stream.socket().close(ec);
    }

    template <typename F>
    void count(F f) {
        std::lock_guard lock(m_server.mutex);
        f(m_server.counters);
    }

    HttpServer::Impl& m_server;
    beast::tcp_stream m_stream;
    std::string m_peer;
    beast::flat_buffer m_buffer;
    std::optional<http::request_parser<http::string_body>> m_parser;
    http::response<http::string_body> m_response;
    std::shared_ptr<Allowance::Hold> m_peer_hold; // the request in hand, and its answer's bytes
    std::shared_ptr<void> m_response_hold;        // the handler's, for the same
    std::array<char, 4096> m_discard{};
    Phase m_phase = Phase::waiting;
    bool m_keep_alive = false;
};

void HttpServer::Impl::accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
        on_accept(ec, std::move(socket));
    });
}

void HttpServer::Impl::on_accept(beast::error_code ec, tcp::socket socket) {
    if (stopping.load() || !acceptor.is_open()) {
        return;
    }
    if (ec) {
        // Out of descriptors (EMFILE) and the like: accept again shortly rather than spin.
        accept_pause.expires_after(std::chrono::milliseconds(50));
        accept_pause.async_wait([this](beast::error_code) {
            if (!stopping.load()) {
                accept();
            }
        });
        return;
    }
    beast::error_code peer_ec;
    const auto endpoint = socket.remote_endpoint(peer_ec);
    std::string peer = peer_ec ? std::string("unknown") : endpoint.address().to_string();
    bool over_total = false;
    bool over_peer = false;
    {
        std::lock_guard lock(mutex);
        over_total = counters.connections_open >= limits.max_connections;
        over_peer = !over_total && per_peer[peer] >= limits.max_connections_per_peer;
        if (over_total) {
            ++counters.refused_total;
        } else if (over_peer) {
            ++counters.refused_per_peer;
        } else {
            ++counters.connections_open;
            ++per_peer[peer];
        }
        if (per_peer[peer] == 0) {
            per_peer.erase(peer);
        }
    }
    if (over_total || over_peer) {
        // Refused without reading: one non-blocking send of a canned answer, then close.
        const std::string body =
            std::string(
                R"({"type":"too_many_connections","title":"Too many connections","status":503,)") +
            R"("detail":")" + (over_total ? "The server" : "This client address") +
            R"( has as many connections open as it may. Reuse a kept-alive connection, or retry later."})";
        const std::string answer =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\n"
            "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body;
        [[maybe_unused]] const auto sent = ::send(socket.native_handle(), answer.data(),
                                                  answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        beast::error_code close_ec;
        socket.close(close_ec);
        accept();
        return;
    }
    beast::error_code opt_ec;
    socket.set_option(tcp::no_delay(true), opt_ec);
    auto session = std::make_shared<Session>(*this, std::move(socket), peer);
    {
        std::lock_guard lock(mutex);
        live.emplace(session.get(), session);
    }
    session->start();
    accept();
}

void HttpServer::Impl::trim_later() {
    trim_timer.expires_after(std::chrono::seconds(1));
    trim_timer.async_wait([this](beast::error_code ec) {
        if (ec || stopping.load()) {
            return;
        }
        // Closed connections, answers and query results freed leave pages in the allocator's
        // arenas (55 MB after 2,000 connections closed): give them back once a wave is over.
        if (closed_since_trim.exchange(0) >= 64 || written_since_trim.exchange(0) >= (4u << 20u)) {
            ::malloc_trim(0);
        }
        trim_later();
    });
}

void HttpServer::Impl::release(const std::string& peer, Session* session) {
    closed_since_trim.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(mutex);
    live.erase(session);
    --counters.connections_open;
    if (--per_peer[peer] <= 0) {
        per_peer.erase(peer);
    }
}

HttpServer::HttpServer(HttpLimits limits, HttpHandler& handler)
    : m_impl(std::make_unique<Impl>(limits, handler)) {
    // Answers and query results of hundreds of KiB come and go in waves. glibc would raise its
    // mmap threshold after the first is freed and keep the later ones in each thread's arena,
    // whose top it never trims (malloc_trim cannot either): 5 MB per arena stayed resident after
    // a wave, 60 MB over serve's threads. Fixed thresholds give them back on free.
    ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    ::mallopt(M_TRIM_THRESHOLD, 512 * 1024);
}

HttpServer::~HttpServer() = default;

int HttpServer::bind(const std::string& host, int port) {
    auto& acceptor = m_impl->acceptor;
    beast::error_code ec;
    const auto address = net::ip::make_address(host, ec);
    if (ec) {
        throw ConfigError("cannot listen on " + host + ":" + std::to_string(port) +
                              ": not an IP address",
                          "give --listen an IP address and port, e.g. 127.0.0.1:8080");
    }
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) {
        // SO_REUSEADDR alone (never SO_REUSEPORT): a quick restart works, a second server on a port
        // in use fails instead of taking a share of its connections.
        acceptor.set_option(net::socket_base::reuse_address(true), ec);
    }
    if (!ec) {
        acceptor.bind(endpoint, ec);
    }
    if (!ec) {
        acceptor.listen(net::socket_base::max_listen_connections, ec);
    }
    if (ec) {
        throw ConfigError("cannot listen on " + host + ":" + std::to_string(port) + ": " +
                              ec.message(),
                          "is another process using the port? choose another with --listen");
    }
    return acceptor.local_endpoint().port();
}

void HttpServer::run(int io_threads) {
    m_impl->accept();
    net::post(m_impl->acceptor.get_executor(), [impl = m_impl.get()] { impl->trim_later(); });
    std::vector<std::thread> others;
    for (int i = 1; i < io_threads; ++i) {
        others.emplace_back([this] { m_impl->ioc.run(); });
    }
    m_impl->ioc.run();
    for (auto& t : others) {
        t.join();
    }
}

void HttpServer::stop() {
    Impl& impl = *m_impl;
    net::post(impl.acceptor.get_executor(), [&impl] {
        impl.stopping.store(true);
        beast::error_code ec;
        impl.acceptor.close(ec);
        impl.accept_pause.cancel();
        impl.trim_timer.cancel();
        std::vector<std::shared_ptr<Session>> sessions;
        {
            std::lock_guard lock(impl.mutex);
            for (const auto& [raw, weak] : impl.live) {
                if (auto s = weak.lock()) {
                    sessions.push_back(std::move(s));
                }
            }
        }
        for (auto& s : sessions) {
            net::post(s->executor(), [s] { s->on_stop(); });
        }
    });
}

HttpStats HttpServer::stats() const {
    HttpStats s;
    {
        std::lock_guard lock(m_impl->mutex);
        s = m_impl->counters;
    }
    const AllowanceUse in_hand = m_impl->peers.total();
    s.requests_in_hand = in_hand.requests;
    s.unsent_bytes = in_hand.unsent_bytes;
    return s;
}

} // namespace payrecon::api
