#include "core/reconcile_policy.hpp"

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

using namespace payrecon;
using namespace std::chrono_literals;
using std::chrono::seconds;

namespace {

// ---------------------------------------------------------------------------------------------
// The table: every input of decide_reconciliation() cut into equivalence classes, and every
// combination of those classes.

// Two providers, so that the key window margin takes both of its branches (1 h, retention / 4).
// The key window (retention - margin) is written out by hand, not computed with
// key_window_margin().
struct Profile {
    std::string_view name;
    seconds retention;
    seconds settle_delay;
    seconds key_window;
};
const Profile k_profiles[] = {
    {"retention 24h", 24h, 120s, 23h},
    {"retention 1h", 1h, 60s, 45min},
};

enum class Amount { equal, different };
enum class Currency { equal, equal_lowercase, different };
enum class SinceLast { inside_settle, after_settle };
enum class SinceFirst { inside_window, at_window_boundary, outside_window };
enum class Counter { below_last, at_last }; // below max - 1, at max - 1
enum class Attempts { below_max, at_max };
// The last attempt: not accepted (its answer lost), or accepted (pending with the provider's
// reference) with the provider's notification window still open or already closed.
enum class Accepted { no, window_open, window_closed };

// The policy the table runs under (the defaults, spelled out).
ReconcilePolicy table_policy() {
    ReconcilePolicy p;
    p.max_lookup_failures = 3;
    p.max_checks = 12;
    p.max_resends = 3;
    p.recheck_base = 60s;
    p.recheck_cap = 6h;
    return p;
}

constexpr seconds k_since_last_inside = 20s; // every profile's settle delay is longer
constexpr seconds k_after_settle_by = 180s;
// The notification windows: longer than every since_last class, or shorter than all of them.
constexpr seconds k_window_open = 4h;
constexpr seconds k_window_closed = 10s;
constexpr long long k_amount = 2000;
const std::string k_reference = "ch_3Ny8reference";

struct Case {
    const Profile* profile = nullptr;
    bool can_lookup = false;
    bool honours_idempotency_keys = false;
    LookupStatus lookup = LookupStatus::not_asked;
    RemoteState remote_state = RemoteState::unrecognised;
    Amount amount = Amount::equal;
    Currency currency = Currency::equal;
    int duplicates = 0;
    SinceLast since_last = SinceLast::inside_settle;
    SinceFirst since_first = SinceFirst::inside_window;
    Counter failures_before = Counter::below_last;
    Counter lookups_before = Counter::below_last;
    Attempts attempts = Attempts::below_max;
    Accepted accepted = Accepted::no;
};

int counter_value(Counter c, int max) {
    return c == Counter::at_last ? max - 1 : max - 2;
}

ReconcileInput input_for(const Case& c, const ReconcilePolicy& policy) {
    ReconcileInput in;
    in.can_lookup = c.can_lookup;
    in.honours_idempotency_keys = c.honours_idempotency_keys;
    in.key_retention = c.profile->retention;
    in.settle_delay = c.profile->settle_delay;
    in.amount_minor = k_amount;
    in.currency = "EUR";
    switch (c.since_first) {
    case SinceFirst::inside_window:
        in.since_first_attempt = c.profile->key_window / 2;
        break;
    case SinceFirst::at_window_boundary:
        in.since_first_attempt = c.profile->key_window;
        break;
    case SinceFirst::outside_window:
        in.since_first_attempt = c.profile->retention + 1h;
        break;
    }
    in.since_last_attempt = c.since_last == SinceLast::inside_settle
                                ? k_since_last_inside
                                : c.profile->settle_delay + k_after_settle_by;
    in.resends = c.attempts == Attempts::at_max ? policy.max_resends : policy.max_resends - 1;
    in.lookups_before = counter_value(c.lookups_before, policy.max_checks);
    in.lookup_failures_before = counter_value(c.failures_before, policy.max_lookup_failures);
    in.lookup = c.lookup;
    in.remote_state = c.remote_state;
    in.remote_amount_minor = c.amount == Amount::equal ? k_amount : k_amount + 1;
    in.remote_currency = c.currency == Currency::equal             ? "EUR"
                         : c.currency == Currency::equal_lowercase ? "eur"
                                                                   : "USD";
    in.remote_reference = k_reference;
    in.remote_duplicates = c.duplicates;
    in.accepted = c.accepted != Accepted::no;
    in.notification_wait = c.accepted == Accepted::window_closed ? k_window_closed : k_window_open;
    return in;
}

std::string describe(const Case& c) {
    std::ostringstream out;
    out << c.profile->name << ", can_lookup=" << c.can_lookup
        << ", honours_keys=" << c.honours_idempotency_keys << ", lookup=" << to_string(c.lookup)
        << ", remote_state=" << to_string(c.remote_state)
        << ", amount=" << (c.amount == Amount::equal ? "equal" : "different") << ", currency="
        << (c.currency == Currency::equal             ? "equal"
            : c.currency == Currency::equal_lowercase ? "equal-lowercase"
                                                      : "different")
        << ", duplicates=" << c.duplicates << ", since_last="
        << (c.since_last == SinceLast::inside_settle ? "inside-settle" : "after-settle")
        << ", since_first="
        << (c.since_first == SinceFirst::inside_window        ? "inside-window"
            : c.since_first == SinceFirst::at_window_boundary ? "at-boundary"
                                                              : "outside-window")
        << ", failures_before=" << (c.failures_before == Counter::at_last ? "max-1" : "below")
        << ", lookups_before=" << (c.lookups_before == Counter::at_last ? "max-1" : "below")
        << ", attempts=" << (c.attempts == Attempts::at_max ? "max" : "below") << ", accepted="
        << (c.accepted == Accepted::no            ? "no"
            : c.accepted == Accepted::window_open ? "window-open"
                                                  : "window-closed");
    return out.str();
}

// Every combination of the classes above: the product of one dimension after another.
std::vector<Case> all_cases() {
    std::vector<Case> cases(1);
    const auto times = [&cases](const auto& values, auto field) {
        std::vector<Case> out;
        out.reserve(cases.size() * values.size());
        for (const Case& c : cases) {
            for (const auto& v : values) {
                Case next = c;
                next.*field = v;
                out.push_back(next);
            }
        }
        cases = std::move(out);
    };
    times(std::array{&k_profiles[0], &k_profiles[1]}, &Case::profile);
    times(std::array{true, false}, &Case::can_lookup);
    times(std::array{true, false}, &Case::honours_idempotency_keys);
    times(std::array{LookupStatus::found, LookupStatus::not_found, LookupStatus::failed,
                     LookupStatus::not_asked},
          &Case::lookup);
    times(std::array{RemoteState::succeeded, RemoteState::declined, RemoteState::pending,
                     RemoteState::requires_action, RemoteState::unrecognised},
          &Case::remote_state);
    times(std::array{Amount::equal, Amount::different}, &Case::amount);
    times(std::array{Currency::equal, Currency::equal_lowercase, Currency::different},
          &Case::currency);
    times(std::array{0, 1}, &Case::duplicates);
    times(std::array{SinceLast::inside_settle, SinceLast::after_settle}, &Case::since_last);
    times(std::array{SinceFirst::inside_window, SinceFirst::at_window_boundary,
                     SinceFirst::outside_window},
          &Case::since_first);
    times(std::array{Counter::below_last, Counter::at_last}, &Case::failures_before);
    times(std::array{Counter::below_last, Counter::at_last}, &Case::lookups_before);
    times(std::array{Attempts::below_max, Attempts::at_max}, &Case::attempts);
    times(std::array{Accepted::no, Accepted::window_open, Accepted::window_closed},
          &Case::accepted);
    return cases;
}

// Calls `visit` once for every combination; returns how many there were.
int for_every_case(const std::function<void(const Case&)>& visit) {
    static const std::vector<Case> cases = all_cases();
    for (const Case& c : cases) {
        visit(c);
    }
    return static_cast<int>(cases.size());
}

// 2 profiles x 2 x 2 x 4 lookups x 5 states x 2 amounts x 3 currencies x 2 duplicates x 2 x 3
// x 2 x 2 x 2 x 3 accepted. The remote fields vary with every lookup status, not only `found`:
// they must be ignored when nothing was found; so does `accepted` where a lookup can be made.
constexpr int k_table_size = 2 * 2 * 2 * 4 * 5 * 2 * 3 * 2 * 2 * 3 * 2 * 2 * 2 * 3;

// ---------------------------------------------------------------------------------------------
// The oracle: the rules of reconcile_policy.hpp's header comment, in its order, stated on the
// equivalence classes rather than on the input numbers.

struct Expected {
    ReconcileAction action = ReconcileAction::review;
    std::optional<ReviewCode> review;
    seconds check_in{0}; // with check_later
};

Expected expect_review(ReviewCode code) {
    return {ReconcileAction::review, code, 0s};
}
Expected expect_later(seconds in) {
    return {ReconcileAction::check_later, std::nullopt, in};
}
Expected expect(ReconcileAction action) {
    return {action, std::nullopt, 0s};
}

// recheck_base, doubled `n` times, never above recheck_cap.
seconds expected_backoff(int n, const ReconcilePolicy& p) {
    seconds wait = p.recheck_base;
    for (int i = 0; i < n && wait < p.recheck_cap; ++i) {
        wait *= 2;
    }
    return std::min(wait, p.recheck_cap);
}

Expected oracle(const Case& c, const ReconcilePolicy& p) {
    const bool inside_settle = c.since_last == SinceLast::inside_settle;
    const seconds settle_left = c.profile->settle_delay - k_since_last_inside;

    // 1. A provider that cannot be asked: an operation it accepted waits for its notification
    //    until the window closes, then a human looks at its dashboard, as for any other.
    if (!c.can_lookup) {
        switch (c.accepted) {
        case Accepted::no:
            return expect_review(ReviewCode::no_lookup);
        case Accepted::window_open:
            return expect_later(k_window_open -
                                (inside_settle ? k_since_last_inside
                                               : c.profile->settle_delay + k_after_settle_by));
        case Accepted::window_closed:
            return expect_review(ReviewCode::notification_missing);
        }
    }
    // 2. Not asked yet: wait out what is left of the settle delay, or the base recheck interval.
    if (c.lookup == LookupStatus::not_asked) {
        return expect_later(inside_settle ? settle_left : p.recheck_base);
    }
    // 3. Found: duplicates first, then a different amount or currency (case does not matter), then
    //    the remote state.
    if (c.lookup == LookupStatus::found) {
        if (c.duplicates > 0) {
            return expect_review(ReviewCode::remote_duplicate);
        }
        if (c.amount == Amount::different || c.currency == Currency::different) {
            return expect_review(ReviewCode::remote_mismatch);
        }
        switch (c.remote_state) {
        case RemoteState::succeeded:
            return expect(ReconcileAction::adopt_succeeded);
        case RemoteState::declined:
            return expect(ReconcileAction::adopt_failed);
        case RemoteState::requires_action:
            return expect_review(ReviewCode::requires_action);
        case RemoteState::unrecognised:
            return expect_review(ReviewCode::remote_unrecognised);
        case RemoteState::pending:
            // This check is the max_checks-th one when max - 1 came before it.
            if (c.lookups_before == Counter::at_last) {
                return expect_review(ReviewCode::schedule_exhausted);
            }
            return expect_later(expected_backoff(counter_value(c.lookups_before, p.max_checks), p));
        }
    }
    // 4. The query failed: ask again, until this is the max_lookup_failures-th failure in a row.
    if (c.lookup == LookupStatus::failed) {
        if (c.failures_before == Counter::at_last) {
            return expect_review(ReviewCode::lookup_failing);
        }
        return expect_later(
            expected_backoff(counter_value(c.failures_before, p.max_lookup_failures), p));
    }
    // 5. Not found. Inside the settle delay that proves nothing.
    if (inside_settle) {
        return expect_later(settle_left);
    }
    if (!c.honours_idempotency_keys) {
        return expect_review(ReviewCode::no_idempotency);
    }
    // Only strictly younger than retention - margin; the boundary itself is outside.
    if (c.since_first != SinceFirst::inside_window) {
        return expect_review(ReviewCode::outside_key_window);
    }
    if (c.attempts == Attempts::at_max) {
        return expect_review(ReviewCode::schedule_exhausted);
    }
    return expect(ReconcileAction::resend);
}

// Everything wrong with `got` for `want`; empty if it matches.
std::vector<std::string> problems(const ReconcileDecision& got, const Expected& want) {
    std::vector<std::string> out;
    if (got.action != want.action) {
        out.push_back("action " + std::string(to_string(got.action)) + ", expected " +
                      std::string(to_string(want.action)));
    }
    if (got.review != want.review) {
        out.push_back("review " +
                      (got.review ? std::string(to_string(*got.review)) : std::string("none")) +
                      ", expected " +
                      (want.review ? std::string(to_string(*want.review)) : std::string("none")));
    }
    if (got.reason.empty()) {
        out.push_back("empty reason");
    }
    if (got.action == ReconcileAction::check_later) {
        if (got.check_in < 1s) {
            out.push_back("check_in below 1 s");
        }
        if (want.action == ReconcileAction::check_later && got.check_in != want.check_in) {
            out.push_back("check_in " + std::to_string(got.check_in.count()) + " s, expected " +
                          std::to_string(want.check_in.count()) + " s");
        }
    }
    const bool adopt = got.action == ReconcileAction::adopt_succeeded ||
                       got.action == ReconcileAction::adopt_failed;
    if (adopt && got.provider_reference != k_reference) {
        out.push_back("provider reference not passed through");
    }
    if (!adopt && got.provider_reference) {
        out.push_back("provider reference set without adopt");
    }
    return out;
}

ReconcileInput base_input() {
    ReconcileInput in;
    in.can_lookup = true;
    in.honours_idempotency_keys = true;
    in.key_retention = 24h;
    in.settle_delay = 120s;
    in.amount_minor = 1999;
    in.currency = "EUR";
    in.since_first_attempt = 2h;
    in.since_last_attempt = 10min;
    in.resends = 1;
    in.lookup = LookupStatus::not_found;
    return in;
}

ReconcileInput found(RemoteState state) {
    ReconcileInput in = base_input();
    in.lookup = LookupStatus::found;
    in.remote_state = state;
    in.remote_amount_minor = in.amount_minor;
    in.remote_currency = in.currency;
    in.remote_reference = "pi_3Ny8";
    return in;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// The whole table against the oracle.

TEST_CASE("reconcile policy: every combination of input classes decides as the header's rules say",
          "[core][reconcile]") {
    const ReconcilePolicy policy = table_policy();
    int mismatches = 0;
    std::map<std::string, int> outcomes; // action or review code -> rows
    const int rows = for_every_case([&](const Case& c) {
        const ReconcileDecision got = decide_reconciliation(input_for(c, policy), policy);
        const std::vector<std::string> wrong = problems(got, oracle(c, policy));
        ++outcomes[got.review ? std::string(to_string(*got.review))
                              : std::string(to_string(got.action))];
        if (!wrong.empty() && ++mismatches <= 20) { // the first 20 are enough to read
            std::string text = describe(c) + ":";
            for (const std::string& w : wrong) {
                text += "\n  " + w;
            }
            FAIL_CHECK(text);
        }
    });
    CHECK(rows == k_table_size);
    CHECK(rows == 276480);
    CHECK(mismatches == 0);

    // The classes reach every outcome, so no rule is dead in the table -- every review code but
    // request_rejected, which is the executor's (a provider refusing our request) and never the
    // policy's answer.
    for (const ReviewCode code : k_all_review_codes) {
        INFO(to_string(code));
        if (code == ReviewCode::request_rejected) {
            CHECK(outcomes[std::string(to_string(code))] == 0);
        } else {
            CHECK(outcomes[std::string(to_string(code))] > 0);
        }
    }
    for (const ReconcileAction action :
         {ReconcileAction::adopt_succeeded, ReconcileAction::adopt_failed,
          ReconcileAction::check_later, ReconcileAction::resend}) {
        INFO(to_string(action));
        CHECK(outcomes[std::string(to_string(action))] > 0);
    }
}

TEST_CASE("reconcile policy: a provider that cannot look up yields review no_lookup, unless it "
          "accepted the operation: then its notification is awaited, and notification_missing "
          "after the window",
          "[core][reconcile]") {
    const ReconcilePolicy policy = table_policy();
    int violations = 0;
    int rows = 0;
    for_every_case([&](const Case& c) {
        if (c.can_lookup) {
            return;
        }
        ++rows;
        const ReconcileDecision d = decide_reconciliation(input_for(c, policy), policy);
        const bool ok = c.accepted == Accepted::no ? d.action == ReconcileAction::review &&
                                                         d.review == ReviewCode::no_lookup
                        : c.accepted == Accepted::window_open
                            ? d.action == ReconcileAction::check_later && !d.review
                            : d.action == ReconcileAction::review &&
                                  d.review == ReviewCode::notification_missing;
        if (!ok) {
            ++violations;
            FAIL_CHECK(describe(c) << ": " << to_string(d.action));
        }
    });
    CHECK(rows == k_table_size / 2);
    CHECK(violations == 0);
}

TEST_CASE("reconcile policy: an accepted operation without a lookup is checked again exactly when "
          "its notification window closes, and then goes to review notification_missing",
          "[core][reconcile]") {
    const ReconcilePolicy policy = table_policy();
    ReconcileInput in = base_input();
    in.can_lookup = false;
    in.lookup = LookupStatus::not_asked;
    in.accepted = true;
    in.notification_wait = 4h;
    in.since_last_attempt = 0s; // the reconciler's first look, right after the answer
    ReconcileDecision d = decide_reconciliation(in, policy);
    CHECK(d.action == ReconcileAction::check_later);
    CHECK(d.check_in == 4h);
    in.since_last_attempt = 3h + 59min + 59s;
    d = decide_reconciliation(in, policy);
    CHECK(d.action == ReconcileAction::check_later);
    CHECK(d.check_in == 1s);
    in.since_last_attempt = 4h; // the window is closed at its end
    d = decide_reconciliation(in, policy);
    CHECK(d.action == ReconcileAction::review);
    CHECK(d.review == ReviewCode::notification_missing);
    CHECK(d.reason.find("14400 s") != std::string::npos);
    // No window (a kind without one, or 0 configured): nothing is awaited, review no_lookup at
    // once, as before there were windows.
    in.notification_wait = 0s;
    in.since_last_attempt = 0s;
    CHECK(decide_reconciliation(in, policy).review == ReviewCode::no_lookup);
    // Not accepted (the answer was lost): nothing is due to come, review no_lookup as before.
    in.notification_wait = 4h;
    in.accepted = false;
    CHECK(decide_reconciliation(in, policy).review == ReviewCode::no_lookup);
    // A provider that can look up asks; being accepted changes nothing there.
    in.can_lookup = true;
    in.accepted = true;
    in.lookup = LookupStatus::found;
    in.remote_state = RemoteState::succeeded;
    in.remote_amount_minor = in.amount_minor;
    in.remote_currency = in.currency;
    CHECK(decide_reconciliation(in, policy).action == ReconcileAction::adopt_succeeded);
}

TEST_CASE("reconcile policy: only a not_found lookup can lead to a re-send", "[core][reconcile]") {
    const ReconcilePolicy policy = table_policy();
    int violations = 0;
    int resends = 0;
    for_every_case([&](const Case& c) {
        const ReconcileDecision d = decide_reconciliation(input_for(c, policy), policy);
        if (d.action != ReconcileAction::resend) {
            return;
        }
        ++resends;
        const bool allowed =
            c.lookup == LookupStatus::not_found && c.can_lookup && c.honours_idempotency_keys &&
            c.since_last == SinceLast::after_settle && c.since_first == SinceFirst::inside_window &&
            c.attempts == Attempts::below_max;
        if (!allowed) {
            ++violations;
            FAIL_CHECK(describe(c));
        }
    });
    CHECK(resends > 0);
    CHECK(violations == 0);
}

TEST_CASE("reconcile policy: a failed lookup never yields a re-send or an adoption",
          "[core][reconcile]") {
    const ReconcilePolicy policy = table_policy();
    int violations = 0;
    for_every_case([&](const Case& c) {
        if (c.lookup != LookupStatus::failed) {
            return;
        }
        const ReconcileDecision d = decide_reconciliation(input_for(c, policy), policy);
        if (d.action != ReconcileAction::check_later && d.action != ReconcileAction::review) {
            ++violations;
            FAIL_CHECK(describe(c) << ": " << to_string(d.action));
        }
    });
    CHECK(violations == 0);
}

TEST_CASE("reconcile policy: nothing is ever failed except a decline found at the provider",
          "[core][reconcile]") {
    const ReconcilePolicy policy = table_policy();
    int violations = 0;
    for_every_case([&](const Case& c) {
        const ReconcileDecision d = decide_reconciliation(input_for(c, policy), policy);
        if (d.action == ReconcileAction::adopt_failed &&
            !(c.lookup == LookupStatus::found && c.remote_state == RemoteState::declined)) {
            ++violations;
            FAIL_CHECK(describe(c));
        }
    });
    CHECK(violations == 0);
}

// ---------------------------------------------------------------------------------------------
// Boundaries, by hand.

TEST_CASE("reconcile policy: the key window margin is min(1 h, retention / 4)",
          "[core][reconcile]") {
    CHECK(key_window_margin(24h) == 1h);
    CHECK(key_window_margin(7 * 24h) == 1h);
    CHECK(key_window_margin(4h) == 1h);
    CHECK(key_window_margin(2h) == 30min);
    CHECK(key_window_margin(1h) == 15min);
    CHECK(key_window_margin(0s) == 0s);
}

TEST_CASE("reconcile policy: not found exactly at retention - margin is outside the key window",
          "[core][reconcile]") {
    struct Row {
        seconds retention;
        seconds boundary; // retention - margin, by hand
    };
    for (const Row row : {Row{24h, 23h}, Row{1h, 45min}, Row{6h, 5h}}) {
        INFO("retention " << row.retention.count() << " s");
        const ReconcilePolicy policy;
        ReconcileInput in = base_input();
        in.key_retention = row.retention;
        in.since_last_attempt = in.settle_delay + 1s;

        in.since_first_attempt = row.boundary;
        ReconcileDecision d = decide_reconciliation(in, policy);
        CHECK(d.action == ReconcileAction::review);
        CHECK(d.review == ReviewCode::outside_key_window);

        in.since_first_attempt = row.boundary - 1s;
        d = decide_reconciliation(in, policy);
        CHECK(d.action == ReconcileAction::resend);
        CHECK_FALSE(d.review);
        CHECK_FALSE(d.reason.empty());

        in.since_first_attempt = row.boundary + 1s;
        CHECK(decide_reconciliation(in, policy).review == ReviewCode::outside_key_window);
    }
}

TEST_CASE("reconcile policy: PayPal's numbers (keys kept 6 h, search 3 h behind): not found "
          "proves nothing inside 3 h, allows a re-send until 5 h, then review",
          "[core][reconcile][paypal]") {
    // providers/paypal: key_retention 6 h ("The server stores keys for 6 hours"), lookup_staleness
    // 3 h ("It takes a maximum of three hours for executed transactions to appear"). The margin is
    // min(1 h, 6 h / 4) = 1 h, so the key window ends at 5 h.
    const ReconcilePolicy policy;
    ReconcileInput in = base_input();
    in.key_retention = 6h;
    in.settle_delay = 3h;
    in.resends = 0;
    const auto at = [&](seconds since_first, seconds since_last) {
        in.since_first_attempt = since_first;
        in.since_last_attempt = since_last;
        return decide_reconciliation(in, policy);
    };

    // Inside the search delay, absence proves nothing: asked again when the delay ends.
    for (const seconds t : std::initializer_list<seconds>{0s, 10min, 1h, 2h + 59min + 59s}) {
        INFO(t.count() << " s");
        const ReconcileDecision d = at(t, t);
        CHECK(d.action == ReconcileAction::check_later);
        CHECK(d.check_in == 3h - t);
        CHECK_FALSE(d.review);
    }
    // Between 3 h and 5 h after the first attempt, a confirmed absence allows a re-send with the
    // same PayPal-Request-Id.
    for (const seconds t : std::initializer_list<seconds>{3h, 3h + 1s, 4h, 4h + 59min + 59s}) {
        INFO(t.count() << " s");
        CHECK(at(t, t).action == ReconcileAction::resend);
    }
    // From 5 h on, PayPal may have forgotten the key: a re-send could charge twice.
    for (const seconds t : std::initializer_list<seconds>{5h, 5h + 1s, 6h, 24h}) {
        INFO(t.count() << " s");
        const ReconcileDecision d = at(t, t);
        CHECK(d.action == ReconcileAction::review);
        CHECK(d.review == ReviewCode::outside_key_window);
    }
    // A re-send at 3 h 30 min resets the search delay: its absence proves nothing until 6 h 30
    // min, by which time the key window is over.
    CHECK(at(4h, 30min).action == ReconcileAction::check_later);
    CHECK(at(6h + 30min, 3h).review == ReviewCode::outside_key_window);
    // A failed search is never absence, inside the window or not.
    in.lookup = LookupStatus::failed;
    CHECK(at(4h, 4h).action == ReconcileAction::check_later);
    // An account with 72 h keeps the window open until 71 h.
    in.lookup = LookupStatus::not_found;
    in.key_retention = 72h;
    CHECK(at(70h + 59min, 4h).action == ReconcileAction::resend);
    CHECK(at(71h, 4h).review == ReviewCode::outside_key_window);
}

TEST_CASE("reconcile policy: a provider that keeps no keys at all never gets a re-send",
          "[core][reconcile]") {
    ReconcileInput in = base_input();
    in.key_retention = 0s;
    in.since_first_attempt = 0s;
    in.since_last_attempt = in.settle_delay;
    const ReconcileDecision d = decide_reconciliation(in, ReconcilePolicy{});
    CHECK(d.action == ReconcileAction::review);
    CHECK(d.review == ReviewCode::outside_key_window);
}

TEST_CASE("reconcile policy: the settle delay ends exactly at settle_delay since the last attempt",
          "[core][reconcile]") {
    const ReconcilePolicy policy;
    ReconcileInput in = base_input();

    in.since_last_attempt = in.settle_delay - 1s;
    ReconcileDecision d = decide_reconciliation(in, policy);
    CHECK(d.action == ReconcileAction::check_later);
    CHECK(d.check_in == 1s);

    in.since_last_attempt = in.settle_delay;
    d = decide_reconciliation(in, policy);
    CHECK(d.action == ReconcileAction::resend);
}

TEST_CASE("reconcile policy: not asked inside the settle delay checks in when it ends",
          "[core][reconcile]") {
    const ReconcilePolicy policy;
    ReconcileInput in = base_input();
    in.lookup = LookupStatus::not_asked;
    in.settle_delay = 120s;

    in.since_last_attempt = 45s;
    ReconcileDecision d = decide_reconciliation(in, policy);
    CHECK(d.action == ReconcileAction::check_later);
    CHECK(d.check_in == 75s);
    CHECK_FALSE(d.reason.empty());

    in.since_last_attempt = 0s;
    CHECK(decide_reconciliation(in, policy).check_in == 120s);

    // Past the settle delay with nobody asked: the base interval.
    in.since_last_attempt = 121s;
    d = decide_reconciliation(in, policy);
    CHECK(d.action == ReconcileAction::check_later);
    CHECK(d.check_in == policy.recheck_base);

    // A not_found inside the settle delay waits for the same remainder.
    in.lookup = LookupStatus::not_found;
    in.since_last_attempt = 45s;
    d = decide_reconciliation(in, policy);
    CHECK(d.action == ReconcileAction::check_later);
    CHECK(d.check_in == 75s);
}

TEST_CASE("reconcile policy: still processing backs off 60 s doubling per check, up to the cap",
          "[core][reconcile]") {
    ReconcilePolicy policy;
    policy.max_checks = 1000;
    ReconcileInput in = found(RemoteState::pending);
    const seconds expected[] = {60s,   120s,  240s,   480s,   960s,   1920s,
                                3840s, 7680s, 15360s, 21600s, 21600s, 21600s};
    for (int n = 0; n < static_cast<int>(std::size(expected)); ++n) {
        INFO("lookups_before " << n);
        in.lookups_before = n;
        const ReconcileDecision d = decide_reconciliation(in, policy);
        REQUIRE(d.action == ReconcileAction::check_later);
        CHECK(d.check_in == expected[n]);
        CHECK_FALSE(d.provider_reference);
    }
    // Far past the doubling: still the cap, no overflow.
    in.lookups_before = 998;
    CHECK(decide_reconciliation(in, policy).check_in == 6h);

    // Another cap.
    policy.recheck_cap = 300s;
    in.lookups_before = 2;
    CHECK(decide_reconciliation(in, policy).check_in == 240s);
    in.lookups_before = 3;
    CHECK(decide_reconciliation(in, policy).check_in == 300s);
}

TEST_CASE("reconcile policy: a failing lookup backs off per failure in a row, up to the cap",
          "[core][reconcile]") {
    ReconcilePolicy policy;
    policy.max_lookup_failures = 50;
    ReconcileInput in = base_input();
    in.lookup = LookupStatus::failed;
    in.lookups_before = 40; // the failures in a row count, not all the lookups
    const seconds expected[] = {60s, 120s, 240s, 480s, 960s};
    for (int n = 0; n < static_cast<int>(std::size(expected)); ++n) {
        INFO("lookup_failures_before " << n);
        in.lookup_failures_before = n;
        const ReconcileDecision d = decide_reconciliation(in, policy);
        REQUIRE(d.action == ReconcileAction::check_later);
        CHECK(d.check_in == expected[n]);
    }
    in.lookup_failures_before = 30;
    CHECK(decide_reconciliation(in, policy).check_in == policy.recheck_cap);
}

TEST_CASE("reconcile policy: the max_lookup_failures-th failure in a row goes to review",
          "[core][reconcile]") {
    ReconcilePolicy policy;
    policy.max_lookup_failures = 3;
    ReconcileInput in = base_input();
    in.lookup = LookupStatus::failed;

    in.lookup_failures_before = 1;
    CHECK(decide_reconciliation(in, policy).action == ReconcileAction::check_later);
    in.lookup_failures_before = 2;
    const ReconcileDecision d = decide_reconciliation(in, policy);
    CHECK(d.action == ReconcileAction::review);
    CHECK(d.review == ReviewCode::lookup_failing);
    CHECK_FALSE(d.reason.empty());

    // One failure allowed: the first one already goes to review.
    policy.max_lookup_failures = 1;
    in.lookup_failures_before = 0;
    CHECK(decide_reconciliation(in, policy).review == ReviewCode::lookup_failing);
}

TEST_CASE("reconcile policy: the max_checks-th still-processing answer goes to review",
          "[core][reconcile]") {
    ReconcilePolicy policy;
    policy.max_checks = 12;
    ReconcileInput in = found(RemoteState::pending);
    in.lookups_before = 10;
    CHECK(decide_reconciliation(in, policy).action == ReconcileAction::check_later);
    in.lookups_before = 11;
    const ReconcileDecision d = decide_reconciliation(in, policy);
    CHECK(d.action == ReconcileAction::review);
    CHECK(d.review == ReviewCode::schedule_exhausted);
}

TEST_CASE("reconcile policy: a payment the reconciler already sent again max_resends times is not "
          "sent again",
          "[core][reconcile]") {
    ReconcilePolicy policy;
    policy.max_resends = 3;
    ReconcileInput in = base_input();
    in.resends = 2;
    CHECK(decide_reconciliation(in, policy).action == ReconcileAction::resend);
    in.resends = 3;
    const ReconcileDecision d = decide_reconciliation(in, policy);
    CHECK(d.action == ReconcileAction::review);
    CHECK(d.review == ReviewCode::schedule_exhausted);
}

TEST_CASE("reconcile policy: check later is at least 1 s even with a zero base or cap",
          "[core][reconcile]") {
    ReconcilePolicy policy;
    policy.recheck_base = 0s;
    ReconcileInput in = found(RemoteState::pending);
    CHECK(decide_reconciliation(in, policy).check_in >= 1s);

    policy.recheck_base = 60s;
    policy.recheck_cap = 0s;
    CHECK(decide_reconciliation(in, policy).check_in >= 1s);

    in = base_input();
    in.lookup = LookupStatus::not_asked;
    in.since_last_attempt = in.settle_delay + 1h;
    policy.recheck_base = 0s;
    CHECK(decide_reconciliation(in, policy).check_in >= 1s);
}

TEST_CASE("reconcile policy: an adoption passes the provider's reference through, or none",
          "[core][reconcile]") {
    const ReconcilePolicy policy;
    for (const RemoteState state : {RemoteState::succeeded, RemoteState::declined}) {
        INFO(to_string(state));
        ReconcileInput in = found(state);
        ReconcileDecision d = decide_reconciliation(in, policy);
        CHECK(d.action == (state == RemoteState::succeeded ? ReconcileAction::adopt_succeeded
                                                           : ReconcileAction::adopt_failed));
        CHECK(d.provider_reference == std::optional<std::string>("pi_3Ny8"));
        CHECK_FALSE(d.review);

        in.remote_reference.reset();
        d = decide_reconciliation(in, policy);
        CHECK(d.action == (state == RemoteState::succeeded ? ReconcileAction::adopt_succeeded
                                                           : ReconcileAction::adopt_failed));
        CHECK_FALSE(d.provider_reference);
    }
}

TEST_CASE("reconcile policy: a lower-case remote currency matches, a different one does not",
          "[core][reconcile]") {
    const ReconcilePolicy policy;
    ReconcileInput in = found(RemoteState::succeeded);
    in.remote_currency = "eur";
    CHECK(decide_reconciliation(in, policy).action == ReconcileAction::adopt_succeeded);
    in.remote_currency = "EuR";
    CHECK(decide_reconciliation(in, policy).action == ReconcileAction::adopt_succeeded);
    for (const char* other : {"USD", "EU", "EURO", ""}) {
        INFO(other);
        in.remote_currency = other;
        const ReconcileDecision d = decide_reconciliation(in, policy);
        CHECK(d.review == ReviewCode::remote_mismatch);
        CHECK_FALSE(d.provider_reference);
    }
}

TEST_CASE("reconcile policy: a void's amount decides nothing -- it releases what is left when it "
          "executes -- but its currency does",
          "[core][reconcile][captures][regression]") {
    // A void asked while a part of the authorisation was held by a capture carries what was
    // capturable then (half); the capture failed, and the provider released the whole. Compared
    // as a charge's amount, every such void went to review (remote_mismatch) though the provider
    // voided it (test_capture_matrix).
    const ReconcilePolicy policy;
    for (const RemoteState state : {RemoteState::succeeded, RemoteState::declined}) {
        ReconcileInput in = found(state);
        in.remote_amount_minor = in.amount_minor * 2;
        CHECK(decide_reconciliation(in, policy).review == ReviewCode::remote_mismatch);
        in.amount_decides = false;
        CHECK(decide_reconciliation(in, policy).action == (state == RemoteState::succeeded
                                                               ? ReconcileAction::adopt_succeeded
                                                               : ReconcileAction::adopt_failed));
        in.remote_currency = "USD";
        CHECK(decide_reconciliation(in, policy).review == ReviewCode::remote_mismatch);
    }
}

TEST_CASE("reconcile policy: a mismatch reason gives amounts in major units with the currency's "
          "exponent",
          "[core][reconcile][regression]") {
    // The reason printed minor units as if they were major ones: "the provider's payment is
    // 1 EUR, ours is 1001 EUR" for 0.01 EUR against 10.01 EUR.
    const ReconcilePolicy policy;
    ReconcileInput in = found(RemoteState::succeeded);
    in.amount_minor = 1001;
    in.currency = "EUR";
    in.remote_amount_minor = 1;
    in.remote_currency = "eur";
    ReconcileDecision d = decide_reconciliation(in, policy);
    REQUIRE(d.review == ReviewCode::remote_mismatch);
    CHECK(d.reason == "the provider's payment is 0.01 EUR, ours is 10.01 EUR");

    in.amount_minor = 1500; // JPY has no minor unit, KWD three
    in.currency = "JPY";
    in.remote_amount_minor = 1500;
    in.remote_currency = "KWD";
    d = decide_reconciliation(in, policy);
    REQUIRE(d.review == ReviewCode::remote_mismatch);
    CHECK(d.reason == "the provider's payment is 1.500 KWD, ours is 1500 JPY");

    // A currency ISO 4217 does not know cannot be scaled: its minor units, said so.
    in.remote_currency = "XYZ";
    d = decide_reconciliation(in, policy);
    CHECK(d.reason == "the provider's payment is 1500 XYZ (minor units), ours is 1500 JPY");
}

TEST_CASE("reconcile policy: every review code round-trips through its name", "[core][reconcile]") {
    std::set<std::string> names;
    for (const ReviewCode code : k_all_review_codes) {
        const std::string_view name = to_string(code);
        INFO(name);
        CHECK_FALSE(name.empty());
        CHECK(parse_review_code(name) == code);
        names.insert(std::string(name));
    }
    CHECK(names.size() == std::size(k_all_review_codes));
    CHECK(names == std::set<std::string>{"no_lookup", "lookup_failing", "outside_key_window",
                                         "no_idempotency", "schedule_exhausted", "remote_mismatch",
                                         "remote_duplicate", "requires_action",
                                         "remote_unrecognised", "request_rejected",
                                         "notification_missing"});
    for (const char* unknown : {"", "NO_LOOKUP", "no_lookup ", "needs_review", "unknown"}) {
        INFO(unknown);
        CHECK_FALSE(parse_review_code(unknown));
    }
}

TEST_CASE("reconcile policy: a void's news settles it whatever amount it names, not in another "
          "currency",
          "[core][reconcile][captures][regression]") {
    // A notification of a void (Checkout.com's payment_voided) names what the provider released:
    // the whole authorisation once a capture held meanwhile failed, more than the void asked.
    // Compared as a charge's, it went to review like the lookup's answer did.
    WebhookEvent e;
    e.event_key = "evt_void";
    e.event_type = "payment_voided";
    e.kind = OperationKind::void_authorization;
    e.outcome = EvidenceOutcome::succeeded;
    CHECK(decide_from_event(5000, "EUR", e).action == ReconcileAction::adopt_succeeded);
    e.amount_minor = 10000;
    e.currency = "EUR";
    CHECK(decide_from_event(5000, "EUR", e).action == ReconcileAction::adopt_succeeded);
    e.currency = "USD";
    CHECK(decide_from_event(5000, "EUR", e).review == ReviewCode::remote_mismatch);
    // A capture's amount still decides.
    e.kind = OperationKind::capture;
    e.currency = "EUR";
    CHECK(decide_from_event(5000, "EUR", e).review == ReviewCode::remote_mismatch);
    e.amount_minor = 5000;
    CHECK(decide_from_event(5000, "EUR", e).action == ReconcileAction::adopt_succeeded);
}
