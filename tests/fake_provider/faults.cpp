#include "tests/fake_provider/faults.hpp"

#include <array>
#include <stdexcept>
#include <string>
#include <utility>

namespace payrecon::fake {
namespace {

constexpr std::array<std::pair<Fault, std::string_view>, 10> k_names{{
    {Fault::none, "none"},
    {Fault::refuse, "refuse"},
    {Fault::drop_before_execute, "drop_before_execute"},
    {Fault::execute_then_hang, "execute_then_hang"},
    {Fault::execute_then_fin, "execute_then_fin"},
    {Fault::execute_then_rst, "execute_then_rst"},
    {Fault::execute_then_partial, "execute_then_partial"},
    {Fault::http_500_after_execute, "http_500_after_execute"},
    {Fault::http_500_before_execute, "http_500_before_execute"},
    {Fault::decline, "decline"},
}};

Fault fault_named(const nlohmann::json& j, const std::string& field) {
    if (!j.is_string()) {
        throw std::invalid_argument(field + ": a fault name must be a string");
    }
    const auto fault = parse_fault(j.get<std::string>());
    if (!fault || *fault == Fault::none) {
        throw std::invalid_argument(field + ": unknown fault '" + j.get<std::string>() + "'");
    }
    return *fault;
}

std::int64_t non_negative(const nlohmann::json& j, const std::string& field) {
    if (!j.is_number_integer() || j.get<std::int64_t>() < 0) {
        throw std::invalid_argument(field + ": must be a non-negative integer");
    }
    return j.get<std::int64_t>();
}

} // namespace

std::string_view to_string(Fault fault) {
    for (const auto& [f, name] : k_names) {
        if (f == fault) {
            return name;
        }
    }
    return "none";
}

std::optional<Fault> parse_fault(std::string_view name) {
    for (const auto& [f, n] : k_names) {
        if (n == name) {
            return f;
        }
    }
    return std::nullopt;
}

const std::vector<Fault>& all_faults() {
    static const std::vector<Fault> k_all = [] {
        std::vector<Fault> out;
        for (const auto& [f, name] : k_names) {
            if (f != Fault::none) {
                out.push_back(f);
            }
        }
        return out;
    }();
    return k_all;
}

FaultConfig FaultConfig::from_json(const nlohmann::json& j) {
    if (!j.is_object()) {
        throw std::invalid_argument("the fault config must be a JSON object");
    }
    FaultConfig c;
    for (const auto& [key, value] : j.items()) {
        if (key == "latency_ms") {
            c.latency = std::chrono::milliseconds(non_negative(value, key));
        } else if (key == "seed") {
            if (!value.is_number_unsigned() &&
                !(value.is_number_integer() && value.get<std::int64_t>() >= 0)) {
                throw std::invalid_argument("seed: must be a non-negative integer");
            }
            c.seed = value.get<std::uint64_t>();
        } else if (key == "next") {
            if (!value.is_array()) {
                throw std::invalid_argument("next: must be an array of fault names");
            }
            for (const auto& item : value) {
                c.next.push_back(fault_named(item, "next"));
            }
        } else if (key == "rates") {
            if (!value.is_object()) {
                throw std::invalid_argument(
                    "rates: must be an object of fault name to probability");
            }
            double sum = 0.0;
            for (const auto& [name, rate] : value.items()) {
                const Fault fault = fault_named(nlohmann::json(name), "rates");
                if (!rate.is_number() || rate.get<double>() < 0.0 || rate.get<double>() > 1.0) {
                    throw std::invalid_argument("rates." + name + ": must be a number in [0, 1]");
                }
                c.rates[fault] = rate.get<double>();
                sum += rate.get<double>();
            }
            if (sum > 1.0 + 1e-9) {
                throw std::invalid_argument("rates: the probabilities sum past 1");
            }
        } else if (key == "hang_ms") {
            c.hang = std::chrono::milliseconds(non_negative(value, key));
        } else if (key == "refuse_ms") {
            c.refuse = std::chrono::milliseconds(non_negative(value, key));
        } else if (key == "lookup_stale_s") {
            c.lookup_stale = std::chrono::seconds(non_negative(value, key));
        } else if (key == "lookup_down") {
            if (!value.is_boolean()) {
                throw std::invalid_argument("lookup_down: must be true or false");
            }
            c.lookup_down = value.get<bool>();
        } else if (key == "list_rate_limited") {
            if (!value.is_boolean()) {
                throw std::invalid_argument("list_rate_limited: must be true or false");
            }
            c.list_rate_limited = value.get<bool>();
        } else if (key == "unknown_parameters") {
            if (!value.is_array()) {
                throw std::invalid_argument(
                    "unknown_parameters: must be an array of parameter names");
            }
            for (const auto& item : value) {
                if (!item.is_string() || item.get<std::string>().empty()) {
                    throw std::invalid_argument(
                        "unknown_parameters: each must be a parameter name");
                }
                c.unknown_parameters.push_back(item.get<std::string>());
            }
        } else {
            throw std::invalid_argument("unknown field '" + key + "'");
        }
    }
    return c;
}

nlohmann::json FaultConfig::to_json() const {
    nlohmann::json j;
    j["latency_ms"] = latency.count();
    j["seed"] = seed;
    j["next"] = nlohmann::json::array();
    for (const Fault f : next) {
        j["next"].push_back(std::string(to_string(f)));
    }
    j["rates"] = nlohmann::json::object();
    for (const auto& [f, rate] : rates) {
        j["rates"][std::string(to_string(f))] = rate;
    }
    j["hang_ms"] = hang.count();
    j["refuse_ms"] = refuse.count();
    j["lookup_stale_s"] = lookup_stale.count();
    j["lookup_down"] = lookup_down;
    j["list_rate_limited"] = list_rate_limited;
    j["unknown_parameters"] = unknown_parameters;
    return j;
}

} // namespace payrecon::fake
