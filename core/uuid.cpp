#include "core/uuid.hpp"

#include "core/fingerprint.hpp"

#include <cstdint>
#include <string_view>

namespace payrecon {

std::array<unsigned char, 16> uuid_v7_bytes(std::chrono::system_clock::time_point at) {
    using namespace std::chrono;
    const auto since_epoch = duration_cast<nanoseconds>(at.time_since_epoch()).count();
    const auto ms = static_cast<std::uint64_t>(since_epoch / 1'000'000);
    // The fraction of the millisecond in 1/4096ths: 12 bits, rising with time inside the ms.
    const auto fraction = static_cast<std::uint64_t>(since_epoch % 1'000'000) * 4096 / 1'000'000;
    const std::string random = random_bytes(8);
    std::array<unsigned char, 16> b{};
    for (std::size_t i = 0; i < 6; ++i) {
        b[i] = static_cast<unsigned char>(ms >> (8 * (5 - i)));
    }
    b[6] = static_cast<unsigned char>(0x70 | ((fraction >> 8) & 0x0F));
    b[7] = static_cast<unsigned char>(fraction & 0xFF);
    for (std::size_t i = 0; i < 8; ++i) {
        b[8 + i] = static_cast<unsigned char>(random[i]);
    }
    b[8] = static_cast<unsigned char>((b[8] & 0x3F) | 0x80);
    return b;
}

std::string uuid_v7(std::chrono::system_clock::time_point at) {
    const auto b = uuid_v7_bytes(at);
    const std::string h = to_hex(std::string(reinterpret_cast<const char*>(b.data()), b.size()));
    return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
           "-" + h.substr(20);
}

std::optional<long long> uuid_v7_unix_ms(const std::string& id) {
    if (id.size() != 36 || id[14] != '7' ||
        std::string_view("89ab").find(id[19]) == std::string_view::npos) {
        return std::nullopt;
    }
    long long ms = 0;
    for (std::size_t i = 0; i < id.size(); ++i) {
        const char c = id[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-') {
                return std::nullopt;
            }
            continue;
        }
        const bool digit = c >= '0' && c <= '9';
        if (!digit && !(c >= 'a' && c <= 'f')) {
            return std::nullopt;
        }
        if (i < 13) { // the 48 bits of milliseconds: 8 hex digits, a dash, 4 more
            ms = ms * 16 + (digit ? c - '0' : c - 'a' + 10);
        }
    }
    return ms;
}

} // namespace payrecon
