#include "tests/fake_provider/command_line.hpp"

#include <regex>
#include <stdexcept>

namespace payrecon::fake {

void add_options(CLI::App& app, CommandLine& c) {
    app.add_option(
           "--port", c.port,
           "main port on 127.0.0.1 (Stripe, Adyen, Checkout.com, PayPal and Square); 0: any "
           "free port")
        ->capture_default_str()
        ->check(CLI::Range(0, 65535));
    app.add_option("--admin-port", c.admin_port, "admin API port on 127.0.0.1; 0: any free port")
        ->capture_default_str()
        ->check(CLI::Range(0, 65535));
    app.add_option("--api-key-env", c.api_key_env,
                   "name of the environment variable holding the accepted API key "
                   "(Authorization: Bearer <key> for Stripe, Checkout.com and Square, X-API-Key "
                   "for Adyen); the key itself never goes on the command line")
        ->required();
    app.add_option("--key-retention-s", c.key_retention_s,
                   "how long a Stripe or Adyen Idempotency-Key is remembered, in fake seconds")
        ->capture_default_str();
    app.add_option("--checkout-key-retention-s", c.checkout_key_retention_s,
                   "how long a Checkout.com Cko-Idempotency-Key keeps its 2xx, in fake seconds")
        ->capture_default_str();
    app.add_option("--paypal-key-retention-s", c.paypal_key_retention_s,
                   "how long a PayPal-Request-Id is remembered, in fake seconds")
        ->capture_default_str();
    app.add_option("--paypal-refund-key-retention-s", c.paypal_refund_key_retention_s,
                   "how long a refund's PayPal-Request-Id is remembered, in fake seconds (45 days, "
                   "as PayPal's Payments document says)")
        ->capture_default_str();
    app.add_option("--square-key-retention-s", c.square_key_retention_s,
                   "how long a Square idempotency_key holds its payment, in fake seconds (Square "
                   "does not publish its own)")
        ->capture_default_str();
    app.add_option("--paypal-client-id", c.paypal_client_id,
                   "the PayPal client ID the token endpoint accepts")
        ->capture_default_str();
    app.add_option("--paypal-client-secret-env", c.paypal_client_secret_env,
                   "name of the environment variable holding PayPal's client secret; without it "
                   "every PayPal token request is refused");
    app.add_option("--paypal-token-ttl-s", c.paypal_token_ttl_s,
                   "how long a PayPal access token lives (its expires_in), in fake seconds")
        ->capture_default_str()
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{365} * 86400));
    app.add_flag("--no-idempotency", c.no_idempotency,
                 "ignore every dialect's idempotency key (the headers, Square's idempotency_key "
                 "field): every POST executes (a provider without keys)");
    app.add_flag("--no-lookup", c.no_lookup,
                 "no lookup: Stripe's search answers 404 resource_missing, Checkout.com's "
                 "GET /payments?reference= 404, PayPal's transaction search 403, Square's "
                 "ListPayments 403 INSUFFICIENT_SCOPES");
    app.add_option("--latency-ms", c.latency_ms, "latency added to every main-port request")
        ->capture_default_str();
    app.add_option("--seed", c.seed, "seed for the fault rates")->capture_default_str();
    app.add_option("--fault-next", c.fault_next,
                   "faults applied to the next POSTs in order (comma separated, repeatable)")
        ->delimiter(',');
    app.add_option("--fault-rate", c.fault_rates,
                   "NAME=PROBABILITY, drawn once per POST (repeatable)");
    app.add_option("--hang-ms", c.hang_ms, "how long execute_then_hang holds the connection")
        ->capture_default_str();
    app.add_option("--refuse-ms", c.refuse_ms, "how long refuse keeps the listener closed")
        ->capture_default_str();
    app.add_option("--lookup-stale-s", c.lookup_stale_s,
                   "search finds a PaymentIntent only this many seconds after its creation")
        ->capture_default_str();
    app.add_flag("--lookup-down", c.lookup_down,
                 "search and list answer 503 (every dialect's lookup and listing)");
    app.add_option("--port-file", c.port_file,
                   "write \"<port> <admin_port>\" to this file once listening");
    app.add_option("--webhook-url", c.webhook_url,
                   "after each execution, POST the provider's signed notification here (a "
                   "loopback address: payrecon serve's /v1/providers/<name>/webhooks)");
    app.add_option("--webhook-secret-env", c.webhook_secret_env,
                   "the environment variable holding the webhook signing secret (Stripe's "
                   "whsec_..., Adyen's hex HMAC key)");
    app.add_option("--webhook-delay-ms", c.webhook_delay_ms, "delay before each notification")
        ->check(CLI::Range(std::int64_t{0}, std::int64_t{3'600'000}));
    app.add_option("--webhook-drop-rate", c.webhook_drop_rate, "share of notifications never sent")
        ->check(CLI::Range(0.0, 1.0));
    app.add_option("--webhook-duplicate-rate", c.webhook_duplicate_rate,
                   "share of notifications sent twice")
        ->check(CLI::Range(0.0, 1.0));
    app.add_option("--webhook-out-of-order-rate", c.webhook_out_of_order_rate,
                   "share of Stripe notifications followed by a late payment_intent.processing")
        ->check(CLI::Range(0.0, 1.0));
    app.add_option("--webhook-bad-signature-rate", c.webhook_bad_signature_rate,
                   "share of notifications signed with another secret")
        ->check(CLI::Range(0.0, 1.0));
}

FakeProviderOptions to_options(const CommandLine& c,
                               const std::function<const char*(const char*)>& get_env) {
    FakeProviderOptions options;
    options.port = c.port;
    options.admin_port = c.admin_port;
    const char* key = get_env(c.api_key_env.c_str());
    if (key == nullptr || *key == '\0') {
        throw std::invalid_argument("the environment variable " + c.api_key_env +
                                    " (named by --api-key-env) is unset or empty; export the "
                                    "API key the fake provider should accept there");
    }
    options.account.api_key = Secret(key);
    if (c.key_retention_s < 0) {
        throw std::invalid_argument("--key-retention-s must not be negative");
    }
    options.stripe.key_retention = std::chrono::seconds(c.key_retention_s);
    options.account.idempotency = !c.no_idempotency;
    options.account.lookup = !c.no_lookup;
    for (const auto& [flag, value] :
         {std::pair{"--checkout-key-retention-s", c.checkout_key_retention_s},
          std::pair{"--paypal-key-retention-s", c.paypal_key_retention_s},
          std::pair{"--paypal-refund-key-retention-s", c.paypal_refund_key_retention_s},
          std::pair{"--square-key-retention-s", c.square_key_retention_s}}) {
        if (value < 0) {
            throw std::invalid_argument(std::string(flag) + " must not be negative");
        }
    }
    options.checkout.key_retention = std::chrono::seconds(c.checkout_key_retention_s);
    options.paypal.key_retention = std::chrono::seconds(c.paypal_key_retention_s);
    options.paypal.refund_key_retention = std::chrono::seconds(c.paypal_refund_key_retention_s);
    options.square.key_retention = std::chrono::seconds(c.square_key_retention_s);
    options.paypal.token_ttl = std::chrono::seconds(c.paypal_token_ttl_s);
    if (c.paypal_client_id.empty()) {
        throw std::invalid_argument("--paypal-client-id must not be empty");
    }
    options.paypal.client_id = c.paypal_client_id;
    if (!c.paypal_client_secret_env.empty()) {
        const char* secret = get_env(c.paypal_client_secret_env.c_str());
        if (secret == nullptr || *secret == '\0') {
            throw std::invalid_argument("the environment variable " + c.paypal_client_secret_env +
                                        " (named by --paypal-client-secret-env) is unset or "
                                        "empty; export PayPal's client secret there");
        }
        options.paypal.client_secret = Secret(secret);
    }

    // The same parser as POST /__admin/faults, so both accept exactly the same configs.
    nlohmann::json faults;
    faults["latency_ms"] = c.latency_ms;
    faults["seed"] = c.seed;
    faults["next"] = c.fault_next;
    faults["rates"] = nlohmann::json::object();
    for (const std::string& rate : c.fault_rates) {
        const auto eq = rate.find('=');
        double p = -1.0;
        try {
            std::size_t used = 0;
            if (eq != std::string::npos) {
                p = std::stod(rate.substr(eq + 1), &used);
                if (used != rate.size() - eq - 1) {
                    p = -1.0;
                }
            }
        } catch (const std::exception&) {
            p = -1.0;
        }
        if (p < 0.0) {
            throw std::invalid_argument("--fault-rate " + rate + " is not NAME=PROBABILITY");
        }
        faults["rates"][rate.substr(0, eq)] = p;
    }
    faults["hang_ms"] = c.hang_ms;
    faults["refuse_ms"] = c.refuse_ms;
    faults["lookup_stale_s"] = c.lookup_stale_s;
    faults["lookup_down"] = c.lookup_down;
    options.faults = FaultConfig::from_json(faults);

    if (!c.webhook_url.empty()) {
        static const std::regex k_loopback(
            R"(^http://(127\.0\.0\.1|localhost|\[::1\])(:[0-9]{1,5})?/[\x21-\x7e]*$)");
        if (!std::regex_match(c.webhook_url, k_loopback)) {
            throw std::invalid_argument(
                "--webhook-url " + c.webhook_url +
                " is not an http:// address on loopback (127.0.0.1, localhost or [::1]): the fake "
                "provider notifies only this machine");
        }
        const char* secret =
            c.webhook_secret_env.empty() ? nullptr : get_env(c.webhook_secret_env.c_str());
        if (secret == nullptr || *secret == '\0') {
            throw std::invalid_argument(
                "--webhook-url needs --webhook-secret-env naming a variable that holds the "
                "webhook signing secret (set and not empty)");
        }
        options.webhooks.url = c.webhook_url;
        options.webhooks.secret = secret;
        options.webhooks.delay = std::chrono::milliseconds(c.webhook_delay_ms);
        options.webhooks.drop_rate = c.webhook_drop_rate;
        options.webhooks.duplicate_rate = c.webhook_duplicate_rate;
        options.webhooks.out_of_order_rate = c.webhook_out_of_order_rate;
        options.webhooks.bad_signature_rate = c.webhook_bad_signature_rate;
        options.webhooks.seed = c.seed;
    }
    return options;
}

} // namespace payrecon::fake
