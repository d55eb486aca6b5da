// payrecon: builds the app, runs it, and maps errors to exit codes. Nothing else.
#include "cli/app.hpp"
#include "core/encoding.hpp"
#include "core/errors.hpp"

#include <iostream>
#include <string>
#include <string_view>

namespace {

// An error message as the terminal gets it: its lines kept (the end of a server log is several),
// every other control character escaped (names and values quoted from outside are escaped where
// they are quoted; this is the net under them, so backslashes are left as they are).
std::string terminal_safe(std::string_view text) {
    std::string out;
    for (std::size_t start = 0;;) {
        const std::size_t end = text.find('\n', start);
        const std::string line = payrecon::printable(
            text.substr(start, end == std::string_view::npos ? end : end - start));
        // printable() doubles backslashes; undo that, keep its escapes of control characters.
        for (std::size_t i = 0; i < line.size(); ++i) {
            out += line[i];
            if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '\\') {
                ++i;
            }
        }
        if (end == std::string_view::npos) {
            return out;
        }
        out += '\n';
        start = end + 1;
    }
}

} // namespace

int main(int argc, char** argv) {
    using payrecon::ExitCode;
    payrecon::cli::AppState state;
    auto app = payrecon::cli::build_app(state);
    try {
        app->parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() != 0) {
            if (const auto word = payrecon::cli::unknown_word(*app, argc, argv)) {
                std::cerr << "payrecon: " << terminal_safe(*word) << "\n"
                          << "  what to do: payrecon --help lists the commands; "
                             "payrecon COMMAND --help its options\n";
                return static_cast<int>(ExitCode::usage);
            }
        }
        const int rc = app->exit(e);
        return rc == 0 ? 0 : static_cast<int>(ExitCode::usage);
    } catch (const payrecon::OperatorError& e) {
        std::cerr << "payrecon: " << terminal_safe(e.what()) << "\n";
        if (!e.hint().empty()) {
            std::cerr << "  what to do: " << terminal_safe(e.hint()) << "\n";
        }
        if (dynamic_cast<const payrecon::DatabaseUnavailable*>(&e) != nullptr) {
            std::cerr << "  the database: --database or PAYRECON_DATABASE_URL names it; without "
                         "either, `payrecon db start` starts the private one\n";
        }
        return static_cast<int>(e.code());
    } catch (const std::exception& e) {
        std::cerr << "payrecon: the command failed: " << terminal_safe(e.what()) << "\n";
        return static_cast<int>(ExitCode::failure);
    }
    return state.exit_code;
}
