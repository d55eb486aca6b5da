#include "tests/fake_provider/seed.hpp"

#include <algorithm>

namespace payrecon::fake {
namespace {

using Json = nlohmann::json;

[[noreturn]] void bad(const std::string& field, const std::string& why) {
    throw std::invalid_argument(field + ": " + why);
}

void only_fields(const Json& j, std::initializer_list<std::string_view> allowed) {
    for (const auto& [key, value] : j.items()) {
        if (key == "kind") {
            continue;
        }
        if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
            bad(key, "unknown field for kind " + j["kind"].get<std::string>());
        }
    }
}

std::int64_t integer(const Json& j, const char* name) {
    if (!j.contains(name)) {
        bad(name, "missing");
    }
    if (!j[name].is_number_integer()) {
        bad(name, "expected an integer");
    }
    return j[name].get<std::int64_t>();
}

std::optional<std::int64_t> optional_integer(const Json& j, const char* name) {
    if (!j.contains(name) || j[name].is_null()) {
        return std::nullopt;
    }
    return integer(j, name);
}

std::string string(const Json& j, const char* name) {
    if (!j.contains(name)) {
        bad(name, "missing");
    }
    if (!j[name].is_string()) {
        bad(name, "expected a string");
    }
    return j[name].get<std::string>();
}

std::optional<std::string> optional_string(const Json& j, const char* name) {
    if (!j.contains(name) || j[name].is_null()) {
        return std::nullopt;
    }
    return string(j, name);
}

IntentRef intent_ref(const Json& j) {
    IntentRef ref;
    ref.id = optional_string(j, "id").value_or("");
    ref.operation_id = optional_string(j, "operation_id").value_or("");
    if (ref.id.empty() == ref.operation_id.empty()) {
        bad("id", "give exactly one of id and operation_id");
    }
    return ref;
}

} // namespace

Seed seed_from_json(const Json& j) {
    if (!j.is_object()) {
        throw std::invalid_argument("expected a JSON object with a \"kind\"");
    }
    const std::string kind = string(j, "kind");
    if (kind == "orphan_charge") {
        only_fields(j, {"amount", "currency", "metadata", "created", "customer", "description",
                        "payment_method"});
        OrphanCharge s;
        s.amount = integer(j, "amount");
        s.currency = string(j, "currency");
        if (j.contains("metadata") && !j["metadata"].is_null()) {
            if (!j["metadata"].is_object()) {
                bad("metadata", "expected an object of strings");
            }
            for (const auto& [key, value] : j["metadata"].items()) {
                if (!value.is_string()) {
                    bad("metadata." + key, "expected a string");
                }
                s.metadata[key] = value.get<std::string>();
            }
        }
        s.created = optional_integer(j, "created");
        s.customer = optional_string(j, "customer");
        s.description = optional_string(j, "description");
        s.payment_method = optional_string(j, "payment_method").value_or(s.payment_method);
        return s;
    }
    if (kind == "duplicate_charge") {
        only_fields(j, {"operation_id", "created"});
        DuplicateCharge s;
        s.operation_id = string(j, "operation_id");
        s.created = optional_integer(j, "created");
        return s;
    }
    if (kind == "amount_mismatch") {
        only_fields(j, {"id", "operation_id", "amount"});
        AmountMismatch s;
        s.intent = intent_ref(j);
        s.amount = integer(j, "amount");
        return s;
    }
    if (kind == "refunded") {
        only_fields(j, {"id", "operation_id", "amount", "created"});
        Refunded s;
        s.intent = intent_ref(j);
        s.amount = optional_integer(j, "amount");
        s.created = optional_integer(j, "created");
        return s;
    }
    if (kind == "bulk") {
        only_fields(j,
                    {"n", "start_time", "spacing_ms", "currency", "amount", "operation_id_prefix"});
        BulkSeed s;
        const std::int64_t n = integer(j, "n");
        if (n < 0) {
            bad("n", "must not be negative");
        }
        s.n = static_cast<std::size_t>(n);
        s.start_time = integer(j, "start_time");
        s.spacing = std::chrono::milliseconds(optional_integer(j, "spacing_ms").value_or(1000));
        s.currency = optional_string(j, "currency").value_or(s.currency);
        s.amount = optional_integer(j, "amount").value_or(s.amount);
        s.operation_id_prefix =
            optional_string(j, "operation_id_prefix").value_or(s.operation_id_prefix);
        return s;
    }
    if (kind == "refund_reversed") {
        only_fields(j, {"operation_id", "failure_reason"});
        RefundReversed s;
        s.operation_id = string(j, "operation_id");
        s.failure_reason = optional_string(j, "failure_reason").value_or(s.failure_reason);
        return s;
    }
    if (kind == "capture_reversed") {
        only_fields(j, {"operation_id", "failure_reason"});
        CaptureReversed s;
        s.operation_id = string(j, "operation_id");
        s.failure_reason = optional_string(j, "failure_reason").value_or(s.failure_reason);
        return s;
    }
    bad("kind", "unknown seed kind '" + kind +
                    "' (orphan_charge, duplicate_charge, amount_mismatch, refunded, bulk, "
                    "refund_reversed, capture_reversed)");
}

std::string_view seed_kind(const Seed& seed) {
    static constexpr std::string_view k_names[] = {
        "orphan_charge", "duplicate_charge", "amount_mismatch", "refunded",
        "bulk",          "refund_reversed",  "capture_reversed"};
    return k_names[seed.index()];
}

} // namespace payrecon::fake
