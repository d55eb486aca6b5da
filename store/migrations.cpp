#include "store/migrations.hpp"

#include "core/fingerprint.hpp"
#include "store/pq.hpp"

#include <string>

namespace payrecon::store {
namespace {

// pg_advisory_xact_lock key: "payrecon" folded into 63 bits, fixed forever.
constexpr long long k_migration_lock = 0x7061797265636f6eLL;

constexpr const char* k_create_table = R"sql(
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer     NOT NULL PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
))sql";

int version_in(pqxx::transaction_base& tx) {
    const pqxx::row exists = tx.exec1("SELECT to_regclass('schema_migrations') IS NOT NULL");
    if (!exists[0].as<bool>()) {
        return 0;
    }
    return tx.exec1("SELECT coalesce(max(version), 0) FROM schema_migrations")[0].as<int>();
}

SchemaMismatch newer_schema(int found) {
    return SchemaMismatch("the database schema is version " + std::to_string(found) +
                              ", newer than this payrecon knows (" +
                              std::to_string(latest_known_version()) + ")",
                          "run a payrecon release that knows schema version " +
                              std::to_string(found) + "; this binary will not touch it");
}

} // namespace

int latest_known_version() {
    const auto& all = embedded_migrations();
    return all.empty() ? 0 : all.back().version;
}

int schema_version(Db& db) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        return version_in(tx);
    });
}

std::vector<int> migrate(Db& db) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::work tx(impl.connection());
        tx.exec_params("SELECT pg_advisory_xact_lock($1)", k_migration_lock);
        tx.exec0(k_create_table);
        const int current = version_in(tx);
        if (current > latest_known_version()) {
            throw newer_schema(current);
        }
        std::vector<int> applied;
        for (const Migration& m : embedded_migrations()) {
            const std::string checksum = sha256_hex(m.sql);
            if (m.version <= current) {
                const pqxx::result r = tx.exec_params(
                    "SELECT checksum FROM schema_migrations WHERE version = $1", m.version);
                if (!r.empty() && r[0][0].as<std::string>() != checksum) {
                    throw SchemaMismatch(
                        "migration " + std::to_string(m.version) + " (" + std::string(m.name) +
                            ") applied to this database differs from the one in this binary",
                        "a released migration must never be edited; add a new migration instead");
                }
                continue;
            }
            tx.exec0(std::string(m.sql));
            tx.exec_params0("INSERT INTO schema_migrations (version, name, checksum) "
                            "VALUES ($1, $2, $3)",
                            m.version, std::string(m.name), checksum);
            applied.push_back(m.version);
        }
        tx.commit();
        return applied;
    });
}

void require_current_schema(Db& db) {
    const int found = schema_version(db);
    if (found > latest_known_version()) {
        throw newer_schema(found);
    }
    if (found < latest_known_version()) {
        throw SchemaMismatch("the database schema is version " + std::to_string(found) +
                                 "; this payrecon needs version " +
                                 std::to_string(latest_known_version()),
                             "run `payrecon db migrate` (safe to run at any time)");
    }
}

} // namespace payrecon::store
