#pragma once
// What the conformance suite (test_conformance.cpp) and the fuzz target over every registered kind
// (tests/fuzz/fuzz_provider_responses.cpp) share: a kind's configuration built from its descriptor
// alone, the order every fixture was recorded for, and the replay of one response body through a
// kind's adapter with the invariants every adapter keeps, whatever the bytes. No Catch2 here: a
// broken invariant is returned, for the suite to report and the fuzz target to abort on.

#include "net/transport.hpp"
#include "providers/config.hpp"
#include "providers/descriptor.hpp"

#include <chrono>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon::conformance {

inline constexpr const char* k_token_path = "/conformance/oauth2/token";
inline constexpr const char* k_access_token = "conformance-access-token-5f0c2a9e7d41b836";

// The environment the conformance configurations name: one variable per credential part.
inline const char* environment(const char* name) {
    static const std::map<std::string, std::string> k_env = {
        {"CONFORMANCE_API_KEY", "conformance_secret_key_7d41b8365f0c2a9e"},
        {"CONFORMANCE_USER", "conformance_user_2a9e7d41"},
        {"CONFORMANCE_PASSWORD", "conformance_password_b8365f0c"},
        {"CONFORMANCE_CLIENT_ID", "conformance_client_id_9e7d41b8"},
        {"CONFORMANCE_CLIENT_SECRET", "conformance_client_secret_365f0c2a"},
    };
    const auto it = k_env.find(name);
    return it == k_env.end() ? nullptr : it->second.c_str();
}

// The entry of a provider configuration file for kind `d` at `base_url`: the first kind of
// credentials it accepts, its own settings with their documented examples, and short timeouts.
inline nlohmann::json config_entry(const providers::ProviderDescriptor& d,
                                   const std::string& base_url) {
    nlohmann::json e = {{"kind", std::string(d.kind)},
                        {"base_url", base_url},
                        {"connect_timeout_ms", 2000},
                        {"timeout_ms", 5000},
                        {"settle_delay_s", 0}};
    switch (d.credentials.empty() ? providers::CredentialKind::api_key : d.credentials.front()) {
    case providers::CredentialKind::api_key:
        e["api_key_env"] = "CONFORMANCE_API_KEY";
        break;
    case providers::CredentialKind::basic:
        e["credentials"] = {{"type", "basic"},
                            {"user_env", "CONFORMANCE_USER"},
                            {"password_env", "CONFORMANCE_PASSWORD"}};
        break;
    case providers::CredentialKind::oauth2_client_credentials:
        e["credentials"] = {{"type", "oauth2_client_credentials"},
                            {"client_id_env", "CONFORMANCE_CLIENT_ID"},
                            {"client_secret_env", "CONFORMANCE_CLIENT_SECRET"},
                            {"token_url", base_url + k_token_path}};
        break;
    }
    for (const auto& s : d.settings) {
        e[std::string(s.name)] = std::string(s.example);
    }
    return e;
}

// The configuration of kind `d` at `base_url`, through parse_config as an operator's file would
// be read. Throws ConfigError if the descriptor's own examples do not parse.
inline providers::ProviderConfig config(const providers::ProviderDescriptor& d,
                                        const std::string& base_url) {
    const nlohmann::json file = {{"providers", {{"conformance", config_entry(d, base_url)}}}};
    return providers::parse_config(file.dump(), "conformance.json", &environment)
        .providers.at("conformance");
}

// Every secret the configuration's requests may carry: its credentials' and the access token.
inline std::vector<std::string> secrets(const providers::ProviderConfig& c) {
    std::vector<std::string> out;
    for (const Secret& s : providers::secrets_of(c.credentials)) {
        out.push_back(s.reveal());
    }
    out.emplace_back(k_access_token);
    return out;
}

// True if `r` asks the configuration's token endpoint for an access token.
inline bool is_token_request(const net::HttpRequest& r, const providers::ProviderConfig& c) {
    const auto* o = std::get_if<providers::OAuth2ClientCredentials>(&c.credentials);
    return o != nullptr && r.url == o->token_url;
}

inline net::HttpResult answer(int status, std::string body) {
    net::HttpResult r;
    r.cls = net::SendClass::response;
    r.http_status = status;
    r.body = std::move(body);
    return r;
}

inline net::HttpResult token_answer() {
    return answer(200, std::string(R"({"access_token":")") + k_access_token +
                           R"(","token_type":"Bearer","expires_in":3600})");
}

// The order every recorded fixture answers: its operation ID, amount and reference.
inline providers::PaymentOrder order() {
    providers::PaymentOrder o;
    o.operation_id = "pr_0123456789abcdef0123456789abcdef";
    o.payment_id = "3aabbe24-9c9c-40ea-819f-7766897ccdda";
    o.merchant_reference = "order-1001";
    o.amount = Money{4999, "EUR"};
    o.payment_method = "pm_conformance_card";
    o.customer = "cus_conformance";
    o.description = "conformance";
    o.created_at = std::chrono::system_clock::time_point(std::chrono::seconds(1796205600));
    return o;
}

// The capture (or, with `kind` void_authorization, the void) every replay and request check asks
// of a kind that authorises (ApiCapabilities::manual_capture): all of the order's amount, under
// its own operation ID, of the charge the provider knows as "pi_3MtwBwLkdIwHu7ix28a3tqPa".
inline providers::AuthorizationOrder
authorization_order(OperationKind kind = OperationKind::capture) {
    providers::AuthorizationOrder o;
    o.kind = kind;
    o.operation_id = kind == OperationKind::capture ? "pr_01a24d5e6f7a7b8c9d0e1f2a3b4c5d6e"
                                                    : "pr_01a24d5f00007b8c9d0e1f2a3b4c5d6f";
    o.operation_row_id = "01a24d5e-6f7a-7b8c-9d0e-1f2a3b4c5d6e";
    o.payment_id = "3aabbe24-9c9c-40ea-819f-7766897ccdda";
    o.payment_operation_id = "pr_0123456789abcdef0123456789abcdef";
    o.payment_reference = "pi_3MtwBwLkdIwHu7ix28a3tqPa";
    o.amount = Money{4999, "EUR"};
    o.authorized_minor = 4999;
    return o;
}

inline providers::TimeWindow window() {
    const auto from = std::chrono::system_clock::time_point(std::chrono::seconds(1796169600));
    return {from, from + std::chrono::hours(24)};
}

// Answers every request to the API with `status` and `body` (and a token request with a token),
// through a submit, a lookup, a list and a list of refunds of kind `d` -- and, for a kind that
// authorises, a capture, a void and their lookups -- and checks what every adapter promises:
// nothing throws; the call record keeps the status; `succeeded` only from a 2xx, with the
// provider's reference; `not_sent` from a response only for a 429; `rejected` with the provider's
// code; a lookup `found` or `not_found` only from a 200, and a payment found only with our
// operation ID; a list page (of charges or refunds) ok only from a 200. Returns the first broken
// invariant, nullopt if none is.
inline std::optional<std::string> replay(const providers::ProviderDescriptor& d,
                                         const providers::ProviderConfig& c, std::string_view body,
                                         int status) {
    using namespace providers;
    const std::string at = std::string(d.kind) + " at HTTP " + std::to_string(status) + ": ";
    const std::string b(body);
    auto send = [&c, b, status](const net::HttpRequest& r) {
        return is_token_request(r, c) ? token_answer() : answer(status, b);
    };
    try {
        const auto provider = d.create(c, send);
        const PaymentOrder o = order();
        const SubmitResult s = provider->submit(o);
        if (s.call.http_status != status) {
            return at + "submit: the call record lost the HTTP status";
        }
        if (s.outcome == Outcome::succeeded &&
            (status < 200 || status > 299 || !s.provider_reference ||
             s.provider_reference->empty())) {
            return at + "submit: succeeded without a 2xx and the provider's reference";
        }
        if (s.outcome == Outcome::not_sent && status != 429) {
            return at + "submit: not_sent from a response that is not a 429";
        }
        if (s.outcome == Outcome::rejected && (!s.rejection || s.rejection->code.empty())) {
            return at + "submit: rejected without the provider's code";
        }
        const LookupResult l = provider->lookup(o);
        if (l.status != LookupResult::Status::failed && status != 200) {
            return at + "lookup: an answer from a response that is not a 200";
        }
        if (l.status == LookupResult::Status::found &&
            (!l.payment || l.payment->operation_id != o.operation_id)) {
            return at + "lookup: found a payment that is not ours";
        }
        const ListPage p = provider->list(window(), std::nullopt);
        if (p.ok && status != 200) {
            return at + "list: a page from a response that is not a 200";
        }
        const ListPage r = provider->list_refunds(window(), std::nullopt);
        if (r.ok && status != 200) {
            return at + "list_refunds: a page from a response that is not a 200";
        }
        if (d.api.manual_capture) {
            for (const auto kind : {OperationKind::capture, OperationKind::void_authorization}) {
                const AuthorizationOrder a = authorization_order(kind);
                const std::string what(to_string(kind));
                const SubmitResult m = kind == OperationKind::capture
                                           ? provider->capture(a)
                                           : provider->void_authorization(a);
                if (m.call.http_status != status) {
                    return at + what + ": the call record lost the HTTP status";
                }
                if (m.outcome == Outcome::succeeded &&
                    (status < 200 || status > 299 || !m.provider_reference ||
                     m.provider_reference->empty())) {
                    return at + what + ": succeeded without a 2xx and the provider's reference";
                }
                if (m.outcome == Outcome::not_sent && status != 429) {
                    return at + what + ": not_sent from a response that is not a 429";
                }
                if (m.outcome == Outcome::rejected && (!m.rejection || m.rejection->code.empty())) {
                    return at + what + ": rejected without the provider's code";
                }
                const LookupResult found = provider->lookup_capture(a);
                if (found.status != LookupResult::Status::failed &&
                    (status != 200 || !d.api.capture_lookup)) {
                    return at + what + " lookup: an answer from a response that is not a 200";
                }
                if (found.status == LookupResult::Status::found && !found.payment) {
                    return at + what + " lookup: found nothing";
                }
            }
        }
    } catch (const std::exception& e) {
        return at + "threw: " + e.what();
    }
    return std::nullopt;
}

// The statuses a replay answers with: those adapters tell apart, and neighbours they must not
// confuse with them.
inline const std::vector<int>& replay_statuses() {
    static const std::vector<int> k_statuses = {200, 201, 204, 299, 300, 400, 401, 402,
                                                403, 404, 409, 422, 429, 500, 502, 503};
    return k_statuses;
}

} // namespace payrecon::conformance
