#pragma once
// Where a webhook endpoint may point (DESIGN section 15): server-side request forgery rules,
// applied when an endpoint is registered and again, by the relay, to every address it is about to
// connect to (so a name that resolves elsewhere later -- DNS rebinding -- is caught too).
//
// An endpoint URL is https, or http to a loopback address (tests, a local receiver); it has no
// user or password, no fragment, no space or control character. Its addresses must be public:
// every range of IANA's IPv4 and IPv6 special-purpose registries that is not globally reachable
// -- loopback, private (RFC 1918, unique local), link-local (169.254/16 with the cloud metadata
// address, fe80::/10), carrier-grade NAT, "this network", benchmarking, documentation (192.0.2/24,
// 2001:db8::/32, 3fff::/20), discard (100::/64), IETF protocol assignments (2001::/23, Teredo
// among them), 6to4 (2002::/16), local-use NAT64 (64:ff9b:1::/48), segment routing (5f00::/16),
// site-local --, multicast, and all IPv6 outside global unicast (2000::/3) are refused unless the
// operator allows the network explicitly (PAYRECON_ENDPOINT_ALLOWED_NETWORKS, a comma-separated
// list of CIDRs, e.g. "127.0.0.0/8,::1"). An IPv4-mapped address (::ffff:a.b.c.d) and one under
// the NAT64 well-known prefix (64:ff9b::/96) are judged as the IPv4 address they reach; the other
// forms that carry an IPv4 address are refused (IPv4-compatible ::a.b.c.d, IPv4-translated
// ::ffff:0:a.b.c.d), or judged by their prefix and the IPv4 address they carry (an ISATAP
// interface identifier, ...:5efe:a.b.c.d).

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

namespace payrecon::net {

struct IpAddress {
    bool v6 = false;
    std::array<std::uint8_t, 16> bytes{}; // IPv4 in the first 4

    // "10.0.0.1", "::1", "[::1]" (brackets allowed), or nullopt.
    static std::optional<IpAddress> parse(std::string_view text);
    std::string to_string() const;
};

struct Cidr {
    IpAddress network;
    int prefix = 0;
    bool contains(const IpAddress& a) const;
};

// The networks an operator allows beyond the public internet.
struct NetworkAllowance {
    std::vector<Cidr> networks;
    // "127.0.0.0/8,::1/128" ("::1" alone is /128, "10.1.2.3" /32); empty text allows nothing.
    // An error names the item that is not a CIDR.
    static tl::expected<NetworkAllowance, std::string> parse(std::string_view text);
    bool allows(const IpAddress& a) const;
    std::string to_string() const;
};

// What kind of address `a` is: "public", or the name of the special range it is in ("loopback",
// "private", "link-local", "carrier-grade NAT", "multicast", ...; for a form that carries an IPv4
// address, the form, the address and its kind: "IPv4-translated (::ffff:0:0:0/96) carrying
// 127.0.0.1 (loopback)").
std::string address_kind(const IpAddress& a);
bool is_loopback(const IpAddress& a);

// Why the relay may not connect to `a`, or nullopt if it may: `a` is public, or in an allowed
// network.
std::optional<std::string> address_refusal(const IpAddress& a, const NetworkAllowance& allowance);

struct EndpointUrl {
    std::string url;    // as given
    std::string scheme; // "https" or "http"
    std::string host;   // a name, or an address (IPv6 without brackets)
    int port = 443;
};

// The URL's parts, or why it cannot be an endpoint (scheme, credentials, fragment, characters).
// The scheme rule that http needs a loopback address is check_endpoint's, which knows the
// addresses.
tl::expected<EndpointUrl, std::string> parse_endpoint_url(std::string_view url);

// A host's addresses, or why there are none. The system's resolver in production
// (net/resolve), a stub in tests.
using Resolver =
    std::function<tl::expected<std::vector<IpAddress>, std::string>(const std::string&)>;

// The whole registration check: the URL parses, its host resolves (an address literal resolves
// to itself, without `resolve`), every address is allowed, and http only to loopback addresses.
// Returns the parsed URL, or a message that says what was refused and what to do.
tl::expected<EndpointUrl, std::string>
check_endpoint(std::string_view url, const NetworkAllowance& allowance, const Resolver& resolve);

} // namespace payrecon::net
