// list_refunds (issue 31, the statement's refunds) of the Stripe, Square and PayPal adapters over
// real HTTP on loopback against the fake provider's dialects: refunds made through the adapter's
// own refund() come back with their operation IDs, amounts and states, a refund outside the
// window does not, many refunds page through completely and each once, a page that fails is a
// failed page and the same cursor goes on after it, a cursor not given by the listing is refused,
// and a listing switched off sends nothing (the adapter's requests counted at its send function).
#include "core/fingerprint.hpp"
#include "net/transport.hpp"
#include "providers/config.hpp"
#include "providers/paypal/adapter.hpp"
#include "providers/paypal/wire.hpp"
#include "providers/registry.hpp"
#include "providers/square/wire.hpp"
#include "providers/stripe/wire.hpp"
#include "tests/fake_provider/fake_provider.hpp"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace payrecon;
using namespace payrecon::providers;
using namespace std::chrono_literals;
using Clock = std::chrono::system_clock;

namespace {

std::string new_op() {
    return "pr_" + to_hex(random_bytes(12)); // 27 characters: inside every kind's limits
}

// The fake provider on loopback and an adapter of `kind` speaking its dialect, counting the
// requests it sends.
struct Bench {
    std::ostringstream log;
    fake::FakeProviderOptions options;
    std::unique_ptr<fake::FakeProvider> fake;
    ProviderConfig config;
    std::unique_ptr<Provider> provider;
    std::string kind;
    std::shared_ptr<std::atomic<int>> sent = std::make_shared<std::atomic<int>>(0);

    explicit Bench(std::string k, bool list = true) : kind(std::move(k)) {
        options.account.api_key = Secret("sk_test_fake_" + to_hex(random_bytes(8)));
        options.paypal.client_secret = Secret("paypal-secret-" + to_hex(random_bytes(8)));
        fake = std::make_unique<fake::FakeProvider>(options, log);
        fake->start();
        config.name = kind + "-" + to_hex(random_bytes(4));
        config.kind = kind;
        config.base_url = "http://127.0.0.1:" + std::to_string(fake->port());
        config.credentials = ApiKey{"API_KEY", options.account.api_key};
        config.connect_timeout = 500ms;
        config.timeout = 2000ms;
        config.overrides.list = list;
        if (kind == "paypal") {
            config.credentials = OAuth2ClientCredentials{
                "PAYPAL_CLIENT_ID", "PAYPAL_CLIENT_SECRET", config.base_url + "/v1/oauth2/token",
                Secret(options.paypal.client_id), options.paypal.client_secret};
            config.settings = paypal::settings(std::chrono::hours(6));
        }
        provider = make(config);
    }

    // An adapter of `c` over the real transport, as create_provider makes it, counted in `sent`.
    std::unique_ptr<Provider> make(const ProviderConfig& c) {
        net::TransportOptions o;
        o.timeouts.connect = c.connect_timeout;
        o.timeouts.total = c.timeout;
        auto transport = std::make_shared<net::Transport>(o);
        return find_descriptor(c.kind)->create(
            c, [transport, counter = sent](const net::HttpRequest& r) {
                ++*counter;
                return transport->send(r);
            });
    }

    // A payment of `amount` euro cents the fake charges; its provider reference.
    std::string charge(long long amount) {
        PaymentOrder o;
        o.operation_id = new_op();
        o.payment_id = to_hex(random_bytes(16));
        o.merchant_reference = "ord-" + o.operation_id;
        o.amount = Money{amount, "EUR"};
        o.payment_method = kind == "paypal"   ? "vault_8ab3c2d1"
                           : kind == "square" ? "cnon:card-nonce-ok"
                                              : "pm_card_visa";
        o.created_at = Clock::now();
        const SubmitResult r = provider->submit(o);
        REQUIRE(r.outcome == Outcome::succeeded);
        REQUIRE(r.provider_reference);
        return *r.provider_reference;
    }

    struct Made {
        std::string op;
        std::string reference; // the refund's own, as refund() answered it
        long long amount = 0;
    };
    // A refund of `amount` cents of the payment `reference` through the adapter, answered
    // `expected`.
    Made refund(const std::string& reference, long long amount,
                Outcome expected = Outcome::succeeded) {
        RefundOrder o;
        o.operation_id = new_op();
        o.refund_id = to_hex(random_bytes(16));
        o.payment_id = to_hex(random_bytes(16));
        o.payment_reference = reference;
        o.amount = Money{amount, "EUR"};
        o.reason = "requested_by_customer";
        const SubmitResult r = provider->refund(o);
        REQUIRE(r.outcome == expected);
        REQUIRE(r.provider_reference);
        return Made{o.operation_id, *r.provider_reference, amount};
    }

    // Every page of `window` from the first, following next_cursor; fails the test on a failed
    // page. `pages` counts them.
    std::vector<RemotePayment> all(const TimeWindow& window, int* pages = nullptr) {
        std::vector<RemotePayment> out;
        std::optional<std::string> cursor;
        int n = 0;
        do {
            const ListPage page = provider->list_refunds(window, cursor);
            REQUIRE(page.ok);
            ++n;
            REQUIRE(n < 100);
            out.insert(out.end(), page.items.begin(), page.items.end());
            cursor = page.next_cursor;
        } while (cursor);
        if (pages != nullptr) {
            *pages = n;
        }
        return out;
    }
};

// The window of a minute either side of [from, to].
TimeWindow around(Clock::time_point from, Clock::time_point to) {
    return TimeWindow{from - 60s, to + 60s};
}

const std::vector<std::string> k_kinds{"stripe", "square", "paypal"};

} // namespace

TEST_CASE("list_refunds: the refunds made through the adapter are listed with their operation "
          "IDs, amounts and states, and one outside the window is not",
          "[providers][list_refunds]") {
    const std::string kind = GENERATE(from_range(k_kinds));
    INFO(kind);
    Bench b(kind);
    const std::string payment = b.charge(5000);
    const Clock::time_point early = Clock::now();
    const Bench::Made outside = b.refund(payment, 700);
    // Two hours later on the provider's clock.
    b.fake->advance_clock(2h);
    const Clock::time_point later = Clock::now() + 2h;
    const std::vector<Bench::Made> inside{b.refund(payment, 300), b.refund(payment, 1200)};

    const auto listed = b.all(around(later, later));
    REQUIRE(listed.size() == inside.size());
    std::map<std::string, const RemotePayment*> by_op;
    for (const RemotePayment& r : listed) {
        REQUIRE(r.operation_id);
        by_op[*r.operation_id] = &r;
    }
    for (const Bench::Made& m : inside) {
        REQUIRE(by_op.count(m.op) == 1);
        const RemotePayment& r = *by_op[m.op];
        CHECK(r.provider_reference == m.reference);
        CHECK(r.amount == Money{m.amount, "EUR"});
        CHECK(r.state == Outcome::succeeded);
        CHECK_FALSE(r.raw_status.empty());
        CHECK(r.created_at >= later - 60s);
        CHECK(r.created_at < later + 60s);
        CHECK_FALSE(r.raw.empty());
    }
    CHECK(by_op.count(outside.op) == 0);

    // The early window holds the first refund only.
    const auto first = b.all(around(early, early));
    REQUIRE(first.size() == 1);
    CHECK(first[0].operation_id == outside.op);
    CHECK(first[0].provider_reference == outside.reference);
    CHECK(first[0].amount == Money{700, "EUR"});
}

TEST_CASE("list_refunds: a refund that failed at the provider is listed declined",
          "[providers][list_refunds]") {
    const std::string kind = GENERATE(from_range(k_kinds));
    INFO(kind);
    Bench b(kind);
    const std::string payment = b.charge(5000);
    const Clock::time_point at = Clock::now();
    const Bench::Made good = b.refund(payment, 1000);
    Bench::Made failed;
    if (kind == "stripe") {
        // Stripe's refund.failed after a succeeded refund: the refund becomes `failed`.
        failed = b.refund(payment, 500);
        b.fake->seed_refund_reversed(fake::RefundReversed{failed.op, "expired_or_canceled_card"});
    } else {
        // Square's REJECTED refund, PayPal's FAILED one: the provider refused it as it came.
        fake::FaultConfig faults;
        faults.next = {fake::Fault::decline};
        b.fake->set_faults(faults);
        failed = b.refund(payment, 500, Outcome::declined);
    }
    const auto listed = b.all(around(at, Clock::now()));
    REQUIRE(listed.size() == 2);
    for (const RemotePayment& r : listed) {
        REQUIRE(r.operation_id);
        if (*r.operation_id == good.op) {
            CHECK(r.state == Outcome::succeeded);
        } else {
            CHECK(*r.operation_id == failed.op);
            CHECK(r.state == Outcome::declined);
            CHECK(r.amount == Money{500, "EUR"});
            CHECK(r.raw_status == (kind == "stripe"   ? "failed"
                                   : kind == "square" ? "REJECTED"
                                                      : "D"));
        }
    }
}

TEST_CASE("list_refunds: many refunds page through complete and each once, a failed or rate "
          "limited page is failed and the same cursor goes on after it",
          "[providers][list_refunds]") {
    const std::string kind = GENERATE(from_range(k_kinds));
    INFO(kind);
    Bench b(kind);
    // More than one page: Stripe and Square list 100 a page, PayPal's search 500 entries (its
    // charges among them).
    const int n = kind == "paypal" ? 505 : 130;
    const std::string payment = b.charge(100000);
    const Clock::time_point from = Clock::now();
    std::set<std::string> made;
    for (int i = 0; i < n; ++i) {
        made.insert(b.refund(payment, 1).op);
    }
    const TimeWindow window = around(from, Clock::now());

    int pages = 0;
    const auto listed = b.all(window, &pages);
    CHECK(pages >= 2);
    std::multiset<std::string> seen;
    for (const RemotePayment& r : listed) {
        REQUIRE(r.operation_id);
        seen.insert(*r.operation_id);
    }
    CHECK(seen.size() == made.size()); // each once
    CHECK(std::set<std::string>(seen.begin(), seen.end()) == made);

    // The second page fails while the provider's listing is down, and while it is rate limited;
    // then the same cursor goes on.
    const ListPage first = b.provider->list_refunds(window, std::nullopt);
    REQUIRE(first.ok);
    REQUIRE(first.next_cursor);
    fake::FaultConfig down;
    down.lookup_down = true;
    b.fake->set_faults(down);
    const ListPage failed = b.provider->list_refunds(window, first.next_cursor);
    CHECK_FALSE(failed.ok);
    CHECK(failed.items.empty());
    CHECK(failed.call.http_status == 503);
    // Rate limited: a failed page that says how long to wait.
    fake::FaultConfig limited;
    limited.list_rate_limited = true;
    b.fake->set_faults(limited);
    const ListPage wait = b.provider->list_refunds(window, first.next_cursor);
    CHECK_FALSE(wait.ok);
    CHECK(wait.items.empty());
    CHECK(wait.call.http_status == 429);
    CHECK(wait.retry_after == std::chrono::seconds(1));
    b.fake->set_faults({});
    const ListPage again = b.provider->list_refunds(window, first.next_cursor);
    REQUIRE(again.ok);
    std::set<std::string> first_ops;
    for (const RemotePayment& r : first.items) {
        first_ops.insert(*r.operation_id);
    }
    REQUIRE_FALSE(again.items.empty());
    for (const RemotePayment& r : again.items) {
        CHECK(first_ops.count(*r.operation_id) == 0); // it goes on, it does not start over
    }
}

TEST_CASE("list_refunds: a cursor the listing did not give is a failed page (bad_cursor)",
          "[providers][list_refunds]") {
    const std::string kind = GENERATE(from_range(k_kinds));
    INFO(kind);
    Bench b(kind);
    const std::string payment = b.charge(5000);
    const Clock::time_point at = Clock::now();
    b.refund(payment, 100);
    const TimeWindow window = around(at, Clock::now());
    // What none of them gave: for Stripe a re_ it does not know (Stripe refuses it), for Square
    // a cursor it never made (Square refuses it), for PayPal one that is not "<seconds>/<page>"
    // (the adapter refuses it unsent).
    const std::string bad = kind == "stripe" ? "re_" + to_hex(random_bytes(12)) : "not-a-cursor";
    const ListPage page = b.provider->list_refunds(window, bad);
    CHECK_FALSE(page.ok);
    CHECK(page.items.empty());
    CHECK(page.call.error_class == "bad_cursor");
}

TEST_CASE("list_refunds: switched off by the configuration, it sends nothing",
          "[providers][list_refunds]") {
    const std::string kind = GENERATE(from_range(k_kinds));
    INFO(kind);
    Bench b(kind, /*list=*/false);
    CHECK_FALSE(b.provider->capabilities().list_refunds);
    const ListPage page =
        b.provider->list_refunds(around(Clock::now(), Clock::now()), std::nullopt);
    CHECK_FALSE(page.ok);
    CHECK(page.call.error_class == "list_not_supported");
    CHECK(*b.sent == 0);
    // The same account with listing on: its listing is sent, and answered.
    ProviderConfig on = b.config;
    on.overrides.list = true;
    const auto listing = b.make(on);
    CHECK(listing->list_refunds(around(Clock::now(), Clock::now()), std::nullopt).ok);
    CHECK(*b.sent >= 1);
}

TEST_CASE("list_refunds: the kinds that list their refunds say so, the others answer "
          "list_not_supported",
          "[providers][list_refunds]") {
    for (const std::string kind : {"stripe", "square", "paypal"}) {
        CHECK(find_descriptor(kind)->api.list_refunds);
    }
    for (const std::string kind : {"adyen", "checkout"}) {
        CHECK_FALSE(find_descriptor(kind)->api.list_refunds);
    }
}

TEST_CASE("list_refunds: a page with one unreadable refund is no page, and PayPal's search keeps "
          "its T1107 entries only",
          "[providers][list_refunds]") {
    const std::string good_stripe =
        R"({"id":"re_1","object":"refund","amount":700,"currency":"eur","created":1796205600,"metadata":{"operation_id":"pr_a"},"status":"succeeded"})";
    bool has_more = false;
    CHECK(stripe::parse_refund_list(
        R"({"object":"list","has_more":false,"data":[)" + good_stripe + "]}", has_more));
    CHECK_FALSE(stripe::parse_refund_list(R"({"object":"list","has_more":false,"data":[)" +
                                              good_stripe + R"(,{"id":"re_2","object":"refund"}]})",
                                          has_more));

    const std::string good_square =
        R"({"id":"p_1","status":"COMPLETED","amount_money":{"amount":700,"currency":"EUR"},"reason":"requested_by_customer [pr_a]","created_at":"2026-12-02T10:00:00.000Z"})";
    const auto square_page = square::parse_envelope(R"({"refunds":[)" + good_square + "]}");
    REQUIRE(square_page);
    REQUIRE(square_page->refunds.size() == 1);
    CHECK(square_page->refunds[0].operation_id == "pr_a");
    CHECK_FALSE(square::parse_envelope(R"({"refunds":[)" + good_square + R"(,{"id":"p_2"}]})"));

    const auto entry = [](const std::string& code, const std::string& value,
                          const std::string& status = "S") {
        return R"({"transaction_info":{"transaction_id":"9X","transaction_event_code":")" + code +
               R"(","transaction_amount":{"currency_code":"EUR","value":")" + value +
               R"("},"transaction_status":")" + status +
               R"(","invoice_id":"pr_a","transaction_initiation_date":"2026-12-02T10:00:00+0000"}})";
    };
    const auto page = [](const std::vector<std::string>& entries) {
        std::string out = R"({"total_pages":1,"transaction_details":[)";
        for (std::size_t i = 0; i < entries.size(); ++i) {
            out += (i == 0 ? "" : ",") + entries[i];
        }
        return out + "]}";
    };
    // A charge, a refund, a fee reversal and a PayPal-initiated reversal: the refund only.
    const auto refunds = paypal::parse_refund_search_page(
        page({entry("T0006", "49.99"), entry("T1107", "-7.00"), entry("T1108", "-0.30"),
              entry("T1106", "-49.99", "V")}));
    REQUIRE(refunds);
    REQUIRE(refunds->items.size() == 1);
    CHECK(refunds->items[0].amount == Money{700, "EUR"});
    CHECK(refunds->items[0].operation_id == "pr_a");
    CHECK(refunds->items[0].state == Outcome::succeeded);
    CHECK(paypal::parse_refund_search_page(page({entry("T1107", "-7.00", "V")}))->items[0].state ==
          Outcome::declined);
    // One refund unreadable (no amount it can read), or an entry it cannot place: no page.
    CHECK_FALSE(paypal::parse_refund_search_page(page({entry("T1107", "-7.0.0")})));
    CHECK_FALSE(paypal::parse_refund_search_page(
        page({R"({"transaction_info":{"transaction_id":"9Y"}})"})));
    // The charges' reading of the same page leaves the refund out.
    const auto charges =
        paypal::parse_search_page(page({entry("T0006", "49.99"), entry("T1107", "-7.00")}));
    REQUIRE(charges);
    CHECK(charges->items.size() == 1);
}
