// Issue 19, against the fake Stripe provider with the real binary (PAYRECON_BIN), as an operator
// runs it: a provider that refuses every request before executing anything (the account does not
// know a parameter payrecon sends) is an integration fault -- the payments go to review as
// request_rejected, never failed, nothing is executed, nightly says so by provider and code (exit
// 3), the worker logs each at error level; once the configuration is fixed, review resolve --as
// retry sends each again with the same operation ID and it is charged once. A real card decline
// still ends failed with its decline code. Outcomes are counted in rows and in the fake's ledger.
// A scratch database: nightly's exit code depends on every payment in it.
#include "tests/support/operated.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

// A payment of 25.00 EUR for `w`'s provider, paid with `payment_method`, through the real intake.
std::string payment_with(Operated& w, const std::string& payment_method) {
    IntakeService intake(*w.db, test_keys());
    const std::string ref = unique_name("ord");
    const std::string body = R"({"amount": 2500, "currency": "EUR", "merchant_reference": ")" +
                             ref + R"(", "provider": ")" + w.config.name +
                             R"(", "payment_method": ")" + payment_method + R"("})";
    REQUIRE(intake.create_payment(w.writer.principal, "k-" + ref, body, "").status == 202);
    return ref;
}

} // namespace

TEST_CASE("rejected requests: a provider refusing every request puts the payments in review as "
          "request_rejected with nothing executed, nightly exits 3 naming the code, and after the "
          "fix a retry charges each once with the same operation ID",
          "[cli][db][rejected]") {
    MigratedScratch scratch;
    Operated w(scratch.url());
    // The provider's side of the misconfiguration: it does not know `off_session`, which every
    // payrecon payment carries -- Stripe's 400 invalid_request_error parameter_unknown.
    auto faults = w.fake->faults();
    faults.unknown_parameters = {"off_session"};
    w.fake->set_faults(faults);
    const auto refs = w.payments(3);

    const Run sent = w.payrecon({"worker", "--once"});
    CHECK(sent.exit_code == 0);
    for (const auto& ref : refs) {
        INFO(ref);
        CHECK(w.state_of(ref) == "needs_review");
        CHECK(w.column(ref, "review_code") == "request_rejected");
        CHECK(contains(w.column(ref, "review_reason"),
                       "parameter_unknown: Received unknown parameter: off_session"));
        CHECK(w.executions(ref) == 0); // the provider executed nothing
        CHECK(w.deliveries(ref) == 1);
    }
    CHECK(w.count("payment_attempts",
                  "outcome = 'rejected' AND error_class = 'request_rejected:parameter_unknown' AND "
                  "http_status = 400") == 3);
    CHECK(w.count("payments", "state = 'failed'") == 0); // never the customer's decline
    CHECK(w.count("outbox", "event_type = 'payment.needs_review'") == 3);
    CHECK(w.count("outbox", "event_type = 'payment.failed'") == 0);
    // The worker said so at error level, with the provider's message, once per payment.
    int logged = 0;
    std::map<std::string, std::string> next; // by payment ID: the command the log line gives
    std::istringstream lines(sent.all());
    for (std::string line; std::getline(lines, line);) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j.value("event", "") == "request_rejected") {
            ++logged;
            CHECK(j["level"] == "error");
            CHECK(j["provider"] == w.config.name);
            CHECK(j["code"] == "parameter_unknown");
            CHECK(j["message"] == "Received unknown parameter: off_session");
            const std::string said = j["next"];
            REQUIRE(contains(said, "then: payrecon review resolve "));
            next[j["payment_id"]] = said.substr(said.find("payrecon review resolve "));
        }
    }
    CHECK(logged == 3);
    CHECK(next.size() == 3);
    CHECK_FALSE(
        contains(sent.all(), std::get<providers::ApiKey>(w.config.credentials).value.reveal()));

    // Nightly: attention, by provider and code, with the runbook entry.
    const Run nightly = w.payrecon({"nightly", "--no-statement"});
    CHECK(nightly.exit_code == 3);
    CHECK(contains(nightly.out, "REJECTED by the provider"));
    CHECK(contains(nightly.out, "parameter_unknown"));
    CHECK(contains(nightly.out, "docs/operations.md, request_rejected"));
    // Its hints are complete commands, and they run as printed (they were `resolve <id>` without
    // a generation or a note, exit 2).
    CHECK_FALSE(contains(nightly.all(), "<id>"));
    const std::string latest = "the latest: payrecon review show ";
    REQUIRE(contains(nightly.out, latest));
    const std::string show = nightly.out.substr(nightly.out.find(latest) + 12, 21 + 36);
    CHECK(w.payrecon(pasted(show, "")).exit_code == 0);
    CHECK(w.payrecon(pasted("payrecon review list --provider " + w.config.name, "")).exit_code ==
          0);
    CHECK(contains(nightly.out, "payrecon review list --provider " + w.config.name));
    const Run json = w.payrecon({"nightly", "--no-statement", "--json"});
    CHECK(json.exit_code == 3);
    const auto summary = nlohmann::json::parse(json.out);
    REQUIRE(summary["rejected_requests"].size() == 1);
    CHECK(summary["rejected_requests"][0]["provider"] == w.config.name);
    CHECK(summary["rejected_requests"][0]["code"] == "parameter_unknown");
    CHECK(summary["rejected_requests"][0]["payments"] == 3);
    CHECK(w.count("payments", "state = 'needs_review'") == 3); // nightly sent nothing again
    CHECK(w.fake->ledger()["deliveries"] == 3);

    // The configuration fixed; the operator resolves each as retry with the command the worker's
    // log line gave, as printed (its note filled in): same operation ID, one execution each.
    w.fake->set_faults({});
    std::map<std::string, std::string> operation_ids;
    for (const auto& ref : refs) {
        operation_ids[ref] = w.op_of(ref);
        const std::string& command = next[w.payment_id_of(ref)];
        const Run resolved = w.payrecon(pasted(
            command, "the provider rejected the request before executing it; configuration fixed"));
        INFO(command << "\n" << resolved.all());
        CHECK(resolved.exit_code == 0);
        CHECK(w.state_of(ref) == "retry_scheduled");
    }
    CHECK(w.payrecon({"worker", "--once"}).exit_code == 0);
    for (const auto& ref : refs) {
        INFO(ref);
        CHECK(w.state_of(ref) == "succeeded");
        CHECK(w.op_of(ref) == operation_ids[ref]);
        CHECK(w.executions(ref) == 1);
        CHECK(w.deliveries(ref) == 2);
    }
    CHECK(w.fake->ledger()["charged"]["eur"] == 3 * 2500);

    // A real card decline still ends failed, with its decline code, and is no rejected request.
    const std::string declined = payment_with(w, "pm_card_chargeDeclined");
    CHECK(w.payrecon({"worker", "--once"}).exit_code == 0);
    CHECK(w.state_of(declined) == "failed");
    CHECK(w.column(declined, "review_code").empty());
    CHECK(w.executions(declined) == 1);
    CHECK(w.count("payment_attempts", "payment_id = '" + w.payment_id_of(declined) +
                                          "'::uuid AND outcome = 'declined' AND error_class = "
                                          "'card_declined:generic_decline'") == 1);

    const Run clean = w.payrecon({"nightly", "--no-statement"});
    CHECK(clean.exit_code == 0);
    CHECK(contains(clean.out, "result: clean"));
}
