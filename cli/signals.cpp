#include "cli/signals.hpp"

#include <pthread.h>
#include <unistd.h>

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
            if (closing->load()) {
                return;
            }
            on_signal(sig);
            // A second signal while it stops is an operator who will not wait: exit at once, as
            // the shell's convention has it. What was in flight is what a crash leaves, and the
            // protocol covers it (leases end; unknown outcomes are reconciled).
            sigwait(&signals, &sig);
            if (!closing->load()) {
                static constexpr char k_message[] =
                    "payrecon: a second signal: stopped at once; calls in flight are reconciled "
                    "as unknown once their leases end\n";
                (void)!::write(STDERR_FILENO, k_message, sizeof k_message - 1);
                ::_exit(128 + sig);
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
