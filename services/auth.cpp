#include "services/auth.hpp"

#include "store/admin_store.hpp"

namespace payrecon {

tl::expected<Principal, AuthFailure> authenticate(store::Db& db, const Secret& api_key) {
    if (api_key.empty()) {
        return tl::unexpected(AuthFailure::missing);
    }
    const auto record = store::find_principal_by_key_digest(db, api_key_digest(api_key));
    if (!record) {
        return tl::unexpected(AuthFailure::unknown);
    }
    if (record->revoked_at) {
        return tl::unexpected(AuthFailure::revoked);
    }
    return Principal{record->tenant_id, record->principal_id, record->name, record->role};
}

} // namespace payrecon
