#include "api/allowance.hpp"

namespace payrecon::api {

Allowance::Hold::~Hold() {
    m_owner.release(m_holder, m_bytes);
}

void Allowance::Hold::charge(std::size_t bytes) {
    m_bytes += bytes;
    m_owner.add_bytes(m_holder, bytes);
}

std::shared_ptr<Allowance::Hold> Allowance::admit(const std::string& holder, AllowanceUse* use) {
    {
        std::lock_guard lock(m_mutex);
        const auto it = m_holders.find(holder);
        const AllowanceUse now = it == m_holders.end() ? AllowanceUse{} : it->second;
        if (use != nullptr) {
            *use = now;
        }
        if (now.requests >= m_limits.max_requests ||
            now.unsent_bytes >= m_limits.max_unsent_bytes ||
            (m_limits.max_total_unsent_bytes != 0 &&
             m_total.unsent_bytes >= m_limits.max_total_unsent_bytes)) {
            return nullptr;
        }
        ++m_holders[holder].requests;
        ++m_total.requests;
    }
    return std::make_shared<Hold>(*this, holder);
}

AllowanceUse Allowance::use(const std::string& holder) const {
    std::lock_guard lock(m_mutex);
    const auto it = m_holders.find(holder);
    return it == m_holders.end() ? AllowanceUse{} : it->second;
}

AllowanceUse Allowance::total() const {
    std::lock_guard lock(m_mutex);
    return m_total;
}

void Allowance::add_bytes(const std::string& holder, std::size_t bytes) {
    std::lock_guard lock(m_mutex);
    m_holders[holder].unsent_bytes += bytes;
    m_total.unsent_bytes += bytes;
}

void Allowance::release(const std::string& holder, std::size_t bytes) {
    std::lock_guard lock(m_mutex);
    const auto it = m_holders.find(holder);
    if (it == m_holders.end()) {
        return;
    }
    --it->second.requests;
    it->second.unsent_bytes -= bytes;
    --m_total.requests;
    m_total.unsent_bytes -= bytes;
    if (it->second.requests == 0) {
        m_holders.erase(it);
    }
}

} // namespace payrecon::api
