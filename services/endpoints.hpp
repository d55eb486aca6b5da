#pragma once
// A tenant's webhook endpoints as operators manage them (DESIGN section 15): what a new endpoint
// must be, its signing secrets -- made here, handed back once for the caller to show, and kept
// only sealed under the endpoint key (core/sealed) --, disabling and enabling, rotating a secret,
// and re-sealing every secret under a new key line. What happened comes back as data; the caller
// words it (the CLI in its own flags).

#include "core/sealed.hpp"
#include "core/secret.hpp"
#include "store/endpoint_store.hpp"

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <utility>
#include <vector>

namespace payrecon::store {
class Db;
}

namespace payrecon {

inline constexpr std::size_t k_max_endpoint_description = 512;
inline constexpr std::size_t k_max_disable_reason = 1000;

// Why the relay may not reach `url` (the address rules of net/endpoint_address: https to public
// addresses unless the operator allows a network), or nullopt if it may. The caller supplies it:
// this layer reaches no network, and the check resolves the URL's host.
using CheckEndpointUrl = std::function<std::optional<std::string>(const std::string& url)>;

struct EndpointRequest {
    std::string url;
    std::vector<std::string> event_types; // patterns: "payment.succeeded", "payment.*", "*"
    std::optional<std::string> description;
};

// Which part of a request breaks a rule, and the rule, in words that name no command-line flag.
struct EndpointProblem {
    enum class Part { event_types, description, url };
    Part part = Part::url;
    std::string pattern; // event_types: the pattern refused
    std::string rule;
};

// A request check_endpoint_request() passed: the only kind add_endpoint() takes, so that no
// endpoint is added whose URL was not checked.
class CheckedEndpointRequest {
public:
    const EndpointRequest& request() const noexcept { return m_request; }

private:
    explicit CheckedEndpointRequest(EndpointRequest request) : m_request(std::move(request)) {}
    friend tl::expected<CheckedEndpointRequest, EndpointProblem>
    check_endpoint_request(EndpointRequest request, const CheckEndpointUrl& check_url);

    EndpointRequest m_request;
};

// Checks a request before anything is read from the database, in this order: every event-type
// pattern (core's event_pattern_problem), the description (printable, at most
// k_max_endpoint_description bytes), then the URL by `check_url` -- last, since it resolves the
// host. The first problem found comes back.
tl::expected<CheckedEndpointRequest, EndpointProblem>
check_endpoint_request(EndpointRequest request, const CheckEndpointUrl& check_url);

struct AddedEndpoint {
    store::EndpointRow endpoint;
    Secret secret; // its first signing secret in the clear, for the caller to show once
};

// Adds the endpoint for `tenant_id` with a new time-ordered ID and a new signing secret, sealed
// under the current line of `keys`; audited by `actor`. Throws DatabaseUnavailable.
AddedEndpoint add_endpoint(store::Db& db, const SealingKeys& keys, const std::string& tenant_id,
                           const CheckedEndpointRequest& request, const std::string& actor);

// Endpoints of one tenant (nullopt: of all), oldest first; one endpoint by ID, nullopt if none.
// Throw DatabaseUnavailable.
std::vector<store::EndpointRow> list_endpoints(store::Db& db,
                                               const std::optional<std::string>& tenant_id);
std::optional<store::EndpointRow> find_endpoint(store::Db& db, const std::string& endpoint_id);

// The reason a disable is audited with: `typed` trimmed, or nullopt if that is empty or longer
// than k_max_disable_reason (the caller says so in its own words).
std::optional<std::string> disable_reason(std::string_view typed);

// Stops delivering to the endpoint, audited with `reason` (as disable_reason() gives it). Throws
// DatabaseUnavailable.
store::EndpointChange disable_endpoint(store::Db& db, const std::string& endpoint_id,
                                       const std::string& actor, const std::string& reason);
// Delivers to the endpoint again, audited: what waited for it is due at once, and what was
// published while it was disabled is sent only when a replay asks (services/deliveries'
// replay_since). Throws DatabaseUnavailable.
store::EndpointChange enable_endpoint(store::Db& db, const std::string& endpoint_id,
                                      const std::string& actor);

struct RotatedSecret {
    int secret_no = 0;
    Secret secret; // in the clear, for the caller to show once
};

// A new signing secret for the endpoint, sealed under the current line of `keys`; the secrets
// that sign now keep signing beside it for `overlap`. Audited. nullopt if there is no such
// endpoint. Throws DatabaseUnavailable.
std::optional<RotatedSecret> rotate_endpoint_secret(store::Db& db, const SealingKeys& keys,
                                                    const std::string& endpoint_id,
                                                    std::chrono::seconds overlap,
                                                    const std::string& actor);

// Seals every signing secret that still signs again under the current line of `keys` (after an
// operator put a new line first in the endpoint key file), in one transaction, audited once.
// Those no line of `keys` opens are left as they are and listed in `unopened`. Throws
// DatabaseUnavailable.
store::ResealResult reseal_endpoint_secrets(store::Db& db, const SealingKeys& keys,
                                            const std::string& actor);

} // namespace payrecon
