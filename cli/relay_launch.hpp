#pragma once
// The relay as `payrecon relay` and `payrecon worker --relay N` start it: its options from the
// command line's values and the environment (the endpoint key, the allowed networks, the event
// retention), so that both run the same relay.

#include "engine/relay.hpp"

#include <memory>
#include <ostream>
#include <string>

namespace payrecon::cli {

struct AppState;

struct RelayLaunch {
    int senders = 8;
    int batch = 50;
    int per_endpoint = 2;
    std::string timeout = "15s";
    std::string schedule; // empty: the standard schedule
    std::string ca_bundle;
    bool once = false;
};

// Checks `launch` (UsageError), reads the endpoint key and the settings, and builds the relay on
// `database_url`; `embedded`: the database is the private one (its home holds the key).
std::unique_ptr<engine::Relay> make_relay(AppState& state, const RelayLaunch& launch,
                                          const std::string& database_url, bool embedded,
                                          std::ostream& log);

// The relay's log lines at its start and end (JSON), and its end as the command's outcome: throws
// DatabaseUnavailable or OperatorError when the relay stopped on a fault.
std::string relay_started_line(const engine::RelayOptions& options);
std::string relay_stopped_line(const engine::RelayCounts& counts);
void check_relay_outcome(const engine::Relay& relay);

} // namespace payrecon::cli
