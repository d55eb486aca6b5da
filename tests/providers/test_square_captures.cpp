// Square's authorise-then-capture (issue 32, DESIGN section 16): a payment created with
// `autocomplete: false` (APPROVED), completed (POST /v2/payments/{id}/complete) or canceled
// (/cancel) -- neither keyed, so a lost answer is settled by reading the payment, never by a blind
// re-send --, a smaller capture lowered first by UpdatePayment under a key of its own: the
// requests against the contract kept from Square's document, the outcome tables and the lookup
// through an injected send function, and the whole sequence over loopback against the fake
// provider's Square dialect.
#include "core/fingerprint.hpp"
#include "net/transport.hpp"
#include "providers/square/adapter.hpp"
#include "providers/square/wire.hpp"
#include "tests/fake_provider/fake_provider.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::providers::square;
using namespace payrecon::testing;
using net::SendClass;
using nlohmann::json;
using Status = LookupResult::Status;
using namespace std::chrono_literals;

namespace {

const json& spec() {
    return provider_contract("square");
}

const std::string k_base = "https://connect.squareup.test";
const std::string k_payment = "R2B3Z8WMVt3EAmzYWLZvz7Y69EbZY";
const std::string k_capture_op = "pr_01a24d5e6f7a7b8c9d0e1f2a3b4c5d6e";
const std::string k_void_op = "pr_01a24d5f00007b8c9d0e1f2a3b4c5d6f";
const std::string k_version = "56pRkL3slrzet2iQrTp9n0bdJVYTB9YEWdTNjQfZOPV6o";

ProviderConfig config() {
    return sample_config("square", k_base,
                         ApiKey{"SQUARE_ACCESS_TOKEN", Secret("EAAAl_not_a_real_token_0000")});
}

PaymentOrder manual_order() {
    PaymentOrder o = sample_order("cnon:card-nonce-ok");
    o.merchant_reference.clear();
    o.metadata.clear();
    o.manual_capture = true;
    return o;
}

AuthorizationOrder capture_order(long long amount = 4999, bool final = true) {
    AuthorizationOrder o;
    o.kind = OperationKind::capture;
    o.operation_id = k_capture_op;
    o.operation_row_id = "01a24d5e-6f7a-7b8c-9d0e-1f2a3b4c5d6e";
    o.payment_id = "3aabbe24-9c9c-40ea-819f-7766897ccdda";
    o.payment_operation_id = k_sample_operation_id;
    o.payment_reference = k_payment;
    o.amount = Money{amount, "EUR"};
    o.final = final;
    o.authorized_minor = 4999;
    return o;
}

AuthorizationOrder void_order() {
    AuthorizationOrder o = capture_order();
    o.kind = OperationKind::void_authorization;
    o.operation_id = k_void_op;
    return o;
}

// A Payment as Square answers it (GetPayment, CompletePayment, CancelPayment, UpdatePayment).
std::string payment_json(const std::string& status, long long amount = 4999,
                         const std::string& id = k_payment, const std::string& currency = "EUR") {
    return json{{"payment",
                 {{"id", id},
                  {"status", status},
                  {"amount_money", {{"amount", amount}, {"currency", currency}}},
                  {"approved_money", {{"amount", 4999}, {"currency", currency}}},
                  {"reference_id", k_sample_operation_id},
                  {"delay_action", "CANCEL"},
                  {"delay_duration", "P7D"},
                  {"created_at", "2026-12-02T10:00:00.000Z"},
                  {"version_token", k_version}}}}
        .dump();
}

std::string error_json(const std::string& category, const std::string& code) {
    return json{{"errors", {{{"category", category}, {"code", code}, {"detail", "no"}}}}}.dump();
}

std::string bad_request() {
    return error_json("INVALID_REQUEST_ERROR", "BAD_REQUEST");
}

} // namespace

TEST_CASE("square captures: the descriptor authorises for 7 days, captures once and whole, and "
          "finds a capture or a void by reading the payment",
          "[providers][square][captures]") {
    const ApiCapabilities& api = descriptor().api;
    CHECK(api.manual_capture);
    CHECK_FALSE(api.multiple_captures);
    CHECK(api.authorization_validity == std::chrono::hours(7 * 24));
    CHECK(api.capture_lookup);
    // The 7 days are the document's card-not-present default of the delay_duration we send.
    const std::string prose = spec()
                                  .at("components")
                                  .at("schemas")
                                  .at("CreatePaymentRequest")
                                  .at("properties")
                                  .at("delay_duration")
                                  .at("description");
    CHECK(prose.find(std::string("Card-not-present payments: \"") + k_delay_duration) !=
          std::string::npos);
    const std::string action = spec()
                                   .at("components")
                                   .at("schemas")
                                   .at("CreatePaymentRequest")
                                   .at("properties")
                                   .at("delay_action")
                                   .at("description");
    CHECK(action.find("CANCEL or COMPLETE") != std::string::npos);
}

TEST_CASE("square captures: the manual create, the update, the complete and the cancel send only "
          "fields Square's document names, and neither complete nor cancel carries a key",
          "[providers][square][captures]") {
    const auto& schemas = spec().at("components").at("schemas");
    const json create = json::parse(*create_body(manual_order()));
    CHECK(create.at("autocomplete") == false);
    CHECK(create.at("delay_action") == "CANCEL");
    CHECK(create.at("delay_duration") == "P7D");
    for (const auto& [key, value] : create.items()) {
        INFO(key);
        CHECK(schemas.at("CreatePaymentRequest").at("properties").contains(key));
    }
    // A payment charged at once says nothing of delays (Square refuses them with autocomplete).
    const json at_once = json::parse(*create_body(sample_order("cnon:card-nonce-ok")));
    CHECK(at_once.at("autocomplete") == true);
    CHECK_FALSE(at_once.contains("delay_action"));
    CHECK_FALSE(at_once.contains("delay_duration"));

    const json update = json::parse(*update_body(capture_order(2000)));
    CHECK(update.at("idempotency_key") == k_capture_op + "-amount");
    CHECK(update.at("idempotency_key").get<std::string>().size() <=
          schemas.at("UpdatePaymentRequest")
              .at("properties")
              .at("idempotency_key")
              .at("maxLength")
              .get<std::size_t>());
    std::set<std::string> sent;
    for (const auto& [key, value] : update.items()) {
        INFO(key);
        CHECK(schemas.at("UpdatePaymentRequest").at("properties").contains(key));
        sent.insert(key);
    }
    check_required_fields_sent(schemas.at("UpdatePaymentRequest").at("required"), sent);
    CHECK(update.at("payment").at("amount_money") == json{{"amount", 2000}, {"currency", "EUR"}});
    CHECK(spec()
              .at("paths")
              .at("/v2/payments/{payment_id}")
              .at("put")
              .at("description")
              .get<std::string>()
              .find("amount_money") != std::string::npos);

    // CompletePayment takes version_token only: no key is possible.
    const auto& complete = schemas.at("CompletePaymentRequest").at("properties");
    CHECK(complete.size() == 1);
    CHECK(complete.contains("version_token"));
    CHECK(json::parse(complete_body(std::nullopt)) == json::object());
    CHECK(json::parse(complete_body(k_version)) == json{{"version_token", k_version}});
    for (const std::string path :
         {"/v2/payments/{payment_id}/complete", "/v2/payments/{payment_id}/cancel"}) {
        INFO(path);
        std::set<std::string> params;
        for (const auto& p : spec().at("paths").at(path).at("post").at("parameters")) {
            params.insert(p.at("in").get<std::string>() + ":" + p.at("name").get<std::string>());
        }
        CHECK(params == std::set<std::string>{"path:payment_id"});
    }
    CHECK_FALSE(spec()
                    .at("paths")
                    .at("/v2/payments/{payment_id}/cancel")
                    .at("post")
                    .contains("requestBody"));
    // A key too long for UpdatePayment is never cut: nothing is sent.
    AuthorizationOrder long_key = capture_order(2000);
    long_key.operation_id = std::string(40, 'a');
    CHECK_FALSE(update_body(long_key));
}

TEST_CASE("square captures: a payment that only authorises reads APPROVED as succeeded and held, "
          "COMPLETED as captured, CANCELED as declined",
          "[providers][square][captures]") {
    Recorder rec;
    SquareAdapter a(config(), rec.fn());
    const PaymentOrder order = manual_order();
    rec.replies = {response(200, payment_json("APPROVED"))};
    const SubmitResult held = a.submit(order);
    CHECK(held.outcome == Outcome::succeeded);
    CHECK(held.provider_reference == k_payment);
    // The same APPROVED for a payment charged at once is not what it asked.
    rec.replies = {response(200, payment_json("APPROVED"))};
    CHECK(a.submit(sample_order("cnon:card-nonce-ok")).outcome == Outcome::pending);

    const auto read = [](const std::string& status) {
        return *parse_envelope(payment_json(status))->payment;
    };
    CHECK(read("APPROVED").awaiting_capture);
    CHECK(read("APPROVED").amount_captured_minor == 0);
    CHECK(read("COMPLETED").amount_captured_minor == 4999);
    CHECK_FALSE(read("COMPLETED").awaiting_capture);
    CHECK_FALSE(read("CANCELED").awaiting_capture);
    CHECK(read("CANCELED").amount_captured_minor == 0);
    CHECK(map_status_for("APPROVED", true) == Outcome::succeeded);
    CHECK(map_status_for("CANCELED", true) == Outcome::declined);
    CHECK(map_status_for("COMPLETED", true) == Outcome::succeeded);
    CHECK(map_status_for("APPROVED", false) == Outcome::pending);
}

TEST_CASE("square captures: every row of the complete's and the cancel's outcome table",
          "[providers][square][captures]") {
    const AuthorizationOrder c = capture_order();
    const AuthorizationOrder v = void_order();
    CHECK(interpret_complete(c, 200, payment_json("COMPLETED")).outcome == Outcome::succeeded);
    // A COMPLETED payment at another amount, another payment, another status: proves nothing.
    CHECK(interpret_complete(c, 200, payment_json("COMPLETED", 4000)).outcome == Outcome::unknown);
    CHECK(interpret_complete(c, 200, payment_json("COMPLETED", 4999, "OtherPaymentId")).outcome ==
          Outcome::unknown);
    CHECK(interpret_complete(c, 200, payment_json("APPROVED")).outcome == Outcome::unknown);
    CHECK(interpret_complete(c, 200, "{}").outcome == Outcome::unknown);
    CHECK(interpret_complete(c, 500, "").outcome == Outcome::unknown);
    CHECK(interpret_complete(c, 429, error_json("RATE_LIMIT_ERROR", "RATE_LIMITED")).outcome ==
          Outcome::not_sent);
    CHECK(interpret_complete(c, 401, error_json("AUTHENTICATION_ERROR", "UNAUTHORIZED")).outcome ==
          Outcome::rejected);
    const SubmitResult refused = interpret_complete(c, 400, bad_request());
    CHECK(refused.outcome == Outcome::rejected); // until the payment is read (refusal_by_status)
    CHECK(interpret_complete(c, 400, error_json("INVALID_REQUEST_ERROR", "VERSION_MISMATCH"))
              .outcome == Outcome::rejected);

    CHECK(interpret_cancel(v, 200, payment_json("CANCELED")).outcome == Outcome::succeeded);
    CHECK(interpret_cancel(v, 200, payment_json("COMPLETED")).outcome == Outcome::unknown);
    CHECK(interpret_cancel(v, 503, "").outcome == Outcome::unknown);

    // A 400 refusal read against the payment's status.
    const auto by = [&](const AuthorizationOrder& o, const std::string& status) {
        const auto r =
            refusal_by_status(o, interpret_complete(o, 400, bad_request()), payment_json(status));
        REQUIRE(r);
        return r->outcome;
    };
    CHECK(by(c, "CANCELED") == Outcome::declined); // voided or lapsed
    CHECK(by(c, "FAILED") == Outcome::declined);
    CHECK(by(c, "COMPLETED") == Outcome::unknown);  // perhaps this very capture: the lookup decides
    CHECK(by(c, "APPROVED") == Outcome::rejected);  // the request itself
    CHECK(by(v, "COMPLETED") == Outcome::declined); // captured: nothing to release
    CHECK(by(v, "CANCELED") == Outcome::unknown);
    CHECK_FALSE(refusal_by_status(c, refused, payment_json("CANCELED", 4999, "OtherPaymentId")));
}

TEST_CASE("square captures: the adapter completes the whole amount at once, lowers a smaller one "
          "first by a keyed UpdatePayment and completes that version, and reads the payment "
          "after a refusal -- never sending the complete twice",
          "[providers][square][captures]") {
    Recorder rec;
    SquareAdapter a(config(), rec.fn());

    // The whole amount: one complete, empty body.
    rec.replies = {response(200, payment_json("COMPLETED"))};
    CHECK(a.capture(capture_order()).outcome == Outcome::succeeded);
    REQUIRE(rec.sent.size() == 1);
    CHECK(rec.sent[0].method == "POST");
    CHECK(rec.sent[0].url == k_base + "/v2/payments/" + k_payment + "/complete");
    CHECK(json::parse(rec.sent[0].body) == json::object());
    CHECK(header(rec.sent[0], "Idempotency-Key") == "(absent)");

    // Part of it: the update, then the complete of the version it answered.
    rec.sent.clear();
    rec.replies = {response(200, payment_json("APPROVED", 2000)),
                   response(200, payment_json("COMPLETED", 2000))};
    const SubmitResult part = a.capture(capture_order(2000));
    CHECK(part.outcome == Outcome::succeeded);
    REQUIRE(rec.sent.size() == 2);
    CHECK(rec.sent[0].method == "PUT");
    CHECK(rec.sent[0].url == k_base + "/v2/payments/" + k_payment);
    CHECK(json::parse(rec.sent[0].body).at("idempotency_key") == k_capture_op + "-amount");
    CHECK(rec.sent[1].url == k_base + "/v2/payments/" + k_payment + "/complete");
    CHECK(json::parse(rec.sent[1].body) == json{{"version_token", k_version}});

    // The update lost: unknown, and nothing completed.
    rec.sent.clear();
    rec.replies = {failure(SendClass::unknown, 28)};
    CHECK(a.capture(capture_order(2000)).outcome == Outcome::unknown);
    CHECK(rec.sent.size() == 1);

    // The complete lost after sending: unknown, sent once.
    rec.sent.clear();
    rec.replies = {failure(SendClass::unknown, 28)};
    CHECK(a.capture(capture_order()).outcome == Outcome::unknown);
    CHECK(rec.sent.size() == 1);
    // Never connected: not_sent.
    rec.sent.clear();
    rec.replies = {failure(SendClass::not_sent, 7)};
    CHECK(a.capture(capture_order()).outcome == Outcome::not_sent);

    // Refused: the payment is read, and its status decides; the complete is never re-sent.
    rec.sent.clear();
    rec.replies = {response(400, bad_request()), response(200, payment_json("CANCELED"))};
    const SubmitResult lapsed = a.capture(capture_order());
    CHECK(lapsed.outcome == Outcome::declined);
    CHECK(lapsed.call.error_class == "invalid_request:BAD_REQUEST:CANCELED");
    REQUIRE(rec.sent.size() == 2);
    CHECK(rec.sent[1].method == "GET");
    CHECK(rec.sent[1].url == k_base + "/v2/payments/" + k_payment);
    // A smaller capture of a lapsed authorisation: the update is refused, nothing completed.
    rec.sent.clear();
    rec.replies = {response(400, bad_request()), response(200, payment_json("CANCELED"))};
    CHECK(a.capture(capture_order(2000)).outcome == Outcome::declined);
    REQUIRE(rec.sent.size() == 2);
    CHECK(rec.sent[0].method == "PUT");
    CHECK(rec.sent[1].method == "GET");
    // Refused, and the payment unreadable: unknown (the reconciler's lookup reads it later).
    rec.sent.clear();
    rec.replies = {response(400, bad_request()), response(503, "")};
    const SubmitResult unread = a.capture(capture_order());
    CHECK(unread.outcome == Outcome::unknown);
    CHECK(unread.call.error_class == "refused_unread:BAD_REQUEST");
    CHECK(rec.sent.size() == 2);

    // The void: CancelPayment, no key.
    rec.sent.clear();
    rec.replies = {response(200, payment_json("CANCELED"))};
    CHECK(a.void_authorization(void_order()).outcome == Outcome::succeeded);
    REQUIRE(rec.sent.size() == 1);
    CHECK(rec.sent[0].url == k_base + "/v2/payments/" + k_payment + "/cancel");
    rec.sent.clear();
    rec.replies = {response(400, bad_request()), response(200, payment_json("COMPLETED"))};
    CHECK(a.void_authorization(void_order()).outcome == Outcome::declined);

    // Not sent at all: a capture that leaves the authorisation open, or without the payment.
    rec.sent.clear();
    CHECK(a.capture(capture_order(2000, false)).outcome == Outcome::rejected);
    AuthorizationOrder nameless = capture_order();
    nameless.payment_reference.clear();
    CHECK(a.capture(nameless).outcome == Outcome::declined);
    CHECK(rec.sent.empty());
}

TEST_CASE("square captures: the lookup reads the payment -- COMPLETED a capture, CANCELED a void, "
          "APPROVED neither (confirmed absent)",
          "[providers][square][captures]") {
    Recorder rec;
    SquareAdapter a(config(), rec.fn());
    const auto look = [&](const AuthorizationOrder& o, const std::string& body, int status = 200) {
        rec.replies = {response(status, body)};
        return a.lookup_capture(o);
    };
    const AuthorizationOrder c = capture_order(2000);
    const AuthorizationOrder v = void_order();

    const auto captured = look(c, payment_json("COMPLETED", 2000));
    REQUIRE(captured.status == Status::found);
    CHECK(captured.payment->state == Outcome::succeeded);
    CHECK(captured.payment->amount == Money{2000, "EUR"});
    CHECK(captured.payment->provider_reference == k_payment);
    CHECK(rec.sent.back().method == "GET");
    CHECK(rec.sent.back().url == k_base + "/v2/payments/" + k_payment);
    CHECK(look(c, payment_json("CANCELED")).payment->state == Outcome::declined);
    CHECK(look(c, payment_json("FAILED")).payment->state == Outcome::declined);
    CHECK(look(c, payment_json("PENDING")).payment->state == Outcome::pending);
    CHECK(look(c, payment_json("APPROVED")).status == Status::not_found);

    CHECK(look(v, payment_json("CANCELED")).payment->state == Outcome::succeeded);
    CHECK(look(v, payment_json("COMPLETED")).payment->state == Outcome::declined);
    CHECK(look(v, payment_json("APPROVED")).status == Status::not_found);

    // No trustworthy answer is never absence.
    CHECK(look(c, "", 503).status == Status::failed);
    CHECK(look(c, payment_json("COMPLETED", 2000, "OtherPaymentId")).status == Status::failed);
    CHECK(look(c, payment_json("COMPLETED", 2000, k_payment, "USD")).status == Status::failed);
    const auto odd = look(c, payment_json("REVERSED"));
    CHECK(odd.status == Status::failed);
    CHECK(odd.call.error_class == "unexpected_status_REVERSED");
}

namespace {

// The fake provider on loopback and a Square adapter over the real transport speaking to it.
struct OnFake {
    std::ostringstream log;
    fake::FakeProviderOptions options;
    std::unique_ptr<fake::FakeProvider> fake;
    std::unique_ptr<Provider> provider;

    OnFake() {
        options.account.api_key = Secret("EAAAl_fake_" + to_hex(random_bytes(8)));
        fake = std::make_unique<fake::FakeProvider>(options, log);
        fake->start();
        ProviderConfig c;
        c.name = "square-" + to_hex(random_bytes(4));
        c.kind = "square";
        c.base_url = "http://127.0.0.1:" + std::to_string(fake->port());
        c.credentials = ApiKey{"SQUARE_ACCESS_TOKEN", options.account.api_key};
        c.connect_timeout = 500ms;
        c.timeout = 2000ms;
        net::TransportOptions o;
        o.timeouts.connect = c.connect_timeout;
        o.timeouts.total = c.timeout;
        auto transport = std::make_shared<net::Transport>(o);
        provider = descriptor().create(
            c, [transport](const net::HttpRequest& r) { return transport->send(r); });
    }

    json ledger() const { return json::parse(fake->ledger().dump()); }
    std::int64_t count(const char* map, const std::string& key) const {
        const json l = ledger();
        return l[map].contains(key) ? l[map][key].get<std::int64_t>() : 0;
    }
    // CompletePayment and CancelPayment carry no key: the fake counts them by the payment.
    std::int64_t completes(const std::string& payment) const {
        return count("executions", "complete:" + payment);
    }
    std::int64_t cancels(const std::string& payment) const {
        return count("executions", "cancel:" + payment);
    }
    std::int64_t reads(const std::string& payment) const {
        return count("square_payment_reads", payment);
    }
    std::int64_t charged() const { return count("charged", "eur"); }
    void next(fake::Fault fault) {
        fake::FaultConfig faults;
        faults.next = {fault};
        fake->set_faults(faults);
    }

    // A payment of `amount` cents that only authorises, as the executor sends it; its ID.
    std::string authorise(long long amount) {
        PaymentOrder o;
        o.operation_id = "pr_" + to_hex(random_bytes(12));
        o.payment_id = to_hex(random_bytes(16));
        o.amount = Money{amount, "EUR"};
        o.payment_method = "cnon:card-nonce-ok";
        o.manual_capture = true;
        o.created_at = std::chrono::system_clock::now();
        const SubmitResult held = provider->submit(o);
        REQUIRE(held.outcome == Outcome::succeeded);
        REQUIRE(held.provider_reference);
        const auto found = provider->lookup(o);
        REQUIRE(found.status == Status::found);
        CHECK(found.payment->awaiting_capture);
        CHECK(found.payment->state == Outcome::succeeded);
        return *held.provider_reference;
    }

    AuthorizationOrder operation(const std::string& reference, OperationKind kind, long long amount,
                                 long long authorised) const {
        AuthorizationOrder a;
        a.kind = kind;
        a.operation_id = "pr_" + to_hex(random_bytes(12));
        a.operation_row_id = to_hex(random_bytes(16));
        a.payment_reference = reference;
        a.amount = Money{amount, "EUR"};
        a.authorized_minor = authorised;
        return a;
    }
};

} // namespace

TEST_CASE("square captures: against the fake provider's Square dialect -- authorise, capture in "
          "part, a lost complete found COMPLETED with one execution, a dropped one found APPROVED "
          "then sent once more, void, and no capture after a void or the lapse",
          "[providers][square][captures][loopback]") {
    OnFake f;

    // Authorised: nothing charged. A smaller capture: lowered, then completed once.
    const std::string first = f.authorise(4999);
    CHECK(f.charged() == 0);
    const auto part = f.operation(first, OperationKind::capture, 3000, 4999);
    CHECK(f.provider->lookup_capture(part).status == Status::not_found);
    CHECK(f.provider->capture(part).outcome == Outcome::succeeded);
    CHECK(f.completes(first) == 1);
    CHECK(f.charged() == 3000);
    CHECK(f.ledger()["square_updates"] == 1);
    const auto part_found = f.provider->lookup_capture(part);
    REQUIRE(part_found.status == Status::found);
    CHECK(part_found.payment->amount == Money{3000, "EUR"});
    // Completed once: a second complete is refused, read COMPLETED: unknown, never executed.
    CHECK(f.provider->capture(part).outcome == Outcome::unknown);
    CHECK(f.completes(first) == 1);
    CHECK(f.charged() == 3000);

    // A complete executed, its answer lost: unknown; the read finds it COMPLETED. Once.
    const std::string lost = f.authorise(1500);
    const auto whole = f.operation(lost, OperationKind::capture, 1500, 1500);
    f.next(fake::Fault::execute_then_rst);
    CHECK(f.provider->capture(whole).outcome == Outcome::unknown);
    const auto reads_before = f.reads(lost);
    const auto whole_found = f.provider->lookup_capture(whole);
    REQUIRE(whole_found.status == Status::found);
    CHECK(whole_found.payment->state == Outcome::succeeded);
    CHECK(f.reads(lost) == reads_before + 1);
    CHECK(f.completes(lost) == 1);
    CHECK(f.count("deliveries_by_operation", "complete:" + lost) == 1);
    CHECK(f.charged() == 4500);

    // A complete dropped before executing: the read finds it APPROVED (confirmed absent), and
    // only then is it sent again -- once.
    const std::string dropped = f.authorise(800);
    const auto again = f.operation(dropped, OperationKind::capture, 800, 800);
    f.next(fake::Fault::drop_before_execute);
    CHECK(f.provider->capture(again).outcome == Outcome::unknown);
    CHECK(f.completes(dropped) == 0);
    CHECK(f.provider->lookup_capture(again).status == Status::not_found);
    CHECK(f.provider->capture(again).outcome == Outcome::succeeded);
    CHECK(f.completes(dropped) == 1);
    CHECK(f.count("deliveries_by_operation", "complete:" + dropped) == 2);
    CHECK(f.charged() == 5300);

    // A void releases; found again; a capture after it is declined without executing.
    const std::string released = f.authorise(2000);
    const auto release = f.operation(released, OperationKind::void_authorization, 2000, 2000);
    CHECK(f.provider->void_authorization(release).outcome == Outcome::succeeded);
    CHECK(f.cancels(released) == 1);
    const auto release_found = f.provider->lookup_capture(release);
    REQUIRE(release_found.status == Status::found);
    CHECK(release_found.payment->state == Outcome::succeeded);
    const SubmitResult after_void =
        f.provider->capture(f.operation(released, OperationKind::capture, 2000, 2000));
    CHECK(after_void.outcome == Outcome::declined);
    CHECK(after_void.call.error_class == "invalid_request:BAD_REQUEST:CANCELED");
    CHECK(f.completes(released) == 0);
    // A second void of it: refused, read CANCELED -- the lookup decides (it was released).
    CHECK(f.provider->void_authorization(release).outcome == Outcome::unknown);
    CHECK(f.cancels(released) == 1);

    // Left alone past its delay_duration: Square cancels it, and a capture is declined.
    const std::string lapsing = f.authorise(1200);
    f.fake->advance_clock(std::chrono::hours(7 * 24) + std::chrono::minutes(1));
    const auto late = f.operation(lapsing, OperationKind::capture, 1000, 1200);
    CHECK(f.provider->capture(late).outcome == Outcome::declined);
    CHECK(f.provider->lookup_capture(late).payment->state == Outcome::declined);
    CHECK(f.completes(lapsing) == 0);
    CHECK(f.charged() == 5300);
}
