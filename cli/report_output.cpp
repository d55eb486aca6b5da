#include "cli/report_output.hpp"

#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "reports/writers.hpp"

#include <filesystem>
#include <iostream>
#include <optional>

namespace payrecon::cli {

namespace {

// The format a file's extension names, if it names one.
std::optional<reports::Format> format_of_extension(const std::string& path) {
    std::string ext = std::filesystem::path(path).extension().string();
    for (char& c : ext) {
        c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    if (ext == ".htm") {
        return reports::Format::html;
    }
    return ext.size() > 1 ? reports::parse_format(ext.substr(1)) : std::nullopt;
}

} // namespace

void add_report_options(CLI::App& cmd, ReportOutputOptions& opts) {
    cmd.add_option(
           "--format", opts.format,
           "write the report as text, json, csv or html (stdout, or files whose name has no "
           "such extension)")
        ->check(CLI::IsMember({"text", "json", "csv", "html"}));
    cmd.add_option("--output", opts.outputs,
                   "write the report to this file (0600, replaced whole) instead of stdout; may be "
                   "given several times, each file's format from its extension "
                   "(.json .csv .html .txt)")
        ->type_size(1)
        ->allow_extra_args(false);
}

void emit_report(const reports::Report& report, const ReportOutputOptions& opts) {
    const auto format = reports::parse_format(opts.format.empty() ? "text" : opts.format);
    if (!format) {
        throw UsageError("--format must be text, json, csv or html");
    }
    if (opts.outputs.empty()) {
        reports::write_report(std::cout, report, *format);
        std::cout.flush();
        return;
    }
    // Every file's format is settled before any is written.
    std::vector<reports::Format> formats;
    for (const auto& path : opts.outputs) {
        const auto by_extension = format_of_extension(path);
        if (by_extension && !opts.format.empty() && *by_extension != *format) {
            throw UsageError("--format " + opts.format + " but " + printable(path) + " is " +
                                 std::string(reports::format_name(*by_extension)) +
                                 " by its extension",
                             "leave out --format (each file's extension chooses), or name the "
                             "file for the format you want");
        }
        formats.push_back(by_extension.value_or(*format));
    }
    const std::string summary = reports::summary_line(report);
    for (std::size_t i = 0; i < opts.outputs.size(); ++i) {
        try {
            reports::write_report_file(opts.outputs[i], report, formats[i]);
        } catch (const std::runtime_error& e) {
            throw OperatorError(ExitCode::failure,
                                std::string("could not write the report: ") + e.what(),
                                "check that the directory exists and is writable");
        }
        std::cout << "wrote " << printable(opts.outputs[i]) << ": " << summary << "\n";
    }
    std::cout.flush();
}

} // namespace payrecon::cli
