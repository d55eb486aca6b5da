#pragma once
// Store-internal: what the payment's and the refund's intake transactions share about a key's
// record (store/intake_store.cpp defines them). Included only by store/*.cpp.

#include "store/intake_store.hpp"
#include "store/pq.hpp"

#include <optional>
#include <stdexcept>
#include <string>

namespace payrecon::store {

// The key's record as `tx` sees it now (a statement of its own: under READ COMMITTED it sees a
// record committed after the claim that conflicted with it), with its principal's revocation;
// nullopt if there is none (purged in between).
std::optional<IntakeWrite> read_intake_record(Db::Impl& impl, pqxx::transaction_base& tx,
                                              const IntakeClaim& claim);

// Throws std::length_error if `body` exceeds k_max_stored_response (nothing is stored then).
inline void check_stored_size(const std::string& body) {
    if (body.size() > k_max_stored_response) {
        throw std::length_error("a response to store exceeds 64 KiB");
    }
}

// Stores `body` with 409 under the key `tx` claimed (a merchant reference taken).
void store_intake_conflict(Db::Impl& impl, pqxx::transaction_base& tx, const IntakeClaim& claim,
                           const std::string& body);

} // namespace payrecon::store
