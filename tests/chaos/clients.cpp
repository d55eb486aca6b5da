#include "tests/chaos/clients.hpp"

#include <algorithm>
#include <curl/curl.h>
#include <nlohmann/json.hpp>
#include <random>

namespace payrecon::chaos {
namespace {

// Three currencies (EUR and USD in cents, JPY without minor units) and the payment methods the
// fake provider charges, declines, and refuses for want of authentication off session.
constexpr const char* k_currencies[] = {"EUR", "USD", "JPY"};

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* out) {
    static_cast<std::string*>(out)->append(data, size * n);
    return size * n;
}

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* out) {
    std::string line(data, size * n);
    std::transform(line.begin(), line.end(), line.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (line.rfind("idempotent-replayed: true", 0) == 0) {
        *static_cast<bool*>(out) = true;
    }
    return size * n;
}

} // namespace

Clients::Clients(ClientsOptions options) : m_options(std::move(options)) {}

Clients::~Clients() {
    if (!m_threads.empty()) {
        finish(std::chrono::seconds(0));
    }
}

void Clients::start() {
    m_records.assign(static_cast<std::size_t>(m_options.clients), ClientRecord{});
    m_running = m_options.clients;
    for (int i = 0; i < m_options.clients; ++i) {
        m_threads.emplace_back([this, i] { client_main(i); });
    }
}

void Clients::finish(std::chrono::steady_clock::duration deadline) {
    {
        std::lock_guard lock(m_mutex);
        m_finishing = true;
    }
    m_wake.notify_all();
    {
        std::unique_lock lock(m_mutex);
        if (!m_wake.wait_for(lock, deadline, [this] { return m_running == 0; })) {
            m_abort = true;
        }
    }
    m_wake.notify_all();
    for (auto& t : m_threads) {
        t.join();
    }
    m_threads.clear();
}

ClientRecord Clients::record() const {
    ClientRecord all;
    for (const auto& r : m_records) {
        all.acknowledged.insert(all.acknowledged.end(), r.acknowledged.begin(),
                                r.acknowledged.end());
        all.unanswered.insert(all.unanswered.end(), r.unanswered.begin(), r.unanswered.end());
        all.unexpected.insert(all.unexpected.end(), r.unexpected.begin(), r.unexpected.end());
        all.replay_mismatches.insert(all.replay_mismatches.end(), r.replay_mismatches.begin(),
                                     r.replay_mismatches.end());
        all.requests += r.requests;
        all.replays += r.replays;
        for (const auto& [cause, n] : r.retried) {
            all.retried[cause] += n;
        }
    }
    return all;
}

bool Clients::pause(std::chrono::milliseconds d, bool or_finishing) {
    std::unique_lock lock(m_mutex);
    m_wake.wait_for(lock, d,
                    [&] { return m_abort.load() || (or_finishing && m_finishing.load()); });
    return m_abort;
}

bool Clients::send_until_answered(void* handle, const std::string& key, const std::string& body,
                                  ClientRecord& record, Answer& answer) {
    CURL* curl = static_cast<CURL*>(handle);
    const std::string auth = "Authorization: Bearer " + m_options.api_key;
    const std::string idempotency = "Idempotency-Key: " + key;
    std::chrono::milliseconds backoff{50};
    for (;;) {
        if (m_abort) {
            return false;
        }
        answer = Answer{};
        const std::string url =
            "http://127.0.0.1:" + std::to_string(m_port.load()) + "/v1/payments";
        curl_easy_reset(curl);
        curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        // A fresh connection each time: a kept-alive one to a killed server would only add a
        // failure mode of the client's own.
        curl_easy_setopt(curl, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(curl, CURLOPT_FORBID_REUSE, 1L);
        curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
        curl_slist* headers = curl_slist_append(nullptr, "Expect:");
        headers = curl_slist_append(headers, "Content-Type: application/json");
        headers = curl_slist_append(headers, auth.c_str());
        headers = curl_slist_append(headers, idempotency.c_str());
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(curl, CURLOPT_POST, 1L);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &on_body);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer.body);
        curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &on_header);
        curl_easy_setopt(curl, CURLOPT_HEADERDATA, &answer.replayed_header);
        const CURLcode rc = curl_easy_perform(curl);
        curl_slist_free_all(headers);
        ++record.requests;
        std::string cause;
        if (rc != CURLE_OK) {
            cause = rc == CURLE_COULDNT_CONNECT      ? "connection refused"
                    : rc == CURLE_OPERATION_TIMEDOUT ? "timeout"
                    : rc == CURLE_GOT_NOTHING        ? "empty reply"
                    : rc == CURLE_RECV_ERROR         ? "connection reset"
                                                     : curl_easy_strerror(rc);
        } else {
            long status = 0;
            curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
            answer.status = static_cast<int>(status);
            if (answer.status < 500) {
                return true;
            }
            cause = "HTTP " + std::to_string(answer.status);
        }
        ++record.retried[cause];
        if (pause(backoff, false)) {
            return false;
        }
        backoff = std::min(backoff * 2, std::chrono::milliseconds(400));
    }
}

void Clients::client_main(int index) {
    ClientRecord& record = m_records[static_cast<std::size_t>(index)];
    CURL* curl = curl_easy_init();
    std::mt19937_64 rng(m_options.seed * 1000003 + static_cast<std::uint64_t>(index) + 1);
    // Bursts of 1 to 4 payments (a worker then claims several at once), `gap` apart on average
    // per payment.
    std::exponential_distribution<double> gap(1.0 /
                                              (2.5 * static_cast<double>(m_options.gap.count())));
    int burst_left = 0;
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    // Bodies of the acknowledged keys, for the final replay.
    std::vector<std::string> bodies;

    const auto replay = [&](std::size_t i) {
        const Acknowledged& first = record.acknowledged[i];
        Answer again;
        if (!send_until_answered(curl, first.key, bodies[i], record, again)) {
            record.unanswered.push_back(first.key + " (its replay)");
            return;
        }
        ++record.replays;
        if (again.status != first.status || again.body != first.body) {
            record.replay_mismatches.push_back(
                first.key + ": first " + std::to_string(first.status) + " " + first.body +
                ", replayed " + std::to_string(again.status) + " " + again.body);
        } else if (!again.replayed_header) {
            record.replay_mismatches.push_back(first.key +
                                               ": the replay lacks Idempotent-Replayed: true");
        }
    };

    for (int n = 0; !m_finishing && !m_abort; ++n) {
        // Letters around the numbers: no run of digits that a card-number check could join.
        const std::string key = "chaos-c" + std::to_string(index) + "-n" + std::to_string(n);
        const std::string currency = k_currencies[rng() % 3];
        const long long amount = 100 + static_cast<long long>(rng() % 99900);
        const double m = unit(rng);
        const char* method = m < 0.03   ? "pm_card_chargeDeclined"
                             : m < 0.05 ? "pm_card_authenticationRequired"
                                        : "pm_card_visa";
        const std::string body =
            nlohmann::json{{"amount", amount},
                           {"currency", currency},
                           {"merchant_reference", key},
                           {"provider", m_options.provider},
                           {"payment_method", method},
                           {"metadata", {{"chaos_client", std::to_string(index)}}}}
                .dump();
        Answer answer;
        if (!send_until_answered(curl, key, body, record, answer)) {
            record.unanswered.push_back(key);
            break;
        }
        if (answer.status != 202) {
            record.unexpected.push_back(key + ": " + std::to_string(answer.status) + " " +
                                        answer.body);
        } else {
            Acknowledged a;
            a.key = key;
            a.currency = currency;
            a.amount = amount;
            a.status = answer.status;
            a.body = answer.body;
            const auto parsed = nlohmann::json::parse(answer.body, nullptr, false);
            if (parsed.is_object() && parsed.contains("id") && parsed["id"].is_string()) {
                a.payment_id = parsed["id"].get<std::string>();
            }
            record.acknowledged.push_back(std::move(a));
            bodies.push_back(body);
            ++m_acknowledged;
            if (unit(rng) < m_options.replay_share) {
                replay(record.acknowledged.size() - 1);
            }
        }
        if (burst_left-- > 0) {
            continue;
        }
        burst_left = static_cast<int>(rng() % 4);
        if (pause(std::chrono::milliseconds(static_cast<long long>(gap(rng))), true)) {
            break;
        }
    }
    // Every acknowledged key once more, now that the chaos is over.
    for (std::size_t i = 0; i < record.acknowledged.size(); ++i) {
        replay(i);
    }
    curl_easy_cleanup(curl);
    {
        std::lock_guard lock(m_mutex);
        --m_running;
    }
    m_wake.notify_all();
}

} // namespace payrecon::chaos
