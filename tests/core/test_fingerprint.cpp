#include "core/encoding.hpp"
#include "core/fingerprint.hpp"

#include <catch2/catch.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

using namespace payrecon;

namespace {

// 43 bytes: long enough for the 32-byte minimum.
const Secret k_secret_a{"payrecon-test-fingerprint-secret-0123456789"};
const Secret k_secret_b{"abcdefghijklmnopqrstuvwxyz012345"}; // exactly 32 bytes
const Secret k_secret_c{"another-unrelated-secret-of-forty-bytes!"};

} // namespace

TEST_CASE("fingerprint: HMAC-SHA256 matches RFC 4231 test case 6 (131-byte key)",
          "[core][fingerprint]") {
    const Secret key{std::string(131, '\xaa')};
    CHECK(hmac_sha256_hex(key, "Test Using Larger Than Block-Size Key - Hash Key First") ==
          "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST_CASE("fingerprint: HMAC-SHA256 matches vectors computed with openssl dgst -hmac",
          "[core][fingerprint]") {
    // printf 'The quick brown fox jumps over the lazy dog' |
    //     openssl dgst -sha256 -hmac 'payrecon-test-fingerprint-secret-0123456789'
    CHECK(hmac_sha256_hex(k_secret_a, "The quick brown fox jumps over the lazy dog") ==
          "0a901ae1a475dd431e21b89b3ea658920c7a1cacd0a9649bd109a726e217b3e3");
    // printf '{"amount":1000}' | openssl dgst -sha256 -hmac 'abcdefghijklmnopqrstuvwxyz012345'
    CHECK(hmac_sha256_hex(k_secret_b, R"({"amount":1000})") ==
          "71f7c92332e5fc3c7b4bfea0fc86c7f162e22a229d75690d7464ef2f4d61706d");
}

TEST_CASE("fingerprint: a secret shorter than 32 bytes throws", "[core][fingerprint]") {
    CHECK_THROWS_AS(hmac_sha256_hex(Secret{std::string(31, 's')}, "x"), std::invalid_argument);
    CHECK_THROWS_AS(hmac_sha256_hex(Secret{}, "x"), std::invalid_argument);
    CHECK_NOTHROW(hmac_sha256_hex(Secret{std::string(32, 's')}, "x"));
    CHECK_THROWS_AS(FingerprintKeys(Secret{"short"}), std::invalid_argument);
    CHECK_THROWS_AS(FingerprintKeys(k_secret_a, {k_secret_b, Secret{"short"}}),
                    std::invalid_argument);
}

TEST_CASE("fingerprint: the message never contains the secret", "[core][fingerprint]") {
    try {
        hmac_sha256_hex(Secret{"tiny-secret-value"}, "x");
        FAIL("no exception");
    } catch (const std::invalid_argument& error) {
        CHECK(std::string(error.what()).find("tiny-secret-value") == std::string::npos);
    }
}

TEST_CASE("fingerprint: SHA-256 known answers", "[core][fingerprint]") {
    CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("fingerprint: keys fingerprint with the current secret", "[core][fingerprint]") {
    const FingerprintKeys keys(k_secret_a);
    const std::string canonical = "canonical request bytes";
    CHECK(keys.fingerprint(canonical) == hmac_sha256_hex(k_secret_a, canonical));
    CHECK(keys.fingerprint(canonical).size() == 64);
    CHECK(keys.matches(canonical, keys.fingerprint(canonical)));
    CHECK_FALSE(keys.matches("other bytes", keys.fingerprint(canonical)));
    CHECK_FALSE(keys.matches(canonical, ""));
    CHECK_FALSE(keys.matches(canonical, keys.fingerprint(canonical).substr(0, 63)));
}

TEST_CASE("fingerprint: after rotation a fingerprint made with the previous secret still matches",
          "[core][fingerprint]") {
    const std::string canonical = R"({"amount":1000,"currency":"EUR"})";
    const std::string before_rotation = FingerprintKeys(k_secret_a).fingerprint(canonical);

    const FingerprintKeys rotated(k_secret_b, {k_secret_a});
    CHECK(rotated.fingerprint(canonical) != before_rotation); // new rows use the new secret
    CHECK(rotated.fingerprint(canonical) == hmac_sha256_hex(k_secret_b, canonical));
    CHECK(rotated.matches(canonical, before_rotation));
    CHECK(rotated.matches(canonical, rotated.fingerprint(canonical)));
    CHECK_FALSE(rotated.matches("different body", before_rotation));
}

TEST_CASE("fingerprint: a fingerprint made with an unknown secret does not match",
          "[core][fingerprint]") {
    const std::string canonical = "canonical";
    const FingerprintKeys keys(k_secret_b, {k_secret_a});
    CHECK_FALSE(keys.matches(canonical, hmac_sha256_hex(k_secret_c, canonical)));
    // Once the previous secret is dropped, its fingerprints stop matching.
    const FingerprintKeys without_previous(k_secret_b);
    CHECK_FALSE(without_previous.matches(canonical, hmac_sha256_hex(k_secret_a, canonical)));
}

TEST_CASE("fingerprint: constant_time_equal compares content and length", "[core][fingerprint]") {
    CHECK(constant_time_equal("", ""));
    CHECK(constant_time_equal("abc", "abc"));
    CHECK_FALSE(constant_time_equal("abc", "abd"));
    CHECK_FALSE(constant_time_equal("abc", "ab"));
    CHECK_FALSE(constant_time_equal("", "a"));
    CHECK_FALSE(constant_time_equal("xbc", "abc"));
    CHECK(constant_time_equal(std::string("a\0b", 3), std::string("a\0b", 3)));
    CHECK_FALSE(constant_time_equal(std::string("a\0b", 3), std::string("a\0c", 3)));
}

TEST_CASE("fingerprint: base64url known answers (RFC 4648, URL-safe, no padding)",
          "[core][fingerprint]") {
    CHECK(base64url("") == "");
    CHECK(base64url("f") == "Zg");
    CHECK(base64url("fo") == "Zm8");
    CHECK(base64url("foo") == "Zm9v");
    CHECK(base64url("foob") == "Zm9vYg");
    CHECK(base64url("fooba") == "Zm9vYmE");
    CHECK(base64url("foobar") == "Zm9vYmFy");
    CHECK(base64url("\xfb\xff\xbf") == "-_-_"); // "+/+/" in standard base64
    CHECK(base64url("\xfb\xef") == "--8");
    CHECK(base64url(std::string("\x00\xff", 2)) == "AP8");
}

TEST_CASE("fingerprint: to_hex known answers", "[core][fingerprint]") {
    CHECK(to_hex("") == "");
    CHECK(to_hex("abc") == "616263");
    CHECK(to_hex(std::string("\x00\x01\x7f\x80\xfe\xff", 6)) == "00017f80feff");
}

TEST_CASE("fingerprint: random_bytes gives the requested length and differs between calls",
          "[core][fingerprint]") {
    CHECK(random_bytes(0).empty());
    CHECK(random_bytes(32).size() == 32);
    std::set<std::string> seen;
    for (int i = 0; i < 16; ++i) {
        seen.insert(random_bytes(32));
    }
    CHECK(seen.size() == 16);
}

TEST_CASE("secret: streams as *** and reveals its value only on request", "[core][secret]") {
    std::ostringstream out;
    out << k_secret_a;
    CHECK(out.str() == "***");
    CHECK(k_secret_a.reveal() == "payrecon-test-fingerprint-secret-0123456789");
    CHECK(Secret{}.empty());
    CHECK_FALSE(k_secret_a.empty());
}
