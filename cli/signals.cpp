#include "cli/signals.hpp"

#include <pthread.h>

namespace payrecon::cli {

StopOnSignal::StopOnSignal(std::function<void(int signal)> on_signal) {
    sigemptyset(&m_signals);
    sigaddset(&m_signals, SIGTERM);
    sigaddset(&m_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &m_signals, nullptr);
    m_waiter =
        std::thread([signals = m_signals, closing = m_closing, on_signal = std::move(on_signal)] {
            int sig = 0;
            sigwait(&signals, &sig);
            if (!closing->load()) {
                on_signal(sig);
            }
        });
}

StopOnSignal::~StopOnSignal() {
    // Wake the waiter if it is still waiting (no signal came), without calling on_signal.
    m_closing->store(true);
    pthread_kill(m_waiter.native_handle(), SIGTERM);
    m_waiter.join();
}

} // namespace payrecon::cli
