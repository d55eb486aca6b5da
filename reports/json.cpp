// The JSON writer: the schema is docs/report-schema.md (and docs/report.schema.json).

#include "reports/writers.hpp"

#include <nlohmann/json.hpp>

namespace payrecon::reports {
namespace {

using nlohmann::ordered_json;

template <typename T>
ordered_json or_null(const std::optional<T>& value) {
    return value ? ordered_json(*value) : ordered_json(nullptr);
}

ordered_json finding_json(const Finding& f) {
    ordered_json j;
    j["category"] = f.category;
    j["needs_attention"] = f.needs_attention;
    j["provider"] = f.provider;
    j["payment_id"] = or_null(f.payment_id);
    j["refund_id"] = or_null(f.refund_id);
    j["operation_id"] = or_null(f.operation_id);
    j["merchant_reference"] = or_null(f.merchant_reference);
    j["provider_reference"] = or_null(f.provider_reference);
    j["provider_link"] = or_null(f.provider_link);
    j["local_amount"] = or_null(f.local_amount);
    j["local_currency"] = or_null(f.local_currency);
    j["local_state"] = or_null(f.local_state);
    j["local_at"] = or_null(utc_or_null(f.local_at));
    j["remote_amount"] = or_null(f.remote_amount);
    j["remote_currency"] = or_null(f.remote_currency);
    j["remote_state"] = or_null(f.remote_state);
    j["remote_at"] = or_null(utc_or_null(f.remote_at));
    j["difference"] = or_null(difference(f));
    j["detail"] = f.detail;
    j["finding_id"] = or_null(f.finding_id);
    j["provider_references"] = f.provider_references;
    j["handled"] =
        f.handled
            ? ordered_json{{"by", f.handled->by}, {"at", f.handled->at}, {"note", f.handled->note}}
            : ordered_json(nullptr);
    return j;
}

} // namespace

nlohmann::ordered_json report_json(const Report& report) {
    ordered_json j;
    j["schema"] = k_report_schema;
    j["kind"] = report.kind;
    j["title"] = report.title;
    j["generated_at"] = report.generated_at;
    // Pairs, not an object: facts are ordered and a label may repeat.
    ordered_json facts = ordered_json::array();
    for (const auto& [label, value] : report.facts) {
        facts.push_back(ordered_json::array({label, value}));
    }
    j["facts"] = std::move(facts);
    j["categories"] = report.categories;
    ordered_json totals = ordered_json::object();
    for (const auto& category : report.categories) {
        const auto it = report.totals.find(category);
        const CategoryTotal total = it == report.totals.end() ? CategoryTotal{} : it->second;
        ordered_json amounts = ordered_json::object();
        for (const auto& [currency, minor] : total.amounts) {
            amounts[currency] = minor;
        }
        totals[category] = {{"count", total.count}, {"amounts", std::move(amounts)}};
    }
    j["totals"] = std::move(totals);
    ordered_json at_risk = ordered_json::object();
    for (const auto& [currency, minor] : report.at_risk) {
        at_risk[currency] = minor;
    }
    j["at_risk"] = std::move(at_risk);
    ordered_json handled_amounts = ordered_json::object();
    for (const auto& [currency, minor] : report.handled_amounts) {
        handled_amounts[currency] = minor;
    }
    j["handled"] = {{"count", report.handled}, {"amounts", std::move(handled_amounts)}};
    ordered_json findings = ordered_json::array();
    for (const Finding& f : report.findings) {
        findings.push_back(finding_json(f));
    }
    j["findings"] = std::move(findings);
    j["findings_truncated"] = report.findings_truncated;
    j["exit_code"] = report.exit_code;
    j["failure"] = or_null(report.failure);
    return j;
}

void write_json(std::ostream& out, const Report& report) {
    out << report_json(report).dump(2, ' ', false, ordered_json::error_handler_t::replace) << '\n';
}

} // namespace payrecon::reports
