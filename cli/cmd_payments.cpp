// payrecon payments create: the intake protocol from the command line, authenticated by
// PAYRECON_API_KEY (never an argument).
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "core/auth.hpp"
#include "core/errors.hpp"
#include "core/intake.hpp"
#include "core/problem.hpp"
#include "core/settings.hpp"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace payrecon::cli {
namespace {

std::string status_text(int status) {
    switch (status) {
    case 202:
        return "Accepted";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 409:
        return "Conflict";
    case 422:
        return "Unprocessable Content";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    default:
        return "";
    }
}

ExitCode exit_code_for(int status) {
    if (status < 300) {
        return ExitCode::ok;
    }
    if (status == 400 || status == 422) {
        return ExitCode::usage;
    }
    if (status == 401 || status == 403 || status == 404 || status == 409) {
        return ExitCode::refused;
    }
    if (status == 503) {
        return ExitCode::database_unavailable;
    }
    return ExitCode::failure;
}

std::string read_body(const std::string& file) {
    if (file.empty() || file == "-") {
        return std::string(std::istreambuf_iterator<char>(std::cin), {});
    }
    std::ifstream in(file, std::ios::binary);
    if (!in) {
        throw UsageError("cannot read the request body from " + file);
    }
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

} // namespace

void setup_payments(CLI::App& app, AppState& state) {
    CLI::App* payments = app.add_subcommand("payments", "payments");
    payments->require_subcommand(1);

    struct CreateOptions {
        std::string key;
        std::string body_file;
        std::string api_version;
        bool json = false;
    };
    auto opts = std::make_shared<CreateOptions>();
    CLI::App* c = payments->add_subcommand(
        "create", "create a payment exactly once per idempotency key, as POST /v1/payments does; "
                  "the credential comes from PAYRECON_API_KEY");
    c->add_option("--idempotency-key", opts->key, "the key; reuse it, unchanged, on every retry")
        ->required();
    c->add_option("--body-file", opts->body_file, "JSON request body (default: standard input)");
    c->add_option("--api-version", opts->api_version, "Payrecon-Version (default: the current one)");
    c->add_flag("--json", opts->json, "print {status, replayed, location, body} as JSON");
    c->callback([&state, opts] {
        const char* key_env = std::getenv("PAYRECON_API_KEY");
        const Secret api_key(key_env != nullptr ? key_env : "");
        if (api_key.empty()) {
            throw UsageError("no credential: set PAYRECON_API_KEY to the principal's API key",
                             "`payrecon principal create` prints a key once");
        }
        const std::string body = read_body(opts->body_file);
        OpenDatabase opened = open_database(state.global);
        const FingerprintKeys keys = fingerprint_keys(state.global, opened.embedded);
        IntakeResponse response;
        const auto principal = authenticate(*opened.db, api_key);
        if (!principal) {
            const bool revoked = principal.error() == AuthFailure::revoked;
            response.status = revoked ? 403 : 401;
            response.body = revoked ? problem_json(403, "credential_revoked", "Credential revoked",
                                                   "This API key was revoked.")
                                    : problem_json(401, "unauthorized", "Unknown credential",
                                                   "No principal has this API key.");
        } else {
            IntakeSettings settings;
            settings.retention = idempotency_retention();
            IntakeService intake(*opened.db, keys, settings);
            response = intake.create_payment(*principal, opts->key, body, opts->api_version);
        }
        if (opts->json) {
            nlohmann::json j = {{"status", response.status}, {"replayed", response.replayed}};
            j["location"] = response.location ? nlohmann::json(*response.location) : nlohmann::json();
            j["body"] = nlohmann::json::parse(response.body, nullptr, false);
            print_json(j);
        } else {
            std::cout << response.status << " " << status_text(response.status)
                      << (response.replayed ? " (replayed)" : "") << "\n";
            if (response.location) {
                std::cout << "Location: " << *response.location << "\n";
            }
            std::cout << response.body << "\n";
        }
        state.exit_code = static_cast<int>(exit_code_for(response.status));
    });
}

} // namespace payrecon::cli
