#pragma once
// The command line of `payrecon-fake-provider`, parsed in-process so tests can check it. Secrets
// are never arguments: `--api-key-env NAME` names the environment variable that holds the API key,
// `--paypal-client-secret-env NAME` the one that holds PayPal's client secret.

#include "tests/fake_provider/fake_provider.hpp"

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace payrecon::fake {

struct CommandLine {
    int port = 0;
    int admin_port = 0;
    std::string api_key_env;
    std::int64_t key_retention_s = 86400;
    std::int64_t checkout_key_retention_s = 86400;
    std::int64_t paypal_key_retention_s = 21600;
    std::int64_t paypal_refund_key_retention_s = 45 * 24 * 3600; // a refund's PayPal-Request-Id
    std::int64_t square_key_retention_s = 86400;
    std::string paypal_client_id = "fake-paypal-client-id";
    std::string paypal_client_secret_env; // empty: PayPal refuses every token request
    std::int64_t paypal_token_ttl_s = 32400;
    bool no_idempotency = false;
    bool no_lookup = false;
    std::int64_t latency_ms = 0;
    std::uint64_t seed = 42;
    std::vector<std::string> fault_next;  // fault names, in order
    std::vector<std::string> fault_rates; // "name=probability"
    std::int64_t hang_ms = 3000;
    std::int64_t refuse_ms = 1000;
    std::int64_t lookup_stale_s = 0;
    bool lookup_down = false;
    std::string port_file; // written once listening: "<port> <admin_port>\n"
    // Webhooks (webhooks.hpp): where, the variable holding the signing secret, and the faults.
    std::string webhook_url;
    std::string webhook_secret_env;
    std::int64_t webhook_delay_ms = 0;
    double webhook_drop_rate = 0;
    double webhook_duplicate_rate = 0;
    double webhook_out_of_order_rate = 0;
    double webhook_bad_signature_rate = 0;
};

void add_options(CLI::App& app, CommandLine& command_line);

// The server options the command line describes. Throws std::invalid_argument, with a message for
// the operator, if the key variable (or PayPal's secret variable, when named) is unset or empty, or
// a fault, rate or duration is invalid, or a webhook URL is not on loopback or comes without its
// secret's variable.
FakeProviderOptions to_options(const CommandLine& command_line,
                               const std::function<const char*(const char*)>& get_env);

} // namespace payrecon::fake
