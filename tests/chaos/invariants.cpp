#include "tests/chaos/invariants.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>
#include <unordered_map>

namespace payrecon::chaos {
namespace {

constexpr std::size_t k_listed = 8; // offenders listed per row

// Collects offenders: the first few in full, then how many.
class Offenders {
public:
    void add(const std::string& what) {
        if (m_count++ < k_listed) {
            m_listed << (m_count > 1 ? "; " : "") << what;
        }
    }
    bool none() const { return m_count == 0; }
    std::string text() const {
        std::string s = std::to_string(m_count) + ": " + m_listed.str();
        if (m_count > k_listed) {
            s += "; ...";
        }
        return s;
    }

private:
    std::size_t m_count = 0;
    std::ostringstream m_listed;
};

InvariantResult result(std::string name, const Offenders& offenders,
                       const std::string& held_detail) {
    InvariantResult r;
    r.name = std::move(name);
    r.held = offenders.none();
    r.detail = r.held ? held_detail : offenders.text();
    return r;
}

std::string upper(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return s;
}

std::string micros_text(Micros t) {
    const long long s = t / 1000000;
    const long long us = t % 1000000;
    std::ostringstream o;
    o << s << "." << std::string(6 - std::to_string(us).size(), '0') << us;
    return o.str();
}

long long ledger_count(const nlohmann::json& ledger, const char* map, const std::string& op) {
    return ledger.contains(map) && ledger[map].contains(op) ? ledger[map][op].get<long long>() : 0;
}

} // namespace

std::vector<Delivery> deliveries_from_log(const std::string& log) {
    std::vector<Delivery> out;
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line);) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_object() || j.value("listener", "") != "main" ||
            j.value("method", "") != "POST" || j.value("path", "") != "/v1/payment_intents" ||
            !j.contains("operation_id") || !j.contains("received_us")) {
            continue;
        }
        out.push_back(
            Delivery{j["operation_id"].get<std::string>(), j["received_us"].get<Micros>()});
    }
    return out;
}

InvariantResult check_answered(const ClientRecord& clients) {
    Offenders o;
    for (const auto& key : clients.unanswered) {
        o.add(key + ": no answer but retries");
    }
    for (const auto& u : clients.unexpected) {
        o.add(u);
    }
    return result("every request answered 202 (retried with its key)", o,
                  std::to_string(clients.acknowledged.size()) + " keys, " +
                      std::to_string(clients.requests) + " requests");
}

InvariantResult check_acknowledged_once(const ClientRecord& clients,
                                        const std::vector<PaymentRow>& payments) {
    std::unordered_map<std::string, std::vector<const PaymentRow*>> by_reference;
    std::unordered_map<std::string, const PaymentRow*> by_id;
    for (const auto& p : payments) {
        by_reference[p.merchant_reference].push_back(&p);
        by_id[p.payment_id] = &p;
    }
    Offenders o;
    std::set<std::string> acknowledged;
    for (const auto& a : clients.acknowledged) {
        acknowledged.insert(a.key);
        const auto rows = by_reference.find(a.key);
        const std::size_t n = rows == by_reference.end() ? 0 : rows->second.size();
        if (n != 1) {
            o.add(a.key + ": " + std::to_string(n) + " payments");
            continue;
        }
        const PaymentRow& p = *rows->second.front();
        if (p.payment_id != a.payment_id || p.amount != a.amount || p.currency != a.currency) {
            o.add(a.key + ": acknowledged as " + a.payment_id + " " + std::to_string(a.amount) +
                  " " + a.currency + ", stored as " + p.payment_id + " " +
                  std::to_string(p.amount) + " " + p.currency);
        }
    }
    for (const auto& p : payments) {
        if (acknowledged.count(p.merchant_reference) == 0) {
            o.add("payment " + p.payment_id + " (" + p.merchant_reference +
                  ") was never acknowledged to a client");
        }
    }
    return result("every acknowledged payment exists once", o,
                  std::to_string(clients.acknowledged.size()) + " acknowledged, " +
                      std::to_string(payments.size()) + " in the database");
}

InvariantResult check_replays(const ClientRecord& clients) {
    Offenders o;
    for (const auto& m : clients.replay_mismatches) {
        o.add(m);
    }
    return result("every replay of a key is byte-identical", o,
                  std::to_string(clients.replays) + " replays identical");
}

InvariantResult check_one_execution(const nlohmann::json& ledger,
                                    const std::vector<PaymentRow>& payments) {
    std::unordered_map<std::string, const PaymentRow*> by_op;
    for (const auto& p : payments) {
        by_op[p.operation_id] = &p;
    }
    Offenders o;
    long long executions = 0;
    std::size_t operations = 0;
    for (const auto& [op, n] : ledger["executions"].items()) {
        const long long count = n.get<long long>();
        executions += count;
        ++operations;
        if (count > 1) {
            o.add(op + " executed " + std::to_string(count) + " times");
        }
        if (by_op.count(op) == 0) {
            o.add(op + " executed, and no payment of ours has that operation ID");
        }
    }
    long long succeeded = 0;
    for (const auto& p : payments) {
        if (p.state == "succeeded") {
            ++succeeded;
            if (ledger_count(ledger, "executions", p.operation_id) != 1) {
                o.add(p.operation_id + " succeeded with us, executed " +
                      std::to_string(ledger_count(ledger, "executions", p.operation_id)) +
                      " times by the provider");
            }
        }
    }
    return result("at most one execution per operation ID", o,
                  std::to_string(executions) + " executions of " + std::to_string(operations) +
                      " operation IDs; each of our " + std::to_string(succeeded) +
                      " succeeded payments executed once");
}

InvariantResult check_no_fenced_out_call(const std::vector<PaymentRow>& payments,
                                         const std::vector<AttemptRow>& attempts,
                                         const std::vector<GenerationMark>& marks,
                                         const std::vector<Delivery>& deliveries,
                                         const nlohmann::json& ledger) {
    Offenders o;
    std::unordered_map<std::string, std::string> payment_of_op;
    for (const auto& p : payments) {
        payment_of_op[p.operation_id] = p.payment_id;
    }
    // Per payment: its attempts in claim order, and every generation mark (attempts included).
    std::unordered_map<std::string, std::vector<const AttemptRow*>> attempts_of;
    std::unordered_map<std::string, std::vector<GenerationMark>> marks_of;
    for (const auto& a : attempts) {
        attempts_of[a.payment_id].push_back(&a);
        marks_of[a.payment_id].push_back(GenerationMark{a.payment_id, a.generation, a.started_at});
    }
    for (const auto& m : marks) {
        marks_of[m.payment_id].push_back(m);
    }
    std::unordered_map<std::string, std::vector<Micros>> deliveries_of;
    for (const auto& d : deliveries) {
        deliveries_of[d.operation_id].push_back(d.received);
    }

    // The log must hold every delivery the ledger counted, or the evidence is incomplete.
    std::size_t logged = 0;
    for (const auto& [op, times] : deliveries_of) {
        logged += times.size();
        if (static_cast<long long>(times.size()) !=
            ledger_count(ledger, "deliveries_by_operation", op)) {
            o.add(op + ": " + std::to_string(times.size()) + " deliveries logged, " +
                  std::to_string(ledger_count(ledger, "deliveries_by_operation", op)) +
                  " in the ledger");
        }
    }
    if (ledger.contains("deliveries_by_operation")) {
        for (const auto& [op, n] : ledger["deliveries_by_operation"].items()) {
            if (deliveries_of.count(op) == 0) {
                o.add(op + ": " + std::to_string(n.get<long long>()) +
                      " deliveries in the ledger, none logged");
            }
        }
    }

    std::size_t called = 0;
    std::size_t not_called = 0;
    for (const auto& [op, times_unsorted] : deliveries_of) {
        const auto pid = payment_of_op.find(op);
        if (pid == payment_of_op.end()) {
            o.add(op + ": delivered, and no payment of ours has that operation ID");
            continue;
        }
        std::vector<const AttemptRow*>& mine = attempts_of[pid->second];
        std::sort(mine.begin(), mine.end(), [](const AttemptRow* a, const AttemptRow* b) {
            return a->attempt_no < b->attempt_no;
        });
        const auto& payment_marks = marks_of[pid->second];
        // Each attempt's window: from its claim to the first moment its generation was passed.
        struct Window {
            const AttemptRow* attempt;
            Micros from;
            std::optional<Micros> until;
            int deliveries = 0;
        };
        std::vector<Window> windows;
        for (const AttemptRow* a : mine) {
            Window w{a, a->started_at, std::nullopt};
            for (const auto& m : payment_marks) {
                if (m.generation > a->generation && (!w.until || m.at < *w.until)) {
                    w.until = m.at;
                }
            }
            windows.push_back(w);
        }
        std::vector<Micros> times = times_unsorted;
        std::sort(times.begin(), times.end());
        for (const Micros t : times) {
            Window* in = nullptr;
            for (auto& w : windows) {
                if (w.from <= t && (!w.until || t < *w.until)) {
                    in = &w;
                    break;
                }
            }
            if (in == nullptr) {
                std::string claims;
                for (const auto& w : windows) {
                    claims += " #" + std::to_string(w.attempt->attempt_no) + " " +
                              w.attempt->worker + " [" + micros_text(w.from) + ", " +
                              (w.until ? micros_text(*w.until) : std::string("-")) + ")";
                }
                o.add(op + ": delivered at " + micros_text(t) +
                      ", outside every live claim:" + claims);
                continue;
            }
            ++in->deliveries;
            if (in->attempt->not_called()) {
                o.add(op + ": delivered at " + micros_text(t) + " while attempt #" +
                      std::to_string(in->attempt->attempt_no) + " (" + in->attempt->worker +
                      ") held the claim, and its fence recorded no call (" +
                      in->attempt->error_class + ")");
            } else if (in->deliveries > 1) {
                o.add(op + ": a second delivery at " + micros_text(t) + " inside attempt #" +
                      std::to_string(in->attempt->attempt_no) + " (" + in->attempt->worker + ")");
            }
        }
    }
    for (const auto& a : attempts) {
        (a.not_called() ? not_called : called) += 1;
    }
    return result("no call from a fenced-out worker", o,
                  std::to_string(logged) + " deliveries, each inside the live claim of one of " +
                      std::to_string(called) + " attempts that passed the fence; " +
                      std::to_string(not_called) + " attempts stopped by it and never called");
}

InvariantResult check_sums(const std::vector<PaymentRow>& payments, const nlohmann::json& ledger) {
    std::map<std::string, long long> ours;
    for (const auto& p : payments) {
        if (p.state == "succeeded") {
            ours[upper(p.currency)] += p.amount;
        }
    }
    std::map<std::string, long long> theirs;
    if (ledger.contains("charged")) {
        for (const auto& [currency, amount] : ledger["charged"].items()) {
            theirs[upper(currency)] += amount.get<long long>();
        }
    }
    std::set<std::string> currencies;
    for (const auto& [c, _] : ours) {
        currencies.insert(c);
    }
    for (const auto& [c, _] : theirs) {
        currencies.insert(c);
    }
    Offenders o;
    std::string held;
    for (const auto& c : currencies) {
        const long long a = ours[c];
        const long long b = theirs[c];
        if (a != b) {
            // Which of ours the provider charged without our succeeded record, and the reverse.
            std::string where;
            if (ledger.contains("payment_intents")) {
                std::unordered_map<std::string, const PaymentRow*> by_op;
                for (const auto& p : payments) {
                    by_op[p.operation_id] = &p;
                }
                for (const auto& pi : ledger["payment_intents"]) {
                    if (upper(pi.value("currency", "")) != c ||
                        pi.value("status", "") != "succeeded") {
                        continue;
                    }
                    const std::string op =
                        pi.contains("metadata") ? pi["metadata"].value("operation_id", "") : "";
                    const auto p = by_op.find(op);
                    if (p == by_op.end() || p->second->state != "succeeded") {
                        where +=
                            " " + op + " charged, ours " +
                            (p == by_op.end()
                                 ? std::string("missing")
                                 : p->second->state + (p->second->review_code.empty()
                                                           ? ""
                                                           : " (" + p->second->review_code + ")"));
                    }
                }
            }
            o.add(c + ": ours " + std::to_string(a) + ", provider " + std::to_string(b) + ";" +
                  where);
        } else {
            held += (held.empty() ? "" : ", ") + c + " " + std::to_string(a);
        }
    }
    return result("succeeded sums equal the provider's charged sums per currency", o,
                  held.empty() ? "nothing charged" : held);
}

InvariantResult check_nothing_processing(const std::vector<PaymentRow>& payments) {
    Offenders o;
    for (const auto& p : payments) {
        if (p.state == "processing") {
            o.add(p.payment_id + " (" + p.merchant_reference + ")");
        }
    }
    return result("nothing left processing", o, std::to_string(payments.size()) + " payments");
}

InvariantResult check_nothing_open_without_reason(const std::vector<PaymentRow>& payments) {
    Offenders o;
    std::map<std::string, long long> states;
    std::map<std::string, long long> review;
    for (const auto& p : payments) {
        ++states[p.state];
        if (p.state == "needs_review") {
            ++review[p.review_code];
            if (p.review_code.empty() || p.review_reason.empty()) {
                o.add(p.payment_id + " (" + p.merchant_reference + ") in review without " +
                      (p.review_code.empty() ? "a code" : "a reason"));
            }
        } else if (p.state != "succeeded" && p.state != "failed") {
            o.add(p.payment_id + " (" + p.merchant_reference + ") left " + p.state +
                  (p.review_reason.empty() ? "" : ": " + p.review_reason));
        }
    }
    std::string held;
    for (const auto& [s, n] : states) {
        held += (held.empty() ? "" : ", ") + s + " " + std::to_string(n);
    }
    if (!review.empty()) {
        std::string codes;
        for (const auto& [c, n] : review) {
            codes += (codes.empty() ? "" : ", ") + c + " " + std::to_string(n);
        }
        held += " (review: " + codes + ")";
    }
    return result("nothing pending/unknown without a reason", o, held);
}

} // namespace payrecon::chaos
