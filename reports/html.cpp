// The HTML writer: one self-contained page an operator opens in the morning. No external
// resource at all -- no fonts, images, stylesheets or scripts from anywhere -- and a
// Content-Security-Policy that allows only this page's own inline style and script (by their
// SHA-256), so that even a provider text that slipped past escaping could not run or load
// anything. The page's parts carry stable ids and data attributes (tests/reports read them):
//   #status[data-exit-code], #facts, #chart-categories, #chart-currencies,
//   #totals td[data-count-for=CATEGORY], #category-filter (a <select>, "all" first),
//   #findings tbody tr[data-category][data-attention], #shown-count.
// The filter hides non-matching rows with the `hidden` attribute; the URL fragment
// #category=NAME selects a category on load (and follows the select).

#include "core/fingerprint.hpp"
#include "core/money.hpp"
#include "reports/writers.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>

namespace payrecon::reports {
namespace {

constexpr std::string_view k_style = R"css(
:root { --bg: #f5f6f8; --fg: #1d2330; --muted: #5b6473; --line: #d9dde4; --card: #ffffff;
  --attn: #c4320a; --attn-bg: #fee4e2; --ok: #1a7f37; --ok-bg: #dcfce7; --bar: #3b6fd8; }
* { box-sizing: border-box; }
body { margin: 0; padding: 24px 32px 48px; background: var(--bg); color: var(--fg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
h1 { font-size: 20px; margin: 0 0 6px; overflow-wrap: anywhere; }
h2 { font-size: 15px; margin: 0 0 10px; }
.muted { color: var(--muted); }
.status { display: inline-block; padding: 1px 10px; border-radius: 999px; font-weight: 600; }
.status-clean { background: var(--ok-bg); color: var(--ok); }
.status-attention { background: var(--attn-bg); color: var(--attn); }
.status-failed { background: var(--attn); color: #fff; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: 14px 18px; margin: 16px 0; }
.failure { border-left: 4px solid var(--attn); white-space: pre-wrap; overflow-wrap: anywhere; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 18px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 16px; }
.charts .card { margin: 0; }
svg { display: block; max-width: 100%; height: auto; }
svg text { font: 12px system-ui, "DejaVu Sans", sans-serif; fill: var(--fg); }
svg text.currency { font-weight: 600; }
svg .bar { fill: var(--bar); }
svg .bar-attention { fill: var(--attn); }
svg .axis { stroke: var(--line); }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { color: var(--muted); font-weight: 600; white-space: nowrap; }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.text { overflow-wrap: break-word; white-space: pre-wrap; }
td.detail { min-width: 16em; }
.scroll { overflow-x: auto; }
td .state { color: var(--muted); font-size: 12px; }
td .tag { color: var(--attn); font-size: 12px; font-weight: 600; }
td.absent { color: var(--muted); }
tr.attention td:first-child { box-shadow: inset 3px 0 0 var(--attn); }
.filter { display: flex; gap: 12px; align-items: center; margin-bottom: 10px; }
select { font: inherit; padding: 3px 6px; }
)css";

constexpr std::string_view k_script = R"js(
(function () {
  'use strict';
  var select = document.getElementById('category-filter');
  var shown = document.getElementById('shown-count');
  var rows = Array.prototype.slice.call(
    document.querySelectorAll('#findings tbody tr[data-category]'));
  function known(name) {
    for (var i = 0; i < select.options.length; i++) {
      if (select.options[i].value === name) { return true; }
    }
    return false;
  }
  function apply(name) {
    if (!known(name)) { name = 'all'; }
    select.value = name;
    var visible = 0;
    rows.forEach(function (row) {
      var hide = name !== 'all' && row.getAttribute('data-category') !== name;
      row.hidden = hide;
      if (!hide) { visible++; }
    });
    shown.textContent = String(visible);
    document.body.setAttribute('data-filter', name);
  }
  function fromFragment() {
    var match = /^#category=(.*)$/.exec(window.location.hash);
    var name = 'all';
    if (match) {
      try { name = decodeURIComponent(match[1]); } catch (e) { name = 'all'; }
    }
    apply(name);
  }
  select.addEventListener('change', function () {
    apply(select.value);
    try { window.location.hash = 'category=' + encodeURIComponent(select.value); } catch (e) {}
  });
  window.addEventListener('hashchange', fromFragment);
  fromFragment();
})();
)js";

// & < > " ' escaped: safe in element text and in double- or single-quoted attribute values.
// Control characters other than tab, LF and CR (a parse error in HTML) are shown as \xNN.
std::string esc(std::string_view text) {
    static constexpr const char* k_hex = "0123456789abcdef";
    std::string out;
    out.reserve(text.size());
    for (const char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if ((u < 0x20 && c != '\t' && c != '\n' && c != '\r') || u == 0x7f) {
            out += "\\x";
            out += k_hex[u >> 4];
            out += k_hex[u & 0x0f];
            continue;
        }
        switch (c) {
        case '&':
            out += "&amp;";
            break;
        case '<':
            out += "&lt;";
            break;
        case '>':
            out += "&gt;";
            break;
        case '"':
            out += "&quot;";
            break;
        case '\'':
            out += "&#39;";
            break;
        default:
            out += c;
        }
    }
    return out;
}

// Standard base64 (with padding) of the bytes that `hex` spells: what CSP hash sources want.
std::string base64_of_hex(std::string_view hex) {
    static constexpr std::string_view k_alphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bytes;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
        bytes += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
    }
    std::string out;
    for (std::size_t i = 0; i < bytes.size(); i += 3) {
        const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
        unsigned v = 0;
        for (std::size_t k = 0; k < 3; ++k) {
            v = (v << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0U);
        }
        for (std::size_t k = 0; k < 4; ++k) {
            out += k <= n ? k_alphabet[(v >> (18 - 6 * k)) & 0x3f] : '=';
        }
    }
    return out;
}

std::string csp_hash(std::string_view source) {
    return "'sha256-" + base64_of_hex(sha256_hex(source)) + "'";
}

// Text cell: "-" (muted) when absent.
void td_text(std::ostream& out, const std::optional<std::string>& value) {
    if (value) {
        out << "<td class=\"text\">" << esc(*value) << "</td>";
    } else {
        out << "<td class=\"absent\">-</td>";
    }
}

// One side (ours or the provider's): the amount, and the state under it.
void td_side(std::ostream& out, const std::optional<long long>& minor,
             const std::optional<std::string>& currency, const std::optional<std::string>& state) {
    if (!minor && !state) {
        out << "<td class=\"num absent\">-</td>";
        return;
    }
    out << "<td class=\"num\"";
    if (minor) {
        out << " data-minor=\"" << *minor << "\"";
    }
    out << ">" << esc(display_amount(minor, currency)) << "<div class=\"state\">"
        << (state ? esc(*state) : "-") << "</div></td>";
}

const CategoryTotal& total_of(const Report& report, const std::string& category) {
    static const CategoryTotal k_none{};
    const auto it = report.totals.find(category);
    return it == report.totals.end() ? k_none : it->second;
}

// Categories in which a listed finding needs attention: their bars are drawn in the alarm colour.
std::set<std::string> attention_categories(const Report& report) {
    std::set<std::string> out;
    for (const Finding& f : report.findings) {
        if (f.needs_attention) {
            out.insert(f.category);
        }
    }
    return out;
}

constexpr int k_chart_width = 560;
constexpr int k_label_width = 170;
constexpr int k_bar_area = 280;
constexpr int k_row = 24;

long long bar_length(long long value, long long max) {
    if (max <= 0 || value <= 0) {
        return 0;
    }
    // In double: value * k_bar_area could overflow for large amounts in minor units.
    const double share = static_cast<double>(value) / static_cast<double>(max);
    return std::max(2LL, static_cast<long long>(share * k_bar_area));
}

void chart_categories(std::ostream& out, const Report& report,
                      const std::set<std::string>& attention) {
    long long max = 0;
    for (const auto& category : report.categories) {
        max = std::max(max, total_of(report, category).count);
    }
    const auto rows = static_cast<int>(report.categories.size());
    const int height = std::max(1, rows) * k_row + 8;
    out << "<svg id=\"chart-categories\" role=\"img\" aria-labelledby=\"chart-categories-title\" "
           "width=\""
        << k_chart_width << "\" height=\"" << height << "\" viewBox=\"0 0 " << k_chart_width << ' '
        << height << "\"><title id=\"chart-categories-title\">Findings by category</title>";
    if (report.categories.empty()) {
        out << "<text x=\"0\" y=\"16\">No categories.</text>";
    }
    int y = 4;
    for (const auto& category : report.categories) {
        const long long count = total_of(report, category).count;
        const long long len = bar_length(count, max);
        const char* cls = attention.count(category) ? "bar bar-attention" : "bar";
        out << "<g data-chart-category=\"" << esc(category) << "\" data-count=\"" << count
            << "\"><text x=\"" << k_label_width - 8 << "\" y=\"" << y + 15
            << "\" text-anchor=\"end\">" << esc(category) << "</text><rect class=\"" << cls
            << "\" x=\"" << k_label_width << "\" y=\"" << y + 3 << "\" width=\"" << len
            << "\" height=\"16\" rx=\"2\"><title>" << esc(category) << ": " << count
            << "</title></rect><text x=\"" << k_label_width + len + 6 << "\" y=\"" << y + 15
            << "\">" << count << "</text></g>";
        y += k_row;
    }
    out << "<line class=\"axis\" x1=\"" << k_label_width << "\" y1=\"2\" x2=\"" << k_label_width
        << "\" y2=\"" << height - 2 << "\"/></svg>";
}

// Per currency, one bar per category with an amount in it, scaled to that currency's largest
// amount (currencies are not comparable with each other, so each gets its own scale).
void chart_currencies(std::ostream& out, const Report& report,
                      const std::set<std::string>& attention) {
    std::map<std::string, std::vector<std::pair<std::string, long long>>> by_currency;
    for (const auto& category : report.categories) {
        for (const auto& [currency, minor] : total_of(report, category).amounts) {
            by_currency[currency].emplace_back(category, minor);
        }
    }
    int rows = 0;
    for (const auto& [currency, entries] : by_currency) {
        rows += 1 + static_cast<int>(entries.size());
    }
    const int height = std::max(1, rows) * k_row + 8;
    out << "<svg id=\"chart-currencies\" role=\"img\" aria-labelledby=\"chart-currencies-title\" "
           "width=\""
        << k_chart_width << "\" height=\"" << height << "\" viewBox=\"0 0 " << k_chart_width << ' '
        << height
        << "\"><title id=\"chart-currencies-title\">Amounts by currency and category</title>";
    if (by_currency.empty()) {
        out << "<text x=\"0\" y=\"16\">No amounts.</text>";
    }
    int y = 4;
    for (const auto& [currency, entries] : by_currency) {
        long long max = 0;
        for (const auto& entry : entries) {
            max = std::max(max, std::llabs(entry.second));
        }
        out << "<g data-chart-currency=\"" << esc(currency)
            << "\"><text class=\"currency\" x=\"0\" y=\"" << y + 15 << "\">" << esc(currency)
            << "</text>";
        y += k_row;
        for (const auto& [category, minor] : entries) {
            const long long len = bar_length(std::llabs(minor), max);
            const char* cls = attention.count(category) ? "bar bar-attention" : "bar";
            const std::string amount = describe_money(minor, currency);
            out << "<g data-chart-category=\"" << esc(category) << "\" data-minor=\"" << minor
                << "\"><text x=\"" << k_label_width - 8 << "\" y=\"" << y + 15
                << "\" text-anchor=\"end\">" << esc(category) << "</text><rect class=\"" << cls
                << "\" x=\"" << k_label_width << "\" y=\"" << y + 3 << "\" width=\"" << len
                << "\" height=\"16\" rx=\"2\"><title>" << esc(category) << ": " << esc(amount)
                << "</title></rect><text x=\"" << k_label_width + len + 6 << "\" y=\"" << y + 15
                << "\">" << esc(amount) << "</text></g>";
            y += k_row;
        }
        out << "</g>";
    }
    out << "</svg>";
}

void status_badge(std::ostream& out, int exit_code) {
    const char* cls = "status-attention";
    std::string text = "exit code " + std::to_string(exit_code);
    if (exit_code == 0) {
        cls = "status-clean";
        text = "clean";
    } else if (exit_code == 3) {
        text = "needs attention";
    } else if (exit_code == 1) {
        cls = "status-failed";
        text = "run failed";
    }
    out << "<span id=\"status\" class=\"status " << cls << "\" data-exit-code=\"" << exit_code
        << "\">" << esc(text) << "</span>";
}

} // namespace

void write_html(std::ostream& out, const Report& report) {
    const std::set<std::string> attention = attention_categories(report);
    out << "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
        << csp_hash(k_style) << "; script-src " << csp_hash(k_script)
        << "; base-uri 'none'; form-action 'none'\">\n"
        << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        << "<meta name=\"generator\" content=\"payrecon " << esc(k_report_schema) << "\">\n"
        << "<title>" << esc(report.title) << "</title>\n"
        << "<style>" << k_style << "</style>\n</head>\n"
        << "<body data-kind=\"" << esc(report.kind) << "\">\n";

    out << "<header><h1 id=\"title\">" << esc(report.title) << "</h1><div class=\"muted\">";
    status_badge(out, report.exit_code);
    out << " &middot; generated <time id=\"generated-at\" datetime=\"" << esc(report.generated_at)
        << "\">" << esc(report.generated_at) << "</time> &middot; " << esc(report.kind)
        << " report</div></header>\n";

    if (report.failure) {
        out << "<section id=\"failure\" class=\"card failure\"><strong>The run failed:</strong> "
            << esc(*report.failure) << "</section>\n";
    }

    if (!report.facts.empty()) {
        out << "<section class=\"card\"><h2>Run</h2><dl id=\"facts\" class=\"facts\">";
        for (const auto& [label, value] : report.facts) {
            out << "<dt>" << esc(label) << "</dt><dd>" << esc(value) << "</dd>";
        }
        out << "</dl></section>\n";
    }

    out << "<div class=\"charts\"><section class=\"card\"><h2>Findings by category</h2>";
    chart_categories(out, report, attention);
    out << "</section><section class=\"card\"><h2>Amounts by currency</h2>";
    chart_currencies(out, report, attention);
    out << "</section></div>\n";

    long long all = 0;
    out << "<section class=\"card\"><h2>Totals</h2><table id=\"totals\"><thead><tr>"
           "<th>category</th><th class=\"num\">count</th><th>amounts</th></tr></thead><tbody>";
    for (const auto& category : report.categories) {
        const CategoryTotal& total = total_of(report, category);
        all += total.count;
        out << "<tr data-category=\"" << esc(category) << "\""
            << (attention.count(category) ? " class=\"attention\"" : "") << "><td>" << esc(category)
            << "</td><td class=\"num\" data-count-for=\"" << esc(category) << "\">" << total.count
            << "</td><td>";
        bool first = true;
        for (const auto& [currency, minor] : total.amounts) {
            out << (first ? "" : ", ") << "<span class=\"amount\" data-currency=\"" << esc(currency)
                << "\" data-minor=\"" << minor << "\">" << esc(describe_money(minor, currency))
                << "</span>";
            first = false;
        }
        out << (first ? "-" : "") << "</td></tr>";
    }
    out << "</tbody><tfoot><tr><th>total</th><td class=\"num\" id=\"total-count\">" << all
        << "</td><td></td></tr></tfoot></table></section>\n";

    out << "<section class=\"card\"><h2>Findings</h2><div class=\"filter\">"
        << "<label for=\"category-filter\">Category</label>"
        << "<select id=\"category-filter\"><option value=\"all\" selected>all</option>";
    for (const auto& category : report.categories) {
        out << "<option value=\"" << esc(category) << "\">" << esc(category) << " ("
            << total_of(report, category).count << ")</option>";
    }
    out << "</select><span class=\"muted\">showing <span id=\"shown-count\">"
        << report.findings.size() << "</span> of <span id=\"listed-count\">"
        << report.findings.size() << "</span> listed findings</span></div>";
    if (report.findings_truncated) {
        out << "<p id=\"truncated\" class=\"muted\">More findings exist than are listed here; "
               "the totals count them all.</p>";
    }
    out << "<div class=\"scroll\"><table id=\"findings\"><thead><tr><th>category</th>"
           "<th>provider</th><th>payment</th><th>operation</th><th>provider reference</th>"
           "<th class=\"num\">ours</th><th class=\"num\">provider's</th><th>detail</th></tr>"
           "</thead><tbody>";
    for (const Finding& f : report.findings) {
        out << "<tr data-category=\"" << esc(f.category) << "\" data-attention=\""
            << (f.needs_attention ? "true" : "false") << "\""
            << (f.needs_attention ? " class=\"attention\"" : "") << "><td>" << esc(f.category)
            << (f.needs_attention ? "<div class=\"tag\">needs attention</div>" : "")
            << "</td><td class=\"text\">" << esc(f.provider) << "</td>";
        td_text(out, f.payment_id);
        td_text(out, f.operation_id);
        td_text(out, f.provider_reference);
        td_side(out, f.local_amount, f.local_currency, f.local_state);
        td_side(out, f.remote_amount, f.remote_currency, f.remote_state);
        out << "<td class=\"text detail\">" << esc(f.detail) << "</td></tr>\n";
    }
    out << "</tbody></table></div>";
    if (report.findings.empty()) {
        out << "<p id=\"no-findings\" class=\"muted\">No findings listed.</p>";
    }
    out << "</section>\n<script>" << k_script << "</script>\n</body>\n</html>\n";
}

} // namespace payrecon::reports
