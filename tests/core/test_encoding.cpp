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
