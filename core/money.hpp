#pragma once
// Money in integer minor units and the ISO 4217 currency table (active codes only; funds and
// precious-metal codes such as XAU are not currencies a payment can be made in).
// Per-provider exponent overrides live with the provider adapters.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace payrecon {

struct Currency {
    std::string_view code; // upper-case ISO 4217 alphabetic code
    int exponent;          // number of minor-unit digits: JPY 0, EUR 2, KWD 3, CLF 4
};

// Returns nullopt if `code` is not an active ISO 4217 code. Exact match: "eur" is not found.
std::optional<Currency> find_currency(std::string_view code);

struct Money {
    std::int64_t minor = 0;
    std::string currency; // a code find_currency() knows

    friend bool operator==(const Money&, const Money&) = default;
};

// The amount in major units, with the currency's ISO 4217 exponent: "12.34" for 1234 EUR, "1000"
// for 1000 JPY, "-0.005" for -5 KWD; the code in either case. nullopt for a currency ISO 4217 does
// not know (no exponent to scale by).
std::optional<std::string> major_units(std::int64_t minor, std::string_view currency);

// `text` in major units of `currency` ("8.80", "8.8", "8" for EUR; "1000" for JPY) as minor units,
// exactly, never through floating point: digits, then optionally '.' and at most the currency's
// exponent of digits. nullopt for anything else (a sign, a second '.', more decimals than the
// currency has, an unknown currency, an amount over 10^15 minor units).
std::optional<std::int64_t> parse_major_units(std::string_view text, std::string_view currency);

// "12.34 EUR", "1000 JPY", "-0.005 KWD". Throws std::invalid_argument for an unknown currency.
std::string format_money(const Money& money);

// For messages about amounts from anywhere (a provider's included): format_money() of `minor` in
// `currency` taken in upper case ("0.01 EUR" for 1 "eur"); for a currency ISO 4217 does not know,
// which has no exponent to scale by, the minor units as they are, said so ("1500 XYZ (minor
// units)"). Never throws.
std::string describe_money(std::int64_t minor, std::string_view currency);

// Whether two currency codes are the same currency: ASCII case-insensitive ("eur" is "EUR"), as
// providers write them in either case.
bool same_currency(std::string_view a, std::string_view b);

} // namespace payrecon
