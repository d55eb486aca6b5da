#include "chromium.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <openssl/evp.h>
#include <poll.h>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using nlohmann::json;

namespace payrecon::test {

std::string find_chromium() {
    if (const char* env = std::getenv("PAYRECON_CHROMIUM"); env && *env) {
        return ::access(env, X_OK) == 0 ? std::string(env) : std::string();
    }
    if (const char* path = std::getenv("PATH")) {
        std::stringstream dirs(path);
        std::string dir;
        while (std::getline(dirs, dir, ':')) {
            const fs::path candidate = fs::path(dir.empty() ? "." : dir) / "chromium";
            if (::access(candidate.c_str(), X_OK) == 0) {
                return candidate.string();
            }
        }
    }
    if (::access("/usr/bin/chromium", X_OK) == 0) {
        return "/usr/bin/chromium";
    }
    return {};
}

std::vector<std::string> chromium_command(const std::string& chromium, const fs::path& profile) {
    return {chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--user-data-dir=" + profile.string()};
}

DevToolsBrowser::DevToolsBrowser(const std::string& chromium, const fs::path& profile,
                                 std::chrono::seconds timeout)
    : m_log(profile.string() + ".stderr"), m_timeout(timeout) {
    // A write to a browser that died must be an error we report, not a signal that ends the test.
    std::signal(SIGPIPE, SIG_IGN);
    int to_browser[2];
    int from_browser[2];
    if (::pipe2(to_browser, O_CLOEXEC) != 0 || ::pipe2(from_browser, O_CLOEXEC) != 0) {
        throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
    }
    std::vector<std::string> args = chromium_command(chromium, profile);
    args.push_back("--remote-debugging-pipe");
    args.push_back("about:blank");
    std::vector<char*> argv;
    for (auto& a : args) {
        argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    const int log = ::open(m_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    m_pid = ::fork();
    if (m_pid == 0) {
        // Out of the way of 3 and 4 first: a pipe end may already be one of them.
        const int in = ::fcntl(to_browser[0], F_DUPFD, 10);
        const int out = ::fcntl(from_browser[1], F_DUPFD, 10);
        ::dup2(null, STDIN_FILENO);
        ::dup2(null, STDOUT_FILENO);
        ::dup2(log, STDERR_FILENO);
        ::dup2(in, 3); // dup2 clears close-on-exec on the copy
        ::dup2(out, 4);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    ::close(log);
    ::close(null);
    ::close(to_browser[0]);
    ::close(from_browser[1]);
    m_to_browser = to_browser[1];
    m_from_browser = from_browser[0];
    if (m_pid < 0) {
        throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    }
}

DevToolsBrowser::~DevToolsBrowser() {
    try {
        if (m_pid > 0) {
            send(json{{"id", ++m_next_id}, {"method", "Browser.close"}});
        }
    } catch (...) {
        // It is going away either way.
    }
    ::close(m_to_browser);
    ::close(m_from_browser);
    if (m_pid <= 0) {
        return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int status = 0;
    while (::waitpid(m_pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(m_pid, SIGKILL);
            ::waitpid(m_pid, &status, 0);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::error_code ignored;
    fs::remove(m_log, ignored);
}

std::string DevToolsBrowser::stderr_tail() const {
    std::ifstream in(m_log);
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return all.substr(all.size() > 2000 ? all.size() - 2000 : 0);
}

void DevToolsBrowser::send(const json& message) {
    std::string bytes = message.dump();
    bytes.push_back('\0');
    std::size_t written = 0;
    while (written < bytes.size()) {
        const ssize_t n = ::write(m_to_browser, bytes.data() + written, bytes.size() - written);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            throw std::runtime_error("writing to Chromium failed (" +
                                     std::string(std::strerror(errno)) +
                                     "); its stderr: " + stderr_tail());
        }
        written += static_cast<std::size_t>(n);
    }
}

json DevToolsBrowser::receive_answer(long long id, const std::string& method) {
    const auto deadline = std::chrono::steady_clock::now() + m_timeout;
    for (;;) {
        for (auto end = m_buffer.find('\0'); end != std::string::npos; end = m_buffer.find('\0')) {
            json message = json::parse(m_buffer.substr(0, end));
            m_buffer.erase(0, end + 1);
            if (!message.contains("id") || message["id"] != id) {
                continue; // an event, or the answer to a command nobody waits for
            }
            if (message.contains("error")) {
                throw std::runtime_error("Chromium refused " + method + ": " +
                                         message["error"].dump());
            }
            return message.value("result", json::object());
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            throw std::runtime_error("Chromium did not answer " + method + " within " +
                                     std::to_string(m_timeout.count()) +
                                     " s; its stderr: " + stderr_tail());
        }
        pollfd p{m_from_browser, POLLIN, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        if (ready <= 0) {
            continue; // the deadline check above reports it
        }
        char chunk[65536];
        const ssize_t n = ::read(m_from_browser, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            throw std::runtime_error("Chromium closed its DevTools pipe while we waited for " +
                                     method + "; its stderr: " + stderr_tail());
        }
        m_buffer.append(chunk, static_cast<std::size_t>(n));
    }
}

json DevToolsBrowser::call(const std::string& method, const json& params,
                           const std::string& session) {
    json message{{"id", ++m_next_id},
                 {"method", method},
                 {"params", params.is_null() ? json::object() : params}};
    if (!session.empty()) {
        message["sessionId"] = session;
    }
    send(message);
    return receive_answer(m_next_id, method);
}

std::string DevToolsBrowser::open(const std::string& url, int width, int height) {
    const std::string target = call("Target.createTarget", {{"url", "about:blank"}})["targetId"];
    const std::string session =
        call("Target.attachToTarget", {{"targetId", target}, {"flatten", true}})["sessionId"];
    call("Emulation.setDeviceMetricsOverride",
         {{"width", width}, {"height", height}, {"deviceScaleFactor", 1}, {"mobile", false}},
         session);
    call("Page.navigate", {{"url", url}}, session);
    const auto deadline = std::chrono::steady_clock::now() + m_timeout;
    for (;;) {
        std::string why = "document.readyState is not complete";
        try {
            if (evaluate(session, "document.readyState === 'complete' && location.href !== "
                                  "'about:blank'") == true) {
                return session;
            }
        } catch (const std::runtime_error& e) {
            why = e.what(); // the page's context is replaced while it navigates
        }
        if (std::chrono::steady_clock::now() > deadline) {
            throw std::runtime_error("Chromium did not finish loading " + url + ": " + why);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

json DevToolsBrowser::evaluate(const std::string& session, const std::string& expression) {
    const json result =
        call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}}, session);
    if (result.contains("exceptionDetails")) {
        throw std::runtime_error("the page threw evaluating `" + expression +
                                 "`: " + result["exceptionDetails"].dump());
    }
    return result["result"].value("value", json());
}

std::string DevToolsBrowser::screenshot(const std::string& session) {
    const std::string data = call("Page.captureScreenshot", {{"format", "png"}}, session)["data"];
    std::string bytes(data.size() / 4 * 3 + 3, '\0');
    const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(bytes.data()),
                                  reinterpret_cast<const unsigned char*>(data.data()),
                                  static_cast<int>(data.size()));
    if (n < 0) {
        throw std::runtime_error("Chromium's screenshot is not base64");
    }
    // EVP_DecodeBlock counts the padding as zero bytes.
    std::size_t size = static_cast<std::size_t>(n);
    for (auto it = data.rbegin(); it != data.rend() && *it == '='; ++it) {
        --size;
    }
    bytes.resize(size);
    return bytes;
}

} // namespace payrecon::test
