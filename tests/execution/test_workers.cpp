// Many worker processes (the real `payrecon worker` binary) against one database and the fake
// provider with a mix of faults: no operation ID is ever executed twice, and every payment ends
// terminal or unknown.
#include "services/intake.hpp"
#include "tests/fake_provider/fake_provider.hpp"
#include "tests/support/test_db.hpp"

#include <catch2/catch.hpp>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <set>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

using namespace payrecon;
using namespace payrecon::testing;

namespace {

pid_t spawn_worker(const std::vector<std::string>& args,
                   const std::vector<std::string>& extra_env) {
    const char* bin = std::getenv("PAYRECON_BIN");
    REQUIRE(bin != nullptr);
    std::vector<std::string> argv_s{bin};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) {
        argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    std::vector<std::string> env_s(extra_env);
    for (char** e = environ; *e != nullptr; ++e) {
        env_s.emplace_back(*e);
    }
    std::vector<char*> envp;
    for (auto& e : env_s) {
        envp.push_back(e.data());
    }
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, bin, &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    REQUIRE(rc == 0);
    return pid;
}

} // namespace

TEST_CASE(
    "workers: 1,000 payments through 4 worker processes with 10% injected faults: no operation "
    "ID executed twice, every payment terminal or unknown",
    "[execution][db][processes]") {
    fake::FakeProviderOptions o;
    o.account.api_key = Secret("sk_test_fake_" + to_hex(random_bytes(8)));
    o.faults.seed = 7;
    o.faults.hang = std::chrono::milliseconds(1200);
    o.faults.refuse = std::chrono::milliseconds(150);
    o.faults.rates = {{fake::Fault::refuse, 0.01},
                      {fake::Fault::drop_before_execute, 0.015},
                      {fake::Fault::execute_then_hang, 0.01},
                      {fake::Fault::execute_then_fin, 0.015},
                      {fake::Fault::execute_then_rst, 0.015},
                      {fake::Fault::execute_then_partial, 0.01},
                      {fake::Fault::http_500_after_execute, 0.01},
                      {fake::Fault::http_500_before_execute, 0.01},
                      {fake::Fault::decline, 0.005}};
    std::ostringstream provider_log;
    fake::FakeProvider fake(o, provider_log);
    fake.start();

    auto db = connect();
    const auto tenant = make_tenant(*db);
    const auto writer = make_principal(*db, tenant);
    const std::string provider = "st" + to_hex(random_bytes(8));
    constexpr int k_payments = 1000;
    {
        IntakeService intake(*db, test_keys());
        for (int i = 0; i < k_payments; ++i) {
            const std::string ref = "mp-" + std::to_string(i) + "-" + to_hex(random_bytes(4));
            const std::string body = R"({"amount": )" + std::to_string(100 + i) +
                                     R"(, "currency": "EUR", "merchant_reference": ")" + ref +
                                     R"(", "provider": ")" + provider +
                                     R"(", "payment_method": "pm_card_visa"})";
            REQUIRE(intake.create_payment(writer.principal, "k-" + ref, body, "").status == 202);
        }
    }

    char config_path[] = "/tmp/payrecon-workers-config-XXXXXX";
    const int fd = ::mkstemp(config_path);
    REQUIRE(fd >= 0);
    ::close(fd);
    {
        std::ofstream config(config_path);
        config
            << R"({"providers": {")" << provider
            << R"(": {"kind": "stripe", "base_url": "http://127.0.0.1:)" << fake.port()
            << R"(", "api_key_env": "PAYRECON_TEST_FAKE_KEY", "connect_timeout_ms": 500, "timeout_ms": 800}}})";
    }
    const std::vector<std::string> env = {"PAYRECON_DATABASE_URL=" + database_url(),
                                          std::string("PAYRECON_CONFIG=") + config_path,
                                          "PAYRECON_TEST_FAKE_KEY=" + o.account.api_key.reveal()};
    const std::vector<std::string> args = {"worker",      "--once", "--concurrency", "4",
                                           "--batch",     "4",      "--retry-base",  "20ms",
                                           "--retry-cap", "100ms"};
    const auto open_work = [&] {
        return count_rows("payments", tenant.tenant_id,
                          "state IN ('pending', 'retry_scheduled', 'processing')");
    };
    int rounds = 0;
    while (open_work() > 0 && rounds < 40) {
        ++rounds;
        std::vector<pid_t> pids;
        for (int i = 0; i < 4; ++i) {
            pids.push_back(spawn_worker(args, env));
        }
        for (const pid_t pid : pids) {
            int status = 0;
            REQUIRE(::waitpid(pid, &status, 0) == pid);
            CHECK(WIFEXITED(status));
            CHECK(WEXITSTATUS(status) == 0);
        }
        // Retries wait out their backoff: sleep until the earliest one is due.
        const std::string wait_ms =
            query_value("SELECT greatest(0, ceil(extract(epoch FROM min(next_attempt_at) - now()) "
                        "* 1000))::bigint::text "
                        "FROM payments WHERE tenant_id = $1::uuid AND state = 'retry_scheduled'",
                        tenant.tenant_id);
        if (!wait_ms.empty()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(std::stoll(wait_ms)));
        }
    }
    ::unlink(config_path);
    INFO("rounds: " << rounds);
    CHECK(open_work() == 0);

    const auto ledger = fake.ledger();
    // At most one execution per operation ID, whatever the faults and however many workers.
    int executed = 0;
    for (const auto& [op, n] : ledger["executions"].items()) {
        INFO(op);
        CHECK(n.get<int>() == 1);
        executed += n.get<int>();
    }
    CHECK(count_rows("payments", tenant.tenant_id) == k_payments);
    CHECK(count_rows("payments", tenant.tenant_id, "state IN ('succeeded', 'failed', 'unknown')") ==
          k_payments);
    // Every succeeded payment was executed exactly once by the provider; the provider charged
    // nothing we do not know about (its charges = our succeeded + some of our unknown).
    const long long succeeded_sum =
        std::stoll(query_value("SELECT coalesce(sum(amount_minor), 0)::text FROM payments WHERE "
                               "tenant_id = $1::uuid AND state = 'succeeded'",
                               tenant.tenant_id));
    const long long unknown_sum =
        std::stoll(query_value("SELECT coalesce(sum(amount_minor), 0)::text FROM payments WHERE "
                               "tenant_id = $1::uuid AND state = 'unknown'",
                               tenant.tenant_id));
    const long long charged = ledger["charged"].value("eur", 0LL);
    CHECK(charged >= succeeded_sum);
    CHECK(charged <= succeeded_sum + unknown_sum);
    CHECK(count_rows("payment_attempts", tenant.tenant_id) >= k_payments);
    CHECK(count_rows("payment_attempts", tenant.tenant_id, "finished_at IS NULL") == 0);
    CHECK(ledger["faults_applied"].size() >= 5); // the mix really happened
    CHECK(executed >= count_rows("payments", tenant.tenant_id, "state = 'succeeded'"));
}

TEST_CASE("workers: SIGTERM lets the calls in flight finish and be recorded, then exits 0",
          "[execution][db][processes]") {
    fake::FakeProviderOptions o;
    o.account.api_key = Secret("sk_test_fake_" + to_hex(random_bytes(8)));
    o.faults.latency = std::chrono::milliseconds(400); // calls are in flight when the signal comes
    std::ostringstream provider_log;
    fake::FakeProvider fake(o, provider_log);
    fake.start();
    auto db = connect();
    const auto tenant = make_tenant(*db);
    const auto writer = make_principal(*db, tenant);
    const std::string provider = "st" + to_hex(random_bytes(8));
    {
        IntakeService intake(*db, test_keys());
        for (int i = 0; i < 40; ++i) {
            const std::string ref = "term-" + std::to_string(i) + "-" + to_hex(random_bytes(4));
            REQUIRE(intake
                        .create_payment(
                            writer.principal, "k-" + ref,
                            R"({"amount": 900, "currency": "EUR", "merchant_reference": ")" + ref +
                                R"(", "provider": ")" + provider +
                                R"(", "payment_method": "pm_card_visa"})",
                            "")
                        .status == 202);
        }
    }
    char config_path[] = "/tmp/payrecon-term-config-XXXXXX";
    const int fd = ::mkstemp(config_path);
    REQUIRE(fd >= 0);
    ::close(fd);
    {
        std::ofstream config(config_path);
        config << R"({"providers": {")" << provider
               << R"(": {"kind": "stripe", "base_url": "http://127.0.0.1:)" << fake.port()
               << R"(", "api_key_env": "PAYRECON_TEST_FAKE_KEY", "timeout_ms": 5000}}})";
    }
    const pid_t pid = spawn_worker({"worker", "--concurrency", "4", "--batch", "2"},
                                   {"PAYRECON_DATABASE_URL=" + database_url(),
                                    std::string("PAYRECON_CONFIG=") + config_path,
                                    "PAYRECON_TEST_FAKE_KEY=" + o.account.api_key.reveal()});
    // Wait until calls are in flight: payments claimed and not yet settled.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (count_rows("payments", tenant.tenant_id, "state = 'processing'") == 0 &&
           std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    REQUIRE(count_rows("payments", tenant.tenant_id, "state = 'processing'") > 0);
    REQUIRE(::kill(pid, SIGTERM) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    ::unlink(config_path);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    // Nothing abandoned mid-call: every claimed payment was settled and its attempt closed.
    CHECK(count_rows("payments", tenant.tenant_id, "state = 'processing'") == 0);
    CHECK(count_rows("payment_attempts", tenant.tenant_id, "finished_at IS NULL") == 0);
    const long long settled = count_rows("payments", tenant.tenant_id, "state = 'succeeded'");
    CHECK(settled > 0);
    CHECK(settled < 40); // it stopped early: the rest wait for the next worker, still pending
    CHECK(count_rows("payments", tenant.tenant_id, "state = 'pending'") == 40 - settled);
    const auto ledger = fake.ledger();
    CHECK(static_cast<long long>(ledger["executions"].size()) == settled);
}
