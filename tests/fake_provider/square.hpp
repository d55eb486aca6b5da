#pragma once
// Square's dialect of the fake provider (the Payments API, Connect v2; shared/specs/
// square-connect-api.json: CreatePaymentRequest, Payment, ListPaymentsResponse, Error), on the
// ledger, clock and faults every dialect shares (ledger.hpp):
//   POST /v2/payments       CreatePaymentRequest (JSON; the idempotency_key is a body field)
//                           -> 200 {"payment": {... "status": "COMPLETED"}} (APPROVED when
//                           `autocomplete` is false); a decline is 400 {"errors": [{"category":
//                           "PAYMENT_METHOD_ERROR", "code": "CARD_DECLINED", ...}], "payment":
//                           {... "status": "FAILED"}}: an execution that charges nothing
//   GET  /v2/payments/{id}  {"payment": {...}}; 404 NOT_FOUND
//   GET  /v2/payments?begin_time=&end_time=&sort_order=&cursor=&limit=
//                           {"payments": [...], "cursor": "..."}: created in [begin_time,
//                           end_time), paged by an opaque cursor, no cursor on the last page, {}
//                           when nothing matches; a payment shows only lookup_stale after its
//                           creation; lookup_down 503 SERVICE_UNAVAILABLE; --no-lookup 403
//                           INSUFFICIENT_SCOPES
//   POST /v2/refunds        RefundPaymentRequest (JSON; idempotency_key, payment_id, amount_money,
//                           reason) -> 200 {"refund": {... "status": "COMPLETED"}}: a refund of a
//                           COMPLETED payment, never past what it has left (400 REFUND_ERROR
//                           REFUND_AMOUNT_INVALID; a payment not COMPLETED 400 REFUND_ERROR
//                           PAYMENT_NOT_REFUNDABLE; an unknown one 404 NOT_FOUND -- each executing
//                           nothing and saving nothing under the key; what is left is read after
//                           the latency, so a racing refund is seen). Under the same keys, faults
//                           and latency as a create; counted as an execution of its idempotency
//                           key (the refund's operation ID); the payment gains it in refund_ids
//                           and refunded_money, the ledger in `refunded`
//                           A `decline` fault makes the refund REJECTED (nothing given back, an
//                           execution all the same), answered 400 REFUND_ERROR REFUND_DECLINED
//                           with the refund
//                           The refund_reversed seed makes a refund FAILED (its amount given
//                           back to the merchant); a payment with a FAILED refund is refunded
//                           no more (400 REFUND_ERROR PAYMENT_NOT_REFUNDABLE)
//   GET  /v2/refunds/{id}   {"refund": {...}}; 404 NOT_FOUND; lookup_down 503; --no-lookup 403
//   GET  /v2/refunds?begin_time=&end_time=&sort_order=&cursor=&limit=&status=&source_type=
//                           {"refunds": [...], "cursor": "..."}: ListPaymentRefunds, created in
//                           [begin_time, end_time) (default the last year), paged as
//                           ListPayments is (its cursors are not this listing's); lookup_stale,
//                           lookup_down and --no-lookup as ListPayments
// Authorisations (issue 32): a create with `autocomplete: false` is APPROVED (nothing charged)
// until completed or canceled. `delay_duration` (RFC 3339 duration, PnDTnHnMnS; at least a minute,
// at most Square's card-not-present default P7D; only with autocomplete false) and `delay_action`
// (CANCEL; COMPLETE is refused by the fake) say when Square acts on its own: once the fake clock
// passes created_at + delay_duration (default PT168H) an APPROVED payment reads CANCELED.
//   POST /v2/payments/{id}/complete  CompletePaymentRequest {version_token?} -> 200 {"payment":
//                           {... "status": "COMPLETED"}}: `charged` gains amount_money
//   POST /v2/payments/{id}/cancel    no body -> 200 {"payment": {... "status": "CANCELED"}}
//                           Neither takes an idempotency key: each is counted in deliveries and
//                           executions under "complete:<payment ID>" / "cancel:<payment ID>" (the
//                           fake cannot know the caller's operation ID), and draws the create's
//                           faults (drop or 500 before executing, FIN/RST/hang/half/500 after).
//                           A payment not APPROVED (COMPLETED, CANCELED -- voided or lapsed --,
//                           FAILED) is 400 INVALID_REQUEST_ERROR BAD_REQUEST naming its status
//                           (Square's document lists no code for it; its forums show BAD_REQUEST),
//                           executing nothing; a version_token that is not the payment's current
//                           one is 400 INVALID_REQUEST_ERROR VERSION_MISMATCH; an unknown payment
//                           404 NOT_FOUND
//   PUT  /v2/payments/{id}  UpdatePaymentRequest {idempotency_key, payment: {amount_money,
//                           version_token?}} -> 200 {"payment"} with the new amount_money and a
//                           new version_token: an APPROVED payment only, never above what was
//                           approved (BAD_REQUEST "EDIT_AMOUNT_UP capability is not available");
//                           the key's first answer replayed for the same body, another body 400
//                           IDEMPOTENCY_KEY_REUSED. Draws no fault (it moves no money): the
//                           faults stay for the complete that follows it. Counted in
//                           square_updates
// GET /v2/payments/{id} is counted per payment in the ledger's square_payment_reads.
// Every request needs `Authorization: Bearer <the account's API key>` (the same key as Stripe's);
// otherwise 401 {"errors": [{"category": "AUTHENTICATION_ERROR", "code": "UNAUTHORIZED", ...}]}.
// Errors are always Square's envelope {"errors": [{"category", "code", "detail", "field"}]}.
//
// Idempotency (the body's `idempotency_key`, at most 45 bytes). Square documents that a repeat
// with the same key and the same request returns the first successful response, and that the
// same key with another request is 400 IDEMPOTENCY_KEY_REUSED; the rest is the fake's choice,
// conservative for a client:
// - once a request executed, the key holds that payment -- whatever was answered: the 200, a
//   decline, an http_500_after_execute, a connection broken after execution -- and a repeat with
//   the same body answers the payment as a create answers it (200, or the 400 decline with its
//   FAILED payment), nothing executed, counted in `replays`;
// - the same key with another body (compared as JSON, so key order and spacing do not matter) is
//   400 IDEMPOTENCY_KEY_REUSED, also while the first is still executing;
// - the same key and body while the first request still executes is 409 CONFLICT (ambiguous: the
//   first may yet execute);
// - before execution nothing is saved (validation errors, 401, drop_before_execute, a 500 before
//   execution): the key stays free;
// - a key is forgotten key_retention after its first request, on the fake clock (Square does not
//   publish how long it keeps keys), and then executes again.
// Executions count per operation ID: `reference_id`, else the idempotency key, else "(none)".
// `charged` counts a COMPLETED payment's amount_money: Square's units are ISO 4217 minor units.

#include "tests/fake_provider/dialect.hpp"
#include "tests/fake_provider/ledger.hpp"
#include "tests/fake_provider/seed.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace payrecon::fake {

struct SquareOptions {
    std::chrono::seconds key_retention{86400}; // fake time; Square does not publish its own
    // The currencies this account takes (upper case); a known ISO 4217 currency outside the list
    // is 400 UNSUPPORTED_CURRENCY. Empty: every ISO 4217 currency.
    std::vector<std::string> currencies;
};

class SquareApi final : public Dialect {
public:
    // `ledger` is the fake provider's, shared with the other dialects; it outlives this.
    // `account`: the API key, and whether keys and lookups exist at all.
    SquareApi(Ledger& ledger, const Account& account, SquareOptions options);

    // True for the paths this dialect serves: /v2/payments and /v2/payments/{id} -- but not
    // PayPal's /v2/payments/captures/, /authorizations/ and /refunds/, which stay PayPal's.
    static bool serves_path(const std::string& path);
    bool serves(const http::Request& request) const override { return serves_path(request.path); }

    // Serves one request on the main port. Never throws for anything the client sent.
    Reply handle(const http::Request& request, const Wait& wait) override;

    // Adds "square_payment_count" and "square_payments" (oldest first, each the Payment object
    // GET /v2/payments/{id} answers; only if options.payment_intents), and "square_refund_count".
    // Under the ledger's lock.
    void write_ledger_locked(nlohmann::ordered_json& j, LedgerOptions options) const override;

    // Forgets every payment and key. Under the ledger's lock.
    void reset_locked() override;

    // The `refund_reversed` seed of a refund made through this dialect (its idempotency key is
    // `s.operation_id`): the refund becomes FAILED now on the fake clock, the payment's
    // refunded_money loses its amount and the ledger moves it from `refunded` back to `charged`;
    // later refunds of the payment are refused, as Square documents for a FAILED refund. Square's
    // PaymentRefund has no field for a reason, so `s.failure_reason` is not shown. Answers the
    // refund's ID. Throws SeedNotFound if no refund has that key, std::invalid_argument for a
    // REJECTED or already FAILED one. Takes the ledger's lock.
    std::vector<std::string> seed_refund_reversed(const RefundReversed& s);

private:
    enum class Status { completed, approved, failed, canceled };

    struct Payment {
        std::string id;       // 29 characters of base 62, as Square's are
        std::string order_id; // the order Square creates for a payment without one
        std::string source_id;
        std::int64_t amount = 0; // ISO 4217 minor units, as Square counts
        std::string currency;    // upper case
        std::optional<std::string> reference_id;
        std::optional<std::string> customer_id;
        std::optional<std::string> note;
        std::string location_id;
        std::string operation_id;
        Status status = Status::completed;
        std::string decline_code; // FAILED only: CARD_DECLINED, CVV_FAILURE, ...
        std::string auth_result_code;
        std::string version_token;
        std::chrono::system_clock::time_point created_at; // whole milliseconds
        std::vector<std::size_t> refunds;                 // indexes in m_refunds, oldest first
        std::int64_t amount_refunded = 0;
        // An authorisation: what was approved (UpdatePayment never goes above it), its
        // delay_duration as sent (and in seconds), and when it was completed or canceled.
        std::int64_t approved_amount = 0;
        std::string delay_text = "PT168H";
        std::chrono::seconds delay{168 * 3600};
        std::optional<std::chrono::system_clock::time_point> closed_at;
    };

    struct Refund {
        std::string id; // the payment's ID, '_', and 44 characters of base 62, as Square's are
        std::size_t payment = 0; // index in m_payments
        std::int64_t amount = 0;
        std::optional<std::string> reason;
        std::string operation_id;
        std::chrono::system_clock::time_point created_at; // whole milliseconds
        bool rejected = false; // a `decline` fault: REJECTED, nothing given back
        // A `refund_reversed` seed: FAILED since then, its amount no longer given back.
        std::optional<std::chrono::system_clock::time_point> failed_at;
    };

    // What a listing (ListPayments, ListPaymentRefunds) reads of its query: the window
    // [begin_us, end_us) in microseconds, the order, where its cursor left off (the last item's
    // created_at and index), and the page size.
    struct Listing {
        bool ascending = false;
        std::int64_t begin_us = 0;
        std::int64_t end_us = 0;
        std::optional<std::pair<std::int64_t, std::size_t>> after;
        std::size_t limit = 100;
    };

    struct KeyRecord {
        std::chrono::system_clock::time_point first_seen;
        std::string fingerprint; // the request body as canonical JSON
        bool in_flight = true;
        // Once not in flight: the payment's index in m_payments (m_keys) or the refund's in
        // m_refunds (m_refund_keys).
        std::size_t index = 0;
    };

    // One entry of Square's error envelope.
    struct Error {
        std::string category;
        std::string code;
        std::string detail;
        std::string field; // empty: none
    };

    Reply create(const http::Request& request, const Wait& wait);
    Reply create_refund(const http::Request& request, const Wait& wait);
    Reply retrieve_refund(const std::string& id, const Wait& wait);
    // The idempotency key phase of a create, under the ledger's lock: true when it answered
    // `reply` -- another body under the key (IDEMPOTENCY_KEY_REUSED), the first still executing
    // (409 CONFLICT), a replay (`answer_of` the index the key holds) -- false when the key is new
    // (or forgotten) and the create goes on.
    bool key_answered_locked(std::map<std::string, KeyRecord>& keys, const std::string* key,
                             const std::string& fingerprint,
                             const std::function<http::Response(std::size_t)>& answer_of,
                             Reply& reply);
    Reply retrieve(const std::string& id, const Wait& wait);
    // CompletePayment (`complete`) or CancelPayment: an APPROVED payment's capture or void.
    Reply close_payment(const http::Request& request, const std::string& id, bool complete,
                        const Wait& wait);
    Reply update_payment(const http::Request& request, const std::string& id, const Wait& wait);
    // The status `p` reads now: APPROVED past its delay_duration on the fake clock is CANCELED
    // (delay_action CANCEL). Under the ledger's lock.
    Status status_locked(const Payment& p) const;
    Reply list(const http::Request& request, const Wait& wait);
    Reply list_refunds(const http::Request& request, const Wait& wait);
    // What a listing answers before it reads anything: 403 to an access token without the read
    // permission (--no-lookup), or the connection closed by the latency fault; nullopt: go on.
    std::optional<Reply> refuse_listing(const Wait& wait) const;
    // A listing's faults: 503 (lookup_down), 429 with Retry-After (list_rate_limited); nullopt:
    // none.
    static std::optional<http::Response> listing_fault(const FaultConfig& faults);
    // The window, order, cursor (made with `tag`: one listing's cursor is no other's) and limit
    // of a listing's `query`; Square's 400 when one is not readable or the cursor is not this
    // query's. Under the ledger's lock (a window's end defaults to now).
    std::variant<Listing, http::Response> read_listing_locked(const http::Fields& query,
                                                              std::string_view tag) const;
    // The page of `found` (index and created_at in microseconds of every item in the window that
    // the listing may show) after the listing's cursor, in its order; `next` the cursor of the
    // page after it, if any is left.
    static std::vector<std::size_t> page_of(std::vector<std::pair<std::int64_t, std::size_t>> found,
                                            const Listing& listing, std::string_view tag,
                                            std::optional<std::string>& next);
    bool authorized(const http::Request& request) const;

    // What a create answers for `p`: 200 {"payment"}, or for a FAILED payment 400 {"errors",
    // "payment"}. A replay answers the same.
    http::Response create_answer(const Payment& p) const;
    // A refund's status: REJECTED, FAILED (reversed by a seed) or COMPLETED.
    static const char* refund_status(const Refund& r);
    // True once one of the payment's refunds is FAILED: Square allows no later refund of it.
    bool refunds_blocked(const Payment& p) const;
    nlohmann::ordered_json render_payment(const Payment& p) const;
    nlohmann::ordered_json render_refund(const Refund& r) const;
    // What a refund call answers for `r`: 200 {"refund"}, or for a REJECTED one 400 {"errors":
    // REFUND_ERROR REFUND_DECLINED, "refund"}. A replay answers the same.
    http::Response refund_answer(const Refund& r) const;
    static nlohmann::ordered_json render_error(const Error& e);
    static http::Response errors_response(int status, const std::vector<Error>& errors);

    Ledger& m_ledger;
    Account m_account;
    SquareOptions m_options;
    std::string m_location_id;       // the account's main location
    std::vector<Payment> m_payments; // creation order
    std::map<std::string, std::size_t> m_by_id;
    std::map<std::string, KeyRecord> m_keys;
    std::vector<Refund> m_refunds; // creation order
    std::map<std::string, std::size_t> m_refunds_by_id;
    std::map<std::string, KeyRecord> m_refund_keys;
    // UpdatePayment's keys: the body's fingerprint and the first answer, replayed.
    std::map<std::string, std::pair<std::string, http::Response>> m_update_keys;
    std::uint64_t m_updates = 0;
    std::map<std::string, std::uint64_t> m_reads; // GET /v2/payments/{id} per payment ID
};

} // namespace payrecon::fake
