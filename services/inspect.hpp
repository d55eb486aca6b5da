#pragma once
// The operator's read side (`payments list|show`, `review list|show`, `audit`): finding a payment
// or a tenant by what an operator typed, the lists, one payment's record, a payment's trail, and
// what can be done with a payment now. Reads and decides; the caller words what it gets (the CLI
// in its own flags and commands) and refuses what is not found.

#include "core/operator_commands.hpp"
#include "core/review_guidance.hpp"
#include "services/resolution.hpp"
#include "store/inspect_store.hpp"
#include "store/operation_store.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace payrecon {

namespace store {
class Db;
}

// The payment `id` names (a payment ID or an operation ID); nullopt if none has it. Throws
// Refused if a payment ID names payments of more than one tenant, DatabaseUnavailable.
std::optional<store::PaymentRef> find_payment_ref(store::Db& db, const std::string& id);

// Everything recorded about the payment `ref` names; nullopt if it is gone. Throws
// DatabaseUnavailable.
std::optional<store::PaymentRecord> payment_record(store::Db& db, const store::PaymentRef& ref);

// The ID of the tenant `name_or_id` names; nullopt if there is no such tenant. Throws
// DatabaseUnavailable.
std::optional<std::string> find_tenant_id(store::Db& db, const std::string& name_or_id);

// The payments `filter` selects, oldest first by its order. Throws DatabaseUnavailable.
store::PaymentPage payments_page(store::Db& db, const store::PaymentFilter& filter);

// The review queue: the payments in review that `filter` selects (its provider, tenant, age and
// limit; the state and the order are the queue's), longest waiting first, and the provider events
// that contradict a settled payment of the same provider and tenant -- they wait for an
// operator too, though their payments are final. Throws DatabaseUnavailable.
// The refunds in review come with it, by the same filter (their own limit), in `refunds`.
struct ReviewQueue {
    store::PaymentPage page;
    std::vector<store::OperationRow> operations; // refunds, captures and voids in review
    bool operations_more = false;
    long long contradictions = 0;
};
ReviewQueue review_queue(store::Db& db, store::PaymentFilter filter);

// One payment as `review show` presents it: in review or not, and if it is, the evidence, the
// decisions its review code allows as the evidence orders and fills them (services/resolution's
// review_advice), each complete at the generation read, whether asking the provider again can
// settle it, and the guidance for its review code where payrecon knows the code.
struct ReviewCase {
    bool in_review = false;
    std::vector<SeenRecord> seen;
    std::vector<ResolveCommand> decisions;
    bool recheck = false;
    const ReviewGuidance* guidance = nullptr;
};
ReviewCase review_case(store::Db& db, const store::PaymentRecord& record);
// The same for a refund, capture or void: its decisions name its own ID and generation.
ReviewCase review_case(store::Db& db, const store::OperationRow& refund);

// The refund, capture or void `id` names (its ID or operation ID), of any tenant; nullopt if none
// has it. Throws DatabaseUnavailable.
std::optional<store::OperationRow> find_any_operation(store::Db& db, const std::string& id);

// What an operator can do with a payment now that is not a review decision: go to its decisions
// (in review), ask the provider now (unknown), cancel it (never sent: pending or
// retry_scheduled), or nothing (settled, or being sent).
enum class NextStep { none, review, recheck, cancel };
NextStep next_step(const store::PaymentRow& payment);

// The audit rows `filter` selects, oldest first. With a payment, its trail is more than the audit
// log: the provider calls the workers made (a re-send an operator scheduled, and what it came to)
// and the reconciler's status queries, as rows of the same shape (actions provider.attempt and
// provider.lookup), merged by time and cut to the newest `filter.limit`. Throws
// DatabaseUnavailable.
std::vector<store::AuditRecord> audit_trail(store::Db& db, const store::AuditFilter& filter);

} // namespace payrecon
