// The intake protocol over the real PostgreSQL: counts of payments, idempotency records and
// outbox events, not only status codes.
#include "core/crash_point.hpp"
#include "services/auth.hpp"
#include "services/intake.hpp"
#include "store/admin_store.hpp"
#include "store/intake_store.hpp"
#include "store/migrations.hpp"
#include "tests/core/reference_generator.hpp"
#include "tests/support/test_db.hpp"
#include "tests/support/wait.hpp"

#include <catch2/catch.hpp>
#include <latch>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <set>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

struct Scope {
    std::unique_ptr<store::Db> db = connect();
    TestTenant tenant = make_tenant(*db);
    TestPrincipal writer = make_principal(*db, tenant);
};

IntakeResponse create(store::Db& db, const Principal& p, const std::string& key,
                      const std::string& body, const FingerprintKeys& keys = test_keys()) {
    IntakeService intake(db, keys);
    return intake.create_payment(p, key, body, "");
}

std::string problem_type(const IntakeResponse& r) {
    return nlohmann::json::parse(r.body).value("type", "");
}

long long payments(const TestTenant& t) {
    return count_rows("payments", t.tenant_id);
}
long long records(const TestTenant& t) {
    return count_rows("idempotency_records", t.tenant_id);
}
long long events(const TestTenant& t) {
    return count_rows("outbox", t.tenant_id);
}

// Runs `fn` in a forked child armed with `crash_at`; returns how the child ended.
int run_in_child_armed(const std::string& crash_at, const std::function<void()>& fn) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        arm_crash_point(crash_at);
        try {
            fn();
        } catch (...) {
            ::_exit(3);
        }
        ::_exit(0); // the crash point was not reached
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    return status;
}

} // namespace

TEST_CASE("intake: a first request creates one payment, one record and one outbox event",
          "[intake][db]") {
    Scope s;
    const auto r = create(*s.db, s.writer.principal, "order-1", payment_body("ref-1"));
    REQUIRE(r.status == 202);
    CHECK_FALSE(r.replayed);
    const auto body = nlohmann::json::parse(r.body);
    CHECK(body["status"] == "pending");
    CHECK(body["amount"] == 1250);
    CHECK(body["currency"] == "EUR");
    CHECK(body["merchant_reference"] == "ref-1");
    REQUIRE(r.location == "/v1/payments/" + body["id"].get<std::string>());
    CHECK(r.retry_after.has_value());
    CHECK(payments(s.tenant) == 1);
    CHECK(records(s.tenant) == 1);
    CHECK(events(s.tenant) == 1);
    CHECK(count_rows("outbox", s.tenant.tenant_id, "event_type = 'payment.created'") == 1);
    // The payment carries a stable operation ID within every provider's key limit.
    const std::string op = query_value(
        "SELECT operation_id FROM payments WHERE tenant_id = $1::uuid", s.tenant.tenant_id);
    CHECK(op.size() <= 45);
    CHECK(op.rfind("pr_", 0) == 0);
    // The stored response is the one returned.
    CHECK(query_value("SELECT response_body FROM idempotency_records WHERE tenant_id = $1::uuid",
                      s.tenant.tenant_id) == r.body);
}

TEST_CASE("intake: 64 concurrent callers with one key and body get one payment and 64 identical "
          "responses",
          "[intake][db][concurrency]") {
    Scope s;
    constexpr int k_callers = 64;
    const std::string body = payment_body("burst-1");
    std::vector<IntakeResponse> responses(k_callers);
    std::vector<std::string> errors(k_callers);
    std::latch ready(k_callers);
    std::vector<std::thread> threads;
    for (int i = 0; i < k_callers; ++i) {
        threads.emplace_back([&, i] {
            try {
                store::Db db(database_url()); // a connection of its own
                ready.arrive_and_wait();
                responses[static_cast<std::size_t>(i)] =
                    create(db, s.writer.principal, "burst-key", body);
            } catch (const std::exception& e) {
                errors[static_cast<std::size_t>(i)] = e.what();
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    for (const auto& e : errors) {
        REQUIRE(e.empty());
    }
    int fresh = 0;
    for (const auto& r : responses) {
        REQUIRE(r.status == 202);
        CHECK(r.body == responses.front().body);
        CHECK(r.location == responses.front().location);
        fresh += r.replayed ? 0 : 1;
    }
    CHECK(fresh == 1);
    CHECK(payments(s.tenant) == 1);
    CHECK(records(s.tenant) == 1);
    CHECK(events(s.tenant) == 1);
}

TEST_CASE("intake: concurrent payments of one principal lock neither its row nor its tenant's, "
          "and neither row can be deleted",
          "[intake][db][concurrency]") {
    // Migration 0028 (issue 33): a foreign key to tenants or principals made every insert lock
    // the row it names FOR KEY SHARE, and concurrent inserts sharing it a MultiXact each. A row
    // locked that way takes the locker's ID (or the MultiXact's) as its xmax; one nobody locks
    // or updates keeps whatever it had (the tenant's: the principal's insert, which locked it).
    Scope s;
    const auto xmax_of = [&] {
        return query_value("SELECT xmax::text FROM principals WHERE principal_id = $1::uuid",
                           s.writer.principal.principal_id) +
               " " +
               query_value("SELECT xmax::text FROM tenants WHERE tenant_id = $1::uuid",
                           s.tenant.tenant_id);
    };
    const std::string xmax_before = xmax_of();
    constexpr int k_callers = 8;
    constexpr int k_each = 25;
    std::vector<int> accepted(k_callers);
    std::vector<std::string> errors(k_callers);
    std::latch ready(k_callers);
    std::vector<std::thread> threads;
    for (int i = 0; i < k_callers; ++i) {
        threads.emplace_back([&, i] {
            try {
                store::Db db(database_url());
                ready.arrive_and_wait();
                for (int n = 0; n < k_each; ++n) {
                    const std::string ref =
                        "lockfree-" + std::to_string(i) + "-" + std::to_string(n);
                    accepted[static_cast<std::size_t>(i)] +=
                        create(db, s.writer.principal, ref, payment_body(ref)).status == 202 ? 1
                                                                                             : 0;
                }
            } catch (const std::exception& e) {
                errors[static_cast<std::size_t>(i)] = e.what();
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    for (int i = 0; i < k_callers; ++i) {
        REQUIRE(errors[static_cast<std::size_t>(i)].empty());
        CHECK(accepted[static_cast<std::size_t>(i)] == k_each);
    }
    CHECK(payments(s.tenant) == k_callers * k_each);
    CHECK(records(s.tenant) == k_callers * k_each);
    CHECK(events(s.tenant) == k_callers * k_each);
    CHECK(xmax_of() == xmax_before);

    // What the keys guarded against cannot happen: tenants and principals are never deleted
    // (on a database of its own: a TRUNCATE that went through would empty the shared one).
    ScratchDatabase scratch;
    {
        store::Db db(scratch.url());
        store::migrate(db);
    }
    exec_sql("INSERT INTO tenants (tenant_id, name) VALUES "
             "('00000000-0000-4000-8000-000000000001', 'kept');"
             "INSERT INTO principals (tenant_id, principal_id, name, role, api_key_hash) VALUES "
             "('00000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-000000000002', "
             "'writer', 'writer', sha256('k'::bytea))",
             scratch.url());
    for (const char* sql : {"DELETE FROM principals", "DELETE FROM tenants", "TRUNCATE principals",
                            "TRUNCATE principals CASCADE", "TRUNCATE tenants CASCADE"}) {
        try {
            exec_sql(sql, scratch.url());
            FAIL("not refused: " << sql);
        } catch (const pqxx::sql_error& e) {
            CHECK(e.sqlstate() == "23001");
            CHECK(std::string(e.what()).find("never deleted") != std::string::npos);
        }
    }
    CHECK(count_rows("principals", "00000000-0000-4000-8000-000000000001", "", scratch.url()) == 1);
    CHECK(count_rows("tenants", "00000000-0000-4000-8000-000000000001", "", scratch.url()) == 1);
    CHECK(payments(s.tenant) == k_callers * k_each);
}

TEST_CASE(
    "intake: same key with another body gets 409 idempotency_key_reused and the first payment "
    "is untouched",
    "[intake][db]") {
    Scope s;
    const auto first = create(*s.db, s.writer.principal, "k-409", payment_body("ref-a", 1000));
    REQUIRE(first.status == 202);
    const std::string before =
        query_value("SELECT row_to_json(p)::text FROM payments p WHERE tenant_id = $1::uuid",
                    s.tenant.tenant_id);

    SECTION("another amount") {
        const auto r = create(*s.db, s.writer.principal, "k-409", payment_body("ref-a", 2000));
        CHECK(r.status == 409);
        CHECK(problem_type(r) == "idempotency_key_reused");
        CHECK_FALSE(r.replayed);
    }
    SECTION("another merchant reference") {
        const auto r = create(*s.db, s.writer.principal, "k-409", payment_body("ref-b", 1000));
        CHECK(r.status == 409);
        CHECK(problem_type(r) == "idempotency_key_reused");
    }
    SECTION("another currency") {
        const auto r =
            create(*s.db, s.writer.principal, "k-409", payment_body("ref-a", 1000, "USD"));
        CHECK(r.status == 409);
    }
    CHECK(payments(s.tenant) == 1);
    CHECK(records(s.tenant) == 1);
    CHECK(events(s.tenant) == 1);
    CHECK(query_value("SELECT row_to_json(p)::text FROM payments p WHERE tenant_id = $1::uuid",
                      s.tenant.tenant_id) == before);
    // The original request still replays.
    const auto again = create(*s.db, s.writer.principal, "k-409", payment_body("ref-a", 1000));
    CHECK(again.status == 202);
    CHECK(again.replayed);
    CHECK(again.body == first.body);
}

TEST_CASE(
    "intake: concurrent callers with one key and two bodies: one payment, the other body gets "
    "409",
    "[intake][db][concurrency]") {
    Scope s;
    constexpr int k_callers = 32;
    const std::string body_a = payment_body("race-a", 500);
    const std::string body_b = payment_body("race-b", 700);
    std::vector<IntakeResponse> responses(k_callers);
    std::latch ready(k_callers);
    std::vector<std::thread> threads;
    for (int i = 0; i < k_callers; ++i) {
        threads.emplace_back([&, i] {
            store::Db db(database_url());
            ready.arrive_and_wait();
            responses[static_cast<std::size_t>(i)] =
                create(db, s.writer.principal, "race-key", i % 2 == 0 ? body_a : body_b);
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    REQUIRE(payments(s.tenant) == 1);
    CHECK(records(s.tenant) == 1);
    const std::string winner_ref = query_value(
        "SELECT merchant_reference FROM payments WHERE tenant_id = $1::uuid", s.tenant.tenant_id);
    const bool a_won = winner_ref == "race-a";
    for (int i = 0; i < k_callers; ++i) {
        const bool sent_a = i % 2 == 0;
        const auto& r = responses[static_cast<std::size_t>(i)];
        if (sent_a == a_won) {
            CHECK(r.status == 202);
        } else {
            CHECK(r.status == 409);
            CHECK(problem_type(r) == "idempotency_key_reused");
        }
    }
}

TEST_CASE("intake: reordered keys, other whitespace and a tracing field replay the same request",
          "[intake][db][canonical]") {
    Scope s;
    const auto first = create(*s.db, s.writer.principal, "k-canon", payment_body("ref-c"));
    REQUIRE(first.status == 202);
    const std::string reordered =
        R"({ "metadata" : {"order":"ref-c"}, "trace_id": "abc123",
             "payment_method":"pm_card_visa","provider":"stripe","description":"Order ref-c",
             "customer":"cus_123", "merchant_reference":"ref-c","currency":"eur","amount":1250 })";
    const auto again = create(*s.db, s.writer.principal, "k-canon", reordered);
    CHECK(again.status == 202);
    CHECK(again.replayed);
    CHECK(again.body == first.body);
    CHECK(payments(s.tenant) == 1);
}

TEST_CASE("intake: a crash before the statement leaves no rows, and the retry succeeds",
          "[intake][db][crash]") {
    Scope s;
    const std::string body = payment_body("ref-crash");
    const int status = run_in_child_armed("intake.before_statement", [&] {
        store::Db db(database_url());
        create(db, s.writer.principal, "k-crash", body);
    });
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);
    CHECK(payments(s.tenant) == 0);
    CHECK(records(s.tenant) == 0);
    CHECK(events(s.tenant) == 0);

    const auto retry = create(*s.db, s.writer.principal, "k-crash", body);
    CHECK(retry.status == 202);
    CHECK_FALSE(retry.replayed);
    CHECK(payments(s.tenant) == 1);
    CHECK(records(s.tenant) == 1);
    CHECK(events(s.tenant) == 1);
}

TEST_CASE("intake: the transactional path (a merchant reference taken) leaves no rows when it "
          "crashes before commit",
          "[intake][db][crash]") {
    // A key that is new for a merchant reference that is taken undoes the one statement and
    // takes BEGIN, the claim, the holder's read, the 409, COMMIT.
    const char* point = GENERATE("intake.after_key_claim", "intake.before_commit");
    Scope s;
    REQUIRE(create(*s.db, s.writer.principal, "k-first", payment_body("ref-taken")).status == 202);
    const std::string body = payment_body("ref-taken");
    const int status = run_in_child_armed(point, [&] {
        store::Db db(database_url());
        create(db, s.writer.principal, "k-second", body);
    });
    INFO("crash point " << point);
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);
    CHECK(payments(s.tenant) == 1);
    CHECK(records(s.tenant) == 1);
    CHECK(events(s.tenant) == 1);

    const auto retry = create(*s.db, s.writer.principal, "k-second", body);
    CHECK(retry.status == 409);
    CHECK(problem_type(retry) == "duplicate_merchant_reference");
    CHECK_FALSE(retry.replayed);
    const auto again = create(*s.db, s.writer.principal, "k-second", body);
    CHECK(again.replayed);
    CHECK(again.body == retry.body);
    CHECK(payments(s.tenant) == 1);
    CHECK(records(s.tenant) == 2);
    CHECK(events(s.tenant) == 1);
}

TEST_CASE("intake: a principal revoked after it was authenticated is refused by the create "
          "statement, and nothing is written",
          "[intake][db][auth]") {
    // serve keeps authenticated principals for a while (CredentialCache): the statement that
    // writes checks the revocation itself, for a new key and for a replay alike.
    Scope s;
    REQUIRE(create(*s.db, s.writer.principal, "k-before", payment_body("ref-before")).status ==
            202);
    store::revoke_principal(*s.db, s.writer.principal.principal_id, "test");
    const auto fresh = create(*s.db, s.writer.principal, "k-after", payment_body("ref-after"));
    CHECK(fresh.status == 403);
    CHECK(problem_type(fresh) == "credential_revoked");
    // A new key for a merchant reference that is taken: refused before the 409 would be stored.
    const auto taken = create(*s.db, s.writer.principal, "k-taken", payment_body("ref-before"));
    CHECK(taken.status == 403);
    const auto replay = create(*s.db, s.writer.principal, "k-before", payment_body("ref-before"));
    CHECK(replay.status == 403);
    CHECK(problem_type(replay) == "credential_revoked");
    CHECK(payments(s.tenant) == 1);
    CHECK(records(s.tenant) == 1);
    CHECK(events(s.tenant) == 1);
}

TEST_CASE("intake: a response lost after commit is replayed byte for byte on retry",
          "[intake][db][crash]") {
    Scope s;
    const std::string body = payment_body("ref-lost");
    const int status = run_in_child_armed("intake.after_commit", [&] {
        store::Db db(database_url());
        create(db, s.writer.principal, "k-lost", body);
    });
    REQUIRE(WIFSIGNALED(status));
    CHECK(payments(s.tenant) == 1); // committed, the caller never heard
    const std::string stored =
        query_value("SELECT response_body FROM idempotency_records WHERE tenant_id = $1::uuid",
                    s.tenant.tenant_id);

    const auto retry = create(*s.db, s.writer.principal, "k-lost", body);
    CHECK(retry.status == 202);
    CHECK(retry.replayed);
    CHECK(retry.body == stored);
    const auto again = create(*s.db, s.writer.principal, "k-lost", body);
    CHECK(again.body == retry.body);
    CHECK(again.location == retry.location);
    CHECK(payments(s.tenant) == 1);
    CHECK(records(s.tenant) == 1);
    CHECK(events(s.tenant) == 1);
}

TEST_CASE("intake: the same key under another principal or tenant is an independent record",
          "[intake][db]") {
    Scope s;
    const TestPrincipal other_writer = make_principal(*s.db, s.tenant);
    const TestTenant other_tenant = make_tenant(*s.db);
    const TestPrincipal foreign = make_principal(*s.db, other_tenant);

    const auto a = create(*s.db, s.writer.principal, "shared-key", payment_body("ref-x1"));
    const auto b = create(*s.db, other_writer.principal, "shared-key", payment_body("ref-x2"));
    const auto c = create(*s.db, foreign.principal, "shared-key", payment_body("ref-x1"));
    CHECK(a.status == 202);
    CHECK(b.status == 202);
    CHECK(c.status == 202);
    CHECK_FALSE(a.replayed);
    CHECK_FALSE(b.replayed);
    CHECK_FALSE(c.replayed);
    CHECK(a.body != b.body);
    CHECK(a.body != c.body);
    CHECK(payments(s.tenant) == 2);
    CHECK(records(s.tenant) == 2);
    CHECK(payments(other_tenant) == 1);
    CHECK(records(other_tenant) == 1);
    // Each replay sees only its own response.
    CHECK(create(*s.db, s.writer.principal, "shared-key", payment_body("ref-x1")).body == a.body);
    CHECK(create(*s.db, other_writer.principal, "shared-key", payment_body("ref-x2")).body ==
          b.body);
    CHECK(create(*s.db, foreign.principal, "shared-key", payment_body("ref-x1")).body == c.body);
    // Another principal sending the first principal's body under the same key is not a replay of
    // it.
    const auto cross = create(*s.db, other_writer.principal, "shared-key", payment_body("ref-x1"));
    CHECK(cross.status == 409);
    CHECK(cross.body != a.body);
}

TEST_CASE("intake: a revoked principal replaying its own key is refused", "[intake][db][auth]") {
    Scope s;
    const auto first = create(*s.db, s.writer.principal, "k-revoke", payment_body("ref-r"));
    REQUIRE(first.status == 202);
    store::revoke_principal(*s.db, s.writer.principal.principal_id, "test");

    // At the door: authentication refuses a revoked key.
    const auto auth = authenticate(*s.db, s.writer.api_key);
    REQUIRE_FALSE(auth);
    CHECK(auth.error() == AuthFailure::revoked);
    // And inside the transaction, should a request get past the door just before the revocation.
    const auto replay = create(*s.db, s.writer.principal, "k-revoke", payment_body("ref-r"));
    CHECK(replay.status == 403);
    CHECK(problem_type(replay) == "credential_revoked");
    CHECK(replay.body != first.body);
    CHECK(payments(s.tenant) == 1);
    CHECK(records(s.tenant) == 1);
    CHECK(count_rows("audit_log", s.tenant.tenant_id, "action = 'principal.revoke'") == 1);
}

TEST_CASE("intake: authentication finds the principal by its key and refuses unknown keys",
          "[intake][db][auth]") {
    Scope s;
    const auto ok = authenticate(*s.db, s.writer.api_key);
    REQUIRE(ok);
    CHECK(ok->principal_id == s.writer.principal.principal_id);
    CHECK(ok->tenant_id == s.tenant.tenant_id);
    CHECK(ok->role == Role::writer);
    CHECK(authenticate(*s.db, Secret("prk_not-a-real-key")).error() == AuthFailure::unknown);
    CHECK(authenticate(*s.db, Secret("")).error() == AuthFailure::missing);
    // Only the digest is stored, never the key.
    CHECK(count_rows("principals", s.tenant.tenant_id,
                     "api_key_hash = sha256(convert_to('" + s.writer.api_key.reveal() +
                         "', 'UTF8'))") == 1);
}

TEST_CASE("intake: a role that may not create payments gets 403 and stores nothing",
          "[intake][db][auth]") {
    Scope s;
    const TestPrincipal reader = make_principal(*s.db, s.tenant, Role::reader);
    const auto r = create(*s.db, reader.principal, "k-reader", payment_body("ref-reader"));
    CHECK(r.status == 403);
    CHECK(problem_type(r) == "forbidden");
    CHECK(payments(s.tenant) == 0);
    CHECK(records(s.tenant) == 0);
}

TEST_CASE("intake: bad keys get 400, store nothing, and do not occupy anything",
          "[intake][db][validation]") {
    Scope s;
    const std::vector<std::pair<std::string, std::string>> bad_keys = {
        {"", "idempotency_key_missing"},
        {std::string(256, 'k'), "invalid_idempotency_key"},
        {"key\twith-tab", "invalid_idempotency_key"},
        {"key\r\nInjected: 1", "invalid_idempotency_key"},
        {"key with space", "invalid_idempotency_key"},
        {"cl\xC3\xA9", "invalid_idempotency_key"},
        {std::string("nul\0byte", 8), "invalid_idempotency_key"},
    };
    for (const auto& [key, type] : bad_keys) {
        const auto r = create(*s.db, s.writer.principal, key, payment_body("ref-badkey"));
        INFO("key of " << key.size() << " bytes");
        CHECK(r.status == 400);
        CHECK(problem_type(r) == type);
        CHECK(nlohmann::json::parse(r.body)["field"] == "Idempotency-Key");
    }
    CHECK(payments(s.tenant) == 0);
    CHECK(records(s.tenant) == 0);
    // The longest valid key works.
    CHECK(create(*s.db, s.writer.principal, std::string(255, 'k'), payment_body("ref-badkey"))
              .status == 202);
}

TEST_CASE(
    "intake: bad bodies get a clear 4xx naming the field, store nothing, and leave the key free",
    "[intake][db][validation]") {
    Scope s;
    struct Bad {
        std::string body;
        int status;
        std::string type;
    };
    const std::vector<Bad> bad = {
        {"{not json", 400, "malformed_request"},
        {R"({"amount": 100, "amount": 200, "currency": "EUR"})", 400, "malformed_request"},
        {R"({"amount": 12.5, "currency": "EUR", "merchant_reference": "r", "provider": "stripe", "payment_method": "pm_1"})",
         422, "invalid_request"},
        {R"({"amount": 0, "currency": "EUR", "merchant_reference": "r", "provider": "stripe", "payment_method": "pm_1"})",
         422, "invalid_request"},
        {R"({"amount": -5, "currency": "EUR", "merchant_reference": "r", "provider": "stripe", "payment_method": "pm_1"})",
         422, "invalid_request"},
        {R"({"amount": 99999999999999999999, "currency": "EUR", "merchant_reference": "r", "provider": "stripe", "payment_method": "pm_1"})",
         422, "invalid_request"},
        {R"({"amount": 100, "currency": "XYZ", "merchant_reference": "r", "provider": "stripe", "payment_method": "pm_1"})",
         422, "invalid_request"},
        {R"({"amount": "100", "currency": "EUR", "merchant_reference": "r", "provider": "stripe", "payment_method": "pm_1"})",
         422, "invalid_request"},
        {R"({"amount": 100, "currency": "EUR", "merchant_reference": "r", "provider": "stripe", "payment_method": "pm_1", "description": "card 4242 4242 4242 4242"})",
         422, "card_data_refused"},
        {R"({"amount": 100, "currency": "EUR", "merchant_reference": "r", "provider": "stripe", "payment_method": "pm_1", "cvc": "123"})",
         422, "card_data_refused"},
        {std::string(10000, '[') + std::string(10000, ']'), 400, "malformed_request"},
    };
    for (const auto& b : bad) {
        const auto r = create(*s.db, s.writer.principal, "k-bad", b.body);
        INFO(b.body.substr(0, 120));
        CHECK(r.status == b.status);
        CHECK(problem_type(r) == b.type);
        CHECK(r.body.find("4242") == std::string::npos); // card data is never echoed
    }
    CHECK(payments(s.tenant) == 0);
    CHECK(records(s.tenant) == 0);
    // The key was never occupied: a good body under it is a first request.
    const auto good = create(*s.db, s.writer.principal, "k-bad", payment_body("ref-good"));
    CHECK(good.status == 202);
    CHECK_FALSE(good.replayed);
}

TEST_CASE("intake: a duplicate merchant_reference under another key is a stored, replayed 409",
          "[intake][db]") {
    Scope s;
    const auto first = create(*s.db, s.writer.principal, "k-ref-1", payment_body("same-ref"));
    REQUIRE(first.status == 202);
    const auto dup = create(*s.db, s.writer.principal, "k-ref-2", payment_body("same-ref"));
    CHECK(dup.status == 409);
    CHECK(problem_type(dup) == "duplicate_merchant_reference");
    CHECK_FALSE(dup.replayed);
    const auto dup_again = create(*s.db, s.writer.principal, "k-ref-2", payment_body("same-ref"));
    CHECK(dup_again.status == 409);
    CHECK(dup_again.replayed);
    CHECK(dup_again.body == dup.body);
    CHECK(payments(s.tenant) == 1);
    CHECK(records(s.tenant) == 2);
    CHECK(events(s.tenant) == 1);
}

TEST_CASE("intake: a connection that died while idle is replaced, and the payment is made once",
          "[intake][db][fault]") {
    // The one statement may or may not have run on a connection that broke under it; it is
    // idempotent, so it runs once more on a new connection, which tells.
    Scope s;
    const std::string app = unique_name("victim");
    store::Db db(database_url() + (database_url().find('?') == std::string::npos ? "?" : "&") +
                 "application_name=" + app);
    REQUIRE(create(db, s.writer.principal, "k-warm", payment_body("ref-warm")).status == 202);
    // Kill this connection's server process from outside, as a failover or restart would.
    REQUIRE(query_value("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE application_name = $1",
                        app) == "1");
    const auto r = create(db, s.writer.principal, "k-idle", payment_body("ref-idle"));
    CHECK(r.status == 202);
    CHECK_FALSE(r.replayed);
    CHECK(count_rows("idempotency_records", s.tenant.tenant_id, "idempotency_key = 'k-idle'") == 1);
    CHECK(payments(s.tenant) == 2);
    CHECK(events(s.tenant) == 2);
    const auto retry = create(db, s.writer.principal, "k-idle", payment_body("ref-idle"));
    CHECK(retry.status == 202);
    CHECK(retry.replayed);
    CHECK(retry.body == r.body);
    CHECK(payments(s.tenant) == 2);
}

namespace {

// A connection of its own that names itself, so a test can find its server process.
std::string named_url(const std::string& app) {
    return database_url() + (database_url().find('?') == std::string::npos ? "?" : "&") +
           "application_name=" + app;
}

// Terminates the server process of the connection named `app` and waits until it is gone.
void terminate_backend(const std::string& app) {
    REQUIRE(query_value("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE application_name = $1",
                        app) == "1");
    CHECK(testing::wait_until(
        [&] {
            return query_value("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                               app) == "0";
        },
        std::chrono::seconds(5), std::chrono::milliseconds(10)));
}

} // namespace

TEST_CASE("intake: a COMMIT whose outcome was lost says so in the 503, and the retry settles it",
          "[intake][db][fault][regression]") {
    // The 503 after pqxx::in_doubt_error said "Nothing was stored", which may be false: the
    // transaction may have committed. It must say the outcome is unknown and that a retry with the
    // same key returns it.
    Scope s;
    const auto says_unknown = [](const IntakeResponse& r) {
        const auto j = nlohmann::json::parse(r.body);
        const std::string detail = j.value("detail", "");
        INFO(detail);
        CHECK(j.value("type", "") == "service_unavailable");
        CHECK(detail.find("Nothing was stored") == std::string::npos);
        CHECK(detail.find("unknown") != std::string::npos);
        CHECK(detail.find("same Idempotency-Key") != std::string::npos);
        CHECK(r.outcome == "in_doubt");
        CHECK(r.retry_after == 1);
    };

    SECTION("the connection dies under the statement, and again on a new one: 503, unknown") {
        const std::string app = unique_name("in-doubt");
        store::Db db(named_url(app));
        // The server process goes away as the statement is sent, as in a failover, and the new
        // connection's too: nobody can say whether the first run committed.
        std::function<void()> kill_again = [&] {
            arm_crash_point("intake.before_statement", kill_again);
            terminate_backend(app);
        };
        arm_crash_point("intake.before_statement", kill_again);
        const auto r = create(db, s.writer.principal, "k-doubt", payment_body("ref-doubt"));
        arm_crash_point("");
        CHECK(r.status == 503);
        says_unknown(r);
        CHECK(payments(s.tenant) == 0);
        CHECK(records(s.tenant) == 0);
        CHECK(events(s.tenant) == 0);
        const auto retry = create(db, s.writer.principal, "k-doubt", payment_body("ref-doubt"));
        CHECK(retry.status == 202);
        CHECK_FALSE(retry.replayed);
        CHECK(payments(s.tenant) == 1);
        CHECK(records(s.tenant) == 1);
        CHECK(events(s.tenant) == 1);
    }

    SECTION("the connection dies under the statement once: the run on a new connection answers") {
        const std::string app = unique_name("in-doubt");
        store::Db db(named_url(app));
        bool killed = false;
        arm_crash_point("intake.before_statement", [&] {
            if (!killed) {
                killed = true;
                terminate_backend(app);
            }
        });
        const auto r = create(db, s.writer.principal, "k-doubt", payment_body("ref-doubt"));
        arm_crash_point("");
        CHECK(killed);
        CHECK(r.status == 202);
        CHECK_FALSE(r.replayed);
        CHECK(payments(s.tenant) == 1);
        CHECK(records(s.tenant) == 1);
        CHECK(events(s.tenant) == 1);
    }

    SECTION("the answer to a committed statement is lost once: the run on a new connection "
            "answers with the stored 202") {
        store::Db db(database_url());
        arm_crash_point("intake.after_commit", [] {
            throw pqxx::in_doubt_error("WARNING: Connection lost while committing transaction");
        });
        const auto r = create(db, s.writer.principal, "k-doubt", payment_body("ref-doubt"));
        arm_crash_point("");
        CHECK(r.status == 202);
        CHECK(r.replayed); // it is the stored answer
        CHECK(r.body == query_value("SELECT response_body FROM idempotency_records WHERE "
                                    "tenant_id = $1::uuid",
                                    s.tenant.tenant_id));
        CHECK(payments(s.tenant) == 1);
        CHECK(records(s.tenant) == 1);
        CHECK(events(s.tenant) == 1);
    }

    SECTION("COMMIT succeeded but its acknowledgement was lost, and again: the retry returns the "
            "stored 202") {
        store::Db db(database_url());
        // What libpqxx throws when the connection breaks after the server committed, on both runs.
        std::function<void()> lose_again = [&] {
            arm_crash_point("intake.after_commit", lose_again);
            throw pqxx::in_doubt_error("WARNING: Connection lost while committing transaction");
        };
        arm_crash_point("intake.after_commit", lose_again);
        const auto r = create(db, s.writer.principal, "k-doubt", payment_body("ref-doubt"));
        arm_crash_point("");
        CHECK(r.status == 503);
        says_unknown(r);
        CHECK(payments(s.tenant) == 1); // it did commit
        const std::string stored =
            query_value("SELECT response_body FROM idempotency_records WHERE tenant_id = $1::uuid",
                        s.tenant.tenant_id);
        const auto retry = create(db, s.writer.principal, "k-doubt", payment_body("ref-doubt"));
        CHECK(retry.status == 202);
        CHECK(retry.replayed);
        CHECK(retry.body == stored);
        CHECK(payments(s.tenant) == 1);
        CHECK(records(s.tenant) == 1);
        CHECK(events(s.tenant) == 1);
    }
}

namespace {

// payment_body() naming another provider.
std::string body_for(const std::string& provider, const std::string& reference) {
    std::string body = payment_body(reference);
    const std::string stripe = R"("provider": "stripe")";
    body.replace(body.find(stripe), stripe.size(), R"("provider": ")" + provider + "\"");
    return body;
}

// What the stripe, adyen and square adapters declare (providers/<kind>/wire.cpp), written out.
const CarryLimits k_stripe{
    "Stripe", {50, {"operation_id", "merchant_reference"}, 40, 500, "Stripe: 50 keys"}};
const CarryLimits k_adyen{
    "Adyen", {20, {"operation_id", "merchant_reference"}, 20, 80, "Adyen: 20 entries"}};
const CarryLimits k_square{"Square", {0, {}, 0, 0, "Square: no metadata"}};

ProviderCatalog stripe_catalog() {
    ProviderCatalog c;
    c.providers.emplace("stripe", KnownProvider{"stripe", "stripe", k_stripe});
    c.providers.emplace("stripe-eu", KnownProvider{"stripe-eu", "stripe", k_stripe});
    return c;
}

// A valid body for `provider` with `n` metadata entries, and the given merchant reference.
std::string body_with_metadata(const std::string& provider, const std::string& reference, int n,
                               const std::string& first_key = "k0") {
    auto j = nlohmann::json::parse(body_for(provider, reference));
    j["metadata"] = nlohmann::json::object();
    for (int i = 0; i < n; ++i) {
        j["metadata"][i == 0 ? first_key : "k" + std::to_string(i)] = "v" + std::to_string(i);
    }
    return j.dump();
}

} // namespace

TEST_CASE("intake: with the provider configuration, a provider it does not know gets 422 and "
          "nothing is stored",
          "[intake][db][validation][regression]") {
    // A payment naming a provider no worker is configured for was accepted (202) and stayed
    // pending forever.
    Scope s;
    IntakeSettings settings;
    settings.providers = stripe_catalog();
    IntakeService intake(*s.db, test_keys(), settings);

    const auto r =
        intake.create_payment(s.writer.principal, "k-paypal", body_for("paypal", "ref-pp"), "");
    CHECK(r.status == 422);
    CHECK(r.content_type() == "application/problem+json");
    const auto j = nlohmann::json::parse(r.body);
    CHECK(j["type"] == "invalid_request");
    CHECK(j["field"] == "provider");
    const std::string detail = j["detail"];
    CHECK(detail.find("'paypal' is not configured") != std::string::npos);
    CHECK(detail.find("stripe, stripe-eu") != std::string::npos);
    CHECK(detail.find("operator") != std::string::npos);
    CHECK(r.outcome == "invalid");
    CHECK(payments(s.tenant) == 0);
    CHECK(records(s.tenant) == 0);
    CHECK(events(s.tenant) == 0);

    // The key stayed free: the corrected request is a first request.
    const auto ok =
        intake.create_payment(s.writer.principal, "k-paypal", body_for("stripe-eu", "ref-pp"), "");
    CHECK(ok.status == 202);
    CHECK_FALSE(ok.replayed);
    CHECK(payments(s.tenant) == 1);
    CHECK(records(s.tenant) == 1);
    CHECK(events(s.tenant) == 1);
}

TEST_CASE("intake: with the provider configuration, what the provider cannot carry gets 422 naming "
          "the limit, and nothing is stored",
          "[intake][db][validation][regression]") {
    // A payment with 50 metadata keys was stored, and only 48 of them reached Stripe.
    Scope s;
    IntakeSettings settings;
    settings.providers = stripe_catalog();
    settings.providers->providers.emplace("adyen", KnownProvider{"adyen", "adyen", k_adyen});
    settings.providers->providers.emplace("square", KnownProvider{"square", "square", k_square});
    IntakeService intake(*s.db, test_keys(), settings);
    const auto refused = [&](const std::string& key, const std::string& body,
                             const std::string& field, const std::vector<std::string>& says) {
        INFO(key);
        const auto r = intake.create_payment(s.writer.principal, key, body, "");
        CHECK(r.status == 422);
        const auto j = nlohmann::json::parse(r.body);
        CHECK(j["type"] == "invalid_request");
        CHECK(j["field"] == field);
        for (const auto& text : says) {
            CHECK(j.value("detail", "").find(text) != std::string::npos);
        }
    };
    refused("k-50", body_with_metadata("stripe", "ref-50", 50), "metadata",
            {"Stripe", "at most 48", "50 entries", "operation_id, merchant_reference"});
    refused("k-own", body_with_metadata("stripe", "ref-own", 1, "operation_id"),
            "metadata.operation_id", {"payrecon's own"});
    refused("k-adyen", body_with_metadata("adyen", "ref-adyen", 19), "metadata",
            {"Adyen", "at most 18"});
    refused("k-adyen-ref", body_with_metadata("adyen", std::string(81, 'r'), 0),
            "merchant_reference", {"80 characters"});
    refused("k-square", body_with_metadata("square", "ref-square", 1), "metadata",
            {"Square", "no metadata"});
    CHECK(payments(s.tenant) == 0);
    CHECK(records(s.tenant) == 0);
    CHECK(events(s.tenant) == 0);

    // 48 fit, and all 48 are stored for the adapter to send.
    const auto ok = intake.create_payment(s.writer.principal, "k-50",
                                          body_with_metadata("stripe", "ref-50", 48), "");
    CHECK(ok.status == 202);
    CHECK(payments(s.tenant) == 1);
    CHECK(query_value("SELECT count(*) FROM payments p, jsonb_object_keys(p.metadata) "
                      "WHERE p.tenant_id = $1::uuid",
                      s.tenant.tenant_id) == "48");
    // The same request to a provider with no limit in the way: 50 entries are fine without a
    // configuration (nothing to check against) -- the adapter then refuses to send it cut short.
    CHECK(create(*s.db, s.writer.principal, "k-50b", body_with_metadata("stripe", "ref-50b", 50))
              .status == 202);
}

TEST_CASE("intake: a request stored before the provider configuration changed is still replayed",
          "[intake][db]") {
    Scope s;
    // Accepted while provider names were not checked ...
    const auto first = create(*s.db, s.writer.principal, "k-old", body_for("adyen", "ref-old"));
    REQUIRE(first.status == 202);
    // ... its retry gets the stored answer, not a refusal: the payment exists.
    IntakeSettings settings;
    settings.providers = stripe_catalog();
    IntakeService intake(*s.db, test_keys(), settings);
    const auto retry =
        intake.create_payment(s.writer.principal, "k-old", body_for("adyen", "ref-old"), "");
    CHECK(retry.status == 202);
    CHECK(retry.replayed);
    CHECK(retry.body == first.body);
    CHECK(payments(s.tenant) == 1);
    // Without a configuration nothing is checked, as before.
    CHECK(create(*s.db, s.writer.principal, "k-any", body_for("anything", "ref-any")).status ==
          202);
    CHECK(payments(s.tenant) == 2);
}

TEST_CASE("intake: a retry after purge deleted its key's record is told the record expired and "
          "where the payment is",
          "[intake][db][purge][regression]") {
    // After purge deleted a key's record, a retry with that same key was told its payment exists
    // "under another Idempotency-Key", which is false. A database of its own: purge is global.
    ScratchDatabase scratch;
    store::Db db(scratch.url());
    store::migrate(db);
    const auto tenant = make_tenant(db);
    const auto writer = make_principal(db, tenant);
    pqxx::connection c(scratch.url());
    const auto sql = [&](const std::string& text) {
        pqxx::work tx(c);
        const pqxx::result r = tx.exec(text);
        tx.commit();
        return r.empty() || r[0][0].is_null() ? std::string() : r[0][0].as<std::string>();
    };
    const std::string body = payment_body("ref-expired");
    const auto first = create(db, writer.principal, "k-expired", body);
    REQUIRE(first.status == 202);
    const std::string payment_id = nlohmann::json::parse(first.body)["id"];
    CHECK(sql("SELECT count(*) FROM payments WHERE idempotency_key_hash IS NOT NULL") == "1");

    // The payment is finished and its key's record expires; purge deletes it.
    sql("UPDATE payments SET state = 'succeeded'");
    sql("UPDATE idempotency_records SET created_at = now() - interval '8 days', "
        "expires_at = now() - interval '1 day'");
    const auto purged = store::purge_idempotency_records(
        db, std::nullopt, false,
        store::PurgeAudit{"ops", std::chrono::hours(24), std::chrono::hours(24)});
    REQUIRE(purged.deleted == 1);
    REQUIRE(sql("SELECT count(*) FROM idempotency_records") == "0");

    const auto retry = create(db, writer.principal, "k-expired", body);
    CHECK(retry.status == 409);
    CHECK(retry.outcome == "key_expired");
    const auto j = nlohmann::json::parse(retry.body);
    CHECK(j["type"] == "idempotency_key_expired");
    CHECK(j["field"] == "Idempotency-Key");
    CHECK(j["payment_id"] == payment_id);
    CHECK(j["payment"] == "/v1/payments/" + payment_id);
    const std::string detail = j["detail"];
    CHECK(detail.find("has expired") != std::string::npos);
    CHECK(detail.find(payment_id) != std::string::npos);
    CHECK(detail.find("another Idempotency-Key") == std::string::npos);
    CHECK(sql("SELECT count(*) FROM payments") == "1");
    CHECK(sql("SELECT count(*) FROM outbox") == "1");
    CHECK(sql("SELECT count(*) FROM idempotency_records WHERE response_status = 409") == "1");
    // From now on that answer is the key's, replayed byte for byte.
    const auto again = create(db, writer.principal, "k-expired", body);
    CHECK(again.replayed);
    CHECK(again.body == retry.body);

    // Another key, or the same key string of another principal of the tenant (its keys are its
    // own; a rotated API key is one): each told which payment holds the reference -- the
    // tenant's own, which every credential of it may read.
    const auto other = create(db, writer.principal, "k-other", body);
    const auto o = nlohmann::json::parse(other.body);
    CHECK(o["type"] == "duplicate_merchant_reference");
    CHECK(o["payment_id"] == payment_id);
    CHECK(o.value("detail", "").find("another Idempotency-Key of this API key") !=
          std::string::npos);
    const auto colleague = make_principal(db, tenant);
    const auto theirs = create(db, colleague.principal, "k-expired", body);
    const auto t = nlohmann::json::parse(theirs.body);
    CHECK(t["type"] == "duplicate_merchant_reference");
    CHECK(t["payment_id"] == payment_id);
    CHECK(t.value("detail", "").find("another API key of this tenant") != std::string::npos);
    CHECK(t.value("detail", "").find("Idempotency-Key") == std::string::npos);

    // A payment made before payments kept their key's digest: which key made it is unknown.
    sql("UPDATE payments SET idempotency_key_hash = NULL");
    sql("DELETE FROM idempotency_records WHERE idempotency_key = 'k-expired'");
    const auto unknown = create(db, writer.principal, "k-expired", body);
    const auto u = nlohmann::json::parse(unknown.body);
    CHECK(u["type"] == "duplicate_merchant_reference");
    CHECK(u["payment_id"] == payment_id);
    CHECK(u.value("detail", "").find("or under this one before its record expired") !=
          std::string::npos);
    CHECK(sql("SELECT count(*) FROM payments") == "1");
}

TEST_CASE("intake: after a fingerprint secret rotation, replays still match", "[intake][db]") {
    Scope s;
    const FingerprintKeys old_keys(test_secret('a'));
    const FingerprintKeys rotated(test_secret('b'), {test_secret('a')});
    const FingerprintKeys forgotten(test_secret('b'));
    const auto first =
        create(*s.db, s.writer.principal, "k-rot", payment_body("ref-rot"), old_keys);
    REQUIRE(first.status == 202);
    const auto replay =
        create(*s.db, s.writer.principal, "k-rot", payment_body("ref-rot"), rotated);
    CHECK(replay.status == 202);
    CHECK(replay.replayed);
    CHECK(replay.body == first.body);
    // Dropping the old secret too early turns legitimate retries into conflicts: the reason to keep
    // it.
    CHECK(create(*s.db, s.writer.principal, "k-rot", payment_body("ref-rot"), forgotten).status ==
          409);
    CHECK(payments(s.tenant) == 1);
}

TEST_CASE("intake: a response over 64 KiB is never stored", "[intake][db]") {
    Scope s;
    const auto request = parse_payment_request(payment_body("ref-big"), "");
    REQUIRE(request);
    store::IntakeClaim claim{s.tenant.tenant_id,   s.writer.principal.principal_id,
                             "create_payment",     "k-big",
                             std::string(64, 'a'), std::chrono::hours(24)};
    store::NewPayment payment{new_uuid(), new_operation_id(), &*request, "", std::nullopt};
    CHECK_THROWS_AS(
        store::write_intake(*s.db, claim, payment,
                            [](const std::string&) {
                                return store::IntakeBodies{
                                    std::string(65 * 1024, 'x'),
                                    [](const store::ExistingPayment&) { return std::string("{}"); },
                                    std::nullopt};
                            }),
        std::length_error);
    CHECK(payments(s.tenant) == 0);
    CHECK(records(s.tenant) == 0);
}

// ---- card data (issue 12) ---------------------------------------------------------------------

TEST_CASE("intake: a card number in the Idempotency-Key gets 422 and is stored nowhere",
          "[intake][db][card]") {
    Scope s;
    // Issue 12: such a key was accepted and kept in idempotency_records.
    const std::vector<std::string> keys = {"4242424242424242",       "4242-4242-4242-4242",
                                           "4242.4242.4242.4242",    "4242/4242/4242/4242",
                                           "order-5555555555554444", "amex:378282246310005"};
    int n = 0;
    for (const std::string& key : keys) {
        INFO(key);
        const auto r = create(*s.db, s.writer.principal, key,
                              payment_body("ref-cardkey-" + std::to_string(++n)));
        CHECK(r.status == 422);
        CHECK(problem_type(r) == "card_data_refused");
        CHECK(nlohmann::json::parse(r.body)["field"] == "Idempotency-Key");
        CHECK(r.body.find("4242") == std::string::npos);
        CHECK(r.body.find("5555") == std::string::npos);
        CHECK(r.body.find("3782") == std::string::npos);
        // Not under this tenant, nor under any other.
        CHECK(query_value("SELECT count(*) FROM idempotency_records WHERE idempotency_key = $1",
                          key) == "0");
    }
    CHECK(payments(s.tenant) == 0);
    CHECK(records(s.tenant) == 0);
    CHECK(events(s.tenant) == 0);
}

TEST_CASE("intake: issue 12's card number bypasses in the body get 422 and store nothing",
          "[intake][db][card]") {
    Scope s;
    const std::string full_width = "\xEF\xBC\x94\xEF\xBC\x92\xEF\xBC\x94\xEF\xBC\x92"; // "4242"
    const std::vector<std::pair<std::string, std::string>> bypasses = {
        {"description", "4242.4242.4242.4242"},
        {"merchant_reference", "4242/4242/4242/4242"},
        {"customer", full_width + full_width + full_width + full_width},
        {"description",
         "card " + full_width + " " + full_width + " " + full_width + " " + full_width},
        {"metadata.note", "5555 5555 5555 4444 12/30"},
    };
    int n = 0;
    for (const auto& [field, value] : bypasses) {
        INFO(field);
        nlohmann::json body = nlohmann::json::parse(payment_body("ref-bypass"));
        if (field == "metadata.note") {
            body["metadata"]["note"] = value;
        } else {
            body[field] = value;
        }
        const auto r =
            create(*s.db, s.writer.principal, "k-bypass-" + std::to_string(++n), body.dump());
        CHECK(r.status == 422);
        CHECK(problem_type(r) == "card_data_refused");
        CHECK(nlohmann::json::parse(r.body)["field"] == field);
        CHECK(r.body.find("4242") == std::string::npos);
        CHECK(r.body.find(full_width) == std::string::npos);
    }
    CHECK(payments(s.tenant) == 0);
    CHECK(records(s.tenant) == 0);
    CHECK(events(s.tenant) == 0);
}

TEST_CASE("intake: references the old card check refused are accepted as reference and key",
          "[intake][db][card]") {
    Scope s;
    // Each passed the old check (13-19 digits joined across '-', Luhn) and got 422.
    const std::vector<std::string> references = {"order-2026-1202-000125", "order-2026-1202-000133",
                                                 "1764670797123-44",       "1764670797123-51",
                                                 "1764670797123000002",    "1764670797123000010"};
    for (const std::string& reference : references) {
        INFO(reference);
        const auto r = create(*s.db, s.writer.principal, reference, payment_body(reference));
        CHECK(r.status == 202);
        CHECK(query_value("SELECT merchant_reference FROM payments WHERE tenant_id = $1::uuid AND "
                          "merchant_reference = '" +
                              reference + "'",
                          s.tenant.tenant_id) == reference);
    }
    CHECK(payments(s.tenant) == static_cast<long long>(references.size()));
    CHECK(records(s.tenant) == static_cast<long long>(references.size()));
    CHECK(events(s.tenant) == static_cast<long long>(references.size()));
}

TEST_CASE("intake: 300 generated realistic references are accepted as reference and key",
          "[intake][db][card]") {
    Scope s;
    testing::ReferenceGenerator generator(20261203);
    std::set<std::string> seen;
    long long accepted = 0;
    for (int i = 0; i < 300; ++i) {
        const std::string reference = generator.next().text;
        if (!seen.insert(reference).second) {
            continue; // merchant_reference is unique per tenant
        }
        INFO(reference);
        // A reference with a space is no valid key: a UUID then, as clients do.
        const std::string key = reference.find(' ') == std::string::npos ? reference : new_uuid();
        const auto r = create(*s.db, s.writer.principal, key, payment_body(reference));
        CHECK(r.status == 202);
        accepted += r.status == 202 ? 1 : 0;
    }
    CHECK(accepted > 290);
    CHECK(payments(s.tenant) == accepted);
    CHECK(records(s.tenant) == accepted);
}
