#include "cli/app.hpp"

#include "cli/build_info.hpp"
#include "core/nearest.hpp"
#include "providers/registry.hpp"
#include "store/migrations.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace payrecon::cli {

namespace {
// Every subcommand's --help lists these: they work before or after the subcommand.
constexpr const char* k_global_options = R"(
Global options (before or after the subcommand):
  --config FILE      provider configuration (JSON)                 [env PAYRECON_CONFIG]
  --database URL     libpq URL (default: the private PostgreSQL)   [env PAYRECON_DATABASE_URL]
  --home DIR         payrecon's data directory                     [env PAYRECON_HOME]
  --operator NAME    who is acting, for the audit log              [env PAYRECON_OPERATOR]
  --version          print payrecon's version, the commit it was built from and its schema
                     version, and exit
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
std::vector<CLI::App*> subcommands_of(CLI::App& app) {
    return app.get_subcommands([](const CLI::App*) { return true; });
}

// "payments list": the command `at` is, for messages.
std::string path_of(const CLI::App& at) {
    std::string path;
    for (const CLI::App* up = &at; up != nullptr && up->get_parent() != nullptr;
         up = up->get_parent()) {
        path = up->get_name() + (path.empty() ? "" : " ") + path;
    }
    return path.empty() ? "payrecon" : "payrecon " + path;
}
} // namespace

std::optional<std::string> unknown_word(CLI::App& app, int argc, const char* const* argv) {
    CLI::App* at = &app;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--") {
            return std::nullopt; // what follows is positional
        }
        if (arg.rfind("--", 0) == 0) {
            const std::string name = arg.substr(0, arg.find('='));
            const CLI::Option* option = nullptr;
            std::vector<std::string> known;
            // An option a subcommand does not know is tried on its parents (fallthrough).
            for (const CLI::App* up = at; up != nullptr && option == nullptr;
                 up = up->get_parent()) {
                option = up->get_option_no_throw(name);
                for (const CLI::Option* o : up->get_options()) {
                    for (const auto& l : o->get_lnames()) {
                        known.push_back("--" + l);
                    }
                }
            }
            if (option == nullptr) {
                return "unknown option " + name + " for `" + path_of(*at) + "`" +
                       did_you_mean(name, known);
            }
            if (arg.find('=') == std::string::npos && option->get_items_expected_max() > 0) {
                ++i; // its value
            }
            continue;
        }
        if (arg.size() > 1 && arg[0] == '-') {
            continue; // a short option: -h
        }
        const auto subs = subcommands_of(*at);
        if (subs.empty()) {
            continue; // a positional argument
        }
        const auto found = std::find_if(subs.begin(), subs.end(),
                                        [&arg](const CLI::App* s) { return s->check_name(arg); });
        if (found != subs.end()) {
            at = *found;
            continue;
        }
        const bool takes_positionals =
            !at->get_options([](const CLI::Option* o) { return !o->nonpositional(); }).empty();
        if (takes_positionals) {
            continue;
        }
        std::vector<std::string> names;
        for (const CLI::App* s : subs) {
            names.push_back(s->get_name());
        }
        return "unknown command '" + arg + "' for `" + path_of(*at) + "`" +
               did_you_mean(arg, names);
    }
    return std::nullopt;
}

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
    // The version, the commit it was built from and the schema it migrates to: what an operator
    // needs to say which payrecon runs, and whether its database is current for it.
    app->set_version_flag("--version", std::string("payrecon ") + PAYRECON_VERSION + " (commit " +
                                           build_commit() + ", schema " +
                                           std::to_string(store::latest_known_version()) + ")");
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
    setup_refunds(*app, state);
    setup_captures(*app, state);
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
