#include "tests/fake_provider/adyen.hpp"

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>

namespace payrecon::fake {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view k_payments = "/v71/payments";
constexpr std::string_view k_refunds = "/refunds";
constexpr std::string_view k_captures = "/captures";
constexpr std::string_view k_cancels = "/cancels";

// The pspReference a modification's path names: /v71/payments/{it}`action`; empty if it is not
// one.
std::string modified_payment(const std::string& path, std::string_view action) {
    const std::string prefix = std::string(k_payments) + "/";
    if (path.size() <= prefix.size() + action.size() || path.rfind(prefix, 0) != 0 ||
        path.compare(path.size() - action.size(), action.size(), action) != 0) {
        return {};
    }
    std::string psp = path.substr(prefix.size(), path.size() - prefix.size() - action.size());
    return psp.find('/') == std::string::npos ? psp : std::string();
}

std::string refunded_payment(const std::string& path) {
    return modified_payment(path, k_refunds);
}

std::string reference_of(const http::Request& request) {
    const Json body = Json::parse(request.body, nullptr, false);
    if (body.is_object() && body.contains("reference") && body["reference"].is_string()) {
        return body["reference"].get<std::string>();
    }
    return {};
}

std::optional<http::Response> refusal_of(const http::Request& request, const Account& account);

// Adyen's error answer (its ServiceError).
http::Response adyen_error(int status, std::string_view code, std::string_view type,
                           std::string_view message) {
    Json body;
    body["status"] = status;
    body["errorCode"] = code;
    body["message"] = message;
    body["errorType"] = type;
    return json_response(status, body);
}

// Adyen's create body as the fake needs it: amount, reference, merchant account, the stored card.
std::variant<CreateParams, http::Response> validate_adyen_create(const Json& j) {
    CreateParams p;
    if (!j.is_object()) {
        return adyen_error(422, "702", "validation", "Structure of PaymentRequest is invalid");
    }
    const auto text = [&](const Json& o, const char* name) -> const std::string* {
        return o.is_object() && o.contains(name) && o[name].is_string()
                   ? o[name].get_ptr<const std::string*>()
                   : nullptr;
    };
    const Json amount = j.value("amount", Json());
    if (!amount.is_object() || !amount.contains("value") || !amount["value"].is_number_integer() ||
        amount["value"].get<std::int64_t>() <= 0 || text(amount, "currency") == nullptr ||
        text(amount, "currency")->size() != 3) {
        return adyen_error(422, "100", "validation", "Required field 'amount' is not provided.");
    }
    if (text(j, "reference") == nullptr || text(j, "merchantAccount") == nullptr) {
        return adyen_error(422, "130", "validation",
                           "Required field 'reference' or 'merchantAccount' is not provided.");
    }
    const Json method = j.value("paymentMethod", Json());
    if (text(method, "storedPaymentMethodId") == nullptr) {
        return adyen_error(422, "14_004", "validation", "Missing payment method details");
    }
    p.amount = amount["value"].get<std::int64_t>();
    p.currency = *text(amount, "currency");
    std::transform(p.currency.begin(), p.currency.end(), p.currency.begin(),
                   [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); });
    p.payment_method = *text(method, "storedPaymentMethodId");
    if (const std::string* shopper = text(j, "shopperReference")) {
        p.customer = *shopper;
    }
    p.off_session = true;
    // AdditionalDataCommon.manualCapture "true": authorise only.
    const Json additional = j.value("additionalData", Json());
    if (const std::string* manual = text(additional, "manualCapture")) {
        p.manual_capture = *manual == "true";
    }
    if (j.contains("metadata") && j["metadata"].is_object()) {
        for (const auto& [k, v] : j["metadata"].items()) {
            if (v.is_string()) {
                p.metadata[k] = v.get<std::string>();
            }
        }
    }
    return p;
}

// Adyen's pspReference and currencies are upper case.
std::string upper(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](char c) { return static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c); });
    return text;
}

std::optional<http::Response> refusal_of(const http::Request& request, const Account& account) {
    const std::string* api_key = request.header("x-api-key");
    if (api_key == nullptr || account.api_key.empty() ||
        !constant_time_equal(*api_key, account.api_key.reveal())) {
        return adyen_error(401, "000", "security", "HTTP Status Response - Unauthorized");
    }
    return std::nullopt;
}

} // namespace

std::string adyen_reference(std::string_view stripe_id) {
    return upper(std::string(stripe_id.substr(3, 16)));
}

AdyenApi::AdyenApi(StripeApi& intents) : m_intents(intents) {}

bool AdyenApi::serves(const http::Request& request) const {
    return request.method == "POST" &&
           (request.path == k_payments || !refunded_payment(request.path).empty() ||
            !modified_payment(request.path, k_captures).empty() ||
            !modified_payment(request.path, k_cancels).empty());
}

Reply AdyenApi::handle(const http::Request& request, const Wait& wait) {
    if (!refunded_payment(request.path).empty()) {
        return m_intents.refund_for(m_refunds, request, wait);
    }
    if (!modified_payment(request.path, k_captures).empty()) {
        return m_intents.modify_for(m_captures, request, false, wait);
    }
    if (!modified_payment(request.path, k_cancels).empty()) {
        return m_intents.modify_for(m_cancels, request, true, wait);
    }
    return m_intents.create_for(*this, request, wait);
}

void AdyenApi::write_ledger_locked(nlohmann::ordered_json& /*j*/, LedgerOptions /*options*/) const {
}

void AdyenApi::reset_locked() {
    m_payments.clear();
}

std::string AdyenApi::operation_id(const http::Request& request) const {
    return reference_of(request);
}

std::optional<http::Response> AdyenApi::refusal(const http::Request& request,
                                                const Account& account) const {
    return refusal_of(request, account);
}

std::variant<CreateParams, http::Response> AdyenApi::read(const http::Request& request) const {
    const Json body = Json::parse(request.body, nullptr, false);
    if (body.is_discarded()) {
        return adyen_error(400, "702", "validation", "Malformed JSON");
    }
    return validate_adyen_create(body);
}

http::Fields AdyenApi::replay_params(const http::Request& request) const {
    return http::Fields{{"body", request.body}}; // the body as sent
}

http::Response AdyenApi::answer(const http::Request& request, Executed& executed) const {
    // Adyen's pspReference: 16 upper-case letters and digits, from the PaymentIntent's random id.
    const std::string psp = adyen_reference(executed.provider_id);
    m_payments[psp] = executed.provider_id; // under the ledger's lock, as every answer
    executed.provider_id = psp;
    executed.adyen = true;
    executed.merchant_account =
        Json::parse(request.body, nullptr, false).value("merchantAccount", "");
    // An authorisation held for a manual capture is Authorised too (nothing charged yet).
    executed.charged = executed.charged || executed.stripe_status == "requires_capture";
    Json body;
    body["pspReference"] = psp;
    body["resultCode"] = executed.charged ? "Authorised" : "Refused";
    body["merchantReference"] = executed.operation_id;
    body["amount"] = {{"currency", upper(executed.currency)}, {"value", executed.amount}};
    if (!executed.charged) {
        body["refusalReason"] = "Not enough balance";
    }
    return json_response(200, body);
}

std::string AdyenRefunds::operation_id(const http::Request& request) const {
    return reference_of(request);
}

std::optional<http::Response> AdyenRefunds::refusal(const http::Request& request,
                                                    const Account& account) const {
    return refusal_of(request, account);
}

std::variant<RefundParams, http::Response>
AdyenRefunds::read_locked(const http::Request& request) const {
    const Json j = Json::parse(request.body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return adyen_error(400, "702", "validation", "Malformed JSON");
    }
    const Json amount = j.value("amount", Json());
    if (!amount.is_object() || !amount.contains("value") || !amount["value"].is_number_integer() ||
        !amount.contains("currency") || !amount["currency"].is_string() ||
        amount["currency"].get<std::string>().size() != 3) {
        return adyen_error(422, "100", "validation", "Required object 'amount' is not provided.");
    }
    if (!j.contains("merchantAccount") || !j["merchantAccount"].is_string()) {
        return adyen_error(422, "100", "validation",
                           "Required field 'merchantAccount' is not provided.");
    }
    const auto it = m_payments.find(refunded_payment(request.path));
    if (it == m_payments.end()) {
        return adyen_error(422, "167", "validation",
                           "Original pspReference required for this operation");
    }
    RefundParams p;
    p.intent_id = it->second;
    p.amount = amount["value"].get<std::int64_t>();
    p.currency = amount["currency"].get<std::string>();
    std::transform(p.currency.begin(), p.currency.end(), p.currency.begin(),
                   [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); });
    return p;
}

http::Fields AdyenRefunds::replay_params(const http::Request& request) const {
    return http::Fields{{"path", request.path}, {"body", request.body}};
}

http::Response AdyenRefunds::answer(const http::Request& request, Executed& executed) const {
    const Json j = Json::parse(request.body, nullptr, false);
    const std::string payment = refunded_payment(request.path);
    executed.provider_id = adyen_reference(executed.provider_id);
    executed.adyen = true;
    executed.event_code = "REFUND";
    executed.original_reference = payment;
    executed.merchant_account = j.value("merchantAccount", "");
    if (!executed.charged) {
        executed.reason = "Insufficient balance on payment";
    }
    Json body;
    body["merchantAccount"] = executed.merchant_account;
    body["paymentPspReference"] = payment;
    if (j.contains("reference") && j["reference"].is_string()) {
        body["reference"] = j["reference"];
    }
    body["pspReference"] = executed.provider_id;
    body["status"] = "received";
    body["amount"] = {{"currency", upper(executed.currency)}, {"value", executed.amount}};
    return json_response(201, body);
}

std::string AdyenModifications::operation_id(const http::Request& request) const {
    return reference_of(request);
}

std::optional<http::Response> AdyenModifications::refusal(const http::Request& request,
                                                          const Account& account) const {
    return refusal_of(request, account);
}

std::variant<ModificationParams, http::Response>
AdyenModifications::read_locked(const http::Request& request) const {
    const Json j = Json::parse(request.body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        return adyen_error(400, "702", "validation", "Malformed JSON");
    }
    ModificationParams p;
    if (!m_cancel) {
        const Json amount = j.value("amount", Json());
        if (!amount.is_object() || !amount.contains("value") ||
            !amount["value"].is_number_integer() || !amount.contains("currency") ||
            !amount["currency"].is_string() || amount["currency"].get<std::string>().size() != 3) {
            return adyen_error(422, "100", "validation",
                               "Required object 'amount' is not provided.");
        }
        p.amount = amount["value"].get<std::int64_t>();
        p.currency = amount["currency"].get<std::string>();
        std::transform(p.currency.begin(), p.currency.end(), p.currency.begin(),
                       [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); });
    }
    if (!j.contains("merchantAccount") || !j["merchantAccount"].is_string()) {
        return adyen_error(422, "100", "validation",
                           "Required field 'merchantAccount' is not provided.");
    }
    const auto it =
        m_payments.find(modified_payment(request.path, m_cancel ? k_cancels : k_captures));
    if (it == m_payments.end()) {
        return adyen_error(422, "167", "validation",
                           "Original pspReference required for this operation");
    }
    p.intent_id = it->second;
    return p;
}

http::Fields AdyenModifications::replay_params(const http::Request& request) const {
    return http::Fields{{"path", request.path}, {"body", request.body}};
}

http::Response AdyenModifications::answer(const http::Request& request, Executed& executed) const {
    const Json j = Json::parse(request.body, nullptr, false);
    const std::string payment = modified_payment(request.path, m_cancel ? k_cancels : k_captures);
    executed.provider_id = adyen_reference(executed.provider_id);
    executed.adyen = true;
    executed.event_code = m_cancel ? "CANCELLATION" : "CAPTURE";
    executed.original_reference = payment;
    executed.merchant_account = j.value("merchantAccount", "");
    if (!executed.charged) {
        executed.reason =
            m_cancel ? "Payment cannot be cancelled" : "Insufficient balance on payment";
    }
    Json body;
    body["merchantAccount"] = executed.merchant_account;
    body["paymentPspReference"] = payment;
    if (j.contains("reference") && j["reference"].is_string()) {
        body["reference"] = j["reference"];
    }
    body["pspReference"] = executed.provider_id;
    body["status"] = "received";
    if (!m_cancel) {
        body["amount"] = {{"currency", upper(executed.currency)}, {"value", executed.amount}};
    }
    return json_response(201, body);
}

} // namespace payrecon::fake
