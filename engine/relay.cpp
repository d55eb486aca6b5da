#include "engine/relay.hpp"

#include "core/backoff.hpp"
#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "net/transport.hpp"
#include "providers/call_record.hpp"
#include "store/db.hpp"
#include "store/delivery_store.hpp"
#include "store/endpoint_store.hpp"
#include "store/relay_store.hpp"

#include <algorithm>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <vector>

namespace payrecon::engine {

namespace {

constexpr std::size_t k_excerpt_bytes = 512;

long long unix_ms_now() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string header_value(const net::HeaderList& headers, std::string_view name) {
    for (const auto& [n, v] : headers) {
        if (n.size() == name.size() &&
            std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) {
                return std::tolower(static_cast<unsigned char>(a)) ==
                       std::tolower(static_cast<unsigned char>(b));
            })) {
            return v;
        }
    }
    return {};
}

// One batch: one endpoint's claimed deliveries, sent in publish order on one connection.
class BatchSender {
public:
    BatchSender(store::Db& db, net::Transport& transport, const RelayOptions& options,
                const SealingKeys& keys, const std::string& owner, std::atomic<bool>& stop,
                std::function<void(const std::string&)> log)
        : m_db(db), m_transport(transport), m_options(options), m_keys(keys), m_owner(owner),
          m_stop(stop), m_log(std::move(log)) {}

    RelayCounts send(const store::DeliveryBatch& batch, std::chrono::milliseconds lease) {
        RelayCounts counts;
        std::string key_problem;
        const std::vector<Secret> keys = signing_keys(batch, key_problem);
        // The lease ends at the claim + `lease` (the database's clock); ours is read just after
        // the claim, so it ends no later. Keep a margin for the flush that records what was sent.
        const auto margin = std::chrono::milliseconds(2000) + m_options.timeout / 10;
        auto lease_end = std::chrono::steady_clock::now() + lease - margin;

        std::vector<store::DeliveryAttemptRecord> done;
        std::size_t next = 0;
        std::vector<store::ClaimedDelivery> all = batch.deliveries;
        const auto rest = [&](std::size_t from) {
            return std::vector<store::ClaimedDelivery>(all.begin() + static_cast<long>(from),
                                                       all.end());
        };
        // Records what was sent and renews the lease of the rest; a delivery whose lease was not
        // renewed (this sender was paused past it, and another claimed it) is not ours to send.
        const auto flush = [&](std::size_t from) {
            const auto recorded =
                store::record_attempts(m_db, batch, m_owner, done, {}, rest(from), lease);
            lease_end = std::chrono::steady_clock::now() + lease - margin;
            done.clear();
            const std::set<long long> held(recorded.renewed.begin(), recorded.renewed.end());
            all.erase(std::remove_if(all.begin() + static_cast<long>(from), all.end(),
                                     [&](const store::ClaimedDelivery& d) {
                                         return held.count(d.delivery_id) == 0;
                                     }),
                      all.end());
        };
        bool stop_batch = false;
        for (; next < all.size() && !stop_batch && !m_stop; ++next) {
            if (done.size() >= static_cast<std::size_t>(m_options.flush_every) ||
                std::chrono::steady_clock::now() + m_options.timeout >= lease_end) {
                flush(next);
                if (next >= all.size()) {
                    break;
                }
            }
            const store::ClaimedDelivery& d = all[next];
            store::DeliveryAttemptRecord a;
            a.delivery_id = d.delivery_id;
            a.generation = d.generation;
            a.started_unix_ms = unix_ms_now();
            std::optional<std::chrono::seconds> retry_after;
            if (keys.empty()) {
                a.outcome = DeliveryOutcome::retry;
                a.error = key_problem;
            } else {
                const long long timestamp = a.started_unix_ms / 1000;
                net::HttpRequest request;
                request.method = "POST";
                request.url = batch.url;
                request.body = d.body;
                request.mutating = false; // keep-alive: a re-send is a duplicate, never a loss
                request.deadline = lease_end;
                request.headers = {
                    {"Content-Type", "application/json"},
                    {"webhook-id", d.event_id},
                    {"webhook-timestamp", std::to_string(timestamp)},
                    {"webhook-signature", webhook_signature(keys, d.event_id, timestamp, d.body)},
                };
                const net::NetworkAllowance& allowance = m_options.allowance;
                request.connect_guard = [&allowance](const net::IpAddress& ip) {
                    return net::address_refusal(ip, allowance);
                };
                const auto started = std::chrono::steady_clock::now();
                const net::HttpResult r = m_transport.send(request);
                a.latency_ms =
                    static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - started)
                                         .count());
                if (r.deadline_passed) {
                    break; // not sent: our lease is ending; the rest is released below
                }
                if (r.http_status >= 100) {
                    a.http_status = r.http_status;
                    a.response_excerpt = printable(std::string_view(r.body).substr(
                        0, std::min(r.body.size(), k_excerpt_bytes)));
                    const AttemptVerdict verdict = attempt_verdict(r.http_status);
                    a.outcome = delivery_outcome(verdict);
                    if (verdict == AttemptVerdict::retry) {
                        retry_after = providers::retry_after_of(r);
                        if (r.http_status >= 300 && r.http_status <= 399) {
                            a.error =
                                "the endpoint answered " + std::to_string(r.http_status) +
                                " (Location: " + printable(header_value(r.headers, "location")) +
                                "); redirects are never followed: register the final URL";
                        } else {
                            a.error = "the endpoint answered " + std::to_string(r.http_status);
                        }
                    }
                    if (verdict == AttemptVerdict::gone) {
                        a.error = "the endpoint answered 410 Gone: it is disabled";
                        stop_batch = true;
                    }
                } else {
                    a.outcome =
                        r.address_refused ? DeliveryOutcome::refused : DeliveryOutcome::retry;
                    a.error = printable(r.error);
                    // No answer: the endpoint is down or hanging; the rest waits for the next
                    // claim rather than each spending a timeout now.
                    stop_batch = true;
                }
            }
            schedule_next(a, d, retry_after);
            log_attempt(batch, d, a);
            count(counts, a);
            done.push_back(std::move(a));
        }
        // Whatever is left was not sent (a stop, no answer, a 410, the lease): released, due now.
        store::record_attempts(m_db, batch, m_owner, done, rest(next), {}, lease);
        return counts;
    }

private:
    // The endpoint's signing keys this relay can open; where none opens (or there is none),
    // `problem` says why, and each delivery is retried with that error.
    std::vector<Secret> signing_keys(const store::DeliveryBatch& batch,
                                     std::string& problem) const {
        std::vector<Secret> keys;
        for (const auto& [number, sealed] : batch.sealed_secrets) {
            const auto opened = m_keys.open(
                sealed, store::endpoint_secret_aad(batch.tenant_id, batch.endpoint_id, number));
            const auto key = opened ? endpoint_secret_key(*opened) : std::nullopt;
            if (key) {
                keys.push_back(*key);
            } else {
                problem = "the endpoint's signing secret " + std::to_string(number) +
                          " does not open with this relay's endpoint key file: every "
                          "process must use the same one (PAYRECON_ENDPOINT_KEY_FILE)";
            }
        }
        if (keys.empty() && problem.empty()) {
            problem = "the endpoint has no signing secret: payrecon endpoint rotate-secret";
        }
        return keys;
    }

    // When a failed attempt is tried again (dead after the schedule's last try); a 410's delivery
    // waits for the endpoint to be enabled, due by the schedule meanwhile.
    void schedule_next(store::DeliveryAttemptRecord& a, const store::ClaimedDelivery& d,
                       std::optional<std::chrono::seconds> retry_after) const {
        if (a.outcome != DeliveryOutcome::delivered && a.outcome != DeliveryOutcome::gone) {
            const auto wait = m_options.schedule.next_delay(d.tries + 1, retry_after);
            if (wait) {
                a.next_attempt_unix_ms = unix_ms_now() + wait->count();
            } else {
                a.dead = true;
                a.outcome = DeliveryOutcome::dead;
            }
        } else if (a.outcome == DeliveryOutcome::gone) {
            const auto wait = m_options.schedule.next_delay(d.tries + 1);
            a.next_attempt_unix_ms = unix_ms_now() + (wait ? wait->count() : 0);
        }
    }

    static void count(RelayCounts& counts, const store::DeliveryAttemptRecord& a) {
        ++counts.attempts;
        if (a.outcome == DeliveryOutcome::delivered) {
            ++counts.delivered;
        } else if (a.outcome == DeliveryOutcome::dead) {
            ++counts.dead;
        } else if (a.outcome == DeliveryOutcome::gone) {
            ++counts.gone;
        } else {
            ++counts.failed;
            counts.refused += a.outcome == DeliveryOutcome::refused ? 1 : 0;
        }
    }

    // One line per attempt, as a web server logs a request: info when delivered, a warning when it
    // will be tried again, an error when it is dead.
    void log_attempt(const store::DeliveryBatch& batch, const store::ClaimedDelivery& d,
                     const store::DeliveryAttemptRecord& a) const {
        nlohmann::ordered_json line;
        line["level"] = a.outcome == DeliveryOutcome::delivered ? "info"
                        : a.dead                                ? "error"
                                                                : "warning";
        line["event"] = "delivery";
        line["delivery_id"] = d.delivery_id;
        line["endpoint_id"] = batch.endpoint_id;
        line["event_id"] = d.event_id;
        line["event_type"] = d.event_type;
        line["payment_id"] = d.aggregate_id;
        line["attempt"] = d.attempts + 1;
        line["outcome"] = to_string(a.outcome);
        if (a.http_status) {
            line["http_status"] = *a.http_status;
        }
        line["latency_ms"] = a.latency_ms;
        if (!a.error.empty()) {
            line["error"] = a.error;
        }
        if (a.next_attempt_unix_ms > 0 && a.outcome != DeliveryOutcome::delivered) {
            line["next_try_in_ms"] = std::max<long long>(0, a.next_attempt_unix_ms - unix_ms_now());
        }
        m_log(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }

    store::Db& m_db;
    net::Transport& m_transport;
    const RelayOptions& m_options;
    const SealingKeys& m_keys;
    const std::string& m_owner;
    std::atomic<bool>& m_stop;
    std::function<void(const std::string&)> m_log;
};

} // namespace

Relay::Relay(RelayOptions options, SealingKeys keys, std::ostream& log)
    : m_options(std::move(options)), m_keys(std::move(keys)), m_log(log) {}

void Relay::stop() {
    m_stop = true;
    m_wake.notify_all();
}

bool Relay::wait_or_stop(std::chrono::milliseconds how_long) {
    std::unique_lock lock(m_mutex);
    return m_wake.wait_for(lock, how_long, [this] { return m_stop.load(); });
}

void Relay::log_event(const std::string& json_line) {
    std::lock_guard lock(m_mutex);
    m_log << (json_line + "\n") << std::flush; // one write: a worker's lines may share the stream
}

void Relay::purge(store::Db& db) {
    const store::EventPurgeResult r =
        store::purge_delivered_events(db, m_options.event_retention, false, m_options.relay_id);
    if (r.events == 0) {
        return;
    }
    nlohmann::ordered_json line;
    line["event"] = "events_purged";
    line["events"] = r.events;
    line["deliveries"] = r.deliveries;
    line["attempts"] = r.attempts;
    line["kept_undelivered"] = r.kept_undelivered;
    line["retention_s"] = m_options.event_retention.count();
    line["run_id"] = r.run_id;
    log_event(line.dump());
}

void Relay::add(const RelayCounts& c) {
    std::lock_guard lock(m_mutex);
    m_counts += c;
}

RelayCounts Relay::run() {
    std::vector<std::thread> threads;
    for (int i = 0; i < std::max(1, m_options.senders); ++i) {
        threads.emplace_back([this, i] { thread_main(i); });
    }
    for (auto& t : threads) {
        t.join();
    }
    std::lock_guard lock(m_mutex);
    return m_counts;
}

void Relay::thread_main(int index) {
    const std::string owner = m_options.relay_id + "/" + std::to_string(index);
    net::TransportOptions to;
    to.timeouts.connect = std::min(m_options.timeout, std::chrono::milliseconds(10000));
    to.timeouts.total = m_options.timeout;
    to.max_response_bytes = 64 * 1024;
    to.ca_bundle = m_options.ca_bundle;
    to.user_agent = "payrecon-relay/0.1 (+Standard Webhooks)";
    net::Transport transport(to);
    // The lease covers one request and the flush after it, and is renewed at every flush.
    const std::chrono::milliseconds lease =
        2 * m_options.timeout + std::chrono::milliseconds(10000);
    const Backoff reconnect{std::chrono::milliseconds(200), std::chrono::milliseconds(10000)};
    int reconnect_failures = 0;
    std::unique_ptr<store::Db> db;
    // The first sender purges what the retention lets go, a minute after the start and then every
    // purge_every (never with `once`).
    auto next_purge = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    const bool purges = index == 0 && !m_options.once && m_options.event_retention.count() > 0;
    while (!m_stop) {
        try {
            if (!db) {
                db = std::make_unique<store::Db>(m_options.database_url);
                reconnect_failures = 0;
            }
            if (purges && std::chrono::steady_clock::now() >= next_purge) {
                next_purge = std::chrono::steady_clock::now() + m_options.purge_every;
                purge(*db);
            }
            RelayCounts counts;
            const auto publishing = store::publish_events(*db, m_options.publish_batch);
            const long long published = publishing ? publishing->first : 0;
            counts.published = published;
            counts.fanned_out = publishing ? publishing->second : 0;
            auto batch =
                store::claim_deliveries(*db, owner, m_options.batch, lease, m_options.per_endpoint);
            if (batch) {
                try {
                    BatchSender sender(*db, transport, m_options, m_keys, owner, m_stop,
                                       [this](const std::string& l) { log_event(l); });
                    counts += sender.send(*batch, lease);
                } catch (...) {
                    store::release_endpoint_slot(*db, *batch);
                    throw;
                }
                store::release_endpoint_slot(*db, *batch);
                if (counts.gone > 0) {
                    nlohmann::ordered_json line;
                    line["level"] = "warning";
                    line["event"] = "endpoint_disabled";
                    line["endpoint_id"] = batch->endpoint_id;
                    line["reason"] = "the endpoint answered 410 Gone";
                    line["next"] = "payrecon endpoint enable " + batch->endpoint_id +
                                   " once the merchant wants events again";
                    log_event(line.dump());
                }
                if (counts.dead > 0) {
                    nlohmann::ordered_json line;
                    line["level"] = "error";
                    line["event"] = "deliveries_dead";
                    line["endpoint_id"] = batch->endpoint_id;
                    line["deliveries"] = counts.dead;
                    line["next"] = "payrecon deliveries list --dead --endpoint " +
                                   batch->endpoint_id + ", then deliveries replay";
                    log_event(line.dump());
                }
            }
            add(counts);
            if (!batch && published == 0) {
                // --once: done when nothing is left to publish or send -- not merely when this
                // sender found nothing (another is publishing, or sending what heads a payment
                // whose next event this sender may take once it is delivered).
                if (m_options.once) {
                    if (publishing && !store::deliveries_remaining(*db)) {
                        return;
                    }
                    if (wait_or_stop(std::chrono::milliseconds(20))) {
                        return;
                    }
                } else if (wait_or_stop(m_options.idle_poll)) {
                    return;
                }
            }
        } catch (const std::exception& e) {
            const bool unexpected = dynamic_cast<const DatabaseUnavailable*>(&e) == nullptr;
            db.reset(); // its session advisory locks (the endpoint slots) go with it
            nlohmann::ordered_json line;
            line["level"] = unexpected ? "error" : "warning";
            line["event"] = unexpected ? "relay_error" : "database_unavailable";
            line["error"] = e.what();
            const std::chrono::milliseconds wait = reconnect.delay(reconnect_failures++);
            line["retry_in_ms"] = wait.count();
            log_event(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
            if (m_options.once) {
                (unexpected ? m_failed : m_db_failed) = true;
                return;
            }
            if (wait_or_stop(wait)) {
                return;
            }
        }
    }
}

} // namespace payrecon::engine
