// The fake provider's Square authorisations over real HTTP on loopback (issue 32): a payment made
// with `autocomplete: false` (APPROVED, nothing charged), its CompletePayment and CancelPayment --
// no idempotency key, so a second call of a closed payment is refused, never executed twice --,
// UpdatePayment lowering an APPROVED payment's amount under its key, Square's own cancel at the end
// of delay_duration on the fake clock, and the same faults as a create, counted in the one ledger
// every dialect shares (a complete or a cancel under "complete:<id>" / "cancel:<id>").
#include "tests/fake_provider/test_client.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using namespace payrecon;
using namespace payrecon::fake;
using namespace payrecon::fake::test;
using Json = nlohmann::json;

namespace {

// A CreatePaymentRequest as the square adapter sends it for a payment that only authorises.
Json authorisation(const std::string& op, long long amount) {
    Json j;
    j["idempotency_key"] = op;
    j["source_id"] = "cnon:card-nonce-ok";
    j["amount_money"] = {{"amount", amount}, {"currency", "EUR"}};
    j["reference_id"] = op;
    j["autocomplete"] = false;
    j["delay_action"] = "CANCEL";
    j["delay_duration"] = "P7D";
    return j;
}

std::vector<std::string> headers() {
    return {auth(), "Content-Type: application/json", "Square-Version: 2025-08-20"};
}

HttpResult create(const Running& r, const Json& body) {
    return call("POST", r.url("/v2/payments"), headers(), body.dump());
}

// Creates an authorisation; returns its payment ID.
std::string authorise(const Running& r, const std::string& op, long long amount) {
    const HttpResult made = create(r, authorisation(op, amount));
    REQUIRE(made.status == 200);
    CHECK(made.json()["payment"]["status"] == "APPROVED");
    return made.json()["payment"]["id"].get<std::string>();
}

HttpResult complete(const Running& r, const std::string& id, const Json& body = Json::object(),
                    long timeout_ms = 5000) {
    return call("POST", r.url("/v2/payments/" + id + "/complete"), headers(), body.dump(),
                timeout_ms);
}

HttpResult cancel(const Running& r, const std::string& id) {
    return call("POST", r.url("/v2/payments/" + id + "/cancel"), headers(), "");
}

HttpResult update(const Running& r, const std::string& id, const std::string& key,
                  long long amount) {
    const Json body = {{"idempotency_key", key},
                       {"payment", {{"amount_money", {{"amount", amount}, {"currency", "EUR"}}}}}};
    return call("PUT", r.url("/v2/payments/" + id), headers(), body.dump());
}

Json read(const Running& r, const std::string& id) {
    const HttpResult got = call("GET", r.url("/v2/payments/" + id), headers());
    REQUIRE(got.status == 200);
    return got.json()["payment"];
}

long long charged_eur(const Running& r) {
    const Json l = r.ledger();
    return l["charged"].contains("eur") ? l["charged"]["eur"].get<long long>() : 0;
}

std::string first_code(const HttpResult& result) {
    return result.json()["errors"].at(0)["code"].get<std::string>();
}

} // namespace

TEST_CASE("square fake: autocomplete false authorises only -- APPROVED, nothing charged, its "
          "delay shown -- and a complete captures it once",
          "[fake_provider][square][capture]") {
    Running r;
    const std::string id = authorise(r, "op-auth", 4999);
    CHECK(charged_eur(r) == 0);
    CHECK(r.executions("op-auth") == 1);
    const Json held = read(r, id);
    CHECK(held["status"] == "APPROVED");
    CHECK(held["card_details"]["status"] == "AUTHORIZED");
    CHECK(held["delay_duration"] == "P7D");
    CHECK(held["delay_action"] == "CANCEL");
    CHECK(held["capabilities"] == Json::array({"EDIT_AMOUNT_DOWN"}));

    const HttpResult done = complete(r, id);
    REQUIRE(done.status == 200);
    CHECK(done.json()["payment"]["status"] == "COMPLETED");
    CHECK(done.json()["payment"]["card_details"]["status"] == "CAPTURED");
    CHECK(r.executions("complete:" + id) == 1);
    CHECK(charged_eur(r) == 4999);
    // No key: a second complete is refused as Square refuses a payment not APPROVED, executing
    // nothing.
    const HttpResult twice = complete(r, id);
    CHECK(twice.status == 400);
    CHECK(first_code(twice) == "BAD_REQUEST");
    CHECK(twice.json()["errors"][0]["category"] == "INVALID_REQUEST_ERROR");
    CHECK(r.executions("complete:" + id) == 1);
    CHECK(r.ledger()["deliveries_by_operation"]["complete:" + id] == 2);
    CHECK(charged_eur(r) == 4999);
    // Nor can a completed payment be canceled.
    CHECK(cancel(r, id).status == 400);
    CHECK(r.executions("cancel:" + id) == 0);
    CHECK(read(r, id)["status"] == "COMPLETED");
    // Reads are counted per payment.
    CHECK(r.ledger()["square_payment_reads"][id] == 2);
}

TEST_CASE("square fake: a cancel voids an APPROVED payment once, and nothing completes after it",
          "[fake_provider][square][capture]") {
    Running r;
    const std::string id = authorise(r, "op-void", 2500);
    const HttpResult voided = cancel(r, id);
    REQUIRE(voided.status == 200);
    CHECK(voided.json()["payment"]["status"] == "CANCELED");
    CHECK(voided.json()["payment"]["card_details"]["status"] == "VOIDED");
    CHECK(voided.json()["payment"]["card_details"]["card_payment_timeline"].contains("voided_at"));
    CHECK(r.executions("cancel:" + id) == 1);
    CHECK(cancel(r, id).status == 400);
    CHECK(r.executions("cancel:" + id) == 1);
    const HttpResult after = complete(r, id);
    CHECK(after.status == 400);
    CHECK(after.json()["errors"][0]["detail"].get<std::string>().find("CANCELED") !=
          std::string::npos);
    CHECK(r.executions("complete:" + id) == 0);
    CHECK(charged_eur(r) == 0);
    CHECK(update(r, id, "upd-void", 100).status == 400);
    // An unknown payment: 404.
    CHECK(complete(r, "NoSuchPaymentId").status == 404);
}

TEST_CASE("square fake: UpdatePayment lowers an APPROVED payment under its key, never above what "
          "was approved, and a complete of another version is VERSION_MISMATCH",
          "[fake_provider][square][capture]") {
    Running r;
    const std::string id = authorise(r, "op-upd", 5000);
    const std::string first_version = read(r, id)["version_token"];
    const HttpResult lowered = update(r, id, "op-cap-amount", 3000);
    INFO(lowered.body);
    REQUIRE(lowered.status == 200);
    CHECK(lowered.json()["payment"]["amount_money"]["amount"] == 3000);
    CHECK(lowered.json()["payment"]["approved_money"]["amount"] == 5000);
    CHECK(lowered.json()["payment"]["status"] == "APPROVED");
    const std::string version = lowered.json()["payment"]["version_token"];
    CHECK(version != first_version);
    // The same key and body: the first answer again; another body under it: refused.
    const HttpResult replay = update(r, id, "op-cap-amount", 3000);
    CHECK(replay.status == 200);
    CHECK(replay.json()["payment"]["version_token"] == version);
    CHECK(first_code(update(r, id, "op-cap-amount", 2000)) == "IDEMPOTENCY_KEY_REUSED");
    CHECK(r.ledger()["square_updates"] == 1);
    // Above what was approved: refused.
    const HttpResult up = update(r, id, "op-up", 6000);
    CHECK(up.status == 400);
    CHECK(up.json()["errors"][0]["detail"].get<std::string>().find("EDIT_AMOUNT_UP") !=
          std::string::npos);
    // The first version is gone: a complete naming it captures nothing.
    const HttpResult stale = complete(r, id, Json{{"version_token", first_version}});
    CHECK(stale.status == 400);
    CHECK(first_code(stale) == "VERSION_MISMATCH");
    CHECK(r.executions("complete:" + id) == 0);
    const HttpResult done = complete(r, id, Json{{"version_token", version}});
    REQUIRE(done.status == 200);
    CHECK(done.json()["payment"]["amount_money"]["amount"] == 3000);
    CHECK(charged_eur(r) == 3000);
    // CompletePayment takes nothing but version_token.
    const std::string other = authorise(r, "op-upd2", 100);
    CHECK(first_code(complete(r, other, Json{{"idempotency_key", "k"}})) ==
          "UNKNOWN_BODY_PARAMETER");
    CHECK(r.executions("complete:" + other) == 0);
}

TEST_CASE("square fake: an authorisation left past its delay_duration is CANCELED by Square, in "
          "every read, and can be neither completed nor canceled",
          "[fake_provider][square][capture][clock]") {
    Running r;
    Json short_one = authorisation("op-short", 700);
    short_one["delay_duration"] = "PT1H";
    const HttpResult made = create(r, short_one);
    REQUIRE(made.status == 200);
    const std::string brief = made.json()["payment"]["id"];
    const std::string week = authorise(r, "op-week", 900);
    r.server.advance_clock(std::chrono::hours(2));
    CHECK(read(r, brief)["status"] == "CANCELED");
    CHECK(read(r, week)["status"] == "APPROVED");
    r.server.advance_clock(std::chrono::hours(7 * 24));
    const Json lapsed = read(r, week);
    CHECK(lapsed["status"] == "CANCELED");
    CHECK(lapsed["card_details"]["status"] == "VOIDED");
    CHECK(r.ledger()["square_payments"][1]["status"] == "CANCELED");
    CHECK(complete(r, week).status == 400);
    CHECK(cancel(r, week).status == 400);
    CHECK(r.executions("complete:" + week) == 0);
    CHECK(r.executions("cancel:" + week) == 0);
    CHECK(charged_eur(r) == 0);

    // Delays Square refuses: with autocomplete, past P7D, under a minute, not a duration.
    for (const auto& [autocomplete, delay] : std::vector<std::pair<bool, std::string>>{
             {true, "PT1H"}, {false, "P8D"}, {false, "PT30S"}, {false, "soon"}}) {
        INFO(delay);
        Json j = authorisation("op-bad-" + delay, 100);
        j["autocomplete"] = autocomplete;
        j["delay_duration"] = delay;
        CHECK(create(r, j).status == 400);
    }
    Json completing = authorisation("op-complete-action", 100);
    completing["delay_action"] = "COMPLETE";
    CHECK(create(r, completing).status == 400);
}

TEST_CASE("square fake: a complete draws the create's faults -- dropped or 500 before executing "
          "leaves it APPROVED, executed then cut or 500 leaves it COMPLETED, once",
          "[fake_provider][square][capture][faults]") {
    Running r;
    const auto set_next = [&](Fault f) {
        FaultConfig faults;
        faults.next = {f};
        r.server.set_faults(faults);
    };
    const std::string before = authorise(r, "op-before", 1000);
    set_next(Fault::drop_before_execute);
    CHECK(complete(r, before).code != CURLE_OK);
    set_next(Fault::http_500_before_execute);
    CHECK(complete(r, before).status == 500);
    CHECK(read(r, before)["status"] == "APPROVED");
    CHECK(r.executions("complete:" + before) == 0);
    CHECK(r.ledger()["deliveries_by_operation"]["complete:" + before] == 2);

    const std::string after = authorise(r, "op-after", 1000);
    set_next(Fault::execute_then_rst);
    CHECK(complete(r, after).code != CURLE_OK);
    CHECK(read(r, after)["status"] == "COMPLETED");
    CHECK(r.executions("complete:" + after) == 1);
    const std::string five = authorise(r, "op-500", 1000);
    set_next(Fault::http_500_after_execute);
    CHECK(complete(r, five).status == 500);
    CHECK(read(r, five)["status"] == "COMPLETED");
    CHECK(r.executions("complete:" + five) == 1);
    const std::string hung = authorise(r, "op-hang", 1000);
    set_next(Fault::execute_then_hang);
    CHECK(complete(r, hung, Json::object(), 500).code != CURLE_OK);
    CHECK(read(r, hung)["status"] == "COMPLETED");
    CHECK(charged_eur(r) == 3000);

    const std::string released = authorise(r, "op-cancel-cut", 1000);
    set_next(Fault::execute_then_rst);
    CHECK(cancel(r, released).code != CURLE_OK);
    CHECK(read(r, released)["status"] == "CANCELED");
    CHECK(r.executions("cancel:" + released) == 1);
    const Json faults = r.ledger()["faults_applied"];
    CHECK(faults["execute_then_rst"] == 2);
    CHECK(faults["drop_before_execute"] == 1);

    // A reset forgets the authorisations, the reads and the updates with everything else.
    REQUIRE(update(r, authorise(r, "op-reset", 500), "k-reset", 100).status == 200);
    r.server.reset();
    const Json l = r.ledger();
    CHECK(l["square_payment_count"] == 0);
    CHECK(l["square_updates"] == 0);
    CHECK(l["square_payment_reads"].empty());
}
