#include "core/sealed.hpp"

#include "core/fingerprint.hpp"

#include <memory>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdexcept>

namespace payrecon {

namespace {

constexpr unsigned char k_version = 1;
constexpr std::size_t k_nonce = 12;
constexpr std::size_t k_tag = 16;

using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

CipherCtx new_ctx() {
    CipherCtx ctx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
    if (!ctx) {
        throw std::runtime_error("OpenSSL: cannot allocate a cipher context");
    }
    return ctx;
}

const unsigned char* bytes(std::string_view s) {
    return reinterpret_cast<const unsigned char*>(s.data());
}

std::optional<std::string> open_with(const std::string& key, std::string_view sealed,
                                     std::string_view aad) {
    const std::string_view nonce = sealed.substr(1, k_nonce);
    const std::string_view body = sealed.substr(1 + k_nonce, sealed.size() - 1 - k_nonce - k_tag);
    std::string tag(sealed.substr(sealed.size() - k_tag));
    CipherCtx ctx = new_ctx();
    std::string out(body.size(), '\0');
    int len = 0;
    int total = 0;
    if (EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, bytes(key), bytes(nonce)) != 1 ||
        EVP_DecryptUpdate(ctx.get(), nullptr, &len, bytes(aad), static_cast<int>(aad.size())) !=
            1 ||
        EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &len,
                          bytes(body), static_cast<int>(body.size())) != 1) {
        return std::nullopt;
    }
    total = len;
    if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(k_tag), tag.data()) !=
            1 ||
        EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(out.data()) + total,
                            &len) != 1) {
        return std::nullopt;
    }
    out.resize(static_cast<std::size_t>(total + len));
    return out;
}

} // namespace

SealingKeys::SealingKeys(std::vector<Secret> secrets) {
    if (secrets.empty()) {
        throw std::invalid_argument("no sealing key");
    }
    for (const Secret& s : secrets) {
        if (s.reveal().size() < 32) {
            throw std::invalid_argument("a sealing key is shorter than 32 bytes");
        }
        std::string key(SHA256_DIGEST_LENGTH, '\0');
        SHA256(bytes(s.reveal()), s.reveal().size(), reinterpret_cast<unsigned char*>(key.data()));
        m_keys.emplace_back(std::move(key));
    }
}

std::string SealingKeys::seal(std::string_view plaintext, std::string_view aad) const {
    const std::string nonce = random_bytes(k_nonce);
    const std::string& key = m_keys.front().reveal();
    CipherCtx ctx = new_ctx();
    std::string out;
    out.reserve(1 + k_nonce + plaintext.size() + k_tag);
    out += static_cast<char>(k_version);
    out += nonce;
    std::string body(plaintext.size(), '\0');
    int len = 0;
    int total = 0;
    if (EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, bytes(key), bytes(nonce)) != 1 ||
        EVP_EncryptUpdate(ctx.get(), nullptr, &len, bytes(aad), static_cast<int>(aad.size())) !=
            1 ||
        EVP_EncryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(body.data()), &len,
                          bytes(plaintext), static_cast<int>(plaintext.size())) != 1) {
        throw std::runtime_error("OpenSSL: AES-256-GCM encryption failed");
    }
    total = len;
    if (EVP_EncryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(body.data()) + total,
                            &len) != 1) {
        throw std::runtime_error("OpenSSL: AES-256-GCM encryption failed");
    }
    body.resize(static_cast<std::size_t>(total + len));
    std::string tag(k_tag, '\0');
    if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(k_tag), tag.data()) !=
        1) {
        throw std::runtime_error("OpenSSL: AES-256-GCM tag failed");
    }
    out += body;
    out += tag;
    return out;
}

std::optional<Secret> SealingKeys::open(std::string_view sealed, std::string_view aad) const {
    if (sealed.size() < 1 + k_nonce + k_tag ||
        static_cast<unsigned char>(sealed.front()) != k_version) {
        return std::nullopt;
    }
    for (const Secret& key : m_keys) {
        if (auto plain = open_with(key.reveal(), sealed, aad)) {
            return Secret(std::move(*plain));
        }
    }
    return std::nullopt;
}

} // namespace payrecon
