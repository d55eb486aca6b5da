// The "fourth" provider (fourth.hpp): its wire format, its adapter and its descriptor, built on
// the shared adapter support and wire utilities only.
#include "tests/providers/fourth/fourth.hpp"

#include "core/encoding.hpp"
#include "core/external_json.hpp"
#include "providers/adapter_support.hpp"
#include "providers/status_rules.hpp"
#include "providers/wire_util.hpp"

#include <regex>

namespace payrecon::fourth {
namespace {

using namespace providers;
using nlohmann::json;

constexpr std::size_t k_max_key_length = 64;

// --- wire ---------------------------------------------------------------------------------------

constexpr StatusRule k_status_rules[] = {
    {"CAPTURED", Outcome::succeeded, "charged"},
    {"PENDING", Outcome::pending, "not final yet"},
    {"DECLINED", Outcome::declined, "the card was refused"},
    {"FAILED", Outcome::declined, "attempted and failed"},
    {"REVERSED", Outcome::unknown, "charged and given back: an operator decides what it was"},
};

std::span<const StatusRule> status_rules() {
    return k_status_rules;
}

Outcome map_status(std::string_view status) {
    return outcome_by_rules(k_status_rules, status);
}

const CarryLimits& carry_limits() {
    static const CarryLimits k_limits{
        "Fourth", MetadataLimits{0, {}, 0, 0, "Fourth's charges have no metadata field"}};
    return k_limits;
}

std::optional<RemotePayment> charge_from(const json& j) {
    const auto id = wire::string_member(j, "id");
    const auto status = wire::string_member(j, "status");
    if (!id || !status || !j.contains("amount") || !j["amount"].is_object()) {
        return std::nullopt;
    }
    const json& a = j["amount"];
    const auto currency = wire::string_member(a, "currency");
    if (!a.contains("minor") || !a["minor"].is_number_integer() || !currency) {
        return std::nullopt;
    }
    const auto money = wire::from_provider_units(a["minor"].get<std::int64_t>(), *currency,
                                                 wire::provider_exponent(*currency, {}));
    if (!money) {
        return std::nullopt;
    }
    RemotePayment p;
    p.provider_reference = *id;
    p.operation_id = wire::string_member(j, "reference");
    p.amount = *money;
    p.raw_status = *status;
    p.state = map_status(*status);
    if (const auto t = wire::string_member(j, "created_at")) {
        p.created_at = wire::parse_rfc3339(*t).value_or(p.created_at);
    }
    p.raw = j.dump();
    return p;
}

struct Error {
    std::string type, code, message;
};

std::optional<Error> error_from(const json& j) {
    if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) {
        return std::nullopt;
    }
    const json& e = j["error"];
    Error out{wire::string_member(e, "type").value_or(""),
              wire::string_member(e, "code").value_or(""),
              wire::string_member(e, "message").value_or("")};
    if (out.type.empty()) {
        return std::nullopt;
    }
    return out;
}

std::optional<std::string> charge_body(const PaymentOrder& order, const Settings& settings) {
    const auto minor =
        wire::to_provider_units(order.amount, wire::provider_exponent(order.amount.currency, {}));
    if (!minor || order.operation_id.size() > k_max_key_length) {
        return std::nullopt;
    }
    json body = {{"amount", {{"minor", *minor}, {"currency", order.amount.currency}}},
                 {"reference", order.operation_id},
                 {"source", order.payment_method},
                 {"merchant_id", settings.merchant_id}};
    if (order.customer) {
        body["customer"] = *order.customer;
    }
    return body.dump();
}

SubmitResult interpret_charge(const PaymentOrder& order, int http_status, std::string_view body) {
    SubmitResult r;
    r.call.http_status = http_status;
    r.call.detail = wire::excerpt(body);
    const auto parsed = parse_external_json(body);
    if (http_status >= 200 && http_status < 300) {
        const auto c = parsed ? charge_from(*parsed) : std::nullopt;
        if (!c || c->operation_id != order.operation_id || c->amount != order.amount) {
            r.call.error_class = "unrecognised_response";
            return r;
        }
        r.provider_reference = c->provider_reference;
        r.outcome = c->state;
        return r;
    }
    if (http_status == 429) {
        r.outcome = Outcome::not_sent;
        r.call.error_class = "rate_limited";
        return r;
    }
    const auto error = parsed ? error_from(*parsed) : std::nullopt;
    if (http_status == 401 || http_status == 403) {
        return rejected_request(http_status, error ? error->code : "", error ? error->message : "",
                                wire::excerpt(body));
    }
    if (error && http_status == 402 && error->type == "card_error") {
        r.outcome = Outcome::declined;
        r.call.error_class = "card_declined:" + error->code;
        return r;
    }
    if (error && http_status == 400 && error->type == "invalid_request") {
        return rejected_request(http_status, error->code, error->message, wire::excerpt(body));
    }
    r.call.error_class = "http_" + std::to_string(http_status);
    return r;
}

struct Page {
    std::vector<RemotePayment> charges;
    std::optional<std::string> next_cursor;
};

std::optional<Page> parse_page(std::string_view body) {
    const auto parsed = parse_external_json(body);
    if (!parsed || !parsed->is_object() || !parsed->contains("data") ||
        !(*parsed)["data"].is_array()) {
        return std::nullopt;
    }
    Page out;
    for (const auto& item : (*parsed)["data"]) {
        auto c = charge_from(item);
        if (!c) {
            return std::nullopt;
        }
        out.charges.push_back(std::move(*c));
    }
    if (parsed->contains("next_cursor") && !(*parsed)["next_cursor"].is_null()) {
        out.next_cursor = wire::string_member(*parsed, "next_cursor");
        if (!out.next_cursor) {
            return std::nullopt;
        }
    }
    return out;
}

// --- adapter ------------------------------------------------------------------------------------

class FourthAdapter : public Provider {
public:
    FourthAdapter(const ProviderConfig& config, SendFunction send)
        : m_name(config.name), m_settings(settings_of(config)),
          m_caps(configured_capabilities(config, descriptor().api)),
          m_client(config, std::move(send)) {}

    const std::string& name() const override { return m_name; }
    std::string_view kind() const override { return "fourth"; }
    const Capabilities& capabilities() const override { return m_caps; }

    SubmitResult submit(const PaymentOrder& order) override {
        if (const auto problem =
                carry_problem(carry_limits(), order.merchant_reference, order.metadata)) {
            return not_carried(*problem);
        }
        const auto body = charge_body(order, m_settings);
        if (!body) {
            return not_expressible("not_expressible", "the amount or the operation ID has no "
                                                      "form in Fourth's charges");
        }
        net::HttpRequest req = m_client.request("POST", "/v2/charges", true);
        req.headers.emplace_back("Content-Type", "application/json");
        req.headers.emplace_back("Idempotency-Key", order.operation_id);
        req.body = *body;
        req.deadline = order.deadline;
        return create_outcome(m_client.send(std::move(req)),
                              [&order](int status, std::string_view b) {
                                  return interpret_charge(order, status, b);
                              });
    }

    LookupResult lookup(const PaymentOrder& order) override {
        LookupResult out;
        const auto res = m_client.send(m_client.request(
            "GET", "/v2/charges?reference=" + percent_encode(order.operation_id), false));
        const ReadCall read = read_call(res);
        out.call = read.call;
        const auto page = read.ok ? parse_page(res.body) : std::nullopt;
        if (!page || page->next_cursor) {
            if (read.ok) {
                out.call.error_class = page ? "too_many_matches" : "unrecognised_response";
            }
            return out;
        }
        std::vector<RemotePayment> matches;
        for (const auto& c : page->charges) {
            if (c.operation_id == order.operation_id) {
                matches.push_back(c);
            }
        }
        out.status =
            matches.empty() ? LookupResult::Status::not_found : LookupResult::Status::found;
        if (!matches.empty()) {
            out.payment = matches.front();
            out.duplicates.assign(matches.begin() + 1, matches.end());
        }
        return out;
    }

    ListPage list(const TimeWindow& window, const std::optional<std::string>& cursor) override {
        std::string query =
            "/v2/charges?created_from=" + percent_encode(wire::format_rfc3339(window.from)) +
            "&created_to=" + percent_encode(wire::format_rfc3339(window.to));
        if (cursor) {
            query += "&cursor=" + percent_encode(*cursor);
        }
        ListPage out;
        const auto res = m_client.send(m_client.request("GET", query, false));
        const ReadCall read = read_call(res);
        out.call = read.call;
        out.retry_after = read.retry_after;
        const auto page = read.ok ? parse_page(res.body) : std::nullopt;
        if (!page) {
            if (read.ok) {
                out.call.error_class = "unrecognised_response";
            }
            return out;
        }
        out.ok = true;
        out.items = page->charges;
        out.next_cursor = page->next_cursor;
        return out;
    }

private:
    static const Settings& settings_of(const ProviderConfig& config) {
        const auto* s = dynamic_cast<const Settings*>(config.settings.get());
        if (s == nullptr) {
            throw std::invalid_argument("a fourth provider needs its merchant_id");
        }
        return *s;
    }

    std::string m_name;
    Settings m_settings;
    Capabilities m_caps;
    ProviderClient m_client;
};

// --- descriptor ---------------------------------------------------------------------------------

std::shared_ptr<const ProviderSettings> parse_settings(const SettingsInput& input) {
    static const std::regex k_merchant_id("^[A-Z0-9]{6,20}$");
    const auto id = input.string("merchant_id");
    if (!id || !std::regex_match(*id, k_merchant_id)) {
        input.bad("merchant_id", "is required for kind fourth: 6 to 20 of A-Z, 0-9",
                  "e.g. \"merchant_id\": \"MERCHANT42\"");
    }
    auto out = std::make_shared<Settings>();
    out->merchant_id = *id;
    return out;
}

} // namespace

const ProviderDescriptor& descriptor() {
    static const ProviderDescriptor k_descriptor{
        .kind = "fourth",
        .display_name = "Fourth",
        .reference_name = "charge ID",
        .dashboard_url = "",
        .credentials = {CredentialKind::oauth2_client_credentials, CredentialKind::basic},
        .settings = {{"merchant_id", "MERCHANT42"}},
        .parse_settings = &parse_settings,
        .api = {.max_key_length = k_max_key_length, .lookup = true, .list = true},
        .carry_limits = &carry_limits,
        .statuses = {.contract_pointer = "/components/schemas/Charge/properties/status/enum",
                     .map = &map_status,
                     .rules = rules_list(status_rules())},
        .secret_patterns = {R"(fth_(live|test)_[A-Za-z0-9]{8,})"},
        .create = [](const ProviderConfig& config, SendFunction send) -> std::unique_ptr<Provider> {
            return std::make_unique<FourthAdapter>(config, std::move(send));
        },
        .webhook_verifier = nullptr,
        .webhook_url_signed = false,
        .oauth2_token_path = "",
    };
    return k_descriptor;
}

conformance::Files files() {
    const std::filesystem::path here =
        std::filesystem::path(PAYRECON_SOURCE_DIR) / "tests/providers/fourth";
    return {here / "contract.json", here / "fixtures", here / "corpus", here / "README.md"};
}

} // namespace payrecon::fourth
