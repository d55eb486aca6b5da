#include "cli/app.hpp"

namespace payrecon::cli {

namespace {
constexpr const char* k_footer = R"(
Exit codes:
  0  success
  1  the run failed (unexpected error; details on stderr)
  2  bad arguments or bad input
  3  the run worked, and something needs an operator
  4  bad or missing configuration
  5  the database cannot be reached; nothing was changed
  6  the schema is older (run `payrecon db migrate`) or newer than this payrecon
  7  refused: not found, not allowed, or a conflict

Without --database or PAYRECON_DATABASE_URL, payrecon uses its private PostgreSQL under
$PAYRECON_HOME (default ~/.local/share/payrecon), created and started on first use.)";
}

std::unique_ptr<CLI::App> build_app(AppState& state) {
    auto app = std::make_unique<CLI::App>(
        "payrecon: charge once, lose nothing -- idempotent payment intake, provider execution and "
        "reconciliation on PostgreSQL",
        "payrecon");
    app->footer(k_footer);
    app->require_subcommand(1);
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
                    "provider configuration (JSON); docs/operations.md shows one")
        ->envname("PAYRECON_CONFIG");

    setup_db(*app, state);
    setup_tenant(*app, state);
    setup_principal(*app, state);
    setup_payments(*app, state);
    setup_review(*app, state);
    setup_audit(*app, state);
    setup_purge(*app, state);
    setup_serve(*app, state);
    setup_worker(*app, state);
    setup_reconcile(*app, state);
    setup_nightly(*app, state);
    setup_statement(*app, state);
    return app;
}

} // namespace payrecon::cli
