#pragma once
// --format and --output, shared by the commands that produce a reconciliation report
// (statement, reconcile, nightly).

#include "reports/report.hpp"

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace payrecon::cli {

struct ReportOutputOptions {
    std::string format;               // empty: the command's own output (statement: text)
    std::vector<std::string> outputs; // files; empty: stdout
    bool wanted() const { return !format.empty() || !outputs.empty(); }
};

void add_report_options(CLI::App& cmd, ReportOutputOptions& opts);

// Writes the report where the options say: to stdout in --format (text by default), or to each
// --output file in the format its extension names (.json, .csv, .html/.htm; else --format, else
// text), each file created 0600 and replaced whole, with one line per file on stdout ("wrote
// report.html: 8 findings need attention"). Throws UsageError for an unknown format or a --format
// that contradicts a file's extension, and OperatorError (exit 1) if a file cannot be written.
void emit_report(const reports::Report& report, const ReportOutputOptions& opts);

} // namespace payrecon::cli
