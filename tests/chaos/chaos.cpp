#include "tests/chaos/chaos.hpp"

#include "store/cluster.hpp"
#include "tests/chaos/clients.hpp"
#include "tests/support/operated.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <curl/curl.h>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <pqxx/pqxx>
#include <random>
#include <thread>

namespace payrecon::chaos {

using namespace payrecon::testing;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

const std::vector<std::string> k_event_names = {
    "worker killed (SIGKILL) and replaced",
    "worker paused past its lease, then resumed",
    "worker paused inside its lease, then resumed",
    "serve killed (SIGKILL) and restarted",
    "serve paused, then resumed",
    "PostgreSQL stopped immediately and started",
    "provider lookups down for a while",
    "payrecon reconcile run",
    "payrecon nightly --no-statement run",
};

namespace {

enum class Kind {
    kill_worker,
    pause_worker_past_lease,
    pause_worker_inside_lease,
    kill_serve,
    pause_serve,
    restart_postgres,
    lookup_outage,
};

const std::string& event_name(Kind k) {
    return k_event_names[static_cast<std::size_t>(k)];
}
const std::string& k_reconcile_run = k_event_names[7];
const std::string& k_nightly_run = k_event_names[8];

// Worker settings: calls of at most 0.2 s connect + 0.8 s in all, so a 3 s lease covers the worst
// case plus the 1 s margin (DESIGN section 6) and a pause of 3.5 s or more outlives it.
constexpr milliseconds k_lease{3000};
constexpr int k_connect_timeout_ms = 200;
constexpr int k_timeout_ms = 800;
constexpr int k_settle_delay_s = 2;
// Before a worker paused past its lease resumes, the provider forgets every idempotency key: a
// call from it would then execute again, and show in the ledger as a second execution.
constexpr std::chrono::hours k_past_key_retention{25};

struct Planned {
    Clock::duration at; // from the start of the chaos phase
    Kind kind;
    Clock::duration length; // of a pause, an outage or PostgreSQL's downtime
};

milliseconds uniform_ms(std::mt19937_64& rng, long long from, long long to) {
    return milliseconds(from +
                        static_cast<long long>(rng() % static_cast<std::uint64_t>(to - from + 1)));
}

// The schedule: events at gaps drawn evenly from 0.3 s to twice the mean less 0.3 s (so a phase of
// length T holds at least T / (2 * mean) of them), in rounds that hold every kind once (and a
// pause past the lease twice), each round in an order of the seed's choosing.
std::vector<Planned> plan(std::mt19937_64& rng, Clock::duration total, milliseconds mean_gap) {
    std::vector<Planned> out;
    std::vector<Kind> round;
    Clock::duration t{0};
    for (;;) {
        t += uniform_ms(rng, 300, std::max<long long>(300, 2 * mean_gap.count() - 300));
        if (t >= total) {
            return out;
        }
        if (round.empty()) {
            round = {Kind::kill_worker,
                     Kind::pause_worker_past_lease,
                     Kind::pause_worker_past_lease,
                     Kind::pause_worker_inside_lease,
                     Kind::kill_serve,
                     Kind::pause_serve,
                     Kind::restart_postgres,
                     Kind::lookup_outage};
            std::shuffle(round.begin(), round.end(), rng);
        }
        const Kind k = round.back();
        round.pop_back();
        Clock::duration length{0};
        switch (k) {
        case Kind::pause_worker_past_lease:
            length = k_lease + uniform_ms(rng, 500, 2000);
            break;
        case Kind::pause_worker_inside_lease:
            length = uniform_ms(rng, 200, 1000);
            break;
        case Kind::pause_serve:
            length = uniform_ms(rng, 500, 2000);
            break;
        case Kind::restart_postgres:
            length = uniform_ms(rng, 0, 1500);
            break;
        case Kind::lookup_outage:
            length = uniform_ms(rng, 1000, 3000);
            break;
        default:
            break;
        }
        out.push_back(Planned{t, k, length});
    }
}

// Every fault mode of the fake provider: each once on the first POSTs (in an order of the seed's
// choosing), then each at a rate (12 % of POSTs in all). Calls take 150 ms, so that workers are
// paused with calls in flight and claims waiting; hangs outlast the workers' timeout; search lags
// 1 s behind (the settle delay, 2 s, covers it).
fake::FaultConfig chaos_faults(std::uint64_t seed) {
    fake::FaultConfig f;
    f.seed = seed;
    f.next = fake::all_faults();
    std::shuffle(f.next.begin(), f.next.end(), std::mt19937_64(seed));
    f.latency = milliseconds(150);
    f.hang = milliseconds(1000);
    f.refuse = milliseconds(200);
    f.lookup_stale = seconds(1);
    f.rates = {{fake::Fault::refuse, 0.01},
               {fake::Fault::drop_before_execute, 0.02},
               {fake::Fault::execute_then_hang, 0.01},
               {fake::Fault::execute_then_fin, 0.02},
               {fake::Fault::execute_then_rst, 0.015},
               {fake::Fault::execute_then_partial, 0.01},
               {fake::Fault::http_500_after_execute, 0.015},
               {fake::Fault::http_500_before_execute, 0.01},
               {fake::Fault::decline, 0.01}};
    return f;
}

std::string tail(const std::string& text, std::size_t lines) {
    std::size_t pos = text.size();
    while (lines-- > 0 && pos > 0) {
        pos = text.rfind('\n', pos - 1);
        if (pos == std::string::npos) {
            return text;
        }
    }
    return text.substr(pos + 1);
}

bool healthy(int port) {
    CURL* curl = curl_easy_init();
    const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/healthz";
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 1000L);
    curl_easy_setopt(
        curl, CURLOPT_WRITEFUNCTION,
        +[](char*, std::size_t size, std::size_t n, void*) { return size * n; });
    long status = 0;
    if (curl_easy_perform(curl) == CURLE_OK) {
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    }
    curl_easy_cleanup(curl);
    return status == 200;
}

// The private cluster's home; on destruction its server is stopped (immediately: nothing of it is
// kept) and the home removed.
struct ClusterHome {
    TempDir home{"payrecon-chaos"};
    ~ClusterHome() {
        try {
            store::LocalCluster(home.path()).stop(store::LocalCluster::StopMode::immediate);
        } catch (...) {
        }
    }
};

// A long-running process the schedule acts on.
struct Managed {
    std::string name;
    std::unique_ptr<Payrecon> process;
    std::optional<Clock::time_point> resume_at; // set while stopped
    Clock::time_point paused_at;
    bool past_lease = false;
};

class Chaos {
public:
    Chaos(const ChaosOptions& options, std::ostream& out)
        : m_options(options), m_out(out), m_plan_rng(options.seed), m_pick_rng(options.seed + 1) {}

    ChaosReport run();

private:
    // The timeline: seconds since the start, then what happened.
    std::ostream& say() {
        const auto s = std::chrono::duration<double>(Clock::now() - m_started).count();
        m_out << "[" << std::fixed << std::setprecision(1) << std::setw(6) << s << " s] ";
        return m_out;
    }
    Env home_env() const { return {{"PAYRECON_HOME", m_home.home.path().string()}}; }
    std::unique_ptr<Payrecon> payrecon(const std::vector<std::string>& args) {
        return m_world->start(args, home_env());
    }
    // A process the run pauses (serve, the workers): in a process group of its own, so that no
    // orphaned-group SIGHUP ends it while it is stopped (see ProcessGroup).
    std::unique_ptr<Payrecon> pausable(const std::vector<std::string>& args) {
        return m_world->start(args, home_env(), ProcessGroup::own);
    }
    // `payrecon db ...` on the private cluster; the test fails if it does not exit 0.
    void db(const std::vector<std::string>& args) {
        Payrecon p(m_home.home.path(), home_env(), args);
        const Run r = p.wait();
        INFO(r.all());
        REQUIRE(r.exit_code == 0);
    }

    void start_serve();
    void start_worker(std::size_t slot);
    // Claims held now, per worker process ID (a worker's ID is host:pid); empty if PostgreSQL
    // cannot be asked.
    std::map<pid_t, int> claims();
    // Polls every process: one that ended on its own is recorded and replaced; a finished
    // reconcile or nightly is counted. Then resumes what is due, and ends a lookup outage.
    void tick();
    void resume(Managed& m);
    void await_job();
    // Carries out one planned event, `late` after its time; false if it must wait: every worker
    // (or serve) is paused, or a pause past the lease waits for a worker holding claims.
    bool act(const Planned& p, Clock::duration late);
    void pause(Managed& m, Clock::duration length, bool past_lease);
    void start_job(const std::string& name);
    void set_lookup_down(bool down);
    long long open_payments(pqxx::connection& c);
    void quiesce();
    void settle();
    ChaosReport check();
    void progress();

    ChaosOptions m_options;
    std::ostream& m_out;
    std::mt19937_64 m_plan_rng; // the schedule, drawn before it starts
    std::mt19937_64 m_pick_rng; // which worker an event hits
    Clock::time_point m_started = Clock::now();
    ClusterHome m_home;
    std::string m_url;
    std::unique_ptr<pqxx::connection> m_sql; // the schedule's own questions
    std::unique_ptr<Operated> m_world;
    fake::FaultConfig m_faults;
    std::unique_ptr<Clients> m_clients;
    int m_port = 0;
    Managed m_serve{"serve", nullptr, std::nullopt, {}, false};
    std::vector<Managed> m_workers;
    int m_worker_count = 0;
    std::unique_ptr<Payrecon> m_job;
    std::string m_job_name;
    std::optional<Clock::time_point> m_lookup_up_at;
    std::map<std::string, int> m_events;
    std::map<std::string, std::map<int, int>> m_job_exits;
    std::vector<std::string> m_process_failures;
    int m_clock_advances = 0;
    int m_fault_changes = 0;
    int m_paused_with_claims = 0;
    Clock::time_point m_next_progress;
};

void Chaos::start_serve() {
    for (int tries = 0; tries < 5; ++tries) {
        if (m_port == 0) {
            m_port = closed_port();
        }
        m_serve.process = pausable(
            {"serve", "--listen", "127.0.0.1:" + std::to_string(m_port), "--threads", "4"});
        m_serve.resume_at.reset();
        const auto until = Clock::now() + seconds(30);
        while (Clock::now() < until) {
            if (const auto ended = m_serve.process->poll()) {
                m_serve.process.reset();
                if (contains(ended->all(), "cannot listen on")) {
                    m_port = 0; // another process took the port meanwhile: another one
                } else {
                    m_process_failures.push_back("serve exited at start (" +
                                                 std::to_string(ended->exit_code) +
                                                 "): " + tail(ended->all(), 3));
                }
                say() << "serve exited at start (" << ended->exit_code
                      << "): " << tail(ended->all(), 3) << "\n";
                break;
            }
            if (healthy(m_port)) {
                if (m_clients) {
                    m_clients->set_port(m_port);
                }
                return;
            }
            std::this_thread::sleep_for(milliseconds(20));
        }
        if (m_serve.process) {
            FAIL("payrecon serve did not answer /healthz within 30 s");
        }
    }
    FAIL("payrecon serve could not be started");
}

void Chaos::start_worker(std::size_t slot) {
    m_workers[slot].name = "worker " + std::to_string(++m_worker_count);
    m_workers[slot].process = pausable({"worker", "--concurrency", "2", "--batch", "4", "--lease",
                                        std::to_string(k_lease.count()) + "ms", "--retry-base",
                                        "200ms", "--retry-cap", "1s"});
    m_workers[slot].resume_at.reset();
    m_workers[slot].past_lease = false;
}

std::map<pid_t, int> Chaos::claims() {
    std::map<pid_t, int> out;
    try {
        if (!m_sql) {
            m_sql = std::make_unique<pqxx::connection>(m_url);
        }
        pqxx::read_transaction tx(*m_sql);
        for (const auto& row : tx.exec("SELECT substring(lease_owner FROM ':([0-9]+)/')::int, "
                                       "count(*)::int FROM payments "
                                       "WHERE state = 'processing' GROUP BY 1")) {
            if (!row[0].is_null()) {
                out[row[0].as<pid_t>()] = row[1].as<int>();
            }
        }
    } catch (const std::exception&) {
        m_sql.reset(); // PostgreSQL restarted: a new connection next time
    }
    return out;
}

void Chaos::tick() {
    m_out << std::flush; // the timeline as it happens, also into a file
    const auto now = Clock::now();
    const auto replace = [&](Managed& m, const Run& r) {
        m_process_failures.push_back(m.name + " exited on its own (" + std::to_string(r.exit_code) +
                                     "): " + tail(r.all(), 3));
        say() << m.name << " exited on its own (" << r.exit_code << "); started again\n";
    };
    if (m_serve.process) {
        if (const auto r = m_serve.process->poll()) {
            replace(m_serve, *r);
            start_serve();
        }
    }
    for (std::size_t i = 0; i < m_workers.size(); ++i) {
        if (const auto r = m_workers[i].process->poll()) {
            replace(m_workers[i], *r);
            start_worker(i);
        }
    }
    if (m_job) {
        if (const auto r = m_job->poll()) {
            ++m_job_exits[m_job_name][r->exit_code];
            // Under chaos a run's every query can fail for more than the lookup outage (the
            // provider paused or its connections cut): exit 1 is then the documented outcome.
            const bool outage_outcome =
                r->exit_code == 1 && m_job_name == k_reconcile_run &&
                (r->all().find("status queries FAILED") != std::string::npos ||
                 r->all().find("status query FAILED") != std::string::npos);
            if (r->exit_code != 0 && r->exit_code != 3 && !outage_outcome) {
                m_process_failures.push_back(m_job_name + " exited " +
                                             std::to_string(r->exit_code) + ": " +
                                             tail(r->all(), 3));
            }
            m_job.reset();
        }
    }
    if (m_serve.resume_at && *m_serve.resume_at <= now) {
        resume(m_serve);
    }
    for (auto& w : m_workers) {
        if (w.resume_at && *w.resume_at <= now) {
            resume(w);
        }
    }
    if (m_lookup_up_at && *m_lookup_up_at <= now) {
        set_lookup_down(false);
        m_lookup_up_at.reset();
        say() << "provider lookups back\n";
    }
}

void Chaos::resume(Managed& m) {
    std::string clock;
    if (m.past_lease) {
        m_world->fake->advance_clock(k_past_key_retention);
        ++m_clock_advances;
        clock = "; the provider's clock moved 25 h on first: every key forgotten";
    }
    m.process->signal(SIGCONT);
    m.resume_at.reset();
    say() << m.name << " resumed after "
          << std::chrono::duration<double>(Clock::now() - m.paused_at).count() << " s" << clock
          << "\n";
}

void Chaos::await_job() {
    const auto until = Clock::now() + seconds(180);
    while (m_job) {
        if (Clock::now() > until) {
            m_process_failures.push_back(m_job_name + " still ran after 180 s: killed");
            m_job->kill();
            m_job.reset();
            return;
        }
        tick();
        std::this_thread::sleep_for(milliseconds(20));
    }
}

void Chaos::pause(Managed& m, Clock::duration length, bool past_lease) {
    m.process->signal(SIGSTOP);
    m.paused_at = Clock::now();
    m.resume_at = m.paused_at + length;
    m.past_lease = past_lease;
}

void Chaos::set_lookup_down(bool down) {
    auto f = m_world->fake->faults();
    f.lookup_down = down;
    f.seed = m_options.seed +
             static_cast<std::uint64_t>(++m_fault_changes); // new draws, not the same again
    m_world->fake->set_faults(f);
}

// `name` is k_reconcile_run, or a nightly run (counted under that name).
void Chaos::start_job(const std::string& name) {
    const bool nightly = name != k_reconcile_run;
    m_job_name = name;
    std::vector<std::string> args{nightly ? "nightly" : "reconcile", "--recheck-base", "1s",
                                  "--recheck-cap", "3s"};
    if (nightly) {
        args.emplace_back("--no-statement");
    }
    m_job = payrecon(args);
    ++m_events[m_job_name];
}

bool Chaos::act(const Planned& p, Clock::duration late) {
    const auto length_s = std::chrono::duration<double>(p.length).count();
    const std::map<pid_t, int> held = claims();
    const auto claims_of = [&](const Managed& w) {
        const auto it = held.find(w.process->pid());
        return it == held.end() ? 0 : it->second;
    };
    // A worker to act on: not paused, preferring one that holds claims; nullptr if none may be
    // paused now (every one is), or if none holds claims and the event can wait a little for one.
    const auto pick_worker = [&](Clock::duration may_wait) -> Managed* {
        std::vector<Managed*> running;
        std::vector<Managed*> holding;
        for (auto& w : m_workers) {
            if (!w.resume_at) {
                running.push_back(&w);
                if (claims_of(w) > 0) {
                    holding.push_back(&w);
                }
            }
        }
        if (holding.empty() && late < may_wait) {
            return nullptr;
        }
        auto& from = holding.empty() ? running : holding;
        return from.empty() ? nullptr : from[m_pick_rng() % from.size()];
    };
    switch (p.kind) {
    case Kind::kill_worker: {
        const std::size_t slot = m_pick_rng() % m_workers.size();
        Managed& w = m_workers[slot];
        const std::string claims =
            w.resume_at ? std::string("paused") : std::to_string(claims_of(w)) + " claims";
        const std::string old = w.name;
        w.process->kill();
        start_worker(slot);
        say() << old << " (" << claims << ") SIGKILL; " << w.name << " started\n";
        break;
    }
    case Kind::pause_worker_past_lease:
    case Kind::pause_worker_inside_lease: {
        const bool past = p.kind == Kind::pause_worker_past_lease;
        // A pause past the lease waits up to 2 s for a worker holding claims.
        Managed* w = pick_worker(past ? seconds(2) : seconds(0));
        if (w == nullptr) {
            return false;
        }
        const int n = claims_of(*w);
        if (past && n > 0) {
            ++m_paused_with_claims;
        }
        pause(*w, p.length, past);
        say() << w->name << " (" << n << " claims) SIGSTOP for " << length_s << " s"
              << (past ? ", past its 3 s lease" : ", inside its lease") << "\n";
        break;
    }
    case Kind::kill_serve:
        m_serve.process->kill();
        start_serve();
        say() << "serve SIGKILL; started again on port " << m_port << "\n";
        break;
    case Kind::pause_serve:
        if (m_serve.resume_at) {
            return false;
        }
        pause(m_serve, p.length, false);
        say() << "serve SIGSTOP for " << length_s << " s\n";
        break;
    case Kind::restart_postgres: {
        // A reconciler holds what it claimed for 5 minutes if it dies before deciding: let a
        // running one finish first.
        await_job();
        const auto stopping = Clock::now();
        db({"db", "stop", "--immediate"});
        const auto stopped = Clock::now();
        std::this_thread::sleep_for(p.length);
        const auto starting = Clock::now();
        db({"db", "start"});
        const auto secs = [](Clock::duration d) {
            return std::chrono::duration<double>(d).count();
        };
        say() << "PostgreSQL stopped immediately (" << secs(stopped - stopping) << " s), down "
              << secs(starting - stopped) << " s, crash recovery and start "
              << secs(Clock::now() - starting) << " s\n";
        break;
    }
    case Kind::lookup_outage:
        set_lookup_down(true);
        m_lookup_up_at = Clock::now() + p.length;
        say() << "provider lookups down for " << length_s << " s\n";
        break;
    }
    ++m_events[event_name(p.kind)];
    return true;
}

long long Chaos::open_payments(pqxx::connection& c) {
    pqxx::read_transaction tx(c);
    return tx
        .exec_params1("SELECT count(*) FROM payments WHERE tenant_id = $1::uuid AND state NOT IN "
                      "('succeeded', 'failed', 'needs_review')",
                      m_world->tenant.tenant_id)[0]
        .as<long long>();
}

void Chaos::progress() {
    if (Clock::now() < m_next_progress) {
        return;
    }
    m_next_progress = Clock::now() + seconds(15);
    try {
        if (!m_sql) {
            m_sql = std::make_unique<pqxx::connection>(m_url);
        }
        pqxx::read_transaction tx(*m_sql);
        std::string states;
        for (const auto& row : tx.exec_params(
                 "SELECT state, count(*) FROM payments WHERE tenant_id = $1::uuid GROUP BY state "
                 "ORDER BY state",
                 m_world->tenant.tenant_id)) {
            states += " " + row[0].as<std::string>() + " " + row[1].as<std::string>();
        }
        say() << m_clients->acknowledged() << " payments acknowledged;" << states << "\n";
    } catch (const std::exception&) {
        m_sql.reset(); // PostgreSQL is restarting: the next one
    }
}

// Runs `nightly` until every payment is succeeded, failed or in review, waiting in between for
// what is due next: a retry, an expired lease, an unknown payment's settle delay or recheck.
void Chaos::settle() {
    pqxx::connection c(m_url);
    const auto until = Clock::now() + seconds(240);
    for (int night = 1;; ++night) {
        tick();
        if (open_payments(c) == 0) {
            return;
        }
        if (Clock::now() > until) {
            say() << "still " << open_payments(c) << " open payments after 240 s of quiescing\n";
            return;
        }
        start_job("quiescing: payrecon nightly --no-statement runs");
        await_job();
        // The next moment anything open becomes due.
        const std::string wait_ms = [&] {
            pqxx::read_transaction tx(c);
            return tx
                .exec_params1(
                    "SELECT coalesce(greatest(0, least(3000, ceil(extract(epoch FROM min(due) - "
                    "now()) * 1000)))::bigint, 0)::text FROM (SELECT CASE state "
                    "WHEN 'processing' THEN lease_expires_at "
                    "WHEN 'retry_scheduled' THEN next_attempt_at "
                    "WHEN 'unknown' THEN coalesce(next_attempt_at, last_attempt_at + make_interval("
                    "secs => $2)) ELSE now() END AS due FROM payments WHERE tenant_id = $1::uuid "
                    "AND "
                    "state NOT IN ('succeeded', 'failed', 'needs_review')) d",
                    m_world->tenant.tenant_id, k_settle_delay_s)[0]
                .as<std::string>();
        }();
        const auto due = Clock::now() + milliseconds(std::stoll(wait_ms));
        while (Clock::now() < due) {
            tick();
            std::this_thread::sleep_for(milliseconds(20));
        }
    }
}

void Chaos::quiesce() {
    say() << "quiescing: faults off, everything resumed, clients finish\n";
    auto calm = m_faults;
    calm.rates.clear();
    calm.next.clear();
    calm.lookup_down = false;
    m_world->fake->set_faults(calm);
    m_lookup_up_at.reset();
    if (m_serve.resume_at) {
        resume(m_serve);
    }
    for (auto& w : m_workers) {
        if (w.resume_at) {
            resume(w);
        }
    }
    await_job();
    tick();
    // Time to answer the last keys and replay every acknowledged one.
    m_clients->finish(seconds(120) + milliseconds(10) * m_clients->acknowledged());
    say() << "clients done: " << m_clients->acknowledged() << " payments acknowledged, every key "
          << "replayed once more\n";

    settle();
    // What the lookup outages sent to review, an operator rechecks once lookups work: the
    // provider's answer is adopted, or the payment stays in review with the recheck's reason
    // (confirmed absent: an operator may send it again; nothing was charged).
    {
        std::vector<std::string> ids;
        {
            pqxx::connection c(m_url);
            pqxx::read_transaction tx(c);
            for (const auto& row : tx.exec_params(
                     "SELECT payment_id::text FROM payments WHERE tenant_id = $1::uuid AND "
                     "state = 'needs_review' AND review_code = 'lookup_failing'",
                     m_world->tenant.tenant_id)) {
                ids.push_back(row[0].as<std::string>());
            }
        }
        for (const auto& id : ids) {
            auto p = payrecon({"review", "recheck", id});
            const Run r = p->wait();
            if (r.exit_code != 0 && r.exit_code != 3) {
                m_process_failures.push_back("review recheck " + id + " exited " +
                                             std::to_string(r.exit_code) + ": " + tail(r.all(), 3));
            }
            ++m_events["quiescing: operator rechecks of lookup_failing reviews"];
        }
        if (!ids.empty()) {
            settle();
        }
    }

    // Stop what runs: SIGTERM lets calls in flight finish and be recorded.
    std::vector<Managed*> running{&m_serve};
    for (auto& w : m_workers) {
        running.push_back(&w);
    }
    for (auto* m : running) {
        m->process->signal(SIGTERM);
    }
    for (auto* m : running) {
        const auto until = Clock::now() + seconds(60);
        std::optional<Run> r;
        while (!(r = m->process->poll()) && Clock::now() < until) {
            std::this_thread::sleep_for(milliseconds(20));
        }
        if (!r) {
            r = m->process->kill();
        }
        if (r->exit_code != 0) {
            m_process_failures.push_back(m->name + " exited " + std::to_string(r->exit_code) +
                                         " on SIGTERM: " + tail(r->all(), 3));
        }
        m->process.reset();
    }
    m_world->fake->stop();
}

ChaosReport Chaos::check() {
    // Without its PaymentIntents (a long run makes tens of thousands): the sums row asks for them
    // only to name what differs.
    const auto ledger = m_world->fake->ledger(fake::LedgerOptions{.payment_intents = false});
    const ClientRecord clients = m_clients->record();
    std::vector<PaymentRow> payments;
    std::vector<AttemptRow> attempts;
    std::vector<GenerationMark> marks;
    std::map<std::string, long long> not_called;
    long long expired = 0;
    {
        pqxx::connection c(m_url);
        pqxx::read_transaction tx(c);
        const std::string& t = m_world->tenant.tenant_id;
        for (const auto& r : tx.exec_params(
                 "SELECT payment_id::text, merchant_reference, operation_id, state, amount_minor, "
                 "currency, coalesce(review_code, ''), coalesce(review_reason, '') FROM payments "
                 "WHERE tenant_id = $1::uuid",
                 t)) {
            payments.push_back(PaymentRow{r[0].as<std::string>(), r[1].as<std::string>(),
                                          r[2].as<std::string>(), r[3].as<std::string>(),
                                          r[4].as<long long>(), r[5].as<std::string>(),
                                          r[6].as<std::string>(), r[7].as<std::string>()});
        }
        for (const auto& r : tx.exec_params(
                 "SELECT payment_id::text, operation_id, attempt_no, generation, worker, "
                 "(extract(epoch FROM started_at) * 1000000)::bigint, finished_at IS NOT NULL, "
                 "outcome, coalesce(error_class, '') FROM payment_attempts WHERE tenant_id = "
                 "$1::uuid",
                 t)) {
            attempts.push_back(
                AttemptRow{r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<int>(),
                           r[3].as<long long>(), r[4].as<std::string>(), r[5].as<Micros>(),
                           r[6].as<bool>(), r[7].as<std::string>(), r[8].as<std::string>()});
            if (attempts.back().not_called()) {
                ++not_called[attempts.back().error_class];
            }
        }
        for (const auto& r : tx.exec_params(
                 "SELECT subject_id, (detail->>'generation')::bigint, "
                 "(extract(epoch FROM at) * 1000000)::bigint FROM audit_log WHERE tenant_id = "
                 "$1::uuid AND subject_type = 'payment' AND detail ? 'generation' "
                 "UNION ALL SELECT payment_id::text, generation, (extract(epoch FROM at) * "
                 "1000000)::bigint FROM payment_lookups WHERE tenant_id = $1::uuid",
                 t)) {
            marks.push_back(
                GenerationMark{r[0].as<std::string>(), r[1].as<long long>(), r[2].as<Micros>()});
        }
        expired = tx.exec_params1("SELECT count(*) FROM audit_log WHERE tenant_id = $1::uuid AND "
                                  "action = 'payment.lease_expired'",
                                  t)[0]
                      .as<long long>();
    }
    const auto deliveries = deliveries_from_log(m_world->provider_log.str());

    ChaosReport report;
    report.options = m_options;
    report.events = m_events;
    for (const auto& [fault, n] : ledger["faults_applied"].items()) {
        report.faults_applied[fault] = n.get<long long>();
    }
    report.invariants = {
        check_acknowledged_once(clients, payments),
        check_answered(clients),
        check_replays(clients),
        check_one_execution(ledger, payments),
        check_no_fenced_out_call(payments, attempts, marks, deliveries, ledger),
        [&] {
            auto sums = check_sums(payments, ledger);
            return sums.held ? sums : check_sums(payments, m_world->fake->ledger());
        }(),
        check_nothing_processing(payments),
        check_nothing_open_without_reason(payments),
    };
    InvariantResult health;
    health.name = "no process failed on its own";
    health.held = m_process_failures.empty();
    if (health.held) {
        health.detail = "serve and workers ended only when killed or told to; reconcile and "
                        "nightly exited 0 or 3 (reconcile 1 when every status query met the "
                        "lookup outage)";
    } else {
        for (std::size_t i = 0; i < m_process_failures.size() && i < 8; ++i) {
            health.detail += (i ? "; " : "") + m_process_failures[i];
        }
    }
    report.invariants.push_back(health);

    // What it did.
    m_out << "\nwhat the run did (seed " << m_options.seed << ", "
          << std::chrono::duration<double>(Clock::now() - m_started).count() << " s in all):\n";
    for (const auto& name : k_event_names) {
        m_out << "  " << std::setw(6) << m_events[name] << "  " << name << "\n";
    }
    for (const auto& [name, n] : m_events) {
        if (std::find(k_event_names.begin(), k_event_names.end(), name) == k_event_names.end()) {
            m_out << "  " << std::setw(6) << n << "  " << name << "\n";
        }
    }
    for (const auto& [job, exits] : m_job_exits) {
        m_out << "          " << job << " exit codes:";
        for (const auto& [code, n] : exits) {
            m_out << " " << code << " x" << n;
        }
        m_out << "\n";
    }
    m_out << "  " << std::setw(6) << m_paused_with_claims
          << "  pauses past the lease that caught a worker holding claims\n"
          << "  " << std::setw(6) << m_clock_advances
          << "  times the provider forgot every key before a worker paused past its lease resumed\n"
          << "  " << std::setw(6) << expired << "  leases expired and taken over\n";
    for (const auto& [cls, n] : not_called) {
        m_out << "  " << std::setw(6) << n << "  attempts the pre-call fence stopped (" << cls
              << ")\n";
    }
    m_out << "  clients: " << clients.acknowledged.size() << " payments acknowledged in "
          << clients.requests << " requests, " << clients.replays << " replays; retried after:";
    for (const auto& [cause, n] : clients.retried) {
        m_out << " " << cause << " x" << n << ";";
    }
    m_out << "\n  provider: " << ledger["deliveries"].get<long long>() << " deliveries, "
          << ledger["executions"].size() << " operations executed, faults applied "
          << ledger["faults_applied"].dump() << "\n\n";

    std::size_t width = 0;
    for (const auto& i : report.invariants) {
        width = std::max(width, i.name.size());
    }
    m_out << std::left << std::setw(static_cast<int>(width)) << "invariant"
          << "  held  detail\n";
    for (const auto& i : report.invariants) {
        m_out << std::left << std::setw(static_cast<int>(width)) << i.name << "  "
              << (i.held ? "yes " : "NO  ") << "  " << i.detail << "\n";
    }
    m_out << std::right << std::flush;
    return report;
}

ChaosReport Chaos::run() {
    m_out << "chaos: seed " << m_options.seed << " (PAYRECON_CHAOS_SEED=" << m_options.seed
          << " repeats this schedule), " << m_options.duration.count() << " s of chaos, "
          << m_options.workers << " workers, " << m_options.clients << " clients\n"
          << std::flush;
    db({"db", "start"});
    m_url = store::LocalCluster(m_home.home.path()).url();
    // DESIGN section 6's invariant, checked on every write the run makes (kills and pauses
    // included): no writer but the holder changes a processing row before its lease ends.
    install_lease_guard(m_url);
    {
        // An immediate stop is a crash of PostgreSQL, not of the machine: what it wrote is in the
        // kernel's page cache either way, so fsync and full-page writes only cost the other tests
        // on this machine their disk. synchronous_commit stays on: a commit is acknowledged once
        // its WAL is written, and that is what the stop must not lose.
        pqxx::connection c(m_url);
        pqxx::nontransaction tx(c);
        tx.exec0("ALTER SYSTEM SET fsync = off");
        tx.exec0("ALTER SYSTEM SET full_page_writes = off");
        tx.exec("SELECT pg_reload_conf()");
    }
    {
        // The fingerprint secret every `serve` of this database shares (a restarted one replays
        // what the last one stored).
        const auto secret = m_home.home.path() / "fingerprint.secret";
        std::ofstream(secret) << to_hex(random_bytes(22)) << "\n";
        std::filesystem::permissions(secret, std::filesystem::perms::owner_read |
                                                 std::filesystem::perms::owner_write);
    }
    m_world = std::make_unique<Operated>(m_url);
    m_world->write_config({{"connect_timeout_ms", k_connect_timeout_ms},
                           {"timeout_ms", k_timeout_ms},
                           {"settle_delay_s", k_settle_delay_s}});
    m_faults = chaos_faults(m_options.seed);
    m_world->fake->set_faults(m_faults);
    say() << "private PostgreSQL in " << m_home.home.path().string() << "; provider "
          << m_world->config.name << " on port " << m_world->fake->port() << "\n";

    start_serve();
    m_workers.resize(static_cast<std::size_t>(m_options.workers));
    for (std::size_t i = 0; i < m_workers.size(); ++i) {
        start_worker(i);
    }
    ClientsOptions co;
    co.clients = m_options.clients;
    co.seed = m_options.seed;
    co.api_key = m_world->writer.api_key.reveal();
    co.provider = m_world->config.name;
    co.gap = m_options.client_gap;
    m_clients = std::make_unique<Clients>(co);
    m_clients->set_port(m_port);
    m_clients->start();
    say() << "serve on port " << m_port << ", " << m_workers.size() << " workers (lease 3 s), "
          << m_options.clients << " clients\n";

    // The reconciler's and the nightly job's runs: every 3 to 6 s, taking turns (which goes first
    // is the seed's); a run due while the last one still runs starts when it ends.
    const auto schedule = plan(m_plan_rng, m_options.duration, m_options.event_gap);
    std::vector<std::pair<Clock::duration, bool>> jobs;
    bool nightly = m_plan_rng() % 2 == 0;
    for (Clock::duration t = uniform_ms(m_plan_rng, 2000, 5000); t < m_options.duration;
         t += uniform_ms(m_plan_rng, 3000, 6000)) {
        jobs.emplace_back(t, nightly);
        nightly = !nightly;
    }
    const auto phase = Clock::now();
    m_next_progress = phase + seconds(15);
    std::size_t next = 0;
    std::size_t next_job = 0;
    // Every planned event happens, even when the run falls behind.
    while (Clock::now() < phase + m_options.duration || next < schedule.size()) {
        tick();
        progress();
        const auto now = Clock::now();
        if (next < schedule.size() && phase + schedule[next].at <= now &&
            act(schedule[next], now - (phase + schedule[next].at))) {
            ++next;
        }
        if (!m_job && next_job < jobs.size() && phase + jobs[next_job].first <= now) {
            start_job(jobs[next_job++].second ? k_nightly_run : k_reconcile_run);
        }
        std::this_thread::sleep_for(milliseconds(20));
    }
    quiesce();
    return check();
}

} // namespace

bool ChaosReport::all_held() const {
    return std::all_of(invariants.begin(), invariants.end(),
                       [](const InvariantResult& i) { return i.held; });
}

ChaosOptions options_from_environment(ChaosOptions o) {
    const auto number = [](const char* name) -> std::optional<unsigned long long> {
        const char* v = std::getenv(name);
        if (v == nullptr || *v == '\0') {
            return std::nullopt;
        }
        std::size_t used = 0;
        unsigned long long n = 0;
        try {
            n = std::stoull(v, &used, 10);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != std::string(v).size() ||
            (n == 0 && std::string(name) != "PAYRECON_CHAOS_SEED")) {
            throw std::invalid_argument(std::string(name) + " must be a positive number, not '" +
                                        v + "'");
        }
        return n;
    };
    if (const auto seed = number("PAYRECON_CHAOS_SEED")) {
        o.seed = *seed;
    } else {
        std::random_device rd;
        o.seed = (static_cast<std::uint64_t>(rd()) << 32 | rd()) % 1000000000000ULL;
    }
    if (const auto s = number("PAYRECON_CHAOS_SECONDS")) {
        o.duration = seconds(static_cast<long long>(*s));
    }
    if (const auto w = number("PAYRECON_CHAOS_WORKERS")) {
        o.workers = static_cast<int>(*w);
    }
    if (const auto c = number("PAYRECON_CHAOS_CLIENTS")) {
        o.clients = static_cast<int>(*c);
    }
    return o;
}

ChaosReport run_chaos(const ChaosOptions& options, std::ostream& out) {
    // curl_global_init is not thread-safe: once, here, before any client thread.
    static const bool curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    REQUIRE(curl_ready);
    return Chaos(options, out).run();
}

} // namespace payrecon::chaos
