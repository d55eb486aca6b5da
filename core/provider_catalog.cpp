#include "core/provider_catalog.hpp"

namespace payrecon {

std::string ProviderCatalog::names() const {
    std::string out;
    for (const auto& [name, provider] : providers) {
        out += (out.empty() ? "" : ", ") + name;
    }
    return out.empty() ? std::string("(none)") : out;
}

} // namespace payrecon
