#pragma once
// What one kind of provider can carry of a payment, declared by its adapter (`carry_limits()` in
// providers/<kind>/wire.hpp) and checked twice: by the intake, when the provider configuration is
// known, as a 422 before anything is stored; and by the adapter before every call, which never
// sends a payment with parts of it left out. A provider's limits include what payrecon adds of its
// own (Stripe: 50 metadata entries, two of them payrecon's operation_id and merchant_reference).

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon {

struct MetadataLimits {
    // The provider's limit on entries, payrecon's own included; 0: it takes no metadata at all.
    std::size_t max_entries = 0;
    // The entries payrecon adds: "operation_id" (the operation ID) and "merchant_reference" (the
    // merchant reference) are the values it sends under them. A caller may not use these keys.
    std::vector<std::string> own_keys;
    // Providers count characters; payrecon counts UTF-8 bytes, which are never fewer.
    std::size_t max_key_bytes = 0;
    std::size_t max_value_bytes = 0;
    // Why, in the provider's own terms, for the message ("Stripe allows 50 keys per object").
    std::string source;
};

struct CarryLimits {
    std::string provider; // the provider's name for people: "Stripe"
    MetadataLimits metadata;
};

// What the provider cannot carry, for a 422 (`field`, `message`) or an attempt record.
struct CarryProblem {
    std::string field;   // "metadata", "metadata.<key>" or "merchant_reference"
    std::string message; // names the limit and why; never the value
};

// nullopt if a payment with this merchant reference and caller metadata can be sent whole.
std::optional<CarryProblem> carry_problem(const CarryLimits& limits,
                                          std::string_view merchant_reference,
                                          const std::map<std::string, std::string>& metadata);

} // namespace payrecon
