#pragma once
// The system's resolver (getaddrinfo) as a core Resolver: what a webhook endpoint's host name
// resolves to when it is registered (net/endpoint_address's check_endpoint).

#include "net/endpoint_address.hpp"

namespace payrecon::net {

// Every address `host` resolves to (IPv4 and IPv6, each once), or getaddrinfo's message.
tl::expected<std::vector<IpAddress>, std::string> system_resolve(const std::string& host);

} // namespace payrecon::net
