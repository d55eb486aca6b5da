#include "core/external_json.hpp"

namespace payrecon {

std::size_t json_nesting_depth(std::string_view text, std::size_t stop_after) {
    std::size_t depth = 0;
    std::size_t deepest = 0;
    bool in_string = false;
    bool escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        switch (c) {
        case '"':
            in_string = true;
            break;
        case '[':
        case '{':
            if (++depth > deepest) {
                deepest = depth;
                if (deepest > stop_after) {
                    return deepest;
                }
            }
            break;
        case ']':
        case '}':
            depth = depth > 0 ? depth - 1 : 0;
            break;
        default:
            break;
        }
    }
    return deepest;
}

std::optional<nlohmann::json> parse_external_json(std::string_view text, std::size_t max_depth) {
    if (json_nesting_depth(text, max_depth) > max_depth) {
        return std::nullopt;
    }
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
        return std::nullopt;
    }
    return j;
}

} // namespace payrecon
