#include "providers/config_fields.hpp"

#include "core/errors.hpp"

#include <regex>

namespace payrecon::providers::config_fields {

void bad(const std::filesystem::path& source, const std::string& field, const std::string& what,
         const std::string& hint) {
    throw ConfigError(source.string() + ": " + field + ": " + what,
                      hint.empty() ? "fix the field and run again" : hint);
}

bool has_userinfo(const std::string& url) {
    const auto scheme_end = url.find("://");
    const std::size_t start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
    const std::size_t end = url.find_first_of("/?#", start);
    return url.find('@', start) < end;
}

bool loopback_host(const std::string& url) {
    static const std::regex k_loopback(
        R"(^http://(127\.[0-9.]+|localhost|\[::1\])(:[0-9]+)?(/.*)?$)");
    return std::regex_match(url, k_loopback);
}

std::string and_list(const std::vector<std::string_view>& names) {
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i) {
        out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + std::string(names[i]);
    }
    return out;
}

} // namespace payrecon::providers::config_fields
