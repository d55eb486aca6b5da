#include "core/intake.hpp"
#include "core/store/intake_store.hpp"
#include "tests/support/test_db.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;
using namespace payrecon::testing;

TEST_CASE("purge: expired records of finished payments go, unfinished ones stay", "[store][db][purge]") {
    auto db = connect();
    const auto tenant = make_tenant(*db);
    const auto writer = make_principal(*db, tenant);
    IntakeService intake(*db, test_keys());
    for (const char* key : {"k-done", "k-open", "k-fresh"}) {
        REQUIRE(intake.create_payment(writer.principal, key, payment_body(std::string("ref-") + key), "")
                    .status == 202);
    }
    REQUIRE(intake.create_payment(writer.principal, "k-dup", payment_body("ref-k-done"), "").status == 409);
    // Expire all but k-fresh; finish the payment of k-done (as a worker would).
    exec_sql("UPDATE idempotency_records SET created_at = now() - interval '9 days', "
             "expires_at = now() - interval '1 day' WHERE tenant_id = '" + tenant.tenant_id +
             "' AND idempotency_key <> 'k-fresh'");
    exec_sql("UPDATE payments SET state = 'succeeded' WHERE tenant_id = '" + tenant.tenant_id +
             "' AND merchant_reference = 'ref-k-done'");

    const auto dry = store::purge_idempotency_records(*db, std::nullopt, true);
    CHECK(dry.deleted >= 2);
    CHECK(count_rows("idempotency_records", tenant.tenant_id) == 4);

    const auto result = store::purge_idempotency_records(*db, std::nullopt, false, 1);
    CHECK(result.deleted >= 2); // k-done and k-dup (other tests' rows may expire too)
    CHECK(result.kept_unfinished >= 1);
    CHECK(count_rows("idempotency_records", tenant.tenant_id) == 2);
    CHECK(count_rows("idempotency_records", tenant.tenant_id, "idempotency_key = 'k-open'") == 1);
    CHECK(count_rows("idempotency_records", tenant.tenant_id, "idempotency_key = 'k-fresh'") == 1);
    // Business identity never expires.
    CHECK(count_rows("payments", tenant.tenant_id) == 3);
}

TEST_CASE("purge: an explicit retention deletes by age, still never an unfinished payment's record",
          "[store][db][purge]") {
    auto db = connect();
    const auto tenant = make_tenant(*db);
    const auto writer = make_principal(*db, tenant);
    IntakeService intake(*db, test_keys());
    REQUIRE(intake.create_payment(writer.principal, "k-old", payment_body("ref-old"), "").status == 202);
    REQUIRE(intake.create_payment(writer.principal, "k-old-open", payment_body("ref-old-open"), "").status == 202);
    exec_sql("UPDATE idempotency_records SET created_at = now() - interval '3 days' WHERE tenant_id = '" +
             tenant.tenant_id + "'");
    exec_sql("UPDATE payments SET state = 'failed' WHERE tenant_id = '" + tenant.tenant_id +
             "' AND merchant_reference = 'ref-old'");
    store::purge_idempotency_records(*db, std::chrono::hours(48), false);
    CHECK(count_rows("idempotency_records", tenant.tenant_id) == 1);
    CHECK(count_rows("idempotency_records", tenant.tenant_id, "idempotency_key = 'k-old-open'") == 1);
}
