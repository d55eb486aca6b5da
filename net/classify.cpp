#include "net/classify.hpp"

#include <algorithm>
#include <array>

namespace payrecon::net {

namespace {

// CURLcodes that libcurl returns before a connection to the server exists: 1 unsupported
// protocol, 2 failed init, 3 malformed URL, 5 could not resolve proxy, 6 could not resolve host,
// 7 could not connect. Numbers rather than CURLE_* names keep this file free of curl headers;
// transport.cpp checks them against curl.h with static_asserts.
constexpr std::array k_never_connected_codes{1, 2, 3, 5, 6, 7};

// CURLcodes that may come from before or after the request left: 28 operation timed out,
// 35 TLS connect error, 60 peer certificate could not be verified.
constexpr std::array k_handshake_codes{28, 35, 60};

bool contains(const auto& codes, int code) {
    return std::find(codes.begin(), codes.end(), code) != codes.end();
}

} // namespace

std::string_view to_string(SendClass cls) noexcept {
    switch (cls) {
    case SendClass::not_sent:
        return "not_sent";
    case SendClass::unknown:
        return "unknown";
    case SendClass::response:
        return "response";
    }
    return "unknown";
}

SendClass classify(const CurlObservation& observation) noexcept {
    const bool something_left = observation.request_bytes > 0;
    if (observation.curl_code == 0) {
        return observation.response_received ? SendClass::response : SendClass::unknown;
    }
    if (something_left || observation.response_received) {
        return SendClass::unknown;
    }
    if (contains(k_never_connected_codes, observation.curl_code)) {
        return SendClass::not_sent;
    }
    if (contains(k_handshake_codes, observation.curl_code)) {
        // A completed TLS handshake counts even on a URL believed to be http: when in doubt, the
        // request may have left.
        const bool handshake_done =
            observation.tls_completed || (!observation.uses_tls && observation.connected);
        return handshake_done ? SendClass::unknown : SendClass::not_sent;
    }
    return SendClass::unknown;
}

std::string describe_curl_code(int curl_code) {
    // Numbers rather than CURLE_* names, as above; transport.cpp checks the ones it relies on.
    struct Named {
        int code;
        const char* words;
    };
    static constexpr std::array<Named, 24> k_words{{
        {1, "unsupported protocol in the URL"},
        {2, "libcurl failed to initialise"},
        {3, "malformed URL"},
        {5, "could not resolve proxy"},
        {6, "could not resolve host"},
        {7, "could not connect"},
        {8, "unreadable answer from the server"},
        {16, "HTTP/2 framing error"},
        {18, "the response was cut short"},
        {23, "the response was refused while being written (too large)"},
        {25, "failed to send the request"},
        {26, "failed to read the request body"},
        {27, "out of memory"},
        {28, "timed out"},
        {35, "TLS handshake failed"},
        {42, "aborted by a callback (the claim's lease or the address check)"},
        {47, "too many redirects"},
        {52, "the server closed the connection without answering"},
        {55, "connection lost while sending the request"},
        {56, "connection lost while receiving the response"},
        {58, "problem with the local TLS client certificate"},
        {60, "the server's TLS certificate could not be verified"},
        {63, "the response was larger than allowed"},
        {92, "HTTP/2 stream error"},
    }};
    if (curl_code == 0) {
        return {};
    }
    for (const Named& n : k_words) {
        if (n.code == curl_code) {
            return n.words;
        }
    }
    return "libcurl error " + std::to_string(curl_code);
}

} // namespace payrecon::net
