#pragma once
// --format and --output, shared by the commands that produce a reconciliation report
// (statement, reconcile, nightly).

#include "reports/report.hpp"

#include <CLI/CLI.hpp>

#include <string>

namespace payrecon::cli {

struct ReportOutputOptions {
    std::string format; // empty: the command's own output (statement: text)
    std::string output; // empty: stdout
    bool wanted() const { return !format.empty() || !output.empty(); }
};

void add_report_options(CLI::App& cmd, ReportOutputOptions& opts);

// Writes the report where the options say (text if only --output was given). Throws UsageError for
// an unknown format, and OperatorError (exit 1) if the file cannot be written.
void emit_report(const reports::Report& report, const ReportOutputOptions& opts);

} // namespace payrecon::cli
