// What each adapter can carry of a payment: declared once per kind (carry_limits()), checked before
// every call, and never met by sending the payment with parts of it left out.
#include "core/carry_limits.hpp"
#include "providers/adyen/adapter.hpp"
#include "providers/adyen/wire.hpp"
#include "providers/registry.hpp"
#include "providers/square/adapter.hpp"
#include "providers/square/wire.hpp"
#include "providers/stripe/adapter.hpp"
#include "providers/stripe/wire.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::testing;

namespace {

ProviderConfig config(const std::string& kind, const std::string& base_url) {
    ProviderConfig c;
    c.name = kind;
    c.kind = kind;
    c.base_url = base_url;
    c.credentials = ApiKey{"API_KEY", Secret("not_a_real_key_0000")};
    if (kind == "adyen") {
        c.settings = adyen::settings("AcmeShopECOM", "https://shop.example.com/checkout/return");
    }
    return c;
}

PaymentOrder order(const std::string& payment_method) {
    PaymentOrder o;
    o.operation_id = "pr_0123456789abcdef0123456789abcdef";
    o.payment_id = "3aabbe24-9c9c-40ea-819f-7766897ccdda";
    o.merchant_reference = "order-1001";
    o.amount = Money{4999, "EUR"};
    o.payment_method = payment_method;
    o.created_at = std::chrono::system_clock::time_point(std::chrono::seconds(1796205600));
    return o;
}

std::map<std::string, std::string> entries(int n) {
    std::map<std::string, std::string> m;
    for (int i = 0; i < n; ++i) {
        m["k" + std::to_string(i)] = "v" + std::to_string(i);
    }
    return m;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
        ++n;
    }
    return n;
}

} // namespace

TEST_CASE("carry limits: a payment with more metadata than Stripe carries is never sent cut short",
          "[providers][stripe][regression]") {
    // 50 caller metadata entries were accepted and stored, and 48 of them sent: Stripe allows 50
    // keys and the adapter adds two of its own, so it dropped two without a word.
    Recorder rec;
    rec.replies.push_back(response(200, fixture("stripe", "payment_intent_succeeded.json")));
    stripe::StripeAdapter a(config("stripe", "https://api.stripe.test"), rec.fn());
    PaymentOrder o = order("pm_card_visa");
    o.metadata = entries(50);
    const auto refused = a.submit(o);
    CHECK(refused.outcome == Outcome::declined);
    CHECK(refused.call.error_class == "not_carried");
    CHECK(refused.call.detail.find("at most 48") != std::string::npos);
    CHECK(refused.call.detail.find("50") != std::string::npos);
    CHECK(rec.sent.empty()); // nothing reached Stripe
    CHECK_FALSE(stripe::create_body(o).has_value());

    // 48 fit: every one of them reaches Stripe, with payrecon's two.
    o.metadata = entries(48);
    const auto sent = a.submit(o);
    CHECK(sent.outcome == Outcome::succeeded);
    REQUIRE(rec.sent.size() == 1);
    CHECK(occurrences(rec.sent[0].body, "metadata%5B") == 50);
    for (const auto& [k, v] : o.metadata) {
        CHECK(rec.sent[0].body.find("metadata%5B" + k + "%5D=" + v) != std::string::npos);
    }

    // A key of payrecon's own is refused, not overwritten.
    o.metadata = {{"operation_id", "mine"}};
    CHECK(a.submit(o).call.error_class == "not_carried");
    CHECK(rec.sent.size() == 1);
}

TEST_CASE("carry limits: Adyen's metadata limits refuse instead of leaving entries out",
          "[providers][adyen][regression]") {
    Recorder rec;
    rec.replies.push_back(response(200, fixture("adyen", "authorised.json")));
    adyen::AdyenAdapter a(config("adyen", "https://checkout-test.adyen.test"), rec.fn());
    for (const auto& [name, metadata] :
         std::vector<std::pair<std::string, std::map<std::string, std::string>>>{
             {"19 entries (18 fit)", entries(19)},
             {"a key over 20 characters", {{"a_key_longer_than_twenty", "v"}}},
             {"a value over 80 characters", {{"long_value", std::string(81, 'x')}}},
             {"payrecon's own key", {{"merchant_reference", "spoofed"}}}}) {
        INFO(name);
        PaymentOrder o = order("8415718415172204");
        o.metadata = metadata;
        const auto r = a.submit(o);
        CHECK(r.outcome == Outcome::declined);
        CHECK(r.call.error_class == "not_carried");
        CHECK_FALSE(
            adyen::payment_body(o, "AcmeShopECOM", "https://shop.example.com/checkout/return")
                .has_value());
    }
    // The merchant reference travels as a metadata value: over 80 characters it cannot.
    PaymentOrder long_reference = order("8415718415172204");
    long_reference.merchant_reference = std::string(81, 'r');
    CHECK(a.submit(long_reference).call.error_class == "not_carried");
    CHECK(rec.sent.empty());

    PaymentOrder o = order("8415718415172204");
    o.metadata = entries(18);
    CHECK(a.submit(o).outcome == Outcome::succeeded);
    REQUIRE(rec.sent.size() == 1);
    CHECK(nlohmann::json::parse(rec.sent[0].body)["metadata"].size() == 20);
}

TEST_CASE("carry limits: Square carries no metadata, so a payment with some is not sent",
          "[providers][square][regression]") {
    // The Square adapter sent every payment without its metadata.
    Recorder rec;
    rec.replies.push_back(response(200, fixture("square", "payment_completed.json")));
    square::SquareAdapter a(config("square", "https://connect.squareup.test"), rec.fn());
    PaymentOrder o = order("cnon:card-nonce-ok");
    o.metadata = {{"cart", "c-77"}};
    const auto r = a.submit(o);
    CHECK(r.outcome == Outcome::declined);
    CHECK(r.call.error_class == "not_carried");
    CHECK(r.call.detail.find("no metadata") != std::string::npos);
    CHECK(rec.sent.empty());
    o.metadata.clear();
    a.submit(o);
    CHECK(rec.sent.size() == 1);
}

TEST_CASE("carry limits: every kind declares its own, and the catalog carries them",
          "[providers][config]") {
    CHECK(carry_limits_of("stripe").metadata.max_entries == 50);
    CHECK(carry_limits_of("stripe").metadata.max_key_bytes == 40);
    CHECK(carry_limits_of("stripe").metadata.max_value_bytes == 500);
    CHECK(carry_limits_of("adyen").metadata.max_entries == 20);
    CHECK(carry_limits_of("adyen").metadata.max_key_bytes == 20);
    CHECK(carry_limits_of("adyen").metadata.max_value_bytes == 80);
    CHECK(carry_limits_of("square").metadata.max_entries == 0);
    CHECK(carry_limits_of("paypal").metadata.max_entries == 0);
    for (const auto& kind : known_kinds()) {
        INFO(kind);
        CHECK_FALSE(carry_limits_of(kind).provider.empty());
    }
    CHECK_THROWS(carry_limits_of("paypal2"));
}
