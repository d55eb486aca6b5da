#pragma once
// Authentication: an API key to its principal, by digest. Checked on every request, replays
// included.

#include "core/principal.hpp"

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <tl/expected.hpp>
#include <unordered_map>

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

// Principals found by their key's digest, kept for `ttl`, for a route whose own statement checks
// the principal's revocation as it writes (the create statement, store/intake_store.cpp): a
// revoked key is refused there at once, cache or not. A principal's tenant and role never change.
// Only keys that authenticated are kept (a client trying keys cannot fill it); at `capacity`
// entries it starts afresh. Thread-safe.
class CredentialCache {
public:
    explicit CredentialCache(std::chrono::seconds ttl = std::chrono::seconds(60),
                             std::size_t capacity = 10000)
        : m_ttl(ttl), m_capacity(capacity) {}

    // The principal of `api_key`: from the cache, or authenticated and then kept.
    tl::expected<Principal, AuthFailure> authenticate(store::Db& db, const Secret& api_key);

private:
    using Clock = std::chrono::steady_clock;
    struct Entry {
        Principal principal;
        Clock::time_point expires;
    };
    std::chrono::seconds m_ttl;
    std::size_t m_capacity;
    std::mutex m_mutex;
    std::unordered_map<std::string, Entry> m_entries; // by key digest
};

} // namespace payrecon
