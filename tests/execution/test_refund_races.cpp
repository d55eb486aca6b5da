// Over-refund races carried through to the provider (issue 31, DESIGN sections 12 and 16): refunds
// asked at once, each on a connection of its own, are taken by the real intake only while they fit
// -- in what the payment charged, or in what an operator recorded it charged while they arrived --
// and then sent by the executor to the fake provider, whose own books say what was refunded of
// each charge. Counted from the fake's ledger, the operations and payments rows and the outbox
// (check_refund_invariants, refunds.hpp).
#include "engine/reconciler.hpp"
#include "services/refunds.hpp"
#include "services/resolution.hpp"
#include "tests/execution/refunds.hpp"
#include "tests/support/wait.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <latch>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// What one refund request was answered.
struct Answer {
    int status = 0;
    std::string type;           // a problem's type
    long long refundable = -1;  // what a 409 refund_exceeds_payment said is left
    std::string payment_status; // what a 409 payment_not_refundable said the payment is
    std::string refund_id;      // a 202's refund
};

Answer answer_of(const IntakeResponse& r) {
    Answer a;
    a.status = r.status;
    const auto body = nlohmann::json::parse(r.body);
    if (r.status == 202) {
        a.refund_id = body["id"].get<std::string>();
    } else {
        a.type = body.value("type", "");
        a.refundable = body.value("refundable", -1LL);
        a.payment_status = body.value("payment_status", "");
    }
    return a;
}

// A refund of `amount` cents of `payment_id` under `key`, as the tenant's writer asks it.
Answer ask_refund(store::Db& db, const TestPrincipal& writer, const std::string& payment_id,
                  const std::string& key, long long amount) {
    RefundService refunds(db, test_keys());
    return answer_of(refunds.create_refund(writer.principal, payment_id, key,
                                           R"({"amount": )" + std::to_string(amount) + "}", ""));
}

// Sends every refund due with `executors` executors at once, each on its own connection and its
// own adapter, until none is left to claim; then, for a kind whose accepted refund is only
// pending (Checkout.com's 202), settles them with the reconciler's lookups.
void execute_refunds(World& w, int executors) {
    std::vector<std::thread> threads;
    for (int i = 0; i < executors; ++i) {
        threads.emplace_back([&w, i] {
            auto db = connect();
            auto provider = providers::create_provider(w.config);
            auto options = w.options();
            options.worker_id = "race-executor-" + std::to_string(i);
            engine::Executor ex(*db, {provider.get()}, options);
            while (ex.run_once() > 0) {
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    if (accepted_refund(w.config.kind) != providers::Outcome::succeeded) {
        auto provider = providers::create_provider(w.config);
        engine::ReconcilerOptions o;
        o.actor = "race-reconciler";
        engine::Reconciler r(*w.db, {provider.get()}, o);
        r.run();
    }
}

// The fake's PaymentIntent ID for the operation `op` (its metadata names it).
std::string intent_of(World& w, const std::string& op) {
    const auto ledger = w.fake->ledger();
    for (const auto& pi : ledger["payment_intents"]) {
        if (pi["metadata"]["operation_id"] == op) {
            return pi["id"];
        }
    }
    FAIL("the fake provider has no PaymentIntent for " + op);
    return {};
}

} // namespace

TEST_CASE("refund races: 50 concurrent refunds that together exceed the charge -- exactly the "
          "ones that fit are taken, and executed the provider refunds exactly what we hold",
          "[execution][refunds][concurrency]") {
    const std::string kind = GENERATE(from_range(refunding_kinds()));
    INFO(kind);
    OnePayment p(kind, {});
    REQUIRE(p.state() == "succeeded");
    const std::string payment_id = p.w.payment_id_of(p.ref);
    // 50 refunds of 0.70 EUR ask 35.00 of the 25.00 charged: 35 fit (24.50), 0.50 is left.
    constexpr std::size_t k_requests = 50;
    constexpr long long k_amount = 70;
    const long long charged = std::stoll(p.column("amount_minor"));
    const long long fit = charged / k_amount;
    std::vector<Answer> answers(k_requests);
    std::latch start(static_cast<std::ptrdiff_t>(k_requests));
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < k_requests; ++i) {
        threads.emplace_back([&, i] {
            auto db = connect();
            start.arrive_and_wait();
            answers[i] = ask_refund(*db, p.w.writer, payment_id,
                                    "race-" + std::to_string(i) + "-" + p.ref, k_amount);
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    std::vector<std::string> accepted;
    for (const Answer& a : answers) {
        if (a.status == 202) {
            accepted.push_back(a.refund_id);
        } else {
            CHECK(a.status == 409);
            CHECK(a.type == "refund_exceeds_payment");
            CHECK(a.refundable == charged - fit * k_amount);
        }
    }
    REQUIRE(static_cast<long long>(accepted.size()) == fit);
    CHECK(std::stoll(p.column("refund_held_minor")) == fit * k_amount);
    CHECK(count_rows("operations", p.w.tenant.tenant_id, "kind = 'refund'") == fit);
    CHECK(count_rows("outbox", p.w.tenant.tenant_id, "event_type = 'refund.created'") == fit);

    // Sent by four executors at once: each accepted refund executed once, each refused one
    // never reached the provider.
    execute_refunds(p.w, 4);
    CHECK(count_rows("operations", p.w.tenant.tenant_id,
                     "kind = 'refund' AND state = 'succeeded'") == fit);
    for (const std::string& id : accepted) {
        const std::string op =
            query_value("SELECT operation_id FROM operations WHERE id = $1::uuid", id);
        INFO("refund " << id << " " << op);
        CHECK(p.w.executions(op) == 1);
        CHECK(p.w.deliveries(op) == 1);
    }
    const auto at_fake = charges_at_fake(p.w.fake->ledger());
    REQUIRE(at_fake.count(p.op) == 1);
    CHECK(at_fake.at(p.op).charged == charged);
    CHECK(at_fake.at(p.op).refunded == fit * k_amount);
    CHECK(at_fake.at(p.op).refunded <= at_fake.at(p.op).charged);
    CHECK(refunded_eur(p.w) == fit * k_amount);
    CHECK(p.executions() == 1);
    check_refund_invariants(p.w, {"EUR"});
}

TEST_CASE("refund races: refunds arriving while an operator records what a payment in review "
          "charged -- refused until it is decided, then taken only within the recorded amount, "
          "at the provider too",
          "[execution][refunds][concurrency][review]") {
    // The provider charged less than we asked (its amount differs: remote_mismatch), and an
    // operator decides the payment succeeded recording what it charged (`review resolve --as
    // succeeded --amount`, services' resolve) while the merchant's refunds arrive. Both lock the
    // payment's row: a refund is refused while the payment is in review, and checked against the
    // recorded amount once it is decided -- never against the 25.00 asked.
    constexpr std::size_t k_rounds = 8;
    constexpr std::size_t k_refunds = 10; // each 3.00: 30.00 asked of at most 22.50 recorded
    constexpr long long k_amount = 300;
    World w("stripe", next(std::vector<fake::Fault>(k_rounds, fake::Fault::execute_then_fin)));
    w.config.settle_delay = std::chrono::seconds(0);
    auto provider = providers::create_provider(w.config);
    const auto refs = w.payments(k_rounds);
    {
        engine::Executor ex(*w.db, {provider.get()}, w.options());
        int sent = 0;
        while (const int n = ex.run_once()) {
            sent += n;
        }
        REQUIRE(sent == static_cast<int>(k_rounds));
    }
    std::vector<long long> charged(k_rounds);
    for (std::size_t i = 0; i < k_rounds; ++i) {
        REQUIRE(w.state_of(refs[i]) == "unknown");
        // 15.50 to 22.50: never a whole number of refunds, so that something is always left.
        charged[i] = 1550 + 100 * static_cast<long long>(i);
        w.fake->seed(fake::AmountMismatch{{"", w.op_of(refs[i])}, charged[i]});
    }
    {
        engine::ReconcilerOptions o;
        o.actor = "race-reconciler";
        engine::Reconciler r(*w.db, {provider.get()}, o);
        REQUIRE(r.run().size() == k_rounds);
    }

    for (std::size_t round = 0; round < k_rounds; ++round) {
        const std::string& ref = refs[round];
        const std::string payment_id = w.payment_id_of(ref);
        const long long recorded = charged[round];
        INFO("round " << round << ": recorded " << recorded);
        REQUIRE(w.state_of(ref) == "needs_review");
        REQUIRE(query_value("SELECT review_code FROM payments WHERE payment_id = $1::uuid",
                            payment_id) == "remote_mismatch");
        // In review, a refund is refused with the payment's state; the key stays free.
        const Answer early = ask_refund(*w.db, w.writer, payment_id, "early-" + ref, k_amount);
        CHECK(early.status == 409);
        CHECK(early.type == "payment_not_refundable");
        CHECK(early.payment_status == "needs_review");

        ResolveRequest decision;
        decision.id = payment_id;
        decision.decision = OperatorDecision::succeeded;
        decision.generation = w.generation_of(ref);
        decision.note = "the customer accepted the partial charge";
        decision.provider_reference = intent_of(w, w.op_of(ref));
        decision.charged_amount = std::to_string(recorded / 100) + "." +
                                  std::to_string(recorded % 100 / 10) +
                                  std::to_string(recorded % 10);
        decision.operator_name = "alice";

        // The decision and the refunds at once, each on a connection of its own. A refund refused
        // because the payment is not decided yet is asked again, under the same key (a refusal
        // leaves it free), until it is answered otherwise.
        ResolveOutcome decided;
        std::vector<Answer> answers(k_refunds);
        std::vector<int> refused_in_review(k_refunds, 0);
        std::vector<char> answered(k_refunds, 0);
        std::latch start(static_cast<std::ptrdiff_t>(k_refunds) + 1);
        std::vector<std::thread> threads;
        threads.emplace_back([&] {
            auto db = connect();
            auto asking = providers::create_provider(w.config);
            engine::Reconciler reconciler(*db, {asking.get()}, {});
            start.arrive_and_wait();
            decided = resolve(
                *db, decision,
                [&](const store::PaymentRef& p, OperationKind kind, const std::string& subject,
                    const std::string& reference, std::optional<long long> charged_minor) {
                    return *reconciler.check_reference(p.tenant_id, subject, reference,
                                                       charged_minor, kind);
                });
        });
        for (std::size_t i = 0; i < k_refunds; ++i) {
            threads.emplace_back([&, i] {
                auto db = connect();
                start.arrive_and_wait();
                answered[i] = wait_until(
                    [&] {
                        answers[i] = ask_refund(*db, w.writer, payment_id,
                                                "race-" + std::to_string(i) + "-" + ref, k_amount);
                        if (answers[i].type == "payment_not_refundable") {
                            ++refused_in_review[i];
                            return false;
                        }
                        return true;
                    },
                    std::chrono::seconds(30), std::chrono::milliseconds(1));
            });
        }
        for (auto& t : threads) {
            t.join();
        }
        REQUIRE(decided.status == ResolveOutcome::Status::applied);
        CHECK(decided.checked == ReferenceChecked::evidence); // the lookup saw its amount
        CHECK(decided.charged_minor.value_or(-1) == recorded);
        CHECK(w.state_of(ref) == "succeeded");
        CHECK(query_value("SELECT charged_amount_minor FROM payments WHERE payment_id = $1::uuid",
                          payment_id) == std::to_string(recorded));
        long long accepted = 0;
        int in_review = 0;
        for (std::size_t i = 0; i < k_refunds; ++i) {
            INFO("refund " << i);
            REQUIRE(answered[i]);
            in_review += refused_in_review[i];
            if (answers[i].status == 202) {
                ++accepted;
            } else {
                CHECK(answers[i].status == 409);
                CHECK(answers[i].type == "refund_exceeds_payment");
                CHECK(answers[i].refundable == recorded - recorded / k_amount * k_amount);
            }
        }
        INFO(in_review << " refused while the payment was in review");
        // Exactly what fits in the recorded amount: fewer than would fit in the 25.00 asked.
        CHECK(accepted == recorded / k_amount);
        const long long left = recorded - accepted * k_amount;
        CHECK(std::stoll(
                  query_value("SELECT refund_held_minor FROM payments WHERE payment_id = $1::uuid",
                              payment_id)) == accepted * k_amount);
        // What is left of the recorded amount fits, one cent more does not.
        const Answer over = ask_refund(*w.db, w.writer, payment_id, "over-" + ref, left + 1);
        CHECK(over.status == 409);
        CHECK(over.type == "refund_exceeds_payment");
        CHECK(over.refundable == left);
        CHECK(ask_refund(*w.db, w.writer, payment_id, "rest-" + ref, left).status == 202);
        const Answer none = ask_refund(*w.db, w.writer, payment_id, "none-" + ref, 1);
        CHECK(none.status == 409);
        CHECK(none.refundable == 0);
        CHECK(std::stoll(
                  query_value("SELECT refund_held_minor FROM payments WHERE payment_id = $1::uuid",
                              payment_id)) == recorded);
        CHECK(count_rows("operations", w.tenant.tenant_id,
                         "kind = 'refund' AND payment_id = '" + payment_id + "'") == accepted + 1);
    }

    // Sent: the provider refunds each charge whole -- what it charged, the amount recorded.
    execute_refunds(w, 2);
    const auto at_fake = charges_at_fake(w.fake->ledger());
    long long refunded = 0;
    for (std::size_t round = 0; round < k_rounds; ++round) {
        const std::string op = w.op_of(refs[round]);
        INFO("round " << round << ": " << op);
        REQUIRE(at_fake.count(op) == 1);
        CHECK(at_fake.at(op).charged == charged[round]);
        CHECK(at_fake.at(op).refunded == charged[round]);
        CHECK(w.executions(op) == 1);
        refunded += charged[round];
    }
    CHECK(refunded_eur(w) == refunded);
    CHECK(count_rows("operations", w.tenant.tenant_id,
                     "kind = 'refund' AND state <> 'succeeded'") == 0);
    check_refund_invariants(w, {"EUR"});
}
