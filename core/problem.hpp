#pragma once
// Error bodies: application/problem+json (RFC 9457), one stable `type` per error.

#include <optional>
#include <string>
#include <string_view>

namespace payrecon {

inline constexpr std::string_view k_problem_content_type = "application/problem+json";

// {"type": type, "title": title, "status": status, "detail": detail[, "field": field]}
// `type` is a stable relative URI reference such as "idempotency_key_reused".
std::string problem_json(int status, std::string_view type, std::string_view title,
                         std::string_view detail,
                         std::optional<std::string_view> field = std::nullopt);

} // namespace payrecon
