// The fake provider's Checkout.com authorisations over real HTTP on loopback (issue 32): a payment
// made with `capture: false`, its captures (Final and NonFinal, never past what was authorised)
// and voids as the checkout adapter sends them, the payment's actions showing them, the provider's
// own void 7 fake days on, and the same key rules and faults as its payments and refunds -- counted
// in the one ledger every dialect shares.
#include "tests/fake_provider/test_client.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

using namespace payrecon;
using namespace payrecon::fake;
using namespace payrecon::fake::test;
using Json = nlohmann::json;

namespace {

constexpr long long k_day = 86400;

// A PaymentRequest as the checkout adapter sends it for a payment that only authorises.
Json authorisation_request(const std::string& reference, long amount,
                           const std::string& source = "src_wmlfc3zyhqzehihu7giusaaawu",
                           bool capture = false) {
    Json j;
    j["source"] = {{"type", "id"}, {"id", source}};
    j["amount"] = amount;
    j["currency"] = "EUR";
    j["reference"] = reference;
    j["processing_channel_id"] = "pc_hpswyyx23geezflc2ocz3exn4y";
    j["capture"] = capture;
    j["payment_type"] = "Recurring";
    j["merchant_initiated"] = true;
    j["metadata"] = {{"operation_id", reference}};
    return j;
}

HttpResult post(const Running& r, const std::string& path, const std::string& key, const Json& body,
                long timeout_ms = 5000) {
    std::vector<std::string> headers{auth(), "Content-Type: application/json"};
    if (!key.empty()) {
        headers.push_back("Cko-Idempotency-Key: " + key);
    }
    return call("POST", r.url(path), headers, body.dump(), timeout_ms);
}

// Creates a payment; returns its ID.
std::string authorise(const Running& r, const std::string& reference, long amount,
                      bool capture = false) {
    const HttpResult made =
        post(r, "/payments", "key-" + reference,
             authorisation_request(reference, amount, "src_wmlfc3zyhqzehihu7giusaaawu", capture));
    REQUIRE(made.status == 201);
    return made.json()["id"].get<std::string>();
}

// A CaptureRequest as the adapter sends it: the operation ID is the reference and the key.
Json capture_request(const std::string& op, std::optional<long> amount,
                     const std::string& type = "Final") {
    Json j = {{"capture_type", type}, {"reference", op}, {"metadata", {{"operation_id", op}}}};
    if (amount) {
        j["amount"] = *amount;
    }
    return j;
}

HttpResult capture(const Running& r, const std::string& id, const std::string& op,
                   std::optional<long> amount, const std::string& type = "Final",
                   long timeout_ms = 5000) {
    return post(r, "/payments/" + id + "/captures", op, capture_request(op, amount, type),
                timeout_ms);
}

HttpResult void_it(const Running& r, const std::string& id, const std::string& op) {
    return post(r, "/payments/" + id + "/voids", op,
                Json{{"reference", op}, {"metadata", {{"operation_id", op}}}});
}

Json details(const Running& r, const std::string& id) {
    const HttpResult got = call("GET", r.url("/payments/" + id), {auth()});
    REQUIRE(got.status == 200);
    return got.json();
}

Json actions(const Running& r, const std::string& id) {
    const HttpResult got = call("GET", r.url("/payments/" + id + "/actions"), {auth()});
    REQUIRE(got.status == 200);
    return got.json();
}

// The ledger's entry for payment `id` in `checkout_authorizations`.
Json counts(const Running& r, const std::string& id) {
    const Json ledger = r.ledger();
    for (const Json& a : ledger["checkout_authorizations"]) {
        if (a["id"] == id) {
            return a;
        }
    }
    FAIL("no checkout_authorizations entry for " << id);
    return {};
}

long long charged_eur(const Running& r) {
    const Json c = r.ledger()["charged"];
    return c.contains("eur") ? c["eur"].get<long long>() : 0;
}

} // namespace

TEST_CASE("checkout fake: capture false authorises only, and every read shows the hold",
          "[fake_provider][checkout][capture]") {
    Running r;
    const HttpResult made = post(r, "/payments", "key-op-a", authorisation_request("op-a", 4999));
    REQUIRE(made.status == 201);
    const Json p = made.json();
    CHECK(p["status"] == "Authorized");
    CHECK(p["approved"] == true);
    const std::string id = p["id"];
    CHECK(p["_links"]["capture"]["href"] == r.url("/payments/" + id + "/captures"));
    CHECK(p["_links"]["void"]["href"] == r.url("/payments/" + id + "/voids"));

    const Json d = details(r, id);
    CHECK(d["status"] == "Authorized");
    CHECK(d["balances"] == Json{{"total_authorized", 4999},
                                {"total_voided", 0},
                                {"available_to_void", 4999},
                                {"total_captured", 0},
                                {"available_to_capture", 4999},
                                {"total_refunded", 0},
                                {"available_to_refund", 0}});
    const HttpResult listed = call("GET", r.url("/payments?reference=op-a"), {auth()});
    REQUIRE(listed.status == 200);
    CHECK(listed.json()["data"][0]["status"] == "Authorized");
    const Json list = actions(r, id);
    REQUIRE(list.size() == 1);
    CHECK(list[0]["type"] == "Authorization");
    CHECK(list[0]["amount"] == 4999);

    // Nothing was taken: nothing charged, nothing to refund.
    CHECK(charged_eur(r) == 0);
    CHECK(post(r, "/payments/" + id + "/refunds", "rk-1",
               Json{{"amount", 100}, {"reference", "op-r"}})
              .status == 403);
    CHECK(r.executions("op-r") == 0);
    const Json c = counts(r, id);
    CHECK(c["operation_id"] == "op-a");
    CHECK(c["capture"] == false);
    CHECK(c["status"] == "Authorized");
    CHECK(c["available_to_capture"] == 4999);
    CHECK(c["captures"] == 0);
    CHECK(c["voids"] == 0);
    // A payment captured at once is no authorisation of the ledger's.
    const std::string paid = authorise(r, "op-paid", 1000, true);
    const Json ledger = r.ledger();
    for (const Json& a : ledger["checkout_authorizations"]) {
        CHECK(a["id"] != paid);
    }
}

TEST_CASE("checkout fake: NonFinal captures take part after part, a Final one voids the rest, and "
          "refunds follow what was captured",
          "[fake_provider][checkout][capture]") {
    Running r;
    const std::string id = authorise(r, "op-p", 5000);
    const HttpResult first = capture(r, id, "cap-1", 1500, "NonFinal");
    REQUIRE(first.status == 202);
    static const std::regex k_action_id("act_[a-z2-7]{26}");
    CHECK(std::regex_match(first.json()["action_id"].get<std::string>(), k_action_id));
    CHECK(first.json()["reference"] == "cap-1");
    CHECK(first.json()["_links"]["payment"]["href"] == r.url("/payments/" + id));
    Json d = details(r, id);
    CHECK(d["status"] == "Partially Captured");
    CHECK(d["balances"]["total_captured"] == 1500);
    CHECK(d["balances"]["available_to_capture"] == 3500);
    CHECK(d["balances"]["available_to_refund"] == 1500);
    CHECK(charged_eur(r) == 1500);

    const HttpResult last = capture(r, id, "cap-2", 1000, "Final");
    REQUIRE(last.status == 202);
    d = details(r, id);
    CHECK(d["status"] == "Partially Captured");
    CHECK(d["balances"]["total_captured"] == 2500);
    CHECK(d["balances"]["available_to_capture"] == 0);
    CHECK(d["balances"]["total_voided"] == 2500); // Final: the rest released
    CHECK(charged_eur(r) == 2500);
    // Closed: no capture, no void.
    CHECK(capture(r, id, "cap-3", 100, "NonFinal").status == 403);
    CHECK(void_it(r, id, "void-1").status == 403);
    CHECK(r.executions("cap-3") == 0);
    CHECK(r.executions("void-1") == 0);

    const Json list = actions(r, id);
    REQUIRE(list.size() == 3); // newest first
    CHECK(list[0]["type"] == "Capture");
    CHECK(list[0]["id"] == last.json()["action_id"]);
    CHECK(list[0]["reference"] == "cap-2");
    CHECK(list[0]["amount"] == 1000);
    CHECK(list[0]["approved"] == true);
    CHECK(list[0]["metadata"] == Json{{"operation_id", "cap-2"}});
    CHECK(list[1]["reference"] == "cap-1");
    CHECK(list[1]["amount"] == 1500);
    CHECK(list[2]["type"] == "Authorization");

    // Refunds of what was captured, never more.
    CHECK(post(r, "/payments/" + id + "/refunds", "rk-1",
               Json{{"amount", 2501}, {"reference", "op-r1"}})
              .status == 403);
    CHECK(post(r, "/payments/" + id + "/refunds", "rk-2",
               Json{{"amount", 2500}, {"reference", "op-r2"}})
              .status == 202);
    CHECK(details(r, id)["status"] == "Refunded");
    CHECK(actions(r, id)[0]["type"] == "Refund");
    CHECK(charged_eur(r) == 0);

    const Json c = counts(r, id);
    CHECK(c["captures"] == 2);
    CHECK(c["voids"] == 0);
    CHECK(c["capture_deliveries"] == 3);
    CHECK(c["void_deliveries"] == 1);
    CHECK(c["amount_captured"] == 2500);
    const Json l = r.ledger();
    CHECK(l["checkout_captures"] == 2);
    CHECK(l["checkout_capture_deliveries"] == 3);
    CHECK(l["executions"]["cap-1"] == 1);
    CHECK(l["executions"]["cap-2"] == 1);
}

TEST_CASE("checkout fake: a capture never goes past what was authorised, and only an "
          "authorisation is captured",
          "[fake_provider][checkout][capture]") {
    Running r;
    const std::string id = authorise(r, "op-a", 4999);
    // More than authorised: "Capture not allowed", nothing executed, nothing kept under the key.
    const HttpResult over = capture(r, id, "cap-over", 5000);
    CHECK(over.status == 403);
    CHECK(over.body.empty());
    CHECK(r.executions("cap-over") == 0);
    // No amount: all that is left.
    REQUIRE(capture(r, id, "cap-over", std::nullopt).status == 202);
    CHECK(r.executions("cap-over") == 1);
    CHECK(details(r, id)["status"] == "Captured");
    CHECK(details(r, id)["balances"]["total_captured"] == 4999);
    CHECK(capture(r, id, "cap-again", 1).status == 403);
    CHECK(charged_eur(r) == 4999);

    // A payment captured at once, a declined one: nothing to capture or void.
    const std::string paid = authorise(r, "op-paid", 1000, true);
    CHECK(capture(r, paid, "cap-paid", 1000).status == 403);
    CHECK(void_it(r, paid, "void-paid").status == 403);
    const HttpResult declined =
        post(r, "/payments", "key-op-d", authorisation_request("op-d", 1000, "src_card_declined"));
    REQUIRE(declined.status == 201);
    CHECK(declined.json()["status"] == "Declined");
    const std::string declined_id = declined.json()["id"];
    CHECK(capture(r, declined_id, "cap-d", 1000).status == 403);
    CHECK(void_it(r, declined_id, "void-d").status == 403);
    for (const char* op : {"cap-again", "cap-paid", "void-paid", "cap-d", "void-d"}) {
        INFO(op);
        CHECK(r.executions(op) == 0);
    }

    // Unknown, invalid, unauthorised: nothing executed.
    CHECK(capture(r, "pay_aaaaaaaaaaaaaaaaaaaaaaaaaa", "cap-x", 10).status == 404);
    const std::string open = authorise(r, "op-open", 3000);
    const HttpResult invalid =
        post(r, "/payments/" + open + "/captures", "cap-i",
             Json{{"amount", -1}, {"capture_type", "Partial"}, {"reference", "cap-i"}});
    REQUIRE(invalid.status == 422);
    CHECK(invalid.json()["error_type"] == "request_invalid");
    CHECK(invalid.json()["error_codes"] == Json{"amount_invalid", "capture_type_invalid"});
    const std::uint64_t deliveries = r.ledger()["checkout_capture_deliveries"];
    CHECK(call("POST", r.url("/payments/" + open + "/captures"), {"Content-Type: application/json"},
               capture_request("cap-u", 10).dump())
              .status == 401);
    CHECK(r.ledger()["checkout_capture_deliveries"] == deliveries); // refused before reading
    for (const char* op : {"cap-x", "cap-i", "cap-u"}) {
        INFO(op);
        CHECK(r.executions(op) == 0);
    }
    CHECK(details(r, open)["balances"]["available_to_capture"] == 3000);
    CHECK(charged_eur(r) == 4999 + 1000);
}

TEST_CASE("checkout fake: a void releases what is left, once under its key, and nothing is "
          "captured after it",
          "[fake_provider][checkout][capture]") {
    Running r;
    const std::string id = authorise(r, "op-v", 4000);
    const HttpResult voided = void_it(r, id, "void-1");
    REQUIRE(voided.status == 202);
    CHECK(voided.json()["reference"] == "void-1");
    // The same key replays the 202 byte for byte and executes nothing.
    const HttpResult replay = void_it(r, id, "void-1");
    CHECK(replay.status == 202);
    CHECK(replay.body == voided.body);
    CHECK(r.executions("void-1") == 1);
    CHECK(r.ledger()["replays"] == 1);

    const Json d = details(r, id);
    CHECK(d["status"] == "Voided");
    CHECK(d["balances"]["total_voided"] == 4000);
    CHECK(d["balances"]["available_to_capture"] == 0);
    CHECK(d["balances"]["available_to_void"] == 0);
    CHECK(capture(r, id, "cap-late", 100).status == 403);
    CHECK(void_it(r, id, "void-2").status == 403);
    CHECK(r.executions("cap-late") == 0);
    CHECK(r.executions("void-2") == 0);
    const Json list = actions(r, id);
    REQUIRE(list.size() == 2);
    CHECK(list[0]["type"] == "Void");
    CHECK(list[0]["id"] == voided.json()["action_id"]);
    CHECK(list[0]["reference"] == "void-1");
    CHECK(list[0]["amount"] == 4000);
    CHECK(list[0]["approved"] == true);

    // After a NonFinal capture, a void releases the rest.
    const std::string part = authorise(r, "op-part", 4000);
    REQUIRE(capture(r, part, "cap-p", 1000, "NonFinal").status == 202);
    REQUIRE(void_it(r, part, "void-p").status == 202);
    const Json dp = details(r, part);
    CHECK(dp["status"] == "Partially Captured");
    CHECK(dp["balances"]["total_captured"] == 1000);
    CHECK(dp["balances"]["total_voided"] == 3000);
    CHECK(actions(r, part)[0]["amount"] == 3000);
    CHECK(charged_eur(r) == 1000);

    const Json c = counts(r, id);
    CHECK(c["voids"] == 1);
    CHECK(c["void_deliveries"] == 3);
    CHECK(c["status"] == "Voided");
    CHECK(r.ledger()["checkout_voids"] == 2);
}

TEST_CASE("checkout fake: only a 2xx is kept under a capture's key, so a 500 after executing "
          "and the same key capture twice, and a drop before executing captures nothing",
          "[fake_provider][checkout][capture][faults]") {
    Running r;
    const std::string id = authorise(r, "op-f", 5000);
    r.server.set_faults(
        faults_from(R"({"next": ["drop_before_execute", "http_500_after_execute"]})"));
    CHECK(capture(r, id, "cap-f", 1000, "NonFinal").code != CURLE_OK);
    CHECK(r.executions("cap-f") == 0);
    CHECK(capture(r, id, "cap-f", 1000, "NonFinal").status == 500);
    CHECK(r.executions("cap-f") == 1);
    // The blind retry under the same key is a second capture: what the adapter's lookup prevents.
    REQUIRE(capture(r, id, "cap-f", 1000, "NonFinal").status == 202);
    CHECK(r.executions("cap-f") == 2);
    CHECK(details(r, id)["balances"]["total_captured"] == 2000);
    const Json list = actions(r, id);
    CHECK(std::count_if(list.begin(), list.end(), [](const Json& a) {
              return a["type"] == "Capture" && a["reference"] == "cap-f";
          }) == 2);
    const Json l = r.ledger();
    CHECK(l["faults_applied"]["drop_before_execute"] == 1);
    CHECK(l["faults_applied"]["http_500_after_execute"] == 1);
    CHECK(l["deliveries_by_operation"]["cap-f"] == 3);
    CHECK(counts(r, id)["capture_deliveries"] == 3);
    CHECK(counts(r, id)["captures"] == 2);

    // A capture whose answer is lost after it executed is kept under its key: the retry replays.
    r.server.set_faults(faults_from(R"({"next": ["execute_then_hang"], "hang_ms": 500})"));
    CHECK(capture(r, id, "cap-h", 500, "NonFinal", 150).code == CURLE_OPERATION_TIMEDOUT);
    CHECK(r.executions("cap-h") == 1);
    const HttpResult retry = capture(r, id, "cap-h", 500, "NonFinal");
    CHECK(retry.status == 202);
    CHECK(r.executions("cap-h") == 1);
    CHECK(details(r, id)["balances"]["total_captured"] == 2500);
}

TEST_CASE("checkout fake: an authorisation left 7 fake days is voided by the provider in every "
          "read and cannot be captured or voided",
          "[fake_provider][checkout][capture][clock]") {
    Running r;
    const std::string id = authorise(r, "op-old", 2500);
    const std::string part = authorise(r, "op-part", 2500);
    REQUIRE(capture(r, part, "cap-part", 1000, "NonFinal").status == 202);
    r.server.advance_clock(std::chrono::seconds(6 * k_day));
    CHECK(details(r, id)["status"] == "Authorized");
    CHECK(counts(r, id)["expired"] == false);
    r.server.advance_clock(std::chrono::seconds(k_day));

    const HttpResult listed = call("GET", r.url("/payments?reference=op-old"), {auth()});
    REQUIRE(listed.status == 200);
    for (const Json& read : {details(r, id), listed.json()["data"][0]}) {
        CHECK(read["status"] == "Voided");
        CHECK(read["balances"]["total_voided"] == 2500);
        CHECK(read["balances"]["available_to_capture"] == 0);
    }
    // The provider's void: no reference of ours.
    const Json list = actions(r, id);
    REQUIRE(list.size() == 2);
    CHECK(list[0]["type"] == "Void");
    CHECK(list[0]["amount"] == 2500);
    CHECK_FALSE(list[0].contains("reference"));
    CHECK(capture(r, id, "cap-old", 100).status == 403);
    CHECK(void_it(r, id, "void-old").status == 403);
    CHECK(r.executions("cap-old") == 0);
    CHECK(r.executions("void-old") == 0);
    const Json c = counts(r, id);
    CHECK(c["status"] == "Voided");
    CHECK(c["expired"] == true);
    CHECK(c["amount_voided"] == 2500);

    // Partly captured: the rest is released, what was captured stays.
    const Json dp = details(r, part);
    CHECK(dp["status"] == "Partially Captured");
    CHECK(dp["balances"]["total_captured"] == 1000);
    CHECK(dp["balances"]["total_voided"] == 1500);
    const Json part_list = actions(r, part);
    REQUIRE(part_list.size() == 3);
    CHECK(part_list[0]["type"] == "Void");
    CHECK(part_list[0]["amount"] == 1500);
    CHECK(part_list[1]["reference"] == "cap-part");
    CHECK(charged_eur(r) == 1000);

    // A reset forgets the authorisations and their counts with everything else.
    REQUIRE(call("POST", r.admin_url("/__admin/reset")).status == 200);
    const Json fresh = r.ledger();
    CHECK(fresh["checkout_authorizations"].empty());
    CHECK(fresh["checkout_captures"] == 0);
    CHECK(fresh["checkout_capture_deliveries"] == 0);
}
