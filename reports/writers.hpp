#pragma once
// The report writers: one Report (report.hpp) rendered as a terminal table, JSON
// (docs/report-schema.md), CSV (RFC 4180, one row per listed finding) or one self-contained HTML
// page (inline CSS, SVG and script; no external resource of any kind). Every writer treats the
// provider-supplied text in a report (references, states, details) as hostile: text escapes
// control characters, CSV defends against formula injection, HTML escapes & < > " ' and forbids
// everything but its own inline style and script with a Content-Security-Policy.

#include "core/encoding.hpp"
#include "reports/report.hpp"

#include <istream>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon::reports {

enum class Format { text, json, csv, html };

// "text", "json", "csv", "html" (exact, lower case); nullopt for anything else.
std::optional<Format> parse_format(std::string_view name);
std::string_view format_name(Format format);

// Renders `report` in `format`. Writes to the stream only; the caller checks the stream's state.
void write_report(std::ostream& out, const Report& report, Format format);

// Writes the report to `path` through a temporary file in the same directory and a rename, so a
// reader never sees half a report. Throws std::runtime_error (saying which path and why) if the
// file cannot be written.
void write_report_file(const std::string& path, const Report& report, Format format);

void write_text(std::ostream& out, const Report& report);
void write_json(std::ostream& out, const Report& report);
void write_csv(std::ostream& out, const Report& report);
void write_html(std::ostream& out, const Report& report);

// --- JSON -------------------------------------------------------------------------------------

// The value of the report's "schema" member; bumped on any incompatible change.
inline constexpr std::string_view k_report_schema = "payrecon.report/2";

// The report as JSON, members in the documented order (docs/report-schema.md). Absent values are
// null. Invalid UTF-8 in provider text is replaced with U+FFFD when written.
nlohmann::ordered_json report_json(const Report& report);

// --- CSV --------------------------------------------------------------------------------------

// The header row, in column order: one column per Finding field, and beside each amount (minor
// units, an integer) the same in major units with its currency's exponent ("12.34"; empty for a
// currency ISO 4217 does not know), and the difference (ours minus the provider's) both ways.
// Times are ISO 8601 UTC. The major-unit and difference columns are derived: the parser skips them.
// `provider_references` is a JSON array of strings (["pi_1","pi_2"]), empty for none; the handled_*
// columns are empty for a finding nobody acknowledged. `detail` stays the last column.
inline constexpr std::string_view k_csv_columns[] = {"category",           "needs_attention",
                                                     "provider",           "payment_id",
                                                     "operation_id",       "merchant_reference",
                                                     "provider_reference", "local_amount",
                                                     "local_amount_major", "local_currency",
                                                     "local_state",        "local_at",
                                                     "remote_amount",      "remote_amount_major",
                                                     "remote_currency",    "remote_state",
                                                     "remote_at",          "difference",
                                                     "difference_major",   "provider_link",
                                                     "finding_id",         "provider_references",
                                                     "handled_by",         "handled_at",
                                                     "handled_note",       "detail",
                                                     "refund_id"};

// Parses what write_csv() wrote back into the listed findings, exactly: an empty field is an
// absent value, a quoted empty field ("") a present empty text, and the formula-injection quote
// that write_csv() put before a text value is removed. Accepts CRLF or LF line ends. Throws
// std::runtime_error, naming the line, for a wrong header, a wrong number of fields, an
// unterminated quoted field, or a malformed amount or needs_attention value.
std::vector<Finding> parse_findings_csv(std::istream& in);

// --- shared by the writers ----------------------------------------------------------------------

// ISO 8601 UTC of unix seconds ("2026-12-02T13:45:00Z"), or nullopt.
std::optional<std::string> utc_or_null(const std::optional<long long>& unix_seconds);

// "49.99 EUR" (describe_money), "4999" without a currency, "-" when there is no amount.
std::string display_amount(const std::optional<long long>& minor,
                           const std::optional<std::string>& currency);

// `text` with control characters escaped (core/encoding.hpp), so that one value stays one line and
// cannot move the cursor or recolour a terminal.
using payrecon::printable;

// Terminal columns of UTF-8 `text`, counted in code points (continuation bytes start none).
std::size_t display_width(std::string_view text);

} // namespace payrecon::reports
