// Adyen's authorise-then-capture (issue 32, DESIGN section 16): the manual-capture payment, the
// capture and cancel requests and their 201s against Adyen's published document, the outcome
// table (received is pending: the CAPTURE or CANCELLATION notification tells the outcome), the
// adapter's calls through an injected send function -- there is no lookup of either -- and the
// whole sequence over real HTTP on loopback against the fake provider's Adyen dialect, counted in
// its ledger: authorise, capture once and replay, a capture past what is left or after a cancel
// received and not executed, a capture answered 500 after executing left unknown (not re-sent).
#include "core/fingerprint.hpp"
#include "net/transport.hpp"
#include "providers/adyen/adapter.hpp"
#include "providers/adyen/wire.hpp"
#include "providers/registry.hpp"
#include "tests/fake_provider/fake_provider.hpp"
#include "tests/fake_provider/faults.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::providers::adyen;
using namespace payrecon::testing;
using namespace std::chrono_literals;
using net::HttpRequest;
using net::SendClass;

namespace {

const nlohmann::json& spec() {
    return provider_contract("adyen");
}

const std::string k_payment = "993617894903480A";
const std::string k_capture_psp = "993617894906488B";
const std::string k_capture_op = "pr_01a24d5e6f7a7b8c9d0e1f2a3b4c5d6e";
const std::string k_void_op = "pr_01a24d5f00007b8c9d0e1f2a3b4c5d6f";
const char* const k_key = "AQE_test_not_a_real_key_0000";

AuthorizationOrder order(OperationKind kind = OperationKind::capture, long long amount = 6000) {
    AuthorizationOrder o;
    o.kind = kind;
    o.operation_id = kind == OperationKind::capture ? k_capture_op : k_void_op;
    o.operation_row_id = "01a24d5e-6f7a-7b8c-9d0e-1f2a3b4c5d6e";
    o.payment_id = "3aabbe24-9c9c-40ea-819f-7766897ccdda";
    o.payment_operation_id = k_sample_operation_id;
    o.payment_reference = k_payment;
    o.amount = Money{amount, "EUR"};
    o.authorized_minor = 10000;
    return o;
}

// Adyen's 201 to a capture (amount) or a cancel (none), shaped as the document's examples.
std::string received_json(const std::string& reference, std::optional<long long> value,
                          const std::string& status = "received",
                          const std::string& payment = k_payment) {
    nlohmann::json j{{"merchantAccount", "AcmeShopECOM"},
                     {"paymentPspReference", payment},
                     {"reference", reference},
                     {"pspReference", k_capture_psp},
                     {"status", status}};
    if (value) {
        j["amount"] = {{"currency", "EUR"}, {"value", *value}};
    }
    return j.dump();
}

std::string service_error(int status, const std::string& code, const std::string& type,
                          const std::string& message) {
    return nlohmann::json{{"status", status},
                          {"errorCode", code},
                          {"message", message},
                          {"errorType", type},
                          {"pspReference", "8816118280275544"}}
        .dump();
}

ProviderConfig config() {
    ProviderConfig c = sample_config("adyen", "https://checkout-test.adyen.test",
                                     ApiKey{"ADYEN_API_KEY", Secret(k_key)});
    c.settings = adyen::settings("AcmeShopECOM", "https://shop.example.com/checkout/return");
    c.key_retention = std::chrono::hours(168);
    return c;
}

// The fields of `body` against the schema `name`: each one of its properties, every required one
// sent. Returns the names sent.
std::set<std::string> check_against(const nlohmann::json& body, const std::string& name) {
    const auto& schema = spec().at("components").at("schemas").at(name);
    std::set<std::string> fields;
    for (const auto& [key, value] : body.items()) {
        INFO(name << "." << key);
        CHECK(schema.at("properties").contains(key));
        fields.insert(key);
    }
    if (schema.contains("required")) {
        for (const auto& required : schema.at("required")) {
            INFO(name << " requires " << required);
            CHECK(fields.count(required.get<std::string>()) == 1);
        }
    }
    return fields;
}

} // namespace

TEST_CASE("adyen captures: a payment that only authorises asks for manualCapture, and the capture "
          "and cancel carry only their requests' fields, our operation ID as their reference",
          "[providers][adyen][captures][contract]") {
    PaymentOrder manual = sample_order("8415");
    manual.manual_capture = true;
    const auto payment = nlohmann::json::parse(
        *payment_body(manual, "AcmeShopECOM", "https://shop.example.com/checkout/return"));
    CHECK(spec()
              .at("components")
              .at("schemas")
              .at("PaymentRequest")
              .at("properties")
              .contains("additionalData"));
    CHECK(spec()
              .at("components")
              .at("schemas")
              .at("AdditionalDataCommon")
              .at("properties")
              .at("manualCapture")
              .at("type") == "string");
    CHECK(payment.at("additionalData") == nlohmann::json{{"manualCapture", "true"}});
    // A payment captured at once asks for nothing of the kind.
    CHECK_FALSE(nlohmann::json::parse(*payment_body(sample_order("8415"), "AcmeShopECOM",
                                                    "https://shop.example.com/checkout/return"))
                    .contains("additionalData"));

    struct Call {
        const char* path;
        const char* request;
        const char* response;
        OperationKind kind;
    };
    for (const Call& call :
         {Call{"/payments/{paymentPspReference}/captures", "PaymentCaptureRequest",
               "PaymentCaptureResponse", OperationKind::capture},
          Call{"/payments/{paymentPspReference}/cancels", "PaymentCancelRequest",
               "PaymentCancelResponse", OperationKind::void_authorization}}) {
        INFO(call.path);
        const auto& post = spec().at("paths").at(call.path).at("post");
        CHECK(post.at("requestBody").at("content").at("application/json").at("schema").at("$ref") ==
              std::string("#/components/schemas/") + call.request);
        const AuthorizationOrder o = order(call.kind);
        const bool capture = call.kind == OperationKind::capture;
        const auto body =
            capture ? capture_body(o, "AcmeShopECOM") : cancel_body(o, "AcmeShopECOM");
        REQUIRE(body);
        const auto sent = nlohmann::json::parse(*body);
        const auto fields = check_against(sent, call.request);
        CHECK(fields == (capture ? std::set<std::string>{"amount", "merchantAccount", "reference"}
                                 : std::set<std::string>{"merchantAccount", "reference"}));
        CHECK(sent["reference"] == o.operation_id);
        CHECK(sent["merchantAccount"] == "AcmeShopECOM");
        if (capture) {
            CHECK(sent["amount"] == nlohmann::json{{"currency", "EUR"}, {"value", 6000}});
        }
        // The answers the document lists for this call.
        std::set<std::string> answers;
        for (const auto& [code, value] : post.at("responses").items()) {
            answers.insert(code);
        }
        CHECK(answers == std::set<std::string>{"201", "400", "401", "403", "422", "500"});
        // Our fixture of its 201 holds only the response's fields, every required one.
        const std::string answer =
            capture ? received_json(k_capture_op, 6000) : received_json(k_void_op, std::nullopt);
        check_against(nlohmann::json::parse(answer), call.response);
        CHECK(spec()
                  .at("components")
                  .at("schemas")
                  .at(call.response)
                  .at("properties")
                  .at("status")
                  .at("enum") == nlohmann::json::array({"received"}));
    }
    // The recorded fixtures the conformance suite replays, too.
    check_against(nlohmann::json::parse(fixture("adyen", "capture_received.json")),
                  "PaymentCaptureResponse");
    check_against(nlohmann::json::parse(fixture("adyen", "cancel_received.json")),
                  "PaymentCancelResponse");
    // An amount Adyen's units cannot express, or a reference past 80 characters, is never sent.
    AuthorizationOrder idr = order();
    idr.amount = Money{1234, "IDR"};
    CHECK_FALSE(capture_body(idr, "AcmeShopECOM"));
    AuthorizationOrder long_op = order(OperationKind::void_authorization);
    long_op.operation_id = std::string(81, 'a');
    CHECK_FALSE(cancel_body(long_op, "AcmeShopECOM"));
}

TEST_CASE("adyen captures: the outcome table", "[providers][adyen][captures]") {
    const AuthorizationOrder c = order();
    const auto received = interpret_authorization_action(c, 201, received_json(k_capture_op, 6000));
    CHECK(received.outcome == Outcome::pending); // the CAPTURE notification tells the outcome
    CHECK(received.provider_reference == k_capture_psp);
    const AuthorizationOrder v = order(OperationKind::void_authorization);
    const auto cancelled =
        interpret_authorization_action(v, 201, received_json(k_void_op, std::nullopt));
    CHECK(cancelled.outcome == Outcome::pending); // the CANCELLATION notification tells it
    CHECK(cancelled.provider_reference == k_capture_psp);
    // A 201 we cannot match to our request proves nothing: unknown.
    for (const std::string& body :
         {received_json("pr_other", 6000), received_json(k_capture_op, 6001),
          received_json(k_capture_op, 6000, "Authorised"),
          received_json(k_capture_op, 6000, "received", "ZZZZZZZZZZZZZZZZ"),
          std::string(R"({"status": "received"})"), std::string("not json")}) {
        INFO(body);
        CHECK(interpret_authorization_action(c, 201, body).outcome == Outcome::unknown);
    }
    CHECK(interpret_authorization_action(c, 200, received_json(k_capture_op, 6000)).outcome ==
          Outcome::unknown);
    // A cancel's answer never names an amount: one that does is not ours.
    CHECK(interpret_authorization_action(v, 201, received_json(k_void_op, 10000)).outcome ==
          Outcome::unknown);
    // A capture refused as asked (more than the authorisation has left): declined, final.
    const auto not_possible = interpret_authorization_action(
        c, 422, service_error(422, "137", "validation", "Invalid amount specified"));
    CHECK(not_possible.outcome == Outcome::declined);
    CHECK(not_possible.call.error_class == "capture_not_possible:137");
    // A cancel takes no amount: a 137 there is a rejected request, as a payment's.
    CHECK(interpret_authorization_action(
              v, 422, service_error(422, "137", "validation", "Invalid amount specified"))
              .outcome == Outcome::rejected);
    // Our request's form, an unknown payment, the account or the credentials: rejected.
    const auto unknown_payment =
        interpret_authorization_action(c, 422,
                                       service_error(422, "167", "validation",
                                                     "Original pspReference required for this "
                                                     "operation"));
    CHECK(unknown_payment.outcome == Outcome::rejected);
    REQUIRE(unknown_payment.rejection);
    CHECK(unknown_payment.rejection->code == "167");
    const auto unauthorized =
        interpret_authorization_action(c, 401, service_error(401, "000", "security", "x"));
    CHECK(unauthorized.outcome == Outcome::rejected);
    REQUIRE(unauthorized.rejection);
    CHECK(unauthorized.rejection->http_status == 401);
    // Rate limited: not executed.
    CHECK(interpret_authorization_action(c, 429, "").outcome == Outcome::not_sent);
    // The key still in flight, 5xx, an unreadable error: it may have been received.
    CHECK(interpret_authorization_action(c, 422, service_error(422, "704", "validation", "x"))
              .outcome == Outcome::unknown);
    for (const int status : {500, 502, 503}) {
        INFO(status);
        CHECK(
            interpret_authorization_action(v, status, service_error(status, "905", "internal", "x"))
                .outcome == Outcome::unknown);
    }
    CHECK(interpret_authorization_action(c, 422, "not json").outcome == Outcome::unknown);
}

TEST_CASE("adyen captures: the adapter posts a capture and a cancel each under its own "
          "Idempotency-Key, and cannot look either up",
          "[providers][adyen][captures]") {
    Recorder rec;
    rec.replies.push_back(response(201, received_json(k_capture_op, 6000)));
    rec.replies.push_back(failure(SendClass::unknown, 28)); // timed out after sending
    rec.replies.push_back(response(201, received_json(k_void_op, std::nullopt)));
    AdyenAdapter a(config(), rec.fn());
    const Capabilities& caps = a.capabilities();
    CHECK(caps.manual_capture);
    CHECK_FALSE(caps.multiple_captures);
    CHECK_FALSE(caps.capture_lookup);
    CHECK(caps.authorization_validity == std::chrono::hours(7 * 24));
    CHECK(caps.notification_wait == std::chrono::hours(4));

    CHECK(a.capture(order()).outcome == Outcome::pending);
    CHECK(a.capture(order()).outcome == Outcome::unknown);
    const auto voided = a.void_authorization(order(OperationKind::void_authorization));
    CHECK(voided.outcome == Outcome::pending);
    CHECK(voided.provider_reference == k_capture_psp);
    REQUIRE(rec.sent.size() == 3);
    for (std::size_t i = 0; i < rec.sent.size(); ++i) {
        const HttpRequest& req = rec.sent[i];
        const bool capture = i < 2;
        INFO(i);
        CHECK(req.method == "POST");
        CHECK(req.url == "https://checkout-test.adyen.test/v71/payments/" + k_payment +
                             (capture ? "/captures" : "/cancels"));
        CHECK(req.mutating);
        // The capture's or the void's own operation ID, never its payment's.
        CHECK(header(req, "Idempotency-Key") == (capture ? k_capture_op : k_void_op));
        CHECK(header(req, "X-API-Key") == k_key);
        CHECK(header(req, "Content-Type") == "application/json");
    }

    // No lookup: failed, never read as absence, and nothing sent.
    for (const auto kind : {OperationKind::capture, OperationKind::void_authorization}) {
        const auto found = a.lookup_capture(order(kind));
        CHECK(found.status == LookupResult::Status::failed);
        CHECK(found.call.error_class == "lookup_not_supported");
    }
    CHECK(rec.sent.size() == 3);

    // Nothing is sent without the payment's pspReference, with an inexpressible amount or with an
    // operation ID Adyen's key cannot hold.
    AuthorizationOrder no_payment = order();
    no_payment.payment_reference.clear();
    CHECK(a.capture(no_payment).outcome == Outcome::declined);
    CHECK(a.capture(no_payment).call.error_class == "no_payment_reference");
    AuthorizationOrder idr = order();
    idr.amount = Money{1234, "IDR"};
    CHECK(a.capture(idr).outcome == Outcome::declined);
    AuthorizationOrder long_op = order(OperationKind::void_authorization);
    long_op.operation_id = "pr_" + std::string(62, 'a');
    CHECK(a.void_authorization(long_op).call.error_class == "operation_id_too_long");
    CHECK(rec.sent.size() == 3);
}

namespace {

std::string new_op() {
    return "pr_" + to_hex(random_bytes(12));
}

// The fake provider on loopback and an adyen adapter speaking to it over the real transport.
struct Bench {
    std::ostringstream log;
    fake::FakeProviderOptions options;
    std::unique_ptr<fake::FakeProvider> fake;
    ProviderConfig config;
    std::unique_ptr<Provider> provider;
    std::string reference; // the last authorisation's pspReference

    Bench() {
        options.account.api_key = Secret("AQE_fake_" + to_hex(random_bytes(8)));
        fake = std::make_unique<fake::FakeProvider>(options, log);
        fake->start();
        config.name = "adyen-" + to_hex(random_bytes(4));
        config.kind = "adyen";
        config.base_url = "http://127.0.0.1:" + std::to_string(fake->port());
        config.credentials = ApiKey{"ADYEN_API_KEY", options.account.api_key};
        config.connect_timeout = 500ms;
        config.timeout = 2000ms;
        config.key_retention = std::chrono::hours(24);
        config.settings = adyen::settings("AcmeShopECOM", "https://shop.example.com/return");
        net::TransportOptions o;
        o.timeouts.connect = config.connect_timeout;
        o.timeouts.total = config.timeout;
        auto transport = std::make_shared<net::Transport>(o);
        provider = find_descriptor("adyen")->create(
            config, [transport](const net::HttpRequest& r) { return transport->send(r); });
    }

    nlohmann::json ledger() const { return nlohmann::json::parse(fake->ledger().dump()); }
    std::uint64_t executions(const std::string& op) const {
        const nlohmann::json l = ledger();
        return l["executions"].contains(op) ? l["executions"][op].get<std::uint64_t>() : 0;
    }
    long long charged_eur() const {
        const nlohmann::json l = ledger();
        return l["charged"].contains("eur") ? l["charged"]["eur"].get<long long>() : 0;
    }

    // A payment of `amount` euro cents that only authorises; the order, its reference set.
    PaymentOrder authorise(long long amount) {
        PaymentOrder o;
        o.operation_id = new_op();
        o.payment_id = to_hex(random_bytes(16));
        o.merchant_reference = "ord-" + o.operation_id;
        o.amount = Money{amount, "EUR"};
        o.payment_method = "8415";
        o.manual_capture = true;
        const SubmitResult r = provider->submit(o);
        REQUIRE(r.outcome == Outcome::succeeded);
        REQUIRE(r.provider_reference);
        reference = *r.provider_reference;
        return o;
    }

    AuthorizationOrder operation(const PaymentOrder& payment, OperationKind kind,
                                 long long amount) const {
        AuthorizationOrder o;
        o.kind = kind;
        o.operation_id = new_op();
        o.operation_row_id = to_hex(random_bytes(16));
        o.payment_id = payment.payment_id;
        o.payment_operation_id = payment.operation_id;
        o.payment_reference = reference;
        o.amount = Money{amount, "EUR"};
        o.authorized_minor = payment.amount.minor;
        return o;
    }
};

} // namespace

TEST_CASE("adyen capture calls: authorised with nothing charged, captured once under its key -- "
          "a replay received again and executed once -- and nothing captured after it",
          "[providers][adyen][captures][fake]") {
    Bench b;
    const PaymentOrder payment = b.authorise(10000);
    CHECK(b.reference.size() == 16);
    CHECK(b.charged_eur() == 0);
    const auto c = b.operation(payment, OperationKind::capture, 6000);
    const auto sent = b.provider->capture(c);
    CHECK(sent.outcome == Outcome::pending);
    REQUIRE(sent.provider_reference);
    CHECK(sent.provider_reference->size() == 16);
    CHECK(*sent.provider_reference != b.reference);
    // The reconciler never sends a received capture again; a worker's retry after a lost answer
    // would carry the same key, which replays Adyen's first answer.
    const auto again = b.provider->capture(c);
    CHECK(again.outcome == Outcome::pending);
    CHECK(again.provider_reference == sent.provider_reference);
    CHECK(b.executions(c.operation_id) == 1);
    CHECK(b.charged_eur() == 6000);
    // One capture a payment: the rest was released. A second one, or a cancel, is received
    // (pending: its notification says success false) and changes nothing.
    const auto more = b.operation(payment, OperationKind::capture, 1000);
    CHECK(b.provider->capture(more).outcome == Outcome::pending);
    const auto late = b.operation(payment, OperationKind::void_authorization, 10000);
    CHECK(b.provider->void_authorization(late).outcome == Outcome::pending);
    CHECK(b.executions(more.operation_id) + b.executions(late.operation_id) == 0);
    CHECK(b.charged_eur() == 6000);
    const auto l = b.ledger();
    CHECK(l["captures"] == 1);
    CHECK(l["cancels"] == 0);
}

TEST_CASE("adyen capture calls: a cancel releases the authorisation once, and a capture after it "
          "executes nothing",
          "[providers][adyen][captures][fake]") {
    Bench b;
    const PaymentOrder payment = b.authorise(4000);
    const auto v = b.operation(payment, OperationKind::void_authorization, 4000);
    CHECK(b.provider->void_authorization(v).outcome == Outcome::pending);
    CHECK(b.provider->lookup_capture(v).status == LookupResult::Status::failed);
    const auto c = b.operation(payment, OperationKind::capture, 4000);
    CHECK(b.provider->capture(c).outcome == Outcome::pending);
    CHECK(b.executions(v.operation_id) == 1);
    CHECK(b.executions(c.operation_id) == 0);
    const auto l = b.ledger();
    CHECK(l["cancels"] == 1);
    CHECK(l["captures"] == 0);
    CHECK(b.charged_eur() == 0);
}

TEST_CASE("adyen capture calls: a capture answered 500 after it executed is unknown, and a capture "
          "Adyen could not read is rejected",
          "[providers][adyen][captures][fake][faults]") {
    Bench b;
    const PaymentOrder payment = b.authorise(3000);
    const auto c = b.operation(payment, OperationKind::capture, 3000);
    b.fake->set_faults(fake::FaultConfig::from_json(
        nlohmann::json::parse(R"({"next": ["http_500_after_execute"]})")));
    const auto sent = b.provider->capture(c);
    CHECK(sent.outcome == Outcome::unknown);
    CHECK(sent.call.error_class == "http_500");
    CHECK(b.executions(c.operation_id) == 1);
    CHECK(b.charged_eur() == 3000);
    // A capture of a payment Adyen does not know: its 422 167, nothing executed.
    auto unknown = b.operation(payment, OperationKind::capture, 100);
    unknown.payment_reference = "ZZZZZZZZZZZZZZZZ";
    const auto refused = b.provider->capture(unknown);
    CHECK(refused.outcome == Outcome::rejected);
    REQUIRE(refused.rejection);
    CHECK(refused.rejection->code == "167");
    CHECK(b.executions(unknown.operation_id) == 0);
}
