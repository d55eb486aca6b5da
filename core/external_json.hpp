#pragma once
// JSON that comes from outside -- provider responses, provider configuration files, and the
// webhooks and statement pages to come -- is parsed only through here. nlohmann's parser is
// iterative, but serialising (`dump()`), comparing and walking a document recurse once per nesting
// level: a Stripe PaymentIntent whose metadata nests 170,000 objects (1 MiB, inside the
// transport's response cap) overflowed a worker's stack in `dump()`, and then the reconciler's,
// which asked the provider and got the same body. The depth is checked first, in one pass over the
// bytes (strings and their escapes skipped), before anything is built.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace payrecon {

// Deeper than any document a provider or an operator writes (a Stripe PaymentIntent nests about 6).
inline constexpr std::size_t k_max_external_json_depth = 64;

// The deepest nesting of arrays and objects in `text`, counting brackets outside strings; stops
// counting once past `stop_after` (so a hostile document costs at most one pass). Not a validator:
// for text that is not JSON the result means nothing.
std::size_t json_nesting_depth(std::string_view text,
                               std::size_t stop_after = k_max_external_json_depth);

// `text` as JSON; nullopt if it is not valid JSON or nests deeper than `max_depth`.
std::optional<nlohmann::json>
parse_external_json(std::string_view text, std::size_t max_depth = k_max_external_json_depth);

} // namespace payrecon
