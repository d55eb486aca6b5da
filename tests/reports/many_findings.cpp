#include "many_findings.hpp"

#include "core/money.hpp"

#include <cstdint>
#include <string>

namespace payrecon::test {

using payrecon::reports::Finding;
using payrecon::reports::Report;

namespace {

// xorshift64*: the same numbers on every machine and standard library.
class Numbers {
public:
    std::uint64_t next() {
        m_state ^= m_state >> 12;
        m_state ^= m_state << 25;
        m_state ^= m_state >> 27;
        return m_state * 2685821657736338717ULL;
    }
    // 0 .. n - 1
    long long below(long long n) {
        return static_cast<long long>(next() % static_cast<std::uint64_t>(n));
    }
    std::string hex(std::size_t digits) {
        static constexpr const char* k_hex = "0123456789abcdef";
        std::string out;
        while (out.size() < digits) {
            out += k_hex[next() % 16];
        }
        return out;
    }
    std::string alnum(std::size_t chars) {
        static constexpr std::string_view k_chars =
            "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        std::string out;
        while (out.size() < chars) {
            out += k_chars[next() % k_chars.size()];
        }
        return out;
    }
    std::string uuid() {
        return hex(8) + "-" + hex(4) + "-7" + hex(3) + "-8" + hex(3) + "-" + hex(12);
    }

private:
    std::uint64_t m_state = 0x9e3779b97f4a7c15ULL;
};

constexpr long long k_day = 1796083200; // 2026-12-01T00:00:00Z

} // namespace

Report many_findings(std::size_t n) {
    Report r;
    r.kind = "statement";
    r.title = "payrecon statement: stripe, 2026-12-01T00:00:00Z .. 2026-12-02T00:00:00Z";
    r.generated_at = "2026-12-02T06:00:00Z";
    r.facts = {
        {"run", "812"},
        {"provider", "stripe"},
        {"window", "2026-12-01T00:00:00Z .. 2026-12-02T00:00:00Z"},
        {"records read (ours, theirs)", std::to_string(11 * n) + ", " + std::to_string(11 * n)}};
    for (const auto category : payrecon::reports::statement_categories()) {
        r.categories.emplace_back(category);
        r.total_of(std::string(category));
    }
    Numbers random;
    Finding matched;
    matched.category = "matched";
    matched.provider = "stripe";
    matched.local_amount = matched.remote_amount = 4999;
    matched.local_currency = matched.remote_currency = "EUR";
    r.add_counted("matched", static_cast<long long>(10 * n),
                  {{"EUR", 4999LL * 10 * static_cast<long long>(n)}});

    static constexpr const char* k_currencies[] = {"EUR", "EUR", "EUR", "USD", "USD", "GBP", "JPY"};
    for (std::size_t i = 0; i < n; ++i) {
        Finding f;
        f.provider = "stripe";
        f.needs_attention = true;
        const std::string currency = k_currencies[random.below(7)];
        const long long amount =
            currency == "JPY" ? 100 * (1 + random.below(500)) : 100 + random.below(250000);
        const long long at = k_day + random.below(86400);
        const std::string payment = random.uuid();
        const std::string operation = "pr_" + random.hex(32);
        const std::string reference = "pi_3Q" + random.alnum(22);
        // Unique and unordered: 7919 is prime to 9,000,000.
        const std::string order =
            "order-" +
            std::to_string(1000000 + (static_cast<long long>(i) * 7919 + 4242) % 9000000);
        const std::string money = describe_money(amount, currency);
        const auto ours = [&](const std::string& state) {
            f.payment_id = payment;
            f.operation_id = operation;
            f.merchant_reference = order;
            f.local_amount = amount;
            f.local_currency = currency;
            f.local_state = state;
            f.local_at = at;
        };
        const auto theirs = [&](long long minor, const std::string& code,
                                const std::string& state) {
            f.provider_reference = reference;
            f.provider_link = "https://dashboard.stripe.com/payments/" + reference;
            f.provider_references = {reference};
            f.remote_amount = minor;
            f.remote_currency = code;
            f.remote_state = state;
            f.remote_at = at + random.below(30);
            if (!f.operation_id) {
                f.operation_id = operation;
            }
        };
        switch (random.below(10)) {
        case 0:
        case 1:
        case 2:
            f.category = "missing_remote";
            ours("succeeded");
            f.detail = "payrecon says succeeded; the provider has no such payment";
            break;
        case 3:
        case 4:
            f.category = "missing_local";
            theirs(amount, currency, "succeeded");
            f.detail = "the provider charged " + money + " (" + reference +
                       ") and payrecon has no record of it";
            break;
        case 5: {
            f.category = "amount_mismatch";
            ours("succeeded");
            const long long other = amount + 1 + random.below(amount);
            theirs(other, currency, "succeeded");
            f.detail = "ours is " + money + ", the provider's " + describe_money(other, currency);
            break;
        }
        case 6:
            f.category = "status_mismatch";
            ours("succeeded");
            theirs(amount, currency, "refunded");
            f.detail = "payrecon has it succeeded; the provider refunded it";
            break;
        case 7: {
            f.category = "currency_mismatch";
            ours("succeeded");
            const std::string other = currency == "EUR" ? "GBP" : "EUR";
            theirs(amount, other, "succeeded");
            f.detail = "ours is " + money + ", the provider's " + describe_money(amount, other);
            break;
        }
        case 8: {
            f.category = "duplicate_remote";
            ours("succeeded");
            theirs(amount, currency, "succeeded");
            const std::string second = "pi_3Q" + random.alnum(22);
            f.provider_references.push_back(second);
            f.detail = "the provider holds 2 charges for one operation ID: " + reference + " (" +
                       money + "), " + second + " (" + money + ")";
            break;
        }
        default:
            f.category = "unresolved_unknown";
            ours("unknown");
            theirs(amount, currency, "succeeded");
            f.detail = "the provider has the payment as succeeded (" + reference + ", " + money +
                       "); payrecon still has it unknown: the next reconcile run settles it, or "
                       "sends it to review";
            break;
        }
        f.finding_id = random.uuid();
        if (random.below(20) == 0) {
            f.needs_attention = false;
            f.handled = FindingAcknowledgement{"frank", "2026-12-02T07:00:00.000Z",
                                               "checked with the provider: settled by hand"};
        }
        r.add(f);
    }
    r.exit_code = 3;
    return r;
}

} // namespace payrecon::test
