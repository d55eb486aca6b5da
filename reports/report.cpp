#include "reports/report.hpp"

#include "core/money.hpp"

#include <algorithm>

namespace payrecon::reports {

void Report::add(const Finding& f, bool list) {
    if (std::find(categories.begin(), categories.end(), f.category) == categories.end()) {
        categories.push_back(f.category);
    }
    CategoryTotal& t = totals[f.category];
    ++t.count;
    if (f.local_amount && f.local_currency) {
        t.amounts[*f.local_currency] += *f.local_amount;
    } else if (f.remote_amount && f.remote_currency) {
        t.amounts[*f.remote_currency] += *f.remote_amount;
    }
    if (list) {
        findings.push_back(f);
    }
}

std::string format_amount(long long minor, const std::string& currency) {
    try {
        return format_money(Money{minor, currency});
    } catch (const std::exception&) {
        return std::to_string(minor) + " " + currency;
    }
}

} // namespace payrecon::reports
