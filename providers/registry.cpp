#include "providers/registry.hpp"

#include "core/errors.hpp"
#include "providers/adyen/adapter.hpp"
#include "providers/adyen/wire.hpp"
#include "providers/http/transport.hpp"
#include "providers/square/adapter.hpp"
#include "providers/square/wire.hpp"
#include "providers/stripe/adapter.hpp"
#include "providers/stripe/wire.hpp"

namespace payrecon::providers {
namespace {

// An adapter that sends through a Transport of its own.
template <typename Adapter>
std::unique_ptr<Provider> over_transport(const ProviderConfig& config) {
    http::TransportOptions options;
    options.timeouts.connect = config.connect_timeout;
    options.timeouts.total = config.timeout;
    auto transport = std::make_shared<http::Transport>(options);
    return std::make_unique<Adapter>(
        config, [transport](const http::HttpRequest& r) { return transport->send(r); });
}

} // namespace

std::unique_ptr<Provider> create_provider(const ProviderConfig& config) {
    if (config.kind == "stripe") {
        return over_transport<stripe::StripeAdapter>(config);
    }
    if (config.kind == "adyen") {
        return over_transport<adyen::AdyenAdapter>(config);
    }
    if (config.kind == "square") {
        return over_transport<square::SquareAdapter>(config);
    }
    throw ConfigError("provider " + config.name + ": no adapter of kind '" + config.kind +
                          "' in this build",
                      "use one of the kinds docs/adding-a-provider.md lists");
}

const CarryLimits& carry_limits_of(std::string_view kind) {
    if (kind == "stripe") {
        return stripe::carry_limits();
    }
    if (kind == "adyen") {
        return adyen::carry_limits();
    }
    if (kind == "square") {
        return square::carry_limits();
    }
    throw ConfigError("no adapter of kind '" + std::string(kind) + "' in this build",
                      "use one of the kinds docs/adding-a-provider.md lists");
}

ProviderCatalog provider_catalog(const Config& config) {
    ProviderCatalog catalog;
    for (const auto& [name, p] : config.providers) {
        catalog.providers.emplace(name, KnownProvider{name, p.kind, carry_limits_of(p.kind)});
    }
    return catalog;
}

} // namespace payrecon::providers
