// payrecon's real Square adapter (providers/square/, kind "square") over real HTTP on loopback
// against the fake provider's Square dialect (tests/fake_provider/square.hpp): what it submits,
// how it reads every answer and every fault, its lookup by listing a window and matching
// reference_id, and its listing page by page; then the executor and the reconciler on a real
// PostgreSQL with it, DESIGN section 12's rows. Counts come from the fake's ledger: executions
// (E, payments made) and deliveries (D, create requests that reached it).
#include "core/reconcile_policy.hpp"
#include "engine/executor.hpp"
#include "engine/reconciler.hpp"
#include "providers/registry.hpp"
#include "store/executor_store.hpp"
#include "tests/execution/world.hpp"
#include "tests/support/wait.hpp"

#include <catch2/catch.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

using namespace payrecon;
using namespace payrecon::testing;
using Outcome = providers::Outcome;
using LookupStatus_ = providers::LookupResult::Status;

namespace {

providers::PaymentOrder order_of(const World& w, const std::string& op, long long amount = 2500,
                                 const std::string& currency = "EUR") {
    providers::PaymentOrder order;
    order.operation_id = op;
    order.payment_id = "pay-" + op;
    order.merchant_reference = "ord-" + op;
    order.amount = Money{amount, currency};
    order.payment_method = w.method;
    order.created_at = std::chrono::system_clock::now();
    return order;
}

std::string new_op() {
    return "op-" + to_hex(random_bytes(12)); // 27 characters: inside reference_id's 40
}

nlohmann::ordered_json square_payment(const World& w, const std::string& id) {
    const auto ledger = w.fake->ledger();
    for (const auto& p : ledger["square_payments"]) {
        if (p["id"] == id) {
            return p;
        }
    }
    return {};
}

// A `refuse` closes the fake's listener for a while: true once it listens again.
bool eventually_listening(const fake::FakeProvider& fake) {
    return testing::wait_until([&] { return fake.listening(); }, std::chrono::seconds(5));
}

long long charged_eur(const World& w) {
    const auto l = w.fake->ledger();
    return l["charged"].contains("eur") ? l["charged"]["eur"].get<long long>() : 0;
}

// One Square payment, its first send meeting `first` (world.hpp's OnePayment).
struct Case : OnePayment {
    explicit Case(std::vector<fake::Fault> first, bool send = true)
        : OnePayment("square", next(std::move(first)), send) {}
};

} // namespace

// ---- the adapter against the dialect --------------------------------------------------------

TEST_CASE("square fake: the adapter's create executes once and reads the Payment, a resend with "
          "its key gets the same payment, another body under it is unknown",
          "[execution][db][square]") {
    World w("square", {});
    auto provider = providers::create_provider(w.config);
    REQUIRE(provider->kind() == "square");
    const std::string op = new_op();
    providers::PaymentOrder order = order_of(w, op);
    order.customer = "JDKYHBWT1D4F8MFH63DBMEN8Y4";
    order.description = "2 concert tickets";
    const auto first = provider->submit(order);
    INFO(first.call.error_class << " " << first.call.detail);
    REQUIRE(first.outcome == Outcome::succeeded);
    REQUIRE(first.provider_reference);
    CHECK(first.call.http_status == 200);
    // What the adapter sent, as the fake kept it.
    const auto p = square_payment(w, *first.provider_reference);
    REQUIRE_FALSE(p.is_null());
    CHECK(p["status"] == "COMPLETED");
    CHECK(p["reference_id"] == op);
    CHECK(p["amount_money"] == nlohmann::ordered_json{{"amount", 2500}, {"currency", "EUR"}});
    CHECK(p["customer_id"] == "JDKYHBWT1D4F8MFH63DBMEN8Y4");
    CHECK(p["note"] == "2 concert tickets");
    CHECK_FALSE(p.contains("source_id")); // Square does not echo the source
    CHECK(w.executions(op) == 1);
    CHECK(charged_eur(w) == 2500);

    // The executor's resend with the same operation ID: Square's first success again.
    const auto again = provider->submit(order);
    CHECK(again.outcome == Outcome::succeeded);
    CHECK(again.provider_reference == first.provider_reference);
    CHECK(w.executions(op) == 1);
    CHECK(w.deliveries(op) == 2);
    CHECK(w.fake->ledger()["replays"] == 1);

    // The same operation ID with another amount: IDEMPOTENCY_KEY_REUSED, unknown (the first may
    // have charged), nothing executed.
    providers::PaymentOrder changed = order;
    changed.amount.minor = 2600;
    const auto reused = provider->submit(changed);
    CHECK(reused.outcome == Outcome::unknown);
    CHECK(reused.call.error_class == "IDEMPOTENCY_KEY_REUSED");
    CHECK(reused.call.http_status == 400);
    CHECK(w.executions(op) == 1);
    CHECK(charged_eur(w) == 2500);

    // Found again by listing the window around created_at and matching reference_id.
    const auto found = provider->lookup(order);
    INFO(found.call.error_class << " " << found.call.detail);
    REQUIRE(found.status == LookupStatus_::found);
    CHECK(found.payment->provider_reference == *first.provider_reference);
    CHECK(found.payment->operation_id == op);
    CHECK(found.payment->state == Outcome::succeeded);
    CHECK(found.payment->raw_status == "COMPLETED");
    CHECK(found.payment->amount == Money{2500, "EUR"});
    CHECK(found.duplicates.empty());
    CHECK(provider->lookup(order_of(w, new_op())).status == LookupStatus_::not_found);
    providers::PaymentOrder timeless = order;
    timeless.created_at.reset();
    const auto needs_time = provider->lookup(timeless);
    CHECK(needs_time.status == LookupStatus_::failed);
    CHECK(needs_time.call.error_class == "lookup_needs_time");
    CHECK(w.deliveries(op) == 3); // lookups are no deliveries
}

TEST_CASE("square fake: declines, a wrong token and an unsupported currency as the adapter reads "
          "them",
          "[execution][db][square]") {
    World w("square", next({fake::Fault::decline}));
    auto provider = providers::create_provider(w.config);

    // The decline fault: 400 PAYMENT_METHOD_ERROR CARD_DECLINED with the FAILED payment.
    const std::string op1 = new_op();
    const auto by_fault = provider->submit(order_of(w, op1));
    CHECK(by_fault.outcome == Outcome::declined);
    CHECK(by_fault.call.error_class == "card_declined:CARD_DECLINED");
    REQUIRE(by_fault.provider_reference);
    CHECK(square_payment(w, *by_fault.provider_reference)["status"] == "FAILED");
    // Square's declining nonce.
    const std::string op2 = new_op();
    providers::PaymentOrder declined = order_of(w, op2);
    declined.payment_method = w.declined_method;
    const auto by_nonce = provider->submit(declined);
    CHECK(by_nonce.outcome == Outcome::declined);
    // The key holds the failed payment: a resend is declined again, nothing executed.
    CHECK(provider->submit(declined).outcome == Outcome::declined);
    CHECK(w.executions(op1) == 1);
    CHECK(w.executions(op2) == 1);
    CHECK(charged_eur(w) == 0);
    const auto found = provider->lookup(declined);
    REQUIRE(found.status == LookupStatus_::found);
    CHECK(found.payment->state == Outcome::declined);
    CHECK(found.payment->raw_status == "FAILED");

    // A wrong access token: 401 UNAUTHORIZED, rejected, nothing executed.
    providers::ProviderConfig wrong = w.config;
    wrong.credentials = providers::ApiKey{"SQUARE_ACCESS_TOKEN", Secret("EAAAwrong-token-000")};
    const std::string op3 = new_op();
    const auto refused = providers::create_provider(wrong)->submit(order_of(w, op3));
    CHECK(refused.outcome == Outcome::rejected);
    REQUIRE(refused.rejection);
    CHECK(refused.rejection->code == "UNAUTHORIZED");
    CHECK(w.executions(op3) == 0);
    CHECK(w.deliveries(op3) == 1);

    // An account that takes USD only: UNSUPPORTED_CURRENCY is final for the payment: declined.
    fake::FakeProviderOptions usd_options = w.fake_options;
    usd_options.faults = {};
    usd_options.square.currencies = {"USD"};
    std::ostringstream usd_log;
    fake::FakeProvider usd(usd_options, usd_log);
    usd.start();
    providers::ProviderConfig usd_config = w.config;
    usd_config.base_url = "http://127.0.0.1:" + std::to_string(usd.port());
    const auto usd_provider = providers::create_provider(usd_config);
    const auto unsupported = usd_provider->submit(order_of(w, new_op()));
    CHECK(unsupported.outcome == Outcome::declined);
    CHECK(unsupported.call.error_class == "invalid_request:UNSUPPORTED_CURRENCY");
    CHECK(usd_provider->submit(order_of(w, new_op(), 999, "USD")).outcome == Outcome::succeeded);
    CHECK(usd.ledger()["square_payment_count"] == 1);
}

TEST_CASE("square fake: every fault on the create as the adapter reads it, the resend with the "
          "same key never executes twice and the lookup finds what executed",
          "[execution][db][square][fault]") {
    const fake::Fault fault =
        GENERATE(fake::Fault::drop_before_execute, fake::Fault::http_500_before_execute,
                 fake::Fault::execute_then_fin, fake::Fault::execute_then_rst,
                 fake::Fault::execute_then_hang, fake::Fault::execute_then_partial,
                 fake::Fault::http_500_after_execute, fake::Fault::refuse, fake::Fault::decline);
    INFO(fake::to_string(fault));
    World w("square", next({fault}));
    auto provider = providers::create_provider(w.config);
    const std::string op = new_op();
    const providers::PaymentOrder order = order_of(w, op);
    if (fault == fake::Fault::refuse) {
        REQUIRE_FALSE(w.fake->listening());
    }
    const auto first = provider->submit(order);
    INFO(first.call.error_class << " " << first.call.detail);
    const bool executes = fault != fake::Fault::drop_before_execute &&
                          fault != fake::Fault::http_500_before_execute &&
                          fault != fake::Fault::refuse;
    if (fault == fake::Fault::refuse) {
        CHECK(first.outcome == Outcome::not_sent);
        CHECK(w.deliveries(op) == 0);
    } else if (fault == fake::Fault::decline) {
        CHECK(first.outcome == Outcome::declined);
    } else {
        CHECK(first.outcome == Outcome::unknown); // never read as success or absence
    }
    CHECK(w.executions(op) == (executes ? 1 : 0));

    // What the lookup says now.
    REQUIRE(eventually_listening(*w.fake));
    const auto looked = provider->lookup(order);
    REQUIRE(looked.status != LookupStatus_::failed);
    CHECK((looked.status == LookupStatus_::found) == executes);

    // The resend with the same operation ID.
    const auto second = provider->submit(order);
    INFO(second.call.error_class << " " << second.call.detail);
    CHECK(second.outcome ==
          (fault == fake::Fault::decline ? Outcome::declined : Outcome::succeeded));
    CHECK(w.executions(op) == 1);
    if (executes) {
        REQUIRE(second.provider_reference);
        CHECK(*second.provider_reference == looked.payment->provider_reference);
        CHECK(w.fake->ledger()["replays"] == 1);
    }
    CHECK(charged_eur(w) == (fault == fake::Fault::decline ? 0 : 2500));
    const auto found = provider->lookup(order);
    REQUIRE(found.status == LookupStatus_::found);
    CHECK(found.duplicates.empty());
}

TEST_CASE("square fake: the lookup pages through the window, list pages oldest first by cursor, "
          "duplicates, the lag, an outage and no lookup",
          "[execution][db][square][lookup]") {
    World w("square", {});
    auto provider = providers::create_provider(w.config);
    const auto started = std::chrono::system_clock::now();
    std::vector<std::string> ops;
    std::vector<std::string> refs;
    for (int i = 0; i < 130; ++i) {
        ops.push_back(new_op());
        const auto r = provider->submit(order_of(w, ops.back(), 100 + i));
        REQUIRE(r.outcome == Outcome::succeeded);
        refs.push_back(*r.provider_reference);
    }
    // The last one is on the second page of the lookup's window (oldest first, 100 a page).
    for (const std::size_t i : {std::size_t{0}, std::size_t{129}}) {
        providers::PaymentOrder order = order_of(w, ops[i], 100 + static_cast<long long>(i));
        order.created_at = started;
        const auto found = provider->lookup(order);
        REQUIRE(found.status == LookupStatus_::found);
        CHECK(found.payment->provider_reference == refs[i]);
        CHECK(found.payment->amount.minor == 100 + static_cast<long long>(i));
    }

    // list(): the statement's listing, page by page.
    const providers::TimeWindow window{std::chrono::floor<std::chrono::seconds>(started) -
                                           std::chrono::minutes(1),
                                       std::chrono::system_clock::now() + std::chrono::minutes(1)};
    std::vector<std::string> listed;
    std::optional<std::string> cursor;
    int pages = 0;
    do {
        const auto page = provider->list(window, cursor);
        REQUIRE(page.ok);
        for (const auto& p : page.items) {
            listed.push_back(p.provider_reference);
        }
        cursor = page.next_cursor;
        ++pages;
    } while (cursor && pages < 10);
    CHECK(pages == 2);
    CHECK(listed == refs); // oldest first, each once

    // Two payments under one reference (a provider without keys): found, and the other reported.
    World keyless("square", {}, false);
    auto keyless_provider = providers::create_provider(keyless.config);
    const std::string op = new_op();
    const auto order = order_of(keyless, op);
    REQUIRE(keyless_provider->submit(order).outcome == Outcome::succeeded);
    REQUIRE(keyless_provider->submit(order).outcome == Outcome::succeeded);
    CHECK(keyless.executions(op) == 2);
    const auto both = keyless_provider->lookup(order);
    REQUIRE(both.status == LookupStatus_::found);
    CHECK(both.duplicates.size() == 1);

    // The lag: not listed until lookup_stale after its creation.
    auto faults = w.fake->faults();
    faults.lookup_stale = std::chrono::seconds(60);
    w.fake->set_faults(faults);
    const providers::PaymentOrder late = order_of(w, new_op());
    REQUIRE(provider->submit(late).outcome == Outcome::succeeded);
    CHECK(provider->lookup(late).status == LookupStatus_::not_found);
    w.fake->advance_clock(std::chrono::seconds(60));
    CHECK(provider->lookup(late).status == LookupStatus_::found);

    // The outage: failed, never absence.
    faults.lookup_down = true;
    w.fake->set_faults(faults);
    const auto down = provider->lookup(late);
    CHECK(down.status == LookupStatus_::failed);
    CHECK(down.call.http_status == 503);
    CHECK_FALSE(provider->list(window, std::nullopt).ok);

    // An account whose token cannot read payments (--no-lookup): 403, failed.
    fake::FakeProviderOptions no_lookup = w.fake_options;
    no_lookup.faults = {};
    no_lookup.account.lookup = false;
    std::ostringstream log;
    fake::FakeProvider blind(no_lookup, log);
    blind.start();
    providers::ProviderConfig blind_config = w.config;
    blind_config.base_url = "http://127.0.0.1:" + std::to_string(blind.port());
    const auto blind_provider = providers::create_provider(blind_config);
    const auto nothing = blind_provider->lookup(order_of(w, new_op()));
    CHECK(nothing.status == LookupStatus_::failed);
    CHECK(nothing.call.http_status == 403);
}

// ---- the executor and the reconciler --------------------------------------------------------

TEST_CASE("square fake: a charge goes through once, with the operation ID as the key",
          "[execution][db][square]") {
    Case c({});
    CHECK(c.state() == "succeeded");
    CHECK(c.w.executions(c.op) == 1);
    CHECK(c.w.deliveries(c.op) == 1);
    const std::string reference = c.column("provider_reference");
    CHECK(square_payment(c.w, reference)["reference_id"] == c.op);
    CHECK(charged_eur(c.w) == 2500);
    CHECK(count_rows("outbox", c.w.tenant.tenant_id, "event_type = 'payment.succeeded'") == 1);
}

TEST_CASE("square fake: executed, then the connection hangs, FIN, RST, half a body or a 500: "
          "unknown, found by the lookup, succeeded, E=1 D=1, no re-send",
          "[execution][db][square][fault]") {
    const fake::Fault fault =
        GENERATE(fake::Fault::execute_then_hang, fake::Fault::execute_then_fin,
                 fake::Fault::execute_then_rst, fake::Fault::execute_then_partial,
                 fake::Fault::http_500_after_execute);
    INFO(fake::to_string(fault));
    Case c({fault});
    CHECK(c.state() == "unknown");
    CHECK(c.send() == 0);
    const auto out = c.reconcile();
    REQUIRE(out.size() == 1);
    CHECK(out[0].lookup == LookupStatus::found);
    CHECK(out[0].decision.action == ReconcileAction::adopt_succeeded);
    CHECK(c.state() == "succeeded");
    CHECK(c.column("provider_reference") == c.w.fake->ledger()["square_payments"][0]["id"]);
    CHECK(c.send() == 0);
    CHECK(c.reconcile().empty());
    CHECK(c.w.executions(c.op) == 1);
    CHECK(c.w.deliveries(c.op) == 1);
    CHECK(charged_eur(c.w) == 2500);
}

TEST_CASE("square fake: dropped or answered 500 before executing: confirmed absent, sent again "
          "with the same key, E=1 D=2",
          "[execution][db][square][fault]") {
    const fake::Fault fault =
        GENERATE(fake::Fault::drop_before_execute, fake::Fault::http_500_before_execute);
    INFO(fake::to_string(fault));
    Case c({fault});
    CHECK(c.state() == "unknown");
    const auto out = c.reconcile();
    REQUIRE(out.size() == 1);
    CHECK(out[0].lookup == LookupStatus::not_found);
    CHECK(out[0].decision.action == ReconcileAction::resend);
    CHECK(c.send() == 1);
    CHECK(c.state() == "succeeded");
    CHECK(c.w.executions(c.op) == 1);
    CHECK(c.w.deliveries(c.op) == 2);
}

TEST_CASE("square fake: a decline fails the payment, the lookup down sends an unknown one to "
          "review, a refused connection is sent again, a fenced-out worker's sends are absorbed",
          "[execution][db][square][fault]") {
    SECTION("decline fault and declining nonce") {
        for (const bool by_method : {false, true}) {
            Case c(by_method ? std::vector<fake::Fault>{} : std::vector{fake::Fault::decline},
                   false);
            if (by_method) {
                exec_sql("UPDATE payments SET payment_method = '" + c.w.declined_method +
                         "' WHERE merchant_reference = '" + c.ref + "'");
            }
            CHECK(c.send() == 1);
            CHECK(c.state() == "failed");
            CHECK(c.w.executions(c.op) == 1);
            CHECK(charged_eur(c.w) == 0);
        }
    }
    SECTION("lookup down") {
        Case c({fake::Fault::execute_then_fin});
        auto f = c.w.fake->faults();
        f.lookup_down = true;
        c.w.fake->set_faults(f);
        ReconcilePolicy policy;
        policy.max_lookup_failures = 1;
        const auto out = c.reconcile(policy);
        REQUIRE(out.size() == 1);
        CHECK(out[0].lookup == LookupStatus::failed);
        CHECK(c.state() == "needs_review");
        CHECK(c.column("review_code") == "lookup_failing");
        CHECK(c.send() == 0);
        CHECK(c.w.executions(c.op) == 1);
    }
    SECTION("refused") {
        Case c({fake::Fault::refuse}, false);
        CHECK(c.send() == 1);
        CHECK(c.state() == "retry_scheduled");
        // Sent again each time the listener is back.
        CHECK(testing::wait_until(
            [&] {
                c.send();
                return c.state() == "succeeded";
            },
            std::chrono::seconds(20), std::chrono::milliseconds(50)));
        CHECK(c.w.executions(c.op) == 1);
        CHECK(c.w.deliveries(c.op) == 1);
    }
    SECTION("fenced-out late sends") {
        Case c({});
        REQUIRE(c.state() == "succeeded");
        providers::PaymentOrder order = order_of(c.w, c.op);
        order.payment_id = c.w.payment_id_of(c.ref);
        order.merchant_reference = c.ref;
        CHECK(c.provider->submit(order).outcome == Outcome::succeeded);
        CHECK(c.provider->submit(order).outcome == Outcome::succeeded);
        CHECK(c.w.executions(c.op) == 1);
        CHECK(c.w.deliveries(c.op) == 3);
        CHECK(charged_eur(c.w) == 2500);
    }
}
