#include "net/resolve.hpp"

#include <algorithm>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace payrecon::net {

tl::expected<std::vector<IpAddress>, std::string> system_resolve(const std::string& host) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) {
        return tl::unexpected(std::string(::gai_strerror(rc)));
    }
    std::vector<IpAddress> out;
    for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
        IpAddress ip;
        if (ai->ai_family == AF_INET) {
            std::memcpy(ip.bytes.data(),
                        &reinterpret_cast<const sockaddr_in*>(ai->ai_addr)->sin_addr, 4);
        } else if (ai->ai_family == AF_INET6) {
            ip.v6 = true;
            std::memcpy(ip.bytes.data(),
                        &reinterpret_cast<const sockaddr_in6*>(ai->ai_addr)->sin6_addr, 16);
        } else {
            continue;
        }
        if (std::none_of(out.begin(), out.end(), [&](const IpAddress& seen) {
                return seen.v6 == ip.v6 && seen.bytes == ip.bytes;
            })) {
            out.push_back(ip);
        }
    }
    ::freeaddrinfo(found);
    return out;
}

} // namespace payrecon::net
