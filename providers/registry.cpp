#include "providers/registry.hpp"

#include "core/errors.hpp"
#include "providers/http/transport.hpp"
#include "providers/square/adapter.hpp"
#include "providers/stripe/adapter.hpp"

namespace payrecon::providers {

std::unique_ptr<Provider> create_provider(const ProviderConfig& config) {
    http::TransportOptions options;
    options.timeouts.connect = config.connect_timeout;
    options.timeouts.total = config.timeout;
    if (config.kind == "stripe") {
        auto transport = std::make_shared<http::Transport>(options);
        return std::make_unique<stripe::StripeAdapter>(
            config, [transport](const http::HttpRequest& r) { return transport->send(r); });
    }
    if (config.kind == "square") {
        auto transport = std::make_shared<http::Transport>(options);
        return std::make_unique<square::SquareAdapter>(
            config, [transport](const http::HttpRequest& r) { return transport->send(r); });
    }
    throw ConfigError("provider " + config.name + ": no adapter of kind '" + config.kind +
                          "' in this build",
                      "use one of the kinds docs/adding-a-provider.md lists");
}

} // namespace payrecon::providers
