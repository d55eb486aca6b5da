// Events out, the pure part: the Standard Webhooks signature against the scheme's published test
// vector, endpoint secrets, sealing at rest, the retry schedule (the SSRF rules: tests/net).
#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "core/sealed.hpp"
#include "core/standard_webhooks.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;
using namespace std::chrono;

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
