// Issue 32's mixed run: 1,000 payments made with capture "manual" across Stripe, Adyen,
// Checkout.com, PayPal and Square, authorised under every fault mode, then captured in full, in
// parts, voided, captured and refunded, captured and voided at once, and asked to capture more than
// was authorised -- through the real intakes, by several clients at once, sent by the workers
// under the same faults, settled by nights of the reconciler, Adyen's signed notifications (a few
// withheld) and an operator deciding what waits in review from what the provider holds. After
// quiescence the invariants are counted from our tables and from the fake's own books: what it
// authorised, captured, voided and refunded of each payment, and how often it executed each
// operation.
#include "engine/nightly.hpp"
#include "engine/worker.hpp"
#include "providers/registry.hpp"
#include "services/captures.hpp"
#include "services/intake.hpp"
#include "services/refunds.hpp"
#include "tests/execution/matrix.hpp"
#include "tests/execution/refunds.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <iostream>
#include <latch>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <sstream>
#include <thread>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// What the fake holds of one authorisation, in whichever dialect it was made, read as that dialect
// shows it -- never from our records: what it authorised, what its captures took, and whether it
// was voided (a void executed).
struct AuthorisationAtFake {
    long long authorized = 0;
    long long captured = 0;
    bool voided = false;
};

// Every authorisation the fake holds, by the operation ID it was made under: Stripe's and Adyen's
// manual PaymentIntents (`authorizations`), Checkout.com's (`checkout_authorizations`), PayPal's
// (`paypal_authorizations`) and Square's payments (`square_payments`, by reference_id).
std::map<std::string, AuthorisationAtFake> authorisations_at_fake(const nlohmann::ordered_json& l) {
    std::map<std::string, AuthorisationAtFake> out;
    const auto each = [&](const char* list, const auto& read) {
        if (l.contains(list)) {
            for (const auto& a : l[list]) {
                read(a);
            }
        }
    };
    each("authorizations", [&](const auto& a) {
        if (a["capture_method"] == "manual") {
            out[a["operation_id"].template get<std::string>()] = {
                a["amount"].template get<long long>(),
                a["amount_captured"].template get<long long>(), a["status"] == "canceled"};
        }
    });
    each("checkout_authorizations", [&](const auto& a) {
        if (!a["capture"].template get<bool>()) {
            out[a["operation_id"].template get<std::string>()] = {
                a["amount"].template get<long long>(),
                a["amount_captured"].template get<long long>(),
                a["voids"].template get<long long>() > 0};
        }
    });
    each("paypal_authorizations", [&](const auto& a) {
        out[a["operation_id"].template get<std::string>()] = {
            a["amount"].template get<long long>(), a["amount_captured"].template get<long long>(),
            a["status"] == "VOIDED"};
    });
    each("square_payments", [&](const auto& p) {
        if (p.contains("reference_id")) {
            const bool completed = p["status"] == "COMPLETED";
            out[p["reference_id"].template get<std::string>()] = {
                p["approved_money"]["amount"].template get<long long>(),
                completed ? p["amount_money"]["amount"].template get<long long>() : 0,
                p["status"] == "CANCELED"};
        }
    });
    return out;
}

// One request of a client to the capture, void or refund intake, and what it answered.
struct Asked {
    enum class What { capture, void_it, refund, race };
    What what = What::capture;
    std::string payment_id;
    std::string body;       // a capture's or refund's; a race's capture
    bool over = false;      // more than is left: to be refused 409
    bool not_final = false; // final false to a provider that captures once: to be refused 422
    bool withhold = false;  // Adyen's notification of it never received
    int status = 0;
    std::string answer;
    int void_status = 0; // a race's void
    std::string void_answer;
};

// The problem type of an intake's refusal (RFC 9457 `type`), or the whole answer.
std::string error_code(const std::string& answer) {
    const auto j = nlohmann::json::parse(answer, nullptr, false);
    return j.is_object() && j.contains("type") && j["type"].is_string()
               ? j["type"].get<std::string>()
               : answer;
}

} // namespace

TEST_CASE("capture matrix: a mixed run of 1,000 manual-capture payments across Stripe, Adyen, "
          "Checkout.com, PayPal and Square -- captured whole, in parts, voided, captured then "
          "refunded, captured and voided at once, over-asked -- with every fault mode ends with "
          "the provider's books equal to ours",
          "[execution][db][matrix][fault][captures][slow]") {
    const auto started = std::chrono::steady_clock::now();
    World w("stripe", every_fault_at_rates(20261207));
    const std::vector<std::string> kinds = {"stripe", "adyen", "checkout", "paypal", "square"};
    std::vector<providers::ProviderConfig> configs;
    providers::Config configured;
    for (const auto& kind : kinds) {
        configs.push_back(kind == "stripe" ? w.config : w.config_for(kind));
        configs.back().settle_delay = std::chrono::seconds(0); // PayPal's is raised to 3 h
        configured.providers[configs.back().name] = configs.back();
    }
    // The intakes know the providers as serve does: what each can capture in parts.
    IntakeSettings settings;
    settings.providers = providers::provider_catalog(configured);
    const std::string& adyen = configs[1].name;

    // 1,000 authorisations in three currencies, a fifth to each provider, through the real intake.
    const std::vector<std::pair<std::string, long long>> currencies = {
        {"EUR", 2500}, {"USD", 1999}, {"JPY", 1200}};
    {
        IntakeService intake(*w.db, test_keys(), settings);
        for (int i = 0; i < 1000; ++i) {
            const auto k = static_cast<std::size_t>(i) % kinds.size();
            const auto& [currency, amount] =
                currencies[static_cast<std::size_t>(i) / kinds.size() % currencies.size()];
            const std::string ref = unique_name("cap");
            const std::string body = R"({"amount": )" + std::to_string(amount + i) +
                                     R"(, "currency": ")" + currency +
                                     R"(", "merchant_reference": ")" + ref + R"(", "provider": ")" +
                                     configs[k].name + R"(", "payment_method": ")" +
                                     World::method_for(kinds[k]) + R"(", "capture": "manual"})";
            REQUIRE(intake.create_payment(w.writer.principal, "k-" + ref, body, "").status == 202);
        }
    }

    const engine::WorkerOptions wo = mixed_worker_options("capture-mix-worker");
    std::ostringstream worker_log;
    const auto make_providers = providers_of(configs);
    std::vector<std::unique_ptr<providers::Provider>> owned;
    std::vector<providers::Provider*> providers;
    for (const auto& c : configs) {
        owned.push_back(providers::create_provider(c));
        providers.push_back(owned.back().get());
    }
    engine::NightlyOptions no;
    no.send = w.options();

    // The authorisations: workers send everything once, then nights until nothing is left to do
    // (each finding the last attempts 3 h older, past PayPal's search lag), then an operator
    // decides Adyen's, which cannot be asked, from its Customer Area.
    engine::Worker(wo, make_providers, worker_log).run();
    CHECK(count_rows("payments", w.tenant.tenant_id, "state = 'unknown'") > 50);
    nights_until_quiet(w, providers, no);
    const std::size_t adyen_payments_reviewed = resolve_adyen_payments_in_review(w);
    CHECK(adyen_payments_reviewed > 0);
    REQUIRE(count_rows("payments", w.tenant.tenant_id, "state IN ('succeeded', 'failed')") == 1000);
    check_invariants(w, {"EUR", "USD", "JPY"}); // nothing captured yet: the fake kept nothing

    // From the captures on, Adyen's notifications are received as serve receives them.
    AdyenNotifications notifications(w, adyen);

    // Captures and voids through the real intake, per provider its authorised payments, the j-th
    // by pattern j % 6 (a = what it authorised):
    //   0: captured whole (no amount)
    //   1: in parts -- a quarter, a quarter, then a quarter final where the provider captures in
    //      parts; else a non-final capture (refused 422), then half final
    //   2: voided
    //   3: three fifths captured, refunded a third of `a` once captured
    //   4: half captured and a void asked at once, on two connections (final where the provider
    //      captures once: the intake takes exactly one of them; not final where it captures in
    //      parts: the intake may take both, and the provider decides the order)
    //   5: a + 1 asked (refused 409 capture_exceeds_authorization), then a captured
    // Adyen's notifications of every fourth whole capture and void never arrive: they wait their
    // window out and go to an operator (notification_missing).
    std::vector<std::vector<Asked>> asked(configs.size());
    std::vector<std::vector<std::pair<std::string, long long>>> to_refund(configs.size());
    {
        std::map<std::string, std::vector<std::pair<std::string, long long>>> authorised;
        pqxx::connection conn(database_url());
        pqxx::read_transaction tx(conn);
        for (const auto& row :
             tx.exec_params("SELECT provider, payment_id::text, amount_minor FROM payments WHERE "
                            "tenant_id = $1::uuid AND state = 'succeeded' ORDER BY created_at, "
                            "payment_id",
                            w.tenant.tenant_id)) {
            authorised[row[0].as<std::string>()].emplace_back(row[1].as<std::string>(),
                                                              row[2].as<long long>());
        }
        tx.commit();
        for (std::size_t k = 0; k < configs.size(); ++k) {
            const bool in_parts = providers::descriptor_of(kinds[k]).api.multiple_captures;
            const auto& mine = authorised[configs[k].name];
            INFO(kinds[k]);
            REQUIRE(mine.size() > 150);
            for (std::size_t j = 0; j < mine.size(); ++j) {
                const auto& [id, a] = mine[j];
                const auto capture = [&](const std::string& body, bool over = false,
                                         bool not_final = false, bool withhold = false) {
                    Asked one;
                    one.payment_id = id;
                    one.body = body;
                    one.over = over;
                    one.not_final = not_final;
                    one.withhold = withhold && kinds[k] == "adyen";
                    asked[k].push_back(std::move(one));
                };
                const auto amount = [](long long minor, bool final = true) {
                    return R"({"amount": )" + std::to_string(minor) +
                           (final ? "}" : R"(, "final": false})");
                };
                switch (j % 6) {
                case 0:
                    capture("{}", false, false, j % 24 == 0);
                    break;
                case 1:
                    if (in_parts) {
                        capture(amount(a / 4, false));
                        capture(amount(a / 4, false));
                        capture(amount(a / 4));
                    } else {
                        capture(amount(a / 4, false), false, true);
                        capture(amount(a / 2));
                    }
                    break;
                case 2: {
                    Asked v;
                    v.what = Asked::What::void_it;
                    v.payment_id = id;
                    v.withhold = kinds[k] == "adyen" && j % 24 == 2;
                    asked[k].push_back(std::move(v));
                    break;
                }
                case 3:
                    capture(amount(a * 3 / 5));
                    to_refund[k].emplace_back(id, a / 3);
                    break;
                case 4: {
                    Asked race;
                    race.what = Asked::What::race;
                    race.payment_id = id;
                    race.body = amount(a / 2, !in_parts);
                    asked[k].push_back(std::move(race));
                    break;
                }
                default:
                    capture(amount(a + 1), true);
                    capture(amount(a));
                }
            }
        }
    }

    // Each provider's requests on connections of their own, the five clients at once; a race's
    // void on a second connection, let go with its capture.
    const auto ask_all = [&](std::vector<std::vector<Asked>>& requests) {
        std::vector<std::string> thrown(configs.size());
        std::vector<std::thread> clients;
        for (std::size_t k = 0; k < configs.size(); ++k) {
            clients.emplace_back([&, k] {
                try {
                    const auto db = connect();
                    const auto second = connect();
                    CaptureService captures(*db, test_keys(), settings);
                    CaptureService racing(*second, test_keys(), settings);
                    RefundService refunds(*db, test_keys(), settings);
                    const auto& p = w.writer.principal;
                    for (auto& a : requests[k]) {
                        IntakeResponse r;
                        if (a.what == Asked::What::capture) {
                            r = captures.create_capture(p, a.payment_id, unique_name("ck"), a.body,
                                                        "");
                        } else if (a.what == Asked::What::void_it) {
                            r = captures.create_void(p, a.payment_id, unique_name("vk"), "", "");
                        } else if (a.what == Asked::What::refund) {
                            r = refunds.create_refund(p, a.payment_id, unique_name("rk"), a.body,
                                                      "");
                        } else {
                            std::latch go(2);
                            std::string failed;
                            std::thread void_it([&] {
                                try {
                                    go.arrive_and_wait();
                                    const auto v = racing.create_void(p, a.payment_id,
                                                                      unique_name("vk"), "", "");
                                    a.void_status = v.status;
                                    a.void_answer = v.body;
                                } catch (const std::exception& e) {
                                    failed = e.what();
                                }
                            });
                            go.arrive_and_wait();
                            r = captures.create_capture(p, a.payment_id, unique_name("ck"), a.body,
                                                        "");
                            void_it.join();
                            if (!failed.empty()) {
                                throw std::runtime_error(failed);
                            }
                        }
                        a.status = r.status;
                        a.answer = r.body;
                    }
                } catch (const std::exception& e) {
                    thrown[k] = e.what();
                }
            });
        }
        for (auto& c : clients) {
            c.join();
        }
        for (std::size_t k = 0; k < configs.size(); ++k) {
            INFO(kinds[k]);
            REQUIRE(thrown[k].empty());
        }
    };

    // The operation IDs of the accepted operations whose Adyen notifications are withheld.
    const auto withhold = [&](const std::vector<std::vector<Asked>>& requests) {
        pqxx::connection conn(database_url());
        pqxx::read_transaction tx(conn);
        for (const auto& list : requests) {
            for (const auto& a : list) {
                if (a.withhold && a.status == 202) {
                    notifications.withheld.insert(
                        tx.exec_params("SELECT operation_id FROM operations WHERE id = $1::uuid",
                                       nlohmann::json::parse(a.answer)["id"].get<std::string>())
                            .at(0)
                            .at(0)
                            .as<std::string>());
                }
            }
        }
        tx.commit();
    };

    // Workers send what was asked once; then nights until nothing is left to do, each receiving
    // the notifications sent since the last and finding the operations' last attempts 4 h older
    // (past Adyen's notification window), with an operator after each.
    std::map<std::string, int> review_codes; // operations in review, by "provider review_code"
    const auto quiesce = [&] {
        engine::Worker(wo, make_providers, worker_log).run();
        // Sent, but what waits behind an older capture or void of its payment still open.
        CHECK(count_rows("operations", w.tenant.tenant_id,
                         "state = 'pending' AND NOT EXISTS (SELECT 1 FROM operations e WHERE "
                         "e.tenant_id = operations.tenant_id AND e.payment_id = "
                         "operations.payment_id AND e.kind IN ('capture', 'void') AND "
                         "e.created_at < operations.created_at AND e.state IN ('processing', "
                         "'retry_scheduled', 'unknown', 'needs_review'))") == 0);
        int nights = 0;
        for (; nights < 20; ++nights) {
            notifications.receive();
            exec_sql("UPDATE operations SET last_attempt_at = last_attempt_at - interval '4 hours "
                     "1 minute', next_attempt_at = least(next_attempt_at, now()) WHERE tenant_id "
                     "= '" +
                     w.tenant.tenant_id + "' AND state IN ('unknown', 'retry_scheduled')");
            const auto report = engine::run_nightly(*w.db, providers, no);
            INFO(report.failure.value_or(""));
            REQUIRE_FALSE(report.failure);
            if (count_rows("operations", w.tenant.tenant_id,
                           "state IN ('pending', 'processing', 'retry_scheduled', 'unknown')") ==
                    0 &&
                resolve_operations_in_review(w, configs, providers, adyen, notifications,
                                             review_codes) == 0) {
                break;
            }
        }
        INFO(query_value("SELECT coalesce(string_agg(kind || ' ' || state || ' ' || "
                         "coalesce(review_code, ''), ', '), '') FROM operations WHERE tenant_id = "
                         "$1::uuid AND state NOT IN ('succeeded', 'failed')",
                         w.tenant.tenant_id));
        CHECK(nights < 20);
    };

    ask_all(asked);
    withhold(asked);
    // What the intake answered: everything taken but the over-asks, the non-final captures a
    // provider cannot take, and the loser of each race it decided.
    long long accepted = 0;
    long long over_refused = 0;
    long long not_final_refused = 0;
    long long race_refused = 0;
    long long races_both_taken = 0;
    for (std::size_t k = 0; k < configs.size(); ++k) {
        const bool in_parts = providers::descriptor_of(kinds[k]).api.multiple_captures;
        for (const auto& a : asked[k]) {
            INFO(kinds[k] << " " << a.body << ": " << a.status << " " << a.answer << " / "
                          << a.void_status << " " << a.void_answer);
            if (a.over) {
                CHECK(a.status == 409);
                CHECK(error_code(a.answer) == "capture_exceeds_authorization");
                over_refused += a.status == 409 ? 1 : 0;
            } else if (a.not_final) {
                CHECK(a.status == 422);
                CHECK(error_code(a.answer) == "final_capture_required");
                not_final_refused += a.status == 422 ? 1 : 0;
            } else if (a.what == Asked::What::race) {
                const int taken = (a.status == 202 ? 1 : 0) + (a.void_status == 202 ? 1 : 0);
                accepted += taken;
                CHECK(taken >= 1);
                // A final capture and a void exclude each other; a part and a void may both be
                // taken.
                CHECK(taken <= (in_parts ? 2 : 1));
                races_both_taken += taken == 2 ? 1 : 0;
                if (a.status != 202) {
                    CHECK(a.status == 409);
                    CHECK(error_code(a.answer) == "payment_not_capturable");
                    ++race_refused;
                }
                if (a.void_status != 202) {
                    CHECK(a.void_status == 409);
                    CHECK(error_code(a.void_answer) == "payment_not_voidable");
                    ++race_refused;
                }
            } else {
                CHECK(a.status == 202);
                accepted += a.status == 202 ? 1 : 0;
            }
        }
    }
    // What was taken is what our tables hold: a refusal stores nothing.
    CHECK(count_rows("operations", w.tenant.tenant_id, "kind IN ('capture', 'void')") == accepted);
    CHECK(over_refused > 100);
    CHECK(not_final_refused > 50);
    CHECK(race_refused > 50);
    CHECK(notifications.withheld.size() > 10);
    quiesce();

    // Refunds of the three-fifths captures that succeeded, a third of what was authorised each;
    // and of every fourth whole capture one cent more than it took (refused 409).
    std::vector<std::vector<Asked>> refunds(configs.size());
    long long refunds_asked = 0;
    for (std::size_t k = 0; k < configs.size(); ++k) {
        for (const auto& [id, minor] : to_refund[k]) {
            if (query_value("SELECT captured_minor FROM payments WHERE payment_id = $1::uuid",
                            id) == "0") {
                continue;
            }
            Asked r;
            r.what = Asked::What::refund;
            r.payment_id = id;
            r.body = R"({"amount": )" + std::to_string(minor) + "}";
            refunds[k].push_back(std::move(r));
            ++refunds_asked;
        }
        for (std::size_t j = 0; j < asked[k].size(); j += 24) {
            const auto& a = asked[k][j];
            const std::string captured = query_value(
                "SELECT captured_minor FROM payments WHERE payment_id = $1::uuid", a.payment_id);
            Asked r;
            r.what = Asked::What::refund;
            r.payment_id = a.payment_id;
            r.body = R"({"amount": )" + std::to_string(std::stoll(captured) + 1) + "}";
            r.over = true;
            refunds[k].push_back(std::move(r));
        }
    }
    ask_all(refunds);
    long long refund_over_refused = 0;
    for (std::size_t k = 0; k < configs.size(); ++k) {
        for (const auto& r : refunds[k]) {
            INFO(kinds[k] << " " << r.body << ": " << r.status << " " << r.answer);
            if (r.over) {
                CHECK(r.status == 409);
                const auto code = error_code(r.answer);
                CHECK((code == "refund_exceeds_payment" || code == "payment_not_refundable"));
                refund_over_refused += r.status == 409 ? 1 : 0;
            } else {
                CHECK(r.status == 202);
            }
        }
    }
    CHECK(count_rows("operations", w.tenant.tenant_id, "kind = 'refund'") == refunds_asked);
    CHECK(refunds_asked > 100);
    CHECK(refund_over_refused > 10);
    quiesce();

    // The invariants, from our tables and the fake's books.
    const auto ledger = w.fake->ledger();
    const auto at_fake = authorisations_at_fake(ledger);
    const auto charged_at_fake = charges_at_fake(ledger);
    const auto executions = [&](const std::string& counted) {
        return ledger["executions"].contains(counted) ? ledger["executions"][counted].get<int>()
                                                      : 0;
    };
    CHECK(count_rows("payments", w.tenant.tenant_id,
                     "state IN ('pending', 'processing', 'unknown', 'retry_scheduled', "
                     "'needs_review')") == 0);
    CHECK(count_rows("operations", w.tenant.tenant_id,
                     "state IN ('pending', 'processing', 'unknown', 'retry_scheduled', "
                     "'needs_review')") == 0);
    check_invariants(w, {"EUR", "USD", "JPY"});
    check_refund_invariants(w, {"EUR", "USD", "JPY"});
    {
        pqxx::connection conn(database_url());
        pqxx::read_transaction tx(conn);
        // Per payment: ours beside the fake's.
        std::set<std::string> ours;
        for (const auto& row : tx.exec_params(
                 "SELECT p.payment_id::text, p.operation_id, p.provider, p.state, p.amount_minor, "
                 "p.captured_minor, p.capture_held_minor, p.voided_at IS NOT NULL, "
                 "p.final_capture_held, "
                 "coalesce(sum(o.amount_minor) FILTER (WHERE o.kind = 'capture' AND o.state = "
                 "'succeeded'), 0), "
                 "count(*) FILTER (WHERE o.kind = 'capture' AND o.state = 'succeeded' AND "
                 "o.final), "
                 "coalesce(sum(o.amount_minor) FILTER (WHERE o.kind = 'refund' AND o.state = "
                 "'succeeded'), 0), "
                 "count(*) FILTER (WHERE o.kind = 'void' AND o.state = 'succeeded') "
                 "FROM payments p LEFT JOIN operations o ON o.tenant_id = p.tenant_id AND "
                 "o.payment_id = p.payment_id WHERE p.tenant_id = $1::uuid "
                 "GROUP BY p.tenant_id, p.payment_id",
                 w.tenant.tenant_id)) {
            const auto op = row[1].as<std::string>();
            const auto provider = row[2].as<std::string>();
            const auto state = row[3].as<std::string>();
            const auto authorized = row[4].as<long long>();
            const auto captured = row[5].as<long long>();
            const bool voided = row[7].as<bool>();
            const auto refunded = row[11].as<long long>();
            const bool in_parts =
                providers::descriptor_of(
                    kinds[static_cast<std::size_t>(
                        std::find_if(configs.begin(), configs.end(),
                                     [&](const auto& c) { return c.name == provider; }) -
                        configs.begin())])
                    .api.multiple_captures;
            const auto found = at_fake.find(op);
            const AuthorisationAtFake theirs =
                found == at_fake.end() ? AuthorisationAtFake{} : found->second;
            const auto charge = charged_at_fake.find(op);
            const long long theirs_refunded =
                charge == charged_at_fake.end() ? 0 : charge->second.refunded;
            INFO(provider << " payment " << row[0].as<std::string>() << " " << op << " " << state
                          << ": authorised " << authorized << ", captured " << captured << " (held "
                          << row[6].as<long long>() << "), voided " << voided << ", refunded "
                          << refunded << "; at the fake: authorised " << theirs.authorized
                          << ", captured " << theirs.captured << ", voided " << theirs.voided
                          << ", refunded " << theirs_refunded);
            ours.insert(op);
            // Our own books: what succeeded is what is held, nothing in flight.
            CHECK(captured == row[9].as<long long>());
            CHECK(row[6].as<long long>() == captured);
            CHECK(row[12].as<long long>() == (voided ? 1 : 0));
            // The fake's: never more captured than authorised, nor refunded than captured.
            CHECK(theirs.captured <= theirs.authorized);
            CHECK(theirs_refunded <= theirs.captured);
            // Its books are ours.
            CHECK(theirs.captured == captured);
            CHECK(theirs_refunded == refunded);
            CHECK(theirs.voided == voided);
            if (state == "succeeded") {
                CHECK(theirs.authorized == authorized);
            } else {
                CHECK(state == "failed");
                CHECK(captured == 0);
            }
            // A void leaves nothing capturable: no final capture beside it, and where the provider
            // captures once, nothing captured at all.
            if (voided) {
                CHECK(row[10].as<long long>() == 0);
                CHECK_FALSE(row[8].as<bool>());
                CHECK(captured < authorized);
                if (!in_parts) {
                    CHECK(captured == 0);
                }
            }
        }
        for (const auto& [op, theirs] : at_fake) {
            INFO("at the fake: " << op);
            CHECK(ours.count(op) == 1); // every authorisation the fake holds is one of ours
        }

        // Per operation: executed at most once at the fake, and once if it succeeded -- under its
        // operation ID, or (Square's unkeyed complete and cancel) under the payment it names.
        long long square_calls = 0;
        for (const auto& row : tx.exec_params(
                 "SELECT o.id::text, o.kind, o.operation_id, o.state, o.provider, "
                 "p.provider_reference FROM operations o JOIN payments p ON p.tenant_id = "
                 "o.tenant_id AND p.payment_id = o.payment_id WHERE o.tenant_id = $1::uuid",
                 w.tenant.tenant_id)) {
            const auto kind = row[1].as<std::string>();
            const bool square = row[4].as<std::string>() == configs[4].name;
            std::string counted = row[2].as<std::string>();
            if (square && kind != "refund") {
                counted = (kind == "capture" ? "complete:" : "cancel:") + row[5].as<std::string>();
                ++square_calls;
            }
            INFO(kind << " " << row[0].as<std::string>() << " " << row[3].as<std::string>()
                      << " counted as " << counted);
            CHECK(executions(counted) <= 1);
            if (row[3].as<std::string>() == "succeeded") {
                CHECK(executions(counted) == 1);
            }
        }
        CHECK(square_calls > 50);
        tx.commit();
    }

    // Every provider took part: captures, voids and refunds succeeded; unknowns met and
    // reconciled -- by the lookup where the provider has one, by notification or an operator
    // where it has none.
    std::ostringstream summary;
    summary << "capture matrix: authorised "
            << count_rows("payments", w.tenant.tenant_id, "state = 'succeeded'")
            << " of 1000 (Adyen's reviewed by an operator: " << adyen_payments_reviewed
            << "); intake refused " << over_refused << " over-captures, " << not_final_refused
            << " non-final captures, " << race_refused << " race losers (" << races_both_taken
            << " races both taken), " << refund_over_refused << " over-refunds\n";
    for (std::size_t k = 0; k < kinds.size(); ++k) {
        INFO(kinds[k]);
        const std::string mine = "provider = '" + configs[k].name + "'";
        const auto ops = [&](const std::string& where) {
            return count_rows("operations", w.tenant.tenant_id, mine + " AND " + where);
        };
        const long long captures = ops("kind = 'capture' AND state = 'succeeded'");
        const long long voids = ops("kind = 'void' AND state = 'succeeded'");
        const long long refunded = ops("kind = 'refund' AND state = 'succeeded'");
        const long long unknown = count_rows(
            "payment_attempts", w.tenant.tenant_id,
            "outcome = 'unknown' AND operation_id IN (SELECT operation_id FROM operations WHERE " +
                mine + " AND kind IN ('capture', 'void'))");
        const long long looked_up =
            count_rows("payment_lookups", w.tenant.tenant_id,
                       "operation_id IN (SELECT operation_id FROM operations WHERE " + mine +
                           " AND kind IN ('capture', 'void'))");
        const long long resolved = count_rows(
            "audit_log", w.tenant.tenant_id,
            "action = 'review.resolve' AND subject_id IN (SELECT id::text FROM operations WHERE " +
                mine + ")");
        summary << "  " << kinds[k] << ": captures " << captures << ", voids " << voids
                << ", refunds " << refunded << ", failed " << ops("state = 'failed'")
                << "; unknown answers " << unknown << ", capture/void lookups " << looked_up
                << ", operator decisions " << resolved << "\n";
        CHECK(captures > 60);
        CHECK(voids > 15);
        CHECK(refunded > 15);
        CHECK(unknown > 0);
        if (kinds[k] == "adyen") {
            CHECK(count_rows("provider_events", w.tenant.tenant_id,
                             "event_type = 'CAPTURE' AND outcome = 'succeeded'") > 60);
            CHECK(count_rows("provider_events", w.tenant.tenant_id,
                             "event_type = 'CANCELLATION' AND outcome = 'succeeded'") > 15);
            CHECK(resolved > 0);
        } else {
            CHECK(looked_up > 0);
        }
    }
    {
        std::ostringstream codes;
        for (const auto& [code, n] : review_codes) {
            codes << code << ": " << n << "\n";
        }
        summary << "  in review: " << codes.str();
        INFO(codes.str());
        CHECK(review_codes[adyen + " notification_missing"] > 0);
    }
    summary << "  wall time "
            << std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() -
                                                                started)
                   .count()
            << " s\n";
    std::cout << summary.str();
}
