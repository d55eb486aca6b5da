#pragma once
// The chaos run's clients: threads that create payments through `payrecon serve` over loopback
// HTTP as docs/http-api.md tells a client to, and remember what they were told. Each payment has
// an Idempotency-Key of its own; on a connection error, a timeout or a 5xx the same request (byte
// for byte) goes again with the same key until another answer comes. A 202 is an acknowledgement:
// its status and body are kept, and every later replay of the key must return them byte for byte
// with `Idempotent-Replayed: true` (some keys are replayed at once, as by a client that lost the
// answer, and every key once more when the clients finish). Any other answer is unexpected: the
// requests are valid and each key has one body.
//
// No Catch2 here: these threads only record; the test decides from the record.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace payrecon::chaos {

struct ClientsOptions {
    int clients = 3;
    std::uint64_t seed = 0;
    std::string api_key;                // a writer's
    std::string provider;               // the configured provider the payments name
    std::chrono::milliseconds gap{300}; // one client's payments come in bursts of 1 to 4, this
                                        // far apart on average per payment
    double replay_share = 0.1;          // keys replayed at once after their acknowledgement
};

struct Acknowledged {
    std::string key; // also the merchant reference
    std::string currency;
    long long amount = 0;
    int status = 0;
    std::string body; // as first received
    std::string payment_id;
};

struct ClientRecord {
    std::vector<Acknowledged> acknowledged;
    std::vector<std::string> unanswered;        // keys still without a final answer at the end
    std::vector<std::string> unexpected;        // "key: status body" of answers other than 202
    std::vector<std::string> replay_mismatches; // "key: what differed"
    long long requests = 0;
    long long replays = 0;
    std::map<std::string, long long> retried; // by cause: "connect", "timeout", "503", ...
};

class Clients {
public:
    explicit Clients(ClientsOptions options);
    ~Clients(); // finish(0 s) if still running
    Clients(const Clients&) = delete;
    Clients& operator=(const Clients&) = delete;

    // Where `payrecon serve` listens now; requests read it each time (serve may move).
    void set_port(int port) { m_port = port; }
    void start();
    // Stops creating payments; each client keeps retrying its current key until answered, then
    // replays each of its acknowledged keys once and compares. Keys not answered by `deadline`
    // are recorded as unanswered and the threads end. Returns when every thread has ended.
    void finish(std::chrono::steady_clock::duration deadline);
    // All clients' records, merged (after finish()).
    ClientRecord record() const;
    long long acknowledged() const { return m_acknowledged; }

private:
    struct Answer {
        int status = 0;
        std::string body;
        bool replayed_header = false;
    };
    void client_main(int index);
    // Sends until an answer that is not a 5xx; false if aborted first.
    bool send_until_answered(void* curl, const std::string& key, const std::string& body,
                             ClientRecord& record, Answer& answer);
    // Waits `d` unless aborting (true: aborting) or, with `or_finishing`, finishing.
    bool pause(std::chrono::milliseconds d, bool or_finishing);

    ClientsOptions m_options;
    std::atomic<int> m_port{0};
    std::atomic<bool> m_finishing{false};
    std::atomic<bool> m_abort{false};
    std::atomic<long long> m_acknowledged{0};
    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::vector<ClientRecord> m_records;
    std::vector<std::thread> m_threads;
    std::atomic<int> m_running{0};
};

} // namespace payrecon::chaos
