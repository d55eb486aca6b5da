#include "core/errors.hpp"
#include "providers/adyen/adapter.hpp"
#include "providers/config.hpp"
#include "providers/paypal/adapter.hpp"
#include "providers/registry.hpp"
#include "tests/providers/fourth/fourth.hpp"

#include <catch2/catch.hpp>
#include <cstring>

using namespace payrecon;
using namespace payrecon::providers;

namespace {

const char* fake_env(const char* name) {
    if (std::strcmp(name, "STRIPE_API_KEY") == 0) {
        return "sk_test_abcdefghijklmnop";
    }
    if (std::strcmp(name, "ADYEN_API_KEY") == 0) {
        return "AQE_test_abcdefghijklmnop";
    }
    if (std::strcmp(name, "EMPTY_KEY") == 0) {
        return "";
    }
    if (std::strcmp(name, "CLIENT_ID") == 0) {
        return "client-id-abcdefgh";
    }
    if (std::strcmp(name, "CLIENT_SECRET") == 0) {
        return "client-secret-ijklmnop";
    }
    if (std::strcmp(name, "PSP_USER") == 0) {
        return "user-qrstuvwx";
    }
    if (std::strcmp(name, "PSP_PASSWORD") == 0) {
        return "password-yzabcdef";
    }
    return nullptr;
}

Config parse(const std::string& text) {
    return parse_config(text, "payrecon.json", fake_env);
}

std::string error_of(const std::string& text) {
    try {
        parse(text);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "(no error)";
}

} // namespace

TEST_CASE("config: a full provider entry is read, the key comes from the environment",
          "[providers][config]") {
    const auto c =
        parse(R"({"providers": {"stripe": {"kind": "stripe", "base_url": "https://api.stripe.com/",
        "api_key_env": "STRIPE_API_KEY", "connect_timeout_ms": 1500, "timeout_ms": 8000,
        "settle_delay_s": 60, "key_retention_h": 24, "capabilities": {"lookup": false}}}})");
    REQUIRE(c.providers.size() == 1);
    const ProviderConfig& p = c.providers.at("stripe");
    CHECK(p.kind == "stripe");
    CHECK(p.base_url == "https://api.stripe.com");
    CHECK(std::get<ApiKey>(p.credentials).value.reveal() == "sk_test_abcdefghijklmnop");
    CHECK(p.connect_timeout == std::chrono::milliseconds(1500));
    CHECK(p.timeout == std::chrono::milliseconds(8000));
    CHECK(p.settle_delay == std::chrono::seconds(60));
    CHECK(p.key_retention == std::chrono::hours(24));
    CHECK(p.overrides.lookup == false);
    CHECK_FALSE(p.overrides.idempotency_keys.has_value());
}

TEST_CASE("config: defaults apply to what is left out", "[providers][config]") {
    const auto c =
        parse(R"({"providers": {"s": {"kind": "stripe", "base_url": "http://127.0.0.1:9999",
        "api_key_env": "STRIPE_API_KEY"}}})");
    const ProviderConfig& p = c.providers.at("s");
    CHECK(p.connect_timeout == std::chrono::milliseconds(2000));
    CHECK(p.timeout == std::chrono::milliseconds(10000));
    CHECK(p.settle_delay == std::chrono::seconds(120));
}

TEST_CASE("config: each bad field is one clear error naming it", "[providers][config]") {
    const std::string base =
        R"("kind": "stripe", "base_url": "https://api.stripe.com", "api_key_env": "STRIPE_API_KEY")";
    struct Case {
        std::string text;
        std::string names;
    };
    const std::vector<Case> cases = {
        {"not json", "(file)"},
        {"{\"providers\": {\n  \"s\": {\"kind\": \"stripe\",}\n}}",
         "is not valid JSON at line 2, column"},
        {R"([])", "(file)"},
        {R"({"providers": {}})", "providers"},
        {R"({"providers": {"s": {)" + base + R"(}}, "extra": 1})", "extra"},
        {R"({"providers": {"Bad Name": {)" + base + R"(}}})", "providers.Bad Name"},
        {R"({"providers": {"s": {"kind": "paypal2", "base_url": "https://x", "api_key_env": "STRIPE_API_KEY"}}})",
         "providers.s.kind"},
        {R"({"providers": {"s": {"kind": "stripe", "api_key_env": "STRIPE_API_KEY"}}})",
         "providers.s.base_url"},
        {R"({"providers": {"s": {"kind": "stripe", "base_url": "http://api.stripe.com", "api_key_env": "STRIPE_API_KEY"}}})",
         "providers.s.base_url"},
        {R"({"providers": {"s": {"kind": "stripe", "base_url": "https://x"}}})",
         "providers.s.api_key_env"},
        {R"({"providers": {"s": {"kind": "stripe", "base_url": "https://x", "api_key_env": "MISSING_KEY"}}})",
         "MISSING_KEY is not set"},
        {R"({"providers": {"s": {"kind": "stripe", "base_url": "https://x", "api_key_env": "EMPTY_KEY"}}})",
         "EMPTY_KEY is set but empty"},
        {R"({"providers": {"s": {)" + base + R"(, "api_key": "sk_live_x"}}})",
         "API keys never go in the file"},
        {R"({"providers": {"s": {)" + base + R"(, "timeout_ms": "fast"}}})",
         "providers.s.timeout_ms"},
        {R"({"providers": {"s": {)" + base + R"(, "timeout_ms": 5}}})", "providers.s.timeout_ms"},
        {R"({"providers": {"s": {)" + base +
             R"(, "timeout_ms": 1000, "connect_timeout_ms": 2000}}})",
         "providers.s.timeout_ms"},
        {R"({"providers": {"s": {)" + base + R"(, "capabilities": {"search": true}}}})",
         "providers.s.capabilities.search"},
        {R"({"providers": {"s": {)" + base + R"(, "capabilities": {"lookup": "no"}}}})",
         "providers.s.capabilities.lookup"},
        {R"({"providers": {"s": {)" + base + R"(, "timeouts": 1}}})", "providers.s.timeouts"},
        {R"({"providers": {"s": {)" + base + R"(, "dashboard_url": "https://d.example/p/"}}})",
         "providers.s.dashboard_url: must hold {reference} once"},
        {R"({"providers": {"s": {)" + base +
             R"(, "dashboard_url": "http://d.example/p/{reference}"}}})",
         "providers.s.dashboard_url: must be an https:// address"},
        {R"({"providers": {"s": {)" + base + R"(, "dashboard_url": 7}}})",
         "providers.s.dashboard_url: must be a string"},
    };
    for (const auto& c : cases) {
        INFO(c.text);
        const std::string error = error_of(c.text);
        CHECK(error.find(c.names) != std::string::npos);
        CHECK(error.find("payrecon.json") == 0);
        CHECK(error.find("sk_live_x") == std::string::npos);
    }
}

TEST_CASE("config: a mistyped key, kind or capability gets the nearest valid one",
          "[providers][config]") {
    const std::string base =
        R"("kind": "stripe", "base_url": "https://api.stripe.com", "api_key_env": "STRIPE_API_KEY")";
    struct Case {
        std::string text;
        std::string says;
    };
    const std::vector<Case> cases = {
        {R"({"providers": {"s": {)" + base + R"(, "timeout": 1000}}})",
         "providers.s.timeout: is not a known setting; did you mean 'timeout_ms'?"},
        {R"({"providers": {"s": {)" + base + R"(, "webhok_secret_env": "X"}}})",
         "did you mean 'webhook_secret_env'?"},
        {R"({"providers": {"s": {)" + base + R"(, "merchant_acount": "X"}}})",
         "did you mean 'merchant_account'?"},
        {R"({"providers": {"s": {"kind": "strpie", "base_url": "https://x", "api_key_env": "STRIPE_API_KEY"}}})",
         "'strpie' is not an adapter this build has; did you mean 'stripe'?"},
        {R"({"providers": {"s": {)" + base + R"(, "capabilities": {"lokup": false}}}})",
         "is not a known capability; did you mean 'lookup'?"},
        {R"({"provider": {"s": {)" + base + R"(}}})", "did you mean 'providers'?"},
    };
    for (const auto& c : cases) {
        INFO(c.text);
        CHECK(error_of(c.text).find(c.says) != std::string::npos);
    }
    // Nothing near: no guess.
    const std::string far = error_of(R"({"providers": {"s": {)" + base + R"(, "zzzzzz": 1}}})");
    CHECK(far.find("is not a known setting") != std::string::npos);
    CHECK(far.find("did you mean") == std::string::npos);
}

TEST_CASE("config: a base_url carrying credentials is refused, naming api_key_env",
          "[providers][config][regression]") {
    // "https://user:password@host" was accepted: a secret in the file (and in every message that
    // prints the URL), where only the name of its environment variable belongs.
    for (const std::string url :
         {"https://user:sk_live_secret@api.stripe.com", "https://sk_live_secret@api.stripe.com",
          "https://sk_live_secret:@api.stripe.com/v1", "https://api.stripe.com@evil.example",
          "http://u:sk_live_secret@127.0.0.1:9999"}) {
        INFO(url);
        const std::string text = R"({"providers": {"s": {"kind": "stripe", "base_url": ")" + url +
                                 R"(", "api_key_env": "STRIPE_API_KEY"}}})";
        try {
            parse(text);
            FAIL("accepted");
        } catch (const ConfigError& e) {
            const std::string what = e.what();
            CHECK(e.code() == ExitCode::config);
            CHECK(what.find("providers.s.base_url") != std::string::npos);
            CHECK(what.find("sk_live_secret") == std::string::npos);
            CHECK(e.hint().find("STRIPE_API_KEY") != std::string::npos);
            CHECK(e.hint().find("api_key_env") != std::string::npos);
        }
    }
    // An '@' after the host is part of the path, not credentials.
    CHECK(parse(R"({"providers": {"s": {"kind": "stripe", "base_url": "https://api.stripe.com/a@b",
        "api_key_env": "STRIPE_API_KEY"}}})")
              .providers.at("s")
              .base_url == "https://api.stripe.com/a@b");
}

TEST_CASE("config: an adyen provider names its merchant account", "[providers][config][adyen]") {
    const auto c = parse(
        R"({"providers": {"adyen": {"kind": "adyen", "base_url": "https://checkout-test.adyen.com",
        "api_key_env": "ADYEN_API_KEY", "merchant_account": "AcmeShopECOM", "key_retention_h": 168,
        "return_url": "https://shop.example.com/checkout/return"}}})");
    const ProviderConfig& p = c.providers.at("adyen");
    CHECK(p.kind == "adyen");
    CHECK(adyen::settings_of(p).merchant_account == "AcmeShopECOM");
    CHECK(adyen::settings_of(p).return_url == "https://shop.example.com/checkout/return");
    CHECK(std::get<ApiKey>(p.credentials).value.reveal() == "AQE_test_abcdefghijklmnop");
    CHECK(p.key_retention == std::chrono::hours(168));
    CHECK(parse(R"({"providers": {"s": {"kind": "stripe", "base_url": "https://api.stripe.com",
        "api_key_env": "STRIPE_API_KEY"}}})")
              .providers.at("s")
              .settings == nullptr);

    const std::string adyen =
        R"("kind": "adyen", "base_url": "https://checkout-test.adyen.com", "api_key_env": "ADYEN_API_KEY")";
    for (
        const std::string& text : std::vector<std::string>{
            R"({"providers": {"a": {)" + adyen + R"(}}})",
            R"({"providers": {"a": {)" + adyen + R"(, "merchant_account": ""}}})",
            R"({"providers": {"a": {)" + adyen + R"(, "merchant_account": 42}}})",
            R"({"providers": {"a": {)" + adyen + R"(, "merchant_account": "Acme Shop\nECOM"}}})",
            std::string(
                R"({"providers": {"a": {"kind": "stripe", "base_url": "https://api.stripe.com", "api_key_env": "STRIPE_API_KEY", "merchant_account": "AcmeShopECOM"}}})"),
        }) {
        INFO(text);
        CHECK(error_of(text).find("providers.a.merchant_account") != std::string::npos);
    }
}

TEST_CASE("config: an adyen provider names the returnUrl Adyen requires on every payment",
          "[providers][config][adyen]") {
    const std::string adyen =
        R"("kind": "adyen", "base_url": "https://checkout-test.adyen.com", "api_key_env": "ADYEN_API_KEY", "merchant_account": "AcmeShopECOM")";
    CHECK(adyen::settings_of(parse(R"({"providers": {"a": {)" + adyen +
                                   R"(, "return_url": "my-app://checkout"}}})")
                                 .providers.at("a"))
              .return_url == "my-app://checkout");
    for (
        const std::string& text : std::vector<std::string>{
            R"({"providers": {"a": {)" + adyen + R"(}}})", // Adyen would answer 422 14_030
            R"({"providers": {"a": {)" + adyen + R"(, "return_url": ""}}})",
            R"({"providers": {"a": {)" + adyen + R"(, "return_url": 42}}})",
            R"({"providers": {"a": {)" + adyen + R"(, "return_url": "shop.example.com/return"}}})",
            R"({"providers": {"a": {)" + adyen +
                R"(, "return_url": "https://shop.example.com/a b"}}})",
            R"({"providers": {"a": {)" + adyen + R"(, "return_url": "https://x/)" +
                std::string(1024, 'a') + R"("}}})",
            std::string(
                R"({"providers": {"a": {"kind": "stripe", "base_url": "https://api.stripe.com", "api_key_env": "STRIPE_API_KEY", "return_url": "https://shop.example.com/r"}}})"),
        }) {
        INFO(text);
        CHECK(error_of(text).find("providers.a.return_url") != std::string::npos);
    }
}

TEST_CASE("config: a missing file is a clear error", "[providers][config]") {
    CHECK_THROWS_AS(load_config("/nonexistent/payrecon.json"), ConfigError);
}

TEST_CASE("config: the provider names can be read without the API keys", "[providers][config]") {
    const std::string text =
        R"({"providers": {"s": {"kind": "stripe", "base_url": "https://api.stripe.com",
        "api_key_env": "UNSET_KEY"}}})";
    CHECK_THROWS_AS(parse_config(text, "payrecon.json", fake_env), ConfigError);
    const auto c = parse_config(text, "payrecon.json", fake_env, ApiKeys::not_read);
    CHECK(std::get<ApiKey>(c.providers.at("s").credentials).value.empty());
    CHECK(std::get<ApiKey>(c.providers.at("s").credentials).env == "UNSET_KEY");
    // Everything else is still checked.
    CHECK_THROWS_AS(
        parse_config(R"({"providers": {"s": {"kind": "stripe", "base_url": "https://api.stripe.com",
        "api_key_env": "not a name"}}})",
                     "payrecon.json", fake_env, ApiKeys::not_read),
        ConfigError);
}

TEST_CASE("config: credentials are what the kind takes: an API key, HTTP basic or OAuth2 client "
          "credentials, each from the environment",
          "[providers][config][credentials]") {
    // Fourth (tests/providers/fourth/) takes OAuth2 client credentials or basic; paypal takes
    // OAuth2 client credentials (the next test); the other kinds payrecon has take an API key.
    const providers::test_hook::ScopedRegistration fourth(fourth::descriptor());
    const std::string head =
        R"({"providers": {"f": {"kind": "fourth", "base_url": "https://api.fourth.test", "merchant_id": "MERCHANT42", )";
    const std::string oauth =
        R"("credentials": {"type": "oauth2_client_credentials", "client_id_env": "CLIENT_ID", "client_secret_env": "CLIENT_SECRET", "token_url": "https://api.fourth.test/v1/oauth2/token"})";
    const auto o = std::get<OAuth2ClientCredentials>(
        parse(head + oauth + "}}}").providers.at("f").credentials);
    CHECK(o.client_id.reveal() == "client-id-abcdefgh");
    CHECK(o.client_secret.reveal() == "client-secret-ijklmnop");
    CHECK(o.token_url == "https://api.fourth.test/v1/oauth2/token");
    const auto b = std::get<BasicAuth>(
        parse(
            head +
            R"("credentials": {"type": "basic", "user_env": "PSP_USER", "password_env": "PSP_PASSWORD"}}}})")
            .providers.at("f")
            .credentials);
    CHECK(b.user.reveal() == "user-qrstuvwx");
    CHECK(b.password.reveal() == "password-yzabcdef");
    // Without reading the environment: the names are checked, the secrets stay empty.
    const auto unread = std::get<OAuth2ClientCredentials>(
        parse_config(head + oauth + "}}}", "payrecon.json", fake_env, ApiKeys::not_read)
            .providers.at("f")
            .credentials);
    CHECK(unread.client_secret.empty());
    CHECK(unread.client_secret_env == "CLIENT_SECRET");

    const std::string stripe =
        R"({"providers": {"s": {"kind": "stripe", "base_url": "https://api.stripe.com", )";
    struct Case {
        std::string text;
        std::string names;
    };
    const std::vector<Case> cases = {
        {stripe +
             R"("credentials": {"type": "basic", "user_env": "PSP_USER", "password_env": "PSP_PASSWORD"}}}})",
         "providers.s.credentials.type: kind stripe takes api_key_env, not basic"},
        {stripe + R"("api_key_env": "STRIPE_API_KEY", )" + oauth + "}}}",
         "providers.s.credentials: is given together with api_key_env"},
        {head + R"("api_key_env": "CLIENT_ID"}}})",
         "providers.f.credentials: is required for kind fourth: it takes credentials of type "
         "oauth2_client_credentials or credentials of type basic"},
        {head + R"("credentials": {"type": "mac"}}}})",
         "providers.f.credentials.type: 'mac' is not a kind of credentials"},
        {head +
             R"("credentials": {"type": "basic", "user_env": "PSP_USER", "password_env": "MISSING"}}}})",
         "providers.f.credentials.password_env: the environment variable MISSING is not set"},
        {head +
             R"("credentials": {"type": "basic", "user_env": "PSP_USER", "password": "hunter2"}}}})",
         "providers.f.credentials.password: is not a setting of basic credentials (secrets never "
         "go in the file)"},
        {head +
             R"("credentials": {"type": "oauth2_client_credentials", "client_id_env": "CLIENT_ID", "client_secret_env": "CLIENT_SECRET"}}}})",
         "providers.f.credentials.token_url: is required"},
        {head +
             R"("credentials": {"type": "oauth2_client_credentials", "client_id_env": "CLIENT_ID", "client_secret_env": "CLIENT_SECRET", "token_url": "http://api.fourth.test/token"}}}})",
         "providers.f.credentials.token_url: must be https://"},
        {head +
             R"("credentials": {"type": "oauth2_client_credentials", "client_id_env": "CLIENT_ID", "client_secret_env": "CLIENT_SECRET", "token_url": "https://id:hunter2@api.fourth.test/token"}}}})",
         "providers.f.credentials.token_url: carries credentials"},
        {head +
             R"("credentials": {"type": "oauth2_client_credentials", "client_id_env": "not a name", "client_secret_env": "CLIENT_SECRET", "token_url": "https://api.fourth.test/token"}}}})",
         "providers.f.credentials.client_id_env: is required: the NAME of the environment "
         "variable"},
    };
    for (const auto& c : cases) {
        INFO(c.text);
        const std::string error = error_of(c.text);
        CHECK(error.find("payrecon.json: " + c.names) == 0);
        CHECK(error.find("hunter2") == std::string::npos);
    }
}

TEST_CASE("config: a paypal provider takes OAuth2 client credentials, PayPal's key retention "
          "and search delay apply unless the entry says more",
          "[providers][config][paypal]") {
    using namespace std::chrono_literals;
    const std::string head =
        R"({"providers": {"p": {"kind": "paypal", "base_url": "https://api-m.sandbox.paypal.com", )";
    const std::string oauth =
        R"("credentials": {"type": "oauth2_client_credentials", "client_id_env": "CLIENT_ID", "client_secret_env": "CLIENT_SECRET", "token_url": "https://api-m.sandbox.paypal.com/v1/oauth2/token"})";
    const ProviderConfig p = parse(head + oauth + "}}}").providers.at("p");
    CHECK(p.kind == "paypal");
    const auto& o = std::get<OAuth2ClientCredentials>(p.credentials);
    CHECK(o.client_id.reveal() == "client-id-abcdefgh");
    CHECK(o.client_secret.reveal() == "client-secret-ijklmnop");
    CHECK(o.token_url == "https://api-m.sandbox.paypal.com/v1/oauth2/token");
    // As the issue and the README write it: the client credentials named flat, the token from
    // the same host's /v1/oauth2/token.
    const ProviderConfig flat =
        parse(head + R"("client_id_env": "CLIENT_ID", "client_secret_env": "CLIENT_SECRET"}}})")
            .providers.at("p");
    const auto& f = std::get<OAuth2ClientCredentials>(flat.credentials);
    CHECK(f.client_id_env == "CLIENT_ID");
    CHECK(f.client_secret.reveal() == "client-secret-ijklmnop");
    CHECK(f.token_url == "https://api-m.sandbox.paypal.com/v1/oauth2/token");
    // Without key_retention_h: PayPal's 6 h, not the common 24 h; the settle delay (120 s by
    // default) is raised to the search's 3 h.
    CHECK(paypal::settings_of(p).key_retention == 6h);
    CHECK(create_provider(p)->capabilities().key_retention == 6h);
    CHECK(create_provider(p)->capabilities().lookup_staleness == 3h);
    // An account whose keys PayPal keeps 72 h, searched with a longer delay.
    const ProviderConfig extended =
        parse(head + oauth + R"(, "key_retention_h": 72, "settle_delay_s": 14400}}})")
            .providers.at("p");
    CHECK(create_provider(extended)->capabilities().key_retention == 72h);
    CHECK(create_provider(extended)->capabilities().lookup_staleness == 4h);
    CHECK(create_provider(parse(head + oauth + R"(, "key_retention_h": 6, "settle_delay_s": 0}}})")
                              .providers.at("p"))
              ->capabilities()
              .lookup_staleness == 3h);

    struct Case {
        std::string text;
        std::string names;
    };
    const std::vector<Case> cases = {
        {head + oauth + R"(, "key_retention_h": 73}}})",
         "providers.p.key_retention_h: PayPal keeps a PayPal-Request-Id for 6 hours, or up to 72 "
         "hours"},
        {head + oauth + R"(, "key_retention_h": 720}}})", "providers.p.key_retention_h: PayPal"},
        {head + oauth + R"(, "key_retention_h": "6"}}})",
         "providers.p.key_retention_h: must be an integer"},
        {head + R"("api_key_env": "CLIENT_SECRET"}}})",
         "providers.p.credentials: is required for kind paypal: it takes client_id_env and "
         "client_secret_env (or credentials of type oauth2_client_credentials)"},
        {head +
             R"("api_key_env": "CLIENT_SECRET", "client_id_env": "CLIENT_ID", "client_secret_env": "CLIENT_SECRET"}}})",
         "providers.p.client_id_env: is given together with api_key_env"},
        {head + oauth +
             R"(, "client_id_env": "CLIENT_ID", "client_secret_env": "CLIENT_SECRET"}}})",
         "providers.p.client_id_env: is given together with credentials"},
        {head + R"("client_id_env": "CLIENT_ID"}}})",
         "providers.p.client_secret_env: is required: the NAME of the environment variable"},
        {head + R"("client_id_env": "CLIENT_ID", "client_secret_env": "PAYPAL_SECRET"}}})",
         "providers.p.client_secret_env: the environment variable PAYPAL_SECRET is not set"},
        {R"({"providers": {"s": {"kind": "stripe", "base_url": "https://api.stripe.com", "client_id_env": "CLIENT_ID", "client_secret_env": "CLIENT_SECRET"}}})",
         "providers.s.client_id_env: is not a setting of kind stripe: it takes api_key_env"},
        {head +
             R"("credentials": {"type": "basic", "user_env": "PSP_USER", "password_env": "PSP_PASSWORD"}}}})",
         "providers.p.credentials.type: kind paypal takes client_id_env and client_secret_env "
         "(or credentials of type oauth2_client_credentials), not basic"},
        {head +
             R"("credentials": {"type": "oauth2_client_credentials", "client_id_env": "CLIENT_ID", "client_secret_env": "CLIENT_SECRET"}}}})",
         "providers.p.credentials.token_url: is required"},
        {head +
             R"("credentials": {"type": "oauth2_client_credentials", "client_id_env": "PAYPAL_CLIENT_ID", "client_secret_env": "CLIENT_SECRET", "token_url": "https://api-m.paypal.com/v1/oauth2/token"}}}})",
         "providers.p.credentials.client_id_env: the environment variable PAYPAL_CLIENT_ID is "
         "not set"},
        {head +
             R"("credentials": {"type": "oauth2_client_credentials", "client_id_env": "CLIENT_ID", "client_secret": "hunter2", "token_url": "https://api-m.paypal.com/v1/oauth2/token"}}}})",
         "providers.p.credentials.client_secret: is not a setting of oauth2_client_credentials "
         "credentials (secrets never go in the file)"},
        {head + oauth + R"(, "merchant_account": "AcmeShopECOM"}}})",
         "providers.p.merchant_account: is only used by kind adyen"},
        {head + oauth + R"(, "webhook_secret_env": "PAYPAL_WEBHOOK_ID"}}})",
         "providers.p.webhook_secret_env: kind paypal has no webhook verifier in this build"},
    };
    for (const auto& c : cases) {
        INFO(c.text);
        const std::string error = error_of(c.text);
        CHECK(error.find("payrecon.json: " + c.names) == 0);
        CHECK(error.find("hunter2") == std::string::npos);
    }
}

TEST_CASE("config: dashboard_url links a reference to the provider's page, Stripe's by default on "
          "its own API and none on a loopback fake",
          "[providers][config]") {
    const auto c = parse(R"({"providers": {
        "live": {"kind": "stripe", "base_url": "https://api.stripe.com",
                 "api_key_env": "STRIPE_API_KEY"},
        "test": {"kind": "stripe", "base_url": "https://api.stripe.com",
                 "api_key_env": "STRIPE_API_KEY",
                 "dashboard_url": "https://dashboard.stripe.com/test/payments/{reference}"},
        "fake": {"kind": "stripe", "base_url": "http://127.0.0.1:9999",
                 "api_key_env": "STRIPE_API_KEY"},
        "adyen": {"kind": "adyen", "base_url": "https://checkout-test.adyen.com",
                  "api_key_env": "ADYEN_API_KEY", "merchant_account": "Acme",
                  "return_url": "https://shop.example.com/return"}}})");
    CHECK(dashboard_url(c.providers.at("live")) ==
          "https://dashboard.stripe.com/payments/{reference}");
    CHECK(dashboard_url(c.providers.at("test")) ==
          "https://dashboard.stripe.com/test/payments/{reference}");
    CHECK(dashboard_url(c.providers.at("fake")).empty());
    CHECK(dashboard_url(c.providers.at("adyen")).empty()); // its address depends on the account
    CHECK(dashboard_link(dashboard_url(c.providers.at("test")), "pi_3Ab/../x y") ==
          "https://dashboard.stripe.com/test/payments/pi_3Ab%2F..%2Fx%20y");
    CHECK_FALSE(dashboard_link("", "pi_1").has_value());
}
