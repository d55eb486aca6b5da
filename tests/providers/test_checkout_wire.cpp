// Checkout.com's wire format (providers/checkout/wire.hpp), pure functions: amounts in
// Checkout.com's own exponents (ISK whole, CLP in hundredths, KWD/BHD thousandths ending in 0, nine
// digits at most) and the status table. The adapter's requests and answers are in
// test_checkout_adapter.cpp.
#include "providers/checkout/wire.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;
using namespace payrecon::providers;

TEST_CASE("checkout wire: amounts in Checkout.com's exponents, nine digits at most",
          "[providers][checkout]") {
    using checkout::from_checkout_amount;
    using checkout::to_checkout_amount;
    CHECK(to_checkout_amount(Money{4999, "EUR"}) == 4999);
    CHECK(to_checkout_amount(Money{100, "JPY"}) == 100);
    CHECK(to_checkout_amount(Money{1500, "ISK"}) == 1500);   // full amount, as ISO (Stripe: x100)
    CHECK(to_checkout_amount(Money{5000, "CLP"}) == 500000); // hundredths (ISO: 0 decimals)
    CHECK(to_checkout_amount(Money{1230, "KWD"}) == 1230);   // thousandths...
    CHECK_FALSE(to_checkout_amount(Money{1234, "KWD"}));     // ...whose last digit must be 0
    CHECK(to_checkout_amount(Money{999'999'999, "EUR"}) == 999'999'999);
    CHECK_FALSE(to_checkout_amount(Money{1'000'000'000, "EUR"}));
    CHECK_FALSE(to_checkout_amount(Money{10'000'000, "CLP"})); // 10 digits once in hundredths
    CHECK_FALSE(to_checkout_amount(Money{0, "EUR"}));
    CHECK_FALSE(to_checkout_amount(Money{-5, "EUR"}));
    CHECK_FALSE(to_checkout_amount(Money{5, "XXY"}));
    CHECK(from_checkout_amount(500000, "CLP") == Money{5000, "CLP"});
    CHECK(from_checkout_amount(500, "isk") == Money{500, "ISK"});
    CHECK_FALSE(from_checkout_amount(500050, "CLP")); // not a whole peso: never ours
}

TEST_CASE("checkout wire: the status table", "[providers][checkout]") {
    using checkout::map_status;
    CHECK(map_status("Authorized") == Outcome::succeeded);
    CHECK(map_status("Captured") == Outcome::succeeded);
    CHECK(map_status("Paid") == Outcome::succeeded);
    CHECK(map_status("Declined") == Outcome::declined);
    CHECK(map_status("Canceled") == Outcome::declined);
    CHECK(map_status("Expired") == Outcome::declined);
    CHECK(map_status("Pending") == Outcome::pending);
    for (const char* s : {"Card Verified", "Voided", "Partially Captured", "Refunded",
                          "Partially Refunded", "Retry Scheduled", "captured", ""}) {
        CHECK(map_status(s) == Outcome::unknown);
    }
}
