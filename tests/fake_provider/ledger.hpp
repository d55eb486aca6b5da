#pragma once
// What every dialect of the fake provider shares -- Stripe's and Adyen's (stripe.hpp),
// Checkout.com's (checkout.hpp), PayPal's (paypal.hpp), Square's (square.hpp): one mutex over all
// of their state, the fault engine (the config, `next`, the seeded draws of `rates`, the refusals
// due), the fake clock, the random source of ids, and the ledger's counts. So one fault config
// applies to whichever dialect's create comes next, and one ledger says what the "provider"
// executed, in whatever dialect it was asked:
//   deliveries              every create POST read in full, whatever it was answered (and the
//                           refund, capture and cancel POSTs of the dialects that have them)
//   deliveries_by_operation the same per operation ID (each dialect says where it finds it)
//   executions              per operation ID, payments actually created (declines included),
//                           refunds, captures and cancels actually made
//   replays                 answers given from an idempotency key instead of executing
//   charged                 per currency (lower case), what the provider kept
//   refunded                per currency (lower case), what it gave back (refunds made, seeded)
//   faults_applied          per fault, how often it was applied
//
// No sockets here: a dialect turns a parsed request into a Reply (a response and a socket action:
// answer, FIN, RST, hang, half a body) and the server carries the action out.

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
#include <string_view>

namespace payrecon::fake {

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
    std::string operation_id; // create POSTs only
    bool executed = false;    // a payment was created by this request
    bool replayed = false;
};

// Waits `duration` (the gate, then latency); returns false if the server is stopping, and the
// request is then abandoned: nothing executes, an in-flight key is released, the connection is
// closed.
using Wait = std::function<bool(std::chrono::milliseconds)>;

// What the ledger JSON holds besides the counts: the payments of each dialect
// (`payment_intents`, `checkout_payments`, `paypal_orders`, `square_payments`, each as its
// retrieve answers it) and the per-operation maps (`deliveries_by_operation`, `executions`), which
// are huge after a bulk seed.
struct LedgerOptions {
    bool payment_intents = true; // every dialect's list of payments
    bool operations = true;
};

// Waits out a create's `latency` with the lock released, its idempotency key's record (in `keys`,
// with an `in_flight` member) held in flight meanwhile. False if the server is stopping: the
// create is abandoned and a key still in flight is forgotten, as if it had never come. `key` null:
// a create without a key.
template <class Keys>
bool wait_in_flight(std::unique_lock<std::mutex>& lock, const Wait& wait,
                    std::chrono::milliseconds latency, Keys& keys, const std::string* key) {
    lock.unlock();
    const bool go_on = wait(latency);
    lock.lock();
    if (!go_on && key != nullptr) {
        const auto it = keys.find(*key);
        if (it != keys.end() && it->second.in_flight) {
            keys.erase(it);
        }
    }
    return go_on;
}

// The record of idempotency key `key` in `keys` (a map whose records have `in_flight` and
// `first_seen`), or keys.end(): a record settled longer than `retention` ago is forgotten first, so
// the key executes again.
template <class Keys>
typename Keys::iterator known_key_locked(Keys& keys, const std::string& key,
                                         std::chrono::system_clock::time_point now,
                                         std::chrono::seconds retention) {
    auto it = keys.find(key);
    if (it != keys.end() && !it->second.in_flight && now - it->second.first_seen >= retention) {
        keys.erase(it);
        return keys.end();
    }
    return it;
}

// The operation ID of a create that names none and carries no key.
inline constexpr std::string_view k_no_operation = "(none)";

class Ledger {
public:
    Ledger();
    Ledger(const Ledger&) = delete;
    Ledger& operator=(const Ledger&) = delete;

    // The one lock over every dialect's state; the `_locked` members need it held.
    std::unique_lock<std::mutex> lock() const { return std::unique_lock(m_mutex); }

    // Replaces the fault config and reseeds the rate draws.
    void set_faults(FaultConfig config);
    FaultConfig faults() const;
    const FaultConfig& faults_locked() const { return m_faults; }

    // The fault for the create being handled: the head of `next` (a `refuse` there is the
    // listener's, not this request's: none), else one draw from `rates` (a `refuse` drawn is due
    // to the listener after this request: none for the request). Counted in faults_applied.
    Fault draw_fault_locked();

    // A listener refusal that is due now: a `refuse` at the head of `next` (popped), or one drawn
    // by rate since the last call. Counted in faults_applied. nullopt if none is due.
    std::optional<std::chrono::milliseconds> take_refusal();

    // The fake clock: real time plus whatever advance_clock added.
    void advance_clock(std::chrono::seconds by);
    std::chrono::system_clock::time_point now() const;
    std::chrono::system_clock::time_point now_locked() const;

    // Random ids: `prefix` and `length` characters of `alphabet` (base 62 unless given).
    std::string random_id_locked(std::string_view prefix, std::size_t length,
                                 std::string_view alphabet = k_base62);
    std::mt19937_64& id_rng_locked() { return m_id_rng; }

    void count_delivery_locked(const std::string& operation_id);
    void count_execution_locked(const std::string& operation_id);
    void count_replay_locked() { ++m_replays; }
    // Adds `amount` to what was charged in `currency` (folded to lower case).
    void add_charged_locked(std::string_view currency, std::int64_t amount);
    // A refund of `amount` in `currency` made: `refunded` gains it, `charged` loses it.
    void add_refunded_locked(std::string_view currency, std::int64_t amount);
    // The executions per operation ID, for a bulk seed that counts a million at once.
    std::map<std::string, std::uint64_t>& executions_locked() { return m_executions; }

    // Forgets every count; faults back to none; the fake clock back to real time.
    void reset_locked();

    // Writes "deliveries", "deliveries_by_operation" and "executions" (if `operations`),
    // "replays", "charged", "refunded", "faults_applied".
    void write_counts_locked(nlohmann::ordered_json& j, bool operations) const;

    static constexpr std::string_view k_base62 =
        "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

private:
    mutable std::mutex m_mutex;
    FaultConfig m_faults;
    std::mt19937_64 m_fault_rng;
    std::mt19937_64 m_id_rng;
    std::uint64_t m_refusals_drawn = 0;
    std::chrono::seconds m_clock_offset{0};
    std::uint64_t m_deliveries = 0;
    std::uint64_t m_replays = 0;
    std::map<std::string, std::uint64_t> m_deliveries_by_operation;
    std::map<std::string, std::uint64_t> m_executions;
    std::map<std::string, std::int64_t> m_charged;
    std::map<std::string, std::int64_t> m_refunded;
    std::map<Fault, std::uint64_t> m_faults_applied;
};

// ---- what the dialects' handlers share ------------------------------------------------------

// What an after-execute fault does to an executed create's reply: FIN, RST, hang or half a body
// at the socket; `http_500_after_execute` replaces the response with `error_500` (the dialect's
// own 500). Other faults leave the reply as it is.
void apply_after_execute(Reply& reply, const http::Response& error_500);

// Answers a create without executing it: releases `lock`, waits out the configured `latency`, and
// returns `reply` -- with the connection closed (FIN) instead if the server is stopping meanwhile.
Reply answer_after(std::unique_lock<std::mutex>& lock, const Wait& wait,
                   std::chrono::milliseconds latency, Reply reply);

// Draws the create's fault into `reply.fault`. A before-execute fault is answered here: a drop
// closes the connection (FIN), a 500 is `make_500()` (the dialect's own); true then, and the create
// is answered (answer_after) without executing.
template <class Make500>
bool fault_before_execute_locked(Ledger& ledger, Reply& reply, const Make500& make_500) {
    reply.fault = ledger.draw_fault_locked();
    if (reply.fault == Fault::drop_before_execute) {
        reply.action = SocketAction::close_fin;
        return true;
    }
    if (reply.fault == Fault::http_500_before_execute) {
        reply.response = make_500();
        return true;
    }
    return false;
}

// A JSON response (invalid UTF-8 replaced, never thrown on).
http::Response json_response(int status, const nlohmann::ordered_json& body);

// Compares secrets without stopping at the first difference.
bool constant_time_equal(std::string_view a, std::string_view b);

// The credential of `Authorization: Bearer <credential>` (scheme in any case), or nullopt.
std::optional<std::string_view> bearer_credential(const http::Request& request);

// "2026-01-02T03:04:05Z" (UTC, whole seconds).
std::string rfc3339(std::chrono::system_clock::time_point t);
// RFC 3339 as PayPal's pattern takes it: YYYY-MM-DDTHH:MM:SS, optional fraction (dropped), then Z
// or +HH:MM/-HH:MM. nullopt for anything else or an impossible date.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text);

std::string to_lower_ascii(std::string_view text);
std::string to_upper_ascii(std::string_view text);

} // namespace payrecon::fake
