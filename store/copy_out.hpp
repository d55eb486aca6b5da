#pragma once
// Store-internal: bulk reads for the statement diff. A query streamed with COPY ... TO STDOUT
// (FORMAT binary) on a connection of its own, inside a REPEATABLE READ READ ONLY transaction that
// imports a snapshot exported by the caller's transaction (pg_export_snapshot), so several such
// streams read one consistent state of the database side by side. Rows are parsed where libpq
// received them, without a copy. Included only by store/*.cpp.

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct pg_conn;
struct pg_cancel;

namespace payrecon::store {

// One row's fields as binary COPY sends them (network byte order), with readers for the column
// types the statement diff reads. A row can be written down as bytes (all but its first field:
// the first is the key a row is sorted by) and read back from them, so that rows wait in an
// ExternalSort as they came.
class CopyRow {
public:
    explicit CopyRow(const std::string* what) : m_what(what) {}

    std::size_t fields() const { return m_fields.size(); }
    bool is_null(std::size_t i) const { return !m_fields.at(i).has_value(); }
    // A text (or varchar) column's bytes; empty for NULL.
    std::string_view text(std::size_t i) const {
        return m_fields.at(i).value_or(std::string_view{});
    }
    // A bigint column; throws std::runtime_error for NULL or another width.
    long long int8(std::size_t i) const;
    // A timestamptz column as unix seconds (rounded down); -infinity and infinity are the smallest
    // and largest long long. Throws for NULL.
    long long unix_seconds(std::size_t i) const;

    // Fields 1.. as COPY sent them (each a 4-byte length, -1 for NULL, then its bytes).
    std::string_view tail() const { return m_tail; }
    // This row becomes `first` followed by the fields `tail` holds (as tail() gave them). The row
    // views both: they must outlive its use.
    void assign(std::string_view first, std::string_view tail);

private:
    friend class CopyOutStream;
    const std::string* m_what; // what is read, for messages
    std::vector<std::optional<std::string_view>> m_fields;
    std::string_view m_tail;
};

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
    // The current row; its views are valid until the next call to next().
    const CopyRow& row() const { return m_row; }
    std::size_t fields() const { return m_row.fields(); }
    bool is_null(std::size_t i) const { return m_row.is_null(i); }
    std::string_view text(std::size_t i) const { return m_row.text(i); }
    long long int8(std::size_t i) const { return m_row.int8(i); }
    long long unix_seconds(std::size_t i) const { return m_row.unix_seconds(i); }
    // Asks the server to stop (from any thread, also before start()): the next read fails.
    void cancel();

private:
    void need(std::size_t n); // at least n unread bytes buffered, or throws
    void release_message();
    std::uint16_t take16();
    std::uint32_t take32();
    void finish(); // after the end of the COPY data: the COPY's own result
    [[noreturn]] void fail(const std::string& what) const;
    // A statement PostgreSQL refused: TransientStoreError if trying again may help, else
    // std::runtime_error.
    [[noreturn]] void refused(const std::string& sqlstate, const std::string& message) const;

    std::string m_url;
    std::string m_snapshot;
    std::string m_query;
    std::string m_what; // what is read, for messages
    pg_conn* m_conn = nullptr;
    // The bytes being parsed: libpq's last message (m_message), or, for a row that went on in the
    // next message, its bytes joined (m_joined).
    const char* m_data = nullptr;
    std::size_t m_size = 0;
    std::size_t m_pos = 0;
    std::size_t m_row_start = 0; // where the row being parsed starts in m_data
    char* m_message = nullptr;
    std::string m_joined;
    bool m_header_read = false;
    bool m_done = false;
    std::vector<std::pair<std::size_t, long>> m_spans; // offset and length (-1: NULL) of each field
    CopyRow m_row{&m_what};
    std::mutex m_cancel_mutex;
    pg_cancel* m_cancel = nullptr;
    bool m_cancelled = false; // under m_cancel_mutex
};

} // namespace payrecon::store
