#include "reports/report.hpp"

#include "core/money.hpp"

#include <algorithm>
#include <ctime>

namespace payrecon::reports {

std::vector<std::string_view> statement_categories(bool refunds) {
    std::vector<std::string_view> out;
    for (const FindingCategory c : k_charge_categories) {
        out.push_back(to_string(c));
    }
    if (refunds) {
        for (const FindingCategory c : k_refund_categories) {
            out.push_back(to_string(c));
        }
    }
    return out;
}

CategoryTotal& Report::total_of(const std::string& category) {
    if (std::find(categories.begin(), categories.end(), category) == categories.end()) {
        categories.push_back(category);
    }
    return totals[category];
}

std::optional<long long> difference(const Finding& f) {
    if (!f.local_amount || !f.remote_amount || !f.local_currency || !f.remote_currency ||
        !same_currency(*f.local_currency, *f.remote_currency)) {
        return std::nullopt;
    }
    return *f.local_amount - *f.remote_amount;
}

namespace {

std::string upper(std::string code) {
    for (char& c : code) {
        c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
    }
    return code;
}

// The amount a finding counts in its category's total: ours where we have one, else theirs.
std::optional<std::pair<std::string, long long>> counted_amount(const Finding& f) {
    if (f.local_amount && f.local_currency) {
        return std::make_pair(*f.local_currency, *f.local_amount);
    }
    if (f.remote_amount && f.remote_currency) {
        return std::make_pair(*f.remote_currency, *f.remote_amount);
    }
    return std::nullopt;
}

} // namespace

namespace {

std::optional<AtRisk> risk_of(const Finding& f) {
    if (const auto d = difference(f); d && *d != 0) {
        // |d| as unsigned arithmetic would be exact; amounts are far from the int64 limits.
        return AtRisk{upper(*f.local_currency), *d < 0 ? -*d : *d};
    }
    if (const auto amount = counted_amount(f)) {
        return AtRisk{upper(amount->first), amount->second < 0 ? -amount->second : amount->second};
    }
    return std::nullopt;
}

} // namespace

std::optional<AtRisk> at_risk(const Finding& f) {
    return f.needs_attention ? risk_of(f) : std::nullopt;
}

std::optional<AtRisk> handled_at_risk(const Finding& f) {
    return f.handled ? risk_of(f) : std::nullopt;
}

void Report::add(const Finding& f, bool list) {
    CategoryTotal& t = total_of(f.category);
    ++t.count;
    if (const auto amount = counted_amount(f)) {
        t.amounts[amount->first] += amount->second;
    }
    if (const auto risk = reports::at_risk(f)) {
        at_risk[risk->currency] += risk->minor;
    }
    needing_attention += f.needs_attention ? 1 : 0;
    if (f.handled) {
        ++handled;
        if (const auto risk = handled_at_risk(f)) {
            handled_amounts[risk->currency] += risk->minor;
        }
    }
    if (list) {
        findings.push_back(f);
    }
}

void Report::subtract(const Finding& f) {
    CategoryTotal& t = total_of(f.category);
    --t.count;
    if (const auto amount = counted_amount(f);
        amount && (t.amounts[amount->first] -= amount->second) == 0) {
        t.amounts.erase(amount->first);
    }
    if (const auto risk = reports::at_risk(f);
        risk && (at_risk[risk->currency] -= risk->minor) == 0) {
        at_risk.erase(risk->currency);
    }
    needing_attention -= f.needs_attention ? 1 : 0;
    if (f.handled) {
        --handled;
        if (const auto risk = handled_at_risk(f);
            risk && (handled_amounts[risk->currency] -= risk->minor) == 0) {
            handled_amounts.erase(risk->currency);
        }
    }
}

std::string summary_line(const Report& report) {
    if (report.failure) {
        return "the run FAILED: " + *report.failure;
    }
    if (report.needing_attention > 0) {
        return std::to_string(report.needing_attention) +
               (report.needing_attention == 1 ? " finding needs" : " findings need") + " attention";
    }
    if (report.exit_code == 3) {
        return "attention needed";
    }
    if (report.exit_code != 0) {
        return "exit " + std::to_string(report.exit_code);
    }
    long long records = 0;
    for (const auto& [category, total] : report.totals) {
        records += total.count;
    }
    return "clean, " + std::to_string(records) + (records == 1 ? " record" : " records");
}

void Report::add_counted(const std::string& category, long long count,
                         const std::map<std::string, long long>& amounts) {
    CategoryTotal& t = total_of(category);
    t.count += count;
    for (const auto& [currency, minor] : amounts) {
        t.amounts[currency] += minor;
    }
}

std::string format_utc(std::chrono::system_clock::time_point t) {
    return format_utc_seconds(
        std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count());
}

std::string format_utc_seconds(long long unix_seconds) {
    const std::time_t tt = static_cast<std::time_t>(unix_seconds);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

} // namespace payrecon::reports
