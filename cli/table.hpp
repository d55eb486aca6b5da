#pragma once
// Plain-text output for listings: aligned columns and "label: value" blocks. Every cell is made
// safe for a terminal first (control characters escaped), since provider text reaches it.

#include "reports/writers.hpp"

#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace payrecon::cli {

// `text` made safe for a terminal (reports::printable: C0, DEL and C1 controls escaped).
using reports::printable;

// Columns padded to their widest cell (counted in UTF-8 code points), two spaces apart; the last
// column is not padded. Cells are passed through printable().
class Table {
public:
    explicit Table(std::vector<std::string> headers);

    // Throws std::logic_error (a bug in the caller) if the row has another number of cells.
    void add_row(std::vector<std::string> cells);
    bool empty() const noexcept { return m_rows.empty(); }
    void print(std::ostream& out) const;

private:
    std::vector<std::string> m_headers;
    std::vector<std::vector<std::string>> m_rows;
};

// "label: value" lines with the values aligned, values passed through printable().
using Fields = std::vector<std::pair<std::string, std::string>>;
void print_fields(std::ostream& out, const Fields& fields, std::string_view indent = "");

} // namespace payrecon::cli
