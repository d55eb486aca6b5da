// The fake provider over real HTTP on loopback: libcurl (what payrecon's transport uses) and raw
// sockets as clients. Each test starts its own server on port 0 and counts what the ledger says
// was delivered and executed.
#include "tests/fake_provider/command_line.hpp"
#include "tests/fake_provider/fake_provider.hpp"
#include "tests/fake_provider/test_client.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <curl/curl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace payrecon;
using namespace payrecon::fake;
using namespace payrecon::fake::test;
using Json = nlohmann::json;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

namespace {

// A PaymentIntent create as payrecon's Stripe adapter sends it.
std::string charge_form(const std::string& operation_id, long amount = 4999,
                        const std::string& payment_method = "pm_card_visa") {
    return "amount=" + std::to_string(amount) + "&currency=eur&payment_method=" + payment_method +
           "&confirm=true&off_session=true&customer=cus_8Hx2&description=" +
           http::percent_encode("2 concert tickets") + "&" +
           http::percent_encode("metadata[operation_id]") + "=" +
           http::percent_encode(operation_id) + "&" + http::percent_encode("metadata[payment_id]") +
           "=pay-1";
}

HttpResult post_charge(const Running& r, const std::string& key, const std::string& form,
                       long timeout_ms = 5000) {
    std::vector<std::string> headers{auth()};
    if (!key.empty()) {
        headers.push_back("Idempotency-Key: " + key);
    }
    return call("POST", r.url("/v1/payment_intents"), headers, form, timeout_ms);
}

HttpResult get(const Running& r, const std::string& path_and_query) {
    return call("GET", r.url(path_and_query), {auth()});
}

HttpResult search_operation(const Running& r, const std::string& operation_id) {
    return get(r, "/v1/payment_intents/search?query=" +
                      http::percent_encode("metadata['operation_id']:'" + operation_id + "'"));
}

// ---- raw sockets ----------------------------------------------------------------------------

std::string raw_post(const std::string& key, const std::string& form) {
    return "POST /v1/payment_intents HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
           std::string(k_api_key) + "\r\nIdempotency-Key: " + key +
           "\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: " +
           std::to_string(form.size()) + "\r\nConnection: close\r\n\r\n" + form;
}

std::size_t thread_count() {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& entry :
         std::filesystem::directory_iterator("/proc/self/task")) {
        ++n;
    }
    return n;
}

} // namespace

// ---- idempotency ----------------------------------------------------------------------------

TEST_CASE("fake provider: a charge executes once, and a same-key retry replays the first answer",
          "[fake_provider][idempotency]") {
    Running r;
    const HttpResult first = post_charge(r, "key-1", charge_form("op-1"));
    REQUIRE(first.code == CURLE_OK);
    REQUIRE(first.status == 200);
    Json pi = first.json();
    CHECK(pi["id"].get<std::string>().rfind("pi_", 0) == 0);
    CHECK(pi["object"] == "payment_intent");
    CHECK(pi["status"] == "succeeded");
    CHECK(pi["amount"] == 4999);
    CHECK(pi["amount_received"] == 4999);
    CHECK(pi["currency"] == "eur");
    CHECK(pi["customer"] == "cus_8Hx2");
    CHECK(pi["description"] == "2 concert tickets");
    CHECK(pi["latest_charge"].get<std::string>().rfind("ch_", 0) == 0);
    CHECK(pi["metadata"] == Json{{"operation_id", "op-1"}, {"payment_id", "pay-1"}});
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    CHECK(std::abs(pi["created"].get<long long>() - now) <= 2);
    CHECK(first.header("idempotent-replayed").empty());

    const HttpResult second = post_charge(r, "key-1", charge_form("op-1"));
    REQUIRE(second.code == CURLE_OK);
    CHECK(second.status == 200);
    CHECK(second.header("idempotent-replayed") == "true");
    CHECK(second.body == first.body);

    Json ledger = r.ledger();
    CHECK(ledger["deliveries"] == 2);
    CHECK(ledger["deliveries_by_operation"]["op-1"] == 2);
    CHECK(ledger["executions"] == Json{{"op-1", 1}});
    CHECK(ledger["replays"] == 1);
    CHECK(ledger["charged"] == Json{{"eur", 4999}});
    REQUIRE(ledger["payment_intents"].size() == 1);
    CHECK(ledger["payment_intents"][0]["id"] == pi["id"]);
}

TEST_CASE("fake provider: the same key with other parameters gets 400 idempotency_error",
          "[fake_provider][idempotency]") {
    Running r;
    REQUIRE(post_charge(r, "key-1", charge_form("op-1", 4999)).status == 200);
    const HttpResult other = post_charge(r, "key-1", charge_form("op-1", 5999));
    REQUIRE(other.code == CURLE_OK);
    CHECK(other.status == 400);
    CHECK(other.json()["error"]["type"] == "idempotency_error");
    CHECK(other.header("idempotent-replayed").empty());
    CHECK(r.deliveries() == 2);
    CHECK(r.executions("op-1") == 1);
    CHECK(r.ledger()["charged"]["eur"] == 4999);
}

TEST_CASE("fake provider: the same key while the first request executes gets 409 key in use",
          "[fake_provider][idempotency]") {
    // The gate holds the first request in flight (its key claimed) for as long as the test needs:
    // the second is answered while the first certainly executes, however loaded the machine.
    Running r;
    r.server.close_gate();
    HttpResult first;
    HttpResult second;
    std::thread in_flight([&] { first = post_charge(r, "key-1", charge_form("op-1")); });
    REQUIRE(wait_until([&] { return r.server.held() == 1; }));
    std::thread again([&] { second = post_charge(r, "key-1", charge_form("op-1")); });
    // The second is answered 409 at once, and waits at the gate with its answer.
    REQUIRE(wait_until([&] { return r.server.held() == 2; }));
    CHECK(r.executions("op-1") == 0);
    r.server.open_gate();
    in_flight.join();
    again.join();
    REQUIRE(first.code == CURLE_OK);
    CHECK(first.status == 200);
    REQUIRE(second.code == CURLE_OK);
    CHECK(second.status == 409);
    CHECK(second.json()["error"]["type"] == "idempotency_error");
    CHECK(second.json()["error"]["code"] == "idempotency_key_in_use");
    CHECK(r.executions("op-1") == 1);

    // Once the first has finished, the key replays it.
    const HttpResult third = post_charge(r, "key-1", charge_form("op-1"));
    CHECK(third.status == 200);
    CHECK(third.header("idempotent-replayed") == "true");
    CHECK(third.body == first.body);
    CHECK(r.deliveries() == 3);
    CHECK(r.executions("op-1") == 1);
}

TEST_CASE("fake provider: the gate holds requests until it opens, and the admin API drives it",
          "[fake_provider][gate]") {
    Running r;
    const auto gate = [&](const std::string& body) {
        return call("POST", r.admin_url("/__admin/gate"), {"Content-Type: application/json"}, body);
    };
    CHECK(gate(R"({"closed": "yes"})").status == 400);
    const HttpResult closed = gate(R"({"closed": true})");
    REQUIRE(closed.status == 200);
    CHECK(closed.json()["closed"] == true);
    HttpResult charged;
    std::thread in_flight([&] { charged = post_charge(r, "key-1", charge_form("op-1")); });
    REQUIRE(wait_until([&] { return r.server.held() == 1; }));
    CHECK(r.executions("op-1") == 0); // held before it executes
    CHECK(gate(R"({"closed": true})").json()["held"] == 1);
    CHECK(gate(R"({"closed": false})").json()["closed"] == false);
    in_flight.join();
    CHECK(charged.status == 200);
    CHECK(r.executions("op-1") == 1);
    CHECK(r.server.held() == 0);
    // reset opens it too.
    r.server.close_gate();
    r.server.reset();
    CHECK(post_charge(r, "key-2", charge_form("op-2")).status == 200);
}

TEST_CASE("fake provider: with --no-idempotency every POST executes",
          "[fake_provider][idempotency]") {
    auto options = options_with();
    options.account.idempotency = false;
    Running r(std::move(options));
    const HttpResult a = post_charge(r, "key-1", charge_form("op-1"));
    const HttpResult b = post_charge(r, "key-1", charge_form("op-1"));
    REQUIRE(a.status == 200);
    REQUIRE(b.status == 200);
    CHECK(b.header("idempotent-replayed").empty());
    CHECK(a.json()["id"] != b.json()["id"]);
    CHECK(r.deliveries() == 2);
    CHECK(r.executions("op-1") == 2);
    CHECK(r.ledger()["charged"]["eur"] == 2 * 4999);
}

TEST_CASE("fake provider: a key is forgotten after its retention on the fake clock",
          "[fake_provider][idempotency]") {
    auto options = options_with();
    options.stripe.key_retention = std::chrono::seconds(3600);
    Running r(std::move(options));
    REQUIRE(post_charge(r, "key-1", charge_form("op-1")).status == 200);
    r.server.advance_clock(std::chrono::seconds(3599));
    CHECK(post_charge(r, "key-1", charge_form("op-1")).header("idempotent-replayed") == "true");
    CHECK(r.executions("op-1") == 1);
    r.server.advance_clock(std::chrono::seconds(2));
    const HttpResult late = post_charge(r, "key-1", charge_form("op-1"));
    CHECK(late.status == 200);
    CHECK(late.header("idempotent-replayed").empty());
    CHECK(r.executions("op-1") == 2); // the double charge a late blind retry causes
}

TEST_CASE("fake provider: without metadata[operation_id] the ledger counts by Idempotency-Key",
          "[fake_provider][ledger]") {
    Running r;
    REQUIRE(post_charge(r, "key-only",
                        "amount=100&currency=USD&payment_method=pm_card_visa&confirm=true")
                .status == 200);
    CHECK(r.executions("key-only") == 1);
    CHECK(r.ledger()["charged"] == Json{{"usd", 100}});
}

TEST_CASE("fake provider: an invalid request executes nothing and leaves the key free",
          "[fake_provider][validation]") {
    Running r;
    const HttpResult unknown = post_charge(r, "key-1", charge_form("op-1") + "&colour=blue");
    CHECK(unknown.status == 400);
    CHECK(unknown.json()["error"]["type"] == "invalid_request_error");
    CHECK(unknown.json()["error"]["code"] == "parameter_unknown");
    CHECK(unknown.json()["error"]["param"] == "colour");
    const HttpResult missing = post_charge(
        r, "key-1",
        "currency=eur&payment_method=pm_card_visa&confirm=true&metadata%5Boperation_id%5D=op-1");
    CHECK(missing.status == 400);
    CHECK(missing.json()["error"]["code"] == "parameter_missing");
    CHECK(missing.json()["error"]["param"] == "amount");
    CHECK(r.executions("op-1") == 0);
    // Stripe saves nothing for a request that failed validation: the key is still free.
    const HttpResult valid = post_charge(r, "key-1", charge_form("op-1"));
    CHECK(valid.status == 200);
    CHECK(valid.header("idempotent-replayed").empty());
    CHECK(r.deliveries() == 3);
    CHECK(r.executions("op-1") == 1);
}

// ---- faults at the socket -------------------------------------------------------------------

TEST_CASE("fake provider: refuse closes the listener, connects are refused, then it listens again",
          "[fake_provider][faults]") {
    Running r;
    r.server.set_faults(faults_from(R"({"next": ["refuse"], "refuse_ms": 300})"));
    CHECK_FALSE(r.server.listening());
    CHECK(raw_connect(r.server.port()) == -ECONNREFUSED);
    const HttpResult refused = post_charge(r, "key-1", charge_form("op-1"));
    CHECK(refused.code == CURLE_COULDNT_CONNECT);
    // The admin port keeps answering meanwhile.
    const HttpResult health = call("GET", r.admin_url("/__admin/health"));
    REQUIRE(health.status == 200);
    CHECK(health.json()["listening"] == false);
    CHECK(r.deliveries() == 0);

    REQUIRE(wait_until([&] { return r.server.listening(); }));
    const HttpResult after = post_charge(r, "key-1", charge_form("op-1"));
    CHECK(after.status == 200);
    Json ledger = r.ledger();
    CHECK(ledger["deliveries"] == 1);
    CHECK(ledger["executions"]["op-1"] == 1);
    CHECK(ledger["faults_applied"]["refuse"] == 1);
}

TEST_CASE("fake provider: a refusal drawn by rate closes the listener after that POST is answered",
          "[fake_provider][faults]") {
    Running r(options_with(faults_from(R"({"rates": {"refuse": 1.0}, "refuse_ms": 200})")));
    const HttpResult served = post_charge(r, "key-1", charge_form("op-1"));
    CHECK(served.status == 200);
    CHECK(raw_connect(r.server.port()) == -ECONNREFUSED);
    REQUIRE(wait_until([&] { return r.server.listening(); }));
    r.server.set_faults({});
    CHECK(post_charge(r, "key-2", charge_form("op-2")).status == 200);
    Json ledger = r.ledger();
    CHECK(ledger["deliveries"] == 2);
    CHECK(ledger["executions"] == Json{{"op-1", 1}, {"op-2", 1}});
    CHECK(ledger["faults_applied"]["refuse"] == 1);
}

TEST_CASE("fake provider: drop_before_execute closes without executing, the key stays free",
          "[fake_provider][faults]") {
    Running r(
        options_with(faults_from(R"({"next": ["drop_before_execute", "drop_before_execute"]})")));
    const RawOutcome raw =
        raw_exchange(r.server.port(), raw_post("key-1", charge_form("op-1")), milliseconds(3000));
    CHECK(raw.ending == Ending::fin);
    CHECK(raw.bytes.empty());
    const HttpResult dropped = post_charge(r, "key-1", charge_form("op-1"));
    CHECK(dropped.code == CURLE_GOT_NOTHING);
    CHECK(r.deliveries() == 2);
    CHECK(r.executions("op-1") == 0);

    const HttpResult retry = post_charge(r, "key-1", charge_form("op-1"));
    CHECK(retry.status == 200);
    CHECK(retry.header("idempotent-replayed").empty());
    CHECK(r.deliveries() == 3);
    CHECK(r.executions("op-1") == 1);
    CHECK(r.ledger()["faults_applied"]["drop_before_execute"] == 2);
}

TEST_CASE("fake provider: execute_then_fin executes and closes with FIN, the retry replays",
          "[fake_provider][faults]") {
    Running r(options_with(faults_from(R"({"next": ["execute_then_fin", "execute_then_fin"]})")));
    const RawOutcome raw = raw_exchange(r.server.port(), raw_post("key-raw", charge_form("op-raw")),
                                        milliseconds(3000));
    CHECK(raw.ending == Ending::fin);
    CHECK(raw.bytes.empty());
    const HttpResult lost = post_charge(r, "key-1", charge_form("op-1"));
    CHECK(lost.code == CURLE_GOT_NOTHING);
    CHECK(r.executions("op-raw") == 1);
    CHECK(r.executions("op-1") == 1);

    const HttpResult retry = post_charge(r, "key-1", charge_form("op-1"));
    CHECK(retry.status == 200);
    CHECK(retry.header("idempotent-replayed") == "true");
    CHECK(retry.json()["status"] == "succeeded");
    CHECK(r.deliveries() == 3);
    CHECK(r.executions("op-1") == 1);
}

TEST_CASE("fake provider: execute_then_rst executes and resets the connection",
          "[fake_provider][faults]") {
    Running r(options_with(faults_from(R"({"next": ["execute_then_rst", "execute_then_rst"]})")));
    const RawOutcome raw = raw_exchange(r.server.port(), raw_post("key-raw", charge_form("op-raw")),
                                        milliseconds(3000));
    CHECK(raw.ending == Ending::rst);
    CHECK(raw.bytes.empty());
    const HttpResult reset = post_charge(r, "key-1", charge_form("op-1"));
    CHECK(reset.code == CURLE_RECV_ERROR);
    CHECK(r.deliveries() == 2);
    CHECK(r.executions("op-raw") == 1);
    CHECK(r.executions("op-1") == 1);
}

TEST_CASE("fake provider: execute_then_hang executes and holds the connection past the timeout",
          "[fake_provider][faults]") {
    Running r(options_with(
        faults_from(R"({"next": ["execute_then_hang", "execute_then_hang"], "hang_ms": 500})")));
    const HttpResult timed_out = post_charge(r, "key-1", charge_form("op-1"), 150);
    CHECK(timed_out.code == CURLE_OPERATION_TIMEDOUT);
    CHECK(r.executions("op-1") == 1);

    const RawOutcome raw = raw_exchange(r.server.port(), raw_post("key-raw", charge_form("op-raw")),
                                        milliseconds(3000));
    CHECK(raw.ending == Ending::fin);
    CHECK(raw.bytes.empty());
    CHECK(raw.took >= milliseconds(450));
    CHECK(r.deliveries() == 2);
    CHECK(r.executions("op-raw") == 1);
}

TEST_CASE("fake provider: execute_then_partial sends half a body, then FIN",
          "[fake_provider][faults]") {
    Running r(options_with(faults_from(R"({"next": ["execute_then_partial"]})")));
    const HttpResult partial = post_charge(r, "key-1", charge_form("op-1"));
    CHECK(partial.code == CURLE_PARTIAL_FILE);
    CHECK(partial.status == 200);
    CHECK(r.executions("op-1") == 1);
}

TEST_CASE("fake provider: http_500_after_execute executes, answers 500, and the key keeps the 500",
          "[fake_provider][faults]") {
    Running r(options_with(faults_from(R"({"next": ["http_500_after_execute"]})")));
    const HttpResult failed = post_charge(r, "key-1", charge_form("op-1"));
    REQUIRE(failed.code == CURLE_OK);
    CHECK(failed.status == 500);
    CHECK(failed.json()["error"]["type"] == "api_error");
    CHECK(r.executions("op-1") == 1);
    // As at Stripe: the saved result is replayed, 500 included; the charge is found by search.
    const HttpResult replay = post_charge(r, "key-1", charge_form("op-1"));
    CHECK(replay.status == 500);
    CHECK(replay.header("idempotent-replayed") == "true");
    CHECK(replay.body == failed.body);
    const HttpResult found = search_operation(r, "op-1");
    REQUIRE(found.status == 200);
    REQUIRE(found.json()["data"].size() == 1);
    CHECK(found.json()["data"][0]["status"] == "succeeded");
    CHECK(r.executions("op-1") == 1);
}

TEST_CASE("fake provider: http_500_before_execute answers 500 and executes nothing",
          "[fake_provider][faults]") {
    Running r(options_with(faults_from(R"({"next": ["http_500_before_execute"]})")));
    const HttpResult failed = post_charge(r, "key-1", charge_form("op-1"));
    CHECK(failed.status == 500);
    CHECK(failed.json()["error"]["type"] == "api_error");
    CHECK(r.deliveries() == 1);
    CHECK(r.executions("op-1") == 0);
    CHECK(search_operation(r, "op-1").json()["data"].empty());
    const HttpResult retry = post_charge(r, "key-1", charge_form("op-1"));
    CHECK(retry.status == 200);
    CHECK(retry.header("idempotent-replayed").empty());
    CHECK(r.executions("op-1") == 1);
}

TEST_CASE("fake provider: a decline answers 402 card_error and charges nothing",
          "[fake_provider][faults]") {
    Running r(options_with(faults_from(R"({"next": ["decline"]})")));
    const HttpResult declined = post_charge(r, "key-1", charge_form("op-1"));
    REQUIRE(declined.code == CURLE_OK);
    CHECK(declined.status == 402);
    Json e = declined.json()["error"];
    CHECK(e["type"] == "card_error");
    CHECK(e["code"] == "card_declined");
    CHECK(e["decline_code"] == "insufficient_funds");
    CHECK(e["payment_intent"]["status"] == "requires_payment_method");
    CHECK(e["payment_intent"]["amount_received"] == 0);
    CHECK(e["payment_intent"]["metadata"]["operation_id"] == "op-1");

    const HttpResult token =
        post_charge(r, "key-2", charge_form("op-2", 100, "pm_card_chargeDeclined"));
    CHECK(token.status == 402);
    CHECK(token.json()["error"]["code"] == "card_declined");
    CHECK(token.json()["error"]["decline_code"] == "generic_decline");

    // The key keeps the 402; retrieve shows the declined PaymentIntent; nothing was charged.
    const HttpResult replay = post_charge(r, "key-1", charge_form("op-1"));
    CHECK(replay.status == 402);
    CHECK(replay.header("idempotent-replayed") == "true");
    const std::string id = e["payment_intent"]["id"];
    const HttpResult got = get(r, "/v1/payment_intents/" + id);
    CHECK(got.status == 200);
    CHECK(got.json()["status"] == "requires_payment_method");
    Json ledger = r.ledger();
    CHECK(ledger["executions"] == Json{{"op-1", 1}, {"op-2", 1}});
    CHECK(ledger["charged"].empty());
    CHECK(ledger["faults_applied"]["decline"] == 1);
}

TEST_CASE("fake provider: fault rates are drawn per POST from the seed, and reported honestly",
          "[fake_provider][faults]") {
    auto run = [](Running& r) {
        std::vector<bool> lost;
        for (int i = 0; i < 24; ++i) {
            const std::string op = "op-" + std::to_string(i);
            const HttpResult res = post_charge(r, "key-" + std::to_string(i), charge_form(op));
            lost.push_back(res.code == CURLE_GOT_NOTHING);
            CHECK(r.executions(op) == 1); // execute_then_fin executes either way
        }
        return lost;
    };
    Running r;
    const char* config = R"({"seed": 7, "rates": {"execute_then_fin": 0.5}})";
    r.server.set_faults(faults_from(config));
    const std::vector<bool> first = run(r);
    const auto fins = static_cast<std::uint64_t>(std::count(first.begin(), first.end(), true));
    CHECK(fins > 0);
    CHECK(fins < first.size());
    CHECK(r.ledger()["faults_applied"]["execute_then_fin"] == fins);

    r.server.reset();
    r.server.set_faults(faults_from(config));
    CHECK(run(r) == first);
}

// ---- lookups --------------------------------------------------------------------------------

TEST_CASE("fake provider: search by operation ID finds the charge, retrieve by id",
          "[fake_provider][lookup]") {
    Running r;
    Json pi = post_charge(r, "key-1", charge_form("op-1")).json();
    REQUIRE(post_charge(r, "key-2", charge_form("op-2")).status == 200);
    const HttpResult found = search_operation(r, "op-1");
    REQUIRE(found.status == 200);
    Json body = found.json();
    CHECK(body["object"] == "search_result");
    CHECK(body["url"] == "/v1/payment_intents/search");
    CHECK(body["has_more"] == false);
    REQUIRE(body["data"].size() == 1);
    CHECK(body["data"][0]["id"] == pi["id"]);
    CHECK(search_operation(r, "op-unknown").json()["data"].empty());

    // Double quotes are Stripe's other quoting; anything else is refused.
    const HttpResult quoted =
        get(r, "/v1/payment_intents/search?query=" +
                   http::percent_encode(R"(metadata["operation_id"]:"op-2")"));
    CHECK(quoted.json()["data"].size() == 1);
    CHECK(get(r, "/v1/payment_intents/search?query=" + http::percent_encode("amount>100")).status ==
          400);

    const HttpResult got = get(r, "/v1/payment_intents/" + pi["id"].get<std::string>());
    CHECK(got.status == 200);
    CHECK(got.json() == pi);
    const HttpResult missing = get(r, "/v1/payment_intents/pi_doesnotexist");
    CHECK(missing.status == 404);
    CHECK(missing.json()["error"]["code"] == "resource_missing");
}

TEST_CASE("fake provider: a stale search misses a new charge, list and retrieve do not",
          "[fake_provider][lookup]") {
    Running r(options_with(faults_from(R"({"lookup_stale_s": 60})")));
    Json pi = post_charge(r, "key-1", charge_form("op-1")).json();
    CHECK(search_operation(r, "op-1").json()["data"].empty());
    CHECK(get(r, "/v1/payment_intents/" + pi["id"].get<std::string>()).status == 200);
    CHECK(get(r, "/v1/payment_intents").json()["data"].size() == 1);
    r.server.advance_clock(std::chrono::seconds(61));
    Json later = search_operation(r, "op-1").json();
    REQUIRE(later["data"].size() == 1);
    CHECK(later["data"][0]["id"] == pi["id"]);
}

TEST_CASE("fake provider: lookup_down makes search and list answer 503",
          "[fake_provider][lookup]") {
    Running r(options_with(faults_from(R"({"lookup_down": true})")));
    Json pi = post_charge(r, "key-1", charge_form("op-1")).json();
    const HttpResult search = search_operation(r, "op-1");
    CHECK(search.status == 503);
    CHECK(search.json()["error"]["type"] == "api_error");
    CHECK(get(r, "/v1/payment_intents").status == 503);
    CHECK(get(r, "/v1/payment_intents/" + pi["id"].get<std::string>()).status == 200);
    r.server.set_faults({});
    CHECK(search_operation(r, "op-1").json()["data"].size() == 1);
}

TEST_CASE("fake provider: unknown_parameters rejects every create naming one, executes nothing and "
          "keeps no key",
          "[fake_provider][faults]") {
    Running r(options_with(faults_from(R"({"unknown_parameters": ["off_session"]})")));
    CHECK(r.server.faults().to_json()["unknown_parameters"] == Json::array({"off_session"}));
    for (int i = 0; i < 2; ++i) {
        const HttpResult refused = post_charge(r, "key-1", charge_form("op-1"));
        CHECK(refused.status == 400);
        CHECK(refused.json()["error"]["type"] == "invalid_request_error");
        CHECK(refused.json()["error"]["code"] == "parameter_unknown");
        CHECK(refused.json()["error"]["message"] == "Received unknown parameter: off_session");
    }
    CHECK(r.deliveries() == 2);
    CHECK(r.executions("op-1") == 0);
    // The configuration fixed, the same key executes once: the rejections saved nothing under it.
    r.server.set_faults({});
    const HttpResult charged = post_charge(r, "key-1", charge_form("op-1"));
    CHECK(charged.status == 200);
    CHECK(charged.header("idempotent-replayed").empty());
    CHECK(r.executions("op-1") == 1);
    CHECK_THROWS_AS(faults_from(R"({"unknown_parameters": "off_session"})"), std::invalid_argument);
    CHECK_THROWS_AS(faults_from(R"({"unknown_parameters": [""]})"), std::invalid_argument);
}

TEST_CASE("fake provider: with --no-lookup search answers 404 resource_missing",
          "[fake_provider][lookup]") {
    auto options = options_with();
    options.account.lookup = false;
    Running r(std::move(options));
    REQUIRE(post_charge(r, "key-1", charge_form("op-1")).status == 200);
    const HttpResult search = search_operation(r, "op-1");
    CHECK(search.status == 404);
    CHECK(search.json()["error"]["type"] == "invalid_request_error");
    CHECK(search.json()["error"]["code"] == "resource_missing");
    CHECK(get(r, "/v1/payment_intents").json()["data"].size() == 1);
}

TEST_CASE("fake provider: list pages a created window newest first", "[fake_provider][lookup]") {
    Running r;
    std::vector<std::string> ids;
    std::vector<long long> created;
    for (int i = 0; i < 5; ++i) {
        Json pi = post_charge(r, "key-" + std::to_string(i), charge_form("op-" + std::to_string(i)))
                      .json();
        ids.push_back(pi["id"]);
        created.push_back(pi["created"]);
        r.server.advance_clock(std::chrono::seconds(10));
    }
    // The window [created[1], created[4]) holds charges 1, 2 and 3.
    const std::string window = "/v1/payment_intents?" + http::percent_encode("created[gte]") + "=" +
                               std::to_string(created[1]) + "&" +
                               http::percent_encode("created[lt]") + "=" +
                               std::to_string(created[4]) + "&limit=2";
    Json page1 = get(r, window).json();
    CHECK(page1["object"] == "list");
    CHECK(page1["url"] == "/v1/payment_intents");
    REQUIRE(page1["data"].size() == 2);
    CHECK(page1["data"][0]["id"] == ids[3]);
    CHECK(page1["data"][1]["id"] == ids[2]);
    CHECK(page1["has_more"] == true);
    Json page2 = get(r, window + "&starting_after=" + ids[2]).json();
    REQUIRE(page2["data"].size() == 1);
    CHECK(page2["data"][0]["id"] == ids[1]);
    CHECK(page2["has_more"] == false);
    Json back = get(r, window + "&ending_before=" + ids[1]).json();
    REQUIRE(back["data"].size() == 2);
    CHECK(back["data"][0]["id"] == ids[3]);
    CHECK(back["data"][1]["id"] == ids[2]);

    Json all = get(r, "/v1/payment_intents?limit=100").json();
    REQUIRE(all["data"].size() == 5);
    CHECK(all["data"][0]["id"] == ids[4]);
    CHECK(get(r, "/v1/payment_intents?starting_after=pi_nope").status == 400);
    CHECK(get(r, "/v1/payment_intents?limit=101").status == 400);
    CHECK(get(r, "/v1/payment_intents?colour=blue").status == 400);
}

// ---- authentication and logs ----------------------------------------------------------------

TEST_CASE("fake provider: a missing or wrong API key gets 401 and executes nothing",
          "[fake_provider][auth]") {
    Running r;
    const HttpResult none =
        call("POST", r.url("/v1/payment_intents"), {"Idempotency-Key: k"}, charge_form("op-1"));
    CHECK(none.status == 401);
    CHECK(none.json()["error"]["type"] == "invalid_request_error");
    const HttpResult wrong =
        call("POST", r.url("/v1/payment_intents"), {auth("sk_test_wrong"), "Idempotency-Key: k"},
             charge_form("op-1"));
    CHECK(wrong.status == 401);
    CHECK(wrong.body.find("sk_test_wrong") == std::string::npos);
    CHECK(call("GET", r.url("/v1/payment_intents"), {auth("sk_test_wrong")}).status == 401);
    CHECK(call("GET", r.url("/v1/payment_intents"), {"Authorization: Basic c2s6"}).status == 401);
    CHECK(r.deliveries() == 2);
    CHECK(r.executions("op-1") == 0);
    // A 401 does not occupy the key.
    CHECK(post_charge(r, "k", charge_form("op-1")).header("idempotent-replayed").empty());
}

TEST_CASE("fake provider: the API key never appears in a log line", "[fake_provider][auth]") {
    Running r(
        options_with(faults_from(R"({"next": ["execute_then_fin", "http_500_after_execute"]})")));
    post_charge(r, "key-1", charge_form("op-1"));
    post_charge(r, "key-1", charge_form("op-1"));
    post_charge(r, "key-2", charge_form("op-2"));
    call("POST", r.url("/v1/payment_intents"), {auth("sk_live_secretsecret")}, charge_form("op-3"));
    search_operation(r, "op-1");
    call("GET", r.admin_url("/__admin/ledger"));
    raw_exchange(r.server.port(), "GARBAGE\r\n\r\n", milliseconds(2000));
    r.server.stop();
    const std::string log = r.log.str();
    CHECK(log.find(k_api_key) == std::string::npos);
    CHECK(log.find("sk_live_secretsecret") == std::string::npos);
    CHECK(log.find("Bearer") == std::string::npos);
    std::istringstream lines(log);
    std::string line;
    int count = 0;
    while (std::getline(lines, line)) {
        INFO(line);
        CHECK_NOTHROW(Json::parse(line));
        ++count;
    }
    CHECK(count >= 9);
}

// ---- admin API ------------------------------------------------------------------------------

TEST_CASE("fake provider: the admin API sets faults, reports, advances the clock and resets",
          "[fake_provider][admin]") {
    Running r;
    const HttpResult health = call("GET", r.admin_url("/__admin/health"));
    REQUIRE(health.status == 200);
    CHECK(health.json()["status"] == "ok");
    CHECK(health.json()["port"] == r.server.port());

    const HttpResult set =
        call("POST", r.admin_url("/__admin/faults"), {"Content-Type: application/json"},
             R"({"latency_ms": 1, "next": ["decline", "execute_then_fin"]})");
    REQUIRE(set.status == 200);
    CHECK(set.json()["next"] == Json{"decline", "execute_then_fin"});
    CHECK(post_charge(r, "key-1", charge_form("op-1")).status == 402);
    CHECK(call("GET", r.admin_url("/__admin/faults")).json()["next"] == Json{"execute_then_fin"});

    CHECK(call("POST", r.admin_url("/__admin/faults"), {}, R"({"next": ["explode"]})").status ==
          400);
    CHECK(call("POST", r.admin_url("/__admin/faults"), {}, R"({"colour": 1})").status == 400);
    CHECK(call("POST", r.admin_url("/__admin/faults"), {},
               R"({"rates": {"decline": 0.7, "execute_then_fin": 0.7}})")
              .status == 400);
    CHECK(call("POST", r.admin_url("/__admin/faults"), {}, "not json").status == 400);

    const long long before = r.ledger()["now"];
    const HttpResult clock =
        call("POST", r.admin_url("/__admin/clock"), {}, R"({"advance_s": 100})");
    REQUIRE(clock.status == 200);
    CHECK(clock.json()["now"].get<long long>() >= before + 100);

    Json ledger = call("GET", r.admin_url("/__admin/ledger")).json();
    CHECK(ledger["deliveries"] == 1);
    CHECK(ledger["executions"]["op-1"] == 1);
    CHECK(ledger["payment_intents"].size() == 1);

    CHECK(call("POST", r.admin_url("/__admin/reset")).status == 200);
    Json empty = call("GET", r.admin_url("/__admin/ledger")).json();
    CHECK(empty["deliveries"] == 0);
    CHECK(empty["executions"].empty());
    CHECK(empty["payment_intents"].empty());
    CHECK(call("GET", r.admin_url("/__admin/faults")).json()["next"].empty());
    CHECK(call("GET", r.admin_url("/__admin/nothing")).status == 404);
}

// ---- HTTP and lifecycle ---------------------------------------------------------------------

TEST_CASE("fake provider: HTTP parsing is strict and bounded, keep-alive serves several requests",
          "[fake_provider][http]") {
    Running r;
    const int port = r.server.port();
    const RawOutcome bad_line = raw_exchange(port, "GET  / HTTP/1.1\r\n\r\n", milliseconds(2000));
    CHECK(bad_line.bytes.rfind("HTTP/1.1 400 ", 0) == 0);
    CHECK(bad_line.ending == Ending::fin);
    const RawOutcome huge_header =
        raw_exchange(port, "GET / HTTP/1.1\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n",
                     milliseconds(2000));
    CHECK(huge_header.bytes.rfind("HTTP/1.1 431 ", 0) == 0);
    const RawOutcome huge_body =
        raw_exchange(port, "POST /v1/payment_intents HTTP/1.1\r\nContent-Length: 100000\r\n\r\n",
                     milliseconds(2000));
    CHECK(huge_body.bytes.rfind("HTTP/1.1 413 ", 0) == 0);
    const RawOutcome chunked = raw_exchange(
        port, "POST /v1/payment_intents HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        milliseconds(2000));
    CHECK(chunked.bytes.rfind("HTTP/1.1 501 ", 0) == 0);
    CHECK(r.deliveries() == 0);

    // Two pipelined requests on one keep-alive connection; the second closes it.
    const std::string list = "GET /v1/payment_intents HTTP/1.1\r\nHost: x\r\nAuthorization: "
                             "Bearer " +
                             std::string(k_api_key) + "\r\n\r\n";
    const RawOutcome both =
        raw_exchange(port, list + raw_post("key-1", charge_form("op-1")), milliseconds(3000));
    CHECK(both.ending == Ending::fin);
    const auto first = both.bytes.find("HTTP/1.1 200 OK");
    REQUIRE(first != std::string::npos);
    CHECK(both.bytes.find("Connection: keep-alive", first) != std::string::npos);
    CHECK(both.bytes.find("HTTP/1.1 200 OK", first + 1) != std::string::npos);
    CHECK(r.executions("op-1") == 1);

    // Expect: 100-continue: the body is sent only after "100 Continue".
    const std::string form = charge_form("op-2");
    const std::string head =
        "POST /v1/payment_intents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
        std::string(k_api_key) +
        "\r\nContent-Type: application/x-www-form-urlencoded\r\nExpect: "
        "100-continue\r\nContent-Length: " +
        std::to_string(form.size()) + "\r\nConnection: close\r\n\r\n";
    const int fd = raw_connect(port);
    REQUIRE(fd >= 0);
    REQUIRE(::send(fd, head.data(), head.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(head.size()));
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    REQUIRE(n > 0);
    CHECK(std::string(buf, static_cast<std::size_t>(n)) == "HTTP/1.1 100 Continue\r\n\r\n");
    REQUIRE(::send(fd, form.data(), form.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(form.size()));
    std::string answer;
    for (ssize_t got = 0; (got = ::recv(fd, buf, sizeof buf, 0)) > 0;) {
        answer.append(buf, static_cast<std::size_t>(got));
    }
    ::close(fd);
    CHECK(answer.rfind("HTTP/1.1 200 OK", 0) == 0);
    CHECK(r.executions("op-2") == 1);
}

TEST_CASE("fake provider: stop() returns promptly mid-hang and mid-latency, joining every thread",
          "[fake_provider][lifecycle]") {
    const std::size_t threads_before = thread_count();
    {
        Running r(
            options_with(faults_from(R"({"next": ["execute_then_hang"], "hang_ms": 20000})")));
        std::thread hanging([&] {
            raw_exchange(r.server.port(), raw_post("key-1", charge_form("op-1")),
                         milliseconds(10000));
        });
        REQUIRE(wait_until([&] { return r.executions("op-1") == 1; }));
        r.server.set_faults(faults_from(R"({"latency_ms": 20000})"));
        std::thread slow([&] {
            raw_exchange(r.server.port(), raw_post("key-2", charge_form("op-2")),
                         milliseconds(10000));
        });
        REQUIRE(wait_until([&] { return r.deliveries() == 2; }));
        // An idle keep-alive connection too.
        const int idle = raw_connect(r.server.port());
        REQUIRE(idle >= 0);
        REQUIRE(wait_until([&] { return r.server.connection_threads() == 3; }));

        const auto started = SteadyClock::now();
        r.server.stop();
        CHECK(SteadyClock::now() - started < milliseconds(1000));
        CHECK(r.server.connection_threads() == 0);
        hanging.join();
        slow.join();
        ::close(idle);
        // The request stopped during its latency never executed, and its key was released.
        CHECK(r.executions("op-2") == 0);
        CHECK(r.executions("op-1") == 1);
        r.server.stop(); // idempotent
    }
    CHECK(wait_until([&] { return thread_count() == threads_before; }));
}

TEST_CASE("fake provider: the command line reads the key from the named variable only",
          "[fake_provider][cli]") {
    auto parse = [](std::vector<std::string> args, const char* key_value) {
        CLI::App app;
        CommandLine command_line;
        add_options(app, command_line);
        args.insert(args.begin(), "payrecon-fake-provider");
        std::vector<const char*> argv;
        for (const auto& a : args) {
            argv.push_back(a.c_str());
        }
        app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
        return to_options(command_line, [key_value](const char* name) -> const char* {
            if (std::string(name) == "FAKE_WEBHOOK_SECRET") {
                return "whsec_from_env";
            }
            return std::string(name) == "FAKE_STRIPE_API_KEY" ? key_value : nullptr;
        });
    };
    const FakeProviderOptions o = parse({"--api-key-env",
                                         "FAKE_STRIPE_API_KEY",
                                         "--port",
                                         "0",
                                         "--no-idempotency",
                                         "--key-retention-s",
                                         "60",
                                         "--latency-ms",
                                         "20",
                                         "--seed",
                                         "9",
                                         "--fault-next",
                                         "execute_then_fin,refuse",
                                         "--fault-rate",
                                         "decline=0.25",
                                         "--hang-ms",
                                         "100",
                                         "--lookup-stale-s",
                                         "5",
                                         "--lookup-down"},
                                        "sk_test_from_env");
    CHECK(o.account.api_key.reveal() == "sk_test_from_env");
    CHECK_FALSE(o.account.idempotency);
    CHECK(o.account.lookup);
    CHECK(o.stripe.key_retention == std::chrono::seconds(60));
    CHECK(o.faults.latency == milliseconds(20));
    CHECK(o.faults.seed == 9);
    CHECK(o.faults.next == std::vector<Fault>{Fault::execute_then_fin, Fault::refuse});
    CHECK(o.faults.rates.at(Fault::decline) == Approx(0.25));
    CHECK(o.faults.hang == milliseconds(100));
    CHECK(o.faults.lookup_stale == std::chrono::seconds(5));
    CHECK(o.faults.lookup_down);

    CHECK_THROWS_AS(parse({"--api-key-env", "FAKE_STRIPE_API_KEY"}, nullptr),
                    std::invalid_argument);
    CHECK_THROWS_AS(parse({"--api-key-env", "FAKE_STRIPE_API_KEY"}, ""), std::invalid_argument);
    CHECK_THROWS_AS(parse({"--api-key-env", "FAKE_STRIPE_API_KEY", "--fault-next", "boom"}, "k"),
                    std::invalid_argument);
    CHECK_THROWS_AS(parse({"--api-key-env", "FAKE_STRIPE_API_KEY", "--fault-rate", "decline"}, "k"),
                    std::invalid_argument);
    CHECK_THROWS_AS(parse({"--port", "0"}, "k"), CLI::RequiredError);
    CHECK(o.webhooks.url.empty()); // no webhooks unless asked

    // Webhooks: the secret from the named variable, a loopback URL only.
    const std::vector<std::string> key{"--api-key-env", "FAKE_STRIPE_API_KEY"};
    const auto with = [&](std::vector<std::string> more) {
        more.insert(more.begin(), key.begin(), key.end());
        return parse(more, "k");
    };
    const FakeProviderOptions w =
        with({"--webhook-url", "http://127.0.0.1:8080/v1/providers/stripe/webhooks",
              "--webhook-secret-env", "FAKE_WEBHOOK_SECRET", "--webhook-delay-ms", "250",
              "--webhook-drop-rate", "0.05", "--webhook-duplicate-rate", "0.1",
              "--webhook-out-of-order-rate", "0.2", "--webhook-bad-signature-rate", "0.01"});
    CHECK(w.webhooks.url == "http://127.0.0.1:8080/v1/providers/stripe/webhooks");
    CHECK(w.webhooks.secret == "whsec_from_env");
    CHECK(w.webhooks.delay == milliseconds(250));
    CHECK(w.webhooks.drop_rate == Approx(0.05));
    CHECK(w.webhooks.duplicate_rate == Approx(0.1));
    CHECK(w.webhooks.out_of_order_rate == Approx(0.2));
    CHECK(w.webhooks.bad_signature_rate == Approx(0.01));
    CHECK_THROWS_AS(with({"--webhook-url", "http://127.0.0.1:8080/hook"}), std::invalid_argument);
    CHECK_THROWS_AS(with({"--webhook-url", "http://169.254.169.254/hook", "--webhook-secret-env",
                          "FAKE_WEBHOOK_SECRET"}),
                    std::invalid_argument);
    CHECK_THROWS_AS(with({"--webhook-url", "https://shop.example.com/hook", "--webhook-secret-env",
                          "FAKE_WEBHOOK_SECRET"}),
                    std::invalid_argument);
    CHECK_THROWS_AS(with({"--webhook-drop-rate", "1.5"}), CLI::ValidationError);
}

// ---- seeded discrepancies and large windows -------------------------------------------------

namespace {

HttpResult admin_seed(const Running& r, const std::string& json) {
    return call("POST", r.admin_url("/__admin/seed"), {"Content-Type: application/json"}, json);
}

std::string window_query(long long gte, long long lt) {
    return "/v1/payment_intents?" + http::percent_encode("created[gte]") + "=" +
           std::to_string(gte) + "&" + http::percent_encode("created[lt]") + "=" +
           std::to_string(lt);
}

// Every page of a list, following starting_after (or ending_before, walking towards newer); of
// each PaymentIntent only `id` and `created` are kept.
std::vector<Json> list_pages(const Running& r, const std::string& query, int limit,
                             bool backwards = false, const std::string& from = {}) {
    std::vector<Json> pages;
    std::string cursor = from;
    for (;;) {
        std::string path = query + (query.find('?') == std::string::npos ? "?" : "&") +
                           "limit=" + std::to_string(limit);
        if (!cursor.empty()) {
            path += (backwards ? "&ending_before=" : "&starting_after=") + cursor;
        }
        const HttpResult page = get(r, path);
        REQUIRE(page.status == 200);
        // Only what paging needs: the parse dominates a Debug run otherwise.
        pages.push_back(
            Json::parse(page.body, [](int depth, Json::parse_event_t event, Json& parsed) {
                if (event != Json::parse_event_t::key) {
                    return true;
                }
                const std::string& key = parsed.get_ref<const std::string&>();
                return depth != 3 || key == "id" || key == "created";
            }));
        const Json& data = pages.back()["data"];
        if (!pages.back()["has_more"].get<bool>()) {
            break;
        }
        REQUIRE(data.size() == static_cast<std::size_t>(limit));
        cursor = (backwards ? data.front() : data.back())["id"].get<std::string>();
    }
    return pages;
}

std::vector<std::string> ids_of(const std::vector<Json>& pages) {
    std::vector<std::string> ids;
    for (const Json& page : pages) {
        for (const Json& pi : page["data"]) {
            ids.push_back(pi["id"]);
        }
    }
    return ids;
}

const Json& charge_of(const Json& pi) {
    return pi["charges"]["data"].at(0);
}

} // namespace

TEST_CASE("fake provider: an orphan charge is charged and listed but is no execution of ours",
          "[fake_provider][seed]") {
    Running r;
    Json ours = post_charge(r, "key-1", charge_form("op-1")).json();
    const long long now = r.ledger()["now"];

    // In-process: no metadata at all, an hour ago (before our charge).
    OrphanCharge dashboard;
    dashboard.amount = 1234;
    dashboard.currency = "EUR";
    dashboard.created = now - 3600;
    const auto orphan = r.server.seed_orphan_charge(dashboard);
    REQUIRE(orphan.size() == 1);
    // Over the admin API: an operation ID we never had (a system restored from a backup).
    const HttpResult seeded = admin_seed(
        r, R"({"kind": "orphan_charge", "amount": 700, "currency": "usd", "created": )" +
               std::to_string(now - 60) + R"(, "metadata": {"operation_id": "op-from-backup"}})");
    REQUIRE(seeded.status == 200);
    CHECK(seeded.json()["kind"] == "orphan_charge");
    REQUIRE(seeded.json()["ids"].size() == 1);
    const std::string ghost = seeded.json()["ids"][0];

    Json got = get(r, "/v1/payment_intents/" + orphan[0]).json();
    CHECK(got["status"] == "succeeded");
    CHECK(got["amount"] == 1234);
    CHECK(got["amount_received"] == 1234);
    CHECK(got["currency"] == "eur");
    CHECK(got["created"] == now - 3600);
    CHECK(got["metadata"].empty());
    CHECK(got["latest_charge"] == charge_of(got)["id"]);
    CHECK(charge_of(got)["paid"] == true);
    CHECK(get(r, "/v1/payment_intents/" + ghost).json()["metadata"]["operation_id"] ==
          "op-from-backup");

    const Json ledger = r.ledger();
    CHECK(ledger["deliveries"] == 1); // nothing was delivered
    CHECK(ledger["executions"] ==
          Json{{"op-1", 1}, {"(none)", 1}, {"op-from-backup", 1}}); // op-1 untouched
    CHECK(ledger["charged"] == Json{{"eur", 4999 + 1234}, {"usd", 700}});
    CHECK(ledger["seeded"]["orphan_charge"] == 2);
    CHECK(ledger["payment_intent_count"] == 3);
    // Oldest first by created: the orphan an hour ago, the one a minute ago, then ours.
    REQUIRE(ledger["payment_intents"].size() == 3);
    CHECK(ledger["payment_intents"][0]["id"] == orphan[0]);
    CHECK(ledger["payment_intents"][1]["id"] == ghost);
    CHECK(ledger["payment_intents"][2]["id"] == ours["id"]);

    // Listing: newest first; a window around the orphan finds only it.
    CHECK(ids_of(list_pages(r, "/v1/payment_intents", 2)) ==
          std::vector<std::string>{ours["id"], ghost, orphan[0]});
    CHECK(ids_of(list_pages(r, window_query(now - 3600, now - 3599), 10)) ==
          std::vector<std::string>{orphan[0]});
    CHECK(search_operation(r, "op-1").json()["data"].size() == 1);
}

TEST_CASE("fake provider: a duplicate charge is a second execution, and search finds both",
          "[fake_provider][seed]") {
    Running r;
    Json first = post_charge(r, "key-1", charge_form("op-1", 2500)).json();
    REQUIRE(post_charge(r, "key-2", charge_form("op-2", 100)).status == 200);
    r.server.advance_clock(std::chrono::seconds(5));

    const HttpResult seeded =
        admin_seed(r, R"({"kind": "duplicate_charge", "operation_id": "op-1"})");
    REQUIRE(seeded.status == 200);
    const std::string twice = seeded.json()["ids"][0];
    CHECK(twice != first["id"]);
    const auto in_process = r.server.seed_duplicate_charge(DuplicateCharge{"op-2", std::nullopt});
    REQUIRE(in_process.size() == 1);

    Json dup = get(r, "/v1/payment_intents/" + twice).json();
    CHECK(dup["status"] == "succeeded");
    CHECK(dup["amount"] == 2500);
    CHECK(dup["metadata"] == first["metadata"]);
    CHECK(dup["customer"] == first["customer"]);
    CHECK(dup["created"].get<long long>() >= first["created"].get<long long>() + 5);
    CHECK(charge_of(dup)["id"] != charge_of(first)["id"]);

    CHECK(r.executions("op-1") == 2);
    CHECK(r.executions("op-2") == 2);
    CHECK(r.deliveries() == 2);
    CHECK(r.ledger()["charged"]["eur"] == 2 * 2500 + 2 * 100);
    CHECK(r.ledger()["seeded"]["duplicate_charge"] == 2);

    // Stripe's search answers both, newest first; paging by 1 gives both too.
    Json found = search_operation(r, "op-1").json();
    REQUIRE(found["data"].size() == 2);
    CHECK(found["data"][0]["id"] == twice);
    CHECK(found["data"][1]["id"] == first["id"]);
    Json page1 = get(r, "/v1/payment_intents/search?limit=1&query=" +
                            http::percent_encode("metadata['operation_id']:'op-1'"))
                     .json();
    CHECK(page1["has_more"] == true);
    Json page2 =
        get(r, "/v1/payment_intents/search?limit=1&page=" + page1["next_page"].get<std::string>() +
                   "&query=" + http::percent_encode("metadata['operation_id']:'op-1'"))
            .json();
    REQUIRE(page2["data"].size() == 1);
    CHECK(page2["data"][0]["id"] == first["id"]);

    // The original's replay is unchanged: a seed is no request.
    CHECK(post_charge(r, "key-1", charge_form("op-1", 2500)).json() == first);
    CHECK(admin_seed(r, R"({"kind": "duplicate_charge", "operation_id": "op-never"})").status ==
          404);
    CHECK_THROWS_AS(r.server.seed_duplicate_charge({"op-never", std::nullopt}), SeedNotFound);
}

TEST_CASE("fake provider: an amount mismatch changes amount and amount_received, and charged",
          "[fake_provider][seed]") {
    Running r;
    Json first = post_charge(r, "key-1", charge_form("op-1", 4999)).json();
    Json second = post_charge(r, "key-2", charge_form("op-2", 1000)).json();

    const auto changed = r.server.seed_amount_mismatch(AmountMismatch{{"", "op-1"}, 5000});
    CHECK(changed == std::vector<std::string>{first["id"]});
    const HttpResult by_id =
        admin_seed(r, R"({"kind": "amount_mismatch", "id": ")" + second["id"].get<std::string>() +
                          R"(", "amount": 900})");
    REQUIRE(by_id.status == 200);
    CHECK(by_id.json()["ids"] == Json{second["id"]});

    Json got = get(r, "/v1/payment_intents/" + first["id"].get<std::string>()).json();
    CHECK(got["amount"] == 5000);
    CHECK(got["amount_received"] == 5000);
    CHECK(got["status"] == "succeeded");
    CHECK(charge_of(got)["amount"] == 5000);
    CHECK(charge_of(got)["amount_captured"] == 5000);
    CHECK(search_operation(r, "op-2").json()["data"][0]["amount_received"] == 900);
    CHECK(r.ledger()["charged"]["eur"] == 5000 + 900);
    CHECK(r.executions("op-1") == 1);
    CHECK(r.ledger()["seeded"]["amount_mismatch"] == 2);

    // A declined PaymentIntent: the amount changes, nothing was received, charged stays.
    REQUIRE(post_charge(r, "key-3", charge_form("op-3", 300, "pm_card_chargeDeclined")).status ==
            402);
    r.server.seed_amount_mismatch(AmountMismatch{{"", "op-3"}, 301});
    Json declined = search_operation(r, "op-3").json()["data"][0];
    CHECK(declined["amount"] == 301);
    CHECK(declined["amount_received"] == 0);
    CHECK(r.ledger()["charged"]["eur"] == 5000 + 900);

    // Refused: both or neither of id and operation_id, a bad amount, an unknown id.
    CHECK(admin_seed(r, R"({"kind": "amount_mismatch", "amount": 5})").status == 400);
    CHECK(
        admin_seed(
            r, R"({"kind": "amount_mismatch", "id": "pi_x", "operation_id": "op-1", "amount": 5})")
            .status == 400);
    CHECK(admin_seed(r, R"({"kind": "amount_mismatch", "operation_id": "op-1", "amount": 0})")
              .status == 400);
    CHECK(admin_seed(r, R"({"kind": "amount_mismatch", "id": "pi_nope", "amount": 5})").status ==
          404);
    CHECK(r.ledger()["charged"]["eur"] == 5000 + 900);
}

TEST_CASE("fake provider: a refund marks the charge refunded, the PaymentIntent stays succeeded",
          "[fake_provider][seed]") {
    Running r;
    Json pi = post_charge(r, "key-1", charge_form("op-1", 5000)).json();
    const std::string id = pi["id"];
    CHECK(charge_of(pi)["refunded"] == false);
    CHECK(charge_of(pi)["amount_refunded"] == 0);
    CHECK(charge_of(pi)["refunds"]["data"].empty());

    // A partial refund in-process: refunded stays false (Stripe: only when fully refunded).
    const long long now = r.ledger()["now"];
    CHECK(r.server.seed_refunded(Refunded{{"", "op-1"}, 2000, now + 10}) ==
          std::vector<std::string>{id});
    Json partial = get(r, "/v1/payment_intents/" + id).json();
    CHECK(partial["status"] == "succeeded");
    CHECK(partial["amount_received"] == 5000);
    CHECK(charge_of(partial)["refunded"] == false);
    CHECK(charge_of(partial)["amount_refunded"] == 2000);
    CHECK(r.ledger()["charged"]["eur"] == 3000);

    // The rest over the admin API: now fully refunded.
    const HttpResult rest = admin_seed(r, R"({"kind": "refunded", "id": ")" + id + R"("})");
    REQUIRE(rest.status == 200);
    CHECK(rest.json()["ids"] == Json{id});
    for (const Json& shown : {get(r, "/v1/payment_intents/" + id).json(),
                              get(r, "/v1/payment_intents").json()["data"][0],
                              search_operation(r, "op-1").json()["data"][0]}) {
        CHECK(shown["id"] == id);
        CHECK(shown["status"] == "succeeded");
        CHECK(shown["amount_received"] == 5000);
        const Json& charge = charge_of(shown);
        CHECK(charge["id"] == shown["latest_charge"]);
        CHECK(charge["refunded"] == true);
        CHECK(charge["amount_refunded"] == 5000);
        CHECK(charge["status"] == "succeeded");
        const Json& refunds = charge["refunds"];
        CHECK(refunds["object"] == "list");
        CHECK(refunds["total_count"] == 2);
        CHECK(refunds["url"] == "/v1/charges/" + charge["id"].get<std::string>() + "/refunds");
        REQUIRE(refunds["data"].size() == 2);
        CHECK(refunds["data"][0]["amount"] == 3000); // newest first
        CHECK(refunds["data"][1]["amount"] == 2000);
        CHECK(refunds["data"][1]["created"] == now + 10);
        CHECK(refunds["data"][0]["object"] == "refund");
        CHECK(refunds["data"][0]["charge"] == charge["id"]);
        CHECK(refunds["data"][0]["payment_intent"] == id);
        CHECK(refunds["data"][0]["status"] == "succeeded");
        CHECK(refunds["data"][0]["id"].get<std::string>().rfind("re_", 0) == 0);
    }
    const Json ledger = r.ledger();
    CHECK(ledger["charged"]["eur"] == 0);
    CHECK(ledger["refunded"]["eur"] == 5000);
    CHECK(ledger["executions"]["op-1"] == 1);
    CHECK(ledger["seeded"]["refunded"] == 2);

    // Nothing left to refund; a declined PaymentIntent has nothing to refund.
    CHECK(admin_seed(r, R"({"kind": "refunded", "id": ")" + id + R"("})").status == 400);
    REQUIRE(post_charge(r, "key-2", charge_form("op-2", 300, "pm_card_chargeDeclined")).status ==
            402);
    CHECK_THROWS_AS(r.server.seed_refunded(Refunded{{"", "op-2"}, std::nullopt, std::nullopt}),
                    std::invalid_argument);
    Json other = post_charge(r, "key-3", charge_form("op-3", 100)).json();
    CHECK(admin_seed(r, R"({"kind": "refunded", "operation_id": "op-3", "amount": 101})").status ==
          400);
    // A mismatch may not go below what is refunded.
    CHECK(admin_seed(r, R"({"kind": "refunded", "operation_id": "op-3", "amount": 60})").status ==
          200);
    CHECK(admin_seed(r, R"({"kind": "amount_mismatch", "operation_id": "op-3", "amount": 59})")
              .status == 400);
    CHECK(r.ledger()["charged"]["eur"] == 40);
    CHECK(r.ledger()["refunded"]["eur"] == 5060);
}

TEST_CASE("fake provider: the admin seed refuses malformed seeds and changes nothing",
          "[fake_provider][seed][admin]") {
    Running r;
    REQUIRE(post_charge(r, "key-1", charge_form("op-1")).status == 200);
    // The ledger's "now" is the provider's clock: it may tick over between the two readings.
    const auto books = [&r] {
        Json l = r.ledger();
        l.erase("now");
        return l;
    };
    const Json before = books();
    for (const char* body :
         {"not json", "[]", R"({"amount": 5})", R"({"kind": "meteor"})",
          R"({"kind": "orphan_charge", "amount": 5})",
          R"({"kind": "orphan_charge", "amount": 5, "currency": "euro"})",
          R"({"kind": "orphan_charge", "amount": 0, "currency": "eur"})",
          R"({"kind": "orphan_charge", "amount": "5", "currency": "eur"})",
          R"({"kind": "orphan_charge", "amount": 5, "currency": "eur", "colour": "red"})",
          R"({"kind": "orphan_charge", "amount": 5, "currency": "eur", "metadata": {"a": 1}})",
          R"({"kind": "duplicate_charge"})", R"({"kind": "refunded"})",
          R"({"kind": "bulk", "n": -1, "start_time": 0})",
          R"({"kind": "bulk", "n": 2, "start_time": 0, "spacing_ms": -5})"}) {
        INFO(body);
        const HttpResult answer = admin_seed(r, body);
        CHECK(answer.status == 400);
        CHECK(answer.json()["error"]["message"].is_string());
    }
    CHECK(books() == before);
}

TEST_CASE("fake provider: the ledger leaves out payment_intents and per-operation maps on request",
          "[fake_provider][seed][admin]") {
    Running r;
    REQUIRE(post_charge(r, "key-1", charge_form("op-1")).status == 200);
    const Json slim = call("GET", r.admin_url("/__admin/ledger?intents=false")).json();
    CHECK_FALSE(slim.contains("payment_intents"));
    CHECK(slim["payment_intent_count"] == 1);
    CHECK(slim["executions"]["op-1"] == 1);
    CHECK(slim["charged"]["eur"] == 4999);
    const Json slimmer =
        call("GET", r.admin_url("/__admin/ledger?intents=false&operations=false")).json();
    CHECK_FALSE(slimmer.contains("executions"));
    CHECK_FALSE(slimmer.contains("deliveries_by_operation"));
    CHECK(slimmer["deliveries"] == 1);
    CHECK(
        call("GET", r.admin_url("/__admin/ledger?intents=true")).json()["payment_intents"].size() ==
        1);
    CHECK(call("GET", r.admin_url("/__admin/ledger?intents=no")).status == 400);
    CHECK(call("GET", r.admin_url("/__admin/ledger?colour=red")).status == 400);
    CHECK_FALSE(r.server.ledger(LedgerOptions{false, false}).contains("payment_intents"));
}

TEST_CASE("fake provider: a bulk seed of 5000 pages through windows, each intent exactly once",
          "[fake_provider][seed][lookup]") {
    Running r;
    constexpr std::size_t n = 5000;
    constexpr long long start = 1767225600; // 2026-01-01T00:00:00Z
    // Four a second: ties within a second list the later creation first.
    const auto ids = r.server.seed_bulk(n, start, milliseconds(250), "eur", 1000, "bench-");
    REQUIRE(ids.size() == n);
    std::map<std::string, std::size_t> index;
    for (std::size_t i = 0; i < n; ++i) {
        index[ids[i]] = i;
    }
    REQUIRE(index.size() == n); // distinct ids
    const Json ledger = r.server.ledger(LedgerOptions{false, true});
    CHECK(ledger["payment_intent_count"] == n);
    CHECK(ledger["charged"]["eur"] == 1000 * static_cast<long long>(n));
    CHECK(ledger["executions"].size() == n);
    CHECK(ledger["executions"]["bench-4999"] == 1);
    CHECK(ledger["seeded"]["bulk"] == n);
    CHECK(ledger["deliveries"] == 0);
    Json last = get(r, "/v1/payment_intents/" + ids[n - 1]).json();
    CHECK(last["created"] == start + (n - 1) / 4);
    CHECK(last["metadata"]["operation_id"] == "bench-4999");
    CHECK(last["status"] == "succeeded");

    // Everything, by 100: 50 full pages, newest first, each id once.
    const auto all = ids_of(list_pages(r, "/v1/payment_intents", 100));
    REQUIRE(all.size() == n);
    for (std::size_t k = 0; k < n; ++k) {
        REQUIRE(index.at(all[k]) == n - 1 - k);
    }

    // The window [start + 1000, start + 1100): created[gte] inclusive, created[lt] exclusive:
    // intents 4000..4399 (four a second). By 7, so the last page is partial.
    const auto window = ids_of(list_pages(r, window_query(start + 1000, start + 1100), 7));
    REQUIRE(window.size() == 400);
    CHECK(index.at(window.front()) == 4399);
    CHECK(index.at(window.back()) == 4000);
    CHECK(std::set<std::string>(window.begin(), window.end()).size() == 400);
    // created[gt] / created[lte] are the other way round: intents 4004..4403.
    const auto other = ids_of(
        list_pages(r,
                   "/v1/payment_intents?" + http::percent_encode("created[gt]") + "=" +
                       std::to_string(start + 1000) + "&" + http::percent_encode("created[lte]") +
                       "=" + std::to_string(start + 1100),
                   100));
    REQUIRE(other.size() == 400);
    CHECK(index.at(other.front()) == 4403);
    CHECK(index.at(other.back()) == 4004);
    // created=N: the four of that second.
    const auto second =
        ids_of(list_pages(r, "/v1/payment_intents?created=" + std::to_string(start + 10), 100));
    CHECK(second == std::vector<std::string>{ids[43], ids[42], ids[41], ids[40]});

    // Backwards with ending_before from the oldest of the window: the same ids, page by page.
    const auto pages_back =
        list_pages(r, window_query(start + 1000, start + 1100), 30, true, window.back());
    std::vector<std::string> back;
    for (auto it = pages_back.rbegin(); it != pages_back.rend(); ++it) {
        for (const Json& pi : (*it)["data"]) {
            back.push_back(pi["id"]);
        }
    }
    back.push_back(window.back());
    CHECK(back == window);

    // A cursor in the middle of a tie: starting_after intent 41 gives 40, 39, ...
    Json after =
        get(r, window_query(start, start + 20) + "&limit=3&starting_after=" + ids[41]).json();
    REQUIRE(after["data"].size() == 3);
    CHECK(after["data"][0]["id"] == ids[40]);
    CHECK(after["data"][2]["id"] == ids[38]);
    CHECK(after["has_more"] == true);
    // An empty window, and a window with gte past lt.
    CHECK(get(r, window_query(start - 100, start)).json()["data"].empty());
    CHECK(get(r, window_query(start + 600, start + 100)).json()["data"].empty());
    CHECK(get(r, window_query(start + 1250, start + 1300)).json()["data"].empty()); // past all
}

TEST_CASE("fake provider: a bulk seed before existing intents merges into the created order",
          "[fake_provider][seed][lookup]") {
    Running r;
    const long long now = r.ledger()["now"];
    Json ours = post_charge(r, "key-1", charge_form("op-1")).json();
    // Over the admin API: 3 intents a day ago, one a minute apart, then 1,500 more spanning now.
    const HttpResult small =
        admin_seed(r, R"({"kind": "bulk", "n": 3, "start_time": )" + std::to_string(now - 86400) +
                          R"(, "spacing_ms": 60000, "amount": 250, "currency": "usd"})");
    REQUIRE(small.status == 200);
    REQUIRE(small.json()["ids"].size() == 3);
    const HttpResult big =
        admin_seed(r, R"({"kind": "bulk", "n": 1500, "start_time": )" + std::to_string(now - 750) +
                          R"(, "spacing_ms": 1000, "operation_id_prefix": ""})");
    REQUIRE(big.status == 200);
    CHECK(big.json()["count"] == 1500);
    CHECK_FALSE(big.json().contains("ids"));
    const std::string first_big = big.json()["first_id"];
    CHECK(get(r, "/v1/payment_intents/" + first_big).json()["created"] == now - 750);
    CHECK(get(r, "/v1/payment_intents/" + first_big).json()["metadata"].empty());

    const auto all = list_pages(r, "/v1/payment_intents", 100);
    std::vector<long long> created;
    std::set<std::string> seen;
    for (const Json& page : all) {
        for (const Json& pi : page["data"]) {
            created.push_back(pi["created"]);
            seen.insert(pi["id"]);
        }
    }
    REQUIRE(created.size() == 1504);
    CHECK(seen.size() == 1504);
    CHECK(std::is_sorted(created.rbegin(), created.rend())); // newest first
    CHECK(seen.count(ours["id"]) == 1);
    CHECK(all.back()["data"].back()["id"] == small.json()["ids"][0]);
    const auto ledger = r.server.ledger(); // not through Json: 1,504 intents
    CHECK(ledger["executions"]["(none)"] == 1500);
    CHECK(ledger["executions"]["bulk-2"] == 1);
    CHECK(ledger["charged"]["usd"] == 750);
    CHECK(ledger["charged"]["eur"] == 4999 + 1500 * 1000);
    // The ledger's payment_intents: oldest first by created.
    std::vector<long long> ledger_created;
    for (const auto& pi : ledger["payment_intents"]) {
        ledger_created.push_back(pi["created"]);
    }
    CHECK(std::is_sorted(ledger_created.begin(), ledger_created.end()));
    CHECK(r.server.seed_bulk(BulkSeed{0, now, milliseconds(0), "eur", 1, "x-"}).empty());
}

TEST_CASE("fake provider: 1000000 bulk intents seed in seconds and list a page in O(page)",
          "[.][fake_provider][seed][bench]") {
    auto rss_kib = [] {
        std::ifstream status("/proc/self/status");
        std::string line;
        while (std::getline(status, line)) {
            if (line.rfind("VmRSS:", 0) == 0) {
                return std::stol(line.substr(6));
            }
        }
        return 0L;
    };
    Running r;
    constexpr std::size_t n = 1'000'000;
    constexpr long long start = 1767225600;
    const long before = rss_kib();
    const auto t0 = SteadyClock::now();
    const auto ids = r.server.seed_bulk(n, start, milliseconds(86), "eur", 1000, "bench-");
    const auto seeded = SteadyClock::now() - t0;
    const long after = rss_kib();
    REQUIRE(ids.size() == n);
    const auto t1 = SteadyClock::now();
    Json page = get(r, window_query(start + 40000, start + 50000) +
                           "&limit=100&starting_after=" + ids[500'000])
                    .json();
    const auto listed = SteadyClock::now() - t1;
    REQUIRE(page["data"].size() == 100);
    const auto t2 = SteadyClock::now();
    REQUIRE(search_operation(r, "bench-999999").json()["data"].size() == 1);
    const auto searched = SteadyClock::now() - t2;
    const auto ms = [](auto d) { return std::chrono::duration_cast<milliseconds>(d).count(); };
    WARN("seed_bulk(1,000,000): " << ms(seeded) << " ms; RSS +" << (after - before) / 1024
                                  << " MiB (" << (after - before) * 1024 / static_cast<long>(n)
                                  << " bytes per intent, ids returned included); a page of 100: "
                                  << ms(listed) << " ms; a search: " << ms(searched)
                                  << " ms (both over HTTP, parse included)");
}

TEST_CASE("fake provider: GET /v1/refunds lists every refund by created window newest first, "
          "pages by starting_after, keeps the payment_intent filter",
          "[fake_provider][refunds]") {
    Running r;
    const std::string a = post_charge(r, "key-a", charge_form("op-a", 5000)).json()["id"];
    const std::string b = post_charge(r, "key-b", charge_form("op-b", 5000)).json()["id"];
    const long long now = r.ledger()["now"];
    // Four refunds of two PaymentIntents, two of them in the same second; one an hour before.
    r.server.seed_refunded(Refunded{{a, ""}, 100, now - 3600});
    r.server.seed_refunded(Refunded{{a, ""}, 200, now + 10});
    r.server.seed_refunded(Refunded{{b, ""}, 300, now + 10});
    r.server.seed_refunded(Refunded{{a, ""}, 400, now + 20});
    const std::string window = "/v1/refunds?" + http::percent_encode("created[gte]") + "=" +
                               std::to_string(now) + "&" + http::percent_encode("created[lt]") +
                               "=" + std::to_string(now + 60);
    std::vector<long long> amounts;
    std::set<std::string> ids;
    std::string cursor;
    int pages = 0;
    for (;;) {
        const HttpResult page =
            get(r, window + "&limit=2" + (cursor.empty() ? "" : "&starting_after=" + cursor));
        REQUIRE(page.status == 200);
        ++pages;
        const Json body = page.json();
        CHECK(body["object"] == "list");
        for (const Json& refund : body["data"]) {
            CHECK(refund["object"] == "refund");
            amounts.push_back(refund["amount"]);
            ids.insert(refund["id"].get<std::string>());
            cursor = refund["id"];
        }
        if (!body["has_more"].get<bool>()) {
            break;
        }
        REQUIRE(pages < 10);
    }
    // Newest first; within a second the later refund first; the early one outside the window.
    CHECK(amounts == std::vector<long long>{400, 300, 200});
    CHECK(ids.size() == 3);
    CHECK(pages == 2);

    // One PaymentIntent's, in the same window.
    const Json of_a = get(r, window + "&payment_intent=" + a).json();
    REQUIRE(of_a["data"].size() == 2);
    CHECK(of_a["data"][0]["amount"] == 400);
    CHECK(of_a["data"][1]["amount"] == 200);
    CHECK(get(r, "/v1/refunds?payment_intent=" + a).json()["data"].size() == 3);

    const HttpResult unknown = get(r, window + "&starting_after=re_unknown");
    CHECK(unknown.status == 400);
    CHECK(unknown.json()["error"]["code"] == "resource_missing");
    r.server.set_faults(faults_from(R"({"lookup_down": true})"));
    CHECK(get(r, window).status == 503);
    r.server.set_faults(faults_from(R"({"list_rate_limited": true})"));
    const HttpResult limited = get(r, window);
    CHECK(limited.status == 429);
    CHECK(limited.header("retry-after") == "1");
    CHECK(limited.json()["error"]["code"] == "rate_limit");
}
