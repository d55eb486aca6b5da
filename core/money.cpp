#include "core/money.hpp"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <stdexcept>

namespace payrecon {
namespace {

// ISO 4217 List One, active alphabetic codes a payment can be made in, sorted by code.
// Left out on purpose: precious metals (XAU XAG XPD XPT), SDR and regional units (XDR XSU XUA),
// bond-market units (XBA XBB XBC XBD), testing and "no currency" (XTS XXX), and the funds codes
// other than the three that carry their own minor unit (CLF, UYI, UYW are kept).
// Withdrawn codes (HRK, SLL, CUC, VEF, MRO, STD, BYR, ...) are not here.
// clang-format off
constexpr Currency k_currencies[] = {
    {"AED", 2}, {"AFN", 2}, {"ALL", 2}, {"AMD", 2}, {"ANG", 2}, {"AOA", 2}, {"ARS", 2},
    {"AUD", 2}, {"AWG", 2}, {"AZN", 2}, {"BAM", 2}, {"BBD", 2}, {"BDT", 2}, {"BGN", 2},
    {"BHD", 3}, {"BIF", 0}, {"BMD", 2}, {"BND", 2}, {"BOB", 2}, {"BRL", 2}, {"BSD", 2},
    {"BTN", 2}, {"BWP", 2}, {"BYN", 2}, {"BZD", 2}, {"CAD", 2}, {"CDF", 2}, {"CHF", 2},
    {"CLF", 4}, {"CLP", 0}, {"CNY", 2}, {"COP", 2}, {"CRC", 2}, {"CUP", 2}, {"CVE", 2},
    {"CZK", 2}, {"DJF", 0}, {"DKK", 2}, {"DOP", 2}, {"DZD", 2}, {"EGP", 2}, {"ERN", 2},
    {"ETB", 2}, {"EUR", 2}, {"FJD", 2}, {"FKP", 2}, {"GBP", 2}, {"GEL", 2}, {"GHS", 2},
    {"GIP", 2}, {"GMD", 2}, {"GNF", 0}, {"GTQ", 2}, {"GYD", 2}, {"HKD", 2}, {"HNL", 2},
    {"HTG", 2}, {"HUF", 2}, {"IDR", 2}, {"ILS", 2}, {"INR", 2}, {"IQD", 3}, {"IRR", 2},
    {"ISK", 0}, {"JMD", 2}, {"JOD", 3}, {"JPY", 0}, {"KES", 2}, {"KGS", 2}, {"KHR", 2},
    {"KMF", 0}, {"KPW", 2}, {"KRW", 0}, {"KWD", 3}, {"KYD", 2}, {"KZT", 2}, {"LAK", 2},
    {"LBP", 2}, {"LKR", 2}, {"LRD", 2}, {"LSL", 2}, {"LYD", 3}, {"MAD", 2}, {"MDL", 2},
    {"MGA", 2}, {"MKD", 2}, {"MMK", 2}, {"MNT", 2}, {"MOP", 2}, {"MRU", 2}, {"MUR", 2},
    {"MVR", 2}, {"MWK", 2}, {"MXN", 2}, {"MYR", 2}, {"MZN", 2}, {"NAD", 2}, {"NGN", 2},
    {"NIO", 2}, {"NOK", 2}, {"NPR", 2}, {"NZD", 2}, {"OMR", 3}, {"PAB", 2}, {"PEN", 2},
    {"PGK", 2}, {"PHP", 2}, {"PKR", 2}, {"PLN", 2}, {"PYG", 0}, {"QAR", 2}, {"RON", 2},
    {"RSD", 2}, {"RUB", 2}, {"RWF", 0}, {"SAR", 2}, {"SBD", 2}, {"SCR", 2}, {"SDG", 2},
    {"SEK", 2}, {"SGD", 2}, {"SHP", 2}, {"SLE", 2}, {"SOS", 2}, {"SRD", 2}, {"SSP", 2},
    {"STN", 2}, {"SVC", 2}, {"SYP", 2}, {"SZL", 2}, {"THB", 2}, {"TJS", 2}, {"TMT", 2},
    {"TND", 3}, {"TOP", 2}, {"TRY", 2}, {"TTD", 2}, {"TWD", 2}, {"TZS", 2}, {"UAH", 2},
    {"UGX", 0}, {"USD", 2}, {"UYI", 0}, {"UYU", 2}, {"UYW", 4}, {"UZS", 2}, {"VED", 2},
    {"VES", 2}, {"VND", 0}, {"VUV", 0}, {"WST", 2}, {"XAF", 0}, {"XCD", 2}, {"XCG", 2},
    {"XOF", 0}, {"XPF", 0}, {"YER", 2}, {"ZAR", 2}, {"ZMW", 2}, {"ZWG", 2}, {"ZWL", 2},
};
// clang-format on

constexpr bool code_less(const Currency& a, const Currency& b) {
    return a.code < b.code;
}

static_assert(std::is_sorted(std::begin(k_currencies), std::end(k_currencies), code_less),
              "find_currency() binary-searches k_currencies: keep it sorted by code");
static_assert(std::adjacent_find(std::begin(k_currencies), std::end(k_currencies),
                                 [](const Currency& a, const Currency& b) {
                                     return a.code == b.code;
                                 }) == std::end(k_currencies),
              "k_currencies lists a code twice");

} // namespace

std::optional<Currency> find_currency(std::string_view code) {
    const auto it = std::lower_bound(std::begin(k_currencies), std::end(k_currencies),
                                     Currency{code, 0}, code_less);
    if (it == std::end(k_currencies) || it->code != code) {
        return std::nullopt;
    }
    return *it;
}

std::optional<std::string> major_units(std::int64_t minor, std::string_view currency_code) {
    std::string code(currency_code);
    for (char& c : code) {
        c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
    }
    const auto currency = find_currency(code);
    if (!currency) {
        return std::nullopt;
    }
    // The magnitude as unsigned: well defined for INT64_MIN too, whose negation overflows int64.
    const bool negative = minor < 0;
    const std::uint64_t magnitude = negative ? std::uint64_t{0} - static_cast<std::uint64_t>(minor)
                                             : static_cast<std::uint64_t>(minor);
    std::string digits = std::to_string(magnitude);
    const auto exponent = static_cast<std::size_t>(currency->exponent);
    if (exponent > 0) {
        if (digits.size() <= exponent) {
            digits.insert(0, exponent + 1 - digits.size(), '0');
        }
        digits.insert(digits.size() - exponent, 1, '.');
    }
    return negative ? "-" + digits : digits;
}

std::optional<std::int64_t> parse_major_units(std::string_view text, std::string_view currency) {
    std::string code(currency);
    for (char& c : code) {
        c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
    }
    const auto found = find_currency(code);
    if (!found || text.empty()) {
        return std::nullopt;
    }
    const auto exponent = static_cast<std::size_t>(found->exponent);
    const auto dot = text.find('.');
    const std::string_view whole = text.substr(0, dot);
    const std::string_view fraction =
        dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
    const auto digits = [](std::string_view part) {
        return std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (whole.empty() || !digits(whole) || !digits(fraction) || fraction.size() > exponent ||
        (dot != std::string_view::npos && fraction.empty())) {
        return std::nullopt;
    }
    std::int64_t minor = 0;
    constexpr std::int64_t k_limit = 1'000'000'000'000'000; // 10^15 minor units
    for (std::size_t i = 0; i < whole.size() + exponent; ++i) {
        const char c = i < whole.size()                     ? whole[i]
                       : i - whole.size() < fraction.size() ? fraction[i - whole.size()]
                                                            : '0';
        minor = minor * 10 + (c - '0');
        if (minor > k_limit) {
            return std::nullopt;
        }
    }
    return minor;
}

std::string format_money(const Money& money) {
    const auto currency = find_currency(money.currency);
    if (!currency) {
        throw std::invalid_argument("format_money: unknown currency code");
    }
    return *major_units(money.minor, money.currency) + " " + std::string(currency->code);
}

std::string describe_money(std::int64_t minor, std::string_view currency) {
    std::string code(currency);
    for (char& c : code) {
        c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
    }
    if (!find_currency(code)) {
        return std::to_string(minor) + " " + code + " (minor units)";
    }
    return format_money(Money{minor, code});
}

bool same_currency(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::toupper(static_cast<unsigned char>(x)) ==
                      std::toupper(static_cast<unsigned char>(y));
           });
}

} // namespace payrecon
