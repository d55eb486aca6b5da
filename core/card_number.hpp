#pragma once
// Finds payment card numbers (PANs) in text, the way PCI DSS data-discovery scanners do, so that
// intake refuses them before anything is stored or logged -- without refusing the digit-rich
// references that shops use every day.
//
// A card number is found where all of these hold:
//  1. Text: the text is NFKC-normalised with case folding and default-ignorable characters
//     removed (ICU's NFKC_Casefold), so full-width digits (U+FF10..), circled, superscript and
//     mathematical digits become ASCII and zero-width characters cannot split a number. Every
//     decimal digit of any script (Unicode Nd: Arabic-Indic, Devanagari, ...) counts as its value.
//     Ill-formed UTF-8 is read as U+FFFD, which is neither a digit nor a separator.
//  2. Separators: digits stand in groups separated by one or more separators: white space (any
//     Unicode White_Space, so also tab, newline, no-break space), any other visible ASCII
//     character that is not a letter or digit ('-', '.', '/', '_', ',', ':', '+', '|', ...), any
//     Unicode dash or other punctuation, and U+2212 minus. So "4242 - 4242", "4242,4242" and
//     "4242  4242" join their groups. A letter, a control character or any other character (a
//     symbol such as U+FFFD) ends the run of groups.
//  3. Grouping: the card number is a span of whole groups of one run, grouped as cards are
//     written: unseparated (14-19 digits), 4-6-5 (Amex), 4-6-4 (Diners), 4-6-6 and 8-8 (16 digits),
//     or fours with a last group of 1-4 digits (4-4-4-4, 4-4-4-3, 4-4-4-4-3, ..., 4-4-4 at 12
//     digits). Other groupings (3-3-4, 4-4-6, 4-4-8, 5-5-6, 7-7, 8-4, 6-6, an ISO date
//     "2026-12-02") are not card numbers.
//  4. Brand: its first digits are in a brand's published IIN range and its length is one that
//     brand issues (table in card_number.cpp: Visa, Mastercard, American Express, Discover, JCB,
//     Diners Club, UnionPay, Maestro, Mir).
//  5. Check digit: it passes the Luhn check.
//
// Choices, and why (PCI scanners' patterns end a card number at any non-digit; these rules keep
// what they find in pasted text and drop what they find inside other identifiers):
//  - Never inside a longer unbroken digit sequence: a 20-digit ID is not a card even when 16 of its
//    digits would pass.
//  - In a run of groups, a card number written in groups comes first, or after groups of one or
//    two digits only, or -- after a longer group -- last, its last group of 3 digits or more,
//    followed by nothing but its security code or expiry date; an unseparated one may stand
//    anywhere. So a card pasted with its expiry date, a year or a security code is found
//    ("4242 4242 4242 4242 12/30", "4242-4242-4242-4242 123", "12/30 4242 4242 4242 4242",
//    "exp 12/2030 4242 4242 4242 4242", "2030-4242-4242-4242-4242", "2026 4242424242424242"),
//    and a span in the middle of a longer grouped number is not: a 22-, 26- or 30-digit parcel
//    tracking number written in fours ends with a group of two digits
//    ("9400 4242 4242 4242 4242 00"). (So a 14- or 18-digit card written in fours, 4-4-4-2, is not
//    found after a long group; 4-6-4 is.) The price: a 20-digit number written in five groups of
//    four whose last 16 digits pass as a card (about 3 in 100) is taken for one.
//  - Letters delimit: "card4242424242424242" and "cc4242424242424242" are refused. But identifiers
//    whose letters and digits mix at random are skipped whole: a UUID (8-4-4-4-12 hex), a hex
//    token of 16 or more characters with at least one letter a-f and at least 8 characters outside
//    its longest run of digits (a UUID without dashes, a hash, an API token; about 1 in 7,000 UUIDs
//    without dashes holds a digit stretch that passes as a card; a card with a letter or two glued
//    to it is not such a token), a valid IBAN (ISO 13616: a country code IBANs are issued under,
//    two check digits, up to 30 letters and digits, unseparated or in groups separated as card
//    groups are -- spaces, dashes, dots, slashes --, mod-97 check; bank and sort codes often start
//    like card IINs, a UK IBAN holds 14 digits), and a UPS tracking number ("1Z" and 16 letters
//    and digits).
//  - 12- and 13-digit numbers count only when written in groups (4-4-4, 4-4-4-1): cards that short
//    are legacy or rare (13-digit Visa, 12-15 digit Maestro), while unseparated 12-13 digit numbers
//    are everyday identifiers (EAN-13 and UPC-A barcodes, 13-digit shop order IDs, phone numbers in
//    E.164). Microsoft Purview's card detector likewise starts at 14 digits.
// This finds card numbers written carelessly -- pasted into a description, a reference or a
// metadata value, typed with full-width digits, dotted, slashed or underscored -- not ones
// deliberately disguised (spelled out, split by letters, wrapped in a made-up hex token or IBAN);
// no scanner can.

#include <cstddef>
#include <optional>
#include <string_view>

namespace payrecon {

enum class CardBrand { visa, mastercard, amex, discover, jcb, diners, unionpay, maestro, mir };

std::string_view to_string(CardBrand brand);

// What was found, never the digits themselves.
struct CardNumberMatch {
    CardBrand brand = CardBrand::visa;
    std::size_t length = 0; // digits
};

// The first card number in `utf8_text` (any bytes; ill-formed UTF-8 is tolerated), or nullopt.
// Pure; throws nothing but std::bad_alloc. If ICU cannot normalise the text (out of memory), the
// text is searched as it is, so ASCII card numbers are still found.
std::optional<CardNumberMatch> find_card_number(std::string_view utf8_text);

inline bool contains_card_number(std::string_view utf8_text) {
    return find_card_number(utf8_text).has_value();
}

// Whether an object key names card data: a card number, security code or expiry (the list is in
// card_number.cpp: "card_number", "cc_number", "pan", "cvc", "cvv2", "security_code", "csc",
// "cardCode", "exp_date", "expiry", ...). Compared NFKC-case-folded with everything but letters
// and digits dropped, so "card_number", "cardNumber", "CARD-NUMBER" and "card number" are one
// name. A name that holds "cvc", "cvv" or "securitycode" anywhere ("card_cvc", "billing_cvv")
// counts too: those words mean nothing else.
bool is_card_field_name(std::string_view name);

// The Luhn (mod 10) check over ASCII digits; false if `digits` is empty or holds a non-digit.
bool luhn_valid(std::string_view digits);

// The brand whose IIN ranges and lengths admit `digits` (ASCII digits), or nullopt. Does not check
// Luhn. When ranges overlap (Discover's 622126-622925 inside UnionPay's 62, Maestro's 6), the more
// specific range names the brand.
std::optional<CardBrand> card_brand(std::string_view digits);

} // namespace payrecon
