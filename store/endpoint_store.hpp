#pragma once
// Webhook endpoints (migration 0016, DESIGN section 15) and their sealed signing secrets: adding,
// listing, enabling and disabling, rotating a secret, and re-sealing every secret under a new
// endpoint key. Each change is audited in the same transaction.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace payrecon::store {

class Db;

struct EndpointRow {
    std::string tenant_id;
    std::string tenant_name;
    std::string endpoint_id;
    std::string url;
    std::vector<std::string> event_types;
    std::optional<std::string> description;
    std::string state; // enabled, disabled
    std::optional<std::string> disabled_at;
    std::optional<std::string> disabled_reason;
    std::string created_at;
    std::string created_by;
    int signing_secrets = 0; // how many sign now (2 during a rotation's overlap)
    long long pending = 0;
    long long dead = 0;
    std::optional<std::string> oldest_due_at; // the oldest pending delivery that is due
};

// The AAD an endpoint's secret number `secret_no` is sealed with (core/sealed).
std::string endpoint_secret_aad(const std::string& tenant_id, const std::string& endpoint_id,
                                int secret_no);

// Seals a secret for (tenant, endpoint, secret number): the caller's SealingKeys.
using SealFunction = std::function<std::string(const std::string& tenant_id,
                                               const std::string& endpoint_id, int secret_no)>;

// Adds an endpoint of `tenant_id` with ID `endpoint_id` (time-ordered, made by the caller), its
// first signing secret (sealed by `seal`), and an audit row by `actor`, in one transaction.
EndpointRow add_endpoint(Db& db, const std::string& tenant_id, const std::string& endpoint_id,
                         const std::string& url, const std::vector<std::string>& event_types,
                         const std::optional<std::string>& description, const std::string& actor,
                         const SealFunction& seal);

// Endpoints, of one tenant or all, oldest first.
std::vector<EndpointRow> list_endpoints(Db& db, const std::optional<std::string>& tenant_id);
std::optional<EndpointRow> find_endpoint(Db& db, const std::string& endpoint_id);

enum class EndpointChange { changed, unchanged, not_found };
// Disables (or enables) an endpoint, audited with `reason`. Enabling makes what waited for it due
// at once, and never sends what was published while it was disabled: `replay_since` does, when
// asked.
EndpointChange set_endpoint_enabled(Db& db, const std::string& endpoint_id, bool enabled,
                                    const std::string& actor, const std::string& reason);

// A new signing secret for the endpoint (the next number, sealed by `seal`); every secret that
// signs now retires after `overlap` (they sign beside the new one until then). Audited. Returns
// the new secret's number, or nullopt if there is no such endpoint.
std::optional<int> rotate_endpoint_secret(Db& db, const std::string& endpoint_id,
                                          std::chrono::seconds overlap, const std::string& actor,
                                          const SealFunction& seal);

// Re-seals every endpoint signing secret that still signs: `reseal` gets (tenant, endpoint,
// secret number, sealed bytes) and returns them sealed under the current key, or nullopt if they
// do not open with the caller's keys. In one transaction, audited once (endpoint.secrets_resealed
// under the deployment tenant). Returns {re-sealed, (endpoint ID, secret number) that did not
// open}.
using ResealFunction = std::function<std::optional<std::string>(
    const std::string& tenant_id, const std::string& endpoint_id, int secret_no,
    const std::string& sealed)>;
struct ResealResult {
    long long resealed = 0;
    std::vector<std::pair<std::string, int>> unopened;
};
ResealResult reseal_endpoint_secrets(Db& db, const std::string& actor,
                                     const ResealFunction& reseal);

} // namespace payrecon::store
