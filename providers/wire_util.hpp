#pragma once
// The wire utilities every adapter's wire.cpp shares, written once: money between ISO 4217 minor
// units and a provider's own exponent (both bounds checked), RFC 3339 time, form encoding, an
// excerpt of a response for the attempt record, case folding, and typed reads of JSON members.
// Pure functions: no I/O.

#include "core/money.hpp"

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace payrecon::providers::wire {

// ASCII case folding (currency codes, status words).
std::string upper(std::string_view text);
std::string lower(std::string_view text);

// `amount` scaled from `from_exponent` to `to_exponent` decimal digits. nullopt if the result does
// not fit in int64 (either bound: a large negative amount overflows as surely as a large positive
// one) or scaling down would lose a fraction (12345 at exponent 2 -> exponent 0).
std::optional<std::int64_t> rescale(std::int64_t amount, int from_exponent, int to_exponent);

// A provider's minor-unit exponent for `currency` (either case): its own where `exceptions` lists
// the currency (Stripe's ISK is 2, ISO's 0), else ISO 4217's. nullopt for a currency ISO 4217 does
// not have.
std::optional<int>
provider_exponent(std::string_view currency,
                  std::initializer_list<std::pair<std::string_view, int>> exceptions);

// ISO minor units -> the provider's, for a provider whose exponent for the currency is
// `provider_exp`. nullopt if the currency is unknown, the amount overflows, or it is not a whole
// number of the provider's units.
std::optional<std::int64_t> to_provider_units(const Money& money, std::optional<int> provider_exp);
// The provider's `amount` in `currency` (either case; the result's currency is upper case) -> ISO
// minor units. nullopt if the currency is unknown, the amount overflows, or it is not a whole
// number of ISO minor units (an ISK amount with a fractional krona cannot be ours).
std::optional<Money> from_provider_units(std::int64_t amount, std::string_view currency,
                                         std::optional<int> provider_exp);

// RFC 3339 in UTC, whole seconds: 2026-12-02T10:00:00Z.
std::string format_rfc3339(std::chrono::system_clock::time_point t);
// Parses an RFC 3339 timestamp (2026-12-02T10:00:00.123Z, or with a +hh:mm offset; fractions to
// the microsecond). nullopt if it is not one.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text);

// application/x-www-form-urlencoded, keys and values percent-encoded, in the given order.
std::string form_encode(const std::vector<std::pair<std::string, std::string>>& fields);

// The first 300 bytes of a response body with control characters as spaces, "..." when cut: the
// attempt record's detail. The transport has already redacted secrets from the body.
std::string excerpt(std::string_view body);

// obj[key] if obj is an object and the member a string, else nullopt: a member of the wrong type
// counts as absent (nlohmann's value() would throw type_error on it).
std::optional<std::string> string_member(const nlohmann::json& obj, const char* key);

} // namespace payrecon::providers::wire
