#include "core/store/statement_store.hpp"

#include "core/store/pq.hpp"

#include <deque>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace payrecon::store {
namespace {

constexpr int k_fetch = 20000;       // rows per FETCH from each cursor (a few MB each)
constexpr std::size_t k_flush = 1000; // findings per insert batch

constexpr const char* k_find_run = "statement_find_run";
constexpr const char* k_find_run_sql = R"sql(
SELECT run_id::text, status, margin_s, list_cursor, pages, remote_records, runs
  FROM recon_runs
 WHERE provider = $1 AND window_from = to_timestamp($2) AND window_to = to_timestamp($3)
   FOR UPDATE)sql";

constexpr const char* k_new_run = "statement_new_run";
constexpr const char* k_new_run_sql = R"sql(
INSERT INTO recon_runs (provider, window_from, window_to, margin_s, status)
VALUES ($1, to_timestamp($2), to_timestamp($3), $4, 'listing')
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
                               amount_refunded, currency, status, raw_status, created_at, raw)
VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9, to_timestamp($10), $11::jsonb)
ON CONFLICT (run_id, provider_reference) DO NOTHING)sql";

constexpr const char* k_page_done = "statement_page_done";
constexpr const char* k_page_done_sql = R"sql(
UPDATE recon_runs
   SET list_cursor = $2, pages = pages + 1,
       remote_records = (SELECT count(*) FROM statement_records WHERE run_id = $1::uuid),
       status = CASE WHEN $2::text IS NULL THEN 'listed' ELSE 'listing' END
 WHERE run_id = $1::uuid
RETURNING remote_records)sql";

constexpr const char* k_fail = "statement_fail";
constexpr const char* k_fail_sql = R"sql(
UPDATE recon_runs
   SET status = CASE WHEN status = 'listing' THEN 'listing' ELSE 'failed' END,
       error = left($2, 2000), finished_at = now()
 WHERE run_id = $1::uuid)sql";

constexpr const char* k_pair_by_reference = "statement_pair_by_reference";
constexpr const char* k_pair_by_reference_sql = R"sql(
UPDATE statement_records s
   SET match_key = p.operation_id
  FROM payments p
 WHERE s.run_id = $1::uuid AND s.operation_id IS NULL AND p.provider = $2
   AND p.provider_reference = s.provider_reference)sql";

constexpr const char* k_insert_finding = "statement_insert_finding";
constexpr const char* k_insert_finding_sql = R"sql(
INSERT INTO recon_findings (run_id, finding_no, category, tenant_id, payment_id, operation_id,
                            provider_reference, local_amount, local_currency, local_state,
                            remote_amount, remote_currency, remote_state, remote_count, detail)
VALUES ($1::uuid, $2, $3, $4::uuid, $5::uuid, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15))sql";

constexpr const char* k_run_done = "statement_run_done";
constexpr const char* k_run_done_sql = R"sql(
UPDATE recon_runs
   SET status = 'done', local_records = $2, remote_records = $3, counts = $4::jsonb,
       finished_at = now(), error = NULL
 WHERE run_id = $1::uuid)sql";

const char* or_null(const std::optional<std::string>& s) { return s ? s->c_str() : nullptr; }

RemoteStatus parse_remote_status(const std::string& s) {
    for (const RemoteStatus r : {RemoteStatus::succeeded, RemoteStatus::refunded, RemoteStatus::declined,
                                 RemoteStatus::pending}) {
        if (to_string(r) == s) {
            return r;
        }
    }
    return RemoteStatus::other;
}

// Reads a cursor in batches; `parse` turns a row into a record.
template <typename Record>
class CursorReader {
public:
    CursorReader(pqxx::work& tx, std::string name, std::function<Record(const pqxx::row&)> parse)
        : m_tx(tx), m_name(std::move(name)), m_parse(std::move(parse)) {}

    std::optional<Record> next() {
        if (m_buffer.empty() && !m_done) {
            const pqxx::result r = m_tx.exec("FETCH FORWARD " + std::to_string(k_fetch) + " FROM " + m_name);
            for (const auto& row : r) {
                m_buffer.push_back(m_parse(row));
            }
            m_done = static_cast<int>(r.size()) < k_fetch;
        }
        if (m_buffer.empty()) {
            return std::nullopt;
        }
        Record out = std::move(m_buffer.front());
        m_buffer.pop_front();
        return out;
    }

private:
    pqxx::work& m_tx;
    std::string m_name;
    std::function<Record(const pqxx::row&)> m_parse;
    std::deque<Record> m_buffer;
    bool m_done = false;
};

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
        const pqxx::result found = tx.exec_prepared(k_find_run, provider, window_from, window_to);
        if (found.empty()) {
            run.run_id = tx.exec_prepared1(k_new_run, provider, window_from, window_to, margin_s)[0].as<std::string>();
            run.status = "listing";
        } else {
            const pqxx::row r = found[0];
            run.run_id = r[0].as<std::string>();
            run.status = r[1].as<std::string>();
            if (run.status == "listing" || run.status == "listed") {
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
                tx.exec_params0("DELETE FROM statement_records WHERE run_id = $1::uuid", run.run_id);
                tx.exec_params0("DELETE FROM recon_findings WHERE run_id = $1::uuid", run.run_id);
                run.runs = tx.exec_prepared1(k_reset_run, run.run_id, margin_s)[0].as<int>();
                run.status = "listing";
            }
        }
        tx.commit();
        return run;
    });
}

void store_statement_page(Db& db, StatementRun& run, const std::vector<StatementRecord>& records,
                          const std::optional<std::string>& next_cursor) {
    Db::Impl& impl = db.impl();
    translate_errors(impl, [&] {
        impl.prepare(k_insert_record, k_insert_record_sql);
        impl.prepare(k_page_done, k_page_done_sql);
        pqxx::work tx(impl.connection());
        for (const auto& s : records) {
            const RemoteRecord& r = s.record;
            tx.exec_prepared0(k_insert_record, run.run_id, r.provider_reference, r.match_key, or_null(r.operation_id),
                              r.amount_minor, s.amount_refunded, r.currency, std::string(to_string(r.status)),
                              r.raw_status, r.at, s.raw.empty() ? nullptr : s.raw.c_str());
        }
        run.remote_records = tx.exec_prepared1(k_page_done, run.run_id, or_null(next_cursor))[0].as<long long>();
        tx.commit();
        run.list_cursor = next_cursor;
        ++run.pages;
        run.status = next_cursor ? "listing" : "listed";
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
                                   const std::function<void(const DiffFinding&)>& on_finding) {
    if (run.status != "listed" && run.status != "done") {
        throw std::logic_error("diff_statement_run: the listing of run " + run.run_id + " is not complete");
    }
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_pair_by_reference, k_pair_by_reference_sql);
        impl.prepare(k_insert_finding, k_insert_finding_sql);
        impl.prepare(k_run_done, k_run_done_sql);
        pqxx::work tx(impl.connection());
        // Both cursors stream a million rows: compiling their plans (JIT) costs more than it saves.
        tx.exec0("SET LOCAL jit = off");
        // Two diffs of one run (two nightly jobs at once) take turns: each replaces the findings whole.
        tx.exec_params1("SELECT 1 FROM recon_runs WHERE run_id = $1::uuid FOR UPDATE", run.run_id);
        tx.exec_prepared0(k_pair_by_reference, run.run_id, run.provider);
        tx.exec_params0("DELETE FROM recon_findings WHERE run_id = $1::uuid", run.run_id);
        const long long from = run.window_from - run.margin_s;
        const long long to = run.window_to + run.margin_s;
        tx.exec0("DECLARE statement_local NO SCROLL CURSOR FOR "
                 "SELECT operation_id, payment_id::text, tenant_id::text, provider_reference, amount_minor, "
                 "currency, state, floor(date_part('epoch', coalesce(first_attempt_at, created_at)))::bigint "
                 "FROM payments WHERE provider = " + tx.quote(run.provider) +
                 " AND coalesce(first_attempt_at, created_at) >= to_timestamp(" + std::to_string(from) + ")" +
                 " AND coalesce(first_attempt_at, created_at) < to_timestamp(" + std::to_string(to) + ")" +
                 " ORDER BY operation_id COLLATE \"C\"");
        tx.exec0("DECLARE statement_remote NO SCROLL CURSOR FOR "
                 "SELECT match_key, provider_reference, operation_id, amount_minor, currency, status, raw_status, "
                 "floor(date_part('epoch', created_at))::bigint FROM statement_records WHERE run_id = " +
                 tx.quote(run.run_id) + "::uuid ORDER BY match_key COLLATE \"C\", provider_reference COLLATE \"C\"");
        CursorReader<LocalRecord> local(tx, "statement_local", [](const pqxx::row& row) {
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
            l.state = row[6].as<std::string>();
            l.at = row[7].as<long long>();
            return l;
        });
        CursorReader<RemoteRecord> remote(tx, "statement_remote", [](const pqxx::row& row) {
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
            return r;
        });
        StatementTotals totals;
        std::vector<DiffFinding> pending;
        long long finding_no = 0;
        const auto flush = [&] {
            for (const auto& f : pending) {
                const RemoteRecord* r = f.remote.empty() ? nullptr : &f.remote.front();
                for (const auto& x : f.remote) {
                    if (is_charge(x.status)) {
                        r = &x;
                        break;
                    }
                }
                const std::string local_amount = f.local ? std::to_string(f.local->amount_minor) : "";
                const std::string remote_amount = r ? std::to_string(r->amount_minor) : "";
                const std::string remote_state = r ? std::string(to_string(r->status)) : "";
                tx.exec_prepared0(
                    k_insert_finding, run.run_id, ++finding_no, f.category,
                    f.local ? f.local->tenant_id.c_str() : nullptr, f.local ? f.local->payment_id.c_str() : nullptr,
                    f.local ? f.local->operation_id.c_str() : (r && r->operation_id ? r->operation_id->c_str() : nullptr),
                    r ? r->provider_reference.c_str()
                      : (f.local && f.local->provider_reference ? f.local->provider_reference->c_str() : nullptr),
                    f.local ? local_amount.c_str() : nullptr, f.local ? f.local->currency.c_str() : nullptr,
                    f.local ? f.local->state.c_str() : nullptr, r ? remote_amount.c_str() : nullptr,
                    r ? r->currency.c_str() : nullptr, r ? remote_state.c_str() : nullptr,
                    static_cast<int>(f.remote.size()), f.detail);
            }
            pending.clear();
        };
        DiffRules rules;
        rules.amount_tolerance_minor = amount_tolerance_minor;
        rules.window_from = run.window_from;
        rules.window_to = run.window_to;
        totals.counts = diff_sorted([&] { return local.next(); }, [&] { return remote.next(); }, rules,
                                    [&](DiffFinding&& f) {
                                        ++totals.by_category[f.category];
                                        if (on_finding) {
                                            on_finding(f);
                                        }
                                        if (f.category != "matched") {
                                            pending.push_back(std::move(f));
                                            if (pending.size() >= k_flush) {
                                                flush();
                                            }
                                        }
                                    });
        flush();
        tx.exec0("CLOSE statement_local");
        tx.exec0("CLOSE statement_remote");
        nlohmann::json counts = totals.by_category;
        tx.exec_prepared0(k_run_done, run.run_id, totals.counts.local_records, totals.counts.remote_records,
                          counts.dump());
        tx.commit();
        run.status = "done";
        return totals;
    });
}

} // namespace payrecon::store
