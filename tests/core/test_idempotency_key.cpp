#include "core/idempotency_key.hpp"
#include "tests/core/reference_generator.hpp"

#include <catch2/catch.hpp>
#include <string>

using payrecon::validate_idempotency_key;
using payrecon::ValidationKind;

namespace {

void check_rejected(const std::string& key, const std::string& code) {
    INFO("key of " << key.size() << " bytes");
    const auto error = validate_idempotency_key(key);
    REQUIRE(error);
    CHECK(error->kind == ValidationKind::invalid);
    CHECK(error->field == "Idempotency-Key");
    CHECK(error->code == code);
    CHECK_FALSE(error->message.empty());
}

} // namespace

TEST_CASE("idempotency key: empty is rejected", "[core][key]") {
    check_rejected("", "empty");
}

TEST_CASE("idempotency key: 1 and 255 characters are accepted, 256 is too long", "[core][key]") {
    CHECK_FALSE(validate_idempotency_key("a"));
    CHECK_FALSE(validate_idempotency_key(std::string(255, 'k')));
    check_rejected(std::string(256, 'k'), "too_long");
    check_rejected(std::string(10'000, 'k'), "too_long");
}

TEST_CASE("idempotency key: space, tab, DEL, NUL and non-ASCII are rejected", "[core][key]") {
    check_rejected("order 42", "invalid_character");
    check_rejected("order\t42", "invalid_character");
    check_rejected(std::string("order") + '\x7f' + "42", "invalid_character");
    check_rejected(std::string("order") + '\0' + "42", "invalid_character");
    check_rejected("order\n", "invalid_character");
    check_rejected("cl\xc3\xa9", "invalid_character");                       // "clé" in UTF-8
    check_rejected("\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87", "invalid_character"); // "ключ"
    check_rejected(std::string(1, '\xff'), "invalid_character");
}

TEST_CASE("idempotency key: the message names the position, not the byte", "[core][key]") {
    const auto error = validate_idempotency_key("abc def");
    REQUIRE(error);
    CHECK(error->message.find("position 4") != std::string::npos);
}

TEST_CASE("idempotency key: every visible ASCII character is accepted", "[core][key]") {
    std::string all;
    for (int c = 0x21; c <= 0x7E; ++c) {
        const std::string one(1, static_cast<char>(c));
        INFO("character " << c);
        CHECK_FALSE(validate_idempotency_key(one));
        all += one;
    }
    CHECK_FALSE(validate_idempotency_key(all));
    CHECK_FALSE(validate_idempotency_key("550e8400-e29b-41d4-a716-446655440000"));
}

TEST_CASE("idempotency key: every byte outside 0x21-0x7E is rejected", "[core][key]") {
    for (int c = 0; c <= 0xFF; ++c) {
        if (c >= 0x21 && c <= 0x7E) {
            continue;
        }
        INFO("byte " << c);
        const auto error = validate_idempotency_key("k" + std::string(1, static_cast<char>(c)));
        REQUIRE(error);
        CHECK(error->code == "invalid_character");
    }
}

TEST_CASE("idempotency key: a key holding a card number is card data, never echoed",
          "[core][key][card]") {
    // Issue 12: such a key was stored in idempotency_records.
    for (const std::string key :
         {"4242424242424242", "4242-4242-4242-4242", "4242.4242.4242.4242", "4242/4242/4242/4242",
          "order-4242424242424242", "card:378282246310005", "5555-5555-5555-4444-12/30"}) {
        INFO(key);
        const auto error = validate_idempotency_key(key);
        REQUIRE(error);
        CHECK(error->kind == ValidationKind::card_data);
        CHECK(error->field == "Idempotency-Key");
        CHECK(error->code == "card_number");
        CHECK(error->message.find("4242") == std::string::npos);
        CHECK(error->message.find("3782") == std::string::npos);
        CHECK(error->message.find("5555") == std::string::npos);
    }
}

TEST_CASE("idempotency key: digit-rich keys that are not card numbers are accepted",
          "[core][key][card]") {
    for (const std::string key :
         {"order-2026-1202-000125", "1764670797123-44", "1764670797123000002",
          "550e8400-e29b-41d4-a716-446655440000", "01c11313e55471e38088054737581ca0",
          "INV-2026-000123", "4242424242424241"}) {
        INFO(key);
        CHECK_FALSE(validate_idempotency_key(key));
    }
    // Every generated reference that fits the key grammar (no space, ASCII).
    payrecon::testing::ReferenceGenerator generator(12);
    int tried = 0;
    for (int i = 0; i < 10'000; ++i) {
        const std::string key = generator.next().text;
        if (key.find_first_of(" \t\n") != std::string::npos) {
            continue;
        }
        ++tried;
        INFO(key);
        CHECK_FALSE(validate_idempotency_key(key));
    }
    CHECK(tried > 5'000);
}
