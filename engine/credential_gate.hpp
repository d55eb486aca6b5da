#pragma once
// What one process knows of each provider account's credentials, shared by its executor threads
// (and its reconciler): a wrong credential costs one call, however many threads there are.
//
// A provider answering 401 or 403 (core/credential_refusal) refuses our credentials for every
// payment alike, and a process reads its credentials once, at start: nothing but an operator's fix
// and a new process changes the answer. So until a call of an account has been answered, its calls
// go one at a time (the first proves the credentials); once an answer other than 401/403 came
// back, they go freely; once one was 401/403, the account is refused, and nothing of this process
// calls it again.

#include "core/errors.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace payrecon::engine {

// A provider account that refused our credentials, and what to fix.
struct CredentialRefusal {
    std::string provider;
    int http_status = 0;    // 401 or 403
    std::string code;       // the provider's, as the adapter read it ("authentication", ...)
    std::string message;    // the provider's, printable, never a secret
    std::string check;      // "the API key in STRIPE_API_KEY (provider stripe)"; empty: unknown
    std::string payment_id; // the payment whose call was refused
    std::string call;       // "sending a payment", "looking a payment up"
};

class CredentialGate {
public:
    // `checks`: per provider name, what an operator fixes when it refuses our credentials (the
    // environment variables that hold them).
    explicit CredentialGate(std::map<std::string, std::string> checks = {});
    CredentialGate(const CredentialGate&) = delete;
    CredentialGate& operator=(const CredentialGate&) = delete;

    // The right to make one call of an account. While the account's credentials are unproven it
    // is held by one caller at a time; answered() records what the call showed; its destructor
    // lets the next caller in.
    class Pass {
    public:
        Pass(Pass&&) noexcept = default;
        Pass& operator=(Pass&&) noexcept = default;
        ~Pass() = default;
        // What the call came to: `http_status` 401 or 403 refuses the account's credentials
        // (`refusal` says what the provider said); any other answer (`answered_at_all`: a
        // response came, or may have) proves them; a call that never reached the provider proves
        // nothing.
        void answered(bool answered_at_all, int http_status, CredentialRefusal refusal = {});

    private:
        friend class CredentialGate;
        Pass(CredentialGate* gate, std::string provider, std::unique_lock<std::mutex> probe)
            : m_gate(gate), m_provider(std::move(provider)), m_probe(std::move(probe)) {}
        CredentialGate* m_gate;
        std::string m_provider;
        std::unique_lock<std::mutex> m_probe; // held while the credentials are unproven
    };

    // Waits while another caller is proving `provider`'s credentials. nullopt: the account refused
    // them; do not call it.
    std::optional<Pass> enter(const std::string& provider);

    bool refused(const std::string& provider) const;
    // Every refusal so far, in the order they came; each with its `check` filled in.
    std::vector<CredentialRefusal> refusals() const;
    // What an operator fixes when `provider` refuses our credentials; empty if not known.
    std::string check_of(const std::string& provider) const;

private:
    enum class State { unproven, proven, refused };
    struct Account {
        std::mutex probe; // held by the one caller proving the credentials
        State state = State::unproven;
    };
    Account& account(const std::string& provider);

    std::map<std::string, std::string> m_checks;
    mutable std::mutex m_mutex; // m_accounts, each account's state, m_refusals
    std::map<std::string, std::unique_ptr<Account>> m_accounts;
    std::vector<CredentialRefusal> m_refusals;
};

// The refusals as one operator error (exit 4, ConfigError): what each provider said while doing
// what, `effect` (what the run did about it), and what to fix -- each refusal's check -- and
// `then` (what to run once it is fixed). Never a secret: the checks name variables.
ConfigError credentials_error(const std::vector<CredentialRefusal>& refusals,
                              const std::string& effect, const std::string& then);

} // namespace payrecon::engine
