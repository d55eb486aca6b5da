#pragma once
// Graceful stop for long-running subcommands: SIGTERM and SIGINT are blocked in every thread and
// taken by one waiter thread, which calls `on_signal` once; a second signal exits the process at
// once (128 + the signal). Construct it before starting other threads (they inherit the blocked
// mask); the destructor wakes and joins the waiter.

#include <atomic>
#include <csignal>
#include <functional>
#include <memory>
#include <thread>

namespace payrecon::cli {

class StopOnSignal {
public:
    explicit StopOnSignal(std::function<void(int signal)> on_signal);
    ~StopOnSignal();
    StopOnSignal(const StopOnSignal&) = delete;
    StopOnSignal& operator=(const StopOnSignal&) = delete;

private:
    sigset_t m_signals{};
    std::shared_ptr<std::atomic<bool>> m_closing = std::make_shared<std::atomic<bool>>(false);
    std::thread m_waiter;
};

} // namespace payrecon::cli
