#pragma once
// Running the real payrecon binary (PAYRECON_BIN) as an operator would, against an in-process fake
// Stripe provider on loopback: `Payrecon` spawns one command (its stdout and stderr to files, its
// environment without any PAYRECON_* variable of the developer's), `Operated` is one test's world
// (a database, a tenant with a writer, the fake provider, the provider configuration file naming a
// provider of the test's own, "st" + 16 hex, so reconcilers and workers touch only that test's
// payments). Shared by the operator CLI tests, the multi-process fencing tests and the chaos run.
#include "engine/executor.hpp"
#include "providers/config.hpp"
#include "providers/registry.hpp"
#include "services/intake.hpp"
#include "store/migrations.hpp"
#include "tests/fake_provider/fake_provider.hpp"
#include "tests/support/test_db.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <poll.h>
#include <pqxx/pqxx>
#include <signal.h>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>
#include <vector>

extern char** environ;

namespace payrecon::testing {

// The variable the configuration's api_key_env names; set in the child's environment only.
constexpr const char* k_key_env = "CLITEST_STRIPE_API_KEY";

inline bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

// A directory of its own under the system's temporary directory, removed with its contents.
// The arguments of a command line payrecon printed for an operator (core/operator_commands), as
// a POSIX shell splits it (blanks; single and double quotes), without its leading `payrecon`, and
// with the note it asks for (`--note "..."`) filled in with `note`. Fails the test if the line is
// not a payrecon command.
inline std::vector<std::string> pasted(const std::string& line, const std::string& note) {
    std::vector<std::string> words;
    std::string word;
    bool in_word = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (c == '\'' || c == '"') {
            const std::size_t end = line.find(c, i + 1);
            REQUIRE(end != std::string::npos);
            word += line.substr(i + 1, end - i - 1);
            in_word = true;
            i = end;
        } else if (c == ' ') {
            if (in_word) {
                words.push_back(word);
            }
            word.clear();
            in_word = false;
        } else {
            word += c;
            in_word = true;
        }
    }
    if (in_word) {
        words.push_back(word);
    }
    REQUIRE(!words.empty());
    REQUIRE(words.front() == "payrecon");
    words.erase(words.begin());
    for (std::size_t i = 0; i + 1 < words.size(); ++i) {
        if (words[i] == "--note" && words[i + 1] == "...") {
            words[i + 1] = note;
        }
    }
    return words;
}

class TempDir {
public:
    explicit TempDir(const std::string& prefix = "payrecon-clitest") {
        std::string pattern =
            (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
        REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        m_path = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(m_path, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return m_path; }

private:
    std::filesystem::path m_path;
};

using Env = std::vector<std::pair<std::string, std::string>>;

struct Run {
    int exit_code = -1;
    std::string out;
    std::string err;
    std::string all() const { return out + err; }
};

inline std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// Whether a child shares this process's process group, or leads one of its own.
//
// A test that stops a child (SIGSTOP) must give it its own (`own`). Otherwise the child is a
// stopped member of the test's group, and when that group loses its last member whose parent is
// outside it -- the shell that started the test run exits, or a job-control shell's job ends --
// the kernel sends every process of an orphaned group that has a stopped member SIGHUP and SIGCONT
// (POSIX's orphaned process groups), and the stopped payrecon dies of SIGHUP. A child alone in its
// group has its parent, this test process, outside it for as long as the test runs. The cost: a
// Ctrl-C at the terminal reaches the test but not an `own` child; one the test is running when it
// dies that way finishes on its own (SIGHUP and SIGCONT still end it if it is stopped then).
enum class ProcessGroup { shared, own };

// `$PAYRECON_BIN args...` as a child process: its environment is this process's without any
// PAYRECON_* variable (a developer's shell must not leak a configuration in), plus `env`; stdin
// /dev/null, stdout and stderr to files in `dir`. Several may run at once.
class Payrecon {
public:
    Payrecon(const std::filesystem::path& dir, const Env& env, const std::vector<std::string>& args,
             ProcessGroup group = ProcessGroup::shared) {
        static std::atomic<int> counter{0};
        const std::string stem = "run" + std::to_string(++counter);
        m_out = dir / (stem + ".out");
        m_err = dir / (stem + ".err");
        const char* bin = std::getenv("PAYRECON_BIN");
        REQUIRE(bin != nullptr);
        m_command = "payrecon";
        std::vector<std::string> argv_s{bin};
        for (const auto& a : args) {
            argv_s.push_back(a);
            m_command += " " + a;
        }
        std::vector<std::string> env_s;
        for (char** e = environ; *e != nullptr; ++e) {
            const std::string kv = *e;
            if (kv.rfind("PAYRECON_", 0) != 0 && kv.rfind(std::string(k_key_env) + "=", 0) != 0) {
                env_s.push_back(kv);
            }
        }
        for (const auto& [k, v] : env) {
            env_s.push_back(k + "=" + v);
        }
        std::vector<char*> argv;
        for (auto& a : argv_s) {
            argv.push_back(a.data());
        }
        argv.push_back(nullptr);
        std::vector<char*> envp;
        for (auto& e : env_s) {
            envp.push_back(e.data());
        }
        envp.push_back(nullptr);

        posix_spawn_file_actions_t actions;
        REQUIRE(::posix_spawn_file_actions_init(&actions) == 0);
        ::posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
        ::posix_spawn_file_actions_addopen(&actions, 1, m_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                           0600);
        ::posix_spawn_file_actions_addopen(&actions, 2, m_err.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                           0600);
        posix_spawnattr_t attributes;
        REQUIRE(::posix_spawnattr_init(&attributes) == 0);
        if (group == ProcessGroup::own) {
            REQUIRE(::posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP) == 0);
            REQUIRE(::posix_spawnattr_setpgroup(&attributes, 0) == 0); // its own PID
        }
        const int rc = ::posix_spawn(&m_pid, bin, &actions, &attributes, argv.data(), envp.data());
        ::posix_spawnattr_destroy(&attributes);
        ::posix_spawn_file_actions_destroy(&actions);
        REQUIRE(rc == 0);
    }
    ~Payrecon() {
        if (m_pid > 0) {
            ::kill(m_pid, SIGKILL);
            int status = 0;
            ::waitpid(m_pid, &status, 0);
        }
    }
    Payrecon(const Payrecon&) = delete;

    // Sends `signal` (SIGSTOP, SIGCONT, SIGKILL, ...) to the running process.
    void signal(int signal) {
        REQUIRE(m_pid > 0);
        REQUIRE(::kill(m_pid, signal) == 0);
    }
    Payrecon& operator=(const Payrecon&) = delete;

    // The process ID while it has not been reaped; -1 after.
    pid_t pid() const { return m_pid; }
    // What it has written to stdout so far.
    std::string output_so_far() const { return read_file(m_out); }
    // What it has written to stderr so far.
    std::string errors_so_far() const { return read_file(m_err); }
    const std::string& command() const { return m_command; }

    // Without waiting: the run if the process has ended (reaped here; a death by signal N has
    // exit_code 128 + N), nullopt while it runs or is stopped.
    // (Called many times a second by the chaos run: no assertion unless something is wrong.)
    std::optional<Run> poll() {
        if (m_pid <= 0) {
            FAIL(m_command << ": polled after it was reaped");
        }
        int status = 0;
        const pid_t r = ::waitpid(m_pid, &status, WNOHANG);
        if (r < 0) {
            FAIL(m_command << ": waitpid failed: " << std::strerror(errno));
        }
        if (r == 0) {
            return std::nullopt;
        }
        m_pid = -1;
        return finished(status);
    }

    // SIGKILL (a stopped process dies too) and reap; the run, exit_code 128 + 9.
    Run kill() {
        REQUIRE(m_pid > 0);
        ::kill(m_pid, SIGKILL);
        int status = 0;
        REQUIRE(::waitpid(m_pid, &status, 0) == m_pid);
        m_pid = -1;
        return finished(status);
    }

    // Waits for the exit (on a pidfd, no polling). A process still running at `deadline` is a
    // hang: it is killed and the test fails.
    Run wait(std::chrono::seconds deadline = std::chrono::seconds(120)) {
        REQUIRE(m_pid > 0);
        const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, m_pid, 0));
        REQUIRE(pidfd >= 0);
        pollfd p{pidfd, POLLIN, 0};
        int ready = 0;
        do {
            ready = ::poll(&p, 1, static_cast<int>(deadline.count() * 1000));
        } while (ready < 0 && errno == EINTR);
        ::close(pidfd);
        int status = 0;
        if (ready == 0) {
            ::kill(m_pid, SIGKILL);
        }
        ::waitpid(m_pid, &status, 0);
        m_pid = -1;
        Run r;
        r.out = read_file(m_out);
        r.err = read_file(m_err);
        INFO(m_command << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
        if (ready == 0) {
            FAIL("still running after " << deadline.count() << " s: it hangs");
        }
        INFO("killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0));
        REQUIRE(WIFEXITED(status));
        r.exit_code = WEXITSTATUS(status);
        return r;
    }

private:
    Run finished(int status) const {
        Run r;
        r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        r.out = read_file(m_out);
        r.err = read_file(m_err);
        return r;
    }

    pid_t m_pid = -1;
    std::filesystem::path m_out;
    std::filesystem::path m_err;
    std::string m_command;
};

// A loopback port nobody listens on: bound by the kernel's choice, then closed.
inline int closed_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    ::close(fd);
    return ntohs(a.sin_port);
}

// A scratch database with the current schema, for tests whose outcome depends on every payment
// in the database.
struct MigratedScratch {
    ScratchDatabase scratch;
    MigratedScratch() {
        store::Db db(scratch.url());
        store::migrate(db);
        install_lease_guard(scratch.url());
    }
    const std::string& url() const { return scratch.url(); }
};

// One test's world: a database (the shared test database unless told), a tenant with a writer,
// the fake Stripe provider, the provider configuration file, and the binary run against them.
struct Operated {
    std::string url;
    std::unique_ptr<store::Db> db;
    TestTenant tenant;
    TestPrincipal writer;
    std::ostringstream provider_log;
    std::unique_ptr<fake::FakeProvider> fake;
    providers::ProviderConfig config; // the in-process adapter: the file's provider, same key
    // The fake's PayPal app (its dialect's OAuth2 client), for a test that configures one.
    Secret paypal_secret{"paypal-secret-" + to_hex(random_bytes(8))};
    std::string paypal_client_id;
    TempDir dir;
    std::filesystem::path config_file;
    pqxx::connection sql_connection{url}; // the test's own reads and set-up writes

    explicit Operated(std::string database = database_url())
        : url(std::move(database)), db(std::make_unique<store::Db>(url)),
          tenant(make_tenant(*db, "opcli")), writer(make_principal(*db, tenant)) {
        fake::FakeProviderOptions o;
        o.account.api_key = Secret("sk_test_fake_" + to_hex(random_bytes(8)));
        o.paypal.client_secret = paypal_secret;
        paypal_client_id = o.paypal.client_id;
        fake = std::make_unique<fake::FakeProvider>(o, provider_log);
        fake->start();
        config.name = "st" + to_hex(random_bytes(8));
        config.kind = "stripe";
        config.base_url = "http://127.0.0.1:" + std::to_string(fake->port());
        config.credentials = providers::ApiKey{k_key_env, o.account.api_key};
        config.connect_timeout = std::chrono::milliseconds(500);
        config.timeout = std::chrono::milliseconds(2000);
        config.settle_delay = std::chrono::seconds(0);
        config_file = dir.path() / "providers.json";
        write_config();
    }

    // (Re)writes the configuration file: this test's provider at `base_url` (the fake unless
    // given), settle delay 0, plus the fields of `extra`.
    void write_config(const nlohmann::json& extra = nlohmann::json::object(),
                      std::string base_url = "") {
        nlohmann::json p = {
            {"kind", "stripe"},         {"base_url", base_url.empty() ? config.base_url : base_url},
            {"api_key_env", k_key_env}, {"connect_timeout_ms", 500},
            {"timeout_ms", 2000},       {"settle_delay_s", 0}};
        if (!extra.is_null()) {
            p.update(extra);
        }
        std::ofstream(config_file) << nlohmann::json{{"providers", {{config.name, p}}}}.dump(2);
    }

    // The child's environment: the key, and nothing naming a configuration or database.
    Env env(Env extra = {}) const {
        extra.emplace_back(k_key_env,
                           std::get<providers::ApiKey>(config.credentials).value.reveal());
        return extra;
    }
    // `payrecon --database URL --config FILE args...`, started; `ProcessGroup::own` for a process
    // the test will stop (see ProcessGroup).
    std::unique_ptr<Payrecon> start(const std::vector<std::string>& args, const Env& extra = {},
                                    ProcessGroup group = ProcessGroup::shared) {
        std::vector<std::string> all{"--database", url, "--config", config_file.string()};
        all.insert(all.end(), args.begin(), args.end());
        return std::make_unique<Payrecon>(dir.path(), env(extra), all, group);
    }
    Run payrecon(const std::vector<std::string>& args, const Env& extra = {}) {
        return start(args, extra)->wait();
    }
    // Exactly `args`, with `env` as the only additions to the environment.
    Run payrecon_raw(const std::vector<std::string>& args, const Env& env) {
        return Payrecon(dir.path(), env, args).wait();
    }

    // Payments of 25.00 EUR for this test's provider, through the real intake.
    std::vector<std::string> payments(int n) {
        IntakeService intake(*db, test_keys());
        std::vector<std::string> refs;
        for (int i = 0; i < n; ++i) {
            const std::string ref = unique_name("ord");
            const std::string body =
                R"({"amount": 2500, "currency": "EUR", "merchant_reference": ")" + ref +
                R"(", "provider": ")" + config.name + R"(", "payment_method": "pm_card_visa"})";
            REQUIRE(intake.create_payment(writer.principal, "k-" + ref, body, "").status == 202);
            refs.push_back(ref);
        }
        return refs;
    }
    // `n` payments sent once by an in-process executor, each meeting `fault`: all unknown.
    std::vector<std::string> unknown_payments(int n, fake::Fault fault) {
        auto faults = fake->faults();
        faults.next.assign(static_cast<std::size_t>(n), fault);
        faults.hang = std::chrono::milliseconds(3000); // past the adapter's 2 s
        fake->set_faults(faults);
        const auto refs = payments(n);
        auto provider = providers::create_provider(config);
        engine::ExecutorOptions o;
        o.worker_id = "clitest-executor";
        o.lease = std::chrono::seconds(60);
        engine::Executor ex(*db, {provider.get()}, o);
        int sent = 0;
        while (const int n_sent = ex.run_once()) {
            sent += n_sent;
        }
        REQUIRE(sent == n);
        for (const auto& ref : refs) {
            REQUIRE(state_of(ref) == "unknown");
        }
        return refs;
    }
    std::string unknown_payment(fake::Fault fault) { return unknown_payments(1, fault)[0]; }

    std::string value(const std::string& sql, const std::string& param) {
        pqxx::read_transaction tx(sql_connection);
        const pqxx::result r = tx.exec_params(sql, param);
        return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
    }
    void exec(const std::string& sql, const std::string& param) {
        pqxx::work tx(sql_connection);
        tx.exec_params0(sql, param);
        tx.commit();
    }
    std::string column(const std::string& ref, const std::string& name) {
        return value("SELECT " + name + "::text FROM payments WHERE merchant_reference = $1", ref);
    }
    std::string state_of(const std::string& ref) { return column(ref, "state"); }
    // The fake provider's PaymentIntent ID for payment `ref` (its metadata names our operation
    // ID); fails the test if it has none.
    std::string intent_of(const std::string& ref) {
        const auto ledger = fake->ledger(); // not a temporary the loop would outlive
        for (const auto& pi : ledger["payment_intents"]) {
            if (pi["metadata"]["operation_id"] == op_of(ref)) {
                return pi["id"];
            }
        }
        FAIL("the fake provider has no PaymentIntent for " + ref);
        return {};
    }
    // `payrecon review resolve <ref> --generation <now> --as succeeded --provider-reference
    // <reference> --note <note> <more...>`.
    Run resolve_succeeded(const std::string& ref, const std::string& reference,
                          const std::string& note, const std::vector<std::string>& more = {}) {
        std::vector<std::string> args{"review",
                                      "resolve",
                                      payment_id_of(ref),
                                      "--generation",
                                      std::to_string(generation_of(ref)),
                                      "--as",
                                      "succeeded",
                                      "--provider-reference",
                                      reference,
                                      "--note",
                                      note};
        args.insert(args.end(), more.begin(), more.end());
        return payrecon(args);
    }
    std::string payment_id_of(const std::string& ref) { return column(ref, "payment_id"); }
    std::string op_of(const std::string& ref) { return column(ref, "operation_id"); }
    long long generation_of(const std::string& ref) {
        return std::stoll(column(ref, "generation"));
    }
    // Rows of `table` in this test's tenant matching `where`.
    long long count(const std::string& table, const std::string& where = "true") {
        return std::stoll(value("SELECT count(*) FROM " + table +
                                    " WHERE tenant_id = $1::uuid AND (" + where + ")",
                                tenant.tenant_id));
    }
    long long lookups(const std::string& ref, const std::string& where = "true") {
        return count("payment_lookups",
                     "payment_id = '" + payment_id_of(ref) + "'::uuid AND (" + where + ")");
    }
    long long events(const std::string& ref, const std::string& where = "true") {
        return count("outbox",
                     "aggregate_id = '" + payment_id_of(ref) + "'::uuid AND (" + where + ")");
    }
    long long audits(const std::string& ref, const std::string& where = "true") {
        return count("audit_log", "subject_id = '" + payment_id_of(ref) + "' AND (" + where + ")");
    }
    int executions(const std::string& ref) { return executions_of(op_of(ref)); }
    int deliveries(const std::string& ref) { return deliveries_of(op_of(ref)); }
    // The fake's executions and deliveries of operation ID `op`: a charge's or a refund's.
    int executions_of(const std::string& op) {
        const auto l = fake->ledger();
        return l["executions"].contains(op) ? l["executions"][op].get<int>() : 0;
    }
    int deliveries_of(const std::string& op) {
        const auto l = fake->ledger();
        return l["deliveries_by_operation"].contains(op)
                   ? l["deliveries_by_operation"][op].get<int>()
                   : 0;
    }
    // What the fake refunded in EUR, all refunds of every payment together.
    long long refunded_eur() {
        const auto l = fake->ledger();
        return l.contains("refunded") && l["refunded"].contains("eur")
                   ? l["refunded"]["eur"].get<long long>()
                   : 0;
    }
    // The fake's ID of the refund it made under operation ID `op` ("" if none): a Stripe refund
    // object, wherever the ledger holds it, whose metadata names `op`.
    std::string provider_refund_of(const std::string& op) {
        std::string found;
        const std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& j) {
            if (j.is_object() && j.value("object", "") == "refund" && j.contains("metadata") &&
                j["metadata"].value("operation_id", "") == op) {
                found = j["id"];
            }
            if (j.is_structured()) {
                for (const auto& v : j) {
                    walk(v);
                }
            }
        };
        walk(fake->ledger());
        return found;
    }
    // `payrecon refunds create --payment <payment_id> --amount <amount> --idempotency-key <key>
    // --note <note> --json`, as an operator holding the writer's API key (PAYRECON_API_KEY) and
    // the fingerprint secret the in-process intake uses (test_keys()): a refund through the real
    // intake path, audited. Returns the refund's ID; fails the test unless it was accepted (202).
    std::string create_refund(const std::string& payment_id, const std::string& amount,
                              const std::string& key, const std::string& note) {
        const std::filesystem::path secret = dir.path() / "fingerprint.secret";
        if (!std::filesystem::exists(secret)) {
            std::ofstream(secret) << test_secret('k').reveal() << "\n";
            std::filesystem::permissions(secret, std::filesystem::perms::owner_read |
                                                     std::filesystem::perms::owner_write);
        }
        const Run r = payrecon({"refunds", "create", "--payment", payment_id, "--amount", amount,
                                "--idempotency-key", key, "--note", note, "--json"},
                               {{"PAYRECON_API_KEY", writer.api_key.reveal()},
                                {"PAYRECON_FINGERPRINT_SECRET_FILE", secret.string()},
                                {"PAYRECON_OPERATOR", "operator@" + tenant.name}});
        INFO(r.all());
        REQUIRE(r.exit_code == 0);
        const auto answer = nlohmann::json::parse(r.out);
        REQUIRE(answer["status"] == 202);
        return answer["body"]["id"];
    }
    void set_lookup_down(bool down) {
        auto f = fake->faults();
        f.lookup_down = down;
        fake->set_faults(f);
    }
};

} // namespace payrecon::testing
