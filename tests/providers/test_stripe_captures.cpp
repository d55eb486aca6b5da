// Stripe's authorise-then-capture (issue 32, DESIGN section 16): a payment made with
// capture_method=manual, its capture (POST /v1/payment_intents/{id}/capture) and void (/cancel)
// against Stripe's published document, their outcome tables, and the PaymentIntent read back to
// find them again -- the adapter's calls through an injected send function.
#include "providers/stripe/adapter.hpp"
#include "providers/stripe/wire.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::providers::stripe;
using namespace payrecon::testing;
using net::HttpRequest;
using net::SendClass;
using Status = LookupResult::Status;

namespace {

const nlohmann::json& spec() {
    return provider_contract("stripe");
}

const std::string k_intent = "pi_3MtwBwLkdIwHu7ix28a3tqPa";
const std::string k_capture_op = "pr_01a24d5e6f7a7b8c9d0e1f2a3b4c5d6e";

AuthorizationOrder capture_order(long long amount = 4999) {
    AuthorizationOrder o;
    o.kind = OperationKind::capture;
    o.operation_id = k_capture_op;
    o.operation_row_id = "01a24d5e-6f7a-7b8c-9d0e-1f2a3b4c5d6e";
    o.payment_id = "3aabbe24-9c9c-40ea-819f-7766897ccdda";
    o.payment_operation_id = k_sample_operation_id;
    o.payment_reference = k_intent;
    o.amount = Money{amount, "EUR"};
    o.authorized_minor = 4999;
    o.metadata = {{"ticket", "T-9"}};
    return o;
}

AuthorizationOrder void_order() {
    AuthorizationOrder o = capture_order();
    o.kind = OperationKind::void_authorization;
    return o;
}

PaymentOrder manual_order() {
    PaymentOrder o = sample_order("pm_card_visa");
    o.manual_capture = true;
    return o;
}

// A PaymentIntent of 49.99 EUR as Stripe answers, with `status`, `amount_received` and, where
// given, the capture's operation ID in its metadata.
std::string intent_json(const std::string& status, long long received = 0,
                        const std::optional<std::string>& capture_op = std::nullopt,
                        const std::string& id = k_intent, const std::string& currency = "eur",
                        const std::optional<std::string>& cancellation_reason = std::nullopt) {
    nlohmann::json metadata = {{"operation_id", k_sample_operation_id},
                               {"merchant_reference", "order-1001"}};
    if (capture_op) {
        metadata["capture_operation_id"] = *capture_op;
    }
    nlohmann::json j = {{"id", id},
                        {"object", "payment_intent"},
                        {"amount", 4999},
                        {"amount_capturable", status == "requires_capture" ? 4999 : 0},
                        {"amount_received", received},
                        {"capture_method", "manual"},
                        {"currency", currency},
                        {"created", 1796205600},
                        {"metadata", metadata},
                        {"status", status}};
    j["cancellation_reason"] =
        cancellation_reason ? nlohmann::json(*cancellation_reason) : nlohmann::json();
    return j.dump();
}

std::string error_json(const std::string& type, const std::string& code,
                       const std::optional<std::string>& intent = std::nullopt) {
    nlohmann::json e = {{"type", type}, {"code", code}, {"message", "no"}};
    if (intent) {
        e["payment_intent"] = nlohmann::json::parse(*intent);
    }
    return nlohmann::json{{"error", e}}.dump();
}

std::string unexpected_state(const std::string& intent) {
    return error_json("invalid_request_error", "payment_intent_unexpected_state", intent);
}

std::string search_result(const std::string& intent) {
    return R"({"object": "search_result", "has_more": false, "data": [)" + intent + "]}";
}

ProviderConfig config() {
    return sample_config("stripe", "https://api.stripe.test",
                         ApiKey{"STRIPE_API_KEY", Secret("sk_test_51Hx_not_a_real_key_0000")});
}

const nlohmann::json& form_properties(const std::string& path) {
    return spec()
        .at("paths")
        .at(path)
        .at("post")
        .at("requestBody")
        .at("content")
        .at("application/x-www-form-urlencoded")
        .at("schema")
        .at("properties");
}

// The top-level names of a form body ("metadata%5Bk%5D" -> metadata).
std::set<std::string> top_names(const std::string& body) {
    std::set<std::string> out;
    for (const auto& [key, value] : form_fields(body)) {
        out.insert(key.substr(0, key.find("%5B")));
    }
    return out;
}

} // namespace

TEST_CASE("stripe captures: the capture, the void and the manual create carry only parameters "
          "Stripe documents",
          "[providers][stripe][captures][contract]") {
    const auto body = capture_body(capture_order());
    REQUIRE(body);
    const auto& capture = form_properties("/v1/payment_intents/{intent}/capture");
    const auto sent = top_names(*body);
    CHECK(sent == std::set<std::string>{"amount_to_capture", "metadata"});
    for (const auto& name : sent) {
        INFO(name);
        CHECK(capture.contains(name));
    }
    const auto f = form_fields(*body);
    CHECK(f.at("amount_to_capture") == "4999");
    CHECK(f.at("metadata%5Bcapture_operation_id%5D") == k_capture_op);
    // The capture's own metadata would land on the charge's and overwrite its entries: not sent.
    CHECK(f.count("metadata%5Bticket%5D") == 0);
    CHECK(f.size() == 2);
    // Stripe's units, not ISO's.
    AuthorizationOrder isk = capture_order();
    isk.amount = Money{100, "ISK"};
    CHECK(form_fields(*capture_body(isk)).at("amount_to_capture") == "10000");
    AuthorizationOrder mga = capture_order();
    mga.amount = Money{150, "MGA"}; // whole ariary only
    CHECK_FALSE(capture_body(mga));
    AuthorizationOrder no_reference = capture_order();
    no_reference.payment_reference.clear();
    CHECK_FALSE(capture_body(no_reference));

    // The void sends no parameter; the reasons it could send are Stripe's, none of them ours to
    // claim.
    const auto& cancel = form_properties("/v1/payment_intents/{intent}/cancel");
    const auto& reasons = cancel.at("cancellation_reason").at("enum");
    CHECK(std::set<std::string>(reasons.begin(), reasons.end()) ==
          std::set<std::string>{"abandoned", "duplicate", "fraudulent", "requested_by_customer"});
    // Stripe's own cancel on expiry is `automatic`, which our empty reason never is.
    const auto& canceled_by = spec()
                                  .at("components")
                                  .at("schemas")
                                  .at("payment_intent")
                                  .at("properties")
                                  .at("cancellation_reason")
                                  .at("enum");
    CHECK(std::find(canceled_by.begin(), canceled_by.end(), "automatic") != canceled_by.end());

    // The lookup reads the PaymentIntent by its ID.
    std::set<std::string> path_parameters;
    for (const auto& p :
         spec().at("paths").at("/v1/payment_intents/{intent}").at("get").at("parameters")) {
        if (p.at("in") == "path") {
            path_parameters.insert(p.at("name").get<std::string>());
        }
    }
    CHECK(path_parameters == std::set<std::string>{"intent"});

    // A payment that only authorises: capture_method=manual, a value Stripe lists.
    const auto create = create_body(manual_order());
    REQUIRE(create);
    CHECK(form_fields(*create).at("capture_method") == "manual");
    const auto& methods = form_properties("/v1/payment_intents").at("capture_method").at("enum");
    CHECK(std::find(methods.begin(), methods.end(), "manual") != methods.end());
    for (const auto& name : top_names(*create)) {
        INFO(name);
        CHECK(form_properties("/v1/payment_intents").contains(name));
    }
    CHECK(form_fields(*create_body(sample_order("pm_card_visa"))).count("capture_method") == 0);
}

TEST_CASE(
    "stripe captures: the recorded answers are PaymentIntents and errors as Stripe's document "
    "describes them",
    "[providers][stripe][captures][contract]") {
    const auto& schema =
        spec().at("components").at("schemas").at("payment_intent").at("properties");
    const auto check_fields = [&schema](const std::string& name, const nlohmann::json& intent) {
        for (const auto& [key, value] : intent.items()) {
            INFO(name << ": " << key);
            CHECK(schema.contains(key));
        }
    };
    for (const std::string name : {"capture_succeeded.json", "cancel_canceled.json",
                                   "payment_intent_requires_capture.json"}) {
        check_fields(name, nlohmann::json::parse(fixture("stripe", name)));
    }
    const auto error =
        nlohmann::json::parse(fixture("stripe", "capture_unexpected_state_canceled.json"));
    check_fields("capture_unexpected_state_canceled.json", error.at("error").at("payment_intent"));

    // Read through the adapter as recorded (the conformance suite replays them too).
    const auto parsed = parse_authorisation(fixture("stripe", "capture_succeeded.json"));
    REQUIRE(parsed);
    CHECK(parsed->capture_operation_id == k_capture_op);
    CHECK(parsed->intent.amount_captured_minor == 4999);
    CHECK_FALSE(parsed->intent.awaiting_capture);
    CHECK(interpret_capture(capture_order(), 200, fixture("stripe", "capture_succeeded.json"))
              .outcome == Outcome::succeeded);
    const auto expired = interpret_capture(
        capture_order(), 400, fixture("stripe", "capture_unexpected_state_canceled.json"));
    CHECK(expired.outcome == Outcome::declined);
    CHECK(interpret_void(void_order(), 400,
                         fixture("stripe", "capture_unexpected_state_canceled.json"))
              .outcome == Outcome::unknown);
    const auto held =
        parse_authorisation(fixture("stripe", "payment_intent_requires_capture.json"));
    REQUIRE(held);
    CHECK(held->intent.awaiting_capture);
    CHECK(held->cancellation_reason.empty());
    CHECK(capture_lookup_answer(capture_order(),
                                fixture("stripe", "payment_intent_requires_capture.json"))
              .status == Status::not_found);
    CHECK(interpret_void(void_order(), 200, fixture("stripe", "cancel_canceled.json")).outcome ==
          Outcome::succeeded);
}

TEST_CASE("stripe captures: the descriptor offers one capture per authorisation, found again by "
          "reading the PaymentIntent",
          "[providers][stripe][captures]") {
    const auto& api = descriptor().api;
    CHECK(api.manual_capture);
    CHECK_FALSE(api.multiple_captures);
    CHECK(api.authorization_validity == std::chrono::hours(24 * 7));
    CHECK(api.capture_lookup);
    Recorder rec;
    StripeAdapter a(config(), rec.fn());
    CHECK(a.capabilities().manual_capture);
    CHECK(a.capabilities().capture_lookup);
    // An account whose lookups are switched off finds no capture either, and asks nothing.
    ProviderConfig no_lookup = config();
    no_lookup.overrides.lookup = false;
    StripeAdapter b(no_lookup, rec.fn());
    CHECK_FALSE(b.capabilities().capture_lookup);
    const auto r = b.lookup_capture(capture_order());
    CHECK(r.status == Status::failed);
    CHECK(r.call.error_class == "lookup_not_supported");
    CHECK(rec.sent.empty());
}

TEST_CASE("stripe captures: a payment that only authorises is created with capture_method=manual, "
          "and requires_capture is its success",
          "[providers][stripe][captures]") {
    CHECK(map_status_for("requires_capture", true) == Outcome::succeeded);
    CHECK(map_status_for("requires_capture", false) == Outcome::unknown);
    CHECK(map_status_for("succeeded", true) == Outcome::succeeded);
    CHECK(map_status_for("canceled", true) == Outcome::declined);
    CHECK(map_status_for("requires_action", true) == Outcome::pending);
    // The descriptor's table stays the order-free reading, and says why.
    bool listed = false;
    for (const auto& rule : status_rules()) {
        if (rule.word == "requires_capture") {
            listed = true;
            CHECK(rule.outcome == Outcome::unknown);
            CHECK(std::string(rule.why).find("capture_method=manual") != std::string::npos);
        }
    }
    CHECK(listed);

    Recorder rec;
    rec.replies.push_back(response(200, intent_json("requires_capture")));
    rec.replies.push_back(response(200, intent_json("requires_capture")));
    rec.replies.push_back(response(200, search_result(intent_json("requires_capture"))));
    rec.replies.push_back(
        response(200, search_result(intent_json("succeeded", 4999, k_capture_op))));
    rec.replies.push_back(response(200, search_result(intent_json("requires_capture"))));
    StripeAdapter a(config(), rec.fn());

    const auto held = a.submit(manual_order());
    CHECK(held.outcome == Outcome::succeeded);
    CHECK(held.provider_reference == k_intent);
    CHECK(held.call.error_class.empty());
    REQUIRE(rec.sent.size() == 1);
    CHECK(form_fields(rec.sent[0].body).at("capture_method") == "manual");
    CHECK(header(rec.sent[0], "Idempotency-Key") == k_sample_operation_id);
    // The same answer to an order that asked to capture at once is not what it asked for.
    const auto automatic = a.submit(sample_order("pm_card_visa"));
    CHECK(automatic.outcome == Outcome::unknown);
    CHECK(automatic.call.error_class == "unexpected_status_requires_capture");
    CHECK(form_fields(rec.sent[1].body).count("capture_method") == 0);

    // The lookup reads it alike, and says what is held and what was captured.
    const auto found = a.lookup(manual_order());
    REQUIRE(found.status == Status::found);
    CHECK(found.payment->state == Outcome::succeeded);
    CHECK(found.payment->awaiting_capture);
    CHECK(found.payment->amount_captured_minor == 0);
    const auto captured = a.lookup(manual_order());
    REQUIRE(captured.status == Status::found);
    CHECK(captured.payment->state == Outcome::succeeded);
    CHECK_FALSE(captured.payment->awaiting_capture);
    CHECK(captured.payment->amount_captured_minor == 4999);
    const auto not_asked = a.lookup(sample_order("pm_card_visa"));
    REQUIRE(not_asked.status == Status::found);
    CHECK(not_asked.payment->state == Outcome::unknown);
    CHECK(not_asked.payment->awaiting_capture);
    CHECK(rec.sent.size() == 5);
}

TEST_CASE("stripe captures: a payment that only authorises leaves room for the capture's key",
          "[providers][stripe][captures][regression]") {
    Recorder rec;
    rec.replies.push_back(response(200, intent_json("requires_capture")));
    StripeAdapter a(config(), rec.fn());
    PaymentOrder o = manual_order();
    for (int i = 0; i < 48; ++i) {
        o.metadata["k" + std::to_string(i)] = "v" + std::to_string(i);
    }
    // 48 fit a payment that captures at once, not one whose capture adds a third key of ours.
    CHECK_FALSE(carry_problem(carry_limits(), o.merchant_reference, o.metadata));
    const auto full = a.submit(o);
    CHECK(full.outcome == Outcome::declined);
    CHECK(full.call.error_class == "not_carried");
    CHECK(full.call.detail.find("at most 47") != std::string::npos);
    CHECK_FALSE(create_body(o));
    // A caller's entry of that name would be overwritten by the capture.
    PaymentOrder own = manual_order();
    own.metadata = {{"capture_operation_id", "mine"}};
    CHECK(a.submit(own).call.error_class == "not_carried");
    CHECK(rec.sent.empty());
    o.metadata.erase("k0");
    CHECK(a.submit(o).outcome == Outcome::succeeded);
    REQUIRE(rec.sent.size() == 1);
    PaymentOrder automatic = sample_order("pm_card_visa");
    automatic.metadata = {{"capture_operation_id", "theirs"}};
    CHECK_FALSE(authorisation_carry_problem(automatic));
}

TEST_CASE("stripe captures: the capture's outcome table", "[providers][stripe][captures]") {
    const AuthorizationOrder o = capture_order();
    const auto outcome = [&o](int status, const std::string& body) {
        return interpret_capture(o, status, body).outcome;
    };
    const auto ok = interpret_capture(o, 200, intent_json("succeeded", 4999, k_capture_op));
    CHECK(ok.outcome == Outcome::succeeded);
    CHECK(ok.provider_reference == k_intent); // a capture has no ID of its own at Stripe
    CHECK(ok.call.http_status == 200);
    // Without the metadata echoed (an account that ignored it), the amount still says it.
    CHECK(outcome(200, intent_json("succeeded", 4999)) == Outcome::succeeded);
    CHECK(outcome(200, intent_json("processing", 0, k_capture_op)) == Outcome::pending);
    CHECK(outcome(200, intent_json("canceled")) == Outcome::declined);
    // A 2xx that is not the answer to this capture proves nothing.
    CHECK(outcome(200, intent_json("requires_capture")) == Outcome::unknown);
    CHECK(outcome(200, intent_json("succeeded", 4998, k_capture_op)) == Outcome::unknown);
    CHECK(outcome(200, intent_json("succeeded", 4999, "pr_another_capture")) == Outcome::unknown);
    CHECK(outcome(200, intent_json("succeeded", 4999, k_capture_op, "pi_other")) ==
          Outcome::unknown);
    CHECK(outcome(200, intent_json("succeeded", 4999, k_capture_op, k_intent, "usd")) ==
          Outcome::unknown);
    CHECK(outcome(200, R"({"id": "re_1", "object": "refund"})") == Outcome::unknown);
    AuthorizationOrder second = capture_order(1000);
    second.captured_before_minor = 2000;
    CHECK(interpret_capture(second, 200, intent_json("succeeded", 3000, k_capture_op)).outcome ==
          Outcome::succeeded);

    // payment_intent_unexpected_state: what the PaymentIntent in the error shows.
    const auto voided = interpret_capture(o, 400, unexpected_state(intent_json("canceled")));
    CHECK(voided.outcome == Outcome::declined);
    CHECK(voided.call.error_class == "invalid_request:payment_intent_unexpected_state:canceled");
    CHECK(voided.call.http_status == 400);
    CHECK(outcome(400, unexpected_state(intent_json("canceled", 0, std::nullopt, k_intent, "eur",
                                                    "automatic"))) == Outcome::declined);
    CHECK(outcome(400, unexpected_state(intent_json("requires_payment_method"))) ==
          Outcome::declined);
    // Captured already: perhaps by this very capture, executed once, its answer lost and its key
    // expired -- never a blind decline, whatever the amount.
    const auto captured =
        interpret_capture(o, 400, unexpected_state(intent_json("succeeded", 4999)));
    CHECK(captured.outcome == Outcome::unknown);
    CHECK(captured.call.error_class == "invalid_request:payment_intent_unexpected_state:succeeded");
    CHECK(outcome(400, unexpected_state(intent_json("succeeded", 4999, k_capture_op))) ==
          Outcome::unknown);
    CHECK(outcome(400, unexpected_state(intent_json("succeeded", 100))) == Outcome::unknown);
    CHECK(outcome(400, unexpected_state(intent_json("processing"))) == Outcome::unknown);
    CHECK(outcome(400, unexpected_state(intent_json("requires_capture"))) == Outcome::unknown);
    CHECK(outcome(400, error_json("invalid_request_error", "payment_intent_unexpected_state")) ==
          Outcome::unknown);
    CHECK(outcome(400, unexpected_state(intent_json("canceled", 0, std::nullopt, "pi_other"))) ==
          Outcome::unknown);
    CHECK(outcome(400, error_json("invalid_request_error", "charge_already_captured")) ==
          Outcome::unknown);
    // Final for the authorisation as it is.
    for (const std::string code :
         {"charge_expired_for_capture", "capture_charge_authorization_expired",
          "capture_unauthorized_payment", "amount_too_large"}) {
        INFO(code);
        CHECK(outcome(400, error_json("invalid_request_error", code)) == Outcome::declined);
    }
    // Executed nothing: rejected, for an operator.
    const auto bad =
        interpret_capture(o, 400, error_json("invalid_request_error", "parameter_unknown"));
    CHECK(bad.outcome == Outcome::rejected);
    REQUIRE(bad.rejection);
    CHECK(bad.rejection->code == "parameter_unknown");
    CHECK(outcome(404, error_json("invalid_request_error", "resource_missing")) ==
          Outcome::rejected);
    CHECK(outcome(401, error_json("invalid_request_error", "")) == Outcome::rejected);
    CHECK(outcome(403, error_json("invalid_request_error", "")) == Outcome::rejected);
    CHECK(outcome(429, error_json("rate_limit_error", "rate_limit")) == Outcome::not_sent);
    CHECK(outcome(400, error_json("idempotency_error", "")) == Outcome::unknown);
    CHECK(outcome(409, error_json("idempotency_error", "idempotency_key_in_use")) ==
          Outcome::unknown);
    CHECK(outcome(500, "") == Outcome::unknown);
    CHECK(outcome(503, unexpected_state(intent_json("canceled"))) == Outcome::unknown);
    CHECK(outcome(402, error_json("card_error", "card_declined")) == Outcome::unknown);
    CHECK(outcome(400, "not json") == Outcome::unknown);
}

TEST_CASE("stripe captures: the void's outcome table", "[providers][stripe][captures]") {
    const AuthorizationOrder o = void_order();
    const auto outcome = [&o](int status, const std::string& body) {
        return interpret_void(o, status, body).outcome;
    };
    const auto ok = interpret_void(
        o, 200, intent_json("canceled", 0, std::nullopt, k_intent, "eur", "requested_by_customer"));
    CHECK(ok.outcome == Outcome::succeeded);
    CHECK(ok.provider_reference == k_intent);
    CHECK(outcome(200, intent_json("canceled")) == Outcome::succeeded);
    CHECK(outcome(200, intent_json("succeeded", 4999)) == Outcome::declined);
    CHECK(outcome(200, intent_json("requires_capture")) == Outcome::unknown);
    CHECK(outcome(200, intent_json("canceled", 0, std::nullopt, "pi_other")) == Outcome::unknown);
    CHECK(outcome(200, intent_json("canceled", 0, std::nullopt, k_intent, "usd")) ==
          Outcome::unknown);
    // Captured already: the hold cannot be released.
    const auto captured = interpret_void(o, 400, unexpected_state(intent_json("succeeded", 4999)));
    CHECK(captured.outcome == Outcome::declined);
    CHECK(captured.call.error_class == "invalid_request:payment_intent_unexpected_state:succeeded");
    CHECK(outcome(400, error_json("invalid_request_error", "charge_already_captured")) ==
          Outcome::declined);
    // Canceled already: perhaps by this very void, its answer lost and its key expired, or by the
    // authorisation's expiry: the lookup decides.
    CHECK(outcome(400, unexpected_state(intent_json("canceled"))) == Outcome::unknown);
    CHECK(outcome(400, unexpected_state(intent_json("canceled", 0, std::nullopt, k_intent, "eur",
                                                    "automatic"))) == Outcome::unknown);
    CHECK(outcome(400, error_json("invalid_request_error", "payment_intent_unexpected_state")) ==
          Outcome::unknown);
    CHECK(outcome(400, unexpected_state(intent_json("succeeded", 4999, std::nullopt,
                                                    "pi_other"))) == Outcome::unknown);
    CHECK(outcome(400, error_json("invalid_request_error", "parameter_invalid_string")) ==
          Outcome::rejected);
    CHECK(outcome(401, error_json("invalid_request_error", "")) == Outcome::rejected);
    CHECK(outcome(429, error_json("rate_limit_error", "rate_limit")) == Outcome::not_sent);
    CHECK(outcome(409, error_json("idempotency_error", "idempotency_key_in_use")) ==
          Outcome::unknown);
    CHECK(outcome(502, "") == Outcome::unknown);
}

TEST_CASE("stripe captures: the adapter posts the capture and the void under their own keys, by "
          "the deadline",
          "[providers][stripe][captures]") {
    Recorder rec;
    rec.replies.push_back(response(200, intent_json("succeeded", 4999, k_capture_op)));
    rec.replies.push_back(failure(SendClass::unknown, 28));
    rec.replies.push_back(failure(SendClass::not_sent, 7));
    rec.replies.push_back(response(200, intent_json("canceled")));
    rec.replies.push_back(failure(SendClass::unknown, 52));
    StripeAdapter a(config(), rec.fn());
    AuthorizationOrder capture = capture_order();
    capture.deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    AuthorizationOrder release = void_order();
    release.operation_id = "pr_01a24d5f00007b8c9d0e1f2a3b4c5d6f";
    release.deadline = capture.deadline;

    const auto captured = a.capture(capture);
    CHECK(captured.outcome == Outcome::succeeded);
    CHECK(captured.provider_reference == k_intent);
    CHECK(a.capture(capture).outcome == Outcome::unknown);  // timed out after sending
    CHECK(a.capture(capture).outcome == Outcome::not_sent); // the connection was refused
    REQUIRE(rec.sent.size() == 3);
    for (const HttpRequest& req : rec.sent) {
        CHECK(req.method == "POST");
        CHECK(req.url == "https://api.stripe.test/v1/payment_intents/" + k_intent + "/capture");
        CHECK(req.mutating);
        CHECK(req.deadline == capture.deadline);
        CHECK(header(req, "Idempotency-Key") == k_capture_op); // the capture's, every attempt
        CHECK(header(req, "Content-Type") == "application/x-www-form-urlencoded");
        CHECK(header(req, "Stripe-Version") == k_api_version);
        CHECK(req.body == *capture_body(capture));
    }

    CHECK(a.void_authorization(release).outcome == Outcome::succeeded);
    CHECK(a.void_authorization(release).outcome == Outcome::unknown);
    REQUIRE(rec.sent.size() == 5);
    for (std::size_t i = 3; i < 5; ++i) {
        const HttpRequest& req = rec.sent[i];
        CHECK(req.method == "POST");
        CHECK(req.url == "https://api.stripe.test/v1/payment_intents/" + k_intent + "/cancel");
        CHECK(req.mutating);
        CHECK(req.deadline == release.deadline);
        CHECK(header(req, "Idempotency-Key") == release.operation_id);
        CHECK(req.body.empty()); // no cancellation_reason: payrecon is not told one
    }

    // Refused without a call: a capture that leaves the authorisation open (no multicapture), and
    // an authorisation with no PaymentIntent.
    AuthorizationOrder partial = capture_order(1000);
    partial.final = false;
    const auto open = a.capture(partial);
    CHECK(open.outcome == Outcome::rejected);
    REQUIRE(open.rejection);
    CHECK(open.rejection->code == "multiple_captures_not_supported");
    AuthorizationOrder no_reference = capture_order();
    no_reference.payment_reference.clear();
    CHECK(a.capture(no_reference).call.error_class == "no_payment_reference");
    AuthorizationOrder no_reference_void = void_order();
    no_reference_void.payment_reference.clear();
    CHECK(a.void_authorization(no_reference_void).call.error_class == "no_payment_reference");
    CHECK(a.lookup_capture(no_reference).status == Status::failed);
    AuthorizationOrder mga = capture_order();
    mga.amount = Money{150, "MGA"};
    CHECK(a.capture(mga).call.error_class == "amount_not_expressible");
    CHECK(rec.sent.size() == 5);
}

TEST_CASE("stripe captures: the lookup reads the PaymentIntent and tells each kind's outcome",
          "[providers][stripe][captures]") {
    struct Row {
        OperationKind kind;
        std::string body;
        Status status;
        Outcome state = Outcome::unknown;
        long long amount = 0;
    };
    const auto c = OperationKind::capture;
    const auto v = OperationKind::void_authorization;
    const std::vector<Row> rows = {
        // A capture.
        {c, intent_json("succeeded", 4999, k_capture_op), Status::found, Outcome::succeeded, 4999},
        {c, intent_json("succeeded", 4999), Status::found, Outcome::succeeded, 4999},
        {c, intent_json("succeeded", 3000), Status::found, Outcome::succeeded, 3000},
        {c, intent_json("succeeded", 4999, "pr_another_capture"), Status::found, Outcome::declined,
         4999},
        {c, intent_json("requires_capture"), Status::not_found},
        {c, intent_json("requires_payment_method"), Status::not_found},
        {c, intent_json("canceled"), Status::found, Outcome::declined, 4999},
        {c, intent_json("canceled", 0, std::nullopt, k_intent, "eur", "automatic"), Status::found,
         Outcome::declined, 4999},
        {c, intent_json("processing"), Status::found, Outcome::pending, 4999},
        // A void.
        {v, intent_json("canceled"), Status::found, Outcome::succeeded, 4999},
        {v, intent_json("canceled", 0, std::nullopt, k_intent, "eur", "automatic"), Status::found,
         Outcome::succeeded, 4999},
        {v, intent_json("requires_capture"), Status::not_found},
        {v, intent_json("succeeded", 4999, k_capture_op), Status::found, Outcome::declined, 4999},
        {v, intent_json("processing"), Status::found, Outcome::pending, 4999},
        // No trustworthy answer: another PaymentIntent, another currency, a word no table knows.
        {c, intent_json("succeeded", 4999, k_capture_op, "pi_other"), Status::failed},
        {v, intent_json("canceled", 0, std::nullopt, k_intent, "usd"), Status::failed},
        {c, intent_json("requires_reauthorization"), Status::failed},
        {v, R"({"object": "list", "data": []})", Status::failed},
    };
    for (const auto& row : rows) {
        INFO(to_string(row.kind) << " " << row.body);
        Recorder rec;
        rec.replies.push_back(response(200, row.body));
        StripeAdapter a(config(), rec.fn());
        AuthorizationOrder o = row.kind == c ? capture_order() : void_order();
        const auto r = a.lookup_capture(o);
        CHECK(r.status == row.status);
        REQUIRE(rec.sent.size() == 1);
        CHECK(rec.sent[0].method == "GET");
        CHECK(rec.sent[0].url == "https://api.stripe.test/v1/payment_intents/" + k_intent);
        CHECK_FALSE(rec.sent[0].mutating);
        CHECK(r.call.http_status == 200);
        if (row.status == Status::found) {
            REQUIRE(r.payment);
            CHECK(r.payment->state == row.state);
            // Only a capture writes its operation ID on the PaymentIntent.
            CHECK(r.payment->operation_id.has_value() ==
                  (row.kind == c && row.body.find("capture_operation_id") != std::string::npos));
            CHECK(r.payment->provider_reference == k_intent);
            CHECK(r.payment->amount == Money{row.amount, "EUR"});
        } else {
            CHECK_FALSE(r.payment);
        }
        if (row.status == Status::failed) {
            CHECK_FALSE(r.call.error_class.empty());
        }
    }
    // What earlier captures took is not this one's.
    AuthorizationOrder second = capture_order(1000);
    second.captured_before_minor = 4999;
    const auto nothing_left = capture_lookup_answer(second, intent_json("succeeded", 4999));
    REQUIRE(nothing_left.status == Status::found);
    CHECK(nothing_left.payment->state == Outcome::declined);
    second.captured_before_minor = 2000;
    const auto took = capture_lookup_answer(second, intent_json("succeeded", 3000, k_capture_op));
    REQUIRE(took.status == Status::found);
    CHECK(took.payment->amount == Money{1000, "EUR"});
    CHECK(took.payment->operation_id == k_capture_op);

    // Never an answer from a call that failed.
    Recorder rec;
    rec.replies.push_back(response(503, ""));
    rec.replies.push_back(response(404, error_json("invalid_request_error", "resource_missing")));
    rec.replies.push_back(failure(SendClass::unknown, 28));
    rec.replies.push_back(response(200, "{\"id\": "));
    StripeAdapter a(config(), rec.fn());
    const auto unavailable = a.lookup_capture(capture_order());
    CHECK(unavailable.status == Status::failed);
    CHECK(unavailable.call.error_class == "http_503");
    CHECK(a.lookup_capture(void_order()).status == Status::failed);
    CHECK(a.lookup_capture(capture_order()).status == Status::failed);
    const auto garbled = a.lookup_capture(capture_order());
    CHECK(garbled.status == Status::failed);
    CHECK(garbled.call.error_class == "unrecognised_response");
    CHECK(rec.sent.size() == 4);
}
