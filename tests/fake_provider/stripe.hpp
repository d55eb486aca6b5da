#pragma once
// The Stripe subset the fake provider serves, and its ledger. No sockets here: `handle` turns a
// parsed request into a reply and a socket action (answer, FIN, RST, hang, half a body), and the
// server carries the action out. The ledger is the truth of what this "provider" executed:
//   deliveries  every POST /v1/payment_intents that was read in full, whatever it was answered
//   executions  per operation ID, PaymentIntents actually created (a decline is an execution too:
//               Stripe creates the PaymentIntent and a failed charge, and the key keeps the 402)
// The operation ID is `metadata[operation_id]`, else the Idempotency-Key, else "(none)".
//
// Idempotency follows Stripe's v1 contract: a result is saved only once execution began (a 200,
// a 402, or a 500 after execution); validation errors, 401, 409 and a 500 before execution save
// nothing. Same key and same parameters replay the saved status and body with
// `Idempotent-Replayed: true`; other parameters get 400 idempotency_error; a key whose first
// request is still executing gets 409 idempotency_key_in_use. Keys are forgotten `key_retention`
// after their first request, on the fake clock (real time plus whatever advance_clock added).

#include "core/secret.hpp"
#include "tests/fake_provider/faults.hpp"
#include "tests/fake_provider/http.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace payrecon::fake {

struct StripeOptions {
    Secret api_key;                            // the only accepted `Authorization: Bearer` value
    std::chrono::seconds key_retention{86400}; // fake time
    bool idempotency = true; // false: Idempotency-Key ignored, every POST executes
    bool lookup = true;      // false: search answers 404 resource_missing
};

enum class SocketAction {
    respond,          // write the response; keep the connection if the request allows
    close_fin,        // close without a response (FIN)
    close_rst,        // reset the connection (SO_LINGER 0), no response
    hang_then_fin,    // hold the connection for the configured hang, no response, then FIN
    partial_then_fin, // write the headers and half the body, then FIN
};

std::string_view to_string(SocketAction action);

struct Reply {
    http::Response response;
    SocketAction action = SocketAction::respond;
    Fault fault = Fault::none;
    std::string operation_id; // POST /v1/payment_intents only
    bool executed = false;    // a PaymentIntent was created by this request
    bool replayed = false;
};

class StripeApi {
public:
    // Waits `duration` (latency); returns false if the server is stopping, and the request is
    // then abandoned: nothing executes, an in-flight key is released, the connection is closed.
    using Wait = std::function<bool(std::chrono::milliseconds)>;

    explicit StripeApi(StripeOptions options);

    // Serves one request on the main port. Never throws for anything the client sent.
    Reply handle(const http::Request& request, const Wait& wait);

    // {"deliveries", "deliveries_by_operation", "executions", "replays", "charged" (succeeded
    // amounts per currency), "faults_applied", "payment_intents" (oldest first), "now"}.
    nlohmann::ordered_json ledger() const;

    // Forgets every PaymentIntent, key and count; faults back to none; fake clock back to real.
    void reset();

    // Replaces the fault config (and reseeds the rate draws).
    void set_faults(FaultConfig config);
    FaultConfig faults() const;

    // A listener refusal that is due now: a `refuse` at the head of `next` (popped), or one drawn
    // by rate since the last call. Counted in faults_applied. nullopt if none is due.
    std::optional<std::chrono::milliseconds> take_refusal();

    void advance_clock(std::chrono::seconds by);
    std::chrono::system_clock::time_point now() const;

private:
    struct Intent {
        std::string id;
        std::chrono::system_clock::time_point created_at;
        std::int64_t created = 0; // unix seconds, as Stripe shows it
        std::string operation_id;
        std::string customer;
        std::map<std::string, std::string> metadata;
        nlohmann::ordered_json object;
    };

    struct KeyRecord {
        http::Fields params; // sorted: the parameters the key was first used with
        std::chrono::system_clock::time_point first_seen;
        bool in_flight = true;
        int status = 0;
        std::string body;
    };

    Reply create(const http::Request& request, const Wait& wait);
    Reply retrieve(const std::string& id, const http::Fields& query, const Wait& wait);
    Reply search(const http::Fields& query, const Wait& wait);
    Reply list(const http::Fields& query, const Wait& wait);

    // Under m_mutex.
    Fault draw_fault();
    std::string random_id(std::string_view prefix, std::size_t length);
    std::chrono::system_clock::time_point now_locked() const;
    bool authorized(const http::Request& request) const;

    StripeOptions m_options;
    mutable std::mutex m_mutex;
    FaultConfig m_faults;
    std::mt19937_64 m_fault_rng;
    std::mt19937_64 m_id_rng;
    std::uint64_t m_refusals_drawn = 0;
    std::chrono::seconds m_clock_offset{0};

    std::vector<Intent> m_intents; // creation order
    std::map<std::string, KeyRecord> m_keys;
    std::uint64_t m_deliveries = 0;
    std::uint64_t m_replays = 0;
    std::map<std::string, std::uint64_t> m_deliveries_by_operation;
    std::map<std::string, std::uint64_t> m_executions;
    std::map<std::string, std::int64_t> m_charged;
    std::map<Fault, std::uint64_t> m_faults_applied;
};

} // namespace payrecon::fake
