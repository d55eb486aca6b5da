// The HTML writer: one self-contained page a finance lead reads in a minute. No external
// resource at all -- no fonts, images, stylesheets or scripts from anywhere -- and a
// Content-Security-Policy that allows only this page's own inline style and script (by their
// SHA-256), so that even a provider text that slipped past escaping could not run or load
// anything. The only addresses in it are the provider dashboard links of findings (from the
// provider configuration's template, the reference percent-encoded), opened by a click only.
//
// Reading order: the money at risk per currency (the headline), the charts (matched left out, so
// that the findings stay readable), the totals, the findings -- needing attention first, largest
// money at risk first, each with its references, times and difference; sortable by any column and
// filterable by category, currency and text -- and the run's facts. At 980 px and narrower each
// finding is a card of labelled lines, so that nothing scrolls sideways.
//
// The findings table holds a page (k_page) at a time. Every listed finding is in one JSON data
// block (findings_data()); the script filters and sorts that data and renders the first page of
// the result, Show more the next, Show all the rest. 20,000 findings as rows of markup took
// Chromium half a minute and more to show (issue 36); as data they take about 300 bytes each and
// show in about a second (bench/report). The markup holds the first page too, exactly as the
// script renders it, for a reader without JavaScript (a <noscript> note says where the rest are).
//
// Stable hooks (tests/reports read them): #status[data-exit-code], #at-risk
// .risk[data-currency][data-minor], #facts, #chart-categories, #chart-currencies,
// #totals td[data-count-for=CATEGORY], #category-filter, #currency-filter, #finding-search,
// #sort-by, #findings th[data-sort-key][aria-sort], #findings tbody tr[data-category]
// [data-attention][data-currency][data-risk][data-local][data-remote][data-at][data-ref]
// [data-finding-id][data-handled], #handled[data-count] (findings an operator acknowledged),
// #shown-count (the findings the filters pass), #rendered-count (how many of them the table
// holds), #listed-count, #more with #show-more and #show-all (hidden when the table holds them
// all). The table holds only findings the filters pass; the URL fragment
// (#category=NAME&currency=EUR&q=TEXT&sort=KEY-DIR) sets the filters and order on load and follows
// them.

#include "core/fingerprint.hpp"
#include "core/money.hpp"
#include "reports/writers.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>
#include <vector>

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
a { color: #1f4fb5; }
.muted { color: var(--muted); }
.status { display: inline-block; padding: 1px 10px; border-radius: 999px; font-weight: 600; }
.status-clean { background: var(--ok-bg); color: var(--ok); }
.status-attention { background: var(--attn-bg); color: var(--attn); }
.status-failed { background: var(--attn); color: #fff; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: 14px 18px; margin: 16px 0; min-width: 0; }
.failure { border-left: 4px solid var(--attn); white-space: pre-wrap; overflow-wrap: anywhere; }
.headline .risks { display: flex; flex-wrap: wrap; gap: 10px 36px; margin: 4px 0 8px; }
.headline .risk { font-size: 26px; font-weight: 700; color: var(--attn);
  font-variant-numeric: tabular-nums; }
.headline.clean .none { font-size: 18px; font-weight: 600; color: var(--ok); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 18px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(420px, 100%), 1fr));
  gap: 16px; margin: 16px 0; }
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
th button { font: inherit; color: inherit; background: none; border: 0; padding: 0;
  cursor: pointer; }
th button::after { content: " \2195"; color: var(--line); }
th[aria-sort=ascending] button::after { content: " \2191"; color: var(--fg); }
th[aria-sort=descending] button::after { content: " \2193"; color: var(--fg); }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td .state, td .sub { color: var(--muted); font-size: 12px; }
td .tag { color: var(--attn); font-size: 12px; font-weight: 600; }
td.absent { color: var(--muted); }
td.risk-cell { font-weight: 600; }
td.risk-cell .sub { font-weight: 400; white-space: normal; min-width: 7em; }
td.detail { min-width: 14em; overflow-wrap: break-word; white-space: pre-wrap; }
.refs div { white-space: nowrap; }
.refs .k { display: inline-block; width: 5.2em; color: var(--muted); font-size: 12px; }
.id { font: 11.5px/1.5 ui-monospace, "DejaVu Sans Mono", monospace; }
time { white-space: nowrap; }
tr.attention td:first-child { box-shadow: inset 3px 0 0 var(--attn); }
.filter { display: flex; flex-wrap: wrap; gap: 8px 14px; align-items: center; margin-bottom: 10px; }
.filter label { display: flex; gap: 6px; align-items: center; }
.more { display: flex; flex-wrap: wrap; gap: 8px 14px; align-items: center; margin-top: 10px; }
.more[hidden] { display: none; }
select, input { font: inherit; padding: 3px 6px; max-width: 100%; }
@media (max-width: 980px) {
  body { padding: 16px 12px 32px; }
  .card { padding: 12px; }
  #findings thead { display: none; }
  #findings, #findings tbody, #findings tr, #findings td { display: block; width: 100%; }
  #findings tr { border: 1px solid var(--line); border-radius: 6px; margin: 0 0 10px;
    padding: 6px 8px; }
  /* The card's own left edge is the mark: an inset shadow on the first cell, as in the table,
     would lie over the cell's first letters, which a card does not pad. */
  #findings tr.attention { border-left: 4px solid var(--attn); }
  #findings tr.attention td:first-child { box-shadow: none; }
  #findings td { border: 0; padding: 2px 0; text-align: left; white-space: normal; }
  #findings td::before { content: attr(data-label); display: block; color: var(--muted);
    font-size: 11px; text-transform: uppercase; letter-spacing: .04em; }
  .refs div { white-space: normal; overflow-wrap: anywhere; }
  td.detail { min-width: 0; }
}
)css";

constexpr std::string_view k_script = R"js(
(function () {
  'use strict';
  function byId(id) { return document.getElementById(id); }
  var has = Object.prototype.hasOwnProperty;
  var table = byId('findings');
  var tbody = table.tBodies[0];
  // Every listed finding, as reports/html.cpp's findings_data() writes them; the table holds the
  // first `page` of those the filters pass, in the chosen order, and Show more adds the next.
  var data = JSON.parse(byId('findings-data').textContent);
  var page = Number(table.getAttribute('data-page')) || 100;
  var category = byId('category-filter');
  var currency = byId('currency-filter');
  var search = byId('finding-search');
  var sortBy = byId('sort-by');
  var shown = byId('shown-count');
  var rendered = byId('rendered-count');
  var more = byId('more');
  var showMore = byId('show-more');
  var showAll = byId('show-all');
  var heads = Array.prototype.slice.call(table.querySelectorAll('th[data-sort-key]'));
  var numeric = { risk: true, local: true, remote: true, at: true };
  var state = { category: 'all', currency: 'all', q: '', key: 'risk', dir: 'desc' };
  var matching = [];
  var limit = page;

  // The texts the page's own markup shows, written as reports/html.cpp writes them.
  function text(i) { return i === null || i === undefined ? null : data.strings[i]; }
  function value(v) { return v === undefined ? null : v; }
  function upper(code) { return code.replace(/[a-z]+/g, function (s) { return s.toUpperCase(); }); }
  // core/money's major_units: "12.34" for 1234 EUR; null for a currency ISO 4217 does not know.
  function major(minor, code) {
    if (!has.call(data.exponents, code)) { return null; }
    var e = data.exponents[code], s = String(minor), sign = '';
    if (s.charAt(0) === '-') { sign = '-'; s = s.slice(1); }
    if (e > 0) {
      while (s.length <= e) { s = '0' + s; }
      s = s.slice(0, s.length - e) + '.' + s.slice(s.length - e);
    }
    return sign + s;
  }
  // core/money's describe_money, and display_amount.
  function money(minor, code) {
    var c = upper(code), m = major(minor, c);
    return m === null ? String(minor) + ' ' + c + ' (minor units)' : m + ' ' + c;
  }
  function amount(minor, code) {
    return minor === null ? '-' : code === null ? String(minor) : money(minor, code);
  }
  function sortNumber(minor, code) {
    var m = code === null ? null : major(minor, upper(code));
    return m === null ? String(minor) : m;
  }
  // A time is unix seconds, or [seconds, its ISO text] where JavaScript would write it otherwise.
  function seconds(t) { return Array.isArray(t) ? t[0] : t; }
  function iso(t) {
    return Array.isArray(t) ? t[1] : new Date(t * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
  }

  function decode(r, index) {
    var f = {
      index: index, category: text(r[0]), attention: (r[1] & 1) !== 0, handled: (r[1] & 2) !== 0,
      provider: text(r[2]), currency: text(r[3]), risk: value(r[4]), riskCurrency: text(r[5]),
      difference: value(r[6]),
      local: { amount: value(r[7]), currency: text(r[8]), state: text(r[9]), at: value(r[10]) },
      remote: { amount: value(r[11]), currency: text(r[12]), state: text(r[13]), at: value(r[14]) },
      order: value(r[15]), reference: value(r[16]), link: value(r[17]), payment: value(r[18]),
      operation: value(r[19]), finding: value(r[20]), detail: text(r[21]), others: r[22] || [],
      note: r[23] ? r[23].map(text) : null, refund: value(r[24])
    };
    if (typeof f.link === 'number') { f.link = data.links[f.link] + f.reference; }
    f.attrs = {
      risk: f.risk === null ? '0' : sortNumber(f.risk, f.riskCurrency),
      local: f.local.amount === null ? null : sortNumber(f.local.amount, f.local.currency),
      remote: f.remote.amount === null ? null : sortNumber(f.remote.amount, f.remote.currency)
    };
    var at = f.local.at === null ? null : seconds(f.local.at);
    if (f.remote.at !== null && (at === null || seconds(f.remote.at) < at)) { at = seconds(f.remote.at); }
    f.keys = {
      category: f.category, ref: f.order === null ? '' : f.order, at: at,
      risk: parseFloat(f.attrs.risk),
      local: f.attrs.local === null ? null : parseFloat(f.attrs.local),
      remote: f.attrs.remote === null ? null : parseFloat(f.attrs.remote)
    };
    return f;
  }
  var findings = data.findings.map(decode);

  // A row as [tag, attributes, children...], the same elements, attributes and text, in the same
  // order, as the page's markup: a no-JavaScript reader and this script see one table.
  function timeLine(t) {
    var i = iso(t);
    return ['div', { 'class': 'sub' }, 'at ',
      ['time', { datetime: i, title: i + ' (UTC)' }, i.slice(0, 10) + ' ' + i.slice(11, 16) + 'Z']];
  }
  function side(label, s) {
    if (s.amount === null && s.state === null && s.at === null) {
      return ['td', { 'class': 'num absent', 'data-label': label }, '-'];
    }
    var a = { 'class': 'num', 'data-label': label };
    if (s.amount !== null) { a['data-minor'] = String(s.amount); }
    return ['td', a, amount(s.amount, s.currency), ['div', { 'class': 'state' }, s.state === null ? '-' : s.state],
      s.at === null ? null : timeLine(s.at)];
  }
  function refs(f) {
    var cell = ['td', { 'class': 'refs', 'data-label': 'references' }];
    function line(label, v, link) {
      if (v === null) { return; }
      cell.push(['div', {}, ['span', { 'class': 'k' }, label], ' ', link === null
        ? ['span', { 'class': 'id' }, v]
        : ['a', { 'class': 'id', href: link, rel: 'noopener noreferrer', target: '_blank' }, v]]);
    }
    var provider = f.provider === '' ? 'provider' : f.provider;
    line('order', f.order, null);
    line(provider, f.reference, f.link);
    f.others.forEach(function (r) { line(provider, r, null); });
    line('payment', f.payment, null);
    line('refund', f.refund, null);
    line('operation', f.operation, null);
    line('finding', f.finding, null);
    if (cell.length === 2) { cell.push('-'); }
    return cell;
  }
  function rowSpec(f) {
    var a = { 'data-category': f.category, 'data-attention': f.attention ? 'true' : 'false',
      'data-currency': f.currency, 'data-risk': f.attrs.risk };
    if (f.attrs.local !== null) { a['data-local'] = f.attrs.local; }
    if (f.attrs.remote !== null) { a['data-remote'] = f.attrs.remote; }
    if (f.keys.at !== null) { a['data-at'] = String(f.keys.at); }
    a['data-ref'] = f.keys.ref;
    if (f.finding !== null) { a['data-finding-id'] = f.finding; }
    if (f.handled) { a['data-handled'] = 'true'; }
    if (f.attention) { a['class'] = 'attention'; }
    return ['tr', a,
      ['td', { 'data-label': 'category' }, f.category,
        f.attention ? ['div', { 'class': 'tag' }, 'needs attention'] : null,
        f.handled ? ['div', { 'class': 'sub' }, 'handled'] : null,
        ['div', { 'class': 'sub' }, f.provider]],
      ['td', { 'class': 'num risk-cell', 'data-label': 'at risk' },
        f.risk === null ? '-' : money(f.risk, f.riskCurrency),
        f.difference === null ? null : ['div', { 'class': 'sub', 'data-difference': String(f.difference) },
          'ours \u2212 theirs: ' + money(f.difference, f.local.currency)]],
      side('ours', f.local), side('provider\'s', f.remote), refs(f),
      ['td', { 'class': 'detail', 'data-label': 'detail' }, f.detail, f.note === null ? null
        : ['div', { 'class': 'sub handled-note' },
          'handled by ' + f.note[0] + ' at ' + f.note[1] + ': ' + f.note[2]]]];
  }
  function build(spec) {
    var e = document.createElement(spec[0]);
    for (var name in spec[1]) {
      if (has.call(spec[1], name)) { e.setAttribute(name, spec[1][name]); }
    }
    for (var i = 2; i < spec.length; i++) {
      var c = spec[i];
      if (c === null || c === '') { continue; }
      e.appendChild(typeof c === 'string' ? document.createTextNode(c) : build(c));
    }
    return e;
  }
  function flat(spec) {
    var out = '';
    for (var i = 2; i < spec.length; i++) {
      var c = spec[i];
      out += c === null ? '' : typeof c === 'string' ? c : flat(c);
    }
    return out;
  }
  // What the text filter searches: the row's text, as a reader sees it; made once, when needed.
  function searchText(f) {
    if (f.text === undefined) { f.text = flat(rowSpec(f)).toLowerCase(); }
    return f.text;
  }

  function hasOption(select, v) {
    for (var i = 0; i < select.options.length; i++) {
      if (select.options[i].value === v) { return true; }
    }
    return false;
  }
  // Needing attention first; then the key (findings without a value last); then the page's order.
  function compare(a, b) {
    var att = b.attention - a.attention;
    if (state.key === 'risk' && att !== 0) { return att; }
    var sign = state.dir === 'asc' ? 1 : -1;
    var c = 0, x = a.keys[state.key], y = b.keys[state.key];
    if (numeric[state.key]) {
      if (x === null || y === null) { c = (x === null) - (y === null); sign = 1; }
      else { c = x < y ? -1 : x > y ? 1 : 0; }
    } else {
      if (!x || !y) { c = (!x) - (!y); sign = 1; }
      else { c = x < y ? -1 : x > y ? 1 : 0; }
    }
    if (c !== 0) { return c * sign; }
    return a.index - b.index;
  }
  // Adds rows up to `limit` of the matching findings, and says how many are in the table.
  function fill() {
    var end = Math.min(limit, matching.length);
    var rows = document.createDocumentFragment();
    for (var i = tbody.rows.length; i < end; i++) { rows.appendChild(build(rowSpec(matching[i]))); }
    tbody.appendChild(rows);
    var left = matching.length - end;
    rendered.textContent = String(end);
    more.hidden = left === 0;
    showMore.hidden = showAll.hidden = left === 0;
    showMore.textContent = 'Show ' + Math.min(page, left) + ' more';
    showAll.textContent = 'Show all ' + matching.length;
  }
  function apply() {
    if (!hasOption(category, state.category)) { state.category = 'all'; }
    if (!hasOption(currency, state.currency)) { state.currency = 'all'; }
    if (!hasOption(sortBy, state.key + '-' + state.dir)) { state.key = 'risk'; state.dir = 'desc'; }
    category.value = state.category;
    currency.value = state.currency;
    sortBy.value = state.key + '-' + state.dir;
    if (search.value !== state.q) { search.value = state.q; }
    var q = state.q.toLowerCase();
    matching = findings.filter(function (f) {
      return (state.category === 'all' || f.category === state.category) &&
             (state.currency === 'all' || f.currency === state.currency) &&
             (q === '' || searchText(f).indexOf(q) >= 0);
    });
    matching.sort(compare);
    limit = page;
    tbody.textContent = '';
    fill();
    heads.forEach(function (th) {
      var key = th.getAttribute('data-sort-key');
      th.setAttribute('aria-sort', key === state.key
        ? (state.dir === 'asc' ? 'ascending' : 'descending') : 'none');
    });
    shown.textContent = String(matching.length);
    document.body.setAttribute('data-filter', state.category);
    document.body.setAttribute('data-sort', state.key + '-' + state.dir);
  }
  function fragment() {
    var parts = [];
    if (state.category !== 'all') { parts.push('category=' + encodeURIComponent(state.category)); }
    if (state.currency !== 'all') { parts.push('currency=' + encodeURIComponent(state.currency)); }
    if (state.q !== '') { parts.push('q=' + encodeURIComponent(state.q)); }
    if (state.key !== 'risk' || state.dir !== 'desc') { parts.push('sort=' + state.key + '-' + state.dir); }
    return parts.join('&');
  }
  function changed() {
    apply();
    try { history.replaceState(null, '', '#' + fragment()); } catch (e) {}
  }
  function fromFragment() {
    // An anchor (#findings-section) is not a view: keep the view as it is.
    if (window.location.hash !== '' && window.location.hash.indexOf('=') < 0 && findings.length &&
        document.body.hasAttribute('data-sort')) { return; }
    state = { category: 'all', currency: 'all', q: '', key: 'risk', dir: 'desc' };
    window.location.hash.replace(/^#/, '').split('&').forEach(function (part) {
      var eq = part.indexOf('=');
      if (eq < 0) { return; }
      var name = part.slice(0, eq), v;
      try { v = decodeURIComponent(part.slice(eq + 1)); } catch (e) { return; }
      if (name === 'category' || name === 'currency' || name === 'q') { state[name] = v; }
      if (name === 'sort') {
        var m = /^([a-z]+)-(asc|desc)$/.exec(v);
        if (m) { state.key = m[1]; state.dir = m[2]; }
      }
    });
    apply();
  }
  category.addEventListener('change', function () { state.category = category.value; changed(); });
  currency.addEventListener('change', function () { state.currency = currency.value; changed(); });
  search.addEventListener('input', function () { state.q = search.value; changed(); });
  sortBy.addEventListener('change', function () {
    var m = /^([a-z]+)-(asc|desc)$/.exec(sortBy.value);
    if (m) { state.key = m[1]; state.dir = m[2]; changed(); }
  });
  heads.forEach(function (th) {
    th.querySelector('button').addEventListener('click', function () {
      var key = th.getAttribute('data-sort-key');
      if (state.key === key) { state.dir = state.dir === 'asc' ? 'desc' : 'asc'; }
      else { state.key = key; state.dir = numeric[key] ? 'desc' : 'asc'; }
      changed();
    });
  });
  showMore.addEventListener('click', function () { limit += page; fill(); });
  showAll.addEventListener('click', function () { limit = matching.length; fill(); });
  window.addEventListener('hashchange', fromFragment);
  fromFragment();
})();
)js";

// `text` as the page shows it: control characters other than tab, LF and CR (a parse error in
// HTML) as \xNN, and CR LF or a lone CR as LF (what the HTML parser makes of them). The markup
// and the script's data both hold this form, so that the two views show the same text.
std::string shown(std::string_view text) {
    static constexpr const char* k_hex = "0123456789abcdef";
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        const auto u = static_cast<unsigned char>(c);
        if (c == '\r') {
            if (i + 1 == text.size() || text[i + 1] != '\n') {
                out += '\n';
            }
            continue;
        }
        if ((u < 0x20 && c != '\t' && c != '\n') || u == 0x7f) {
            out += "\\x";
            out += k_hex[u >> 4];
            out += k_hex[u & 0x0f];
            continue;
        }
        out += c;
    }
    return out;
}

// shown(), with & < > " ' escaped: safe in element text and in double- or single-quoted
// attribute values.
std::string esc(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (const char c : shown(text)) {
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

std::string csp_hash(std::string_view source) {
    return "'sha256-" + base64(from_hex(sha256_hex(source)).value_or("")) + "'";
}

// A number for sorting: the amount in major units ("12.34"), so that amounts of currencies with
// different exponents sort as people read them; the minor units for an unknown currency.
std::string sort_number(long long minor, const std::optional<std::string>& currency) {
    if (currency) {
        if (auto major = major_units(minor, *currency)) {
            return *major;
        }
    }
    return std::to_string(minor);
}

// "at 2026-12-01 13:45Z" in a <time> whose title has the seconds, or nothing.
void time_line(std::ostream& out, const char* label, const std::optional<long long>& at) {
    if (!at) {
        return;
    }
    const std::string iso = format_utc_seconds(*at); // 2026-12-01T13:45:07Z
    const std::string shown = iso.substr(0, 10) + " " + iso.substr(11, 5) + "Z";
    out << "<div class=\"sub\">" << label << " <time datetime=\"" << iso << "\" title=\"" << iso
        << " (UTC)\">" << shown << "</time></div>";
}

// One side (ours or the provider's): the amount, its state and time under it.
void td_side(std::ostream& out, const char* label, const std::optional<long long>& minor,
             const std::optional<std::string>& currency, const std::optional<std::string>& state,
             const std::optional<long long>& at) {
    if (!minor && !state && !at) {
        out << "<td class=\"num absent\" data-label=\"" << label << "\">-</td>";
        return;
    }
    out << "<td class=\"num\" data-label=\"" << label << "\"";
    if (minor) {
        out << " data-minor=\"" << *minor << "\"";
    }
    out << ">" << esc(display_amount(minor, currency)) << "<div class=\"state\">"
        << (state ? esc(*state) : "-") << "</div>";
    time_line(out, "at", at);
    out << "</td>";
}

// The money at risk and, under it, the difference (ours minus theirs) where there is one.
void td_risk(std::ostream& out, const Finding& f) {
    const auto risk = at_risk(f);
    const auto diff = difference(f);
    out << "<td class=\"num risk-cell\" data-label=\"at risk\">"
        << (risk ? esc(describe_money(risk->minor, risk->currency)) : "-");
    if (diff) {
        out << "<div class=\"sub\" data-difference=\"" << *diff
            << "\">ours &minus; theirs: " << esc(describe_money(*diff, *f.local_currency))
            << "</div>";
    }
    out << "</td>";
}

// The finding's references, one per line: the merchant's order, our payment and operation, the
// provider's (linked to its dashboard page when there is one).
void td_refs(std::ostream& out, const Finding& f) {
    out << "<td class=\"refs\" data-label=\"references\">";
    bool any = false;
    const auto line = [&](const char* label, const std::optional<std::string>& value,
                          const std::optional<std::string>& link) {
        if (!value) {
            return;
        }
        any = true;
        out << "<div><span class=\"k\">" << esc(label) << "</span> ";
        if (link) {
            out << "<a class=\"id\" href=\"" << esc(*link)
                << "\" rel=\"noopener noreferrer\" target=\"_blank\">" << esc(*value) << "</a>";
        } else {
            out << "<span class=\"id\">" << esc(*value) << "</span>";
        }
        out << "</div>";
    };
    line("order", f.merchant_reference, std::nullopt);
    const char* provider = f.provider.empty() ? "provider" : f.provider.c_str();
    line(provider, f.provider_reference, f.provider_link);
    // The provider's other records of the key (a duplicate_remote's other charges), each by its
    // reference.
    for (const auto& r : f.provider_references) {
        if (r != f.provider_reference) {
            line(provider, r, std::nullopt);
        }
    }
    line("payment", f.payment_id, std::nullopt);
    line("refund", f.refund_id, std::nullopt);
    line("operation", f.operation_id, std::nullopt);
    line("finding", f.finding_id, std::nullopt);
    out << (any ? "" : "-") << "</td>";
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

constexpr std::string_view k_matched = "matched";
// Findings per page of the table: the markup holds the first page, the script adds one per Show
// more. A page of rows lays out in milliseconds; 20,000 took Chromium half a minute and more.
constexpr std::size_t k_page = 100;
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

// The categories the charts draw: all but `matched`, whose count (usually most of the records)
// would flatten every other bar.
std::vector<std::string> charted(const Report& report) {
    std::vector<std::string> out;
    for (const auto& category : report.categories) {
        if (category != k_matched) {
            out.push_back(category);
        }
    }
    return out;
}

void chart_categories(std::ostream& out, const Report& report,
                      const std::set<std::string>& attention) {
    const std::vector<std::string> categories = charted(report);
    long long max = 0;
    for (const auto& category : categories) {
        max = std::max(max, total_of(report, category).count);
    }
    const auto rows = static_cast<int>(categories.size());
    const int height = std::max(1, rows) * k_row + 8;
    out << "<svg id=\"chart-categories\" role=\"img\" aria-labelledby=\"chart-categories-title\" "
           "width=\""
        << k_chart_width << "\" height=\"" << height << "\" viewBox=\"0 0 " << k_chart_width << ' '
        << height << "\"><title id=\"chart-categories-title\">Findings by category</title>";
    if (categories.empty()) {
        out << "<text x=\"0\" y=\"16\">No categories.</text>";
    }
    int y = 4;
    for (const auto& category : categories) {
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
    for (const auto& category : charted(report)) {
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

namespace {

// The headline: the money at risk per currency, and how many findings need attention.
void headline(std::ostream& out, const Report& report) {
    const bool clean = report.at_risk.empty() && report.needing_attention == 0;
    out << "<section id=\"at-risk\" class=\"card headline" << (clean ? " clean" : "")
        << "\"><h2>Money at risk</h2>";
    if (clean) {
        out << "<div class=\"none\">Nothing at risk: no finding needs attention.</div>";
    } else {
        out << "<div class=\"risks\">";
        for (const auto& [currency, minor] : report.at_risk) {
            out << "<div class=\"risk\" data-currency=\"" << esc(currency) << "\" data-minor=\""
                << minor << "\">" << esc(describe_money(minor, currency)) << "</div>";
        }
        out << "</div><div>" << report.needing_attention
            << (report.needing_attention == 1 ? " finding needs" : " findings need")
            << " attention";
        if (report.findings_truncated) {
            out << " (all counted here; the table lists the first " << report.findings.size()
                << ")";
        }
        out << ". <a href=\"#findings-section\">The findings</a> come largest first.</div>";
    }
    if (report.handled > 0) {
        out << "<div id=\"handled\" data-count=\"" << report.handled << "\">" << report.handled
            << (report.handled == 1 ? " finding was" : " findings were")
            << " handled by an operator";
        bool first = true;
        for (const auto& [currency, minor] : report.handled_amounts) {
            out << (first ? " (" : ", ") << esc(describe_money(minor, currency));
            first = false;
        }
        out << (first ? "" : ")") << ": listed, marked handled, not counted above.</div>";
    }
    out << "<p class=\"muted\">A finding's money at risk: the difference where both sides hold "
           "the amount in one currency and disagree on it, else the whole amount (a charge one "
           "side lacks, a state the sides disagree on).</p></section>\n";
}

void totals_table(std::ostream& out, const Report& report, const std::set<std::string>& attention) {
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
}

// Upper-case currency of the finding: ours, else the provider's.
std::string finding_currency(const Finding& f) {
    std::string code = f.local_currency ? *f.local_currency : f.remote_currency.value_or("");
    for (char& c : code) {
        c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
    }
    return code;
}

// The filter bar: category, currency, text, and the order (which the column heads set too).
void filter_bar(std::ostream& out, const Report& report) {
    out << "<div class=\"filter\"><label>Category <select id=\"category-filter\">"
           "<option value=\"all\" selected>all</option>";
    for (const auto& category : report.categories) {
        out << "<option value=\"" << esc(category) << "\">" << esc(category) << " ("
            << total_of(report, category).count << ")</option>";
    }
    out << "</select></label><label>Currency <select id=\"currency-filter\">"
           "<option value=\"all\" selected>all</option>";
    std::set<std::string> currencies;
    for (const Finding& f : report.findings) {
        if (const std::string c = finding_currency(f); !c.empty()) {
            currencies.insert(c);
        }
    }
    for (const auto& c : currencies) {
        out << "<option value=\"" << esc(c) << "\">" << esc(c) << "</option>";
    }
    out << "</select></label><label>Find <input id=\"finding-search\" type=\"search\" "
           "placeholder=\"order, payment, reference, text\" size=\"24\"></label>"
           "<label>Order <select id=\"sort-by\">";
    static constexpr std::pair<const char*, const char*> k_orders[] = {
        {"risk-desc", "money at risk, largest first"},
        {"risk-asc", "money at risk, smallest first"},
        {"local-desc", "our amount, largest first"},
        {"local-asc", "our amount, smallest first"},
        {"remote-desc", "provider's amount, largest first"},
        {"remote-asc", "provider's amount, smallest first"},
        {"at-desc", "newest first"},
        {"at-asc", "oldest first"},
        {"category-asc", "category, A to Z"},
        {"category-desc", "category, Z to A"},
        {"ref-asc", "order reference, A to Z"},
        {"ref-desc", "order reference, Z to A"}};
    for (const auto& [value, label] : k_orders) {
        out << "<option value=\"" << value << "\">" << label << "</option>";
    }
    out << "</select></label><span class=\"muted\"><span id=\"shown-count\">"
        << report.findings.size() << "</span> of <span id=\"listed-count\">"
        << report.findings.size() << "</span> listed findings match</span></div>";
}

// A sortable column head.
void sort_head(std::ostream& out, const char* key, const char* label, bool numeric,
               const char* sorted = "none") {
    out << "<th" << (numeric ? " class=\"num\"" : "") << " data-sort-key=\"" << key
        << "\" aria-sort=\"" << sorted << "\"><button type=\"button\">" << label
        << "</button></th>";
}

void finding_row(std::ostream& out, const Finding& f) {
    const auto risk = at_risk(f);
    std::optional<long long> at = f.local_at;
    if (f.remote_at && (!at || *f.remote_at < *at)) {
        at = f.remote_at;
    }
    out << "<tr data-category=\"" << esc(f.category) << "\" data-attention=\""
        << (f.needs_attention ? "true" : "false") << "\" data-currency=\""
        << esc(finding_currency(f)) << "\" data-risk=\""
        << (risk ? sort_number(risk->minor, risk->currency) : "0") << "\"";
    if (f.local_amount) {
        out << " data-local=\"" << sort_number(*f.local_amount, f.local_currency) << "\"";
    }
    if (f.remote_amount) {
        out << " data-remote=\"" << sort_number(*f.remote_amount, f.remote_currency) << "\"";
    }
    if (at) {
        out << " data-at=\"" << *at << "\"";
    }
    out << " data-ref=\"" << esc(f.merchant_reference.value_or("")) << "\"";
    if (f.finding_id) {
        out << " data-finding-id=\"" << esc(*f.finding_id) << "\"";
    }
    if (f.handled) {
        out << " data-handled=\"true\"";
    }
    out << (f.needs_attention ? " class=\"attention\"" : "") << "><td data-label=\"category\">"
        << esc(f.category) << (f.needs_attention ? "<div class=\"tag\">needs attention</div>" : "")
        << (f.handled ? "<div class=\"sub\">handled</div>" : "") << "<div class=\"sub\">"
        << esc(f.provider) << "</div></td>";
    td_risk(out, f);
    td_side(out, "ours", f.local_amount, f.local_currency, f.local_state, f.local_at);
    td_side(out, "provider's", f.remote_amount, f.remote_currency, f.remote_state, f.remote_at);
    td_refs(out, f);
    out << "<td class=\"detail\" data-label=\"detail\">" << esc(f.detail);
    if (f.handled) {
        out << "<div class=\"sub handled-note\">handled by " << esc(f.handled->by) << " at "
            << esc(f.handled->at) << ": " << esc(f.handled->note) << "</div>";
    }
    out << "</td></tr>\n";
}

// Interns texts for findings_data(): each distinct text once, then its index.
class Texts {
public:
    nlohmann::json index(std::string_view text) {
        const auto [it, added] = m_index.try_emplace(shown(text), m_texts.size());
        if (added) {
            m_texts.push_back(it->first);
        }
        return it->second;
    }
    nlohmann::json index_or_null(const std::optional<std::string>& text) {
        return text ? index(*text) : nlohmann::json();
    }
    nlohmann::json all() const { return m_texts; }

private:
    std::unordered_map<std::string, std::size_t> m_index;
    std::vector<std::string> m_texts;
};

// An amount as JSON: a number where JavaScript holds it exactly, else its digits as text (the
// script only writes it out, digit by digit, as core/money does).
nlohmann::json amount_value(const std::optional<long long>& minor) {
    constexpr long long k_exact = 9007199254740991; // 2^53 - 1
    if (!minor) {
        return nullptr;
    }
    if (*minor > k_exact || *minor < -k_exact) {
        return std::to_string(*minor);
    }
    return *minor;
}

// A time as JSON: unix seconds where JavaScript's toISOString() writes what format_utc_seconds()
// does (years 1000 to 9999), else [seconds, that text].
nlohmann::json time_value(const std::optional<long long>& at) {
    constexpr long long k_first = -30610224000; // 1000-01-01T00:00:00Z
    constexpr long long k_end = 253402300800;   // 10000-01-01T00:00:00Z
    if (!at) {
        return nullptr;
    }
    if (*at >= k_first && *at < k_end) {
        return *at;
    }
    return nlohmann::json::array({*at, format_utc_seconds(*at)});
}

// Every listed finding in `order`, as one JSON data block the page's script reads and renders a
// page at a time: a row is an array (no member names repeated 20,000 times), texts that repeat
// (categories, states, currencies, details) are indices into one list, a dashboard link that is a
// prefix plus the provider reference is an index into a list of prefixes, and trailing absent
// values are left out. The layout is this page's own (the script beside it reads it), not an
// interface: scripts read --format json. Texts are shown() as the markup shows them; < > & are
// written \u003c \u003e \u0026, so that no text can end the <script> element.
void findings_data(std::ostream& out, const std::vector<const Finding*>& order) {
    Texts texts;
    std::vector<std::string> prefixes;
    std::map<std::string, int> exponents;
    const auto note_currency = [&](const std::optional<std::string>& code) {
        if (code) {
            std::string upper = *code;
            for (char& c : upper) {
                c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
            }
            if (const auto currency = find_currency(upper)) {
                exponents[shown(upper)] = currency->exponent;
            }
        }
    };
    const auto text = [](const std::optional<std::string>& value) {
        return value ? nlohmann::json(shown(*value)) : nlohmann::json();
    };
    nlohmann::json rows = nlohmann::json::array();
    for (const Finding* f : order) {
        const auto risk = at_risk(*f);
        nlohmann::json link;
        if (f->provider_link) {
            const std::string whole = shown(*f->provider_link);
            const std::string reference = shown(f->provider_reference.value_or(""));
            if (f->provider_reference && whole.size() > reference.size() &&
                whole.compare(whole.size() - reference.size(), reference.size(), reference) == 0) {
                const std::string prefix = whole.substr(0, whole.size() - reference.size());
                auto it = std::find(prefixes.begin(), prefixes.end(), prefix);
                if (it == prefixes.end()) {
                    it = prefixes.insert(prefixes.end(), prefix);
                }
                link = it - prefixes.begin();
            } else {
                link = whole;
            }
        }
        note_currency(f->local_currency);
        note_currency(f->remote_currency);
        if (risk) {
            note_currency(risk->currency);
        }
        nlohmann::json others = nlohmann::json::array();
        for (const auto& r : f->provider_references) {
            if (r != f->provider_reference) {
                others.push_back(shown(r));
            }
        }
        // In the order the script's decode() reads them.
        nlohmann::json row = {texts.index(f->category),
                              (f->needs_attention ? 1 : 0) | (f->handled ? 2 : 0),
                              texts.index(f->provider),
                              texts.index(finding_currency(*f)),
                              amount_value(risk ? std::optional(risk->minor) : std::nullopt),
                              risk ? texts.index(risk->currency) : nlohmann::json(),
                              amount_value(difference(*f)),
                              amount_value(f->local_amount),
                              texts.index_or_null(f->local_currency),
                              texts.index_or_null(f->local_state),
                              time_value(f->local_at),
                              amount_value(f->remote_amount),
                              texts.index_or_null(f->remote_currency),
                              texts.index_or_null(f->remote_state),
                              time_value(f->remote_at),
                              text(f->merchant_reference),
                              text(f->provider_reference),
                              link,
                              text(f->payment_id),
                              text(f->operation_id),
                              text(f->finding_id),
                              texts.index(f->detail),
                              others.empty() ? nlohmann::json() : others,
                              f->handled ? nlohmann::json::array({texts.index(f->handled->by),
                                                                  texts.index(f->handled->at),
                                                                  texts.index(f->handled->note)})
                                         : nlohmann::json(),
                              text(f->refund_id)};
        while (!row.empty() && row.back().is_null()) {
            row.erase(row.size() - 1);
        }
        rows.push_back(std::move(row));
    }
    nlohmann::json data = nlohmann::json::object();
    data["strings"] = texts.all();
    data["exponents"] = exponents;
    data["links"] = prefixes;
    data["findings"] = std::move(rows);
    out << "<script type=\"application/json\" id=\"findings-data\">";
    for (const char c : data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) {
        switch (c) {
        case '<':
            out << "\\u003c";
            break;
        case '>':
            out << "\\u003e";
            break;
        case '&':
            out << "\\u0026";
            break;
        default:
            out << c;
        }
    }
    out << "</script>\n";
}

void findings_section(std::ostream& out, const Report& report) {
    out << "<section id=\"findings-section\" class=\"card\"><h2>Findings</h2>";
    filter_bar(out, report);
    if (report.findings_truncated) {
        out << "<p id=\"truncated\" class=\"muted\">More findings exist than are listed here; "
               "the totals and the money at risk count them all.</p>";
    }
    out << "<table id=\"findings\" data-page=\"" << k_page << "\"><thead><tr>";
    sort_head(out, "category", "category", false);
    sort_head(out, "risk", "at risk", true, "descending");
    sort_head(out, "local", "ours", true);
    sort_head(out, "remote", "provider's", true);
    sort_head(out, "ref", "references", false);
    out << "<th>detail</th></tr></thead><tbody>";
    // Needing attention first, then the largest money at risk (in major units: amounts of
    // different currencies compare as people read them), then as the run found them -- the order
    // the script keeps until the reader picks another.
    std::vector<const Finding*> order;
    for (const Finding& f : report.findings) {
        order.push_back(&f);
    }
    const auto risk_of = [](const Finding& f) {
        const auto risk = at_risk(f);
        return risk ? std::strtod(sort_number(risk->minor, risk->currency).c_str(), nullptr) : 0.0;
    };
    std::stable_sort(order.begin(), order.end(), [&](const Finding* a, const Finding* b) {
        if (a->needs_attention != b->needs_attention) {
            return a->needs_attention;
        }
        return risk_of(*a) > risk_of(*b);
    });
    // The first page as markup, for a reader without JavaScript (and the first view of any
    // report of up to a page); the script renders the table from the data block instead.
    const std::size_t written = std::min(order.size(), k_page);
    for (std::size_t i = 0; i < written; ++i) {
        finding_row(out, *order[i]);
    }
    out << "</tbody></table>";
    if (report.findings.empty()) {
        out << "<p id=\"no-findings\" class=\"muted\">No findings listed.</p>";
    }
    out << "<div id=\"more\" class=\"more\"" << (written == order.size() ? " hidden" : "")
        << "><span class=\"muted\">In the table: the first <span id=\"rendered-count\">" << written
        << "</span> of them.<noscript> The rest need JavaScript, or the report as CSV or JSON "
           "(--format csv or json), which list every finding.</noscript></span>"
           "<button type=\"button\" id=\"show-more\" hidden>Show more</button>"
           "<button type=\"button\" id=\"show-all\" hidden>Show all</button></div>";
    findings_data(out, order);
    out << "</section>\n";
}

} // namespace

void write_html(std::ostream& out, const Report& report) {
    const std::set<std::string> attention = attention_categories(report);
    out << "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
        << csp_hash(k_style) << "; script-src " << csp_hash(k_script)
        << "; base-uri 'none'; form-action 'none'\">\n"
        << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        << "<meta name=\"referrer\" content=\"no-referrer\">\n"
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
    headline(out, report);

    out << "<div class=\"charts\"><section class=\"card\"><h2>Findings by category</h2>";
    chart_categories(out, report, attention);
    const CategoryTotal& matched = total_of(report, std::string(k_matched));
    if (matched.count > 0) {
        out << "<p id=\"matched-note\" class=\"muted\">matched: " << matched.count
            << " (in the totals; not charted, so that the rest stay readable)</p>";
    }
    out << "</section><section class=\"card\"><h2>Amounts by currency</h2>";
    chart_currencies(out, report, attention);
    out << "</section></div>\n";

    totals_table(out, report, attention);
    findings_section(out, report);

    if (!report.facts.empty()) {
        out << "<section class=\"card\"><h2>Run</h2><dl id=\"facts\" class=\"facts\">";
        for (const auto& [label, value] : report.facts) {
            out << "<dt>" << esc(label) << "</dt><dd>" << esc(value) << "</dd>";
        }
        out << "</dl></section>\n";
    }
    out << "<script>" << k_script << "</script>\n</body>\n</html>\n";
}

} // namespace payrecon::reports
