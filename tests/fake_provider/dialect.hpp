#pragma once
// What every dialect of the fake provider is to the server: the paths it serves, how it answers
// them, and what it adds to the ledger and forgets on reset. The server routes each main-port
// request to the dialect that serves it (dialects.hpp lists them) and knows no dialect by name
// beyond that, so that adding a provider's dialect is its own file and one line in dialects.cpp.

#include "core/secret.hpp"
#include "tests/fake_provider/http.hpp"
#include "tests/fake_provider/ledger.hpp"

#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

namespace payrecon::fake {

// The account every dialect serves: one API key (Stripe's, Checkout.com's and Square's bearer key,
// Adyen's X-API-Key) and the switches the command line sets for every dialect at once. A dialect's
// own settings are in its own options (StripeOptions, CheckoutOptions, ...).
struct Account {
    Secret api_key; // the only accepted key; empty: every request is refused
    bool idempotency =
        true;           // false: every dialect ignores its idempotency key, every POST executes
    bool lookup = true; // false: every dialect's lookup answers as the provider without one
};

class Dialect {
public:
    virtual ~Dialect() = default;

    // True for the requests this dialect answers. The dialects' sets are disjoint, so the order in
    // which the server asks them does not matter.
    virtual bool serves(const http::Request& request) const = 0;

    // Serves one request on the main port. Never throws for anything the client sent. `wait` is
    // the request's latency point (the gate, then the configured latency).
    virtual Reply handle(const http::Request& request, const Wait& wait) = 0;

    // Adds this dialect's counts and payments to the ledger JSON. Under the ledger's lock.
    virtual void write_ledger_locked(nlohmann::ordered_json& j, LedgerOptions options) const = 0;

    // Forgets every payment and key this dialect holds. Under the ledger's lock (the ledger resets
    // its own counts, faults and clock).
    virtual void reset_locked() = 0;

protected:
    Dialect() = default;
    Dialect(const Dialect&) = delete;
    Dialect& operator=(const Dialect&) = delete;
};

using Dialects = std::vector<std::unique_ptr<Dialect>>;

// The one dialect of type T in `dialects`: how the server reaches the dialects it has more to do
// with than routing (Stripe's seeds, PayPal's token expiry), and a dialect the one it reuses.
// Throws std::logic_error if `dialects` has none.
template <class T>
T& dialect_of(const Dialects& dialects) {
    for (const auto& d : dialects) {
        if (auto* found = dynamic_cast<T*>(d.get())) {
            return *found;
        }
    }
    throw std::logic_error("the fake provider has no such dialect");
}

} // namespace payrecon::fake
