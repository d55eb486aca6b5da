#include "core/card_number.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <string>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <vector>

namespace payrecon {
namespace {

constexpr std::size_t k_min_card_length = 12;
constexpr std::size_t k_max_card_length = 19;
constexpr std::size_t k_min_unseparated_length = 14; // see card_number.hpp: 12-13 only in groups
// The most digits of a group that may come before a card number in its run ("12/30 4242 ...").
constexpr std::size_t k_max_leading_group = 2;
// The fewest digits of the last group of a card number written after a longer group.
constexpr std::size_t k_min_trailing_group = 3;

// Lengths as a bit set: bit n set = n digits issued.
constexpr std::uint32_t lengths(std::size_t first, std::size_t last) {
    std::uint32_t set = 0;
    for (std::size_t n = first; n <= last; ++n) {
        set |= 1U << n;
    }
    return set;
}
constexpr std::uint32_t length(std::size_t n) {
    return 1U << n;
}

// One IIN range: the number made of the first `prefix_digits` digits lies in [low, high].
struct IinRange {
    std::uint32_t low;
    std::uint32_t high;
    std::size_t prefix_digits;
    std::uint32_t lengths;
    CardBrand brand;
};

// The brands' published IIN ranges and lengths (the table of Wikipedia's "Payment card number";
// Braintree's credit-card-type, which a processor maintains; the providers' test card lists). More
// specific ranges come first: the first range that admits the number and its length names the
// brand. Maestro is Mastercard's broad 50 and 56-69 at 16-19 digits (every such number that starts
// with 6 is refused, whatever its brand); the 12-15 digit Maestro numbers that exist come from the
// classic Maestro and Maestro UK prefixes, so only those are refused at 12-15 digits -- the broad
// ranges there would refuse everyday 14-digit numbers (an Indonesian mobile number in E.164 starts
// with 62).
constexpr auto k_iin_ranges = std::to_array<IinRange>({
    {622126, 622925, 6, lengths(16, 19), CardBrand::discover}, // co-branded with UnionPay
    {676770, 676770, 6, lengths(12, 19), CardBrand::maestro},  // Maestro UK
    {676774, 676774, 6, lengths(12, 19), CardBrand::maestro},  // Maestro UK
    {6011, 6011, 4, lengths(16, 19), CardBrand::discover},
    {2200, 2204, 4, lengths(16, 19), CardBrand::mir},
    {2221, 2720, 4, length(16), CardBrand::mastercard},
    {3528, 3589, 4, lengths(16, 19), CardBrand::jcb},
    {8100, 8171, 4, lengths(16, 19), CardBrand::unionpay},
    {5018, 5018, 4, lengths(12, 19), CardBrand::maestro},
    {5020, 5020, 4, lengths(12, 19), CardBrand::maestro},
    {5038, 5038, 4, lengths(12, 19), CardBrand::maestro},
    {5893, 5893, 4, lengths(12, 19), CardBrand::maestro},
    {6304, 6304, 4, lengths(12, 19), CardBrand::maestro},
    {6759, 6759, 4, lengths(12, 19), CardBrand::maestro},
    {6761, 6763, 4, lengths(12, 19), CardBrand::maestro},
    {644, 649, 3, lengths(16, 19), CardBrand::discover},
    {300, 305, 3, lengths(14, 19), CardBrand::diners},
    {65, 65, 2, lengths(16, 19), CardBrand::discover},
    {34, 34, 2, length(15), CardBrand::amex},
    {37, 37, 2, length(15), CardBrand::amex},
    {36, 36, 2, lengths(14, 19), CardBrand::diners},
    {38, 39, 2, lengths(14, 19), CardBrand::diners},
    {51, 55, 2, length(16), CardBrand::mastercard},
    {62, 62, 2, lengths(16, 19), CardBrand::unionpay},
    {50, 50, 2, lengths(16, 19), CardBrand::maestro},
    {56, 69, 2, lengths(16, 19), CardBrand::maestro},
    {4, 4, 1, length(13) | length(16) | length(18) | length(19), CardBrand::visa},
});

// One character of the text, as the search sees it.
struct Cell {
    enum class Kind : std::uint8_t { digit, separator, letter, other };
    Kind kind = Kind::other;
    // '0'-'9' for a digit (whatever its script), 'a'-'z' for an ASCII letter; for a separator
    // ' ' (any white space), '-' (any dash), the character itself (other ASCII punctuation), or
    // '*' (other Unicode punctuation).
    char ascii = 0;
};

Cell classify_ascii(unsigned char c) {
    if (c >= '0' && c <= '9') {
        return {Cell::Kind::digit, static_cast<char>(c)};
    }
    if (c >= 'a' && c <= 'z') {
        return {Cell::Kind::letter, static_cast<char>(c)};
    }
    if (c >= 'A' && c <= 'Z') {
        return {Cell::Kind::letter, static_cast<char>(c - 'A' + 'a')};
    }
    // ASCII's White_Space (tab, newline, vertical tab, form feed, carriage return, space).
    if (c == ' ' || (c >= '\t' && c <= '\r')) {
        return {Cell::Kind::separator, ' '};
    }
    // Every other visible ASCII character: punctuation and symbols ("-", ".", "/", "_", ",", ":",
    // "+", "|", ...).
    if (c > ' ' && c < 0x7F) {
        return {Cell::Kind::separator, static_cast<char>(c)};
    }
    return {};
}

Cell classify(UChar32 c) {
    if (c < 0x80) {
        return classify_ascii(static_cast<unsigned char>(c));
    }
    if (u_charType(c) == U_DECIMAL_DIGIT_NUMBER) {
        const std::int32_t value = u_charDigitValue(c);
        if (value >= 0 && value <= 9) {
            return {Cell::Kind::digit, static_cast<char>('0' + value)};
        }
    }
    if (u_isUWhiteSpace(c)) {
        return {Cell::Kind::separator, ' '};
    }
    if (u_charType(c) == U_DASH_PUNCTUATION || c == 0x2212) {
        return {Cell::Kind::separator, '-'};
    }
    if (u_ispunct(c)) {
        return {Cell::Kind::separator, '*'};
    }
    return {};
}

bool is_ascii(std::string_view text) {
    for (const char c : text) {
        if (static_cast<unsigned char>(c) >= 0x80) {
            return false;
        }
    }
    return true;
}

// The text as cells, byte by byte: exact for ASCII (NFKC_Casefold changes nothing there but case),
// and the fallback when ICU cannot be used (a byte >= 0x80 is then neither digit nor separator).
std::vector<Cell> cells_of_bytes(std::string_view text) {
    std::vector<Cell> cells;
    cells.reserve(text.size());
    for (const char c : text) {
        cells.push_back(classify_ascii(static_cast<unsigned char>(c)));
    }
    return cells;
}

std::vector<Cell> cells_of(std::string_view text) {
    if (is_ascii(text) || text.size() > static_cast<std::size_t>(INT32_MAX)) {
        return cells_of_bytes(text);
    }
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* nfkc_cf = icu::Normalizer2::getNFKCCasefoldInstance(status);
    if (U_FAILURE(status)) {
        return cells_of_bytes(text);
    }
    // Ill-formed UTF-8 becomes U+FFFD.
    const icu::UnicodeString source = icu::UnicodeString::fromUTF8(
        icu::StringPiece(text.data(), static_cast<std::int32_t>(text.size())));
    icu::UnicodeString normalised;
    nfkc_cf->normalize(source, normalised, status);
    if (U_FAILURE(status)) {
        return cells_of_bytes(text);
    }
    std::vector<Cell> cells;
    cells.reserve(static_cast<std::size_t>(normalised.length()));
    for (std::int32_t i = 0; i < normalised.length(); i = normalised.moveIndex32(i, 1)) {
        cells.push_back(classify(normalised.char32At(i)));
    }
    return cells;
}

bool is_alnum(const Cell& cell) {
    return cell.kind == Cell::Kind::digit || cell.kind == Cell::Kind::letter;
}

// The index just past the separators that start at `i` (`i` itself if there are none): the gap
// between two groups, one separator or several ("4242 - 4242", "4242,  4242").
std::size_t past_separators(const std::vector<Cell>& cells, std::size_t i) {
    while (i < cells.size() && cells[i].kind == Cell::Kind::separator) {
        ++i;
    }
    return i;
}

// ISO 13616: the IBAN moved its first four characters to the end, letters as 10..35, mod 97 == 1.
bool iban_check_passes(const std::string& iban) {
    unsigned remainder = 0;
    auto add = [&remainder](char c) {
        if (c >= '0' && c <= '9') {
            remainder = (remainder * 10 + static_cast<unsigned>(c - '0')) % 97;
        } else {
            remainder = (remainder * 100 + static_cast<unsigned>(c - 'a' + 10)) % 97;
        }
    };
    for (std::size_t i = 4; i < iban.size(); ++i) {
        add(iban[i]);
    }
    for (std::size_t i = 0; i < 4; ++i) {
        add(iban[i]);
    }
    return remainder == 1;
}

constexpr std::size_t k_min_iban_length = 15; // Norway
constexpr std::size_t k_max_iban_length = 34;

// The country codes IBANs are issued under: SWIFT's IBAN registry, the territories whose banks
// issue IBANs in their own code's name (French overseas, Aland, the Crown Dependencies), and the
// countries whose banks publish IBANs outside the registry (mostly West and Central Africa). Two
// letters that are none of these ("cc", "fa") do not start an IBAN, so a card number with two
// letters glued to it is not skipped as one when its first digits happen to pass the mod-97 check.
constexpr auto k_iban_countries = std::to_array<std::string_view>({
    "ad", "ae", "al", "ao", "at", "ax", "az", "ba", "be", "bf", "bg", "bh", "bi", "bj", "bl", "br",
    "by", "cf", "cg", "ch", "ci", "cm", "cr", "cv", "cy", "cz", "de", "dj", "dk", "do", "dz", "ee",
    "eg", "es", "fi", "fk", "fo", "fr", "ga", "gb", "ge", "gf", "gg", "gi", "gl", "gp", "gq", "gr",
    "gt", "gw", "hn", "hr", "hu", "ie", "il", "im", "iq", "ir", "is", "it", "je", "jo", "km", "kw",
    "kz", "lb", "lc", "li", "lt", "lu", "lv", "ly", "ma", "mc", "md", "me", "mf", "mg", "mk", "ml",
    "mn", "mq", "mr", "mt", "mu", "mz", "nc", "ne", "ni", "nl", "no", "om", "pf", "pk", "pl", "pm",
    "ps", "pt", "qa", "re", "ro", "rs", "ru", "sa", "sc", "sd", "se", "si", "sk", "sm", "sn", "so",
    "st", "sv", "td", "tf", "tg", "tl", "tn", "tr", "ua", "va", "vg", "wf", "xk", "ye", "yt",
});

bool is_iban_country(char first, char second) {
    const char code[2] = {first, second};
    return std::binary_search(k_iban_countries.begin(), k_iban_countries.end(),
                              std::string_view(code, 2));
}

// If a valid IBAN starts at `start` (a country code, two digits, then letters and digits,
// optionally in groups separated as card groups are: by spaces, dashes, dots, slashes or any other
// separators), the index just past its longest valid form; else `start`.
std::size_t iban_end(const std::vector<Cell>& cells, std::size_t start) {
    const std::size_t n = cells.size();
    if (start + 4 > n || (start > 0 && is_alnum(cells[start - 1])) ||
        cells[start].kind != Cell::Kind::letter || cells[start + 1].kind != Cell::Kind::letter ||
        cells[start + 2].kind != Cell::Kind::digit || cells[start + 3].kind != Cell::Kind::digit ||
        !is_iban_country(cells[start].ascii, cells[start + 1].ascii)) {
        return start;
    }
    std::string iban;
    for (std::size_t i = start; i < start + 4; ++i) {
        iban += cells[i].ascii;
    }
    std::size_t end = start;
    std::size_t i = start + 4;
    while (true) {
        while (i < n && is_alnum(cells[i]) && iban.size() < k_max_iban_length) {
            iban += cells[i].ascii;
            ++i;
        }
        if (i < n && is_alnum(cells[i])) {
            break; // longer than any IBAN
        }
        // The end of a group: the IBAN may end here.
        if (iban.size() >= k_min_iban_length && iban_check_passes(iban)) {
            end = i;
        }
        // The paper format separates groups by a space; people also write dashes, dots or
        // slashes, and the card search joins groups across any separators, so this does too.
        const std::size_t next = past_separators(cells, i);
        if (next > i && next < n && is_alnum(cells[next])) {
            i = next;
            continue;
        }
        break;
    }
    return end;
}

bool is_hex(const Cell& cell) {
    return cell.kind == Cell::Kind::digit ||
           (cell.kind == Cell::Kind::letter && cell.ascii >= 'a' && cell.ascii <= 'f');
}

// If a UUID in its text form (8-4-4-4-12 hex digits joined by dashes) starts at `start`, the index
// just past it; else `start`.
std::size_t uuid_end(const std::vector<Cell>& cells, std::size_t start) {
    if (start > 0 && is_alnum(cells[start - 1])) {
        return start;
    }
    constexpr std::array<std::size_t, 5> k_groups = {8, 4, 4, 4, 12};
    std::size_t i = start;
    for (std::size_t g = 0; g < k_groups.size(); ++g) {
        if (g > 0) {
            if (i >= cells.size() || cells[i].kind != Cell::Kind::separator ||
                cells[i].ascii != '-') {
                return start;
            }
            ++i;
        }
        for (std::size_t k = 0; k < k_groups[g]; ++k, ++i) {
            if (i >= cells.size() || !is_hex(cells[i])) {
                return start;
            }
        }
    }
    return i < cells.size() && is_alnum(cells[i]) ? start : i;
}

constexpr std::size_t k_min_hex_token_length = 16;
// How many of a hex token's characters must lie outside its longest run of digits: a random token
// mixes letters and digits throughout (a UUID without dashes holds a run of 25 digits about 3
// times in 100,000), while a card number with a letter or two glued to it ("cc4242424242424242",
// "4242424242424242e") is a run of digits with almost nothing around it.
constexpr std::size_t k_min_hex_token_rest = 8;

// If a hex token starts at `start` -- at least 16 letters and digits, all hex, at least one a-f,
// at least 8 of them outside its longest digit run: a UUID without dashes, a hash, an API token
// -- the index just past it; else `start`.
std::size_t hex_token_end(const std::vector<Cell>& cells, std::size_t start) {
    if (start > 0 && is_alnum(cells[start - 1])) {
        return start;
    }
    bool has_letter = false;
    std::size_t digit_run = 0;
    std::size_t longest_digit_run = 0;
    std::size_t i = start;
    for (; i < cells.size() && is_alnum(cells[i]); ++i) {
        if (!is_hex(cells[i])) {
            return start;
        }
        const bool letter = cells[i].kind == Cell::Kind::letter;
        has_letter = has_letter || letter;
        digit_run = letter ? 0 : digit_run + 1;
        longest_digit_run = std::max(longest_digit_run, digit_run);
    }
    const std::size_t length = i - start;
    return has_letter && length >= k_min_hex_token_length &&
                   length - longest_digit_run >= k_min_hex_token_rest
               ? i
               : start;
}

constexpr std::size_t k_ups_tracking_length = 18;

// If a UPS tracking number ("1Z", then 16 letters and digits: shipper, service, package) starts at
// `start`, the index just past it; else `start`.
std::size_t ups_tracking_end(const std::vector<Cell>& cells, std::size_t start) {
    if ((start > 0 && is_alnum(cells[start - 1])) || start + k_ups_tracking_length > cells.size() ||
        cells[start].ascii != '1' || cells[start + 1].ascii != 'z') {
        return start;
    }
    std::size_t i = start;
    while (i < cells.size() && is_alnum(cells[i])) {
        ++i;
    }
    return i - start == k_ups_tracking_length ? i : start;
}

// Identifiers that carry digits and are not card numbers: every valid IBAN, UUID, hex token and UPS
// tracking number becomes `other` (card_number.hpp, "Choices").
void skip_identifiers(std::vector<Cell>& cells) {
    for (std::size_t i = 0; i < cells.size(); ++i) {
        const std::size_t end = std::max({iban_end(cells, i), uuid_end(cells, i),
                                          hex_token_end(cells, i), ups_tracking_end(cells, i)});
        for (std::size_t j = i; j < end; ++j) {
            cells[j] = Cell{};
        }
        if (end > i) {
            i = end - 1;
        }
    }
}

// Whether digit groups of these sizes are written the way card numbers are (card_number.hpp, 3).
bool card_like_grouping(const std::vector<std::size_t>& sizes, std::size_t total) {
    if (total < k_min_card_length || total > k_max_card_length) {
        return false;
    }
    if (sizes.size() == 1) {
        return total >= k_min_unseparated_length;
    }
    using Sizes = std::vector<std::size_t>;
    if (sizes == Sizes{4, 6, 5} || sizes == Sizes{4, 6, 4} || sizes == Sizes{4, 6, 6} ||
        sizes == Sizes{8, 8}) {
        return true;
    }
    // Fours, the last group 1-4 digits (4-4-4, 4-4-4-1 .. 4-4-4-4, 4-4-4-4-1 .. 4-4-4-4-3): how
    // most software formats every card, Amex and Diners included.
    if (sizes.size() < 3) {
        return false;
    }
    for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
        if (sizes[i] != 4) {
            return false;
        }
    }
    return sizes.back() >= 1 && sizes.back() <= 4;
}

struct Group {
    std::size_t start = 0; // index of its first cell
    std::size_t size = 0;  // digits
};

// Whether the groups of a run from `from` on are what may follow a card number written after a
// long group: nothing, a security code (3-4 digits), an expiry date (1-2 digits, then 2 or 4), or
// both in either order. Not a lone group of 1-2 digits: a 22-, 26- or 30-digit parcel tracking
// number written in fours ends with one ("9400 4242 4242 4242 4242 00").
bool card_tail(const std::vector<Group>& groups, std::size_t from) {
    const auto security_code = [&](std::size_t i) {
        return groups[i].size >= 3 && groups[i].size <= 4;
    };
    const auto expiry = [&](std::size_t i) {
        return groups[i].size <= 2 && (groups[i + 1].size == 2 || groups[i + 1].size == 4);
    };
    const std::size_t left = groups.size() - from;
    switch (left) {
    case 0:
        return true;
    case 1:
        return security_code(from);
    case 2:
        return expiry(from);
    case 3:
        return (security_code(from) && expiry(from + 1)) ||
               (expiry(from) && security_code(from + 2));
    default:
        return false;
    }
}

// The spans of whole groups of one run that may be a card number (card_number.hpp, "Choices"):
// those preceded in it by nothing or only by groups of one or two digits; after a longer group,
// those followed by nothing but a security code or an expiry date; and single groups anywhere.
std::optional<CardNumberMatch> search_run(const std::vector<Cell>& cells,
                                          const std::vector<Group>& groups) {
    std::string digits;
    std::vector<std::size_t> sizes;
    bool after_long_group = false; // a group of more than two digits precedes `first`
    for (std::size_t first = 0; first < groups.size(); ++first) {
        after_long_group =
            after_long_group || (first > 0 && groups[first - 1].size > k_max_leading_group);
        // The digits of the longest span from `first`.
        digits.clear();
        sizes.clear();
        for (std::size_t last = first; last < groups.size(); ++last) {
            const Group& group = groups[last];
            if (digits.size() + group.size > k_max_card_length) {
                break;
            }
            for (std::size_t i = group.start; i < group.start + group.size; ++i) {
                digits += cells[i].ascii;
            }
            sizes.push_back(group.size);
        }
        // Longest first: "6304 0000 0000 0000" is one 16-digit card, not a 12-digit one and more.
        while (!sizes.empty()) {
            // After a long group, a span of several groups counts only at the end of the run,
            // and only when it ends with a group of 3 digits or more: a longer grouped number
            // written in fours ends with one of 1-2 digits as often as not (an unseparated
            // number may stand anywhere).
            const bool placed =
                !after_long_group || sizes.size() == 1 ||
                (sizes.back() >= k_min_trailing_group && card_tail(groups, first + sizes.size()));
            if (placed && card_like_grouping(sizes, digits.size())) {
                const std::string_view number(digits);
                const auto brand = card_brand(number);
                if (brand && luhn_valid(number)) {
                    return CardNumberMatch{*brand, digits.size()};
                }
            }
            digits.resize(digits.size() - sizes.back());
            sizes.pop_back();
        }
    }
    return std::nullopt;
}

// Names of fields for card data, folded (is_card_field_name): the card number, the security code,
// the expiry, and the magnetic stripe's tracks. Generic names that shops also use for other things
// ("number", "card", "pan", "expiry") are here because a card form uses them too; a shop sends its
// order number as merchant_reference.
constexpr auto k_card_field_names = std::to_array<std::string_view>({
    "number",
    "card",
    "cardnumber",
    "cardnum",
    "cardno",
    "ccnumber",
    "ccnum",
    "ccno",
    "creditcard",
    "creditcardnumber",
    "debitcard",
    "debitcardnumber",
    "pan",
    "cardpan",
    "primaryaccountnumber",
    "csc",
    "cardcode",
    "cvn",
    "cvd",
    "expmonth",
    "expyear",
    "expdate",
    "expiry",
    "expirydate",
    "expirymonth",
    "expiryyear",
    "expiration",
    "expirationdate",
    "expirationmonth",
    "expirationyear",
    "cardexp",
    "cardexpiry",
    "cardexpiration",
    "cardexpmonth",
    "cardexpyear",
    "ccexp",
    "ccexpiry",
    "track1",
    "track2",
    "trackdata",
    "pinblock",
});

// Words that mean card data wherever they stand in a name ("card_cvc", "cvv2", "cvc2").
constexpr auto k_card_field_words = std::to_array<std::string_view>({"cvc", "cvv", "securitycode"});

} // namespace

bool is_card_field_name(std::string_view name) {
    std::string folded;
    for (const Cell& cell : cells_of(name)) {
        if (cell.kind == Cell::Kind::letter || cell.kind == Cell::Kind::digit) {
            folded += cell.ascii;
        } else if (cell.kind == Cell::Kind::other) {
            folded += '?'; // a letter outside ASCII: it still makes the name another name
        }
    }
    for (const std::string_view word : k_card_field_words) {
        if (folded.find(word) != std::string::npos) {
            return true;
        }
    }
    return std::find(k_card_field_names.begin(), k_card_field_names.end(), folded) !=
           k_card_field_names.end();
}

std::string_view to_string(CardBrand brand) {
    switch (brand) {
    case CardBrand::visa:
        return "visa";
    case CardBrand::mastercard:
        return "mastercard";
    case CardBrand::amex:
        return "amex";
    case CardBrand::discover:
        return "discover";
    case CardBrand::jcb:
        return "jcb";
    case CardBrand::diners:
        return "diners";
    case CardBrand::unionpay:
        return "unionpay";
    case CardBrand::maestro:
        return "maestro";
    case CardBrand::mir:
        return "mir";
    }
    return "unknown";
}

bool luhn_valid(std::string_view digits) {
    if (digits.empty()) {
        return false;
    }
    int sum = 0;
    bool doubled = false;
    for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
        if (*it < '0' || *it > '9') {
            return false;
        }
        int digit = *it - '0';
        if (doubled) {
            digit *= 2;
            if (digit > 9) {
                digit -= 9;
            }
        }
        sum += digit;
        doubled = !doubled;
    }
    return sum % 10 == 0;
}

std::optional<CardBrand> card_brand(std::string_view digits) {
    if (digits.size() > k_max_card_length) {
        return std::nullopt;
    }
    for (const IinRange& range : k_iin_ranges) {
        if (digits.size() < range.prefix_digits || (range.lengths & (1U << digits.size())) == 0) {
            continue;
        }
        std::uint32_t prefix = 0;
        for (std::size_t i = 0; i < range.prefix_digits; ++i) {
            if (digits[i] < '0' || digits[i] > '9') {
                return std::nullopt;
            }
            prefix = prefix * 10 + static_cast<std::uint32_t>(digits[i] - '0');
        }
        if (prefix >= range.low && prefix <= range.high) {
            return range.brand;
        }
    }
    return std::nullopt;
}

std::optional<CardNumberMatch> find_card_number(std::string_view utf8_text) {
    std::vector<Cell> cells = cells_of(utf8_text);
    skip_identifiers(cells);
    const auto is_digit = [&cells](std::size_t i) {
        return i < cells.size() && cells[i].kind == Cell::Kind::digit;
    };
    std::vector<Group> groups;
    std::size_t i = 0;
    while (i < cells.size()) {
        if (!is_digit(i)) {
            ++i;
            continue;
        }
        // One run: digit groups joined by separators.
        groups.clear();
        while (true) {
            const std::size_t start = i;
            while (is_digit(i)) {
                ++i;
            }
            groups.push_back(Group{start, i - start});
            const std::size_t next = past_separators(cells, i);
            if (next > i && is_digit(next)) {
                i = next;
                continue;
            }
            break;
        }
        if (auto found = search_run(cells, groups)) {
            return found;
        }
    }
    return std::nullopt;
}

} // namespace payrecon
