#pragma once
// Realistic, digit-rich references that shops send as merchant_reference, description, metadata or
// Idempotency-Key, none of them a card number: timestamps with counters, order numbers, UUIDs,
// invoice IDs, SKUs and barcodes, dates, phone numbers, IBANs, parcel tracking numbers, and free
// text mixing them. Seeded, so a failure is reproducible from the seed; kinds come round-robin, so
// every kind is in any 12 consecutive references.

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

namespace payrecon::testing {

class ReferenceGenerator {
public:
    struct Reference {
        std::string_view kind;
        std::string text;
    };

    explicit ReferenceGenerator(std::uint64_t seed) : m_rng(seed) {}

    Reference next() {
        const std::size_t kind = m_count++ % k_kinds.size();
        switch (kind) {
        case 0:
            return {k_kinds[kind], ms_timestamp_and_counter()};
        case 1:
            return {k_kinds[kind], other_timestamp()};
        case 2:
            return {k_kinds[kind], order_number()};
        case 3:
            return {k_kinds[kind], marketplace_order_id()};
        case 4:
            return {k_kinds[kind], uuid_reference()};
        case 5:
            return {k_kinds[kind], invoice_id()};
        case 6:
            return {k_kinds[kind], sku()};
        case 7:
            return {k_kinds[kind], date_time()};
        case 8:
            return {k_kinds[kind], phone_number()};
        case 9:
            return {k_kinds[kind], iban()};
        case 10:
            return {k_kinds[kind], tracking_number()};
        default:
            return {k_kinds[kind], free_text()};
        }
    }

    // clang-format off
    static constexpr std::array<std::string_view, 12> k_kinds = {
        "ms timestamp and counter", "other timestamp", "order number", "marketplace order ID",
        "UUID",                     "invoice ID",      "SKU or barcode", "date and time",
        "phone number",             "IBAN",            "tracking number", "free text"};
    // clang-format on

private:
    std::mt19937_64 m_rng;
    std::size_t m_count = 0;

    std::uint64_t between(std::uint64_t low, std::uint64_t high) { // inclusive
        return std::uniform_int_distribution<std::uint64_t>(low, high)(m_rng);
    }
    bool coin() { return between(0, 1) == 1; }
    template <typename T, std::size_t N>
    const T& pick(const std::array<T, N>& items) {
        return items[between(0, N - 1)];
    }

    static std::string padded(std::uint64_t value, std::size_t width) {
        std::string text = std::to_string(value);
        if (text.size() < width) {
            text.insert(0, width - text.size(), '0');
        }
        return text;
    }
    std::string digits(std::size_t count) {
        std::string text;
        for (std::size_t i = 0; i < count; ++i) {
            text += static_cast<char>('0' + between(0, 9));
        }
        return text;
    }
    std::string letters(std::size_t count) {
        std::string text;
        for (std::size_t i = 0; i < count; ++i) {
            text += static_cast<char>('A' + between(0, 25));
        }
        return text;
    }
    std::string hex(std::size_t count, bool upper) {
        const std::string_view alphabet = upper ? "0123456789ABCDEF" : "0123456789abcdef";
        std::string text;
        for (std::size_t i = 0; i < count; ++i) {
            text += alphabet[between(0, 15)];
        }
        return text;
    }
    // Milliseconds since the epoch, 2020-01-01 .. 2032-12-31.
    std::uint64_t ms_now() { return between(1'577'836'800'000, 1'988'150'399'999); }
    std::string year() { return std::to_string(between(2020, 2032)); }
    std::string month() { return padded(between(1, 12), 2); }
    std::string day() { return padded(between(1, 28), 2); }
    std::string counter() { return padded(between(0, 999'999), between(1, 6)); }

    std::string ms_timestamp_and_counter() {
        const std::string ms = std::to_string(ms_now());
        switch (between(0, 6)) {
        case 0:
            return ms + "-" + counter();
        case 1:
            return ms + padded(between(0, 999), 3);
        case 2:
            return ms + padded(between(0, 999'999), 6);
        case 3:
            return "evt_" + ms + "_" + counter();
        case 4:
            return ms + "." + counter();
        case 5:
            return ms + "-" + std::to_string(between(1, 64)) + "-" + counter();
        default:
            return "ts" + ms + "c" + counter();
        }
    }

    std::string other_timestamp() {
        const std::uint64_t ms = ms_now();
        switch (between(0, 4)) {
        case 0:
            return std::to_string(ms * 1000 + between(0, 999)); // microseconds
        case 1:
            return std::to_string(ms * 1'000'000 + between(0, 999'999)); // nanoseconds
        case 2:
            return std::to_string(ms / 1000) + "-" + padded(between(0, 999'999), 6);
        case 3:
            return std::to_string(ms / 1000) + padded(between(0, 999'999), 6);
        default:
            return "job-" + std::to_string(ms / 1000) + "/" + counter();
        }
    }

    std::string order_number() {
        switch (between(0, 7)) {
        case 0:
            return "order-" + year() + "-" + month() + day() + "-" + padded(between(0, 999'999), 6);
        case 1:
            return "ORD-" + year() + month() + day() + "-" + padded(between(0, 99'999), 5);
        case 2:
            return year() + month() + day() + padded(between(0, 999'999), 6);
        case 3:
            return "SO-" + year() + "-" + padded(between(0, 99'999'999), 8);
        case 4:
            return "#" + std::to_string(between(1000, 9'999'999));
        case 5:
            return "PO-45" + digits(8); // SAP purchase orders
        case 6:
            return year() + "/" + month() + "/" + day() + "-" + padded(between(0, 999'999), 6);
        default:
            return "order_" + std::to_string(between(1, 9'999'999'999));
        }
    }

    std::string marketplace_order_id() {
        switch (between(0, 3)) {
        case 0: // a shop platform's 13-digit numeric order ID
            return std::to_string(between(1'000'000'000'000, 7'999'999'999'999));
        case 1: // Amazon
            return digits(3) + "-" + digits(7) + "-" + digits(7);
        case 2: // eBay
            return digits(2) + "-" + digits(5) + "-" + digits(5);
        default:
            return "gid://shop/Order/" +
                   std::to_string(between(1'000'000'000'000, 7'999'999'999'999));
        }
    }

    std::string uuid_text(bool upper, bool time_ordered) {
        std::string h;
        if (time_ordered) { // version 7: 48 bits of Unix milliseconds first
            static constexpr std::string_view alphabet = "0123456789abcdef";
            std::uint64_t ms = ms_now();
            std::string t(12, '0');
            for (std::size_t i = 12; i-- > 0; ms >>= 4) {
                t[i] = alphabet[ms & 0xF];
            }
            h = t + hex(20, false);
        } else {
            h = hex(32, false);
        }
        h[12] = time_ordered ? '7' : '4';
        h[16] = "89ab"[between(0, 3)];
        if (upper) {
            for (char& c : h) {
                if (c >= 'a' && c <= 'f') {
                    c = static_cast<char>(c - 'a' + 'A');
                }
            }
        }
        return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" +
               h.substr(16, 4) + "-" + h.substr(20);
    }

    std::string uuid_reference() {
        std::string uuid = uuid_text(between(0, 3) == 0, coin());
        switch (between(0, 3)) {
        case 0:
            return uuid;
        case 1: {
            std::string bare;
            for (const char c : uuid) {
                if (c != '-') {
                    bare += c;
                }
            }
            return bare;
        }
        case 2:
            return "pay_" + uuid;
        default:
            return "cart-" + uuid.substr(0, 8);
        }
    }

    std::string invoice_id() {
        switch (between(0, 6)) {
        case 0:
            return "INV-" + year() + "-" + padded(between(0, 999'999), 6);
        case 1:
            return "INV" + year() + padded(between(0, 999'999), 6);
        case 2:
            return "RE-" + year() + "-" + month() + "-" + padded(between(0, 9'999'999), 7);
        case 3:
            return year() + "/INV/" + padded(between(0, 999'999), 6);
        case 4:
            return "FA " + year() + " " + padded(between(0, 999'999), 6);
        case 5:
            return "INV-" + padded(between(0, 9'999'999'999), 10);
        default:
            return "R" + year() + month() + padded(between(0, 999'999), 6);
        }
    }

    // GS1 check digit: weights 3 and 1 from the right, over the digits before it.
    static char gs1_check_digit(const std::string& body) {
        int sum = 0;
        bool three = true;
        for (auto it = body.rbegin(); it != body.rend(); ++it) {
            sum += (*it - '0') * (three ? 3 : 1);
            three = !three;
        }
        return static_cast<char>('0' + (10 - sum % 10) % 10);
    }

    std::string sku() {
        switch (between(0, 5)) {
        case 0: { // EAN-13, any GS1 prefix
            const std::string body = digits(12);
            return body + gs1_check_digit(body);
        }
        case 1: { // UPC-A
            const std::string body = digits(11);
            return body + gs1_check_digit(body);
        }
        case 2: { // EAN-8
            const std::string body = digits(7);
            return "EAN " + body + gs1_check_digit(body);
        }
        case 3:
            return "SKU-" + digits(5) + "-" + digits(4) + "-" +
                   std::string(pick(std::array<std::string_view, 4>{"XS", "M", "XL", "42"}));
        case 4:
            return "ART " + digits(6) + " " + digits(2);
        default:
            return digits(3) + "." + digits(3) + "." + digits(2); // a catalogue number
        }
    }

    std::string date_time() {
        const std::string y = year();
        const std::string m = month();
        const std::string d = day();
        const std::string hh = padded(between(0, 23), 2);
        const std::string mm = padded(between(0, 59), 2);
        const std::string ss = padded(between(0, 59), 2);
        switch (between(0, 4)) {
        case 0:
            return y + "-" + m + "-" + d + "T" + hh + ":" + mm + ":" + ss + "." +
                   padded(between(0, 999), 3) + "Z";
        case 1:
            return y + "-" + m + "-" + d + " " + hh + ":" + mm + ":" + ss;
        case 2:
            return d + "." + m + "." + y;
        case 3:
            return m + "/" + d + "/" + y + " " + hh + ":" + mm;
        default:
            return y + m + d + hh + mm + ss + padded(between(0, 999), 3);
        }
    }

    std::string phone_number() {
        struct Country {
            std::string_view code;
            std::size_t shortest; // national significant number, digits
            std::size_t longest;
        };
        // clang-format off
        static constexpr std::array<Country, 16> k_countries = {{
            {"1", 10, 10}, {"44", 10, 10}, {"49", 10, 11}, {"33", 9, 9}, {"39", 9, 10},
            {"34", 9, 9}, {"31", 9, 9}, {"62", 9, 12}, {"60", 9, 10}, {"86", 11, 11},
            {"91", 10, 10}, {"55", 10, 11}, {"81", 9, 10}, {"61", 9, 9}, {"65", 8, 8},
            {"380", 9, 9}}};
        // clang-format on
        const Country& country = pick(k_countries);
        const std::string national =
            std::to_string(between(1, 9)) + digits(between(country.shortest, country.longest) - 1);
        const std::string code(country.code);
        switch (between(0, 3)) {
        case 0:
            return "+" + code + national;
        case 1:
            return "+" + code + " " + national.substr(0, 3) + " " + national.substr(3);
        case 2:
            return "0" + national.substr(0, 3) + "-" + national.substr(3);
        default:
            return "(" + digits(3) + ") " + digits(3) + "-" + digits(4);
        }
    }

    std::string iban() {
        struct Country {
            std::string_view code;
            std::size_t bank_letters; // leading letters of the BBAN (bank code)
            std::size_t digits;       // then this many digits
        };
        static constexpr std::array<Country, 7> k_countries = {{{"DE", 0, 18},
                                                                {"GB", 4, 14},
                                                                {"FR", 0, 23},
                                                                {"NL", 4, 10},
                                                                {"ES", 0, 20},
                                                                {"IT", 1, 22},
                                                                {"IE", 4, 14}}};
        const Country& country = pick(k_countries);
        const std::string bban = letters(country.bank_letters) + digits(country.digits);
        // Check digits: 98 - (BBAN + country + "00" as a number, letters as 10..35) mod 97.
        unsigned remainder = 0;
        for (const char c : bban + std::string(country.code) + "00") {
            if (c >= '0' && c <= '9') {
                remainder = (remainder * 10 + static_cast<unsigned>(c - '0')) % 97;
            } else {
                remainder = (remainder * 100 + static_cast<unsigned>(c - 'A' + 10)) % 97;
            }
        }
        const std::string iban = std::string(country.code) + padded(98 - remainder, 2) + bban;
        if (coin()) {
            return iban;
        }
        std::string paper;
        for (std::size_t i = 0; i < iban.size(); ++i) {
            if (i > 0 && i % 4 == 0) {
                paper += ' ';
            }
            paper += iban[i];
        }
        return coin() ? paper : "refund to IBAN " + paper;
    }

    std::string tracking_number() {
        switch (between(0, 4)) {
        case 0: { // UPS: 1Z, the shipper's six letters and digits, service, package number
            std::string shipper;
            for (int i = 0; i < 6; ++i) {
                shipper += "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"[between(0, 35)];
            }
            return "1Z" + shipper + digits(10);
        }
        case 1: { // USPS Intelligent Mail package barcode: 22 digits
            const std::string number =
                std::string(
                    pick(std::array<std::string_view, 5>{"9400", "9205", "9407", "9303", "9270"})) +
                digits(18);
            if (coin()) {
                return number;
            }
            std::string grouped;
            for (std::size_t i = 0; i < number.size(); ++i) {
                if (i > 0 && i % 4 == 0) {
                    grouped += ' ';
                }
                grouped += number[i];
            }
            return grouped;
        }
        case 2: // FedEx
            return digits(4) + " " + digits(4) + " " + digits(4);
        case 3: // DHL eCommerce
            return "JD01" + digits(16);
        default:
            return digits(10);
        }
    }

    std::string free_text() {
        switch (between(0, 4)) {
        case 0:
            return std::to_string(between(1, 9)) + " tickets, row " +
                   std::to_string(between(1, 40)) + " seat " + std::to_string(between(1, 60)) +
                   ", " + std::to_string(between(5, 500)) + "." + padded(between(0, 99), 2) +
                   " EUR";
        case 1:
            return "Order " + year() + "-" + month() + day() + "-" +
                   padded(between(0, 999'999), 6) + " of " + day() + "." + month() + "." + year();
        case 2:
            return "Qty " + std::to_string(between(1, 20)) + " x " +
                   std::to_string(between(1, 999)) + "." + padded(between(0, 99), 2) +
                   ", total 1.234,56";
        case 3:
            return "Customer " + digits(8) + ", call " + "+44 20 " + digits(4) + " " + digits(4);
        default:
            return "Batch " + std::to_string(ms_now()) + " / " + uuid_text(false, true);
        }
    }
};

} // namespace payrecon::testing
