// Checkout.com's authorise-then-capture (issue 32, DESIGN section 16): a payment made with
// `capture: false`, its captures (POST /payments/{id}/captures, Final or NonFinal) and void
// (/voids) against Checkout.com's published document, their outcome table, and the payment's
// actions read back to find them again -- the adapter's calls through an injected send function.
#include "providers/checkout/adapter.hpp"
#include "providers/checkout/wire.hpp"
#include "tests/providers/adapter_testing.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

using namespace payrecon;
using namespace payrecon::providers;
using namespace payrecon::providers::checkout;
using namespace payrecon::testing;
using net::HttpRequest;
using net::SendClass;
using Status = LookupResult::Status;

namespace {

const nlohmann::json& spec() {
    return provider_contract("checkout");
}

const nlohmann::json& schema(const std::string& name) {
    return spec().at("components").at("schemas").at(name);
}

const std::string k_payment = "pay_y3oqhf46pyzuxjbcn2giaqnb44";
const std::string k_capture_op = "pr_01a24d5e6f7a7b8c9d0e1f2a3b4c5d6e";
const std::string k_void_op = "pr_01a24d5f00007b8c9d0e1f2a3b4c5d6f";

AuthorizationOrder capture_order(long long amount = 4999, bool final = true) {
    AuthorizationOrder o;
    o.kind = OperationKind::capture;
    o.operation_id = k_capture_op;
    o.operation_row_id = "01a24d5e-6f7a-7b8c-9d0e-1f2a3b4c5d6e";
    o.payment_id = "3aabbe24-9c9c-40ea-819f-7766897ccdda";
    o.payment_operation_id = k_sample_operation_id;
    o.payment_reference = k_payment;
    o.merchant_reference = "SHIP-1";
    o.amount = Money{amount, "EUR"};
    o.final = final;
    o.authorized_minor = 4999;
    o.metadata = {{"ticket", "T-9"}};
    return o;
}

AuthorizationOrder void_order() {
    AuthorizationOrder o = capture_order();
    o.kind = OperationKind::void_authorization;
    o.operation_id = k_void_op;
    o.merchant_reference.reset();
    return o;
}

PaymentOrder manual_order() {
    PaymentOrder o = sample_order("src_wmlfc3zyhqzehihu7giusaaawu");
    o.manual_capture = true;
    return o;
}

std::string accepted_json(const std::string& reference,
                          const std::string& action_id = "act_fd3h6evhpn3uxdoqbuu3lqnqbm") {
    nlohmann::json j = {
        {"reference", reference},
        {"_links", {{"payment", {{"href", "https://api.checkout.test/payments/" + k_payment}}}}}};
    if (!action_id.empty()) {
        j["action_id"] = action_id;
    }
    return j.dump();
}

nlohmann::json action(const std::string& id, const std::string& type, long long amount,
                      const std::optional<std::string>& reference, std::optional<bool> approved) {
    nlohmann::json a = {{"id", id},
                        {"type", type},
                        {"processed_on", "2026-12-02T10:00:00Z"},
                        {"amount", amount},
                        {"response_code", "10000"}};
    if (reference) {
        a["reference"] = *reference;
    }
    if (approved) {
        a["approved"] = *approved;
    }
    return a;
}

// The payment's authorisation, the oldest of its actions (last in Checkout.com's list).
nlohmann::json authorization() {
    return action("act_auth0000000000000000000000", "Authorization", 4999, k_sample_operation_id,
                  true);
}

std::string actions_json(std::vector<nlohmann::json> newest_first) {
    nlohmann::json out = nlohmann::json::array();
    for (auto& a : newest_first) {
        out.push_back(std::move(a));
    }
    return out.dump();
}

// A payment's details as GET /payments?reference= lists them: `status`, and the captured total
// in its balances.
std::string payment_list_json(const std::string& status, long long captured) {
    const nlohmann::json details = {
        {"id", k_payment},
        {"requested_on", "2026-12-01T10:00:00Z"},
        {"amount", 4999},
        {"currency", "EUR"},
        {"reference", k_sample_operation_id},
        {"approved", true},
        {"status", status},
        {"balances", {{"total_authorized", 4999}, {"total_captured", captured}}}};
    return nlohmann::json{
        {"limit", 100}, {"skip", 0}, {"total_count", 1}, {"data", nlohmann::json::array({details})}}
        .dump();
}

ProviderConfig config() {
    ProviderConfig c = sample_config("checkout", "https://api.sandbox.checkout.test",
                                     ApiKey{"CKO_SECRET_KEY", Secret("sk_sbox_not_a_real_key_00")});
    c.settings = checkout::settings("pc_q4dbxom5jbgudnjzjpz7j2z6uq");
    return c;
}

std::set<std::string> names(const nlohmann::json& object) {
    std::set<std::string> out;
    for (const auto& [key, value] : object.items()) {
        out.insert(key);
    }
    return out;
}

} // namespace

TEST_CASE("checkout captures: the capture, the void and the manual create carry only fields "
          "Checkout.com documents",
          "[providers][checkout][captures][contract]") {
    const auto& captures = spec().at("paths").at("/payments/{id}/captures").at("post");
    CHECK(captures.at("requestBody").at("content").at("application/json").at("schema").at("$ref") ==
          "#/components/schemas/CaptureRequest");
    const auto& capture_request = schema("CaptureRequest");
    const auto body = capture_body(capture_order());
    REQUIRE(body);
    const auto sent = nlohmann::json::parse(*body);
    for (const auto& name : names(sent)) {
        INFO(name);
        CHECK(capture_request.at("properties").contains(name));
    }
    CHECK(names(sent) == std::set<std::string>{"amount", "capture_type", "metadata", "reference"});
    CHECK(sent["amount"] == 4999);
    CHECK(sent["capture_type"] == "Final");
    CHECK(sent["reference"] == k_capture_op); // the capture's own, not its payment's
    CHECK(k_capture_op.size() <=
          capture_request.at("properties").at("reference").at("maxLength").get<std::size_t>());
    CHECK(sent["metadata"] == nlohmann::json{{"operation_id", k_capture_op},
                                             {"merchant_reference", "SHIP-1"},
                                             {"ticket", "T-9"}});
    // A capture that leaves the authorisation open is NonFinal; both are Checkout.com's words.
    const auto partial = nlohmann::json::parse(*capture_body(capture_order(1500, false)));
    CHECK(partial["capture_type"] == "NonFinal");
    CHECK(partial["amount"] == 1500);
    const auto& types = capture_request.at("properties").at("capture_type").at("enum");
    CHECK(std::set<std::string>(types.begin(), types.end()) ==
          std::set<std::string>{"Final", "NonFinal"});
    // Checkout.com's units: CLP in hundredths there, whole pesos in ISO 4217.
    AuthorizationOrder clp = capture_order(5000);
    clp.amount = Money{5000, "CLP"};
    CHECK(nlohmann::json::parse(*capture_body(clp))["amount"] == 500000);
    AuthorizationOrder kwd = capture_order();
    kwd.amount = Money{1234, "KWD"}; // Checkout.com's KWD amounts end in 0
    CHECK_FALSE(capture_body(kwd));
    AuthorizationOrder no_reference = capture_order();
    no_reference.payment_reference.clear();
    CHECK_FALSE(capture_body(no_reference));
    CHECK_FALSE(void_body(AuthorizationOrder{no_reference}));

    // The void: its reference and metadata; a void releases all that is left, so no amount.
    const auto& voids = spec().at("paths").at("/payments/{id}/voids").at("post");
    CHECK(voids.at("requestBody").at("content").at("application/json").at("schema").at("$ref") ==
          "#/components/schemas/VoidRequest");
    const auto v = nlohmann::json::parse(*void_body(void_order()));
    for (const auto& name : names(v)) {
        INFO(name);
        CHECK(schema("VoidRequest").at("properties").contains(name));
    }
    CHECK(names(v) == std::set<std::string>{"metadata", "reference"});
    CHECK(v["reference"] == k_void_op);
    CHECK(v["metadata"] == nlohmann::json{{"operation_id", k_void_op}, {"ticket", "T-9"}});

    // The answers the document lists for each call, each read on purpose.
    const std::set<std::string> documented{"202", "401", "403", "404", "422", "502"};
    CHECK(names(captures.at("responses")) == documented);
    CHECK(names(voids.at("responses")) == documented);
    for (const auto& [name, reference] :
         {std::pair{std::string("CaptureAcceptedResponse"), k_capture_op},
          std::pair{std::string("VoidAcceptedResponse"), k_void_op}}) {
        INFO(name);
        const auto answer = nlohmann::json::parse(accepted_json(reference));
        for (const auto& field : names(answer)) {
            INFO(field);
            CHECK(schema(name).at("properties").contains(field));
        }
        CHECK(schema(name).at("required") == nlohmann::json::array({"action_id"}));
    }

    // The lookup: the payment's actions, of the types the document lists.
    const auto& action_types = schema("PaymentAction").at("properties").at("type").at("enum");
    for (const char* type : {"Authorization", "Capture", "Void"}) {
        INFO(type);
        CHECK(std::find(action_types.begin(), action_types.end(), type) != action_types.end());
    }
    CHECK(schema("PaymentResponseBalances").at("properties").contains("total_captured"));

    // A payment that only authorises: `capture: false`, a field PaymentRequest has.
    const auto create = create_body(manual_order(), "pc_q4dbxom5jbgudnjzjpz7j2z6uq");
    REQUIRE(create);
    CHECK(nlohmann::json::parse(*create)["capture"] == false);
    CHECK(schema("PaymentRequest").at("properties").contains("capture"));
    const auto automatic = create_body(sample_order("src_wmlfc3zyhqzehihu7giusaaawu"),
                                       "pc_q4dbxom5jbgudnjzjpz7j2z6uq");
    CHECK(nlohmann::json::parse(*automatic)["capture"] == true);
}

TEST_CASE("checkout captures: the descriptor offers partial captures of a 7-day authorisation, "
          "found again among the payment's actions",
          "[providers][checkout][captures]") {
    const auto& api = descriptor().api;
    CHECK(api.manual_capture);
    CHECK(api.multiple_captures);
    CHECK(api.authorization_validity == std::chrono::hours(7 * 24));
    CHECK(api.capture_lookup);
    CheckoutAdapter a(config(), [](const HttpRequest&) { return response(500, ""); });
    CHECK(a.capabilities().manual_capture);
    CHECK(a.capabilities().capture_lookup);
}

TEST_CASE("checkout captures: a payment that only authorises reads Authorized, and what was "
          "captured since, as succeeded",
          "[providers][checkout][captures]") {
    // The create: 201 Authorized is the hold asked for.
    const nlohmann::json created = {
        {"id", k_payment},          {"action_id", "act_y3oqhf46pyzuxjbcn2giaqnb44"},
        {"amount", 4999},           {"currency", "EUR"},
        {"approved", true},         {"status", "Authorized"},
        {"response_code", "10000"}, {"reference", k_sample_operation_id}};
    const auto r = interpret_create(manual_order(), 201, created.dump());
    CHECK(r.outcome == Outcome::succeeded);
    CHECK(r.provider_reference == k_payment);

    // The status table for the order that made the payment.
    struct Row {
        std::string status;
        Outcome manual;
        Outcome automatic;
    };
    for (const Row& row : {Row{"Authorized", Outcome::succeeded, Outcome::succeeded},
                           Row{"Partially Captured", Outcome::succeeded, Outcome::unknown},
                           Row{"Captured", Outcome::succeeded, Outcome::succeeded},
                           Row{"Paid", Outcome::succeeded, Outcome::succeeded},
                           Row{"Voided", Outcome::declined, Outcome::unknown},
                           Row{"Expired", Outcome::declined, Outcome::declined},
                           Row{"Declined", Outcome::declined, Outcome::declined},
                           Row{"Refunded", Outcome::unknown, Outcome::unknown},
                           Row{"Retry Scheduled", Outcome::unknown, Outcome::unknown}}) {
        INFO(row.status);
        CHECK(map_status_for(row.status, true) == row.manual);
        CHECK(map_status_for(row.status, false) == row.automatic);
        CHECK(map_status(row.status) == row.automatic);
    }

    // The lookup: the hold awaits its capture; once partly captured it still is the authorisation.
    Recorder rec;
    rec.replies.push_back(response(200, payment_list_json("Authorized", 0)));
    rec.replies.push_back(response(200, payment_list_json("Partially Captured", 1500)));
    rec.replies.push_back(response(200, payment_list_json("Partially Captured", 1500)));
    rec.replies.push_back(response(200, payment_list_json("Voided", 0)));
    CheckoutAdapter a(config(), rec.fn());
    const auto held = a.lookup(manual_order());
    REQUIRE(held.status == Status::found);
    CHECK(held.payment->state == Outcome::succeeded);
    CHECK(held.payment->awaiting_capture);
    CHECK(held.payment->amount_captured_minor == 0);
    const auto partly = a.lookup(manual_order());
    REQUIRE(partly.status == Status::found);
    CHECK(partly.payment->state == Outcome::succeeded);
    CHECK_FALSE(partly.payment->awaiting_capture);
    CHECK(partly.payment->amount_captured_minor == 1500);
    // The same answer for a payment that captures at once is not what it asked for.
    const auto not_asked = a.lookup(sample_order("src_wmlfc3zyhqzehihu7giusaaawu"));
    REQUIRE(not_asked.status == Status::found);
    CHECK(not_asked.payment->state == Outcome::unknown);
    const auto released = a.lookup(manual_order());
    REQUIRE(released.status == Status::found);
    CHECK(released.payment->state == Outcome::declined);
    CHECK(released.payment->raw_status == "Voided");
    CHECK(rec.sent.size() == 4);
}

TEST_CASE("checkout captures: the capture's and the void's outcome table",
          "[providers][checkout][captures]") {
    struct Row {
        int status;
        std::string body;
        Outcome outcome;
        std::string error_class;
    };
    const std::string invalid =
        R"({"request_id":"0HL80RJLS76I7","error_type":"request_invalid","error_codes":["amount_invalid"]})";
    for (const auto& order : {capture_order(), void_order()}) {
        const bool capture = order.kind == OperationKind::capture;
        INFO((capture ? "capture" : "void"));
        const std::vector<Row> rows = {
            // Accepted, processed asynchronously: the lookup reads how it ended.
            {202, accepted_json(order.operation_id), Outcome::pending, ""},
            // An acceptance we cannot match to our request proves nothing.
            {202, accepted_json("pr_someone_else"), Outcome::unknown, "unrecognised_response"},
            {202, accepted_json(order.operation_id, ""), Outcome::unknown, "unrecognised_response"},
            {202, "not json", Outcome::unknown, "unrecognised_response"},
            {200, accepted_json(order.operation_id), Outcome::unknown, "http_200"},
            // "Capture not allowed", "Void not allowed".
            {403, "", Outcome::declined, capture ? "capture_not_allowed" : "void_not_allowed"},
            {401, "", Outcome::rejected, "request_rejected:unauthorized"},
            {404, "", Outcome::rejected, "request_rejected:payment_not_found"},
            {422, invalid, Outcome::rejected, "request_rejected:amount_invalid"},
            {422, R"({"error_type":"processing_error"})", Outcome::unknown,
             "unrecognised_response"},
            // It may have executed, and the key would execute it again: a lookup first.
            {409, "", Outcome::unknown, "idempotency_conflict"},
            {429, "", Outcome::unknown, "too_many_requests"},
            {500, "", Outcome::unknown, "http_500"},
            {502, "", Outcome::unknown, "http_502"},
        };
        for (const Row& row : rows) {
            INFO(row.status << " " << row.body);
            const auto r = interpret_authorization_action(order, row.status, row.body);
            CHECK(r.outcome == row.outcome);
            CHECK(r.call.error_class == row.error_class);
            CHECK(r.call.http_status == row.status);
            if (r.outcome == Outcome::pending) {
                CHECK(r.provider_reference == "act_fd3h6evhpn3uxdoqbuu3lqnqbm");
            } else {
                CHECK_FALSE(r.provider_reference);
            }
            if (r.outcome == Outcome::rejected) {
                REQUIRE(r.rejection);
                CHECK_FALSE(r.rejection->code.empty());
            }
        }
    }
}

TEST_CASE("checkout captures: the adapter posts captures and voids under their own keys, by the "
          "claim's deadline, and sends nothing it cannot carry",
          "[providers][checkout][captures]") {
    Recorder rec;
    rec.replies.push_back(response(202, accepted_json(k_capture_op)));
    rec.replies.push_back(failure(SendClass::unknown, 28)); // timed out after sending
    rec.replies.push_back(response(202, accepted_json(k_void_op)));
    rec.replies.push_back(failure(SendClass::not_sent, 7)); // refused before anything was sent
    CheckoutAdapter a(config(), rec.fn());
    auto order = capture_order(1500, false);
    order.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    const auto first = a.capture(order);
    CHECK(first.outcome == Outcome::pending);
    CHECK(first.provider_reference == "act_fd3h6evhpn3uxdoqbuu3lqnqbm");
    CHECK(a.capture(order).outcome == Outcome::unknown);
    auto v = void_order();
    v.deadline = order.deadline;
    CHECK(a.void_authorization(v).outcome == Outcome::pending);
    CHECK(a.void_authorization(v).outcome == Outcome::not_sent);
    REQUIRE(rec.sent.size() == 4);
    for (std::size_t i = 0; i < rec.sent.size(); ++i) {
        INFO(i);
        const HttpRequest& req = rec.sent[i];
        const bool capture = i < 2;
        CHECK(req.method == "POST");
        CHECK(req.mutating);
        CHECK(req.url == "https://api.sandbox.checkout.test/payments/" + k_payment +
                             (capture ? "/captures" : "/voids"));
        // The operation's own key on every attempt -- never its payment's.
        CHECK(header(req, "Cko-Idempotency-Key") == (capture ? k_capture_op : k_void_op));
        CHECK(header(req, "Content-Type") == "application/json");
        CHECK(req.deadline == order.deadline);
        const auto body = nlohmann::json::parse(req.body);
        CHECK(body["reference"] == (capture ? k_capture_op : k_void_op));
        if (capture) {
            CHECK(body["capture_type"] == "NonFinal");
            CHECK(body["amount"] == 1500);
        }
    }

    // Nothing is sent without the payment's ID, with metadata Checkout.com cannot carry, or an
    // amount it cannot express.
    AuthorizationOrder no_reference = capture_order();
    no_reference.payment_reference.clear();
    const auto refused = a.capture(no_reference);
    CHECK(refused.outcome == Outcome::declined);
    CHECK(refused.call.error_class == "no_payment_reference");
    no_reference.kind = OperationKind::void_authorization;
    CHECK(a.void_authorization(no_reference).call.error_class == "no_payment_reference");
    AuthorizationOrder crowded = capture_order();
    for (int i = 0; i < 30; ++i) {
        crowded.metadata["k" + std::to_string(i)] = "v";
    }
    const auto not_carried = a.capture(crowded);
    CHECK(not_carried.outcome == Outcome::declined);
    CHECK(not_carried.call.error_class == "not_carried");
    AuthorizationOrder kwd = capture_order();
    kwd.amount = Money{1234, "KWD"};
    CHECK(a.capture(kwd).call.error_class == "not_expressible");
    CHECK(rec.sent.size() == 4);
}

TEST_CASE("checkout captures: the lookup finds the capture or the void among the payment's "
          "actions by its reference",
          "[providers][checkout][captures]") {
    struct Row {
        std::string what;
        std::vector<nlohmann::json> actions; // newest first, as Checkout.com lists them
        Status status;
        Outcome state = Outcome::unknown;
        std::string reference;
        std::size_t duplicates = 0;
    };
    const std::vector<Row> capture_rows = {
        {"approved",
         {action("act_cap1", "Capture", 4999, k_capture_op, true), authorization()},
         Status::found,
         Outcome::succeeded,
         "act_cap1",
         0},
        {"not processed yet",
         {action("act_cap1", "Capture", 4999, k_capture_op, std::nullopt), authorization()},
         Status::found,
         Outcome::pending,
         "act_cap1",
         0},
        {"refused",
         {action("act_cap1", "Capture", 4999, k_capture_op, false), authorization()},
         Status::found,
         Outcome::declined,
         "act_cap1",
         0},
        {"executed twice (a re-send after a non-2xx): the oldest, and a duplicate",
         {action("act_cap2", "Capture", 4999, k_capture_op, true),
          action("act_cap1", "Capture", 4999, k_capture_op, true), authorization()},
         Status::found,
         Outcome::succeeded,
         "act_cap1",
         1},
        {"another capture and a void with our reference are not it",
         {action("act_void", "Void", 3499, k_capture_op, true),
          action("act_other", "Capture", 1500, "pr_someone_else", true), authorization()},
         Status::not_found,
         Outcome::unknown,
         "",
         0},
        {"the authorisation untouched",
         {authorization()},
         Status::not_found,
         Outcome::unknown,
         "",
         0},
        {"no authorisation: not the payment the order names",
         {action("act_cap1", "Capture", 4999, k_capture_op, true)},
         Status::failed,
         Outcome::unknown,
         "",
         0},
    };
    const std::vector<Row> void_rows = {
        {"approved",
         {action("act_void", "Void", 4999, k_void_op, true), authorization()},
         Status::found,
         Outcome::succeeded,
         "act_void",
         0},
        {"Checkout.com's own void on expiry carries no reference",
         {action("act_expire", "Void", 4999, std::nullopt, true), authorization()},
         Status::not_found,
         Outcome::unknown,
         "",
         0},
        {"a capture with the void's reference is not it",
         {action("act_cap1", "Capture", 4999, k_void_op, true), authorization()},
         Status::not_found,
         Outcome::unknown,
         "",
         0},
    };
    for (const bool capture : {true, false}) {
        for (const Row& row : capture ? capture_rows : void_rows) {
            INFO((capture ? "capture: " : "void: ") << row.what);
            Recorder rec;
            rec.replies.push_back(response(200, actions_json(row.actions)));
            CheckoutAdapter a(config(), rec.fn());
            const auto order = capture ? capture_order() : void_order();
            const auto found = a.lookup_capture(order);
            CHECK(found.status == row.status);
            CHECK(found.call.http_status == 200);
            REQUIRE(rec.sent.size() == 1);
            CHECK(rec.sent[0].method == "GET");
            CHECK_FALSE(rec.sent[0].mutating);
            CHECK(rec.sent[0].url ==
                  "https://api.sandbox.checkout.test/payments/" + k_payment + "/actions");
            if (row.status == Status::found) {
                REQUIRE(found.payment);
                CHECK(found.payment->state == row.state);
                CHECK(found.payment->provider_reference == row.reference);
                CHECK(found.payment->operation_id == order.operation_id);
                CHECK(found.payment->amount == Money{4999, "EUR"});
                CHECK(found.duplicates.size() == row.duplicates);
            } else {
                CHECK_FALSE(found.payment);
            }
        }
    }

    // No trustworthy answer is never absence.
    Recorder rec;
    rec.replies.push_back(response(200, R"({"not": "an array"})"));
    rec.replies.push_back(response(200, R"([{"id": "act_1", "type": "Capture"}])"));
    rec.replies.push_back(response(404, ""));
    rec.replies.push_back(response(503, ""));
    rec.replies.push_back(failure(SendClass::unknown, 28));
    CheckoutAdapter a(config(), rec.fn());
    for (int i = 0; i < 5; ++i) {
        INFO(i);
        CHECK(a.lookup_capture(capture_order()).status == Status::failed);
    }
    AuthorizationOrder no_reference = capture_order();
    no_reference.payment_reference.clear();
    const auto unasked = a.lookup_capture(no_reference);
    CHECK(unasked.status == Status::failed);
    CHECK(unasked.call.error_class == "no_payment_reference");
    CHECK(rec.sent.size() == 5);
}
