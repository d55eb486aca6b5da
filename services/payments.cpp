#include "services/payments.hpp"

#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "core/nearest.hpp"
#include "services/captures.hpp"
#include "services/intake.hpp"
#include "services/refunds.hpp"
#include "store/inspect_store.hpp"
#include "store/payment_store.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace payrecon {

namespace {

// A query value as forms encode it (application/x-www-form-urlencoded): %XX is a byte, '+' a
// space. nullopt for a '%' not followed by two hex digits.
std::optional<std::string> form_decode(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '+') {
            out += ' ';
        } else if (text[i] == '%') {
            if (i + 2 >= text.size()) {
                return std::nullopt;
            }
            const auto bytes = from_hex(text.substr(i + 1, 2));
            if (!bytes) {
                return std::nullopt;
            }
            out += *bytes;
            i += 2;
        } else {
            out += text[i];
        }
    }
    return out;
}

bool valid_utf8(const std::string& text) {
    try {
        (void)nlohmann::json(text).dump(); // strict: overlong forms and surrogates throw
        return true;
    } catch (const nlohmann::json::type_error&) {
        return false;
    }
}

} // namespace

std::optional<std::string> payment_resource(store::Db& db, const std::string& tenant_id,
                                            std::string_view payment_id) {
    if (!is_uuid_text(payment_id)) {
        return std::nullopt;
    }
    const auto payment = store::find_payment(db, tenant_id, std::string(payment_id));
    if (!payment) {
        return std::nullopt;
    }
    nlohmann::ordered_json body = nlohmann::ordered_json::parse(payment_resource_json(
        PaymentView{payment->payment_id, payment->state, payment->amount_minor, payment->currency,
                    payment->merchant_reference, payment->provider, payment->created_at}));
    body["updated_at"] = payment->updated_at;
    body["provider_reference"] = payment->provider_reference
                                     ? nlohmann::ordered_json(*payment->provider_reference)
                                     : nullptr;
    nlohmann::ordered_json attempts = nlohmann::ordered_json::array();
    for (const auto& a : payment->attempts) {
        nlohmann::ordered_json j;
        j["attempt"] = a.attempt_no;
        j["outcome"] = a.outcome;
        j["http_status"] = a.http_status ? nlohmann::ordered_json(*a.http_status) : nullptr;
        j["started_at"] = a.started_at;
        j["finished_at"] = a.finished_at ? nlohmann::ordered_json(*a.finished_at) : nullptr;
        attempts.push_back(std::move(j));
    }
    body["attempt_count"] = payment->attempts.size();
    body["attempts"] = std::move(attempts);
    const RefundAmounts amounts = refund_amounts(*payment);
    body["amount_refunded"] = amounts.refunded;
    body["amount_refund_pending"] = amounts.pending;
    body["amount_refundable"] = amounts.refundable;
    nlohmann::ordered_json refunds = nlohmann::ordered_json::array();
    for (const auto& r : payment->refunds) {
        refunds.push_back(nlohmann::ordered_json::parse(refund_resource_json(r)));
    }
    body["refunds"] = std::move(refunds);
    if (payment->manual_capture) {
        // An authorisation (issue 32): what a merchant calls it, what it holds and what it took.
        const CaptureAmounts captured = capture_amounts(*payment);
        body["status"] = payment_status(*payment);
        body["capture"] = "manual";
        body["authorization_expires_at"] =
            payment->authorization_expires_at
                ? nlohmann::ordered_json(*payment->authorization_expires_at)
                : nullptr;
        body["amount_authorized"] = captured.authorized;
        body["amount_captured"] = captured.captured;
        body["amount_capture_pending"] = captured.pending;
        body["amount_capturable"] = captured.capturable;
        body["voided_at"] =
            payment->voided_at ? nlohmann::ordered_json(*payment->voided_at) : nullptr;
        nlohmann::ordered_json captures = nlohmann::ordered_json::array();
        for (const auto& c : payment->captures) {
            captures.push_back(nlohmann::ordered_json::parse(capture_resource_json(c)));
        }
        body["captures"] = std::move(captures);
        nlohmann::ordered_json voids = nlohmann::ordered_json::array();
        for (const auto& v : payment->voids) {
            voids.push_back(nlohmann::ordered_json::parse(capture_resource_json(v)));
        }
        body["voids"] = std::move(voids);
    }
    return body.dump();
}

tl::expected<std::string, PaymentsQueryProblem>
payments_by_query(store::Db& db, const std::string& tenant_id, std::string_view query) {
    const auto invalid = [](std::string detail) {
        return tl::unexpected(PaymentsQueryProblem{400, "invalid_query", std::move(detail)});
    };
    std::optional<std::string> reference;
    while (!query.empty()) {
        const std::size_t amp = query.find('&');
        const std::string_view item = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
        if (item.empty()) {
            continue;
        }
        const std::size_t eq = item.find('=');
        if (item.substr(0, eq) != "merchant_reference" || reference) {
            return invalid("the query takes merchant_reference=REF once, and nothing else "
                           "(payments are listed by merchant reference only)");
        }
        const auto decoded =
            form_decode(eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1));
        if (!decoded) {
            return invalid("merchant_reference is not percent-encoded right: a '%' must be "
                           "followed by two hex digits");
        }
        reference = *decoded;
    }
    if (!reference) {
        return invalid("give merchant_reference=REF: GET /v1/payments finds a payment by its "
                       "merchant reference (GET /v1/payments/{id} by its ID)");
    }
    const bool control = std::any_of(reference->begin(), reference->end(), [](char c) {
        const auto byte = static_cast<unsigned char>(c);
        return byte < 0x20 || byte == 0x7F;
    });
    if (reference->empty() || reference->size() > 255 || control || !valid_utf8(*reference)) {
        return invalid("merchant_reference must decode to 1-255 bytes of UTF-8 with no control "
                       "character, as in POST /v1/payments (percent-encode it; '+' is a space, "
                       "%2B a plus)");
    }
    nlohmann::ordered_json list;
    list["object"] = "list";
    list["data"] = nlohmann::ordered_json::array();
    if (const auto id = store::payment_id_by_reference(db, tenant_id, *reference)) {
        if (const auto body = payment_resource(db, tenant_id, *id)) {
            list["data"].push_back(nlohmann::ordered_json::parse(*body));
        }
    }
    return list.dump();
}

bool store_ready(store::Db& db) {
    return store::database_ready(db);
}

ProviderRejections provider_rejections(store::Db& db) {
    return {store::rejected_attempt_counts(db), store::rejected_in_review(db),
            store::provider_event_results(db)};
}

void refuse_unknown_provider(store::Db& db, const std::optional<ProviderCatalog>& configured,
                             const std::string& provider) {
    std::vector<std::string> known = store::payment_providers(db);
    if (configured) {
        for (const auto& [name, ignored] : configured->providers) {
            if (std::find(known.begin(), known.end(), name) == known.end()) {
                known.push_back(name);
            }
        }
    }
    if (std::find(known.begin(), known.end(), provider) != known.end()) {
        return;
    }
    std::string names;
    for (std::size_t i = 0; i < known.size() && i < 20; ++i) {
        names += (names.empty() ? "" : ", ") + printable(known[i]);
    }
    if (known.size() > 20) {
        names += " and " + std::to_string(known.size() - 20) + " more";
    }
    throw UsageError("no payment names the provider '" + printable(provider) + "'" +
                         (configured ? " and the configuration has none of that name" : "") +
                         did_you_mean(provider, known),
                     known.empty() ? std::string("no payment names any provider yet")
                                   : "the providers known: " + names);
}

} // namespace payrecon
