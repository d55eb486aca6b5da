#include "reports/writers.hpp"

#include "core/money.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace payrecon::reports {

std::optional<Format> parse_format(std::string_view name) {
    if (name == "text") {
        return Format::text;
    }
    if (name == "json") {
        return Format::json;
    }
    if (name == "csv") {
        return Format::csv;
    }
    if (name == "html") {
        return Format::html;
    }
    return std::nullopt;
}

std::string_view format_name(Format format) {
    switch (format) {
    case Format::text:
        return "text";
    case Format::json:
        return "json";
    case Format::csv:
        return "csv";
    case Format::html:
        return "html";
    }
    return "text";
}

void write_report(std::ostream& out, const Report& report, Format format) {
    switch (format) {
    case Format::text:
        write_text(out, report);
        return;
    case Format::json:
        write_json(out, report);
        return;
    case Format::csv:
        write_csv(out, report);
        return;
    case Format::html:
        write_html(out, report);
        return;
    }
}

void write_report_file(const std::string& path, const Report& report, Format format) {
    const std::filesystem::path target(path);
    const std::filesystem::path tmp = target.parent_path() / ("." + target.filename().string() +
                                                              ".tmp-" + std::to_string(::getpid()));
    const auto fail = [&](const std::string& why) {
        std::error_code ignored;
        std::filesystem::remove(tmp, ignored);
        throw std::runtime_error("cannot write the report to " + path + ": " + why);
    };
    {
        // Created 0600 before a byte is written: a report names payments, references and amounts.
        const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || ::fchmod(fd, 0600) != 0) {
            const int err = errno;
            if (fd >= 0) {
                ::close(fd);
            }
            fail(std::strerror(err));
        }
        ::close(fd);
        std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
        if (!file) {
            fail(std::strerror(errno));
        }
        write_report(file, report, format);
        file.flush();
        if (!file) {
            fail("write failed (disk full?)");
        }
    }
    if (std::rename(tmp.c_str(), target.c_str()) != 0) {
        fail(std::strerror(errno));
    }
}

std::optional<std::string> utc_or_null(const std::optional<long long>& unix_seconds) {
    if (!unix_seconds) {
        return std::nullopt;
    }
    return format_utc_seconds(*unix_seconds);
}

std::string display_amount(const std::optional<long long>& minor,
                           const std::optional<std::string>& currency) {
    if (!minor) {
        return "-";
    }
    if (!currency) {
        return std::to_string(*minor);
    }
    return describe_money(*minor, *currency);
}

std::size_t display_width(std::string_view text) {
    return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
        return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    }));
}

} // namespace payrecon::reports
