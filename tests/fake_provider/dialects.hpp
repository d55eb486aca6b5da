#pragma once
// Every dialect the fake provider speaks, in one explicit list: dialects.cpp makes each, one line
// per dialect (as providers/registry.cpp lists the adapters). A dialect is its own file,
// tests/fake_provider/<provider>.{hpp,cpp}, a class implementing Dialect (dialect.hpp).

#include "tests/fake_provider/dialect.hpp"
#include "tests/fake_provider/ledger.hpp"

namespace payrecon::fake {

struct FakeProviderOptions;

// The dialects, in the list's order (the ledger JSON's), each made from the account and its own
// options in `options`, on `ledger`. Both outlive them.
Dialects make_dialects(Ledger& ledger, const FakeProviderOptions& options);

} // namespace payrecon::fake
