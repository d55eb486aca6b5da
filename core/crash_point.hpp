#pragma once
// Named crash points for fault tests. A process armed with a name (PAYRECON_CRASH_AT=name in its
// environment, or arm_crash_point() in a test's child process) kills itself with SIGKILL when it
// reaches crash_point(name): no destructors, no flush, no commit -- as a power cut would.
// Unarmed, crash_point() costs one string comparison.

#include <functional>
#include <string>
#include <string_view>

namespace payrecon {

void crash_point(std::string_view name);

// Arms the given crash point in this process (replacing any other); "" disarms.
void arm_crash_point(std::string name);

// Arms `name` with `action`, run in place of the kill when the point is reached (in-process fault
// injection: drop the database connection there, throw what a library would throw). It runs once,
// on the thread that reached the point, and the point is disarmed before it runs; what it throws
// propagates out of crash_point().
void arm_crash_point(std::string name, std::function<void()> action);

} // namespace payrecon
