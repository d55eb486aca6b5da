#include "providers/registry.hpp"

#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "net/transport.hpp"
#include "providers/adyen/adapter.hpp"
#include "providers/checkout/adapter.hpp"
#include "providers/paypal/adapter.hpp"
#include "providers/square/adapter.hpp"
#include "providers/stripe/adapter.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace payrecon::providers {
namespace {

// The registry: one line per kind, in the order messages list them. A kind is its folder,
// providers/<kind>/, and the descriptor() its adapter.hpp declares.
std::vector<const ProviderDescriptor*> builtin() {
    // One line per kind: clang-format 14 would pack five or more into columns.
    // clang-format off
    return {
        &stripe::descriptor(),
        &adyen::descriptor(),
        &square::descriptor(),
        &checkout::descriptor(),
        &paypal::descriptor(),
    };
    // clang-format on
}

struct Registry {
    std::vector<const ProviderDescriptor*> descriptors = builtin();
    std::vector<std::string_view> kinds;

    Registry() { refresh(); }
    void refresh() {
        kinds.clear();
        for (const auto* d : descriptors) {
            kinds.push_back(d->kind);
        }
    }
};

Registry& registry() {
    static Registry k_registry;
    return k_registry;
}

} // namespace

const std::vector<const ProviderDescriptor*>& registered() {
    return registry().descriptors;
}

const std::vector<std::string_view>& known_kinds() {
    return registry().kinds;
}

const ProviderDescriptor* find_descriptor(std::string_view kind) {
    for (const auto* d : registered()) {
        if (d->kind == kind) {
            return d;
        }
    }
    return nullptr;
}

const ProviderDescriptor& descriptor_of(std::string_view kind) {
    if (const auto* d = find_descriptor(kind)) {
        return *d;
    }
    throw ConfigError("no adapter of kind '" + std::string(kind) + "' in this build",
                      "use one of the kinds this build has: " + kinds_where());
}

std::string kinds_where(const std::function<bool(const ProviderDescriptor&)>& which) {
    std::string out;
    for (const auto* d : registered()) {
        if (!which || which(*d)) {
            out += (out.empty() ? "" : ", ") + std::string(d->kind);
        }
    }
    return out.empty() ? "none" : out;
}

std::unique_ptr<Provider> create_provider(const ProviderConfig& config) {
    const ProviderDescriptor* d = find_descriptor(config.kind);
    if (d == nullptr) {
        throw ConfigError("provider " + config.name + ": no adapter of kind '" + config.kind +
                              "' in this build",
                          "use one of the kinds this build has: " + kinds_where());
    }
    net::TransportOptions options;
    options.timeouts.connect = config.connect_timeout;
    options.timeouts.total = config.timeout;
    auto transport = std::make_shared<net::Transport>(options);
    return d->create(config, [transport](const net::HttpRequest& r) { return transport->send(r); });
}

const CarryLimits& carry_limits_of(std::string_view kind) {
    return descriptor_of(kind).carry_limits();
}

ProviderCatalog provider_catalog(const Config& config) {
    ProviderCatalog catalog;
    for (const auto& [name, p] : config.providers) {
        const ApiCapabilities& api = descriptor_of(p.kind).api;
        KnownProvider known{name, p.kind, carry_limits_of(p.kind)};
        known.manual_capture = api.manual_capture;
        known.multiple_captures = api.multiple_captures;
        known.authorization_validity = api.authorization_validity;
        catalog.providers.emplace(name, std::move(known));
    }
    return catalog;
}

std::string dashboard_url(const ProviderConfig& config) {
    if (!config.dashboard_url.empty()) {
        return config.dashboard_url;
    }
    const ProviderDescriptor* d = find_descriptor(config.kind);
    if (d == nullptr || config.base_url.rfind("https://", 0) != 0) {
        return {}; // a loopback test server has no dashboard
    }
    return std::string(d->dashboard_url);
}

std::optional<std::string> dashboard_link(std::string_view url_template,
                                          std::string_view reference) {
    constexpr std::string_view k_placeholder = "{reference}";
    const auto at = url_template.find(k_placeholder);
    if (at == std::string_view::npos) {
        return std::nullopt;
    }
    return std::string(url_template.substr(0, at)) + percent_encode(reference) +
           std::string(url_template.substr(at + k_placeholder.size()));
}

std::map<std::string, std::shared_ptr<const WebhookVerifier>>
webhook_verifiers(const Config& config, const char* (*environment)(const char*)) {
    std::map<std::string, std::shared_ptr<const WebhookVerifier>> out;
    for (const auto& [name, p] : config.providers) {
        if (p.webhook_secret_envs.empty()) {
            continue;
        }
        std::vector<Secret> secrets;
        for (const auto& variable : p.webhook_secret_envs) {
            const char* value = environment != nullptr ? environment(variable.c_str())
                                                       : std::getenv(variable.c_str());
            if (value == nullptr || *value == '\0') {
                throw ConfigError(config.source.string() + ": providers." + name +
                                      ".webhook_secret_env: " + variable +
                                      (value == nullptr ? " is not set" : " is set but empty"),
                                  "export " + variable +
                                      " with the webhook signing secret from the provider's "
                                      "dashboard before starting serve");
            }
            secrets.emplace_back(value);
        }
        out.emplace(name, descriptor_of(p.kind).webhook_verifier(std::move(secrets), p));
    }
    return out;
}

namespace test_hook {

ScopedRegistration::ScopedRegistration(const ProviderDescriptor& descriptor)
    : m_descriptor(&descriptor) {
    if (find_descriptor(descriptor.kind) != nullptr) {
        throw std::invalid_argument("kind " + std::string(descriptor.kind) +
                                    " is registered already");
    }
    registry().descriptors.push_back(m_descriptor);
    registry().refresh();
}

ScopedRegistration::~ScopedRegistration() {
    auto& list = registry().descriptors;
    list.erase(std::remove(list.begin(), list.end(), m_descriptor), list.end());
    registry().refresh();
}

} // namespace test_hook

} // namespace payrecon::providers
