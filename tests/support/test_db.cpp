#include "tests/support/test_db.hpp"

#include "store/admin_store.hpp"
#include "store/migrations.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <mutex>
#include <pqxx/pqxx>
#include <regex>

namespace payrecon::testing {

const std::string& database_url() {
    static std::once_flag once;
    static std::string url;
    std::call_once(once, [] {
        const char* env = std::getenv("PAYRECON_TEST_DATABASE_URL");
        if (env != nullptr) {
            url = env;
            store::Db db(url);
            store::migrate(db);
            install_lease_guard(url);
        }
    });
    if (url.empty()) {
        FAIL("PAYRECON_TEST_DATABASE_URL is not set: run the tests with scripts/test, which starts "
             "a throwaway PostgreSQL");
    }
    return url;
}

// DESIGN section 6's invariant, as a guard every test database carries: a row of `payments` or
// `operations` that is `processing` under a lease that has not ended (by the database's clock,
// read when the row is changed: a writer that saw the lease ended saw it by an earlier reading)
// may be changed only by its lease holder -- renewed (the lease's end), or settled (state, with
// the lease cleared, at the same generation). Any other change of its generation, a new lease
// owner, or its deletion raises, so whatever test drives a writer that breaks the invariant fails.
// Test-only: the schema never depends on it (issue 37 keeps triggers out of tenant tables).
// Installed after migrating, in one transaction, replacing an earlier version of it.
namespace {

// The guard trigger's function body (plpgsql), compared with the installed one's.
const char* const k_lease_guard_body = R"sql(
BEGIN
    IF OLD.state = 'processing' AND OLD.lease_expires_at > clock_timestamp() AND (
           TG_OP = 'DELETE'
        OR NEW.generation <> OLD.generation
        OR (NEW.lease_owner IS NOT NULL AND NEW.lease_owner IS DISTINCT FROM OLD.lease_owner)
        OR (NEW.state <> 'processing' AND NEW.lease_owner IS NOT NULL)) THEN
        RAISE EXCEPTION USING ERRCODE = 'PRL01',
            MESSAGE = format('lease invariant broken (DESIGN section 6): %s of a processing %s '
                             'row at generation %s, leased to %s until %s, before its lease ended',
                             TG_OP, TG_TABLE_NAME, OLD.generation, OLD.lease_owner,
                             OLD.lease_expires_at),
            DETAIL = CASE WHEN TG_OP = 'DELETE' THEN 'deleted'
                          ELSE format('to generation %s, lease owner %s, state %s',
                                      NEW.generation, NEW.lease_owner, NEW.state) END;
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END )sql";

} // namespace

void install_lease_guard(const std::string& url) {
    pqxx::connection c(url);
    pqxx::work tx(c);
    // One installer at a time: test processes start together on the shared database. Where the
    // guard is in place already (every process after the first), nothing is changed: a trigger
    // made or dropped takes locks on the tables that other processes' tests are writing.
    tx.exec("SELECT pg_advisory_xact_lock(hashtext('payrecon_test_lease_guard'))");
    const bool current =
        tx.exec_params1(
              "SELECT coalesce((SELECT prosrc = $1 FROM pg_proc WHERE proname = "
              "'payrecon_test_lease_guard'), false) AND (SELECT count(*) FROM pg_trigger WHERE "
              "tgname = 'payrecon_test_lease_guard' AND tgrelid IN ('payments'::regclass, "
              "'operations'::regclass)) = 2",
              std::string(k_lease_guard_body))[0]
            .as<bool>();
    if (current) {
        return;
    }
    tx.exec0("SET LOCAL lock_timeout = '30s'");
    // Both tables locked at once, before the function or a trigger changes.
    tx.exec0("LOCK TABLE payments, operations IN SHARE ROW EXCLUSIVE MODE");
    tx.exec0(std::string("CREATE OR REPLACE FUNCTION payrecon_test_lease_guard() RETURNS trigger "
                         "LANGUAGE plpgsql AS $guard$") +
             k_lease_guard_body + "$guard$");
    for (const char* table : {"payments", "operations"}) {
        const std::string t = table;
        tx.exec0("DROP TRIGGER IF EXISTS payrecon_test_lease_guard ON " + t);
        tx.exec0("CREATE TRIGGER payrecon_test_lease_guard BEFORE UPDATE OR DELETE ON " + t +
                 " FOR EACH ROW EXECUTE FUNCTION payrecon_test_lease_guard()");
    }
    tx.commit();
}

std::unique_ptr<store::Db> connect() {
    return std::make_unique<store::Db>(database_url());
}

// Never a long run of digits: intake refuses a body holding anything that looks like a card
// number, and 16 random hex characters are all digits and pass Luhn about once in 18,000 names.
std::string unique_name(const std::string& prefix) {
    const std::string hex = to_hex(random_bytes(8));
    std::string name = prefix + "-";
    for (std::size_t i = 0; i < hex.size(); ++i) {
        name += (i > 0 && i % 4 == 0 ? "g" : "") + std::string(1, hex[i]);
    }
    return name;
}

TestTenant make_tenant(store::Db& db, const std::string& prefix) {
    const auto t = store::create_tenant(db, unique_name(prefix), "test");
    REQUIRE(t);
    return TestTenant{t->tenant_id, t->name};
}

TestPrincipal make_principal(store::Db& db, const TestTenant& tenant, Role role,
                             const std::string& name) {
    TestPrincipal out;
    out.api_key = generate_api_key();
    const auto p =
        store::create_principal(db, tenant.tenant_id, name.empty() ? unique_name("p") : name, role,
                                api_key_digest(out.api_key), "test");
    REQUIRE(p);
    out.principal = Principal{p->tenant_id, p->principal_id, p->name, p->role};
    return out;
}

Secret test_secret(char fill) {
    return Secret(std::string(40, fill));
}

const FingerprintKeys& test_keys() {
    static const FingerprintKeys keys(test_secret('k'));
    return keys;
}

long long count_rows(const std::string& table, const std::string& tenant_id,
                     const std::string& where, const std::string& url) {
    pqxx::connection c(url);
    pqxx::read_transaction tx(c);
    return tx
        .exec_params1("SELECT count(*) FROM " + table + " WHERE tenant_id = $1::uuid" +
                          (where.empty() ? "" : " AND (" + where + ")"),
                      tenant_id)[0]
        .as<long long>();
}

std::string query_value(const std::string& sql, const std::string& param) {
    pqxx::connection c(database_url());
    pqxx::read_transaction tx(c);
    const pqxx::result r = tx.exec_params(sql, param);
    if (r.empty() || r[0][0].is_null()) {
        return "";
    }
    return r[0][0].as<std::string>();
}

void exec_sql(const std::string& sql, const std::string& url) {
    pqxx::connection c(url);
    pqxx::work tx(c);
    tx.exec(sql);
    tx.commit();
}

ScratchDatabase::ScratchDatabase() : m_name("payrecon_scratch_" + to_hex(random_bytes(6))) {
    const std::string& base = database_url();
    static const std::regex k_path(R"(^(postgres(ql)?://[^/]*/)([^?]*)(.*)$)");
    std::smatch m;
    if (!std::regex_match(base, m, k_path)) {
        FAIL("scratch databases need a URL of the form postgresql://host/dbname?...");
    }
    m_url = m[1].str() + m_name + m[4].str();
    pqxx::connection c(base);
    pqxx::nontransaction tx(c);
    tx.exec("CREATE DATABASE " + m_name);
}

ScratchDatabase::~ScratchDatabase() {
    try {
        pqxx::connection c(database_url());
        pqxx::nontransaction tx(c);
        tx.exec("DROP DATABASE IF EXISTS " + m_name + " WITH (FORCE)");
    } catch (...) {
    }
}

std::string payment_body(const std::string& merchant_reference, long long amount,
                         const std::string& currency) {
    return R"({"amount": )" + std::to_string(amount) + R"(, "currency": ")" + currency +
           R"(", "merchant_reference": ")" + merchant_reference +
           R"(", "provider": "stripe", "payment_method": "pm_card_visa", "customer": "cus_123",)" +
           R"( "description": "Order )" + merchant_reference + R"(", "metadata": {"order": ")" +
           merchant_reference + R"("}})";
}

} // namespace payrecon::testing
