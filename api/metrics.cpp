#include "api/metrics.hpp"

#include <algorithm>
#include <sstream>

namespace payrecon::api {
namespace {

// A Prometheus label value: backslash, double quote and line feed escaped (the exposition format);
// other control characters, which a provider's error code should not hold, become '?'.
std::string label_value(const std::string& text) {
    std::string out;
    for (const char c : text) {
        if (c == '\\' || c == '"') {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            out += '?';
        } else {
            out += c;
        }
    }
    return out;
}

// Events out (read from the database at scrape time), summed over every endpoint: /metrics is
// unauthenticated, and a series per tenant would tell anyone who reaches it which tenants there
// are and their volume.
void render_delivery_totals(std::ostream& out, const EventDeliveryHealth& h) {
    long long enabled = 0;
    long long pending = 0;
    long long dead = 0;
    long long lag = 0;
    long long delivered = 0;
    long long failed = 0;
    for (const auto& e : h.endpoints) {
        enabled += e.state == "enabled" ? 1 : 0;
        pending += e.pending;
        dead += e.dead;
        lag = std::max<long long>(lag, static_cast<long long>(e.lag_seconds));
        delivered += e.attempts_delivered;
        failed += e.attempts_failed;
    }
    out << "# HELP payrecon_outbox_publish_lag_seconds Age of the oldest committed event no relay "
           "has published yet (0: none waits).\n"
        << "# TYPE payrecon_outbox_publish_lag_seconds gauge\n"
        << "payrecon_outbox_publish_lag_seconds " << h.publish_lag_seconds << "\n"
        << "# HELP payrecon_webhook_endpoints Webhook endpoints, by state (disabled: by an "
           "operator or by a 410). Per endpoint: serve --metrics-per-endpoint.\n"
        << "# TYPE payrecon_webhook_endpoints gauge\n"
        << "payrecon_webhook_endpoints{state=\"enabled\"} " << enabled << "\n"
        << "payrecon_webhook_endpoints{state=\"disabled\"} "
        << static_cast<long long>(h.endpoints.size()) - enabled << "\n"
        << "# HELP payrecon_event_deliveries_pending Deliveries waiting for a try or being tried, "
           "over every endpoint.\n"
        << "# TYPE payrecon_event_deliveries_pending gauge\n"
        << "payrecon_event_deliveries_pending " << pending << "\n"
        << "# HELP payrecon_event_deliveries_dead Deliveries whose every try failed (dead "
           "letters), over every endpoint: payrecon deliveries list --dead.\n"
        << "# TYPE payrecon_event_deliveries_dead gauge\n"
        << "payrecon_event_deliveries_dead " << dead << "\n"
        << "# HELP payrecon_event_delivery_lag_seconds Age of the oldest delivery that is due and "
           "not yet delivered, over every endpoint (0: none).\n"
        << "# TYPE payrecon_event_delivery_lag_seconds gauge\n"
        << "payrecon_event_delivery_lag_seconds " << lag << "\n"
        << "# HELP payrecon_event_delivery_attempts_total Delivery attempts recorded, by result "
           "(delivered: a 2xx; failed: anything else), over every endpoint.\n"
        << "# TYPE payrecon_event_delivery_attempts_total counter\n"
        << "payrecon_event_delivery_attempts_total{result=\"delivered\"} " << delivered << "\n"
        << "payrecon_event_delivery_attempts_total{result=\"failed\"} " << failed << "\n";
}

// Events out (read from the database at scrape time): per webhook endpoint, labelled by tenant
// and endpoint ID (serve --metrics-per-endpoint, for a /metrics only operators reach).
void render_deliveries(std::ostream& out, const EventDeliveryHealth& h) {
    const auto labels = [](const store::EndpointDeliveryStats& e) {
        return "tenant=\"" + label_value(e.tenant_id) + "\",endpoint=\"" +
               label_value(e.endpoint_id) + "\"";
    };
    out << "# HELP payrecon_outbox_publish_lag_seconds Age of the oldest committed event no relay "
           "has published yet (0: none waits).\n"
        << "# TYPE payrecon_outbox_publish_lag_seconds gauge\n"
        << "payrecon_outbox_publish_lag_seconds " << h.publish_lag_seconds << "\n"
        << "# HELP payrecon_webhook_endpoint_enabled 1 if the endpoint receives events, 0 if it is "
           "disabled (by an operator or by a 410).\n"
        << "# TYPE payrecon_webhook_endpoint_enabled gauge\n";
    for (const auto& e : h.endpoints) {
        out << "payrecon_webhook_endpoint_enabled{" << labels(e) << "} "
            << (e.state == "enabled" ? 1 : 0) << "\n";
    }
    out << "# HELP payrecon_event_deliveries_pending Deliveries waiting for a try or being "
           "tried.\n"
        << "# TYPE payrecon_event_deliveries_pending gauge\n";
    for (const auto& e : h.endpoints) {
        out << "payrecon_event_deliveries_pending{" << labels(e) << "} " << e.pending << "\n";
    }
    out << "# HELP payrecon_event_deliveries_dead Deliveries whose every try failed (dead "
           "letters): payrecon deliveries list --dead.\n"
        << "# TYPE payrecon_event_deliveries_dead gauge\n";
    for (const auto& e : h.endpoints) {
        out << "payrecon_event_deliveries_dead{" << labels(e) << "} " << e.dead << "\n";
    }
    out << "# HELP payrecon_event_delivery_lag_seconds Age of the endpoint's oldest delivery "
           "that is due and not yet delivered (0: none).\n"
        << "# TYPE payrecon_event_delivery_lag_seconds gauge\n";
    for (const auto& e : h.endpoints) {
        out << "payrecon_event_delivery_lag_seconds{" << labels(e) << "} " << e.lag_seconds << "\n";
    }
    out << "# HELP payrecon_event_delivery_attempts_total Delivery attempts recorded, by result "
           "(delivered: a 2xx; failed: anything else).\n"
        << "# TYPE payrecon_event_delivery_attempts_total counter\n";
    for (const auto& e : h.endpoints) {
        out << "payrecon_event_delivery_attempts_total{" << labels(e) << ",result=\"delivered\"} "
            << e.attempts_delivered << "\n"
            << "payrecon_event_delivery_attempts_total{" << labels(e) << ",result=\"failed\"} "
            << e.attempts_failed << "\n";
    }
}

} // namespace

std::string Metrics::render_rejected(const Rejected& rejected, bool per_endpoint) {
    std::ostringstream out;
    out << "# HELP payrecon_rejected_requests_readable 1 if the database answered this scrape's "
           "count of rejected requests, else 0.\n"
        << "# TYPE payrecon_rejected_requests_readable gauge\n"
        << "payrecon_rejected_requests_readable " << (rejected.readable ? 1 : 0) << "\n"
        << "# HELP payrecon_provider_rejected_attempts_total Provider calls the provider refused "
           "before executing anything (an integration or configuration fault), by provider and "
           "the provider's error code; counted from the database at scrape time.\n"
        << "# TYPE payrecon_provider_rejected_attempts_total counter\n";
    for (const auto& r : rejected.found.attempts) {
        out << "payrecon_provider_rejected_attempts_total{provider=\"" << label_value(r.provider)
            << "\",code=\"" << label_value(r.code) << "\"} " << r.attempts << "\n";
    }
    out << "# HELP payrecon_review_request_rejected Payments in review now because their provider "
           "rejected the request (request_rejected), by provider and the provider's error code.\n"
        << "# TYPE payrecon_review_request_rejected gauge\n";
    for (const auto& r : rejected.found.in_review) {
        out << "payrecon_review_request_rejected{provider=\"" << label_value(r.provider)
            << "\",code=\"" << label_value(r.code) << "\"} " << r.payments << "\n";
    }
    out << "# HELP payrecon_provider_events Stored provider webhook events by provider and what "
           "became of them (adopt_succeeded, adopt_failed, review: applied by the reconciler; "
           "consistent; contradicts: awaiting an operator; acknowledged; waiting; unmatched; "
           "kept); counted from the database at scrape time.\n"
        << "# TYPE payrecon_provider_events gauge\n";
    for (const auto& e : rejected.found.events) {
        out << "payrecon_provider_events{provider=\"" << label_value(e.provider) << "\",result=\""
            << label_value(e.result) << "\"} " << e.events << "\n";
    }
    if (rejected.readable) {
        if (per_endpoint) {
            render_deliveries(out, rejected.deliveries);
        } else {
            render_delivery_totals(out, rejected.deliveries);
        }
    }
    return out.str();
}

void Metrics::count_webhook(const std::string& provider, const std::string& result,
                            std::size_t stored) {
    std::lock_guard lock(m_mutex);
    ++m_webhooks[{provider, result}];
    m_webhook_events[provider] += stored;
}

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
    // Provider names come from the configuration ([a-z0-9_-]): safe as label values.
    out << "# HELP payrecon_webhooks_total Provider webhook requests by provider and result "
           "(verified, bad_signature, malformed).\n"
        << "# TYPE payrecon_webhooks_total counter\n";
    for (const auto& [key, n] : m_webhooks) {
        out << "payrecon_webhooks_total{provider=\"" << key.first << "\",result=\"" << key.second
            << "\"} " << n << "\n";
    }
    out << "# HELP payrecon_webhook_events_stored_total Provider webhook events stored for the "
           "first time (redeliveries not counted).\n"
        << "# TYPE payrecon_webhook_events_stored_total counter\n";
    for (const auto& [provider, n] : m_webhook_events) {
        out << "payrecon_webhook_events_stored_total{provider=\"" << provider << "\"} " << n
            << "\n";
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
        << "# HELP payrecon_db_connections_open Database connections opened (one per database "
           "worker).\n"
        << "# TYPE payrecon_db_connections_open gauge\n"
        << "payrecon_db_connections_open " << m_db_open.load() << "\n"
        << "# HELP payrecon_db_pool_size Database workers, each with its own database connection.\n"
        << "# TYPE payrecon_db_pool_size gauge\n"
        << "payrecon_db_pool_size " << m_pool_size << "\n"
        << "# HELP payrecon_db_queue_waiting Requests waiting for a database worker now.\n"
        << "# TYPE payrecon_db_queue_waiting gauge\n"
        << "payrecon_db_queue_waiting " << queue_waiting << "\n"
        << "# HELP payrecon_db_queue_rejected_total Requests answered 503 because no database "
           "worker "
           "was free in time or the queue was full.\n"
        << "# TYPE payrecon_db_queue_rejected_total counter\n"
        << "payrecon_db_queue_rejected_total " << m_overloaded.load() << "\n"
        << "# HELP payrecon_db_reconnects_total Requests tried again on a new database connection "
           "because their worker's connection had died (a database restart, a failover).\n"
        << "# TYPE payrecon_db_reconnects_total counter\n"
        << "payrecon_db_reconnects_total " << m_reconnects.load() << "\n"
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
        << "payrecon_http_deadlines_total{phase=\"body\"} " << http.body_timeouts << "\n"
        << "# HELP payrecon_http_requests_in_hand Requests taken and not yet fully answered.\n"
        << "# TYPE payrecon_http_requests_in_hand gauge\n"
        << "payrecon_http_requests_in_hand " << http.requests_in_hand << "\n"
        << "# HELP payrecon_http_unsent_bytes Bytes of answers written and not yet read by their "
           "clients.\n"
        << "# TYPE payrecon_http_unsent_bytes gauge\n"
        << "payrecon_http_unsent_bytes " << http.unsent_bytes << "\n"
        << "# HELP payrecon_http_refused_peer_busy_total Requests answered 429 because their "
           "address had as much in hand as it may.\n"
        << "# TYPE payrecon_http_refused_peer_busy_total counter\n"
        << "payrecon_http_refused_peer_busy_total " << http.refused_peer_busy << "\n";
    return out.str();
}

} // namespace payrecon::api
