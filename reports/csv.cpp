// The CSV writer and its parser (RFC 4180). One row per listed finding, columns k_csv_columns.
//
// Absent values are empty fields; a present empty text is written as "" (quoted), so the two
// parse back apart. Amounts are integers in minor units. Formula injection: a spreadsheet runs a
// cell that starts with = + - @ (and tab or CR) as a formula, and provider text reaches these
// cells, so every text value that starts with one of those characters -- or with ' itself, so
// that parsing back stays exact -- is written with one leading ' (which spreadsheets hide), and
// parse_findings_csv() removes it. Integer columns are written by us and never get the quote.

#include "reports/writers.hpp"

#include <charconv>
#include <iterator>
#include <stdexcept>

namespace payrecon::reports {
namespace {

constexpr std::size_t k_columns = std::size(k_csv_columns);

bool starts_formula(std::string_view text) {
    if (text.empty()) {
        return false;
    }
    switch (text.front()) {
    case '=':
    case '+':
    case '-':
    case '@':
    case '\t':
    case '\r':
    case '\'':
        return true;
    default:
        return false;
    }
}

void put_field(std::ostream& out, std::string_view value, bool force_quotes) {
    const bool quote = force_quotes || value.find_first_of(",\"\r\n") != std::string_view::npos;
    if (!quote) {
        out << value;
        return;
    }
    out << '"';
    for (const char c : value) {
        if (c == '"') {
            out << '"';
        }
        out << c;
    }
    out << '"';
}

void put_text(std::ostream& out, std::string_view text) {
    if (starts_formula(text)) {
        put_field(out, "'" + std::string(text), false);
    } else {
        put_field(out, text, text.empty());
    }
}

void put_text(std::ostream& out, const std::optional<std::string>& text) {
    if (text) {
        put_text(out, std::string_view(*text));
    }
}

void put_integer(std::ostream& out, const std::optional<long long>& value) {
    if (value) {
        out << *value;
    }
}

struct Field {
    std::string value;
    bool quoted = false;
};

[[noreturn]] void fail(std::size_t line, const std::string& what) {
    throw std::runtime_error("report CSV, line " + std::to_string(line) + ": " + what);
}

// Splits `data` into records of fields. `lines` receives each record's first line number.
std::vector<std::vector<Field>> split_records(const std::string& data,
                                              std::vector<std::size_t>& lines) {
    std::vector<std::vector<Field>> records;
    std::vector<Field> record;
    Field field;
    std::size_t line = 1;
    std::size_t record_line = 1;
    std::size_t i = 0;
    bool field_started = false; // something (even an empty field before a comma) was read
    const auto end_record = [&] {
        record.push_back(std::move(field));
        field = Field{};
        records.push_back(std::move(record));
        record.clear();
        lines.push_back(record_line);
        field_started = false;
    };
    while (i < data.size()) {
        const char c = data[i];
        if (c == '"' && field.value.empty() && !field.quoted) {
            field.quoted = true;
            field_started = true;
            const std::size_t open_line = line;
            ++i;
            for (;;) {
                if (i >= data.size()) {
                    fail(open_line, "a quoted field is never closed");
                }
                if (data[i] == '"') {
                    if (i + 1 < data.size() && data[i + 1] == '"') {
                        field.value += '"';
                        i += 2;
                        continue;
                    }
                    ++i;
                    break;
                }
                if (data[i] == '\n') {
                    ++line;
                }
                field.value += data[i++];
            }
            if (i < data.size() && data[i] != ',' && data[i] != '\r' && data[i] != '\n') {
                fail(line, "text after a closing quote");
            }
            continue;
        }
        if (c == ',') {
            record.push_back(std::move(field));
            field = Field{};
            field_started = true;
            ++i;
            continue;
        }
        if (c == '\r' || c == '\n') {
            if (c == '\r') {
                if (i + 1 >= data.size() || data[i + 1] != '\n') {
                    fail(line, "a bare CR outside quotes");
                }
                ++i;
            }
            ++i;
            end_record();
            ++line;
            record_line = line;
            continue;
        }
        if (field.quoted) {
            fail(line, "text after a closing quote");
        }
        if (c == '"') {
            fail(line, "a quote inside an unquoted field");
        }
        field.value += c;
        field_started = true;
        ++i;
    }
    if (field_started || !record.empty()) {
        end_record(); // the last record had no line end
    }
    return records;
}

std::optional<std::string> text_of(const Field& f) {
    if (f.value.empty() && !f.quoted) {
        return std::nullopt;
    }
    if (!f.value.empty() && f.value.front() == '\'') {
        return f.value.substr(1);
    }
    return f.value;
}

std::optional<long long> integer_of(const Field& f, std::size_t line, std::string_view column) {
    if (f.value.empty() && !f.quoted) {
        return std::nullopt;
    }
    long long value = 0;
    const char* first = f.value.data();
    const char* last = first + f.value.size();
    const auto [ptr, ec] = std::from_chars(first, last, value);
    if (f.value.empty() || ec != std::errc{} || ptr != last) {
        fail(line, std::string(column) + " is not an integer: " + printable(f.value));
    }
    return value;
}

} // namespace

void write_csv(std::ostream& out, const Report& report) {
    for (std::size_t i = 0; i < k_columns; ++i) {
        out << (i ? "," : "") << k_csv_columns[i];
    }
    out << "\r\n";
    for (const Finding& f : report.findings) {
        put_text(out, std::string_view(f.category));
        out << ',' << (f.needs_attention ? "true" : "false") << ',';
        put_text(out, std::string_view(f.provider));
        out << ',';
        put_text(out, f.payment_id);
        out << ',';
        put_text(out, f.operation_id);
        out << ',';
        put_text(out, f.provider_reference);
        out << ',';
        put_integer(out, f.local_amount);
        out << ',';
        put_text(out, f.local_currency);
        out << ',';
        put_text(out, f.local_state);
        out << ',';
        put_integer(out, f.remote_amount);
        out << ',';
        put_text(out, f.remote_currency);
        out << ',';
        put_text(out, f.remote_state);
        out << ',';
        put_text(out, std::string_view(f.detail));
        out << "\r\n";
    }
}

std::vector<Finding> parse_findings_csv(std::istream& in) {
    const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::size_t> lines;
    const auto records = split_records(data, lines);
    if (records.empty()) {
        fail(1, "no header row");
    }
    const auto& header = records.front();
    bool header_ok = header.size() == k_columns;
    for (std::size_t i = 0; header_ok && i < k_columns; ++i) {
        header_ok = header[i].value == k_csv_columns[i];
    }
    if (!header_ok) {
        fail(1, "the header row is not the report's columns (category,needs_attention,...)");
    }
    std::vector<Finding> findings;
    for (std::size_t r = 1; r < records.size(); ++r) {
        const auto& row = records[r];
        const std::size_t line = lines[r];
        if (row.size() != k_columns) {
            fail(line,
                 std::to_string(row.size()) + " fields, expected " + std::to_string(k_columns));
        }
        Finding f;
        f.category = text_of(row[0]).value_or("");
        if (row[1].value == "true") {
            f.needs_attention = true;
        } else if (row[1].value == "false") {
            f.needs_attention = false;
        } else {
            fail(line, "needs_attention is neither true nor false: " + printable(row[1].value));
        }
        f.provider = text_of(row[2]).value_or("");
        f.payment_id = text_of(row[3]);
        f.operation_id = text_of(row[4]);
        f.provider_reference = text_of(row[5]);
        f.local_amount = integer_of(row[6], line, k_csv_columns[6]);
        f.local_currency = text_of(row[7]);
        f.local_state = text_of(row[8]);
        f.remote_amount = integer_of(row[9], line, k_csv_columns[9]);
        f.remote_currency = text_of(row[10]);
        f.remote_state = text_of(row[11]);
        f.detail = text_of(row[12]).value_or("");
        findings.push_back(std::move(f));
    }
    return findings;
}

} // namespace payrecon::reports
