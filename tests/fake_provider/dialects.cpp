#include "tests/fake_provider/dialects.hpp"

#include "tests/fake_provider/adyen.hpp"
#include "tests/fake_provider/checkout.hpp"
#include "tests/fake_provider/fake_provider.hpp"
#include "tests/fake_provider/paypal.hpp"
#include "tests/fake_provider/square.hpp"
#include "tests/fake_provider/stripe.hpp"

namespace payrecon::fake {

// The list: one line per dialect. The order is the ledger JSON's, not the routing's (the dialects
// serve disjoint requests); a dialect that reuses another comes after it.
Dialects make_dialects(Ledger& ledger, const FakeProviderOptions& options) {
    const Account& account = options.account;
    Dialects d;
    // One line per dialect, whatever clang-format would make of them.
    // clang-format off
    d.push_back(std::make_unique<StripeApi>(ledger, account, options.stripe));
    d.push_back(std::make_unique<AdyenApi>(dialect_of<StripeApi>(d)));
    d.push_back(std::make_unique<CheckoutApi>(ledger, account, options.checkout));
    d.push_back(std::make_unique<PayPalApi>(ledger, account, options.paypal));
    d.push_back(std::make_unique<SquareApi>(ledger, account, options.square));
    // clang-format on
    return d;
}

} // namespace payrecon::fake
