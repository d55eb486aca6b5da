#include "store/explain.hpp"

#include "store/pq.hpp"

#include <stdexcept>

namespace payrecon::store {

std::string explain_prepared(Db& db, const std::string& statement,
                             const std::vector<std::optional<std::string>>& params) {
    Db::Impl& impl = db.impl();
    if (impl.prepared.count(statement) == 0) {
        throw std::invalid_argument("explain_prepared: '" + statement +
                                    "' is not prepared on this connection; run the store function "
                                    "that prepares it first");
    }
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        std::string sql = "EXPLAIN (COSTS OFF) EXECUTE " + tx.quote_name(statement);
        for (std::size_t i = 0; i < params.size(); ++i) {
            sql += (i == 0 ? "(" : ", ") + (params[i] ? tx.quote(*params[i]) : std::string("NULL"));
        }
        sql += params.empty() ? "" : ")";
        std::string plan;
        for (const auto& row : tx.exec(sql)) {
            plan += row[0].as<std::string>() + "\n";
        }
        return plan;
    });
}

} // namespace payrecon::store
