// Text encodings shared across layers.
#include "core/encoding.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;

TEST_CASE("encoding: is_uuid_text accepts the 36-character form only", "[core]") {
    CHECK(is_uuid_text("00000000-0000-4000-8000-000000000000"));
    CHECK(is_uuid_text("8364EBCA-6bde-473f-A392-c5ff20cdd319"));
    CHECK_FALSE(is_uuid_text(""));
    CHECK_FALSE(is_uuid_text("pr_bc454b87431ba439af572e800558f9f9"));
    CHECK_FALSE(is_uuid_text("8364ebca6bde473fa392c5ff20cdd319")); // PostgreSQL takes it; we do not
    CHECK_FALSE(is_uuid_text("{8364ebca-6bde-473f-a392-c5ff20cdd319}")); // nor braces
    CHECK_FALSE(is_uuid_text("8364ebca-6bde-473f-a392-c5ff20cdd31g"));
    CHECK_FALSE(is_uuid_text("8364ebca-6bde-473f-a392-c5ff20cdd3190"));
    CHECK_FALSE(is_uuid_text("8364ebca_6bde-473f-a392-c5ff20cdd319"));
}

TEST_CASE("encoding: display_name_problem accepts printable names and names what is wrong",
          "[core][encoding]") {
    using payrecon::display_name_problem;
    CHECK_FALSE(display_name_problem("web-shop", 128));
    CHECK_FALSE(display_name_problem("Caf\xc3\xa9 #2 (EU)", 128));
    CHECK_FALSE(display_name_problem(std::string(128, 'x'), 128));
    CHECK(display_name_problem("", 128) == std::optional<std::string>("is empty"));
    CHECK(display_name_problem(std::string(129, 'x'), 128)->find("longer than 128") !=
          std::string::npos);
    for (const std::string bad : {"a\x1b[2J", "a\nb", "a\tb", "a\x7f", "a\xc2\x9b", "a\rb"}) {
        CHECK(display_name_problem(bad, 128)->find("control character") != std::string::npos);
    }
    for (const std::string bad : {"a\xe2\x80\xae", "a\xe2\x80\x8b",
                                  "\xef\xbb\xbf"
                                  "a",
                                  "a\xe2\x81\xa6"}) {
        CHECK(display_name_problem(bad, 128)->find("invisible") != std::string::npos);
    }
    for (const std::string bad :
         {"a\xff", "a\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80"}) {
        CHECK(display_name_problem(bad, 128) == std::optional<std::string>("is not valid UTF-8"));
    }
    CHECK(display_name_problem(" a", 128) ==
          std::optional<std::string>("begins or ends with a space"));
    CHECK(display_name_problem("a ", 128) ==
          std::optional<std::string>("begins or ends with a space"));
}

TEST_CASE("encoding: printable escapes C0, DEL and C1 controls and doubles backslashes",
          "[core][encoding]") {
    CHECK(payrecon::printable("a\x1b[2J\nb\\c\x7f\xc2\x9b") == "a\\x1b[2J\\nb\\\\c\\x7f\\u009b");
    CHECK(payrecon::printable("Caf\xc3\xa9") == "Caf\xc3\xa9");
}
