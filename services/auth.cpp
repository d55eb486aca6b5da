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

tl::expected<Principal, AuthFailure> CredentialCache::authenticate(store::Db& db,
                                                                   const Secret& api_key) {
    if (api_key.empty()) {
        return tl::unexpected(AuthFailure::missing);
    }
    const std::string digest = api_key_digest(api_key);
    {
        std::lock_guard lock(m_mutex);
        const auto it = m_entries.find(digest);
        if (it != m_entries.end()) {
            if (Clock::now() < it->second.expires) {
                return it->second.principal;
            }
            m_entries.erase(it);
        }
    }
    auto principal = payrecon::authenticate(db, api_key);
    if (principal) {
        std::lock_guard lock(m_mutex);
        if (m_entries.size() >= m_capacity) {
            m_entries.clear();
        }
        m_entries.insert_or_assign(digest, Entry{*principal, Clock::now() + m_ttl});
    }
    return principal;
}

} // namespace payrecon
