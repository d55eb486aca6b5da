#include "services/inspect.hpp"

#include "core/money.hpp"
#include "core/payment_state.hpp"
#include "store/admin_store.hpp"
#include "store/webhook_store.hpp"

#include <algorithm>
#include <cstddef>
#include <nlohmann/json.hpp>

namespace payrecon {

namespace {

// `v` as JSON, or null: the optional members of a call's audit detail.
template <typename T>
nlohmann::ordered_json or_null(const std::optional<T>& v) {
    return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json();
}

// The guidance for a review code, if it is a code payrecon knows.
const ReviewGuidance* guidance_of(const std::optional<std::string>& review_code) {
    const auto code = review_code ? parse_review_code(*review_code) : std::nullopt;
    return code ? &review_guidance(*code) : nullptr;
}

// The payment's provider calls and status queries as audit rows, after `rows`, merged oldest
// first and cut to the newest `limit`. A call's detail is written with its keys sorted
// (nlohmann::json, not the ordered kind it is built in): `audit` has always printed it so.
std::vector<store::AuditRecord> with_calls(std::vector<store::AuditRecord> rows,
                                           const store::PaymentRecord& record, std::size_t limit) {
    const auto entry = [&](const std::string& at, const std::string& actor,
                           const std::string& action, const nlohmann::json& detail) {
        store::AuditRecord a;
        a.tenant_id = record.payment.tenant_id;
        a.tenant = record.payment.tenant;
        a.at = at;
        a.actor = actor;
        a.action = action;
        a.subject_type = "payment";
        a.subject_id = record.payment.payment_id;
        a.detail_json = detail.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        return a;
    };
    for (const auto& t : record.attempts) {
        nlohmann::ordered_json d;
        d["attempt"] = t.attempt_no;
        d["generation"] = t.generation;
        d["outcome"] = t.finished_at ? t.outcome : "in flight";
        d["http_status"] = or_null(t.http_status);
        d["error_class"] = or_null(t.error_class);
        d["provider_reference"] = or_null(t.provider_reference);
        d["started_at"] = t.started_at;
        rows.push_back(
            entry(t.finished_at.value_or(t.started_at), t.worker, "provider.attempt", d));
    }
    for (const auto& l : record.lookups) {
        nlohmann::ordered_json d;
        d["generation"] = l.generation;
        d["status"] = l.status;
        d["remote_state"] = or_null(l.remote_state);
        d["provider_reference"] = or_null(l.provider_reference);
        d["remote_amount"] = or_null(l.remote_amount);
        d["remote_currency"] = or_null(l.remote_currency);
        rows.push_back(entry(l.at, l.actor, "provider.lookup", d));
    }
    // ISO 8601 UTC text of one format: sorts as time does; equal times keep the log's order.
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto& a, const auto& b) { return a.at < b.at; });
    if (rows.size() > limit) {
        rows.erase(rows.begin(), rows.end() - static_cast<std::ptrdiff_t>(limit));
    }
    return rows;
}

} // namespace

std::optional<store::PaymentRef> find_payment_ref(store::Db& db, const std::string& id) {
    return store::resolve_payment_ref(db, id);
}

std::optional<store::PaymentRecord> payment_record(store::Db& db, const store::PaymentRef& ref) {
    return store::load_payment_record(db, ref);
}

std::optional<std::string> find_tenant_id(store::Db& db, const std::string& name_or_id) {
    const auto tenant = store::find_tenant(db, name_or_id);
    if (!tenant) {
        return std::nullopt;
    }
    return tenant->tenant_id;
}

store::PaymentPage payments_page(store::Db& db, const store::PaymentFilter& filter) {
    return store::list_payments(db, filter);
}

ReviewQueue review_queue(store::Db& db, store::PaymentFilter filter) {
    filter.state = PaymentState::needs_review;
    filter.order = store::PaymentOrder::updated_at;
    ReviewQueue queue;
    queue.page = store::list_payments(db, filter);
    store::OperationFilter operations;
    operations.kind = std::nullopt;
    operations.tenant_id = filter.tenant_id;
    operations.state = std::string(to_string(PaymentState::needs_review));
    operations.provider = filter.provider;
    operations.older_than = filter.older_than;
    operations.by_updated_at = true;
    operations.limit = filter.limit;
    queue.operations = store::list_operations(db, operations);
    if (queue.operations.size() > static_cast<std::size_t>(filter.limit)) {
        queue.operations.resize(static_cast<std::size_t>(filter.limit));
        queue.operations_more = true;
    }
    for (const auto& [provider, n] : store::contradicting_event_counts(db, {}, filter.tenant_id)) {
        queue.contradictions += !filter.provider || *filter.provider == provider ? n : 0;
    }
    return queue;
}

namespace {

// A case in review: `advice` as complete commands naming `subject_id` at `generation`, and its
// code's guidance.
ReviewCase in_review_case(ReviewAdvice advice, const std::string& subject_id, long long generation,
                          const std::string& currency, const ReviewGuidance* guidance) {
    ReviewCase out;
    out.in_review = true;
    out.seen = std::move(advice.seen);
    for (const auto& s : advice.suggestions) {
        ResolveCommand c;
        c.payment_id = subject_id;
        c.generation = generation;
        c.decision = s.decision;
        c.reference = s.reference;
        if (s.charged_minor) {
            c.charged_amount = major_units(*s.charged_minor, currency);
        }
        out.decisions.push_back(std::move(c));
    }
    out.guidance = guidance;
    // Without a code payrecon knows, nothing says asking again cannot help.
    out.recheck = out.guidance == nullptr || out.guidance->recheck;
    return out;
}

} // namespace

ReviewCase review_case(store::Db& db, const store::PaymentRecord& record) {
    const store::PaymentRow& p = record.payment;
    if (p.state != to_string(PaymentState::needs_review)) {
        return {};
    }
    return in_review_case(review_advice(db, {p.tenant_id, p.payment_id}, p.review_code),
                          p.payment_id, p.generation, p.currency, guidance_of(p.review_code));
}

ReviewCase review_case(store::Db& db, const store::OperationRow& refund) {
    if (refund.state != to_string(PaymentState::needs_review)) {
        return {};
    }
    // A refund's amount is its own: no decision records another (the suggestions' charged amount
    // is a charge's).
    ReviewAdvice advice =
        review_advice(db, {refund.tenant_id, refund.payment_id}, refund.review_code, refund.id);
    for (auto& s : advice.suggestions) {
        s.charged_minor.reset();
    }
    return in_review_case(std::move(advice), refund.id, refund.generation, refund.currency,
                          guidance_of(refund.review_code));
}

std::optional<store::OperationRow> find_any_operation(store::Db& db, const std::string& id) {
    return store::find_operation_any_tenant(db, std::nullopt, id);
}

NextStep next_step(const store::PaymentRow& payment) {
    const auto now = parse_payment_state(payment.state);
    if (now == PaymentState::needs_review) {
        return NextStep::review;
    }
    if (now == PaymentState::unknown) {
        return NextStep::recheck;
    }
    if (now == PaymentState::pending || now == PaymentState::retry_scheduled) {
        return NextStep::cancel;
    }
    return NextStep::none;
}

std::vector<store::AuditRecord> audit_trail(store::Db& db, const store::AuditFilter& filter) {
    auto rows = store::list_audit(db, filter);
    if (filter.payment) {
        if (const auto record = store::load_payment_record(db, *filter.payment)) {
            rows = with_calls(std::move(rows), *record, static_cast<std::size_t>(filter.limit));
        }
    }
    return rows;
}

} // namespace payrecon
