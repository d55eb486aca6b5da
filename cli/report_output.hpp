#pragma once
// --format and --output, shared by the commands that produce a reconciliation report
// (statement, reconcile, nightly).

#include "reports/report.hpp"

#include <CLI/CLI.hpp>

#include <string>

namespace payrecon::cli {

struct ReportOutputOptions {
    std::string format = "text";
    std::string output; // empty: stdout
};

void add_report_options(CLI::App& cmd, ReportOutputOptions& opts);

// Writes the report where the options say. Throws UsageError for an unknown format, and
// OperatorError (exit 1) if the file cannot be written.
void emit_report(const reports::Report& report, const ReportOutputOptions& opts);

} // namespace payrecon::cli
