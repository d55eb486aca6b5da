#pragma once
// DESIGN section 12's invariants, checked after the chaos run has quiesced, as pure functions of
// what was collected: the clients' records, the rows of the run's tenant, the fake provider's
// ledger and its request log. Each answers one row of the invariant table: held or not, with the
// counts it checked, or the first offenders.
//
// "No call from a fenced-out worker" (check_no_fenced_out_call). A provider call may leave a
// worker only while its claim is current: after the claim (the attempt row's `started_at`, taken at
// the start of the claiming transaction, so never later than the claim) and before anything moved
// the payment to a newer generation (a lease expiry or reconciler decision in `audit_log`, a status
// lookup in `payment_lookups`, a newer claim's attempt row: each records the generation it made and
// when, never later than it happened). These windows of one payment's attempts do not overlap. The
// fake provider logs when it had read each POST in full (`received_us`, the system clock that
// PostgreSQL's timestamps use on this host). Then, per operation ID, every delivery must fall in
// the window of one attempt, at most one delivery per attempt (one submit is one POST, on a fresh
// connection), and none in the window of an attempt the fence recorded as not called
// (`not_sent:claim_not_held`, `not_sent:deadline_passed`). A stale worker's call lands after its
// window ended -- outside every window, or in a newer attempt's window as a second or a forbidden
// delivery -- whether or not the provider executed it. The check needs no tolerance: a legitimate
// call is read by the provider before its lease's end less the 1 s margin (DESIGN section 6), and a
// lease expiry happens after the lease's end. The log's deliveries must match the ledger's count
// per operation ID, or the evidence is incomplete and the check fails. What it cannot tell from a
// fenced-out call: a worker stopped between libcurl's pre-request callback and its write() of the
// request (microseconds of a call, which no client-side fence can close), and a provider thread
// that reads a request more than the 1 s margin after it was written (it reads on loopback).

#include "tests/chaos/clients.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace payrecon::chaos {

using Micros = long long; // unix microseconds

struct InvariantResult {
    std::string name;
    bool held = false;
    std::string detail; // what was checked when held; the first offenders when not
};

struct PaymentRow {
    std::string payment_id;
    std::string merchant_reference;
    std::string operation_id;
    std::string state;
    long long amount = 0;
    std::string currency;
    std::string review_code;
    std::string review_reason;
};

struct AttemptRow {
    std::string payment_id;
    std::string operation_id;
    int attempt_no = 0;
    long long generation = 0;
    std::string worker;
    Micros started_at = 0;
    bool finished = false;
    std::string outcome;
    std::string error_class;
    // The pre-call fence recorded that it did not call.
    bool not_called() const {
        return error_class == "not_sent:claim_not_held" ||
               error_class == "not_sent:deadline_passed";
    }
};

// By `at` the payment had reached `generation` (an audit row, a status lookup, a claim).
struct GenerationMark {
    std::string payment_id;
    long long generation = 0;
    Micros at = 0;
};

struct Delivery {
    std::string operation_id;
    Micros received = 0;
};

// The POSTs of the fake provider's log (one JSON line per request): operation ID and received_us.
std::vector<Delivery> deliveries_from_log(const std::string& log);

InvariantResult check_answered(const ClientRecord& clients);
InvariantResult check_acknowledged_once(const ClientRecord& clients,
                                        const std::vector<PaymentRow>& payments);
InvariantResult check_replays(const ClientRecord& clients);
InvariantResult check_one_execution(const nlohmann::json& ledger,
                                    const std::vector<PaymentRow>& payments);
InvariantResult check_no_fenced_out_call(const std::vector<PaymentRow>& payments,
                                         const std::vector<AttemptRow>& attempts,
                                         const std::vector<GenerationMark>& marks,
                                         const std::vector<Delivery>& deliveries,
                                         const nlohmann::json& ledger);
InvariantResult check_sums(const std::vector<PaymentRow>& payments, const nlohmann::json& ledger);
InvariantResult check_nothing_processing(const std::vector<PaymentRow>& payments);
InvariantResult check_nothing_open_without_reason(const std::vector<PaymentRow>& payments);

} // namespace payrecon::chaos
