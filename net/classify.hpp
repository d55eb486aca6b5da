#pragma once
// The outcome classifier of the HTTP transport (DESIGN section 5): from what libcurl observed about
// one call, decide whether the provider definitely did not receive the request (`not_sent`, safe to
// send again), whether it may have (`unknown`, recorded durably and never re-sent blindly), or
// whether a complete response arrived (`response`, for the adapter to interpret).
//
// Pure: no I/O, no libcurl types; the CURLcode is carried as an int.

#include <string>
#include <string_view>

namespace payrecon::net {

enum class SendClass {
    not_sent, // the provider cannot have received the request
    unknown,  // it may have; the outcome is not known
    response, // a complete response arrived; the adapter decides what it means
};

std::string_view to_string(SendClass cls) noexcept;

// What libcurl reported for one transfer.
struct CurlObservation {
    int curl_code = 0;      // the CURLcode of curl_easy_perform
    long request_bytes = 0; // request bytes handed to the socket (CURLINFO_REQUEST_SIZE, upload)
    bool uses_tls = false;  // the URL is https: the request can only leave after the handshake
    bool connected = false; // the TCP connect completed (or an open connection was reused)
    bool tls_completed = false;     // the TLS handshake completed
    bool response_received = false; // a response status line arrived (CURLINFO_RESPONSE_CODE != 0)
};

// The class of one call, by DESIGN section 5:
// - CURLcode 0 with a status line: `response`;
// - CURLcode 1, 2, 3, 5, 6, 7 (unsupported protocol, init failure, bad URL, could not resolve,
//   could not connect): `not_sent`;
// - CURLcode 28, 35, 60 (timeout, TLS handshake failure, peer certificate rejected): `not_sent`
//   only if no request byte was written and the handshake that precedes the request did not
//   complete (TCP connect for http, TLS for https); otherwise `unknown`;
// - anything else (28 after sending, 52, 55, 56, 18, 16, 92, 23, 63, ...): `unknown`.
// An observation that contradicts itself (a "could not connect" code with request bytes written
// or a status line received, CURLcode 0 without a status line) is `unknown`: the classifier
// never concludes `not_sent` from evidence that something was sent.
SendClass classify(const CurlObservation& observation) noexcept;

// libcurl's failure in words an operator reads in a log line: 6 "could not resolve host", 7
// "could not connect", 28 "timed out", 56 "connection lost while receiving the response", ...;
// "libcurl error N" for a code this table does not name (the call's detail keeps libcurl's own
// message). Empty for 0.
std::string describe_curl_code(int curl_code);

} // namespace payrecon::net
