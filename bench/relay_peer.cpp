// payrecon-bench-relay-peer: the two sides of bench/relay's baseline on loopback.
//
//   receive --port-file F [--latency-ms L]
//                           a webhook receiver answering 200 to every POST after L ms (a merchant's
//                           handler doing its work; keep-alive, one thread per connection);
//                           GET /count answers how many POSTs it has answered
//   post --url U --threads S --requests N --body-bytes B
//                           the simple client: S threads, each one libcurl handle (keep-alive),
//                           POSTing N requests in all with a JSON body of B bytes; prints
//                           "posts_per_second X" (every answer must be 200)
#include "tests/fake_provider/http.hpp"

#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <curl/curl.h>
#include <fstream>
#include <iostream>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

int receive(const std::string& port_file, std::chrono::milliseconds latency) {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listener, 512) != 0) {
        std::perror("payrecon-bench-relay-peer: listen");
        return 1;
    }
    socklen_t len = sizeof a;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
    {
        const std::string tmp = port_file + ".tmp";
        std::ofstream(tmp) << ntohs(a.sin_port) << "\n";
        std::rename(tmp.c_str(), port_file.c_str());
    }
    std::atomic<long long> answered{0};
    for (;;) {
        const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
            continue;
        }
        std::thread([fd, &answered, latency] {
            payrecon::fake::http::Connection conn(fd, payrecon::fake::http::Limits{});
            for (;;) {
                const auto r = conn.read_request();
                if (r.status != payrecon::fake::http::ReadStatus::ok) {
                    break;
                }
                payrecon::fake::http::Response res;
                res.content_type = "text/plain";
                if (r.request.method == "GET" && r.request.path == "/count") {
                    res.body = std::to_string(answered.load()) + "\n";
                } else {
                    std::this_thread::sleep_for(latency);
                    res.body = "ok";
                    answered.fetch_add(1);
                }
                if (!conn.write_all(payrecon::fake::http::serialize(res, r.request.keep_alive)) ||
                    !r.request.keep_alive) {
                    break;
                }
            }
            ::close(fd);
        }).detach();
    }
}

std::size_t discard(char*, std::size_t size, std::size_t n, void*) {
    return size * n;
}

int post(const std::string& url, int threads, long requests, std::size_t body_bytes) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    std::string body = R"({"id":"bench","type":"payment.succeeded","data":{"pad":")";
    body += std::string(body_bytes > body.size() + 4 ? body_bytes - body.size() - 4 : 0, 'x');
    body += "\"}}";
    std::atomic<long> next{0};
    std::atomic<long> failed{0};
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&] {
            CURL* h = curl_easy_init();
            curl_slist* headers = nullptr;
            headers = curl_slist_append(headers, "Content-Type: application/json");
            headers = curl_slist_append(headers, "Expect:");
            curl_easy_setopt(h, CURLOPT_URL, url.c_str());
            curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
            curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
            curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
            while (next.fetch_add(1) < requests) {
                long status = 0;
                if (curl_easy_perform(h) != CURLE_OK ||
                    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK ||
                    status != 200) {
                    failed.fetch_add(1);
                }
            }
            curl_slist_free_all(headers);
            curl_easy_cleanup(h);
        });
    }
    for (auto& t : pool) {
        t.join();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (failed.load() > 0) {
        std::cerr << "payrecon-bench-relay-peer: " << failed.load() << " of " << requests
                  << " POSTs failed\n";
        return 1;
    }
    std::printf("posts_per_second %.0f\n", static_cast<double>(requests) / seconds);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    const auto value = [&](const std::string& name, const std::string& fallback) {
        for (std::size_t i = 0; i + 1 < args.size(); ++i) {
            if (args[i] == name) {
                return args[i + 1];
            }
        }
        return fallback;
    };
    try {
        if (!args.empty() && args[0] == "receive" && !value("--port-file", "").empty()) {
            return receive(value("--port-file", ""),
                           std::chrono::milliseconds(std::stol(value("--latency-ms", "0"))));
        }
        if (!args.empty() && args[0] == "post" && !value("--url", "").empty()) {
            return post(value("--url", ""), std::stoi(value("--threads", "8")),
                        std::stol(value("--requests", "10000")),
                        static_cast<std::size_t>(std::stoul(value("--body-bytes", "600"))));
        }
    } catch (const std::exception& e) {
        std::cerr << "payrecon-bench-relay-peer: " << e.what() << "\n";
        return 2;
    }
    std::cerr << "usage: payrecon-bench-relay-peer receive --port-file F [--latency-ms L]\n"
                 "       payrecon-bench-relay-peer post --url U [--threads S] [--requests N] "
                 "[--body-bytes B]\n";
    return 2;
}
