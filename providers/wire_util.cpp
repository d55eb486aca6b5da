#include "providers/wire_util.hpp"

#include "core/encoding.hpp"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <limits>

namespace payrecon::providers::wire {
namespace {

std::int64_t pow10(int n) {
    std::int64_t v = 1;
    for (int i = 0; i < n; ++i) {
        v *= 10;
    }
    return v;
}

// Reads `count` digits at `pos`; nullopt if any is not a digit.
std::optional<int> digits(std::string_view s, std::size_t pos, std::size_t count) {
    if (pos + count > s.size()) {
        return std::nullopt;
    }
    int v = 0;
    for (std::size_t i = pos; i < pos + count; ++i) {
        if (std::isdigit(static_cast<unsigned char>(s[i])) == 0) {
            return std::nullopt;
        }
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

} // namespace

std::string upper(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return out;
}

std::string lower(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

std::optional<std::int64_t> rescale(std::int64_t amount, int from_exponent, int to_exponent) {
    const int diff = to_exponent - from_exponent;
    if (diff > 18 || diff < -18) {
        return std::nullopt; // no int64 factor; no currency is that far from another
    }
    if (diff >= 0) {
        const std::int64_t factor = pow10(diff);
        if (amount > std::numeric_limits<std::int64_t>::max() / factor ||
            amount < std::numeric_limits<std::int64_t>::min() / factor) {
            return std::nullopt;
        }
        return amount * factor;
    }
    const std::int64_t divisor = pow10(-diff);
    if (amount % divisor != 0) {
        return std::nullopt;
    }
    return amount / divisor;
}

std::optional<int>
provider_exponent(std::string_view currency,
                  std::initializer_list<std::pair<std::string_view, int>> exceptions) {
    const std::string code = upper(currency);
    for (const auto& [exception, exponent] : exceptions) {
        if (code == exception) {
            return exponent;
        }
    }
    const auto c = find_currency(code);
    if (!c) {
        return std::nullopt;
    }
    return c->exponent;
}

std::optional<std::int64_t> to_provider_units(const Money& money, std::optional<int> provider_exp) {
    const auto iso = find_currency(money.currency);
    if (!iso || !provider_exp) {
        return std::nullopt;
    }
    return rescale(money.minor, iso->exponent, *provider_exp);
}

std::optional<Money> from_provider_units(std::int64_t amount, std::string_view currency,
                                         std::optional<int> provider_exp) {
    const std::string code = upper(currency);
    const auto iso = find_currency(code);
    if (!iso || !provider_exp) {
        return std::nullopt;
    }
    const auto minor = rescale(amount, *provider_exp, iso->exponent);
    if (!minor) {
        return std::nullopt;
    }
    return Money{*minor, code};
}

std::string format_rfc3339(std::chrono::system_clock::time_point t) {
    const std::time_t secs =
        std::chrono::system_clock::to_time_t(std::chrono::time_point_cast<std::chrono::seconds>(t));
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[32];
    const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return std::string(buf, n);
}

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text) {
    // YYYY-MM-DDTHH:MM:SS[.fff][Z|+hh:mm|-hh:mm]
    const auto year = digits(text, 0, 4);
    const auto month = digits(text, 5, 2);
    const auto day = digits(text, 8, 2);
    const auto hour = digits(text, 11, 2);
    const auto minute = digits(text, 14, 2);
    const auto second = digits(text, 17, 2);
    if (!year || !month || !day || !hour || !minute || !second || text[4] != '-' ||
        text[7] != '-' || (text[10] != 'T' && text[10] != 't') || text[13] != ':' ||
        text[16] != ':' || *month < 1 || *month > 12 || *day < 1 || *day > 31 || *hour > 23 ||
        *minute > 59 || *second > 60) {
        return std::nullopt;
    }
    std::size_t pos = 19;
    long long micros = 0;
    if (pos < text.size() && text[pos] == '.') {
        ++pos;
        long long scale = 100000;
        const std::size_t start = pos;
        while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])) != 0) {
            micros += (text[pos] - '0') * scale;
            scale /= 10;
            ++pos;
        }
        if (pos == start) {
            return std::nullopt;
        }
    }
    long long offset_s = 0;
    if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
        ++pos;
    } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
        const auto oh = digits(text, pos + 1, 2);
        const auto om = digits(text, pos + 4, 2);
        if (!oh || !om || text[pos + 3] != ':') {
            return std::nullopt;
        }
        offset_s = (*oh * 3600LL + *om * 60LL) * (text[pos] == '+' ? 1 : -1);
        pos += 6;
    } else {
        return std::nullopt;
    }
    if (pos != text.size()) {
        return std::nullopt;
    }
    std::tm tm{};
    tm.tm_year = *year - 1900;
    tm.tm_mon = *month - 1;
    tm.tm_mday = *day;
    tm.tm_hour = *hour;
    tm.tm_min = *minute;
    tm.tm_sec = *second;
    const std::time_t utc = timegm(&tm);
    return std::chrono::system_clock::time_point(std::chrono::seconds(utc - offset_s)) +
           std::chrono::microseconds(micros);
}

std::string form_encode(const std::vector<std::pair<std::string, std::string>>& fields) {
    std::string out;
    for (const auto& [k, v] : fields) {
        if (!out.empty()) {
            out += '&';
        }
        out += percent_encode(k) + "=" + percent_encode(v);
    }
    return out;
}

std::string excerpt(std::string_view body) {
    constexpr std::size_t k_max = 300;
    std::string out(body.substr(0, k_max));
    for (char& c : out) {
        if (static_cast<unsigned char>(c) < 0x20) {
            c = ' ';
        }
    }
    return body.size() > k_max ? out + "..." : out;
}

std::optional<std::string> string_member(const nlohmann::json& obj, const char* key) {
    if (!obj.is_object()) {
        return std::nullopt;
    }
    const auto it = obj.find(key);
    if (it == obj.end() || !it->is_string()) {
        return std::nullopt;
    }
    return it->get<std::string>();
}

} // namespace payrecon::providers::wire
