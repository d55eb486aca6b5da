#include "cli/context.hpp"

#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "core/settings.hpp"
#include "engine/executor.hpp"
#include "providers/registry.hpp"
#include "store/migrations.hpp"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <pwd.h>
#include <regex>
#include <unistd.h>

namespace payrecon::cli {

void refuse_admin(const AdminRefusal& refusal, const std::string& hint) {
    if (refusal.kind == AdminRefusal::Kind::invalid) {
        throw UsageError(refusal.message, refusal.rule.empty() ? hint : refusal.rule);
    }
    throw Refused(refusal.message, hint);
}

std::filesystem::path home_dir(const GlobalOptions& g) {
    if (!g.home.empty()) {
        return std::filesystem::absolute(g.home);
    }
    return store::LocalCluster::default_home();
}

store::LocalCluster local_cluster(const GlobalOptions& g) {
    return store::LocalCluster(home_dir(g), [](const std::string& notice) {
        std::cerr << "payrecon: " << notice << "\n";
    });
}

store::MigrationLockWait migration_lock_wait(std::optional<std::chrono::milliseconds> timeout,
                                             std::function<bool()> stop_requested) {
    store::MigrationLockWait wait;
    wait.timeout = timeout ? *timeout
                           : std::chrono::milliseconds(duration_from_env(
                                 "PAYRECON_MIGRATION_LOCK_TIMEOUT", std::chrono::seconds(60)));
    wait.stop_requested = std::move(stop_requested);
    const long long seconds = wait.timeout.count() / 1000;
    wait.on_wait = [seconds](const std::string& holder) {
        std::cerr << "payrecon: the schema needs migrating, and " << holder
                  << " holds the migration lock; waiting up to " << seconds
                  << " s for it (PAYRECON_MIGRATION_LOCK_TIMEOUT; `db migrate --lock-timeout`)"
                  << std::endl;
    };
    return wait;
}

void name_sessions(const GlobalOptions& g) {
    store::set_application_name("payrecon" + (g.command.empty() ? "" : " " + g.command) + " (pid " +
                                std::to_string(::getpid()) + ")");
}

OpenDatabase open_database(const GlobalOptions& g, SchemaCheck check,
                           std::function<bool()> stop_requested) {
    name_sessions(g);
    OpenDatabase out;
    if (g.database_url.empty()) {
        store::LocalCluster cluster = local_cluster(g);
        cluster.ensure_started();
        out.db = std::make_unique<store::Db>(cluster.url());
        out.embedded = true;
        if (check == SchemaCheck::migrate_embedded) {
            store::migrate(*out.db, migration_lock_wait(std::nullopt, std::move(stop_requested)));
        } else if (check == SchemaCheck::require_current) {
            store::require_current_schema(*out.db);
        }
        return out;
    }
    const char* env = std::getenv("PAYRECON_DATABASE_URL");
    const bool from_argv = env == nullptr || g.database_url != env;
    if (from_argv) {
        if (const auto secrets = store::url_secret_names(g.database_url); !secrets.empty()) {
            std::string names;
            for (const auto& name : secrets) {
                names += (names.empty() ? "" : ", ") + name;
            }
            throw UsageError("--database carries a password (" + names +
                                 "), which would show in the process list",
                             "put the URL in PAYRECON_DATABASE_URL, or the password in ~/.pgpass "
                             "(sslpassword: in PAYRECON_DATABASE_URL, or a client key without a "
                             "passphrase)");
        }
    }
    out.db = std::make_unique<store::Db>(g.database_url);
    if (check != SchemaCheck::none) {
        store::require_current_schema(*out.db);
    }
    return out;
}

namespace {

// The operator's name goes into audit rows (at most 128 characters, with "reconcile:" and the like
// before it) and operators' terminals: printable, and short enough for both.
std::string checked_operator(std::string name, const char* source, bool from_environment) {
    if (const auto problem = display_name_problem(name, k_max_operator_name)) {
        const std::string what = "the operator name from " + std::string(source) + " " + *problem;
        const std::string hint = "set it to who is acting: 1 to " +
                                 std::to_string(k_max_operator_name) +
                                 " bytes of printable text with no control character, e.g. "
                                 "alice@example.com";
        if (from_environment) {
            throw ConfigError(what, hint);
        }
        throw UsageError(what, hint);
    }
    return name;
}

} // namespace

std::string operator_name(const GlobalOptions& g) {
    if (!g.operator_name.empty()) {
        const char* env = std::getenv("PAYRECON_OPERATOR");
        const bool from_environment = env != nullptr && g.operator_name == env;
        return checked_operator(g.operator_name,
                                from_environment ? "PAYRECON_OPERATOR" : "--operator",
                                from_environment);
    }
    std::string user;
    if (const passwd* pw = ::getpwuid(::geteuid()); pw != nullptr && pw->pw_name != nullptr) {
        user = pw->pw_name;
    } else {
        user = "uid " + std::to_string(::geteuid());
    }
    if (const char* sudo = std::getenv("SUDO_USER"); sudo != nullptr && *sudo != '\0') {
        return checked_operator(std::string(sudo) + " via sudo", "SUDO_USER", true);
    }
    return checked_operator(user, "the OS user name", true);
}

FingerprintKeys fingerprint_keys(const GlobalOptions& g, bool embedded) {
    if (const char* file = std::getenv("PAYRECON_FINGERPRINT_SECRET_FILE");
        file != nullptr && *file != '\0') {
        return load_fingerprint_keys(file, false);
    }
    return load_fingerprint_keys(home_dir(g) / "fingerprint.secret", embedded);
}

SealingKeys endpoint_keys(const GlobalOptions& g, bool embedded) {
    if (const char* file = std::getenv("PAYRECON_ENDPOINT_KEY_FILE");
        file != nullptr && *file != '\0') {
        return load_sealing_keys(file, false);
    }
    return load_sealing_keys(home_dir(g) / "endpoint.key", embedded);
}

net::NetworkAllowance endpoint_allowance() {
    const char* text = std::getenv("PAYRECON_ENDPOINT_ALLOWED_NETWORKS");
    auto parsed = net::NetworkAllowance::parse(text == nullptr ? "" : text);
    if (!parsed) {
        throw ConfigError("PAYRECON_ENDPOINT_ALLOWED_NETWORKS: " + parsed.error());
    }
    return *parsed;
}

std::string process_id_text() {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return std::string(host) + ":" + std::to_string(::getpid());
}

void print_json(const nlohmann::json& j) {
    std::cout << j.dump(2) << "\n";
}

providers::Config load_provider_config(const GlobalOptions& g) {
    if (g.config_file.empty()) {
        throw ConfigError("no provider configuration: give --config FILE or set PAYRECON_CONFIG",
                          "docs/operations.md shows a configuration file");
    }
    return providers::load_config(g.config_file);
}

std::optional<ProviderCatalog> intake_provider_catalog(const GlobalOptions& g) {
    if (g.config_file.empty()) {
        return std::nullopt;
    }
    return providers::provider_catalog(
        providers::load_config(g.config_file, providers::ApiKeys::not_read));
}

std::vector<const providers::ProviderConfig*>
choose_providers(const providers::Config& config, const std::vector<std::string>& only) {
    for (const auto& name : only) {
        if (config.providers.find(name) == config.providers.end()) {
            throw UsageError("--provider " + name + " is not in " + config.source.string(),
                             "name one of the providers that file configures");
        }
    }
    std::vector<const providers::ProviderConfig*> chosen;
    for (const auto& [name, p] : config.providers) {
        if (only.empty() || std::find(only.begin(), only.end(), name) != only.end()) {
            providers::create_provider(p); // a bad adapter kind fails now, not in a thread
            chosen.push_back(&p);
        }
    }
    return chosen;
}

std::chrono::milliseconds claim_lease(const std::vector<const providers::ProviderConfig*>& chosen,
                                      const std::string& requested,
                                      std::chrono::milliseconds call_margin) {
    std::chrono::milliseconds slowest{0};
    for (const auto* p : chosen) {
        slowest = std::max(slowest, providers::worst_case_call(*p));
    }
    if (requested.empty()) {
        return engine::default_lease(slowest, call_margin);
    }
    const std::chrono::milliseconds needed = engine::minimum_lease(slowest, call_margin);
    const std::chrono::milliseconds lease = parse_duration_ms(requested, "--lease");
    if (lease <= needed) {
        throw UsageError("--lease " + requested +
                             " cannot cover the slowest provider call: its "
                             "connect and total timeouts plus a margin of " +
                             std::to_string(call_margin.count()) + " ms take " +
                             std::to_string(needed.count()) + " ms",
                         "give a --lease longer than " + std::to_string(needed.count()) +
                             "ms (it must also cover the renewal's round trip), or lower the "
                             "provider's connect_timeout_ms/timeout_ms");
    }
    return lease;
}

std::string credentials_hint(const providers::ProviderConfig& p) {
    return providers::describe(p.credentials) + " (provider " + p.name + ")";
}

} // namespace payrecon::cli
