// The real transport against a loopback server that misbehaves on purpose. Each test asserts on
// what the server saw (connections accepted, requests received) as well as on the class.

#include "net/transport.hpp"
#include "providers/call_record.hpp"
#include "tests/providers/loopback_server.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <string>

using namespace payrecon;
using namespace payrecon::net;
using payrecon::test::FullBacklogListener;
using payrecon::test::http_response;
using payrecon::test::LoopbackConnection;
using payrecon::test::LoopbackServer;

namespace {

using namespace std::chrono_literals;

constexpr std::size_t k_test_cap = 1024;

// For a server that answers: timeouts far beyond any answer, so a loaded machine cannot turn an
// answer into a timeout (the 400 ms these tests once had ran out on a busy 2-core machine).
Transport fast_transport(std::size_t cap = 1024 * 1024) {
    TransportOptions options;
    options.timeouts.connect = 5s;
    options.timeouts.total = 10s;
    options.max_response_bytes = cap;
    return Transport(options);
}

// For a server that never answers, where the timeout is what the test is about: short, since the
// test waits it out whatever the machine's load.
Transport timing_out_transport() {
    TransportOptions options;
    options.timeouts.connect = 300ms;
    options.timeouts.total = 400ms;
    return Transport(options);
}

HttpRequest post(std::string url, std::string body = R"({"amount":1000,"currency":"EUR"})") {
    HttpRequest request;
    request.method = "POST";
    request.url = std::move(url);
    request.headers = {{"Content-Type", "application/json"}, {"Idempotency-Key", "op_0001"}};
    request.body = std::move(body);
    return request;
}

HttpRequest lookup(std::string url) {
    HttpRequest request;
    request.method = "GET";
    request.url = std::move(url);
    request.mutating = false;
    return request;
}

// Answers every request on the connection with 200 and its body echoed, keeping it alive.
void answer_all(LoopbackConnection& connection) {
    while (const auto request = connection.read_request()) {
        connection.write(http_response(200, "echo:" + request->body));
    }
}

// The fault tests print what libcurl reported, for the record.
void describe(const char* fault, const HttpResult& result) {
    UNSCOPED_INFO(fault << ": curl " << result.curl_code << ", " << result.request_bytes_sent
                        << " request bytes, status " << result.http_status << ", "
                        << to_string(result.cls) << " (" << result.error << ")");
}

} // namespace

TEST_CASE("transport: nothing listening is not_sent (curl 7) and the server saw nothing",
          "[providers][transport]") {
    LoopbackServer server(answer_all);
    server.stop_listening();
    Transport transport = fast_transport();
    const HttpResult result = transport.send(post(server.url("/v1/payments")));
    describe("refused", result);
    CHECK(result.cls == SendClass::not_sent);
    CHECK(result.curl_code == 7);
    CHECK(result.request_bytes_sent == 0);
    CHECK(result.http_status == 0);
    CHECK(result.connect_time.count() == 0);
    CHECK(server.connections_accepted() == 0);
    CHECK(server.requests_received() == 0);
}

TEST_CASE("transport: a SYN dropped by a full accept queue times out in connect: not_sent (28)",
          "[providers][transport]") {
    FullBacklogListener listener;
    Transport transport = timing_out_transport();
    const HttpResult result =
        transport.send(post("http://127.0.0.1:" + std::to_string(listener.port()) + "/"));
    describe("connect timeout", result);
    CHECK(result.cls == SendClass::not_sent);
    CHECK(result.curl_code == 28);
    CHECK(result.request_bytes_sent == 0);
    CHECK(result.connect_time.count() == 0);
    // Only the connection parked to fill the queue ever completed a handshake.
    CHECK(listener.drain_completed_connections() == 1);
}

TEST_CASE("transport: accepted but never read: the request sat in the server's socket, unknown",
          "[providers][transport]") {
    std::atomic<std::size_t> unread{0};
    LoopbackServer server([&](LoopbackConnection& connection) {
        connection.hang();
        unread = connection.unread_bytes();
    });
    Transport transport = timing_out_transport();
    const HttpResult result = transport.send(post(server.url("/v1/payments")));
    describe("accept, never read", result);
    server.release();
    REQUIRE(server.wait_until([&] { return server.connections_finished() == 1; }));

    CHECK(result.cls == SendClass::unknown);
    CHECK(result.curl_code == 28);
    CHECK(result.request_bytes_sent > 0);
    CHECK(result.connect_time.count() > 0);
    // The server application read nothing, yet every byte libcurl wrote reached its kernel.
    CHECK(server.requests_received() == 0);
    CHECK(unread.load() == static_cast<std::size_t>(result.request_bytes_sent));
    CHECK(server.connections_accepted() == 1);
}

TEST_CASE("transport: request read, then no answer past the timeout is unknown (28)",
          "[providers][transport]") {
    LoopbackServer server([](LoopbackConnection& connection) {
        if (connection.read_request()) {
            connection.hang();
        }
    });
    Transport transport = timing_out_transport();
    const HttpResult result = transport.send(post(server.url("/v1/payments")));
    describe("read, then hang", result);
    server.release();
    CHECK(result.cls == SendClass::unknown);
    CHECK(result.curl_code == 28);
    CHECK(result.request_bytes_sent > 0);
    CHECK(result.http_status == 0);
    CHECK(server.requests_received() == 1);
    CHECK(server.connections_accepted() == 1);
}

TEST_CASE("transport: request read, then FIN without an answer is unknown (52)",
          "[providers][transport]") {
    LoopbackServer server([](LoopbackConnection& connection) {
        if (connection.read_request()) {
            connection.close_with_fin();
        }
    });
    Transport transport = fast_transport();
    const HttpResult result = transport.send(post(server.url("/v1/payments")));
    describe("read, then FIN", result);
    CHECK(result.cls == SendClass::unknown);
    CHECK(result.curl_code == 52);
    CHECK(result.request_bytes_sent > 0);
    CHECK(server.requests_received() == 1);
    CHECK(server.connections_accepted() == 1);
}

TEST_CASE("transport: request read, then RST is unknown (56)", "[providers][transport]") {
    LoopbackServer server([](LoopbackConnection& connection) {
        if (connection.read_request()) {
            connection.close_with_rst();
        }
    });
    Transport transport = fast_transport();
    const HttpResult result = transport.send(post(server.url("/v1/payments")));
    describe("read, then RST", result);
    CHECK(result.cls == SendClass::unknown);
    CHECK(result.curl_code == 56);
    CHECK(result.request_bytes_sent > 0);
    CHECK(server.requests_received() == 1);
    CHECK(server.connections_accepted() == 1);
}

TEST_CASE("transport: half a body, then close, is unknown (18) and flagged partial",
          "[providers][transport]") {
    LoopbackServer server([](LoopbackConnection& connection) {
        if (connection.read_request()) {
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"id\":\"pay_1\"");
            connection.close_with_fin();
        }
    });
    Transport transport = fast_transport();
    const HttpResult result = transport.send(post(server.url("/v1/payments")));
    describe("half a body", result);
    CHECK(result.cls == SendClass::unknown);
    CHECK(result.curl_code == 18);
    CHECK(result.http_status == 200); // the status line arrived; the body did not
    CHECK(result.body == "{\"id\":\"pay_1\"");
    CHECK(server.requests_received() == 1);
}

TEST_CASE("transport: a 200 is a response with body and headers intact, sent exactly once",
          "[providers][transport]") {
    LoopbackServer server([](LoopbackConnection& connection) {
        while (const auto request = connection.read_request()) {
            connection.write(http_response(200, R"({"id":"pay_1","status":"succeeded"})",
                                           {{"Request-Id", "req_42"}}));
        }
    });
    Transport transport = fast_transport();
    const HttpResult result = transport.send(post(server.url("/v1/payments")));
    describe("200", result);
    CHECK(result.cls == SendClass::response);
    CHECK(result.curl_code == 0);
    CHECK(result.error.empty());
    CHECK(result.http_status == 200);
    CHECK(result.body == R"({"id":"pay_1","status":"succeeded"})");
    CHECK_FALSE(result.truncated);
    CHECK(std::find(result.headers.begin(), result.headers.end(),
                    std::pair<std::string, std::string>{"Request-Id", "req_42"}) !=
          result.headers.end());
    CHECK(result.connect_time.count() > 0);
    CHECK(result.total_time >= result.connect_time);

    REQUIRE(server.requests_received() == 1);
    const auto seen = server.requests().front();
    CHECK(seen.method == "POST");
    CHECK(seen.target == "/v1/payments");
    CHECK(seen.body == R"({"amount":1000,"currency":"EUR"})");
    CHECK(seen.header("Idempotency-Key") == "op_0001");
    CHECK(seen.header("Content-Type") == "application/json");
    CHECK(seen.header("Content-Length") == "32");
    CHECK(seen.header("User-Agent") == "payrecon/0.1");
    CHECK_FALSE(seen.header("Expect").has_value());
}

TEST_CASE("transport: methods and bodies go out as given", "[providers][transport]") {
    LoopbackServer server(answer_all);
    Transport transport = fast_transport();
    HttpRequest put = post(server.url("/v1/x"), "a=1");
    put.method = "PUT";
    HttpRequest empty_post = post(server.url("/v1/capture"), "");
    HttpRequest del = post(server.url("/v1/x/1"), "");
    del.method = "DELETE";
    HttpRequest head = lookup(server.url("/v1/x/1"));
    head.method = "HEAD";

    CHECK(transport.send(put).cls == SendClass::response);
    CHECK(transport.send(empty_post).cls == SendClass::response);
    CHECK(transport.send(del).cls == SendClass::response);
    const HttpResult head_result = transport.send(head);
    CHECK(head_result.cls == SendClass::response);
    CHECK(head_result.body.empty());

    const auto seen = server.requests();
    REQUIRE(seen.size() == 4);
    CHECK(seen[0].method == "PUT");
    CHECK(seen[0].body == "a=1");
    CHECK(seen[1].method == "POST");
    CHECK(seen[1].header("Content-Length") == "0");
    CHECK(seen[2].method == "DELETE");
    CHECK(seen[2].body.empty());
    CHECK(seen[3].method == "HEAD");
}

TEST_CASE("transport: a body larger than the cap (Content-Length) is unknown and truncated",
          "[providers][transport]") {
    LoopbackServer server([](LoopbackConnection& connection) {
        if (connection.read_request()) {
            connection.write(http_response(200, std::string(4 * k_test_cap, 'x')));
        }
    });
    Transport transport = fast_transport(k_test_cap);
    const HttpResult result = transport.send(post(server.url("/v1/payments")));
    describe("too large, Content-Length", result);
    CHECK(result.cls == SendClass::unknown);
    CHECK(result.truncated);
    CHECK(result.curl_code == 63); // refused from the Content-Length, before the body
    CHECK(result.http_status == 200);
    CHECK(result.body.size() <= k_test_cap);
    CHECK(server.requests_received() == 1);
}

TEST_CASE("transport: a body larger than the cap (chunked) is cut at the cap, unknown",
          "[providers][transport]") {
    LoopbackServer server([](LoopbackConnection& connection) {
        if (connection.read_request()) {
            std::string chunk(k_test_cap / 2, 'y');
            std::string out = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
            for (int i = 0; i < 8; ++i) {
                out += "200\r\n" + chunk + "\r\n"; // 0x200 = 512 bytes
            }
            out += "0\r\n\r\n";
            connection.write(out);
        }
    });
    Transport transport = fast_transport(k_test_cap);
    const HttpResult result = transport.send(post(server.url("/v1/payments")));
    describe("too large, chunked", result);
    CHECK(result.cls == SendClass::unknown);
    CHECK(result.truncated);
    CHECK(result.curl_code == 23); // our write callback stopped it
    CHECK(result.body.size() == k_test_cap);
    CHECK(server.requests_received() == 1);
}

TEST_CASE("transport: a body of exactly the cap is a complete response", "[providers][transport]") {
    LoopbackServer server([](LoopbackConnection& connection) {
        if (connection.read_request()) {
            connection.write(http_response(200, std::string(k_test_cap, 'z')));
        }
    });
    Transport transport = fast_transport(k_test_cap);
    const HttpResult result = transport.send(post(server.url("/v1/payments")));
    CHECK(result.cls == SendClass::response);
    CHECK_FALSE(result.truncated);
    CHECK(result.body.size() == k_test_cap);
}

TEST_CASE("transport: a 302 is a response, not followed", "[providers][transport]") {
    LoopbackServer server([&](LoopbackConnection& connection) {
        while (const auto request = connection.read_request()) {
            connection.write(http_response(302, "", {{"Location", "/v1/elsewhere"}}));
        }
    });
    Transport transport = fast_transport();
    const HttpResult result = transport.send(post(server.url("/v1/payments")));
    describe("302", result);
    CHECK(result.cls == SendClass::response);
    CHECK(result.http_status == 302);
    CHECK(std::find(result.headers.begin(), result.headers.end(),
                    std::pair<std::string, std::string>{"Location", "/v1/elsewhere"}) !=
          result.headers.end());
    REQUIRE(server.requests_received() == 1);
    CHECK(server.requests().front().target == "/v1/payments");
}

TEST_CASE("transport: a mutating POST after a keep-alive lookup uses a new connection",
          "[providers][transport]") {
    LoopbackServer server(answer_all);
    Transport transport = fast_transport();
    CHECK(transport.send(lookup(server.url("/v1/payments/1"))).cls == SendClass::response);
    CHECK(transport.send(post(server.url("/v1/payments"))).cls == SendClass::response);
    CHECK(transport.send(lookup(server.url("/v1/payments/2"))).cls == SendClass::response);
    CHECK(transport.send(post(server.url("/v1/payments"))).cls == SendClass::response);

    const auto seen = server.requests();
    REQUIRE(seen.size() == 4);
    CHECK(server.connections_accepted() == 3);
    CHECK(seen[0].connection == 1); // lookup: opens a connection and keeps it
    CHECK(seen[1].connection == 2); // POST: fresh, closed afterwards
    CHECK(seen[2].connection == 1); // lookup: reuses the kept-alive connection
    CHECK(seen[3].connection == 3); // POST: fresh again
    // The POSTs' connections were closed by the client (FORBID_REUSE); the lookup's stays open.
    CHECK(server.wait_until([&] { return server.connections_finished() == 2; }));
}

TEST_CASE("transport: libcurl re-sends a lookup when a kept-alive connection dies under it",
          "[providers][transport]") {
    // The server answers the first request of each connection and closes a connection, without
    // answering, on its second request: the keep-alive race a provider's idle timeout produces.
    LoopbackServer server([](LoopbackConnection& connection) {
        if (connection.read_request()) {
            connection.write(http_response(200, "first"));
        }
        if (connection.read_request()) {
            connection.close_with_fin();
        }
    });
    Transport transport = fast_transport();
    const HttpResult first = transport.send(lookup(server.url("/v1/payments/1")));
    CHECK(first.cls == SendClass::response);
    const HttpResult second = transport.send(lookup(server.url("/v1/payments/2")));
    describe("lookup on a dying kept-alive connection", second);

    // The caller sees one clean 200; the server received the second lookup twice. Harmless for
    // a lookup, a double charge for a POST: why mutating requests never reuse a connection.
    CHECK(second.cls == SendClass::response);
    CHECK(second.http_status == 200);
    CHECK(second.request_bytes_sent == 2 * first.request_bytes_sent); // the client's only trace
    const auto seen = server.requests();
    REQUIRE(seen.size() == 3);
    CHECK(seen[1].target == "/v1/payments/2");
    CHECK(seen[1].connection == 1);
    CHECK(seen[2].target == "/v1/payments/2");
    CHECK(seen[2].connection == 2);
}

TEST_CASE("transport: a POST is never sent twice when the server closes a kept-alive connection",
          "[providers][transport]") {
    // As above, and a POST is read, then its connection closed without an answer.
    LoopbackServer server([](LoopbackConnection& connection) {
        int served = 0;
        while (const auto request = connection.read_request()) {
            if (request->method == "POST" || ++served > 1) {
                connection.close_with_fin();
                return;
            }
            connection.write(http_response(200, "lookup"));
        }
    });
    Transport transport = fast_transport();
    CHECK(transport.send(lookup(server.url("/v1/payments/1"))).cls == SendClass::response);
    const HttpResult result = transport.send(post(server.url("/v1/payments")));
    describe("POST after a keep-alive lookup, closed unanswered", result);

    CHECK(result.cls == SendClass::unknown);
    CHECK(result.curl_code == 52);
    const auto seen = server.requests();
    const auto posts = std::count_if(seen.begin(), seen.end(),
                                     [](const auto& request) { return request.method == "POST"; });
    CHECK(posts == 1);
    CHECK(seen.size() == 2);
    CHECK(server.connections_accepted() == 2);
}

TEST_CASE("transport: the same POST marked as a lookup is sent twice (why mutating is the default)",
          "[providers][transport]") {
    // The control for the test above: only the `mutating` flag differs, and the server receives
    // the POST twice, once on the dying kept-alive connection and once on libcurl's retry.
    LoopbackServer server([](LoopbackConnection& connection) {
        int served = 0;
        while (const auto request = connection.read_request()) {
            if (request->method == "POST" || ++served > 1) {
                connection.close_with_fin();
                return;
            }
            connection.write(http_response(200, "lookup"));
        }
    });
    Transport transport = fast_transport();
    CHECK(transport.send(lookup(server.url("/v1/payments/1"))).cls == SendClass::response);
    HttpRequest reusing = post(server.url("/v1/payments"));
    reusing.mutating = false;
    const HttpResult result = transport.send(reusing);
    describe("POST as a lookup after a keep-alive lookup, closed unanswered", result);

    CHECK(result.cls == SendClass::unknown);
    const auto seen = server.requests();
    const auto posts = std::count_if(seen.begin(), seen.end(),
                                     [](const auto& request) { return request.method == "POST"; });
    CHECK(posts == 2);
    CHECK(seen.size() == 3);
}

TEST_CASE("transport: https to a plain-HTTP server fails the TLS handshake: not_sent (35)",
          "[providers][transport][tls]") {
    std::atomic<std::size_t> hello_bytes{0};
    LoopbackServer server([&](LoopbackConnection& connection) {
        hello_bytes = connection.read_some().size(); // a TLS ClientHello, not a request
        connection.write(http_response(400, "not TLS"));
    });
    Transport transport = fast_transport();
    HttpRequest request = post(server.url("/v1/payments"));
    request.url.replace(0, 4, "https");
    const HttpResult result = transport.send(request);
    describe("TLS handshake against plain HTTP", result);
    CHECK(result.cls == SendClass::not_sent);
    CHECK(result.curl_code == 35);
    CHECK(result.request_bytes_sent == 0);
    CHECK(result.tls_time.count() == 0);
    CHECK(server.wait_until([&] { return server.connections_finished() == 1; }));
    CHECK(hello_bytes.load() > 0);
    CHECK(server.requests_received() == 0);
}

TEST_CASE("transport: a TLS handshake the server never answers times out: not_sent (28)",
          "[providers][transport][tls]") {
    LoopbackServer server([](LoopbackConnection& connection) {
        static_cast<void>(connection.read_some());
        connection.hang();
    });
    Transport transport = timing_out_transport();
    HttpRequest request = post(server.url("/v1/payments"));
    request.url.replace(0, 4, "https");
    const HttpResult result = transport.send(request);
    describe("TLS handshake unanswered", result);
    server.release();
    CHECK(result.cls == SendClass::not_sent);
    CHECK(result.curl_code == 28);
    CHECK(result.request_bytes_sent == 0);
    CHECK(result.tls_time.count() == 0);
    CHECK(server.requests_received() == 0);
}

TEST_CASE("transport: another scheme is refused by libcurl: not_sent (1)",
          "[providers][transport]") {
    Transport transport = fast_transport();
    HttpRequest request = post("ftp://127.0.0.1/payments");
    const HttpResult result = transport.send(request);
    CHECK(result.cls == SendClass::not_sent);
    CHECK(result.curl_code == 1);
    CHECK(result.request_bytes_sent == 0);
}

TEST_CASE("transport: a header with CR/LF is refused before any connection",
          "[providers][transport]") {
    LoopbackServer server(answer_all);
    Transport transport = fast_transport();
    HttpRequest request = post(server.url("/v1/payments"));
    request.headers.emplace_back("Idempotency-Key", "op_1\r\nX-Injected: 1");
    const HttpResult result = transport.send(request);
    CHECK(result.cls == SendClass::not_sent);
    CHECK(result.error.find("Idempotency-Key") != std::string::npos);
    HttpRequest bad_name = post(server.url("/v1/payments"));
    bad_name.headers.emplace_back("Bad Name", "x");
    CHECK(transport.send(bad_name).cls == SendClass::not_sent);
    HttpRequest bad_method = post(server.url("/v1/payments"));
    bad_method.method = "POST /evil HTTP/1.1\r\n";
    CHECK(transport.send(bad_method).cls == SendClass::not_sent);
    CHECK(server.connections_accepted() == 0);
    CHECK(server.requests_received() == 0);
}

TEST_CASE("transport: the API key reaches the server and never the result",
          "[providers][transport][secrets]") {
    const std::string key = "sk_test_51Hq8LoopbackSecretValue0123456789";
    // A hostile or buggy server that echoes the credential in its body and a header.
    LoopbackServer server([](LoopbackConnection& connection) {
        while (const auto request = connection.read_request()) {
            const std::string auth = request->header("Authorization").value_or("");
            connection.write(http_response(200, "you sent " + auth, {{"X-Echo", auth}}));
        }
    });
    Transport transport = fast_transport();
    HttpRequest request = post(server.url("/v1/payments"));
    request.headers.emplace_back("Authorization", "Bearer " + key);
    const HttpResult result = transport.send(request);

    REQUIRE(server.requests_received() == 1);
    CHECK(server.requests().front().header("Authorization") == "Bearer " + key);
    CHECK(result.cls == SendClass::response);
    CHECK(result.body == "you sent ***");
    for (const auto& [name, value] : result.headers) {
        CHECK(value.find(key) == std::string::npos);
    }
}

TEST_CASE("transport: a secret in libcurl's error message is redacted",
          "[providers][transport][secrets]") {
    // libcurl resolves *.localhost itself and names the host in "Failed to connect to ...".
    const Secret account{"acct-7f3a9c2e51b84d06"};
    Transport transport = fast_transport();
    HttpRequest request =
        post("http://" + account.reveal() + ".localhost:" + std::to_string(test::unused_port()));
    request.secrets_to_redact = {account};
    const HttpResult result = transport.send(request);
    describe("refused, secret host", result);
    CHECK(result.cls == SendClass::not_sent);
    CHECK_FALSE(result.error.empty());
    CHECK(result.error.find(account.reveal()) == std::string::npos);
    CHECK(result.error.find("***") != std::string::npos);
}

TEST_CASE("transport: a request whose deadline has passed is refused before any I/O: not_sent, and "
          "the server saw nothing",
          "[providers][transport][deadline]") {
    LoopbackServer server(answer_all);
    Transport transport = fast_transport();
    HttpRequest request = post(server.url("/v1/payments"));
    request.deadline = std::chrono::steady_clock::now() - 1ms;
    const HttpResult result = transport.send(request);
    describe("deadline passed", result);
    CHECK(result.cls == SendClass::not_sent);
    CHECK(result.deadline_passed);
    CHECK(result.request_bytes_sent == 0);
    CHECK(payrecon::providers::call_record_of(result).error_class == "not_sent:deadline_passed");
    CHECK(server.connections_accepted() == 0);
    CHECK(server.requests_received() == 0);
}

TEST_CASE("transport: a deadline before the timeouts cuts the call short: a server that never "
          "answers is given up on at the deadline, not at the total timeout",
          "[providers][transport][deadline]") {
    LoopbackServer server([](LoopbackConnection& connection) {
        if (connection.read_request()) {
            connection.hang();
        }
    });
    TransportOptions options;
    options.timeouts.connect = 30s;
    options.timeouts.total = 60s;
    Transport transport(options);
    HttpRequest request = post(server.url("/v1/payments"));
    request.deadline = std::chrono::steady_clock::now() + 300ms;
    const HttpResult result = transport.send(request);
    describe("deadline before timeout", result);
    server.release();
    CHECK(result.cls == SendClass::unknown); // it was sent: the deadline only ended the wait
    CHECK(result.curl_code == 28);
    CHECK(server.requests_received() == 1);
    CHECK(result.total_time < std::chrono::seconds(30)); // the 60 s timeout would still be waiting
}
