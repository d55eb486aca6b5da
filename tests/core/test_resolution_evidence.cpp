// What the provider was seen to hold, as evidence for an operator's resolution
// (core/resolution_evidence): the reference check, the suggestions' order and the gate, each over
// a table of its inputs; and the commands printed for an operator (core/operator_commands).
#include "core/operator_commands.hpp"
#include "core/resolution_evidence.hpp"

#include <catch2/catch.hpp>

using namespace payrecon;

namespace {

using V = EvidenceCheck::Verdict;
using D = OperatorDecision;
using O = SeenOutcome;

SeenRecord record(std::optional<std::string> reference, O outcome,
                  std::optional<long long> amount = 2500,
                  std::optional<std::string> currency = "EUR",
                  EvidenceSource source = EvidenceSource::statement) {
    SeenRecord r;
    r.source = source;
    r.seen_in = "seen " + reference.value_or("-") + " " + std::string(to_string(outcome));
    r.reference = std::move(reference);
    r.outcome = outcome;
    r.amount_minor = amount;
    r.currency = std::move(currency);
    return r;
}

} // namespace

TEST_CASE("resolution evidence: the stored state names of each source say charged, declined, "
          "refunded or nothing",
          "[core][resolution][evidence]") {
    struct Row {
        EvidenceSource source;
        std::string_view state;
        O expected;
    };
    const Row rows[] = {
        {EvidenceSource::statement, "succeeded", O::charged},
        {EvidenceSource::statement, "declined", O::declined},
        {EvidenceSource::statement, "refunded", O::refunded},
        {EvidenceSource::statement, "pending", O::unsettled},
        {EvidenceSource::statement, "other", O::unsettled},
        {EvidenceSource::webhook, "succeeded", O::charged},
        {EvidenceSource::webhook, "failed", O::declined},
        {EvidenceSource::webhook, "declined", O::unsettled}, // not a webhook outcome's name
        {EvidenceSource::webhook, "pending", O::unsettled},
        {EvidenceSource::webhook, "other", O::unsettled},
        {EvidenceSource::lookup, "succeeded", O::charged},
        {EvidenceSource::lookup, "declined", O::declined},
        {EvidenceSource::lookup, "requires_action", O::unsettled},
        {EvidenceSource::lookup, "unrecognised", O::unsettled},
        {EvidenceSource::lookup, "refunded", O::unsettled}, // no lookup says so
        {EvidenceSource::lookup, "", O::unsettled},
    };
    for (const auto& r : rows) {
        INFO(to_string(r.source) << " " << r.state);
        CHECK(seen_outcome(r.source, r.state) == r.expected);
    }
}

TEST_CASE("resolution evidence: a reference is checked by its own records, the furthest along "
          "first, then by charges under other references",
          "[core][resolution][evidence]") {
    struct Row {
        const char* name;
        std::vector<SeenRecord> seen;
        std::string reference;
        long long expected_minor;
        V verdict;
        std::optional<std::string> deciding; // the deciding record's reference
    };
    const std::vector<Row> rows = {
        {"nothing seen", {}, "pi_1", 2500, V::silent, std::nullopt},
        {"only unsettled", {record("pi_1", O::unsettled)}, "pi_1", 2500, V::silent, std::nullopt},
        {"declined", {record("pi_1", O::declined)}, "pi_1", 2500, V::declined, "pi_1"},
        {"declined by a webhook",
         {record("pi_1", O::declined, std::nullopt, std::nullopt, EvidenceSource::webhook)},
         "pi_1",
         2500,
         V::declined,
         "pi_1"},
        {"charged, our amount", {record("pi_1", O::charged)}, "pi_1", 2500, V::confirmed, "pi_1"},
        {"charged, our amount, currency in lower case",
         {record("pi_1", O::charged, 2500, "eur")},
         "pi_1",
         2500,
         V::confirmed,
         "pi_1"},
        {"charged another amount",
         {record("pi_1", O::charged, 880)},
         "pi_1",
         2500,
         V::other_amount,
         "pi_1"},
        {"charged the amount given (--amount)",
         {record("pi_1", O::charged, 880)},
         "pi_1",
         880,
         V::confirmed,
         "pi_1"},
        {"charged in another currency",
         {record("pi_1", O::charged, 2500, "USD")},
         "pi_1",
         2500,
         V::other_currency,
         "pi_1"},
        {"charged, no amount seen",
         {record("pi_1", O::charged, std::nullopt, std::nullopt)},
         "pi_1",
         2500,
         V::silent,
         std::nullopt},
        {"charged without an amount and with one",
         {record("pi_1", O::charged, std::nullopt, std::nullopt), record("pi_1", O::charged)},
         "pi_1",
         2500,
         V::confirmed,
         "pi_1"},
        {"declined, then charged (confirmed again): the charge stands",
         {record("pi_1", O::declined), record("pi_1", O::charged)},
         "pi_1",
         2500,
         V::confirmed,
         "pi_1"},
        {"charged, then refunded",
         {record("pi_1", O::charged), record("pi_1", O::refunded)},
         "pi_1",
         2500,
         V::refunded,
         "pi_1"},
        {"two records, one of another amount",
         {record("pi_1", O::charged), record("pi_1", O::charged, 2400)},
         "pi_1",
         2500,
         V::other_amount,
         "pi_1"},
        {"not seen; another reference charged",
         {record("pi_2", O::charged)},
         "pi_1",
         2500,
         V::other_reference,
         "pi_2"},
        {"not seen; another reference declined",
         {record("pi_2", O::declined)},
         "pi_1",
         2500,
         V::silent,
         std::nullopt},
        {"not seen; another reference refunded",
         {record("pi_2", O::charged), record("pi_2", O::refunded)},
         "pi_1",
         2500,
         V::silent,
         std::nullopt},
        {"not seen; a record without a reference charged",
         {record(std::nullopt, O::charged)},
         "pi_1",
         2500,
         V::silent,
         std::nullopt},
        {"seen unsettled while another reference charged: judged by its own records",
         {record("pi_1", O::unsettled), record("pi_2", O::charged)},
         "pi_1",
         2500,
         V::silent,
         std::nullopt},
        {"declined while another reference charged",
         {record("pi_1", O::declined), record("pi_2", O::charged)},
         "pi_1",
         2500,
         V::declined,
         "pi_1"},
    };
    for (const auto& r : rows) {
        INFO(r.name);
        const EvidenceCheck check =
            check_reference_against(r.seen, r.reference, r.expected_minor, "EUR");
        CHECK(check.verdict == r.verdict);
        if (r.deciding) {
            REQUIRE(check.record);
            CHECK(check.record->reference == r.deciding);
        } else {
            CHECK_FALSE(check.record);
        }
        CHECK(contradicts(check.verdict) == (r.verdict != V::silent && r.verdict != V::confirmed));
    }
}

TEST_CASE("resolution evidence: the decisions offered follow what was seen", "[core][resolution]"
                                                                             "[evidence]") {
    const std::vector<D> all{D::succeeded, D::failed, D::retry};
    struct Row {
        const char* name;
        std::vector<D> allowed;
        std::vector<SeenRecord> seen;
        std::optional<std::string> own_reference;
        std::vector<ResolutionSuggestion> expected;
    };
    const std::vector<Row> rows = {
        {"nothing seen: the code's order, no reference",
         all,
         {},
         std::nullopt,
         {{D::succeeded, std::nullopt, std::nullopt},
          {D::failed, std::nullopt, std::nullopt},
          {D::retry, std::nullopt, std::nullopt}}},
        {"nothing seen: the payment's own reference",
         all,
         {},
         "psp_own",
         {{D::succeeded, "psp_own", std::nullopt},
          {D::failed, std::nullopt, std::nullopt},
          {D::retry, std::nullopt, std::nullopt}}},
        {"nothing seen, a code without succeeded",
         {D::failed, D::retry},
         {},
         std::nullopt,
         {{D::failed, std::nullopt, std::nullopt}, {D::retry, std::nullopt, std::nullopt}}},
        {"declined: failed first, succeeded last without the declined reference",
         all,
         {record("pi_x", O::declined)},
         std::nullopt,
         {{D::failed, std::nullopt, std::nullopt},
          {D::retry, std::nullopt, std::nullopt},
          {D::succeeded, std::nullopt, std::nullopt}}},
        {"declined, and the payment's own reference is the declined one",
         all,
         {record("pi_x", O::declined)},
         "pi_x",
         {{D::failed, std::nullopt, std::nullopt},
          {D::retry, std::nullopt, std::nullopt},
          {D::succeeded, std::nullopt, std::nullopt}}},
        {"refunded: failed first",
         {D::succeeded, D::failed},
         {record("pi_x", O::charged), record("pi_x", O::refunded)},
         std::nullopt,
         {{D::failed, std::nullopt, std::nullopt}, {D::succeeded, std::nullopt, std::nullopt}}},
        {"charged our amount: succeeded with it first, then failed, no retry",
         all,
         {record("pi_c", O::charged)},
         std::nullopt,
         {{D::succeeded, "pi_c", std::nullopt}, {D::failed, std::nullopt, std::nullopt}}},
        {"charged another amount: with it",
         all,
         {record("pi_c", O::charged, 880)},
         std::nullopt,
         {{D::succeeded, "pi_c", 880}, {D::failed, std::nullopt, std::nullopt}}},
        {"charged, amount unknown: the reference without an amount",
         all,
         {record("pi_c", O::charged, std::nullopt, std::nullopt, EvidenceSource::lookup)},
         std::nullopt,
         {{D::succeeded, "pi_c", std::nullopt}, {D::failed, std::nullopt, std::nullopt}}},
        {"charged in another currency: failed only",
         all,
         {record("pi_c", O::charged, 2500, "USD")},
         std::nullopt,
         {{D::failed, std::nullopt, std::nullopt}}},
        {"declined once, then charged under the same reference",
         all,
         {record("pi_c", O::declined), record("pi_c", O::charged)},
         std::nullopt,
         {{D::succeeded, "pi_c", std::nullopt}, {D::failed, std::nullopt, std::nullopt}}},
        {"a decline and a charge under another reference: the charge",
         all,
         {record("pi_x", O::declined), record("pi_c", O::charged)},
         std::nullopt,
         {{D::succeeded, "pi_c", std::nullopt}, {D::failed, std::nullopt, std::nullopt}}},
        {"a charge seen for a code that offers no succeeded (requires_action)",
         {D::failed},
         {record("pi_c", O::charged)},
         std::nullopt,
         {{D::succeeded, "pi_c", std::nullopt}, {D::failed, std::nullopt, std::nullopt}}},
        {"only unsettled records: as if nothing was seen",
         all,
         {record("pi_p", O::unsettled)},
         std::nullopt,
         {{D::succeeded, std::nullopt, std::nullopt},
          {D::failed, std::nullopt, std::nullopt},
          {D::retry, std::nullopt, std::nullopt}}},
    };
    for (const auto& r : rows) {
        INFO(r.name);
        const auto got = suggest_resolutions(r.allowed, r.seen, 2500, "EUR", r.own_reference);
        REQUIRE(got.size() == r.expected.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
            INFO(i);
            CHECK(got[i].decision == r.expected[i].decision);
            CHECK(got[i].reference == r.expected[i].reference);
            CHECK(got[i].charged_minor == r.expected[i].charged_minor);
        }
        // Every reference offered is one the check takes.
        for (const auto& s : got) {
            if (s.decision == D::succeeded && s.reference) {
                const auto check = check_reference_against(r.seen, *s.reference,
                                                           s.charged_minor.value_or(2500), "EUR");
                CHECK_FALSE(contradicts(check.verdict));
            }
        }
    }
}

TEST_CASE("resolution evidence: the gate over every verdict, provider and operator's word",
          "[core][resolution][evidence]") {
    using G = ReferenceGate;
    const V verdicts[] = {V::silent,       V::confirmed,      V::declined,       V::refunded,
                          V::other_amount, V::other_currency, V::other_reference};
    for (const V v : verdicts) {
        for (const bool can_ask : {false, true}) {
            for (const bool unverified : {false, true}) {
                INFO(to_string(v) << " can_ask " << can_ask << " unverified " << unverified);
                G expected = G::refuse_unchecked;
                if (v != V::silent && v != V::confirmed) {
                    expected = G::refuse_contradicted; // the operator's word does not beat it
                } else if (v == V::confirmed) {
                    expected = G::accept_evidence;
                } else if (unverified) {
                    expected = G::accept_unverified;
                } else if (can_ask) {
                    expected = G::ask_provider;
                }
                CHECK(gate_reference(v, can_ask, unverified) == expected);
            }
        }
    }
}

TEST_CASE("operator commands: each is complete, and a value from outside is one shell word",
          "[core][resolution]") {
    const std::string id = "0190a6c2-0000-7000-8000-000000000001";
    ResolveCommand c;
    c.payment_id = id;
    c.generation = 7;
    c.decision = D::failed;
    CHECK(command_line(c) == "payrecon review resolve " + id +
                                 " --generation 7 --as failed "
                                 "--note \"...\"");
    c.decision = D::retry;
    CHECK(command_line(c) == "payrecon review resolve " + id +
                                 " --generation 7 --as retry --confirm-no-charge --note \"...\"");
    c.decision = D::succeeded;
    CHECK(command_line(c) == "payrecon review resolve " + id +
                                 " --generation 7 --as succeeded --provider-reference REF "
                                 "--note \"...\"");
    c.reference = "pi_3Ny8";
    c.charged_amount = "8.80";
    c.unverified = true;
    CHECK(command_line(c) == "payrecon review resolve " + id +
                                 " --generation 7 --as succeeded --provider-reference pi_3Ny8 "
                                 "--amount 8.80 --unverified --note \"...\"");
    c.decision = D::cancel;
    CHECK_THROWS_AS(command_line(c), std::invalid_argument);
    CHECK(cancel_command(id, 3) ==
          "payrecon payments cancel " + id + " --generation 3 --note \"...\"");
    CHECK(review_show_command(id) == "payrecon review show " + id);
    CHECK(recheck_command(id) == "payrecon review recheck " + id);

    CHECK(shell_word("pi_123") == "pi_123");
    CHECK(shell_word("8831:abc/DEF-1.2") == "8831:abc/DEF-1.2");
    CHECK(shell_word("") == "''");
    CHECK(shell_word("a b") == "'a b'");
    CHECK(shell_word("x; rm -rf /") == "'x; rm -rf /'");
    CHECK(shell_word("$(id)") == "'$(id)'");
    CHECK(shell_word("it's") == "'it'\\''s'");
}
