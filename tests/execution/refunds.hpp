#pragma once
// What the refund execution tests share: the provider kinds whose adapters refund, what each
// answers a refund past the charge, a refund of a payment as a worker sends it, the fake's
// refunded total, what the fake holds of each charge, and DESIGN section 12's invariants for
// refunds.
#include "services/refunds.hpp"
#include "tests/execution/world.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <vector>

namespace payrecon::testing {

// The kinds whose adapters refund: the refund tests run for each
// (GENERATE(from_range(refunding_kinds()))).
inline const std::vector<std::string>& refunding_kinds() {
    static const std::vector<std::string> k_kinds{"stripe", "square", "checkout", "paypal"};
    return k_kinds;
}

// What the provider's refund call answers for a refund it accepted. Checkout.com's protocol
// differs: every accepted refund is a 202 (`pending`: "for card payments, refund requests are
// processed asynchronously"), which the executor holds as `unknown` until the reconciler's lookup
// finds its Refund action approved. The others answer the refund's outcome at once.
inline providers::Outcome accepted_refund(const std::string& kind) {
    return kind == "checkout" ? providers::Outcome::pending : providers::Outcome::succeeded;
}

// The error class of a refund the provider refuses because the charge has nothing left (a final
// answer: declined), per kind. Checkout.com's document names one refusal of a refund, 403 "Refund
// not allowed" (no body, no code); a 422 is "Invalid data was sent", which the adapter sends to
// review. PayPal answers a capture with nothing left 422 CAPTURE_FULLY_REFUNDED.
inline std::string over_refund_error(const std::string& kind) {
    if (kind == "checkout") {
        return "refund_not_allowed";
    }
    if (kind == "paypal") {
        return "refund_declined:CAPTURE_FULLY_REFUNDED";
    }
    return kind == "square" ? "refund_declined:REFUND_AMOUNT_INVALID"
                            : "invalid_request:charge_already_refunded";
}

// A refund of `amount` cents of `p` under operation ID `op`, as the executor sends it.
inline providers::RefundOrder refund_of(OnePayment& p, const std::string& op, long long amount) {
    providers::RefundOrder o;
    o.operation_id = op;
    o.refund_id = new_uuid();
    o.payment_id = p.w.payment_id_of(p.ref);
    o.payment_reference = p.column("provider_reference");
    o.amount = Money{amount, "EUR"};
    o.reason = "requested_by_customer";
    return o;
}

// A refund of `amount` cents of payment `payment_id` accepted through the real refund intake, by
// the world's writer under a key of its own; its ID.
inline std::string accept_refund(World& w, const std::string& payment_id, long long amount) {
    RefundService refunds(*w.db, test_keys());
    const auto r = refunds.create_refund(w.writer.principal, payment_id, unique_name("rk"),
                                         R"({"amount": )" + std::to_string(amount) + "}", "");
    REQUIRE(r.status == 202);
    return nlohmann::json::parse(r.body)["id"].get<std::string>();
}

// What the fake refunded in EUR, in every dialect.
inline long long refunded_eur(World& w) {
    const auto l = w.fake->ledger();
    return l.contains("refunded") && l["refunded"].contains("eur")
               ? l["refunded"]["eur"].get<long long>()
               : 0;
}

// What the fake holds of one charge, in whichever dialect it was made: what it charged (nothing
// for a decline) and what it has refunded of it, in the currency's minor units.
struct ChargeAtFake {
    long long charged = 0;
    long long refunded = 0;
};

// PayPal's amount {currency_code, value}, its value written with the currency's ISO 4217
// decimals ("25.00", "1200"), in minor units.
inline long long paypal_minor(const nlohmann::ordered_json& money) {
    std::string digits = money.at("value").get<std::string>();
    digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
    return std::stoll(digits);
}

// Every charge the fake holds, by the operation ID it was made under: Stripe's and Adyen's
// PaymentIntents (metadata operation_id), Checkout.com's payments (reference), PayPal's orders
// (the purchase unit's invoice_id) and Square's payments (reference_id), each read as that dialect
// shows it -- never from our records.
inline std::map<std::string, ChargeAtFake> charges_at_fake(const nlohmann::ordered_json& ledger) {
    std::map<std::string, ChargeAtFake> out;
    const auto each = [&](const char* list, const auto& read) {
        if (ledger.contains(list)) {
            for (const auto& p : ledger[list]) {
                read(p);
            }
        }
    };
    each("payment_intents", [&](const auto& pi) {
        if (pi.contains("metadata") && pi["metadata"].contains("operation_id") &&
            !pi["charges"]["data"].empty()) {
            const auto& charge = pi["charges"]["data"][0];
            auto& c = out[pi["metadata"]["operation_id"].template get<std::string>()];
            c.charged = charge["amount_captured"].template get<long long>();
            c.refunded = charge["amount_refunded"].template get<long long>();
        }
    });
    each("checkout_payments", [&](const auto& p) {
        if (p.contains("reference")) {
            auto& c = out[p["reference"].template get<std::string>()];
            c.charged = p["balances"]["total_captured"].template get<long long>();
            c.refunded = p["balances"]["total_refunded"].template get<long long>();
        }
    });
    each("paypal_orders", [&](const auto& o) {
        const auto& unit = o["purchase_units"][0];
        if (!unit.contains("invoice_id") || !unit.contains("payments")) {
            return;
        }
        auto& c = out[unit["invoice_id"].template get<std::string>()];
        // An order captured at once has one capture; an authorisation as many as were taken of
        // it. A DECLINED one took nothing.
        if (unit["payments"].contains("captures")) {
            for (const auto& capture : unit["payments"]["captures"]) {
                c.charged += capture["status"] == "DECLINED" ? 0 : paypal_minor(capture["amount"]);
            }
        }
        if (unit["payments"].contains("refunds")) {
            for (const auto& r : unit["payments"]["refunds"]) {
                // A FAILED refund (the provider's refusal) gave nothing back.
                c.refunded += r["status"] == "COMPLETED" ? paypal_minor(r["amount"]) : 0;
            }
        }
    });
    each("square_payments", [&](const auto& p) {
        if (p.contains("reference_id")) {
            auto& c = out[p["reference_id"].template get<std::string>()];
            c.charged = p["status"] == "COMPLETED"
                            ? p["amount_money"]["amount"].template get<long long>()
                            : 0;
            c.refunded = p.contains("refunded_money")
                             ? p["refunded_money"]["amount"].template get<long long>()
                             : 0;
        }
    });
    return out;
}

// DESIGN section 12's invariants for the refunds of `w`'s tenant, after a run has quiesced and
// every operation in review was decided, counted from the fake's ledger and our tables (what a
// payment "charged" is, for an authorisation, what its captures took):
// - every refund's operation ID executed at most once at the fake; one that succeeded with us
//   executed there (one that failed may have been executed as the provider's refusal);
// - no operation open (pending, processing, retry_scheduled, unknown) or in review;
// - per payment, at the fake: refunded <= charged; in our tables: refund_held_minor is the sum of
//   its refunds not failed, within what it charged; and what succeeded with us is what the fake
//   refunded of it;
// - per currency of `currencies`: our succeeded refunds are the fake's `refunded`, and our
//   succeeded payments less them its `charged`;
// - as many refund.succeeded events told the merchant as refunds succeeded.
inline void check_refund_invariants(World& w, const std::vector<std::string>& currencies) {
    const auto ledger = w.fake->ledger();
    const auto at_fake = charges_at_fake(ledger);
    const auto executions = [&](const std::string& op) {
        return ledger["executions"].contains(op) ? ledger["executions"][op].get<int>() : 0;
    };

    CHECK(count_rows("operations", w.tenant.tenant_id,
                     "state IN ('pending', 'processing', 'retry_scheduled', 'unknown', "
                     "'needs_review')") == 0);
    pqxx::connection conn(database_url());
    pqxx::read_transaction tx(conn);
    for (const auto& row : tx.exec_params("SELECT id::text, operation_id, state FROM operations "
                                          "WHERE tenant_id = $1::uuid AND kind = 'refund'",
                                          w.tenant.tenant_id)) {
        const auto op = row[1].as<std::string>();
        const auto state = row[2].as<std::string>();
        INFO("refund " << row[0].as<std::string>() << " " << op << " " << state);
        CHECK(executions(op) <= 1);
        if (state == "succeeded") {
            CHECK(executions(op) == 1);
        } else {
            // Not executed, or executed as the provider's refusal (Square's REJECTED, PayPal's
            // FAILED: executions that gave nothing back); that nothing went back for it, the
            // per-payment sums below check.
            CHECK(state == "failed");
        }
    }

    // Per payment: ours beside the fake's, for every payment the fake charged or we refunded.
    std::set<std::string> ours; // the charges' operation IDs
    for (const auto& row :
         tx.exec_params("SELECT p.payment_id::text, p.operation_id, p.state, p.refund_held_minor, "
                        "CASE WHEN p.capture_method = 'manual' THEN p.captured_minor "
                        "ELSE coalesce(p.charged_amount_minor, p.amount_minor) END, "
                        "coalesce(sum(o.amount_minor) FILTER (WHERE o.state <> 'failed'), 0), "
                        "coalesce(sum(o.amount_minor) FILTER (WHERE o.state = 'succeeded'), 0) "
                        "FROM payments p LEFT JOIN operations o "
                        "ON o.tenant_id = p.tenant_id AND o.payment_id = p.payment_id "
                        "AND o.kind = 'refund' "
                        "WHERE p.tenant_id = $1::uuid GROUP BY p.tenant_id, p.payment_id",
                        w.tenant.tenant_id)) {
        const auto op = row[1].as<std::string>();
        const auto held = row[3].as<long long>();
        const auto charged = row[4].as<long long>();
        const auto succeeded = row[6].as<long long>();
        INFO("payment " << row[0].as<std::string>() << " " << op << " " << row[2].as<std::string>()
                        << ": held " << held << " of " << charged << ", refunds not failed "
                        << row[5].as<long long>() << ", succeeded " << succeeded);
        ours.insert(op);
        CHECK(held == row[5].as<long long>());
        CHECK(held <= charged);
        const auto found = at_fake.find(op);
        const ChargeAtFake theirs = found == at_fake.end() ? ChargeAtFake{} : found->second;
        INFO("at the fake: charged " << theirs.charged << ", refunded " << theirs.refunded);
        CHECK(succeeded == theirs.refunded);
        if (succeeded > 0) {
            CHECK(row[2].as<std::string>() == "succeeded");
            CHECK(theirs.charged == charged);
        }
    }
    for (const auto& [op, theirs] : at_fake) {
        INFO("at the fake: " << op << " charged " << theirs.charged << ", refunded "
                             << theirs.refunded);
        CHECK(theirs.refunded <= theirs.charged);
        CHECK(ours.count(op) == 1); // every charge the fake holds is one of ours
    }

    for (const auto& currency : currencies) {
        const auto sum = [&](const std::string& table, const std::string& amount) {
            return tx
                .exec_params("SELECT coalesce(sum(" + amount + "), 0) FROM " + table +
                                 " WHERE tenant_id = $1::uuid AND state = 'succeeded' AND "
                                 "currency = $2 AND " +
                                 (table == "operations" ? "kind = 'refund'" : "true"),
                             w.tenant.tenant_id, currency)[0][0]
                .as<long long>();
        };
        std::string lower = currency;
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        const auto theirs = [&](const char* what) {
            return ledger[what].contains(lower) ? ledger[what][lower].get<long long>() : 0;
        };
        INFO(currency);
        const long long refunded = sum("operations", "amount_minor");
        CHECK(refunded == theirs("refunded"));
        CHECK(sum("payments", "CASE WHEN capture_method = 'manual' THEN captured_minor ELSE "
                              "coalesce(charged_amount_minor, amount_minor) END") -
                  refunded ==
              theirs("charged"));
    }
    tx.commit();

    CHECK(count_rows("outbox", w.tenant.tenant_id, "event_type = 'refund.succeeded'") ==
          count_rows("operations", w.tenant.tenant_id, "kind = 'refund' AND state = 'succeeded'"));
}

} // namespace payrecon::testing
