// The checkout adapter's authorise-then-capture (issue 32) over real HTTP on loopback against the
// fake provider's Checkout.com dialect: a payment that only authorises, NonFinal and Final
// captures and a void, each found again by lookup_capture among the payment's actions; a capture
// past what is left or after a void declined; a capture whose 500 came after it executed found by
// the lookup rather than re-sent; an authorisation the provider voided 7 fake days on -- each
// counted in the fake's ledger, where the provider says what it executed.
#include "core/fingerprint.hpp"
#include "net/transport.hpp"
#include "providers/checkout/adapter.hpp"
#include "providers/config.hpp"
#include "providers/registry.hpp"
#include "tests/fake_provider/fake_provider.hpp"
#include "tests/fake_provider/faults.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

using namespace payrecon;
using namespace payrecon::providers;
using namespace std::chrono_literals;
using Status = LookupResult::Status;

namespace {

std::string new_op() {
    return "pr_" + to_hex(random_bytes(12));
}

// The fake provider on loopback and a checkout adapter speaking to it over the real transport.
struct Bench {
    std::ostringstream log;
    fake::FakeProviderOptions options;
    std::unique_ptr<fake::FakeProvider> fake;
    ProviderConfig config;
    std::unique_ptr<Provider> provider;

    Bench() {
        options.account.api_key = Secret("sk_sbox_fake_" + to_hex(random_bytes(8)));
        fake = std::make_unique<fake::FakeProvider>(options, log);
        fake->start();
        config.name = "checkout-" + to_hex(random_bytes(4));
        config.kind = "checkout";
        config.base_url = "http://127.0.0.1:" + std::to_string(fake->port());
        config.credentials = ApiKey{"CKO_SECRET_KEY", options.account.api_key};
        config.connect_timeout = 500ms;
        config.timeout = 2000ms;
        config.settings = checkout::settings("pc_q4dbxom5jbgudnjzjpz7j2z6uq");
        net::TransportOptions o;
        o.timeouts.connect = config.connect_timeout;
        o.timeouts.total = config.timeout;
        auto transport = std::make_shared<net::Transport>(o);
        provider =
            find_descriptor("checkout")->create(config, [transport](const net::HttpRequest& r) {
                return transport->send(r);
            });
    }

    nlohmann::json ledger() const { return nlohmann::json::parse(fake->ledger().dump()); }
    std::uint64_t executions(const std::string& op) const {
        const nlohmann::json l = ledger();
        return l["executions"].contains(op) ? l["executions"][op].get<std::uint64_t>() : 0;
    }

    // A payment of `amount` euro cents that only authorises; the order, its reference set.
    PaymentOrder authorise(long long amount) {
        PaymentOrder o;
        o.operation_id = new_op();
        o.payment_id = to_hex(random_bytes(16));
        o.merchant_reference = "ord-" + o.operation_id;
        o.amount = Money{amount, "EUR"};
        o.payment_method = "src_wmlfc3zyhqzehihu7giusaaawu";
        o.manual_capture = true;
        const SubmitResult r = provider->submit(o);
        REQUIRE(r.outcome == Outcome::succeeded);
        REQUIRE(r.provider_reference);
        reference = *r.provider_reference;
        return o;
    }

    AuthorizationOrder operation(const PaymentOrder& payment, OperationKind kind, long long amount,
                                 bool final = true) const {
        AuthorizationOrder o;
        o.kind = kind;
        o.operation_id = new_op();
        o.operation_row_id = to_hex(random_bytes(16));
        o.payment_id = payment.payment_id;
        o.payment_operation_id = payment.operation_id;
        o.payment_reference = reference;
        o.amount = Money{amount, "EUR"};
        o.final = final;
        o.authorized_minor = payment.amount.minor;
        return o;
    }

    std::string reference; // the last authorisation's pay_...
};

long long charged_eur(const nlohmann::json& ledger) {
    return ledger["charged"].contains("eur") ? ledger["charged"]["eur"].get<long long>() : 0;
}

} // namespace

TEST_CASE("checkout capture calls: an authorisation captured in parts, each capture found again "
          "approved, and a capture past what is left declined",
          "[providers][checkout][captures][fake]") {
    Bench b;
    const PaymentOrder payment = b.authorise(5000);
    const auto held = b.provider->lookup(payment);
    REQUIRE(held.status == Status::found);
    CHECK(held.payment->state == Outcome::succeeded);
    CHECK(held.payment->awaiting_capture);

    auto first = b.operation(payment, OperationKind::capture, 1500, false);
    const auto sent = b.provider->capture(first);
    CHECK(sent.outcome == Outcome::pending);
    const auto found = b.provider->lookup_capture(first);
    REQUIRE(found.status == Status::found);
    CHECK(found.payment->state == Outcome::succeeded);
    CHECK(found.payment->provider_reference == sent.provider_reference);
    CHECK(found.payment->amount == Money{1500, "EUR"});
    CHECK(found.duplicates.empty());

    // A capture not sent yet is not there: the same key may go.
    auto last = b.operation(payment, OperationKind::capture, 1000, true);
    last.captured_before_minor = 1500;
    CHECK(b.provider->lookup_capture(last).status == Status::not_found);
    CHECK(b.provider->capture(last).outcome == Outcome::pending);
    CHECK(b.provider->lookup_capture(last).payment->state == Outcome::succeeded);
    const auto partly = b.provider->lookup(payment);
    REQUIRE(partly.status == Status::found);
    CHECK(partly.payment->state == Outcome::succeeded);
    CHECK(partly.payment->raw_status == "Partially Captured");
    CHECK(partly.payment->amount_captured_minor == 2500);
    CHECK_FALSE(partly.payment->awaiting_capture);

    // The Final capture released the rest: another capture, or a void, is refused.
    auto more = b.operation(payment, OperationKind::capture, 100, false);
    const auto refused = b.provider->capture(more);
    CHECK(refused.outcome == Outcome::declined);
    CHECK(refused.call.error_class == "capture_not_allowed");
    const auto late_void = b.provider->void_authorization(
        b.operation(payment, OperationKind::void_authorization, 5000));
    CHECK(late_void.outcome == Outcome::declined);
    CHECK(late_void.call.error_class == "void_not_allowed");

    const auto l = b.ledger();
    CHECK(l["executions"][first.operation_id] == 1);
    CHECK(l["executions"][last.operation_id] == 1);
    CHECK(b.executions(more.operation_id) == 0);
    CHECK(l["checkout_captures"] == 2);
    CHECK(l["checkout_voids"] == 0);
    CHECK(charged_eur(l) == 2500);
}

TEST_CASE("checkout capture calls: a void releases the authorisation, is found again, and nothing "
          "is captured after it",
          "[providers][checkout][captures][fake]") {
    Bench b;
    const PaymentOrder payment = b.authorise(4000);
    const auto v = b.operation(payment, OperationKind::void_authorization, 4000);
    CHECK(b.provider->lookup_capture(v).status == Status::not_found);
    CHECK(b.provider->void_authorization(v).outcome == Outcome::pending);
    const auto found = b.provider->lookup_capture(v);
    REQUIRE(found.status == Status::found);
    CHECK(found.payment->state == Outcome::succeeded);
    CHECK(found.payment->amount == Money{4000, "EUR"});
    // The payment that only authorised now reads as a hold released.
    const auto released = b.provider->lookup(payment);
    REQUIRE(released.status == Status::found);
    CHECK(released.payment->state == Outcome::declined);
    CHECK(b.provider->capture(b.operation(payment, OperationKind::capture, 4000)).outcome ==
          Outcome::declined);
    const auto l = b.ledger();
    CHECK(l["executions"][v.operation_id] == 1);
    CHECK(l["checkout_voids"] == 1);
    CHECK(l["checkout_captures"] == 0);
    CHECK(charged_eur(l) == 0);
}

TEST_CASE("checkout capture calls: a capture answered 500 after it executed is unknown and found "
          "by the lookup, so nothing is captured twice",
          "[providers][checkout][captures][fake][faults]") {
    Bench b;
    const PaymentOrder payment = b.authorise(3000);
    const auto c = b.operation(payment, OperationKind::capture, 3000);
    b.fake->set_faults(fake::FaultConfig::from_json(
        nlohmann::json::parse(R"({"next": ["http_500_after_execute"]})")));
    const auto sent = b.provider->capture(c);
    CHECK(sent.outcome == Outcome::unknown);
    CHECK(sent.call.error_class == "http_500");
    // What the reconciler does with an unknown capture: look first, and find it.
    const auto found = b.provider->lookup_capture(c);
    REQUIRE(found.status == Status::found);
    CHECK(found.payment->state == Outcome::succeeded);
    CHECK(found.payment->operation_id == c.operation_id);
    CHECK(b.executions(c.operation_id) == 1);
    CHECK(charged_eur(b.ledger()) == 3000);
}

TEST_CASE("checkout capture calls: an authorisation left 7 fake days is released by the provider: "
          "the capture is not found, and sent is declined",
          "[providers][checkout][captures][fake][clock]") {
    Bench b;
    const PaymentOrder payment = b.authorise(2500);
    b.fake->advance_clock(std::chrono::hours(7 * 24));
    const auto c = b.operation(payment, OperationKind::capture, 2500);
    CHECK(b.provider->lookup_capture(c).status == Status::not_found);
    const auto sent = b.provider->capture(c);
    CHECK(sent.outcome == Outcome::declined);
    CHECK(sent.call.error_class == "capture_not_allowed");
    // Our void was not made either: the provider's own carries no reference of ours.
    const auto v = b.operation(payment, OperationKind::void_authorization, 2500);
    CHECK(b.provider->lookup_capture(v).status == Status::not_found);
    const auto expired = b.provider->lookup(payment);
    REQUIRE(expired.status == Status::found);
    CHECK(expired.payment->state == Outcome::declined);
    CHECK(expired.payment->raw_status == "Voided");
    CHECK(b.executions(c.operation_id) == 0);
    CHECK(charged_eur(b.ledger()) == 0);
}
