// Migration 0010 (issue 14): a database holding payments at schema 9 keeps every row, loses only
// the indexes no query needs, and every hot query of the claim, expiry, reconcile, review, inspect
// and intake paths still finds its rows through an index over 200,000 payments.

#include "core/fingerprint.hpp"
#include "core/uuid.hpp"
#include "store/db.hpp"
#include "store/executor_store.hpp"
#include "store/explain.hpp"
#include "store/inspect_store.hpp"
#include "store/migrations.hpp"
#include "store/reconcile_store.hpp"
#include "tests/support/test_db.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <pqxx/pqxx>
#include <set>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// Applies the embedded migrations after `from` up to `to` (as `migrate` would, one transaction).
void migrate_after(const std::string& url, int from, int to) {
    pqxx::connection c(url);
    pqxx::work tx(c);
    for (const store::Migration& m : store::embedded_migrations()) {
        if (m.version > from && m.version <= to) {
            tx.exec0(std::string(m.sql));
            tx.exec_params0(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                m.version, std::string(m.name), sha256_hex(m.sql));
        }
    }
    tx.commit();
}

// The embedded migrations up to `version`, applied and recorded as store::migrate records them.
void migrate_to(const std::string& url, int version) {
    {
        pqxx::connection c(url);
        pqxx::work tx(c);
        tx.exec0(
            "CREATE TABLE schema_migrations (version integer NOT NULL PRIMARY KEY, name text "
            "NOT NULL, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
        tx.commit();
    }
    migrate_after(url, 0, version);
}

// 20 tenants, one principal each, and 200,000 payments in every state as a live deployment holds
// them (mostly settled; 1% pending, 1% retry_scheduled, 0.2% processing, 1% unknown, 0.5% in
// review), with attempts, idempotency records and outbox events for some.
constexpr const char* k_seed = R"sql(
INSERT INTO tenants (tenant_id, name)
SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(i), 12, '0'))::uuid, 'tenant-' || i
  FROM generate_series(1, 20) AS i;
INSERT INTO principals (tenant_id, principal_id, name, role, api_key_hash)
SELECT tenant_id, tenant_id, 'writer', 'writer', sha256(tenant_id::text::bytea) FROM tenants;
INSERT INTO payments (tenant_id, payment_id, merchant_reference, amount_minor, currency, provider,
                      payment_method, operation_id, state, created_by, created_at, updated_at,
                      next_attempt_at, lease_owner, lease_expires_at, provider_reference,
                      review_code, review_reason, first_attempt_at, last_attempt_at, generation,
                      attempt_count)
SELECT t, md5('p' || i)::uuid, 'ref-' || i, 100 + i % 1000, 'EUR',
       CASE WHEN i % 2 = 0 THEN 'stripe' ELSE 'adyen' END, 'pm_card_visa', 'pr_' || md5('o' || i),
       s, t, at, at,
       CASE WHEN s IN ('retry_scheduled', 'unknown') THEN at + interval '1 hour' END,
       CASE WHEN s = 'processing' THEN 'worker-1' END,
       CASE WHEN s = 'processing' THEN now() + interval '1 hour' END,
       CASE WHEN s = 'succeeded' THEN 'ch_' || i END,
       CASE WHEN s = 'needs_review' THEN 'no_lookup' END,
       CASE WHEN s = 'needs_review' THEN 'seeded' END,
       CASE WHEN s <> 'pending' THEN at END, CASE WHEN s <> 'pending' THEN at END,
       CASE WHEN s = 'pending' THEN 0 ELSE 1 END, CASE WHEN s = 'pending' THEN 0 ELSE 1 END
  FROM (SELECT i, ('00000000-0000-4000-8000-' || lpad(to_hex(1 + i % 20), 12, '0'))::uuid AS t,
               now() - (200000 - i) * interval '1 second' AS at,
               CASE WHEN i % 1000 < 10 THEN 'pending' WHEN i % 1000 < 20 THEN 'retry_scheduled'
                    WHEN i % 1000 < 22 THEN 'processing' WHEN i % 1000 < 32 THEN 'unknown'
                    WHEN i % 1000 < 37 THEN 'needs_review' WHEN i % 1000 < 87 THEN 'failed'
                    ELSE 'succeeded' END AS s
          FROM generate_series(1, 200000) AS i) AS g;
INSERT INTO payment_attempts (tenant_id, payment_id, attempt_no, generation, worker, operation_id,
                              started_at, outcome)
SELECT tenant_id, payment_id, 1, 1, 'worker-1', operation_id, created_at, 'succeeded'
  FROM payments WHERE attempt_count = 1 AND payment_id::text < '2';
INSERT INTO idempotency_records (tenant_id, principal_id, operation, idempotency_key, request_hash,
                                 response_status, response_body, resource_type, resource_id,
                                 created_at, expires_at)
SELECT tenant_id, created_by, 'create_payment', 'key-' || merchant_reference,
       sha256(merchant_reference::bytea), 202, '{}', 'payment', payment_id, created_at,
       created_at + interval '7 days'
  FROM payments WHERE payment_id::text < '8';
INSERT INTO outbox (tenant_id, aggregate_type, aggregate_id, event_type, payload)
SELECT tenant_id, 'payment', payment_id, 'payment.created', '{}'::jsonb
  FROM payments WHERE payment_id::text < '4';
)sql";

// Every row of each table, as one digest, and the row counts.
std::map<std::string, std::string> table_digests(const std::string& url) {
    pqxx::connection c(url);
    pqxx::read_transaction tx(c);
    std::map<std::string, std::string> out;
    for (const char* table : {"tenants", "principals", "payments", "payment_attempts",
                              "idempotency_records", "outbox"}) {
        const pqxx::row r =
            tx.exec1(std::string("SELECT count(*)::text || ' ' || md5(string_agg(md5(t::text), '' "
                                 "ORDER BY t::text)) FROM ") +
                     table + " t");
        out[table] = r[0].as<std::string>();
    }
    return out;
}

void exec_on(const std::string& url, const std::string& sql) {
    pqxx::connection c(url);
    pqxx::work tx(c);
    tx.exec0(sql);
    tx.commit();
}

std::string query_on(const std::string& url, const std::string& sql) {
    pqxx::connection c(url);
    pqxx::read_transaction tx(c);
    return tx.exec1(sql)[0].as<std::string>();
}

std::set<std::string> indexes_of(pqxx::transaction_base& tx, const std::string& table) {
    std::set<std::string> out;
    for (const auto& row :
         tx.exec_params("SELECT indexname FROM pg_indexes WHERE tablename = $1", table)) {
        out.insert(row[0].as<std::string>());
    }
    return out;
}

} // namespace

TEST_CASE("migrations: schema 9 to 10 over 200,000 payments keeps every row and drops only the "
          "indexes no query needs",
          "[store][db][migrations][schema]") {
    ScratchDatabase scratch;
    migrate_to(scratch.url(), 9);
    exec_on(scratch.url(), k_seed);
    const auto before = table_digests(scratch.url());
    REQUIRE(before.at("payments").rfind("200000 ", 0) == 0);

    // Migration 10 alone (later ones may add columns, which change every row's text).
    migrate_after(scratch.url(), 9, 10);
    CHECK(table_digests(scratch.url()) == before);
    store::Db db(scratch.url());
    CHECK(store::migrate(db).front() == 11); // the rest, from 10 on

    pqxx::connection c(scratch.url());
    pqxx::work tx(c);
    CHECK(indexes_of(tx, "payments") ==
          std::set<std::string>{"payments_pkey", "payments_tenant_id_merchant_reference_key",
                                "payments_operation_id", "payments_due", "payments_state_created",
                                "payments_statement", "payments_provider_reference",
                                // Schema 26: partial, only authorisations (capture "manual").
                                "payments_open_authorizations"});
    CHECK(indexes_of(tx, "idempotency_records") ==
          std::set<std::string>{"idempotency_records_pkey", "idempotency_records_expires_at"});
    // Schema 16 (events out) gives the outbox back a queue index for the relay's publish step and
    // one for the pull cursor; each says so in its comment.
    CHECK(indexes_of(tx, "outbox") ==
          std::set<std::string>{"outbox_pkey", "outbox_unpublished", "outbox_published"});
    // Every index left on intake's tables says which queries need it.
    CHECK(tx.exec1("SELECT count(*) FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid "
                   "WHERE t.relname IN ('payments', 'idempotency_records', 'outbox') "
                   "AND coalesce(obj_description(i.indexrelid, 'pg_class'), '') = ''")[0]
              .as<int>() == 0);
    // No foreign key from intake's tables to a tenant's or a principal's row (the one to tenants
    // went in schema 10, those to principals in 28: each insert locked the row it named, and
    // concurrent ones a MultiXact each); neither row can be deleted instead.
    CHECK(tx.exec1("SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND conrelid IN "
                   "('payments'::regclass, 'idempotency_records'::regclass, "
                   "'operations'::regclass, 'outbox'::regclass) AND confrelid IN "
                   "('tenants'::regclass, 'principals'::regclass)")[0]
              .as<int>() == 0);
    CHECK(tx.exec1("SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal AND tgrelid IN "
                   "('tenants'::regclass, 'principals'::regclass) AND tgname LIKE "
                   "'%_never_deleted'")[0]
              .as<int>() == 2);
    // The CHECKs rewritten without bounded repetition allow exactly what they did (each probe in a
    // transaction of its own, never committed).
    const auto allowed = [&](const std::string& sql, const std::string& value) {
        pqxx::connection probe(scratch.url());
        pqxx::work w(probe);
        try {
            w.exec_params0(sql, value);
            return true;
        } catch (const pqxx::check_violation&) {
            return false;
        }
    };
    const auto key_allowed = [&](const std::string& key) {
        return allowed("INSERT INTO idempotency_records (tenant_id, principal_id, operation, "
                       "idempotency_key, request_hash, expires_at) SELECT tenant_id, "
                       "principal_id, 'create_payment', $1, sha256('x'), now() + interval '1 day' "
                       "FROM principals LIMIT 1",
                       key);
    };
    CHECK(key_allowed("!"));
    CHECK(key_allowed(std::string(255, '~')));
    CHECK_FALSE(key_allowed(""));
    CHECK_FALSE(key_allowed(std::string(256, 'k')));
    CHECK_FALSE(key_allowed("a b"));
    CHECK_FALSE(key_allowed("caf\xc3\xa9"));
    const auto operation_id_allowed = [&](const std::string& id) {
        return allowed("UPDATE payments SET operation_id = $1 WHERE payment_id = "
                       "(SELECT payment_id FROM payments LIMIT 1)",
                       id);
    };
    CHECK(operation_id_allowed("pr_" + std::string(42, 'f')));
    CHECK_FALSE(operation_id_allowed("pr_" + std::string(43, 'f')));
    CHECK_FALSE(operation_id_allowed("pr 1"));
    // New outbox events get time-ordered IDs from the database.
    const std::string event_id =
        tx.exec1(
              "INSERT INTO outbox (tenant_id, aggregate_type, aggregate_id, event_type, payload) "
              "SELECT tenant_id, 'payment', payment_id, 'payment.test', '{}' FROM payments LIMIT 1 "
              "RETURNING event_id::text")[0]
            .as<std::string>();
    const auto ms = uuid_v7_unix_ms(event_id);
    REQUIRE(ms.has_value());
    CHECK(std::abs(*ms -
                   tx.exec1("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint")[0]
                       .as<long long>()) < 60'000);
    tx.commit();
    exec_on(scratch.url(), "ANALYZE");

    // Each hot query that reads payments by state, ID or key finds them through an index. The store
    // functions prepare their statements on `reader` (and change nothing here: no provider is
    // named 'nobody', no lease has expired); EXPLAIN EXECUTE shows the plan for real values.
    using namespace std::chrono_literals;
    store::Db reader(scratch.url());
    CHECK(store::claim_payments(reader, "schema-test", 1000ms, 1, {"nobody"}).empty());
    CHECK(store::expire_leases(reader, "schema-test") == 0);
    CHECK(store::claim_unknown(reader, 60s, 10, {{"nobody", 0s}}, std::chrono::system_clock::now())
              .empty());
    store::peek_unknown(reader, 10, {{"stripe", 60s}});
    store::open_queue_counts(reader, 3600s);
    CHECK(store::rejected_payments(reader, "nobody").empty());
    CHECK(store::review_items(reader, "nobody", "lookup_failing", std::nullopt, 10).items.empty());
    CHECK_FALSE(
        store::resolve_payment_ref(reader, "00000000-0000-7000-8000-000000000000").has_value());
    store::PaymentFilter review;
    review.state = PaymentState::needs_review;
    review.order = store::PaymentOrder::updated_at;
    CHECK(store::list_payments(reader, review).rows.size() == 100);
    store::PaymentFilter unknown;
    unknown.state = PaymentState::unknown;
    CHECK(store::list_payments(reader, unknown).rows.size() == 100);

    const std::string a_payment = query_on(scratch.url(), "SELECT md5('p7')::uuid::text");
    const std::string an_operation = query_on(scratch.url(), "SELECT 'pr_' || md5('o7')");
    const std::string due = std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count());
    struct Case {
        const char* statement;
        std::vector<std::optional<std::string>> params;
        const char* index;
    };
    const std::vector<Case> cases = {
        {"executor_claim", {"schema-test", "20000", "1", "{stripe}"}, "payments_due"},
        {"executor_expire", {"schema-test"}, "payments_state_created"},
        {"reconcile_claim",
         {"{stripe,adyen}", "{60,60}", "100", "300", due, "{60,0}"},
         "payments_state_created"},
        {"reconcile_peek",
         {"{stripe,adyen}", "{60,60}", "100", "{60,0}"},
         "payments_state_created"},
        {"reconcile_queue_counts", {"3600"}, "payments_state_created"},
        {"review_rejected_payments", {"stripe", std::nullopt}, "payments_state_created"},
        {"review_items",
         {"stripe", "lookup_failing", std::nullopt, "101"},
         "payments_state_created"},
        {"inspect_ref_by_payment_id", {a_payment}, "payments_pkey"},
        {"inspect_ref_by_operation_id", {an_operation}, "payments_operation_id"},
        {"inspect_list_by_created",
         {"unknown", std::nullopt, std::nullopt, std::nullopt, "101"},
         "payments_state_created"},
        {"inspect_list_by_updated",
         {"needs_review", std::nullopt, std::nullopt, std::nullopt, "101"},
         "payments_state_created"},
    };
    for (const Case& k : cases) {
        const std::string plan = store::explain_prepared(reader, k.statement, k.params);
        INFO(k.statement << ":\n" << plan);
        CHECK(plan.find("Seq Scan on payments") == std::string::npos);
        CHECK(plan.find(k.index) != std::string::npos);
    }
}

TEST_CASE("migrations: schema 14 keeps every single-column rule of the payment tables, as "
          "domains, and every row",
          "[store][db][migrations]") {
    // Table CHECKs are read from their text and compiled on every write; domains once per
    // connection (migration 0014). The rules must be exactly as strict as before.
    ScratchDatabase scratch;
    std::string seed = k_seed;
    for (std::size_t at = seed.find("200000"); at != std::string::npos;
         at = seed.find("200000", at)) {
        seed.replace(at, 6, "2000");
    }
    migrate_to(scratch.url(), 9);
    exec_on(scratch.url(), seed);
    migrate_after(scratch.url(), 9, 13);
    const auto before = table_digests(scratch.url());
    migrate_after(scratch.url(), 13, 14);
    CHECK(table_digests(scratch.url()) == before);

    const auto checks_on = [&](const std::string& table) {
        return std::stoi(query_on(scratch.url(), "SELECT count(*) FROM pg_constraint WHERE "
                                                 "contype = 'c' AND conrelid = '" +
                                                     table + "'::regclass"));
    };
    CHECK(checks_on("payments") == 2); // processing <=> leased; a review code only in review
    CHECK(checks_on("idempotency_records") == 2); // status and body together; expiry after creation
    CHECK(checks_on("payment_attempts") == 0);

    // Each probe in a transaction of its own, never committed: true if the row was accepted.
    const auto accepted = [&](const std::string& sql) {
        pqxx::connection probe(scratch.url());
        pqxx::work w(probe);
        try {
            w.exec0(sql);
            return true;
        } catch (const pqxx::check_violation&) {
            return false;
        }
    };
    const std::string payment = " WHERE payment_id = (SELECT payment_id FROM payments "
                                "WHERE state = 'succeeded' ORDER BY payment_id LIMIT 1)";
    const auto payment_ok = [&](const std::string& set) {
        return accepted("UPDATE payments SET " + set + payment);
    };
    CHECK(payment_ok("state = 'failed'"));
    CHECK_FALSE(payment_ok("state = 'settled'"));
    CHECK(payment_ok("state = 'needs_review', review_code = 'no_lookup'"));
    CHECK_FALSE(payment_ok("state = 'needs_review', review_code = 'bogus'"));
    CHECK_FALSE(payment_ok("review_code = 'no_lookup'")); // a table CHECK still
    CHECK_FALSE(payment_ok("state = 'processing'"));      // without a lease: a table CHECK still
    CHECK(payment_ok("amount_minor = 1"));
    CHECK_FALSE(payment_ok("amount_minor = 0"));
    CHECK(payment_ok("charged_amount_minor = 0"));
    CHECK_FALSE(payment_ok("charged_amount_minor = -1"));
    CHECK(payment_ok("currency = 'ISK'"));
    CHECK_FALSE(payment_ok("currency = 'isk'"));
    CHECK_FALSE(payment_ok("currency = 'EURO'"));
    CHECK(payment_ok("merchant_reference = '" + std::string(255, 'r') + "'"));
    CHECK_FALSE(payment_ok("merchant_reference = ''"));
    CHECK_FALSE(payment_ok("merchant_reference = '" + std::string(256, 'r') + "'"));
    CHECK(payment_ok("provider = 'checkout_com-2'"));
    CHECK_FALSE(payment_ok("provider = 'Stripe'"));
    CHECK_FALSE(payment_ok("provider = '" + std::string(33, 'p') + "'"));
    CHECK(payment_ok("operation_id = 'pr_" + std::string(42, 'f') + "'"));
    CHECK_FALSE(payment_ok("operation_id = 'pr_" + std::string(43, 'f') + "'"));
    CHECK_FALSE(payment_ok("operation_id = 'pr 1'"));
    CHECK(payment_ok("idempotency_key_hash = sha256('k')"));
    CHECK_FALSE(payment_ok("idempotency_key_hash = '\\x00'::bytea"));

    const auto record_ok = [&](const std::string& set) {
        return accepted("UPDATE idempotency_records SET " + set +
                        " WHERE idempotency_key = (SELECT min(idempotency_key) FROM "
                        "idempotency_records)");
    };
    CHECK(record_ok("response_status = 409"));
    CHECK_FALSE(record_ok("response_status = 99"));
    CHECK_FALSE(record_ok("response_status = 600"));
    CHECK(record_ok("response_body = repeat('b', 65536)"));
    CHECK_FALSE(record_ok("response_body = repeat('b', 65537)"));
    CHECK_FALSE(record_ok("response_body = NULL")); // without its status: a table CHECK still
    CHECK_FALSE(record_ok("request_hash = '\\x00'::bytea"));
    CHECK(record_ok("operation = 'create_payment'"));
    CHECK_FALSE(record_ok("operation = 'Create'"));
    CHECK_FALSE(record_ok("idempotency_key = 'a b'"));
    CHECK_FALSE(record_ok("idempotency_key = ''"));

    const auto attempt_ok = [&](const std::string& set) {
        return accepted("UPDATE payment_attempts SET " + set +
                        " WHERE payment_id = (SELECT payment_id FROM payment_attempts ORDER BY "
                        "payment_id LIMIT 1)");
    };
    CHECK(attempt_ok("outcome = 'rejected'"));
    CHECK_FALSE(attempt_ok("outcome = 'bogus'"));
    CHECK(attempt_ok("detail = repeat('d', 4096)"));
    CHECK_FALSE(attempt_ok("detail = repeat('d', 4097)"));
    CHECK_FALSE(attempt_ok("attempt_no = 0"));
}
