#include "providers/config_credentials.hpp"

#include "core/errors.hpp"
#include "providers/config_fields.hpp"
#include "providers/registry.hpp"

#include <algorithm>
#include <regex>

namespace payrecon::providers::config_fields {
namespace {

using nlohmann::json;

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

} // namespace

Credentials read_credentials(const json& entry, const std::filesystem::path& source,
                             const std::string& path, const char* (*environment)(const char*),
                             ApiKeys keys, const ProviderDescriptor& d) {
    return CredentialsReader(entry, source, path, environment, keys).read(d);
}

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

} // namespace payrecon::providers::config_fields
