#pragma once
// Records -- a key and a payload, both bytes -- sorted by key in byte order (as PostgreSQL's
// COLLATE "C" sorts text) in bounded memory: records are buffered up to a budget; a full buffer is
// sorted and written to a temporary file as one sorted run, and the runs are merged at the end.
// The sort is stable: records with equal keys come out in the order they were added. A buffer
// whose records arrived in key order already is not sorted again, so a presorted stream costs
// only the copy. The temporary file is unlinked as soon as it is created: nothing is left behind,
// not even by a process that is killed.
//
// Memory: the buffer (`memory_bytes`), 512 KiB to sort it, plus, while runs are merged, a read
// buffer per run (at least 64 KiB each). The statement diff sorts our side of a window with it
// (DESIGN section 9).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon {

class ExternalSort {
public:
    struct Options {
        std::size_t memory_bytes = std::size_t{64}
                                   << 20; // records buffered before a run is written
        std::string temp_dir;             // where runs are written; empty: $TMPDIR, else /tmp
        std::string what;                 // what is sorted, for messages ("our payments of stripe")
    };

    explicit ExternalSort(Options options);
    ~ExternalSort();
    ExternalSort(const ExternalSort&) = delete;
    ExternalSort& operator=(const ExternalSort&) = delete;

    // Adds a record. Throws std::invalid_argument for a record larger than the buffer, and
    // std::runtime_error if a run cannot be written (e.g. the file system is full: the message
    // says where and what to do).
    void add(std::string_view key, std::string_view payload);
    // Ends the input. Then next() walks the records in key order.
    void finish();
    // Moves to the next record; false after the last one. key() and payload() are valid until the
    // next call.
    bool next();
    std::string_view key() const { return m_key; }
    std::string_view payload() const { return m_payload; }

    std::uint64_t records() const { return m_records; }
    // Runs written to the temporary file, and their bytes (0 when everything fitted the buffer).
    std::size_t runs_written() const { return m_runs.size(); }
    std::uint64_t bytes_written() const { return m_file_size; }

private:
    struct Entry {             // one buffered record, sorted by (prefix, key, offset)
        std::uint64_t prefix0; // the key's first 16 bytes, big-endian, zero-padded
        std::uint64_t prefix1;
        std::uint32_t offset; // of its header in the buffer
        std::uint32_t key_size;
    };
    struct Run { // a sorted run in the file: [begin, end)
        std::uint64_t begin;
        std::uint64_t end;
    };
    class RunReader;

    bool less(const Entry& a, const Entry& b) const;
    static constexpr std::size_t k_prefetch_ahead = 8; // records
    void prefetch_record(std::size_t entry) const;     // the record of m_entries[entry], if any
    void sort_buffer();
    void write_run(); // the buffer, sorted, to the file; empties the buffer
    void open_file();
    void write_bytes(const char* data, std::size_t size);
    void flush_output();
    [[noreturn]] void io_failed(const std::string& doing, int error) const;
    // Merge sources: the runs in the file in the order they were written, then the buffer.
    std::string_view source_key(std::size_t s) const;
    std::string_view source_payload(std::size_t s) const;
    bool advance_source(std::size_t s); // to its next record; false at its end
    struct Prefix { // a source's current key: its first 16 bytes as in Entry, and its size
        std::uint64_t p0;
        std::uint64_t p1;
        std::uint32_t key_size;
    };
    Prefix prefix_of(std::size_t s) const;
    bool heap_after(std::size_t a, std::size_t b) const; // a's record comes after b's

    Options m_options;
    std::string m_dir; // the directory runs are written to
    std::unique_ptr<char[]> m_buffer;
    std::size_t m_capacity = 0; // bytes of m_buffer
    std::size_t m_used = 0;
    std::size_t m_max_entries = 0;
    std::vector<Entry> m_entries;
    // sort_buffer's buckets: where each ends, and its next entry to place (256 KiB each).
    static constexpr std::size_t k_bucket_count = std::size_t{1} << 16;
    std::vector<std::uint32_t> m_bucket_end;
    std::vector<std::uint32_t> m_bucket_next;
    bool m_in_order = true; // the buffered records arrived in key order (stably sorted as they are)
    bool m_all_in_order =
        true; // every record arrived in key order: the runs are concatenated, not merged
    std::string m_last_written; // the largest key of the last run written
    std::uint64_t m_records = 0;

    int m_fd = -1;
    std::uint64_t m_file_size = 0;
    std::vector<char> m_out; // write buffer
    std::vector<Run> m_runs;

    bool m_finished = false;
    std::size_t m_memory_pos = 0; // the buffer's current entry, as a source
    std::vector<std::unique_ptr<RunReader>> m_readers;
    std::vector<std::size_t> m_heap;  // merge sources, smallest (key, source) first
    std::vector<Prefix> m_prefix;     // each source's current key's
    std::size_t m_current = SIZE_MAX; // the source of the current record
    std::string_view m_key;
    std::string_view m_payload;
};

} // namespace payrecon
