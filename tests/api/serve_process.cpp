#include "tests/api/serve_process.hpp"

#include "core/fingerprint.hpp"
#include "tests/support/test_db.hpp"

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <spawn.h>
#include <string_view>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace payrecon::testing {

SecretFile::SecretFile() {
    std::string path = "/tmp/payrecon-api-secret-XXXXXX";
    const int fd = ::mkstemp(path.data()); // mode 0600
    REQUIRE(fd >= 0);
    const std::string line = to_hex(random_bytes(22)) + "\n"; // 44 characters
    const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::close(fd);
    m_path = path;
    REQUIRE(written);
}

SecretFile::~SecretFile() {
    ::unlink(m_path.c_str());
}

ServeProcess::ServeProcess(const SecretFile& secret, int threads,
                           const std::vector<std::string>& extra_env,
                           const std::vector<std::string>& extra_args) {
    const char* bin = std::getenv("PAYRECON_BIN");
    if (bin == nullptr) {
        FAIL("PAYRECON_BIN is not set: run the tests through ctest (or scripts/test), which sets "
             "it");
    }
    std::vector<std::string> args = {bin,           "serve",     "--listen",
                                     "127.0.0.1:0", "--threads", std::to_string(threads)};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string_view entry(*e);
        const bool replaced =
            std::any_of(extra_env.begin(), extra_env.end(), [&](const std::string& extra) {
                return entry.starts_with(extra.substr(0, extra.find('=') + 1));
            });
        if (replaced || entry.starts_with("PAYRECON_DATABASE_URL=") ||
            entry.starts_with("PAYRECON_FINGERPRINT_SECRET_FILE=")) {
            continue;
        }
        env.emplace_back(entry);
    }
    // The defaults, unless `extra_env` gives its own (getenv finds the first of two).
    for (std::string entry : {"PAYRECON_DATABASE_URL=" + database_url(),
                              "PAYRECON_FINGERPRINT_SECRET_FILE=" + secret.path()}) {
        const std::string name = entry.substr(0, entry.find('=') + 1);
        if (std::none_of(extra_env.begin(), extra_env.end(),
                         [&](const std::string& extra) { return extra.starts_with(name); })) {
            env.push_back(std::move(entry));
        }
    }
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    std::vector<char*> argv;
    for (const auto& a : args) {
        argv.push_back(const_cast<char*>(a.c_str()));
    }
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (const auto& e : env) {
        envp.push_back(const_cast<char*>(e.c_str()));
    }
    envp.push_back(nullptr);

    std::array<int, 2> out{-1, -1};
    std::array<int, 2> err{-1, -1};
    REQUIRE(::pipe2(out.data(), O_CLOEXEC) == 0);
    REQUIRE(::pipe2(err.data(), O_CLOEXEC) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3); // no client socket leaks into the server
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGINT);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    const int spawned = ::posix_spawn(&m_pid, bin, &actions, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(out[1]);
    ::close(err[1]);
    m_stdout_fd = out[0];
    m_stderr_fd = err[0];
    if (spawned != 0) {
        m_pid = -1;
        stop_now();
        FAIL("cannot start " << bin << ": " << std::strerror(spawned));
    }
    m_reader = std::thread([this] { read_output(); });

    std::string first_line;
    {
        std::unique_lock lock(m_mutex);
        m_changed.wait_for(lock, std::chrono::seconds(20), [this] {
            return m_stdout.find('\n') != std::string::npos || m_output_closed;
        });
        const auto newline = m_stdout.find('\n');
        if (newline != std::string::npos) {
            first_line = m_stdout.substr(0, newline);
        }
    }
    const auto listening = nlohmann::json::parse(first_line, nullptr, false);
    if (listening.is_discarded() || listening.value("event", "") != "listening" ||
        !listening.contains("port") || !listening["port"].is_number_integer()) {
        stop_now();
        FAIL("payrecon serve did not report a listening port; first stdout line: '"
             << first_line << "'; stderr: " << stderr_text());
    }
    m_port = listening["port"].get<int>();
}

ServeProcess::~ServeProcess() {
    stop_now();
}

void ServeProcess::stop_now() {
    if (m_pid > 0) {
        ::kill(m_pid, SIGKILL);
        int status = 0;
        ::waitpid(m_pid, &status, 0);
        m_pid = -1;
    }
    if (m_reader.joinable()) {
        m_reader.join();
    }
    for (int* fd : {&m_stdout_fd, &m_stderr_fd}) {
        if (*fd >= 0) {
            ::close(*fd);
            *fd = -1;
        }
    }
}

void ServeProcess::read_output() {
    std::array<pollfd, 2> fds{pollfd{m_stdout_fd, POLLIN, 0}, pollfd{m_stderr_fd, POLLIN, 0}};
    std::array<char, 8192> buf{};
    int open = 2;
    while (open > 0) {
        if (::poll(fds.data(), fds.size(), -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        for (std::size_t i = 0; i < fds.size(); ++i) {
            if (fds[i].fd < 0 || fds[i].revents == 0) {
                continue;
            }
            const ssize_t n = ::read(fds[i].fd, buf.data(), buf.size());
            if (n < 0 && errno == EINTR) {
                continue;
            }
            std::lock_guard lock(m_mutex);
            if (n <= 0) {
                fds[i].fd = -1; // poll ignores negative descriptors
                --open;
            } else {
                (i == 0 ? m_stdout : m_stderr).append(buf.data(), static_cast<std::size_t>(n));
            }
            m_changed.notify_all();
        }
    }
    std::lock_guard lock(m_mutex);
    m_output_closed = true;
    m_changed.notify_all();
}

void ServeProcess::send_signal(int signal) {
    REQUIRE(m_pid > 0);
    REQUIRE(::kill(m_pid, signal) == 0);
}

std::optional<int> ServeProcess::wait_exit(std::chrono::milliseconds deadline) {
    REQUIRE(m_pid > 0);
    // glibc 2.36's <sys/pidfd.h> lacks extern "C" for C++: call the system call directly.
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, m_pid, 0));
    REQUIRE(pidfd >= 0);
    pollfd p{pidfd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(deadline.count()));
    ::close(pidfd);
    if (ready <= 0) {
        return std::nullopt;
    }
    int status = 0;
    REQUIRE(::waitpid(m_pid, &status, 0) == m_pid);
    m_pid = -1;
    if (m_reader.joinable()) {
        m_reader.join(); // the pipes close with the process: the output is complete
    }
    return status;
}

std::optional<int> ServeProcess::terminate(std::chrono::milliseconds deadline) {
    send_signal(SIGTERM);
    return wait_exit(deadline);
}

int ServeProcess::kill() {
    send_signal(SIGKILL);
    const auto status = wait_exit(std::chrono::seconds(10));
    REQUIRE(status.has_value());
    return *status;
}

std::string ServeProcess::stdout_text() const {
    std::lock_guard lock(m_mutex);
    return m_stdout;
}

std::string ServeProcess::stderr_text() const {
    std::lock_guard lock(m_mutex);
    return m_stderr;
}

std::vector<std::string> ServeProcess::stdout_lines() const {
    const std::string text = stdout_text();
    std::vector<std::string> lines;
    std::size_t begin = 0;
    for (std::size_t end = text.find('\n'); end != std::string::npos;
         end = text.find('\n', begin)) {
        lines.push_back(text.substr(begin, end - begin));
        begin = end + 1;
    }
    return lines;
}

} // namespace payrecon::testing
