#include "net/redact.hpp"

#include <algorithm>
#include <string_view>

namespace payrecon::net {

std::string redact(std::string text, const std::vector<Secret>& secrets) {
    std::vector<std::string_view> values;
    values.reserve(secrets.size());
    for (const Secret& secret : secrets) {
        if (!secret.empty()) {
            values.emplace_back(secret.reveal());
        }
    }
    std::stable_sort(values.begin(), values.end(),
                     [](std::string_view a, std::string_view b) { return a.size() > b.size(); });
    const std::string_view mask{k_redacted};
    for (const std::string_view value : values) {
        std::string::size_type at = text.find(value);
        while (at != std::string::npos) {
            text.replace(at, value.size(), mask);
            at = text.find(value, at + mask.size());
        }
    }
    return text;
}

} // namespace payrecon::net
