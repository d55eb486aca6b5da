#pragma once
#include <string_view>
#include <vector>

namespace payrecon::store {

struct Migration {
    int version;
    std::string_view name;
    std::string_view sql;
};

// The migrations compiled into this binary, ascending by version.
const std::vector<Migration>& embedded_migrations();

} // namespace payrecon::store
