#pragma once
// Store-internal: bulk reads for the statement diff. A query streamed with COPY ... TO STDOUT
// (FORMAT binary) on a connection of its own, inside a REPEATABLE READ READ ONLY transaction that
// imports a snapshot exported by the caller's transaction (pg_export_snapshot), so several such
// streams read one consistent state of the database side by side. And `Prefetch`, which runs a
// producer on a thread of its own and hands its records over in batches through a bounded queue:
// memory stays bounded, and reading PostgreSQL overlaps with the work done on the records.
// Included only by core/store/*.cpp.

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

struct pg_conn;
struct pg_cancel;

namespace payrecon::store {

class CopyOutStream {
public:
    // `what` names the data in messages ("our payments of stripe"). Nothing is sent before start().
    CopyOutStream(std::string url, std::string snapshot, std::string query, std::string what);
    ~CopyOutStream();
    CopyOutStream(const CopyOutStream&) = delete;
    CopyOutStream& operator=(const CopyOutStream&) = delete;

    // Connects, imports the snapshot and starts `COPY (query) TO STDOUT (FORMAT binary)`; returns
    // once the first row can be read (a sorted query has sorted by then). Throws
    // TransientStoreError if the database cannot be reached or the stream was cancelled,
    // std::runtime_error if the database refuses the query.
    void start();
    // Reads the next row; false after the last one (the COPY then completed without error).
    bool next();
    std::size_t fields() const { return m_fields.size(); }
    bool is_null(std::size_t i) const { return !m_fields.at(i).has_value(); }
    // A text (or varchar) column's bytes; empty for NULL. Valid until the next call to next().
    std::string_view text(std::size_t i) const { return m_fields.at(i).value_or(std::string_view{}); }
    // A bigint column; throws std::runtime_error for NULL or another width.
    long long int8(std::size_t i) const;
    // A timestamptz column as unix seconds (rounded down); -infinity and infinity are the smallest
    // and largest long long. Throws for NULL.
    long long unix_seconds(std::size_t i) const;
    // Asks the server to stop (from any thread, also before start()): the next read fails.
    void cancel();

private:
    void need(std::size_t n);   // at least n unread bytes buffered, or throws
    std::uint16_t take16();
    std::uint32_t take32();
    void finish();              // after the end of the COPY data: the COPY's own result
    [[noreturn]] void fail(const std::string& what) const;
    // A statement PostgreSQL refused: TransientStoreError if trying again may help, else
    // std::runtime_error.
    [[noreturn]] void refused(const std::string& sqlstate, const std::string& message) const;

    std::string m_url;
    std::string m_snapshot;
    std::string m_query;
    std::string m_what;        // what is read, for messages
    pg_conn* m_conn = nullptr;
    std::string m_buffer;
    std::size_t m_pos = 0;
    bool m_header_read = false;
    bool m_done = false;
    std::vector<std::pair<std::size_t, long>> m_spans; // offset and length (-1: NULL) of each field
    std::vector<std::optional<std::string_view>> m_fields;
    std::mutex m_cancel_mutex;
    pg_cancel* m_cancel = nullptr;
    bool m_cancelled = false;  // under m_cancel_mutex
};

// Runs `produce(emit)` on a thread of its own; `emit` hands one record over. The consumer takes
// them in order with next(). At most `depth` full batches of `batch` records wait at any time: a
// producer that gets ahead blocks. An exception in the producer is thrown by next() once the
// records before it are consumed. Destroying a Prefetch before the end stops the producer (its
// next `emit` throws, unwinding it) and waits for it.
template <typename Record>
class Prefetch {
public:
    using Emit = std::function<void(Record&&)>;

    Prefetch(std::function<void(const Emit&)> produce, std::function<void()> on_stop, std::size_t batch = 4096,
             std::size_t depth = 4)
        : m_batch(batch), m_depth(depth), m_on_stop(std::move(on_stop)) {
        m_thread = std::thread([this, produce = std::move(produce)] { run(produce); });
    }

    ~Prefetch() {
        bool finished = false;
        {
            std::lock_guard lock(m_mutex);
            m_stop = true;
            finished = m_finished;
        }
        m_cv.notify_all();
        if (!finished && m_on_stop) {
            m_on_stop(); // e.g. cancels the query, so that a producer waiting for rows returns
        }
        m_thread.join();
    }
    Prefetch(const Prefetch&) = delete;
    Prefetch& operator=(const Prefetch&) = delete;

    std::optional<Record> next() {
        if (m_pos == m_current.size()) {
            m_current.clear();
            m_pos = 0;
            std::unique_lock lock(m_mutex);
            m_cv.wait(lock, [&] { return !m_full.empty() || m_finished; });
            if (m_full.empty()) {
                if (m_error) {
                    std::rethrow_exception(m_error);
                }
                return std::nullopt;
            }
            m_current = std::move(m_full.front());
            m_full.pop_front();
            lock.unlock();
            m_cv.notify_all();
        }
        return std::move(m_current[m_pos++]);
    }

private:
    struct Stopped {};

    void run(const std::function<void(const Emit&)>& produce) {
        std::vector<Record> filling;
        filling.reserve(m_batch);
        const auto hand_over = [&] {
            std::unique_lock lock(m_mutex);
            m_cv.wait(lock, [&] { return m_full.size() < m_depth || m_stop; });
            if (m_stop) {
                throw Stopped{};
            }
            m_full.push_back(std::move(filling));
            lock.unlock();
            m_cv.notify_all();
            filling = std::vector<Record>();
            filling.reserve(m_batch);
        };
        std::exception_ptr error;
        try {
            produce([&](Record&& r) {
                filling.push_back(std::move(r));
                if (filling.size() == m_batch) {
                    hand_over();
                }
            });
            if (!filling.empty()) {
                hand_over();
            }
        } catch (const Stopped&) {
            filling.clear();
        } catch (...) {
            error = std::current_exception();
        }
        {
            std::lock_guard lock(m_mutex);
            if (!filling.empty() && !m_stop) {
                m_full.push_back(std::move(filling)); // the records before the error: one batch over
            }
            m_error = error;
            m_finished = true;
        }
        m_cv.notify_all();
    }

    const std::size_t m_batch;
    const std::size_t m_depth;
    std::function<void()> m_on_stop;
    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::deque<std::vector<Record>> m_full;
    bool m_stop = false;
    bool m_finished = false;
    std::exception_ptr m_error;
    std::vector<Record> m_current; // consumer side only
    std::size_t m_pos = 0;
    std::thread m_thread;          // last: started once everything above is built
};

} // namespace payrecon::store
