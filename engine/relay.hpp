#pragma once
// `payrecon relay` (and `payrecon worker --relay N`): events out (DESIGN section 15). Sender
// threads, each with its own database connection and HTTP transport, publish the outbox (one at a
// time), claim a batch of one endpoint's due deliveries under a lease, POST each event signed per
// Standard Webhooks, and record every attempt. A batch holds one of the endpoint's slots (at most
// `per_endpoint` batches of one endpoint at once), so one slow or failing endpoint never holds
// more than that many senders and never delays another's deliveries.
//
// At least once: an event whose 2xx arrived but was not yet recorded when the relay died (or
// whose answer was lost to a timeout) is sent again, with the same `webhook-id` and body.

#include "core/sealed.hpp"
#include "core/standard_webhooks.hpp"
#include "net/endpoint_address.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <ostream>
#include <string>

namespace payrecon::store {
class Db;
}

namespace payrecon::engine {

struct RelayOptions {
    std::string database_url;
    std::string relay_id; // host:pid by default; recorded on every lease and attempt
    int senders = 8;      // threads
    int batch = 50;       // deliveries of one endpoint per claim
    int per_endpoint = 2; // batches of one endpoint in flight at once (its slots)
    std::chrono::milliseconds timeout{15000}; // per request, connect included
    DeliverySchedule schedule = DeliverySchedule::standard();
    net::NetworkAllowance allowance; // networks beyond the public internet an endpoint may reach
    std::chrono::milliseconds idle_poll{250}; // wait when nothing was due
    bool once = false; // deliver what is due now (published included), then return
    int publish_batch = 1000;
    int flush_every = 32;  // attempts recorded per transaction at most
    std::string ca_bundle; // PEM of trusted CAs for the endpoints' TLS; empty: the system's
    // Delivered events older than this are purged (store::purge_delivered_events, audited) every
    // `purge_every` by the first sender; 0: the relay purges nothing.
    std::chrono::seconds event_retention{0};
    std::chrono::milliseconds purge_every{std::chrono::hours(1)};
};

struct RelayCounts {
    long published = 0;  // events numbered and fanned out
    long fanned_out = 0; // deliveries created by publishing
    long attempts = 0;
    long delivered = 0;
    long failed = 0; // attempts that will be retried
    long dead = 0;
    long gone = 0;    // 410s: endpoints disabled
    long refused = 0; // addresses the connect guard refused

    RelayCounts& operator+=(const RelayCounts& o) {
        published += o.published;
        fanned_out += o.fanned_out;
        attempts += o.attempts;
        delivered += o.delivered;
        failed += o.failed;
        dead += o.dead;
        gone += o.gone;
        refused += o.refused;
        return *this;
    }
};

class Relay {
public:
    Relay(RelayOptions options, SealingKeys keys, std::ostream& log);

    // Runs until stop() (or, with `once`, until nothing is due or unpublished). Batches in flight
    // finish their current request and record it; what they had not sent is released.
    RelayCounts run();
    void stop(); // safe from a signal-handling thread

    const RelayOptions& options() const { return m_options; }
    bool database_failed() const { return m_db_failed.load(); }
    bool failed() const { return m_failed.load(); }

private:
    void thread_main(int index);
    bool wait_or_stop(std::chrono::milliseconds how_long);
    void log_event(const std::string& json_line);
    void purge(store::Db& db);
    void add(const RelayCounts& c);

    RelayOptions m_options;
    SealingKeys m_keys;
    std::ostream& m_log;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::atomic<bool> m_stop{false};
    std::atomic<bool> m_db_failed{false};
    std::atomic<bool> m_failed{false};
    RelayCounts m_counts; // under m_mutex
};

} // namespace payrecon::engine
