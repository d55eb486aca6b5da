// `payrecon worker` started while the database is down: a daemon waits for it (as it does when
// the database goes away later), `--once` reports it.

#include "tests/support/operated.hpp"
#include "tests/support/wait.hpp"

#include <catch2/catch.hpp>
#include <csignal>

using namespace payrecon;
using namespace payrecon::testing;

TEST_CASE("worker: a daemon started while PostgreSQL is down waits for it instead of exiting, "
          "a SIGTERM meanwhile exits 0, and --once exits 5",
          "[cli][db][worker][regression]") {
    // Found by the chaos run under the sanitizers: a worker started just before PostgreSQL stopped
    // exited 5 at startup, while one already running would have waited and reconnected.
    Operated w;
    const std::string down = "postgresql://payrecon@127.0.0.1:1/payrecon"; // nothing listens
    Payrecon daemon(w.dir.path(), w.env(),
                    {"--database", down, "--config", w.config_file.string(), "worker"});
    const auto tries = [&] {
        const std::string out = daemon.output_so_far();
        std::size_t n = 0;
        for (auto at = out.find("\"database_unavailable\""); at != std::string::npos;
             at = out.find("\"database_unavailable\"", at + 1)) {
            ++n;
        }
        return n;
    };
    REQUIRE(wait_until([&] { return tries() >= 2; }, std::chrono::seconds(20)));
    CHECK_FALSE(daemon.poll().has_value()); // still there, waiting
    daemon.signal(SIGTERM);
    const Run stopped = daemon.wait();
    INFO(stopped.all());
    CHECK(stopped.exit_code == 0);
    CHECK(stopped.out.find("\"retry_in_ms\"") != std::string::npos);
    CHECK(stopped.out.find("stopped while waiting for the database") != std::string::npos);

    const Run once = w.payrecon_raw(
        {"--database", down, "--config", w.config_file.string(), "worker", "--once"}, w.env());
    INFO(once.all());
    CHECK(once.exit_code == 5);
}
