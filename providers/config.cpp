#include "providers/config.hpp"

#include "core/errors.hpp"
#include "core/external_json.hpp"
#include "core/nearest.hpp"
#include "providers/registry.hpp"

#include <algorithm>
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

// The members every provider entry may have, whatever its kind.
const std::vector<std::string_view>& common_fields() {
    static const std::vector<std::string_view> k_fields = {"kind",
                                                           "base_url",
                                                           "api_key_env",
                                                           "credentials",
                                                           "client_id_env",
                                                           "client_secret_env",
                                                           "connect_timeout_ms",
                                                           "timeout_ms",
                                                           "settle_delay_s",
                                                           "key_retention_h",
                                                           "amount_tolerance_minor",
                                                           "capabilities",
                                                           "dashboard_url",
                                                           "webhook_secret_env",
                                                           "webhook_url"};
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

// "a, b and c".
std::string and_list(const std::vector<std::string_view>& names) {
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i) {
        out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + std::string(names[i]);
    }
    return out;
}

// What the "is not a known setting" hint lists: the common members, then each kind's own.
std::string known_settings() {
    std::string out = "known: kind, base_url, api_key_env or credentials (or client_id_env and "
                      "client_secret_env), connect_timeout_ms, "
                      "timeout_ms, settle_delay_s, key_retention_h, amount_tolerance_minor, "
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

// How an entry gives credentials of `kind`.
std::string credential_syntax(CredentialKind kind) {
    return kind == CredentialKind::api_key ? "api_key_env"
                                           : "credentials of type " + std::string(to_string(kind));
}

std::string accepted_credentials(const ProviderDescriptor& d) {
    std::string out;
    for (std::size_t i = 0; i < d.credentials.size(); ++i) {
        const bool flat = d.credentials[i] == CredentialKind::oauth2_client_credentials &&
                          !d.oauth2_token_path.empty();
        out += (i == 0                          ? ""
                : i + 1 == d.credentials.size() ? " or "
                                                : ", ") +
               (flat ? "client_id_env and client_secret_env (or " +
                           credential_syntax(d.credentials[i]) + ")"
                     : credential_syntax(d.credentials[i]));
    }
    return out;
}

bool accepts(const ProviderDescriptor& d, CredentialKind kind) {
    return std::find(d.credentials.begin(), d.credentials.end(), kind) != d.credentials.end();
}

const std::regex& env_name_pattern() {
    static const std::regex k_env("^[A-Za-z_][A-Za-z0-9_]*$");
    return k_env;
}

// Reads the credentials of one entry, refusing them by the field that is wrong.
class CredentialsReader {
public:
    CredentialsReader(const json& entry, const std::filesystem::path& source, std::string path,
                      const char* (*environment)(const char*), ApiKeys keys)
        : m_entry(entry), m_source(source), m_path(std::move(path)), m_environment(environment),
          m_keys(keys) {}

    Credentials read(const ProviderDescriptor& d) const {
        const bool has_key = m_entry.contains("api_key_env");
        const bool has_credentials = m_entry.contains("credentials");
        const bool has_flat =
            m_entry.contains("client_id_env") || m_entry.contains("client_secret_env");
        if (has_flat) {
            const std::string field =
                m_entry.contains("client_id_env") ? "client_id_env" : "client_secret_env";
            if (d.oauth2_token_path.empty()) {
                bad(m_source, m_path + "." + field,
                    "is not a setting of kind " + std::string(d.kind) + ": it takes " +
                        accepted_credentials(d),
                    "client_id_env and client_secret_env name OAuth2 client credentials beside "
                    "base_url for " +
                        kinds_where([](const ProviderDescriptor& k) {
                            return !k.oauth2_token_path.empty();
                        }));
            }
            if (has_key || has_credentials) {
                bad(m_source, m_path + "." + field,
                    "is given together with " +
                        std::string(has_key ? "api_key_env" : "credentials"),
                    "give one of them: kind " + std::string(d.kind) + " takes " +
                        accepted_credentials(d));
            }
            const std::string base =
                m_entry.contains("base_url") && m_entry.at("base_url").is_string()
                    ? m_entry.at("base_url").get<std::string>()
                    : std::string();
            std::string trimmed = base;
            while (!trimmed.empty() && trimmed.back() == '/') {
                trimmed.pop_back();
            }
            return oauth2(m_entry, m_path, trimmed + std::string(d.oauth2_token_path));
        }
        if (has_key && has_credentials) {
            bad(m_source, m_path + ".credentials", "is given together with api_key_env",
                "give one of them: kind " + std::string(d.kind) + " takes " +
                    accepted_credentials(d));
        }
        if (!has_credentials && !accepts(d, CredentialKind::api_key)) {
            bad(m_source, m_path + ".credentials",
                "is required for kind " + std::string(d.kind) + ": it takes " +
                    accepted_credentials(d),
                "name the environment variables that hold them, e.g. \"credentials\": "
                "{\"type\": \"" +
                    std::string(to_string(d.credentials.front())) + "\", ...}");
        }
        if (!has_credentials) {
            return api_key();
        }
        const json& c = m_entry.at("credentials");
        const std::string cpath = m_path + ".credentials";
        const CredentialKind kind = type_of(c, cpath, d);
        if (kind == CredentialKind::basic) {
            return basic(c, cpath);
        }
        return oauth2(c, cpath);
    }

private:
    // The credentials' "type", one `d` accepts; refuses members that type does not have.
    CredentialKind type_of(const json& c, const std::string& cpath,
                           const ProviderDescriptor& d) const {
        if (!c.is_object() || !c.contains("type") || !c.at("type").is_string()) {
            bad(m_source, cpath + ".type",
                "is required: the kind of credentials, basic or oauth2_client_credentials",
                "an API key is named with api_key_env instead");
        }
        const std::string type = c.at("type").get<std::string>();
        CredentialKind kind{};
        if (type == to_string(CredentialKind::basic)) {
            kind = CredentialKind::basic;
        } else if (type == to_string(CredentialKind::oauth2_client_credentials)) {
            kind = CredentialKind::oauth2_client_credentials;
        } else {
            bad(m_source, cpath + ".type",
                "'" + type + "' is not a kind of credentials: basic or oauth2_client_credentials",
                "an API key is named with api_key_env instead");
        }
        if (!accepts(d, kind)) {
            bad(m_source, cpath + ".type",
                "kind " + std::string(d.kind) + " takes " + accepted_credentials(d) + ", not " +
                    type,
                "use credentials the provider's API accepts");
        }
        const std::vector<std::string_view> allowed =
            kind == CredentialKind::basic
                ? std::vector<std::string_view>{"type", "user_env", "password_env"}
                : std::vector<std::string_view>{"type", "client_id_env", "client_secret_env",
                                                "token_url"};
        for (const auto& [field, ignored] : c.items()) {
            if (std::find(allowed.begin(), allowed.end(), field) == allowed.end()) {
                const bool names_a_variable =
                    field.size() > 4 && field.substr(field.size() - 4) == "_env";
                bad(m_source, cpath + "." + field,
                    "is not a setting of " + type + " credentials" +
                        (names_a_variable ? "" : " (secrets never go in the file)"),
                    "known: " + and_list(allowed));
            }
        }
        return kind;
    }

    BasicAuth basic(const json& c, const std::string& cpath) const {
        BasicAuth b;
        b.user_env = env_name(c, cpath, "user_env", "the user");
        b.password_env = env_name(c, cpath, "password_env", "the password");
        b.user = secret(b.user_env, cpath + ".user_env", "the user name");
        b.password = secret(b.password_env, cpath + ".password_env", "the password");
        return b;
    }

    // `default_token_url`: the flat form's (base_url + the kind's token path); empty: the
    // credentials object, which names its token_url.
    OAuth2ClientCredentials oauth2(const json& c, const std::string& cpath,
                                   const std::string& default_token_url = {}) const {
        OAuth2ClientCredentials o;
        o.client_id_env = env_name(c, cpath, "client_id_env", "the client ID");
        o.client_secret_env = env_name(c, cpath, "client_secret_env", "the client secret");
        if (default_token_url.empty()) {
            if (!c.contains("token_url") || !c.at("token_url").is_string()) {
                bad(m_source, cpath + ".token_url",
                    "is required: the URL that issues access tokens, e.g. "
                    "https://api-m.paypal.com/v1/oauth2/token");
            }
            o.token_url = c.at("token_url").get<std::string>();
        } else {
            o.token_url = default_token_url;
        }
        if (has_userinfo(o.token_url)) {
            bad(m_source, cpath + ".token_url",
                "carries credentials (user:password@ before the host), which never go in the file",
                "give the bare URL and keep the client credentials in " + o.client_id_env +
                    " and " + o.client_secret_env);
        }
        if (o.token_url.rfind("https://", 0) != 0 && !loopback_host(o.token_url)) {
            bad(m_source, cpath + ".token_url",
                "must be https:// (plain http only for loopback test servers)");
        }
        o.client_id = secret(o.client_id_env, cpath + ".client_id_env", "the client ID");
        o.client_secret =
            secret(o.client_secret_env, cpath + ".client_secret_env", "the client secret");
        return o;
    }

    ApiKey api_key() const {
        if (!m_entry.contains("api_key_env") || !m_entry.at("api_key_env").is_string() ||
            !std::regex_match(m_entry.at("api_key_env").get<std::string>(), env_name_pattern())) {
            bad(m_source, m_path + ".api_key_env",
                "is required: the NAME of the environment variable that holds the API key");
        }
        ApiKey k;
        k.env = m_entry.at("api_key_env").get<std::string>();
        k.value = secret(k.env, m_path + ".api_key_env", "the provider's secret key");
        return k;
    }

    std::string env_name(const json& c, const std::string& cpath, const char* field,
                         const std::string& what) const {
        if (!c.contains(field) || !c.at(field).is_string() ||
            !std::regex_match(c.at(field).get<std::string>(), env_name_pattern())) {
            bad(m_source, cpath + "." + field,
                "is required: the NAME of the environment variable that holds " + what);
        }
        return c.at(field).get<std::string>();
    }

    // The variable's value; empty with ApiKeys::not_read.
    Secret secret(const std::string& env, const std::string& field, const std::string& what) const {
        if (m_keys == ApiKeys::not_read) {
            return Secret();
        }
        const char* value = m_environment(env.c_str());
        if (value == nullptr || *value == '\0') {
            bad(m_source, field,
                "the environment variable " + env +
                    (value == nullptr ? " is not set" : " is set but empty"),
                "export " + env + " with " + what + " (never put it in the file)");
        }
        return Secret(value);
    }

    const json& m_entry;
    const std::filesystem::path& m_source;
    std::string m_path;
    const char* (*m_environment)(const char*);
    ApiKeys m_keys;
};

// The environment variables an entry's credentials name, as far as they can be read, for a hint
// that must not wait for the credentials' own validation: " (STRIPE_API_KEY)".
std::string named_variables(const json& p) {
    std::vector<std::string_view> names;
    const auto add = [&names](const json& obj, const char* key) {
        if (obj.is_object() && obj.contains(key) && obj.at(key).is_string() &&
            std::regex_match(obj.at(key).get_ref<const std::string&>(), env_name_pattern())) {
            names.push_back(obj.at(key).get_ref<const std::string&>());
        }
    };
    add(p, "api_key_env");
    if (p.contains("credentials")) {
        for (const char* key : {"user_env", "password_env", "client_id_env", "client_secret_env"}) {
            add(p.at("credentials"), key);
        }
    }
    return names.empty() ? std::string() : " (" + and_list(names) + ")";
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
    c.credentials = CredentialsReader(p, source, path, environment, keys).read(d);
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
    caps.list_transactions = api.list && config.overrides.list.value_or(true);
    caps.worst_case_call = worst_case_call(config);
    return caps;
}

} // namespace payrecon::providers
