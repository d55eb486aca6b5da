// The Checkout.com adapter through an injected HTTP seam: it asserts on every request sent
// (method, URL, headers, body) and replays recorded responses: the create, what it refuses to send,
// the README's outcome table, the lookup's pages and duplicates, and its configuration. Its wire's
// pure functions are in test_checkout_wire.cpp.
#include "core/errors.hpp"
#include "providers/checkout/adapter.hpp"
#include "providers/checkout/wire.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::net;
using namespace payrecon::testing;

namespace {

std::string fixture(const std::string& name) {
    return testing::fixture("checkout", name);
}

const char* const k_key = "sk_sbox_notarealkey0000000000000";
const char* const k_channel = "pc_q4dbxom5jbgudnjzjpz7j2z6uq";
const std::string k_op = testing::k_sample_operation_id;

ProviderConfig config() {
    ProviderConfig c = testing::sample_config("checkout", "https://api.sandbox.checkout.test",
                                              ApiKey{"CKO_SECRET_KEY", Secret(k_key)});
    c.settings = checkout::settings(k_channel);
    return c;
}

PaymentOrder order() {
    PaymentOrder o = testing::sample_order("src_nwd3m4in3hkuddfpjsaevunhdy");
    o.customer = "cus_udst2tfldj6upmye2reztkmm4i";
    o.description = "2 concert tickets";
    o.metadata = {{"cart", "c-77"}};
    return o;
}

SubmitResult submit_with(int status, const std::string& body, PaymentOrder o = order()) {
    Recorder rec;
    rec.replies.push_back(response(status, body));
    checkout::CheckoutAdapter a(config(), rec.fn());
    return a.submit(o);
}

} // namespace

TEST_CASE("checkout adapter: submit sends one JSON POST with the operation ID as "
          "Cko-Idempotency-Key and reference",
          "[providers][checkout]") {
    Recorder rec;
    rec.replies.push_back(response(201, fixture("payment_captured.json")));
    checkout::CheckoutAdapter a(config(), rec.fn());
    CHECK(a.kind() == "checkout");
    CHECK(a.capabilities().honours_idempotency_keys);
    CHECK(a.capabilities().lookup_by_operation_id);
    CHECK_FALSE(a.capabilities().list_transactions);
    CHECK(a.capabilities().key_retention == std::chrono::hours(24));
    const auto r = a.submit(order());
    CHECK(r.outcome == Outcome::succeeded);
    CHECK(r.provider_reference == "pay_mbabizu24mvu3mela5njyhpit4");
    REQUIRE(rec.sent.size() == 1);
    const HttpRequest& req = rec.sent[0];
    CHECK(req.method == "POST");
    CHECK(req.url == "https://api.sandbox.checkout.test/payments");
    CHECK(req.mutating);
    CHECK(header(req, "Cko-Idempotency-Key") == k_op);
    CHECK(header(req, "Authorization") == std::string("Bearer ") + k_key);
    CHECK(header(req, "Content-Type") == "application/json");
    REQUIRE(req.secrets_to_redact.size() == 1);
    CHECK(req.secrets_to_redact[0].reveal() == k_key);
    CHECK(nlohmann::json::parse(req.body) == nlohmann::json::parse(R"({
        "source": {"type": "id", "id": "src_nwd3m4in3hkuddfpjsaevunhdy"},
        "amount": 4999, "currency": "EUR",
        "reference": "pr_0123456789abcdef0123456789abcdef",
        "processing_channel_id": "pc_q4dbxom5jbgudnjzjpz7j2z6uq",
        "capture": true, "payment_type": "Recurring", "merchant_initiated": true,
        "description": "2 concert tickets",
        "customer": {"id": "cus_udst2tfldj6upmye2reztkmm4i"},
        "metadata": {"cart": "c-77", "operation_id": "pr_0123456789abcdef0123456789abcdef",
                     "merchant_reference": "order-1001"}})"));
    // Every field is one the published PaymentRequest defines, and its required ones are sent.
    const auto& contract = provider_contract("checkout");
    const auto& properties =
        contract.at(nlohmann::json::json_pointer("/components/schemas/PaymentRequest/properties"));
    std::set<std::string> sent;
    const auto sent_body = nlohmann::json::parse(req.body);
    for (const auto& [k, v] : sent_body.items()) {
        CHECK(properties.contains(k));
        sent.insert(k);
    }
    check_required_fields_sent(
        contract.at(nlohmann::json::json_pointer("/components/schemas/PaymentRequest/required")),
        sent);
}

TEST_CASE("checkout adapter: every answer of the README's table, on purpose",
          "[providers][checkout]") {
    SECTION("Authorized with automatic capture is the charge") {
        const auto r = submit_with(201, fixture("payment_authorized.json"));
        CHECK(r.outcome == Outcome::succeeded);
    }
    SECTION("a 201 with approved false is the card's decline, with the payment's ID") {
        const auto r = submit_with(201, fixture("payment_declined.json"));
        CHECK(r.outcome == Outcome::declined);
        CHECK(r.provider_reference == "pay_ck3ohf46pyzuxjbcn2giaqnb44");
        CHECK(r.call.error_class == "card_declined:20051");
    }
    SECTION("a 202 Pending naming our reference is pending") {
        const auto r = submit_with(202, fixture("payment_pending.json"));
        CHECK(r.outcome == Outcome::pending);
    }
    SECTION("422 request_invalid is our request refused: rejected with the code") {
        const auto r = submit_with(422, fixture("request_invalid.json"));
        CHECK(r.outcome == Outcome::rejected);
        REQUIRE(r.rejection);
        CHECK(r.rejection->code == "processing_channel_id_required");
        CHECK(r.rejection->message.find("processing_channel_id_required") != std::string::npos);
    }
    SECTION("401 with Checkout.com's empty body, and 403, are rejected") {
        auto r = submit_with(401, "");
        CHECK(r.outcome == Outcome::rejected);
        REQUIRE(r.rejection);
        CHECK(r.rejection->code == "unauthorized");
        r = submit_with(403, "");
        CHECK(r.outcome == Outcome::rejected);
        CHECK(r.rejection->code == "access_forbidden");
    }
    SECTION("409, 429, 500, 502 and a 422 of another shape are unknown: a replay would execute "
            "again, so only a lookup decides") {
        for (const auto& [status, body] : std::vector<std::pair<int, std::string>>{
                 {409, fixture("idempotency_conflict.json")},
                 {429, R"({"request_id":"x","error_type":"too_many_requests"})"},
                 {500, ""},
                 {502, "<html>Bad gateway</html>"},
                 {422, "not json"}}) {
            INFO(status);
            const auto r = submit_with(status, body);
            CHECK(r.outcome == Outcome::unknown);
            CHECK_FALSE(r.rejection);
        }
    }
    SECTION("a 2xx that does not echo our amount, currency or reference proves nothing") {
        auto j = nlohmann::json::parse(fixture("payment_captured.json"));
        for (const auto& [field, value] : std::vector<std::pair<std::string, nlohmann::json>>{
                 {"amount", 4998}, {"currency", "GBP"}, {"reference", "pr_other"}}) {
            auto other = j;
            other[field] = value;
            INFO(field);
            CHECK(submit_with(201, other.dump()).outcome == Outcome::unknown);
        }
        auto no_amount = j;
        no_amount.erase("amount");
        no_amount.erase("currency");
        CHECK(submit_with(201, no_amount.dump()).outcome == Outcome::unknown);
        auto contradicting = j;
        contradicting["approved"] = false;
        CHECK(submit_with(201, contradicting.dump()).outcome == Outcome::unknown);
        auto partial = j;
        partial["status"] = "Partially Captured";
        CHECK(submit_with(201, partial.dump()).outcome == Outcome::unknown);
    }
    SECTION("the transport's failures pass through") {
        Recorder rec;
        rec.replies.push_back(failure(SendClass::not_sent, 7));
        rec.replies.push_back(failure(SendClass::unknown, 28));
        checkout::CheckoutAdapter a(config(), rec.fn());
        CHECK(a.submit(order()).outcome == Outcome::not_sent);
        CHECK(a.submit(order()).outcome == Outcome::unknown);
        CHECK(rec.sent.size() == 2);
        CHECK(header(rec.sent[1], "Cko-Idempotency-Key") == k_op);
    }
}

TEST_CASE("checkout adapter: a payment it cannot express -- the amount in Checkout.com's units, "
          "a description over 100 characters, our own metadata key -- is declined without a call",
          "[providers][checkout]") {
    Recorder rec;
    checkout::CheckoutAdapter a(config(), rec.fn());
    auto o = order();
    o.amount = Money{1234, "KWD"};
    CHECK(a.submit(o).outcome == Outcome::declined);
    o = order();
    o.description = std::string(101, 'd');
    CHECK(a.submit(o).outcome == Outcome::declined);
    o = order();
    o.metadata = {{"operation_id", "mine"}};
    CHECK(a.submit(o).outcome == Outcome::declined);
    CHECK(rec.sent.empty());
}

TEST_CASE("checkout adapter: lookup by reference -- found, not found, failed, duplicates, pages",
          "[providers][checkout]") {
    const auto lookup_with = [](std::vector<HttpResult> replies, std::vector<HttpRequest>* sent) {
        Recorder rec;
        rec.replies = std::move(replies);
        checkout::CheckoutAdapter a(config(), rec.fn());
        const auto r = a.lookup(order());
        if (sent != nullptr) {
            *sent = rec.sent;
        }
        return r;
    };
    std::vector<HttpRequest> sent;
    auto r = lookup_with({response(200, fixture("lookup_found.json"))}, &sent);
    CHECK(r.status == LookupResult::Status::found);
    REQUIRE(r.payment);
    CHECK(r.payment->provider_reference == "pay_mbabizu24mvu3mela5njyhpit4");
    CHECK(r.payment->state == Outcome::succeeded);
    CHECK(r.payment->amount == Money{4999, "EUR"});
    CHECK(r.payment->operation_id == k_op);
    CHECK(r.duplicates.empty());
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].method == "GET");
    CHECK_FALSE(sent[0].mutating);
    CHECK(sent[0].url == "https://api.sandbox.checkout.test/payments?reference=" +
                             std::string(k_op) + "&limit=100&skip=0");

    CHECK(lookup_with({response(200, fixture("lookup_empty.json"))}, nullptr).status ==
          LookupResult::Status::not_found);

    r = lookup_with({response(200, fixture("lookup_duplicate.json"))}, nullptr);
    CHECK(r.status == LookupResult::Status::found);
    REQUIRE(r.payment);
    CHECK(r.payment->provider_reference == "pay_d1abizu24mvu3mela5njyhpit4"); // the oldest
    REQUIRE(r.duplicates.size() == 1);
    CHECK(r.duplicates[0].provider_reference == "pay_d2abizu24mvu3mela5njyhpit4");

    for (const auto& reply : {response(500, ""), response(404, ""), response(200, "not json"),
                              response(200, R"({"data":{}})"), failure(SendClass::unknown, 28)}) {
        CHECK(lookup_with({reply}, nullptr).status == LookupResult::Status::failed);
    }
    // A payment the endpoint answers with another reference is not ours, and not proof of absence
    // either way: only ours count.
    auto other = nlohmann::json::parse(fixture("lookup_found.json"));
    other["data"][0]["reference"] = "pr_other";
    CHECK(lookup_with({response(200, other.dump())}, nullptr).status ==
          LookupResult::Status::not_found);

    // Pages of 100 by skip until total_count; a page that fails fails the lookup.
    nlohmann::json page1 = nlohmann::json::parse(fixture("lookup_found.json"));
    page1["total_count"] = 101;
    for (int i = 1; i < 100; ++i) {
        auto item = page1["data"][0];
        item["reference"] = "pr_other";
        page1["data"].push_back(item);
    }
    auto page2 = nlohmann::json::parse(fixture("lookup_empty.json"));
    page2["skip"] = 100;
    page2["total_count"] = 101;
    page2["data"].push_back(nlohmann::json::parse(fixture("lookup_duplicate.json"))["data"][0]);
    r = lookup_with({response(200, page1.dump()), response(200, page2.dump())}, &sent);
    CHECK(r.status == LookupResult::Status::found);
    CHECK(r.duplicates.size() == 1);
    REQUIRE(sent.size() == 2);
    CHECK(sent[1].url.find("&skip=100") != std::string::npos);
    CHECK(lookup_with({response(200, page1.dump()), response(503, "")}, nullptr).status ==
          LookupResult::Status::failed);
}

TEST_CASE("checkout adapter: list is not offered and sends nothing", "[providers][checkout]") {
    Recorder rec;
    checkout::CheckoutAdapter a(config(), rec.fn());
    const auto page = a.list(TimeWindow{}, std::nullopt);
    CHECK_FALSE(page.ok);
    CHECK(page.call.error_class == "list_not_supported");
    CHECK(rec.sent.empty());
}

namespace {

const char* checkout_env(const char* name) {
    return std::string_view(name) == "CKO_SECRET_KEY" ? k_key : nullptr;
}

std::string config_error(const std::string& text) {
    try {
        parse_config(text, "payrecon.json", checkout_env);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "(no error)";
}

} // namespace

TEST_CASE("config: a checkout provider names its processing channel", "[providers][config]") {
    const std::string entry =
        R"("kind": "checkout", "base_url": "https://api.checkout.com", "api_key_env": "CKO_SECRET_KEY")";
    const auto c =
        parse_config(R"({"providers": {"cko": {)" + entry +
                         R"(, "processing_channel_id": "pc_q4dbxom5jbgudnjzjpz7j2z6uq"}}})",
                     "payrecon.json", checkout_env);
    const ProviderConfig& p = c.providers.at("cko");
    CHECK(checkout::settings_of(p).processing_channel_id == k_channel);
    CHECK(std::get<ApiKey>(p.credentials).value.reveal() == k_key);
    for (
        const std::string& text : std::vector<std::string>{
            R"({"providers": {"a": {)" + entry + R"(}}})",
            R"({"providers": {"a": {)" + entry + R"(, "processing_channel_id": ""}}})",
            R"({"providers": {"a": {)" + entry + R"(, "processing_channel_id": 7}}})",
            R"({"providers": {"a": {)" + entry + R"(, "processing_channel_id": "pc_short"}}})",
            R"({"providers": {"a": {"kind": "stripe", "base_url": "https://api.stripe.com", "api_key_env": "CKO_SECRET_KEY", "processing_channel_id": "pc_q4dbxom5jbgudnjzjpz7j2z6uq"}}})",
        }) {
        INFO(text);
        CHECK(config_error(text).find("providers.a.processing_channel_id") != std::string::npos);
    }
}
