#include "engine/credential_gate.hpp"

#include "core/credential_refusal.hpp"

namespace payrecon::engine {

CredentialGate::CredentialGate(std::map<std::string, std::string> checks)
    : m_checks(std::move(checks)) {}

CredentialGate::Account& CredentialGate::account(const std::string& provider) {
    std::lock_guard lock(m_mutex);
    auto& slot = m_accounts[provider];
    if (!slot) {
        slot = std::make_unique<Account>();
    }
    return *slot;
}

std::optional<CredentialGate::Pass> CredentialGate::enter(const std::string& provider) {
    Account& a = account(provider);
    {
        std::lock_guard lock(m_mutex);
        if (a.state == State::refused) {
            return std::nullopt;
        }
        if (a.state == State::proven) {
            return Pass(this, provider, {});
        }
    }
    std::unique_lock probe(a.probe); // the caller proving the credentials finishes first
    std::lock_guard lock(m_mutex);
    switch (a.state) {
    case State::refused:
        return std::nullopt;
    case State::proven:
        return Pass(this, provider, {});
    case State::unproven:
        break;
    }
    return Pass(this, provider, std::move(probe));
}

void CredentialGate::Pass::answered(bool answered_at_all, int http_status,
                                    CredentialRefusal refusal) {
    Account& a = m_gate->account(m_provider);
    std::lock_guard lock(m_gate->m_mutex);
    if (answered_at_all && refuses_credentials(http_status)) {
        if (a.state != State::refused) {
            a.state = State::refused;
            refusal.provider = m_provider;
            refusal.http_status = http_status;
            const auto c = m_gate->m_checks.find(m_provider);
            refusal.check = c == m_gate->m_checks.end() ? "" : c->second;
            m_gate->m_refusals.push_back(std::move(refusal));
        }
        return;
    }
    if (answered_at_all && a.state == State::unproven) {
        a.state = State::proven;
    }
}

bool CredentialGate::refused(const std::string& provider) const {
    std::lock_guard lock(m_mutex);
    const auto a = m_accounts.find(provider);
    return a != m_accounts.end() && a->second->state == State::refused;
}

std::vector<CredentialRefusal> CredentialGate::refusals() const {
    std::lock_guard lock(m_mutex);
    return m_refusals;
}

std::string CredentialGate::check_of(const std::string& provider) const {
    const auto c = m_checks.find(provider);
    return c == m_checks.end() ? "" : c->second;
}

ConfigError credentials_error(const std::vector<CredentialRefusal>& refusals,
                              const std::string& effect, const std::string& then) {
    std::string what;
    std::string check;
    for (const CredentialRefusal& r : refusals) {
        what += (what.empty() ? "" : "; ") + std::string("provider ") + r.provider +
                " refused our credentials (HTTP " + std::to_string(r.http_status) +
                (r.code.empty() ? "" : " " + r.code) + ")" + (r.call.empty() ? "" : " " + r.call);
        check += (check.empty() ? "" : "; ") +
                 (r.check.empty() ? "the credentials of provider " + r.provider : r.check);
    }
    return ConfigError(what + ": " + effect, "check " + check +
                                                 " (docs/operations.md, \"A provider refuses our "
                                                 "credentials\"), then " +
                                                 then);
}

} // namespace payrecon::engine
