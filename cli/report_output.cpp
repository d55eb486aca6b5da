#include "cli/report_output.hpp"

#include "core/errors.hpp"
#include "reports/writers.hpp"

#include <iostream>

namespace payrecon::cli {

void add_report_options(CLI::App& cmd, ReportOutputOptions& opts) {
    cmd.add_option("--format", opts.format, "write the report as text, json, csv or html")
        ->check(CLI::IsMember({"text", "json", "csv", "html"}));
    cmd.add_option("--output", opts.output, "write the report to this file (atomically) instead of stdout");
}

void emit_report(const reports::Report& report, const ReportOutputOptions& opts) {
    const auto format = reports::parse_format(opts.format.empty() ? "text" : opts.format);
    if (!format) {
        throw UsageError("--format must be text, json, csv or html");
    }
    if (opts.output.empty()) {
        reports::write_report(std::cout, report, *format);
        std::cout.flush();
        return;
    }
    try {
        reports::write_report_file(opts.output, report, *format);
    } catch (const std::runtime_error& e) {
        throw OperatorError(ExitCode::failure, std::string("could not write the report: ") + e.what(),
                            "check that the directory exists and is writable");
    }
}

} // namespace payrecon::cli
