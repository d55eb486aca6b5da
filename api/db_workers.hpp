#pragma once
// The fixed pool of database workers behind `payrecon serve`: N threads, each holding one database
// connection (opened as it starts, or by its first job; dropped after a job found it broken).
// Requests wait in one bounded FIFO queue: a job that no worker has taken within the queue timeout
// is not run; its `expired` callback answers instead (503), so a saturated database makes clients
// retry rather than pile up. Nothing here blocks the caller: submit() only queues.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace payrecon::store {
class Db;
}

namespace payrecon::api {

// A worker's connection: `db` is null until the warm-up or a job opens it; a job resets it after a
// failure.
struct DbSlot {
    std::unique_ptr<store::Db> db;
    ~DbSlot();
};

class DbWorkers {
public:
    using Slot = DbSlot;
    using Job = std::function<void(Slot&)>;
    using Expired = std::function<void()>;

    // `warm`, if given, runs first on each worker's own slot before it takes any job (serve opens
    // the connection and prepares its statements there, so that the first requests do not pay
    // for them); it may not throw.
    DbWorkers(int workers, std::size_t queue_length, std::chrono::milliseconds queue_timeout,
              Job warm = {});
    // stop().
    ~DbWorkers();
    DbWorkers(const DbWorkers&) = delete;
    DbWorkers& operator=(const DbWorkers&) = delete;

    // Queues `job` for the next free worker and returns true; returns false at once, queuing
    // nothing, if `queue_length` jobs already wait. A job not taken within the queue timeout never
    // runs: `expired` is called instead, on the pool's timekeeper thread. Exactly one of the two is
    // called for a queued job. Neither may throw.
    bool submit(Job job, Expired expired);
    // Runs what is queued, then joins the threads. Idempotent.
    void stop();

    int workers() const { return static_cast<int>(m_workers.size()); }
    std::size_t waiting() const;
    int busy() const;

private:
    using Clock = std::chrono::steady_clock;
    struct Entry {
        Clock::time_point deadline;
        Job job;
        Expired expired;
    };
    void work();
    void keep_time();

    const std::size_t m_queue_length;
    const Job m_warm;
    const std::chrono::milliseconds m_queue_timeout;
    mutable std::mutex m_mutex;
    std::condition_variable m_work_ready;
    std::condition_variable m_time_changed;
    std::deque<Entry> m_queue;
    int m_busy = 0;
    bool m_stopping = false;
    std::vector<std::thread> m_workers;
    std::thread m_timekeeper;
};

} // namespace payrecon::api
