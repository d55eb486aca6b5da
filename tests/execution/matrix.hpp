#pragma once
// What the mixed runs of every provider share (test_provider_matrix's charges and refunds,
// test_capture_matrix's authorisations, captures and voids): Adyen's signed notifications received
// as serve receives them, some withheld; and an operator who decides what waits in review from
// what the provider holds -- Adyen's Customer Area (here the fake's own records and the
// notifications it sent), the others' lookups.
#include "engine/nightly.hpp"
#include "engine/reconciler.hpp"
#include "engine/worker.hpp"
#include "providers/adyen/adapter.hpp"
#include "providers/registry.hpp"
#include "services/webhooks.hpp"
#include "store/reconcile_store.hpp"
#include "tests/execution/world.hpp"
#include "tests/support/receiver.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace payrecon::testing {

// A worker of the mixed runs: 8 threads taking 4 claims at a time, each claim sent once
// (`once`), a retry due at once (backoff 1 ms).
inline engine::WorkerOptions mixed_worker_options(const std::string& worker_id) {
    engine::WorkerOptions wo;
    wo.database_url = database_url();
    wo.worker_id = worker_id;
    wo.concurrency = 8;
    wo.batch = 4;
    wo.once = true;
    wo.lease = std::chrono::seconds(60);
    wo.backoff.base = std::chrono::milliseconds(1);
    wo.backoff.cap = std::chrono::milliseconds(1);
    return wo;
}

// A worker's factory of one provider per configuration.
inline std::function<std::vector<std::unique_ptr<providers::Provider>>()>
providers_of(std::vector<providers::ProviderConfig> configs) {
    return [configs = std::move(configs)] {
        std::vector<std::unique_ptr<providers::Provider>> v;
        for (const auto& c : configs) {
            v.push_back(providers::create_provider(c));
        }
        return v;
    };
}

// Nights (engine::run_nightly with `options`) until nothing is left to do, at most 11. Before each,
// the last attempts of the world's unknown and due payments are made 3 h older, so that PayPal's
// settle delay (its search lag) has passed; the key windows count from the first attempt, which
// stays.
inline void nights_until_quiet(World& w, const std::vector<providers::Provider*>& providers,
                               const engine::NightlyOptions& options) {
    for (int night = 1; night < 12; ++night) {
        exec_sql("UPDATE payments SET last_attempt_at = last_attempt_at - interval '3 hours 1 "
                 "minute', next_attempt_at = least(next_attempt_at, now()) WHERE tenant_id = '" +
                 w.tenant.tenant_id + "' AND state IN ('unknown', 'retry_scheduled')");
        const auto report = engine::run_nightly(*w.db, providers, options);
        REQUIRE_FALSE(report.failure);
        if (report.reconciled.empty() && report.sent.attempted == 0 &&
            count_rows("payments", w.tenant.tenant_id,
                       "state IN ('unknown', 'retry_scheduled', 'pending')") == 0) {
            return;
        }
    }
}

// The Adyen account's HMAC key (hex), as its Customer Area shows one.
inline const std::string k_adyen_hmac_key =
    "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";

// Adyen's notifications of `w`'s fake (which sends every dialect's events to the one URL), caught
// from construction on and handed to our receiving side -- all but those about an operation ID in
// `withheld`, which never arrive.
class AdyenNotifications {
public:
    AdyenNotifications(World& w, std::string provider)
        : m_w(w), m_provider(std::move(provider)),
          m_verifier(providers::adyen::webhook_verifier({Secret(k_adyen_hmac_key)})) {
        fake::WebhookOptions hooks;
        hooks.url = m_rx.url("/adyen");
        hooks.secret = k_adyen_hmac_key;
        w.fake->set_webhooks(hooks);
    }

    std::set<std::string> withheld; // operation IDs whose notifications we never receive

    // Every notification the fake sent since the last call, received as serve receives it.
    void receive() {
        REQUIRE(m_w.fake->wait_webhooks_idle(std::chrono::seconds(30)));
        const auto all = m_rx.received();
        for (; m_received < all.size(); ++m_received) {
            const auto item = item_of(all[m_received].body);
            if (!item || withheld.count((*item)["merchantReference"].get<std::string>()) != 0) {
                continue;
            }
            WebhookRequest r;
            r.body = all[m_received].body;
            r.received_at = std::chrono::system_clock::now();
            REQUIRE(receive_webhook(*m_w.db, m_provider, *m_verifier, r).status ==
                    WebhookVerdict::Status::verified);
        }
    }

    // Adyen's latest word on operation `op` as the Customer Area shows it -- the fake's
    // notification, received or not: its pspReference and whether it succeeded.
    std::optional<std::pair<std::string, bool>> says(const std::string& op) const {
        std::optional<std::pair<std::string, bool>> said;
        for (const auto& n : m_rx.received()) {
            const auto item = item_of(n.body);
            if (item && (*item)["merchantReference"] == op) {
                said = {(*item)["pspReference"].get<std::string>(), (*item)["success"] == "true"};
            }
        }
        return said;
    }

private:
    // The NotificationRequestItem of an Adyen notification; none for another dialect's event.
    static std::optional<nlohmann::json> item_of(const std::string& body) {
        auto j = nlohmann::json::parse(body, nullptr, false);
        if (!j.is_object() || !j.contains("notificationItems")) {
            return std::nullopt;
        }
        return j["notificationItems"].at(0).at("NotificationRequestItem");
    }

    World& m_w;
    std::string m_provider;
    Receiver m_rx;
    std::unique_ptr<WebhookVerifier> m_verifier;
    std::size_t m_received = 0;
};

// The charges in review of `w`'s tenant -- Adyen's, which cannot be asked (no_lookup) -- decided
// by an operator from the Customer Area: here the fake's own PaymentIntents, under the pspReference
// Adyen gives the payment (a refund or capture of it names that one: given the fake's
// PaymentIntent ID instead, Adyen refuses it, 422 "Original pspReference required"). Authorised
// ("succeeded", or "requires_capture" for an authorisation) is decided succeeded, anything else
// failed. Returns how many were decided.
inline std::size_t resolve_adyen_payments_in_review(World& w) {
    const auto books = w.fake->ledger();
    std::map<std::string, std::pair<std::string, std::string>> at_adyen; // op -> psp, status
    for (const auto& pi : books["payment_intents"]) {
        if (pi.contains("metadata") && pi["metadata"].contains("operation_id")) {
            at_adyen[pi["metadata"]["operation_id"].get<std::string>()] = {
                fake::adyen_reference(pi["id"].get<std::string>()),
                pi["status"].get<std::string>()};
        }
    }
    pqxx::connection conn(database_url());
    pqxx::read_transaction tx(conn);
    const auto review = tx.exec_params(
        "SELECT payment_id::text, operation_id, generation, review_code FROM payments "
        "WHERE tenant_id = $1::uuid AND state = 'needs_review'",
        w.tenant.tenant_id);
    tx.commit();
    for (const auto& row : review) {
        INFO(row[1].as<std::string>() << " " << row[3].as<std::string>());
        CHECK(row[3].as<std::string>() == "no_lookup");
        store::Resolution r;
        r.tenant_id = w.tenant.tenant_id;
        r.payment_id = row[0].as<std::string>();
        r.generation = row[2].as<long long>();
        r.operator_name = "test-operator";
        const auto found = at_adyen.find(row[1].as<std::string>());
        const bool authorised =
            found != at_adyen.end() &&
            (found->second.second == "succeeded" || found->second.second == "requires_capture");
        if (authorised) {
            r.decision = OperatorDecision::succeeded;
            r.provider_reference = found->second.first;
            r.note = "authorised in the Customer Area";
        } else {
            r.decision = OperatorDecision::failed;
            r.note = found == at_adyen.end() ? "not in the Customer Area"
                                             : "refused in the Customer Area";
        }
        CHECK(store::resolve_payment(*w.db, r).status == store::ResolveResult::Status::applied);
    }
    return review.size();
}

// An operator decides each operation in review of `w`'s tenant (refunds, captures, voids) from
// what the provider holds: Adyen's (provider `adyen`) from its Customer Area (`notifications`);
// the others' refunds by their refund lookup, their captures and voids by a recheck (the lookup of
// the authorisation, as `payrecon captures|voids recheck` asks it). An operation the provider
// holds nothing of, which the fake never executed, is sent again (a confirmed absence). Counts
// what was in review by "provider review_code" into `review_codes`; returns how many were sent
// again.
inline int resolve_operations_in_review(World& w,
                                        const std::vector<providers::ProviderConfig>& configs,
                                        const std::vector<providers::Provider*>& providers,
                                        const std::string& adyen,
                                        const AdyenNotifications& notifications,
                                        std::map<std::string, int>& review_codes) {
    int again = 0;
    const auto books = w.fake->ledger();
    pqxx::connection conn(database_url());
    pqxx::read_transaction tx(conn);
    const auto review = tx.exec_params(
        "SELECT o.id::text, o.payment_id::text, o.operation_id, o.generation, o.review_code, "
        "o.provider, o.amount_minor, o.currency, p.provider_reference, o.kind FROM operations o "
        "JOIN payments p ON p.tenant_id = o.tenant_id AND p.payment_id = o.payment_id "
        "WHERE o.tenant_id = $1::uuid AND o.state = 'needs_review'",
        w.tenant.tenant_id);
    tx.commit();
    for (const auto& row : review) {
        const auto op = row[2].as<std::string>();
        const auto provider = row[5].as<std::string>();
        const auto kind = row[9].as<std::string>();
        INFO(provider << " " << kind << " " << row[0].as<std::string>() << " " << op << " "
                      << row[4].as<std::string>());
        ++review_codes[provider + " " + row[4].as<std::string>()];
        // Refused before executing: an integration fault, never the provider's outcome.
        CHECK(row[4].as<std::string>() != "request_rejected");
        const auto k = static_cast<std::size_t>(
            std::find_if(configs.begin(), configs.end(),
                         [&](const auto& c) { return c.name == provider; }) -
            configs.begin());
        REQUIRE(k < configs.size());
        store::Resolution r;
        r.tenant_id = w.tenant.tenant_id;
        r.payment_id = row[1].as<std::string>();
        r.kind = kind == "refund"    ? OperationKind::refund
                 : kind == "capture" ? OperationKind::capture
                                     : OperationKind::void_authorization;
        r.refund_id = row[0].as<std::string>();
        r.generation = row[3].as<long long>();
        r.operator_name = "test-operator";
        std::optional<std::pair<std::string, bool>> found;
        if (provider == adyen) {
            found = notifications.says(op);
        } else if (r.kind == OperationKind::refund) {
            providers::RefundOrder order;
            order.operation_id = op;
            order.refund_id = r.refund_id;
            order.payment_id = r.payment_id;
            order.payment_reference = row[8].as<std::string>();
            order.amount = Money{row[6].as<long long>(), row[7].as<std::string>()};
            const auto looked = providers[k]->lookup_refund(order);
            REQUIRE(looked.status != providers::LookupResult::Status::failed);
            if (looked.status == providers::LookupResult::Status::found) {
                const auto state = looked.payment->state;
                REQUIRE((state == providers::Outcome::succeeded ||
                         state == providers::Outcome::declined));
                found = {looked.payment->provider_reference,
                         state == providers::Outcome::succeeded};
            }
        } else {
            // The operator's recheck asks the provider's capture lookup and decides from it.
            engine::ReconcilerOptions o;
            o.actor = "test-operator";
            engine::Reconciler rechecker(*w.db, {providers[k]}, o);
            const auto out =
                rechecker.recheck(w.tenant.tenant_id, r.refund_id, r.generation, r.kind);
            REQUIRE(out);
            INFO(out->lookup_detail);
            CHECK(out->to != PaymentState::needs_review);
            continue;
        }
        if (found && found->second) {
            r.decision = OperatorDecision::succeeded;
            r.provider_reference = found->first;
            r.note = "done, as the provider shows it";
        } else if (found) {
            r.decision = OperatorDecision::failed;
            r.note = "refused, as the provider shows it";
        } else {
            CHECK_FALSE(books["executions"].contains(op));
            r.decision = OperatorDecision::retry;
            r.confirmed_no_charge = true;
            r.note = "the provider holds nothing under its reference";
            ++again;
        }
        CHECK(store::resolve_payment(*w.db, r).status == store::ResolveResult::Status::applied);
    }
    return again;
}

} // namespace payrecon::testing
