// The PayPal adapter through an injected HTTP seam: it asserts on every request sent (the OAuth2
// token request, then method, URL with query, headers, body) and replays recorded responses.
#include "core/reconcile_policy.hpp"
#include "providers/paypal/adapter.hpp"
#include "providers/registry.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::net;
using namespace payrecon::testing;
using nlohmann::json;
using std::chrono::system_clock;
using namespace std::chrono_literals;

namespace {

std::string fixture(const std::string& name) {
    return testing::fixture("paypal", name);
}

const std::string k_base = "https://api-m.paypal.test";
const std::string k_token_url = k_base + "/v1/oauth2/token";
const std::string k_client_id = "paypal-client-id-not-real-0001";
const std::string k_client_secret = "paypal-client-secret-not-real-0001";
const std::string k_token = "paypal-access-token-not-real-0001";
const std::string k_op = testing::k_sample_operation_id;

ProviderConfig config() {
    ProviderConfig c = testing::sample_config(
        "paypal", k_base,
        OAuth2ClientCredentials{"PAYPAL_CLIENT_ID", "PAYPAL_CLIENT_SECRET", k_token_url,
                                Secret(k_client_id), Secret(k_client_secret)});
    c.settle_delay = 120s; // below PayPal's search delay: raised to 3 h
    c.key_retention = 24h; // the common default: not PayPal's, which comes from its settings
    return c;
}

// 2026-12-02T10:00:00Z, when payrecon accepted the payment; the lookups' "now" is 4 h later.
const system_clock::time_point k_accepted(std::chrono::seconds(1796205600));
const system_clock::time_point k_now = k_accepted + 4h;

PaymentOrder order() {
    PaymentOrder o = testing::sample_order("pm_conformance_card");
    o.description = "conformance";
    o.created_at = k_accepted;
    return o;
}

HttpResult token_answer(const std::string& token = k_token, int expires_in = 32400) {
    return response(
        200, R"({"scope":"https://uri.paypal.com/services/payments/payment","access_token":")" +
                 token +
                 R"(","token_type":"Bearer","app_id":"APP-80W284485P519543T","expires_in":)" +
                 std::to_string(expires_in) + "}");
}

// Answers token requests from `tokens` (a fresh token each, by default) and API requests from
// `replies`, recording both.
struct Seam {
    std::vector<HttpRequest> token_requests;
    std::vector<HttpRequest> sent; // API requests
    std::vector<HttpResult> tokens;
    std::vector<HttpResult> replies;

    SendFunction fn() {
        return [this](const HttpRequest& r) {
            if (r.url == k_token_url) {
                token_requests.push_back(r);
                if (tokens.empty()) {
                    return token_answer(token_requests.size() == 1
                                            ? k_token
                                            : k_token + "-" +
                                                  std::to_string(token_requests.size()));
                }
                HttpResult out = tokens.front();
                tokens.erase(tokens.begin());
                return out;
            }
            sent.push_back(r);
            REQUIRE(!replies.empty());
            HttpResult out = replies.front();
            replies.erase(replies.begin());
            return out;
        };
    }
};

paypal::PaypalAdapter adapter(Seam& seam, ProviderConfig c = config()) {
    return paypal::PaypalAdapter(c, seam.fn(), [] { return k_now; });
}

bool listed(const HttpRequest& r, const std::string& secret) {
    return std::any_of(r.secrets_to_redact.begin(), r.secrets_to_redact.end(),
                       [&](const Secret& s) { return s.reveal() == secret; });
}

std::string search_url(const std::string& start, const std::string& end, int page) {
    return k_base + "/v1/reporting/transactions?start_date=" + start + "&end_date=" + end +
           "&fields=transaction_info&page_size=500&page=" + std::to_string(page);
}

// The window every lookup of order() searches: [accepted - 5 min, now).
const std::string k_lookup_url =
    search_url("2026-12-02T09%3A55%3A00Z", "2026-12-02T14%3A00%3A00Z", 1);

// A search page of `total_pages` holding one transaction per (id, invoice ID, value).
std::string search_page(const std::vector<std::tuple<std::string, std::string, std::string>>& items,
                        int total_pages) {
    json details = json::array();
    for (const auto& [id, invoice, value] : items) {
        details.push_back({{"transaction_info",
                            {{"transaction_id", id},
                             {"transaction_status", "S"},
                             {"transaction_initiation_date", "2026-12-02T10:00:03+00:00"},
                             {"transaction_amount", {{"currency_code", "EUR"}, {"value", value}}},
                             {"invoice_id", invoice}}}});
    }
    return json{{"transaction_details", details}, {"total_pages", total_pages}}.dump();
}

} // namespace

TEST_CASE("paypal adapter: submit fetches a token, then POSTs the order with the operation ID as "
          "PayPal-Request-Id",
          "[providers][paypal]") {
    Seam seam;
    seam.replies.push_back(response(201, fixture("order_completed.json")));
    auto a = adapter(seam);
    PaymentOrder o = order();
    o.deadline = std::chrono::steady_clock::now() + 30s;
    const auto r = a.submit(o);
    CHECK(r.outcome == Outcome::succeeded);
    CHECK(r.provider_reference == "3C679366HH908993F"); // the capture, not the order
    CHECK(r.call.http_status == 201);

    // The token: POST /v1/oauth2/token, HTTP basic with the client credentials, the form body.
    REQUIRE(seam.token_requests.size() == 1);
    const HttpRequest& t = seam.token_requests[0];
    CHECK(t.method == "POST");
    CHECK(t.body == "grant_type=client_credentials");
    CHECK(header(t, "Authorization").rfind("Basic ", 0) == 0);
    CHECK(listed(t, k_client_secret));

    REQUIRE(seam.sent.size() == 1);
    const HttpRequest& req = seam.sent[0];
    CHECK(req.method == "POST");
    CHECK(req.url == k_base + "/v2/checkout/orders");
    CHECK(req.mutating);
    CHECK(req.deadline == o.deadline);
    CHECK(header(req, "Authorization") == "Bearer " + k_token);
    CHECK(header(req, "PayPal-Request-Id") == k_op);
    CHECK(header(req, "Prefer") == "return=representation");
    CHECK(header(req, "Content-Type") == "application/json");
    CHECK(header(req, "Accept") == "application/json");
    CHECK(json::parse(req.body) == json::parse(R"({
        "intent": "CAPTURE",
        "purchase_units": [{
            "reference_id": "3aabbe24-9c9c-40ea-819f-7766897ccdda",
            "invoice_id": "pr_0123456789abcdef0123456789abcdef",
            "custom_id": "pr_0123456789abcdef0123456789abcdef",
            "description": "conformance",
            "amount": {"currency_code": "EUR", "value": "49.99"}}],
        "payment_source": {"card": {"vault_id": "pm_conformance_card"}}})"));
    for (const std::string& secret : {k_client_id, k_client_secret, k_token}) {
        INFO(secret);
        CHECK(listed(req, secret));
    }
}

TEST_CASE("paypal adapter: the token is cached across calls, and every attempt carries the same "
          "key and body",
          "[providers][paypal]") {
    Seam seam;
    seam.replies = {failure(SendClass::unknown, 28), response(503, ""),
                    response(200, fixture("order_completed.json"))};
    auto a = adapter(seam);
    CHECK(a.submit(order()).outcome == Outcome::unknown);
    CHECK(a.submit(order()).outcome == Outcome::unknown);
    CHECK(a.submit(order()).outcome == Outcome::succeeded); // the replay: 200, the latest status
    CHECK(seam.token_requests.size() == 1);
    REQUIRE(seam.sent.size() == 3);
    for (const auto& req : seam.sent) {
        CHECK(header(req, "PayPal-Request-Id") == k_op);
        CHECK(req.body == seam.sent[0].body);
        CHECK(header(req, "Authorization") == "Bearer " + k_token);
    }
}

TEST_CASE("paypal adapter: a 401 is sent once more with a fresh token, a second 401 is rejected",
          "[providers][paypal]") {
    SECTION("the fresh token works") {
        Seam seam;
        seam.replies = {response(201, fixture("order_completed.json")),
                        response(401, fixture("authentication_failure.json")),
                        response(201, fixture("order_completed.json"))};
        auto a = adapter(seam);
        CHECK(a.submit(order()).outcome == Outcome::succeeded); // the token is cached from here
        const auto r = a.submit(order());
        CHECK(r.outcome == Outcome::succeeded);
        CHECK(seam.token_requests.size() == 2);
        REQUIRE(seam.sent.size() == 3);
        CHECK(header(seam.sent[1], "Authorization") == "Bearer " + k_token);
        CHECK(header(seam.sent[2], "Authorization") == "Bearer " + k_token + "-2");
        CHECK(header(seam.sent[2], "PayPal-Request-Id") == k_op);
        CHECK(seam.sent[2].body == seam.sent[1].body);
        CHECK(listed(seam.sent[2], k_token));
        CHECK(listed(seam.sent[2], k_token + "-2"));
    }
    SECTION("the fresh token is refused too") {
        Seam seam;
        seam.replies = {response(201, fixture("order_completed.json")),
                        response(401, fixture("authentication_failure.json")),
                        response(401, fixture("authentication_failure.json"))};
        auto a = adapter(seam);
        CHECK(a.submit(order()).outcome == Outcome::succeeded);
        const auto r = a.submit(order());
        CHECK(r.outcome == Outcome::rejected);
        REQUIRE(r.rejection);
        CHECK(r.rejection->code == "AUTHENTICATION_FAILURE");
        CHECK(r.call.error_class == "request_rejected:AUTHENTICATION_FAILURE");
        CHECK(seam.token_requests.size() == 2);
        CHECK(seam.sent.size() == 3);
    }
    SECTION("a 401 with a token fetched for this very call is not sent again") {
        Seam seam;
        seam.replies = {response(401, fixture("authentication_failure.json"))};
        auto a = adapter(seam);
        CHECK(a.submit(order()).outcome == Outcome::rejected);
        CHECK(seam.token_requests.size() == 1);
        CHECK(seam.sent.size() == 1);
    }
}

TEST_CASE("paypal adapter: the token endpoint's answers are the call's when no token can be had",
          "[providers][paypal]") {
    SECTION("the client credentials are refused: rejected, nothing sent to the API") {
        Seam seam;
        seam.tokens = {response(
            401,
            R"({"error":"invalid_client","error_description":"Client Authentication failed"})")};
        auto a = adapter(seam);
        const auto r = a.submit(order());
        CHECK(r.outcome == Outcome::rejected);
        REQUIRE(r.rejection);
        CHECK(r.rejection->code == "invalid_client");
        CHECK(r.rejection->message == "Client Authentication failed");
        CHECK(seam.sent.empty());
    }
    SECTION("the token endpoint is unreachable or answers 5xx: not sent") {
        for (const HttpResult& answer : {failure(SendClass::not_sent, 7),
                                         failure(SendClass::unknown, 28), response(503, "")}) {
            Seam seam;
            seam.tokens = {answer, answer, answer};
            auto a = adapter(seam);
            CHECK(a.submit(order()).outcome == Outcome::not_sent);
            CHECK(seam.sent.empty());
            CHECK(a.lookup(order()).status == LookupResult::Status::failed);
            CHECK_FALSE(a.list({k_accepted, k_accepted + 24h}, std::nullopt).ok);
        }
    }
}

TEST_CASE("paypal adapter: every answer of the README's table comes to its outcome",
          "[providers][paypal]") {
    struct Row {
        HttpResult answer;
        Outcome outcome;
        std::string code; // the rejection's code, else the call's error class
        std::optional<std::string> reference;
    };
    const std::vector<Row> rows = {
        {response(201, fixture("order_completed.json")), Outcome::succeeded, "",
         "3C679366HH908993F"},
        {response(201, fixture("order_capture_declined.json")), Outcome::declined,
         "capture_DECLINED", "7FD03157Y4620274V"},
        {response(201, fixture("order_capture_pending.json")), Outcome::pending, "",
         "6HB64983KY1138022"},
        {response(201, fixture("order_payer_action_required.json")), Outcome::pending,
         "payer_action_required", "1AB23456CD789012E"},
        {response(422, fixture("instrument_declined.json")), Outcome::declined,
         "declined:INSTRUMENT_DECLINED", std::nullopt},
        {response(422, fixture("duplicate_invoice_id.json")), Outcome::unknown,
         "DUPLICATE_INVOICE_ID", std::nullopt},
        {response(400, fixture("invalid_request.json")), Outcome::rejected,
         "MISSING_REQUIRED_PARAMETER", std::nullopt},
        {response(403, fixture("not_authorized.json")), Outcome::rejected, "PERMISSION_DENIED",
         std::nullopt},
        {response(429, fixture("rate_limit_reached.json")), Outcome::not_sent, "rate_limited",
         std::nullopt},
        {response(500, fixture("internal_server_error.json")), Outcome::unknown, "http_500",
         std::nullopt},
        {response(409, R"({"name":"RESOURCE_CONFLICT","message":"m"})"), Outcome::unknown,
         "http_409", std::nullopt},
        {failure(SendClass::not_sent, 7), Outcome::not_sent, "not_sent:curl_7", std::nullopt},
        {failure(SendClass::unknown, 28), Outcome::unknown, "unknown:curl_28", std::nullopt},
        {failure(SendClass::unknown, 52), Outcome::unknown, "unknown:curl_52", std::nullopt},
        {failure(SendClass::unknown, 23, true), Outcome::unknown, "response_too_large",
         std::nullopt},
        {response(201, fixture("order_completed.json").substr(0, 400)), Outcome::unknown,
         "unrecognised_response", std::nullopt},
    };
    for (const Row& row : rows) {
        INFO(row.answer.http_status << " " << row.answer.body.substr(0, 120) << " curl "
                                    << row.answer.curl_code);
        Seam seam;
        seam.replies = {row.answer};
        auto a = adapter(seam);
        const auto r = a.submit(order());
        CHECK(r.outcome == row.outcome);
        CHECK(r.provider_reference == row.reference);
        if (row.outcome == Outcome::rejected) {
            REQUIRE(r.rejection);
            CHECK(r.rejection->code == row.code);
        } else {
            CHECK(r.call.error_class == row.code);
        }
    }
}

TEST_CASE("paypal adapter: a 2xx that does not echo our amount, currency or invoice ID is unknown",
          "[providers][paypal]") {
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"\"value\": \"49.99\"", "\"value\": \"49.98\""},
             {"\"currency_code\": \"EUR\"", "\"currency_code\": \"USD\""},
             {"\"invoice_id\": \"pr_0123456789abcdef0123456789abcdef\"",
              "\"invoice_id\": \"pr_0123456789abcdef0123456789abcdee\""}}) {
        std::string body = fixture("order_completed.json");
        for (auto at = body.find(from); at != std::string::npos; at = body.find(from, at)) {
            body.replace(at, from.size(), to);
        }
        INFO(to);
        Seam seam;
        seam.replies = {response(201, body)};
        auto a = adapter(seam);
        const auto r = a.submit(order());
        CHECK(r.outcome == Outcome::unknown);
        CHECK(r.call.error_class == "unrecognised_response");
        CHECK_FALSE(r.provider_reference);
    }
}

TEST_CASE("paypal adapter: amounts go through PayPal's exponents, and what it cannot carry is not "
          "sent",
          "[providers][paypal]") {
    struct Row {
        Money amount;
        std::optional<std::string> value; // nullopt: declined without a call
    };
    for (const Row& row : std::vector<Row>{{{1000, "JPY"}, "1000"},
                                           {{1000, "HUF"}, "10"},
                                           {{1050, "HUF"}, std::nullopt},
                                           {{123400, "TWD"}, "1234"},
                                           {{1234, "KWD"}, "1.234"},
                                           {{1, "USD"}, "0.01"}}) {
        INFO(row.amount.minor << " " << row.amount.currency);
        Seam seam;
        seam.replies = {response(500, "")};
        auto a = adapter(seam);
        PaymentOrder o = order();
        o.amount = row.amount;
        const auto r = a.submit(o);
        if (!row.value) {
            CHECK(r.outcome == Outcome::declined);
            CHECK(r.call.error_class == "not_expressible");
            CHECK(seam.sent.empty());
            CHECK(seam.token_requests.empty());
            continue;
        }
        REQUIRE(seam.sent.size() == 1);
        const json amount = json::parse(seam.sent[0].body)["purchase_units"][0]["amount"];
        CHECK(amount == json{{"currency_code", row.amount.currency}, {"value", *row.value}});
    }
    Seam seam;
    auto a = adapter(seam);
    PaymentOrder with_metadata = order();
    with_metadata.metadata["cart"] = "42";
    const auto carried = a.submit(with_metadata);
    CHECK(carried.outcome == Outcome::declined);
    CHECK(carried.call.error_class == "not_carried");
    PaymentOrder long_description = order();
    long_description.description = std::string(128, 'd');
    CHECK(a.submit(long_description).call.error_class == "not_expressible");
    CHECK(seam.sent.empty());
}

TEST_CASE("paypal adapter: capabilities say PayPal's facts: keys kept 6 h (72 h when configured), "
          "search 3 h behind",
          "[providers][paypal]") {
    Seam seam;
    const auto a = adapter(seam);
    CHECK(a.kind() == "paypal");
    CHECK(a.name() == "paypal");
    const Capabilities& c = a.capabilities();
    CHECK(c.honours_idempotency_keys);
    CHECK(c.key_retention == 6h); // not the configuration's common default of 24 h
    CHECK(c.max_key_length == 108);
    CHECK(c.lookup_by_operation_id);
    CHECK(c.lookup_staleness == 3h); // settle_delay 120 s raised to PayPal's search delay
    CHECK(c.list_transactions);
    CHECK(c.worst_case_call == config().connect_timeout + config().timeout);

    ProviderConfig longer = config();
    longer.settings = paypal::settings(72h);
    longer.settle_delay = 4h;
    const auto b = adapter(seam, longer);
    CHECK(b.capabilities().key_retention == 72h);
    CHECK(b.capabilities().lookup_staleness == 4h);

    ProviderConfig without = config();
    without.overrides.lookup = false;
    without.overrides.list = false;
    without.overrides.idempotency_keys = false;
    auto d = adapter(seam, without);
    CHECK_FALSE(d.capabilities().lookup_by_operation_id);
    CHECK_FALSE(d.capabilities().list_transactions);
    CHECK_FALSE(d.capabilities().honours_idempotency_keys);
    CHECK(d.lookup(order()).status == LookupResult::Status::failed);
    CHECK_FALSE(d.list({k_accepted, k_accepted + 1h}, std::nullopt).ok);
    CHECK(seam.sent.empty());
    // PayPal requires PayPal-Request-Id on an order that processes a payment: still sent.
    seam.replies = {response(201, fixture("order_completed.json"))};
    CHECK(d.submit(order()).outcome == Outcome::succeeded);
    CHECK(header(seam.sent.at(0), "PayPal-Request-Id") == k_op);
}

TEST_CASE("paypal adapter: with its capabilities the reconciler re-sends only between 3 h and "
          "5 h, after a confirmed absence",
          "[providers][paypal][reconcile]") {
    Seam seam;
    const auto a = adapter(seam);
    const Capabilities& c = a.capabilities();
    const auto decide = [&c](std::chrono::seconds since_first, LookupStatus lookup) {
        ReconcileInput in;
        in.can_lookup = c.lookup_by_operation_id;
        in.honours_idempotency_keys = c.honours_idempotency_keys;
        in.key_retention = c.key_retention;
        in.settle_delay = c.lookup_staleness;
        in.amount_minor = 4999;
        in.currency = "EUR";
        in.since_first_attempt = since_first;
        in.since_last_attempt = since_first;
        in.lookup = lookup;
        return decide_reconciliation(in, ReconcilePolicy{});
    };
    CHECK(decide(2h + 59min, LookupStatus::not_found).action == ReconcileAction::check_later);
    CHECK(decide(3h, LookupStatus::not_found).action == ReconcileAction::resend);
    CHECK(decide(4h + 59min, LookupStatus::not_found).action == ReconcileAction::resend);
    const auto late = decide(5h, LookupStatus::not_found);
    CHECK(late.action == ReconcileAction::review);
    CHECK(late.review == ReviewCode::outside_key_window);
    // A failed search never reads as absence.
    CHECK(decide(4h, LookupStatus::failed).action == ReconcileAction::check_later);
}

TEST_CASE("paypal adapter: the registry builds it for kind paypal", "[providers][paypal]") {
    const auto p = create_provider(config());
    REQUIRE(p);
    CHECK(p->kind() == "paypal");
    CHECK(std::find(known_kinds().begin(), known_kinds().end(), "paypal") != known_kinds().end());
    CHECK(carry_limits_of("paypal").provider == "PayPal");
    const ProviderDescriptor& d = descriptor_of("paypal");
    CHECK(d.credentials == std::vector<CredentialKind>{CredentialKind::oauth2_client_credentials});
    CHECK(d.webhook_verifier == nullptr);
}

TEST_CASE("paypal adapter: lookup searches from created_at - 5 min until now and finds our capture",
          "[providers][paypal]") {
    Seam seam;
    seam.replies = {response(200, fixture("search_found.json"))};
    auto a = adapter(seam);
    const auto r = a.lookup(order());
    REQUIRE(r.status == LookupResult::Status::found);
    REQUIRE(r.payment);
    CHECK(r.payment->provider_reference == "3C679366HH908993F");
    CHECK(r.payment->operation_id == k_op);
    CHECK(r.payment->amount == Money{4999, "EUR"});
    CHECK(r.payment->state == Outcome::succeeded);
    CHECK(r.duplicates.empty()); // the refund carrying our invoice ID is not a second charge
    REQUIRE(seam.sent.size() == 1);
    const HttpRequest& req = seam.sent[0];
    CHECK(req.method == "GET");
    CHECK_FALSE(req.mutating);
    CHECK(req.body.empty());
    CHECK(req.url == k_lookup_url);
    CHECK(header(req, "Authorization") == "Bearer " + k_token);
    CHECK(header(req, "PayPal-Request-Id") == "(absent)");
    CHECK(listed(req, k_token));
}

TEST_CASE("paypal adapter: lookup matches the custom field when there is no invoice ID, and "
          "reports not found only after every page answered",
          "[providers][paypal]") {
    SECTION("custom_field") {
        json page = json::parse(fixture("search_found.json"));
        page["transaction_details"][1]["transaction_info"].erase("invoice_id");
        Seam seam;
        seam.replies = {response(200, page.dump())};
        auto a = adapter(seam);
        CHECK(a.lookup(order()).status == LookupResult::Status::found);
    }
    SECTION("not found, one page") {
        Seam seam;
        seam.replies = {response(200, fixture("search_not_found.json"))};
        auto a = adapter(seam);
        CHECK(a.lookup(order()).status == LookupResult::Status::not_found);
        CHECK(seam.sent.size() == 1);
    }
    SECTION("found on page 2 of 2") {
        Seam seam;
        seam.replies = {response(200, search_page({{"9GS80322F53626837", "pr_other", "12.00"}}, 2)),
                        response(200, search_page({{"3C679366HH908993F", k_op, "49.99"}}, 2))};
        auto a = adapter(seam);
        const auto r = a.lookup(order());
        CHECK(r.status == LookupResult::Status::found);
        REQUIRE(seam.sent.size() == 2);
        CHECK(seam.sent[0].url == k_lookup_url);
        CHECK(seam.sent[1].url ==
              search_url("2026-12-02T09%3A55%3A00Z", "2026-12-02T14%3A00%3A00Z", 2));
    }
    SECTION("no transactions at all") {
        Seam seam;
        seam.replies = {
            response(200, R"({"transaction_details":[],"total_items":0,"total_pages":0})")};
        auto a = adapter(seam);
        CHECK(a.lookup(order()).status == LookupResult::Status::not_found);
    }
}

TEST_CASE("paypal adapter: a failing search page makes the lookup failed, never absent",
          "[providers][paypal]") {
    const std::string page1 = search_page({{"9GS80322F53626837", "pr_other", "12.00"}}, 2);
    const std::vector<std::pair<std::string, HttpResult>> cases = {
        {"a 500", response(500, fixture("internal_server_error.json"))},
        {"a timeout", failure(SendClass::unknown, 28)},
        {"a page cut short", response(200, page1.substr(0, page1.size() / 2))},
        {"rate limited", response(429, fixture("rate_limit_reached.json"))},
        {"a 400 (a window PayPal refuses)",
         response(400,
                  R"({"name":"INVALID_REQUEST","details":[{"issue":"INVALID_PARAMETER_VALUE"}]})")},
        {"an unreadable entry", response(200, R"({"transaction_details":[{}],"total_pages":2})")},
        {"a page without total_pages", response(200, R"({"transaction_details":[]})")},
    };
    for (const auto& [what, second] : cases) {
        INFO(what);
        Seam seam;
        seam.replies = {response(200, page1), second};
        auto a = adapter(seam);
        const auto r = a.lookup(order());
        CHECK(r.status == LookupResult::Status::failed);
        CHECK_FALSE(r.payment);
        CHECK(seam.sent.size() == 2);
    }
}

TEST_CASE("paypal adapter: two charges for one operation ID are reported, not hidden",
          "[providers][paypal]") {
    Seam seam;
    seam.replies = {
        response(200, search_page({{"A1", k_op, "49.99"}, {"B2", "pr_other", "1.00"}}, 2)),
        response(200, search_page({{"C3", k_op, "49.99"}}, 2))};
    auto a = adapter(seam);
    const auto r = a.lookup(order());
    CHECK(r.status == LookupResult::Status::found);
    REQUIRE(r.payment);
    CHECK(r.payment->provider_reference == "A1");
    REQUIRE(r.duplicates.size() == 1);
    CHECK(r.duplicates[0].provider_reference == "C3");
}

TEST_CASE("paypal adapter: lookup needs created_at, a window after it, and stops after 50 pages",
          "[providers][paypal]") {
    SECTION("no created_at") {
        Seam seam;
        auto a = adapter(seam);
        PaymentOrder o = order();
        o.created_at.reset();
        const auto r = a.lookup(o);
        CHECK(r.status == LookupResult::Status::failed);
        CHECK(r.call.error_class == "lookup_needs_time");
        CHECK(seam.sent.empty());
    }
    SECTION("the clock before the window") {
        Seam seam;
        paypal::PaypalAdapter a(config(), seam.fn(), [] { return k_accepted - 1h; });
        const auto r = a.lookup(order());
        CHECK(r.status == LookupResult::Status::failed);
        CHECK(r.call.error_class == "lookup_window_empty");
        CHECK(seam.sent.empty());
    }
    SECTION("a payment older than 31 days: the window is PayPal's longest") {
        Seam seam;
        seam.replies = {response(200, fixture("search_not_found.json"))};
        paypal::PaypalAdapter a(config(), seam.fn(), [] { return k_accepted + 90 * 24h; });
        CHECK(a.lookup(order()).status == LookupResult::Status::not_found);
        REQUIRE(seam.sent.size() == 1);
        CHECK(seam.sent[0].url ==
              search_url("2026-12-02T09%3A55%3A00Z", "2027-01-02T09%3A55%3A00Z", 1));
    }
    SECTION("too many pages") {
        Seam seam;
        for (int i = 0; i < 60; ++i) {
            seam.replies.push_back(
                response(200, search_page({{"T" + std::to_string(i), "pr_other", "1.00"}}, 1000)));
        }
        auto a = adapter(seam);
        const auto r = a.lookup(order());
        CHECK(r.status == LookupResult::Status::failed);
        CHECK(r.call.error_class == "too_many_pages");
        CHECK(seam.sent.size() == 50);
    }
}

TEST_CASE("paypal adapter: list reads one page per call and passes the cursor on",
          "[providers][paypal]") {
    Seam seam;
    json last = json::parse(fixture("search_last_page.json"));
    last["page"] = 2;
    last["total_pages"] = 2;
    seam.replies = {response(200, fixture("search_page1.json")),
                    response(429, fixture("rate_limit_reached.json")), response(200, last.dump())};
    seam.replies[1].headers = {{"retry-after", "2"}};
    auto a = adapter(seam);
    const system_clock::time_point from(std::chrono::seconds(1796169600)); // 2026-12-02T00:00:00Z
    const TimeWindow w{from, from + 24h};
    const auto page = a.list(w, std::nullopt);
    CHECK(page.ok);
    CHECK(page.items.size() == 4); // the refund (-5.00) is not a charge
    CHECK(page.next_cursor == "1796169600/2");
    const std::string start = "2026-12-02T00%3A00%3A00Z";
    const std::string end = "2026-12-03T00%3A00%3A00Z";
    CHECK(seam.sent[0].url == search_url(start, end, 1));
    CHECK_FALSE(seam.sent[0].mutating);
    const auto limited = a.list(w, page.next_cursor);
    CHECK_FALSE(limited.ok);
    CHECK(limited.retry_after == 2s);
    CHECK(seam.sent[1].url == search_url(start, end, 2));
    const auto second = a.list(w, page.next_cursor);
    CHECK(second.ok);
    CHECK(second.items.size() == 2);
    CHECK_FALSE(second.next_cursor);
    CHECK(seam.sent[2].url == search_url(start, end, 2));
}

TEST_CASE("paypal adapter: a window longer than 31 days is listed 31 days at a time",
          "[providers][paypal]") {
    Seam seam;
    seam.replies = {response(200, search_page({{"A1", "pr_a", "1.00"}}, 1)),
                    response(200, search_page({{"B2", "pr_b", "2.00"}}, 1))};
    auto a = adapter(seam);
    const system_clock::time_point from(std::chrono::seconds(1796169600)); // 2026-12-02T00:00:00Z
    const TimeWindow w{from, from + 40 * 24h};
    const auto first = a.list(w, std::nullopt);
    CHECK(first.ok);
    CHECK(first.next_cursor == std::to_string(1796169600 + 31 * 86400) + "/1");
    CHECK(seam.sent[0].url ==
          search_url("2026-12-02T00%3A00%3A00Z", "2027-01-02T00%3A00%3A00Z", 1));
    const auto second = a.list(w, first.next_cursor);
    CHECK(second.ok);
    CHECK_FALSE(second.next_cursor);
    CHECK(seam.sent[1].url ==
          search_url("2027-01-02T00%3A00%3A00Z", "2027-01-11T00%3A00%3A00Z", 1));
}

TEST_CASE("paypal adapter: a cursor that is not one it gave is refused without a call",
          "[providers][paypal]") {
    Seam seam;
    auto a = adapter(seam);
    const system_clock::time_point from(std::chrono::seconds(1796169600));
    const TimeWindow w{from, from + 24h};
    for (const std::string cursor :
         {"", "abc", "1796169600", "1796169600/", "/2", "1796169600/0", "1796169600/-1",
          "1796169600/2x", "1700000000/2", "1796256000/1", "1796169600/1234567890"}) {
        INFO(cursor);
        const auto page = a.list(w, cursor);
        CHECK_FALSE(page.ok);
        CHECK(page.call.error_class == "bad_cursor");
    }
    CHECK(seam.sent.empty());
}
