// The text writer: what an operator reads in a terminal. Every value passes through printable().

#include "core/money.hpp"
#include "reports/writers.hpp"

#include <algorithm>
#include <cstddef>

namespace payrecon::reports {
namespace {

void pad(std::ostream& out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        out << ' ';
    }
}

// Columns padded to their widest cell (in code points), two spaces apart; `right` columns are
// right-aligned; no line ends in blanks. Cells are passed through printable().
class TextTable {
public:
    TextTable(std::vector<std::string> headers, std::vector<bool> right)
        : m_headers(std::move(headers)), m_right(std::move(right)) {
        m_right.resize(m_headers.size(), false);
    }

    void add_row(std::vector<std::string> cells) {
        for (auto& cell : cells) {
            cell = printable(cell);
        }
        cells.resize(m_headers.size());
        m_rows.push_back(std::move(cells));
    }

    void print(std::ostream& out) const {
        std::vector<std::size_t> widths;
        for (const auto& h : m_headers) {
            widths.push_back(display_width(h));
        }
        for (const auto& row : m_rows) {
            for (std::size_t i = 0; i < row.size(); ++i) {
                widths[i] = std::max(widths[i], display_width(row[i]));
            }
        }
        const auto print_row = [&](const std::vector<std::string>& cells) {
            std::string line;
            for (std::size_t i = 0; i < cells.size(); ++i) {
                const std::string padding(widths[i] - display_width(cells[i]), ' ');
                line += m_right[i] ? padding + cells[i] : cells[i] + padding;
                if (i + 1 < cells.size()) {
                    line += "  ";
                }
            }
            // No trailing blanks (an empty or short last cell).
            line.erase(line.find_last_not_of(' ') + 1);
            out << line << '\n';
        };
        print_row(m_headers);
        for (const auto& row : m_rows) {
            print_row(row);
        }
    }

private:
    std::vector<std::string> m_headers;
    std::vector<bool> m_right;
    std::vector<std::vector<std::string>> m_rows;
};

std::string or_dash(const std::optional<std::string>& value) {
    return value ? *value : "-";
}

// Every provider reference of the finding ("pi_1, pi_2"), else the one it has, else "-".
std::string references_text(const Finding& f) {
    if (f.provider_references.size() < 2) {
        return or_dash(f.provider_reference);
    }
    std::string out;
    for (const auto& r : f.provider_references) {
        out += (out.empty() ? "" : ", ") + r;
    }
    return out;
}

// The detail, and who handled the finding with what note.
std::string detail_text(const Finding& f) {
    if (!f.handled) {
        return f.detail;
    }
    return f.detail + " [handled by " + f.handled->by + " at " + f.handled->at + ": " +
           f.handled->note + "]";
}

std::string amounts_text(const CategoryTotal& total) {
    std::string out;
    for (const auto& [currency, minor] : total.amounts) {
        if (!out.empty()) {
            out += ", ";
        }
        out += describe_money(minor, currency);
    }
    return out.empty() ? "-" : out;
}

std::string exit_text(int exit_code) {
    switch (exit_code) {
    case 0:
        return "0 (clean)";
    case 3:
        return "3 (findings need attention)";
    case 1:
        return "1 (the run failed)";
    default:
        return std::to_string(exit_code);
    }
}

} // namespace

void write_text(std::ostream& out, const Report& report) {
    out << printable(report.title) << '\n';
    std::vector<std::pair<std::string, std::string>> head = {
        {"generated at", report.generated_at}, {"exit code", exit_text(report.exit_code)}};
    if (report.failure) {
        head.emplace_back("failure", *report.failure);
    }
    if (!report.at_risk.empty()) {
        std::string risk;
        for (const auto& [currency, minor] : report.at_risk) {
            risk += (risk.empty() ? "" : ", ") + describe_money(minor, currency);
        }
        head.emplace_back("money at risk", risk);
    }
    if (report.handled > 0) {
        std::string amounts;
        for (const auto& [currency, minor] : report.handled_amounts) {
            amounts += (amounts.empty() ? "" : ", ") + describe_money(minor, currency);
        }
        head.emplace_back("handled", std::to_string(report.handled) +
                                         " finding(s) acknowledged by an operator" +
                                         (amounts.empty() ? "" : " (" + amounts + ")") +
                                         ": not in the money at risk");
    }
    head.insert(head.end(), report.facts.begin(), report.facts.end());
    std::size_t label_width = 0;
    for (const auto& [label, value] : head) {
        label_width = std::max(label_width, display_width(printable(label)));
    }
    for (const auto& [label, value] : head) {
        const std::string shown = printable(label);
        out << shown << ':';
        pad(out, label_width - display_width(shown) + 1);
        out << printable(value) << '\n';
    }

    out << '\n';
    TextTable totals({"category", "count", "amounts"}, {false, true, false});
    long long all = 0;
    for (const auto& category : report.categories) {
        const auto it = report.totals.find(category);
        const CategoryTotal total = it == report.totals.end() ? CategoryTotal{} : it->second;
        all += total.count;
        totals.add_row({category, std::to_string(total.count), amounts_text(total)});
    }
    totals.add_row({"total", std::to_string(all), ""});
    totals.print(out);

    out << '\n';
    if (report.findings.empty()) {
        out << "findings: none listed\n";
    } else {
        out << "findings (" << report.findings.size() << " listed):\n";
        TextTable findings({"finding", "category", "attention", "provider", "payment", "refund",
                            "operation", "order", "provider reference", "local", "local state",
                            "remote", "remote state", "detail"},
                           {false, false, false, false, false, false, false, false, false, true,
                            false, true, false, false});
        for (const Finding& f : report.findings) {
            findings.add_row({or_dash(f.finding_id), f.category,
                              f.handled ? "handled" : (f.needs_attention ? "yes" : "no"),
                              f.provider, or_dash(f.payment_id), or_dash(f.refund_id),
                              or_dash(f.operation_id), or_dash(f.merchant_reference),
                              references_text(f), display_amount(f.local_amount, f.local_currency),
                              or_dash(f.local_state),
                              display_amount(f.remote_amount, f.remote_currency),
                              or_dash(f.remote_state), detail_text(f)});
        }
        findings.print(out);
    }
    if (report.findings_truncated) {
        out << "(more findings exist than are listed here; the counts above include them all)\n";
    }
}

} // namespace payrecon::reports
