#pragma once
// Internal to providers/config*.cpp: what reading a configuration file's fields shares -- the
// refusal naming the file and the field, and the checks of URLs and lists in its messages.

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace payrecon::providers::config_fields {

// Throws ConfigError "<source>: <field>: <what>" with `hint` (or "fix the field and run again").
[[noreturn]] void bad(const std::filesystem::path& source, const std::string& field,
                      const std::string& what, const std::string& hint = {});

// True if the URL's authority (between "://" and the first '/', '?' or '#') holds an '@': user
// information, which is credentials or a host in disguise ("https://api.stripe.com@evil.example").
bool has_userinfo(const std::string& url);

// True for http:// to 127.0.0.0/8, localhost or [::1]: the test servers plain http is allowed for.
bool loopback_host(const std::string& url);

// "a, b and c".
std::string and_list(const std::vector<std::string_view>& names);

} // namespace payrecon::providers::config_fields
