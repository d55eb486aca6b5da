#pragma once
// What subcommands share: opening the database (the private cluster, started and migrated on
// demand, or the one given), the operator's name, the fingerprint secrets.

#include "cli/app.hpp"
#include "core/fingerprint.hpp"
#include "core/sealed.hpp"
#include "net/endpoint_address.hpp"
#include "providers/config.hpp"
#include "services/admin.hpp"
#include "services/intake.hpp"
#include "store/cluster.hpp"
#include "store/db.hpp"
#include "store/migrations.hpp"

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace payrecon::cli {

// Throws what `refusal` says as an operator error: UsageError (exit 2) for an invalid name or ID,
// its rule as the hint (else `hint`); Refused (exit 7) for one taken or not found, with `hint`.
[[noreturn]] void refuse_admin(const AdminRefusal& refusal, const std::string& hint);

struct OpenDatabase {
    std::unique_ptr<store::Db> db;
    bool embedded = false;
};

enum class SchemaCheck { require_current, migrate_embedded, none };

std::filesystem::path home_dir(const GlobalOptions& g);
store::LocalCluster local_cluster(const GlobalOptions& g);

// Names the database sessions this process opens from now on after its command: "payrecon worker
// (pid 5678)" (store::set_application_name), so that a session holding a lock can be traced back.
void name_sessions(const GlobalOptions& g);

// Opens the database, its sessions named after this command ("payrecon worker (pid 5678)"); the
// private cluster is started and migrated (`migrate_embedded`: a schema already current is found
// so without waiting for the migration lock; one that needs migrating waits as
// migration_lock_wait() says, `stop_requested` ending the wait), a database given by URL only
// checked (`require_current`). Throws UsageError for a password in --database (password,
// sslpassword or any other libpq secret: it would show in the process list), DatabaseUnavailable,
// SchemaMismatch (also: the migration lock stayed held), store::MigrationWaitStopped.
OpenDatabase open_database(const GlobalOptions& g,
                           SchemaCheck check = SchemaCheck::migrate_embedded,
                           std::function<bool()> stop_requested = {});

// How long a migration waits for the lock another session holds: `timeout` if given, else
// PAYRECON_MIGRATION_LOCK_TIMEOUT (default 60s; ConfigError if it is not a duration). Says once on
// stderr who holds it. `stop_requested` as store::MigrationLockWait's.
store::MigrationLockWait
migration_lock_wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt,
                    std::function<bool()> stop_requested = {});

// Operator names: at most this many bytes, printable (display_name_problem in core/encoding.hpp).
inline constexpr std::size_t k_max_operator_name = 100;

// --operator, PAYRECON_OPERATOR, else the OS user ("alice", "alice via sudo"). Throws UsageError
// (exit 2) for a bad --operator and ConfigError (exit 4) for a bad PAYRECON_OPERATOR or SUDO_USER:
// empty, over k_max_operator_name bytes, or holding a control or invisible character.
std::string operator_name(const GlobalOptions& g);

// PAYRECON_FINGERPRINT_SECRET_FILE, else $PAYRECON_HOME/fingerprint.secret (created on first use
// with the private cluster only).
FingerprintKeys fingerprint_keys(const GlobalOptions& g, bool embedded);

// PAYRECON_ENDPOINT_KEY_FILE, else $PAYRECON_HOME/endpoint.key (created on first use with the
// private cluster only): the keys that seal webhook endpoints' signing secrets at rest. Every
// process that adds endpoints or relays events must read the same file.
SealingKeys endpoint_keys(const GlobalOptions& g, bool embedded);

// PAYRECON_ENDPOINT_ALLOWED_NETWORKS: the networks beyond the public internet that webhook
// endpoints may reach (none by default). Throws ConfigError naming the item that is not a CIDR.
net::NetworkAllowance endpoint_allowance();

// "host:pid": recorded on claims, leases and attempts.
std::string process_id_text();

void print_json(const nlohmann::json& j);

// The provider configuration from --config / PAYRECON_CONFIG. Throws ConfigError if neither is
// given or the file is bad.
providers::Config load_provider_config(const GlobalOptions& g);

// The providers of --config / PAYRECON_CONFIG for the intake (`serve`, `payments create`): names
// and kinds only, the API keys are not read. nullopt if no configuration is given (then provider
// names are not checked). Throws ConfigError if the file is bad.
std::optional<ProviderCatalog> intake_provider_catalog(const GlobalOptions& g);

// The configured providers named in `only` (all of them if empty), each checked to have an adapter
// in this build. Throws UsageError for a name the configuration does not have.
std::vector<const providers::ProviderConfig*>
choose_providers(const providers::Config& config, const std::vector<std::string>& only);

// The lease a claim of these providers gets: `requested` ("20s", "1500ms"; empty: the engine's
// default_lease()). Leases are renewed before every call, so they need not cover a batch.
// Throws UsageError if `requested` cannot cover the slowest worst-case call plus the margin.
std::chrono::milliseconds claim_lease(const std::vector<const providers::ProviderConfig*>& chosen,
                                      const std::string& requested,
                                      std::chrono::milliseconds call_margin);

// What an operator checks when the provider refuses our credentials: "the API key in
// STRIPE_API_KEY (provider stripe)".
std::string credentials_hint(const providers::ProviderConfig& p);

} // namespace payrecon::cli
