#include "providers/provider.hpp"

namespace payrecon::providers {

std::string_view to_string(Outcome outcome) {
    switch (outcome) {
    case Outcome::unknown:
        return "unknown";
    case Outcome::succeeded:
        return "succeeded";
    case Outcome::declined:
        return "declined";
    case Outcome::pending:
        return "pending";
    case Outcome::not_sent:
        return "not_sent";
    }
    return "unknown";
}

std::optional<Outcome> parse_outcome(std::string_view name) {
    for (const Outcome o : {Outcome::unknown, Outcome::succeeded, Outcome::declined,
                            Outcome::pending, Outcome::not_sent}) {
        if (to_string(o) == name) {
            return o;
        }
    }
    return std::nullopt;
}

} // namespace payrecon::providers
