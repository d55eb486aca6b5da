// Fuzz target for every registered provider kind: the input is a response body, its first byte
// also picks an HTTP status, and every kind's adapter -- built from its descriptor alone, as the
// conformance suite builds it -- answers a submit, a lookup and a list with it, at the picked
// status and at 200. The invariants are conformance::replay's: nothing throws or trips a
// sanitizer; `succeeded` only from a 2xx with the provider's reference; `not_sent` from a response
// only for a 429; `rejected` with the provider's code; a lookup's answer and a list page only from
// a 200, and a found payment ours. A broken invariant aborts with a message naming it.
//
// A new kind needs no line here: registering it (providers/registry.cpp) puts it under this target,
// and its corpus (tests/fuzz/corpus/<kind>/) is replayed by ctest through every kind:
// fuzz_provider_responses_corpus tests/fuzz/corpus. Built as a libFuzzer binary with
// -DPAYRECON_FUZZ=ON under clang.
#include "providers/registry.hpp"
#include "tests/providers/conformance_replay.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace payrecon;
    // Each kind's configuration, built once.
    static const auto k_configs = [] {
        std::map<std::string, providers::ProviderConfig> out;
        for (const auto* d : providers::registered()) {
            out.emplace(std::string(d->kind),
                        conformance::config(*d, "https://fuzz.provider.test"));
        }
        return out;
    }();
    const std::string_view body(reinterpret_cast<const char*>(data), size);
    const auto& statuses = conformance::replay_statuses();
    const int picked = size == 0 ? 200 : statuses[data[0] % statuses.size()];
    for (const auto* d : providers::registered()) {
        const auto& config = k_configs.at(std::string(d->kind));
        for (const int status : {picked, 200}) {
            if (const auto broken = conformance::replay(*d, config, body, status)) {
                std::fprintf(stderr, "fuzz_provider_responses: invariant broken: %s\n",
                             broken->c_str());
                std::abort();
            }
        }
    }
    return 0;
}
