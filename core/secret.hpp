#pragma once
// A secret value (API key, fingerprint secret, provider key). It never prints: streaming or
// formatting a Secret yields "***"; the value is reached only through reveal().

#include <ostream>
#include <string>
#include <utility>

namespace payrecon {

class Secret {
public:
    Secret() = default;
    explicit Secret(std::string value) : m_value(std::move(value)) {}
    Secret(const Secret&) = default;
    Secret& operator=(const Secret&) = default;
    Secret(Secret&&) noexcept = default;
    Secret& operator=(Secret&&) noexcept = default;
    ~Secret();

    const std::string& reveal() const noexcept { return m_value; }
    bool empty() const noexcept { return m_value.empty(); }

    friend std::ostream& operator<<(std::ostream& os, const Secret&) { return os << "***"; }

private:
    std::string m_value;
};

} // namespace payrecon
