#pragma once
// `payrecon serve` as a real child process for the HTTP acceptance tests: started on a free
// loopback port against the test database, its stdout and stderr captured, stopped by signal.
// Use from the test's main thread (these functions fail the test through Catch2).

#include "tests/support/wait.hpp"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <sys/types.h>
#include <thread>
#include <vector>

namespace payrecon::testing {

// A fingerprint secret file for `payrecon serve`: mode 0600, one random 44-character line,
// removed on destruction. Servers started with the same file compute the same fingerprints, so
// a restarted server replays what the first one stored.
class SecretFile {
public:
    SecretFile();
    ~SecretFile();
    SecretFile(const SecretFile&) = delete;
    SecretFile& operator=(const SecretFile&) = delete;
    const std::string& path() const { return m_path; }

private:
    std::string m_path;
};

class ServeProcess {
public:
    // Starts `$PAYRECON_BIN serve --listen 127.0.0.1:0 --threads <threads> <args...>` with
    // PAYRECON_DATABASE_URL = database_url() and PAYRECON_FINGERPRINT_SECRET_FILE = `secret`, and
    // returns once its first stdout line, the listening event, has named the port. `env` adds or
    // replaces environment variables ("PAYRECON_CONFIG=/path"). Fails the test if PAYRECON_BIN is
    // unset, or if the process exits or stays silent for 20 s first.
    explicit ServeProcess(const SecretFile& secret, int threads = 16,
                          const std::vector<std::string>& env = {},
                          const std::vector<std::string>& args = {});
    // SIGKILL if still running.
    ~ServeProcess();
    ServeProcess(const ServeProcess&) = delete;
    ServeProcess& operator=(const ServeProcess&) = delete;

    int port() const { return m_port; }
    pid_t pid() const { return m_pid; }
    bool running() const { return m_pid > 0; }

    void send_signal(int signal);
    // Waits until the process exits and its output is read to the end; returns its wait status
    // (WIFEXITED, WEXITSTATUS, ...), or nullopt if it still runs at the deadline.
    std::optional<int> wait_exit(std::chrono::milliseconds deadline);
    // SIGTERM, then wait_exit(deadline).
    std::optional<int> terminate(std::chrono::milliseconds deadline = std::chrono::seconds(20));
    // SIGKILL and reap; returns the wait status.
    int kill();

    // Everything the process wrote so far.
    std::string stdout_text() const;
    std::string stderr_text() const;
    // Complete stdout lines so far.
    std::vector<std::string> stdout_lines() const;

private:
    void read_output();
    void stop_now();

    pid_t m_pid = -1;
    int m_port = 0;
    int m_stdout_fd = -1;
    int m_stderr_fd = -1;
    mutable std::mutex m_mutex;
    std::condition_variable m_changed;
    std::string m_stdout;
    std::string m_stderr;
    bool m_output_closed = false;
    std::thread m_reader;
};

} // namespace payrecon::testing
