#pragma once
// Store-internal: the pqxx side of Db, and the translation of pqxx errors into payrecon's error
// kinds. Included only by store/*.cpp.

#include "core/errors.hpp"
#include "store/db.hpp"

#include <algorithm>
#include <functional>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

namespace payrecon::store {

// A failure before commit that the caller may retry (the database went away, a serialization
// failure, a timeout): nothing was stored. `in_doubt` marks a lost COMMIT acknowledgement: the
// transaction may or may not have committed (retrying with the same idempotency key is safe).
class TransientStoreError : public DatabaseUnavailable {
public:
    TransientStoreError(const std::string& what, bool in_doubt)
        : DatabaseUnavailable(what, in_doubt
                                        ? "the last change may or may not have been made: look "
                                          "before you repeat it (an idempotent retry is safe)"
                                        : "retry the same request; nothing is lost"),
          m_in_doubt(in_doubt) {}
    bool in_doubt() const noexcept { return m_in_doubt; }
    bool commit_outcome_unknown() const noexcept override { return m_in_doubt; }

private:
    bool m_in_doubt;
};

struct Db::Impl {
    std::string url;
    std::optional<pqxx::connection> conn;
    std::unordered_set<std::string> prepared;

    // The live connection, reconnecting first if the last one broke.
    pqxx::connection& connection();
    // Prepares `name` on this connection once; later calls are free.
    void prepare(const std::string& name, const std::string& sql);
    void mark_broken() {
        conn.reset();
        prepared.clear();
    }
};

// Who holds the session or transaction advisory lock `key`, as pg_locks and pg_stat_activity say
// (the activity of sessions of other roles may be hidden without pg_read_all_stats: what is known
// is said). Read it in a transaction of its own, so that the statistics snapshot is fresh.
// nullopt: nobody holds it now.
struct AdvisoryLockHolder {
    long long backend_pid = 0;
    std::string text; // "database session 4242 ("payrecon nightly (pid 77)"), user ..., ..."
};
std::optional<AdvisoryLockHolder> advisory_lock_holder(pqxx::transaction_base& tx, long long key);

// Runs `body` and translates pqxx failures: connection loss, serialization failure, deadlock,
// admin shutdown, query cancel -> TransientStoreError (and the connection is dropped so the next
// call reconnects); in_doubt_error -> TransientStoreError(in_doubt) and never retried here.
// Everything else propagates unchanged.
template <typename F>
auto translate_errors(Db::Impl& db, F&& body) -> decltype(body()) {
    try {
        return body();
    } catch (const pqxx::in_doubt_error& e) {
        db.mark_broken();
        throw TransientStoreError(std::string("the database connection was lost during COMMIT; "
                                              "the outcome is unknown: ") +
                                      e.what(),
                                  true);
    } catch (const pqxx::broken_connection& e) {
        db.mark_broken();
        throw TransientStoreError(std::string("the database connection was lost: ") + e.what(),
                                  false);
    } catch (const pqxx::sql_error& e) {
        const std::string& state = e.sqlstate();
        const bool transient = state.rfind("40", 0) == 0     // serialization failure, deadlock
                               || state.rfind("08", 0) == 0  // connection exception
                               || state.rfind("53", 0) == 0  // insufficient resources
                               || state.rfind("57P", 0) == 0 // admin shutdown, crash shutdown
                               || state == "57014";          // statement timeout / cancel
        if (!transient) {
            throw;
        }
        if (state.rfind("08", 0) == 0 || state.rfind("57P", 0) == 0) {
            db.mark_broken();
        }
        throw TransientStoreError(std::string("the database refused for now (SQLSTATE ") + state +
                                      "): " + e.what(),
                                  false);
    }
}

// SQL for `column` (a timestamptz) as ISO 8601 UTC text with milliseconds:
// "2026-12-04T10:00:00.000Z".
inline std::string iso_utc(const std::string& column) {
    return "to_char(" + column + R"( AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))";
}

// An optional text parameter: its characters, or NULL.
// The audit row that closes a purge run (`action`: idempotency.purge_run, events.purge_run): under
// the deployment tenant, subject the run's ID, `detail` its totals. Written even when nothing
// was purged.
void audit_purge_run(Db::Impl& impl, const std::string& action, const std::string& actor,
                     const std::string& run_id, const std::string& detail_json);

// Adds each item of a comma-separated list (string_agg(..., ',') of IDs) to `into`.
inline void add_listed(std::set<std::string>& into, const std::string& list) {
    for (std::size_t at = 0; at < list.size();) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        into.insert(list.substr(at, comma - at));
        at = comma + 1;
    }
}

inline const char* or_null(const std::optional<std::string>& s) {
    return s ? s->c_str() : nullptr;
}

// A PostgreSQL array literal of text values, each quoted and escaped (for `$n::text[]`).
inline std::string text_array(const std::vector<std::string>& values) {
    std::string out = "{";
    for (const auto& v : values) {
        out += out.size() > 1 ? ",\"" : "\"";
        for (const char c : v) {
            if (c == '"' || c == '\\') {
                out += '\\';
            }
            out += c;
        }
        out += '"';
    }
    return out + "}";
}

struct ClaimedPayment;

// The payment columns every claim returns, in this order from column `first`: tenant_id::text,
// payment_id::text, generation, attempt_count, operation_id, merchant_reference, amount_minor,
// currency, provider, payment_method, customer, description, metadata::text, created_at in unix
// microseconds. k_payment_columns is that select list over table alias `p`.
inline constexpr const char* k_payment_columns =
    "p.tenant_id::text, p.payment_id::text, p.generation, p.attempt_count, p.operation_id, "
    "p.merchant_reference, p.amount_minor, p.currency, p.provider, p.payment_method, p.customer, "
    "p.description, p.metadata::text, (extract(epoch FROM p.created_at) * 1000000)::bigint "
    "AS created_at_us";
inline constexpr int k_payment_column_count = 14;
ClaimedPayment payment_from_row(const pqxx::row& row, int first = 0);

// A claim of any operation kind (DESIGN section 16): kind, subject ID (the payment's for the
// charge, the operation's else), the charge's provider reference and the refund's reason (NULL
// for a charge), then the payment columns above -- a refund's operation ID, merchant reference
// (empty when none), amount, metadata and creation time its own, the rest its payment's.
// k_charge_claim_columns is that select list over payments `p`; k_operation_claim_columns over
// operations `o` joined to their payments `p`.
inline constexpr const char* k_charge_claim_columns =
    "'charge' AS kind, p.payment_id::text AS subject_id, NULL::text AS charge_reference, "
    "NULL::text AS refund_reason, p.capture_method = 'manual' AS manual_capture, "
    "NULL::boolean AS final, p.operation_id AS payment_operation_id, "
    "p.amount_minor AS authorized_minor, p.captured_minor, "
    "p.tenant_id::text, p.payment_id::text, p.generation, "
    "p.attempt_count, p.operation_id, p.merchant_reference, p.amount_minor, p.currency, "
    "p.provider, p.payment_method, p.customer, p.description, p.metadata::text, "
    "(extract(epoch FROM p.created_at) * 1000000)::bigint AS created_at_us";
inline constexpr const char* k_operation_claim_columns =
    "o.kind, o.id::text, p.provider_reference, o.reason, p.capture_method = 'manual', o.final, "
    // What captures before this one took: a capture that succeeded is in captured_minor itself.
    "p.operation_id, p.amount_minor, p.captured_minor - CASE WHEN o.kind = 'capture' AND "
    "o.state = 'succeeded' THEN o.amount_minor ELSE 0 END, o.tenant_id::text, o.payment_id::text, "
    "o.generation, o.attempt_count, o.operation_id, coalesce(o.merchant_reference, ''), "
    "o.amount_minor, o.currency, o.provider, p.payment_method, p.customer, p.description, "
    "o.metadata::text, (extract(epoch FROM o.created_at) * 1000000)::bigint";
inline constexpr int k_claim_column_count = 9 + k_payment_column_count;
// Reads those columns from column 0. Throws std::logic_error on a kind this build does not know.
ClaimedPayment claim_from_row(const pqxx::row& row);

} // namespace payrecon::store
