#include "core/problem.hpp"

#include <nlohmann/json.hpp>

namespace payrecon {

std::string problem_json(int status, std::string_view type, std::string_view title,
                         std::string_view detail, std::optional<std::string_view> field) {
    nlohmann::ordered_json j;
    j["type"] = type;
    j["title"] = title;
    j["status"] = status;
    j["detail"] = detail;
    if (field) {
        j["field"] = *field;
    }
    return j.dump();
}

} // namespace payrecon
