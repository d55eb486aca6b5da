// The statement diff: one key's classification over every combination of our state and the
// provider's records, and the streaming merge (order, duplicates, window edges, bounded groups).
#include "core/statement_diff.hpp"

#include <catch2/catch.hpp>
#include <map>

using namespace payrecon;

namespace {

constexpr long long k_from = 1'000'000;
constexpr long long k_to = 1'086'400;

DiffRules rules(long long tolerance = 0) {
    return DiffRules{tolerance, k_from, k_to};
}

LocalRecord ours(const std::string& key, const std::string& state, long long amount = 1000,
                 const std::string& currency = "EUR", long long at = k_from + 10) {
    LocalRecord l;
    l.match_key = key;
    l.operation_id = key;
    l.payment_id = "pay-" + key;
    l.amount_minor = amount;
    l.currency = currency;
    l.state = parse_payment_state(state).value(); // a misspelt state fails the test here
    l.at = at;
    return l;
}

RemoteRecord theirs(const std::string& key, RemoteStatus status, long long amount = 1000,
                    const std::string& currency = "eur", long long at = k_from + 11) {
    RemoteRecord r;
    r.match_key = key;
    r.operation_id = key;
    r.provider_reference = "pi_" + key + std::to_string(at);
    r.amount_minor = amount;
    r.currency = currency;
    r.status = status;
    r.raw_status = std::string(to_string(status));
    r.at = at;
    return r;
}

std::string category(const std::optional<LocalRecord>& l, const std::vector<RemoteRecord>& r,
                     long long tolerance = 0) {
    const auto f = classify_key(l, r, rules(tolerance));
    return f ? f->category : "-";
}

} // namespace

TEST_CASE("statement diff: every local state against every provider status", "[core][statement]") {
    // Expected category for (our state, the provider's single record); "none" = no provider record.
    const std::vector<std::string> states = {"pending",     "processing",      "succeeded",
                                             "failed",      "retry_scheduled", "unknown",
                                             "needs_review"};
    const std::map<std::string, std::map<std::string, std::string>> expected = {
        {"succeeded",
         {{"none", "missing_remote"},
          {"succeeded", "matched"},
          {"refunded", "status_mismatch"},
          {"declined", "missing_remote"},
          {"pending", "missing_remote"}}},
        {"failed",
         {{"none", "matched"},
          {"succeeded", "status_mismatch"},
          {"refunded", "status_mismatch"},
          {"declined", "matched"},
          {"pending", "matched"}}},
        {"unknown",
         {{"none", "unresolved_unknown"},
          {"succeeded", "unresolved_unknown"},
          {"refunded", "unresolved_unknown"},
          {"declined", "unresolved_unknown"},
          {"pending", "unresolved_unknown"}}},
        {"needs_review",
         {{"none", "unresolved_unknown"},
          {"succeeded", "unresolved_unknown"},
          {"refunded", "unresolved_unknown"},
          {"declined", "unresolved_unknown"},
          {"pending", "unresolved_unknown"}}},
    };
    const std::map<std::string, RemoteStatus> statuses = {{"succeeded", RemoteStatus::succeeded},
                                                          {"refunded", RemoteStatus::refunded},
                                                          {"declined", RemoteStatus::declined},
                                                          {"pending", RemoteStatus::pending}};
    for (const auto& state : states) {
        for (const std::string remote : {"none", "succeeded", "refunded", "declined", "pending"}) {
            INFO(state << " vs " << remote);
            std::vector<RemoteRecord> r;
            if (remote != "none") {
                r.push_back(theirs("op1", statuses.at(remote)));
            }
            std::string want;
            if (expected.count(state) != 0) {
                want = expected.at(state).at(remote);
            } else {
                // In flight here (pending, processing, retry_scheduled): a charge there contradicts
                // it.
                want =
                    (remote == "succeeded" || remote == "refunded") ? "status_mismatch" : "matched";
            }
            CHECK(category(ours("op1", state), r) == want);
        }
    }
}

TEST_CASE("statement diff: the provider's records alone", "[core][statement]") {
    CHECK(category(std::nullopt, {theirs("ref:pi_x", RemoteStatus::succeeded)}) == "missing_local");
    CHECK(category(std::nullopt, {theirs("ref:pi_x", RemoteStatus::refunded)}) == "missing_local");
    CHECK(category(std::nullopt, {theirs("ref:pi_x", RemoteStatus::declined)}) == "-");
    CHECK(category(std::nullopt, {theirs("ref:pi_x", RemoteStatus::pending)}) == "-");
    CHECK(category(std::nullopt, {theirs("op", RemoteStatus::succeeded),
                                  theirs("op", RemoteStatus::succeeded, 1000, "eur",
                                         k_from + 20)}) == "duplicate_remote");
    const auto f = classify_key(
        std::nullopt, {theirs("ref:pi_x", RemoteStatus::succeeded, 4200, "usd")}, rules());
    REQUIRE(f);
    CHECK(f->detail.find("42.00 USD") != std::string::npos);
}

TEST_CASE("statement diff: amounts, currencies, duplicates and the tolerance",
          "[core][statement]") {
    CHECK(category(ours("op", "succeeded", 1000, "EUR"),
                   {theirs("op", RemoteStatus::succeeded, 1000, "EUR")}) == "matched");
    CHECK(category(ours("op", "succeeded", 1000, "EUR"),
                   {theirs("op", RemoteStatus::succeeded, 1001)}) == "amount_mismatch");
    CHECK(category(ours("op", "succeeded", 1000, "EUR"),
                   {theirs("op", RemoteStatus::succeeded, 1001)}, 1) == "matched");
    CHECK(category(ours("op", "succeeded", 1000, "EUR"),
                   {theirs("op", RemoteStatus::succeeded, 998)}, 1) == "amount_mismatch");
    CHECK(category(ours("op", "succeeded", 1000, "EUR"),
                   {theirs("op", RemoteStatus::succeeded, 1000, "usd")}) == "currency_mismatch");
    // A currency mismatch is reported as such even when the amounts differ too.
    CHECK(category(ours("op", "succeeded", 1000, "EUR"),
                   {theirs("op", RemoteStatus::succeeded, 5, "jpy")}) == "currency_mismatch");
    // Two charges for one operation ID: a duplicate whatever we say; a declined twin is not a
    // charge.
    CHECK(category(ours("op", "succeeded"), {theirs("op", RemoteStatus::succeeded),
                                             theirs("op", RemoteStatus::succeeded, 1000, "eur",
                                                    k_from + 30)}) == "duplicate_remote");
    CHECK(category(ours("op", "succeeded"),
                   {theirs("op", RemoteStatus::declined),
                    theirs("op", RemoteStatus::succeeded, 1000, "eur", k_from + 30)}) == "matched");
}

TEST_CASE("statement diff: only keys anchored inside the window are reported",
          "[core][statement]") {
    // Ours anchors the key: accepted just before the window, charged inside it -> not reported.
    CHECK(category(ours("op", "succeeded", 1000, "EUR", k_from - 1),
                   {theirs("op", RemoteStatus::succeeded)}) == "-");
    CHECK(category(ours("op", "succeeded", 1000, "EUR", k_from), {}) == "missing_remote");
    CHECK(category(ours("op", "succeeded", 1000, "EUR", k_to), {}) == "-");
    CHECK(category(ours("op", "succeeded", 1000, "EUR", k_to - 1),
                   {theirs("op", RemoteStatus::succeeded, 1000, "eur", k_to + 5)}) == "matched");
    // The provider's record anchors a key we do not have.
    CHECK(category(std::nullopt,
                   {theirs("ref:a", RemoteStatus::succeeded, 1000, "eur", k_from - 1)}) == "-");
    CHECK(category(std::nullopt, {theirs("ref:a", RemoteStatus::succeeded, 1000, "eur",
                                         k_to - 1)}) == "missing_local");
}

TEST_CASE("statement diff: the merge pairs sorted streams and finds each discrepancy once",
          "[core][statement]") {
    std::vector<LocalRecord> local = {ours("a", "succeeded"), ours("b", "succeeded"),
                                      ours("c", "succeeded", 999), ours("e", "unknown"),
                                      ours("f", "failed")};
    std::vector<RemoteRecord> remote = {
        theirs("a", RemoteStatus::succeeded), theirs("c", RemoteStatus::succeeded),
        theirs("d", RemoteStatus::succeeded), theirs("d", RemoteStatus::succeeded),
        theirs("ref:pi_orphan", RemoteStatus::succeeded)};
    std::size_t li = 0;
    std::size_t ri = 0;
    std::map<std::string, std::string> found;
    const DiffCounts counts = diff_sorted(
        [&](LocalRecord& l) { return li < local.size() && (l = local[li++], true); },
        [&](RemoteRecord& r) { return ri < remote.size() && (r = remote[ri++], true); }, rules(),
        DiffSink{
            [&](DiffFinding&& f) {
                const std::string key = f.local ? f.local->match_key : f.remote.front().match_key;
                CHECK(found.emplace(key, f.category).second);
            },
            [&](const LocalRecord& l) { CHECK(found.emplace(l.match_key, "matched").second); }});
    CHECK(counts.local_records == 5);
    CHECK(counts.remote_records == 5);
    CHECK(counts.keys == 7);
    const std::map<std::string, std::string> want = {{"a", "matched"},
                                                     {"b", "missing_remote"},
                                                     {"c", "amount_mismatch"},
                                                     {"d", "duplicate_remote"},
                                                     {"e", "unresolved_unknown"},
                                                     {"f", "matched"},
                                                     {"ref:pi_orphan", "missing_local"}};
    CHECK(found == want);
}

TEST_CASE("statement diff: unsorted input is refused, not silently mismatched",
          "[core][statement]") {
    const auto run = [](std::vector<LocalRecord> local, std::vector<RemoteRecord> remote) {
        std::size_t li = 0;
        std::size_t ri = 0;
        diff_sorted([&](LocalRecord& l) { return li < local.size() && (l = local[li++], true); },
                    [&](RemoteRecord& r) { return ri < remote.size() && (r = remote[ri++], true); },
                    rules(), DiffSink{});
    };
    CHECK_THROWS_AS(run({ours("b", "succeeded"), ours("a", "succeeded")}, {}),
                    std::invalid_argument);
    CHECK_THROWS_AS(run({ours("a", "succeeded"), ours("a", "succeeded")}, {}),
                    std::invalid_argument);
    CHECK_THROWS_AS(
        run({}, {theirs("b", RemoteStatus::succeeded), theirs("a", RemoteStatus::succeeded)}),
        std::invalid_argument);
    CHECK_NOTHROW(run({ours("a", "succeeded")}, {theirs("a", RemoteStatus::succeeded),
                                                 theirs("a", RemoteStatus::succeeded)}));
}

TEST_CASE("statement diff: a million keys stream through with one key's records in memory",
          "[core][statement]") {
    // Generated on the fly: nothing but the current key is ever held.
    long long li = 0;
    long long ri = 0;
    const long long n = 1'000'000;
    const auto key = [](long long i) {
        std::string k = std::to_string(i);
        return std::string(8 - k.size(), '0') + k;
    };
    long long matched = 0;
    long long other = 0;
    diff_sorted([&](LocalRecord& l) { return li < n && (l = ours(key(li++), "succeeded"), true); },
                [&](RemoteRecord& r) {
                    return ri < n && (r = theirs(key(ri++), RemoteStatus::succeeded), true);
                },
                rules(),
                DiffSink{[&](DiffFinding&&) { ++other; }, [&](const LocalRecord&) { ++matched; }});
    CHECK(matched == n);
    CHECK(other == 0);
}

TEST_CASE("statement diff: a counterpart found outside the window's reading is a match across "
          "windows, anchored by the side read in the window",
          "[core][statement]") {
    // Read with a margin of 60 s: [k_from - 60, k_to + 60).
    DiffRules r = rules();
    r.read_from = k_from - 60;
    r.read_to = k_to + 60;
    const long long later = k_to + 3 * 3600; // the provider charged it three hours after the window
    // The window of the first attempt: the provider's record found in another run or by lookup.
    const auto first_window = classify_key(
        ours("a", "succeeded"), {theirs("a", RemoteStatus::succeeded, 1000, "eur", later)}, r);
    REQUIRE(first_window);
    CHECK(first_window->category == "matched");
    CHECK(first_window->across_windows);
    CHECK(first_window->detail == "matched by operation ID across windows: payrecon first sent it "
                                  "at 1970-01-12T13:46:50Z; the provider's record is of "
                                  "1970-01-13T16:46:40Z");
    // The window of the charge: our payment, first sent a day earlier, found by operation ID.
    DiffRules next_window = r;
    next_window.window_from = k_to;
    next_window.window_to = k_to + 86400;
    next_window.read_from = k_to - 60;
    next_window.read_to = k_to + 86460;
    const auto second_window =
        classify_key(ours("a", "succeeded"),
                     {theirs("a", RemoteStatus::succeeded, 1000, "eur", later)}, next_window);
    REQUIRE(second_window);
    CHECK(second_window->category == "matched");
    CHECK(second_window->across_windows);
    // What the pair says still holds across windows: another amount is a finding, with both times.
    const auto mismatch = classify_key(
        ours("a", "succeeded"), {theirs("a", RemoteStatus::succeeded, 900, "eur", later)}, r);
    REQUIRE(mismatch);
    CHECK(mismatch->category == "amount_mismatch");
    CHECK(mismatch->detail.find("payrecon first sent it at") != std::string::npos);
    // Our payment read in the window's margin (not a counterpart) anchors the key as before: the
    // next window reports it.
    CHECK_FALSE(classify_key(ours("a", "succeeded", 1000, "EUR", k_to + 30),
                             {theirs("a", RemoteStatus::succeeded, 1000, "eur", k_to - 5)}, r));
    // Both sides read in the window: a plain match, nothing noted.
    const auto plain =
        classify_key(ours("a", "succeeded"), {theirs("a", RemoteStatus::succeeded)}, r);
    REQUIRE(plain);
    CHECK_FALSE(plain->across_windows);
    CHECK(plain->detail.empty());
}

TEST_CASE("statement diff: a match across windows goes to the finding sink, with its detail",
          "[core][statement]") {
    DiffRules r = rules();
    r.read_from = k_from - 60;
    r.read_to = k_to + 60;
    std::vector<LocalRecord> local = {ours("a", "succeeded"), ours("b", "succeeded")};
    std::vector<RemoteRecord> remote = {
        theirs("a", RemoteStatus::succeeded),
        theirs("b", RemoteStatus::succeeded, 1000, "eur", k_to + 600)};
    std::size_t li = 0;
    std::size_t ri = 0;
    std::vector<DiffFinding> found;
    int matched = 0;
    DiffSink sink;
    sink.finding = [&](DiffFinding&& f) { found.push_back(std::move(f)); };
    sink.matched = [&](const LocalRecord&) { ++matched; };
    diff_sorted(
        [&](LocalRecord& l) { return li < local.size() ? (l = local[li++], true) : false; },
        [&](RemoteRecord& x) { return ri < remote.size() ? (x = remote[ri++], true) : false; }, r,
        sink);
    CHECK(matched == 1);
    REQUIRE(found.size() == 1);
    CHECK(found[0].category == "matched");
    CHECK(found[0].across_windows);
    CHECK(found[0].local->match_key == "b");
}

namespace {

LocalRecord our_refund(const std::string& key, const std::string& state, long long amount = 300,
                       long long at = k_from + 10) {
    LocalRecord l = ours(key, state, amount, "EUR", at);
    l.kind = OperationKind::refund;
    l.refund_id = "ref-" + key;
    return l;
}

RemoteRecord their_refund(const std::string& key, RemoteStatus status, long long amount = 300,
                          long long at = k_from + 11) {
    RemoteRecord r = theirs(key, status, amount, "eur", at);
    r.kind = OperationKind::refund;
    r.provider_reference = "re_" + key + std::to_string(at);
    return r;
}

} // namespace

TEST_CASE("statement diff: a refund's key, every local state against every provider status",
          "[core][statement][refunds]") {
    const std::vector<std::string> states = {"pending",     "processing",      "succeeded",
                                             "failed",      "retry_scheduled", "unknown",
                                             "needs_review"};
    const std::map<std::string, RemoteStatus> statuses = {{"succeeded", RemoteStatus::succeeded},
                                                          {"declined", RemoteStatus::declined},
                                                          {"pending", RemoteStatus::pending}};
    for (const auto& state : states) {
        for (const std::string remote : {"none", "succeeded", "declined", "pending"}) {
            INFO(state << " vs " << remote);
            std::vector<RemoteRecord> r;
            if (remote != "none") {
                r.push_back(their_refund("pr1", statuses.at(remote)));
            }
            const bool moved = remote == "succeeded" || remote == "pending";
            std::string want;
            if (state == "unknown" || state == "needs_review") {
                want = "refund_unresolved_unknown";
            } else if (state == "succeeded") {
                want = remote == "succeeded" ? "refund_matched"
                       : moved               ? "refund_status_mismatch"
                                             : "refund_missing_remote";
            } else {
                // Failed, or not sent yet here: a refund gone out there contradicts it.
                want = moved ? "refund_status_mismatch" : "matched";
            }
            CHECK(category(our_refund("pr1", state), r) == want);
        }
    }
}

TEST_CASE("statement diff: a refund payrecon has no record of, a duplicate, an amount that differs",
          "[core][statement][refunds]") {
    // Made in the provider's dashboard: money went back that no refund of ours explains.
    const auto dashboard = classify_key(
        std::nullopt, {their_refund("ref:re_x", RemoteStatus::succeeded, 150)}, rules());
    REQUIRE(dashboard);
    CHECK(dashboard->category == "refund_missing_local");
    CHECK(dashboard->detail.find("1.50 EUR") != std::string::npos);
    CHECK(category(std::nullopt, {their_refund("ref:re_x", RemoteStatus::pending)}) ==
          "refund_missing_local");
    CHECK(category(std::nullopt, {their_refund("ref:re_x", RemoteStatus::declined)}) == "-");
    // Two refunds that went out under one operation ID: the customer got the money twice.
    const auto twice = classify_key(our_refund("pr", "succeeded"),
                                    {their_refund("pr", RemoteStatus::succeeded),
                                     their_refund("pr", RemoteStatus::succeeded, 300, k_from + 40)},
                                    rules());
    REQUIRE(twice);
    CHECK(twice->category == "refund_duplicate_remote");
    CHECK(twice->detail.find("2 refunds") != std::string::npos);
    // A declined twin is not a second refund.
    CHECK(category(our_refund("pr", "succeeded"), {their_refund("pr", RemoteStatus::declined),
                                                   their_refund("pr", RemoteStatus::succeeded, 300,
                                                                k_from + 40)}) == "refund_matched");
    CHECK(category(our_refund("pr", "succeeded", 300),
                   {their_refund("pr", RemoteStatus::succeeded, 301)}) == "refund_amount_mismatch");
    CHECK(category(our_refund("pr", "succeeded", 300),
                   {their_refund("pr", RemoteStatus::succeeded, 301)}, 1) == "refund_matched");
    RemoteRecord dollars = their_refund("pr", RemoteStatus::succeeded);
    dollars.currency = "usd";
    CHECK(category(our_refund("pr", "succeeded"), {dollars}) == "refund_amount_mismatch");
    // The finding names the refund's payment, and an operator's command for one in review.
    const auto review = classify_key(our_refund("pr", "needs_review"),
                                     {their_refund("pr", RemoteStatus::succeeded)}, rules());
    REQUIRE(review);
    CHECK(review->detail.find("payrecon review show ref-pr") != std::string::npos);
    const auto missing = classify_key(our_refund("pr", "succeeded"), {}, rules());
    REQUIRE(missing);
    CHECK(missing->detail.find("refund of payment pay-pr") != std::string::npos);
}

TEST_CASE("statement diff: a charge the provider refunded is matched where its refunds are ours",
          "[core][statement][refunds]") {
    LocalRecord charge = ours("op", "succeeded", 1000);
    RemoteRecord refunded = theirs("op", RemoteStatus::refunded, 1000);
    refunded.amount_refunded = 400;
    DiffRules listed = rules();
    listed.refunds_listed = true;
    // Its refunds listed: each judged on its own key, the charge is a charge.
    const auto when_listed = classify_key(charge, {refunded}, listed);
    REQUIRE(when_listed);
    CHECK(when_listed->category == "matched");
    // Not listed: what the provider refunded must be within what our refunds hold.
    CHECK(category(charge, {refunded}) == "status_mismatch");
    charge.refund_held_minor = 400;
    CHECK(category(charge, {refunded}) == "matched");
    charge.refund_held_minor = 399;
    const auto outside = classify_key(charge, {refunded}, rules());
    REQUIRE(outside);
    CHECK(outside->category == "status_mismatch");
    CHECK(outside->detail.find("refunded 4.00 EUR") != std::string::npos);
    CHECK(outside->detail.find("hold 3.99 EUR") != std::string::npos);
}

TEST_CASE("statement diff: charges and refunds in one merge, each matched by its kind",
          "[core][statement][refunds]") {
    // Sorted by key across both kinds, as the store hands them over.
    std::vector<LocalRecord> local = {ours("a", "succeeded"), our_refund("b", "succeeded"),
                                      our_refund("c", "succeeded"), ours("d", "succeeded")};
    std::vector<RemoteRecord> remote = {
        theirs("a", RemoteStatus::succeeded), their_refund("b", RemoteStatus::succeeded),
        theirs("d", RemoteStatus::succeeded), their_refund("ref:re_z", RemoteStatus::succeeded)};
    std::size_t li = 0;
    std::size_t ri = 0;
    std::map<std::string, std::string> found;
    diff_sorted([&](LocalRecord& l) { return li < local.size() && (l = local[li++], true); },
                [&](RemoteRecord& r) { return ri < remote.size() && (r = remote[ri++], true); },
                rules(),
                DiffSink{[&](DiffFinding&& f) {
                             const std::string key =
                                 f.local ? f.local->match_key : f.remote.front().match_key;
                             CHECK(found.emplace(key, f.category).second);
                         },
                         [&](const LocalRecord& l) {
                             CHECK(found
                                       .emplace(l.match_key, l.kind == OperationKind::refund
                                                                 ? "refund_matched"
                                                                 : "matched")
                                       .second);
                         }});
    const std::map<std::string, std::string> want = {{"a", "matched"},
                                                     {"b", "refund_matched"},
                                                     {"c", "refund_missing_remote"},
                                                     {"d", "matched"},
                                                     {"ref:re_z", "refund_missing_local"}};
    CHECK(found == want);
    CHECK(is_match("refund_matched"));
    CHECK_FALSE(is_match("refund_missing_local"));
    CHECK(parse_finding_category("refund_duplicate_remote") ==
          FindingCategory::refund_duplicate_remote);
    CHECK_FALSE(parse_finding_category("refunded"));
}

namespace {

// Our authorisation (capture "manual", succeeded: authorised) of 50.00 EUR.
LocalRecord held(long long captured = 0, long long in_flight = 0, bool voided = false,
                 bool expired = false) {
    LocalRecord l = ours("auth", "succeeded", 5000);
    l.manual = true;
    l.captured_minor = captured;
    l.capture_held_minor = captured + in_flight;
    l.voided = voided;
    l.expired = expired;
    return l;
}

// The provider's record of it: `status`, and what it says was captured (nullopt: it does not say).
RemoteRecord their_authorisation(RemoteStatus status, std::optional<long long> captured,
                                 const std::string& raw) {
    RemoteRecord r = theirs("auth", status, 5000);
    r.amount_captured = captured;
    r.raw_status = raw;
    return r;
}

} // namespace

TEST_CASE("statement diff: an authorisation's key -- held, captured or released on each side",
          "[core][statement][captures]") {
    const auto authorised = their_authorisation(RemoteStatus::authorized, 0, "requires_capture");
    const auto captured = [](long long minor) {
        return their_authorisation(RemoteStatus::succeeded, minor, "succeeded");
    };
    const auto released = their_authorisation(RemoteStatus::declined, 0, "canceled");
    const auto of = [](const LocalRecord& l, const RemoteRecord& r) { return category(l, {r}); };

    // Held, nothing captured, on both sides: the authorised-but-uncaptured state is a match.
    CHECK(of(held(), authorised) == "matched");
    // A capture in flight (unknown, in review) here, none there yet: the reconciler's matter.
    CHECK(of(held(0, 2000), authorised) == "matched");
    // Captured here, still held there; voided here, still held there.
    CHECK(of(held(2000), authorised) == "authorization_mismatch");
    CHECK(of(held(0, 0, true), authorised) == "authorization_mismatch");
    // Expired by our count while the provider still holds it: our validity is the earliest lapse.
    CHECK(of(held(0, 0, false, true), authorised) == "matched");

    // Captured on both sides: what the provider took within what ours took and hold.
    CHECK(of(held(2000), captured(2000)) == "matched");
    CHECK(of(held(2000, 1000), captured(3000)) == "matched"); // the second capture's answer lost
    CHECK(of(held(2000), captured(3000)) == "authorization_mismatch");
    CHECK(of(held(3000), captured(2000)) == "authorization_mismatch");
    CHECK(of(held(), captured(5000)) == "authorization_mismatch"); // captured in the dashboard
    CHECK(of(held(0, 0, true), captured(5000)) == "authorization_mismatch");
    CHECK(category(held(2000), {captured(2001)}, 1) == "matched"); // within the tolerance

    // The provider does not say what it captured (PayPal's authorization entry): a capture of
    // ours is enough, none is a finding.
    CHECK(of(held(2000), their_authorisation(RemoteStatus::succeeded, std::nullopt, "S")) ==
          "matched");
    CHECK(of(held(), their_authorisation(RemoteStatus::succeeded, std::nullopt, "S")) ==
          "authorization_mismatch");

    // Released there: voided or expired here too is a match; still held here is not.
    CHECK(of(held(0, 0, true), released) == "matched");
    CHECK(of(held(0, 0, false, true), released) == "matched");
    CHECK(of(held(), released) == "authorization_mismatch");
    CHECK(category(held(), {}) == "missing_remote");

    // A captured authorisation the provider refunded: the refunds judged as for any charge.
    LocalRecord refunded_here = held(5000);
    refunded_here.refund_held_minor = 1000;
    RemoteRecord refunded_there = their_authorisation(RemoteStatus::refunded, 5000, "succeeded");
    refunded_there.amount_refunded = 1000;
    CHECK(of(refunded_here, refunded_there) == "matched");
    refunded_there.amount_refunded = 2000;
    CHECK(of(refunded_here, refunded_there) == "status_mismatch");

    // Automatic here, only authorised there: we say charged, nothing was captured.
    const auto charged = classify_key(ours("auth", "succeeded", 5000), {authorised}, rules());
    REQUIRE(charged);
    CHECK(charged->category == "status_mismatch");
    CHECK(charged->detail.find("nothing was captured") != std::string::npos);
    // An authorisation we have no record of: funds held on the customer's card.
    const auto unknown_to_us = classify_key(std::nullopt, {authorised}, rules());
    REQUIRE(unknown_to_us);
    CHECK(unknown_to_us->category == "missing_local");
    CHECK(unknown_to_us->detail.find("authorisation of 50.00 EUR") != std::string::npos);
    // Unknown here: the reconciler settles the charge first.
    LocalRecord unknown = held();
    unknown.state = PaymentState::unknown;
    CHECK(of(unknown, authorised) == "unresolved_unknown");

    // The detail says both sides.
    const auto f = classify_key(held(2000), {captured(3000)}, rules());
    REQUIRE(f);
    CHECK(f->detail.find("the provider captured 30.00 EUR") != std::string::npos);
    CHECK(f->detail.find("20.00 EUR captured") != std::string::npos);
    CHECK(parse_finding_category("authorization_mismatch") ==
          FindingCategory::authorization_mismatch);
    CHECK_FALSE(is_match("authorization_mismatch"));
}

TEST_CASE("statement diff: a capture listed on its own is kept, not called missing",
          "[core][statement][captures]") {
    RemoteRecord capture = theirs("cap-op", RemoteStatus::succeeded, 2000);
    capture.kind = OperationKind::capture;
    CHECK(category(std::nullopt, {capture}) == "-");
}
