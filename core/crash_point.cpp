#include "core/crash_point.hpp"

#include <csignal>
#include <cstdlib>
#include <mutex>
#include <unistd.h>

namespace payrecon {
namespace {

std::mutex g_mutex;
bool g_loaded = false;
std::string g_armed;
std::function<void()> g_action; // empty: kill

const std::string& armed() {
    if (!g_loaded) {
        if (const char* env = std::getenv("PAYRECON_CRASH_AT")) {
            g_armed = env;
        }
        g_loaded = true;
    }
    return g_armed;
}

} // namespace

void crash_point(std::string_view name) {
    std::function<void()> action;
    {
        std::lock_guard lock(g_mutex);
        if (armed().empty() || armed() != name) {
            return;
        }
        if (!g_action) {
            ::kill(::getpid(), SIGKILL);
            ::_exit(137); // not reached
        }
        action = std::move(g_action);
        g_action = nullptr;
        g_armed.clear();
    }
    action(); // outside the lock: it may reach other crash points, or throw
}

void arm_crash_point(std::string name) {
    arm_crash_point(std::move(name), nullptr);
}

void arm_crash_point(std::string name, std::function<void()> action) {
    std::lock_guard lock(g_mutex);
    g_loaded = true;
    g_armed = std::move(name);
    g_action = std::move(action);
}

} // namespace payrecon
