// payrecon: builds the app, runs it, and maps errors to exit codes. Nothing else.
#include "cli/app.hpp"
#include "core/errors.hpp"

#include <iostream>

int main(int argc, char** argv) {
    using payrecon::ExitCode;
    payrecon::cli::AppState state;
    auto app = payrecon::cli::build_app(state);
    try {
        app->parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app->exit(e);
        return rc == 0 ? 0 : static_cast<int>(ExitCode::usage);
    } catch (const payrecon::OperatorError& e) {
        std::cerr << "payrecon: " << e.what() << "\n";
        if (!e.hint().empty()) {
            std::cerr << "  what to do: " << e.hint() << "\n";
        }
        return static_cast<int>(e.code());
    } catch (const std::exception& e) {
        std::cerr << "payrecon: the command failed: " << e.what() << "\n";
        return static_cast<int>(ExitCode::failure);
    }
    return state.exit_code;
}
