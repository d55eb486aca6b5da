#include "store/db.hpp"

#include "store/pq.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <libpq-fe.h>
#include <mutex>
#include <optional>
#include <string_view>

namespace payrecon::store {

namespace {

// The parameters libpq treats as secrets (shown as '*' in its option table): password and
// sslpassword in libpq 15, and any a later libpq adds.
const std::vector<std::string>& secret_keywords() {
    static const std::vector<std::string> k_secrets = [] {
        std::vector<std::string> out;
        if (PQconninfoOption* options = PQconndefaults()) {
            for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
                if (o->dispchar != nullptr &&
                    std::string_view(o->dispchar).find('*') != std::string_view::npos) {
                    out.emplace_back(o->keyword);
                }
            }
            PQconninfoFree(options);
        }
        for (const char* known : {"password", "sslpassword"}) {
            if (std::find(out.begin(), out.end(), known) == out.end()) {
                out.emplace_back(known);
            }
        }
        return out;
    }();
    return k_secrets;
}

bool is_secret(std::string_view name) {
    const auto& secrets = secret_keywords();
    return std::find(secrets.begin(), secrets.end(), name) != secrets.end();
}

std::string percent_decode(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '%' && i + 2 < text.size() &&
            std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
            out += static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16));
            i += 2;
        } else {
            out += text[i];
        }
    }
    return out;
}

// A parameter as written in a connection string: its name (decoded) and where its value is.
struct Param {
    std::string name;
    std::size_t value_begin = 0;
    std::size_t value_end = 0;
};

// The parameters of `url` as libpq reads them: the URI form's user:password@ (as "password") and
// query parameters, or the keyword = value pairs (values quoted or not, backslash escapes).
std::vector<Param> params_of(const std::string& url) {
    std::vector<Param> out;
    std::size_t start = std::string::npos;
    for (const char* prefix : {"postgresql://", "postgres://"}) {
        if (url.rfind(prefix, 0) == 0) {
            start = std::strlen(prefix);
        }
    }
    if (start != std::string::npos) {
        // libpq: the user information runs from the prefix to an '@' that comes before any '/'.
        const std::size_t end = url.find_first_of("@/", start);
        std::size_t rest = start;
        if (end != std::string::npos && url[end] == '@') {
            const std::size_t colon = url.find(':', start);
            if (colon < end) {
                out.push_back({"password", colon + 1, end});
            }
            rest = end + 1;
        }
        const std::size_t query = url.find('?', rest);
        for (std::size_t at = query; at != std::string::npos && at < url.size();) {
            const std::size_t begin = at + 1;
            const std::size_t amp = url.find('&', begin);
            const std::size_t stop = amp == std::string::npos ? url.size() : amp;
            const std::size_t eq = url.find('=', begin);
            if (eq < stop) {
                out.push_back({percent_decode(std::string_view(url).substr(begin, eq - begin)),
                               eq + 1, stop});
            }
            at = amp;
        }
        return out;
    }
    const auto space = [&](std::size_t i) {
        return i < url.size() && std::isspace(static_cast<unsigned char>(url[i]));
    };
    std::size_t i = 0;
    while (i < url.size()) {
        while (space(i)) {
            ++i;
        }
        const std::size_t name_begin = i;
        while (i < url.size() && url[i] != '=' && !space(i)) {
            ++i;
        }
        const std::string name = url.substr(name_begin, i - name_begin);
        while (space(i)) {
            ++i;
        }
        if (i >= url.size() || url[i] != '=') {
            break; // not keyword/value text libpq would accept; nothing more to find
        }
        ++i;
        while (space(i)) {
            ++i;
        }
        const std::size_t value_begin = i;
        if (i < url.size() && url[i] == '\'') {
            for (++i; i < url.size() && url[i] != '\''; ++i) {
                if (url[i] == '\\') {
                    ++i;
                }
            }
            i = std::min(i + 1, url.size());
        } else {
            for (; i < url.size() && !space(i); ++i) {
                if (url[i] == '\\') {
                    ++i;
                }
            }
            i = std::min(i, url.size());
        }
        out.push_back({name, value_begin, i});
    }
    return out;
}

// The secret options libpq itself finds in `url` with a value other than "***"; nullopt if libpq
// cannot parse it.
std::optional<std::vector<std::string>> libpq_secrets(const std::string& url) {
    char* error = nullptr;
    PQconninfoOption* options = PQconninfoParse(url.c_str(), &error);
    if (options == nullptr) {
        PQfreemem(error);
        return std::nullopt;
    }
    std::vector<std::string> out;
    for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
        if (o->val != nullptr && *o->val != '\0' && std::string_view(o->val) != "***" &&
            is_secret(o->keyword)) {
            out.emplace_back(o->keyword);
        }
    }
    PQconninfoFree(options);
    return out;
}

std::mutex g_application_name_mutex;
std::string g_application_name;

// `url` with `fallback_application_name` added in its own form: a URI's query parameter
// (percent-encoded), or a quoted keyword/value pair.
std::string with_application_name(const std::string& url, const std::string& name) {
    const bool uri = url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0;
    std::string out = url;
    if (uri) {
        static constexpr char k_hex[] = "0123456789ABCDEF";
        out += url.find('?') == std::string::npos ? "?" : "&";
        out += "fallback_application_name=";
        for (const char c : name) {
            const auto u = static_cast<unsigned char>(c);
            if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~') {
                out += c;
            } else {
                out += '%';
                out += k_hex[u >> 4];
                out += k_hex[u & 0xf];
            }
        }
        return out;
    }
    out += " fallback_application_name='";
    for (const char c : name) {
        if (c == '\\' || c == '\'') {
            out += '\\';
        }
        out += c;
    }
    out += "'";
    return out;
}

} // namespace

void set_application_name(std::string name) {
    std::lock_guard lock(g_application_name_mutex);
    g_application_name = std::move(name);
}

std::string redact_url(const std::string& url) {
    std::string out = url;
    const std::vector<Param> params = params_of(url);
    for (auto p = params.rbegin(); p != params.rend(); ++p) { // back to front: offsets stay valid
        if (is_secret(p->name) && p->value_end > p->value_begin) {
            out.replace(p->value_begin, p->value_end - p->value_begin, "***");
        }
    }
    const auto left = libpq_secrets(out);
    if (left && !left->empty()) {
        return "(a database URL holding a secret; not shown)";
    }
    return out;
}

std::vector<std::string> url_secret_names(const std::string& url) {
    if (auto found = libpq_secrets(url)) {
        return *found;
    }
    // Text libpq refuses still must not pass with a secret in it.
    std::vector<std::string> out;
    for (const Param& p : params_of(url)) {
        if (is_secret(p.name) && p.value_end > p.value_begin &&
            std::find(out.begin(), out.end(), p.name) == out.end()) {
            out.push_back(p.name);
        }
    }
    return out;
}

pqxx::connection& Db::Impl::connection() {
    if (!conn) {
        try {
            std::string name;
            {
                std::lock_guard lock(g_application_name_mutex);
                name = g_application_name;
            }
            conn.emplace(name.empty() ? url : with_application_name(url, name));
        } catch (const pqxx::broken_connection& e) {
            throw DatabaseUnavailable(
                "cannot connect to the database at " + redact_url(url) + ": " + e.what(),
                "check that PostgreSQL is running and that the database URL is right");
        }
        prepared.clear();
    }
    return *conn;
}

void Db::Impl::prepare(const std::string& name, const std::string& sql) {
    pqxx::connection& c = connection();
    if (prepared.insert(name).second) {
        c.prepare(name, sql);
    }
}

Db::Db(std::string url) : m_url(std::move(url)), m_impl(std::make_unique<Impl>()) {
    m_impl->url = m_url;
    m_impl->connection();
}

Db::~Db() = default;

Db::Impl& Db::impl() {
    return *m_impl;
}

} // namespace payrecon::store
