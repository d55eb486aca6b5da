#include "cli/intake_view.hpp"

#include "cli/context.hpp"
#include "core/errors.hpp"

#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

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
    case 404:
        return "Not Found";
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

ExitCode exit_code_for(const IntakeResponse& response) {
    const int status = response.status;
    if (response.outcome == "in_doubt") {
        // Not 5: that says nothing was changed, and here the payment may have been stored.
        return ExitCode::failure;
    }
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

} // namespace

int print_intake(const IntakeResponse& response, bool json) {
    if (!response.incident.empty()) {
        std::cerr << "payrecon: intake: " << response.incident << "\n";
    }
    if (json) {
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
    return static_cast<int>(exit_code_for(response));
}

Secret api_key_from_environment() {
    const char* key_env = std::getenv("PAYRECON_API_KEY");
    Secret api_key(key_env != nullptr ? key_env : "");
    if (api_key.empty()) {
        throw UsageError("no credential: set PAYRECON_API_KEY to the principal's API key",
                         "`payrecon principal create` prints a key once");
    }
    return api_key;
}

} // namespace payrecon::cli
