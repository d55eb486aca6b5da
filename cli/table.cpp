#include "cli/table.hpp"

#include <algorithm>
#include <stdexcept>

namespace payrecon::cli {
namespace {

// Code points, not bytes: continuation bytes (10xxxxxx) do not start a character.
std::size_t display_width(std::string_view text) {
    return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
        return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    }));
}

void pad(std::ostream& out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        out << ' ';
    }
}

} // namespace

std::string printable(std::string_view text) {
    static constexpr const char* k_hex = "0123456789abcdef";
    std::string out;
    out.reserve(text.size());
    for (const char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        if (ch == '\\') {
            out += "\\\\";
        } else if (ch == '\n') {
            out += "\\n";
        } else if (ch == '\t') {
            out += "\\t";
        } else if (ch == '\r') {
            out += "\\r";
        } else if (c < 0x20 || c == 0x7f) {
            out += "\\x";
            out += k_hex[c >> 4];
            out += k_hex[c & 0x0f];
        } else {
            out += ch;
        }
    }
    return out;
}

Table::Table(std::vector<std::string> headers) : m_headers(std::move(headers)) {}

void Table::add_row(std::vector<std::string> cells) {
    if (cells.size() != m_headers.size()) {
        throw std::logic_error("Table::add_row: " + std::to_string(cells.size()) + " cells for " +
                               std::to_string(m_headers.size()) + " columns");
    }
    for (auto& cell : cells) {
        cell = printable(cell);
    }
    m_rows.push_back(std::move(cells));
}

void Table::print(std::ostream& out) const {
    std::vector<std::size_t> widths;
    widths.reserve(m_headers.size());
    for (const auto& h : m_headers) {
        widths.push_back(display_width(h));
    }
    for (const auto& row : m_rows) {
        for (std::size_t i = 0; i < row.size(); ++i) {
            widths[i] = std::max(widths[i], display_width(row[i]));
        }
    }
    const auto print_row = [&](const std::vector<std::string>& cells) {
        for (std::size_t i = 0; i < cells.size(); ++i) {
            out << cells[i];
            if (i + 1 < cells.size()) {
                pad(out, widths[i] - display_width(cells[i]) + 2);
            }
        }
        out << '\n';
    };
    print_row(m_headers);
    for (const auto& row : m_rows) {
        print_row(row);
    }
}

void print_fields(std::ostream& out, const Fields& fields, std::string_view indent) {
    std::size_t width = 0;
    for (const auto& [label, value] : fields) {
        width = std::max(width, display_width(label));
    }
    for (const auto& [label, value] : fields) {
        out << indent << label << ':';
        pad(out, width - display_width(label) + 1);
        out << printable(value) << '\n';
    }
}

} // namespace payrecon::cli
