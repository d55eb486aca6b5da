#include "bench/pgbench_scripts.hpp"

#include "store/statements.hpp"

#include <cctype>
#include <set>
#include <stdexcept>

namespace payrecon::bench {

std::string bind(const std::string& sql, const std::map<int, std::string>& values) {
    std::string out;
    std::set<int> used;
    for (std::size_t i = 0; i < sql.size();) {
        if (sql[i] != '$' || i + 1 >= sql.size() ||
            std::isdigit(static_cast<unsigned char>(sql[i + 1])) == 0) {
            out += sql[i++];
            continue;
        }
        std::size_t end = i + 1;
        while (end < sql.size() && std::isdigit(static_cast<unsigned char>(sql[end])) != 0) {
            ++end;
        }
        const int n = std::stoi(sql.substr(i + 1, end - i - 1));
        const auto value = values.find(n);
        if (value == values.end()) {
            throw std::invalid_argument("the statement's parameter $" + std::to_string(n) +
                                        " has no value in the benchmark");
        }
        out += value->second;
        used.insert(n);
        i = end;
    }
    for (const auto& [n, value] : values) {
        if (used.count(n) == 0) {
            throw std::invalid_argument("the benchmark binds $" + std::to_string(n) + " (" + value +
                                        "), which the statement does not have");
        }
    }
    return out;
}

namespace {

// One statement per script line, so the script reads one request per few lines: the store's
// newlines become spaces (none of its statements holds a newline inside a string literal; a line
// comment would swallow the rest, hence the check).
std::string one_line(const std::string& sql) {
    if (sql.find("--") != std::string::npos) {
        throw std::invalid_argument("a statement with an SQL comment cannot be joined into one "
                                    "pgbench line: move the comment out of the statement");
    }
    std::string out;
    for (const char c : sql) {
        out += c == '\n' ? ' ' : c;
    }
    const auto first = out.find_first_not_of(' ');
    return first == std::string::npos ? std::string() : out.substr(first);
}

// pgbench -M prepared takes every ":name" for a variable, inside string literals too (the store's
// 'HH24:MI:SS' formats, JSON values). Such a literal becomes ('...' || chr(58) || '...'), which
// PostgreSQL folds back into the same constant when it plans the statement: the plan is the same.
std::string colons_out_of_literals(const std::string& sql) {
    std::string out;
    for (std::size_t i = 0; i < sql.size(); ++i) {
        if (sql[i] != '\'') {
            out += sql[i];
            continue;
        }
        std::size_t end = i + 1; // the closing quote; '' inside is an escaped quote
        while (end < sql.size() &&
               (sql[end] != '\'' || (end + 1 < sql.size() && sql[end + 1] == '\''))) {
            end += sql[end] == '\'' ? std::size_t{2} : std::size_t{1};
        }
        const std::string literal = sql.substr(i, end - i + 1);
        if (literal.find(':') == std::string::npos) {
            out += literal;
        } else {
            out += '(';
            for (const char c : literal) {
                out += c == ':' ? std::string("' || chr(58) || '") : std::string(1, c);
            }
            out += ')';
        }
        i = end;
    }
    return out;
}

// One script line of the statement, its parameters bound.
std::string line(const std::string& sql, const std::map<int, std::string>& values) {
    return colons_out_of_literals(one_line(bind(sql, values)));
}

} // namespace

std::string executor_script() {
    namespace st = store::statements;
    const std::string worker = "'pgbench'";
    const std::string lease_ms = "20000";
    std::string s =
        "-- One payment through the executor (--batch 1), no provider call: payrecon's own SQL\n"
        "-- (store/statements.hpp), written by payrecon-pgbench-sql executor.\n";
    s += line(st::executor_claim(), {{1, worker}, {2, lease_ms}, {3, "1"}, {4, "'{pgbench}'"}}) +
         " \\gset\n";
    s += line(st::executor_check(), {{1, worker},
                                     {2, "ARRAY[:tenant_id::uuid]"},
                                     {3, "ARRAY[:payment_id::uuid]"},
                                     {4, "ARRAY[:generation::bigint]"},
                                     {5, "ARRAY['charge']"}}) +
         ";\n";
    s += line(st::executor_settle(), {{1, ":tenant_id"},
                                      {2, ":payment_id"},
                                      {3, ":generation"},
                                      {4, "'succeeded'"},
                                      {5, "NULL"},
                                      {6, "'pi_pgbench'"},
                                      {7, "NULL"},
                                      {8, "NULL"},
                                      {9, ":attempt_count"},
                                      {10, "'succeeded'"},
                                      {11, "200"},
                                      {12, "''"},
                                      {13, "''"},
                                      {14, ":operation_id"},
                                      {15, ":payment_id"}}) +
         ";\n";
    return s;
}

namespace {

// The intake statement's parameters bound for pgbench; `key` is the idempotency key's expression
// (also the merchant reference's).
std::map<int, std::string> intake_values(const std::string& key) {
    return {{1, ":tenant"},
            {2, ":principal"},
            {3, "'create_payment'"},
            {4, key},
            {5, "md5(:n::text) || md5(:n::text)"},
            {6, "604800"},
            {7, "uuid_generate_v7()"},
            {8, key},
            {9, "1999"},
            {10, "'EUR'"},
            {11, "'stripe'"},
            {12, "'pm_card_visa'"},
            {13, "'cus_bench'"},
            {14, "NULL"},
            {15, "'{\"bench\": \"pgbench\"}'"},
            {16, "'pr_' || replace(uuid_generate_v7()::text, '-', '')"},
            {17, "'{\"id\":\"00000000-0000-0000-0000-000000000000\",\"object\":\"payment\","
                 "\"status\":\"pending\",\"status_category\":\"in_flight\",\"amount\":1999,"
                 "\"currency\":\"EUR\",\"merchant_reference\":\"pgb\",\"provider\":\"stripe\","
                 "\"created_at\":\"'"},
            {18, "'\"}'"},
            {19, "md5('k' || :n::text) || md5(:n::text)"},
            {20, "'automatic'"},
            {21, "NULL"}};
}

const std::string k_random_key = "'pgb-' || :n";

// Every run of whitespace outside string literals made one space, so that the ladder's edits
// below match the store's statement however it is indented.
std::string squeezed(const std::string& sql) {
    std::string out;
    bool in_literal = false;
    for (const char c : sql) {
        if (c == '\'') {
            in_literal = !in_literal; // '' inside a literal toggles twice
        }
        if (!in_literal && std::isspace(static_cast<unsigned char>(c)) != 0) {
            if (!out.empty() && out.back() != ' ') {
                out += ' ';
            }
            continue;
        }
        out += c;
    }
    while (!out.empty() && out.back() == ' ') {
        out.pop_back();
    }
    return out;
}

// `sql` with its one occurrence of `from` replaced by `to`. Throws unless `from` occurs exactly
// once: the store's statement changed under the ladder, whose rung must then be written again.
std::string replaced(const std::string& sql, const std::string& from, const std::string& to) {
    const auto at = sql.find(from);
    if (at == std::string::npos || sql.find(from, at + 1) != std::string::npos) {
        throw std::invalid_argument("the intake ladder expects the intake statement to hold \"" +
                                    from + "\" exactly once; it does not (the statement changed)");
    }
    return sql.substr(0, at) + to + sql.substr(at + from.size());
}

// `sql` with the part from `first` up to and including `last` (each occurring once) replaced.
std::string replaced_span(const std::string& sql, const std::string& first, const std::string& last,
                          const std::string& to) {
    const auto begin = sql.find(first);
    const auto end = begin == std::string::npos ? begin : sql.find(last, begin);
    if (begin == std::string::npos || end == std::string::npos ||
        sql.find(first, begin + 1) != std::string::npos ||
        sql.find(last, end + 1) != std::string::npos) {
        throw std::invalid_argument("the intake ladder expects the intake statement to hold \"" +
                                    first + " ... " + last +
                                    "\" exactly once; it does not (the statement changed)");
    }
    return sql.substr(0, begin) + to + sql.substr(end + last.size());
}

} // namespace

std::string executor_batch_script(int batch) {
    namespace st = store::statements;
    if (batch < 1) {
        throw std::invalid_argument("the executor's batch is at least 1");
    }
    const std::string worker = "'pgbench'";
    // The claim's rows as arrays, one row however many it claimed (none: empty arrays).
    const std::string claim =
        replaced_span(squeezed(st::executor_claim()), "SELECT 'charge' AS kind",
                      "AND p.payment_id = o.payment_id",
                      "SELECT coalesce(array_agg(p.tenant_id), '{}') AS tenants, "
                      "coalesce(array_agg(p.payment_id), '{}') AS payments, "
                      "coalesce(array_agg(p.generation), '{}') AS generations, "
                      "coalesce(array_agg(p.attempt_count), '{}') AS attempts, "
                      "coalesce(array_agg(p.operation_id), '{}') AS operation_ids, "
                      "coalesce(array_agg('charge'::text), '{}') AS kinds FROM claimed p");
    std::string s = "-- " + std::to_string(batch) + " payments through the executor (--batch " +
                    std::to_string(batch) +
                    "), their calls ending together, no provider call: payrecon's own SQL\n"
                    "-- (store/statements.hpp), written by payrecon-pgbench-sql executor " +
                    std::to_string(batch) + ".\n";
    s += line(claim, {{1, worker}, {2, "20000"}, {3, std::to_string(batch)}, {4, "'{pgbench}'"}}) +
         " \\gset\n";
    s +=
        line(st::executor_check(),
             {{1, worker}, {2, ":tenants"}, {3, ":payments"}, {4, ":generations"}, {5, ":kinds"}}) +
        ";\n";
    // What the settle group sends (store/executor_store.cpp, settle_attempts), one settlement per
    // claimed payment.
    s += line(st::executor_settle_many(),
              {{1, "(SELECT coalesce(jsonb_agg(jsonb_build_object('tenant_id', u.t, "
                   "'payment_id', u.p, 'generation', u.g, 'state', 'succeeded', 'retry_ms', NULL, "
                   "'provider_reference', 'pi_pgbench', 'reason', NULL, 'review_code', NULL, "
                   "'attempt_no', u.a, 'outcome', 'succeeded', 'http_status', 200, "
                   "'error_class', '', 'detail', '', 'operation_id', u.o)), '[]') "
                   "FROM unnest(:tenants::uuid[], :payments::uuid[], :generations::bigint[], "
                   ":attempts::integer[], :operation_ids::text[]) AS u(t, p, g, a, o))"}}) +
         ";\n";
    return s;
}

std::string intake_script() {
    std::string s =
        "-- One fresh create-payment request: payrecon's own SQL (store/statements.hpp), written\n"
        "-- by payrecon-pgbench-sql intake. Variables: tenant, principal (-D).\n"
        "\\set n random(1, 9000000000000000)\n";
    s += line(store::statements::intake_once(), intake_values(k_random_key)) + ";\n";
    return s;
}

std::string ladder_script(int rung) {
    if (rung < 0 || rung >= k_ladder_statement_rungs) {
        throw std::invalid_argument("the intake ladder's statement rungs are 0 to " +
                                    std::to_string(k_ladder_statement_rungs - 1));
    }
    if (rung == 0) {
        return intake_script();
    }
    std::string sql = squeezed(store::statements::intake_once());
    std::string what = "keys per client in sequence";
    // 5: the outbox event's payload a short literal (the lean one), not built from the row the
    // statement just wrote, which then returns only what the event's insert names.
    if (rung >= 5) {
        sql = replaced_span(sql, "jsonb_build_object( 'payment_id', r.payment_id",
                            "ELSE '{}'::jsonb END",
                            "'{\"payment_id\": \"x\", \"state\": \"pending\", \"amount\": 1999, "
                            "\"currency\": \"EUR\"}'::jsonb");
        sql = replaced(sql, "RETURNING *", "RETURNING tenant_id, payment_id");
        what += "; event payload a literal";
    }
    // 6: no read of the principal: the key claimed without its revocation check, the result
    // without the principal's state (now and for the key's record).
    if (rung >= 6) {
        sql = replaced(sql,
                       " FROM principals WHERE tenant_id = $1::uuid AND principal_id = $2::uuid "
                       "AND revoked_at IS NULL",
                       "");
        sql = replaced(sql,
                       ", e.revoked, CASE WHEN c.response_body IS NULL THEN (SELECT revoked_at IS "
                       "NOT NULL FROM principals WHERE tenant_id = $1::uuid AND principal_id = "
                       "$2::uuid) END",
                       "");
        sql = replaced(sql, ", pr.revoked_at IS NOT NULL AS revoked", "");
        sql = replaced(sql,
                       " JOIN principals pr ON pr.tenant_id = r.tenant_id AND pr.principal_id = "
                       "r.principal_id",
                       "");
        what += "; no read of principals";
    }
    // 7: the result only the stored 202: neither the existing record's read (a replay's answer)
    // nor the reference-taken check.
    if (rung >= 7) {
        sql = replaced_span(sql, "SELECT c.response_body, CASE WHEN",
                            "r.idempotency_key = $4 LIMIT 1) AS e ON true",
                            "SELECT c.response_body FROM c");
        what += "; result the 202 alone";
    }
    // 8: the stored 202 a constant: no creation time spliced into it.
    if (rung >= 8) {
        sql =
            replaced(sql, "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')",
                     "'2026-12-02T10:00:00.000Z'");
        what += "; stored 202 a constant";
    }
    if (rung >= 6 && sql.find("principals") != std::string::npos) {
        throw std::invalid_argument("the intake ladder's rung 6 still reads principals");
    }
    // 1 and below it: keys (and merchant references) from a counter per pgbench client, under a
    // prefix per run, as wrk's fresh keys (bench/intake_fresh.lua) and the lean baseline's
    // sequence make them, where the intake baseline draws them at random.
    std::string s = "-- bench/intake_ladder rung " + std::to_string(rung) +
                    ": payrecon's intake statement (store/statements.hpp) with " + what +
                    "; written by payrecon-pgbench-sql ladder " + std::to_string(rung) +
                    ".\n-- Variables: tenant, principal, run (unique per run), n (0) (-D).\n"
                    "\\set n :n + 1\n";
    s += line(sql, intake_values("'pgb-' || :run || '-' || :client_id || '-' || :n")) + ";\n";
    return s;
}

} // namespace payrecon::bench
