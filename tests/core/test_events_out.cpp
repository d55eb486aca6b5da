// Events out, the pure part: the Standard Webhooks signature against the scheme's published test
// vector, endpoint secrets, sealing at rest, the retry schedule, and the SSRF rules.
#include "core/encoding.hpp"
#include "core/endpoint_address.hpp"
#include "core/errors.hpp"
#include "core/sealed.hpp"
#include "core/standard_webhooks.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;
using namespace std::chrono;

namespace {

IpAddress ip(const char* text) {
    auto a = IpAddress::parse(text);
    REQUIRE(a);
    return *a;
}

NetworkAllowance allow(const char* text) {
    auto a = NetworkAllowance::parse(text);
    REQUIRE(a);
    return *a;
}

// A resolver that knows a few names and never touches the network.
Resolver stub(std::vector<std::pair<std::string, std::string>> table) {
    return [table](const std::string& host) -> tl::expected<std::vector<IpAddress>, std::string> {
        std::vector<IpAddress> out;
        for (const auto& [name, address] : table) {
            if (name == host) {
                out.push_back(*IpAddress::parse(address));
            }
        }
        if (out.empty()) {
            return tl::unexpected(std::string("Name or service not known"));
        }
        return out;
    };
}

} // namespace

TEST_CASE("standard webhooks: the scheme's published test vector signs as published",
          "[core][events_out]") {
    // standardwebhooks.com's reference test: the same secret, ID, timestamp and payload give this
    // signature in every official library (and in Python's hmac, checked by hand).
    const auto key = endpoint_secret_key(Secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"));
    REQUIRE(key);
    const std::string body = R"({"test": 2432232314})";
    CHECK(webhook_signature({*key}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body) ==
          "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    CHECK(webhook_signature_matches("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", *key,
                                    "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body));
    // One byte of the body, the timestamp, or the ID changed: no match.
    CHECK_FALSE(webhook_signature_matches("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", *key,
                                          "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
                                          R"({"test": 2432232315})"));
    CHECK_FALSE(webhook_signature_matches("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", *key,
                                          "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265331, body));
    CHECK_FALSE(webhook_signature_matches("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", *key,
                                          "msg_other", 1614265330, body));
}

TEST_CASE("standard webhooks: during a rotation both secrets sign, either verifies",
          "[core][events_out]") {
    const Secret s1 = new_endpoint_secret();
    const Secret s2 = new_endpoint_secret();
    CHECK(s1.reveal().rfind("whsec_", 0) == 0);
    CHECK(s1.reveal() != s2.reveal());
    const auto k1 = endpoint_secret_key(s1);
    const auto k2 = endpoint_secret_key(s2);
    REQUIRE(k1);
    REQUIRE(k2);
    CHECK(k1->reveal().size() == k_endpoint_secret_bytes);
    const std::string header = webhook_signature({*k2, *k1}, "evt", 1700000000, "{}");
    CHECK(header.find(' ') != std::string::npos);
    CHECK(header.rfind("v1,", 0) == 0);
    CHECK(webhook_signature_matches(header, *k1, "evt", 1700000000, "{}"));
    CHECK(webhook_signature_matches(header, *k2, "evt", 1700000000, "{}"));
    const auto other = endpoint_secret_key(new_endpoint_secret());
    CHECK_FALSE(webhook_signature_matches(header, *other, "evt", 1700000000, "{}"));
    // Not secrets: no prefix, bad base64, a key shorter than 24 bytes.
    CHECK_FALSE(endpoint_secret_key(Secret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")));
    CHECK_FALSE(endpoint_secret_key(Secret("whsec_not base64!")));
    CHECK_FALSE(endpoint_secret_key(Secret("whsec_" + base64(std::string(23, 'k')))));
}

TEST_CASE("base64: decoding is strict and inverts encoding", "[core][events_out]") {
    for (const std::string& s :
         std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)}) {
        CHECK(from_base64(base64(s)) == s);
    }
    CHECK_FALSE(from_base64("QQ="));      // not a multiple of 4
    CHECK_FALSE(from_base64("QR=="));     // pad bits not zero
    CHECK_FALSE(from_base64("Q==="));     // too much padding
    CHECK_FALSE(from_base64("QQ==QQ==")); // padding inside
    CHECK_FALSE(from_base64("Q-_A"));     // the URL-safe alphabet is another encoding
}

TEST_CASE("sealed: a secret opens only with its key and the row it was sealed for",
          "[core][events_out]") {
    const SealingKeys keys({Secret(std::string(40, 'a'))});
    const std::string sealed = keys.seal("whsec_abc", "tenant/endpoint/1");
    CHECK(sealed.size() == 1 + 12 + 9 + 16);
    CHECK(sealed.find("whsec_abc") == std::string::npos);
    CHECK(keys.open(sealed, "tenant/endpoint/1")->reveal() == "whsec_abc");
    CHECK(keys.seal("whsec_abc", "tenant/endpoint/1") != sealed); // a fresh nonce each time
    CHECK_FALSE(keys.open(sealed, "tenant/endpoint/2"));          // copied onto another row
    std::string tampered = sealed;
    tampered[20] = static_cast<char>(tampered[20] ^ 1);
    CHECK_FALSE(keys.open(tampered, "tenant/endpoint/1"));
    CHECK_FALSE(keys.open(sealed.substr(0, 20), "tenant/endpoint/1"));
    const SealingKeys other({Secret(std::string(40, 'b'))});
    CHECK_FALSE(other.open(sealed, "tenant/endpoint/1"));
    // After a key rotation the old key still opens what it sealed; the new one seals.
    const SealingKeys rotated({Secret(std::string(40, 'b')), Secret(std::string(40, 'a'))});
    CHECK(rotated.open(sealed, "tenant/endpoint/1")->reveal() == "whsec_abc");
    CHECK(keys.open(rotated.seal("x", "t"), "t") == std::nullopt);
    CHECK_THROWS_AS(SealingKeys({Secret("short")}), std::invalid_argument);
}

TEST_CASE("delivery schedule: Svix's by default, then dead, and Retry-After waits longer, bounded",
          "[core][events_out]") {
    const DeliverySchedule s = DeliverySchedule::standard();
    REQUIRE(s.delays.size() == 8);
    CHECK(s.to_string() == "0s,5s,5m,30m,2h,5h,10h,10h");
    CHECK(s.next_delay(1) == seconds(5));
    CHECK(s.next_delay(2) == minutes(5));
    CHECK(s.next_delay(7) == hours(10));
    CHECK_FALSE(s.next_delay(8)); // the eighth try failed: dead
    milliseconds total{0};
    for (int i = 1; i < 8; ++i) {
        total += *s.next_delay(i);
    }
    CHECK(total == hours(27) + minutes(35) + seconds(5)); // "about 28 h"
    CHECK(s.next_delay(1, seconds(60)) == seconds(60));   // longer: honoured
    CHECK(s.next_delay(2, seconds(60)) == minutes(5));    // shorter: the schedule's
    CHECK(s.next_delay(1, hours(100)) == hours(10));      // at most the longest wait
    const DeliverySchedule quick = DeliverySchedule::parse("0s,50ms,1s", "--retry-schedule");
    CHECK(quick.next_delay(1) == milliseconds(50));
    CHECK(quick.next_delay(1, seconds(2)) == seconds(2)); // bounded by 1 h at least
    CHECK_FALSE(quick.next_delay(3));
    CHECK_THROWS_AS(DeliverySchedule::parse("0s,,5s", "x"), UsageError);
    CHECK_THROWS_AS(DeliverySchedule::parse("5", "x"), UsageError);
    CHECK_THROWS_AS(DeliverySchedule::parse("5s,10s", "x"), UsageError); // the first try is at once
}

TEST_CASE("attempt verdicts: 2xx delivered, 410 gone, everything else retried",
          "[core][events_out]") {
    CHECK(attempt_verdict(200) == AttemptVerdict::delivered);
    CHECK(attempt_verdict(204) == AttemptVerdict::delivered);
    CHECK(attempt_verdict(410) == AttemptVerdict::gone);
    for (const int s : {301, 302, 307, 400, 401, 404, 408, 413, 429, 500, 502, 503}) {
        CHECK(attempt_verdict(s) == AttemptVerdict::retry);
    }
    CHECK(event_type_matches("payment.*", "payment.succeeded"));
    CHECK(event_type_matches("*", "payment.failed"));
    CHECK(event_type_matches("payment.succeeded", "payment.succeeded"));
    CHECK_FALSE(event_type_matches("payment.succeeded", "payment.failed"));
    CHECK_FALSE(event_type_matches("refund.*", "payment.succeeded"));
    CHECK_FALSE(event_pattern_problem("payment.*"));
    CHECK(event_pattern_problem("payment.*.x"));
    CHECK(event_pattern_problem("Payment"));
    CHECK(event_pattern_problem(""));
}

TEST_CASE("SSRF: metadata, private, link-local and loopback addresses are refused unless allowed",
          "[core][events_out]") {
    const NetworkAllowance none;
    const Resolver no_dns = stub({});
    for (const char* url :
         {"http://169.254.169.254/", "https://169.254.169.254/latest/meta-data",
          "https://10.0.0.1/", "https://192.168.1.10/hook", "https://172.16.5.4/",
          "https://127.0.0.1/", "https://[::1]/", "https://[fe80::1]/", "https://[fd00::1]/",
          "https://100.64.0.1/", "https://0.0.0.0/", "https://[::ffff:169.254.169.254]/",
          "https://[::ffff:10.0.0.1]/", "https://224.0.0.1/"}) {
        INFO(url);
        const auto r = check_endpoint(url, none, no_dns);
        REQUIRE_FALSE(r);
        CHECK(r.error().find("PAYRECON_ENDPOINT_ALLOWED_NETWORKS") != std::string::npos);
    }
    CHECK(check_endpoint("https://169.254.169.254/", none, no_dns).error().find("link-local") !=
          std::string::npos);
    // A name that resolves to loopback, or to a private address, is refused the same way.
    const Resolver dns = stub({{"sneaky.example", "127.0.0.1"},
                               {"internal.example", "10.1.2.3"},
                               {"mixed.example", "93.184.216.34"},
                               {"mixed.example", "192.168.0.7"},
                               {"public.example", "93.184.216.34"}});
    CHECK_FALSE(check_endpoint("https://sneaky.example/hook", none, dns));
    CHECK_FALSE(check_endpoint("https://internal.example/hook", none, dns));
    CHECK_FALSE(check_endpoint("https://mixed.example/hook", none, dns)); // every address counts
    CHECK(check_endpoint("https://public.example/hook", none, dns));
    CHECK_FALSE(check_endpoint("https://unknown.example/", none, dns)); // does not resolve
    // The operator's allowance opens exactly what it names.
    const NetworkAllowance loopback = allow("127.0.0.0/8, ::1");
    CHECK(check_endpoint("https://sneaky.example/hook", loopback, dns));
    CHECK(check_endpoint("http://127.0.0.1:8080/hook", loopback, dns));
    CHECK(check_endpoint("http://[::1]:8080/hook", loopback, dns));
    CHECK_FALSE(check_endpoint("https://internal.example/hook", loopback, dns));
    CHECK(check_endpoint("https://internal.example/hook", allow("10.1.0.0/16"), dns));
    // http only to loopback, even when a private network is allowed.
    const auto http_private = check_endpoint("http://10.1.2.3/hook", allow("10.0.0.0/8"), dns);
    REQUIRE_FALSE(http_private);
    CHECK(http_private.error().find("use https") != std::string::npos);
    CHECK_FALSE(check_endpoint("http://public.example/hook", none, dns));
}

TEST_CASE("endpoint URLs: https, no credentials, no fragment, a real host and port",
          "[core][events_out]") {
    const auto ok = parse_endpoint_url("https://hooks.example.com:8443/payrecon?x=1");
    REQUIRE(ok);
    CHECK(ok->host == "hooks.example.com");
    CHECK(ok->port == 8443);
    CHECK(parse_endpoint_url("https://hooks.example.com/")->port == 443);
    CHECK(parse_endpoint_url("https://[2001:4860::1]:9/")->host == "2001:4860::1");
    for (const char* bad :
         {"ftp://example.com/", "https://user:pw@example.com/", "https://example.com/#frag",
          "https://exa mple.com/", "https://example.com:0/", "https://example.com:99999/",
          "https://", "https://[::1/", "https://exa_mple.com/", "javascript:alert(1)",
          "https://example.com/\x01"}) {
        INFO(bad);
        CHECK_FALSE(parse_endpoint_url(bad));
    }
    // Address classification and the allowance's parser.
    CHECK(address_kind(ip("8.8.8.8")) == "public");
    CHECK(address_kind(ip("2606:4700::1111")) == "public");
    CHECK(address_kind(ip("::ffff:127.0.0.1")) == "loopback");
    CHECK(address_kind(ip("64:ff9b::a9fe:a9fe")).find("link-local") == 0); // NAT64 of metadata
    CHECK(is_loopback(ip("127.3.4.5")));
    CHECK(allow("10.0.0.0/8").allows(ip("::ffff:10.9.9.9")));
    CHECK_FALSE(NetworkAllowance::parse("10.0.0.0/33"));
    CHECK_FALSE(NetworkAllowance::parse("nonsense"));
    CHECK(NetworkAllowance::parse("")->networks.empty());
    CHECK(allow("127.0.0.0/8,::1").to_string() == "127.0.0.0/8,::1/128");
}

TEST_CASE("SSRF: every non-global range of IANA's special-purpose registries is refused, and IPv4 "
          "carried in any IPv6 form is judged by what it carries",
          "[core][events_out]") {
    // Issue 36: the first two were accepted as public endpoints.
    struct Case {
        const char* address;
        const char* kind; // what address_kind says first
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
    const NetworkAllowance none;
    const Resolver no_dns = stub({});
    for (const Case& c : refused) {
        INFO(c.address);
        const IpAddress a = ip(c.address);
        CHECK(address_kind(a).find(c.kind) == 0);
        // The relay's connect guard asks address_refusal about each address before a socket.
        const auto refusal = address_refusal(a, none);
        REQUIRE(refusal);
        CHECK(refusal->find("PAYRECON_ENDPOINT_ALLOWED_NETWORKS") != std::string::npos);
        // Registration: the address written in the URL, and a name that resolves to it.
        const std::string literal = a.v6 ? "[" + a.to_string() + "]" : a.to_string();
        const auto by_literal = check_endpoint("https://" + literal + "/hook", none, no_dns);
        REQUIRE_FALSE(by_literal);
        CHECK(by_literal.error().find("is refused") != std::string::npos);
        CHECK_FALSE(check_endpoint(
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
        CHECK(address_kind(ip(address)) == "public");
        CHECK_FALSE(address_refusal(ip(address), none));
    }
    CHECK(check_endpoint("https://[64:ff9b::808:808]/hook", none, no_dns));

    // An allowance opens what it names, and IPv4 reached through an IPv6 form only where a
    // connection reaches that IPv4 address (mapped, NAT64's well-known prefix).
    const NetworkAllowance loopback = allow("127.0.0.0/8,::1");
    CHECK_FALSE(address_refusal(ip("::ffff:127.0.0.1"), loopback));
    CHECK_FALSE(address_refusal(ip("64:ff9b::7f00:1"), loopback));
    CHECK(address_refusal(ip("::ffff:0:7f00:1"), loopback));
    CHECK(address_refusal(ip("::7f00:1"), loopback));
    CHECK(address_refusal(ip("2002:7f00:1::1"), loopback));
    CHECK_FALSE(address_refusal(ip("64:ff9b:1::a9fe:a9fe"), allow("64:ff9b:1::/48")));
}
