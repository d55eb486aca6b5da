#include "engine/executor.hpp"

#include "core/crash_point.hpp"
#include "core/fingerprint.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace payrecon::engine {
namespace {

double jitter() {
    const std::string b = random_bytes(4);
    std::uint32_t v = 0;
    for (const char c : b) {
        v = (v << 8) | static_cast<unsigned char>(c);
    }
    return static_cast<double>(v) / 4294967296.0;
}

} // namespace

providers::PaymentOrder order_for(const store::ClaimedPayment& payment) {
    providers::PaymentOrder order;
    order.operation_id = payment.operation_id;
    order.payment_id = payment.payment_id;
    order.merchant_reference = payment.merchant_reference;
    order.amount = Money{payment.amount_minor, payment.currency};
    order.payment_method = payment.payment_method;
    order.customer = payment.customer;
    order.description = payment.description;
    order.metadata = payment.metadata;
    order.created_at = payment.created_at;
    return order;
}

store::Settlement decide_settlement(providers::Outcome outcome, int attempt_no,
                                    const BackoffPolicy& backoff, double jitter01) {
    using providers::Outcome;
    store::Settlement s;
    switch (outcome) {
    case Outcome::succeeded:
        s.to = PaymentState::succeeded;
        return s;
    case Outcome::declined:
        s.to = PaymentState::failed;
        return s;
    case Outcome::not_sent: {
        s.to = PaymentState::retry_scheduled;
        const int exponent = std::clamp(attempt_no - 1, 0, 30);
        const double raw = static_cast<double>(backoff.base.count()) * std::pow(2.0, exponent);
        const double capped = std::min(raw, static_cast<double>(backoff.cap.count()));
        const double factor = 0.5 + 0.5 * std::clamp(jitter01, 0.0, 0.999999);
        s.retry_in = std::chrono::milliseconds(static_cast<long long>(capped * factor));
        s.reason = "the provider was not reached; sending again with the same operation ID";
        return s;
    }
    case Outcome::pending:
        s.to = PaymentState::unknown;
        s.reason = "the provider has not finished the payment; the reconciler will look again";
        return s;
    case Outcome::unknown:
        break;
    }
    s.to = PaymentState::unknown;
    s.reason = "the provider may or may not have charged; the reconciler will ask it";
    return s;
}

Executor::Executor(store::Db& db, std::vector<providers::Provider*> providers, ExecutorOptions options)
    : m_db(db), m_providers(std::move(providers)), m_options(std::move(options)) {
    if (m_providers.empty()) {
        throw std::invalid_argument("an executor needs at least one provider");
    }
    for (const auto* p : m_providers) {
        m_names.push_back(p->name());
    }
}

int Executor::run_once() {
    const auto claims =
        store::claim_payments(m_db, m_options.worker_id, m_options.lease, m_options.batch, m_names);
    for (const auto& claim : claims) {
        execute(claim);
    }
    return static_cast<int>(claims.size());
}

void Executor::execute(const store::ClaimedPayment& claim) {
    providers::Provider* provider = nullptr;
    for (auto* p : m_providers) {
        if (p->name() == claim.provider) {
            provider = p;
        }
    }
    if (provider == nullptr) {
        throw std::logic_error("claimed a payment of a provider this executor does not have");
    }
    const providers::PaymentOrder order = order_for(claim);

    crash_point("executor.before_submit");
    const providers::SubmitResult result = provider->submit(order);
    crash_point("executor.after_submit");

    store::AttemptResult attempt;
    attempt.outcome = std::string(providers::to_string(result.outcome));
    if (result.call.http_status != 0) {
        attempt.http_status = result.call.http_status;
    }
    attempt.error_class = result.call.error_class;
    attempt.provider_reference = result.provider_reference;
    attempt.detail = result.call.detail;
    const store::Settlement settlement =
        decide_settlement(result.outcome, claim.attempt_no, m_options.backoff, jitter());
    ++m_counts.attempted;
    if (!store::settle_attempt(m_db, claim, attempt, settlement)) {
        ++m_counts.fenced_out; // a newer generation owns the payment; our observation is recorded
    } else {
        ++m_counts.settled_as[std::string(to_string(settlement.to))];
    }
}

} // namespace payrecon::engine
