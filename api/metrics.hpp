#pragma once
// The server's metrics, rendered in the Prometheus text format (version 0.0.4).

#include "api/http_server.hpp"
#include "services/events.hpp"
#include "services/payments.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace payrecon::api {

class Metrics {
public:
    // One request finished on `route` (the route pattern, never the raw path) with `status`.
    void observe_request(const std::string& route, int status, double seconds);
    void count_replay() { m_replays.fetch_add(1, std::memory_order_relaxed); }
    void count_conflict() { m_conflicts.fetch_add(1, std::memory_order_relaxed); }
    void connection_acquired() { m_db_in_use.fetch_add(1, std::memory_order_relaxed); }
    void connection_released() { m_db_in_use.fetch_sub(1, std::memory_order_relaxed); }
    void connection_opened() { m_db_open.fetch_add(1, std::memory_order_relaxed); }
    void connection_closed() { m_db_open.fetch_sub(1, std::memory_order_relaxed); }
    // A request whose worker's connection had died was tried again on a new one.
    void count_reconnect() { m_reconnects.fetch_add(1, std::memory_order_relaxed); }
    void count_overloaded() { m_overloaded.fetch_add(1, std::memory_order_relaxed); }
    void set_pool_size(int size) { m_pool_size = size; }
    // A provider's webhook request was answered: `result` verified, bad_signature or malformed;
    // `stored` events of it were new.
    void count_webhook(const std::string& provider, const std::string& result, std::size_t stored);

    // Everything, with the transport's counters and the requests waiting for a worker now.
    std::string render(const HttpStats& http, std::size_t queue_waiting) const;

    // What the workers' provider calls came to is not this process's to see (workers are other
    // processes, on other hosts): the requests providers rejected are read from the database at
    // each scrape and rendered here. `readable` false: the database could not be read this time
    // (payrecon_rejected_requests_readable 0, no series).
    struct Rejected {
        bool readable = false;
        ProviderRejections found;       // services/payments: what the database says
        EventDeliveryHealth deliveries; // services/events: events out, per endpoint
    };
    // `per_endpoint`: the events-out series per endpoint, labelled by tenant and endpoint ID;
    // otherwise summed over every endpoint (the default: /metrics is unauthenticated).
    static std::string render_rejected(const Rejected& rejected, bool per_endpoint = false);

    static constexpr std::array<double, 12> k_buckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                         0.1,   0.25,   0.5,   1.0,  2.5,   5.0};

private:
    struct Histogram {
        std::array<std::uint64_t, k_buckets.size()> buckets{};
        std::uint64_t count = 0;
        double sum = 0;
    };
    mutable std::mutex m_mutex;
    std::map<std::pair<std::string, int>, std::uint64_t> m_requests;
    std::map<std::string, Histogram> m_latency;
    std::map<std::pair<std::string, std::string>, std::uint64_t> m_webhooks; // provider, result
    std::map<std::string, std::uint64_t> m_webhook_events;                   // provider
    std::atomic<std::uint64_t> m_replays{0};
    std::atomic<std::uint64_t> m_conflicts{0};
    std::atomic<std::uint64_t> m_overloaded{0};
    std::atomic<std::uint64_t> m_reconnects{0};
    std::atomic<int> m_db_in_use{0};
    std::atomic<int> m_db_open{0};
    int m_pool_size = 0;
};

} // namespace payrecon::api
