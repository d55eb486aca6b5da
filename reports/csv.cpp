// The CSV writer and its parser (RFC 4180). One row per listed finding, columns k_csv_columns.
//
// Absent values are empty fields; a present empty text is written as "" (quoted), so the two
// parse back apart. Amounts are integers in minor units. Formula injection: a spreadsheet runs a
// cell that starts with = + - @ (and tab or CR) as a formula, and provider text reaches these
// cells, so every text value that starts with one of those characters -- or with ' itself, so
// that parsing back stays exact -- is written with one leading ' (which spreadsheets hide), and
// parse_findings_csv() removes it. Integer columns are written by us and never get the quote.

#include "core/money.hpp"
#include "core/settings.hpp"
#include "reports/writers.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <nlohmann/json.hpp>
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

namespace {

// The major-unit form of `minor` in `currency`, if both are there and the currency is known.
std::optional<std::string> major_of(const std::optional<long long>& minor,
                                    const std::optional<std::string>& currency) {
    if (!minor || !currency) {
        return std::nullopt;
    }
    return major_units(*minor, *currency);
}

// Writes the row's fields in k_csv_columns order.
void write_row(std::ostream& out, const Finding& f) {
    const auto diff = difference(f);
    const auto text = [&out](const auto& value) {
        put_text(out, value);
        out << ',';
    };
    const auto integer = [&out](const std::optional<long long>& value) {
        put_integer(out, value);
        out << ',';
    };
    // A number payrecon wrote ("-2.50"): never prefixed, so that a spreadsheet reads a number.
    const auto number = [&out](const std::optional<std::string>& value) {
        out << value.value_or("") << ',';
    };
    text(std::string_view(f.category));
    out << (f.needs_attention ? "true" : "false") << ',';
    text(std::string_view(f.provider));
    text(f.payment_id);
    text(f.operation_id);
    text(f.merchant_reference);
    text(f.provider_reference);
    integer(f.local_amount);
    number(major_of(f.local_amount, f.local_currency));
    text(f.local_currency);
    text(f.local_state);
    text(utc_or_null(f.local_at));
    integer(f.remote_amount);
    number(major_of(f.remote_amount, f.remote_currency));
    text(f.remote_currency);
    text(f.remote_state);
    text(utc_or_null(f.remote_at));
    integer(diff);
    number(major_of(diff, f.local_currency));
    text(f.provider_link);
    text(f.finding_id);
    text(f.provider_references.empty()
             ? std::nullopt
             : std::optional<std::string>(
                   nlohmann::json(f.provider_references)
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
    text(f.handled ? std::optional<std::string>(f.handled->by) : std::nullopt);
    text(f.handled ? std::optional<std::string>(f.handled->at) : std::nullopt);
    text(f.handled ? std::optional<std::string>(f.handled->note) : std::nullopt);
    text(std::string_view(f.detail));
    put_text(out, f.refund_id); // last: added after the others, so that their positions stay
    out << "\r\n";
}

// An ISO 8601 UTC time field back as unix seconds.
std::optional<long long> time_of(const Field& f, std::size_t line, std::string_view column) {
    const auto text = text_of(f);
    if (!text) {
        return std::nullopt;
    }
    try {
        return parse_utc_time(*text, column);
    } catch (const std::exception&) {
        fail(line, std::string(column) + " is not an ISO 8601 UTC time: " + printable(*text));
    }
}

// The column's index in k_csv_columns.
std::size_t column(std::string_view name) {
    for (std::size_t i = 0; i < k_columns; ++i) {
        if (k_csv_columns[i] == name) {
            return i;
        }
    }
    throw std::logic_error("no report CSV column " + std::string(name));
}

Finding read_row(const std::vector<Field>& row, std::size_t line) {
    const auto text = [&row](std::string_view name) { return text_of(row[column(name)]); };
    const auto integer = [&row, line](std::string_view name) {
        return integer_of(row[column(name)], line, name);
    };
    const auto time = [&row, line](std::string_view name) {
        return time_of(row[column(name)], line, name);
    };
    Finding f;
    f.category = text("category").value_or("");
    const std::string& attention = row[column("needs_attention")].value;
    if (attention != "true" && attention != "false") {
        fail(line, "needs_attention is neither true nor false: " + printable(attention));
    }
    f.needs_attention = attention == "true";
    f.provider = text("provider").value_or("");
    f.payment_id = text("payment_id");
    f.refund_id = text("refund_id");
    f.operation_id = text("operation_id");
    f.merchant_reference = text("merchant_reference");
    f.provider_reference = text("provider_reference");
    f.provider_link = text("provider_link");
    f.local_amount = integer("local_amount");
    f.local_currency = text("local_currency");
    f.local_state = text("local_state");
    f.local_at = time("local_at");
    f.remote_amount = integer("remote_amount");
    f.remote_currency = text("remote_currency");
    f.remote_state = text("remote_state");
    f.remote_at = time("remote_at");
    integer("difference"); // derived, but still an integer
    f.detail = text("detail").value_or("");
    f.finding_id = text("finding_id");
    if (const auto references = text("provider_references")) {
        const auto list = nlohmann::json::parse(*references, nullptr, false);
        const bool strings = list.is_array() && !list.empty() &&
                             std::all_of(list.begin(), list.end(),
                                         [](const nlohmann::json& r) { return r.is_string(); });
        if (!strings) {
            fail(line,
                 "provider_references is not a JSON array of strings: " + printable(*references));
        }
        for (const auto& r : list) {
            f.provider_references.push_back(r.get<std::string>());
        }
    }
    const auto by = text("handled_by");
    const auto at = text("handled_at");
    const auto note = text("handled_note");
    if (by.has_value() != at.has_value() || by.has_value() != note.has_value()) {
        fail(line, "handled_by, handled_at and handled_note go together");
    }
    if (by) {
        f.handled = FindingAcknowledgement{*by, *at, *note};
    }
    return f;
}

} // namespace

void write_csv(std::ostream& out, const Report& report) {
    for (std::size_t i = 0; i < k_columns; ++i) {
        out << (i ? "," : "") << k_csv_columns[i];
    }
    out << "\r\n";
    for (const Finding& f : report.findings) {
        write_row(out, f);
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
        findings.push_back(read_row(row, line));
    }
    return findings;
}

} // namespace payrecon::reports
