#pragma once
// A merchant's webhook receiver for the events-out tests, on loopback: it records every request
// (the Standard Webhooks headers, the body, what it answered and when) and fails on purpose --
// a share of 500s, a share of answers slower than the relay's timeout (a 200 the relay never
// sees), a fixed status (410, 500) or no answer at all until it is stopped -- and the check of a
// request's Standard Webhooks signature, recomputed with OpenSSL directly (not payrecon's code).
#include "tests/fake_provider/http.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <random>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace payrecon::testing {

struct Received {
    std::string path;
    std::string id;        // webhook-id
    std::string timestamp; // webhook-timestamp
    std::string signature; // webhook-signature
    std::string content_type;
    std::string body;
    int status = 0;    // what the receiver answered (0: nothing, it hung)
    bool slow = false; // answered after the slow delay, past the relay's timeout
    std::chrono::steady_clock::time_point arrived;
    std::chrono::steady_clock::time_point answered;
};

struct ReceiverFaults {
    double fail_rate = 0; // answer 500
    double slow_rate = 0; // answer 200 after `slow`
    std::chrono::milliseconds slow{0};
    int fixed_status = 0; // answer this to every request (0: as the rates say)
    bool hang = false;    // never answer (until stop)
};

class Receiver {
public:
    explicit Receiver(unsigned seed = 1) : m_random(seed) {
        m_listen = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        REQUIRE(m_listen >= 0);
        const int one = 1;
        ::setsockopt(m_listen, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(m_listen, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(m_listen, 256) == 0);
        socklen_t len = sizeof a;
        REQUIRE(::getsockname(m_listen, reinterpret_cast<sockaddr*>(&a), &len) == 0);
        m_port = ntohs(a.sin_port);
        m_accept = std::thread([this] { accept_loop(); });
    }
    ~Receiver() { stop(); }
    Receiver(const Receiver&) = delete;
    Receiver& operator=(const Receiver&) = delete;

    int port() const { return m_port; }
    std::string url(const std::string& path = "/hook") const {
        return "http://127.0.0.1:" + std::to_string(m_port) + path;
    }

    void set_faults(const ReceiverFaults& f) {
        std::lock_guard lock(m_mutex);
        m_faults = f;
        m_wake.notify_all();
    }
    std::vector<Received> received() const {
        std::lock_guard lock(m_mutex);
        return m_received;
    }
    std::size_t count() const {
        std::lock_guard lock(m_mutex);
        return m_received.size();
    }
    std::size_t count_status(int status) const {
        std::lock_guard lock(m_mutex);
        std::size_t n = 0;
        for (const auto& r : m_received) {
            n += r.status == status ? 1 : 0;
        }
        return n;
    }

    void stop() {
        {
            std::lock_guard lock(m_mutex);
            if (m_stopped) {
                return;
            }
            m_stopped = true;
            for (const int fd : m_connections) {
                ::shutdown(fd, SHUT_RDWR);
            }
            m_wake.notify_all();
        }
        ::shutdown(m_listen, SHUT_RDWR);
        ::close(m_listen);
        if (m_accept.joinable()) {
            m_accept.join();
        }
        for (auto& t : m_threads) {
            t.join();
        }
    }

private:
    void accept_loop() {
        for (;;) {
            const int fd = ::accept4(m_listen, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) {
                return;
            }
            std::lock_guard lock(m_mutex);
            if (m_stopped) {
                ::close(fd);
                return;
            }
            m_connections.push_back(fd);
            m_threads.emplace_back([this, fd] { serve(fd); });
        }
    }

    void serve(int fd) {
        fake::http::Connection conn(fd, fake::http::Limits{});
        for (;;) {
            fake::http::ReadResult r = conn.read_request();
            if (r.status != fake::http::ReadStatus::ok) {
                break;
            }
            Received rec;
            rec.arrived = std::chrono::steady_clock::now();
            rec.path = r.request.path;
            const auto header = [&](const char* name) {
                const std::string* v = r.request.header(name);
                return v ? *v : std::string();
            };
            rec.id = header("webhook-id");
            rec.timestamp = header("webhook-timestamp");
            rec.signature = header("webhook-signature");
            rec.content_type = header("content-type");
            rec.body = r.request.body;
            ReceiverFaults f;
            double draw = 0;
            {
                std::lock_guard lock(m_mutex);
                f = m_faults;
                draw = std::uniform_real_distribution<double>(0, 1)(m_random);
            }
            if (f.hang) {
                std::unique_lock lock(m_mutex);
                m_received.push_back(rec); // arrived, never answered
                m_wake.wait(lock, [this] { return m_stopped || !m_faults.hang; });
                break;
            }
            int status = 200;
            if (f.fixed_status != 0) {
                status = f.fixed_status;
            } else if (draw < f.fail_rate) {
                status = 500;
            } else if (draw < f.fail_rate + f.slow_rate) {
                rec.slow = true;
                std::this_thread::sleep_for(f.slow);
            }
            rec.status = status;
            rec.answered = std::chrono::steady_clock::now();
            {
                std::lock_guard lock(m_mutex);
                m_received.push_back(rec);
            }
            fake::http::Response res;
            res.status = status;
            res.body = status == 200 ? R"({"ok":true})" : R"({"error":"on purpose"})";
            if (!conn.write_all(fake::http::serialize(res, r.request.keep_alive)) ||
                !r.request.keep_alive) {
                break;
            }
        }
        std::lock_guard lock(m_mutex);
        ::close(fd);
        m_connections.erase(std::remove(m_connections.begin(), m_connections.end(), fd),
                            m_connections.end());
    }

    int m_listen = -1;
    int m_port = 0;
    mutable std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_stopped = false;
    ReceiverFaults m_faults;
    std::mt19937 m_random;
    std::vector<Received> m_received;
    std::vector<int> m_connections;
    std::vector<std::thread> m_threads;
    std::thread m_accept;
};

// Standard Webhooks, recomputed here: base64(HMAC-SHA256(base64-decoded key, id.ts.body)).
inline std::string independent_signature(const std::string& whsec, const std::string& id,
                                         const std::string& timestamp, const std::string& body) {
    const std::string b64 = whsec.substr(6);
    std::string key(b64.size(), '\0');
    int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(key.data()),
                            reinterpret_cast<const unsigned char*>(b64.data()),
                            static_cast<int>(b64.size()));
    REQUIRE(n > 0);
    n -= static_cast<int>(std::count(b64.end() - 2, b64.end(), '='));
    key.resize(static_cast<std::size_t>(n));
    const std::string message = id + "." + timestamp + "." + body;
    unsigned char mac[32];
    unsigned int mac_len = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
         reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &mac_len);
    std::string out(48, '\0');
    const int m = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), mac,
                                  static_cast<int>(mac_len));
    out.resize(static_cast<std::size_t>(m));
    return "v1," + out;
}

// Whether one of the request's signatures (`webhook-signature` holds one per signing secret) is
// that of signing secret `whsec` ("whsec_...") over its ID, timestamp and body.
inline bool signed_by(const Received& r, const std::string& whsec) {
    const std::string expected = independent_signature(whsec, r.id, r.timestamp, r.body);
    std::istringstream items(r.signature);
    for (std::string item; items >> item;) {
        if (item == expected) {
            return true;
        }
    }
    return false;
}

} // namespace payrecon::testing
