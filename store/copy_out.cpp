#include "store/copy_out.hpp"

#include "store/pq.hpp"

#include <cctype>
#include <cstring>
#include <endian.h>
#include <libpq-fe.h>
#include <limits>
#include <stdexcept>

namespace payrecon::store {
namespace {

constexpr char k_signature[] = "PGCOPY\n\377\r\n"; // and a NUL: 11 bytes
constexpr std::size_t k_signature_size = 11;

bool transient(const char* sqlstate) {
    const std::string s = sqlstate ? sqlstate : "";
    return s.rfind("08", 0) == 0 || s.rfind("40", 0) == 0 || s.rfind("53", 0) == 0 ||
           s.rfind("57P", 0) == 0 || s == "57014";
}

std::string trimmed(const char* message) {
    std::string s = message ? message : "";
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) {
        s.pop_back();
    }
    return s;
}

} // namespace

CopyOutStream::CopyOutStream(std::string url, std::string snapshot, std::string query,
                             std::string what)
    : m_url(std::move(url)), m_snapshot(std::move(snapshot)), m_query(std::move(query)),
      m_what(std::move(what)) {
    for (const char c : m_snapshot) {
        if (!std::isxdigit(static_cast<unsigned char>(c)) && c != '-') {
            throw std::invalid_argument("not a snapshot identifier: " + m_snapshot);
        }
    }
}

void CopyOutStream::start() {
    PGconn* conn = PQconnectdb(m_url.c_str());
    if (PQstatus(conn) != CONNECTION_OK) {
        const std::string message = trimmed(PQerrorMessage(conn));
        PQfinish(conn);
        throw TransientStoreError("cannot open a connection to read " + m_what + " at " +
                                      redact_url(m_url) + ": " + message,
                                  false);
    }
    {
        std::lock_guard lock(m_cancel_mutex);
        m_conn = conn;
        m_cancel = PQgetCancel(m_conn);
        if (m_cancelled) {
            fail("cancelled");
        }
    }
    const auto run = [&](const std::string& sql, ExecStatusType expected) {
        PGresult* res = PQexec(m_conn, sql.c_str());
        const bool ok = PQresultStatus(res) == expected;
        const std::string message = ok ? "" : trimmed(PQresultErrorMessage(res));
        const char* state = ok ? nullptr : PQresultErrorField(res, PG_DIAG_SQLSTATE);
        const std::string sqlstate = state ? state : "";
        PQclear(res);
        if (!ok) {
            refused(sqlstate, message);
        }
    };
    run("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", PGRES_COMMAND_OK);
    run("SET TRANSACTION SNAPSHOT '" + m_snapshot + "'", PGRES_COMMAND_OK);
    // A stream of a million rows: compiling its plan (JIT) costs more than it saves.
    run("SET LOCAL jit = off", PGRES_COMMAND_OK);
    run("COPY (" + m_query + ") TO STDOUT (FORMAT binary)", PGRES_COPY_OUT);
}

CopyOutStream::~CopyOutStream() {
    release_message();
    if (m_cancel != nullptr) {
        PQfreeCancel(m_cancel);
    }
    if (m_conn != nullptr) {
        PQfinish(m_conn); // mid-COPY too: the server ends the read-only transaction
    }
}

void CopyOutStream::cancel() {
    std::lock_guard lock(m_cancel_mutex);
    m_cancelled = true;
    if (m_cancel) {
        char error[256];
        PQcancel(m_cancel, error, sizeof error); // best effort: closing the connection ends it too
    }
}

void CopyOutStream::fail(const std::string& what) const {
    throw TransientStoreError("reading " + m_what + " failed: " + what, false);
}

void CopyOutStream::refused(const std::string& sqlstate, const std::string& message) const {
    if (sqlstate.empty() || transient(sqlstate.c_str())) {
        fail((sqlstate.empty() ? "" : "(SQLSTATE " + sqlstate + ") ") +
             (message.empty() ? trimmed(PQerrorMessage(m_conn)) : message));
    }
    throw std::runtime_error("reading " + m_what + " failed (SQLSTATE " + sqlstate +
                             "): " + message);
}

void CopyOutStream::release_message() {
    if (m_message != nullptr) {
        PQfreemem(m_message);
        m_message = nullptr;
    }
}

void CopyOutStream::need(std::size_t n) {
    while (m_size - m_pos < n) {
        char* data = nullptr;
        const int len = PQgetCopyData(m_conn, &data, 0);
        if (len > 0) {
            if (m_row_start == m_size) {
                // Nothing of the current row is left over: parse the message where libpq put it
                // (PostgreSQL sends one message per row, so this is the common case).
                release_message();
                m_message = data;
                m_data = data;
                m_size = static_cast<std::size_t>(len);
                m_pos = 0;
                m_row_start = 0;
            } else {
                // The row goes on in this message: its start and the message, joined.
                std::string joined(m_data + m_row_start, m_size - m_row_start);
                joined.append(data, static_cast<std::size_t>(len));
                PQfreemem(data);
                release_message();
                m_joined = std::move(joined);
                m_data = m_joined.data();
                m_size = m_joined.size();
                m_pos -= m_row_start;
                m_row_start = 0;
            }
        } else if (len == -1) {
            // The server ended the COPY before its trailer: its result says why.
            finish();
            throw std::runtime_error("reading " + m_what +
                                     ": the COPY data ended in the middle of a row");
        } else {
            fail(trimmed(PQerrorMessage(m_conn)));
        }
    }
}

std::uint16_t CopyOutStream::take16() {
    need(2);
    const auto* p = reinterpret_cast<const unsigned char*>(m_data + m_pos);
    m_pos += 2;
    return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}

std::uint32_t CopyOutStream::take32() {
    need(4);
    const auto* p = reinterpret_cast<const unsigned char*>(m_data + m_pos);
    m_pos += 4;
    return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
           p[3];
}

void CopyOutStream::finish() {
    m_done = true;
    PGresult* res = PQgetResult(m_conn);
    const bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    const std::string message = ok ? "" : trimmed(PQresultErrorMessage(res));
    const char* state = ok ? nullptr : PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const std::string sqlstate = state ? state : "";
    PQclear(res);
    while (PGresult* more = PQgetResult(m_conn)) {
        PQclear(more);
    }
    if (!ok) {
        refused(sqlstate, message);
    }
}

bool CopyOutStream::next() {
    if (m_done) {
        return false;
    }
    m_row_start = m_pos; // the bytes from here on are kept if the row goes on in the next message
    if (!m_header_read) {
        need(k_signature_size + 8);
        if (std::memcmp(m_data + m_pos, k_signature, k_signature_size) != 0) {
            throw std::runtime_error("reading " + m_what + ": not a binary COPY stream");
        }
        m_pos += k_signature_size;
        take32(); // flags: no OIDs, nothing critical defined
        const std::uint32_t extension = take32();
        need(extension);
        m_pos += extension;
        m_header_read = true;
        m_row_start = m_pos;
    }
    const auto count = static_cast<std::int16_t>(take16());
    if (count == -1) {
        // The trailer: then the end of the COPY data, and the COPY's own result.
        char* data = nullptr;
        int len = 0;
        while ((len = PQgetCopyData(m_conn, &data, 0)) > 0) {
            PQfreemem(data); // nothing follows the trailer, normally
        }
        if (len == -2) {
            fail(trimmed(PQerrorMessage(m_conn)));
        }
        finish();
        return false;
    }
    if (count < 0) {
        throw std::runtime_error("reading " + m_what + ": a row of " + std::to_string(count) +
                                 " fields");
    }
    // Offsets from the row's start: reading a field may join the row's bytes somewhere else.
    m_spans.clear();
    std::size_t tail = 0;
    for (int i = 0; i < count; ++i) {
        const auto len = static_cast<std::int32_t>(take32());
        if (len >= 0) {
            need(static_cast<std::size_t>(len));
            m_spans.emplace_back(m_pos - m_row_start, len);
            m_pos += static_cast<std::size_t>(len);
        } else {
            m_spans.emplace_back(0, -1);
        }
        if (i == 0) {
            tail = m_pos - m_row_start;
        }
    }
    const char* row = m_data + m_row_start;
    m_row.m_fields.clear();
    for (const auto& [offset, len] : m_spans) {
        if (len < 0) {
            m_row.m_fields.emplace_back(std::nullopt);
        } else {
            m_row.m_fields.emplace_back(
                std::string_view(row + offset, static_cast<std::size_t>(len)));
        }
    }
    m_row.m_tail =
        count > 0 ? std::string_view(row + tail, m_pos - m_row_start - tail) : std::string_view();
    return true;
}

void CopyRow::assign(std::string_view first, std::string_view tail) {
    m_tail = tail;
    m_fields.clear();
    m_fields.emplace_back(first);
    std::size_t pos = 0;
    while (pos < tail.size()) {
        if (tail.size() - pos < 4) {
            throw std::logic_error("CopyRow::assign: a field header cut short");
        }
        const auto* p = reinterpret_cast<const unsigned char*>(tail.data() + pos);
        const std::uint32_t len = (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) |
                                  (std::uint32_t{p[2]} << 8) | p[3];
        pos += 4;
        if (len == 0xffffffffu) {
            m_fields.emplace_back(std::nullopt);
            continue;
        }
        if (tail.size() - pos < len) {
            throw std::logic_error("CopyRow::assign: a field cut short");
        }
        m_fields.emplace_back(tail.substr(pos, len));
        pos += len;
    }
}

long long CopyRow::int8(std::size_t i) const {
    const auto& f = m_fields.at(i);
    if (!f || f->size() != 8) {
        throw std::runtime_error("reading " + *m_what + ": field " + std::to_string(i + 1) +
                                 " is not a bigint");
    }
    std::uint64_t v = 0;
    std::memcpy(&v, f->data(), 8);
    return static_cast<long long>(be64toh(v)); // network byte order
}

long long CopyRow::unix_seconds(std::size_t i) const {
    // Binary timestamptz: microseconds since 2000-01-01T00:00:00Z (946684800 in unix seconds).
    const long long us = int8(i);
    if (us == std::numeric_limits<long long>::max() ||
        us == std::numeric_limits<long long>::min()) {
        return us;
    }
    const long long s = us / 1000000 - (us % 1000000 < 0 ? 1 : 0);
    return s + 946684800;
}

} // namespace payrecon::store
