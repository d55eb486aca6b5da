// The refund intake over the real PostgreSQL (DESIGN section 16, issue 31): the payment intake's
// protocol for refunds, and never more refunded than charged -- counted in refunds, idempotency
// records, outbox events and the amount held on the payment, not only in status codes.
#include "services/intake.hpp"
#include "services/payments.hpp"
#include "services/refunds.hpp"
#include "store/operation_store.hpp"
#include "tests/support/test_db.hpp"

#include <catch2/catch.hpp>
#include <latch>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
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

// A payment of `amount` EUR cents; succeeded unless `state` says otherwise.
std::string payment(Scope& s, long long amount = 2500, const std::string& state = "succeeded") {
    IntakeService intake(*s.db, test_keys());
    const std::string ref = unique_name("pay");
    const auto r = intake.create_payment(s.writer.principal, ref, payment_body(ref, amount), "");
    REQUIRE(r.status == 202);
    const std::string id = nlohmann::json::parse(r.body)["id"];
    exec_sql("UPDATE payments SET state = '" + state + "' WHERE payment_id = '" + id + "'");
    return id;
}

IntakeResponse refund(Scope& s, const std::string& payment_id, const std::string& key,
                      const std::string& body, const Principal* as = nullptr) {
    RefundService refunds(*s.db, test_keys());
    return refunds.create_refund(as != nullptr ? *as : s.writer.principal, payment_id, key, body,
                                 "");
}

std::string type_of(const IntakeResponse& r) {
    return nlohmann::json::parse(r.body).value("type", "");
}

long long refunds_of(const std::string& payment_id) {
    return std::stoll(query_value("SELECT count(*) FROM operations WHERE payment_id = $1::uuid "
                                  "AND kind = 'refund'",
                                  payment_id));
}
long long held(const std::string& payment_id) {
    return std::stoll(query_value(
        "SELECT refund_held_minor FROM payments WHERE payment_id = $1::uuid", payment_id));
}
long long refunded_sum(const std::string& payment_id) {
    return std::stoll(query_value("SELECT coalesce(sum(amount_minor), 0) FROM operations "
                                  "WHERE payment_id = $1::uuid AND state <> 'failed'",
                                  payment_id));
}
long long refund_records(const TestTenant& t) {
    return count_rows("idempotency_records", t.tenant_id, "operation = 'create_refund'");
}
long long refund_events(const std::string& payment_id) {
    return std::stoll(query_value("SELECT count(*) FROM outbox WHERE aggregate_id = $1::uuid "
                                  "AND event_type LIKE 'refund.%'",
                                  payment_id));
}

} // namespace

TEST_CASE("refunds: a first request creates one refund, one record and one refund.created event",
          "[refunds][db]") {
    Scope s;
    const std::string p = payment(s, 2500);
    const auto r = refund(s, p, "refund-1", R"({"amount": 700, "reason": "requested_by_customer",
                                                "merchant_reference": "rf-1",
                                                "metadata": {"ticket": "T-9"}})");
    REQUIRE(r.status == 202);
    CHECK_FALSE(r.replayed);
    const auto body = nlohmann::json::parse(r.body);
    CHECK(body["object"] == "refund");
    CHECK(body["payment_id"] == p);
    CHECK(body["status"] == "pending");
    CHECK(body["status_category"] == "in_flight");
    CHECK(body["amount"] == 700);
    CHECK(body["currency"] == "EUR");
    CHECK(body["reason"] == "requested_by_customer");
    CHECK(body["metadata"]["ticket"] == "T-9");
    REQUIRE(r.location);
    CHECK(*r.location == "/v1/refunds/" + body["id"].get<std::string>());
    CHECK(refunds_of(p) == 1);
    CHECK(held(p) == 700);
    CHECK(refund_records(s.tenant) == 1);
    CHECK(refund_events(p) == 1);
    CHECK(query_value("SELECT payload->>'refund_id' FROM outbox WHERE aggregate_id = $1::uuid "
                      "AND event_type = 'refund.created'",
                      p) == body["id"].get<std::string>());
    // Its operation ID is its own: the provider's key for this refund, not the charge's.
    CHECK(query_value("SELECT operation_id FROM operations WHERE payment_id = $1::uuid", p) !=
          query_value("SELECT operation_id FROM payments WHERE payment_id = $1::uuid", p));

    SECTION("the same request again is replayed: nothing new is written") {
        const auto again = refund(s, p, "refund-1", R"({"merchant_reference": "rf-1",
            "amount": 700, "metadata": {"ticket": "T-9"}, "reason": "requested_by_customer"})");
        CHECK(again.status == 202);
        CHECK(again.replayed);
        CHECK(again.body == r.body);
        CHECK(refunds_of(p) == 1);
        CHECK(held(p) == 700);
        CHECK(refund_events(p) == 1);
    }
    SECTION("the same key with another body is 409, and nothing is written") {
        const auto other = refund(s, p, "refund-1", R"({"amount": 800})");
        CHECK(other.status == 409);
        CHECK(type_of(other) == "idempotency_key_reused");
        CHECK(refunds_of(p) == 1);
        CHECK(held(p) == 700);
    }
    SECTION("the same key and body for another payment is another request: 409") {
        const std::string q = payment(s, 2500);
        const auto other = refund(s, q, "refund-1", R"({"amount": 700, "reason":
            "requested_by_customer", "merchant_reference": "rf-1", "metadata": {"ticket": "T-9"}})");
        CHECK(other.status == 409);
        CHECK(type_of(other) == "idempotency_key_reused");
        CHECK(refunds_of(q) == 0);
    }
    SECTION("GET /v1/refunds/{id} and the payment show it, with the amounts") {
        const std::string id = body["id"];
        const auto shown = refund_resource(*s.db, s.tenant.tenant_id, id);
        REQUIRE(shown);
        CHECK(nlohmann::json::parse(*shown)["amount"] == 700);
        const auto other_tenant = make_tenant(*s.db);
        CHECK_FALSE(refund_resource(*s.db, other_tenant.tenant_id, id));
        const auto pay = nlohmann::json::parse(*payment_resource(*s.db, s.tenant.tenant_id, p));
        CHECK(pay["amount_refunded"] == 0);
        CHECK(pay["amount_refund_pending"] == 700);
        CHECK(pay["amount_refundable"] == 1800);
        REQUIRE(pay["refunds"].size() == 1);
        CHECK(pay["refunds"][0]["id"] == id);
        exec_sql("UPDATE operations SET state = 'succeeded' WHERE id = '" + id + "'");
        const auto after = nlohmann::json::parse(*payment_resource(*s.db, s.tenant.tenant_id, p));
        CHECK(after["amount_refunded"] == 700);
        CHECK(after["amount_refund_pending"] == 0);
        CHECK(after["amount_refundable"] == 1800);
    }
}

TEST_CASE("refunds: a payment that has not succeeded is refused with its reason, and the key "
          "stays free",
          "[refunds][db]") {
    Scope s;
    for (const std::string state : {"pending", "unknown", "needs_review", "failed"}) {
        INFO(state);
        const std::string p = payment(s, 2500, state);
        const auto r = refund(s, p, "k-" + state, R"({"amount": 100})");
        CHECK(r.status == 409);
        CHECK(type_of(r) == "payment_not_refundable");
        CHECK(nlohmann::json::parse(r.body)["payment_status"] == state);
        CHECK(refunds_of(p) == 0);
        CHECK(held(p) == 0);
        if (state == "unknown") {
            CHECK(nlohmann::json::parse(r.body)["detail"].get<std::string>().find(
                      "not settled yet") != std::string::npos);
            // Settled since: the same request with the same key now goes through.
            exec_sql("UPDATE payments SET state = 'succeeded' WHERE payment_id = '" + p + "'");
            const auto again = refund(s, p, "k-" + state, R"({"amount": 100})");
            CHECK(again.status == 202);
            CHECK_FALSE(again.replayed);
            CHECK(refunds_of(p) == 1);
        }
    }
    CHECK(refund_records(s.tenant) == 1);
}

TEST_CASE("refunds: another tenant's payment, a malformed ID and a reader's key are refused",
          "[refunds][db]") {
    Scope s;
    const std::string p = payment(s);
    Scope other;
    const auto theirs = refund(other, p, "k1", "{}");
    CHECK(theirs.status == 404);
    CHECK(refund_records(other.tenant) == 0);
    CHECK(refund(s, "not-a-uuid", "k2", "{}").status == 404);
    const auto reader = make_principal(*s.db, s.tenant, Role::reader);
    const auto refused = refund(s, p, "k3", "{}", &reader.principal);
    CHECK(refused.status == 403);
    CHECK(refunds_of(p) == 0);
    // Bad bodies: each field named, card data refused.
    const auto bad_amount = refund(s, p, "k4", R"({"amount": 12.5})");
    CHECK(bad_amount.status == 422);
    CHECK(nlohmann::json::parse(bad_amount.body)["field"] == "amount");
    const auto bad_reason = refund(s, p, "k5", R"({"reason": "because"})");
    CHECK(bad_reason.status == 422);
    CHECK(nlohmann::json::parse(bad_reason.body)["field"] == "reason");
    const auto unknown = refund(s, p, "k6", R"({"payment_id": "x"})");
    CHECK(unknown.status == 422);
    const auto card = refund(s, p, "k7", R"({"metadata": {"note": "4111 1111 1111 1111"}})");
    CHECK(card.status == 422);
    CHECK(type_of(card) == "card_data_refused");
    CHECK(refunds_of(p) == 0);
    CHECK(refund_records(s.tenant) == 0);
}

TEST_CASE("refunds: with no amount the rest is refunded, and nothing more fits after",
          "[refunds][db]") {
    Scope s;
    const std::string p = payment(s, 2500);
    REQUIRE(refund(s, p, "a", R"({"amount": 1000})").status == 202);
    const auto over = refund(s, p, "b", R"({"amount": 1501})");
    CHECK(over.status == 409);
    CHECK(type_of(over) == "refund_exceeds_payment");
    CHECK(nlohmann::json::parse(over.body)["refundable"] == 1500);
    const auto rest = refund(s, p, "c", "{}");
    REQUIRE(rest.status == 202);
    CHECK(nlohmann::json::parse(rest.body)["amount"] == 1500);
    const auto nothing = refund(s, p, "d", "{}");
    CHECK(nothing.status == 409);
    CHECK(nlohmann::json::parse(nothing.body)["refundable"] == 0);
    CHECK(held(p) == 2500);
    CHECK(refunded_sum(p) == 2500);
    // What is held is what the next refund is checked against: after a refund failed and gave
    // its amount back (written here as the executor's settlement will write it), 10.00 fits again.
    exec_sql("UPDATE operations SET state = 'failed' WHERE payment_id = '" + p +
             "' AND amount_minor = 1000; UPDATE payments SET refund_held_minor = 1500 WHERE "
             "payment_id = '" +
             p + "'");
    CHECK(refund(s, p, "e", R"({"amount": 1000})").status == 202);
    CHECK(refunded_sum(p) == held(p));
}

TEST_CASE("refunds: what an operator recorded the payment charged is what may be refunded",
          "[refunds][db]") {
    Scope s;
    const std::string p = payment(s, 2500);
    exec_sql("UPDATE payments SET charged_amount_minor = 2000 WHERE payment_id = '" + p + "'");
    const auto over = refund(s, p, "a", R"({"amount": 2100})");
    CHECK(over.status == 409);
    CHECK(nlohmann::json::parse(over.body)["refundable"] == 2000);
    REQUIRE(refund(s, p, "b", "{}").status == 202);
    CHECK(held(p) == 2000);
    // The database itself refuses a charged amount below what is refunded.
    CHECK_THROWS(
        exec_sql("UPDATE payments SET charged_amount_minor = 1000 WHERE payment_id = '" + p + "'"));
    CHECK_THROWS(
        exec_sql("UPDATE payments SET refund_held_minor = 2001 WHERE payment_id = '" + p + "'"));
}

TEST_CASE("refunds: a merchant reference taken by another refund is a stored 409",
          "[refunds][db]") {
    Scope s;
    const std::string p = payment(s, 2500);
    const std::string q = payment(s, 2500);
    const auto first = refund(s, p, "a", R"({"amount": 100, "merchant_reference": "RF-7"})");
    REQUIRE(first.status == 202);
    const auto second = refund(s, q, "b", R"({"amount": 100, "merchant_reference": "RF-7"})");
    CHECK(second.status == 409);
    CHECK(type_of(second) == "duplicate_merchant_reference");
    CHECK(nlohmann::json::parse(second.body)["refund_id"] ==
          nlohmann::json::parse(first.body)["id"]);
    CHECK(refunds_of(q) == 0);
    CHECK(held(q) == 0);
    const auto replay = refund(s, q, "b", R"({"amount": 100, "merchant_reference": "RF-7"})");
    CHECK(replay.replayed);
    CHECK(replay.body == second.body);
}

TEST_CASE("refunds: 50 concurrent refunds that together exceed the charge -- exactly the ones "
          "that fit are taken",
          "[refunds][db][concurrency]") {
    Scope s;
    const std::string p = payment(s, 10000);
    constexpr std::size_t k_requests = 50;
    std::vector<int> statuses(k_requests, 0);
    std::vector<long long> refundable_told(k_requests, -1);
    std::latch start(static_cast<std::ptrdiff_t>(k_requests));
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < k_requests; ++i) {
        threads.emplace_back([&, i] {
            auto db = connect();
            RefundService refunds(*db, test_keys());
            start.arrive_and_wait();
            const auto r = refunds.create_refund(s.writer.principal, p, "race-" + std::to_string(i),
                                                 R"({"amount": 300})", "");
            statuses[i] = r.status;
            if (r.status == 409) {
                refundable_told[i] = nlohmann::json::parse(r.body).value("refundable", -1LL);
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    int accepted = 0;
    int refused = 0;
    for (std::size_t i = 0; i < k_requests; ++i) {
        if (statuses[i] == 202) {
            ++accepted;
        } else {
            CHECK(statuses[i] == 409);
            CHECK(refundable_told[i] == 100); // 10000 - 33 * 300
            ++refused;
        }
    }
    CHECK(accepted == 33);
    CHECK(refused == 17);
    CHECK(refunds_of(p) == 33);
    CHECK(held(p) == 9900);
    CHECK(refunded_sum(p) == 9900);
    CHECK(refund_events(p) == 33);
    CHECK(refund_records(s.tenant) == 33);
}

TEST_CASE("refunds: an operator's refund is audited with its note", "[refunds][db]") {
    Scope s;
    const std::string p = payment(s, 2500);
    RefundService refunds(*s.db, test_keys());
    const auto r = refunds.create_refund(s.writer.principal, p, "op-1", R"({"amount": 250})", "",
                                         RefundAudit{"alice", "customer called"});
    REQUIRE(r.status == 202);
    const std::string id = nlohmann::json::parse(r.body)["id"];
    CHECK(query_value("SELECT actor || ' ' || action || ' ' || (detail->>'note') FROM audit_log "
                      "WHERE subject_id = $1",
                      id) == "alice refund.create customer called");
}
