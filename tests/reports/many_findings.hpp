#pragma once
// A statement report of many findings, as a bad day at a busy provider account gives them: every
// category that needs attention, some handled, four currencies (JPY without minor units),
// payrecon's own ID shapes (UUIDs, `pr_` and 32 hex digits), the provider's references with their
// dashboard links, and the diff's own detail sentences. The same `n` gives the same report (a
// fixed-seed generator), so that the HTML test and bench/report measure the same page.

#include "reports/report.hpp"

#include <cstddef>

namespace payrecon::test {

// `n` findings listed (and counted in the totals), plus 10 * n matched records counted only.
payrecon::reports::Report many_findings(std::size_t n);

} // namespace payrecon::test
