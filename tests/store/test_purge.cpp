#include "services/intake.hpp"
#include "store/db.hpp"
#include "store/intake_store.hpp"
#include "store/migrations.hpp"
#include "tests/support/test_db.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

const store::PurgeAudit k_audit{"purge-test", std::chrono::hours(24), std::chrono::hours(24)};

} // namespace

TEST_CASE("purge: expired records of finished payments go, unfinished ones stay",
          "[store][db][purge][regression]") {
    // A database of its own: a purge run is global. In the shared test database the next test's
    // purge (48 h retention) deleted this test's expired records between two of its checks (CI).
    ScratchDatabase scratch;
    auto db = std::make_unique<store::Db>(scratch.url());
    store::migrate(*db);
    install_lease_guard(scratch.url());
    const auto tenant = make_tenant(*db);
    const auto writer = make_principal(*db, tenant);
    IntakeService intake(*db, test_keys());
    for (const char* key : {"k-done", "k-open", "k-fresh"}) {
        REQUIRE(
            intake
                .create_payment(writer.principal, key, payment_body(std::string("ref-") + key), "")
                .status == 202);
    }
    REQUIRE(
        intake.create_payment(writer.principal, "k-dup", payment_body("ref-k-done"), "").status ==
        409);
    // Expire all but k-fresh; finish the payment of k-done (as a worker would).
    exec_sql("UPDATE idempotency_records SET created_at = now() - interval '9 days', "
             "expires_at = now() - interval '1 day' WHERE tenant_id = '" +
                 tenant.tenant_id + "' AND idempotency_key <> 'k-fresh'",
             scratch.url());
    exec_sql("UPDATE payments SET state = 'succeeded' WHERE tenant_id = '" + tenant.tenant_id +
                 "' AND merchant_reference = 'ref-k-done'",
             scratch.url());

    const auto dry = store::purge_idempotency_records(*db, std::nullopt, true, k_audit);
    CHECK(dry.deleted == 2);
    CHECK(count_rows("idempotency_records", tenant.tenant_id, "", scratch.url()) == 4);

    const auto result = store::purge_idempotency_records(*db, std::nullopt, false, k_audit, 1);
    CHECK(result.deleted == 2); // k-done and k-dup
    CHECK(result.kept_unfinished == 1);
    CHECK(count_rows("idempotency_records", tenant.tenant_id, "", scratch.url()) == 2);
    CHECK(count_rows("idempotency_records", tenant.tenant_id, "idempotency_key = 'k-open'",
                     scratch.url()) == 1);
    CHECK(count_rows("idempotency_records", tenant.tenant_id, "idempotency_key = 'k-fresh'",
                     scratch.url()) == 1);
    // Business identity never expires.
    CHECK(count_rows("payments", tenant.tenant_id, "", scratch.url()) == 3);
}

TEST_CASE("purge: an explicit retention deletes by age, still never an unfinished payment's record",
          "[store][db][purge]") {
    ScratchDatabase scratch; // a purge run is global: a database of its own
    auto db = std::make_unique<store::Db>(scratch.url());
    store::migrate(*db);
    install_lease_guard(scratch.url());
    const auto tenant = make_tenant(*db);
    const auto writer = make_principal(*db, tenant);
    IntakeService intake(*db, test_keys());
    REQUIRE(intake.create_payment(writer.principal, "k-old", payment_body("ref-old"), "").status ==
            202);
    REQUIRE(intake.create_payment(writer.principal, "k-old-open", payment_body("ref-old-open"), "")
                .status == 202);
    exec_sql("UPDATE idempotency_records SET created_at = now() - interval '3 days' WHERE "
             "tenant_id = '" +
                 tenant.tenant_id + "'",
             scratch.url());
    exec_sql("UPDATE payments SET state = 'failed' WHERE tenant_id = '" + tenant.tenant_id +
                 "' AND merchant_reference = 'ref-old'",
             scratch.url());
    store::purge_idempotency_records(*db, std::chrono::hours(48), false, k_audit);
    CHECK(count_rows("idempotency_records", tenant.tenant_id, "", scratch.url()) == 1);
    CHECK(count_rows("idempotency_records", tenant.tenant_id, "idempotency_key = 'k-old-open'",
                     scratch.url()) == 1);
}

TEST_CASE(
    "purge: every run is audited -- who, retention, minimum in force, counts -- and a dry run "
    "writes nothing",
    "[store][db][purge][regression]") {
    // purge deleted 8,812 idempotency records and left no audit row; a lowered minimum retention
    // was recorded nowhere. A database of its own: a purge run is global, and other tests' records
    // must not be its business.
    ScratchDatabase scratch;
    store::Db db(scratch.url());
    store::migrate(db);
    install_lease_guard(scratch.url());
    const auto tenant = make_tenant(db);
    const auto writer = make_principal(db, tenant);
    IntakeService intake(db, test_keys());
    for (const char* key : {"k-1", "k-2", "k-3", "k-open"}) {
        REQUIRE(
            intake
                .create_payment(writer.principal, key, payment_body(std::string("ref-") + key), "")
                .status == 202);
    }
    pqxx::connection c(scratch.url());
    const auto sql = [&](const std::string& text, const std::string& param = "") {
        pqxx::work tx(c);
        const pqxx::result r = param.empty() ? tx.exec(text) : tx.exec_params(text, param);
        tx.commit();
        return r.empty() || r[0][0].is_null() ? std::string() : r[0][0].as<std::string>();
    };
    sql("UPDATE idempotency_records SET created_at = now() - interval '3 hours'");
    sql("UPDATE payments SET state = 'succeeded' WHERE merchant_reference <> 'ref-k-open'");
    const auto count = [&](const std::string& where) {
        return std::stoll(sql("SELECT count(*) FROM audit_log WHERE " + where));
    };
    const long long before = count("true"); // tenant.create, principal.create

    const store::PurgeAudit lowered{"alice", std::chrono::hours(1), std::chrono::hours(24)};
    const auto dry = store::purge_idempotency_records(db, std::chrono::hours(2), true, lowered);
    CHECK(dry.deleted == 3);
    CHECK(dry.kept_unfinished == 1);
    CHECK(dry.run_id.empty());
    CHECK(count("true") == before); // a dry run writes nothing
    CHECK(sql("SELECT count(*) FROM idempotency_records") == "4");

    const auto run = store::purge_idempotency_records(db, std::chrono::hours(2), false, lowered, 2);
    CHECK(run.deleted == 3);
    CHECK(run.kept_unfinished == 1);
    CHECK(run.tenants == 1);
    REQUIRE_FALSE(run.run_id.empty());
    CHECK(sql("SELECT count(*) FROM idempotency_records") == "1");
    // The tenant's rows: one per batch (of 2) that deleted from it, 3 records in all, each saying
    // who, the retention and the minimum in force.
    CHECK(count("tenant_id = '" + tenant.tenant_id + "' AND action = 'idempotency.purge'") == 2);
    CHECK(sql("SELECT sum((detail->>'deleted')::bigint) FROM audit_log WHERE action = "
              "'idempotency.purge' "
              "AND subject_id = $1",
              run.run_id) == "3");
    CHECK(count("action = 'idempotency.purge' AND actor = 'alice' AND detail->>'by' = 'age' "
                "AND (detail->>'retention_s')::bigint = 7200 "
                "AND (detail->>'minimum_retention_s')::bigint = 3600 "
                "AND (detail->>'minimum_lowered')::boolean AND detail->>'run_id' = '" +
                run.run_id + "'") == 2);
    // The run as a whole, under the deployment, with its totals -- the numbers the command prints.
    const std::string summary =
        sql("SELECT detail::text FROM audit_log WHERE tenant_id = "
            "'00000000-0000-0000-0000-000000000000' "
            "AND action = 'idempotency.purge_run' AND subject_id = $1 AND actor = 'alice'",
            run.run_id);
    REQUIRE_FALSE(summary.empty());
    const auto j = nlohmann::json::parse(summary);
    CHECK(j["deleted"] == 3);
    CHECK(j["kept_unfinished"] == 1);
    CHECK(j["tenants"] == 1);
    CHECK(j["minimum_lowered"] == true);
    CHECK(j["minimum_retention_s"] == 3600);
    CHECK(j["default_minimum_retention_s"] == 86400);
    CHECK(count("true") == before + 3);

    // A run that deletes nothing is recorded too: its minimum was in force all the same.
    const auto empty = store::purge_idempotency_records(db, std::chrono::hours(2), false, lowered);
    CHECK(empty.deleted == 0);
    CHECK(count("action = 'idempotency.purge_run' AND subject_id = '" + empty.run_id +
                "' AND (detail->>'minimum_lowered')::boolean") == 1);
    CHECK(count("true") == before + 4);
    CHECK(sql("SELECT count(*) FROM payments") == "4"); // payments never expire
}
