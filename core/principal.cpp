#include "core/principal.hpp"

#include "core/encoding.hpp"
#include "core/fingerprint.hpp"

namespace payrecon {

std::string_view to_string(Role role) {
    switch (role) {
    case Role::admin:
        return "admin";
    case Role::writer:
        return "writer";
    case Role::reader:
        return "reader";
    }
    return "reader";
}

std::optional<Role> parse_role(std::string_view name) {
    for (const Role r : {Role::admin, Role::writer, Role::reader}) {
        if (to_string(r) == name) {
            return r;
        }
    }
    return std::nullopt;
}

bool role_allows(Role role, Permission permission) {
    switch (permission) {
    case Permission::create_payment:
    case Permission::create_refund:
    case Permission::capture_payment:
        return role == Role::admin || role == Role::writer;
    case Permission::read_payment:
        return true;
    }
    return false;
}

Secret generate_api_key() {
    return Secret("prk_" + base64url(random_bytes(32)));
}

std::string api_key_digest(const Secret& api_key) {
    return sha256_hex(api_key.reveal());
}

} // namespace payrecon
