#pragma once
// The payrecon command line: build_app() returns the CLI11 app so tests can parse argument lists
// in-process. Subcommands live in cmd_<verb>.cpp, one setup_<verb>() each; they parse and print,
// and leave the work to the libraries.

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

namespace payrecon::cli {

struct GlobalOptions {
    std::string database_url;  // --database / PAYRECON_DATABASE_URL; empty: the private cluster
    std::string home;          // --home / PAYRECON_HOME
    std::string operator_name; // --operator / PAYRECON_OPERATOR; empty: the OS user
    std::string config_file;   // --config / PAYRECON_CONFIG: the provider configuration
    std::string command; // the subcommand given, "payments list" (its database sessions' name)
};

struct AppState {
    GlobalOptions global;
    int exit_code = 0;
};

std::unique_ptr<CLI::App> build_app(AppState& state);

// When the arguments name a command or an option the app does not have, what to say about the
// first such word: "unknown command 'revew'; did you mean 'review'?". Nothing when every word is
// known (the parse failed for another reason, which CLI11's own message says).
std::optional<std::string> unknown_word(CLI::App& app, int argc, const char* const* argv);

void setup_db(CLI::App& app, AppState& state);
void setup_tenant(CLI::App& app, AppState& state);
void setup_principal(CLI::App& app, AppState& state);
void setup_purge(CLI::App& app, AppState& state);
void setup_payments(CLI::App& app, AppState& state);
void setup_refunds(CLI::App& app, AppState& state);
// payrecon captures list|show, voids list|show (cmd_refunds.cpp: one view of every operation).
void setup_captures(CLI::App& app, AppState& state);
void setup_serve(CLI::App& app, AppState& state);
void setup_worker(CLI::App& app, AppState& state);
void setup_reconcile(CLI::App& app, AppState& state);
void setup_nightly(CLI::App& app, AppState& state);
void setup_statement(CLI::App& app, AppState& state);
void setup_review(CLI::App& app, AppState& state);
void setup_audit(CLI::App& app, AppState& state);
void setup_events(CLI::App& app, AppState& state);
void setup_endpoint(CLI::App& app, AppState& state);
void setup_relay(CLI::App& app, AppState& state);
void setup_deliveries(CLI::App& app, AppState& state);
void setup_review_actions(CLI::App& review, AppState& state);
void setup_payment_actions(CLI::App& payments, AppState& state);

} // namespace payrecon::cli
