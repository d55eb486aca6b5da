#include "api/metrics.hpp"

#include <sstream>

namespace payrecon::api {

void Metrics::observe_request(const std::string& route, int status, double seconds) {
    std::lock_guard lock(m_mutex);
    ++m_requests[{route, status}];
    Histogram& h = m_latency[route];
    for (std::size_t i = 0; i < k_buckets.size(); ++i) {
        if (seconds <= k_buckets[i]) {
            ++h.buckets[i];
        }
    }
    ++h.count;
    h.sum += seconds;
}

std::string Metrics::render(const HttpStats& http, std::size_t queue_waiting) const {
    std::ostringstream out;
    std::lock_guard lock(m_mutex);
    out << "# HELP payrecon_http_requests_total HTTP requests by route and status.\n"
        << "# TYPE payrecon_http_requests_total counter\n";
    for (const auto& [key, n] : m_requests) {
        out << "payrecon_http_requests_total{route=\"" << key.first << "\",status=\"" << key.second
            << "\"} " << n << "\n";
    }
    out << "# HELP payrecon_http_request_duration_seconds Request latency by route.\n"
        << "# TYPE payrecon_http_request_duration_seconds histogram\n";
    for (const auto& [route, h] : m_latency) {
        for (std::size_t i = 0; i < k_buckets.size(); ++i) {
            out << "payrecon_http_request_duration_seconds_bucket{route=\"" << route << "\",le=\""
                << k_buckets[i] << "\"} " << h.buckets[i] << "\n";
        }
        out << "payrecon_http_request_duration_seconds_bucket{route=\"" << route
            << "\",le=\"+Inf\"} " << h.count << "\n"
            << "payrecon_http_request_duration_seconds_sum{route=\"" << route << "\"} " << h.sum
            << "\n"
            << "payrecon_http_request_duration_seconds_count{route=\"" << route << "\"} " << h.count
            << "\n";
    }
    out << "# HELP payrecon_intake_replays_total Stored responses returned again.\n"
        << "# TYPE payrecon_intake_replays_total counter\n"
        << "payrecon_intake_replays_total " << m_replays.load() << "\n"
        << "# HELP payrecon_intake_conflicts_total Idempotency keys reused with another body.\n"
        << "# TYPE payrecon_intake_conflicts_total counter\n"
        << "payrecon_intake_conflicts_total " << m_conflicts.load() << "\n"
        << "# HELP payrecon_db_connections_in_use Database connections serving a request now.\n"
        << "# TYPE payrecon_db_connections_in_use gauge\n"
        << "payrecon_db_connections_in_use " << m_db_in_use.load() << "\n"
        << "# HELP payrecon_db_connections_open Database connections opened (one per database worker).\n"
        << "# TYPE payrecon_db_connections_open gauge\n"
        << "payrecon_db_connections_open " << m_db_open.load() << "\n"
        << "# HELP payrecon_db_pool_size Database workers, each with its own database connection.\n"
        << "# TYPE payrecon_db_pool_size gauge\n"
        << "payrecon_db_pool_size " << m_pool_size << "\n"
        << "# HELP payrecon_db_queue_waiting Requests waiting for a database worker now.\n"
        << "# TYPE payrecon_db_queue_waiting gauge\n"
        << "payrecon_db_queue_waiting " << queue_waiting << "\n"
        << "# HELP payrecon_db_queue_rejected_total Requests answered 503 because no database worker "
           "was free in time or the queue was full.\n"
        << "# TYPE payrecon_db_queue_rejected_total counter\n"
        << "payrecon_db_queue_rejected_total " << m_overloaded.load() << "\n"
        << "# HELP payrecon_http_connections_open Client connections open now.\n"
        << "# TYPE payrecon_http_connections_open gauge\n"
        << "payrecon_http_connections_open " << http.connections_open << "\n"
        << "# HELP payrecon_http_connections_refused_total Connections refused at accept, by cap.\n"
        << "# TYPE payrecon_http_connections_refused_total counter\n"
        << "payrecon_http_connections_refused_total{cap=\"total\"} " << http.refused_total << "\n"
        << "payrecon_http_connections_refused_total{cap=\"per_peer\"} " << http.refused_per_peer
        << "\n"
        << "# HELP payrecon_http_deadlines_total Connections closed at a deadline, by phase.\n"
        << "# TYPE payrecon_http_deadlines_total counter\n"
        << "payrecon_http_deadlines_total{phase=\"header\"} " << http.header_timeouts << "\n"
        << "payrecon_http_deadlines_total{phase=\"body\"} " << http.body_timeouts << "\n";
    return out.str();
}

} // namespace payrecon::api
