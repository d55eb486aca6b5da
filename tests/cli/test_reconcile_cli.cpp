// The operator commands as the real binary (PAYRECON_BIN): reconcile, nightly, review resolve and
// review recheck, and the worker sending what an operator scheduled. Each test runs an in-process
// fake Stripe provider on loopback and writes a provider configuration naming a provider of its
// own ("st" + 16 hex), so the reconciler claims only that test's payments. The API key reaches
// the child through its environment only. Tests whose exit code depends on the whole database
// (nightly counts every open payment, and takes over every expired lease) run on a scratch
// database of their own. Outcomes are counted in payments, payment_lookups, audit_log and outbox,
// and in the fake provider's ledger.
#include "core/intake.hpp"
#include "core/store/migrations.hpp"
#include "engine/executor.hpp"
#include "providers/config.hpp"
#include "providers/registry.hpp"
#include "reports/report.hpp"
#include "tests/fake_provider/fake_provider.hpp"
#include "tests/support/test_db.hpp"

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
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

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// The variable the configuration's api_key_env names; set in the child's environment only.
constexpr const char* k_key_env = "CLITEST_STRIPE_API_KEY";

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

// A directory of its own under the system's temporary directory, removed with its contents.
class TempDir {
public:
    TempDir() {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "payrecon-clitest-XXXXXX").string();
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

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// `$PAYRECON_BIN args...` as a child process: its environment is this process's without any
// PAYRECON_* variable (a developer's shell must not leak a configuration in), plus `env`; stdin
// /dev/null, stdout and stderr to files in `dir`. Several may run at once.
class Payrecon {
public:
    Payrecon(const std::filesystem::path& dir, const Env& env,
             const std::vector<std::string>& args) {
        static int counter = 0;
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
        const int rc = ::posix_spawn(&m_pid, bin, &actions, nullptr, argv.data(), envp.data());
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
    Payrecon& operator=(const Payrecon&) = delete;

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
        REQUIRE(WIFEXITED(status));
        r.exit_code = WEXITSTATUS(status);
        return r;
    }

private:
    pid_t m_pid = -1;
    std::filesystem::path m_out;
    std::filesystem::path m_err;
    std::string m_command;
};

// A loopback port nobody listens on: bound by the kernel's choice, then closed.
int closed_port() {
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
    TempDir dir;
    std::filesystem::path config_file;
    pqxx::connection sql_connection{url}; // the test's own reads and set-up writes

    explicit Operated(std::string database = database_url())
        : url(std::move(database)), db(std::make_unique<store::Db>(url)),
          tenant(make_tenant(*db, "opcli")), writer(make_principal(*db, tenant)) {
        fake::FakeProviderOptions o;
        o.stripe.api_key = Secret("sk_test_fake_" + to_hex(random_bytes(8)));
        fake = std::make_unique<fake::FakeProvider>(o, provider_log);
        fake->start();
        config.name = "st" + to_hex(random_bytes(8));
        config.kind = "stripe";
        config.base_url = "http://127.0.0.1:" + std::to_string(fake->port());
        config.api_key_env = k_key_env;
        config.api_key = o.stripe.api_key;
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
        extra.emplace_back(k_key_env, config.api_key.reveal());
        return extra;
    }
    // `payrecon --database URL --config FILE args...`, started.
    std::unique_ptr<Payrecon> start(const std::vector<std::string>& args, const Env& extra = {}) {
        std::vector<std::string> all{"--database", url, "--config", config_file.string()};
        all.insert(all.end(), args.begin(), args.end());
        return std::make_unique<Payrecon>(dir.path(), env(extra), all);
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
    int executions(const std::string& ref) {
        const auto l = fake->ledger();
        const std::string op = op_of(ref);
        return l["executions"].contains(op) ? l["executions"][op].get<int>() : 0;
    }
    int deliveries(const std::string& ref) {
        const auto l = fake->ledger();
        const std::string op = op_of(ref);
        return l["deliveries_by_operation"].contains(op)
                   ? l["deliveries_by_operation"][op].get<int>()
                   : 0;
    }
    void set_lookup_down(bool down) {
        auto f = fake->faults();
        f.lookup_down = down;
        fake->set_faults(f);
    }
};

// Everything a payment has written so far, to show that a refused command wrote nothing.
struct Footprint {
    std::string state;
    long long generation = 0;
    long long lookups = 0;
    long long events = 0;
    long long audits = 0;
    bool operator==(const Footprint& o) const {
        return state == o.state && generation == o.generation && lookups == o.lookups &&
               events == o.events && audits == o.audits;
    }
};
std::ostream& operator<<(std::ostream& os, const Footprint& f) {
    return os << "{" << f.state << ", generation " << f.generation << ", lookups " << f.lookups
              << ", events " << f.events << ", audits " << f.audits << "}";
}
Footprint footprint(Operated& w, const std::string& ref) {
    return {w.state_of(ref), w.generation_of(ref), w.lookups(ref), w.events(ref), w.audits(ref)};
}

int payments_in(const nlohmann::json& summary, const std::string& bucket) {
    const auto& r = summary.at("reconciled");
    return r.contains(bucket) ? r.at(bucket).at("payments").get<int>() : 0;
}

} // namespace

TEST_CASE("operator cli: reconcile --dry-run --json prints the decision and changes nothing, then "
          "reconcile --json applies it and exits 0",
          "[cli][db][reconcile]") {
    Operated w;
    const std::string ref = w.unknown_payment(fake::Fault::execute_then_fin);
    const Footprint before = footprint(w, ref);

    const Run dry = w.payrecon({"reconcile", "--dry-run", "--json"});
    REQUIRE(dry.exit_code == 0);
    const auto d = nlohmann::json::parse(dry.out);
    CHECK(d["dry_run"] == true);
    CHECK(d["reconciled"] == 1);
    CHECK(d["to_review"] == 0);
    REQUIRE(d["payments"].size() == 1);
    const auto& decided = d["payments"][0];
    CHECK(decided["payment_id"] == w.payment_id_of(ref));
    CHECK(decided["operation_id"] == w.op_of(ref));
    CHECK(decided["provider"] == w.config.name);
    CHECK(decided["from"] == "unknown");
    CHECK(decided["to"] == "succeeded");
    CHECK(decided["lookup"] == "found");
    CHECK(decided["decision"] == "adopt_succeeded");
    CHECK(decided["applied"] == false);
    CHECK(footprint(w, ref) == before); // state, generation, lookups, outbox, audit
    CHECK(w.lookups(ref) == 0);

    const Run applied = w.payrecon({"reconcile", "--json"});
    REQUIRE(applied.exit_code == 0);
    const auto a = nlohmann::json::parse(applied.out);
    CHECK(a["dry_run"] == false);
    CHECK(a["reconciled"] == 1);
    REQUIRE(a["payments"].size() == 1);
    CHECK(a["payments"][0]["applied"] == true);
    CHECK(w.state_of(ref) == "succeeded");
    CHECK(w.column(ref, "provider_reference").rfind("pi_", 0) == 0);
    CHECK(w.generation_of(ref) > before.generation);
    CHECK(w.lookups(ref) == 1);
    CHECK(w.lookups(ref, "actor LIKE 'reconcile:%' AND applied") == 1);
    CHECK(w.events(ref) == before.events + 1);
    CHECK(w.events(ref, "event_type = 'payment.succeeded'") == 1);
    CHECK(w.audits(ref, "action = 'payment.reconciled'") == 1);
    CHECK(w.executions(ref) == 1);
    CHECK(w.deliveries(ref) == 1);

    // Nothing is due any more.
    const Run again = w.payrecon({"reconcile", "--json"});
    CHECK(again.exit_code == 0);
    CHECK(nlohmann::json::parse(again.out)["reconciled"] == 0);
    CHECK(w.lookups(ref) == 1);
}

TEST_CASE("operator cli: reconcile sending a payment to review exits 3", "[cli][db][reconcile]") {
    Operated w;
    const std::string ref = w.unknown_payment(fake::Fault::drop_before_execute);
    w.write_config({{"capabilities", {{"lookup", false}}}});

    const Run r = w.payrecon({"reconcile"});
    CHECK(r.exit_code == 3);
    CHECK(contains(r.out, w.payment_id_of(ref)));
    CHECK(contains(r.out, "no_lookup"));
    CHECK(contains(r.out, "1 to review"));
    CHECK(contains(r.out, "payrecon review list"));
    CHECK(w.state_of(ref) == "needs_review");
    CHECK(w.column(ref, "review_code") == "no_lookup");
    CHECK(w.lookups(ref, "status = 'not_asked' AND applied") == 1);
    CHECK(w.events(ref, "event_type = 'payment.needs_review'") == 1);
    CHECK(w.deliveries(ref) == 1); // never sent again
    CHECK(w.executions(ref) == 0);

    // Review is for people: the next run leaves it alone and exits 0.
    const Run next = w.payrecon({"reconcile", "--json"});
    CHECK(next.exit_code == 0);
    CHECK(nlohmann::json::parse(next.out)["reconciled"] == 0);
    CHECK(w.lookups(ref) == 1);
}

TEST_CASE("operator cli: a clean nightly exits 0, prints 'result: clean' and its --json summary "
          "counts what it did",
          "[cli][db][reconcile]") {
    MigratedScratch scratch;
    Operated w(scratch.url());
    const std::string found = w.unknown_payment(fake::Fault::execute_then_fin);
    const std::string absent = w.unknown_payment(fake::Fault::drop_before_execute);

    const Run r = w.payrecon({"nightly"});
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "result: clean"));
    CHECK(contains(r.out, "unknown payments reconciled: 2"));
    CHECK(contains(r.out, "review queue: 0 payment(s)"));
    // The provider had one: adopted. The other it never got: sent again with the same operation
    // ID in the same run.
    CHECK(w.state_of(found) == "succeeded");
    CHECK(w.state_of(absent) == "succeeded");
    CHECK(w.executions(found) == 1);
    CHECK(w.deliveries(found) == 1);
    CHECK(w.executions(absent) == 1);
    CHECK(w.deliveries(absent) == 2);
    CHECK(w.lookups(found) == 1);
    CHECK(w.lookups(absent) == 1);
    CHECK(w.events(found, "event_type = 'payment.succeeded'") == 1);
    CHECK(w.events(absent, "event_type = 'payment.retry_scheduled'") == 1);
    CHECK(w.events(absent, "event_type = 'payment.succeeded'") == 1);

    // Again, with nothing left to do, as JSON.
    const Run j = w.payrecon({"nightly", "--json"});
    CHECK(j.exit_code == 0);
    const auto s = nlohmann::json::parse(j.out);
    CHECK(s["exit_code"] == 0);
    CHECK(s["result"] == "clean");
    CHECK(s["providers"] == nlohmann::json::array({w.config.name}));
    CHECK(s["reconciled"] == nlohmann::json::object());
    CHECK(s["in_review"] == 0);
    CHECK(s["still_unknown"] == 0);
    CHECK(s["open"] == nlohmann::json::array());
    CHECK(s["sent"]["attempted"] == 0);
    CHECK(w.lookups(found) == 1);
}

TEST_CASE("operator cli: a nightly that leaves a payment in review exits 3 and names the review "
          "code",
          "[cli][db][reconcile]") {
    MigratedScratch scratch;
    Operated w(scratch.url());
    const std::string found = w.unknown_payment(fake::Fault::execute_then_fin);
    const std::string resent = w.unknown_payment(fake::Fault::drop_before_execute);
    const std::string late = w.unknown_payment(fake::Fault::drop_before_execute);
    // Its first attempt was 23.5 hours ago: past Stripe's 24 h key retention minus the margin, a
    // re-send could charge twice.
    w.exec("UPDATE payments SET first_attempt_at = now() - interval '23 hours 30 minutes' "
           "WHERE merchant_reference = $1",
           late);

    const Run r = w.payrecon({"nightly"});
    CHECK(r.exit_code == 3);
    CHECK(contains(r.out, "review queue: 1 payment(s), 1 new in this run"));
    CHECK(contains(r.out, "outside_key_window"));
    CHECK(contains(r.out, w.payment_id_of(late)));
    CHECK(contains(r.out, "result: attention needed"));
    CHECK(w.state_of(found) == "succeeded");
    CHECK(w.state_of(resent) == "succeeded");
    CHECK(w.state_of(late) == "needs_review");
    CHECK(w.column(late, "review_code") == "outside_key_window");
    CHECK(w.deliveries(late) == 1); // not sent again
    CHECK(w.executions(late) == 0);
    CHECK(w.executions(resent) == 1);
    CHECK(w.events(late, "event_type = 'payment.needs_review'") == 1);

    // The next night: nothing to reconcile, the review queue still waits.
    const Run j = w.payrecon({"nightly", "--json"});
    CHECK(j.exit_code == 3);
    const auto s = nlohmann::json::parse(j.out);
    CHECK(s["exit_code"] == 3);
    CHECK(s["result"] == "attention");
    CHECK(s["reconciled"] == nlohmann::json::object());
    CHECK(s["to_review"] == nlohmann::json::array());
    CHECK(s["in_review"] == 1);
    CHECK(s["still_unknown"] == 0);
    REQUIRE(s["open"].size() == 1);
    CHECK(s["open"][0]["state"] == "needs_review");
    CHECK(s["open"][0]["provider"] == w.config.name);
    CHECK(s["open"][0]["review_code"] == "outside_key_window");
    CHECK(s["open"][0]["payments"] == 1);
    CHECK(s["open"][0]["amount"] == 2500);
    CHECK(w.lookups(late) == 1);
}

TEST_CASE("operator cli: nightly --json on a run that sends payments to review lists them with "
          "their code",
          "[cli][db][reconcile]") {
    MigratedScratch scratch;
    Operated w(scratch.url());
    const std::string found = w.unknown_payment(fake::Fault::execute_then_fin);
    const std::string blind = w.unknown_payment(fake::Fault::execute_then_rst);
    w.write_config({{"capabilities", {{"lookup", false}}}});

    const Run j = w.payrecon({"nightly", "--json"});
    CHECK(j.exit_code == 3);
    const auto s = nlohmann::json::parse(j.out);
    CHECK(s["exit_code"] == 3);
    CHECK(s["result"] == "attention");
    CHECK(payments_in(s, "to review") == 2);
    CHECK(s["reconciled"]["to review"]["amounts"]["EUR"] == 5000);
    REQUIRE(s["to_review"].size() == 2);
    for (const auto& p : s["to_review"]) {
        CHECK(p["review_code"] == "no_lookup");
        CHECK(p["to"] == "needs_review");
    }
    CHECK(s["in_review"] == 2);
    CHECK(s["still_unknown"] == 0);
    REQUIRE(s["open"].size() == 1);
    CHECK(s["open"][0]["review_code"] == "no_lookup");
    CHECK(s["open"][0]["payments"] == 2);
    CHECK(w.state_of(found) == "needs_review");
    CHECK(w.state_of(blind) == "needs_review");
    CHECK(w.executions(found) == 1);
    CHECK(w.executions(blind) == 1);
    CHECK(w.deliveries(blind) == 1);
}

TEST_CASE("operator cli: nightly with the database unreachable exits 5 and says so",
          "[cli][db][reconcile]") {
    Operated w;
    const Run r = w.payrecon_raw({"--database", "postgresql:///x?host=/nonexistent", "--config",
                                  w.config_file.string(), "nightly"},
                                 w.env());
    CHECK(r.exit_code == 5);
    CHECK(contains(r.err, "cannot connect to the database"));
    CHECK(contains(r.err, "what to do:"));
    CHECK_FALSE(contains(r.all(), w.config.api_key.reveal()));
    CHECK(r.out.empty()); // no summary of a run that never started
}

TEST_CASE("operator cli: nightly with the provider unreachable still exits: lookups fail, checked "
          "later, then review",
          "[cli][db][reconcile]") {
    MigratedScratch scratch;
    Operated w(scratch.url());
    const std::string ref = w.unknown_payment(fake::Fault::execute_then_fin);
    w.write_config({}, "http://127.0.0.1:" + std::to_string(closed_port()));

    // (--no-statement: the statement listing would fail too, and fail the run; that path is
    // tested in tests/execution/test_statement.cpp.)
    const Run first = w.payrecon({"nightly", "--json", "--no-statement"});
    CHECK(first.exit_code == 0); // nothing in review yet; the payment is checked again later
    const auto s = nlohmann::json::parse(first.out);
    CHECK(payments_in(s, "check again later") == 1);
    CHECK(s["still_unknown"] == 1);
    CHECK(s["in_review"] == 0);
    CHECK(w.state_of(ref) == "unknown");
    CHECK(w.column(ref, "lookup_failures") == "1");
    CHECK(w.lookups(ref, "status = 'failed'") == 1);
    CHECK(w.deliveries(ref) == 1);

    // Due again (as after its backoff): the second failure in a row sends it to review.
    w.exec("UPDATE payments SET next_attempt_at = now() - interval '1 second' "
           "WHERE merchant_reference = $1",
           ref);
    const Run second = w.payrecon({"nightly", "--lookup-failures", "2", "--no-statement"});
    CHECK(second.exit_code == 3);
    CHECK(contains(second.out, "lookup_failing"));
    CHECK(w.state_of(ref) == "needs_review");
    CHECK(w.column(ref, "review_code") == "lookup_failing");
    CHECK(w.lookups(ref, "status = 'failed'") == 2);
    CHECK(w.executions(ref) == 1);
    CHECK(w.deliveries(ref) == 1);
}

TEST_CASE("operator cli: two nightly processes at once handle each of 30 unknown payments "
          "exactly once",
          "[cli][db][reconcile][race]") {
    MigratedScratch scratch;
    Operated w(scratch.url());
    const auto refs = w.unknown_payments(30, fake::Fault::execute_then_fin);
    const long long events_before = w.count("outbox");
    auto slow = w.fake->faults();
    slow.latency = std::chrono::milliseconds(20); // lookups take a while: the runs overlap
    w.fake->set_faults(slow);

    auto a = w.start({"nightly", "--json"});
    auto b = w.start({"nightly", "--json"});
    const Run ra = a->wait();
    const Run rb = b->wait();
    CHECK(ra.exit_code == 0);
    CHECK(rb.exit_code == 0);
    const auto sa = nlohmann::json::parse(ra.out);
    const auto sb = nlohmann::json::parse(rb.out);
    CHECK(payments_in(sa, "succeeded") + payments_in(sb, "succeeded") == 30);
    CHECK(payments_in(sa, "changed meanwhile") + payments_in(sb, "changed meanwhile") == 0);
    CHECK(sa["sent"]["attempted"] == 0);
    CHECK(sb["sent"]["attempted"] == 0);

    CHECK(w.count("payments", "state = 'succeeded'") == 30);
    CHECK(w.count("payment_lookups") == 30);
    CHECK(w.count("payment_lookups", "applied") == 30);
    CHECK(w.count("audit_log", "action = 'payment.reconciled'") == 30);
    CHECK(w.count("outbox") == events_before + 30); // one event per state change
    CHECK(w.count("outbox", "event_type = 'payment.succeeded'") == 30);
    for (const auto& ref : refs) {
        INFO(ref);
        CHECK(w.executions(ref) == 1);
        CHECK(w.deliveries(ref) == 1);
    }
}

TEST_CASE(
    "operator cli: review resolve refuses a retry without --confirm-no-charge, a success "
    "without a reference and a stale generation, and --as retry is sent by the worker with the "
    "same operation ID",
    "[cli][db][reconcile]") {
    Operated w;
    const std::string ref = w.unknown_payment(fake::Fault::drop_before_execute);
    w.write_config({{"capabilities", {{"lookup", false}}}});
    REQUIRE(w.payrecon({"reconcile"}).exit_code == 3);
    REQUIRE(w.state_of(ref) == "needs_review");
    const std::string id = w.payment_id_of(ref);
    const long long shown = w.generation_of(ref);
    const auto resolve = [&](long long generation, std::vector<std::string> decision,
                             const Env& env = {}) {
        std::vector<std::string> args{"review",
                                      "resolve",
                                      id,
                                      "--generation",
                                      std::to_string(generation),
                                      "--note",
                                      "no charge in the Stripe dashboard"};
        args.insert(args.end(), decision.begin(), decision.end());
        return w.payrecon(args, env);
    };
    const Footprint before = footprint(w, ref);

    const Run unconfirmed = resolve(shown, {"--as", "retry"});
    CHECK(unconfirmed.exit_code == 2);
    CHECK(contains(unconfirmed.err, "--confirm-no-charge"));
    CHECK(footprint(w, ref) == before);

    const Run no_reference = resolve(shown, {"--as", "succeeded"});
    CHECK(no_reference.exit_code == 2);
    CHECK(contains(no_reference.err, "--provider-reference"));
    CHECK(footprint(w, ref) == before);

    // Someone else changed the payment after the operator was shown it.
    w.exec("UPDATE payments SET generation = generation + 1 WHERE merchant_reference = $1", ref);
    const Footprint moved = footprint(w, ref);
    const Run stale = resolve(shown, {"--as", "retry", "--confirm-no-charge"});
    CHECK(stale.exit_code == 7);
    CHECK(contains(stale.err, "changed since it was shown"));
    CHECK(footprint(w, ref) == moved);
    CHECK(w.audits(ref, "action = 'review.resolve'") == 0);

    const Run retry = resolve(shown + 1, {"--as", "retry", "--confirm-no-charge"},
                              {{"PAYRECON_OPERATOR", "carol"}});
    CHECK(retry.exit_code == 0);
    CHECK(contains(retry.out, "retry_scheduled"));
    CHECK(w.state_of(ref) == "retry_scheduled");
    CHECK(w.generation_of(ref) == shown + 2);
    CHECK(w.audits(ref, "action = 'review.resolve'") == 1);
    CHECK(w.value("SELECT actor FROM audit_log WHERE subject_id = $1 AND action = 'review.resolve'",
                  id) == "carol");
    CHECK(w.events(ref) == moved.events + 1);
    CHECK(w.events(ref, "event_type = 'payment.retry_scheduled'") == 1);

    // A worker sends it again, with the same operation ID: one execution at the provider.
    const Run worker = w.payrecon({"worker", "--once"});
    CHECK(worker.exit_code == 0);
    CHECK(w.state_of(ref) == "succeeded");
    CHECK(w.executions(ref) == 1);
    CHECK(w.deliveries(ref) == 2);
    CHECK(w.fake->ledger()["executions"].size() == 1);

    // A succeeded payment is not resolved by hand.
    const Footprint done = footprint(w, ref);
    const Run late = resolve(done.generation, {"--as", "failed"});
    CHECK(late.exit_code == 7);
    CHECK(contains(late.err, "is succeeded"));
    CHECK(footprint(w, ref) == done);
}

TEST_CASE("operator cli: review resolve --as succeeded records the operator, the reference, one "
          "audit row and one outbox event",
          "[cli][db][reconcile]") {
    Operated w;
    const std::string ref = w.unknown_payment(fake::Fault::execute_then_hang);
    w.write_config({{"capabilities", {{"lookup", false}}}});
    REQUIRE(w.payrecon({"reconcile"}).exit_code == 3);
    const std::string id = w.payment_id_of(ref);
    const Footprint before = footprint(w, ref);

    const Run r =
        w.payrecon({"--operator", "alice", "review", "resolve", id, "--generation",
                    std::to_string(before.generation), "--as", "succeeded", "--provider-reference",
                    "pi_from_dashboard", "--note", "found in the Stripe dashboard", "--json"},
                   {{"PAYRECON_OPERATOR", "mallory"}});
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["state"] == "succeeded");
    CHECK(j["operator"] == "alice");
    CHECK(j["generation"] == before.generation + 1);
    CHECK(w.state_of(ref) == "succeeded");
    CHECK(w.column(ref, "provider_reference") == "pi_from_dashboard");
    CHECK(w.column(ref, "review_code").empty());
    CHECK(w.audits(ref) == before.audits + 1);
    CHECK(w.audits(ref, "action = 'review.resolve' AND actor = 'alice'") == 1);
    CHECK(w.audits(
              ref,
              "action = 'review.resolve' AND detail->>'note' = 'found in the Stripe dashboard'") ==
          1);
    CHECK(w.events(ref) == before.events + 1);
    CHECK(w.events(ref, "event_type = 'payment.succeeded'") == 1);
    CHECK(w.executions(ref) == 1);
    CHECK(w.deliveries(ref) == 1);

    const Footprint done = footprint(w, ref);
    const Run again = w.payrecon({"--operator", "alice", "review", "resolve", id, "--generation",
                                  std::to_string(done.generation), "--as", "succeeded",
                                  "--provider-reference", "pi_from_dashboard", "--note", "again"});
    CHECK(again.exit_code == 7);
    CHECK(footprint(w, ref) == done);
}

TEST_CASE("operator cli: review recheck adopts what the provider has for a payment in review",
          "[cli][db][reconcile]") {
    Operated w;
    const std::string ref = w.unknown_payment(fake::Fault::execute_then_fin);
    // The provider's search is down: the lookup fails and, with one failure allowed, the payment
    // goes to review.
    w.set_lookup_down(true);
    REQUIRE(w.payrecon({"reconcile", "--lookup-failures", "1"}).exit_code == 3);
    REQUIRE(w.state_of(ref) == "needs_review");
    REQUIRE(w.column(ref, "review_code") == "lookup_failing");
    REQUIRE(w.lookups(ref, "status = 'failed'") == 1);

    w.set_lookup_down(false);
    const Run r =
        w.payrecon({"--operator", "dave", "review", "recheck", w.payment_id_of(ref), "--json"});
    CHECK(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["from"] == "needs_review");
    CHECK(j["to"] == "succeeded");
    CHECK(j["lookup"] == "found");
    CHECK(j["applied"] == true);
    CHECK(w.state_of(ref) == "succeeded");
    CHECK(w.column(ref, "review_code").empty());
    CHECK(w.lookups(ref) == 2);
    CHECK(w.lookups(ref, "status = 'found' AND applied AND actor = 'recheck:dave'") == 1);
    CHECK(w.events(ref, "event_type = 'payment.succeeded'") == 1);
    CHECK(w.executions(ref) == 1);
    CHECK(w.deliveries(ref) == 1);

    // Nothing left to recheck.
    const Run done = w.payrecon({"review", "recheck", w.payment_id_of(ref)});
    CHECK(done.exit_code == 7);
    CHECK(w.lookups(ref) == 2);
}

TEST_CASE("operator cli: bad input exits 2, a missing configuration 4, naming what to fix",
          "[cli][db][reconcile]") {
    Operated w;
    SECTION("reconcile --limit 0: 2") {
        const Run r = w.payrecon({"reconcile", "--limit", "0"});
        CHECK(r.exit_code == 2);
        CHECK(contains(r.err, "--limit"));
    }
    SECTION("nightly without any configuration: 4, naming --config and PAYRECON_CONFIG") {
        const Run r = w.payrecon_raw({"--database", w.url, "nightly"}, w.env());
        CHECK(r.exit_code == 4);
        CHECK(contains(r.err, "--config"));
        CHECK(contains(r.err, "PAYRECON_CONFIG"));
    }
    SECTION("a provider the configuration does not have: 2") {
        for (const char* command : {"reconcile", "nightly"}) {
            INFO(command);
            const Run r = w.payrecon({command, "--provider", "nosuch"});
            CHECK(r.exit_code == 2);
            CHECK(contains(r.err, "nosuch"));
        }
    }
    SECTION("the configuration names a key variable that is not set: 4") {
        const Run r = w.payrecon_raw(
            {"--database", w.url, "--config", w.config_file.string(), "reconcile"}, {});
        CHECK(r.exit_code == 4);
        CHECK(contains(r.err, k_key_env));
    }
}

TEST_CASE("operator cli: statement finds a seeded orphan charge, writes every format, and a rerun "
          "replaces its findings",
          "[cli][db][statement]") {
    Operated w;
    const auto refs = w.payments(2);
    {
        auto provider = providers::create_provider(w.config);
        engine::ExecutorOptions o;
        o.worker_id = "clitest-executor";
        engine::Executor ex(*w.db, {provider.get()}, o);
        while (ex.run_once() > 0) {
        }
    }
    fake::OrphanCharge orphan;
    orphan.amount = 7300;
    orphan.currency = "usd";
    const std::string orphan_id = w.fake->seed_orphan_charge(orphan).front();
    const std::string today = reports::format_utc(std::chrono::system_clock::now()).substr(0, 10);
    const std::vector<std::string> base = {"statement", "--provider", w.config.name, "--from", today};

    const Run text = w.payrecon(base);
    CHECK(text.exit_code == 3);
    CHECK(contains(text.out, "missing_local"));
    CHECK(contains(text.out, orphan_id));
    CHECK(contains(text.out, "73.00 USD"));

    auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = base;
        args.insert(args.end(), extra.begin(), extra.end());
        return args;
    };
    const Run json = w.payrecon(with({"--format", "json"}));
    CHECK(json.exit_code == 3);
    const auto j = nlohmann::json::parse(json.out);
    CHECK(j["schema"] == "payrecon.report/1");
    CHECK(j["totals"]["matched"]["count"] == 2);
    CHECK(j["totals"]["missing_local"]["count"] == 1);
    CHECK(j["findings"].size() == 1);

    const auto html = w.dir.path() / "report.html";
    const Run file = w.payrecon(with({"--format", "html", "--output", html.string()}));
    CHECK(file.exit_code == 3);
    CHECK(file.out.empty());
    std::ifstream in(html);
    const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(contains(page, "<!doctype html>"));
    CHECK(contains(page, orphan_id));

    const Run csv = w.payrecon(with({"--format", "csv"}));
    CHECK(contains(csv.out, orphan_id));
    // Four runs of one window: one run row, its findings replaced each time.
    CHECK(w.value("SELECT runs FROM recon_runs WHERE provider = $1", w.config.name) == "4");
    CHECK(w.value("SELECT count(*) FROM recon_findings f JOIN recon_runs r USING (run_id) WHERE r.provider = $1",
                  w.config.name) == "1");

    CHECK(w.payrecon(with({"--format", "pdf"})).exit_code == 2);
    CHECK(w.payrecon({"statement", "--provider", w.config.name, "--from", "2026-13-01"}).exit_code == 2);
    CHECK(w.payrecon(with({"--output", "/nonexistent-dir/report.txt"})).exit_code == 1);
}
