#include "core/money.hpp"

#include <catch2/catch.hpp>
#include <limits>
#include <stdexcept>
#include <string>

using payrecon::describe_money;
using payrecon::find_currency;
using payrecon::format_money;
using payrecon::Money;

TEST_CASE("money: ISO 4217 exponents for JPY, EUR, KWD and CLF", "[core][money]") {
    REQUIRE(find_currency("JPY"));
    CHECK(find_currency("JPY")->exponent == 0);
    CHECK(find_currency("EUR")->exponent == 2);
    CHECK(find_currency("KWD")->exponent == 3);
    CHECK(find_currency("CLF")->exponent == 4);
    CHECK(find_currency("EUR")->code == "EUR");
}

TEST_CASE("money: every zero, three and four digit currency has its exponent", "[core][money]") {
    for (const char* code : {"BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF",
                             "UGX", "UYI", "VND", "VUV", "XAF", "XOF", "XPF"}) {
        INFO(code);
        REQUIRE(find_currency(code));
        CHECK(find_currency(code)->exponent == 0);
    }
    for (const char* code : {"BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"}) {
        INFO(code);
        REQUIRE(find_currency(code));
        CHECK(find_currency(code)->exponent == 3);
    }
    for (const char* code : {"CLF", "UYW"}) {
        INFO(code);
        REQUIRE(find_currency(code));
        CHECK(find_currency(code)->exponent == 4);
    }
}

TEST_CASE("money: common two digit currencies are known", "[core][money]") {
    for (const char* code : {"AED", "AUD", "BRL", "CAD", "CHF", "CNY", "CZK", "DKK", "GBP", "HKD",
                             "HUF", "IDR", "ILS", "INR", "MXN", "NOK", "NZD", "PLN", "SEK", "SGD",
                             "SLE", "STN", "THB", "TRY", "TWD", "USD", "VES", "XCD", "ZAR"}) {
        INFO(code);
        REQUIRE(find_currency(code));
        CHECK(find_currency(code)->exponent == 2);
    }
}

TEST_CASE("money: unknown, lower-case and malformed codes are not found", "[core][money]") {
    CHECK_FALSE(find_currency("eur"));
    CHECK_FALSE(find_currency("Eur"));
    CHECK_FALSE(find_currency("ABC"));
    CHECK_FALSE(find_currency(""));
    CHECK_FALSE(find_currency("EU"));
    CHECK_FALSE(find_currency("EURO"));
    CHECK_FALSE(find_currency("EUR "));
    CHECK_FALSE(find_currency(std::string("EUR\0", 4)));
}

TEST_CASE("money: precious metals, SDR, testing and withdrawn codes are not currencies",
          "[core][money]") {
    for (const char* code : {"XAU", "XAG", "XPT", "XPD", "XDR", "XSU", "XTS", "XXX", "XBA", "XUA",
                             "HRK", "SLL", "CUC", "VEF", "MRO", "STD", "BYR"}) {
        INFO(code);
        CHECK_FALSE(find_currency(code));
    }
}

TEST_CASE("money: format_money places the decimal point by the exponent", "[core][money]") {
    CHECK(format_money(Money{1234, "EUR"}) == "12.34 EUR");
    CHECK(format_money(Money{1000, "JPY"}) == "1000 JPY");
    CHECK(format_money(Money{5, "KWD"}) == "0.005 KWD");
    CHECK(format_money(Money{1, "CLF"}) == "0.0001 CLF");
    CHECK(format_money(Money{0, "EUR"}) == "0.00 EUR");
    CHECK(format_money(Money{0, "JPY"}) == "0 JPY");
    CHECK(format_money(Money{100, "USD"}) == "1.00 USD");
    CHECK(format_money(Money{123456789, "BHD"}) == "123456.789 BHD");
}

TEST_CASE("money: format_money handles negative amounts and the int64 extremes", "[core][money]") {
    CHECK(format_money(Money{-5, "KWD"}) == "-0.005 KWD");
    CHECK(format_money(Money{-1234, "EUR"}) == "-12.34 EUR");
    CHECK(format_money(Money{-1, "EUR"}) == "-0.01 EUR");
    CHECK(format_money(Money{-7, "JPY"}) == "-7 JPY");
    CHECK(format_money(Money{std::numeric_limits<std::int64_t>::min(), "EUR"}) ==
          "-92233720368547758.08 EUR");
    CHECK(format_money(Money{std::numeric_limits<std::int64_t>::min(), "JPY"}) ==
          "-9223372036854775808 JPY");
    CHECK(format_money(Money{std::numeric_limits<std::int64_t>::max(), "CLF"}) ==
          "922337203685477.5807 CLF");
}

TEST_CASE("money: format_money throws for an unknown currency", "[core][money]") {
    CHECK_THROWS_AS(format_money(Money{100, "XAU"}), std::invalid_argument);
    CHECK_THROWS_AS(format_money(Money{100, "eur"}), std::invalid_argument);
    CHECK_THROWS_AS(format_money(Money{100, ""}), std::invalid_argument);
}

TEST_CASE("money: describe_money scales by the exponent, and says minor units where it cannot",
          "[core][money]") {
    CHECK(describe_money(1, "EUR") == "0.01 EUR");
    CHECK(describe_money(1001, "eur") == "10.01 EUR");
    CHECK(describe_money(1500, "JPY") == "1500 JPY");
    CHECK(describe_money(1500, "KWD") == "1.500 KWD");
    CHECK(describe_money(1500, "XYZ") == "1500 XYZ (minor units)");
    CHECK(describe_money(7, "") == "7  (minor units)");
}

TEST_CASE("money: major units parse to minor units exactly, and back", "[core][money]") {
    CHECK(payrecon::parse_major_units("8.80", "EUR") == 880);
    CHECK(payrecon::parse_major_units("8.8", "eur") == 880);
    CHECK(payrecon::parse_major_units("8", "EUR") == 800);
    CHECK(payrecon::parse_major_units("0.01", "EUR") == 1);
    CHECK(payrecon::parse_major_units("1000", "JPY") == 1000);
    CHECK(payrecon::parse_major_units("1.234", "KWD") == 1234);
    CHECK(payrecon::parse_major_units("0.1", "EUR") == 10);
    // 0.1 + 0.2 in binary floating point is not 0.3: these never pass through it.
    CHECK(payrecon::parse_major_units("19.99", "USD") == 1999);
    for (const char* bad : {"", ".", "8.", ".5", "8.801", "-1", "+1", "1e3", "8,80", " 8", "1.2.3",
                            "10000000000000.01"}) {
        INFO(bad);
        CHECK_FALSE(payrecon::parse_major_units(bad, "EUR").has_value());
    }
    CHECK_FALSE(payrecon::parse_major_units("1.5", "JPY").has_value()); // JPY has no minor unit
    CHECK_FALSE(payrecon::parse_major_units("1", "XYZ").has_value());
    CHECK(payrecon::major_units(880, "EUR") == "8.80");
    CHECK(payrecon::major_units(-5, "KWD") == "-0.005");
    CHECK(payrecon::major_units(1000, "jpy") == "1000");
    CHECK_FALSE(payrecon::major_units(1, "XYZ").has_value());
}
