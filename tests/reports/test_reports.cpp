// The report writers: text, JSON against docs/report.schema.json, CSV round trip, HTML (static
// checks, then headless Chromium: screenshot, DOM after the script ran, the category filter, the
// layout at two widths, and a page of 20,000 findings).

#include "chromium.hpp"
#include "core/fingerprint.hpp"
#include "core/money.hpp"
#include "many_findings.hpp"
#include "reports/report.hpp"
#include "reports/writers.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace payrecon::reports;
using nlohmann::json;
using payrecon::test::chromium_command;
using payrecon::test::DevToolsBrowser;
using payrecon::test::find_chromium;

namespace {

Finding make(std::string category, bool attention) {
    Finding f;
    f.category = std::move(category);
    f.needs_attention = attention;
    f.provider = "stripe";
    return f;
}

// One finding of every statement category, some more of a few, and text that breaks naive
// writers: commas, quotes, line breaks, markup, a terminal escape, formula starters, unicode, and
// a present-but-empty value (CSV must keep it apart from an absent one).
Report fixture() {
    Report r;
    r.kind = "statement";
    r.title = "payrecon statement: stripe, 2026-12-01T00:00:00Z .. 2026-12-02T00:00:00Z";
    r.generated_at = "2026-12-02T06:00:00Z";
    r.facts = {{"run", "42"},
               {"provider", "stripe"},
               {"window", "2026-12-01T00:00:00Z .. 2026-12-02T00:00:00Z"},
               {"records read (ours, theirs)", "12, 13"},
               {"note <b>", "a \"quoted\" & 'single' fact"}};
    for (const auto category : statement_categories(false)) {
        r.categories.emplace_back(category);
        r.totals[std::string(category)];
    }

    Finding matched = make("matched", false);
    matched.payment_id = "pay_1";
    matched.operation_id = "op_1";
    matched.provider_reference = "pi_1";
    matched.local_amount = matched.remote_amount = 4999;
    matched.local_currency = matched.remote_currency = "EUR";
    matched.local_state = matched.remote_state = "succeeded";
    matched.detail = "matched";
    r.add(matched);
    for (int i = 0; i < 4; ++i) {
        r.add(matched, false); // counted, not listed
    }

    Finding missing_remote = make("missing_remote", true);
    missing_remote.payment_id = "pay_2";
    missing_remote.operation_id = "op_2";
    missing_remote.local_amount = 1000;
    missing_remote.local_currency = "JPY";
    missing_remote.local_state = "succeeded";
    missing_remote.merchant_reference = "order-2";
    missing_remote.local_at = 1796126400; // 2026-12-01T12:00:00Z
    missing_remote.detail = "We say succeeded, \"they\" have nothing, at all";
    r.add(missing_remote);

    Finding missing_local = make("missing_local", true);
    missing_local.provider_reference = "pi_<script>alert(1)</script>";
    missing_local.remote_amount = 2500;
    missing_local.remote_currency = "USD";
    missing_local.remote_state = "succeeded";
    missing_local.remote_at = 1796126465; // 2026-12-01T12:01:05Z
    missing_local.detail = "line one\nline two\r\nline three";
    r.add(missing_local);
    missing_local.provider_reference = "pi_3b";
    missing_local.remote_amount = 100;
    missing_local.detail = "a charge we have no record of";
    r.add(missing_local);
    missing_local.provider_reference = "pi_3c";
    missing_local.remote_amount = 7;
    missing_local.detail = "a, third; one";
    r.add(missing_local);

    Finding amount = make("amount_mismatch", true);
    amount.payment_id = "pay_4";
    amount.operation_id = "op_4";
    amount.provider_reference = "@SUM(A1:A9)";
    amount.local_amount = 1000;
    amount.remote_amount = 1001;
    amount.local_currency = amount.remote_currency = "EUR";
    amount.local_state = "succeeded";
    amount.remote_state = "+1 succeeded";
    amount.merchant_reference = "=order-4";
    amount.provider_link = "https://dashboard.example.com/payments/%40SUM%28A1%3AA9%29";
    amount.local_at = 1796126400;
    amount.remote_at = 1796126465;
    amount.detail = "=HYPERLINK(\"x\",\"click\")";
    r.add(amount);

    Finding currency = make("currency_mismatch", true);
    currency.payment_id = "pay_5";
    currency.operation_id = "op_5";
    currency.provider_reference = "pi_5";
    currency.local_amount = currency.remote_amount = 500;
    currency.local_currency = "EUR";
    currency.remote_currency = "GBP";
    currency.local_state = currency.remote_state = "succeeded";
    currency.detail = "Zahlung f\u00fcr M\u00fcller \u2013 \u6771\u4eac \u2713 \U0001F4B6";
    r.add(currency);

    Finding status = make("status_mismatch", true);
    status.payment_id = "pay_6";
    status.operation_id = "op_6";
    status.provider_reference = "pi_6";
    status.local_amount = status.remote_amount = 1999;
    status.local_currency = status.remote_currency = "EUR";
    status.local_state = "succeeded";
    status.remote_state = "failed";
    status.detail = "'quoted' & <b>bold</b> \x1b[31mred\x1b[0m\ttab";
    r.add(status);

    Finding duplicate = make("duplicate_remote", true);
    duplicate.payment_id = "";
    duplicate.operation_id = "op,with,commas";
    duplicate.provider_reference = "\"pi_7\"";
    duplicate.remote_amount = -250;
    duplicate.remote_currency = "KWD";
    duplicate.local_state = "";
    duplicate.remote_state = "succeeded";
    duplicate.detail = "-250 KWD twice; two charges for one operation ID";
    duplicate.finding_id = "0190b2c4-5e6f-7000-8000-000000000007";
    duplicate.provider_references = {"\"pi_7\"", "=pi_7b,x"};
    r.add(duplicate);

    Finding unknown = make("unresolved_unknown", true);
    unknown.payment_id = "pay_8";
    unknown.operation_id = "op_8";
    unknown.local_amount = 1234567;
    unknown.local_currency = "KWD";
    unknown.local_state = "unknown";
    unknown.detail = "'already quoted";
    r.add(unknown);

    r.exit_code = 3;
    return r;
}

std::string render(const Report& r, Format format) {
    std::ostringstream out;
    write_report(out, r, format);
    return out.str();
}

std::map<std::string, long long> listed_per_category(const Report& r) {
    std::map<std::string, long long> out;
    for (const Finding& f : r.findings) {
        ++out[f.category];
    }
    return out;
}

std::string slurp(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// --- a checker for the JSON Schema subset docs/report.schema.json uses --------------------------
// Unknown keywords fail the check, so the schema cannot use something that is silently ignored.

class SchemaChecker {
public:
    explicit SchemaChecker(json root) : m_root(std::move(root)) {}

    std::vector<std::string> check(const json& value) {
        m_errors.clear();
        visit(m_root, value, "$");
        return m_errors;
    }

private:
    json m_root;
    std::vector<std::string> m_errors;

    void error(const std::string& where, const std::string& what) {
        m_errors.push_back(where + ": " + what);
    }

    static bool has_type(const json& v, const std::string& type) {
        if (type == "object") {
            return v.is_object();
        }
        if (type == "array") {
            return v.is_array();
        }
        if (type == "string") {
            return v.is_string();
        }
        if (type == "integer") {
            return v.is_number_integer();
        }
        if (type == "number") {
            return v.is_number();
        }
        if (type == "boolean") {
            return v.is_boolean();
        }
        if (type == "null") {
            return v.is_null();
        }
        throw std::logic_error("schema: unknown type " + type);
    }

    const json& resolve(const std::string& ref) {
        const std::string prefix = "#/$defs/";
        if (ref.rfind(prefix, 0) != 0) {
            throw std::logic_error("schema: unsupported $ref " + ref);
        }
        return m_root.at("$defs").at(ref.substr(prefix.size()));
    }

    bool valid(const json& schema, const json& value) {
        SchemaChecker sub(m_root);
        sub.visit(schema, value, "$");
        return sub.m_errors.empty();
    }

    void visit(const json& schema, const json& v, const std::string& at) {
        for (const auto& [key, rule] : schema.items()) {
            if (key == "$schema" || key == "$id" || key == "title" || key == "description" ||
                key == "$defs" || key == "else") {
                continue;
            }
            if (key == "$ref") {
                visit(resolve(rule.get<std::string>()), v, at);
            } else if (key == "type") {
                const auto types = rule.is_array() ? rule : json::array({rule});
                if (std::none_of(types.begin(), types.end(), [&](const json& t) {
                        return has_type(v, t.get<std::string>());
                    })) {
                    error(at, "is not of type " + rule.dump());
                }
            } else if (key == "const") {
                if (v != rule) {
                    error(at, "is not " + rule.dump());
                }
            } else if (key == "enum") {
                if (std::find(rule.begin(), rule.end(), v) == rule.end()) {
                    error(at, v.dump() + " is not one of " + rule.dump());
                }
            } else if (key == "pattern") {
                if (v.is_string() &&
                    !std::regex_search(v.get<std::string>(), std::regex(rule.get<std::string>()))) {
                    error(at, v.dump() + " does not match " + rule.get<std::string>());
                }
            } else if (key == "minimum") {
                if (v.is_number() && v.get<double>() < rule.get<double>()) {
                    error(at, "is below " + rule.dump());
                }
            } else if (key == "required") {
                for (const auto& name : rule) {
                    if (v.is_object() && !v.contains(name.get<std::string>())) {
                        error(at, "lacks " + name.get<std::string>());
                    }
                }
            } else if (key == "properties") {
                if (v.is_object()) {
                    for (const auto& [name, sub] : rule.items()) {
                        if (v.contains(name)) {
                            visit(sub, v.at(name), at + "." + name);
                        }
                    }
                }
            } else if (key == "additionalProperties") {
                if (v.is_object()) {
                    const json declared = schema.value("properties", json::object());
                    for (const auto& [name, member] : v.items()) {
                        if (declared.contains(name)) {
                            continue;
                        }
                        if (rule.is_boolean()) {
                            if (!rule.get<bool>()) {
                                error(at, "has an undeclared member " + name);
                            }
                        } else {
                            visit(rule, member, at + "." + name);
                        }
                    }
                }
            } else if (key == "propertyNames") {
                if (v.is_object()) {
                    for (const auto& [name, member] : v.items()) {
                        visit(rule, json(name), at + " (member name " + name + ")");
                    }
                }
            } else if (key == "items") {
                if (v.is_array()) {
                    for (std::size_t i = 0; i < v.size(); ++i) {
                        visit(rule, v[i], at + "[" + std::to_string(i) + "]");
                    }
                }
            } else if (key == "minItems") {
                if (v.is_array() && v.size() < rule.get<std::size_t>()) {
                    error(at, "has fewer than " + rule.dump() + " items");
                }
            } else if (key == "maxItems") {
                if (v.is_array() && v.size() > rule.get<std::size_t>()) {
                    error(at, "has more than " + rule.dump() + " items");
                }
            } else if (key == "uniqueItems") {
                if (v.is_array() && rule.get<bool>()) {
                    for (std::size_t i = 0; i < v.size(); ++i) {
                        for (std::size_t k = i + 1; k < v.size(); ++k) {
                            if (v[i] == v[k]) {
                                error(at, "repeats " + v[i].dump());
                            }
                        }
                    }
                }
            } else if (key == "allOf") {
                for (const auto& sub : rule) {
                    visit(sub, v, at);
                }
            } else if (key == "if") {
                if (valid(rule, v) && schema.contains("then")) {
                    visit(schema.at("then"), v, at);
                }
            } else if (key == "then") {
                // applied through "if"
            } else {
                throw std::logic_error("schema: keyword " + key +
                                       " is not supported by the checker");
            }
        }
    }
};

json load_schema() {
    std::ifstream in(fs::path(PAYRECON_SOURCE_DIR) / "docs" / "report.schema.json");
    REQUIRE(in);
    return json::parse(in);
}

// --- running Chromium -------------------------------------------------------------------------

struct ProcessResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};

// Runs `argv` in its own process group with stdout and stderr to files in `dir`; kills the whole
// group after `timeout` (and after it exits, so no helper process outlives the test).
ProcessResult run_process(const std::vector<std::string>& argv, const fs::path& dir,
                          std::chrono::seconds timeout) {
    const fs::path out_file = dir / "stdout.txt";
    const fs::path err_file = dir / "stderr.txt";
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::setpgid(0, 0);
        const int in = ::open("/dev/null", O_RDONLY);
        const int out = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || out < 0 || err < 0) {
            ::_exit(126);
        }
        ::dup2(in, 0);
        ::dup2(out, 1);
        ::dup2(err, 2);
        std::vector<char*> args;
        for (const auto& a : argv) {
            args.push_back(const_cast<char*>(a.c_str()));
        }
        args.push_back(nullptr);
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
    ::setpgid(pid, pid); // also from the parent: no race with the child's own call
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    bool exited = false;
    while (std::chrono::steady_clock::now() < deadline) {
        const pid_t done = ::waitpid(pid, &status, WNOHANG);
        if (done == pid) {
            exited = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(-pid, SIGKILL);
    if (!exited) {
        ::waitpid(pid, &status, 0);
    }
    ProcessResult result;
    result.exit_code = exited && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.out = slurp(out_file);
    result.err = slurp(err_file);
    INFO("command: " << argv.front() << " ... " << argv.back());
    INFO("stderr (last 2000 bytes): "
         << result.err.substr(result.err.size() > 2000 ? result.err.size() - 2000 : 0));
    REQUIRE(exited); // else it hung past the timeout
    return result;
}

class TempDir {
public:
    TempDir() {
        std::string pattern = (fs::temp_directory_path() / "payrecon-reports.XXXXXX").string();
        REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        m_path = pattern;
    }
    ~TempDir() {
        std::error_code ignored;
        fs::remove_all(m_path, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const fs::path& path() const { return m_path; }

private:
    fs::path m_path;
};

struct DomRow {
    std::string category;
    bool hidden = false;
};

// The <tr data-category> rows of the findings table, with whether each carries `hidden`.
std::vector<DomRow> finding_rows(const std::string& dom) {
    const auto table = dom.find("<table id=\"findings\"");
    REQUIRE(table != std::string::npos);
    const auto end = dom.find("</table>", table);
    REQUIRE(end != std::string::npos);
    const std::string body = dom.substr(table, end - table);
    std::vector<DomRow> rows;
    const std::string open = "<tr data-category=\"";
    for (auto at = body.find(open); at != std::string::npos; at = body.find(open, at + 1)) {
        const auto name_end = body.find('"', at + open.size());
        const auto tag_end = body.find('>', at);
        const std::string tag = body.substr(at, tag_end - at);
        rows.push_back({body.substr(at + open.size(), name_end - at - open.size()),
                        tag.find(" hidden") != std::string::npos});
    }
    return rows;
}

std::map<std::string, long long> dom_counts(const std::string& dom) {
    std::map<std::string, long long> counts;
    const std::regex cell("data-count-for=\"([a-z_]+)\">([0-9]+)<");
    for (auto it = std::sregex_iterator(dom.begin(), dom.end(), cell); it != std::sregex_iterator();
         ++it) {
        counts[(*it)[1]] = std::stoll((*it)[2]);
    }
    return counts;
}

// What lies between the first `open` in `text` and the next `close`.
std::string between(const std::string& text, const std::string& open, const std::string& close) {
    const auto at = text.find(open);
    REQUIRE(at != std::string::npos);
    const auto end = text.find(close, at + open.size());
    REQUIRE(end != std::string::npos);
    return text.substr(at + open.size(), end - at - open.size());
}

std::string element_text(const std::string& dom, const std::string& id) {
    const std::string open = "id=\"" + id + "\">";
    const auto at = dom.find(open);
    REQUIRE(at != std::string::npos);
    const auto end = dom.find('<', at + open.size());
    return dom.substr(at + open.size(), end - at - open.size());
}

} // namespace

TEST_CASE("reports: format names parse and print back", "[reports]") {
    for (const Format f : {Format::text, Format::json, Format::csv, Format::html}) {
        CHECK(parse_format(format_name(f)) == f);
    }
    CHECK_FALSE(parse_format("HTML").has_value());
    CHECK_FALSE(parse_format("pdf").has_value());
    CHECK_FALSE(parse_format("").has_value());
}

TEST_CASE("reports: text shows the facts, each category with its count, and escapes control "
          "characters",
          "[reports]") {
    const Report r = fixture();
    const std::string text = render(r, Format::text);
    INFO(text);
    CHECK(text.rfind(r.title + "\n", 0) == 0);
    CHECK(text.find("exit code:") != std::string::npos);
    CHECK(text.find("records read (ours, theirs):") != std::string::npos);
    for (const auto& category : r.categories) {
        const std::regex line("(^|\n)" + category + " +" +
                              std::to_string(r.totals.at(category).count) + "  ");
        CHECK(std::regex_search(text, line));
    }
    CHECK(std::regex_search(text, std::regex("\ntotal +14\n")));
    CHECK(text.find("249.95 EUR") != std::string::npos); // 5 matched x 49.99 EUR
    CHECK(text.find("1234.567 KWD") != std::string::npos);
    CHECK(text.find("\x1b") == std::string::npos);
    CHECK(text.find("\\x1b[31mred") != std::string::npos);
    CHECK(text.find("line one\\nline two\\r\\nline three") != std::string::npos);
    CHECK(text.find("findings (10 listed)") != std::string::npos);
    // One line per finding: the control characters did not break a row in two.
    const auto from = text.find("findings (10 listed)");
    CHECK(std::count(text.begin() + static_cast<long>(from), text.end(), '\n') == 1 + 1 + 10);
}

TEST_CASE("reports: text of an empty report says so", "[reports]") {
    Report r;
    r.kind = "statement";
    r.title = "empty";
    r.generated_at = "2026-12-02T06:00:00Z";
    const std::string text = render(r, Format::text);
    CHECK(text.find("findings: none listed") != std::string::npos);
    CHECK(std::regex_search(text, std::regex("\ntotal +0\n")));
}

TEST_CASE("reports: JSON follows docs/report.schema.json and keeps every value", "[reports]") {
    Report r = fixture();
    r.findings_truncated = true;
    const std::string text = render(r, Format::json);
    const json j = json::parse(text);
    SchemaChecker checker(load_schema());
    const auto errors = checker.check(j);
    INFO(text);
    for (const auto& e : errors) {
        UNSCOPED_INFO(e);
    }
    CHECK(errors.empty());

    CHECK(j["schema"] == "payrecon.report/2");
    CHECK(j["kind"] == "statement");
    CHECK(j["facts"][0] == json::array({"run", "42"}));
    CHECK(j["categories"].size() == statement_categories(false).size());
    CHECK(j["totals"]["matched"]["count"] == 5);
    CHECK(j["totals"]["matched"]["amounts"]["EUR"] == 5 * 4999);
    CHECK(j["totals"]["missing_local"]["count"] == 3);
    CHECK(j["totals"]["missing_local"]["amounts"]["USD"] == 2607);
    CHECK(j["findings"].size() == r.findings.size());
    CHECK(j["findings_truncated"] == true);
    CHECK(j["exit_code"] == 3);
    CHECK(j["failure"].is_null());
    const json& missing_remote = j["findings"][1];
    CHECK(missing_remote["category"] == "missing_remote");
    CHECK(missing_remote["provider_reference"].is_null());
    CHECK(missing_remote["remote_amount"].is_null());
    CHECK(missing_remote["local_amount"] == 1000);
    CHECK(missing_remote["detail"] == r.findings[1].detail);
    const json& duplicate = j["findings"][8];
    CHECK(duplicate["payment_id"] == ""); // present and empty is not null
    CHECK(duplicate["remote_amount"] == -250);
    CHECK(j["findings"][6]["detail"] == r.findings[6].detail); // unicode as is
    CHECK(missing_remote["merchant_reference"] == "order-2");
    CHECK(missing_remote["local_at"] == "2026-12-01T12:00:00Z");
    CHECK(missing_remote["remote_at"].is_null());
    CHECK(missing_remote["difference"].is_null());
    const json& amount = j["findings"][5];
    CHECK(amount["category"] == "amount_mismatch");
    CHECK(amount["difference"] == -1);
    CHECK(amount["provider_link"] == *r.findings[5].provider_link);
    CHECK(amount["remote_at"] == "2026-12-01T12:01:05Z");
    // Money at risk: the size of the difference for the mismatch (0.01 EUR), the whole amount
    // for the rest: 19.99 EUR (status) + 5.00 EUR (currency) = 25.00 EUR; 1000 JPY; 26.07 USD;
    // 2.50 KWD (the duplicate's -250) + 1234.567 KWD.
    CHECK(j["at_risk"] ==
          json{{"EUR", 1 + 1999 + 500}, {"JPY", 1000}, {"KWD", 250 + 1234567}, {"USD", 2607}});
}

TEST_CASE("reports: money at risk is the difference for a mismatch, else the amount, and "
          "nothing for a finding that needs no attention",
          "[reports]") {
    Finding f = make("amount_mismatch", true);
    f.local_amount = 1000;
    f.local_currency = "eur";
    f.remote_amount = 1250;
    f.remote_currency = "EUR";
    CHECK(difference(f) == -250);
    REQUIRE(at_risk(f).has_value());
    CHECK(at_risk(f)->currency == "EUR");
    CHECK(at_risk(f)->minor == 250);
    f.remote_currency = "GBP"; // another currency: no difference, our amount is at risk
    CHECK_FALSE(difference(f).has_value());
    CHECK(at_risk(f)->minor == 1000);
    f.needs_attention = false;
    CHECK_FALSE(at_risk(f).has_value());

    Report r;
    Finding a = make("status_mismatch", true);
    a.local_amount = a.remote_amount = 700;
    a.local_currency = a.remote_currency = "USD";
    r.add(a);
    r.add(a, false); // counted, not listed: still at risk
    CHECK(r.at_risk == std::map<std::string, long long>{{"USD", 1400}});
    r.subtract(a);
    CHECK(r.at_risk == std::map<std::string, long long>{{"USD", 700}});
    CHECK(r.needing_attention == 1);
    CHECK(r.totals.at("status_mismatch").count == 1);
    r.subtract(a);
    CHECK(r.at_risk.empty());
    CHECK(r.totals.at("status_mismatch").amounts.empty());
}

TEST_CASE("reports: a handled finding is listed and counted in its category, out of the money "
          "at risk, with who handled it and the note, in every format",
          "[reports]") {
    Report r;
    r.kind = "statement";
    r.title = "payrecon statement: stripe";
    r.generated_at = "2026-12-02T06:00:00Z";
    Finding open = make("missing_local", true);
    open.remote_amount = 7300;
    open.remote_currency = "USD";
    open.detail = "an orphan";
    r.add(open);
    Finding handled = make("duplicate_remote", false);
    handled.finding_id = "0190b2c4-5e6f-7000-8000-0000000000aa";
    handled.local_amount = handled.remote_amount = 2500;
    handled.local_currency = handled.remote_currency = "EUR";
    handled.provider_reference = "pi_1";
    handled.provider_references = {"pi_1", "pi_2"};
    handled.detail = "two charges: pi_1, pi_2";
    handled.handled =
        payrecon::FindingAcknowledgement{"frank", "2026-12-02T07:00:00.000Z", "refunded pi_2"};
    r.add(handled);
    CHECK(r.totals.at("duplicate_remote").count == 1);
    CHECK(r.at_risk == std::map<std::string, long long>{{"USD", 7300}});
    CHECK(r.needing_attention == 1);
    CHECK(r.handled == 1);
    CHECK(r.handled_amounts == std::map<std::string, long long>{{"EUR", 2500}});
    CHECK(handled_at_risk(handled)->minor == 2500);
    CHECK_FALSE(at_risk(handled).has_value());

    const json j = json::parse(render(r, Format::json));
    SchemaChecker checker(load_schema());
    CHECK(checker.check(j).empty());
    CHECK(j["handled"] == json{{"count", 1}, {"amounts", {{"EUR", 2500}}}});
    CHECK(j["findings"][1]["handled"] ==
          json{{"by", "frank"}, {"at", "2026-12-02T07:00:00.000Z"}, {"note", "refunded pi_2"}});
    CHECK(j["findings"][1]["provider_references"] == json::array({"pi_1", "pi_2"}));
    CHECK(j["findings"][0]["handled"].is_null());
    CHECK(j["findings"][0]["finding_id"].is_null());

    std::istringstream csv(render(r, Format::csv));
    const auto back = parse_findings_csv(csv);
    REQUIRE(back.size() == 2);
    CHECK(back[1] == handled);
    CHECK(back[0] == open);

    const std::string text = render(r, Format::text);
    CHECK(text.find("handled:") != std::string::npos);
    CHECK(text.find("pi_1, pi_2") != std::string::npos);
    CHECK(text.find("[handled by frank at 2026-12-02T07:00:00.000Z: refunded pi_2]") !=
          std::string::npos);
    const std::string html = render(r, Format::html);
    CHECK(html.find("data-finding-id=\"0190b2c4-5e6f-7000-8000-0000000000aa\" "
                    "data-handled=\"true\"") != std::string::npos);
    CHECK(html.find("id=\"handled\" data-count=\"1\"") != std::string::npos);
    CHECK(html.find("handled by frank") != std::string::npos);
    CHECK(html.find(">pi_2<") != std::string::npos);
}

TEST_CASE("reports: the schema checker rejects what the schema forbids", "[reports]") {
    SchemaChecker checker(load_schema());
    const json good = json::parse(render(fixture(), Format::json));
    REQUIRE(checker.check(good).empty());

    json bad = good;
    bad["findings"][0]["category"] = "bogus_category";
    CHECK_FALSE(checker.check(bad).empty());
    bad = good;
    bad["kind"] = "reconcile"; // other kinds may use their own snake_case categories
    bad["findings"][0]["category"] = "adopt_remote";
    CHECK(checker.check(bad).empty());
    bad["findings"][0]["category"] = "Adopt remote";
    CHECK_FALSE(checker.check(bad).empty());
    bad = good;
    bad["findings"][0].erase("operation_id");
    CHECK_FALSE(checker.check(bad).empty());
    bad = good;
    bad["findings"][0]["local_amount"] = "4999";
    CHECK_FALSE(checker.check(bad).empty());
    bad = good;
    bad["totals"]["matched"]["amounts"]["EUR"] = 49.99;
    CHECK_FALSE(checker.check(bad).empty());
    bad = good;
    bad["extra"] = 1;
    CHECK_FALSE(checker.check(bad).empty());
    bad = good;
    bad["generated_at"] = "yesterday";
    CHECK_FALSE(checker.check(bad).empty());
    bad = good;
    bad["failure"] = "the provider refused the credentials";
    CHECK(checker.check(bad).empty());
}

TEST_CASE("reports: JSON replaces invalid UTF-8 in provider text instead of throwing",
          "[reports]") {
    Report r = fixture();
    r.findings[0].detail = "bad \xff\xfe bytes";
    const json j = json::parse(render(r, Format::json));
    CHECK(j["findings"][0]["detail"] == "bad \xEF\xBF\xBD\xEF\xBF\xBD bytes");
}

TEST_CASE("reports: CSV parses back to the same findings", "[reports]") {
    const Report r = fixture();
    const std::string csv = render(r, Format::csv);
    INFO(csv);
    CHECK(csv.rfind("category,needs_attention,provider,payment_id,operation_id,"
                    "merchant_reference,"
                    "provider_reference,local_amount,local_amount_major,local_currency,"
                    "local_state,local_at,remote_amount,remote_amount_major,remote_currency,"
                    "remote_state,remote_at,difference,difference_major,provider_link,"
                    "finding_id,provider_references,handled_by,handled_at,handled_note,"
                    "detail,refund_id\r\n",
                    0) == 0);
    std::istringstream in(csv);
    const std::vector<Finding> back = parse_findings_csv(in);
    REQUIRE(back.size() == r.findings.size());
    for (std::size_t i = 0; i < back.size(); ++i) {
        INFO("finding " << i << ": " << r.findings[i].category);
        CHECK(back[i] == r.findings[i]);
    }
    CHECK(back[8].payment_id == std::optional<std::string>(""));
    CHECK_FALSE(back[1].provider_reference.has_value());
}

TEST_CASE("reports: CSV quotes what RFC 4180 says and defuses spreadsheet formulas", "[reports]") {
    const std::string csv = render(fixture(), Format::csv);
    // Formula starters get a leading quote; amounts stay plain integers, negative ones too.
    CHECK(csv.find(",\"'=HYPERLINK(\"\"x\"\",\"\"click\"\")\",\r\n") != std::string::npos);
    CHECK(csv.find(",'@SUM(A1:A9),") != std::string::npos);
    CHECK(csv.find(",'+1 succeeded,") != std::string::npos);
    CHECK(csv.find(",'-250 KWD twice; two charges for one operation ID,\r\n") != std::string::npos);
    CHECK(csv.find(",-250,-0.250,KWD,") != std::string::npos);
    CHECK(csv.find(",'=order-4,") != std::string::npos);
    // The mismatch: 10.00 EUR ours, 10.01 theirs, a difference of -1 (-0.01 EUR) left unquoted.
    CHECK(csv.find(",1000,10.00,EUR,succeeded,2026-12-01T12:00:00Z,1001,10.01,EUR,'+1 succeeded,"
                   "2026-12-01T12:01:05Z,-1,-0.01,https://dashboard.example.com/payments/"
                   "%40SUM%28A1%3AA9%29,") != std::string::npos);
    CHECK(csv.find(",''already quoted,\r\n") != std::string::npos);
    // Commas, quotes and line breaks inside quotes; an empty text is "" and an absent one empty.
    CHECK(csv.find(",\"op,with,commas\",") != std::string::npos);
    CHECK(csv.find(",\"\"\"pi_7\"\"\",") != std::string::npos);
    CHECK(csv.find("\"line one\nline two\r\nline three\"") != std::string::npos);
    CHECK(csv.find("duplicate_remote,true,stripe,\"\",") != std::string::npos);
    CHECK(csv.find("missing_remote,true,stripe,pay_2,op_2,order-2,,1000,1000,JPY,succeeded,"
                   "2026-12-01T12:00:00Z,,,,,,,,,") != std::string::npos);
    // 1 header + 10 findings, each ending in CRLF; the only other line break is inside a quote.
    CHECK(std::count(csv.begin(), csv.end(), '\n') == 11 + 2);
}

TEST_CASE("reports: a refund's finding names its refund and its payment in every format, and "
          "its money counts at risk",
          "[reports]") {
    Report r;
    r.kind = "statement";
    r.title = "payrecon statement: stripe, refunds";
    r.generated_at = "2026-12-02T06:00:00Z";
    for (const auto category : statement_categories()) {
        r.categories.emplace_back(category);
        r.totals[std::string(category)];
    }
    Finding refund = make("refund_missing_remote", true);
    refund.payment_id = "0190b2c4-5e6f-7000-8000-000000000001";
    refund.refund_id = "0190b2c4-5e6f-7000-8000-0000000000aa";
    refund.operation_id = "pr_9";
    refund.local_amount = 300;
    refund.local_currency = "EUR";
    refund.local_state = "succeeded";
    refund.detail = "payrecon says the refund succeeded; the provider has no such refund";
    r.add(refund);
    Finding dashboard = make("refund_missing_local", true);
    dashboard.provider_reference = "re_dashboard";
    dashboard.remote_amount = 150;
    dashboard.remote_currency = "EUR";
    dashboard.remote_state = "succeeded";
    dashboard.detail = "the provider refunded EUR 1.50 (re_dashboard) and payrecon has no record";
    r.add(dashboard);
    r.add_counted("refund_matched", 4, {{"EUR", 1200}});
    r.exit_code = 3;

    const json j = json::parse(render(r, Format::json));
    SchemaChecker checker(load_schema());
    for (const auto& e : checker.check(j)) {
        UNSCOPED_INFO(e);
    }
    CHECK(checker.check(j).empty());
    CHECK(j["categories"].size() == statement_categories().size());
    CHECK(j["findings"][0]["refund_id"] == *refund.refund_id);
    CHECK(j["findings"][0]["payment_id"] == *refund.payment_id);
    CHECK(j["findings"][1]["refund_id"].is_null());
    CHECK(j["at_risk"] == json{{"EUR", 300 + 150}});
    CHECK(j["totals"]["refund_matched"]["count"] == 4);
    CHECK(j["totals"]["refund_missing_local"]["count"] == 1);

    const std::string csv = render(r, Format::csv);
    CHECK(csv.find("refund_missing_remote,true,stripe," + *refund.payment_id + ",pr_9,") !=
          std::string::npos);
    CHECK(csv.find("has no such refund," + *refund.refund_id + "\r\n") != std::string::npos);
    std::istringstream in(csv);
    const std::vector<Finding> back = parse_findings_csv(in);
    REQUIRE(back.size() == 2);
    CHECK(back[0] == r.findings[0]);
    CHECK(back[1] == r.findings[1]);

    const std::string text = render(r, Format::text);
    CHECK(text.find(*refund.refund_id) != std::string::npos);
    CHECK(std::regex_search(text, std::regex("refund_missing_remote +1")));

    const std::string html = render(r, Format::html);
    CHECK(html.find(*refund.refund_id) != std::string::npos);
    CHECK(dom_counts(html)["refund_matched"] == 4);
    CHECK(dom_counts(html)["refund_missing_local"] == 1);
}

TEST_CASE("reports: the CSV parser refuses malformed input with the line", "[reports]") {
    const std::string header = render(Report{}, Format::csv);
    const auto parse = [](const std::string& text) {
        std::istringstream in(text);
        return parse_findings_csv(in);
    };
    CHECK(parse(header).empty());
    CHECK(parse(header.substr(0, header.size() - 2) +
                "\nmatched,false,stripe,,,,,1,0.01,EUR,,,,,,,,,,,,,,,,ok,")
              .size() == 1);
    CHECK_THROWS_WITH(parse(""), Catch::Contains("no header row"));
    CHECK_THROWS_WITH(parse("a,b\r\n"), Catch::Contains("header"));
    CHECK_THROWS_WITH(parse(header + "matched,false\r\n"), Catch::Contains("line 2"));
    const auto row = [](const std::map<std::string, std::string>& fields) {
        std::string out;
        for (const std::string_view column : k_csv_columns) {
            const auto it = fields.find(std::string(column));
            out += (column == k_csv_columns[0] ? "" : ",") +
                   (it == fields.end() ? std::string() : it->second);
        }
        return out + "\r\n";
    };
    CHECK_THROWS_WITH(parse(header + row({{"category", "matched"}, {"needs_attention", "maybe"}})),
                      Catch::Contains("needs_attention"));
    CHECK_THROWS_WITH(parse(header + row({{"category", "matched"},
                                          {"needs_attention", "false"},
                                          {"local_amount", "12x"}})),
                      Catch::Contains("local_amount is not an integer"));
    CHECK_THROWS_WITH(parse(header + row({{"category", "matched"},
                                          {"needs_attention", "false"},
                                          {"local_at", "yesterday"}})),
                      Catch::Contains("local_at is not an ISO 8601 UTC time"));
    CHECK_THROWS_WITH(
        parse(header +
              row({{"category", "matched"}, {"needs_attention", "false"}, {"difference", "1.5"}})),
        Catch::Contains("difference is not an integer"));
    CHECK_THROWS_WITH(
        parse(header +
              row({{"category", "matched"}, {"needs_attention", "false"}, {"detail", "\"open"}})),
        Catch::Contains("never closed"));
    CHECK_THROWS_WITH(
        parse(header + "\r\n" + row({{"category", "matched"}, {"needs_attention", "false"}})),
        Catch::Contains("line 2"));
}

TEST_CASE("reports: HTML is one self-contained page with everything escaped", "[reports]") {
    const Report r = fixture();
    const std::string html = render(r, Format::html);
    CHECK(html.rfind("<!doctype html>\n", 0) == 0);
    for (const char* external : {"http://", "src=", "url(", "@import", "//cdn"}) {
        INFO(external);
        CHECK(html.find(external) == std::string::npos);
    }
    // The only addresses: the anchor of the findings, and the one finding's dashboard link, which
    // opens on a click only, without a referrer.
    std::vector<std::string> hrefs;
    const std::regex href("href=\"([^\"]*)\"");
    for (auto it = std::sregex_iterator(html.begin(), html.end(), href);
         it != std::sregex_iterator(); ++it) {
        hrefs.push_back((*it)[1]);
    }
    CHECK(hrefs ==
          std::vector<std::string>{"#findings-section",
                                   "https://dashboard.example.com/payments/%40SUM%28A1%3AA9%29"});
    CHECK(std::count(html.begin(), html.end(), '\0') == 0);
    CHECK(html.find("rel=\"noopener noreferrer\"") != std::string::npos);
    CHECK(html.find("<meta name=\"referrer\" content=\"no-referrer\">") != std::string::npos);
    CHECK(html.find("<style>") != std::string::npos);
    CHECK(html.find("Content-Security-Policy") != std::string::npos);
    // Two script elements: ours, and the findings as a data block that never runs; the
    // provider's markup is text in both the markup and the data.
    std::vector<std::string> scripts;
    for (auto at = html.find("<script"); at != std::string::npos;
         at = html.find("<script", at + 1)) {
        scripts.push_back(html.substr(at, html.find('>', at) + 1 - at));
    }
    CHECK(scripts == std::vector<std::string>{
                         "<script type=\"application/json\" id=\"findings-data\">", "<script>"});
    const std::string data =
        between(html, "<script type=\"application/json\" id=\"findings-data\">", "</script>");
    CHECK(data.find_first_of("<>&") == std::string::npos);
    CHECK(data.find("pi_\\u003cscript\\u003ealert(1)\\u003c/script\\u003e") != std::string::npos);
    CHECK(json::parse(data)["findings"].size() == r.findings.size());
    CHECK(html.find("pi_&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
    CHECK(html.find("&#39;quoted&#39; &amp; &lt;b&gt;bold&lt;/b&gt;") != std::string::npos);
    CHECK(html.find("note &lt;b&gt;") != std::string::npos);
    CHECK(html.find("a &quot;quoted&quot; &amp; &#39;single&#39; fact") != std::string::npos);
    CHECK(html.find("<b>") == std::string::npos);
    CHECK(html.find('\x1b') == std::string::npos);
    CHECK(html.find("\\x1b[31mred") != std::string::npos);
    CHECK(html.find("\u6771\u4eac") != std::string::npos);
    // The parts the browser test reads.
    CHECK(html.find("<select id=\"category-filter\">") != std::string::npos);
    CHECK(html.find("<svg id=\"chart-categories\"") != std::string::npos);
    CHECK(html.find("<svg id=\"chart-currencies\"") != std::string::npos);
    CHECK(dom_counts(html) == std::map<std::string, long long>{{"matched", 5},
                                                               {"missing_remote", 1},
                                                               {"missing_local", 3},
                                                               {"amount_mismatch", 1},
                                                               {"currency_mismatch", 1},
                                                               {"status_mismatch", 1},
                                                               {"duplicate_remote", 1},
                                                               {"unresolved_unknown", 1},
                                                               {"authorization_mismatch", 0}});
    const auto rows = finding_rows(html);
    CHECK(rows.size() == r.findings.size());
    CHECK(std::none_of(rows.begin(), rows.end(), [](const DomRow& row) { return row.hidden; }));
}

// Standard base64 of the bytes that lower-case `hex` spells.
std::string base64_from_hex(const std::string& hex) {
    static const std::string k_alphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bits;
    for (const char c : hex) {
        const auto v = std::stoi(std::string(1, c), nullptr, 16);
        for (int b = 3; b >= 0; --b) {
            bits += ((v >> b) & 1) ? '1' : '0';
        }
    }
    std::string out;
    for (std::size_t i = 0; i < bits.size(); i += 6) {
        std::string chunk = bits.substr(i, 6);
        chunk.resize(6, '0');
        out += k_alphabet[std::stoul(chunk, nullptr, 2)];
    }
    while (out.size() % 4 != 0) {
        out += '=';
    }
    return out;
}

TEST_CASE("reports: the HTML page's CSP allows exactly its own inline style and script",
          "[reports]") {
    const std::string html = render(fixture(), Format::html);
    const std::string csp =
        between(html, "http-equiv=\"Content-Security-Policy\" content=\"", "\"");
    const std::string style = between(html, "<style>", "</style>");
    const std::string script = between(html, "<script>", "</script>");
    CHECK(csp.rfind("default-src 'none'; ", 0) == 0);
    CHECK(csp.find("style-src 'sha256-" + base64_from_hex(payrecon::sha256_hex(style)) + "'") !=
          std::string::npos);
    CHECK(csp.find("script-src 'sha256-" + base64_from_hex(payrecon::sha256_hex(script)) + "'") !=
          std::string::npos);
    CHECK(csp.find("unsafe") == std::string::npos);
}

TEST_CASE("reports: a failed run shows its failure, and a truncated list says so", "[reports]") {
    Report r = fixture();
    r.exit_code = 1;
    r.failure = "provider <stripe> said \"no\"";
    r.findings_truncated = true;
    const std::string html = render(r, Format::html);
    CHECK(html.find("id=\"failure\"") != std::string::npos);
    CHECK(html.find("provider &lt;stripe&gt; said &quot;no&quot;") != std::string::npos);
    CHECK(html.find("status-failed\" data-exit-code=\"1\"") != std::string::npos);
    CHECK(html.find("id=\"truncated\"") != std::string::npos);
    const std::string text = render(r, Format::text);
    CHECK(text.find("failure:") != std::string::npos);
    CHECK(text.find("1 (the run failed)") != std::string::npos);
    CHECK(text.find("more findings exist than are listed") != std::string::npos);
    CHECK(render(fixture(), Format::html).find("id=\"failure\"") == std::string::npos);
}

TEST_CASE("reports: write_report_file replaces the file whole", "[reports]") {
    TempDir dir;
    const fs::path path = dir.path() / "report.csv";
    {
        std::ofstream old(path);
        old << "old content that is longer than nothing\n";
    }
    write_report_file(path.string(), fixture(), Format::csv);
    CHECK(slurp(path) == render(fixture(), Format::csv));
    CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);
    CHECK_THROWS_WITH(write_report_file((dir.path() / "no" / "such" / "dir.csv").string(),
                                        fixture(), Format::csv),
                      Catch::Contains("cannot write the report to"));
}

TEST_CASE("reports: the HTML report in headless Chromium: screenshot, counts, and the category "
          "filter",
          "[reports][chromium]") {
    const std::string chromium = find_chromium();
    if (chromium.empty()) {
        FAIL("chromium is not installed: run scripts/bootstrap (it installs Debian's chromium "
             "package, which this test needs), or set PAYRECON_CHROMIUM to a Chromium binary");
    }
    const Report r = fixture();
    TempDir dir;
    const fs::path page = dir.path() / "report.html";
    write_report_file(page.string(), r, Format::html);
    const std::string url = "file://" + page.string();
    const auto timeout = std::chrono::seconds(120);

    SECTION("the page renders to a real screenshot") {
        const fs::path png = dir.path() / "report.png";
        auto cmd = chromium_command(chromium, dir.path() / "profile-shot");
        cmd.push_back("--hide-scrollbars");
        cmd.push_back("--window-size=1280,2000");
        cmd.push_back("--screenshot=" + png.string());
        cmd.push_back(url);
        const ProcessResult run = run_process(cmd, dir.path(), timeout);
        INFO(run.err);
        CHECK(run.exit_code == 0);
        REQUIRE(fs::exists(png));
        const std::string bytes = slurp(png);
        REQUIRE(bytes.size() > 24);
        CHECK(bytes.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
        const auto be32 = [&](std::size_t at) {
            return (static_cast<unsigned>(static_cast<unsigned char>(bytes[at])) << 24) |
                   (static_cast<unsigned>(static_cast<unsigned char>(bytes[at + 1])) << 16) |
                   (static_cast<unsigned>(static_cast<unsigned char>(bytes[at + 2])) << 8) |
                   static_cast<unsigned>(static_cast<unsigned char>(bytes[at + 3]));
        };
        CHECK(bytes.substr(12, 4) == "IHDR");
        CHECK(be32(16) == 1280);
        CHECK(be32(20) == 2000);
        CHECK(bytes.size() > 20000); // a blank page of that size is a few kilobytes
        if (const char* keep = std::getenv("PAYRECON_KEEP_SCREENSHOT"); keep && *keep) {
            fs::copy_file(png, keep, fs::copy_options::overwrite_existing);
        }
    }

    SECTION("after the script ran, every row shows and the counts are the report's") {
        auto cmd = chromium_command(chromium, dir.path() / "profile-all");
        cmd.push_back("--dump-dom");
        cmd.push_back(url);
        const ProcessResult run = run_process(cmd, dir.path(), timeout);
        CHECK(run.exit_code == 0);
        const std::string& dom = run.out;
        INFO(dom.substr(0, 400));
        CHECK(dom.find("data-filter=\"all\"") != std::string::npos); // the script ran
        std::map<std::string, long long> expected;
        for (const auto& [category, total] : r.totals) {
            expected[category] = total.count;
        }
        CHECK(dom_counts(dom) == expected);
        const auto rows = finding_rows(dom);
        CHECK(rows.size() == r.findings.size());
        CHECK(std::none_of(rows.begin(), rows.end(), [](const DomRow& row) { return row.hidden; }));
        CHECK(element_text(dom, "shown-count") == std::to_string(r.findings.size()));
        CHECK(element_text(dom, "rendered-count") == std::to_string(r.findings.size()));
        CHECK(dom.find("pi_&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
    }

    SECTION("#category=missing_local shows only missing_local rows") {
        auto cmd = chromium_command(chromium, dir.path() / "profile-filter");
        cmd.push_back("--dump-dom");
        cmd.push_back(url + "#category=missing_local");
        const ProcessResult run = run_process(cmd, dir.path(), timeout);
        CHECK(run.exit_code == 0);
        const std::string& dom = run.out;
        CHECK(dom.find("data-filter=\"missing_local\"") != std::string::npos);
        // The table holds the findings the filter passes, and only those.
        std::map<std::string, long long> visible;
        for (const DomRow& row : finding_rows(dom)) {
            CHECK_FALSE(row.hidden);
            ++visible[row.category];
        }
        CHECK(visible == std::map<std::string, long long>{{"missing_local", 3}});
        CHECK(element_text(dom, "shown-count") == "3");
        CHECK(element_text(dom, "rendered-count") == "3");
        CHECK(listed_per_category(r).at("missing_local") == 3);
        // The totals table still counts every category.
        CHECK(dom_counts(dom).at("matched") == 5);
    }

    SECTION("an unknown category in the fragment falls back to all") {
        auto cmd = chromium_command(chromium, dir.path() / "profile-unknown");
        cmd.push_back("--dump-dom");
        cmd.push_back(url + "#category=%3Cscript%3E");
        const ProcessResult run = run_process(cmd, dir.path(), timeout);
        CHECK(run.exit_code == 0);
        CHECK(run.out.find("data-filter=\"all\"") != std::string::npos);
        const auto rows = finding_rows(run.out);
        CHECK(rows.size() == r.findings.size());
        CHECK(std::none_of(rows.begin(), rows.end(), [](const DomRow& row) { return row.hidden; }));
    }
}

namespace {

// The width and height a PNG's IHDR gives.
std::pair<unsigned, unsigned> png_size(const std::string& png) {
    REQUIRE(png.size() > 24);
    REQUIRE(png.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
    REQUIRE(png.substr(12, 4) == "IHDR");
    const auto be32 = [&](std::size_t at) {
        unsigned v = 0;
        for (std::size_t i = 0; i < 4; ++i) {
            v = (v << 8) | static_cast<unsigned char>(png[at + i]);
        }
        return v;
    };
    return {be32(16), be32(20)};
}

// A real click: the mouse pressed and released at the middle of the element `selector` finds,
// which must be on screen and not covered by anything else.
void click(DevToolsBrowser& browser, const std::string& session, const std::string& selector) {
    const json at = browser.evaluate(
        session, "(function () { var e = document.querySelector('" + selector +
                     "'); e.scrollIntoView({block: 'center'}); var r = e.getBoundingClientRect();"
                     " var x = r.left + r.width / 2, y = r.top + r.height / 2;"
                     " var hit = document.elementFromPoint(x, y);"
                     " return {x: x, y: y, hit: hit === e || e.contains(hit)}; })()");
    INFO(selector << " at " << at.dump());
    REQUIRE(at["hit"] == true);
    for (const char* type : {"mousePressed", "mouseReleased"}) {
        browser.call(
            "Input.dispatchMouseEvent",
            {{"type", type}, {"x", at["x"]}, {"y", at["y"]}, {"button", "left"}, {"clickCount", 1}},
            session);
    }
}

// Sets a <select> or <input> as a person would, and fires the event the page listens to.
void choose(DevToolsBrowser& browser, const std::string& session, const std::string& id,
            const std::string& value, const char* event) {
    browser.evaluate(session, "(function () { var e = document.getElementById('" + id +
                                  "'); e.value = " + json(value).dump() +
                                  "; e.dispatchEvent(new Event('" + event +
                                  "', {bubbles: true})); })()");
}

// The visible finding rows, in page order: each row's data attributes.
json visible_rows(DevToolsBrowser& browser, const std::string& session) {
    return browser.evaluate(
        session, "Array.prototype.slice.call(document.querySelectorAll('#findings tbody "
                 "tr[data-category]')).filter(function (r) { return !r.hidden; }).map("
                 "function (r) { return {category: r.dataset.category, attention: "
                 "r.dataset.attention === 'true', currency: r.dataset.currency, risk: "
                 "parseFloat(r.dataset.risk), local: r.dataset.local === undefined ? null : "
                 "parseFloat(r.dataset.local), at: r.dataset.at === undefined ? null : "
                 "Number(r.dataset.at), ref: r.dataset.ref}; })");
}

// The values of `key` of `rows` that are not null, in order.
std::vector<double> present(const json& rows, const char* key) {
    std::vector<double> out;
    for (const auto& row : rows) {
        if (!row[key].is_null()) {
            out.push_back(row[key].get<double>());
        }
    }
    return out;
}

// For each finding row marked as needing attention: where its first cell's text starts (the first
// glyph, and the content box, where a card's ::before label goes) and where the attention bar ends
// -- the right edge of the widest left border or left inset shadow of the row and of the cell --
// and where the row starts, all in CSS pixels from the viewport's left.
json attention_bars(DevToolsBrowser& browser, const std::string& session) {
    return browser.evaluate(
        session,
        "Array.prototype.slice.call(document.querySelectorAll('#findings tbody tr.attention'))"
        ".map(function (tr) {"
        "  var td = tr.cells[0], bar = -Infinity;"
        "  [tr, td].forEach(function (e) {"
        "    var style = getComputedStyle(e), box = e.getBoundingClientRect();"
        "    var inner = box.left + parseFloat(style.borderLeftWidth);"
        "    if (parseFloat(style.borderLeftWidth) > 0) { bar = Math.max(bar, inner); }"
        "    style.boxShadow.split(/,(?![^(]*\\))/).forEach(function (shadow) {"
        "      if (!/inset/.test(shadow)) { return; }"
        "      var x = parseFloat(shadow.replace(/rgba?\\([^)]*\\)/, '').trim());"
        "      if (x > 0) { bar = Math.max(bar, inner + x); }"
        "    });"
        "  });"
        "  var node = document.createTreeWalker(td, NodeFilter.SHOW_TEXT).nextNode();"
        "  var range = document.createRange();"
        "  range.setStart(node, 0); range.setEnd(node, 1);"
        "  var cell = getComputedStyle(td);"
        "  return {bar: bar, row: Math.min(tr.getBoundingClientRect().left,"
        "           td.getBoundingClientRect().left),"
        "          glyph: range.getBoundingClientRect().left, letter: node.data.charAt(0),"
        "          content: td.getBoundingClientRect().left + parseFloat(cell.borderLeftWidth) +"
        "           parseFloat(cell.paddingLeft)};"
        "})");
}

// The outerHTML of each finding row the page's markup holds, read by the browser's own parser
// from `html` (a DOMParser document runs no script), in order.
json markup_rows(DevToolsBrowser& browser, const std::string& session, const std::string& html) {
    return browser.evaluate(
        session, "Array.prototype.slice.call(new DOMParser().parseFromString(" + json(html).dump() +
                     ", 'text/html').querySelectorAll('#findings tbody tr')).map(function (r) { "
                     "return r.outerHTML; })");
}

json live_rows(DevToolsBrowser& browser, const std::string& session) {
    return browser.evaluate(session,
                            "Array.prototype.slice.call(document.querySelectorAll('#findings "
                            "tbody tr')).map(function (r) { return r.outerHTML; })");
}

} // namespace

TEST_CASE("reports: the HTML report in headless Chromium at 1280 and 800 px: nothing scrolls "
          "sideways, the attention bar is left of the text, the money at risk leads, and sorting "
          "and filtering work",
          "[reports][chromium]") {
    const std::string chromium = find_chromium();
    if (chromium.empty()) {
        FAIL("chromium is not installed: run scripts/bootstrap (it installs Debian's chromium "
             "package, which this test needs), or set PAYRECON_CHROMIUM to a Chromium binary");
    }
    Report r = fixture();
    // A long row: UUIDs as our IDs, and a long detail, as real findings have.
    r.findings[1].payment_id = "3f1c2a9e-8b7d-4e6f-9a1b-2c3d4e5f6a7b";
    r.findings[1].operation_id = "pr_0193f1c2a9e87b7d4e6f9a1b2c3d4e5f";
    r.findings[1].detail = "We say succeeded and the provider has no record of it in the window "
                           "nor in the margin around it: check the provider's dashboard first.";
    TempDir dir;
    const fs::path page = dir.path() / "report.html";
    write_report_file(page.string(), r, Format::html);
    const std::string url = "file://" + page.string();
    DevToolsBrowser browser(chromium, dir.path() / "profile");

    for (const int width : {1280, 800}) {
        INFO("at " << width << " px");
        const std::string session = browser.open(url, width, 800);

        // The script renders the table from the page's data; each row as the markup has it.
        const json markup = markup_rows(browser, session, slurp(page));
        CHECK(markup.size() == r.findings.size());
        CHECK(live_rows(browser, session) == markup);

        // The attention bar (a shadow in the table, the card's edge at 800 px) lies left of the
        // text: it once covered the first letter of every card (issue 36).
        const json bars = attention_bars(browser, session);
        CHECK(bars.size() == 9); // all but the matched finding
        for (const auto& bar : bars) {
            INFO(bar.dump());
            CHECK(bar["bar"].get<double>() - bar["row"].get<double>() >= 2); // still there
            CHECK(bar["glyph"].get<double>() >= bar["bar"].get<double>() + 2);
            CHECK(bar["content"].get<double>() >= bar["bar"].get<double>() + 2);
        }

        const std::string png = browser.screenshot(session);
        CHECK(png_size(png) == std::make_pair(static_cast<unsigned>(width), 800U));
        CHECK(png.size() > 20000); // a blank page of that size is a few kilobytes
        if (const char* keep = std::getenv("PAYRECON_KEEP_SCREENSHOT"); keep && *keep) {
            std::ofstream(std::string(keep) + "-" + std::to_string(width) + ".png",
                          std::ios::binary)
                << png;
        }

        // Nothing wider than the window, and every cell of every finding inside it.
        CHECK(browser.evaluate(session, "Math.max(document.documentElement.scrollWidth, "
                                        "document.body.scrollWidth) <= window.innerWidth") == true);
        CHECK(browser.evaluate(session,
                               "Array.prototype.slice.call(document.querySelectorAll('#findings "
                               "td')).filter(function (td) { return "
                               "td.getBoundingClientRect().right > window.innerWidth + 0.5; "
                               "}).length") == 0);
        if (width == 1280) {
            // A table; each reference on one line (a UUID does not wrap).
            CHECK(browser.evaluate(session, "getComputedStyle(document.querySelector('#findings "
                                            "thead')).display") == "table-header-group");
            CHECK(browser.evaluate(
                      session, "Array.prototype.slice.call(document.querySelectorAll('#findings "
                               ".refs .id')).filter(function (e) { return "
                               "e.getClientRects().length !== 1; }).length") == 0);
        } else {
            // Cards with labelled lines instead of columns.
            CHECK(browser.evaluate(session, "getComputedStyle(document.querySelector('#findings "
                                            "thead')).display") == "none");
            CHECK(browser.evaluate(session, "getComputedStyle(document.querySelector('#findings "
                                            "td.detail'), '::before').content") == "\"detail\"");
        }

        // The headline: money at risk per currency, as the report counts it.
        const json risks = browser.evaluate(
            session, "Array.prototype.slice.call(document.querySelectorAll('#at-risk .risk'))"
                     ".map(function (e) { return [e.dataset.currency, Number(e.dataset.minor), "
                     "e.getBoundingClientRect().top < window.innerHeight]; })");
        REQUIRE(risks.size() == r.at_risk.size());
        for (const auto& risk : risks) {
            CHECK(r.at_risk.at(risk[0].get<std::string>()) == risk[1].get<long long>());
            CHECK(risk[2] == true); // above the fold
        }
        CHECK(browser.evaluate(session, "document.querySelector('#at-risk').textContent")
                  .get<std::string>()
                  .find("25.00 EUR") != std::string::npos);

        // First view: needing attention first, then the largest money at risk.
        json rows = visible_rows(browser, session);
        REQUIRE(rows.size() == r.findings.size());
        for (std::size_t i = 1; i < rows.size(); ++i) {
            INFO("row " << i << ": " << rows[i].dump());
            CHECK(rows[i - 1]["attention"].get<bool>() >= rows[i]["attention"].get<bool>());
            if (rows[i - 1]["attention"] == rows[i]["attention"]) {
                CHECK(rows[i - 1]["risk"].get<double>() >= rows[i]["risk"].get<double>());
            }
        }

        // Sort by our amount: the column head at 1280 (clicked twice: largest, then smallest
        // first), the order menu at 800 (where the heads are hidden).
        if (width == 1280) {
            click(browser, session, "#findings th[data-sort-key=local] button");
            CHECK(browser.evaluate(session,
                                   "document.querySelector('#findings "
                                   "th[data-sort-key=local]').getAttribute('aria-sort')") ==
                  "descending");
            auto locals = present(visible_rows(browser, session), "local");
            CHECK(std::is_sorted(locals.rbegin(), locals.rend()));
            click(browser, session, "#findings th[data-sort-key=local] button");
        } else {
            choose(browser, session, "sort-by", "local-asc", "change");
        }
        rows = visible_rows(browser, session);
        auto locals = present(rows, "local");
        CHECK(locals.size() == 6); // the rest have no amount of ours
        CHECK(std::is_sorted(locals.begin(), locals.end()));
        CHECK(rows.back()["local"].is_null()); // rows without our amount come last
        CHECK(browser.evaluate(session, "document.getElementById('sort-by').value") == "local-asc");

        // Oldest first by time.
        choose(browser, session, "sort-by", "at-asc", "change");
        const auto times = present(visible_rows(browser, session), "at");
        CHECK(times ==
              std::vector<double>{1796126400, 1796126400, 1796126465, 1796126465, 1796126465});

        // Filter by currency, then by text; the counts follow, and the URL keeps the view.
        choose(browser, session, "currency-filter", "EUR", "change");
        rows = visible_rows(browser, session);
        CHECK(rows.size() == 4); // matched, amount, currency (ours in EUR), status
        for (const auto& row : rows) {
            CHECK(row["currency"] == "EUR");
        }
        CHECK(browser.evaluate(session, "document.getElementById('shown-count').textContent") ==
              std::to_string(rows.size()));
        choose(browser, session, "currency-filter", "all", "change");
        choose(browser, session, "finding-search", "ORDER-2", "input");
        rows = visible_rows(browser, session);
        REQUIRE(rows.size() == 1);
        CHECK(rows[0]["category"] == "missing_remote");
        CHECK(browser.evaluate(session, "location.hash") == "#q=ORDER-2&sort=at-asc");

        // The same view from the address alone.
        const std::string again = browser.open(url + "#currency=JPY&sort=ref-asc", width, 800);
        CHECK(browser.evaluate(again, "document.body.getAttribute('data-sort')") == "ref-asc");
        rows = visible_rows(browser, again);
        REQUIRE(rows.size() == 1);
        CHECK(rows[0]["currency"] == "JPY");
        CHECK(browser.evaluate(again, "document.getElementById('currency-filter').value") == "JPY");
    }
}

TEST_CASE("reports: the HTML report of 20000 findings is under 400 bytes a finding and in Chromium "
          "every finding is reachable: page by page and by search and sort and filter",
          "[reports][chromium]") {
    const std::string chromium = find_chromium();
    if (chromium.empty()) {
        FAIL("chromium is not installed: run scripts/bootstrap (it installs Debian's chromium "
             "package, which this test needs), or set PAYRECON_CHROMIUM to a Chromium binary");
    }
    const Report r = payrecon::test::many_findings(20000);
    TempDir dir;
    const fs::path page = dir.path() / "report.html";
    write_report_file(page.string(), r, Format::html);
    const std::string html = slurp(page);
    // 1,500 bytes a finding as 20,000 rows of markup (30 MB, most of a minute in Chromium); the
    // data block holds each finding's IDs, amounts, times and detail in about 300.
    CHECK(html.size() < 400 * r.findings.size());
    CHECK(finding_rows(html).size() == 100); // the first page, for a reader without JavaScript
    CHECK(json::parse(between(html, "<script type=\"application/json\" id=\"findings-data\">",
                              "</script>"))["findings"]
              .size() == r.findings.size());

    // The first view's order: needing attention first, then the largest money at risk.
    std::vector<const Finding*> order;
    for (const Finding& f : r.findings) {
        order.push_back(&f);
    }
    const auto risk = [](const Finding& f) {
        const auto at = at_risk(f);
        return at ? std::stod(*payrecon::major_units(at->minor, at->currency)) : 0.0;
    };
    std::stable_sort(order.begin(), order.end(), [&](const Finding* a, const Finding* b) {
        return a->needs_attention != b->needs_attention ? a->needs_attention : risk(*a) > risk(*b);
    });
    const auto ids = [&](std::size_t from, std::size_t to) {
        json out = json::array();
        for (std::size_t i = from; i < to; ++i) {
            out.push_back(*order[i]->finding_id);
        }
        return out;
    };
    const std::string shown_ids =
        "Array.prototype.slice.call(document.querySelectorAll('#findings tbody tr')).map("
        "function (r) { return r.dataset.findingId; })";
    const auto text_of = [](const std::string& id) {
        return "document.getElementById('" + id + "').textContent";
    };

    // Without JavaScript: the first page as markup, and a note on where the rest are.
    json markup_ids = json::array();
    const std::string table = between(html, "<table id=\"findings\"", "</table>");
    const std::regex finding_id("<tr data-category=[^>]* data-finding-id=\"([^\"]+)\"");
    for (auto it = std::sregex_iterator(table.begin(), table.end(), finding_id);
         it != std::sregex_iterator(); ++it) {
        markup_ids.push_back((*it)[1].str());
    }
    CHECK(markup_ids == ids(0, 100));
    CHECK(html.find("<div id=\"more\" class=\"more\">") != std::string::npos); // not hidden
    CHECK(html.find("<noscript> The rest need JavaScript") != std::string::npos);

    DevToolsBrowser browser(chromium, dir.path() / "profile");
    const std::string session = browser.open("file://" + page.string(), 1280, 800);
    CHECK(browser.evaluate(session, shown_ids) == ids(0, 100));
    CHECK(browser.evaluate(session, text_of("shown-count")) == "20000");
    CHECK(browser.evaluate(session, text_of("rendered-count")) == "100");
    CHECK(browser.evaluate(session, "document.getElementById('more').hidden") == false);

    // Show more: the next page, in order, under the first.
    click(browser, session, "#show-more");
    CHECK(browser.evaluate(session, shown_ids) == ids(0, 200));
    CHECK(browser.evaluate(session, text_of("rendered-count")) == "200");

    // The finding the first view puts last, by its ID.
    const Finding& last = *order.back();
    choose(browser, session, "finding-search", *last.finding_id, "input");
    CHECK(browser.evaluate(session, shown_ids) == json::array({*last.finding_id}));
    CHECK(browser.evaluate(session, text_of("shown-count")) == "1");
    CHECK(browser.evaluate(session, "document.getElementById('more').hidden") == true);
    choose(browser, session, "finding-search", "", "input");

    // Oldest first, then newest first: each end of the day, wherever the first view has it.
    const auto at = [](const Finding* f) {
        return std::min(f->local_at.value_or(LLONG_MAX), f->remote_at.value_or(LLONG_MAX));
    };
    const auto oldest = *std::min_element(order.begin(), order.end(),
                                          [&](auto* a, auto* b) { return at(a) < at(b); });
    const auto newest = *std::max_element(order.begin(), order.end(),
                                          [&](auto* a, auto* b) { return at(a) < at(b); });
    choose(browser, session, "sort-by", "at-asc", "change");
    CHECK(browser.evaluate(session, shown_ids)[0] == *oldest->finding_id);
    choose(browser, session, "sort-by", "at-desc", "change");
    CHECK(browser.evaluate(session, shown_ids)[0] == *newest->finding_id);
    CHECK(browser.evaluate(session, text_of("rendered-count")) == "100"); // a new order, page 1

    // Every finding of a category, all at once: Show all puts each in the table, once.
    choose(browser, session, "category-filter", "missing_local", "change");
    click(browser, session, "#show-all");
    std::set<std::string> expected;
    for (const Finding& f : r.findings) {
        if (f.category == "missing_local") {
            expected.insert(*f.finding_id);
        }
    }
    const json all = browser.evaluate(session, shown_ids);
    CHECK(all.size() == expected.size());
    CHECK(std::set<std::string>(all.begin(), all.end()) == expected);
    CHECK(browser.evaluate(session, text_of("shown-count")) == std::to_string(expected.size()));
    CHECK(browser.evaluate(session, text_of("rendered-count")) == std::to_string(expected.size()));
    CHECK(browser.evaluate(session, "document.getElementById('more').hidden") == true);
}
