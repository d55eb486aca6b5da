// The OAuth2 client-credentials token (providers/oauth2.hpp) and ProviderClient's use of it, over
// the real transport against a loopback server that plays both the token endpoint (POST
// /v1/oauth2/token, as PayPal's) and the API. Each test asserts on what the server saw.
#include "core/encoding.hpp"
#include "providers/adapter_support.hpp"
#include "providers/call_record.hpp"
#include "providers/oauth2.hpp"
#include "tests/providers/loopback_server.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>
#include <string>
#include <vector>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::net;
using payrecon::test::http_response;
using payrecon::test::LoopbackConnection;
using payrecon::test::LoopbackServer;
using payrecon::test::ReceivedRequest;

namespace {

using namespace std::chrono_literals;

const char* const k_client_id = "AcmeClient-7f3a9c2e51b84d06";
const char* const k_client_secret = "EKsecret-9b1d2e3f4a5b6c7d8e9f";
constexpr const char* k_token_path = "/v1/oauth2/token";

std::string token_json(const std::string& token, long long expires_in) {
    return R"({"scope":"https://uri.paypal.com/services/payments","access_token":")" + token +
           R"(","token_type":"Bearer","app_id":"APP-80W284485P519543T","expires_in":)" +
           std::to_string(expires_in) + R"(,"nonce":"2026-12-02T10:00:00Zabc"})";
}

// A token endpoint and an API on one loopback port. The endpoint issues "token-1", "token-2", ...
// valid for `expires_in`; the API answers 401 to a token listed in `refused`, else 200 with
// `api_body`. `token_status`, when set, is the token endpoint's answer instead.
struct FakePayPal {
    std::atomic<int> tokens_issued{0};
    long long expires_in = 3600;
    int token_status = 200;
    std::string token_body;
    std::vector<std::string> refused;
    std::string api_body = R"({"ok":true})";
    std::mutex mutex;
    LoopbackServer server{[this](LoopbackConnection& c) { serve(c); }};

    void serve(LoopbackConnection& connection) {
        while (const auto request = connection.read_request()) {
            if (request->target == k_token_path) {
                std::lock_guard<std::mutex> lock(mutex);
                if (token_status != 200) {
                    connection.write(http_response(token_status, token_body));
                    continue;
                }
                const int n = ++tokens_issued;
                connection.write(
                    http_response(200, token_json("token-" + std::to_string(n), expires_in)));
                continue;
            }
            const std::string auth = request->header("Authorization").value_or("");
            bool refuse = false;
            {
                std::lock_guard<std::mutex> lock(mutex);
                for (const auto& t : refused) {
                    refuse = refuse || auth == "Bearer " + t;
                }
            }
            connection.write(refuse ? http_response(401, R"({"error":"invalid_token"})")
                                    : http_response(200, api_body + " " + auth));
        }
    }

    std::vector<ReceivedRequest> to(const std::string& target) const {
        std::vector<ReceivedRequest> out;
        for (const auto& r : server.requests()) {
            if (r.target == target) {
                out.push_back(r);
            }
        }
        return out;
    }
};

OAuth2ClientCredentials credentials(const std::string& token_url) {
    return OAuth2ClientCredentials{"CLIENT_ID", "CLIENT_SECRET", token_url, Secret(k_client_id),
                                   Secret(k_client_secret)};
}

ProviderConfig config(const LoopbackServer& server) {
    ProviderConfig c;
    c.name = "paypal";
    c.kind = "paypal";
    c.base_url = server.url("");
    c.credentials = credentials(server.url(k_token_path));
    return c;
}

SendFunction over(std::shared_ptr<Transport> transport) {
    return [transport](const HttpRequest& r) { return transport->send(r); };
}

std::shared_ptr<Transport> transport() {
    TransportOptions options;
    options.timeouts.connect = 2s;
    options.timeouts.total = 5s;
    return std::make_shared<Transport>(options);
}

} // namespace

TEST_CASE("oauth2: the token comes from POST /v1/oauth2/token with basic auth, and is cached",
          "[providers][oauth2]") {
    FakePayPal p;
    ProviderClient client(config(p.server), over(transport()));
    const HttpResult first = client.send(client.request("POST", "/v2/payments", true));
    const HttpResult second = client.send(client.request("GET", "/v2/payments/1", false));
    CHECK(first.cls == SendClass::response);
    CHECK(first.http_status == 200);
    CHECK(second.http_status == 200);

    const auto token_requests = p.to(k_token_path);
    REQUIRE(token_requests.size() == 1); // the second call reused the token
    const ReceivedRequest& t = token_requests.front();
    CHECK(t.method == "POST");
    CHECK(t.header("Authorization") ==
          "Basic " + base64(std::string(k_client_id) + ":" + k_client_secret));
    CHECK(t.header("Content-Type") == "application/x-www-form-urlencoded");
    CHECK(t.body == "grant_type=client_credentials");
    const auto api = p.to("/v2/payments");
    REQUIRE(api.size() == 1);
    CHECK(api.front().header("Authorization") == "Bearer token-1");
    CHECK(p.to("/v2/payments/1").front().header("Authorization") == "Bearer token-1");
    // The server echoed the token: the result never holds it, nor the client's secret.
    for (const HttpResult* r : {&first, &second}) {
        CHECK(r->body.find("token-1") == std::string::npos);
        CHECK(r->body.find("***") != std::string::npos);
    }
}

TEST_CASE("oauth2: the token is fetched again shortly before it expires, not before",
          "[providers][oauth2]") {
    FakePayPal p;
    p.expires_in = 32400; // PayPal's nine hours
    auto now = std::chrono::steady_clock::time_point(std::chrono::hours(1000));
    OAuth2TokenSource tokens(credentials(p.server.url(k_token_path)), over(transport()),
                             [&now] { return now; });
    REQUIRE(tokens.token(std::nullopt).value().reveal() == "token-1");
    now += std::chrono::seconds(32400 - 61);
    CHECK(tokens.token(std::nullopt).value().reveal() == "token-1");
    CHECK(tokens.requests_sent() == 1);
    now += std::chrono::seconds(2); // less than a minute left: refreshed
    CHECK(tokens.token(std::nullopt).value().reveal() == "token-2");
    CHECK(tokens.requests_sent() == 2);
    CHECK(p.to(k_token_path).size() == 2);

    // A short-lived token is refreshed a quarter of its life early.
    p.expires_in = 40;
    tokens.invalidate();
    CHECK(tokens.token(std::nullopt).value().reveal() == "token-3");
    now += std::chrono::seconds(29);
    CHECK(tokens.token(std::nullopt).value().reveal() == "token-3");
    now += std::chrono::seconds(2);
    CHECK(tokens.token(std::nullopt).value().reveal() == "token-4");
}

TEST_CASE("oauth2: a 401 from the API with a cached token is sent once more with a fresh one",
          "[providers][oauth2]") {
    FakePayPal p;
    ProviderClient client(config(p.server), over(transport()));
    REQUIRE(client.send(client.request("GET", "/v2/warmup", false)).http_status == 200);
    {
        std::lock_guard<std::mutex> lock(p.mutex);
        p.refused = {"token-1"}; // revoked at the provider before it expired
    }
    const HttpResult r = client.send(client.request("POST", "/v2/payments", true));
    CHECK(r.http_status == 200);
    const auto api = p.to("/v2/payments");
    REQUIRE(api.size() == 2);
    CHECK(api[0].header("Authorization") == "Bearer token-1");
    CHECK(api[1].header("Authorization") == "Bearer token-2");
    CHECK(p.to(k_token_path).size() == 2);

    // Refused again with the fresh token: no third attempt, the 401 is the answer.
    {
        std::lock_guard<std::mutex> lock(p.mutex);
        p.refused = {"token-2", "token-3"};
    }
    const HttpResult refused = client.send(client.request("POST", "/v2/payments", true));
    CHECK(refused.http_status == 401);
    CHECK(p.to("/v2/payments").size() == 4); // token-2 (cached), then token-3 (fresh), no more
    CHECK(p.to(k_token_path).size() == 3);
}

TEST_CASE("oauth2: a fresh token refused by the API is not retried", "[providers][oauth2]") {
    FakePayPal p;
    {
        std::lock_guard<std::mutex> lock(p.mutex);
        p.refused = {"token-1", "token-2"};
    }
    ProviderClient client(config(p.server), over(transport()));
    const HttpResult r = client.send(client.request("POST", "/v2/payments", true));
    CHECK(r.http_status == 401);
    CHECK(p.to("/v2/payments").size() == 1);
    CHECK(p.to(k_token_path).size() == 1);
}

TEST_CASE("oauth2: client credentials the token endpoint refuses are a 401, and the API is never "
          "called",
          "[providers][oauth2]") {
    for (const auto& [status, body] : std::vector<std::pair<int, std::string>>{
             {401,
              R"({"error":"invalid_client","error_description":"Client Authentication failed"})"},
             {400, R"({"error":"invalid_client"})"},
             {403, R"({"error":"unauthorized_client"})"}}) {
        INFO(status << " " << body);
        FakePayPal p;
        p.token_status = status;
        p.token_body = body;
        ProviderClient client(config(p.server), over(transport()));
        const HttpResult r = client.send(client.request("POST", "/v2/payments", true));
        CHECK(r.cls == SendClass::response);
        CHECK(r.http_status == 401);
        CHECK((r.body.find("invalid_client") != std::string::npos ||
               r.body.find("unauthorized_client") != std::string::npos));
        CHECK(p.to("/v2/payments").empty());
    }
}

TEST_CASE("oauth2: no token, no call: an unreachable or broken token endpoint is not_sent",
          "[providers][oauth2]") {
    SECTION("nothing listens at the token URL") {
        FakePayPal p;
        ProviderConfig c = config(p.server);
        std::get<OAuth2ClientCredentials>(c.credentials).token_url =
            "http://127.0.0.1:" + std::to_string(test::unused_port()) + k_token_path;
        ProviderClient client(c, over(transport()));
        const HttpResult r = client.send(client.request("POST", "/v2/payments", true));
        CHECK(r.cls == SendClass::not_sent);
        CHECK(r.token_unavailable);
        CHECK(call_record_of(r).error_class == "not_sent:token_unavailable");
        CHECK(r.error.find("no OAuth2 access token") == 0);
        CHECK(p.server.requests_received() == 0);
    }
    for (const auto& [status, body] : std::vector<std::pair<int, std::string>>{
             {500, R"({"name":"INTERNAL_SERVER_ERROR"})"},
             {200, R"({"token_type":"Bearer","expires_in":3600})"},
             {200, R"({"access_token":"t","token_type":"mac","expires_in":3600})"},
             {200, "<html>maintenance</html>"}}) {
        DYNAMIC_SECTION("the token endpoint answers " << status << " " << body) {
            FakePayPal p; // the API: never reached
            const int answer_status = status;
            const std::string answer_body = body;
            LoopbackServer fixed([&](LoopbackConnection& connection) {
                while (const auto request = connection.read_request()) {
                    connection.write(http_response(answer_status, answer_body));
                }
            });
            ProviderConfig c = config(p.server);
            std::get<OAuth2ClientCredentials>(c.credentials).token_url = fixed.url(k_token_path);
            ProviderClient client(c, over(transport()));
            const HttpResult r = client.send(client.request("POST", "/v2/payments", true));
            CHECK(r.cls == SendClass::not_sent);
            CHECK(call_record_of(r).error_class == "not_sent:token_unavailable");
            CHECK(fixed.requests_received() == 1);
            CHECK(p.server.requests_received() == 0);
        }
    }
}

TEST_CASE("oauth2: a request whose deadline passed asks for no token and sends nothing",
          "[providers][oauth2]") {
    FakePayPal p;
    ProviderClient client(config(p.server), over(transport()));
    HttpRequest request = client.request("POST", "/v2/payments", true);
    request.deadline = std::chrono::steady_clock::now() - 1s;
    const HttpResult r = client.send(request);
    CHECK(r.cls == SendClass::not_sent);
    CHECK(call_record_of(r).error_class == "not_sent:deadline_passed");
    CHECK(p.server.connections_accepted() == 0);
}

TEST_CASE("oauth2: token answers are read strictly", "[providers][oauth2]") {
    const auto ok = parse_token_answer(token_json("A21AAF-x.y_z~/+=", 32400));
    REQUIRE(ok);
    CHECK(ok->access_token.reveal() == "A21AAF-x.y_z~/+=");
    CHECK(ok->expires_in == std::chrono::seconds(32400));
    CHECK(parse_token_answer(R"({"access_token":"t"})")->expires_in == std::nullopt);
    CHECK(parse_token_answer(R"({"access_token":"t","token_type":"bearer"})").has_value());
    for (const std::string bad :
         {"", "[]", "{}", R"({"access_token":""})", R"({"access_token":5})",
          R"({"access_token":"two words"})", R"({"access_token":"t\r\nX-Evil: 1"})",
          R"({"access_token":"t","token_type":"mac"})", R"({"access_token":"t","token_type":1})",
          R"({"access_token":"t","expires_in":0})", R"({"access_token":"t","expires_in":-5})",
          R"({"access_token":"t","expires_in":"3600"})",
          R"({"access_token":"t","expires_in":3600.5})"}) {
        INFO(bad);
        CHECK_FALSE(parse_token_answer(bad).has_value());
    }
}

TEST_CASE("oauth2: a token without expires_in serves one call", "[providers][oauth2]") {
    LoopbackServer server([](LoopbackConnection& connection) {
        int n = 0;
        while (const auto request = connection.read_request()) {
            connection.write(http_response(200, R"({"access_token":"once-)" + std::to_string(++n) +
                                                    R"(","token_type":"Bearer"})"));
        }
    });
    OAuth2TokenSource tokens(credentials(server.url(k_token_path)), over(transport()));
    CHECK(tokens.token(std::nullopt).has_value());
    CHECK(tokens.token(std::nullopt).has_value());
    CHECK(tokens.requests_sent() == 2);
    CHECK(server.requests_received() == 2);
}
