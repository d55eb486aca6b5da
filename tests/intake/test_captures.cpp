// Captures and voids at intake over the real PostgreSQL (issue 32, DESIGN section 16): a payment
// made with capture "manual" is an authorisation; its captures and its void are taken under the
// payment intake's protocol, and the amount rules hold in the database however many race --
// counted in operations rows, idempotency records, outbox events and what the payment row holds.
#include "core/provider_catalog.hpp"
#include "services/captures.hpp"
#include "services/intake.hpp"
#include "services/payments.hpp"
#include "services/refunds.hpp"
#include "store/operation_store.hpp"
#include "tests/support/test_db.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <latch>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

struct Scope {
    std::unique_ptr<store::Db> db = connect();
    TestTenant tenant = make_tenant(*db);
    TestPrincipal writer = make_principal(*db, tenant);
};

std::string manual_body(const std::string& ref, long long amount) {
    auto body = nlohmann::json::parse(payment_body(ref, amount));
    body["capture"] = "manual";
    return body.dump();
}

// A provider of the catalog that authorises only and captures once, carrying any metadata.
KnownProvider stripe_like() {
    KnownProvider known{"stripe", "stripe", {}};
    known.limits.metadata.max_entries = 50;
    known.limits.metadata.max_key_bytes = 40;
    known.limits.metadata.max_value_bytes = 500;
    known.manual_capture = true;
    return known;
}

// A payment of `amount` EUR cents made with capture "manual" (or automatic), then put in `state`
// as the executor would have settled its charge (an authorisation that succeeded).
std::string authorisation(Scope& s, long long amount = 10000,
                          const std::string& state = "succeeded", bool manual = true,
                          IntakeSettings settings = {}) {
    IntakeService intake(*s.db, test_keys(), std::move(settings));
    const std::string ref = unique_name("auth");
    const auto r = intake.create_payment(
        s.writer.principal, ref, manual ? manual_body(ref, amount) : payment_body(ref, amount), "");
    REQUIRE(r.status == 202);
    const std::string id = nlohmann::json::parse(r.body)["id"];
    exec_sql("UPDATE payments SET state = '" + state + "' WHERE payment_id = '" + id + "'");
    return id;
}

IntakeResponse capture(Scope& s, const std::string& payment_id, const std::string& key,
                       const std::string& body, IntakeSettings settings = {}) {
    CaptureService captures(*s.db, test_keys(), std::move(settings));
    return captures.create_capture(s.writer.principal, payment_id, key, body, "");
}

IntakeResponse void_it(Scope& s, const std::string& payment_id, const std::string& key,
                       const std::string& body = "") {
    CaptureService captures(*s.db, test_keys());
    return captures.create_void(s.writer.principal, payment_id, key, body, "");
}

std::string type_of(const IntakeResponse& r) {
    return nlohmann::json::parse(r.body).value("type", "");
}

long long operations_of(const std::string& payment_id, const std::string& kind) {
    return std::stoll(query_value("SELECT count(*) FROM operations WHERE payment_id = $1::uuid "
                                  "AND kind = '" +
                                      kind + "'",
                                  payment_id));
}
long long payment_column(const std::string& payment_id, const std::string& column) {
    return std::stoll(query_value("SELECT (" + column +
                                      ")::bigint FROM payments "
                                      "WHERE payment_id = $1::uuid",
                                  payment_id));
}
long long events_of(const std::string& payment_id, const std::string& type) {
    return std::stoll(query_value(
        "SELECT count(*) FROM outbox WHERE aggregate_id = $1::uuid AND event_type = '" + type + "'",
        payment_id));
}
nlohmann::json resource(Scope& s, const std::string& payment_id) {
    const auto body = payment_resource(*s.db, s.tenant.tenant_id, payment_id);
    REQUIRE(body);
    return nlohmann::json::parse(*body);
}

// An operation settled as the executor settles it: the row, and its effect on the payment.
void settle_capture(const std::string& capture_id, const std::string& state) {
    exec_sql("WITH u AS (UPDATE operations SET state = '" + state + "' WHERE id = '" + capture_id +
             "' RETURNING *) UPDATE payments p SET captured_minor = p.captured_minor + CASE WHEN "
             "u.state = 'succeeded' THEN u.amount_minor ELSE 0 END, capture_held_minor = "
             "p.capture_held_minor - CASE WHEN u.state = 'failed' THEN u.amount_minor ELSE 0 END, "
             "final_capture_held = p.final_capture_held AND NOT (u.final AND u.state = 'failed') "
             "FROM u WHERE p.payment_id = u.payment_id");
}

} // namespace

TEST_CASE("captures: a payment made with capture manual is an authorisation with an expiry, "
          "shown as authorized with what it can capture",
          "[captures][db]") {
    Scope s;
    ProviderCatalog catalog;
    KnownProvider stripe = stripe_like();
    stripe.manual_capture = true;
    stripe.authorization_validity = std::chrono::hours(24 * 7);
    catalog.providers.emplace("stripe", stripe);
    IntakeSettings settings;
    settings.providers = catalog;
    const std::string p = authorisation(s, 10000, "pending", true, settings);
    CHECK(query_value("SELECT capture_method FROM payments WHERE payment_id = $1::uuid", p) ==
          "manual");
    // Its expiry is counted from acceptance: the earliest the provider may let it lapse.
    CHECK(query_value("SELECT round(extract(epoch FROM authorization_expires_at - created_at))"
                      "::bigint FROM payments WHERE payment_id = $1::uuid",
                      p) == "604800");
    CHECK(query_value("SELECT payload->>'capture' FROM outbox WHERE aggregate_id = $1::uuid "
                      "AND event_type = 'payment.created'",
                      p) == "manual");
    CHECK(resource(s, p)["status"] == "pending");
    exec_sql("UPDATE payments SET state = 'succeeded' WHERE payment_id = '" + p + "'");
    const auto shown = resource(s, p);
    CHECK(shown["status"] == "authorized");
    CHECK(shown["capture"] == "manual");
    CHECK(shown["amount_authorized"] == 10000);
    CHECK(shown["amount_captured"] == 0);
    CHECK(shown["amount_capturable"] == 10000);
    CHECK(shown["amount_refundable"] == 0);
    CHECK_FALSE(shown["authorization_expires_at"].is_null());

    SECTION("a provider that cannot authorise only refuses capture manual: 422, nothing stored") {
        catalog.providers["stripe"].manual_capture = false;
        settings.providers = catalog;
        IntakeService intake(*s.db, test_keys(), settings);
        const std::string ref = unique_name("auth");
        const auto r = intake.create_payment(s.writer.principal, ref, manual_body(ref, 500), "");
        CHECK(r.status == 422);
        CHECK(nlohmann::json::parse(r.body)["field"] == "capture");
        CHECK(count_rows("payments", s.tenant.tenant_id, "merchant_reference = '" + ref + "'") ==
              0);
    }
    SECTION("a capture field other than manual or automatic is refused") {
        IntakeService intake(*s.db, test_keys());
        auto body = nlohmann::json::parse(payment_body(unique_name("auth"), 500));
        body["capture"] = "later";
        CHECK(intake.create_payment(s.writer.principal, unique_name("k"), body.dump(), "").status ==
              422);
    }
}

TEST_CASE("captures: a capture is taken once per key, held on its payment, with its event",
          "[captures][db]") {
    Scope s;
    const std::string p = authorisation(s);
    const auto r = capture(s, p, "cap-1", R"({"amount": 4000, "merchant_reference": "cap-ref-1",
                                            "metadata": {"parcel": "1"}})");
    REQUIRE(r.status == 202);
    const auto body = nlohmann::json::parse(r.body);
    CHECK(body["object"] == "capture");
    CHECK(body["status"] == "pending");
    CHECK(body["amount"] == 4000);
    CHECK(body["final"] == true);
    REQUIRE(r.location);
    CHECK(*r.location == "/v1/captures/" + body["id"].get<std::string>());
    CHECK(operations_of(p, "capture") == 1);
    CHECK(payment_column(p, "capture_held_minor") == 4000);
    CHECK(payment_column(p, "final_capture_held::int") == 1);
    CHECK(events_of(p, "capture.created") == 1);
    CHECK(query_value("SELECT payload->>'capture_id' FROM outbox WHERE aggregate_id = $1::uuid "
                      "AND event_type = 'capture.created'",
                      p) == body["id"].get<std::string>());
    const auto shown = capture_resource(*s.db, OperationKind::capture, s.tenant.tenant_id,
                                        body["id"].get<std::string>());
    REQUIRE(shown);
    CHECK(nlohmann::json::parse(*shown)["amount"] == 4000);
    CHECK(resource(s, p)["amount_capture_pending"] == 4000);
    CHECK(resource(s, p)["amount_capturable"] == 0); // a final capture releases the rest

    SECTION("the same request again is replayed, nothing new written") {
        const auto again = capture(s, p, "cap-1", R"({"metadata": {"parcel": "1"},
            "merchant_reference": "cap-ref-1", "amount": 4000})");
        CHECK(again.status == 202);
        CHECK(again.replayed);
        CHECK(again.body == r.body);
        CHECK(operations_of(p, "capture") == 1);
        CHECK(payment_column(p, "capture_held_minor") == 4000);
    }
    SECTION("the same key with another body is 409 idempotency_key_reused") {
        const auto other = capture(s, p, "cap-1", R"({"amount": 4001})");
        CHECK(other.status == 409);
        CHECK(type_of(other) == "idempotency_key_reused");
        CHECK(operations_of(p, "capture") == 1);
    }
    SECTION("after a final capture nothing more is captured or voided") {
        const auto more = capture(s, p, "cap-2", R"({"amount": 100})");
        CHECK(more.status == 409);
        CHECK(type_of(more) == "payment_not_capturable");
        const auto v = void_it(s, p, "void-1");
        CHECK(v.status == 409);
        CHECK(type_of(v) == "payment_not_voidable");
        CHECK(operations_of(p, "capture") == 1);
        CHECK(operations_of(p, "void") == 0);
    }
    SECTION("a final capture that failed gives the authorisation back") {
        settle_capture(body["id"], "failed");
        CHECK(payment_column(p, "capture_held_minor") == 0);
        CHECK(payment_column(p, "final_capture_held::int") == 0);
        const auto again = capture(s, p, "cap-3", R"({"amount": 10000})");
        CHECK(again.status == 202);
    }
}

TEST_CASE("captures: refusals name the reason and leave the key free", "[captures][db]") {
    Scope s;
    SECTION("a payment captured at once has no authorisation to capture or void") {
        const std::string p = authorisation(s, 2500, "succeeded", false);
        const auto r = capture(s, p, "k1", "{}");
        CHECK(r.status == 409);
        CHECK(type_of(r) == "payment_not_capturable");
        CHECK(void_it(s, p, "k2").status == 409);
        CHECK(operations_of(p, "capture") + operations_of(p, "void") == 0);
    }
    SECTION("an authorisation not settled yet: 409, then the same key succeeds once it is") {
        const std::string p = authorisation(s, 2500, "unknown");
        const auto r = capture(s, p, "k-wait", R"({"amount": 2500})");
        CHECK(r.status == 409);
        CHECK(type_of(r) == "payment_not_capturable");
        CHECK(count_rows("idempotency_records", s.tenant.tenant_id,
                         "operation = 'create_capture'") == 0);
        exec_sql("UPDATE payments SET state = 'succeeded' WHERE payment_id = '" + p + "'");
        CHECK(capture(s, p, "k-wait", R"({"amount": 2500})").status == 202);
    }
    SECTION("more than is authorised: 409 naming what is capturable") {
        const std::string p = authorisation(s, 2500);
        const auto r = capture(s, p, "k3", R"({"amount": 2501})");
        CHECK(r.status == 409);
        const auto j = nlohmann::json::parse(r.body);
        CHECK(j["type"] == "capture_exceeds_authorization");
        CHECK(j["capturable"] == 2500);
        CHECK(operations_of(p, "capture") == 0);
        CHECK(payment_column(p, "capture_held_minor") == 0);
    }
    SECTION("an expired authorisation: 409 authorization_expired for a capture and a void") {
        const std::string p = authorisation(s, 2500);
        exec_sql("UPDATE payments SET authorization_expires_at = now() - interval '1 minute' "
                 "WHERE payment_id = '" +
                 p + "'");
        const auto r = capture(s, p, "k4", "{}");
        CHECK(r.status == 409);
        CHECK(type_of(r) == "authorization_expired");
        CHECK(type_of(void_it(s, p, "k5")) == "authorization_expired");
        CHECK(resource(s, p)["status"] == "authorization_expired");
        CHECK(resource(s, p)["amount_capturable"] == 0);
    }
    SECTION("final false where the provider captures once: 422 on final") {
        ProviderCatalog catalog;
        KnownProvider stripe = stripe_like();
        stripe.manual_capture = true;
        catalog.providers.emplace("stripe", stripe);
        IntakeSettings settings;
        settings.providers = catalog;
        const std::string p = authorisation(s, 2500, "succeeded", true, settings);
        const auto r = capture(s, p, "k6", R"({"amount": 1000, "final": false})", settings);
        CHECK(r.status == 422);
        CHECK(operations_of(p, "capture") == 0);
    }
    SECTION("another tenant's payment and a malformed ID are not found") {
        Scope other;
        const std::string p = authorisation(other);
        CHECK(capture(s, p, "k7", "{}").status == 404);
        CHECK(capture(s, "not-a-uuid", "k8", "{}").status == 404);
        CHECK(void_it(s, p, "k9").status == 404);
    }
    SECTION("unknown fields are refused before anything is read") {
        const std::string p = authorisation(s, 2500);
        CHECK(capture(s, p, "k10", R"({"amount_to_capture": 5})").status == 422);
        CHECK(void_it(s, p, "k11", R"({"reason": "x"})").status == 422);
    }
}

TEST_CASE("captures: a void releases the authorisation -- nothing is captured after it",
          "[captures][db]") {
    Scope s;
    const std::string p = authorisation(s, 5000);
    const auto v = void_it(s, p, "void-1", R"({"merchant_reference": "v-1"})");
    REQUIRE(v.status == 202);
    const auto body = nlohmann::json::parse(v.body);
    CHECK(body["object"] == "void");
    CHECK(body["amount"] == 5000);
    CHECK(*v.location == "/v1/voids/" + body["id"].get<std::string>());
    CHECK(operations_of(p, "void") == 1);
    CHECK(payment_column(p, "void_held::int") == 1);
    CHECK(events_of(p, "void.created") == 1);
    CHECK(void_it(s, p, "void-1", R"({"merchant_reference": "v-1"})").replayed);

    const auto c = capture(s, p, "cap-after-void", "{}");
    CHECK(c.status == 409);
    CHECK(type_of(c) == "payment_not_capturable");
    const auto again = void_it(s, p, "void-2");
    CHECK(again.status == 409);
    CHECK(type_of(again) == "payment_not_voidable");
    CHECK(operations_of(p, "capture") == 0);
    CHECK(operations_of(p, "void") == 1);
}

TEST_CASE("captures: partial captures that are not final, then a void of the rest",
          "[captures][db]") {
    Scope s;
    const std::string p = authorisation(s, 10000);
    REQUIRE(capture(s, p, "c1", R"({"amount": 3000, "final": false})").status == 202);
    REQUIRE(capture(s, p, "c2", R"({"amount": 2000, "final": false})").status == 202);
    CHECK(payment_column(p, "capture_held_minor") == 5000);
    CHECK(resource(s, p)["amount_capturable"] == 5000);
    // With no amount, a capture takes what is left.
    const auto rest = capture(s, p, "c3", R"({"final": false})");
    REQUIRE(rest.status == 202);
    CHECK(nlohmann::json::parse(rest.body)["amount"] == 5000);
    CHECK(capture(s, p, "c4", R"({"amount": 1})").status == 409);
    // Nothing is left to capture, but no final capture is held: the void is taken.
    CHECK(void_it(s, p, "v1").status == 202);
}

TEST_CASE("captures: refunds are of what was captured, never of what is only authorised",
          "[captures][refunds][db]") {
    Scope s;
    const std::string p = authorisation(s, 10000);
    RefundService refunds(*s.db, test_keys());
    const auto before =
        refunds.create_refund(s.writer.principal, p, "r0", R"({"amount": 100})", "");
    CHECK(before.status == 409);
    CHECK(type_of(before) == "payment_not_refundable");

    const auto c = capture(s, p, "c1", R"({"amount": 6000})");
    REQUIRE(c.status == 202);
    // In flight, the capture is not refundable yet.
    CHECK(refunds.create_refund(s.writer.principal, p, "r1", R"({"amount": 100})", "").status ==
          409);
    settle_capture(nlohmann::json::parse(c.body)["id"], "succeeded");
    CHECK(resource(s, p)["status"] == "captured");
    CHECK(resource(s, p)["amount_refundable"] == 6000);
    const auto over = refunds.create_refund(s.writer.principal, p, "r2", R"({"amount": 6001})", "");
    CHECK(over.status == 409);
    CHECK(nlohmann::json::parse(over.body)["refundable"] == 6000);
    CHECK(refunds.create_refund(s.writer.principal, p, "r3", "{}", "").status == 202);
    CHECK(payment_column(p, "refund_held_minor") == 6000);
    // The database refuses a refund hold beyond what was captured, whoever writes it.
    CHECK_THROWS(
        exec_sql("UPDATE payments SET refund_held_minor = 6001 WHERE payment_id = '" + p + "'"));
}

TEST_CASE("captures: 50 concurrent partial captures take exactly what the authorisation holds",
          "[captures][db][concurrency]") {
    Scope s;
    const std::string p = authorisation(s, 10000);
    constexpr int k_threads = 50;
    std::atomic<int> accepted{0}, exceeded{0}, other{0};
    std::latch start(k_threads);
    std::vector<std::thread> threads;
    for (int i = 0; i < k_threads; ++i) {
        threads.emplace_back([&, i] {
            auto db = connect();
            CaptureService captures(*db, test_keys());
            start.arrive_and_wait();
            const auto r =
                captures.create_capture(s.writer.principal, p, "par-" + std::to_string(i),
                                        R"({"amount": 300, "final": false})", "");
            if (r.status == 202) {
                ++accepted;
            } else if (r.status == 409 && type_of(r) == "capture_exceeds_authorization") {
                ++exceeded;
            } else {
                ++other;
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    CHECK(accepted == 33);
    CHECK(exceeded == 17);
    CHECK(other == 0);
    CHECK(operations_of(p, "capture") == 33);
    CHECK(payment_column(p, "capture_held_minor") == 9900);
    CHECK(count_rows("idempotency_records", s.tenant.tenant_id, "operation = 'create_capture'") ==
          33);
}

TEST_CASE("captures: final captures racing voids -- exactly one wins, never both",
          "[captures][db][concurrency]") {
    Scope s;
    const std::string p = authorisation(s, 10000);
    constexpr int k_threads = 20;
    std::atomic<int> accepted{0}, refused{0};
    std::latch start(k_threads);
    std::vector<std::thread> threads;
    for (int i = 0; i < k_threads; ++i) {
        threads.emplace_back([&, i] {
            auto db = connect();
            CaptureService captures(*db, test_keys());
            start.arrive_and_wait();
            const std::string key = "race-" + std::to_string(i);
            const auto r = i % 2 == 0
                               ? captures.create_capture(s.writer.principal, p, key, "{}", "")
                               : captures.create_void(s.writer.principal, p, key, "", "");
            (r.status == 202 ? accepted : refused)++;
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    CHECK(accepted == 1);
    CHECK(refused == k_threads - 1);
    CHECK(operations_of(p, "capture") + operations_of(p, "void") == 1);
    CHECK(payment_column(p, "(final_capture_held::int + void_held::int)") == 1);
}
