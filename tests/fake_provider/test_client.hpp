#pragma once
// What the fake provider's tests share: a started server with its log (Running), a libcurl client
// (call: what payrecon's transport uses, a fresh connection per request) and raw sockets
// (raw_exchange: to see FIN, RST and timeouts as they happen). No Catch2 assertions in here: tests
// call these from other threads.

#include "tests/fake_provider/fake_provider.hpp"
#include "tests/support/wait.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <curl/curl.h>
#include <map>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace payrecon::fake::test {

using payrecon::testing::wait_until;

inline constexpr const char* k_api_key = "sk_test_fAkE4eC39HqLyjWDarjtT1zdp7dc";

inline FakeProviderOptions options_with(FaultConfig faults = {}) {
    FakeProviderOptions o;
    o.account.api_key = Secret(k_api_key);
    o.faults = std::move(faults);
    return o;
}

inline FaultConfig faults_from(const char* json) {
    return FaultConfig::from_json(nlohmann::json::parse(json));
}

// A started server whose log is kept for inspection (read it after stop()).
struct Running {
    explicit Running(FakeProviderOptions options = options_with())
        : server(std::move(options), log) {
        server.start();
    }
    std::string url(const std::string& path) const {
        return "http://127.0.0.1:" + std::to_string(server.port()) + path;
    }
    std::string admin_url(const std::string& path) const {
        return "http://127.0.0.1:" + std::to_string(server.admin_port()) + path;
    }
    nlohmann::json ledger() const { return nlohmann::json::parse(server.ledger().dump()); }
    std::uint64_t deliveries() const { return ledger()["deliveries"].get<std::uint64_t>(); }
    std::uint64_t executions(const std::string& op) const {
        nlohmann::json l = ledger();
        return l["executions"].contains(op) ? l["executions"][op].get<std::uint64_t>() : 0;
    }

    std::ostringstream log;
    FakeProvider server;
};

// ---- libcurl client -------------------------------------------------------------------------

// Before main, on one thread: curl_global_init is not thread-safe.
inline const bool k_curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;

struct HttpResult {
    CURLcode code = CURLE_OK;
    long status = 0;
    std::map<std::string, std::string> headers; // lower-case names, of the final response
    std::string body;
    nlohmann::json json() const { return nlohmann::json::parse(body); }
    std::string header(const std::string& name) const {
        const auto it = headers.find(name);
        return it == headers.end() ? std::string() : it->second;
    }
};

inline std::size_t on_body(char* data, std::size_t size, std::size_t count, void* out) {
    static_cast<std::string*>(out)->append(data, size * count);
    return size * count;
}

inline std::size_t on_header(char* data, std::size_t size, std::size_t count, void* out) {
    auto& headers = *static_cast<std::map<std::string, std::string>*>(out);
    std::string line(data, size * count);
    if (line.rfind("HTTP/", 0) == 0) {
        headers.clear(); // a new response (after 100 Continue)
    }
    const auto colon = line.find(':');
    if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (char& c : name) {
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        }
        std::string value = line.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ')) {
            value.erase(0, 1);
        }
        while (!value.empty() && (value.back() == '\r' || value.back() == '\n')) {
            value.pop_back();
        }
        headers[name] = value;
    }
    return size * count;
}

inline HttpResult call(const std::string& method, const std::string& url,
                       const std::vector<std::string>& headers = {}, const std::string& body = {},
                       long timeout_ms = 5000) {
    // No Catch2 assertions here: the in-flight test calls this from a second thread.
    HttpResult result;
    CURL* h = k_curl_ready ? curl_easy_init() : nullptr;
    if (h == nullptr) {
        result.code = CURLE_FAILED_INIT;
        return result;
    }
    curl_slist* list = nullptr;
    for (const auto& header : headers) {
        list = curl_slist_append(list, header.c_str());
    }
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, static_cast<void*>(&result.body));
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, static_cast<void*>(&result.headers));
    if (method == "POST") {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    } else if (method != "GET") {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method.c_str());
        if (!body.empty()) { // a PUT's body (Square's UpdatePayment)
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
        }
    }
    result.code = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &result.status);
    curl_slist_free_all(list);
    curl_easy_cleanup(h);
    return result;
}

inline std::string auth(const std::string& key = k_api_key) {
    return "Authorization: Bearer " + key;
}

// ---- raw sockets ----------------------------------------------------------------------------

// Connects to 127.0.0.1:port; returns the socket, or -errno. (No assertions in these helpers:
// tests call them from other threads.)
inline int raw_connect(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        const int error = errno;
        ::close(fd);
        return -error;
    }
    return fd;
}

enum class Ending { fin, rst, timeout, not_connected };

struct RawOutcome {
    std::string bytes;
    Ending ending = Ending::timeout;
    std::chrono::milliseconds took{0};
};

// Sends `request` and reads until the server closes (FIN), resets (RST) or `timeout` passes.
inline RawOutcome raw_exchange(int port, const std::string& request,
                               std::chrono::milliseconds timeout) {
    RawOutcome out;
    const int fd = raw_connect(port);
    if (fd < 0) {
        out.ending = Ending::not_connected;
        return out;
    }
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const auto started = std::chrono::steady_clock::now();
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request.size())) {
        out.ending = Ending::rst;
    }
    char buf[4096];
    for (;;) {
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n > 0) {
            out.bytes.append(buf, static_cast<std::size_t>(n));
            continue;
        }
        if (n == 0) {
            out.ending = Ending::fin;
        } else if (errno == ECONNRESET) {
            out.ending = Ending::rst;
        } else {
            out.ending = Ending::timeout;
        }
        break;
    }
    out.took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started);
    ::close(fd);
    return out;
}

} // namespace payrecon::fake::test
