#include "providers/credentials.hpp"

#include "core/encoding.hpp"

namespace payrecon::providers {
namespace {

// base64(user ":" password), as HTTP basic authentication sends it; empty if both are.
Secret encoded_pair(const Secret& user, const Secret& password) {
    if (user.empty() && password.empty()) {
        return Secret();
    }
    return Secret(base64(user.reveal() + ":" + password.reveal()));
}

} // namespace

std::string_view to_string(CredentialKind kind) {
    switch (kind) {
    case CredentialKind::api_key:
        return "api_key";
    case CredentialKind::basic:
        return "basic";
    case CredentialKind::oauth2_client_credentials:
        return "oauth2_client_credentials";
    }
    return "api_key";
}

CredentialKind kind_of(const Credentials& credentials) {
    if (std::holds_alternative<BasicAuth>(credentials)) {
        return CredentialKind::basic;
    }
    if (std::holds_alternative<OAuth2ClientCredentials>(credentials)) {
        return CredentialKind::oauth2_client_credentials;
    }
    return CredentialKind::api_key;
}

std::vector<Secret> secrets_of(const Credentials& credentials) {
    std::vector<Secret> all;
    if (const auto* k = std::get_if<ApiKey>(&credentials)) {
        all = {k->value};
    } else if (const auto* b = std::get_if<BasicAuth>(&credentials)) {
        // The encoded pair too: redaction finds only literal occurrences.
        all = {b->user, b->password, encoded_pair(b->user, b->password)};
    } else if (const auto* o = std::get_if<OAuth2ClientCredentials>(&credentials)) {
        all = {o->client_id, o->client_secret, encoded_pair(o->client_id, o->client_secret)};
    }
    std::vector<Secret> out;
    for (auto& s : all) {
        if (!s.empty()) {
            out.push_back(std::move(s));
        }
    }
    return out;
}

std::vector<std::string> environment_names(const Credentials& credentials) {
    if (const auto* k = std::get_if<ApiKey>(&credentials)) {
        return {k->env};
    }
    if (const auto* b = std::get_if<BasicAuth>(&credentials)) {
        return {b->user_env, b->password_env};
    }
    const auto& o = std::get<OAuth2ClientCredentials>(credentials);
    return {o.client_id_env, o.client_secret_env};
}

std::string describe(const Credentials& credentials) {
    if (const auto* k = std::get_if<ApiKey>(&credentials)) {
        return "the API key in " + k->env;
    }
    if (const auto* b = std::get_if<BasicAuth>(&credentials)) {
        return "the user and password in " + b->user_env + " and " + b->password_env;
    }
    const auto& o = std::get<OAuth2ClientCredentials>(credentials);
    return "the client credentials in " + o.client_id_env + " and " + o.client_secret_env +
           " (token URL " + o.token_url + ")";
}

Secret basic_authorization(const Secret& user, const Secret& password) {
    return Secret("Basic " + encoded_pair(user, password).reveal());
}

} // namespace payrecon::providers
