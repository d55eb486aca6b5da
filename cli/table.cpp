#include "cli/table.hpp"

#include <algorithm>
#include <stdexcept>

namespace payrecon::cli {
namespace {

void pad(std::ostream& out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        out << ' ';
    }
}

} // namespace

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
        widths.push_back(reports::display_width(h));
    }
    for (const auto& row : m_rows) {
        for (std::size_t i = 0; i < row.size(); ++i) {
            widths[i] = std::max(widths[i], reports::display_width(row[i]));
        }
    }
    const auto print_row = [&](const std::vector<std::string>& cells) {
        for (std::size_t i = 0; i < cells.size(); ++i) {
            out << cells[i];
            if (i + 1 < cells.size()) {
                pad(out, widths[i] - reports::display_width(cells[i]) + 2);
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
        width = std::max(width, reports::display_width(label));
    }
    for (const auto& [label, value] : fields) {
        out << indent << label << ':';
        pad(out, width - reports::display_width(label) + 1);
        out << printable(value) << '\n';
    }
}

} // namespace payrecon::cli
