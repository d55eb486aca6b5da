#include "store/inspect_store.hpp"

#include "core/encoding.hpp"
#include "store/pq.hpp"

#include <stdexcept>

namespace payrecon::store {
namespace {

// PaymentRow, columns 0-15; the record's extra columns follow from 16.
const std::string k_payment_columns =
    "p.payment_id::text, p.tenant_id::text, t.name, p.state, p.amount_minor, p.currency, "
    "p.provider, p.merchant_reference, p.operation_id, p.provider_reference, p.review_code, "
    "p.review_reason, p.attempt_count, p.generation, " +
    iso_utc("p.created_at") + ", " + iso_utc("p.updated_at");
const std::string k_record_columns =
    k_payment_columns +
    ", p.payment_method, p.customer, p.description, p.metadata::text, p.created_by::text, " +
    iso_utc("p.next_attempt_at") + ", p.lease_owner, " + iso_utc("p.lease_expires_at") + ", " +
    iso_utc("p.first_attempt_at") + ", " + iso_utc("p.last_attempt_at") +
    ", p.lookup_count, p.lookup_failures, p.charged_amount_minor";

// Rows about the whole deployment (a purge run) carry the nil UUID as their tenant.
const std::string k_audit_columns =
    "a.audit_id, a.tenant_id::text, "
    "CASE WHEN a.tenant_id = '00000000-0000-0000-0000-000000000000' "
    "THEN '(all tenants)' ELSE coalesce(t.name, '') END, " +
    iso_utc("a.at") +
    " AS at, a.actor, a.action, a.subject_type, a.subject_id, "
    "a.detail::text";

// By ID alone: one probe of the primary key (tenant_id, payment_id) per tenant, through the small
// tenants table; no index of its own on payment_id (migration 0010).
constexpr const char* k_ref_by_payment_id = "inspect_ref_by_payment_id";
const std::string k_ref_by_payment_id_sql =
    "SELECT p.tenant_id::text, p.payment_id::text FROM tenants t"
    " JOIN payments p ON p.tenant_id = t.tenant_id AND p.payment_id = $1::uuid LIMIT 2";

constexpr const char* k_ref_by_operation_id = "inspect_ref_by_operation_id";
const std::string k_ref_by_operation_id_sql =
    "SELECT tenant_id::text, payment_id::text FROM payments WHERE operation_id = $1";

// $1 state, $2 provider, $3 older than (seconds), $4 tenant ID: each NULL for "any"; $5 limit.
const std::string k_list_payments_from =
    "SELECT " + k_payment_columns +
    " FROM payments p JOIN tenants t ON t.tenant_id = p.tenant_id"
    " WHERE ($1::text IS NULL OR p.state = $1::text)"
    "   AND ($2::text IS NULL OR p.provider = $2::text)"
    "   AND ($3::bigint IS NULL OR p.updated_at <= now() - $3::bigint * interval '1 second')"
    "   AND ($4::uuid IS NULL OR p.tenant_id = $4::uuid)";

constexpr const char* k_list_by_created = "inspect_list_by_created";
const std::string k_list_by_created_sql =
    k_list_payments_from + " ORDER BY p.created_at, p.payment_id LIMIT $5";

constexpr const char* k_list_by_updated = "inspect_list_by_updated";
const std::string k_list_by_updated_sql =
    k_list_payments_from + " ORDER BY p.updated_at, p.payment_id LIMIT $5";

constexpr const char* k_record_payment = "inspect_record_payment";
const std::string k_record_payment_sql =
    "SELECT " + k_record_columns +
    " FROM payments p JOIN tenants t ON t.tenant_id = p.tenant_id"
    " WHERE p.tenant_id = $1::uuid AND p.payment_id = $2::uuid";

constexpr const char* k_record_attempts = "inspect_record_attempts";
const std::string k_record_attempts_sql =
    "SELECT attempt_no, generation, worker, operation_id, " + iso_utc("started_at") + ", " +
    iso_utc("finished_at") +
    ", outcome, http_status, error_class, provider_reference, detail FROM payment_attempts"
    " WHERE tenant_id = $1::uuid AND payment_id = $2::uuid ORDER BY started_at, attempt_no";

constexpr const char* k_record_lookups = "inspect_record_lookups";
const std::string k_record_lookups_sql =
    "SELECT lookup_id, generation, actor, " + iso_utc("at") +
    ", status, remote_state, remote_raw_status, remote_amount, remote_currency, "
    "provider_reference, duplicates, http_status, error_class, detail, decision, reason, applied"
    " FROM payment_lookups WHERE tenant_id = $1::uuid AND payment_id = $2::uuid"
    " ORDER BY lookup_id";

constexpr const char* k_record_audit = "inspect_record_audit";
const std::string k_record_audit_sql =
    "SELECT " + k_audit_columns +
    " FROM audit_log a LEFT JOIN tenants t ON t.tenant_id = a.tenant_id"
    " WHERE a.tenant_id = $1::uuid AND a.subject_type = 'payment' AND a.subject_id = $2"
    " ORDER BY a.audit_id";

// The payment's findings in complete statement runs, newest window first. recon_findings has no
// index on the payment: one operator's command reads it whole (findings are the few records that
// did not match).
constexpr const char* k_record_findings = "inspect_record_findings";
const std::string k_record_findings_sql =
    "SELECT r.provider, " + iso_utc("r.window_from") + ", " + iso_utc("r.window_to") +
    ", f.category, f.provider_reference, f.remote_amount, f.remote_currency, f.remote_state, "
    "f.detail, f.finding_id::text, f.acknowledged_by, f.acknowledge_note"
    " FROM recon_findings f JOIN recon_runs r ON r.run_id = f.run_id"
    " WHERE f.tenant_id = $1::uuid AND f.payment_id = $2::uuid AND r.status = 'done'"
    " ORDER BY r.window_to DESC, f.finding_no LIMIT 5";

constexpr const char* k_record_events = "inspect_record_events";
const std::string k_record_events_sql =
    "SELECT event_id, event_key, event_type, outcome, provider_reference, amount_minor, "
    "currency, " +
    iso_utc("received_at") +
    ", deliveries, applied_result FROM (SELECT * FROM provider_events"
    " WHERE payment_id = $2::uuid AND tenant_id = $1::uuid ORDER BY received_at DESC, event_id DESC"
    " LIMIT 20) e ORDER BY received_at, event_id";

// The evidence of one payment (load_payment_evidence): the payment, then each source.
constexpr const char* k_evidence_payment = "inspect_evidence_payment";
const std::string k_evidence_payment_sql =
    "SELECT state, generation, amount_minor, currency, provider, operation_id, provider_reference"
    " FROM payments WHERE tenant_id = $1::uuid AND payment_id = $2::uuid";

constexpr const char* k_evidence_lookups = "inspect_evidence_lookups";
const std::string k_evidence_lookups_sql =
    "SELECT lookup_id, " + iso_utc("at") +
    ", provider_reference, remote_state, remote_amount, remote_currency FROM payment_lookups l"
    " WHERE tenant_id = $1::uuid AND payment_id = $2::uuid AND status = 'found'"
    " AND operation_id = (SELECT operation_id FROM payments p WHERE p.tenant_id = l.tenant_id"
    " AND p.payment_id = l.payment_id)"
    " ORDER BY lookup_id DESC LIMIT 50";

// The provider's records of our operation ID ($2), or of the payment's own reference ($3, NULL
// if it has none) where the record carries no operation ID, in the provider's ($1) complete runs:
// one probe of statement_records_diff per run.
constexpr const char* k_evidence_records = "inspect_evidence_records";
const std::string k_evidence_records_sql =
    "SELECT " + iso_utc("r.window_from") + ", " + iso_utc("r.window_to") +
    ", s.provider_reference, s.status, s.amount_minor, s.currency"
    " FROM recon_runs r JOIN statement_records s ON s.run_id = r.run_id"
    " WHERE r.provider = $1 AND r.status = 'done'"
    "   AND (s.match_key = $2 OR s.match_key = 'ref:' || $3::text)"
    " ORDER BY r.window_to DESC, s.provider_reference LIMIT 50";

// What complete runs found of the payment, where the finding names the provider's record.
constexpr const char* k_evidence_findings = "inspect_evidence_findings";
const std::string k_evidence_findings_sql =
    "SELECT " + iso_utc("r.window_from") + ", " + iso_utc("r.window_to") +
    ", f.provider_reference, f.remote_state, f.remote_amount, f.remote_currency"
    " FROM recon_findings f JOIN recon_runs r ON r.run_id = f.run_id"
    " WHERE f.tenant_id = $1::uuid AND f.payment_id = $2::uuid AND r.status = 'done'"
    "   AND f.remote_state IS NOT NULL"
    " ORDER BY r.window_to DESC, f.finding_no LIMIT 50";

// Stored events are verified ones (services/webhooks stores nothing else).
constexpr const char* k_evidence_events = "inspect_evidence_events";
const std::string k_evidence_events_sql =
    "SELECT event_key, " + iso_utc("received_at") +
    ", provider_reference, outcome, amount_minor, currency FROM provider_events"
    " WHERE payment_id = $2::uuid AND tenant_id = $1::uuid AND refund_id IS NULL"
    " ORDER BY received_at DESC, event_id DESC LIMIT 50";

// A refund's evidence (load_refund_evidence): the refund, its status queries (by its operation
// ID), its events.
constexpr const char* k_evidence_refund = "inspect_evidence_refund";
const std::string k_evidence_refund_sql =
    "SELECT state, generation, amount_minor, currency, provider, operation_id, provider_reference"
    " FROM operations WHERE tenant_id = $1::uuid AND id = $2::uuid";

constexpr const char* k_evidence_refund_lookups = "inspect_evidence_refund_lookups";
const std::string k_evidence_refund_lookups_sql =
    "SELECT l.lookup_id, " + iso_utc("l.at") +
    ", l.provider_reference, l.remote_state, l.remote_amount, l.remote_currency"
    " FROM operations o JOIN payment_lookups l ON l.tenant_id = o.tenant_id"
    " AND l.payment_id = o.payment_id AND l.operation_id = o.operation_id"
    " WHERE o.tenant_id = $1::uuid AND o.id = $2::uuid AND l.status = 'found'"
    " ORDER BY l.lookup_id DESC LIMIT 50";

constexpr const char* k_evidence_refund_events = "inspect_evidence_refund_events";
const std::string k_evidence_refund_events_sql =
    "SELECT event_key, " + iso_utc("received_at") +
    ", provider_reference, outcome, amount_minor, currency FROM provider_events"
    " WHERE refund_id = $2::uuid AND tenant_id = $1::uuid"
    " ORDER BY received_at DESC, event_id DESC LIMIT 50";

// $1 tenant ID; $2 and $3 the payment's tenant and payment ID: NULL for "any"; $4 limit. The newest
// $4 rows, returned oldest first.
constexpr const char* k_list_audit = "inspect_list_audit";
const std::string k_list_audit_sql =
    "SELECT * FROM (SELECT " + k_audit_columns +
    " FROM audit_log a LEFT JOIN tenants t ON t.tenant_id = a.tenant_id"
    " WHERE ($1::uuid IS NULL OR a.tenant_id = $1::uuid)"
    "   AND ($2::uuid IS NULL OR (a.tenant_id = $2::uuid AND a.subject_type = 'payment'"
    "                             AND a.subject_id = $3::text))"
    " ORDER BY a.audit_id DESC LIMIT $4) newest ORDER BY audit_id";

// A read-only snapshot: the payment, its attempts, lookups and audit rows agree with each other.
using snapshot = pqxx::transaction<pqxx::repeatable_read, pqxx::read_only>;

std::optional<std::string> opt_text(const pqxx::field& f) {
    if (f.is_null()) {
        return std::nullopt;
    }
    return f.as<std::string>();
}

template <typename T>
std::optional<T> opt_value(const pqxx::field& f) {
    if (f.is_null()) {
        return std::nullopt;
    }
    return f.as<T>();
}

PaymentRow payment_row_from(const pqxx::row& r) {
    PaymentRow p;
    p.payment_id = r[0].as<std::string>();
    p.tenant_id = r[1].as<std::string>();
    p.tenant = r[2].as<std::string>();
    p.state = r[3].as<std::string>();
    p.amount_minor = r[4].as<long long>();
    p.currency = r[5].as<std::string>();
    p.provider = r[6].as<std::string>();
    p.merchant_reference = r[7].as<std::string>();
    p.operation_id = r[8].as<std::string>();
    p.provider_reference = opt_text(r[9]);
    p.review_code = opt_text(r[10]);
    p.review_reason = opt_text(r[11]);
    p.attempt_count = r[12].as<int>();
    p.generation = r[13].as<long long>();
    p.created_at = r[14].as<std::string>();
    p.updated_at = r[15].as<std::string>();
    return p;
}

AuditRecord audit_from(const pqxx::row& r) {
    AuditRecord a;
    a.audit_id = r[0].as<long long>();
    a.tenant_id = r[1].as<std::string>();
    a.tenant = r[2].as<std::string>();
    a.at = r[3].as<std::string>();
    a.actor = r[4].as<std::string>();
    a.action = r[5].as<std::string>();
    a.subject_type = r[6].as<std::string>();
    a.subject_id = r[7].as<std::string>();
    a.detail_json = r[8].as<std::string>();
    return a;
}

void require_limit(int limit, const char* what) {
    if (limit < 1) {
        throw std::invalid_argument(std::string(what) + ": limit must be at least 1");
    }
}

void require_uuid(const std::optional<std::string>& id, const char* what) {
    if (id && !is_uuid_text(*id)) {
        throw std::invalid_argument(std::string(what) + ": '" + *id + "' is not a UUID");
    }
}

} // namespace

std::optional<PaymentRef> resolve_payment_ref(Db& db, const std::string& id) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<PaymentRef> {
        impl.prepare(k_ref_by_payment_id, k_ref_by_payment_id_sql);
        impl.prepare(k_ref_by_operation_id, k_ref_by_operation_id_sql);
        pqxx::read_transaction tx(impl.connection());
        // Only text in the UUID form is cast: anything else would be an SQL error, not "none".
        if (is_uuid_text(id)) {
            const pqxx::result r = tx.exec_prepared(k_ref_by_payment_id, id);
            if (r.size() > 1) {
                throw Refused("payment ID " + id + " exists in more than one tenant",
                              "use its operation ID (pr_...), which names one payment");
            }
            if (r.size() == 1) {
                return PaymentRef{r[0][0].as<std::string>(), r[0][1].as<std::string>()};
            }
        }
        // Operation IDs are unique across tenants (payments_operation_id).
        const pqxx::result r = tx.exec_prepared(k_ref_by_operation_id, id);
        if (r.empty()) {
            return std::nullopt;
        }
        return PaymentRef{r[0][0].as<std::string>(), r[0][1].as<std::string>()};
    });
}

std::vector<std::string> payment_providers(Db& db) {
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        pqxx::read_transaction tx(impl.connection());
        std::vector<std::string> out;
        for (const auto& row :
             tx.exec("WITH RECURSIVE p(provider) AS ("
                     " SELECT min(provider) FROM payments"
                     " UNION ALL"
                     " SELECT (SELECT min(provider) FROM payments WHERE provider > p.provider)"
                     " FROM p WHERE p.provider IS NOT NULL)"
                     " SELECT provider FROM p WHERE provider IS NOT NULL")) {
            out.push_back(row[0].as<std::string>());
        }
        return out;
    });
}

PaymentPage list_payments(Db& db, const PaymentFilter& filter) {
    require_limit(filter.limit, "list_payments");
    require_uuid(filter.tenant_id, "list_payments");
    const std::optional<std::string> state =
        filter.state ? std::optional<std::string>(std::string(to_string(*filter.state)))
                     : std::nullopt;
    const std::optional<std::string> older_than =
        filter.older_than ? std::optional<std::string>(std::to_string(filter.older_than->count()))
                          : std::nullopt;
    const bool by_updated = filter.order == PaymentOrder::updated_at;
    const char* statement = by_updated ? k_list_by_updated : k_list_by_created;
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(statement, by_updated ? k_list_by_updated_sql : k_list_by_created_sql);
        pqxx::read_transaction tx(impl.connection());
        // One row past the limit says whether there are more.
        const pqxx::result r = tx.exec_prepared(statement, or_null(state), or_null(filter.provider),
                                                or_null(older_than), or_null(filter.tenant_id),
                                                static_cast<long long>(filter.limit) + 1);
        PaymentPage page;
        for (const auto& row : r) {
            if (page.rows.size() == static_cast<std::size_t>(filter.limit)) {
                page.more = true;
                break;
            }
            page.rows.push_back(payment_row_from(row));
        }
        return page;
    });
}

std::optional<PaymentRecord> load_payment_record(Db& db, const PaymentRef& ref) {
    if (!is_uuid_text(ref.tenant_id) || !is_uuid_text(ref.payment_id)) {
        return std::nullopt;
    }
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<PaymentRecord> {
        impl.prepare(k_record_payment, k_record_payment_sql);
        impl.prepare(k_record_attempts, k_record_attempts_sql);
        impl.prepare(k_record_lookups, k_record_lookups_sql);
        impl.prepare(k_record_audit, k_record_audit_sql);
        impl.prepare(k_record_findings, k_record_findings_sql);
        impl.prepare(k_record_events, k_record_events_sql);
        snapshot tx(impl.connection());
        const pqxx::result pr = tx.exec_prepared(k_record_payment, ref.tenant_id, ref.payment_id);
        if (pr.empty()) {
            return std::nullopt;
        }
        const pqxx::row r = pr[0];
        PaymentRecord rec;
        rec.payment = payment_row_from(r);
        rec.payment_method = r[16].as<std::string>();
        rec.customer = opt_text(r[17]);
        rec.description = opt_text(r[18]);
        rec.metadata_json = r[19].as<std::string>();
        rec.created_by = r[20].as<std::string>();
        rec.next_attempt_at = opt_text(r[21]);
        rec.lease_owner = opt_text(r[22]);
        rec.lease_expires_at = opt_text(r[23]);
        rec.first_attempt_at = opt_text(r[24]);
        rec.last_attempt_at = opt_text(r[25]);
        rec.lookup_count = r[26].as<int>();
        rec.lookup_failures = r[27].as<int>();
        if (!r[28].is_null()) {
            rec.charged_amount_minor = r[28].as<long long>();
        }

        // The canonical IDs as stored (lower case), not as typed.
        const std::string& tenant_id = rec.payment.tenant_id;
        const std::string& payment_id = rec.payment.payment_id;
        for (const auto& a : tx.exec_prepared(k_record_attempts, tenant_id, payment_id)) {
            AttemptRecord at;
            at.attempt_no = a[0].as<int>();
            at.generation = a[1].as<long long>();
            at.worker = a[2].as<std::string>();
            at.operation_id = a[3].as<std::string>();
            at.started_at = a[4].as<std::string>();
            at.finished_at = opt_text(a[5]);
            at.outcome = a[6].as<std::string>();
            at.http_status = opt_value<int>(a[7]);
            at.error_class = opt_text(a[8]);
            at.provider_reference = opt_text(a[9]);
            at.detail = opt_text(a[10]);
            rec.attempts.push_back(std::move(at));
        }
        for (const auto& l : tx.exec_prepared(k_record_lookups, tenant_id, payment_id)) {
            LookupRecord lk;
            lk.lookup_id = l[0].as<long long>();
            lk.generation = l[1].as<long long>();
            lk.actor = l[2].as<std::string>();
            lk.at = l[3].as<std::string>();
            lk.status = l[4].as<std::string>();
            lk.remote_state = opt_text(l[5]);
            lk.remote_raw_status = opt_text(l[6]);
            lk.remote_amount = opt_value<long long>(l[7]);
            lk.remote_currency = opt_text(l[8]);
            lk.provider_reference = opt_text(l[9]);
            lk.duplicates = l[10].as<int>();
            lk.http_status = opt_value<int>(l[11]);
            lk.error_class = opt_text(l[12]);
            lk.detail = opt_text(l[13]);
            lk.decision = l[14].as<std::string>();
            lk.reason = opt_text(l[15]);
            lk.applied = l[16].as<bool>();
            rec.lookups.push_back(std::move(lk));
        }
        for (const auto& a : tx.exec_prepared(k_record_audit, tenant_id, payment_id)) {
            rec.audit.push_back(audit_from(a));
        }
        for (const auto& f : tx.exec_prepared(k_record_findings, tenant_id, payment_id)) {
            StatementEvidence e;
            e.provider = f[0].as<std::string>();
            e.window_from = f[1].as<std::string>();
            e.window_to = f[2].as<std::string>();
            e.category = f[3].as<std::string>();
            e.provider_reference = opt_text(f[4]);
            if (!f[5].is_null()) {
                e.remote_amount = f[5].as<long long>();
            }
            e.remote_currency = opt_text(f[6]);
            e.remote_state = opt_text(f[7]);
            e.detail = f[8].as<std::string>();
            e.finding_id = f[9].as<std::string>();
            e.acknowledged_by = opt_text(f[10]);
            e.acknowledge_note = opt_text(f[11]);
            rec.statement_findings.push_back(std::move(e));
        }
        for (const auto& e : tx.exec_prepared(k_record_events, tenant_id, payment_id)) {
            ProviderEventRecord ev;
            ev.event_id = e[0].as<long long>();
            ev.event_key = e[1].as<std::string>();
            ev.event_type = e[2].as<std::string>();
            ev.outcome = e[3].as<std::string>();
            ev.provider_reference = opt_text(e[4]);
            ev.amount_minor = opt_value<long long>(e[5]);
            ev.currency = opt_text(e[6]);
            ev.received_at = e[7].as<std::string>();
            ev.deliveries = e[8].as<int>();
            ev.applied_result = opt_text(e[9]);
            rec.events.push_back(std::move(ev));
        }
        return rec;
    });
}

namespace {

// One record of evidence from a row whose columns from `first` are, in every source's query:
// reference, state name, amount, currency.
SeenRecord seen_record(EvidenceSource source, std::string seen_in, const pqxx::row& r, int first) {
    const auto state = opt_text(r[first + 1]);
    SeenRecord s;
    s.source = source;
    s.seen_in = std::move(seen_in);
    s.reference = opt_text(r[first]);
    s.outcome = seen_outcome(source, state.value_or(""));
    s.amount_minor = opt_value<long long>(r[first + 2]);
    s.currency = opt_text(r[first + 3]);
    return s;
}

// The subject's columns every evidence query starts with: state, generation, amount, currency,
// (provider, operation ID), provider reference.
PaymentEvidence evidence_subject(const pqxx::row& r) {
    PaymentEvidence out;
    out.state = r[0].as<std::string>();
    out.generation = r[1].as<long long>();
    out.amount_minor = r[2].as<long long>();
    out.currency = r[3].as<std::string>();
    out.provider_reference = opt_text(r[6]);
    return out;
}

std::string lookup_seen_in(const pqxx::row& r) {
    return "status query " + r[0].as<std::string>() + " at " + r[1].as<std::string>();
}

std::string event_seen_in(const pqxx::row& r) {
    return "webhook event " + r[0].as<std::string>() + " received " + r[1].as<std::string>();
}

} // namespace

std::optional<PaymentEvidence> load_refund_evidence(Db& db, const std::string& tenant_id,
                                                    const std::string& refund_id) {
    if (!is_uuid_text(tenant_id) || !is_uuid_text(refund_id)) {
        return std::nullopt;
    }
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<PaymentEvidence> {
        impl.prepare(k_evidence_refund, k_evidence_refund_sql);
        impl.prepare(k_evidence_refund_lookups, k_evidence_refund_lookups_sql);
        impl.prepare(k_evidence_refund_events, k_evidence_refund_events_sql);
        snapshot tx(impl.connection());
        const pqxx::result rr = tx.exec_prepared(k_evidence_refund, tenant_id, refund_id);
        if (rr.empty()) {
            return std::nullopt;
        }
        PaymentEvidence out = evidence_subject(rr[0]);
        for (const auto& r : tx.exec_prepared(k_evidence_refund_lookups, tenant_id, refund_id)) {
            out.seen.push_back(seen_record(EvidenceSource::lookup, lookup_seen_in(r), r, 2));
        }
        for (const auto& r : tx.exec_prepared(k_evidence_refund_events, tenant_id, refund_id)) {
            out.seen.push_back(seen_record(EvidenceSource::webhook, event_seen_in(r), r, 2));
        }
        return out;
    });
}

std::optional<PaymentEvidence> load_payment_evidence(Db& db, const PaymentRef& ref) {
    if (!is_uuid_text(ref.tenant_id) || !is_uuid_text(ref.payment_id)) {
        return std::nullopt;
    }
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&]() -> std::optional<PaymentEvidence> {
        impl.prepare(k_evidence_payment, k_evidence_payment_sql);
        impl.prepare(k_evidence_lookups, k_evidence_lookups_sql);
        impl.prepare(k_evidence_records, k_evidence_records_sql);
        impl.prepare(k_evidence_findings, k_evidence_findings_sql);
        impl.prepare(k_evidence_events, k_evidence_events_sql);
        snapshot tx(impl.connection());
        const pqxx::result pr = tx.exec_prepared(k_evidence_payment, ref.tenant_id, ref.payment_id);
        if (pr.empty()) {
            return std::nullopt;
        }
        PaymentEvidence out = evidence_subject(pr[0]);
        const std::string provider = pr[0][4].as<std::string>();
        const std::string operation_id = pr[0][5].as<std::string>();
        const auto seen = [&out](EvidenceSource source, std::string seen_in, const pqxx::row& r,
                                 int first) {
            out.seen.push_back(seen_record(source, std::move(seen_in), r, first));
        };
        for (const auto& r : tx.exec_prepared(k_evidence_lookups, ref.tenant_id, ref.payment_id)) {
            seen(EvidenceSource::lookup, lookup_seen_in(r), r, 2);
        }
        for (const auto& r : tx.exec_prepared(k_evidence_records, provider, operation_id,
                                              or_null(out.provider_reference))) {
            seen(EvidenceSource::statement,
                 "the statement of " + r[0].as<std::string>() + " .. " + r[1].as<std::string>(), r,
                 2);
        }
        for (const auto& r : tx.exec_prepared(k_evidence_findings, ref.tenant_id, ref.payment_id)) {
            seen(EvidenceSource::statement,
                 "the statement of " + r[0].as<std::string>() + " .. " + r[1].as<std::string>(), r,
                 2);
        }
        for (const auto& r : tx.exec_prepared(k_evidence_events, ref.tenant_id, ref.payment_id)) {
            seen(EvidenceSource::webhook, event_seen_in(r), r, 2);
        }
        return out;
    });
}

std::vector<AuditRecord> list_audit(Db& db, const AuditFilter& filter) {
    require_limit(filter.limit, "list_audit");
    require_uuid(filter.tenant_id, "list_audit");
    if (filter.payment) {
        require_uuid(filter.payment->tenant_id, "list_audit");
    }
    Db::Impl& impl = db.impl();
    return translate_errors(impl, [&] {
        impl.prepare(k_list_audit, k_list_audit_sql);
        pqxx::read_transaction tx(impl.connection());
        const pqxx::result r = tx.exec_prepared(
            k_list_audit, or_null(filter.tenant_id),
            filter.payment ? filter.payment->tenant_id.c_str() : nullptr,
            filter.payment ? filter.payment->payment_id.c_str() : nullptr, filter.limit);
        std::vector<AuditRecord> out;
        out.reserve(r.size());
        for (const auto& row : r) {
            out.push_back(audit_from(row));
        }
        return out;
    });
}

} // namespace payrecon::store
