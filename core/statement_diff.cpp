#include "core/statement_diff.hpp"

#include "core/money.hpp"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <stdexcept>

namespace payrecon {
namespace {

bool unresolved(PaymentState state) {
    return state == PaymentState::unknown || state == PaymentState::needs_review;
}

// A key's category and detail; the records are attached by the caller (a match costs no string).
struct Verdict {
    FindingCategory category;
    std::string detail;
    bool across_windows = false;
};

Verdict verdict(FindingCategory category, std::string detail) {
    return Verdict{category, std::move(detail)};
}

bool read_in_window(long long at, const DiffRules& rules) {
    return at >= rules.read_from && at < rules.read_to;
}

// "2026-12-04T23:59:10Z"
std::string utc(long long unix_seconds) {
    const auto t = static_cast<std::time_t>(unix_seconds);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

// The key's verdict, with both times said when one side is a counterpart from outside the window's
// reading: a match across windows is noted, never a finding.
Verdict with_counterpart(Verdict v, const LocalRecord* local, const RemoteRecord* remote,
                         const DiffRules& rules) {
    if (local == nullptr || remote == nullptr ||
        (read_in_window(local->at, rules) && read_in_window(remote->at, rules))) {
        return v;
    }
    v.across_windows = true;
    const std::string times = "payrecon first sent it at " + utc(local->at) +
                              "; the provider's record is of " + utc(remote->at);
    if (is_match(v.category)) {
        v.detail = "matched by operation ID across windows: " + times;
    } else {
        v.detail += " (" + times + ")";
    }
    return v;
}

} // namespace

std::string_view to_string(StatementRunStatus status) {
    switch (status) {
    case StatementRunStatus::listing:
        return "listing";
    case StatementRunStatus::listed:
        return "listed";
    case StatementRunStatus::done:
        return "done";
    case StatementRunStatus::failed:
        break;
    }
    return "failed";
}

std::optional<StatementRunStatus> parse_statement_run_status(std::string_view name) {
    for (const auto status : {StatementRunStatus::listing, StatementRunStatus::listed,
                              StatementRunStatus::done, StatementRunStatus::failed}) {
        if (to_string(status) == name) {
            return status;
        }
    }
    return std::nullopt;
}

std::string_view to_string(RemoteStatus status) {
    switch (status) {
    case RemoteStatus::succeeded:
        return "succeeded";
    case RemoteStatus::refunded:
        return "refunded";
    case RemoteStatus::declined:
        return "declined";
    case RemoteStatus::pending:
        return "pending";
    case RemoteStatus::authorized:
        return "authorized";
    case RemoteStatus::other:
        break;
    }
    return "other";
}

std::string_view to_string(FindingCategory category) {
    switch (category) {
    case FindingCategory::matched:
        return "matched";
    case FindingCategory::missing_remote:
        return "missing_remote";
    case FindingCategory::missing_local:
        return "missing_local";
    case FindingCategory::amount_mismatch:
        return "amount_mismatch";
    case FindingCategory::currency_mismatch:
        return "currency_mismatch";
    case FindingCategory::status_mismatch:
        return "status_mismatch";
    case FindingCategory::duplicate_remote:
        return "duplicate_remote";
    case FindingCategory::unresolved_unknown:
        return "unresolved_unknown";
    case FindingCategory::authorization_mismatch:
        return "authorization_mismatch";
    case FindingCategory::refund_matched:
        return "refund_matched";
    case FindingCategory::refund_missing_remote:
        return "refund_missing_remote";
    case FindingCategory::refund_missing_local:
        return "refund_missing_local";
    case FindingCategory::refund_amount_mismatch:
        return "refund_amount_mismatch";
    case FindingCategory::refund_status_mismatch:
        return "refund_status_mismatch";
    case FindingCategory::refund_duplicate_remote:
        return "refund_duplicate_remote";
    case FindingCategory::refund_unresolved_unknown:
        return "refund_unresolved_unknown";
    }
    return "matched";
}

std::optional<FindingCategory> parse_finding_category(std::string_view name) {
    for (const auto& group : {std::span<const FindingCategory>(k_charge_categories),
                              std::span<const FindingCategory>(k_refund_categories)}) {
        for (const FindingCategory c : group) {
            if (to_string(c) == name) {
                return c;
            }
        }
    }
    return std::nullopt;
}

bool is_match(FindingCategory category) {
    return category == FindingCategory::matched || category == FindingCategory::refund_matched;
}

bool is_match(std::string_view category_name) {
    const auto c = parse_finding_category(category_name);
    return c && is_match(*c);
}

bool is_charge(RemoteStatus status) {
    return status == RemoteStatus::succeeded || status == RemoteStatus::refunded ||
           status == RemoteStatus::authorized;
}

namespace {

// The key's anchor (ours, unless our record is a counterpart found outside the window's reading),
// or nullopt if it lies outside the window: nothing to say of the key in this window.
std::optional<long long> anchor_in_window(const LocalRecord* local,
                                          std::span<const RemoteRecord> remote,
                                          const DiffRules& rules) {
    const long long anchor =
        local && (remote.empty() || read_in_window(local->at, rules))
            ? local->at
            : std::min_element(remote.begin(), remote.end(), [](const auto& a, const auto& b) {
                  return a.at < b.at;
              })->at;
    if (anchor < rules.window_from || anchor >= rules.window_to) {
        return std::nullopt;
    }
    return anchor;
}

long long distance(long long a, long long b) {
    return a > b ? a - b : b - a;
}

// "authorised 50.00 EUR, 20.00 EUR captured (5.00 EUR more in flight)", "... voided", as payrecon
// holds an authorisation.
std::string ours_held(const LocalRecord& l) {
    std::string out =
        "payrecon has it authorised, " + describe_money(l.captured_minor, l.currency) + " captured";
    if (l.capture_held_minor > l.captured_minor) {
        out += " (" + describe_money(l.capture_held_minor - l.captured_minor, l.currency) +
               " more in flight, unknown or in review)";
    }
    if (l.voided) {
        out += ", voided";
    } else if (l.expired) {
        out += ", expired";
    }
    return out;
}

// "the provider has it requires_capture (pi_1)"
std::string theirs_held(const RemoteRecord& r) {
    return "the provider has it " +
           (r.raw_status.empty() ? std::string(to_string(r.status)) : r.raw_status) + " (" +
           r.provider_reference + ")";
}

// An authorisation's charge key (the header's third table) once the records are paired, the
// currency and the authorised amount equal: nullopt when both sides agree on what was captured or
// released (the refunds are then judged as for any charge), else the finding.
std::optional<Verdict> classify_authorization(const LocalRecord& l, const RemoteRecord& r,
                                              const DiffRules& rules) {
    const auto mismatch = [&](const std::string& why) {
        return verdict(FindingCategory::authorization_mismatch,
                       why + ": " + ours_held(l) + "; " + theirs_held(r));
    };
    if (r.status == RemoteStatus::authorized) {
        if (l.captured_minor > 0) {
            return mismatch("payrecon captured, the provider holds the authorisation uncaptured");
        }
        if (l.voided) {
            return mismatch("payrecon voided it, the provider still holds the authorisation "
                            "(void it at the provider, or tell the customer when it lapses)");
        }
        return std::nullopt;
    }
    if (l.voided && l.capture_held_minor == 0) {
        return mismatch("payrecon voided it, the provider captured it");
    }
    const std::string what =
        r.amount_captured ? describe_money(*r.amount_captured, r.currency) : std::string("it");
    if (l.capture_held_minor == 0) {
        return mismatch("the provider captured " + what +
                        ", payrecon holds no capture of it (a capture made in the provider's "
                        "dashboard?)");
    }
    if (!r.amount_captured) {
        return std::nullopt;
    }
    const long long captured = *r.amount_captured;
    if (captured + rules.amount_tolerance_minor < l.captured_minor ||
        captured > l.capture_held_minor + rules.amount_tolerance_minor) {
        return mismatch("the provider captured " + describe_money(captured, r.currency));
    }
    return std::nullopt;
}

// An authorisation's key where the provider holds no charge: released there (voided or expired).
std::optional<Verdict> classify_released(const LocalRecord& l,
                                         std::span<const RemoteRecord> remote) {
    if (l.voided || l.expired) {
        return verdict(FindingCategory::matched, "released on both sides");
    }
    return verdict(FindingCategory::authorization_mismatch,
                   "the provider released the authorisation, payrecon still holds it: " +
                       ours_held(l) + "; " + theirs_held(remote.front()));
}

// A charge's key (the header's first table).
std::optional<Verdict> classify_charge(const LocalRecord* local,
                                       std::span<const RemoteRecord> remote,
                                       const DiffRules& rules) {
    const auto charges = std::count_if(remote.begin(), remote.end(),
                                       [](const auto& r) { return is_charge(r.status); });
    if (charges > 1) {
        // Each charge by its reference: the operator refunds the extra ones by them.
        std::string references;
        for (const auto& r : remote) {
            if (is_charge(r.status)) {
                references += (references.empty() ? "" : ", ") + r.provider_reference + " (" +
                              describe_money(r.amount_minor, r.currency) +
                              (r.status == RemoteStatus::refunded ? ", refunded" : "") + ")";
            }
        }
        return verdict(FindingCategory::duplicate_remote,
                       "the provider holds " + std::to_string(charges) +
                           " charges for one operation ID: " + references);
    }
    if (!local) {
        if (charges == 0) {
            return std::nullopt;
        }
        const RemoteRecord& r = *std::find_if(remote.begin(), remote.end(),
                                              [](const auto& x) { return is_charge(x.status); });
        return verdict(
            FindingCategory::missing_local,
            r.status == RemoteStatus::authorized
                ? "the provider holds an authorisation of " +
                      describe_money(r.amount_minor, r.currency) + " (" + r.provider_reference +
                      ") on the customer's card and payrecon has no record of it"
                : "the provider charged " + describe_money(r.amount_minor, r.currency) + " (" +
                      r.provider_reference + ") and payrecon has no record of it");
    }
    if (remote.empty() || charges == 0) {
        if (unresolved(local->state)) {
            return verdict(FindingCategory::unresolved_unknown,
                           "payrecon does not know yet whether this payment was charged (" +
                               std::string(to_string(local->state)) + ")");
        }
        if (local->state == PaymentState::succeeded && local->manual && !remote.empty()) {
            return classify_released(*local, remote);
        }
        if (local->state == PaymentState::succeeded) {
            return verdict(FindingCategory::missing_remote,
                           remote.empty()
                               ? "payrecon says succeeded; the provider has no such payment"
                               : "payrecon says succeeded; the provider has it as " +
                                     remote.front().raw_status);
        }
        return verdict(FindingCategory::matched, "no charge on either side");
    }
    const RemoteRecord& r = *std::find_if(remote.begin(), remote.end(),
                                          [](const auto& x) { return is_charge(x.status); });
    if (unresolved(local->state)) {
        // Who settles it depends on where it waits: the reconciler asks about unknown payments
        // (or sends them to review); a payment in review waits for an operator.
        const std::string who =
            local->state == PaymentState::needs_review
                ? "an operator decides it, with this as evidence: payrecon review show " +
                      (local->payment_id.empty() ? local->match_key : local->payment_id)
                : "the next reconcile run settles it, or sends it to review";
        return verdict(
            FindingCategory::unresolved_unknown,
            "the provider has the payment as " + r.raw_status + " (" + r.provider_reference + ", " +
                describe_money(r.amount_minor, r.currency) + "); payrecon still has it " +
                std::string(to_string(local->state)) + ": " + who);
    }
    if (!same_currency(local->currency, r.currency)) {
        return verdict(FindingCategory::currency_mismatch,
                       "ours is " + describe_money(local->amount_minor, local->currency) +
                           ", the provider's " + describe_money(r.amount_minor, r.currency));
    }
    if (distance(local->amount_minor, r.amount_minor) > rules.amount_tolerance_minor) {
        return verdict(FindingCategory::amount_mismatch,
                       "ours is " + describe_money(local->amount_minor, local->currency) +
                           ", the provider's " + describe_money(r.amount_minor, r.currency));
    }
    if (local->state == PaymentState::succeeded && local->manual) {
        if (auto v = classify_authorization(*local, r, rules)) {
            return v;
        }
        if (r.status == RemoteStatus::authorized) {
            return verdict(FindingCategory::matched, "");
        }
    }
    if (local->state == PaymentState::succeeded && r.status == RemoteStatus::succeeded) {
        return verdict(FindingCategory::matched, "");
    }
    if (local->state == PaymentState::succeeded && r.status == RemoteStatus::refunded) {
        // Charged on both sides; what was refunded is the refunds' matter: their own keys where
        // the provider listed them, else what it refunded against what ours hold.
        if (rules.refunds_listed ||
            (r.amount_refunded > 0 && r.amount_refunded <= local->refund_held_minor)) {
            return verdict(FindingCategory::matched, "");
        }
        return verdict(FindingCategory::status_mismatch,
                       "the provider refunded " +
                           (r.amount_refunded > 0 ? describe_money(r.amount_refunded, r.currency)
                                                  : std::string("it")) +
                           "; payrecon's refunds of it hold " +
                           describe_money(local->refund_held_minor, local->currency) +
                           ": a refund made outside payrecon?");
    }
    const std::string theirs =
        r.status == RemoteStatus::refunded ? "refunded it"
        : r.status == RemoteStatus::authorized
            ? "only authorised it (" + r.raw_status + "): nothing was captured"
        : r.raw_status == to_string(r.status)
            ? "has it " + r.raw_status
            : "has it " + std::string(to_string(r.status)) + " (" + r.raw_status + ")";
    return verdict(FindingCategory::status_mismatch, "payrecon has it " +
                                                         std::string(to_string(local->state)) +
                                                         "; the provider " + theirs);
}

// A refund the provider holds as gone out or going out.
bool moved(const RemoteRecord& r) {
    return r.status == RemoteStatus::succeeded || r.status == RemoteStatus::pending;
}

// "EUR 5.00 (re_1, succeeded)"
std::string described(const RemoteRecord& r) {
    return describe_money(r.amount_minor, r.currency) + " (" + r.provider_reference + ", " +
           (r.raw_status.empty() ? std::string(to_string(r.status)) : r.raw_status) + ")";
}

// A refund's key (the header's second table).
std::optional<Verdict> classify_refund(const LocalRecord* local,
                                       std::span<const RemoteRecord> remote,
                                       const DiffRules& rules) {
    const auto moving =
        std::count_if(remote.begin(), remote.end(), [](const auto& r) { return moved(r); });
    if (moving > 1) {
        std::string references;
        for (const auto& r : remote) {
            if (moved(r)) {
                references += (references.empty() ? "" : ", ") + described(r);
            }
        }
        return verdict(FindingCategory::refund_duplicate_remote,
                       "the provider holds " + std::to_string(moving) +
                           " refunds for one operation ID: " + references);
    }
    if (!local) {
        if (moving == 0) {
            return std::nullopt;
        }
        const RemoteRecord& r = *std::find_if(remote.begin(), remote.end(), moved);
        return verdict(
            FindingCategory::refund_missing_local,
            "the provider " +
                std::string(r.status == RemoteStatus::pending ? "is refunding " : "refunded ") +
                describe_money(r.amount_minor, r.currency) + " (" + r.provider_reference +
                ") and payrecon has no record of the refund: one made at the "
                "provider (its dashboard), not through payrecon?");
    }
    const std::string whose = " (refund of payment " + local->payment_id + ")";
    if (moving == 0) {
        if (unresolved(local->state)) {
            return verdict(FindingCategory::refund_unresolved_unknown,
                           "payrecon does not know yet whether this refund went through (" +
                               std::string(to_string(local->state)) + ")" + whose);
        }
        if (local->state == PaymentState::succeeded) {
            return verdict(FindingCategory::refund_missing_remote,
                           remote.empty()
                               ? "payrecon says the refund succeeded; the provider has no such "
                                 "refund" +
                                     whose
                               : "payrecon says the refund succeeded; the provider has it as " +
                                     described(remote.front()) + whose);
        }
        return verdict(FindingCategory::matched, "no refund on either side");
    }
    const RemoteRecord& r = *std::find_if(remote.begin(), remote.end(), moved);
    if (unresolved(local->state)) {
        const std::string who =
            local->state == PaymentState::needs_review
                ? "an operator decides it, with this as evidence: payrecon review show " +
                      (local->refund_id.empty() ? local->match_key : local->refund_id)
                : "the next reconcile run settles it, or sends it to review";
        return verdict(FindingCategory::refund_unresolved_unknown,
                       "the provider has the refund as " + described(r) +
                           "; payrecon still has it " + std::string(to_string(local->state)) +
                           ": " + who);
    }
    if (!same_currency(local->currency, r.currency) ||
        distance(local->amount_minor, r.amount_minor) > rules.amount_tolerance_minor) {
        return verdict(FindingCategory::refund_amount_mismatch,
                       "ours is " + describe_money(local->amount_minor, local->currency) +
                           ", the provider's " + described(r) + whose);
    }
    if (local->state == PaymentState::succeeded && r.status == RemoteStatus::succeeded) {
        return verdict(FindingCategory::refund_matched, "");
    }
    return verdict(FindingCategory::refund_status_mismatch,
                   "payrecon has the refund " + std::string(to_string(local->state)) +
                       "; the provider has it as " + described(r) + whose);
}

std::optional<Verdict> classify_records(const LocalRecord* local,
                                        std::span<const RemoteRecord> remote,
                                        const DiffRules& rules) {
    if (!local && remote.empty()) {
        return std::nullopt;
    }
    if (!anchor_in_window(local, remote, rules)) {
        return std::nullopt;
    }
    const OperationKind kind = local ? local->kind : remote.front().kind;
    if (kind == OperationKind::capture) {
        // A capture listed on its own (PayPal's of an authorization): what it took is judged by
        // its authorisation's record, on the payment's key.
        return std::nullopt;
    }
    return kind == OperationKind::refund ? classify_refund(local, remote, rules)
                                         : classify_charge(local, remote, rules);
}

std::optional<Verdict> classify(const LocalRecord* local, std::span<const RemoteRecord> remote,
                                const DiffRules& rules) {
    std::optional<Verdict> v = classify_records(local, remote, rules);
    if (!v || local == nullptr || remote.empty()) {
        return v;
    }
    const bool refund = local->kind == OperationKind::refund;
    const auto shown = std::find_if(remote.begin(), remote.end(), [refund](const auto& r) {
        return refund ? moved(r) : is_charge(r.status);
    });
    return with_counterpart(std::move(*v), local, shown == remote.end() ? &remote.front() : &*shown,
                            rules);
}

} // namespace

std::vector<std::string> remote_references(const DiffFinding& finding) {
    std::vector<std::string> out;
    for (const auto& r : finding.remote) {
        if (std::find(out.begin(), out.end(), r.provider_reference) == out.end()) {
            out.push_back(r.provider_reference);
        }
    }
    return out;
}

const RemoteRecord* shown_remote(const DiffFinding& finding) {
    for (const auto& r : finding.remote) {
        if (r.kind == OperationKind::refund ? moved(r) : is_charge(r.status)) {
            return &r;
        }
    }
    return finding.remote.empty() ? nullptr : &finding.remote.front();
}

std::optional<DiffFinding> classify_key(const std::optional<LocalRecord>& local,
                                        const std::vector<RemoteRecord>& remote,
                                        const DiffRules& rules) {
    auto v = classify(local ? &*local : nullptr, remote, rules);
    if (!v) {
        return std::nullopt;
    }
    DiffFinding out;
    out.category = std::string(to_string(v->category));
    out.local = local;
    out.remote = remote;
    out.detail = std::move(v->detail);
    out.across_windows = v->across_windows;
    return out;
}

DiffCounts diff_sorted(const std::function<bool(LocalRecord&)>& next_local,
                       const std::function<bool(RemoteRecord&)>& next_remote,
                       const DiffRules& rules, const DiffSink& sink) {
    DiffCounts counts;
    // Two records per stream, reused from key to key (a million matches cost no allocation): the
    // look-ahead, and the key's own record, swapped by pointer. A key with more than one provider
    // record (rare: a duplicate) is copied into `group`.
    LocalRecord local_records[2];
    RemoteRecord remote_records[2];
    LocalRecord* l = &local_records[0];
    LocalRecord* local = &local_records[1];
    RemoteRecord* r = &remote_records[0];
    RemoteRecord* first = &remote_records[1];
    bool l_more = next_local(*l);
    bool r_more = next_remote(*r);
    counts.local_records += l_more;
    counts.remote_records += r_more;
    std::vector<RemoteRecord> group;
    while (l_more || r_more) {
        // The smaller key of the two look-aheads: ours, theirs, or both.
        const LocalRecord* ours = nullptr;
        if (l_more && (!r_more || l->match_key <= r->match_key)) {
            std::swap(local, l);
            ours = local;
            l_more = next_local(*l);
            if (l_more) {
                ++counts.local_records;
                if (l->match_key <= ours->match_key) {
                    throw std::invalid_argument(
                        "the local stream is not sorted by a unique key at '" + l->match_key + "'");
                }
            }
        }
        std::span<const RemoteRecord> theirs;
        if (r_more && (!ours || r->match_key == ours->match_key)) {
            std::swap(first, r);
            r_more = next_remote(*r);
            counts.remote_records += r_more;
            if (r_more && r->match_key == first->match_key) {
                group.assign(1, *first);
                while (r_more && r->match_key == first->match_key) {
                    group.push_back(*r);
                    r_more = next_remote(*r);
                    counts.remote_records += r_more;
                }
                theirs = group;
            } else {
                theirs = std::span<const RemoteRecord>(first, 1);
            }
            if (r_more && r->match_key < first->match_key) {
                throw std::invalid_argument("the remote stream is not sorted at '" + r->match_key +
                                            "'");
            }
        }
        ++counts.keys;
        if (auto v = classify(ours, theirs, rules)) {
            if (is_match(v->category) && !v->across_windows) {
                if (sink.matched) {
                    sink.matched(*ours); // a match always has our record
                }
            } else if (sink.finding) {
                DiffFinding f;
                f.category = std::string(to_string(v->category));
                f.remote.assign(theirs.begin(), theirs.end());
                f.detail = std::move(v->detail);
                f.across_windows = v->across_windows;
                if (ours) {
                    f.local = *ours;
                }
                sink.finding(std::move(f));
            }
        }
    }
    return counts;
}

} // namespace payrecon
