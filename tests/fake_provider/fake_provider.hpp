#pragma once
// The fake payment provider server on 127.0.0.1, with fault injection, and an admin API on a second
// port that keeps working while the main listener refuses connections. One main port speaks five
// dialects on one ledger, one set of faults and one fake clock (ledger.hpp): a Stripe
// PaymentIntents subset (stripe.hpp), Adyen's /v71/payments (adyen.hpp), Checkout.com's /payments
// (checkout.hpp), PayPal's Orders v2, Transaction Search and OAuth2 (paypal.hpp), Square's
// Payments API /v2/payments (square.hpp). Each is a Dialect (dialect.hpp), listed in
// dialects.cpp; the server routes each request to the one that serves it. Acceptance tests
// start it in-process on port 0; the demo runs `payrecon-fake-provider`. It is honest about what
// it executed: see the Ledger.
//
// Threads: one acceptor (both listeners), one thread per connection. stop() closes the listeners,
// shuts every connection down, interrupts latency and hang waits, and joins every thread; it
// returns promptly even while a connection is hanging. One JSON log line per request goes to the
// log stream; no header or body is ever logged, so neither is the API key.

#include "tests/fake_provider/adyen.hpp"
#include "tests/fake_provider/checkout.hpp"
#include "tests/fake_provider/dialect.hpp"
#include "tests/fake_provider/faults.hpp"
#include "tests/fake_provider/http.hpp"
#include "tests/fake_provider/ledger.hpp"
#include "tests/fake_provider/paypal.hpp"
#include "tests/fake_provider/square.hpp"
#include "tests/fake_provider/stripe.hpp"
#include "tests/fake_provider/webhooks.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace payrecon::fake {

struct FakeProviderOptions {
    int port = 0;       // main port (every dialect) on 127.0.0.1; 0: any free port
    int admin_port = 0; // admin port on 127.0.0.1; 0: any free port
    Account account;    // the API key, idempotency and lookup: every dialect's
    // Each dialect's own settings (Adyen has none: it keeps its keys with Stripe's).
    StripeOptions stripe;
    CheckoutOptions checkout;
    PayPalOptions paypal;
    SquareOptions square;
    FaultConfig faults;      // the initial fault config
    WebhookOptions webhooks; // none unless its url is set
    http::Limits limits;
    std::chrono::milliseconds idle_timeout{30'000}; // a keep-alive connection with no request
    std::size_t max_connections = 256;              // beyond this, new connections are closed
};

class FakeProvider {
public:
    FakeProvider(FakeProviderOptions options, std::ostream& log);
    ~FakeProvider(); // stop()
    FakeProvider(const FakeProvider&) = delete;
    FakeProvider& operator=(const FakeProvider&) = delete;

    // Binds both listeners and starts serving. Throws std::system_error if a port cannot be
    // bound, std::logic_error if called twice.
    void start();
    // Stops serving and joins every thread. Idempotent; safe from any thread but a connection's.
    void stop();

    int port() const { return m_port; }
    int admin_port() const { return m_admin_port; }
    // False while a `refuse` fault keeps the main listener closed.
    bool listening() const;
    // Connection threads not yet joined (0 after stop()).
    std::size_t connection_threads() const;

    // The same operations as the admin API, in-process.
    nlohmann::ordered_json ledger(LedgerOptions options = {}) const;
    // Seeds a discrepancy (seed.hpp, README "Seeding"); answers the PaymentIntent ids created or
    // changed -- a reversed refund's ID. Throws SeedNotFound or std::invalid_argument, changing
    // nothing. Seeds apply to Stripe's PaymentIntents (Adyen's too), but for a RefundReversed of
    // a refund made through Square's dialect, which keeps its own refunds.
    std::vector<std::string> seed(const Seed& seed);
    std::vector<std::string> seed_orphan_charge(const OrphanCharge& s) { return seed(s); }
    std::vector<std::string> seed_duplicate_charge(const DuplicateCharge& s) { return seed(s); }
    std::vector<std::string> seed_amount_mismatch(const AmountMismatch& s) { return seed(s); }
    std::vector<std::string> seed_refunded(const Refunded& s) { return seed(s); }
    std::vector<std::string> seed_bulk(const BulkSeed& s) { return seed(s); }
    std::vector<std::string> seed_refund_reversed(const RefundReversed& s) { return seed(s); }
    std::vector<std::string> seed_capture_reversed(const CaptureReversed& s) { return seed(s); }
    std::vector<std::string> seed_bulk(std::size_t n, std::int64_t start_time,
                                       std::chrono::milliseconds spacing, std::string currency,
                                       std::int64_t amount, std::string operation_id_prefix) {
        return seed(BulkSeed{n, start_time, spacing, std::move(currency), amount,
                             std::move(operation_id_prefix)});
    }
    void set_faults(FaultConfig config); // a `refuse` at the head of `next` closes the listener now
    FaultConfig faults() const { return m_ledger.faults(); }
    void reset(); // also reopens a refusing listener and opens the gate
    // The gate: while closed, every main-port request that reaches its latency point (a POST
    // holding its key, a lookup, a listing) waits there until the gate opens or stop(). A test
    // closes it, waits until held() shows its request in flight, acts, and opens it: a race made
    // certain instead of a latency guessed long enough. Also POST /__admin/gate.
    void close_gate();
    void open_gate();
    std::size_t held() const; // requests waiting at the gate now
    void advance_clock(std::chrono::seconds by) { m_ledger.advance_clock(by); }
    // Every PayPal access token issued so far is expired from now on (an adapter's next call gets
    // 401 invalid_token, and must fetch a new one); answers how many were still valid. Also POST
    // /__admin/paypal/expire-tokens.
    std::size_t expire_paypal_tokens() { return m_paypal.expire_tokens(); }

    // The webhooks sent after each execution (webhooks.hpp): where, signed how, with which faults.
    void set_webhooks(WebhookOptions options) { m_webhooks.configure(std::move(options)); }
    bool wait_webhooks_idle(std::chrono::milliseconds deadline) {
        return m_webhooks.wait_idle(deadline);
    }
    nlohmann::ordered_json webhook_ledger() const { return m_webhooks.ledger(); }

private:
    struct Connection {
        int fd = -1;
        bool admin = false;
        std::thread thread;
        std::atomic<bool> done{false};
    };

    // The dialect that serves `request` answers it; Stripe's answers a request none serves (its
    // 401, else its 404), as the fake always has.
    Reply handle(const http::Request& request);
    void accept_loop();
    void accept_one(int listener, bool admin);
    void serve(Connection& connection);
    http::Response admin(const http::Request& request);
    // Waits `duration` unless stop() is called first; false if stopping.
    bool pause(std::chrono::milliseconds duration);
    // A request's latency point: the gate, then `latency`; false if stopping.
    bool request_pause(std::chrono::milliseconds latency);
    // Closes the main listener if a refusal is due and it is open.
    void apply_refusal();
    void reopen_listener();
    void reap(bool all);
    void wake();
    // One line per request: `received_us` is when it had been read in full (unix microseconds,
    // the system clock: comparable with PostgreSQL's timestamps on this host), `ms` how long it
    // took from there.
    void log_request(bool admin, const http::Request& request, int status, const Reply& reply,
                     std::chrono::system_clock::time_point received,
                     std::chrono::steady_clock::duration took);
    void log_event(const nlohmann::ordered_json& event);

    FakeProviderOptions m_options;
    std::ostream& m_log;
    std::mutex m_log_mutex;
    Ledger m_ledger;     // before the dialects: they hold it
    Dialects m_dialects; // dialects.cpp's list, in its order
    StripeApi& m_stripe; // seeds, the webhooks' source, and the answer to unserved requests
    PayPalApi& m_paypal; // its tokens expire on the admin's word
    SquareApi& m_square; // its refunds are reversed by a seed
    WebhookSender m_webhooks;

    int m_port = 0;
    int m_admin_port = 0;
    int m_wake_pipe[2] = {-1, -1};
    int m_admin_fd = -1;

    // The main listener: the acceptor polls it; a refusal shuts it down from any thread.
    mutable std::mutex m_listener_mutex;
    int m_main_fd = -1;
    bool m_refusing = false;
    std::chrono::steady_clock::time_point m_refuse_until{};

    mutable std::mutex m_connections_mutex;
    std::list<std::unique_ptr<Connection>> m_connections;

    mutable std::mutex m_stop_mutex;
    std::condition_variable m_stop_cv; // also signals the gate opening
    bool m_stopping = false;
    bool m_gate_closed = false;
    std::size_t m_held = 0;
    bool m_started = false;
    bool m_stopped = false;
    std::thread m_acceptor;
};

} // namespace payrecon::fake
