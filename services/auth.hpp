#pragma once
// Authentication: an API key to its principal, by digest. Checked on every request, replays
// included.

#include "core/principal.hpp"

#include <tl/expected.hpp>

namespace payrecon {

namespace store {
class Db;
}

enum class AuthFailure {
    missing, // no credential given: 401
    unknown, // no principal has this key: 401
    revoked, // the principal was revoked: 403
};

// Throws DatabaseUnavailable (a TransientStoreError) if the database cannot be asked.
tl::expected<Principal, AuthFailure> authenticate(store::Db& db, const Secret& api_key);

} // namespace payrecon
