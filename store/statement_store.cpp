#include "store/statement_store.hpp"

#include "core/encoding.hpp"
#include "core/external_sort.hpp"
#include "core/uuid.hpp"
#include "store/copy_out.hpp"
#include "store/intake_store.hpp"
#include "store/pq.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>
#include <unistd.h>

namespace payrecon::store {
namespace {

constexpr std::size_t k_details_batch = 1000; // keys that did not match, read again together

constexpr const char* k_find_run = "statement_find_run";
constexpr const char* k_find_run_sql = R"sql(
SELECT run_id::text, status, margin_s, list_cursor, pages, remote_records, runs
  FROM recon_runs
 WHERE provider = $1 AND window_from = to_timestamp($2) AND window_to = to_timestamp($3)
 ORDER BY status = 'done'
   FOR UPDATE)sql";

constexpr const char* k_new_run = "statement_new_run";
constexpr const char* k_new_run_sql = R"sql(
INSERT INTO recon_runs (provider, window_from, window_to, margin_s, status, runs)
VALUES ($1, to_timestamp($2), to_timestamp($3), $4, 'listing', $5)
ON CONFLICT (provider, window_from, window_to) WHERE status <> 'done' DO NOTHING
RETURNING run_id::text)sql";

constexpr const char* k_reset_run = "statement_reset_run";
constexpr const char* k_reset_run_sql = R"sql(
UPDATE recon_runs
   SET status = 'listing', list_cursor = NULL, pages = 0, remote_records = 0, local_records = 0,
       counts = '{}'::jsonb, runs = runs + 1, started_at = now(), finished_at = NULL, error = NULL,
       margin_s = $2
 WHERE run_id = $1::uuid
RETURNING runs)sql";

constexpr const char* k_insert_record = "statement_insert_record";
constexpr const char* k_insert_record_sql = R"sql(
INSERT INTO statement_records (run_id, provider_reference, match_key, operation_id, amount_minor,
                               amount_refunded, currency, status, raw_status, created_at, raw, kind,
                               amount_captured)
VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9, to_timestamp($10), $11::jsonb, $12,
        $13::bigint)
ON CONFLICT (run_id, provider_reference) DO NOTHING)sql";

constexpr const char* k_page_done = "statement_page_done";
constexpr const char* k_page_done_sql = R"sql(
UPDATE recon_runs
   SET list_cursor = $2, pages = pages + 1,
       remote_records = (SELECT count(*) FROM statement_records WHERE run_id = $1::uuid),
       status = CASE WHEN $2::text IS NULL THEN 'listed' ELSE 'listing' END
 WHERE run_id = $1::uuid
RETURNING remote_records)sql";

constexpr const char* k_count_records = "statement_count_records";
constexpr const char* k_count_records_sql = R"sql(
UPDATE recon_runs
   SET remote_records = (SELECT count(*) FROM statement_records WHERE run_id = $1::uuid)
 WHERE run_id = $1::uuid
RETURNING remote_records)sql";

constexpr const char* k_payments_by_operation = "statement_payments_by_operation";
const std::string k_payments_by_operation_sql = std::string("SELECT ") + k_charge_claim_columns +
                                                R"sql(
  FROM payments p
 WHERE p.provider = $1 AND p.operation_id = ANY($2::text[])
UNION ALL
SELECT )sql" + k_operation_claim_columns + R"sql(
  FROM operations o
  JOIN payments p ON p.tenant_id = o.tenant_id AND p.payment_id = o.payment_id
 WHERE o.provider = $1 AND o.kind = 'refund' AND o.operation_id = ANY($2::text[]))sql";

constexpr const char* k_fail = "statement_fail";
constexpr const char* k_fail_sql = R"sql(
UPDATE recon_runs
   SET status = CASE WHEN status = 'listing' THEN 'listing' ELSE 'failed' END,
       error = left($2, 2000), finished_at = now()
 WHERE run_id = $1::uuid)sql";

// A charge's record with our payment, a refund's with our refund.
constexpr const char* k_pair_by_reference = "statement_pair_by_reference";
constexpr const char* k_pair_by_reference_sql = R"sql(
UPDATE statement_records s
   SET match_key = p.operation_id
  FROM payments p
 WHERE s.run_id = $1::uuid AND s.operation_id IS NULL AND s.kind = 'charge' AND p.provider = $2
   AND p.provider_reference = s.provider_reference)sql";
constexpr const char* k_pair_refunds_by_reference = "statement_pair_refunds_by_reference";
constexpr const char* k_pair_refunds_by_reference_sql = R"sql(
UPDATE statement_records s
   SET match_key = o.operation_id
  FROM operations o
 WHERE s.run_id = $1::uuid AND s.operation_id IS NULL AND s.kind = 'refund' AND o.provider = $2
   AND o.kind = 'refund' AND o.provider_reference = s.provider_reference)sql";

constexpr const char* k_run_done = "statement_run_done";
constexpr const char* k_run_done_sql = R"sql(
UPDATE recon_runs
   SET status = 'done', local_records = $2, remote_records = $3, counts = $4::jsonb,
       finished_at = now(), error = NULL, refunds_listed = $5
 WHERE run_id = $1::uuid)sql";

// The window's previous complete run, replaced by the one now done (its records and findings go
// with it, ON DELETE CASCADE), in the transaction that marks the new one done.
constexpr const char* k_replace_done = "statement_replace_done";
constexpr const char* k_replace_done_sql = R"sql(
DELETE FROM recon_runs o
 USING recon_runs n
 WHERE n.run_id = $1::uuid AND o.provider = n.provider AND o.window_from = n.window_from
   AND o.window_to = n.window_to AND o.status = 'done' AND o.run_id <> n.run_id)sql";

// Our sent payments of a provider inside [from, to) by first attempt, after a (first attempt,
// payment ID) position, in that order: the payments_statement index's range read in its order, an
// incremental sort breaking ties by payment ID (a page of 100 reads about 101 rows). The position
// is exact: integer microseconds both ways (bigint times an interval goes through a double, exact
// below 2^53 microseconds, the year 2255).
constexpr const char* k_lookup_page = "statement_lookup_page";
const std::string k_lookup_page_sql = std::string("SELECT ") + k_payment_columns + R"sql(,
       (extract(epoch FROM coalesce(p.first_attempt_at, p.created_at)) * 1000000)::bigint
  FROM payments p
 WHERE p.provider = $1 AND p.first_attempt_at IS NOT NULL
   AND coalesce(p.first_attempt_at, p.created_at) >=
       greatest(to_timestamp($2), 'epoch'::timestamptz + $4::bigint * interval '1 microsecond')
   AND coalesce(p.first_attempt_at, p.created_at) < to_timestamp($3)
   AND (coalesce(p.first_attempt_at, p.created_at), p.payment_id) >
       ('epoch'::timestamptz + $4::bigint * interval '1 microsecond', $5::uuid)
 ORDER BY coalesce(p.first_attempt_at, p.created_at), p.payment_id
 LIMIT $6)sql";

constexpr std::string_view k_lookup_cursor_prefix = "lookup:";

// recon_runs.status holds to_string() names only (its CHECK constraint).
StatementRunStatus stored_run_status(const std::string& name) {
    if (const auto status = parse_statement_run_status(name)) {
        return *status;
    }
    throw std::logic_error("recon_runs.status holds an unknown status: " + name);
}

RemoteStatus parse_remote_status(std::string_view s) {
    for (const RemoteStatus r :
         {RemoteStatus::succeeded, RemoteStatus::refunded, RemoteStatus::declined,
          RemoteStatus::pending, RemoteStatus::authorized}) {
        if (to_string(r) == s) {
            return r;
        }
    }
    return RemoteStatus::other;
}

// The diff reads both sides twice over. First whole and narrow -- only what a key's category
// depends on, in match-key order -- on two connections at once; then, for the few keys that are
// not matched, every column (the detail a finding shows), by key. Both reads see one snapshot, so
// a key classifies the same way both times.

// A payment's authorisation as the diff judges it (LocalRecord): its state in one word -- "auto"
// (captured by its charge), "held", "voided" (a void succeeded), "expired" (marked so by the
// nightly's authorisation watch, which runs before its statements; not by now(), which two reads
// of one snapshot would see apart) -- then what its captures took and hold.
void authorization_of(std::string_view state, long long captured, long long held, LocalRecord& l) {
    l.manual = state != "auto";
    l.voided = state == "voided";
    l.expired = state == "expired";
    l.captured_minor = captured;
    l.capture_held_minor = held;
}

// Our payments of the provider whose anchor (first attempt, else acceptance) lies in [from, to), in
// the order of payments_statement or of the table (sorted by the client: PostgreSQL sorting a
// million rows takes twice as long as reading them), and with `refunds` our refunds of it alike
// (operations_statement); columns as local_key_record reads them. What most payments do not have
// -- a refund's kind, refunds held, an authorisation (capture "manual": its state and captures) --
// is NULL where they have none: a NULL costs PostgreSQL no output function, and binary COPY's
// output functions are most of its time here (of 690 ms of CPU for a million payments, 140 ms
// were those columns).
std::string local_keys_query(const std::string& provider_literal, long long from, long long to,
                             bool refunds) {
    const std::string anchored = " AND coalesce(first_attempt_at, created_at) >= to_timestamp(" +
                                 std::to_string(from) + ")" +
                                 " AND coalesce(first_attempt_at, created_at) < to_timestamp(" +
                                 std::to_string(to) + ")";
    std::string query =
        "SELECT operation_id::text, coalesce(charged_amount_minor, amount_minor)::bigint, "
        "currency::text, state::text, coalesce(first_attempt_at, created_at)::timestamptz, "
        "NULL::text, nullif(refund_held_minor, 0)::bigint, CASE WHEN capture_method = 'automatic' "
        "THEN NULL WHEN voided_at IS NOT NULL THEN 'voided' WHEN authorization_expired_at IS NOT "
        "NULL THEN 'expired' ELSE 'held' END::text, nullif(captured_minor, 0)::bigint, "
        "nullif(capture_held_minor, 0)::bigint FROM payments WHERE provider = " +
        provider_literal + anchored;
    if (refunds) {
        query += " UNION ALL SELECT operation_id::text, amount_minor::bigint, currency::text, "
                 "state::text, coalesce(first_attempt_at, created_at)::timestamptz, "
                 "'refund'::text, NULL::bigint, NULL::text, NULL::bigint, NULL::bigint"
                 " FROM operations WHERE kind = 'refund' AND provider = " +
                 provider_literal + anchored;
    }
    return query;
}

OperationKind kind_of(std::string_view name) {
    return name == "refund"    ? OperationKind::refund
           : name == "capture" ? OperationKind::capture
                               : OperationKind::charge;
}

// A payment's state as the database holds it; a name this build does not know is a schema it
// does not expect.
PaymentState known_state(std::string_view name) {
    if (const auto state = parse_payment_state(name)) {
        return *state;
    }
    throw std::logic_error("statement diff: a payment in state '" + std::string(name) +
                           "', which this build does not know");
}

// A bigint column that local_keys_query and remote_keys_query leave NULL for 0.
long long int8_or_zero(const CopyRow& row, std::size_t i) {
    return row.is_null(i) ? 0 : row.int8(i);
}

void local_key_record(const CopyRow& row, LocalRecord& l) {
    l.match_key.assign(row.text(0));
    l.amount_minor = row.int8(1);
    l.currency.assign(row.text(2));
    l.state = known_state(row.text(3));
    l.at = row.unix_seconds(4);
    l.kind = row.is_null(5) ? OperationKind::charge : kind_of(row.text(5));
    l.refund_held_minor = int8_or_zero(row, 6);
    authorization_of(row.is_null(7) ? "auto" : row.text(7), int8_or_zero(row, 8),
                     int8_or_zero(row, 9), l);
}

// The run's provider records in (match key, provider reference) order -- statement_records_diff --
// so that a key's records come in a stable order; columns as remote_key_record reads them (a
// charge's kind and nothing refunded NULL, as in local_keys_query).
std::string remote_keys_query(const std::string& run_literal) {
    return "SELECT match_key::text, amount_minor::bigint, currency::text, status::text, "
           "created_at::timestamptz, nullif(kind, 'charge')::text, "
           "nullif(amount_refunded, 0)::bigint, amount_captured::bigint "
           "FROM statement_records WHERE run_id = " +
           run_literal +
           "::uuid ORDER BY match_key COLLATE \"C\", provider_reference COLLATE \"C\"";
}

void remote_key_record(const CopyRow& row, RemoteRecord& r) {
    r.match_key.assign(row.text(0));
    r.amount_minor = row.int8(1);
    r.currency.assign(row.text(2));
    r.status = parse_remote_status(row.text(3));
    r.at = row.unix_seconds(4);
    r.kind = row.is_null(5) ? OperationKind::charge : kind_of(row.text(5));
    r.amount_refunded = int8_or_zero(row, 6);
    r.amount_captured = row.is_null(7) ? std::nullopt : std::optional<long long>(row.int8(7));
}

// Our payments and refunds with these operation IDs (a refund with its payment's merchant
// reference).
constexpr const char* k_local_details_sql = R"sql(
SELECT operation_id::text, payment_id::text, tenant_id::text, provider_reference::text,
       coalesce(charged_amount_minor, amount_minor)::bigint, currency::text, state::text,
       floor(date_part('epoch', coalesce(first_attempt_at, created_at)))::bigint,
       merchant_reference::text, 'charge', NULL::text, refund_held_minor::bigint,
       CASE WHEN capture_method = 'automatic' THEN 'auto' WHEN voided_at IS NOT NULL THEN 'voided'
            WHEN authorization_expired_at IS NOT NULL THEN 'expired' ELSE 'held' END,
       captured_minor::bigint, capture_held_minor::bigint
  FROM payments
 WHERE provider = $1 AND operation_id = ANY($2::text[])
UNION ALL
SELECT o.operation_id::text, o.payment_id::text, o.tenant_id::text, o.provider_reference::text,
       o.amount_minor::bigint, o.currency::text, o.state::text,
       floor(date_part('epoch', coalesce(o.first_attempt_at, o.created_at)))::bigint,
       p.merchant_reference::text, 'refund', o.id::text, 0::bigint, 'auto', 0::bigint,
       0::bigint
  FROM operations o
  JOIN payments p ON p.tenant_id = o.tenant_id AND p.payment_id = o.payment_id
 WHERE o.provider = $1 AND o.kind = 'refund' AND o.operation_id = ANY($2::text[]))sql";

constexpr const char* k_remote_details_sql = R"sql(
SELECT match_key, provider_reference, operation_id, amount_minor, currency, status, raw_status,
       floor(date_part('epoch', created_at))::bigint, kind, amount_refunded, amount_captured
  FROM statement_records
 WHERE run_id = $1::uuid AND match_key = ANY($2::text[])
 ORDER BY match_key COLLATE "C", provider_reference COLLATE "C")sql";

// Counterparts of our payments that this run's records lack (DESIGN section 9, across windows):
// the provider's records of the same operation IDs stored by the provider's other runs (an earlier
// or later window listed them), one per provider reference, the newest run's. Through
// statement_records_diff, run by run.
constexpr const char* k_counterpart_details_sql = R"sql(
SELECT DISTINCT ON (s.match_key, s.provider_reference)
       s.match_key, s.provider_reference, s.operation_id, s.amount_minor, s.currency, s.status,
       s.raw_status, floor(date_part('epoch', s.created_at))::bigint, s.kind, s.amount_refunded,
       s.amount_captured
  FROM statement_records s
  JOIN recon_runs r ON r.run_id = s.run_id
 WHERE s.run_id = ANY(ARRAY(SELECT run_id FROM recon_runs
                             WHERE provider = $1 AND run_id <> $2::uuid))
   AND s.match_key = ANY($3::text[])
 ORDER BY s.match_key, s.provider_reference, r.window_to DESC)sql";

// Our record of the first read as it waits in the sort, after its match key (the sort's key):
// state, kind and flags (a byte each), amount and anchor (8 bytes each), the currency (its length,
// then its bytes), then each of refunds held, captured and capture held that is not 0 (8 bytes,
// flagged). About 25 bytes where the row as COPY sent it takes 64: fewer bytes sorted, written and
// read back, and the row parsed once, by the thread that reads it.
constexpr unsigned k_manual = 1;
constexpr unsigned k_voided = 2;
constexpr unsigned k_expired = 4;
constexpr unsigned k_refund_held = 8;
constexpr unsigned k_captured = 16;
constexpr unsigned k_capture_held = 32;

void put_int8(std::string& out, long long v) {
    char b[8];
    std::memcpy(b, &v, 8);
    out.append(b, 8);
}

void encode_local(const LocalRecord& l, std::string& out) {
    out.clear();
    const unsigned flags = (l.manual ? k_manual : 0u) | (l.voided ? k_voided : 0u) |
                           (l.expired ? k_expired : 0u) |
                           (l.refund_held_minor != 0 ? k_refund_held : 0u) |
                           (l.captured_minor != 0 ? k_captured : 0u) |
                           (l.capture_held_minor != 0 ? k_capture_held : 0u);
    out.push_back(static_cast<char>(l.state));
    out.push_back(static_cast<char>(l.kind));
    out.push_back(static_cast<char>(flags));
    put_int8(out, l.amount_minor);
    put_int8(out, l.at);
    if (l.currency.size() > 255) {
        throw std::runtime_error("statement diff: a currency of " +
                                 std::to_string(l.currency.size()) + " bytes");
    }
    out.push_back(static_cast<char>(l.currency.size()));
    out += l.currency;
    for (const auto& [flag, value] :
         {std::pair{k_refund_held, l.refund_held_minor}, std::pair{k_captured, l.captured_minor},
          std::pair{k_capture_held, l.capture_held_minor}}) {
        if ((flags & flag) != 0) {
            put_int8(out, value);
        }
    }
}

// The inverse of encode_local, overwriting every field the first read carries.
void decode_local(std::string_view key, std::string_view in, LocalRecord& l) {
    const char* p = in.data();
    const auto int8 = [&p] {
        long long v = 0;
        std::memcpy(&v, p, 8);
        p += 8;
        return v;
    };
    l.match_key.assign(key);
    l.state = static_cast<PaymentState>(static_cast<unsigned char>(p[0]));
    l.kind = static_cast<OperationKind>(static_cast<unsigned char>(p[1]));
    const unsigned flags = static_cast<unsigned char>(p[2]);
    p += 3;
    l.amount_minor = int8();
    l.at = int8();
    const auto currency = static_cast<unsigned char>(*p++);
    l.currency.assign(p, currency);
    p += currency;
    l.manual = (flags & k_manual) != 0;
    l.voided = (flags & k_voided) != 0;
    l.expired = (flags & k_expired) != 0;
    l.refund_held_minor = (flags & k_refund_held) != 0 ? int8() : 0;
    l.captured_minor = (flags & k_captured) != 0 ? int8() : 0;
    l.capture_held_minor = (flags & k_capture_held) != 0 ? int8() : 0;
}

// Streams our side's query (in `snapshot`) on a connection and a thread of its own into an
// ExternalSort by match key -- in memory up to `sorting.memory_bytes`, in sorted runs in a
// temporary file beyond -- while the provider's side waits in its index for the merge. next() then
// hands the records over in match-key order, on the caller's thread.
class SortedSide {
public:
    SortedSide(const std::string& url, const std::string& snapshot, const std::string& query,
               std::string what, const DiffSorting& sorting)
        : m_what(std::move(what)), m_stream(url, snapshot, query, m_what),
          m_sorted({sorting.memory_bytes, sorting.temp_dir, m_what}) {
        m_reader = std::thread([this] {
            try {
                read();
            } catch (...) {
                m_error = std::current_exception();
            }
        });
    }

    ~SortedSide() {
        if (m_reader.joinable()) {
            m_stream.cancel(); // a reader still waiting for rows returns at once
            m_reader.join();
        }
    }
    SortedSide(const SortedSide&) = delete;
    SortedSide& operator=(const SortedSide&) = delete;

    // The next record in key order into `into`; false after the last. The first call waits until
    // the side is read and sorted, and throws what reading it threw.
    bool next(LocalRecord& into) {
        if (m_reader.joinable()) {
            m_reader.join();
        }
        if (m_error) {
            std::rethrow_exception(m_error);
        }
        if (!m_sorted.next()) {
            return false;
        }
        decode_local(m_sorted.key(), m_sorted.payload(), into);
        return true;
    }

private:
    void read() {
        m_stream.start();
        LocalRecord record;
        std::string encoded;
        while (m_stream.next()) {
            if (m_stream.is_null(0)) {
                throw std::runtime_error("reading " + m_what + ": a row without a match key");
            }
            local_key_record(m_stream.row(), record);
            encode_local(record, encoded);
            m_sorted.add(record.match_key, encoded);
        }
        m_sorted.finish();
    }

    const std::string m_what;
    CopyOutStream m_stream;
    ExternalSort m_sorted;
    std::exception_ptr m_error;
    std::thread m_reader; // last: started once everything above is built
};

// The provider's record of the first read as it waits for the merge: its match key (4 bytes of
// length, then its bytes), status, kind and flags (a byte each), amount and time (8 bytes each),
// the currency (its length, then its bytes), then what was refunded if not 0 and what was
// captured where the record says (8 bytes each, flagged).
constexpr unsigned k_refunded = 1;
constexpr unsigned k_captured_said = 2;

void encode_remote(const RemoteRecord& r, std::vector<char>& out) {
    if (r.currency.size() > 255) {
        throw std::runtime_error("statement diff: a currency of " +
                                 std::to_string(r.currency.size()) + " bytes");
    }
    const unsigned flags =
        (r.amount_refunded != 0 ? k_refunded : 0u) | (r.amount_captured ? k_captured_said : 0u);
    const auto key_size = static_cast<std::uint32_t>(r.match_key.size());
    const auto append = [&out](const void* p, std::size_t n) {
        const auto* c = static_cast<const char*>(p);
        out.insert(out.end(), c, c + n);
    };
    append(&key_size, 4);
    append(r.match_key.data(), r.match_key.size());
    out.push_back(static_cast<char>(r.status));
    out.push_back(static_cast<char>(r.kind));
    out.push_back(static_cast<char>(flags));
    append(&r.amount_minor, 8);
    append(&r.at, 8);
    out.push_back(static_cast<char>(r.currency.size()));
    append(r.currency.data(), r.currency.size());
    if ((flags & k_refunded) != 0) {
        append(&r.amount_refunded, 8);
    }
    if ((flags & k_captured_said) != 0) {
        append(&*r.amount_captured, 8);
    }
}

// The inverse of encode_remote from `p`, overwriting every field the first read carries; returns
// where the next record starts.
const char* decode_remote(const char* p, RemoteRecord& r) {
    const auto int8 = [&p] {
        long long v = 0;
        std::memcpy(&v, p, 8);
        p += 8;
        return v;
    };
    std::uint32_t key_size = 0;
    std::memcpy(&key_size, p, 4);
    p += 4;
    r.match_key.assign(p, key_size);
    p += key_size;
    r.status = static_cast<RemoteStatus>(static_cast<unsigned char>(p[0]));
    r.kind = static_cast<OperationKind>(static_cast<unsigned char>(p[1]));
    const unsigned flags = static_cast<unsigned char>(p[2]);
    p += 3;
    r.amount_minor = int8();
    r.at = int8();
    const auto currency = static_cast<unsigned char>(*p++);
    r.currency.assign(p, currency);
    p += currency;
    r.amount_refunded = (flags & k_refunded) != 0 ? int8() : 0;
    r.amount_captured =
        (flags & k_captured_said) != 0 ? std::optional<long long>(int8()) : std::nullopt;
    return p;
}

// Reads `query` (in `snapshot`), which PostgreSQL returns in match-key order from an index, on a
// connection and a thread of its own, as fast as its server process sends it, while our side is
// read and sorted and then while the merge runs: up to `sorting.memory_bytes` of records
// (encode_remote) ahead of the merge in memory, what is further ahead in a temporary file
// (unlinked as soon as it is created, as the sort's runs) that is read back in order. The merge
// takes the records in the order they came. Bounding it in memory alone made its backend's work
// (8 s of CPU at 10M per side) wait for the merge instead of overlapping ours.
class PrefetchedSide {
public:
    PrefetchedSide(const std::string& url, const std::string& snapshot, const std::string& query,
                   std::string what, const DiffSorting& sorting)
        : m_what(std::move(what)), m_stream(url, snapshot, query, m_what),
          m_budget(std::max(sorting.memory_bytes, 2 * k_chunk)), m_dir(sorting.temp_dir) {
        if (m_dir.empty()) {
            const char* tmpdir = std::getenv("TMPDIR");
            m_dir = tmpdir && *tmpdir ? tmpdir : "/tmp";
        }
        m_reader = std::thread([this] {
            try {
                read();
            } catch (...) {
                std::lock_guard lock(m_mutex);
                m_error = std::current_exception();
                m_done = true;
                m_changed.notify_all();
            }
        });
    }

    ~PrefetchedSide() {
        {
            std::lock_guard lock(m_mutex);
            m_stopped = true;
            m_changed.notify_all();
        }
        m_stream.cancel(); // a reader still waiting for rows returns at once
        m_reader.join();
        if (m_fd >= 0) {
            ::close(m_fd);
        }
    }
    PrefetchedSide(const PrefetchedSide&) = delete;
    PrefetchedSide& operator=(const PrefetchedSide&) = delete;

    // The next record in key order into `into`; false after the last. Waits for the reader when
    // the merge has caught up with it, and throws what reading threw.
    bool next(RemoteRecord& into) {
        if (m_pos == m_chunk.size()) {
            Piece piece;
            {
                std::unique_lock lock(m_mutex);
                m_changed.wait(lock, [this] { return !m_ready.empty() || m_done; });
                if (m_ready.empty()) {
                    if (m_error) {
                        std::rethrow_exception(m_error);
                    }
                    return false;
                }
                piece = std::move(m_ready.front());
                m_ready.pop_front();
                m_queued -= piece.data.size();
                m_changed.notify_all();
            }
            if (piece.in_file) {
                m_chunk.resize(piece.size);
                read_back(piece.offset, m_chunk);
            } else {
                m_chunk = std::move(piece.data);
            }
            m_pos = 0;
        }
        m_pos =
            static_cast<std::size_t>(decode_remote(m_chunk.data() + m_pos, into) - m_chunk.data());
        return true;
    }

private:
    static constexpr std::size_t k_chunk = std::size_t{64} << 10; // records handed over at once
    struct Piece {              // a chunk of records, in memory or in the file
        std::vector<char> data; // in memory
        bool in_file = false;
        std::uint64_t offset = 0; // in the file
        std::size_t size = 0;
    };

    void read() {
        m_stream.start();
        RemoteRecord record;
        std::vector<char> chunk;
        chunk.reserve(k_chunk + 256);
        while (m_stream.next()) {
            if (m_stream.is_null(0)) {
                throw std::runtime_error("reading " + m_what + ": a row without a match key");
            }
            remote_key_record(m_stream.row(), record);
            encode_remote(record, chunk);
            if (chunk.size() >= k_chunk && !hand_over(chunk)) {
                return;
            }
        }
        if (!chunk.empty() && !hand_over(chunk)) {
            return;
        }
        std::lock_guard lock(m_mutex);
        m_done = true;
        m_changed.notify_all();
    }

    // Queues `chunk` (and empties it): in memory while the merge is less than the budget behind,
    // else in the file. False if the merge stopped.
    bool hand_over(std::vector<char>& chunk) {
        bool in_memory = false;
        {
            std::lock_guard lock(m_mutex);
            if (m_stopped) {
                return false;
            }
            in_memory = m_queued < m_budget;
        }
        Piece piece;
        if (in_memory) {
            piece.data = std::move(chunk);
            chunk = std::vector<char>();
            chunk.reserve(k_chunk + 256);
        } else {
            piece.in_file = true;
            piece.offset = m_file_size;
            piece.size = chunk.size();
            write_ahead(chunk);
            chunk.clear();
        }
        std::lock_guard lock(m_mutex);
        m_queued += piece.data.size();
        m_ready.push_back(std::move(piece));
        m_changed.notify_all();
        return true;
    }

    void write_ahead(const std::vector<char>& bytes) {
        if (m_fd < 0) {
            std::string path = m_dir + "/payrecon-ahead-XXXXXX";
            m_fd = ::mkostemp(path.data(), O_CLOEXEC);
            if (m_fd < 0) {
                io_failed("creating a temporary file in " + m_dir, errno);
            }
            ::unlink(path.c_str());
        }
        std::size_t done = 0;
        while (done < bytes.size()) {
            const ssize_t n = ::pwrite(m_fd, bytes.data() + done, bytes.size() - done,
                                       static_cast<off_t>(m_file_size + done));
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                io_failed("writing to a temporary file in " + m_dir, n < 0 ? errno : ENOSPC);
            }
            done += static_cast<std::size_t>(n);
        }
        m_file_size += bytes.size();
    }

    void read_back(std::uint64_t offset, std::vector<char>& into) const {
        std::size_t done = 0;
        while (done < into.size()) {
            const ssize_t n = ::pread(m_fd, into.data() + done, into.size() - done,
                                      static_cast<off_t>(offset + done));
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                io_failed("reading back a temporary file in " + m_dir, n < 0 ? errno : 0);
            }
            done += static_cast<std::size_t>(n);
        }
    }

    [[noreturn]] void io_failed(const std::string& doing, int error) const {
        throw std::runtime_error(
            "reading " + m_what + " ahead: " + doing + " failed" +
            (error != 0 ? std::string(": ") + std::strerror(error) : std::string()) +
            "; the diff writes what does not fit its memory to $TMPDIR (else /tmp): point TMPDIR "
            "at a writable file system with free space");
    }

    const std::string m_what;
    CopyOutStream m_stream;
    const std::size_t m_budget;
    std::string m_dir;
    int m_fd = -1;                 // the reader's file of what is ahead beyond the budget
    std::uint64_t m_file_size = 0; // written by the reader only
    std::vector<char> m_chunk;     // the merge's: the records it takes next, from m_pos
    std::size_t m_pos = 0;
    std::mutex m_mutex; // guards what follows
    std::condition_variable m_changed;
    std::deque<Piece> m_ready;
    std::size_t m_queued = 0; // bytes in memory in m_ready
    bool m_done = false;      // every record is in m_ready, or reading failed (m_error)
    bool m_stopped = false;   // the merge is over: the reader stops
    std::exception_ptr m_error;
    std::thread m_reader; // last: started once everything above is built
};

// The second read: every column of the keys that did not match, in a read-only transaction of
// its own in the same snapshot. It connects at once: meanwhile the merge waits for our side to be
// read and sorted anyway.
class DetailReader {
public:
    DetailReader(std::string url, std::string snapshot, std::string provider, std::string run_id)
        : m_url(std::move(url)), m_snapshot(std::move(snapshot)), m_provider(std::move(provider)),
          m_run_id(std::move(run_id)) {
        tx();
    }

    // Our payments and refunds with these operation IDs, by operation ID.
    std::map<std::string, LocalRecord> locals(const std::vector<std::string>& operation_ids) {
        std::map<std::string, LocalRecord> out;
        if (operation_ids.empty()) {
            return out;
        }
        for (const auto& row :
             tx().exec_params(k_local_details_sql, m_provider, text_array(operation_ids))) {
            LocalRecord l;
            l.match_key = row[0].as<std::string>();
            l.operation_id = l.match_key;
            l.payment_id = row[1].as<std::string>();
            l.tenant_id = row[2].as<std::string>();
            if (!row[3].is_null()) {
                l.provider_reference = row[3].as<std::string>();
            }
            l.amount_minor = row[4].as<long long>();
            l.currency = row[5].as<std::string>();
            l.state = known_state(row[6].as<std::string>());
            l.at = row[7].as<long long>();
            if (!row[8].is_null()) {
                l.merchant_reference = row[8].as<std::string>();
            }
            l.kind = kind_of(row[9].as<std::string>());
            if (!row[10].is_null()) {
                l.refund_id = row[10].as<std::string>();
            }
            l.refund_held_minor = row[11].as<long long>();
            authorization_of(row[12].as<std::string>(), row[13].as<long long>(),
                             row[14].as<long long>(), l);
            out.emplace(l.match_key, std::move(l));
        }
        return out;
    }

    // The run's records with these match keys, by key, each key's in the order of the first read.
    std::map<std::string, std::vector<RemoteRecord>> remotes(const std::vector<std::string>& keys) {
        return remote_records(false, keys);
    }

    // The provider's records of these match keys that its other runs stored (counterparts from
    // other windows), by key.
    std::map<std::string, std::vector<RemoteRecord>>
    counterparts(const std::vector<std::string>& keys) {
        return remote_records(true, keys);
    }

private:
    // This run's records (or, `other_runs`, the provider's other runs') of these keys.
    std::map<std::string, std::vector<RemoteRecord>>
    remote_records(bool other_runs, const std::vector<std::string>& keys) {
        std::map<std::string, std::vector<RemoteRecord>> out;
        if (keys.empty()) {
            return out;
        }
        const pqxx::result rows =
            other_runs ? tx().exec_params(k_counterpart_details_sql, m_provider, m_run_id,
                                          text_array(keys))
                       : tx().exec_params(k_remote_details_sql, m_run_id, text_array(keys));
        for (const auto& row : rows) {
            RemoteRecord r;
            r.match_key = row[0].as<std::string>();
            r.provider_reference = row[1].as<std::string>();
            if (!row[2].is_null()) {
                r.operation_id = row[2].as<std::string>();
            }
            r.amount_minor = row[3].as<long long>();
            r.currency = row[4].as<std::string>();
            r.status = parse_remote_status(row[5].as<std::string>());
            r.raw_status = row[6].as<std::string>();
            r.at = row[7].as<long long>();
            r.kind = kind_of(row[8].as<std::string>());
            r.amount_refunded = row[9].as<long long>();
            if (!row[10].is_null()) {
                r.amount_captured = row[10].as<long long>();
            }
            out[r.match_key].push_back(std::move(r));
        }
        return out;
    }

    pqxx::transaction_base& tx() {
        if (!m_tx) {
            m_conn.emplace(m_url);
            {
                // Between two batches it waits for the merge, which over a large window may take
                // longer than the cluster's idle-in-transaction limit.
                pqxx::nontransaction session(*m_conn);
                session.exec0("SET idle_in_transaction_session_timeout = 0");
            }
            m_tx.emplace(*m_conn);
            m_tx->exec0("SET TRANSACTION SNAPSHOT " + m_tx->quote(m_snapshot));
        }
        return *m_tx;
    }

    std::string m_url;
    std::string m_snapshot;
    std::string m_provider;
    std::string m_run_id;
    std::optional<pqxx::connection> m_conn;
    std::optional<pqxx::transaction<pqxx::repeatable_read, pqxx::read_only>> m_tx;
};

// What makes two findings of one window the same finding, for an acknowledgement to go from a
// window's earlier run to its rerun: the category, the key (operation ID and reference as stored)
// and the detail (what was found, in words built from both sides' records).
std::string acknowledgement_key(const std::string& category, const std::string& operation_id,
                                const std::string& provider_reference, const std::string& detail) {
    std::string key = category;
    for (const std::string* part : {&operation_id, &provider_reference, &detail}) {
        key += '\0';
        key += *part;
    }
    return key;
}

// The acknowledged findings of the window's runs (the complete one, and the run being diffed
// again), by acknowledgement_key; read before the diff replaces them.
constexpr const char* k_window_acknowledgements_sql = R"sql(
SELECT f.category, coalesce(f.operation_id, ''), coalesce(f.provider_reference, ''), f.detail,
       f.acknowledged_by, )sql";
const std::string k_window_acknowledgements_rest = R"sql(, f.acknowledge_note
  FROM recon_findings f
  JOIN recon_runs r ON r.run_id = f.run_id
 WHERE r.provider = $1 AND r.window_from = to_timestamp($2) AND r.window_to = to_timestamp($3)
   AND f.acknowledged_at IS NOT NULL
 ORDER BY f.acknowledged_at)sql";

std::map<std::string, FindingAcknowledgement> window_acknowledgements(pqxx::work& tx,
                                                                      const StatementRun& run) {
    std::map<std::string, FindingAcknowledgement> out;
    for (const auto& row :
         tx.exec_params(std::string(k_window_acknowledgements_sql) + iso_utc("f.acknowledged_at") +
                            k_window_acknowledgements_rest,
                        run.provider, run.window_from, run.window_to)) {
        out[acknowledgement_key(row[0].as<std::string>(), row[1].as<std::string>(),
                                row[2].as<std::string>(), row[3].as<std::string>())] =
            FindingAcknowledgement{row[4].as<std::string>(), row[5].as<std::string>(),
                                   row[6].as<std::string>()};
    }
    return out;
}

// The diff's findings, streamed into recon_findings (COPY) on the diff's own transaction, numbered
// in the order written, each with an ID of its own and the acknowledgement the same finding had
// in the window's earlier run.
class FindingWriter {
public:
    FindingWriter(pqxx::work& tx, const std::string& run_id,
                  std::map<std::string, FindingAcknowledgement> acknowledged)
        : m_run_id(run_id), m_acknowledged(std::move(acknowledged)),
          m_stream(tx, "recon_findings", std::vector<std::string>{"run_id",
                                                                  "finding_no",
                                                                  "category",
                                                                  "tenant_id",
                                                                  "payment_id",
                                                                  "operation_id",
                                                                  "provider_reference",
                                                                  "local_amount",
                                                                  "local_currency",
                                                                  "local_state",
                                                                  "remote_amount",
                                                                  "remote_currency",
                                                                  "remote_state",
                                                                  "remote_count",
                                                                  "detail",
                                                                  "finding_id",
                                                                  "provider_references",
                                                                  "acknowledged_at",
                                                                  "acknowledged_by",
                                                                  "acknowledge_note",
                                                                  "refund_id"}) {}

    // Stores `f`, setting its finding_id and, where the window's earlier run had the same finding
    // acknowledged, its acknowledgement.
    void write(DiffFinding& f) {
        const RemoteRecord* r = shown_remote(f);
        const LocalRecord* l = f.local ? &*f.local : nullptr;
        const std::string number = std::to_string(++m_written);
        const std::string local_amount = l ? std::to_string(l->amount_minor) : "";
        const std::string remote_amount = r ? std::to_string(r->amount_minor) : "";
        const std::string remote_state = r ? std::string(to_string(r->status)) : "";
        const std::string remote_count = std::to_string(f.remote.size());
        const char* operation_id = l ? l->operation_id.c_str()
                                     : (r && r->operation_id ? r->operation_id->c_str() : nullptr);
        const char* provider_reference =
            r ? r->provider_reference.c_str()
              : (l && l->provider_reference ? l->provider_reference->c_str() : nullptr);
        f.finding_id = uuid_v7();
        const std::string references = text_array(remote_references(f));
        const auto carried = m_acknowledged.find(
            acknowledgement_key(f.category, operation_id ? operation_id : "",
                                provider_reference ? provider_reference : "", f.detail));
        if (carried != m_acknowledged.end()) {
            f.acknowledged = carried->second;
        }
        const FindingAcknowledgement* a = f.acknowledged ? &*f.acknowledged : nullptr;
        // stream_to escapes each field for COPY; a null pointer is NULL.
        const bool refund = l && l->kind == OperationKind::refund && !l->refund_id.empty();
        m_stream << std::array<const char*, 21>{m_run_id.c_str(),
                                                number.c_str(),
                                                f.category.c_str(),
                                                l ? l->tenant_id.c_str() : nullptr,
                                                l ? l->payment_id.c_str() : nullptr,
                                                operation_id,
                                                provider_reference,
                                                l ? local_amount.c_str() : nullptr,
                                                l ? l->currency.c_str() : nullptr,
                                                l ? to_string(l->state).data() : nullptr,
                                                r ? remote_amount.c_str() : nullptr,
                                                r ? r->currency.c_str() : nullptr,
                                                r ? remote_state.c_str() : nullptr,
                                                remote_count.c_str(),
                                                f.detail.c_str(),
                                                f.finding_id.c_str(),
                                                references.c_str(),
                                                a ? a->at.c_str() : nullptr,
                                                a ? a->by.c_str() : nullptr,
                                                a ? a->note.c_str() : nullptr,
                                                refund ? l->refund_id.c_str() : nullptr};
    }

    void complete() { m_stream.complete(); }

private:
    const std::string& m_run_id;
    std::map<std::string, FindingAcknowledgement> m_acknowledged;
    pqxx::stream_to m_stream;
    long long m_written = 0;
};

// Keys the first read found not matched, waiting in key order for their second read (every column,
// by DetailReader) in batches of k_details_batch; each is then classified again -- the same
// records, so the same category -- and handed to `found` whole.
class UnmatchedKeys {
public:
    UnmatchedKeys(DetailReader& details, const DiffRules& rules,
                  std::function<void(const DiffFinding&)> found)
        : m_details(details), m_rules(rules), m_found(std::move(found)) {}

    void add(const DiffFinding& first_read) {
        m_pending.push_back(Pending{
            first_read.local ? first_read.local->match_key : first_read.remote.front().match_key,
            first_read.local.has_value(), !first_read.remote.empty(),
            first_read.category == to_string(FindingCategory::missing_remote) ||
                first_read.category == to_string(FindingCategory::refund_missing_remote)});
        if (m_pending.size() >= k_details_batch) {
            flush();
        }
    }

    // Before a record is called missing, its counterpart is looked for outside the window's
    // reading: our payment of a provider record (any time), the provider's record of our payment
    // in the provider's other runs. A counterpart found is classified with it (a match across
    // windows, or what the pair says).
    void flush() {
        std::vector<std::string> local_keys;
        std::vector<std::string> remote_keys;
        std::vector<std::string> missing_remote_keys;
        for (const auto& p : m_pending) {
            // A provider record keyed by its own reference has no operation ID to look for.
            if (p.local || p.key.rfind(k_reference_key_prefix, 0) != 0) {
                local_keys.push_back(p.key);
            }
            if (p.remote) {
                remote_keys.push_back(p.key);
            }
            if (p.missing_remote) {
                missing_remote_keys.push_back(p.key);
            }
        }
        std::map<std::string, LocalRecord> locals = m_details.locals(local_keys);
        std::map<std::string, std::vector<RemoteRecord>> remotes = m_details.remotes(remote_keys);
        for (auto& [key, records] : m_details.counterparts(missing_remote_keys)) {
            std::vector<RemoteRecord>& into = remotes[key];
            for (auto& r : records) {
                if (std::none_of(into.begin(), into.end(), [&](const RemoteRecord& x) {
                        return x.provider_reference == r.provider_reference;
                    })) {
                    into.push_back(std::move(r));
                }
            }
        }
        const std::vector<RemoteRecord> none;
        for (const auto& p : m_pending) {
            std::optional<LocalRecord> l;
            auto local = locals.find(p.key);
            if (local != locals.end()) {
                l = std::move(local->second);
            } else if (p.local) {
                throw std::logic_error("diff_statement_run: payment " + p.key +
                                       " vanished inside one snapshot");
            }
            const auto found = remotes.find(p.key);
            if (auto f = classify_key(l, found == remotes.end() ? none : found->second, m_rules)) {
                m_found(*f);
            }
        }
        m_pending.clear();
    }

private:
    static constexpr std::string_view k_reference_key_prefix = "ref:";
    struct Pending {
        std::string key;
        bool local = false;          // we have the payment
        bool remote = false;         // the provider has records
        bool missing_remote = false; // so far: look for the provider's record in other runs
    };
    DetailReader& m_details;
    const DiffRules& m_rules;
    std::function<void(const DiffFinding&)> m_found;
    std::vector<Pending> m_pending;
};

// What matched: counted, and our amounts summed per currency (a match is not stored one by one).
class MatchedSums {
public:
    explicit MatchedSums(std::map<std::string, long long>& sums) : m_sums(sums) {}

    void add(const LocalRecord& l) {
        ++m_count;
        // Runs of one currency are the rule: the last currency's sum is kept at hand.
        if (m_sum == nullptr || l.currency != m_currency) {
            m_currency = l.currency;
            m_sum = &m_sums[m_currency];
        }
        *m_sum += l.amount_minor;
    }
    long long count() const { return m_count; }

private:
    std::map<std::string, long long>& m_sums;
    long long m_count = 0;
    std::string m_currency;
    long long* m_sum = nullptr;
};

// Marks the pages of a run just listed all-visible, so that the diff reads the run from
// statement_records_diff alone. VACUUM skips the pages marked already; it does not block reads or
// writes of the table. Best effort: without it the diff reads the same rows from the table.
void vacuum_statement_records(Db::Impl& impl) {
    try {
        pqxx::nontransaction tx(impl.connection());
        tx.exec0("VACUUM statement_records");
    } catch (const pqxx::sql_error&) {
        // e.g. a lock or statement timeout: the diff is slower, not wrong
    }
}

} // namespace

StatementRun open_statement_run(Db& db, const std::string& provider, long long window_from,
                                long long window_to, long long margin_s) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_find_run, k_find_run_sql);
        impl.prepare(k_new_run, k_new_run_sql);
        impl.prepare(k_reset_run, k_reset_run_sql);
        pqxx::work tx(impl.connection());
        StatementRun run;
        run.provider = provider;
        run.window_from = window_from;
        run.window_to = window_to;
        run.margin_s = margin_s;
        // Up to two rows: the unfinished run first (resumed or restarted), then the complete one
        // (kept until a new run replaces it; only its count of runs is carried on).
        pqxx::result found = tx.exec_prepared(k_find_run, provider, window_from, window_to);
        for (const pqxx::row& r : found) {
            run.complete_kept = run.complete_kept || r[1].as<std::string>() == "done";
        }
        const auto runs_so_far = [&found] {
            int runs = 0;
            for (const pqxx::row& r : found) {
                runs = std::max(runs, r[6].as<int>());
            }
            return runs;
        };
        if (found.empty() ||
            stored_run_status(found[0][1].as<std::string>()) == StatementRunStatus::done) {
            const pqxx::result created = tx.exec_prepared(k_new_run, provider, window_from,
                                                          window_to, margin_s, runs_so_far() + 1);
            if (created.empty()) {
                // Another process (two nightly jobs at once) created it meanwhile and committed:
                // carry on with that run as with any existing one.
                found = tx.exec_prepared(k_find_run, provider, window_from, window_to);
                if (found.empty() ||
                    stored_run_status(found[0][1].as<std::string>()) == StatementRunStatus::done) {
                    throw std::logic_error(
                        "open_statement_run: the run of this window was created and is gone");
                }
            } else {
                run.run_id = created[0][0].as<std::string>();
                run.status = StatementRunStatus::listing;
                run.runs = runs_so_far() + 1;
                tx.commit();
                return run;
            }
        }
        const pqxx::row r = found[0];
        run.run_id = r[0].as<std::string>();
        run.status = stored_run_status(r[1].as<std::string>());
        if (run.status == StatementRunStatus::listing || run.status == StatementRunStatus::listed) {
            if (r[2].as<long long>() != margin_s) {
                throw UsageError("an unfinished statement run of this window used a margin of " +
                                     r[2].as<std::string>() + " s",
                                 "run it again with that margin to resume it");
            }
            run.resumed = true;
            if (!r[3].is_null()) {
                run.list_cursor = r[3].as<std::string>();
            }
            run.pages = r[4].as<int>();
            run.remote_records = r[5].as<long long>();
            run.runs = r[6].as<int>();
        } else {
            // A run that failed after its listing: listed again from the start.
            tx.exec_params0("DELETE FROM statement_records WHERE run_id = $1::uuid", run.run_id);
            tx.exec_params0("DELETE FROM recon_findings WHERE run_id = $1::uuid", run.run_id);
            run.runs = tx.exec_prepared1(k_reset_run, run.run_id, margin_s)[0].as<int>();
            run.status = StatementRunStatus::listing;
        }
        tx.commit();
        return run;
    });
}

namespace {

void insert_record(pqxx::work& tx, const StatementRun& run, const StatementRecord& s) {
    const RemoteRecord& r = s.record;
    tx.exec_prepared0(
        k_insert_record, run.run_id, r.provider_reference, r.match_key, or_null(r.operation_id),
        r.amount_minor, r.amount_refunded, r.currency, std::string(to_string(r.status)),
        r.raw_status, r.at, s.raw.empty() ? nullptr : s.raw.c_str(), std::string(to_string(r.kind)),
        or_null(r.amount_captured ? std::optional<std::string>(std::to_string(*r.amount_captured))
                                  : std::nullopt));
}

} // namespace

void store_statement_page(Db& db, StatementRun& run, const std::vector<StatementRecord>& records,
                          const std::optional<std::string>& next_cursor) {
    Db::Impl& impl = db.impl();
    translate_errors(impl, [&] {
        impl.prepare(k_insert_record, k_insert_record_sql);
        impl.prepare(k_page_done, k_page_done_sql);
        pqxx::work tx(impl.connection());
        for (const auto& s : records) {
            insert_record(tx, run, s);
        }
        run.remote_records =
            tx.exec_prepared1(k_page_done, run.run_id, or_null(next_cursor))[0].as<long long>();
        tx.commit();
        run.list_cursor = next_cursor;
        ++run.pages;
        run.status = next_cursor ? StatementRunStatus::listing : StatementRunStatus::listed;
    });
    if (!next_cursor) {
        translate_errors(impl, [&] { vacuum_statement_records(impl); });
    }
}

std::vector<ClaimedPayment> statement_payments(Db& db, const StatementRun& run,
                                               const std::vector<std::string>& operation_ids) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_payments_by_operation, k_payments_by_operation_sql);
        pqxx::read_transaction tx(impl.connection());
        std::vector<ClaimedPayment> out;
        for (const auto& row :
             tx.exec_prepared(k_payments_by_operation, run.provider, text_array(operation_ids))) {
            out.push_back(claim_from_row(row));
        }
        return out;
    });
}

void store_statement_counterparts(Db& db, StatementRun& run,
                                  const std::vector<StatementRecord>& records) {
    Db::Impl& impl = db.impl();
    translate_errors(impl, [&] {
        impl.prepare(k_insert_record, k_insert_record_sql);
        impl.prepare(k_count_records, k_count_records_sql);
        pqxx::work tx(impl.connection());
        for (const auto& s : records) {
            insert_record(tx, run, s);
        }
        run.remote_records = tx.exec_prepared1(k_count_records, run.run_id)[0].as<long long>();
        tx.commit();
    });
}

bool is_lookup_cursor(const std::string& cursor) {
    return cursor.rfind(k_lookup_cursor_prefix, 0) == 0;
}

std::vector<StatementLookup> statement_lookup_page(Db& db, const StatementRun& run,
                                                   const std::optional<std::string>& after,
                                                   int limit) {
    long long after_us = run.window_from * 1000000;
    std::string after_id = "00000000-0000-0000-0000-000000000000";
    if (after) {
        const std::string rest =
            is_lookup_cursor(*after) ? after->substr(k_lookup_cursor_prefix.size()) : "";
        const auto colon = rest.find(':');
        if (colon == std::string::npos || colon == 0 ||
            !std::all_of(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(colon),
                         [](char c) { return c >= '0' && c <= '9'; })) {
            // run_statement refuses a run that was listing before it gets here.
            throw std::logic_error("statement_lookup_page: not a lookup cursor: " + *after);
        }
        after_us = std::stoll(rest.substr(0, colon));
        after_id = rest.substr(colon + 1);
    }
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_lookup_page, k_lookup_page_sql);
        pqxx::read_transaction tx(impl.connection());
        const pqxx::result rows = tx.exec_prepared(k_lookup_page, run.provider, run.window_from,
                                                   run.window_to, after_us, after_id, limit);
        std::vector<StatementLookup> out;
        out.reserve(rows.size());
        for (const auto& row : rows) {
            StatementLookup l;
            l.payment = payment_from_row(row);
            l.cursor = std::string(k_lookup_cursor_prefix) +
                       std::to_string(row[k_payment_column_count].as<long long>()) + ":" +
                       l.payment.payment_id;
            out.push_back(std::move(l));
        }
        return out;
    });
}

void fail_statement_run(Db& db, const StatementRun& run, const std::string& error) {
    Db::Impl& impl = db.impl();
    translate_errors(impl, [&] {
        impl.prepare(k_fail, k_fail_sql);
        pqxx::work tx(impl.connection());
        tx.exec_prepared0(k_fail, run.run_id, error);
        tx.commit();
    });
}

StatementTotals diff_statement_run(Db& db, StatementRun& run, long long amount_tolerance_minor,
                                   bool refunds_listed,
                                   const std::function<void(const DiffFinding&)>& on_finding,
                                   const DiffSorting& sorting) {
    if (run.status != StatementRunStatus::listed && run.status != StatementRunStatus::done) {
        throw std::logic_error("diff_statement_run: the listing of run " + run.run_id +
                               " is not complete");
    }
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_pair_by_reference, k_pair_by_reference_sql);
        impl.prepare(k_pair_refunds_by_reference, k_pair_refunds_by_reference_sql);
        impl.prepare(k_run_done, k_run_done_sql);
        impl.prepare(k_replace_done, k_replace_done_sql);
        {
            // Normalisation of the provider's records, committed on its own (running it again
            // changes nothing), so that the snapshot the sides are read in below includes it.
            pqxx::work tx(impl.connection());
            tx.exec_prepared0(k_pair_by_reference, run.run_id, run.provider);
            tx.exec_prepared0(k_pair_refunds_by_reference, run.run_id, run.provider);
            tx.commit();
        }
        pqxx::work tx(impl.connection());
        // Two diffs of one run (two nightly jobs at once) take turns: each replaces the findings
        // whole.
        tx.exec_params1("SELECT 1 FROM recon_runs WHERE run_id = $1::uuid FOR UPDATE", run.run_id);
        // What operators acknowledged of this window goes with the same findings into this diff.
        std::map<std::string, FindingAcknowledgement> acknowledged =
            window_acknowledgements(tx, run);
        tx.exec_params0("DELETE FROM recon_findings WHERE run_id = $1::uuid", run.run_id);
        // Every read below sees this transaction's snapshot; the findings stream into
        // recon_findings on this connection meanwhile.
        const std::string snapshot = tx.exec1("SELECT pg_export_snapshot()")[0].as<std::string>();
        const long long from = run.window_from - run.margin_s;
        const long long to = run.window_to + run.margin_s;
        SortedSide local(
            impl.url, snapshot, local_keys_query(tx.quote(run.provider), from, to, refunds_listed),
            (refunds_listed ? "our payments and refunds of " : "our payments of ") + run.provider,
            sorting);
        PrefetchedSide remote(impl.url, snapshot, remote_keys_query(tx.quote(run.run_id)),
                              "the statement records of run " + run.run_id, sorting);
        DetailReader details(impl.url, snapshot, run.provider, run.run_id);
        DiffRules rules;
        rules.amount_tolerance_minor = amount_tolerance_minor;
        rules.window_from = run.window_from;
        rules.window_to = run.window_to;
        rules.read_from = from;
        rules.read_to = to;
        rules.refunds_listed = refunds_listed;
        StatementTotals totals;
        FindingWriter findings(tx, run.run_id, std::move(acknowledged));
        MatchedSums matched_charges(totals.matched_amounts);
        MatchedSums matched_refunds(totals.refund_matched_amounts);
        const auto matched = [&](const LocalRecord& l) {
            (l.kind == OperationKind::refund ? matched_refunds : matched_charges).add(l);
        };
        UnmatchedKeys unmatched(details, rules, [&](const DiffFinding& found) {
            DiffFinding f = found;
            findings.write(f);
            if (is_match(f.category)) {
                // A match across windows: counted as one, stored with both times.
                matched(*f.local);
                ++totals.matched_across_windows;
            } else {
                ++totals.by_category[f.category];
                totals.acknowledged += f.acknowledged ? 1 : 0;
            }
            if (on_finding) {
                on_finding(f);
            }
        });
        DiffSink sink;
        sink.matched = matched;
        sink.finding = [&](DiffFinding&& f) { unmatched.add(f); };
        totals.counts = diff_sorted([&](LocalRecord& l) { return local.next(l); },
                                    [&](RemoteRecord& r) { return remote.next(r); }, rules, sink);
        unmatched.flush(); // the last keys' second read: matches across windows among them
        if (matched_charges.count() > 0) {
            totals.by_category[std::string(to_string(FindingCategory::matched))] +=
                matched_charges.count();
        }
        if (matched_refunds.count() > 0) {
            totals.by_category[std::string(to_string(FindingCategory::refund_matched))] +=
                matched_refunds.count();
        }
        findings.complete();
        nlohmann::json counts = totals.by_category;
        tx.exec_prepared0(k_replace_done, run.run_id);
        tx.exec_prepared0(k_run_done, run.run_id, totals.counts.local_records,
                          totals.counts.remote_records, counts.dump(), refunds_listed);
        tx.commit();
        run.status = StatementRunStatus::done;
        return totals;
    });
}

namespace {

// A stored finding's columns, over recon_findings f, recon_runs r and our payment p (LEFT JOIN).
const std::string k_stored_finding_columns =
    "f.finding_id::text, f.run_id::text, r.provider, "
    "floor(date_part('epoch', r.window_from))::bigint, "
    "floor(date_part('epoch', r.window_to))::bigint, f.finding_no, f.category, f.tenant_id::text, "
    "f.payment_id::text, f.operation_id, p.merchant_reference, f.provider_reference, "
    "array_to_json(f.provider_references)::text, f.local_amount, f.local_currency, f.local_state, "
    "f.remote_amount, f.remote_currency, f.remote_state, f.detail, f.acknowledged_by, " +
    iso_utc("f.acknowledged_at") + ", f.acknowledge_note, f.refund_id::text";
const std::string k_stored_finding_from =
    " FROM recon_findings f JOIN recon_runs r ON r.run_id = f.run_id"
    " LEFT JOIN payments p ON p.tenant_id = f.tenant_id AND p.payment_id = f.payment_id";

template <typename T>
std::optional<T> optional_of(const pqxx::field& f) {
    return f.is_null() ? std::nullopt : std::optional<T>(f.as<T>());
}

StoredFinding stored_finding_from(const pqxx::row& row) {
    StoredFinding f;
    f.finding_id = row[0].as<std::string>();
    f.run_id = row[1].as<std::string>();
    f.provider = row[2].as<std::string>();
    f.window_from = row[3].as<long long>();
    f.window_to = row[4].as<long long>();
    f.finding_no = row[5].as<long long>();
    f.category = row[6].as<std::string>();
    f.tenant_id = optional_of<std::string>(row[7]);
    f.payment_id = optional_of<std::string>(row[8]);
    f.operation_id = optional_of<std::string>(row[9]);
    f.merchant_reference = optional_of<std::string>(row[10]);
    f.provider_reference = optional_of<std::string>(row[11]);
    for (const auto& r : nlohmann::json::parse(row[12].as<std::string>())) {
        f.provider_references.push_back(r.get<std::string>());
    }
    f.local_amount = optional_of<long long>(row[13]);
    f.local_currency = optional_of<std::string>(row[14]);
    f.local_state = optional_of<std::string>(row[15]);
    f.remote_amount = optional_of<long long>(row[16]);
    f.remote_currency = optional_of<std::string>(row[17]);
    f.remote_state = optional_of<std::string>(row[18]);
    f.detail = row[19].as<std::string>();
    if (!row[20].is_null()) {
        f.acknowledged = FindingAcknowledgement{
            row[20].as<std::string>(), row[21].as<std::string>(), row[22].as<std::string>()};
    }
    f.refund_id = optional_of<std::string>(row[23]);
    return f;
}

// The audit row of an acknowledgement: under the payment's tenant, else the deployment's.
constexpr const char* k_acknowledge_finding_sql = R"sql(
WITH ack AS (
    UPDATE recon_findings
       SET acknowledged_at = now(), acknowledged_by = $2, acknowledge_note = $3
     WHERE finding_id = $1::uuid AND acknowledged_at IS NULL
 RETURNING *
)
INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail)
SELECT coalesce(ack.tenant_id, $4::uuid), $2, 'statement_finding.acknowledged',
       'statement_finding', ack.finding_id::text,
       jsonb_build_object('provider', r.provider, 'window_from', r.window_from,
                          'window_to', r.window_to, 'run_id', ack.run_id, 'category', ack.category,
                          'payment_id', ack.payment_id, 'refund_id', ack.refund_id,
                          'operation_id', ack.operation_id,
                          'provider_references', to_jsonb(ack.provider_references),
                          'local_amount', ack.local_amount, 'local_currency', ack.local_currency,
                          'remote_amount', ack.remote_amount,
                          'remote_currency', ack.remote_currency, 'detail', ack.detail,
                          'note', $3::text)
  FROM ack JOIN recon_runs r ON r.run_id = ack.run_id)sql";

} // namespace

std::optional<StoredStatement> load_statement(Db& db, const std::string& provider,
                                              long long window_from, long long window_to) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<StoredStatement> {
        pqxx::read_transaction tx(impl.connection());
        const pqxx::result run = tx.exec_params(
            "SELECT run_id::text, margin_s, runs, local_records, remote_records, " +
                iso_utc("finished_at") +
                ", counts::text, refunds_listed FROM recon_runs WHERE provider = $1 AND "
                "window_from = "
                "to_timestamp($2) AND window_to = to_timestamp($3) AND status = 'done'",
            provider, window_from, window_to);
        if (run.empty()) {
            return std::nullopt;
        }
        StoredStatement out;
        out.run_id = run[0][0].as<std::string>();
        out.provider = provider;
        out.window_from = window_from;
        out.window_to = window_to;
        out.margin_s = run[0][1].as<long long>();
        out.runs = run[0][2].as<int>();
        out.local_records = run[0][3].as<long long>();
        out.remote_records = run[0][4].as<long long>();
        out.finished_at = run[0][5].is_null() ? "" : run[0][5].as<std::string>();
        const nlohmann::json counts = nlohmann::json::parse(run[0][6].as<std::string>());
        out.refunds_listed = run[0][7].as<bool>();
        for (auto c = counts.begin(); c != counts.end(); ++c) {
            out.counts[c.key()] = c.value().get<long long>();
        }
        for (const auto& row :
             tx.exec_params("SELECT " + k_stored_finding_columns + k_stored_finding_from +
                                " WHERE f.run_id = $1::uuid ORDER BY f.finding_no",
                            out.run_id)) {
            out.findings.push_back(stored_finding_from(row));
        }
        return out;
    });
}

std::optional<StoredFinding> find_statement_finding(Db& db, const std::string& finding_id) {
    if (!is_uuid_text(finding_id)) {
        return std::nullopt;
    }
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<StoredFinding> {
        pqxx::read_transaction tx(impl.connection());
        const pqxx::result r =
            tx.exec_params("SELECT " + k_stored_finding_columns + k_stored_finding_from +
                               " WHERE f.finding_id = $1::uuid",
                           finding_id);
        if (r.empty()) {
            return std::nullopt;
        }
        return stored_finding_from(r[0]);
    });
}

FindingAcknowledgeResult acknowledge_statement_finding(Db& db, const std::string& finding_id,
                                                       const std::string& actor,
                                                       const std::string& note) {
    FindingAcknowledgeResult out;
    if (!is_uuid_text(finding_id)) {
        return out;
    }
    Db::Impl& impl = db.impl();
    translate_errors(impl, [&] {
        pqxx::work tx(impl.connection());
        const pqxx::result r =
            tx.exec_params("SELECT category, acknowledged_at IS NOT NULL FROM recon_findings "
                           "WHERE finding_id = $1::uuid FOR UPDATE",
                           finding_id);
        if (r.empty()) {
            out.status = FindingAcknowledgeStatus::not_found;
            return;
        }
        if (r[0][1].as<bool>()) {
            out.status = FindingAcknowledgeStatus::already;
        } else if (is_match(r[0][0].as<std::string>())) {
            out.status = FindingAcknowledgeStatus::not_needed;
        } else {
            tx.exec_params0(k_acknowledge_finding_sql, finding_id, actor, note,
                            k_deployment_tenant);
            out.status = FindingAcknowledgeStatus::acknowledged;
        }
        tx.commit();
    });
    if (out.status != FindingAcknowledgeStatus::not_found) {
        out.finding = find_statement_finding(db, finding_id);
    }
    return out;
}

} // namespace payrecon::store
