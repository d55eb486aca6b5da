#pragma once
// "fourth": a made-up provider that exists only in the tests, to show what adding a provider takes
// and that the conformance suite covers a kind nobody wrote a test for. It is laid out as a real
// one would be in providers/fourth/: this folder holds its code (fourth.cpp: descriptor, wire,
// adapter), its contract, recorded fixtures with expected.json, fuzz corpus and README; the one
// registry line is the test's providers::test_hook::ScopedRegistration(fourth::descriptor()).
//
// Its API, the shape of PayPal's and Checkout.com's (docs/design.md section 11):
// - OAuth2 client credentials (token from POST /v1/oauth2/token), or HTTP basic;
// - POST /v2/charges, JSON {amount {minor, currency}, reference, source, merchant_id, customer},
//   the Idempotency-Key header (at most 64 characters); a charge {id, reference, amount, status,
//   created_at}; errors {"error": {type, code, message}}: 402 card_error declined, 400
//   invalid_request and 401/403 rejected, 429 not sent, 409 and 5xx unknown;
// - GET /v2/charges?reference=OP finds our charge; GET /v2/charges?created_from&created_to&cursor
//   lists a window, {"data": [...], "next_cursor"};
// - one setting of its own: "merchant_id", required.

#include "providers/descriptor.hpp"
#include "tests/providers/conformance.hpp"

#include <string>

namespace payrecon::fourth {

const providers::ProviderDescriptor& descriptor();

// Its files for the conformance suite, all in this folder (tests/providers/fourth/).
conformance::Files files();

struct Settings : providers::ProviderSettings {
    std::string merchant_id;
};

} // namespace payrecon::fourth
