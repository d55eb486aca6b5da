#pragma once
// Running payrecon from a CLI test: in-process through build_app() (what it printed, exceptions
// propagate), or the real binary (PAYRECON_BIN) for exit codes and stderr.

#include "cli/app.hpp"
#include "tests/support/test_db.hpp"

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <vector>

namespace payrecon::testing {

// Runs the app in-process on `args` (after "payrecon"), returning what it printed.
inline std::string run_cli(std::vector<std::string> args, int* exit_code = nullptr) {
    cli::AppState state;
    auto app = cli::build_app(state);
    args.insert(args.begin(), {"--database", database_url()});
    std::vector<const char*> argv{"payrecon"};
    for (const auto& a : args) {
        argv.push_back(a.c_str());
    }
    std::ostringstream out;
    auto* old = std::cout.rdbuf(out.rdbuf());
    try {
        app->parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
    } catch (...) {
        std::cout.rdbuf(old);
        throw;
    }
    std::cout.rdbuf(old);
    if (exit_code != nullptr) {
        *exit_code = state.exit_code;
    }
    return out.str();
}

struct ProcessResult {
    int exit_code;
    std::string output;
};

// Runs the real binary through the shell as `env <env> payrecon <args>`; stdout and stderr
// together.
inline ProcessResult run_binary(const std::string& env, const std::string& args) {
    const char* bin = std::getenv("PAYRECON_BIN");
    REQUIRE(bin != nullptr);
    const std::string cmd = "env " + env + " " + bin + " " + args + " 2>&1";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string out;
    std::array<char, 4096> buf{};
    while (const std::size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) {
        out.append(buf.data(), n);
    }
    const int status = ::pclose(pipe);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

} // namespace payrecon::testing
