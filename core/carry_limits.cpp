#include "core/carry_limits.hpp"

#include <algorithm>

namespace payrecon {
namespace {

bool is_own(const MetadataLimits& m, std::string_view key) {
    return std::find(m.own_keys.begin(), m.own_keys.end(), key) != m.own_keys.end();
}

std::string own_keys_text(const MetadataLimits& m) {
    std::string out;
    for (const auto& k : m.own_keys) {
        out += (out.empty() ? "" : ", ") + k;
    }
    return out;
}

} // namespace

std::optional<CarryProblem> carry_problem(const CarryLimits& limits,
                                          std::string_view merchant_reference,
                                          const std::map<std::string, std::string>& metadata) {
    const MetadataLimits& m = limits.metadata;
    const std::string why = m.source.empty() ? std::string() : " (" + m.source + ")";
    if (is_own(m, "merchant_reference") && merchant_reference.size() > m.max_value_bytes) {
        return CarryProblem{"merchant_reference",
                            limits.provider +
                                " receives the merchant reference as a metadata value, and carries "
                                "metadata values of at most " +
                                std::to_string(m.max_value_bytes) + " characters" + why +
                                "; this one has " + std::to_string(merchant_reference.size()) +
                                " bytes. Use a shorter merchant_reference for this provider."};
    }
    if (metadata.empty()) {
        return std::nullopt;
    }
    if (m.max_entries <= m.own_keys.size()) {
        return CarryProblem{"metadata", limits.provider + " payments carry no metadata of yours" +
                                            why +
                                            ": it would not reach the provider. Send the payment "
                                            "without metadata and keep that data on your side."};
    }
    const std::size_t room = m.max_entries - m.own_keys.size();
    if (metadata.size() > room) {
        return CarryProblem{"metadata",
                            "metadata has " + std::to_string(metadata.size()) + " entries; " +
                                limits.provider + " carries at most " + std::to_string(room) +
                                " of yours: its limit is " + std::to_string(m.max_entries) +
                                " entries per payment" + why + ", and payrecon adds " +
                                std::to_string(m.own_keys.size()) + " (" + own_keys_text(m) +
                                ") so that the payment can be found there. Send at most " +
                                std::to_string(room) + " entries; none is ever dropped."};
    }
    for (const auto& [key, value] : metadata) {
        if (is_own(m, key)) {
            return CarryProblem{"metadata." + key,
                                "metadata key '" + key + "' is payrecon's own at " +
                                    limits.provider + " (it carries payrecon's " + key +
                                    " there, so that the payment can be found); use another key."};
        }
        if (key.size() > m.max_key_bytes) {
            return CarryProblem{"metadata." + key,
                                limits.provider + " carries metadata keys of at most " +
                                    std::to_string(m.max_key_bytes) + " characters" + why +
                                    "; this key has " + std::to_string(key.size()) + " bytes."};
        }
        if (value.size() > m.max_value_bytes) {
            return CarryProblem{"metadata." + key,
                                limits.provider + " carries metadata values of at most " +
                                    std::to_string(m.max_value_bytes) + " characters" + why +
                                    "; this value has " + std::to_string(value.size()) + " bytes."};
        }
    }
    return std::nullopt;
}

} // namespace payrecon
