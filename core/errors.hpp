#pragma once
// What an operator must act on is a typed exception carrying an exit code, caught once in main.
// Per-call transient failures are values (tl::expected); provider outcomes are data.

#include <stdexcept>
#include <string>

namespace payrecon {

// Every exit code payrecon uses; documented in `payrecon --help` and the README.
enum class ExitCode : int {
    ok = 0,
    failure = 1,   // the run failed (an unexpected error, or nothing got through; on stderr)
    usage = 2,     // bad arguments or bad input
    attention = 3, // the run worked, and something needs an operator (nightly, statement)
    config = 4,    // bad or missing configuration, or credentials a provider refused
    database_unavailable = 5, // the database cannot be reached; nothing was changed
    schema_mismatch =
        6,       // the schema is older (run `payrecon db migrate`) or newer than this binary
    refused = 7, // refused: not found, not allowed, conflict, fenced out
};

// An error the operator can act on: `what()` says what happened, `hint()` what to do next.
class OperatorError : public std::runtime_error {
public:
    OperatorError(ExitCode code, const std::string& what, std::string hint = {})
        : std::runtime_error(what), m_code(code), m_hint(std::move(hint)) {}
    ExitCode code() const noexcept { return m_code; }
    const std::string& hint() const noexcept { return m_hint; }

private:
    ExitCode m_code;
    std::string m_hint;
};

class UsageError : public OperatorError {
public:
    explicit UsageError(const std::string& what, std::string hint = {})
        : OperatorError(ExitCode::usage, what, std::move(hint)) {}
};

class ConfigError : public OperatorError {
public:
    explicit ConfigError(const std::string& what, std::string hint = {})
        : OperatorError(ExitCode::config, what, std::move(hint)) {}
};

class DatabaseUnavailable : public OperatorError {
public:
    explicit DatabaseUnavailable(const std::string& what, std::string hint = {})
        : OperatorError(ExitCode::database_unavailable, what, std::move(hint)) {}
    // True if the connection was lost while a COMMIT was on its way: the transaction may or may
    // not have committed, so "nothing was changed" cannot be said.
    virtual bool commit_outcome_unknown() const noexcept { return false; }
};

class SchemaMismatch : public OperatorError {
public:
    explicit SchemaMismatch(const std::string& what, std::string hint = {})
        : OperatorError(ExitCode::schema_mismatch, what, std::move(hint)) {}
};

class Refused : public OperatorError {
public:
    explicit Refused(const std::string& what, std::string hint = {})
        : OperatorError(ExitCode::refused, what, std::move(hint)) {}
};

} // namespace payrecon
