#pragma once
// The nightly's watch over authorisations (issue 32, DESIGN section 16): a payment made with
// capture "manual" holds the customer's money only until its authorisation lapses by the
// provider's rules (authorization_expires_at: the earliest it may). What was not captured by then
// is lost to the merchant; an operator wants to hear of it before, and for certain after.

#include <chrono>
#include <string>
#include <vector>

namespace payrecon::store {

class Db;

// An authorisation the watch found: the payment, what it authorised and what its captures hold.
struct WatchedAuthorization {
    std::string tenant_id;
    std::string payment_id;
    std::string merchant_reference;
    std::string provider;
    long long amount_minor = 0;       // authorised
    long long capture_held_minor = 0; // captured, or being captured
    long long captured_minor = 0;     // captured (succeeded)
    std::string currency;
    std::string expires_at; // ISO 8601 UTC
    bool told = false;      // its event went out in this run (expiring: the first time seen)
};

struct AuthorizationWatch {
    // Lapsed in this run: marked expired (authorization_expired_at), with the event
    // payment.authorization_expired and an audit row. Nothing may be captured of them from now.
    std::vector<WatchedAuthorization> expired;
    // Expiring within the horizon with something left to capture, soonest first; the event
    // payment.authorization_expiring goes out once per authorisation (`told`).
    std::vector<WatchedAuthorization> expiring;
};

// In one transaction, for the payments of `providers`: every open authorisation (manual, charged
// `succeeded`, neither voided, being voided nor finally captured, with something left to capture)
// whose expiry has come is marked expired; those that expire within `horizon` are listed. `actor`
// goes in the audit rows. Throws DatabaseUnavailable.
AuthorizationWatch watch_authorizations(Db& db, const std::vector<std::string>& providers,
                                        std::chrono::seconds horizon, const std::string& actor);

} // namespace payrecon::store
