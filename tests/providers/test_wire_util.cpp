// The wire utilities every adapter shares (providers/wire_util.hpp) and the credentials'
// encodings (providers/credentials.hpp).
#include "core/encoding.hpp"
#include "providers/credentials.hpp"
#include "providers/wire_util.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>

using namespace payrecon;
using namespace payrecon::providers;
using std::chrono::system_clock;

namespace {

constexpr std::int64_t k_max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t k_min = std::numeric_limits<std::int64_t>::min();

} // namespace

TEST_CASE("wire: rescale checks both bounds and never loses a fraction", "[providers][wire]") {
    CHECK(wire::rescale(4999, 2, 2) == 4999);
    CHECK(wire::rescale(100, 0, 2) == 10000);
    CHECK(wire::rescale(-100, 0, 2) == -10000);
    CHECK(wire::rescale(1200, 2, 0) == 12);
    CHECK(wire::rescale(-1200, 2, 0) == -12);
    CHECK_FALSE(wire::rescale(1250, 2, 0).has_value());
    CHECK_FALSE(wire::rescale(-1250, 2, 0).has_value());
    // Up: the largest amounts that fit, and one past them, on both sides.
    CHECK(wire::rescale(k_max / 100, 0, 2) == k_max / 100 * 100);
    CHECK_FALSE(wire::rescale(k_max / 100 + 1, 0, 2).has_value());
    CHECK(wire::rescale(k_min / 100, 0, 2) == k_min / 100 * 100);
    CHECK_FALSE(wire::rescale(k_min / 100 - 1, 0, 2).has_value());
    CHECK_FALSE(wire::rescale(k_min, 0, 1).has_value());
    CHECK(wire::rescale(k_min, 1, 1) == k_min);
    CHECK_FALSE(wire::rescale(1, 0, 19).has_value());
}

TEST_CASE("wire: a provider's exponent is ISO 4217's unless it lists the currency",
          "[providers][wire]") {
    CHECK(wire::provider_exponent("EUR", {{"ISK", 2}}) == 2);
    CHECK(wire::provider_exponent("isk", {{"ISK", 2}}) == 2);
    CHECK(wire::provider_exponent("ISK", {}) == 0);
    CHECK(wire::provider_exponent("KWD", {}) == 3);
    CHECK_FALSE(wire::provider_exponent("XYZ", {}).has_value());
    CHECK(wire::to_provider_units(Money{100, "ISK"}, 2) == 10000);
    CHECK_FALSE(wire::to_provider_units(Money{100, "XYZ"}, 2).has_value());
    CHECK_FALSE(wire::to_provider_units(Money{100, "ISK"}, std::nullopt).has_value());
    CHECK(wire::from_provider_units(10000, "isk", 2) == Money{100, "ISK"});
    CHECK_FALSE(wire::from_provider_units(10050, "ISK", 2).has_value());
    CHECK_FALSE(wire::from_provider_units(k_min, "MGA", 0).has_value());
}

TEST_CASE("wire: RFC 3339 timestamps format and parse", "[providers][wire]") {
    const system_clock::time_point t(std::chrono::seconds(1764669600)); // 2025-12-02T10:00:00Z
    CHECK(wire::format_rfc3339(t) == "2025-12-02T10:00:00Z");
    CHECK(wire::parse_rfc3339("2025-12-02T10:00:00Z") == t);
    CHECK(wire::parse_rfc3339("2025-12-02T10:00:00.250Z") == t + std::chrono::milliseconds(250));
    CHECK(wire::parse_rfc3339("2025-12-02T11:30:00+01:30") == t);
    CHECK(wire::parse_rfc3339("2025-12-02T08:00:00-02:00") == t);
    CHECK_FALSE(wire::parse_rfc3339("2025-12-02 10:00:00").has_value());
    CHECK_FALSE(wire::parse_rfc3339("2025-12-02T10:00:00").has_value());
    CHECK_FALSE(wire::parse_rfc3339("2025-12-02T10:00:00.Z").has_value());
    CHECK_FALSE(wire::parse_rfc3339("2025-13-02T10:00:00Z").has_value());
    CHECK_FALSE(wire::parse_rfc3339("2025-12-02T10:00:00Zjunk").has_value());
    CHECK_FALSE(wire::parse_rfc3339("").has_value());
}

TEST_CASE("wire: excerpts, form encoding, case folding and typed members", "[providers][wire]") {
    CHECK(wire::excerpt("a\nb\tc") == "a b c");
    CHECK(wire::excerpt(std::string(400, 'x')) == std::string(300, 'x') + "...");
    CHECK(wire::form_encode({{"metadata[k]", "a b&c"}, {"n", "1"}}) ==
          "metadata%5Bk%5D=a%20b%26c&n=1");
    CHECK(wire::upper("eur") == "EUR");
    CHECK(wire::lower("EUR") == "eur");
    const auto j = nlohmann::json::parse(R"({"s": "v", "n": 5})");
    CHECK(wire::string_member(j, "s") == "v");
    CHECK_FALSE(wire::string_member(j, "n").has_value());
    CHECK_FALSE(wire::string_member(j, "missing").has_value());
    CHECK_FALSE(wire::string_member(nlohmann::json::array(), "s").has_value());
}

TEST_CASE("credentials: base64 and the basic Authorization value (RFC 4648, RFC 7617)",
          "[providers][credentials]") {
    CHECK(base64("") == "");
    CHECK(base64("f") == "Zg==");
    CHECK(base64("fo") == "Zm8=");
    CHECK(base64("foo") == "Zm9v");
    CHECK(base64("foob") == "Zm9vYg==");
    CHECK(base64(std::string("\xff\xfe\x00", 3)) == "//4A");
    // RFC 7617's example.
    CHECK(basic_authorization(Secret("Aladdin"), Secret("open sesame")).reveal() ==
          "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
}

TEST_CASE("credentials: what they are called, where they come from, what is redacted",
          "[providers][credentials]") {
    const Credentials key = ApiKey{"STRIPE_API_KEY", Secret("sk_test_x")};
    const Credentials basic =
        BasicAuth{"PSP_USER", "PSP_PASSWORD", Secret("Aladdin"), Secret("open sesame")};
    const Credentials oauth =
        OAuth2ClientCredentials{"CLIENT_ID", "CLIENT_SECRET", "https://api.test/v1/oauth2/token",
                                Secret("id"), Secret("secret")};
    CHECK(kind_of(key) == CredentialKind::api_key);
    CHECK(kind_of(basic) == CredentialKind::basic);
    CHECK(kind_of(oauth) == CredentialKind::oauth2_client_credentials);
    CHECK(describe(key) == "the API key in STRIPE_API_KEY");
    CHECK(describe(basic) == "the user and password in PSP_USER and PSP_PASSWORD");
    CHECK(describe(oauth) == "the client credentials in CLIENT_ID and CLIENT_SECRET (token URL "
                             "https://api.test/v1/oauth2/token)");
    CHECK(environment_names(oauth) == std::vector<std::string>{"CLIENT_ID", "CLIENT_SECRET"});
    std::vector<std::string> redacted;
    for (const Secret& s : secrets_of(basic)) {
        redacted.push_back(s.reveal());
    }
    CHECK(redacted ==
          std::vector<std::string>{"Aladdin", "open sesame", "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="});
    CHECK(secrets_of(ApiKey{"K", Secret()}).empty()); // loaded without reading the environment
}
