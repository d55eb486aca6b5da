#include "core/operator_commands.hpp"

#include <stdexcept>

namespace payrecon {
namespace {

bool plain(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_.:/@%+=,-").find(c) != std::string_view::npos;
}

} // namespace

std::string shell_word(std::string_view text) {
    bool as_is = !text.empty();
    for (const char c : text) {
        as_is = as_is && plain(c);
    }
    if (as_is) {
        return std::string(text);
    }
    std::string out = "'";
    for (const char c : text) {
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    }
    return out + "'";
}

std::string command_line(const ResolveCommand& command) {
    std::string out = "payrecon review resolve " + shell_word(command.payment_id) +
                      " --generation " + std::to_string(command.generation) + " --as " +
                      std::string(to_string(command.decision));
    switch (command.decision) {
    case OperatorDecision::succeeded:
        out += " --provider-reference " +
               shell_word(command.reference.value_or(std::string(k_reference_placeholder)));
        if (command.charged_amount) {
            out += " --amount " + shell_word(*command.charged_amount);
        }
        if (command.unverified) {
            out += " --unverified";
        }
        break;
    case OperatorDecision::retry:
        out += " --confirm-no-charge";
        break;
    case OperatorDecision::failed:
        break;
    case OperatorDecision::cancel:
        throw std::invalid_argument("command_line: a cancel is cancel_command()");
    }
    return out + " --note \"...\"";
}

std::string cancel_command(std::string_view payment_id, long long generation) {
    return "payrecon payments cancel " + shell_word(payment_id) + " --generation " +
           std::to_string(generation) + " --note \"...\"";
}

std::string review_show_command(std::string_view payment_id) {
    return "payrecon review show " + shell_word(payment_id);
}

std::string recheck_command(std::string_view payment_id) {
    return "payrecon review recheck " + shell_word(payment_id);
}

} // namespace payrecon
