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

std::string intake_script() {
    namespace st = store::statements;
    const std::string key = "'pgb-' || :n";
    std::string s =
        "-- One fresh create-payment request: payrecon's own SQL (store/statements.hpp), written\n"
        "-- by payrecon-pgbench-sql intake. Variables: tenant, principal (-D).\n"
        "\\set n random(1, 9000000000000000)\n";
    s += line(st::intake_once(),
              {{1, ":tenant"},
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
               {21, "NULL"}}) +
         ";\n";
    return s;
}

} // namespace payrecon::bench
