#include "net/endpoint_address.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <charconv>
#include <cstring>
#include <initializer_list>

namespace payrecon::net {

namespace {

struct Range {
    const char* network;
    int prefix;
    const char* kind;
};

// The special-purpose ranges an endpoint may not reach unless allowed: every entry of IANA's IPv4
// and IPv6 Special-Purpose Address Registries that is not globally reachable (RFC 6890 and its
// successors, checked against the registries as of 2025), and multicast. A few globally reachable
// anycast entries inside a refused block (192.0.0.9/32, 2001:1::1/128, AMT's 2001:3::/32, ...)
// are refused with it: no webhook receiver lives there. More specific ranges come first: the
// first that holds an address names it.
constexpr Range k_v4_ranges[] = {
    {"0.0.0.0", 8, "this network (0.0.0.0/8)"},
    {"10.0.0.0", 8, "private (10.0.0.0/8)"},
    {"100.64.0.0", 10, "carrier-grade NAT (100.64.0.0/10)"},
    {"127.0.0.0", 8, "loopback"},
    {"169.254.0.0", 16, "link-local (169.254.0.0/16, cloud metadata among it)"},
    {"172.16.0.0", 12, "private (172.16.0.0/12)"},
    {"192.0.0.0", 24, "IETF protocol assignments (192.0.0.0/24)"},
    {"192.0.2.0", 24, "documentation (192.0.2.0/24)"},
    {"192.88.99.0", 24, "6to4 relay anycast (192.88.99.0/24)"},
    {"192.168.0.0", 16, "private (192.168.0.0/16)"},
    {"198.18.0.0", 15, "benchmarking (198.18.0.0/15)"},
    {"198.51.100.0", 24, "documentation (198.51.100.0/24)"},
    {"203.0.113.0", 24, "documentation (203.0.113.0/24)"},
    {"224.0.0.0", 4, "multicast (224.0.0.0/4)"},
    {"240.0.0.0", 4, "reserved (240.0.0.0/4, broadcast among it)"},
};
// IPv6 beyond the forms that carry an IPv4 address (address_kind judges those first).
constexpr Range k_v6_ranges[] = {
    {"::", 128, "unspecified (::)"},
    {"::1", 128, "loopback"},
    {"64:ff9b:1::", 48, "local-use NAT64 (64:ff9b:1::/48)"},
    {"100::", 64, "discard (100::/64)"},
    {"100:0:0:1::", 64, "dummy prefix (100:0:0:1::/64)"},
    {"2001::", 32, "Teredo (2001::/32)"},
    {"2001:2::", 48, "benchmarking (2001:2::/48)"},
    {"2001:db8::", 32, "documentation (2001:db8::/32)"},
    {"2001::", 23, "IETF protocol assignments (2001::/23)"},
    {"2002::", 16, "6to4 (2002::/16)"},
    {"3fff::", 20, "documentation (3fff::/20)"},
    {"5f00::", 16, "segment routing SIDs (5f00::/16)"},
    {"fc00::", 7, "private (unique local, fc00::/7)"},
    {"fe80::", 10, "link-local (fe80::/10)"},
    {"fec0::", 10, "site-local (fec0::/10)"},
    {"ff00::", 8, "multicast (ff00::/8)"},
    // Everything else outside global unicast is reserved by the IETF (IANA's IPv6 Address Space
    // registry): ::/8 beyond the forms above, 0100::/8 .. 1fff::/16, 4000::/3 .. fe00::/9.
    {"::", 3, "reserved (outside global unicast 2000::/3)"},
    {"4000::", 2, "reserved (outside global unicast 2000::/3)"},
    {"8000::", 1, "reserved (outside global unicast 2000::/3)"},
};

bool prefix_matches(const std::uint8_t* a, const std::uint8_t* b, int prefix) {
    const int whole = prefix / 8;
    if (std::memcmp(a, b, static_cast<std::size_t>(whole)) != 0) {
        return false;
    }
    const int rest = prefix % 8;
    if (rest == 0) {
        return true;
    }
    const auto mask = static_cast<std::uint8_t>(0xFF << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

bool starts_with(const IpAddress& a, std::initializer_list<std::uint8_t> prefix) {
    return std::equal(prefix.begin(), prefix.end(), a.bytes.begin());
}

IpAddress v4_at(const IpAddress& a, std::size_t offset) {
    IpAddress v4;
    std::memcpy(v4.bytes.data(), a.bytes.data() + offset, 4);
    return v4;
}

// The IPv4 address an IPv6 address stands for, where a connection to it reaches that IPv4
// address: IPv4-mapped (::ffff:a.b.c.d, a dual-stack socket's IPv4) and the NAT64 well-known
// prefix (64:ff9b::/96, RFC 6052: the translator connects to a.b.c.d).
std::optional<IpAddress> embedded_v4(const IpAddress& a) {
    if (!a.v6) {
        return std::nullopt;
    }
    if (starts_with(a, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}) ||
        starts_with(a, {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0})) {
        return v4_at(a, 12);
    }
    return std::nullopt;
}

// The other IPv6 forms that carry an IPv4 address: their name and the address they carry. Never
// a public destination of their own: IPv4-compatible (::a.b.c.d, deprecated by RFC 4291),
// IPv4-translated (::ffff:0:a.b.c.d, SIIT, RFC 2765), and an ISATAP interface identifier
// (RFC 5214: ...:0:5efe:a.b.c.d or ...:200:5efe:a.b.c.d, under any prefix).
struct CarriedV4 {
    const char* form;
    IpAddress v4;
    bool isatap = false;
};
std::optional<CarriedV4> carried_v4(const IpAddress& a) {
    if (!a.v6) {
        return std::nullopt;
    }
    if (starts_with(a, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) &&
        // :: and ::1 are themselves, not 0.0.0.0 and 0.0.0.1
        (a.bytes[12] | a.bytes[13] | a.bytes[14]) != 0) {
        return CarriedV4{"IPv4-compatible (::/96, deprecated)", v4_at(a, 12)};
    }
    if (starts_with(a, {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0})) {
        return CarriedV4{"IPv4-translated (::ffff:0:0:0/96)", v4_at(a, 12)};
    }
    if ((a.bytes[8] & 0xfd) == 0 && a.bytes[9] == 0 && a.bytes[10] == 0x5e && a.bytes[11] == 0xfe) {
        return CarriedV4{"an ISATAP interface identifier", v4_at(a, 12), true};
    }
    return std::nullopt;
}

const char* range_kind(const IpAddress& a) {
    const Range* begin = a.v6 ? std::begin(k_v6_ranges) : std::begin(k_v4_ranges);
    const Range* end = a.v6 ? std::end(k_v6_ranges) : std::end(k_v4_ranges);
    for (const Range* r = begin; r != end; ++r) {
        const auto net = IpAddress::parse(r->network);
        if (net && prefix_matches(a.bytes.data(), net->bytes.data(), r->prefix)) {
            return r->kind;
        }
    }
    return nullptr;
}

std::string trim(std::string_view s) {
    while (!s.empty() && s.front() == ' ') {
        s.remove_prefix(1);
    }
    while (!s.empty() && s.back() == ' ') {
        s.remove_suffix(1);
    }
    return std::string(s);
}

} // namespace

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
    if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
        text = text.substr(1, text.size() - 2);
    }
    if (text.empty() || text.size() > 64) {
        return std::nullopt;
    }
    const std::string s(text);
    IpAddress out;
    if (::inet_pton(AF_INET, s.c_str(), out.bytes.data()) == 1) {
        return out;
    }
    if (::inet_pton(AF_INET6, s.c_str(), out.bytes.data()) == 1) {
        out.v6 = true;
        return out;
    }
    return std::nullopt;
}

std::string IpAddress::to_string() const {
    char buf[INET6_ADDRSTRLEN] = {};
    ::inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof buf);
    return buf;
}

bool Cidr::contains(const IpAddress& a) const {
    if (a.v6 != network.v6) {
        if (const auto v4 = embedded_v4(a); v4 && !network.v6) {
            return contains(*v4);
        }
        return false;
    }
    return prefix_matches(a.bytes.data(), network.bytes.data(), prefix);
}

tl::expected<NetworkAllowance, std::string> NetworkAllowance::parse(std::string_view text) {
    NetworkAllowance out;
    while (!text.empty()) {
        const std::size_t comma = text.find(',');
        const std::string item = trim(text.substr(0, comma));
        text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
        if (item.empty()) {
            continue;
        }
        const std::size_t slash = item.find('/');
        const auto address = IpAddress::parse(std::string_view(item).substr(0, slash));
        int prefix = address && address->v6 ? 128 : 32;
        bool ok = address.has_value();
        if (ok && slash != std::string::npos) {
            const std::string_view digits = std::string_view(item).substr(slash + 1);
            const auto [ptr, ec] =
                std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
            ok = !digits.empty() && ec == std::errc() && ptr == digits.data() + digits.size() &&
                 prefix >= 0 && prefix <= (address->v6 ? 128 : 32);
        }
        if (!ok) {
            return tl::unexpected("'" + item +
                                  "' is not a network: write an address or address/prefix, "
                                  "e.g. 127.0.0.0/8,::1,10.20.0.0/16");
        }
        out.networks.push_back(Cidr{*address, prefix});
    }
    return out;
}

bool NetworkAllowance::allows(const IpAddress& a) const {
    for (const Cidr& c : networks) {
        if (c.contains(a)) {
            return true;
        }
    }
    return false;
}

std::string NetworkAllowance::to_string() const {
    std::string out;
    for (const Cidr& c : networks) {
        out += out.empty() ? "" : ",";
        out += c.network.to_string() + "/" + std::to_string(c.prefix);
    }
    return out;
}

std::string address_kind(const IpAddress& a) {
    if (const auto v4 = embedded_v4(a)) {
        return address_kind(*v4);
    }
    if (const auto carried = carried_v4(a)) {
        const std::string carrying =
            std::string(carried->form) + " carrying " + carried->v4.to_string();
        const std::string v4_kind = address_kind(carried->v4);
        if (!carried->isatap) {
            // In ::/8, reserved whatever it carries.
            return carrying + " (" + v4_kind + ")";
        }
        if (const char* kind = range_kind(a)) {
            return kind;
        }
        if (v4_kind != "public") {
            return carrying + " (" + v4_kind + ")";
        }
        return "public";
    }
    const char* kind = range_kind(a);
    return kind != nullptr ? kind : "public";
}

bool is_loopback(const IpAddress& a) {
    return address_kind(a) == "loopback";
}

std::optional<std::string> address_refusal(const IpAddress& a, const NetworkAllowance& allowance) {
    const std::string kind = address_kind(a);
    if (kind == "public" || allowance.allows(a)) {
        return std::nullopt;
    }
    return a.to_string() + " is " + kind +
           ": endpoints reach public addresses only, unless the operator allows the network in "
           "PAYRECON_ENDPOINT_ALLOWED_NETWORKS";
}

tl::expected<EndpointUrl, std::string> parse_endpoint_url(std::string_view url) {
    const auto bad = [&](const std::string& why) {
        return tl::unexpected("the endpoint URL " + std::string(url.substr(0, 200)) + " " + why);
    };
    if (url.size() > 2048) {
        return tl::unexpected(std::string("the endpoint URL is longer than 2048 bytes"));
    }
    for (const char c : url) {
        const auto u = static_cast<unsigned char>(c);
        if (u <= 0x20 || u >= 0x7f) {
            return tl::unexpected(
                std::string("the endpoint URL holds a space, a control or a non-ASCII character: "
                            "percent-encode it"));
        }
    }
    EndpointUrl out;
    out.url = std::string(url);
    std::string_view rest;
    if (url.substr(0, 8) == "https://") {
        out.scheme = "https";
        out.port = 443;
        rest = url.substr(8);
    } else if (url.substr(0, 7) == "http://") {
        out.scheme = "http";
        out.port = 80;
        rest = url.substr(7);
    } else {
        return bad("is not https:// (http:// only to a loopback address)");
    }
    if (url.find('#') != std::string_view::npos) {
        return bad("has a fragment (#...): a fragment is never sent; remove it");
    }
    const std::string_view authority = rest.substr(0, rest.find_first_of("/?"));
    if (authority.find('@') != std::string_view::npos) {
        return bad("carries a user or password: endpoints authenticate our requests by their "
                   "signature; remove the credentials");
    }
    std::string_view host = authority;
    std::string_view port;
    if (!host.empty() && host.front() == '[') {
        const std::size_t close = host.find(']');
        if (close == std::string_view::npos) {
            return bad("has an unclosed [");
        }
        port = host.substr(close + 1);
        host = host.substr(1, close - 1);
        if (!port.empty() && port.front() != ':') {
            return bad("has text after the ]");
        }
        if (!IpAddress::parse(host) || !IpAddress::parse(host)->v6) {
            return bad("has [brackets] around something that is not an IPv6 address");
        }
    } else if (const std::size_t colon = host.rfind(':'); colon != std::string_view::npos) {
        port = host.substr(colon);
        host = host.substr(0, colon);
    }
    if (!port.empty()) {
        port.remove_prefix(1);
        int p = 0;
        const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
        if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || p < 1 ||
            p > 65535) {
            return bad("has a port that is not 1-65535");
        }
        out.port = p;
    }
    if (host.empty() || host.size() > 253) {
        return bad("has no host");
    }
    if (!IpAddress::parse(host)) {
        for (const char c : host) {
            const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.';
            if (!ok) {
                return bad("has a host name with a character a DNS name cannot have");
            }
        }
    }
    out.host = std::string(host);
    return out;
}

tl::expected<EndpointUrl, std::string>
check_endpoint(std::string_view url, const NetworkAllowance& allowance, const Resolver& resolve) {
    auto parsed = parse_endpoint_url(url);
    if (!parsed) {
        return parsed;
    }
    std::vector<IpAddress> addresses;
    if (const auto literal = IpAddress::parse(parsed->host)) {
        addresses.push_back(*literal);
    } else {
        auto resolved = resolve(parsed->host);
        if (!resolved) {
            return tl::unexpected("the endpoint's host " + parsed->host + " does not resolve: " +
                                  resolved.error() + "; register it once its DNS name exists");
        }
        if (resolved->empty()) {
            return tl::unexpected("the endpoint's host " + parsed->host + " has no address");
        }
        addresses = std::move(*resolved);
    }
    for (const IpAddress& a : addresses) {
        if (auto refusal = address_refusal(a, allowance)) {
            return tl::unexpected("the endpoint " + parsed->host + " is refused: " + *refusal);
        }
        if (parsed->scheme == "http" && !is_loopback(a)) {
            return tl::unexpected("the endpoint " + parsed->url +
                                  " is http to a non-loopback address (" + a.to_string() +
                                  "): use https; plain http is for a receiver on this machine");
        }
    }
    return parsed;
}

} // namespace payrecon::net
