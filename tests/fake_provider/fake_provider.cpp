#include "tests/fake_provider/fake_provider.hpp"

#include "tests/fake_provider/dialects.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <ctime>
#include <fcntl.h>
#include <iomanip>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sstream>
#include <stdexcept>
#include <sys/socket.h>
#include <system_error>
#include <unistd.h>

namespace payrecon::fake {
namespace {

using Json = nlohmann::ordered_json;
using SteadyClock = std::chrono::steady_clock;

constexpr int k_backlog = 128;
constexpr auto k_send_timeout = std::chrono::seconds(5);
constexpr auto k_acceptor_tick = std::chrono::milliseconds(200);
constexpr auto k_rebind_retry = std::chrono::milliseconds(20);
constexpr std::size_t k_admin_max_ids = 1000; // a bulk seed answers first and last id past this

std::string dump(const Json& j) {
    return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

[[noreturn]] void throw_errno(const std::string& what) {
    throw std::system_error(errno, std::generic_category(), what);
}

// A non-blocking listening socket on 127.0.0.1:port.
int make_listener(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        throw_errno("socket");
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        const int saved = errno;
        ::close(fd);
        errno = saved;
        throw_errno("bind 127.0.0.1:" + std::to_string(port));
    }
    if (::listen(fd, k_backlog) != 0) {
        const int saved = errno;
        ::close(fd);
        errno = saved;
        throw_errno("listen");
    }
    return fd;
}

int bound_port(int fd) {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        throw_errno("getsockname");
    }
    return ntohs(addr.sin_port);
}

// The main listener, bound to its port by number even when the kernel chose it: Linux keeps an
// explicitly bound port through shutdown(), so the refuse fault stops listening (connects get
// ECONNREFUSED) and listens again on the same socket, and nobody takes the port in between --
// another test's listener, or a client's connect() on loopback meeting itself. A port the kernel
// chose is released by shutdown(), and a rebind that finds it taken never listens again (the
// likeliest cause of a CI run whose connection-refused case waited 20 s for the listener).
int make_main_listener(int port) {
    if (port != 0) {
        return make_listener(port);
    }
    for (int attempt = 1;; ++attempt) {
        const int probe = make_listener(0);
        const int chosen = bound_port(probe);
        ::close(probe);
        try {
            return make_listener(chosen);
        } catch (const std::system_error&) {
            if (attempt == 10) {
                throw; // taken between the probe and the bind ten times over
            }
        }
    }
}

timeval to_timeval(std::chrono::milliseconds d) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(d.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
    return tv;
}

std::string iso_now() {
    const auto now = std::chrono::system_clock::now();
    const auto t = std::chrono::system_clock::to_time_t(now);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    std::ostringstream out;
    out << buf << '.' << std::setw(3) << std::setfill('0') << ms.count() << 'Z';
    return out.str();
}

http::Response admin_json(int status, const Json& body) {
    http::Response r;
    r.status = status;
    r.body = dump(body);
    return r;
}

http::Response admin_error(int status, const std::string& message) {
    Json body;
    body["error"]["message"] = message;
    return admin_json(status, body);
}

Json faults_json(const FaultConfig& config) {
    return Json::parse(config.to_json().dump());
}

// After an error answer to a request that was not read in full: closing with unread input would
// reset the connection and could destroy the answer in flight, so stop writing and drain a little.
void linger_close(int fd) {
    constexpr auto k_drain_for = std::chrono::milliseconds(200);
    constexpr std::size_t k_drain_at_most = 1024 * 1024;
    ::shutdown(fd, SHUT_WR);
    const timeval tv = to_timeval(k_drain_for);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char sink[8192];
    std::size_t drained = 0;
    const auto deadline = SteadyClock::now() + k_drain_for;
    while (drained < k_drain_at_most && SteadyClock::now() < deadline) {
        const ssize_t n = ::recv(fd, sink, sizeof sink, 0);
        if (n <= 0) {
            break;
        }
        drained += static_cast<std::size_t>(n);
    }
}

} // namespace

FakeProvider::FakeProvider(FakeProviderOptions options, std::ostream& log)
    : m_options(std::move(options)), m_log(log), m_dialects(make_dialects(m_ledger, m_options)),
      m_stripe(dialect_of<StripeApi>(m_dialects)), m_paypal(dialect_of<PayPalApi>(m_dialects)),
      m_square(dialect_of<SquareApi>(m_dialects)) {
    m_ledger.set_faults(m_options.faults);
    m_webhooks.configure(m_options.webhooks);
    m_stripe.set_on_executed([this](const Executed& e) { m_webhooks.notify(e); });
}

FakeProvider::~FakeProvider() {
    stop();
}

void FakeProvider::start() {
    if (m_started) {
        throw std::logic_error("FakeProvider::start called twice");
    }
    if (::pipe2(m_wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        throw_errno("pipe2");
    }
    try {
        m_main_fd = make_main_listener(m_options.port);
        m_port = bound_port(m_main_fd);
        m_admin_fd = make_listener(m_options.admin_port);
        m_admin_port = bound_port(m_admin_fd);
    } catch (...) {
        for (int* fd : {&m_main_fd, &m_admin_fd, &m_wake_pipe[0], &m_wake_pipe[1]}) {
            if (*fd >= 0) {
                ::close(*fd);
                *fd = -1;
            }
        }
        throw;
    }
    m_started = true;
    Json event;
    event["event"] = "listening";
    event["port"] = m_port;
    event["admin_port"] = m_admin_port;
    event["idempotency"] = m_options.account.idempotency;
    event["lookup"] = m_options.account.lookup;
    event["key_retention_s"] = m_options.stripe.key_retention.count();
    event["checkout_key_retention_s"] = m_options.checkout.key_retention.count();
    event["paypal_key_retention_s"] = m_options.paypal.key_retention.count();
    event["paypal_client_id"] = m_options.paypal.client_id;
    event["paypal_token_ttl_s"] = m_options.paypal.token_ttl.count();
    event["square_key_retention_s"] = m_options.square.key_retention.count();
    log_event(event);
    apply_refusal();
    m_acceptor = std::thread(&FakeProvider::accept_loop, this);
}

void FakeProvider::stop() {
    m_webhooks.stop();
    {
        std::lock_guard lock(m_stop_mutex);
        if (!m_started || m_stopped) {
            return;
        }
        m_stopping = true;
    }
    m_stop_cv.notify_all();
    wake();
    if (m_acceptor.joinable()) {
        m_acceptor.join();
    }
    {
        std::lock_guard lock(m_listener_mutex);
        if (m_main_fd >= 0) {
            ::close(m_main_fd);
            m_main_fd = -1;
        }
    }
    ::close(m_admin_fd);
    m_admin_fd = -1;
    {
        std::lock_guard lock(m_connections_mutex);
        for (const auto& c : m_connections) {
            if (c->fd >= 0) {
                ::shutdown(c->fd, SHUT_RDWR);
            }
        }
    }
    reap(true);
    ::close(m_wake_pipe[0]);
    ::close(m_wake_pipe[1]);
    m_wake_pipe[0] = m_wake_pipe[1] = -1;
    {
        std::lock_guard lock(m_stop_mutex);
        m_stopped = true;
    }
    log_event(Json{{"event", "stopped"}});
}

bool FakeProvider::listening() const {
    std::lock_guard lock(m_listener_mutex);
    return !m_refusing && m_main_fd >= 0;
}

std::size_t FakeProvider::connection_threads() const {
    std::lock_guard lock(m_connections_mutex);
    return m_connections.size();
}

std::vector<std::string> FakeProvider::seed(const Seed& seed) {
    const auto* reversed = std::get_if<RefundReversed>(&seed);
    if (reversed == nullptr) {
        return m_stripe.seed(seed);
    }
    try {
        return m_stripe.seed(seed);
    } catch (const SeedNotFound&) {
        // Not a Stripe or Adyen refund: Square keeps its own (its SeedNotFound if not there).
    }
    auto ids = m_square.seed_refund_reversed(*reversed);
    m_stripe.count_seeded(seed_kind(seed), ids.size());
    return ids;
}

nlohmann::ordered_json FakeProvider::ledger(LedgerOptions options) const {
    const auto lock = m_ledger.lock();
    Json j;
    m_ledger.write_counts_locked(j, options.operations);
    for (const auto& dialect : m_dialects) {
        dialect->write_ledger_locked(j, options);
    }
    j["now"] =
        std::chrono::duration_cast<std::chrono::seconds>(m_ledger.now_locked().time_since_epoch())
            .count();
    return j;
}

void FakeProvider::set_faults(FaultConfig config) {
    m_ledger.set_faults(std::move(config));
    apply_refusal();
}

void FakeProvider::reset() {
    {
        const auto lock = m_ledger.lock();
        m_ledger.reset_locked();
        for (const auto& dialect : m_dialects) {
            dialect->reset_locked();
        }
    }
    open_gate();
    {
        std::lock_guard lock(m_listener_mutex);
        if (m_refusing) {
            m_refuse_until = SteadyClock::now();
        }
    }
    wake();
}

void FakeProvider::wake() {
    const int fd = m_wake_pipe[1];
    if (fd >= 0) {
        const char byte = 'w';
        if (::write(fd, &byte, 1) < 0) {
            // Full pipe: the acceptor is already due to wake.
        }
    }
}

bool FakeProvider::pause(std::chrono::milliseconds duration) {
    std::unique_lock lock(m_stop_mutex);
    if (duration.count() <= 0) {
        return !m_stopping;
    }
    return !m_stop_cv.wait_for(lock, duration, [this] { return m_stopping; });
}

bool FakeProvider::request_pause(std::chrono::milliseconds latency) {
    {
        std::unique_lock lock(m_stop_mutex);
        ++m_held;
        m_stop_cv.wait(lock, [this] { return m_stopping || !m_gate_closed; });
        --m_held;
        if (m_stopping) {
            return false;
        }
    }
    return pause(latency);
}

void FakeProvider::close_gate() {
    std::lock_guard lock(m_stop_mutex);
    m_gate_closed = true;
}

void FakeProvider::open_gate() {
    {
        std::lock_guard lock(m_stop_mutex);
        m_gate_closed = false;
    }
    m_stop_cv.notify_all();
}

std::size_t FakeProvider::held() const {
    std::lock_guard lock(m_stop_mutex);
    return m_held;
}

void FakeProvider::apply_refusal() {
    std::chrono::milliseconds window{0};
    {
        std::lock_guard lock(m_listener_mutex);
        if (m_refusing || m_main_fd < 0) {
            return; // a refusal still due waits for the listener to reopen
        }
        const auto due = m_ledger.take_refusal();
        if (!due) {
            return;
        }
        window = *due;
        // Stops listening at once (connects get ECONNREFUSED), the port still bound to the socket.
        ::shutdown(m_main_fd, SHUT_RDWR);
        m_refusing = true;
        m_refuse_until = SteadyClock::now() + window;
    }
    Json event;
    event["event"] = "refusing";
    event["port"] = m_port;
    event["refuse_ms"] = window.count();
    log_event(event);
    wake();
}

void FakeProvider::reopen_listener() {
    // Under m_listener_mutex, from the acceptor: the socket shut down still holds the port.
    if (::listen(m_main_fd, k_backlog) != 0) {
        throw_errno("listen again on 127.0.0.1:" + std::to_string(m_port));
    }
    m_refusing = false;
}

Reply FakeProvider::handle(const http::Request& request) {
    const Wait wait = [this](std::chrono::milliseconds d) { return request_pause(d); };
    for (const auto& dialect : m_dialects) {
        if (dialect->serves(request)) {
            return dialect->handle(request, wait);
        }
    }
    return m_stripe.handle(request, wait);
}

void FakeProvider::accept_loop() {
    bool rebind_failed_logged = false;
    for (;;) {
        {
            std::lock_guard lock(m_stop_mutex);
            if (m_stopping) {
                break;
            }
        }
        reap(false);

        auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(k_acceptor_tick);
        bool reopened = false;
        int main_fd = -1;
        {
            std::lock_guard lock(m_listener_mutex);
            if (m_refusing) {
                const auto now = SteadyClock::now();
                if (now >= m_refuse_until) {
                    try {
                        reopen_listener();
                        reopened = true;
                    } catch (const std::system_error& e) {
                        if (!rebind_failed_logged) {
                            log_event(Json{{"event", "rebind_failed"}, {"error", e.what()}});
                            rebind_failed_logged = true;
                        }
                        timeout = k_rebind_retry;
                    }
                } else {
                    timeout = std::min(timeout, std::chrono::ceil<std::chrono::milliseconds>(
                                                    m_refuse_until - now));
                }
            }
            main_fd = m_refusing ? -1 : m_main_fd;
        }
        if (reopened) {
            rebind_failed_logged = false;
            log_event(Json{{"event", "listening_again"}, {"port", m_port}});
            apply_refusal(); // the next `refuse` in line starts a new window
            continue;
        }

        pollfd fds[3] = {
            {m_wake_pipe[0], POLLIN, 0}, {m_admin_fd, POLLIN, 0}, {main_fd, POLLIN, 0}};
        const nfds_t count = main_fd >= 0 ? 3 : 2;
        const int ready = ::poll(fds, count, static_cast<int>(timeout.count()));
        if (ready <= 0) {
            continue;
        }
        if ((fds[0].revents & POLLIN) != 0) {
            char drain[64];
            while (::read(m_wake_pipe[0], drain, sizeof drain) > 0) {
            }
        }
        if ((fds[1].revents & POLLIN) != 0) {
            accept_one(m_admin_fd, true);
        }
        if (count == 3 && fds[2].revents != 0) {
            std::lock_guard lock(m_listener_mutex);
            if (!m_refusing && m_main_fd == main_fd) {
                accept_one(main_fd, false);
            }
        }
    }
}

void FakeProvider::accept_one(int listener, bool admin) {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
        return; // gone before accept (EAGAIN, ECONNABORTED), or out of descriptors
    }
    const timeval idle = to_timeval(m_options.idle_timeout);
    const timeval send_timeout = to_timeval(k_send_timeout);
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof idle);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

    std::lock_guard lock(m_connections_mutex);
    if (m_connections.size() >= m_options.max_connections) {
        ::close(fd);
        return;
    }
    auto connection = std::make_unique<Connection>();
    connection->fd = fd;
    connection->admin = admin;
    Connection& ref = *connection;
    m_connections.push_back(std::move(connection));
    ref.thread = std::thread(&FakeProvider::serve, this, std::ref(ref));
}

void FakeProvider::reap(bool all) {
    std::list<std::unique_ptr<Connection>> finished;
    {
        std::lock_guard lock(m_connections_mutex);
        for (auto it = m_connections.begin(); it != m_connections.end();) {
            if (all || (*it)->done) {
                finished.push_back(std::move(*it));
                it = m_connections.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (const auto& c : finished) {
        if (c->thread.joinable()) {
            c->thread.join();
        }
    }
}

void FakeProvider::serve(Connection& connection) {
    http::Connection conn(connection.fd, m_options.limits);
    bool reset_connection = false;
    try {
        for (;;) {
            http::ReadResult read = conn.read_request();
            if (read.status == http::ReadStatus::closed) {
                break;
            }
            const auto started = SteadyClock::now();
            const auto received = std::chrono::system_clock::now();
            const http::Request& request = read.request;
            Reply reply;
            if (read.status == http::ReadStatus::invalid) {
                reply.response = admin_error(read.error_status, read.error);
                conn.write_all(http::serialize(reply.response, false));
                log_request(connection.admin, request, read.error_status, reply, received,
                            SteadyClock::now() - started);
                linger_close(connection.fd);
                break;
            }
            if (connection.admin) {
                reply.response = admin(request);
            } else {
                reply = handle(request);
                if (request.method == "POST") {
                    apply_refusal(); // a refusal drawn by rate starts after this POST
                }
            }
            bool stopping = false;
            {
                std::lock_guard lock(m_stop_mutex);
                stopping = m_stopping;
            }
            bool keep = request.keep_alive && !stopping;
            int status = 0;
            switch (reply.action) {
            case SocketAction::respond:
                status = reply.response.status;
                if (!conn.write_all(http::serialize(reply.response, keep))) {
                    keep = false;
                }
                break;
            case SocketAction::close_fin:
                keep = false;
                break;
            case SocketAction::close_rst:
                keep = false;
                reset_connection = true;
                break;
            case SocketAction::hang_then_fin:
                keep = false;
                pause(m_ledger.faults().hang);
                break;
            case SocketAction::partial_then_fin: {
                keep = false;
                status = reply.response.status;
                const std::string bytes = http::serialize(reply.response, false);
                const std::size_t head = bytes.size() - reply.response.body.size();
                conn.write_all(
                    std::string_view(bytes).substr(0, head + reply.response.body.size() / 2));
                break;
            }
            }
            log_request(connection.admin, request, status, reply, received,
                        SteadyClock::now() - started);
            if (!keep) {
                break;
            }
        }
    } catch (const std::exception& e) {
        log_event(Json{{"event", "connection_error"}, {"error", e.what()}});
    }
    {
        std::lock_guard lock(m_connections_mutex);
        if (reset_connection) {
            const linger abort_on_close{1, 0};
            ::setsockopt(connection.fd, SOL_SOCKET, SO_LINGER, &abort_on_close,
                         sizeof abort_on_close);
        }
        ::close(connection.fd);
        connection.fd = -1;
    }
    connection.done = true;
}

http::Response FakeProvider::admin(const http::Request& request) {
    const std::string& path = request.path;
    const std::string& method = request.method;
    if (path == "/__admin/health" && method == "GET") {
        Json body;
        body["status"] = "ok";
        body["port"] = m_port;
        body["admin_port"] = m_admin_port;
        body["listening"] = listening();
        body["idempotency"] = m_options.account.idempotency;
        body["lookup"] = m_options.account.lookup;
        return admin_json(200, body);
    }
    if (path == "/__admin/ledger" && method == "GET") {
        const auto query = http::parse_form(request.query);
        if (!query) {
            return admin_error(400, "malformed query string");
        }
        LedgerOptions options;
        for (const auto& [name, value] : *query) {
            bool* flag = name == "intents"      ? &options.payment_intents
                         : name == "operations" ? &options.operations
                                                : nullptr;
            if (flag == nullptr || (value != "true" && value != "false")) {
                return admin_error(400, "expected intents=true|false and operations=true|false, "
                                        "got " +
                                            name + "=" + value);
            }
            *flag = value == "true";
        }
        return admin_json(200, ledger(options));
    }
    if (path == "/__admin/seed" && method == "POST") {
        const auto parsed = nlohmann::json::parse(request.body, nullptr, false);
        if (parsed.is_discarded()) {
            return admin_error(400, "the body is not JSON");
        }
        Seed seed;
        try {
            seed = seed_from_json(parsed);
        } catch (const std::invalid_argument& e) {
            return admin_error(400, e.what());
        }
        std::vector<std::string> ids;
        try {
            ids = this->seed(seed);
        } catch (const SeedNotFound& e) {
            return admin_error(404, e.what());
        } catch (const std::invalid_argument& e) {
            return admin_error(400, e.what());
        }
        Json body;
        body["kind"] = seed_kind(seed);
        body["count"] = ids.size();
        if (std::holds_alternative<BulkSeed>(seed) && ids.size() > k_admin_max_ids) {
            body["first_id"] = ids.front(); // the oldest
            body["last_id"] = ids.back();
        } else {
            body["ids"] = ids;
        }
        return admin_json(200, body);
    }
    if (path == "/__admin/paypal/expire-tokens" && method == "POST") {
        return admin_json(200, Json{{"expired", expire_paypal_tokens()}});
    }
    if (path == "/__admin/reset" && method == "POST") {
        reset();
        return admin_json(200, Json{{"reset", true}});
    }
    if (path == "/__admin/faults" && method == "GET") {
        return admin_json(200, faults_json(m_ledger.faults()));
    }
    if (path == "/__admin/faults" && method == "POST") {
        const auto parsed = nlohmann::json::parse(request.body, nullptr, false);
        if (parsed.is_discarded()) {
            return admin_error(400, "the body is not JSON");
        }
        try {
            set_faults(FaultConfig::from_json(parsed));
        } catch (const std::invalid_argument& e) {
            return admin_error(400, e.what());
        }
        return admin_json(200, faults_json(m_ledger.faults()));
    }
    if (path == "/__admin/gate" && (method == "GET" || method == "POST")) {
        if (method == "POST") {
            const auto parsed = nlohmann::json::parse(request.body, nullptr, false);
            if (parsed.is_discarded() || !parsed.is_object() || parsed.size() != 1 ||
                !parsed.contains("closed") || !parsed["closed"].is_boolean()) {
                return admin_error(400, R"(expected {"closed": true|false})");
            }
            parsed["closed"].get<bool>() ? close_gate() : open_gate();
        }
        std::lock_guard lock(m_stop_mutex);
        return admin_json(200, Json{{"closed", m_gate_closed}, {"held", m_held}});
    }
    if (path == "/__admin/clock" && method == "POST") {
        const auto parsed = nlohmann::json::parse(request.body, nullptr, false);
        if (parsed.is_discarded() || !parsed.is_object() || parsed.size() != 1 ||
            !parsed.contains("advance_s") || !parsed["advance_s"].is_number_integer() ||
            parsed["advance_s"].get<std::int64_t>() < 0) {
            return admin_error(400, R"(expected {"advance_s": <non-negative integer>})");
        }
        m_ledger.advance_clock(std::chrono::seconds(parsed["advance_s"].get<std::int64_t>()));
        const auto now = m_ledger.now().time_since_epoch();
        return admin_json(
            200, Json{{"now", std::chrono::duration_cast<std::chrono::seconds>(now).count()}});
    }
    return admin_error(404, "no admin route " + method + " " + path);
}

void FakeProvider::log_request(bool admin, const http::Request& request, int status,
                               const Reply& reply, std::chrono::system_clock::time_point received,
                               SteadyClock::duration took) {
    Json line;
    line["ts"] = iso_now();
    line["received_us"] =
        std::chrono::duration_cast<std::chrono::microseconds>(received.time_since_epoch()).count();
    line["listener"] = admin ? "admin" : "main";
    line["method"] = request.method;
    line["path"] = request.path;
    line["status"] = status;
    line["action"] = to_string(reply.action);
    if (reply.fault != Fault::none) {
        line["fault"] = to_string(reply.fault);
    }
    if (!reply.operation_id.empty()) {
        line["operation_id"] = reply.operation_id;
        line["executed"] = reply.executed;
        line["replayed"] = reply.replayed;
    }
    line["ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
    log_event(line);
}

void FakeProvider::log_event(const Json& event) {
    const std::string text = dump(event);
    std::lock_guard lock(m_log_mutex);
    m_log << text << '\n' << std::flush;
}

} // namespace payrecon::fake
