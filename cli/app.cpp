#include "cli/app.hpp"

#include "providers/registry.hpp"

#include <string>

namespace payrecon::cli {

namespace {
// Every subcommand's --help lists these: they work before or after the subcommand.
constexpr const char* k_global_options = R"(
Global options (before or after the subcommand):
  --config FILE      provider configuration (JSON)                 [env PAYRECON_CONFIG]
  --database URL     libpq URL (default: the private PostgreSQL)   [env PAYRECON_DATABASE_URL]
  --home DIR         payrecon's data directory                     [env PAYRECON_HOME]
  --operator NAME    who is acting, for the audit log              [env PAYRECON_OPERATOR]
  --version          print payrecon's version and exit
)";

constexpr const char* k_footer = R"(
Exit codes:
  0  success
  1  the run failed (unexpected error; details on stderr); also worker --once when no call
     reached a provider, and reconcile when every status query failed
  2  bad arguments or bad input
  3  the run worked, and something needs an operator
  4  bad or missing configuration; also a provider refused our credentials (HTTP 401/403)
  5  the database cannot be reached; nothing was changed
  6  the schema is older (run `payrecon db migrate`) or newer than this payrecon
  7  refused: not found, not allowed, or a conflict

Without --database or PAYRECON_DATABASE_URL, payrecon uses its private PostgreSQL under
$PAYRECON_HOME (default ~/.local/share/payrecon), created and started on first use.)";

// Subcommands and theirs, depth first: each gets the global options in its help.
void add_global_footer(CLI::App& app) {
    for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        sub->footer(std::string(k_global_options) + k_footer);
        add_global_footer(*sub);
    }
}
// Each subcommand, as it is parsed, records its path ("payments list") in state.global.command:
// the deepest one parsed is the command given.
void record_command(CLI::App& app, AppState& state) {
    for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        sub->preparse_callback([&state, sub](std::size_t) {
            std::string path = sub->get_name();
            for (const CLI::App* up = sub->get_parent();
                 up != nullptr && up->get_parent() != nullptr; up = up->get_parent()) {
                path = up->get_name() + " " + path;
            }
            state.global.command = path;
        });
        record_command(*sub, state);
    }
}
} // namespace

std::unique_ptr<CLI::App> build_app(AppState& state) {
    auto app = std::make_unique<CLI::App>(
        "payrecon: charge once, lose nothing -- idempotent payment intake, provider execution and "
        "reconciliation on PostgreSQL",
        "payrecon");
    app->footer(k_footer);
    app->require_subcommand(1);
    // `payrecon worker --config FILE` as well as `payrecon --config FILE worker`: an option a
    // subcommand does not know is tried on its parents.
    app->fallthrough();
    app->set_version_flag("--version", std::string("payrecon ") + PAYRECON_VERSION);
    app->option_defaults()->always_capture_default(false);
    app->add_option("--database", state.global.database_url,
                    "libpq URL of the database (default: the private PostgreSQL); put passwords "
                    "in PAYRECON_DATABASE_URL or ~/.pgpass, never here")
        ->envname("PAYRECON_DATABASE_URL");
    app->add_option("--home", state.global.home,
                    "payrecon's data directory (private PostgreSQL, fingerprint secret)")
        ->envname("PAYRECON_HOME");
    app->add_option("--operator", state.global.operator_name,
                    "who is acting, for the audit log (default: the OS user)")
        ->envname("PAYRECON_OPERATOR");

    app->add_option("--config", state.global.config_file,
                    "provider configuration (JSON; the kinds this build has: " +
                        providers::kinds_where() + "); docs/operations.md shows one")
        ->envname("PAYRECON_CONFIG");

    setup_db(*app, state);
    setup_tenant(*app, state);
    setup_principal(*app, state);
    setup_payments(*app, state);
    setup_review(*app, state);
    setup_audit(*app, state);
    setup_events(*app, state);
    setup_endpoint(*app, state);
    setup_deliveries(*app, state);
    setup_purge(*app, state);
    setup_serve(*app, state);
    setup_worker(*app, state);
    setup_relay(*app, state);
    setup_reconcile(*app, state);
    setup_nightly(*app, state);
    setup_statement(*app, state);
    add_global_footer(*app);
    record_command(*app, state);
    return app;
}

} // namespace payrecon::cli
