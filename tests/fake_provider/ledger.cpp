#include "tests/fake_provider/ledger.hpp"

#include <algorithm>
#include <charconv>
#include <ctime>

namespace payrecon::fake {

std::string_view to_string(SocketAction action) {
    switch (action) {
    case SocketAction::respond:
        return "respond";
    case SocketAction::close_fin:
        return "fin";
    case SocketAction::close_rst:
        return "rst";
    case SocketAction::hang_then_fin:
        return "hang";
    case SocketAction::partial_then_fin:
        return "partial";
    }
    return "respond";
}

Ledger::Ledger() : m_fault_rng(m_faults.seed), m_id_rng(std::random_device{}()) {}

void Ledger::set_faults(FaultConfig config) {
    const auto held = lock();
    m_faults = std::move(config);
    m_fault_rng.seed(m_faults.seed);
    m_refusals_drawn = 0;
}

FaultConfig Ledger::faults() const {
    const auto held = lock();
    return m_faults;
}

Fault Ledger::draw_fault_locked() {
    Fault fault = Fault::none;
    if (!m_faults.next.empty()) {
        const Fault head = m_faults.next.front();
        if (head == Fault::refuse) {
            return Fault::none; // the listener takes it (take_refusal), not a request
        }
        m_faults.next.erase(m_faults.next.begin());
        fault = head;
    } else if (!m_faults.rates.empty()) {
        const double u = std::uniform_real_distribution<double>(0.0, 1.0)(m_fault_rng);
        double cumulative = 0.0;
        for (const Fault f : all_faults()) {
            const auto it = m_faults.rates.find(f);
            if (it == m_faults.rates.end()) {
                continue;
            }
            cumulative += it->second;
            if (u < cumulative) {
                if (f == Fault::refuse) {
                    ++m_refusals_drawn; // this POST is served; the listener closes after it
                    return Fault::none;
                }
                fault = f;
                break;
            }
        }
    }
    if (fault != Fault::none) {
        ++m_faults_applied[fault];
    }
    return fault;
}

std::optional<std::chrono::milliseconds> Ledger::take_refusal() {
    const auto held = lock();
    if (!m_faults.next.empty() && m_faults.next.front() == Fault::refuse) {
        m_faults.next.erase(m_faults.next.begin());
    } else if (m_refusals_drawn > 0) {
        --m_refusals_drawn;
    } else {
        return std::nullopt;
    }
    ++m_faults_applied[Fault::refuse];
    return m_faults.refuse;
}

void Ledger::advance_clock(std::chrono::seconds by) {
    const auto held = lock();
    m_clock_offset += by;
}

std::chrono::system_clock::time_point Ledger::now() const {
    const auto held = lock();
    return now_locked();
}

std::chrono::system_clock::time_point Ledger::now_locked() const {
    return std::chrono::system_clock::now() + m_clock_offset;
}

std::string Ledger::random_id_locked(std::string_view prefix, std::size_t length,
                                     std::string_view alphabet) {
    std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
    std::string id(prefix);
    for (std::size_t i = 0; i < length; ++i) {
        id += alphabet[pick(m_id_rng)];
    }
    return id;
}

void Ledger::count_delivery_locked(const std::string& operation_id) {
    ++m_deliveries;
    ++m_deliveries_by_operation[operation_id];
}

void Ledger::count_execution_locked(const std::string& operation_id) {
    ++m_executions[operation_id];
}

void Ledger::add_charged_locked(std::string_view currency, std::int64_t amount) {
    m_charged[to_lower_ascii(currency)] += amount;
}

void Ledger::add_refunded_locked(std::string_view currency, std::int64_t amount) {
    m_charged[to_lower_ascii(currency)] -= amount;
    m_refunded[to_lower_ascii(currency)] += amount;
}

void Ledger::reset_locked() {
    m_faults = FaultConfig{};
    m_fault_rng.seed(m_faults.seed);
    m_refusals_drawn = 0;
    m_clock_offset = std::chrono::seconds(0);
    m_deliveries = 0;
    m_replays = 0;
    m_deliveries_by_operation.clear();
    m_executions.clear();
    m_charged.clear();
    m_refunded.clear();
    m_faults_applied.clear();
}

void Ledger::write_counts_locked(nlohmann::ordered_json& j, bool operations) const {
    using Json = nlohmann::ordered_json;
    j["deliveries"] = m_deliveries;
    if (operations) {
        j["deliveries_by_operation"] = Json::object();
        for (const auto& [op, n] : m_deliveries_by_operation) {
            j["deliveries_by_operation"][op] = n;
        }
        j["executions"] = Json::object();
        for (const auto& [op, n] : m_executions) {
            j["executions"][op] = n;
        }
    }
    j["replays"] = m_replays;
    j["charged"] = Json::object();
    for (const auto& [currency, amount] : m_charged) {
        j["charged"][currency] = amount;
    }
    j["refunded"] = Json::object();
    for (const auto& [currency, amount] : m_refunded) {
        j["refunded"][currency] = amount;
    }
    j["faults_applied"] = Json::object();
    for (const auto& [fault, n] : m_faults_applied) {
        j["faults_applied"][std::string(to_string(fault))] = n;
    }
}

Reply answer_after(std::unique_lock<std::mutex>& lock, const Wait& wait,
                   std::chrono::milliseconds latency, Reply reply) {
    lock.unlock();
    if (!wait(latency)) {
        reply.action = SocketAction::close_fin;
    }
    return reply;
}

void apply_after_execute(Reply& reply, const http::Response& error_500) {
    switch (reply.fault) {
    case Fault::execute_then_hang:
        reply.action = SocketAction::hang_then_fin;
        break;
    case Fault::execute_then_fin:
        reply.action = SocketAction::close_fin;
        break;
    case Fault::execute_then_rst:
        reply.action = SocketAction::close_rst;
        break;
    case Fault::execute_then_partial:
        reply.action = SocketAction::partial_then_fin;
        break;
    case Fault::http_500_after_execute:
        reply.response = error_500;
        break;
    default:
        break;
    }
}

http::Response json_response(int status, const nlohmann::ordered_json& body) {
    http::Response r;
    r.status = status;
    r.body = body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    return r;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    const std::size_t n = std::min(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i) {
        diff = static_cast<unsigned char>(
            diff | (static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i])));
    }
    return diff == 0;
}

std::optional<std::string_view> bearer_credential(const http::Request& request) {
    const std::string* value = request.header("authorization");
    if (value == nullptr || value->size() < 7 || to_lower_ascii(value->substr(0, 6)) != "bearer" ||
        (*value)[6] != ' ') {
        return std::nullopt;
    }
    std::string_view credential = std::string_view(*value).substr(7);
    while (!credential.empty() && credential.front() == ' ') {
        credential.remove_prefix(1);
    }
    return credential;
}

std::string rfc3339(std::chrono::system_clock::time_point t) {
    const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
    std::tm tm{};
    ::gmtime_r(&seconds, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
    y -= m <= 2 ? 1 : 0;
    const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
    const auto yoe = static_cast<unsigned>(y - era * 400);
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

std::optional<unsigned> digits(std::string_view text, std::size_t at, std::size_t count) {
    if (at + count > text.size()) {
        return std::nullopt;
    }
    unsigned value = 0;
    for (std::size_t i = at; i < at + count; ++i) {
        if (text[i] < '0' || text[i] > '9') {
            return std::nullopt;
        }
        value = value * 10 + static_cast<unsigned>(text[i] - '0');
    }
    return value;
}

} // namespace

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text) {
    // YYYY-MM-DDTHH:MM:SS
    const auto year = digits(text, 0, 4);
    const auto month = digits(text, 5, 2);
    const auto day = digits(text, 8, 2);
    const auto hour = digits(text, 11, 2);
    const auto minute = digits(text, 14, 2);
    const auto second = digits(text, 17, 2);
    if (!year || !month || !day || !hour || !minute || !second || text[4] != '-' ||
        text[7] != '-' || (text[10] != 'T' && text[10] != 't') || text[13] != ':' ||
        text[16] != ':') {
        return std::nullopt;
    }
    constexpr unsigned k_days_in[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    const bool leap = (*year % 4 == 0 && *year % 100 != 0) || *year % 400 == 0;
    if (*month < 1 || *month > 12 || *day < 1 || *day > k_days_in[*month - 1] ||
        (*month == 2 && *day == 29 && !leap) || *hour > 23 || *minute > 59 || *second > 60) {
        return std::nullopt;
    }
    std::size_t at = 19;
    if (at < text.size() && text[at] == '.') {
        ++at;
        const std::size_t start = at;
        while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
            ++at;
        }
        if (at == start) {
            return std::nullopt;
        }
    }
    std::int64_t offset_s = 0;
    if (at < text.size() && (text[at] == 'Z' || text[at] == 'z')) {
        ++at;
    } else if (at < text.size() && (text[at] == '+' || text[at] == '-')) {
        const auto oh = digits(text, at + 1, 2);
        const auto om = digits(text, at + 4, 2);
        if (!oh || !om || at + 3 >= text.size() || text[at + 3] != ':' || *oh > 23 || *om > 59) {
            return std::nullopt;
        }
        offset_s = (text[at] == '+' ? 1 : -1) * static_cast<std::int64_t>(*oh * 3600 + *om * 60);
        at += 6;
    } else {
        return std::nullopt;
    }
    if (at != text.size()) {
        return std::nullopt;
    }
    const std::int64_t days = days_from_civil(*year, *month, *day);
    const std::int64_t seconds =
        days * 86400 + *hour * 3600 + *minute * 60 + std::min(*second, 59U) - offset_s;
    return std::chrono::system_clock::time_point(std::chrono::seconds(seconds));
}

std::string to_lower_ascii(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); });
    return out;
}

std::string to_upper_ascii(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](char c) { return static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c); });
    return out;
}

} // namespace payrecon::fake
