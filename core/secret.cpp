#include "core/secret.hpp"

#include <openssl/crypto.h>

namespace payrecon {

Secret::~Secret() {
    if (!m_value.empty()) {
        OPENSSL_cleanse(m_value.data(), m_value.size());
    }
}

} // namespace payrecon
