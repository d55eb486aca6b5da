#include "net/classify.hpp"
#include "net/redact.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace payrecon;
using namespace payrecon::net;

namespace {

struct Seen {
    int code = 0;
    long bytes = 0;
    bool tls = false;
    bool connected = false;
    bool tls_done = false;
    bool status_line = false;
};

CurlObservation observe(const Seen& seen) {
    CurlObservation observation;
    observation.curl_code = seen.code;
    observation.request_bytes = seen.bytes;
    observation.uses_tls = seen.tls;
    observation.connected = seen.connected;
    observation.tls_completed = seen.tls_done;
    observation.response_received = seen.status_line;
    return observation;
}

struct Row {
    const char* what;
    Seen seen;
    SendClass expected;
};

constexpr auto not_sent = SendClass::not_sent;
constexpr auto unknown = SendClass::unknown;
constexpr auto response = SendClass::response;

// Every row of DESIGN section 5, then the edge cases around each.
const std::vector<Row> k_rows = {
    // CURLcode 1,2,3,5,6,7: could not resolve, could not connect.
    {"1 unsupported protocol", {.code = 1}, not_sent},
    {"2 failed init", {.code = 2}, not_sent},
    {"3 malformed URL", {.code = 3}, not_sent},
    {"5 could not resolve proxy", {.code = 5}, not_sent},
    {"6 could not resolve host", {.code = 6}, not_sent},
    {"6 could not resolve host (https)", {.code = 6, .tls = true}, not_sent},
    {"7 connection refused", {.code = 7}, not_sent},
    {"7 connection refused (https)", {.code = 7, .tls = true}, not_sent},
    // 28/35/60 with request_size == 0 and no completed connect/TLS handshake.
    {"28 connect timed out (http)", {.code = 28}, not_sent},
    {"28 connect timed out (https)", {.code = 28, .tls = true}, not_sent},
    {"28 TLS handshake timed out after TCP connect",
     {.code = 28, .tls = true, .connected = true},
     not_sent},
    {"35 TLS handshake failed", {.code = 35, .tls = true, .connected = true}, not_sent},
    {"35 before TCP connect completed", {.code = 35, .tls = true}, not_sent},
    {"60 peer certificate rejected", {.code = 60, .tls = true, .connected = true}, not_sent},
    // Every other error.
    {"28 after sending (http)", {.code = 28, .bytes = 180, .connected = true}, unknown},
    {"28 after sending (https)",
     {.code = 28, .bytes = 180, .tls = true, .connected = true, .tls_done = true},
     unknown},
    {"28 after the status line",
     {.code = 28, .bytes = 180, .connected = true, .status_line = true},
     unknown},
    {"52 got nothing", {.code = 52, .bytes = 180, .connected = true}, unknown},
    {"55 send error", {.code = 55, .connected = true}, unknown},
    {"55 send error after a partial write", {.code = 55, .bytes = 64, .connected = true}, unknown},
    {"56 receive error (reset)", {.code = 56, .bytes = 180, .connected = true}, unknown},
    {"18 partial body",
     {.code = 18, .bytes = 180, .connected = true, .status_line = true},
     unknown},
    {"16 HTTP/2 framing",
     {.code = 16, .bytes = 180, .tls = true, .connected = true, .tls_done = true},
     unknown},
    {"92 HTTP/2 stream reset",
     {.code = 92, .bytes = 180, .tls = true, .connected = true, .tls_done = true},
     unknown},
    // A response.
    {"0 with a status line",
     {.code = 0, .bytes = 180, .connected = true, .status_line = true},
     response},
    {"0 with a status line (https)",
     {.code = 0,
      .bytes = 180,
      .tls = true,
      .connected = true,
      .tls_done = true,
      .status_line = true},
     response},

    // Edge cases: the classifier never concludes not_sent from evidence that something left.
    {"28 on http after TCP connect, nothing written yet", {.code = 28, .connected = true}, unknown},
    {"28 on https after the TLS handshake, nothing written yet",
     {.code = 28, .tls = true, .connected = true, .tls_done = true},
     unknown},
    {"28 with bytes written but no connect recorded", {.code = 28, .bytes = 1}, unknown},
    {"35 after a completed handshake (renegotiation)",
     {.code = 35, .tls = true, .connected = true, .tls_done = true},
     unknown},
    {"35 with request bytes written",
     {.code = 35, .bytes = 10, .tls = true, .connected = true},
     unknown},
    {"60 with a completed handshake",
     {.code = 60, .tls = true, .connected = true, .tls_done = true},
     unknown},
    {"28 on a URL thought http but a TLS handshake completed",
     {.code = 28, .connected = true, .tls_done = true},
     unknown},
    {"7 but request bytes were written (a reused connection retried)",
     {.code = 7, .bytes = 180},
     unknown},
    {"6 but a status line arrived", {.code = 6, .status_line = true}, unknown},
    {"1 but request bytes were written", {.code = 1, .bytes = 1}, unknown},
    {"0 without a status line", {.code = 0, .bytes = 180, .connected = true}, unknown},
    {"52 with no byte written", {.code = 52, .connected = true}, unknown},
    {"56 with no byte written", {.code = 56, .connected = true}, unknown},
    {"23 write error (response cut at the size cap)",
     {.code = 23, .bytes = 180, .connected = true, .status_line = true},
     unknown},
    {"63 response larger than the cap",
     {.code = 63, .bytes = 180, .connected = true, .status_line = true},
     unknown},
    {"42 aborted by callback", {.code = 42, .bytes = 180, .connected = true}, unknown},
    {"26 read error (request body)", {.code = 26, .connected = true}, unknown},
    {"47 too many redirects", {.code = 47, .bytes = 180, .connected = true}, unknown},
    {"4 not built in", {.code = 4}, unknown},
    {"a code libcurl does not have yet", {.code = 1000}, unknown},
    {"a negative code", {.code = -1}, unknown},
};

} // namespace

TEST_CASE("classify: every row of DESIGN section 5 and its edge cases", "[providers][classify]") {
    for (const Row& row : k_rows) {
        INFO(row.what);
        CHECK(classify(observe(row.seen)) == row.expected);
    }
}

TEST_CASE("classify: no CURLcode is not_sent once a request byte was written",
          "[providers][classify]") {
    for (int code = -1; code <= 200; ++code) {
        for (const bool tls : {false, true}) {
            INFO("CURLcode " << code << (tls ? " https" : " http"));
            const auto cls = classify(observe({.code = code, .bytes = 1, .tls = tls}));
            CHECK(cls != SendClass::not_sent);
        }
    }
}

TEST_CASE("classify: only 1,2,3,5,6,7,28,35,60 can be not_sent", "[providers][classify]") {
    const std::vector<int> may_be_not_sent = {1, 2, 3, 5, 6, 7, 28, 35, 60};
    for (int code = -1; code <= 200; ++code) {
        const bool listed = std::find(may_be_not_sent.begin(), may_be_not_sent.end(), code) !=
                            may_be_not_sent.end();
        INFO("CURLcode " << code);
        // The most "not sent"-looking observation: nothing connected, nothing written.
        CHECK((classify(observe({.code = code})) == SendClass::not_sent) == listed);
    }
}

TEST_CASE("classify: a response only with CURLcode 0 and a status line", "[providers][classify]") {
    for (int code = -1; code <= 200; ++code) {
        INFO("CURLcode " << code);
        const auto cls =
            classify(observe({.code = code, .bytes = 100, .connected = true, .status_line = true}));
        CHECK((cls == SendClass::response) == (code == 0));
    }
}

TEST_CASE("classify: names of the classes", "[providers][classify]") {
    CHECK(to_string(SendClass::not_sent) == "not_sent");
    CHECK(to_string(SendClass::unknown) == "unknown");
    CHECK(to_string(SendClass::response) == "response");
}

TEST_CASE("classify: libcurl's failures in words for the worker's log lines",
          "[providers][classify]") {
    CHECK(describe_curl_code(6) == "could not resolve host");
    CHECK(describe_curl_code(7) == "could not connect");
    CHECK(describe_curl_code(28) == "timed out");
    CHECK(describe_curl_code(52) == "the server closed the connection without answering");
    CHECK(describe_curl_code(0).empty());
    CHECK(describe_curl_code(99) == "libcurl error 99");
    // Every code the classifier names has words of its own.
    for (const int code : {1, 2, 3, 5, 6, 7, 28, 35, 60}) {
        INFO(code);
        CHECK(describe_curl_code(code).find("libcurl error") == std::string::npos);
    }
}

TEST_CASE("redact: every occurrence of every secret becomes ***", "[providers][redact]") {
    const std::vector<Secret> secrets = {Secret{"sk_test_4eC39HqLyjWDarjtT1zdp7dc"},
                                         Secret{"whsec_abc123"}};
    CHECK(redact("Bearer sk_test_4eC39HqLyjWDarjtT1zdp7dc and sk_test_4eC39HqLyjWDarjtT1zdp7dc, "
                 "whsec_abc123",
                 secrets) == "Bearer *** and ***, ***");
    CHECK(redact("sk_test_4eC39HqLyjWDarjtT1zdp7dcsk_test_4eC39HqLyjWDarjtT1zdp7dc", secrets) ==
          "******");
    CHECK(redact("sk_test_4eC39HqLyjWDarjtT1zdp7dc", secrets) == "***");
}

TEST_CASE("redact: text without secrets is unchanged", "[providers][redact]") {
    CHECK(redact("Failed to connect to 127.0.0.1 port 9: Connection refused", {}) ==
          "Failed to connect to 127.0.0.1 port 9: Connection refused");
    CHECK(redact("", {Secret{"abc"}}).empty());
    CHECK(redact("no match here", {Secret{"abc"}}) == "no match here");
}

TEST_CASE("redact: an empty secret is ignored, not matched everywhere", "[providers][redact]") {
    CHECK(redact("abc", {Secret{}}) == "abc");
    CHECK(redact("abc", {Secret{}, Secret{"b"}}) == "a***c");
}

TEST_CASE("redact: a secret containing another leaves no fragment", "[providers][redact]") {
    // Listed shortest first on purpose: the longer one must still win.
    const std::vector<Secret> secrets = {Secret{"key_123"}, Secret{"Basic key_123:pw"}};
    CHECK(redact("Authorization: Basic key_123:pw", secrets) == "Authorization: ***");
    CHECK(redact("user key_123 sent Basic key_123:pw", secrets) == "user *** sent ***");
}

TEST_CASE("redact: the secret's characters never survive in the output", "[providers][redact]") {
    const Secret secret{"rk_live_51H8zQ2eZvKYlo2C0123456789"};
    const std::string text = "error: key=" + secret.reveal() + "; retry with " + secret.reveal();
    const std::string out = redact(text, {secret});
    CHECK(out.find(secret.reveal()) == std::string::npos);
    CHECK(out == "error: key=***; retry with ***");
}
