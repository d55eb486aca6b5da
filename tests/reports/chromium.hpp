#pragma once
// Headless Chromium for the HTML report's tests: found on the machine, started without any
// network, and driven over the DevTools protocol through a pipe (--remote-debugging-pipe: the
// browser reads JSON commands on fd 3 and writes answers and events on fd 4, each message ended by
// a NUL). No port is opened, no WebSocket library is needed, and nothing else can talk to it.

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/types.h>
#include <vector>

namespace payrecon::test {

// PAYRECON_CHROMIUM, else `chromium` on PATH, else Debian's /usr/bin/chromium; empty if the one
// chosen is not an executable.
std::string find_chromium();

// Headless Chromium that never touches the network: file:// only, every background service off,
// no name resolution, a fresh profile per run. (Checked with strace: no DNS query, no packet; the
// only inet call left is a UDP connect() that picks a route and sends nothing. Without
// --host-resolver-rules, Chromium still looks up its extension-update hosts.)
std::vector<std::string> chromium_command(const std::string& chromium,
                                          const std::filesystem::path& profile);

// One browser, driven over the DevTools pipe. Every call waits at most `timeout` for its answer
// and throws std::runtime_error (saying which command, and what the browser wrote to stderr) if
// none comes, the browser exits, or it answers with an error.
class DevToolsBrowser {
public:
    DevToolsBrowser(const std::string& chromium, const std::filesystem::path& profile,
                    std::chrono::seconds timeout = std::chrono::seconds(60));
    ~DevToolsBrowser(); // closes the browser; kills it if it does not exit
    DevToolsBrowser(const DevToolsBrowser&) = delete;
    DevToolsBrowser& operator=(const DevToolsBrowser&) = delete;

    // A command's `result`. `session` empty: to the browser; else to that page.
    nlohmann::json call(const std::string& method, const nlohmann::json& params = {},
                        const std::string& session = {});

    // A new page of `width` x `height` CSS pixels (scale 1, not mobile) showing `url`, loaded
    // (document.readyState complete); returns its session.
    std::string open(const std::string& url, int width, int height);

    // The value of `expression` evaluated in the page (returnByValue); a JavaScript exception is
    // a std::runtime_error with its text.
    nlohmann::json evaluate(const std::string& session, const std::string& expression);

    // The page's viewport as PNG bytes.
    std::string screenshot(const std::string& session);

private:
    void send(const nlohmann::json& message);
    nlohmann::json receive_answer(long long id, const std::string& method);
    std::string stderr_tail() const;

    pid_t m_pid = -1;
    int m_to_browser = -1;
    int m_from_browser = -1;
    std::filesystem::path m_log; // the browser's stderr
    std::chrono::seconds m_timeout;
    long long m_next_id = 0;
    std::string m_buffer; // read, not yet split into messages
};

} // namespace payrecon::test
