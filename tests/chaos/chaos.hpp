#pragma once
// The chaos run (DESIGN section 12): payrecon as it runs in production -- `payrecon serve`,
// several `payrecon worker` processes, `payrecon reconcile` and `payrecon nightly --no-statement`
// -- on a private PostgreSQL of its own, against the fake provider with every fault mode, while a
// seeded schedule SIGKILLs and replaces workers, pauses workers past their lease and inside it
// (SIGSTOP, SIGCONT), kills and pauses `serve`, takes the provider's status lookups down, and stops
// PostgreSQL immediately (`payrecon db stop --immediate`) and starts it again. Clients keep
// creating payments over HTTP meanwhile, retrying with the same Idempotency-Key (clients.hpp). Then
// it quiesces -- faults off, everything resumed, the clients' last keys answered and every key
// replayed, workers and `nightly` left to finish, an operator's recheck of what a lookup outage
// sent to review -- and checks DESIGN section 12's invariants (invariants.hpp) from the database,
// the clients' records, and the provider's ledger and request log.
//
// The seed (printed first) reproduces the schedule: which events, when, how long each pause or
// outage lasts, the clients' payments, the fault rates and the provider's fault draws. The real
// processes' interleaving with it is not reproducible; which worker an event hits prefers one that
// holds claims at that moment.
//
// Runs inside a Catch2 test case: it starts processes through tests/support/operated.hpp, which
// fails the test if the harness itself breaks (a process that cannot be spawned, a cluster that
// does not start). What payrecon does wrong is in the report's invariants, for the caller to
// check. tests/chaos/test_chaos.cpp runs it short in the suite; bench/chaos runs it long.

#include "tests/chaos/invariants.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace payrecon::chaos {

struct ChaosOptions {
    std::uint64_t seed = 0;
    std::chrono::seconds duration{35}; // the chaos phase; set-up and quiescing take 10 to 20 s more
    int workers = 3;
    int clients = 3;
    std::chrono::milliseconds client_gap{300}; // mean pause between one client's payments
    std::chrono::milliseconds event_gap{1800}; // mean time between chaos events
};

// `defaults` with PAYRECON_CHAOS_SEED (decimal), PAYRECON_CHAOS_SECONDS, PAYRECON_CHAOS_WORKERS
// and PAYRECON_CHAOS_CLIENTS applied; without a seed, a random one. Throws std::invalid_argument
// for a value that is not a positive number.
ChaosOptions options_from_environment(ChaosOptions defaults);

struct ChaosReport {
    ChaosOptions options;
    std::map<std::string, int> events; // what the schedule did, by kind (see k_event_names)
    std::map<std::string, long long> faults_applied; // the provider's, by fault mode
    std::vector<InvariantResult> invariants;
    bool all_held() const;
};

// The event kinds as the report names them, in the order it lists them.
extern const std::vector<std::string> k_event_names;

// Runs it all, printing to `out` the seed, each event as it happens, what the run did and the
// invariant table.
ChaosReport run_chaos(const ChaosOptions& options, std::ostream& out);

} // namespace payrecon::chaos
