#include "core/encoding.hpp"

#include <openssl/evp.h>

namespace payrecon {

std::string base64(std::string_view bytes) {
    // EVP_EncodeBlock writes 4 characters per 3 bytes (padded) and a terminating NUL.
    std::string out((bytes.size() + 2) / 3 * 4 + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(bytes.data()),
                                  static_cast<int>(bytes.size()));
    out.resize(static_cast<std::size_t>(n));
    return out;
}

std::string base64url(std::string_view bytes) {
    std::string out = base64(bytes);
    while (!out.empty() && out.back() == '=') {
        out.pop_back();
    }
    for (char& c : out) {
        c = c == '+' ? '-' : c == '/' ? '_' : c;
    }
    return out;
}

std::optional<std::string> from_base64(std::string_view text) {
    if (text.size() % 4 != 0) {
        return std::nullopt;
    }
    const auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') {
            return c - 'A';
        }
        if (c >= 'a' && c <= 'z') {
            return c - 'a' + 26;
        }
        if (c >= '0' && c <= '9') {
            return c - '0' + 52;
        }
        return c == '+' ? 62 : c == '/' ? 63 : -1;
    };
    std::size_t pad = 0;
    while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') {
        ++pad;
    }
    std::string out;
    out.reserve(text.size() / 4 * 3);
    const std::size_t digits = text.size() - pad;
    unsigned long bits = 0;
    int held = 0;
    for (std::size_t i = 0; i < digits; ++i) {
        const int v = value(text[i]);
        if (v < 0) {
            return std::nullopt;
        }
        bits = (bits << 6) | static_cast<unsigned long>(v);
        held += 6;
        if (held >= 8) {
            held -= 8;
            out += static_cast<char>((bits >> held) & 0xFF);
        }
    }
    // The leftover bits are padding and must be zero (one spelling per byte string).
    if ((bits & ((1UL << held) - 1)) != 0) {
        return std::nullopt;
    }
    return out;
}

std::string percent_encode(std::string_view text) {
    static constexpr const char* k_hex = "0123456789ABCDEF";
    std::string out;
    out.reserve(text.size());
    for (const char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                                (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
                                c == '~';
        if (unreserved) {
            out += ch;
        } else {
            out += '%';
            out += k_hex[c >> 4];
            out += k_hex[c & 0x0F];
        }
    }
    return out;
}

bool is_uuid_text(std::string_view text) {
    if (text.size() != 36) {
        return false;
    }
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-') {
                return false;
            }
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
            return false;
        }
    }
    return true;
}

std::string printable(std::string_view text) {
    static constexpr const char* k_hex = "0123456789abcdef";
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char ch = text[i];
        const auto c = static_cast<unsigned char>(ch);
        const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0U;
        if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {
            // A C1 control (U+0080..U+009F, e.g. CSI) in UTF-8: terminals act on these too.
            out += "\\u00";
            out += k_hex[next >> 4];
            out += k_hex[next & 0x0f];
            ++i;
        } else if (ch == '\\') {
            out += "\\\\";
        } else if (ch == '\n') {
            out += "\\n";
        } else if (ch == '\t') {
            out += "\\t";
        } else if (ch == '\r') {
            out += "\\r";
        } else if (c < 0x20 || c == 0x7f) {
            out += "\\x";
            out += k_hex[c >> 4];
            out += k_hex[c & 0x0f];
        } else {
            out += ch;
        }
    }
    return out;
}

namespace {

// The code points of UTF-8 `text`, or nullopt if it is not valid UTF-8 (overlong forms,
// surrogates and values past U+10FFFF included).
std::optional<std::u32string> decode_utf8(std::string_view text) {
    std::u32string out;
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        int extra = 0;
        char32_t cp = 0;
        if (c < 0x80) {
            cp = c;
        } else if (c >= 0xc2 && c <= 0xdf) {
            extra = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            extra = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            extra = 3;
            cp = c & 0x07;
        } else {
            return std::nullopt;
        }
        if (i + static_cast<std::size_t>(extra) >= text.size()) {
            return std::nullopt; // cut short
        }
        for (int k = 1; k <= extra; ++k) {
            const auto cc = static_cast<unsigned char>(text[i + static_cast<std::size_t>(k)]);
            if ((cc & 0xc0) != 0x80) {
                return std::nullopt;
            }
            cp = (cp << 6) | (cc & 0x3f);
        }
        if ((extra == 2 && cp < 0x800) || (extra == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff)) {
            return std::nullopt;
        }
        out += cp;
        i += static_cast<std::size_t>(extra) + 1;
    }
    return out;
}

bool invisible_or_bidi(char32_t cp) {
    return (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x202a && cp <= 0x202e) ||
           (cp >= 0x2060 && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
}

} // namespace

std::optional<std::string> display_name_problem(std::string_view text, std::size_t max_bytes) {
    if (text.empty()) {
        return "is empty";
    }
    if (text.size() > max_bytes) {
        return "is longer than " + std::to_string(max_bytes) + " bytes";
    }
    const auto points = decode_utf8(text);
    if (!points) {
        return "is not valid UTF-8";
    }
    for (const char32_t cp : *points) {
        if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f)) {
            return "holds a control character (a newline, a tab, an escape, ...)";
        }
        if (invisible_or_bidi(cp)) {
            return "holds an invisible or text-direction character";
        }
    }
    if (text.front() == ' ' || text.back() == ' ') {
        return "begins or ends with a space";
    }
    return std::nullopt;
}

std::optional<std::string> from_hex(std::string_view text) {
    if (text.size() % 2 != 0) {
        return std::nullopt;
    }
    const auto digit = [](char c) -> int {
        if (c >= '0' && c <= '9') {
            return c - '0';
        }
        if (c >= 'a' && c <= 'f') {
            return c - 'a' + 10;
        }
        if (c >= 'A' && c <= 'F') {
            return c - 'A' + 10;
        }
        return -1;
    };
    std::string out;
    out.reserve(text.size() / 2);
    for (std::size_t i = 0; i < text.size(); i += 2) {
        const int hi = digit(text[i]);
        const int lo = digit(text[i + 1]);
        if (hi < 0 || lo < 0) {
            return std::nullopt;
        }
        out += static_cast<char>(hi * 16 + lo);
    }
    return out;
}

} // namespace payrecon
