#include "core/external_sort.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <endian.h>
#include <fcntl.h>
#include <stdexcept>
#include <unistd.h>

namespace payrecon {
namespace {

constexpr std::size_t k_header = 8; // key size and payload size, 4 bytes each
constexpr std::size_t k_min_memory = 4096;
constexpr std::size_t k_max_memory = std::size_t{1} << 32; // offsets into the buffer are 32-bit
constexpr std::size_t k_out_buffer = std::size_t{1} << 20;
constexpr std::size_t k_min_read_buffer = std::size_t{64} << 10;
constexpr std::size_t k_max_read_buffer = std::size_t{1} << 20;

void put32(char* p, std::uint32_t v) {
    std::memcpy(p, &v, 4);
}
std::uint32_t get32(const char* p) {
    std::uint32_t v = 0;
    std::memcpy(&v, p, 4);
    return v;
}

std::uint64_t big_endian(const char* p, std::size_t n) {
    std::uint64_t v = 0;
    if (n >= 8) {
        std::memcpy(&v, p, 8);
        return be64toh(v);
    }
    for (std::size_t i = 0; i < 8; ++i) {
        v = (v << 8) | (i < n ? static_cast<unsigned char>(p[i]) : 0u);
    }
    return v;
}

int compare_keys(std::string_view a, std::string_view b) {
    const int c = std::memcmp(a.data(), b.data(), std::min(a.size(), b.size()));
    if (c != 0) {
        return c;
    }
    return a.size() < b.size() ? -1 : a.size() > b.size() ? 1 : 0;
}

} // namespace

// One sorted run of the file, read back through a buffer of its own.
class ExternalSort::RunReader {
public:
    RunReader(const ExternalSort& owner, Run run, std::size_t buffer_size)
        : m_owner(owner), m_next(run.begin), m_end(run.end), m_buffer(buffer_size) {}

    // The run's next record into key/payload; false at its end.
    bool advance() {
        if (!fill(k_header)) {
            return false;
        }
        const std::size_t key_size = get32(m_buffer.data() + m_pos);
        const std::size_t payload_size = get32(m_buffer.data() + m_pos + 4);
        const std::size_t size = k_header + key_size + payload_size;
        if (!fill(size)) {
            m_owner.io_failed("reading a sorted run back (it ends inside a record)", 0);
        }
        key = std::string_view(m_buffer.data() + m_pos + k_header, key_size);
        payload = std::string_view(m_buffer.data() + m_pos + k_header + key_size, payload_size);
        m_pos += size;
        return true;
    }

    std::string_view key;
    std::string_view payload;

private:
    // At least n unread bytes buffered; false if the run ends first.
    bool fill(std::size_t n) {
        if (m_len - m_pos >= n) {
            return true;
        }
        std::memmove(m_buffer.data(), m_buffer.data() + m_pos, m_len - m_pos);
        m_len -= m_pos;
        m_pos = 0;
        if (m_buffer.size() < n) {
            m_buffer.resize(n);
        }
        while (m_len < n && m_next < m_end) {
            const std::size_t want = static_cast<std::size_t>(
                std::min<std::uint64_t>(m_buffer.size() - m_len, m_end - m_next));
            const ssize_t got =
                ::pread(m_owner.m_fd, m_buffer.data() + m_len, want, static_cast<off_t>(m_next));
            if (got < 0 && errno == EINTR) {
                continue;
            }
            if (got <= 0) {
                m_owner.io_failed("reading a sorted run back", got < 0 ? errno : 0);
            }
            m_len += static_cast<std::size_t>(got);
            m_next += static_cast<std::uint64_t>(got);
        }
        return m_len >= n;
    }

    const ExternalSort& m_owner;
    std::uint64_t m_next; // file offset of the next byte to read
    std::uint64_t m_end;
    std::vector<char> m_buffer;
    std::size_t m_pos = 0;
    std::size_t m_len = 0;
};

ExternalSort::ExternalSort(Options options) : m_options(std::move(options)) {
    if (m_options.memory_bytes < k_min_memory || m_options.memory_bytes >= k_max_memory) {
        throw std::invalid_argument("ExternalSort: memory_bytes must lie in [4 KiB, 4 GiB)");
    }
    m_dir = m_options.temp_dir;
    if (m_dir.empty()) {
        const char* tmpdir = std::getenv("TMPDIR");
        m_dir = tmpdir && *tmpdir ? tmpdir : "/tmp";
    }
    // Three quarters for the records, one for their sort entries. Neither is touched (resident)
    // before records fill it.
    m_capacity = m_options.memory_bytes / 4 * 3;
    m_max_entries = m_options.memory_bytes / 4 / sizeof(Entry);
    m_buffer.reset(new char[m_capacity]);
    m_entries.reserve(m_max_entries);
}

ExternalSort::~ExternalSort() {
    if (m_fd >= 0) {
        ::close(m_fd);
    }
}

bool ExternalSort::less(const Entry& a, const Entry& b) const {
    if (a.prefix0 != b.prefix0) {
        return a.prefix0 < b.prefix0;
    }
    if (a.prefix1 != b.prefix1) {
        return a.prefix1 < b.prefix1;
    }
    if (a.key_size > 16 || b.key_size > 16 || a.key_size != b.key_size) {
        const int c =
            compare_keys(std::string_view(m_buffer.get() + a.offset + k_header, a.key_size),
                         std::string_view(m_buffer.get() + b.offset + k_header, b.key_size));
        if (c != 0) {
            return c < 0;
        }
    }
    return a.offset < b.offset; // equal keys: the order they were added in
}

void ExternalSort::add(std::string_view key, std::string_view payload) {
    if (m_finished) {
        throw std::logic_error("ExternalSort::add after finish");
    }
    const std::size_t size = k_header + key.size() + payload.size();
    if (size > m_capacity) {
        throw std::invalid_argument(
            "sorting " + m_options.what + ": a record of " + std::to_string(size) +
            " bytes does not fit the sort buffer of " + std::to_string(m_capacity) + " bytes");
    }
    if (m_used + size > m_capacity || m_entries.size() == m_max_entries) {
        write_run();
    }
    char* p = m_buffer.get() + m_used;
    put32(p, static_cast<std::uint32_t>(key.size()));
    put32(p + 4, static_cast<std::uint32_t>(payload.size()));
    std::memcpy(p + k_header, key.data(), key.size());
    std::memcpy(p + k_header + key.size(), payload.data(), payload.size());
    const Entry entry{big_endian(key.data(), key.size()),
                      big_endian(key.data() + std::min<std::size_t>(8, key.size()),
                                 key.size() > 8 ? key.size() - 8 : 0),
                      static_cast<std::uint32_t>(m_used), static_cast<std::uint32_t>(key.size())};
    if (m_in_order && !m_entries.empty() && less(entry, m_entries.back())) {
        m_in_order = false;
    }
    if (m_entries.empty() && m_all_in_order && !m_runs.empty() &&
        compare_keys(key, m_last_written) < 0) {
        m_all_in_order = false;
    }
    m_entries.push_back(entry);
    m_used += size;
    ++m_records;
}

void ExternalSort::sort_buffer() {
    if (m_in_order) {
        return;
    }
    const auto by_key = [this](const Entry& a, const Entry& b) { return less(a, b); };
    // First the entries are distributed in place by 16 bits of their key's first 8 bytes -- the
    // 16 below the bits that all of them share (a common "pr_" costs nothing) --, then each bucket
    // (a few entries for random keys) is sorted whole: three comparisons an entry instead of
    // eighteen for a run of 350,000. less() orders every pair, ties by offset, so the order is the
    // same as a stable sort's.
    std::uint64_t differ = 0;
    for (const Entry& e : m_entries) {
        differ |= e.prefix0 ^ m_entries.front().prefix0;
    }
    if (differ == 0 || m_entries.size() < k_bucket_count) {
        std::sort(m_entries.begin(), m_entries.end(), by_key);
        m_in_order = true;
        return;
    }
    const int top = 63 - __builtin_clzll(differ); // the highest bit that differs
    const int shift = std::max(0, top - 15);
    const auto bucket = [shift](const Entry& e) {
        return static_cast<std::size_t>((e.prefix0 >> shift) & (k_bucket_count - 1));
    };
    m_bucket_end.assign(k_bucket_count, 0);
    for (const Entry& e : m_entries) {
        ++m_bucket_end[bucket(e)];
    }
    m_bucket_next.resize(k_bucket_count);
    std::uint32_t start = 0;
    for (std::size_t b = 0; b < k_bucket_count; ++b) {
        m_bucket_next[b] = start;
        start += m_bucket_end[b];
        m_bucket_end[b] = start;
    }
    // American flag sort: each entry swapped straight into its bucket.
    for (std::size_t b = 0; b < k_bucket_count; ++b) {
        while (m_bucket_next[b] < m_bucket_end[b]) {
            Entry& e = m_entries[m_bucket_next[b]];
            const std::size_t to = bucket(e);
            if (to == b) {
                ++m_bucket_next[b];
            } else {
                std::swap(e, m_entries[m_bucket_next[to]++]);
            }
        }
    }
    std::uint32_t begin = 0;
    for (std::size_t b = 0; b < k_bucket_count; ++b) {
        if (m_bucket_end[b] - begin > 1) {
            std::sort(m_entries.begin() + begin, m_entries.begin() + m_bucket_end[b], by_key);
        }
        begin = m_bucket_end[b];
    }
    m_in_order = true;
}

void ExternalSort::open_file() {
    std::string path = m_dir + "/payrecon-sort-XXXXXX";
    m_fd = ::mkostemp(path.data(), O_CLOEXEC);
    if (m_fd < 0) {
        io_failed("creating a temporary file in " + m_dir, errno);
    }
    ::unlink(path.c_str()); // gone from the directory now; the space is freed when m_fd closes
    m_out.reserve(k_out_buffer);
}

void ExternalSort::write_bytes(const char* data, std::size_t size) {
    if (m_out.size() + size > k_out_buffer) {
        flush_output();
    }
    if (size > k_out_buffer) {
        m_out.assign(data, data + size);
        flush_output();
        return;
    }
    m_out.insert(m_out.end(), data, data + size);
}

void ExternalSort::flush_output() {
    std::size_t done = 0;
    while (done < m_out.size()) {
        const ssize_t n = ::write(m_fd, m_out.data() + done, m_out.size() - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            io_failed("writing a sorted run to a temporary file in " + m_dir,
                      n < 0 ? errno : ENOSPC);
        }
        done += static_cast<std::size_t>(n);
    }
    m_file_size += m_out.size();
    m_out.clear();
}

void ExternalSort::write_run() {
    if (m_entries.empty()) {
        return;
    }
    if (m_fd < 0) {
        open_file();
    }
    m_all_in_order = m_all_in_order && m_in_order;
    sort_buffer();
    const Entry& last = m_entries.back();
    m_last_written.assign(m_buffer.get() + last.offset + k_header, last.key_size);
    const std::uint64_t begin = m_file_size + m_out.size();
    for (std::size_t i = 0; i < m_entries.size(); ++i) {
        prefetch_record(i + k_prefetch_ahead);
        const char* p = m_buffer.get() + m_entries[i].offset;
        write_bytes(p, k_header + m_entries[i].key_size + get32(p + 4));
    }
    flush_output();
    m_runs.push_back(Run{begin, m_file_size});
    m_entries.clear();
    m_used = 0;
}

void ExternalSort::io_failed(const std::string& doing, int error) const {
    throw std::runtime_error(
        "sorting " + m_options.what + ": " + doing + " failed" +
        (error != 0 ? std::string(": ") + std::strerror(error) : std::string()) +
        "; the sort writes what does not fit its memory to $TMPDIR (else /tmp): point TMPDIR "
        "at a writable file system with free space");
}

void ExternalSort::finish() {
    if (m_finished) {
        return;
    }
    m_finished = true;
    m_all_in_order = m_all_in_order && m_in_order;
    sort_buffer();
    const std::size_t sources =
        std::max<std::size_t>(1, m_runs.size() + (m_entries.empty() ? 0 : 1));
    const std::size_t read_buffer =
        std::clamp(m_options.memory_bytes / 4 / sources, k_min_read_buffer, k_max_read_buffer);
    for (const Run& run : m_runs) {
        m_readers.push_back(std::make_unique<RunReader>(*this, run, read_buffer));
    }
    m_out = std::vector<char>(); // written: its memory goes back
    // The buffer is the last source: it holds the last records added, so on equal keys it comes
    // last.
    const std::size_t count = m_readers.size() + (m_entries.empty() ? 0 : 1);
    m_prefix.resize(count);
    for (std::size_t s = 0; s < count; ++s) {
        if (s == m_readers.size() || m_readers[s]->advance()) {
            m_heap.push_back(s);
            m_prefix[s] = prefix_of(s);
        }
    }
    if (m_all_in_order) {
        // Each source follows the one before: read them one after the other, first source last
        // in m_heap (a stack, then).
        std::reverse(m_heap.begin(), m_heap.end());
    } else {
        std::make_heap(m_heap.begin(), m_heap.end(),
                       [this](std::size_t a, std::size_t b) { return heap_after(a, b); });
    }
}

ExternalSort::Prefix ExternalSort::prefix_of(std::size_t s) const {
    if (s == m_readers.size()) {
        // Without reading the record from the buffer.
        const Entry& e = m_entries[m_memory_pos];
        return Prefix{e.prefix0, e.prefix1, e.key_size};
    }
    const std::string_view key = source_key(s);
    return Prefix{big_endian(key.data(), key.size()),
                  big_endian(key.data() + std::min<std::size_t>(8, key.size()),
                             key.size() > 8 ? key.size() - 8 : 0),
                  static_cast<std::uint32_t>(key.size())};
}

std::string_view ExternalSort::source_key(std::size_t s) const {
    if (s < m_readers.size()) {
        return m_readers[s]->key;
    }
    const Entry& e = m_entries[m_memory_pos];
    return std::string_view(m_buffer.get() + e.offset + k_header, e.key_size);
}

std::string_view ExternalSort::source_payload(std::size_t s) const {
    if (s < m_readers.size()) {
        return m_readers[s]->payload;
    }
    const Entry& e = m_entries[m_memory_pos];
    const char* p = m_buffer.get() + e.offset;
    return std::string_view(p + k_header + e.key_size, get32(p + 4));
}

bool ExternalSort::advance_source(std::size_t s) {
    if (s < m_readers.size()) {
        return m_readers[s]->advance();
    }
    prefetch_record(m_memory_pos + 1 + k_prefetch_ahead);
    return ++m_memory_pos < m_entries.size();
}

void ExternalSort::prefetch_record(std::size_t entry) const {
    // In key order the buffer's records are read at random: each a cache miss unless asked for
    // ahead.
    if (entry < m_entries.size()) {
        __builtin_prefetch(m_buffer.get() + m_entries[entry].offset);
    }
}

bool ExternalSort::heap_after(std::size_t a, std::size_t b) const {
    // The sources' current keys are neighbours in key order: they often share their first 8 bytes
    // ("pr_" and 5 hex digits), seldom their first 16.
    const Prefix& pa = m_prefix[a];
    const Prefix& pb = m_prefix[b];
    if (pa.p0 != pb.p0) {
        return pa.p0 > pb.p0;
    }
    if (pa.p1 != pb.p1) {
        return pa.p1 > pb.p1;
    }
    if (pa.key_size > 16 || pb.key_size > 16 || pa.key_size != pb.key_size) {
        const int c = compare_keys(source_key(a), source_key(b));
        if (c != 0) {
            return c > 0;
        }
    }
    return a > b; // equal keys: the earlier source first (stable)
}

bool ExternalSort::next() {
    if (!m_finished) {
        throw std::logic_error("ExternalSort::next before finish");
    }
    const auto after = [this](std::size_t a, std::size_t b) { return heap_after(a, b); };
    if (m_current != SIZE_MAX) {
        if (m_all_in_order) {
            if (!advance_source(m_current)) {
                m_heap.pop_back(); // this source is done: the next one
            }
        } else if (advance_source(m_current)) {
            m_prefix[m_current] = prefix_of(m_current);
            m_heap.push_back(m_current);
            std::push_heap(m_heap.begin(), m_heap.end(), after);
        }
        m_current = SIZE_MAX;
    }
    if (m_heap.empty()) {
        m_key = {};
        m_payload = {};
        return false;
    }
    if (m_all_in_order) {
        m_current = m_heap.back(); // stays there until its source is done
    } else {
        std::pop_heap(m_heap.begin(), m_heap.end(), after);
        m_current = m_heap.back();
        m_heap.pop_back();
    }
    m_key = source_key(m_current);
    m_payload = source_payload(m_current);
    return true;
}

} // namespace payrecon
