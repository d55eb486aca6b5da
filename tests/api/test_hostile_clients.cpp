// `payrecon serve` against hostile clients (issue 14): slow and idle connections by the thousand,
// oversize and endless bodies, header floods, many connections from one address, and a database
// whose every worker is busy. The server is the real binary as a child process; the clients are
// plain TCP sockets on loopback, so every byte and every pause is the test's own. Assertions count
// rows; what is timed is only ever "answered at all within a generous deadline", never a threshold.
#include "tests/api/serve_process.hpp"
#include "tests/support/test_db.hpp"

#include <arpa/inet.h>
#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <fcntl.h>
#include <fstream>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <pqxx/pqxx>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace payrecon;
using namespace payrecon::testing;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// A thousand connections need a thousand descriptors here too (and as many in serve, which raises
// its own limit to fit --max-connections).
void raise_descriptor_limit() {
    rlimit limit{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &limit) == 0);
    limit.rlim_cur = limit.rlim_max;
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &limit) == 0);
    REQUIRE(limit.rlim_cur >= 2500);
}

// The helpers below assert nothing (Catch2's assertions are for the main thread only); the tests
// check what they return.

// A blocking TCP connection to 127.0.0.1:port, from `source` (another loopback address) if given;
// -1 if it fails.
int try_connect(int port, const char* source = nullptr) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    sockaddr_in local{};
    local.sin_family = AF_INET;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if ((source != nullptr &&
         (::inet_pton(AF_INET, source, &local.sin_addr) != 1 ||
          ::bind(fd, reinterpret_cast<const sockaddr*>(&local), sizeof local) != 0)) ||
        ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

int connect_loopback(int port, const char* source = nullptr) {
    const int fd = try_connect(port, source);
    REQUIRE(fd >= 0);
    return fd;
}

// False if the connection failed before all of `bytes` went out.
bool send_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n <= 0) {
            return false;
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

struct Answer {
    int status = 0; // 0: no HTTP answer
    std::string head;
    std::string body;
    bool closed = false; // the server closed the connection (EOF or reset) after it
    std::string problem_type() const {
        const auto j = nlohmann::json::parse(body, nullptr, false);
        return j.is_object() ? j.value("type", "") : "";
    }
};

// Reads one response (its head and Content-Length body) within `deadline`; with `to_close`, also
// waits for the server to close the connection.
Answer read_answer(int fd, std::chrono::milliseconds deadline, bool to_close = false) {
    Answer a;
    std::string in;
    const auto until = Clock::now() + deadline;
    std::size_t need = std::string::npos;
    for (;;) {
        const auto end = in.find("\r\n\r\n");
        if (a.status == 0 && end != std::string::npos) {
            a.head = in.substr(0, end);
            if (a.head.starts_with("HTTP/1.1 ") && a.head.size() >= 12) {
                a.status = std::stoi(a.head.substr(9, 3));
            }
            const auto cl = a.head.find("Content-Length: ");
            need = end + 4 + (cl == std::string::npos ? 0 : std::stoul(a.head.substr(cl + 16)));
        }
        if (need != std::string::npos && in.size() >= need && !to_close) {
            break;
        }
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
        pollfd p{fd, POLLIN, 0};
        if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
            break;
        }
        char buf[65536];
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) {
            a.closed = true;
            break;
        }
        in.append(buf, static_cast<std::size_t>(n));
    }
    if (need != std::string::npos) {
        a.body = in.substr(a.head.size() + 4, need - a.head.size() - 4);
    }
    return a;
}

// One request on a new connection that asks to be closed after it. Status 0 if there was no answer.
Answer round_trip(int port, const std::string& bytes, std::chrono::milliseconds deadline = 30s) {
    const int fd = try_connect(port);
    if (fd < 0) {
        return {};
    }
    send_all(fd, bytes); // if refused, the answer (a 503) may still be there to read
    Answer a = read_answer(fd, deadline);
    ::close(fd);
    return a;
}

std::string create_bytes(const std::string& api_key, const std::string& key,
                         const std::string& body) {
    return "POST /v1/payments HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + api_key +
           "\r\nIdempotency-Key: " + key +
           "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\nConnection: close\r\n\r\n" + body;
}

const std::string k_healthz =
    "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

// Whether serve's memory is glibc's allocator, whose resident size says what serve holds. Under
// AddressSanitizer it is not: its allocator keeps freed memory in quarantine (256 MB) by design, so
// the tests that bound serve's RSS check what they can count there and leave the RSS to the normal
// build.
#ifdef __SANITIZE_ADDRESS__
constexpr bool k_rss_is_meaningful = false;
#else
constexpr bool k_rss_is_meaningful = true;
#endif

// VmRSS of process `pid` in KiB.
long rss_kib(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);) {
        if (line.starts_with("VmRSS:")) {
            return std::stol(line.substr(6));
        }
    }
    FAIL("no VmRSS for " << pid);
    return 0;
}

struct Scope {
    std::unique_ptr<store::Db> db = connect();
    TestTenant tenant = make_tenant(*db, "hostile");
    TestPrincipal writer = make_principal(*db, tenant);
    std::string key() const { return writer.api_key.reveal(); }
    long long payments() const { return count_rows("payments", tenant.tenant_id); }
    long long records() const { return count_rows("idempotency_records", tenant.tenant_id); }
};

enum class Peek { open, closed, answered };

// Whether the server has closed `fd` (EOF or reset), or sent something on it, without waiting.
Peek peek(int fd) {
    char c = 0;
    const ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
    if (n > 0) {
        return Peek::answered;
    }
    return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) ? Peek::closed : Peek::open;
}

void check_exited_cleanly(const std::optional<int>& status) {
    REQUIRE(status.has_value());
    CHECK(WIFEXITED(*status));
    CHECK(WEXITSTATUS(*status) == 0);
}

// `count` connections that each send `prefix`, then one more byte of `drip` per second on every
// connection, until the server has cut them all or `give_up` passes. Meanwhile a normal client
// (healthz and one payment) must be answered. Returns when the drippers are all cut.
void drip_and_serve(const Scope& s, int port, std::size_t count, const std::string& prefix,
                    const std::string& drip) {
    raise_descriptor_limit();
    std::vector<int> fds;
    for (std::size_t i = 0; i < count; ++i) {
        fds.push_back(connect_loopback(port));
        REQUIRE(send_all(fds.back(), prefix));
    }
    const auto started = Clock::now();
    std::atomic<std::size_t> cut{0};
    std::atomic<std::size_t> answered{0};
    std::thread dripper([&] {
        std::vector<bool> open(fds.size(), true);
        for (std::size_t sent = 0; Clock::now() < started + 60s; ++sent) {
            // The pace of the attack: one byte a second on every connection still open.
            std::this_thread::sleep_for(1s);
            for (std::size_t i = 0; i < fds.size(); ++i) {
                if (!open[i]) {
                    continue;
                }
                const Peek state = peek(fds[i]);
                if (state != Peek::open ||
                    ::send(fds[i], &drip[sent % drip.size()], 1, MSG_NOSIGNAL) < 0) {
                    open[i] = false;
                    ++cut;
                    answered += state == Peek::answered ? 1 : 0;
                }
            }
            if (cut.load() == fds.size()) {
                return;
            }
        }
    });
    // A normal client while every dripper is still connected and dripping.
    const auto health = round_trip(port, k_healthz);
    const auto made =
        round_trip(port, create_bytes(s.key(), "normal-1", payment_body("ref-normal-1")));
    dripper.join();
    const auto lasted = Clock::now() - started;
    for (const int fd : fds) {
        ::close(fd);
    }
    CHECK(health.status == 200);
    CHECK(made.status == 202);
    INFO("drippers lasted " << std::chrono::duration_cast<std::chrono::milliseconds>(lasted).count()
                            << " ms");
    CHECK(cut.load() == count);  // every dripper was cut while it still dripped
    CHECK(answered.load() == 0); // cut, not answered
    CHECK(lasted < 60s);         // ...before the drip's own end (generous)
    CHECK(s.payments() == 1);    // only the normal client's payment
    CHECK(s.records() == 1);
}

// Streams `next()` pieces on `fd` until the server answers or closes, or `limit` bytes are sent;
// returns the answer and how many bytes went out.
template <typename Next>
std::pair<Answer, std::size_t> stream_until_answered(int fd, std::size_t limit, Next next) {
    REQUIRE(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
    std::size_t sent = 0;
    std::string piece;
    std::size_t offset = 0;
    while (sent < limit) {
        pollfd p{fd, POLLIN | POLLOUT, 0};
        REQUIRE(::poll(&p, 1, 30'000) > 0);
        if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
            break;
        }
        if (offset == piece.size()) {
            piece = next();
            offset = 0;
        }
        const ssize_t n = ::send(fd, piece.data() + offset, piece.size() - offset, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                continue;
            }
            break; // reset: the answer, if any, is in the receive buffer
        }
        offset += static_cast<std::size_t>(n);
        sent += static_cast<std::size_t>(n);
    }
    REQUIRE(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0);
    return {read_answer(fd, 30s, true), sent};
}

// The value of the Prometheus sample `series` in serve's /metrics, or -1.
double metric(int port, const std::string& series) {
    const auto m =
        round_trip(port, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    std::istringstream in(m.body);
    for (std::string line; std::getline(in, line);) {
        if (line.starts_with(series + " ")) {
            return std::stod(line.substr(series.size() + 1));
        }
    }
    return -1;
}

} // namespace

TEST_CASE("api: 1,000 connections dripping header bytes are cut at the header deadline, and a "
          "normal client is answered meanwhile",
          "[api][db][hostile]") {
    // cpp-httplib gave each connection a thread: 16 drippers made serve answer nobody, and one kept
    // sending headers for 42 s.
    Scope s;
    SecretFile secret;
    ServeProcess server(secret, 4, {},
                        {"--header-timeout", "2s", "--max-connections-per-peer", "2000"});
    drip_and_serve(s, server.port(), 1000, "POST /v1/payments HTTP/1.1\r\nHost: 127.0.0.1\r\n",
                   "X-Drip: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    CHECK(metric(server.port(), R"(payrecon_http_deadlines_total{phase="header"})") >= 1000);
    check_exited_cleanly(server.terminate());
}

TEST_CASE("api: 1,000 connections dripping a body are cut at the body deadline, store nothing, "
          "and a normal client is answered meanwhile",
          "[api][db][hostile]") {
    Scope s;
    SecretFile secret;
    ServeProcess server(secret, 4, {},
                        {"--body-timeout", "2s", "--max-connections-per-peer", "2000"});
    const std::string body = payment_body("ref-drip");
    drip_and_serve(s, server.port(), 1000,
                   "POST /v1/payments HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                       s.key() +
                       "\r\nIdempotency-Key: drip\r\nContent-Type: application/json\r\n"
                       "Content-Length: " +
                       std::to_string(body.size()) + "\r\n\r\n",
                   body);
    CHECK(metric(server.port(), R"(payrecon_http_deadlines_total{phase="body"})") >= 1000);
    check_exited_cleanly(server.terminate());
}

TEST_CASE("api: a Content-Length over the cap gets 413 before any of the body is sent",
          "[api][db][hostile]") {
    // With a long body deadline, the answer can only come from the declared length.
    Scope s;
    SecretFile secret;
    ServeProcess server(secret, 4, {}, {"--body-timeout", "10m"});
    const int fd = connect_loopback(server.port());
    REQUIRE(send_all(fd, "POST /v1/payments HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                             s.key() +
                             "\r\nIdempotency-Key: k-400mib\r\nContent-Type: application/json\r\n"
                             "Content-Length: 419430400\r\n\r\n"));
    const Answer a = read_answer(fd, 30s, true);
    ::close(fd);
    CHECK(a.status == 413);
    CHECK(a.problem_type() == "request_too_large");
    CHECK(a.closed);
    CHECK(s.payments() == 0);
    CHECK(s.records() == 0);
    check_exited_cleanly(server.terminate());
}

TEST_CASE("api: a 400 MiB chunked body gets 413 once it passes the cap, and serve's memory grows "
          "by less than 10 MB",
          "[api][db][hostile]") {
    // cpp-httplib buffered it whole before the 413: RSS rose by 358 MB, without a credential.
    Scope s;
    SecretFile secret;
    ServeProcess server(secret, 4);
    REQUIRE(round_trip(server.port(), k_healthz).status == 200);
    const long before = rss_kib(server.pid());
    const int fd = connect_loopback(server.port());
    REQUIRE(send_all(
        fd, "POST /v1/payments HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: k-chunked\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"));
    const std::string chunk = "10000\r\n" + std::string(0x10000, ' ') + "\r\n";
    const auto [answer, sent] =
        stream_until_answered(fd, std::size_t{400} << 20, [&] { return chunk; });
    const long after = rss_kib(server.pid());
    ::close(fd);
    INFO("RSS " << before << " KiB before, " << after << " KiB after; " << sent
                << " bytes sent before the answer");
    CHECK(answer.status == 413);
    CHECK(answer.problem_type() == "request_too_large");
    CHECK(answer.closed);
    CHECK(sent < (std::size_t{400} << 20));
    CHECK(after - before < 10 * 1024);
    CHECK(s.payments() == 0);
    CHECK(round_trip(server.port(), k_healthz).status == 200);
    check_exited_cleanly(server.terminate());
}

TEST_CASE("api: 2,000,000 headers get 431 and a closed connection, and serve's memory grows by "
          "less than 10 MB",
          "[api][db][hostile]") {
    // cpp-httplib accepted them all (RSS +32 MB) and answered 200.
    Scope s;
    SecretFile secret;
    ServeProcess server(secret, 4);
    REQUIRE(round_trip(server.port(), k_healthz).status == 200);
    const long before = rss_kib(server.pid());
    const int fd = connect_loopback(server.port());
    REQUIRE(send_all(fd, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
    std::string batch;
    for (int i = 0; i < 10'000; ++i) {
        batch += "X-Flood: " + std::to_string(i) + "\r\n";
    }
    const auto [answer, sent] =
        stream_until_answered(fd, batch.size() * 200, [&] { return batch; });
    const long after = rss_kib(server.pid());
    ::close(fd);
    INFO("RSS " << before << " KiB before, " << after << " KiB after; " << sent
                << " bytes of headers sent before the answer");
    CHECK(answer.status == 431);
    CHECK(answer.problem_type() == "request_header_fields_too_large");
    CHECK(answer.closed);
    CHECK(after - before < 10 * 1024);
    // 200 fields in a few KiB: under the size limit, over the count.
    std::string many = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
    for (int i = 0; i < 200; ++i) {
        many += "X-" + std::to_string(i) + ": 1\r\n";
    }
    CHECK(round_trip(server.port(), many + "\r\n").status == 431);
    CHECK(round_trip(server.port(), k_healthz).status == 200);
    CHECK(s.payments() == 0);
    check_exited_cleanly(server.terminate());
}

TEST_CASE("api: connections from one address beyond the per-peer cap are refused, another address "
          "is served, and a request succeeds once under the cap",
          "[api][db][hostile]") {
    Scope s;
    SecretFile secret;
    ServeProcess server(secret, 4, {},
                        {"--max-connections-per-peer", "8", "--header-timeout", "10m"});
    std::vector<int> held;
    for (int i = 0; i < 8; ++i) {
        held.push_back(connect_loopback(server.port()));
    }
    // The ninth from 127.0.0.1: a 503 and a close, without its request being read.
    const int ninth = connect_loopback(server.port());
    const Answer refused = read_answer(ninth, 30s, true);
    ::close(ninth);
    CHECK(refused.closed);
    CHECK((refused.status == 503 || refused.status == 0)); // a reset may beat the 503
    const auto over =
        round_trip(server.port(), create_bytes(s.key(), "k-peer", payment_body("ref-peer")));
    CHECK(over.status != 202);
    CHECK(s.payments() == 0);
    // Another loopback address has its own count.
    const int other = connect_loopback(server.port(), "127.0.0.2");
    REQUIRE(send_all(other, k_healthz));
    CHECK(read_answer(other, 30s).status == 200);
    ::close(other);
    // One of the eight goes: the address is under its cap again.
    ::close(held.back());
    held.pop_back();
    // serve counts a connection until it has read the client's close, so a connection made right
    // after another closed may still be over the cap: retry while refused. The key makes a retry of
    // an accepted request a replay, never a second payment.
    int made = 0;
    const bool served = wait_until(
        [&] {
            made = round_trip(server.port(),
                              create_bytes(s.key(), "k-peer", payment_body("ref-peer")), 5s)
                       .status;
            return made != 503 && made != 0;
        },
        30s);
    CHECK(served);
    CHECK(made == 202);
    CHECK(s.payments() == 1);
    CHECK(s.records() == 1);
    for (const int fd : held) {
        ::close(fd);
    }
    check_exited_cleanly(server.terminate());
}

TEST_CASE("api: 1,000 idle keep-alive connections stay open and a normal client is served",
          "[api][db][hostile]") {
    Scope s;
    SecretFile secret;
    ServeProcess server(secret, 4, {},
                        {"--idle-timeout", "10m", "--max-connections-per-peer", "2000"});
    raise_descriptor_limit();
    std::vector<int> idle;
    for (int i = 0; i < 1000; ++i) {
        idle.push_back(connect_loopback(server.port()));
        REQUIRE(send_all(idle.back(),
                         "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")); // kept alive
    }
    int answered = 0;
    for (const int fd : idle) {
        const Answer a = read_answer(fd, 30s);
        answered += a.status == 200 && !a.closed ? 1 : 0;
    }
    CHECK(answered == 1000);
    const auto made =
        round_trip(server.port(), create_bytes(s.key(), "k-idle", payment_body("ref-idle")));
    CHECK(made.status == 202);
    CHECK(s.payments() == 1);
    CHECK(metric(server.port(), "payrecon_http_connections_open") >= 1000);
    int still_open = 0;
    for (const int fd : idle) {
        still_open += peek(fd) == Peek::open ? 1 : 0;
    }
    CHECK(still_open == 1000);
    // And each of them can still be used.
    REQUIRE(send_all(idle.front(), k_healthz));
    CHECK(read_answer(idle.front(), 30s).status == 200);
    for (const int fd : idle) {
        ::close(fd);
    }
    check_exited_cleanly(server.terminate());
}

TEST_CASE("api: with every database worker busy, a request waits a bounded time and gets 503 with "
          "Retry-After, and nothing is stored for it",
          "[api][db][hostile]") {
    Scope s;
    SecretFile secret;
    ServeProcess server(secret, 1, {}, {"--queue-length", "1", "--queue-timeout", "1s"});
    // The only worker blocks on a row the test holds: this tenant's record of key k-held, inserted
    // and not committed, so the worker's insert of that key waits for this transaction. (A lock of
    // the whole table would stall every other test that runs alongside on the same database.)
    pqxx::connection locker(database_url());
    pqxx::work lock_tx(locker);
    const std::string xid =
        lock_tx.exec1("SELECT mod(txid_current(), 4294967296)::text")[0].as<std::string>();
    lock_tx.exec_params0(
        "INSERT INTO idempotency_records (tenant_id, principal_id, operation, idempotency_key, "
        "request_hash, expires_at) VALUES ($1::uuid, $2::uuid, 'create_payment', 'k-held', "
        "decode(repeat('00', 32), 'hex'), now() + interval '1 hour')",
        s.tenant.tenant_id, s.writer.principal.principal_id);
    Answer held;
    std::thread holder([&] {
        held = round_trip(server.port(), create_bytes(s.key(), "k-held", payment_body("ref-held")),
                          60s);
    });
    pqxx::connection watcher(database_url());
    const bool blocked = wait_until(
        [&] {
            pqxx::read_transaction tx(watcher);
            return tx.exec_params1("SELECT count(*) FROM pg_locks WHERE NOT granted AND "
                                   "locktype = 'transactionid' AND transactionid::text = $1",
                                   xid)[0]
                       .as<long>() > 0;
        },
        30s);
    REQUIRE(blocked);
    // One request waits in the queue (its length is 1) ...
    Answer waited;
    std::thread waiter([&] {
        waited = round_trip(server.port(),
                            create_bytes(s.key(), "k-waits", payment_body("ref-waits")), 60s);
    });
    // ... which /metrics shows, answered while no worker is free ...
    REQUIRE(
        wait_until([&] { return metric(server.port(), "payrecon_db_queue_waiting") == 1; }, 30s));
    // ... so a third finds the queue full and is refused at once.
    const auto full =
        round_trip(server.port(), create_bytes(s.key(), "k-full", payment_body("ref-full")));
    waiter.join(); // the queue timeout answers it
    CHECK(full.status == 503);
    CHECK(full.head.find("Retry-After: 1") != std::string::npos);
    CHECK(waited.status == 503);
    CHECK(waited.head.find("Retry-After: 1") != std::string::npos);
    CHECK(waited.problem_type() == "service_unavailable");
    lock_tx.abort();
    holder.join();
    CHECK(held.status == 202);
    CHECK(s.payments() == 1); // only the request that had the worker
    CHECK(query_value("SELECT count(*) FROM idempotency_records WHERE tenant_id = $1::uuid AND "
                      "idempotency_key IN ('k-waits', 'k-full')",
                      s.tenant.tenant_id) == "0");
    // The retry with the same key is a first request.
    const auto retried =
        round_trip(server.port(), create_bytes(s.key(), "k-waits", payment_body("ref-waits")));
    CHECK(retried.status == 202);
    CHECK(retried.head.find("Idempotent-Replayed") == std::string::npos);
    CHECK(s.payments() == 2);
    CHECK(s.records() == 2);
    CHECK(metric(server.port(), "payrecon_db_queue_rejected_total") == 2);
    check_exited_cleanly(server.terminate());
}

namespace {

// A connection that asks for `request` and never reads: its receive buffer is kept small (set
// before the connect), so that the answer stays in serve's hands instead of the kernel's.
int ask_and_never_read(int port, const char* source, const std::string& request) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    const int small = 4096;
    REQUIRE(::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small) == 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    REQUIRE(::inet_pton(AF_INET, source, &local.sin_addr) == 1);
    REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&local), sizeof local) == 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(send_all(fd, request));
    return fd;
}

// The head of what the server has sent on `fd` so far, read without consuming it ("" if nothing
// yet).
std::string peek_head(int fd) {
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT | MSG_PEEK);
    if (n <= 0) {
        return {};
    }
    const std::string in(buf, static_cast<std::size_t>(n));
    return in.substr(0, in.find("\r\n\r\n"));
}

} // namespace

TEST_CASE("api: a reader key asking for 4 MB pages of events on 100 connections and reading none "
          "is held to its allowance: the rest get 429 with Retry-After, another key and /healthz "
          "are served, memory stays bounded and goes back after the close",
          "[api][db][hostile]") {
    // Issue 36 item 6: any key, a reader's included, could ask for GET /v1/events?limit=1000
    // (569 KiB) on 3,000 connections and never read: serve's RSS went 171 -> 841 MB, /healthz
    // timed out, a create took 3.4 s. Here each page is larger than the kernel's largest send
    // buffer (4 MiB), so that every answer not read stays partly in serve's hands.
    Scope s;
    const TestPrincipal reader = make_principal(*s.db, s.tenant, Role::reader);
    exec_sql("INSERT INTO outbox (tenant_id, aggregate_type, aggregate_id, event_type, payload, "
             "publish_seq, published_at) SELECT '" +
             s.tenant.tenant_id +
             "'::uuid, 'payment', gen_random_uuid(), 'payment.succeeded', "
             "jsonb_build_object('n', n, 'pad', repeat('x', 4200)), n, now() "
             "FROM generate_series(1, 1000) AS n");
    const std::string events = "GET /v1/events?limit=1000 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "Authorization: Bearer " +
                               reader.api_key.reveal() + "\r\n\r\n";
    SecretFile secret;
    const int workers = 16;
    // Each page takes a worker a while to build, more on a loaded machine: a request waiting longer
    // than serve's queue timeout (2 s) would be answered 503, busy, which is not what this test
    // is about (a clean-clone run under load saw some); a long one keeps every request in line.
    ServeProcess server(secret, workers, {}, {"--queue-timeout", "5m"});
    raise_descriptor_limit();
    // One answer, read: how big a page is.
    const Answer page = round_trip(server.port(), events);
    REQUIRE(page.status == 200);
    REQUIRE(page.body.size() > 4u << 20u);
    const long before = rss_kib(server.pid());

    std::vector<int> fds;
    const char* sources[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4"};
    for (int i = 0; i < 100; ++i) {
        fds.push_back(ask_and_never_read(server.port(), sources[i % 3], events));
    }
    // Every one of them is answered (a 200 begun, or a 429), none read.
    std::size_t ok = 0;
    std::size_t throttled = 0;
    std::size_t with_retry_after = 0;
    std::string other; // the head of an answer neither 200 nor 429, for the failure's message
    const bool answered = wait_until(
        [&] {
            ok = throttled = with_retry_after = 0;
            for (const int fd : fds) {
                const std::string head = peek_head(fd);
                const bool is_429 = head.starts_with("HTTP/1.1 429");
                if (!head.empty() && !is_429 && !head.starts_with("HTTP/1.1 200")) {
                    other = head;
                }
                ok += head.starts_with("HTTP/1.1 200") ? 1u : 0u;
                throttled += is_429 ? 1u : 0u;
                with_retry_after +=
                    is_429 && head.find("Retry-After: 1") != std::string::npos ? 1u : 0u;
            }
            return !other.empty() || ok + throttled == fds.size();
        },
        180s);
    INFO(ok << " answered 200, " << throttled << " 429, of " << fds.size()
            << "; another: " << other);
    REQUIRE(answered);
    REQUIRE(other.empty());
    const long held = rss_kib(server.pid());
    const double unsent = metric(server.port(), "payrecon_http_unsent_bytes");
    // The key may leave 16 MiB unread; a request is admitted while it has less, so at most the
    // pages being built by the workers at that moment come on top.
    const double bound = static_cast<double>((16u << 20u) + workers * page.body.size());
    INFO("RSS " << before << " KiB before, " << held << " KiB with " << ok << " answers unread ("
                << throttled << " refused 429), " << unsent << " bytes unsent of " << bound);
    CHECK(ok >= 1u);
    CHECK(ok <= 64u); // the key's requests in hand
    CHECK(throttled >= 100u - 64u);
    CHECK(with_retry_after == throttled);
    CHECK(unsent > 0);
    CHECK(unsent <= bound);
    // 100 unread pages would hold 400 MB (and more while each is built).
    if (k_rss_is_meaningful) {
        CHECK(static_cast<double>(held - before) * 1024 < 2 * bound);
    }
    // The same key on another connection is refused while it holds that much, with the reason...
    const Answer again = round_trip(server.port(), events);
    CHECK(again.status == 429);
    CHECK(again.problem_type() == "too_many_requests");
    CHECK(again.body.find("This API key has") != std::string::npos);
    // ... while another key, and /healthz, are served as if nothing were happening.
    CHECK(round_trip(server.port(), k_healthz).status == 200);
    CHECK(round_trip(server.port(), create_bytes(s.key(), "k-allowance", payment_body("ref-a")))
              .status == 202);
    CHECK(s.payments() == 1);

    // The clients go away: their answers are released, the key is served again, and the memory
    // goes back to the system.
    for (const int fd : fds) {
        ::close(fd);
    }
    int status = 0;
    CHECK(wait_until(
        [&] {
            status = round_trip(server.port(), events).status;
            return status == 200;
        },
        30s));
    CHECK(metric(server.port(), "payrecon_http_unsent_bytes") == 0);
    long after = 0;
    const bool returned = !k_rss_is_meaningful || wait_until(
                                                      [&] {
                                                          after = rss_kib(server.pid());
                                                          return after - before < 20 * 1024;
                                                      },
                                                      30s);
    INFO("RSS " << after << " KiB after the close");
    CHECK(returned);
    check_exited_cleanly(server.terminate());
}

TEST_CASE("api: 2,000 unauthenticated connections that never read cost serve little, and their "
          "memory is handed back once they close",
          "[api][db][hostile]") {
    // Issue 36 item 6: 2,000 unauthenticated connections pinned 108 MB, and 55 MB stayed after
    // they closed.
    Scope s;
    SecretFile secret;
    ServeProcess server(secret, 4);
    raise_descriptor_limit();
    REQUIRE(round_trip(server.port(), k_healthz).status == 200);
    const long before = rss_kib(server.pid());
    const std::string events = "GET /v1/events?limit=1000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    std::vector<int> fds;
    const char* sources[] = {"127.0.0.5", "127.0.0.6",  "127.0.0.7",  "127.0.0.8",
                             "127.0.0.9", "127.0.0.10", "127.0.0.11", "127.0.0.12"};
    for (int i = 0; i < 2000; ++i) {
        fds.push_back(ask_and_never_read(server.port(), sources[i % 8], events));
    }
    std::size_t refused = 0;
    REQUIRE(wait_until(
        [&] {
            refused = 0;
            for (const int fd : fds) {
                refused += peek_head(fd).starts_with("HTTP/1.1 401") ? 1u : 0u;
            }
            return refused == fds.size();
        },
        60s));
    const long held = rss_kib(server.pid());
    INFO("RSS " << before << " KiB before, " << held << " KiB with 2,000 connections open");
    if (k_rss_is_meaningful) {
        CHECK(held - before < 40 * 1024);
    }
    for (const int fd : fds) {
        ::close(fd);
    }
    CHECK(wait_until([&] { return metric(server.port(), "payrecon_http_connections_open") <= 1; },
                     30s));
    long after = 0;
    const bool returned = !k_rss_is_meaningful || wait_until(
                                                      [&] {
                                                          after = rss_kib(server.pid());
                                                          return after - before < 10 * 1024;
                                                      },
                                                      30s);
    INFO("RSS " << after << " KiB after the close");
    CHECK(returned);
    CHECK(s.payments() == 0);
    check_exited_cleanly(server.terminate());
}
