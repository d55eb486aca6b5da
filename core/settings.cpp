#include "core/settings.hpp"

#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "core/fingerprint.hpp"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <regex>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace payrecon {

std::chrono::milliseconds parse_duration_ms(std::string_view text, std::string_view what) {
    const auto bad = [&] {
        return UsageError(std::string(what) + ": '" + std::string(text) + "' is not a duration",
                          "write a whole number and a unit: 250ms, 30s, 15m, 36h or 7d");
    };
    std::size_t unit_at = text.size();
    while (unit_at > 0 && (text[unit_at - 1] < '0' || text[unit_at - 1] > '9')) {
        --unit_at;
    }
    const auto digits = text.substr(0, unit_at);
    const auto unit = text.substr(unit_at);
    long long n = 0;
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size() || n < 0 ||
        n > 100LL * 365 * 24 * 3600) {
        throw bad();
    }
    if (unit == "ms") {
        return std::chrono::milliseconds(n);
    }
    if (unit == "s") {
        return std::chrono::seconds(n);
    }
    if (unit == "m") {
        return std::chrono::minutes(n);
    }
    if (unit == "h") {
        return std::chrono::hours(n);
    }
    if (unit == "d") {
        return std::chrono::hours(24 * n);
    }
    throw bad();
}

std::chrono::seconds parse_duration(std::string_view text, std::string_view what) {
    const auto ms = parse_duration_ms(text, what);
    if (ms.count() % 1000 != 0) {
        throw UsageError(std::string(what) + ": '" + std::string(text) + "' is not whole seconds",
                         "write 30s, 15m, 36h or 7d");
    }
    return std::chrono::duration_cast<std::chrono::seconds>(ms);
}

long long parse_utc_time(std::string_view text, std::string_view what) {
    static const std::regex k_time(R"(^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2}):(\d{2})Z)?$)");
    const std::string s(text);
    std::smatch m;
    const auto bad = [&] {
        return UsageError(std::string(what) + " '" + s + "' is not a UTC date or time",
                          "write 2026-12-01 (midnight UTC) or 2026-12-01T06:30:00Z");
    };
    if (!std::regex_match(s, m, k_time)) {
        throw bad();
    }
    std::tm tm{};
    tm.tm_year = std::stoi(m[1]) - 1900;
    tm.tm_mon = std::stoi(m[2]) - 1;
    tm.tm_mday = std::stoi(m[3]);
    if (m[4].matched) {
        tm.tm_hour = std::stoi(m[4]);
        tm.tm_min = std::stoi(m[5]);
        tm.tm_sec = std::stoi(m[6]);
    }
    const std::tm given = tm;
    const std::time_t t = timegm(&tm);
    // timegm normalises out-of-range fields (February 30th): refuse instead.
    if (t == static_cast<std::time_t>(-1) || tm.tm_mday != given.tm_mday ||
        tm.tm_mon != given.tm_mon || tm.tm_hour != given.tm_hour || tm.tm_min != given.tm_min ||
        tm.tm_sec != given.tm_sec) {
        throw bad();
    }
    return static_cast<long long>(t);
}

long long utc_day_start(long long unix_seconds) {
    return unix_seconds - ((unix_seconds % 86400) + 86400) % 86400;
}

std::chrono::seconds duration_from_env(const char* name, std::chrono::seconds fallback) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') {
        return fallback;
    }
    try {
        return parse_duration(value, name);
    } catch (const UsageError& e) {
        throw ConfigError(e.what(), e.hint());
    }
}

std::chrono::seconds minimum_idempotency_retention() {
    return duration_from_env("PAYRECON_MIN_IDEMPOTENCY_RETENTION",
                             k_default_minimum_idempotency_retention);
}

std::chrono::seconds idempotency_retention() {
    const auto retention =
        duration_from_env("PAYRECON_IDEMPOTENCY_RETENTION", std::chrono::hours(24 * 7));
    if (retention < minimum_idempotency_retention()) {
        throw ConfigError("PAYRECON_IDEMPOTENCY_RETENTION is shorter than the minimum of " +
                              std::to_string(minimum_idempotency_retention().count()) + "s",
                          "keys must outlive every client's retry window; raise it");
    }
    return retention;
}

std::chrono::seconds event_retention() {
    const auto retention =
        duration_from_env("PAYRECON_EVENT_RETENTION", std::chrono::hours(24 * 30));
    if (retention < k_minimum_event_retention) {
        throw ConfigError("PAYRECON_EVENT_RETENTION is shorter than the minimum of 24h",
                          "delivered events are kept at least a day: a replay or a consumer "
                          "that pulls needs them; raise it");
    }
    return retention;
}

std::chrono::seconds provider_event_retention() {
    const auto retention =
        duration_from_env("PAYRECON_PROVIDER_EVENT_RETENTION", std::chrono::hours(24 * 90));
    if (retention < k_minimum_provider_event_retention) {
        throw ConfigError("PAYRECON_PROVIDER_EVENT_RETENTION is shorter than the minimum of 31d",
                          "providers redeliver an event for up to 30 days, and a purged event "
                          "that comes again is stored as new: raise it to 31d or more");
    }
    return retention;
}

namespace {

// The secrets in `file` (one per line, the first the current one; '#' lines are comments), each
// at least 32 bytes; with `create_if_missing`, a missing file is created (0600) with one new
// random secret. `what` names the file in messages ("fingerprint secret"); `env` is the variable
// that points at an existing one.
std::vector<Secret> load_secret_lines(const std::filesystem::path& file, bool create_if_missing,
                                      const std::string& what, const std::string& env) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) {
        if (errno != ENOENT || !create_if_missing) {
            throw ConfigError("the " + what + " file " + file.string() +
                                  " cannot be read: " + std::strerror(errno),
                              "create it once and share it between every payrecon process of "
                              "this database: (umask 077; head -c 32 /dev/urandom | base64 > " +
                                  file.string() + "), or point " + env + " at the existing one");
        }
        const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) {
            const std::string line = base64url(random_bytes(32)) + "\n";
            const bool ok =
                ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                ::fsync(fd) == 0;
            ::close(fd);
            if (!ok) {
                throw ConfigError("cannot write the " + what + " file " + file.string());
            }
        } else if (errno != EEXIST) { // EEXIST: another process made it first; use theirs
            throw ConfigError("cannot create the " + what + " file " + file.string() + ": " +
                              std::strerror(errno));
        }
        return load_secret_lines(file, false, what, env);
    }
    if ((st.st_mode & 077) != 0) {
        throw ConfigError("the " + what + " file " + file.string() +
                              " is readable by group or others",
                          "chmod 600 " + file.string());
    }
    std::ifstream in(file);
    std::vector<Secret> secrets;
    for (std::string line; std::getline(in, line);) {
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
            line.pop_back();
        }
        if (line.empty() || line.front() == '#') {
            continue;
        }
        if (line.size() < 32) {
            throw ConfigError(
                "a secret in " + file.string() + " is shorter than 32 bytes",
                "use at least 32 random bytes, e.g. head -c 32 /dev/urandom | base64");
        }
        secrets.emplace_back(std::move(line));
    }
    if (secrets.empty()) {
        throw ConfigError("the " + what + " file " + file.string() + " holds no secret");
    }
    return secrets;
}

} // namespace

FingerprintKeys load_fingerprint_keys(const std::filesystem::path& file, bool create_if_missing) {
    std::vector<Secret> secrets = load_secret_lines(file, create_if_missing, "fingerprint secret",
                                                    "PAYRECON_FINGERPRINT_SECRET_FILE");
    Secret current = std::move(secrets.front());
    secrets.erase(secrets.begin());
    return FingerprintKeys(std::move(current), std::move(secrets));
}

SealingKeys load_sealing_keys(const std::filesystem::path& file, bool create_if_missing) {
    return SealingKeys(
        load_secret_lines(file, create_if_missing, "endpoint key", "PAYRECON_ENDPOINT_KEY_FILE"));
}

} // namespace payrecon
