#include "providers/config.hpp"

#include "core/errors.hpp"
#include "core/external_json.hpp"
#include "core/nearest.hpp"
#include "providers/config_credentials.hpp"
#include "providers/config_fields.hpp"
#include "providers/registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

namespace payrecon::providers {

using namespace config_fields; // the field checks shared with config_credentials
namespace {

using nlohmann::json;

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

// The members every provider entry may have, whatever its kind.
const std::vector<std::string_view>& common_fields() {
    static const std::vector<std::string_view> k_fields = {
        "kind",           "base_url",          "api_key_env",         "credentials",
        "client_id_env",  "client_secret_env", "connect_timeout_ms",  "timeout_ms",
        "settle_delay_s", "key_retention_h",   "notification_wait_s", "amount_tolerance_minor",
        "capabilities",   "dashboard_url",     "webhook_secret_env",  "webhook_url"};
    return k_fields;
}

// Every setting any entry may have, for "did you mean".
std::vector<std::string> every_setting() {
    std::vector<std::string> out(common_fields().begin(), common_fields().end());
    for (const auto* d : registered()) {
        for (const auto& s : d->settings) {
            out.emplace_back(s.name);
        }
    }
    return out;
}

bool is_common(std::string_view field) {
    return std::find(common_fields().begin(), common_fields().end(), field) !=
           common_fields().end();
}

// The kinds whose own settings include `field`, for messages: "adyen"; empty if none.
std::string kinds_taking(std::string_view field) {
    const auto takes = [field](const ProviderDescriptor& d) {
        return std::any_of(d.settings.begin(), d.settings.end(),
                           [field](const SettingSpec& s) { return s.name == field; });
    };
    const auto& all = registered();
    if (std::none_of(all.begin(), all.end(), [&](const auto* d) { return takes(*d); })) {
        return {};
    }
    return kinds_where(takes);
}

// What the "is not a known setting" hint lists: the common members, then each kind's own.
std::string known_settings() {
    std::string out = "known: kind, base_url, api_key_env or credentials (or client_id_env and "
                      "client_secret_env), connect_timeout_ms, "
                      "timeout_ms, settle_delay_s, key_retention_h, notification_wait_s, "
                      "amount_tolerance_minor, "
                      "capabilities, dashboard_url, webhook_secret_env, webhook_url";
    for (const auto* d : registered()) {
        std::vector<std::string_view> names;
        for (const auto& s : d->settings) {
            names.push_back(s.name);
        }
        if (!names.empty()) {
            out += ", " + and_list(names) + " (" + std::string(d->kind) + ")";
        }
    }
    return out;
}

} // namespace

const nlohmann::json* SettingsInput::find(std::string_view field) const {
    const auto it = m_entry.find(std::string(field));
    return it == m_entry.end() ? nullptr : &*it;
}

std::optional<std::string> SettingsInput::string(std::string_view field) const {
    const json* v = find(field);
    if (v == nullptr || !v->is_string()) {
        return std::nullopt;
    }
    return v->get<std::string>();
}

void SettingsInput::bad(std::string_view field, const std::string& what,
                        const std::string& hint) const {
    providers::bad(m_source, m_path + "." + std::string(field), what, hint);
}

namespace {

// The file as JSON: an object holding a non-empty "providers" object and nothing else.
json parse_root(std::string_view text, const std::filesystem::path& source) {
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
            bad(source, key, "is not a known setting" + did_you_mean(key, {"providers"}),
                "the file holds \"providers\" only");
        }
    }
    if (!root.contains("providers") || !root.at("providers").is_object() ||
        root.at("providers").empty()) {
        bad(source, "providers", "must be an object naming at least one provider");
    }
    return root;
}

// Refuses a member no kind knows, and a secret written into the file.
void check_members(const json& p, const std::filesystem::path& source, const std::string& path) {
    for (const auto& [field, ignored] : p.items()) {
        if (field == "api_key" || field == "secret_key") {
            bad(source, path + "." + field, "API keys never go in the file",
                "put the key in an environment variable and name it in api_key_env");
        }
        if (!is_common(field) && kinds_taking(field).empty()) {
            bad(source, path + "." + field,
                "is not a known setting" + did_you_mean(field, every_setting()), known_settings());
        }
    }
}

const ProviderDescriptor& read_kind(const json& p, const std::filesystem::path& source,
                                    const std::string& path) {
    if (!p.contains("kind") || !p.at("kind").is_string()) {
        bad(source, path + ".kind",
            "is required: the adapter kind, e.g. " + std::string(known_kinds().front()));
    }
    const std::string kind = p.at("kind").get<std::string>();
    const ProviderDescriptor* d = find_descriptor(kind);
    if (d == nullptr) {
        std::vector<std::string> kinds(known_kinds().begin(), known_kinds().end());
        bad(source, path + ".kind",
            "'" + kind + "' is not an adapter this build has" + did_you_mean(kind, kinds),
            "use a kind this build has: " + kinds_where());
    }
    return *d;
}

std::string read_base_url(const json& p, const std::filesystem::path& source,
                          const std::string& path) {
    if (!p.contains("base_url") || !p.at("base_url").is_string()) {
        bad(source, path + ".base_url", "is required, e.g. https://api.stripe.com");
    }
    std::string url = p.at("base_url").get<std::string>();
    while (!url.empty() && url.back() == '/') {
        url.pop_back();
    }
    if (has_userinfo(url)) {
        // Never echo the URL: what precedes the '@' is a secret.
        bad(source, path + ".base_url",
            "carries credentials (user:password@ before the host), which never go in the file",
            "give the bare URL (e.g. https://api.stripe.com) and keep the credential in the "
            "environment variable that " +
                std::string(p.contains("credentials") ? "credentials name" : "api_key_env names") +
                named_variables(p));
    }
    if (url.rfind("https://", 0) != 0 && !loopback_host(url)) {
        bad(source, path + ".base_url",
            "must be https:// (plain http only for loopback test servers)");
    }
    return url;
}

// The optional dashboard_url: an https:// (or loopback http://) address with one "{reference}".
std::string read_dashboard_url(const json& p, const std::filesystem::path& source,
                               const std::string& path) {
    if (!p.contains("dashboard_url")) {
        return {};
    }
    const std::string field = path + ".dashboard_url";
    const std::string example = "e.g. \"https://dashboard.stripe.com/test/payments/{reference}\"";
    if (!p.at("dashboard_url").is_string()) {
        bad(source, field, "must be a string", example);
    }
    const std::string url = p.at("dashboard_url").get<std::string>();
    const std::string placeholder = "{reference}";
    const auto at = url.find(placeholder);
    if (at == std::string::npos || url.find(placeholder, at + 1) != std::string::npos) {
        bad(source, field, "must hold {reference} once: where the provider's reference goes",
            example);
    }
    if (has_userinfo(url) || (url.rfind("https://", 0) != 0 && !loopback_host(url))) {
        bad(source, field, "must be an https:// address without credentials", example);
    }
    return url;
}

// The optional webhook_url: the notification URL as registered with the provider, https (or a
// loopback http:// for tests), at most 2048 characters of visible ASCII.
std::string read_webhook_url(const json& p, const std::filesystem::path& source,
                             const std::string& path) {
    if (!p.contains("webhook_url")) {
        return {};
    }
    static const std::regex k_url("^[a-z]+://[\\x21-\\x7e]{1,2040}$");
    const std::string field = path + ".webhook_url";
    const std::string example = "the URL registered with the provider for its notifications, "
                                "e.g. \"https://payments.example.com/v1/providers/square/"
                                "webhooks\"";
    const json& value = p.at("webhook_url");
    if (!value.is_string() || !std::regex_match(value.get<std::string>(), k_url)) {
        bad(source, field, "must be a URL of visible ASCII, at most 2048 characters", example);
    }
    const std::string url = value.get<std::string>();
    if (has_userinfo(url) || (url.rfind("https://", 0) != 0 && !loopback_host(url))) {
        bad(source, field, "must be an https:// address without credentials", example);
    }
    return url;
}

// The optional webhook_secret_env: a variable's name, or a non-empty array of them (a rotation).
std::vector<std::string> read_webhook_secret_envs(const json& p,
                                                  const std::filesystem::path& source,
                                                  const std::string& path) {
    if (!p.contains("webhook_secret_env")) {
        return {};
    }
    static const std::regex k_variable("^[A-Za-z_][A-Za-z0-9_]{0,127}$");
    const std::string field = path + ".webhook_secret_env";
    const std::string hint = "name the environment variable that holds the secret, e.g. "
                             "\"STRIPE_WEBHOOK_SECRET\", or several while rotating: "
                             "[\"STRIPE_WEBHOOK_SECRET\", \"STRIPE_WEBHOOK_SECRET_NEXT\"]";
    const json& value = p.at("webhook_secret_env");
    std::vector<std::string> names;
    if (value.is_string()) {
        names.push_back(value.get<std::string>());
    } else if (value.is_array() && !value.empty()) {
        for (const json& v : value) {
            if (!v.is_string()) {
                bad(source, field, "must hold names of environment variables", hint);
            }
            names.push_back(v.get<std::string>());
        }
    } else {
        bad(source, field, "must be a variable's name or a non-empty array of them", hint);
    }
    for (const auto& name : names) {
        if (!std::regex_match(name, k_variable)) {
            // A secret pasted here instead of its variable's name must not be echoed.
            bad(source, field,
                "is not an environment variable's name (secrets never go in the file)", hint);
        }
    }
    return names;
}

// Timeouts, settle delay, key retention and the statement's amount tolerance, into `c`.
void read_timings(const json& p, const std::filesystem::path& source, const std::string& path,
                  ProviderConfig& c) {
    c.connect_timeout = std::chrono::milliseconds(
        integer_field(p, source, path, "connect_timeout_ms", 2000, 50, 60000));
    c.timeout =
        std::chrono::milliseconds(integer_field(p, source, path, "timeout_ms", 10000, 100, 300000));
    if (c.timeout < c.connect_timeout) {
        bad(source, path + ".timeout_ms", "must not be shorter than connect_timeout_ms");
    }
    c.settle_delay =
        std::chrono::seconds(integer_field(p, source, path, "settle_delay_s", 120, 0, 86400));
    c.key_retention =
        std::chrono::hours(integer_field(p, source, path, "key_retention_h", 24, 1, 24 * 30));
    c.amount_tolerance_minor =
        integer_field(p, source, path, "amount_tolerance_minor", 0, 0, 1000000);
    if (p.contains("notification_wait_s")) {
        // At most 30 days: as long as Adyen retries a notification.
        c.notification_wait = std::chrono::seconds(
            integer_field(p, source, path, "notification_wait_s", 0, 0, 30 * 86400));
    }
}

// The settings of other kinds are refused; the kind's own are its parser's to read.
std::shared_ptr<const ProviderSettings> read_own_settings(const json& p,
                                                          const std::filesystem::path& source,
                                                          const std::string& path,
                                                          const ProviderDescriptor& d) {
    for (const auto& [field, ignored] : p.items()) {
        const bool own = std::any_of(d.settings.begin(), d.settings.end(),
                                     [&f = field](const SettingSpec& s) { return s.name == f; });
        if (!is_common(field) && !own) {
            bad(source, path + "." + field, "is only used by kind " + kinds_taking(field),
                "remove it from this provider");
        }
    }
    return d.parse_settings == nullptr ? nullptr : d.parse_settings(SettingsInput(p, path, source));
}

CapabilityOverrides read_overrides(const json& p, const std::filesystem::path& source,
                                   const std::string& path) {
    CapabilityOverrides out;
    if (!p.contains("capabilities")) {
        return out;
    }
    const json& caps = p.at("capabilities");
    const std::string cpath = path + ".capabilities";
    if (!caps.is_object()) {
        bad(source, cpath, "must be an object");
    }
    for (const auto& [field, ignored] : caps.items()) {
        if (field != "idempotency_keys" && field != "lookup" && field != "list") {
            bad(source, cpath + "." + field,
                "is not a known capability" +
                    did_you_mean(field, {"idempotency_keys", "lookup", "list"}),
                "known: idempotency_keys, lookup, list (true or false)");
        }
    }
    out.idempotency_keys = bool_field(caps, source, cpath, "idempotency_keys");
    out.lookup = bool_field(caps, source, cpath, "lookup");
    out.list = bool_field(caps, source, cpath, "list");
    return out;
}

ProviderConfig parse_provider(const std::string& name, const json& p,
                              const std::filesystem::path& source,
                              const char* (*environment)(const char*), ApiKeys keys) {
    static const std::regex k_name("^[a-z0-9_-]{1,32}$");
    const std::string path = "providers." + name;
    if (!std::regex_match(name, k_name)) {
        bad(source, path, "a provider name is 1 to 32 of a-z, 0-9, '_', '-'");
    }
    if (!p.is_object()) {
        bad(source, path, "must be an object");
    }
    check_members(p, source, path);
    const ProviderDescriptor& d = read_kind(p, source, path);
    ProviderConfig c;
    c.name = name;
    c.kind = std::string(d.kind);
    c.base_url = read_base_url(p, source, path);
    c.credentials = read_credentials(p, source, path, environment, keys, d);
    read_timings(p, source, path, c);
    c.settings = read_own_settings(p, source, path, d);
    c.overrides = read_overrides(p, source, path);
    c.dashboard_url = read_dashboard_url(p, source, path);
    c.webhook_secret_envs = read_webhook_secret_envs(p, source, path);
    c.webhook_url = read_webhook_url(p, source, path);
    if (!c.webhook_secret_envs.empty() && d.webhook_url_signed && c.webhook_url.empty()) {
        bad(source, path + ".webhook_url",
            "is required with webhook_secret_env for kind " + std::string(d.kind) +
                ": its notifications are signed over the notification URL",
            "give the notification URL exactly as registered in the provider's dashboard, "
            "e.g. \"webhook_url\": \"https://payments.example.com/v1/providers/" +
                c.name + "/webhooks\"");
    }
    if (!c.webhook_secret_envs.empty() && d.webhook_verifier == nullptr) {
        bad(source, path + ".webhook_secret_env",
            "kind " + std::string(d.kind) + " has no webhook verifier in this build",
            "leave it out; webhooks are read for: " + kinds_where([](const ProviderDescriptor& k) {
                return k.webhook_verifier != nullptr;
            }));
    }
    return c;
}

} // namespace

Config parse_config(std::string_view text, const std::filesystem::path& source,
                    const char* (*environment)(const char*), ApiKeys keys) {
    if (environment == nullptr) {
        environment = [](const char* name) -> const char* { return std::getenv(name); };
    }
    const json root = parse_root(text, source);
    Config config;
    config.source = source;
    for (const auto& [name, p] : root.at("providers").items()) {
        config.providers.emplace(name, parse_provider(name, p, source, environment, keys));
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

Capabilities configured_capabilities(const ProviderConfig& config, const ApiCapabilities& api) {
    Capabilities caps;
    caps.honours_idempotency_keys = config.overrides.idempotency_keys.value_or(true);
    caps.key_retention = config.key_retention;
    caps.max_key_length = api.max_key_length;
    caps.lookup_by_operation_id = api.lookup && config.overrides.lookup.value_or(true);
    caps.lookup_staleness = config.settle_delay;
    caps.refund_lookup = api.refund_lookup && config.overrides.lookup.value_or(true);
    caps.refund_lookup_staleness = config.settle_delay;
    caps.notification_wait = config.notification_wait.value_or(api.notification_wait);
    caps.list_transactions = api.list && config.overrides.list.value_or(true);
    caps.list_refunds = api.list_refunds && caps.list_transactions;
    caps.manual_capture = api.manual_capture;
    caps.multiple_captures = api.multiple_captures;
    caps.authorization_validity = api.authorization_validity;
    caps.capture_lookup = api.capture_lookup && config.overrides.lookup.value_or(true);
    caps.worst_case_call = worst_case_call(config);
    return caps;
}

} // namespace payrecon::providers
