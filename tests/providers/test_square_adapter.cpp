// The Square adapter through an injected HTTP seam: it asserts on every request sent (method,
// URL with query, headers, body) and replays recorded responses.
#include "providers/registry.hpp"
#include "providers/square/adapter.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::net;
using namespace payrecon::testing;

namespace {

std::string fixture(const std::string& name) {
    return testing::fixture("square", name);
}

using std::chrono::system_clock;

ProviderConfig config() {
    return testing::sample_config(
        "square", "https://connect.squareup.test",
        ApiKey{"SQUARE_ACCESS_TOKEN", Secret("EAAAl_not_a_real_token_0000")});
}

// 2026-12-02T10:00:00Z, when payrecon accepted the payment.
const system_clock::time_point k_accepted(std::chrono::seconds(1764669600 + 365 * 86400));

PaymentOrder order() {
    PaymentOrder o = testing::sample_order("cnon:card-nonce-ok");
    o.created_at = k_accepted;
    return o;
}

// The window every lookup of order() lists: [accepted - 5 min, accepted + 24 h).
const std::string k_lookup_url =
    "https://connect.squareup.test/v2/payments?begin_time=2026-12-02T09%3A55%3A00Z"
    "&end_time=2026-12-03T10%3A00%3A00Z&sort_order=ASC&limit=100";

std::string payment_json(const std::string& id, const std::string& reference) {
    return R"({"id":")" + id +
           R"(","created_at":"2026-12-02T10:00:00Z","amount_money":{"amount":4999,"currency":"EUR"},"status":"COMPLETED","reference_id":")" +
           reference + R"("})";
}

} // namespace

TEST_CASE("square adapter: submit sends one JSON POST with the operation ID as idempotency_key",
          "[providers][square]") {
    Recorder rec;
    rec.replies.push_back(response(200, fixture("payment_completed.json")));
    square::SquareAdapter a(config(), rec.fn());
    const auto r = a.submit(order());
    CHECK(r.outcome == Outcome::succeeded);
    CHECK(r.provider_reference == "R2B3Z8WMVt3EAmzYWLZvz7Y69EbZY");
    REQUIRE(rec.sent.size() == 1);
    const HttpRequest& req = rec.sent[0];
    CHECK(req.method == "POST");
    CHECK(req.url == "https://connect.squareup.test/v2/payments");
    CHECK(req.mutating);
    CHECK(header(req, "Authorization") == "Bearer EAAAl_not_a_real_token_0000");
    CHECK(header(req, "Content-Type") == "application/json");
    CHECK(header(req, "Square-Version") == "2025-08-20");
    CHECK(header(req, "Idempotency-Key") == "(absent)"); // Square's key is in the body
    const auto body = nlohmann::json::parse(req.body);
    CHECK(body == nlohmann::json({{"idempotency_key", "pr_0123456789abcdef0123456789abcdef"},
                                  {"source_id", "cnon:card-nonce-ok"},
                                  {"amount_money", {{"amount", 4999}, {"currency", "EUR"}}},
                                  {"reference_id", "pr_0123456789abcdef0123456789abcdef"},
                                  {"autocomplete", true}}));
    REQUIRE(req.secrets_to_redact.size() == 1);
    CHECK(req.secrets_to_redact[0].reveal() == "EAAAl_not_a_real_token_0000");
}

TEST_CASE("square adapter: transport classes and error responses become outcomes",
          "[providers][square]") {
    Recorder rec;
    rec.replies = {
        failure(SendClass::not_sent, 7),
        failure(SendClass::unknown, 28),
        failure(SendClass::unknown, 52),
        response(400, fixture("card_declined.json")),
        response(400, fixture("idempotency_key_reused.json")),
        response(401, fixture("unauthorized.json")),
        response(429, R"({"errors":[{"category":"RATE_LIMIT_ERROR","code":"RATE_LIMITED"}]})"),
        response(503, "")};
    square::SquareAdapter a(config(), rec.fn());
    CHECK(a.submit(order()).outcome == Outcome::not_sent);
    const auto timeout = a.submit(order());
    CHECK(timeout.outcome == Outcome::unknown);
    CHECK(timeout.call.error_class == "unknown:curl_28");
    CHECK(a.submit(order()).outcome == Outcome::unknown);
    CHECK(a.submit(order()).outcome == Outcome::declined);
    CHECK(a.submit(order()).outcome == Outcome::unknown);
    CHECK(a.submit(order()).outcome == Outcome::rejected); // 401: the access token
    CHECK(a.submit(order()).outcome == Outcome::not_sent);
    CHECK(a.submit(order()).outcome == Outcome::unknown);
    REQUIRE(rec.sent.size() == 8);
    // The same operation ID as the key on every attempt, and the same body.
    for (const auto& req : rec.sent) {
        CHECK(nlohmann::json::parse(req.body)["idempotency_key"] ==
              "pr_0123456789abcdef0123456789abcdef");
        CHECK(req.body == rec.sent[0].body);
    }
}

TEST_CASE("square adapter: an amount Square cannot take is declined without sending",
          "[providers][square]") {
    Recorder rec;
    square::SquareAdapter a(config(), rec.fn());
    PaymentOrder o = order();
    o.amount = Money{100, "XXX"};
    const auto r = a.submit(o);
    CHECK(r.outcome == Outcome::declined);
    CHECK(r.call.error_class == "not_expressible");
    CHECK(rec.sent.empty());
}

TEST_CASE("square adapter: capabilities come from Square's contract and the config",
          "[providers][square]") {
    Recorder rec;
    square::SquareAdapter a(config(), rec.fn());
    CHECK(a.kind() == "square");
    CHECK(a.name() == "square");
    const Capabilities& c = a.capabilities();
    CHECK(c.honours_idempotency_keys);
    CHECK(c.key_retention == std::chrono::hours(24));
    CHECK(c.max_key_length == 45);
    CHECK(c.lookup_by_operation_id);
    CHECK(c.lookup_staleness == std::chrono::seconds(90));
    CHECK(c.list_transactions);
    ProviderConfig without = config();
    without.overrides.lookup = false;
    without.overrides.list = false;
    square::SquareAdapter b(without, rec.fn());
    CHECK_FALSE(b.capabilities().lookup_by_operation_id);
    CHECK_FALSE(b.capabilities().list_transactions);
    CHECK(b.lookup(order()).status == LookupResult::Status::failed);
    CHECK_FALSE(b.list({k_accepted, k_accepted + std::chrono::hours(1)}, std::nullopt).ok);
    CHECK(rec.sent.empty());
}

TEST_CASE("square adapter: the registry builds it for kind square", "[providers][square]") {
    const auto p = create_provider(config());
    REQUIRE(p);
    CHECK(p->kind() == "square");
    CHECK(std::find(known_kinds().begin(), known_kinds().end(), "square") != known_kinds().end());
}

TEST_CASE("square adapter: lookup lists the window around created_at and finds the match on page 2",
          "[providers][square]") {
    Recorder rec;
    rec.replies = {response(200, fixture("list_page1.json")),
                   response(200, fixture("list_page2.json"))};
    square::SquareAdapter a(config(), rec.fn());
    const auto found = a.lookup(order());
    CHECK(found.status == LookupResult::Status::found);
    REQUIRE(found.payment);
    CHECK(found.payment->provider_reference == "R2B3Z8WMVt3EAmzYWLZvz7Y69EbZY");
    CHECK(found.payment->amount == Money{4999, "EUR"});
    CHECK(found.payment->state == Outcome::succeeded);
    CHECK(found.duplicates.empty());
    REQUIRE(rec.sent.size() == 2);
    CHECK(rec.sent[0].method == "GET");
    CHECK_FALSE(rec.sent[0].mutating);
    CHECK(rec.sent[0].body.empty());
    CHECK(header(rec.sent[0], "Authorization") == "Bearer EAAAl_not_a_real_token_0000");
    CHECK(header(rec.sent[0], "Square-Version") == "2025-08-20");
    CHECK(rec.sent[0].url == k_lookup_url);
    CHECK(rec.sent[1].url == k_lookup_url + "&cursor=Fyd8yGSGRN2cOl5c6A0lRbS5RFqbZY");
}

TEST_CASE("square adapter: lookup reports not found only after every page answered",
          "[providers][square]") {
    Recorder rec;
    rec.replies = {response(200, fixture("list_page1.json")), response(200, R"({})")};
    square::SquareAdapter a(config(), rec.fn());
    CHECK(a.lookup(order()).status == LookupResult::Status::not_found);
    CHECK(rec.sent.size() == 2);
}

TEST_CASE("square adapter: a failing page makes the lookup failed, never absent",
          "[providers][square]") {
    SECTION("the second page is a 500") {
        Recorder rec;
        rec.replies = {
            response(200, fixture("list_page1.json")),
            response(500,
                     R"({"errors":[{"category":"API_ERROR","code":"INTERNAL_SERVER_ERROR"}]})")};
        square::SquareAdapter a(config(), rec.fn());
        const auto r = a.lookup(order());
        CHECK(r.status == LookupResult::Status::failed);
        CHECK(r.call.error_class == "http_500");
    }
    SECTION("the second page times out") {
        Recorder rec;
        rec.replies = {response(200, fixture("list_page1.json")), failure(SendClass::unknown, 28)};
        square::SquareAdapter a(config(), rec.fn());
        CHECK(a.lookup(order()).status == LookupResult::Status::failed);
    }
    SECTION("the second page is cut short") {
        const std::string page2 = fixture("list_page2.json");
        Recorder rec;
        rec.replies = {response(200, fixture("list_page1.json")),
                       response(200, page2.substr(0, page2.size() / 2))};
        square::SquareAdapter a(config(), rec.fn());
        CHECK(a.lookup(order()).status == LookupResult::Status::failed);
    }
    SECTION("the first page is rate limited") {
        Recorder rec;
        rec.replies = {
            response(429, R"({"errors":[{"category":"RATE_LIMIT_ERROR","code":"RATE_LIMITED"}]})")};
        square::SquareAdapter a(config(), rec.fn());
        CHECK(a.lookup(order()).status == LookupResult::Status::failed);
    }
}

TEST_CASE("square adapter: lookup without created_at fails with lookup_needs_time",
          "[providers][square]") {
    Recorder rec;
    square::SquareAdapter a(config(), rec.fn());
    PaymentOrder o = order();
    o.created_at.reset();
    const auto r = a.lookup(o);
    CHECK(r.status == LookupResult::Status::failed);
    CHECK(r.call.error_class == "lookup_needs_time");
    CHECK(rec.sent.empty());
}

TEST_CASE("square adapter: lookup stops after 50 pages with too_many_pages",
          "[providers][square]") {
    Recorder rec;
    for (int i = 0; i < 60; ++i) {
        rec.replies.push_back(response(200, R"({"payments":[)" +
                                                payment_json("p" + std::to_string(i), "pr_other") +
                                                R"(],"cursor":"c)" + std::to_string(i) + R"("})"));
    }
    square::SquareAdapter a(config(), rec.fn());
    const auto r = a.lookup(order());
    CHECK(r.status == LookupResult::Status::failed);
    CHECK(r.call.error_class == "too_many_pages");
    CHECK(rec.sent.size() == 50);
}

TEST_CASE("square adapter: two charges for one operation ID are reported, not hidden",
          "[providers][square]") {
    const std::string ours = "pr_0123456789abcdef0123456789abcdef";
    Recorder rec;
    rec.replies = {
        response(200, R"({"payments":[)" + payment_json("A", ours) + R"(],"cursor":"c1"})"),
        response(200, R"({"payments":[)" + payment_json("B", "pr_other") + "," +
                          payment_json("C", ours) + "]}")};
    square::SquareAdapter a(config(), rec.fn());
    const auto r = a.lookup(order());
    CHECK(r.status == LookupResult::Status::found);
    REQUIRE(r.payment);
    CHECK(r.payment->provider_reference == "A");
    REQUIRE(r.duplicates.size() == 1);
    CHECK(r.duplicates[0].provider_reference == "C");
}

TEST_CASE("square adapter: list reads one page per call and passes the cursor on",
          "[providers][square]") {
    Recorder rec;
    rec.replies = {
        response(200, fixture("list_page1.json")),
        response(429, R"({"errors":[{"category":"RATE_LIMIT_ERROR","code":"RATE_LIMITED"}]})"),
        response(200, fixture("list_page2.json"))};
    rec.replies[1].headers = {{"retry-after", "2"}};
    square::SquareAdapter a(config(), rec.fn());
    const TimeWindow w{k_accepted, k_accepted + std::chrono::hours(24)};
    const auto page = a.list(w, std::nullopt);
    CHECK(page.ok);
    CHECK(page.items.size() == 2);
    CHECK(page.next_cursor == "Fyd8yGSGRN2cOl5c6A0lRbS5RFqbZY");
    const std::string url =
        "https://connect.squareup.test/v2/payments?begin_time=2026-12-02T10%3A00%3A00Z"
        "&end_time=2026-12-03T10%3A00%3A00Z&sort_order=ASC&limit=100";
    CHECK(rec.sent[0].url == url);
    CHECK_FALSE(rec.sent[0].mutating);
    const auto limited = a.list(w, page.next_cursor);
    CHECK_FALSE(limited.ok);
    CHECK(limited.retry_after == std::chrono::seconds(2));
    CHECK(rec.sent[1].url == url + "&cursor=Fyd8yGSGRN2cOl5c6A0lRbS5RFqbZY");
    const auto last = a.list(w, page.next_cursor);
    CHECK(last.ok);
    CHECK(last.items.size() == 1);
    CHECK_FALSE(last.next_cursor.has_value());
}
