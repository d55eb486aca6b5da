#include "api/db_workers.hpp"

#include "store/db.hpp"

namespace payrecon::api {

DbSlot::~DbSlot() = default;

DbWorkers::DbWorkers(int workers, std::size_t queue_length, std::chrono::milliseconds queue_timeout,
                     Job warm)
    : m_queue_length(queue_length), m_warm(std::move(warm)), m_queue_timeout(queue_timeout) {
    for (int i = 0; i < workers; ++i) {
        m_workers.emplace_back([this] { work(); });
    }
    m_timekeeper = std::thread([this] { keep_time(); });
}

DbWorkers::~DbWorkers() {
    stop();
}

bool DbWorkers::submit(Job job, Expired expired) {
    {
        std::lock_guard lock(m_mutex);
        if (m_stopping || m_queue.size() >= m_queue_length) {
            return false;
        }
        m_queue.push_back(
            Entry{Clock::now() + m_queue_timeout, std::move(job), std::move(expired)});
        if (m_queue.size() == 1) {
            m_time_changed.notify_one();
        }
    }
    m_work_ready.notify_one();
    return true;
}

void DbWorkers::stop() {
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_work_ready.notify_all();
    m_time_changed.notify_all();
    for (auto& t : m_workers) {
        if (t.joinable()) {
            t.join();
        }
    }
    if (m_timekeeper.joinable()) {
        m_timekeeper.join();
    }
}

std::size_t DbWorkers::waiting() const {
    std::lock_guard lock(m_mutex);
    return m_queue.size();
}

int DbWorkers::busy() const {
    std::lock_guard lock(m_mutex);
    return m_busy;
}

void DbWorkers::work() {
    Slot slot;
    if (m_warm) {
        m_warm(slot);
    }
    std::unique_lock lock(m_mutex);
    for (;;) {
        m_work_ready.wait(lock, [this] { return m_stopping || !m_queue.empty(); });
        if (m_queue.empty()) {
            return; // stopping, and nothing left to run
        }
        Entry entry = std::move(m_queue.front());
        m_queue.pop_front();
        const bool late = Clock::now() >= entry.deadline;
        ++m_busy;
        lock.unlock();
        if (late) {
            entry.expired();
        } else {
            entry.job(slot);
        }
        entry = {}; // release what the job holds before taking the next
        lock.lock();
        --m_busy;
    }
}

// Answers the jobs that waited past their deadline while every worker was busy.
void DbWorkers::keep_time() {
    std::unique_lock lock(m_mutex);
    for (;;) {
        if (m_queue.empty()) {
            if (m_stopping) {
                return;
            }
            m_time_changed.wait(lock);
            continue;
        }
        const auto deadline = m_queue.front().deadline; // FIFO with one timeout: the earliest
        if (Clock::now() < deadline) {
            m_time_changed.wait_until(lock, deadline);
            continue;
        }
        std::vector<Expired> expired;
        while (!m_queue.empty() && Clock::now() >= m_queue.front().deadline) {
            expired.push_back(std::move(m_queue.front().expired));
            m_queue.pop_front();
        }
        lock.unlock();
        for (auto& e : expired) {
            e();
        }
        expired.clear();
        lock.lock();
    }
}

} // namespace payrecon::api
