#pragma once
// Test support over the real PostgreSQL that scripts/test starts (PAYRECON_TEST_DATABASE_URL).
// Every test works in tenants of its own, so tests run in parallel on one database; counts are
// always taken per tenant.

#include "core/fingerprint.hpp"
#include "core/principal.hpp"
#include "store/db.hpp"

#include <memory>
#include <string>

namespace payrecon::testing {

// PAYRECON_TEST_DATABASE_URL; fails the test (never skips it) if unset. The schema is migrated
// once per process.
const std::string& database_url();

std::unique_ptr<store::Db> connect();

// Installs DESIGN section 6's lease invariant as a test-only guard trigger on `payments` and
// `operations` of the database at `url` (migrated): any change of a processing row under a live
// lease other than its holder's renewal or settlement raises SQLSTATE PRL01. Every database the
// tests migrate carries it.
void install_lease_guard(const std::string& url);

// A unique name with the given prefix: "prefix-<16 hex>".
std::string unique_name(const std::string& prefix);

struct TestTenant {
    std::string tenant_id;
    std::string name;
};

TestTenant make_tenant(store::Db& db, const std::string& prefix = "t");

struct TestPrincipal {
    Principal principal;
    Secret api_key;
};

TestPrincipal make_principal(store::Db& db, const TestTenant& tenant, Role role = Role::writer,
                             const std::string& name = "");

// Fixed secrets, so fingerprints are comparable across processes of a test.
const FingerprintKeys& test_keys();
Secret test_secret(char fill);

// One row count by SQL: `SELECT count(*) FROM <table> WHERE tenant_id = $1` (and `where` if given),
// in the shared test database unless `url` names another (a ScratchDatabase's).
long long count_rows(const std::string& table, const std::string& tenant_id,
                     const std::string& where = "", const std::string& url = database_url());

// The first column of the first row of `sql` with $1 = `param`, as text ("" for NULL / no row).
std::string query_value(const std::string& sql, const std::string& param);

// Runs `sql` (no parameters) on a fresh connection; for setting up states the test needs.
void exec_sql(const std::string& sql, const std::string& url = database_url());

// A database of its own (CREATE DATABASE), dropped on destruction; for schema tests.
class ScratchDatabase {
public:
    ScratchDatabase();
    ~ScratchDatabase();
    ScratchDatabase(const ScratchDatabase&) = delete;
    ScratchDatabase& operator=(const ScratchDatabase&) = delete;
    const std::string& url() const { return m_url; }
    const std::string& name() const { return m_name; }

private:
    std::string m_name;
    std::string m_url;
};

// A sample valid create-payment body with the given merchant reference and amount.
std::string payment_body(const std::string& merchant_reference, long long amount = 1250,
                         const std::string& currency = "EUR");

} // namespace payrecon::testing
