#pragma once
// How payrecon authenticates to a provider: one of three kinds of credentials, each read from
// environment variables the provider configuration names (never from the file, never from argv),
// and each a Secret that prints "***". A provider's descriptor says which kinds it accepts.
//
//   api_key                    "api_key_env": "STRIPE_API_KEY" -- a secret key or bearer token,
//                              sent as the provider wants it (Authorization: Bearer, X-API-Key)
//   basic                      "credentials": {"type": "basic", "user_env": "...",
//                              "password_env": "..."} -- HTTP basic authentication
//   oauth2_client_credentials  "credentials": {"type": "oauth2_client_credentials",
//                              "client_id_env": "...", "client_secret_env": "...",
//                              "token_url": "https://.../v1/oauth2/token"} -- an access token
//                              from the token URL (RFC 6749 section 4.4), cached and refreshed
//                              (providers/oauth2.hpp)

#include "core/secret.hpp"

#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace payrecon::providers {

enum class CredentialKind { api_key, basic, oauth2_client_credentials };

// "api_key", "basic", "oauth2_client_credentials": the names the configuration uses.
std::string_view to_string(CredentialKind kind);

// A secret key or bearer token in one environment variable.
struct ApiKey {
    std::string env; // the variable's name ("STRIPE_API_KEY")
    Secret value;    // empty when the configuration was loaded without reading credentials
};

// HTTP basic authentication: user and password, each in an environment variable.
struct BasicAuth {
    std::string user_env;
    std::string password_env;
    Secret user;
    Secret password;
};

// OAuth2 client credentials: the client's ID and secret, each in an environment variable, and the
// token endpoint that exchanges them for an access token.
struct OAuth2ClientCredentials {
    std::string client_id_env;
    std::string client_secret_env;
    std::string token_url; // https:// (plain http only for loopback test servers)
    Secret client_id;
    Secret client_secret;
};

using Credentials = std::variant<ApiKey, BasicAuth, OAuth2ClientCredentials>;

CredentialKind kind_of(const Credentials& credentials);

// Every secret value the credentials hold (the non-empty ones), for redaction.
std::vector<Secret> secrets_of(const Credentials& credentials);

// The environment variables they are read from, in the configuration's order.
std::vector<std::string> environment_names(const Credentials& credentials);

// What an operator checks when the provider refuses them: "the API key in STRIPE_API_KEY", "the
// user and password in PSP_USER and PSP_PASSWORD", "the client credentials in PAYPAL_CLIENT_ID and
// PAYPAL_CLIENT_SECRET (token URL https://...)". Never a secret.
std::string describe(const Credentials& credentials);

// The value of an Authorization header for HTTP basic authentication: "Basic " + base64(user ":"
// password).
Secret basic_authorization(const Secret& user, const Secret& password);

} // namespace payrecon::providers
