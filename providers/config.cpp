#include "providers/config.hpp"

#include "core/errors.hpp"
#include "core/external_json.hpp"

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

namespace payrecon::providers {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::filesystem::path& source, const std::string& field,
                      const std::string& what, const std::string& hint = {}) {
    throw ConfigError(source.string() + ": " + field + ": " + what,
                      hint.empty() ? "fix the field and run again" : hint);
}

long long integer_field(const json& obj, const std::filesystem::path& source,
                        const std::string& path, const char* key, long long fallback, long long min,
                        long long max) {
    if (!obj.contains(key)) {
        return fallback;
    }
    const json& v = obj.at(key);
    if (!v.is_number_integer()) {
        bad(source, path + "." + key, "must be an integer");
    }
    const long long n = v.get<long long>();
    if (n < min || n > max) {
        bad(source, path + "." + key,
            "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", not " +
                std::to_string(n));
    }
    return n;
}

std::optional<bool> bool_field(const json& obj, const std::filesystem::path& source,
                               const std::string& path, const char* key) {
    if (!obj.contains(key)) {
        return std::nullopt;
    }
    if (!obj.at(key).is_boolean()) {
        bad(source, path + "." + key, "must be true or false");
    }
    return obj.at(key).get<bool>();
}

// True if the URL's authority (between "://" and the first '/', '?' or '#') holds an '@': user
// information, which is credentials or a host in disguise ("https://api.stripe.com@evil.example").
bool has_userinfo(const std::string& url) {
    const auto scheme_end = url.find("://");
    const std::size_t start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
    const std::size_t end = url.find_first_of("/?#", start);
    return url.find('@', start) < end;
}

bool loopback_host(const std::string& url) {
    static const std::regex k_loopback(
        R"(^http://(127\.[0-9.]+|localhost|\[::1\])(:[0-9]+)?(/.*)?$)");
    return std::regex_match(url, k_loopback);
}

} // namespace

const std::vector<std::string_view>& known_kinds() {
    static const std::vector<std::string_view> k_kinds = {"stripe", "adyen",
                                                          "square"}; // registry.cpp builds each
    return k_kinds;
}

Config parse_config(std::string_view text, const std::filesystem::path& source,
                    const char* (*environment)(const char*), ApiKeys keys) {
    if (environment == nullptr) {
        environment = [](const char* name) -> const char* { return std::getenv(name); };
    }
    if (json_nesting_depth(text) > k_max_external_json_depth) {
        bad(source, "(file)",
            "nests deeper than " + std::to_string(k_max_external_json_depth) + " levels",
            "a provider configuration is a few levels deep: check what wrote this file");
    }
    json root;
    try {
        root = json::parse(text);
    } catch (const json::parse_error& e) {
        // Where: nlohmann counts lines and columns (its message reads "... at line 3, column 14:
        // syntax error while parsing object key - ..."); the part after the prefix is kept.
        std::string where = e.what();
        const std::size_t at = where.find(" at line ");
        where =
            at == std::string::npos ? "at byte " + std::to_string(e.byte) : where.substr(at + 1);
        bad(source, "(file)", "is not valid JSON " + where,
            "check it with: python3 -m json.tool FILE");
    }
    if (!root.is_object()) {
        bad(source, "(file)", "must be a JSON object with a \"providers\" object");
    }
    for (const auto& [key, value] : root.items()) {
        if (key != "providers") {
            bad(source, key, "is not a known setting", "the file holds \"providers\" only");
        }
    }
    if (!root.contains("providers") || !root.at("providers").is_object() ||
        root.at("providers").empty()) {
        bad(source, "providers", "must be an object naming at least one provider");
    }
    static const std::regex k_name("^[a-z0-9_-]{1,32}$");
    static const std::regex k_env("^[A-Za-z_][A-Za-z0-9_]*$");
    static const std::vector<std::string> k_allowed = {"kind",
                                                       "base_url",
                                                       "api_key_env",
                                                       "connect_timeout_ms",
                                                       "timeout_ms",
                                                       "settle_delay_s",
                                                       "key_retention_h",
                                                       "capabilities",
                                                       "merchant_account",
                                                       "return_url",
                                                       "amount_tolerance_minor"};
    Config config;
    config.source = source;
    for (const auto& [name, p] : root.at("providers").items()) {
        const std::string path = "providers." + name;
        if (!std::regex_match(name, k_name)) {
            bad(source, path, "a provider name is 1 to 32 of a-z, 0-9, '_', '-'");
        }
        if (!p.is_object()) {
            bad(source, path, "must be an object");
        }
        for (const auto& [field, ignored] : p.items()) {
            if (field == "api_key" || field == "secret_key") {
                bad(source, path + "." + field, "API keys never go in the file",
                    "put the key in an environment variable and name it in api_key_env");
            }
            if (std::find(k_allowed.begin(), k_allowed.end(), field) == k_allowed.end()) {
                bad(source, path + "." + field, "is not a known setting",
                    "known: kind, base_url, api_key_env, connect_timeout_ms, timeout_ms, "
                    "settle_delay_s, key_retention_h, amount_tolerance_minor, capabilities, "
                    "merchant_account and return_url (adyen)");
            }
        }
        ProviderConfig c;
        c.name = name;
        if (!p.contains("kind") || !p.at("kind").is_string()) {
            bad(source, path + ".kind", "is required: the adapter kind, e.g. stripe");
        }
        c.kind = p.at("kind").get<std::string>();
        if (std::find(known_kinds().begin(), known_kinds().end(), c.kind) == known_kinds().end()) {
            bad(source, path + ".kind", "'" + c.kind + "' is not an adapter this build has",
                "use a kind this build has: stripe, adyen, square");
        }
        if (!p.contains("base_url") || !p.at("base_url").is_string()) {
            bad(source, path + ".base_url", "is required, e.g. https://api.stripe.com");
        }
        c.base_url = p.at("base_url").get<std::string>();
        while (!c.base_url.empty() && c.base_url.back() == '/') {
            c.base_url.pop_back();
        }
        if (has_userinfo(c.base_url)) {
            // Never echo the URL: what precedes the '@' is a secret.
            const std::string env =
                p.contains("api_key_env") && p.at("api_key_env").is_string() &&
                        std::regex_match(p.at("api_key_env").get<std::string>(), k_env)
                    ? " (" + p.at("api_key_env").get<std::string>() + ")"
                    : std::string();
            bad(source, path + ".base_url",
                "carries credentials (user:password@ before the host), which never go in the file",
                "give the bare URL (e.g. https://api.stripe.com) and keep the credential in the "
                "environment variable that api_key_env names" +
                    env);
        }
        if (c.base_url.rfind("https://", 0) != 0 && !loopback_host(c.base_url)) {
            bad(source, path + ".base_url",
                "must be https:// (plain http only for loopback test servers)");
        }
        if (!p.contains("api_key_env") || !p.at("api_key_env").is_string() ||
            !std::regex_match(p.at("api_key_env").get<std::string>(), k_env)) {
            bad(source, path + ".api_key_env",
                "is required: the NAME of the environment variable that holds the API key");
        }
        c.api_key_env = p.at("api_key_env").get<std::string>();
        if (keys == ApiKeys::read) {
            const char* key = environment(c.api_key_env.c_str());
            if (key == nullptr || *key == '\0') {
                bad(source, path + ".api_key_env",
                    "the environment variable " + c.api_key_env +
                        (key == nullptr ? " is not set" : " is set but empty"),
                    "export " + c.api_key_env +
                        " with the provider's secret key (never put it in the file)");
            }
            c.api_key = Secret(key);
        }
        c.connect_timeout = std::chrono::milliseconds(
            integer_field(p, source, path, "connect_timeout_ms", 2000, 50, 60000));
        c.timeout = std::chrono::milliseconds(
            integer_field(p, source, path, "timeout_ms", 10000, 100, 300000));
        if (c.timeout < c.connect_timeout) {
            bad(source, path + ".timeout_ms", "must not be shorter than connect_timeout_ms");
        }
        c.settle_delay =
            std::chrono::seconds(integer_field(p, source, path, "settle_delay_s", 120, 0, 86400));
        c.key_retention =
            std::chrono::hours(integer_field(p, source, path, "key_retention_h", 24, 1, 24 * 30));
        c.amount_tolerance_minor =
            integer_field(p, source, path, "amount_tolerance_minor", 0, 0, 1000000);
        static const std::regex k_merchant_account("^[A-Za-z0-9_.-]{1,80}$");
        if (c.kind == "adyen") {
            if (!p.contains("merchant_account") || !p.at("merchant_account").is_string() ||
                !std::regex_match(p.at("merchant_account").get<std::string>(),
                                  k_merchant_account)) {
                bad(source, path + ".merchant_account",
                    "is required for kind adyen: the merchant account's name (1 to 80 of A-Z, a-z, "
                    "0-9, '_', '.', '-')",
                    "copy it from Adyen's Customer Area, e.g. \"merchant_account\": "
                    "\"AcmeShopECOM\"");
            }
            c.merchant_account = p.at("merchant_account").get<std::string>();
        } else if (p.contains("merchant_account")) {
            bad(source, path + ".merchant_account", "is only used by kind adyen",
                "remove it from this provider");
        }
        // Adyen's schema: "The URL to return to in case of a redirection", required on every
        // /payments request; it recommends at most 1024 characters, URL-encoded.
        static const std::regex k_return_url("^[A-Za-z][A-Za-z0-9+.-]*://[\\x21-\\x7e]{1,1000}$");
        if (c.kind == "adyen") {
            if (!p.contains("return_url") || !p.at("return_url").is_string() ||
                !std::regex_match(p.at("return_url").get<std::string>(), k_return_url)) {
                bad(source, path + ".return_url",
                    "is required for kind adyen: the URL a redirected shopper returns to (Adyen "
                    "requires returnUrl on every payment, and refuses one without it with 422 "
                    "14_030), a scheme:// URL of visible ASCII, at most 1024 characters",
                    "e.g. \"return_url\": \"https://shop.example.com/checkout/return\"");
            }
            c.return_url = p.at("return_url").get<std::string>();
        } else if (p.contains("return_url")) {
            bad(source, path + ".return_url", "is only used by kind adyen",
                "remove it from this provider");
        }
        if (p.contains("capabilities")) {
            const json& caps = p.at("capabilities");
            const std::string cpath = path + ".capabilities";
            if (!caps.is_object()) {
                bad(source, cpath, "must be an object");
            }
            for (const auto& [field, ignored] : caps.items()) {
                if (field != "idempotency_keys" && field != "lookup" && field != "list") {
                    bad(source, cpath + "." + field, "is not a known capability",
                        "known: idempotency_keys, lookup, list (true or false)");
                }
            }
            c.overrides.idempotency_keys = bool_field(caps, source, cpath, "idempotency_keys");
            c.overrides.lookup = bool_field(caps, source, cpath, "lookup");
            c.overrides.list = bool_field(caps, source, cpath, "list");
        }
        config.providers.emplace(name, std::move(c));
    }
    return config;
}

Config load_config(const std::filesystem::path& path, ApiKeys keys) {
    std::ifstream in(path);
    if (!in) {
        throw ConfigError(
            "cannot read the config file " + path.string(),
            "give it with --config FILE or PAYRECON_CONFIG; docs/operations.md shows one");
    }
    std::ostringstream text;
    text << in.rdbuf();
    return parse_config(text.str(), path, nullptr, keys);
}

std::chrono::milliseconds worst_case_call(const ProviderConfig& config) {
    return config.connect_timeout + config.timeout;
}

Capabilities configured_capabilities(const ProviderConfig& config, std::size_t max_key_length,
                                     bool api_can_lookup, bool api_can_list) {
    Capabilities caps;
    caps.honours_idempotency_keys = config.overrides.idempotency_keys.value_or(true);
    caps.key_retention = config.key_retention;
    caps.max_key_length = max_key_length;
    caps.lookup_by_operation_id = api_can_lookup && config.overrides.lookup.value_or(true);
    caps.lookup_staleness = config.settle_delay;
    caps.list_transactions = api_can_list && config.overrides.list.value_or(true);
    caps.worst_case_call = worst_case_call(config);
    return caps;
}

} // namespace payrecon::providers
