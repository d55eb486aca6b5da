// Where a webhook endpoint may point (net/endpoint_address): the URL rules, the special-purpose
// address ranges, embedded IPv4 in IPv6 forms, the operator's allowed networks, the registration
// check over a stubbed resolver (no network).
#include "net/endpoint_address.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;
using namespace payrecon::net;

namespace {

net::IpAddress ip(const char* text) {
    auto a = net::IpAddress::parse(text);
    REQUIRE(a);
    return *a;
}

net::NetworkAllowance allow(const char* text) {
    auto a = net::NetworkAllowance::parse(text);
    REQUIRE(a);
    return *a;
}

// A resolver that knows a few names and never touches the network.
Resolver stub(std::vector<std::pair<std::string, std::string>> table) {
    return
        [table](const std::string& host) -> tl::expected<std::vector<net::IpAddress>, std::string> {
            std::vector<net::IpAddress> out;
            for (const auto& [name, address] : table) {
                if (name == host) {
                    out.push_back(*net::IpAddress::parse(address));
                }
            }
            if (out.empty()) {
                return tl::unexpected(std::string("Name or service not known"));
            }
            return out;
        };
}

} // namespace

TEST_CASE("SSRF: metadata, private, link-local and loopback addresses are refused unless allowed",
          "[core][events_out]") {
    const net::NetworkAllowance none;
    const Resolver no_dns = stub({});
    for (const char* url :
         {"http://169.254.169.254/", "https://169.254.169.254/latest/meta-data",
          "https://10.0.0.1/", "https://192.168.1.10/hook", "https://172.16.5.4/",
          "https://127.0.0.1/", "https://[::1]/", "https://[fe80::1]/", "https://[fd00::1]/",
          "https://100.64.0.1/", "https://0.0.0.0/", "https://[::ffff:169.254.169.254]/",
          "https://[::ffff:10.0.0.1]/", "https://224.0.0.1/"}) {
        INFO(url);
        const auto r = net::check_endpoint(url, none, no_dns);
        REQUIRE_FALSE(r);
        CHECK(r.error().find("PAYRECON_ENDPOINT_ALLOWED_NETWORKS") != std::string::npos);
    }
    CHECK(
        net::check_endpoint("https://169.254.169.254/", none, no_dns).error().find("link-local") !=
        std::string::npos);
    // A name that resolves to loopback, or to a private address, is refused the same way.
    const Resolver dns = stub({{"sneaky.example", "127.0.0.1"},
                               {"internal.example", "10.1.2.3"},
                               {"mixed.example", "93.184.216.34"},
                               {"mixed.example", "192.168.0.7"},
                               {"public.example", "93.184.216.34"}});
    CHECK_FALSE(net::check_endpoint("https://sneaky.example/hook", none, dns));
    CHECK_FALSE(net::check_endpoint("https://internal.example/hook", none, dns));
    CHECK_FALSE(
        net::check_endpoint("https://mixed.example/hook", none, dns)); // every address counts
    CHECK(net::check_endpoint("https://public.example/hook", none, dns));
    CHECK_FALSE(net::check_endpoint("https://unknown.example/", none, dns)); // does not resolve
    // The operator's allowance opens exactly what it names.
    const net::NetworkAllowance loopback = allow("127.0.0.0/8, ::1");
    CHECK(net::check_endpoint("https://sneaky.example/hook", loopback, dns));
    CHECK(net::check_endpoint("http://127.0.0.1:8080/hook", loopback, dns));
    CHECK(net::check_endpoint("http://[::1]:8080/hook", loopback, dns));
    CHECK_FALSE(net::check_endpoint("https://internal.example/hook", loopback, dns));
    CHECK(net::check_endpoint("https://internal.example/hook", allow("10.1.0.0/16"), dns));
    // http only to loopback, even when a private network is allowed.
    const auto http_private = net::check_endpoint("http://10.1.2.3/hook", allow("10.0.0.0/8"), dns);
    REQUIRE_FALSE(http_private);
    CHECK(http_private.error().find("use https") != std::string::npos);
    CHECK_FALSE(net::check_endpoint("http://public.example/hook", none, dns));
}

TEST_CASE("endpoint URLs: https, no credentials, no fragment, a real host and port",
          "[core][events_out]") {
    const auto ok = net::parse_endpoint_url("https://hooks.example.com:8443/payrecon?x=1");
    REQUIRE(ok);
    CHECK(ok->host == "hooks.example.com");
    CHECK(ok->port == 8443);
    CHECK(net::parse_endpoint_url("https://hooks.example.com/")->port == 443);
    CHECK(net::parse_endpoint_url("https://[2001:4860::1]:9/")->host == "2001:4860::1");
    for (const char* bad :
         {"ftp://example.com/", "https://user:pw@example.com/", "https://example.com/#frag",
          "https://exa mple.com/", "https://example.com:0/", "https://example.com:99999/",
          "https://", "https://[::1/", "https://exa_mple.com/", "javascript:alert(1)",
          "https://example.com/\x01"}) {
        INFO(bad);
        CHECK_FALSE(net::parse_endpoint_url(bad));
    }
    // Address classification and the allowance's parser.
    CHECK(net::address_kind(ip("8.8.8.8")) == "public");
    CHECK(net::address_kind(ip("2606:4700::1111")) == "public");
    CHECK(net::address_kind(ip("::ffff:127.0.0.1")) == "loopback");
    CHECK(net::address_kind(ip("64:ff9b::a9fe:a9fe")).find("link-local") == 0); // NAT64 of metadata
    CHECK(is_loopback(ip("127.3.4.5")));
    CHECK(allow("10.0.0.0/8").allows(ip("::ffff:10.9.9.9")));
    CHECK_FALSE(net::NetworkAllowance::parse("10.0.0.0/33"));
    CHECK_FALSE(net::NetworkAllowance::parse("nonsense"));
    CHECK(net::NetworkAllowance::parse("")->networks.empty());
    CHECK(allow("127.0.0.0/8,::1").to_string() == "127.0.0.0/8,::1/128");
}

TEST_CASE("SSRF: every non-global range of IANA's special-purpose registries is refused, and IPv4 "
          "carried in any IPv6 form is judged by what it carries",
          "[core][events_out]") {
    // Issue 36: the first two were accepted as public endpoints.
    struct Case {
        const char* address;
        const char* kind; // what net::address_kind says first
    };
    const std::vector<Case> refused = {
        {"64:ff9b:1::a9fe:a9fe", "local-use NAT64 (64:ff9b:1::/48)"},
        {"::ffff:0:7f00:1", "IPv4-translated (::ffff:0:0:0/96) carrying 127.0.0.1 (loopback)"},
        {"::ffff:0:808:808", "IPv4-translated (::ffff:0:0:0/96) carrying 8.8.8.8 (public)"},
        {"::7f00:1", "IPv4-compatible (::/96, deprecated) carrying 127.0.0.1 (loopback)"},
        {"::808:808", "IPv4-compatible (::/96, deprecated) carrying 8.8.8.8 (public)"},
        {"::ffff:127.0.0.1", "loopback"},
        {"::ffff:a9fe:a9fe", "link-local"},
        {"64:ff9b::7f00:1", "loopback"},
        {"64:ff9b::a00:1", "private (10.0.0.0/8)"},
        {"64:ff9b::c0a8:1", "private (192.168.0.0/16)"},
        {"64:ff9b::6440:1", "carrier-grade NAT"},
        {"2002:7f00:1::1", "6to4 (2002::/16)"},
        {"2002:808:808::1", "6to4 (2002::/16)"},
        {"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo (2001::/32)"},
        {"2001:2::1", "benchmarking (2001:2::/48)"},
        {"2001:10::1", "IETF protocol assignments (2001::/23)"},
        {"2001:1ff::1", "IETF protocol assignments (2001::/23)"},
        {"100::1", "discard (100::/64)"},
        {"100:0:0:1::1", "dummy prefix"},
        {"2001:db8::1", "documentation (2001:db8::/32)"},
        {"3fff::1", "documentation (3fff::/20)"},
        {"3fff:fff::1", "documentation (3fff::/20)"},
        {"5f00::1", "segment routing SIDs (5f00::/16)"},
        {"fc00::1", "private (unique local"},
        {"fd12:3456::1", "private (unique local"},
        {"fe80::1", "link-local (fe80::/10)"},
        {"febf::1", "link-local (fe80::/10)"},
        {"fec0::1", "site-local (fec0::/10)"},
        {"ff02::1", "multicast (ff00::/8)"},
        {"ff0e::1", "multicast (ff00::/8)"},
        {"::", "unspecified (::)"},
        {"::1", "loopback"},
        {"1::1", "reserved (outside global unicast 2000::/3)"},
        {"64:ff9a::1", "reserved (outside global unicast 2000::/3)"},
        {"1fff::1", "reserved (outside global unicast 2000::/3)"},
        {"4000::1", "reserved (outside global unicast 2000::/3)"},
        {"e000::1", "reserved (outside global unicast 2000::/3)"},
        {"fe00::1", "reserved (outside global unicast 2000::/3)"},
        // ISATAP interface identifiers (RFC 5214) carrying a non-global IPv4 address.
        {"2a00:1450::5efe:7f00:1", "an ISATAP interface identifier carrying 127.0.0.1 (loopback)"},
        {"2a00:1450::200:5efe:a9fe:a9fe",
         "an ISATAP interface identifier carrying 169.254.169.254 (link-local"},
        {"fe80::5efe:808:808", "link-local (fe80::/10)"},
        // IPv4: every non-global entry of the IPv4 registry, at both edges where it matters.
        {"0.0.0.0", "this network"},
        {"0.255.255.255", "this network"},
        {"10.255.255.255", "private (10.0.0.0/8)"},
        {"100.64.0.0", "carrier-grade NAT"},
        {"100.127.255.255", "carrier-grade NAT"},
        {"127.255.255.254", "loopback"},
        {"169.254.169.254", "link-local"},
        {"172.16.0.1", "private (172.16.0.0/12)"},
        {"172.31.255.255", "private (172.16.0.0/12)"},
        {"192.0.0.8", "IETF protocol assignments"},
        {"192.0.0.170", "IETF protocol assignments"},
        {"192.0.2.1", "documentation (192.0.2.0/24)"},
        {"192.88.99.1", "6to4 relay anycast"},
        {"192.168.255.255", "private (192.168.0.0/16)"},
        {"198.18.0.1", "benchmarking"},
        {"198.19.255.255", "benchmarking"},
        {"198.51.100.1", "documentation (198.51.100.0/24)"},
        {"203.0.113.1", "documentation (203.0.113.0/24)"},
        {"224.0.0.1", "multicast"},
        {"239.255.255.255", "multicast"},
        {"240.0.0.1", "reserved"},
        {"255.255.255.255", "reserved"},
    };
    const net::NetworkAllowance none;
    const Resolver no_dns = stub({});
    for (const Case& c : refused) {
        INFO(c.address);
        const net::IpAddress a = ip(c.address);
        CHECK(net::address_kind(a).find(c.kind) == 0);
        // The relay's connect guard asks net::address_refusal about each address before a socket.
        const auto refusal = net::address_refusal(a, none);
        REQUIRE(refusal);
        CHECK(refusal->find("PAYRECON_ENDPOINT_ALLOWED_NETWORKS") != std::string::npos);
        // Registration: the address written in the URL, and a name that resolves to it.
        const std::string literal = a.v6 ? "[" + a.to_string() + "]" : a.to_string();
        const auto by_literal = net::check_endpoint("https://" + literal + "/hook", none, no_dns);
        REQUIRE_FALSE(by_literal);
        CHECK(by_literal.error().find("is refused") != std::string::npos);
        CHECK_FALSE(net::check_endpoint(
            "https://rebind.example/hook", none,
            stub({{"rebind.example", "93.184.216.34"}, {"rebind.example", c.address}})));
    }

    // Global addresses stay public, the IPv4 ones carried in IPv6 included.
    for (const char* address : {"8.8.8.8",
                                "1.1.1.1",
                                "93.184.216.34",
                                "100.63.255.255",
                                "100.128.0.0",
                                "172.15.255.255",
                                "172.32.0.0",
                                "192.0.1.255",
                                "192.31.196.1",
                                "192.52.193.1",
                                "192.175.48.1",
                                "198.17.255.255",
                                "198.20.0.0",
                                "223.255.255.255",
                                "2606:4700::1111",
                                "2a00:1450:4001:80b::200e",
                                "2001:4860:4860::8888",
                                "2001:200::1",
                                "2003::1",
                                "3ffe:ffff::1",
                                "::ffff:8.8.8.8",
                                "64:ff9b::808:808",
                                "2a00:1450::5efe:808:808"}) {
        INFO(address);
        CHECK(net::address_kind(ip(address)) == "public");
        CHECK_FALSE(net::address_refusal(ip(address), none));
    }
    CHECK(net::check_endpoint("https://[64:ff9b::808:808]/hook", none, no_dns));

    // An allowance opens what it names, and IPv4 reached through an IPv6 form only where a
    // connection reaches that IPv4 address (mapped, NAT64's well-known prefix).
    const net::NetworkAllowance loopback = allow("127.0.0.0/8,::1");
    CHECK_FALSE(net::address_refusal(ip("::ffff:127.0.0.1"), loopback));
    CHECK_FALSE(net::address_refusal(ip("64:ff9b::7f00:1"), loopback));
    CHECK(net::address_refusal(ip("::ffff:0:7f00:1"), loopback));
    CHECK(net::address_refusal(ip("::7f00:1"), loopback));
    CHECK(net::address_refusal(ip("2002:7f00:1::1"), loopback));
    CHECK_FALSE(net::address_refusal(ip("64:ff9b:1::a9fe:a9fe"), allow("64:ff9b:1::/48")));
}
