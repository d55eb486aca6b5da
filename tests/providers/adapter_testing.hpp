#pragma once
// Shared by the adapter and wire tests: recorded fixtures, the providers' contracts (the facts of
// their OpenAPI documents the tests check), and an injected send function that records every
// request and replays canned results.

#include "net/transport.hpp"
#include "providers/config.hpp"
#include "providers/provider.hpp"

#include <catch2/catch.hpp>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace payrecon::testing {

// The order every adapter and wire test starts from, written once: a test changes only what its
// provider or its case needs (the payment method is each provider's own).
inline const std::string k_sample_operation_id = "pr_0123456789abcdef0123456789abcdef";

inline providers::PaymentOrder sample_order(std::string payment_method) {
    providers::PaymentOrder o;
    o.operation_id = k_sample_operation_id;
    o.payment_id = "3aabbe24-9c9c-40ea-819f-7766897ccdda";
    o.merchant_reference = "order-1001";
    o.amount = Money{4999, "EUR"};
    o.payment_method = std::move(payment_method);
    return o;
}

// The refund every refund wire and adapter test starts from: 7.00 EUR of the payment the provider
// knows as `payment_reference`, under its own operation ID.
inline const std::string k_sample_refund_operation_id = "pr_01a24d44082e74c7aad6770393d3d29c";

inline providers::RefundOrder sample_refund_order(std::string payment_reference) {
    providers::RefundOrder o;
    o.operation_id = k_sample_refund_operation_id;
    o.refund_id = "01a24d44-082e-74c7-aad6-770393d3d29c";
    o.payment_id = "3aabbe24-9c9c-40ea-819f-7766897ccdda";
    o.payment_reference = std::move(payment_reference);
    o.merchant_reference = "RF-7";
    o.amount = Money{700, "EUR"};
    o.reason = "requested_by_customer";
    return o;
}

// A provider entry as the tests configure one by hand: named after its kind, a settle delay of 90 s
// and the common key retention; a test sets what its case needs on top (a kind's own settings).
inline providers::ProviderConfig sample_config(const std::string& kind, std::string base_url,
                                               providers::Credentials credentials) {
    providers::ProviderConfig c;
    c.name = kind;
    c.kind = kind;
    c.base_url = std::move(base_url);
    c.credentials = std::move(credentials);
    c.settle_delay = std::chrono::seconds(90);
    c.key_retention = std::chrono::hours(24);
    return c;
}

inline std::string read_file(const std::string& path) {
    std::ifstream in(path);
    INFO("reading " << path);
    REQUIRE(in);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// tests/providers/fixtures/<provider>/<name>
inline std::string fixture(const std::string& provider, const std::string& name) {
    return read_file(std::string(PAYRECON_SOURCE_DIR) + "/tests/providers/fixtures/" + provider +
                     "/" + name);
}

// What a provider's published OpenAPI document says about the calls its adapter makes:
// tests/providers/contracts/<provider>.json, the document cut down to the facts the wire tests
// check, each at the same JSON pointer as in the published document (written by scripts/contracts
// from <provider>.select.json). Read facts with at(), which fails the test on a fact the contract
// lacks. Parsed once per provider.
inline const nlohmann::json& provider_contract(const std::string& provider) {
    static std::map<std::string, nlohmann::json> k_cache;
    const auto it = k_cache.find(provider);
    if (it != k_cache.end()) {
        return it->second;
    }
    const std::string path =
        std::string(PAYRECON_SOURCE_DIR) + "/tests/providers/contracts/" + provider + ".json";
    return k_cache.emplace(provider, nlohmann::json::parse(read_file(path))).first->second;
}

// The fields a provider's contract requires (`required`: the schema's JSON array of names) that a
// request of ours lacks (`sent`: the top-level fields or form parameters it carries), in the
// contract's order.
inline std::vector<std::string> missing_required(const nlohmann::json& required,
                                                 const std::set<std::string>& sent) {
    std::vector<std::string> missing;
    for (const auto& name : required) {
        if (sent.count(name.get<std::string>()) == 0) {
            missing.push_back(name.get<std::string>());
        }
    }
    return missing;
}

// The required-field contract check (docs/adding-a-provider.md section 8): `sent` carries every
// field `required` names, with no exception -- and the check is no formality: with any one
// required field taken out of `sent`, it names exactly that field.
inline void check_required_fields_sent(const nlohmann::json& required,
                                       const std::set<std::string>& sent) {
    REQUIRE(required.is_array());
    REQUIRE_FALSE(required.empty());
    CHECK(missing_required(required, sent) == std::vector<std::string>{});
    for (const auto& name : required) {
        std::set<std::string> dropped = sent;
        dropped.erase(name.get<std::string>());
        INFO("dropping " << name);
        CHECK(missing_required(required, dropped) ==
              std::vector<std::string>{name.get<std::string>()});
    }
}

// A form body's fields, name (still percent-encoded) to value.
inline std::map<std::string, std::string> form_fields(const std::string& body) {
    std::map<std::string, std::string> out;
    std::stringstream s(body);
    for (std::string pair; std::getline(s, pair, '&');) {
        const auto eq = pair.find('=');
        out[pair.substr(0, eq)] = eq == std::string::npos ? "" : pair.substr(eq + 1);
    }
    return out;
}

// The value of header `name` in `request`, or "(absent)".
inline std::string header(const net::HttpRequest& request, const std::string& name) {
    for (const auto& [k, v] : request.headers) {
        if (k == name) {
            return v;
        }
    }
    return "(absent)";
}

// Records every request sent and answers each with the next canned result.
struct Recorder {
    std::vector<net::HttpRequest> sent;
    std::vector<net::HttpResult> replies;
    std::function<net::HttpResult(const net::HttpRequest&)> fn() {
        return [this](const net::HttpRequest& r) {
            sent.push_back(r);
            REQUIRE(!replies.empty());
            net::HttpResult out = replies.front();
            replies.erase(replies.begin());
            return out;
        };
    }
};

// A complete response with `status` and `body`.
inline net::HttpResult response(int status, std::string body) {
    net::HttpResult r;
    r.cls = net::SendClass::response;
    r.http_status = status;
    r.body = std::move(body);
    return r;
}

// A transport failure of class `cls` with libcurl's `curl_code`.
inline net::HttpResult failure(net::SendClass cls, int curl_code, bool truncated = false) {
    net::HttpResult r;
    r.cls = cls;
    r.curl_code = curl_code;
    r.truncated = truncated;
    r.error = "simulated";
    return r;
}

} // namespace payrecon::testing
