#pragma once
// Checkout.com's dialect of the fake provider (its NAS API, shared/specs/checkout-nas/), on the
// ledger, keys, clock and faults every dialect shares (ledger.hpp):
//   POST /payments          PaymentRequest (JSON) -> 201 PaymentResponse; a decline is a 201 too
//                           (`approved: false`, `status: "Declined"`); invalid: 422
//                           {"request_id","error_type":"request_invalid","error_codes":[...]}
//   GET  /payments/{id}     the payment's details; 404 (empty body) if unknown
//   GET  /payments?reference=X[&limit=N&skip=M]
//                           {"limit","skip","total_count","data":[details, newest first]}
//   POST /payments/{id}/refunds
//                           RefundRequest (JSON; amount, default what is left; reference <= 50;
//                           metadata) -> 202 RefundAcceptedResponse {"action_id","reference",
//                           "_links"}: the fake refunds at once (its Refund action is approved),
//                           the 202 is how Checkout.com answers every accepted refund. Under the
//                           same key rules (a map of their own), faults and latency as a create;
//                           counted as an execution of its operation ID (`reference`, else the
//                           key). A refund past what the payment has left, or of a payment not
//                           Captured, is 403 with an empty body -- the document's "Refund not
//                           allowed" -- read after the latency (a racing refund is seen), executing
//                           and saving nothing; an unknown payment 404; invalid 422
//                           request_invalid. The payment's balances and status (Partially Refunded,
//                           Refunded) follow, the ledger's `charged` loses it and `refunded` gains
//                           it
//   POST /payments/{id}/captures
//                           CaptureRequest (JSON; amount, default what is left; capture_type Final
//                           (default: the rest is voided) or NonFinal; reference <= 50; metadata)
//                           -> 202 CaptureAcceptedResponse {"action_id","reference","_links"}: the
//                           fake captures at once (its Capture action is approved). Of a payment
//                           created with `capture: false`, still Authorized or Partially Captured
//                           by NonFinal captures, never past what is left to capture; anything
//                           else -- captured automatically, declined, voided, expired, closed by a
//                           Final capture, more than is left -- is 403 with an empty body, the
//                           document's "Capture not allowed", judged after the latency
//   POST /payments/{id}/voids
//                           VoidRequest (JSON; reference <= 50; metadata) -> 202
//                           VoidAcceptedResponse: releases what is left to capture (a Void
//                           action); of a payment with nothing left to capture 403 ("Void not
//                           allowed")
//                           Captures and voids: the refunds' key rules (a map of their own each),
//                           faults and latency; an unknown payment 404; invalid 422
//                           request_invalid; counted as an execution of their operation ID
//                           (`reference`, else the key). A capture adds to the ledger's `charged`.
//                           An authorisation not captured in full nor voided 7 fake days after it
//                           was made is voided by the provider (what is left of it: status Voided
//                           if nothing was captured, a Void action without a reference), read
//                           whenever it is rendered or asked for, so no timer runs
//   GET  /payments/{id}/actions
//                           the payment's actions, newest first: each Refund, Capture and Void
//                           (its `reference`, `amount`, `approved`, `response_code`), the Capture
//                           of a payment captured at once, the Authorization; 404 if unknown;
//                           lookup_down 503 like the other reads; --no-lookup 404
// Every request needs `Authorization: Bearer <the account's API key>`; otherwise 401 with an
// empty body, as Checkout.com answers.
//
// Idempotency as Checkout.com documents it (`Cko-Idempotency-Key`): only a 2xx answer is saved
// under the key -- replayed byte for byte, nothing executed, for key_retention of fake time. A
// 4xx or 5xx answer saves nothing, so the same key after an `http_500_after_execute` EXECUTES
// AGAIN: the double charge a blind retry causes at Checkout.com. A key whose first request is
// still executing gets 409 (empty body). The body of a replay is not compared with the first one
// (Checkout.com does not say what it does then). Executions count per operation ID: `reference`,
// else the key, else "(none)". `charged` counts a Captured payment's `amount` as sent:
// Checkout.com's minor units (ISK has exponent 0 there, 2 in ISO 4217).

#include "tests/fake_provider/dialect.hpp"
#include "tests/fake_provider/ledger.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace payrecon::fake {

struct CheckoutOptions {
    std::chrono::seconds key_retention{86400}; // fake time; Checkout.com plans for 24 h
};

class CheckoutApi final : public Dialect {
public:
    // `ledger` is the fake provider's, shared with the other dialects; it outlives this.
    // `account`: the API key, and whether keys and lookups exist at all.
    CheckoutApi(Ledger& ledger, const Account& account, CheckoutOptions options);

    // /payments and the paths under it.
    bool serves(const http::Request& request) const override;

    // Serves one request on the main port. Never throws for anything the client sent.
    Reply handle(const http::Request& request, const Wait& wait) override;

    // Adds "checkout_payment_count", "checkout_refund_count", "checkout_payments" (oldest first,
    // as GET /payments/{id} answers each; only if options.payment_intents), and the authorisations'
    // counts: "checkout_capture_deliveries", "checkout_void_deliveries", "checkout_captures",
    // "checkout_voids" and "checkout_authorizations" (README.md). Under the ledger's lock.
    void write_ledger_locked(nlohmann::ordered_json& j, LedgerOptions options) const override;

    // Forgets every payment, refund, capture, void and key. Under the ledger's lock.
    void reset_locked() override;

private:
    enum class Status { captured, authorized, declined, card_verified };

    struct Payment {
        std::string id;        // "pay_" + 26 lower-case base32 characters
        std::string action_id; // "act_" + 26
        std::string source_id;
        std::int64_t amount = 0; // as sent: Checkout.com's minor units
        std::string currency;    // upper case, as sent
        std::string reference;
        std::string operation_id;
        std::string payment_type;
        std::optional<bool> merchant_initiated;
        std::optional<std::string> description;
        std::optional<std::string> processing_channel_id;
        nlohmann::ordered_json customer; // as sent, or null
        nlohmann::ordered_json metadata; // as sent, or null
        Status status = Status::captured;
        std::chrono::system_clock::time_point created_at;
        std::string base_url;          // "http://" + the create's Host: where `_links` point
        std::string capture_action_id; // "act_" + 26, a captured payment's Capture action
        struct Refund {
            std::string action_id; // "act_" + 26
            std::int64_t amount = 0;
            std::string reference;
            nlohmann::ordered_json metadata; // as sent, or null
            std::chrono::system_clock::time_point processed_on;
            std::uint64_t seq = 0; // the order of the payment's actions (m_action_seq)
        };
        std::vector<Refund> refunds; // oldest first
        std::int64_t amount_refunded = 0;
        // An authorisation (`capture: false`): its captures and voids made, oldest first (a
        // Refund's fields; `capture` tells which), what they captured, whether a Final capture or
        // a void closed it, and the POSTs that named it (made or not) for the ledger.
        struct Operation {
            bool capture = true; // else a void
            bool final = true;   // a capture's capture_type Final
            Refund action;
        };
        std::vector<Operation> operations;
        bool manual = false; // created with `capture: false` (whatever came of it)
        std::int64_t amount_captured = 0;
        bool closed = false;             // a Final capture or a void: nothing more can be captured
        bool named_by_operation = false; // a capture or void POST named it (ledger)
        std::uint32_t capture_deliveries = 0;
        std::uint32_t void_deliveries = 0;
    };

    // What a payment is at some time, its authorisation's expiry applied (standing()).
    struct Standing {
        std::string status;          // Authorized, Partially Captured, Captured, Voided, ...
        std::int64_t captured = 0;   // money taken: a captured payment's amount, or its captures'
        std::int64_t capturable = 0; // left to capture now
        std::int64_t voided = 0;     // released: voided, expired, or left by a Final capture
        bool expired = false;        // the provider voided what was left, 7 days on
    };
    static Standing standing(const Payment& p, std::chrono::system_clock::time_point now);

    struct KeyRecord {
        std::chrono::system_clock::time_point first_seen;
        bool in_flight = true;
        int status = 0; // the saved 2xx
        std::string body;
    };

    Reply create(const http::Request& request, const Wait& wait);
    Reply retrieve(const std::string& id, const Wait& wait);
    Reply lookup(const http::Request& request, const Wait& wait);
    Reply refund(const std::string& id, const http::Request& request, const Wait& wait);
    Reply actions(const std::string& id, const Wait& wait);
    // POST /payments/{id}/captures (`capture` true) and /voids.
    Reply capture_or_void(const std::string& id, bool capture, const http::Request& request,
                          const Wait& wait);
    // The key phase of a create or a refund, under the ledger's lock: true when it answered
    // `reply` -- the first request still executing (409), a replay of the saved 2xx -- false when
    // `key` is null, new or forgotten, and the request goes on.
    bool key_answered_locked(std::map<std::string, KeyRecord>& keys, const std::string* key,
                             Reply& reply);
    // After an executed create or refund: its 2xx answer saved under `key`, any other answer
    // freeing the key (only 2xx is kept).
    void settle_key_locked(std::map<std::string, KeyRecord>& keys, const std::string* key,
                           const Reply& reply);
    bool authorized(const http::Request& request) const;

    // Under the ledger's lock.
    // What POST /payments answers, and what GET /payments/{id} answers.
    static nlohmann::ordered_json render_response(const Payment& p);
    static nlohmann::ordered_json render_details(const Payment& p,
                                                 std::chrono::system_clock::time_point now);
    static nlohmann::ordered_json render_actions(const Payment& p,
                                                 std::chrono::system_clock::time_point now);
    // 422 {"request_id", "error_type": "request_invalid", "error_codes"}.
    http::Response validation_error(const std::vector<std::string>& codes);

    Ledger& m_ledger;
    Account m_account;
    CheckoutOptions m_options;
    std::vector<Payment> m_payments; // creation order
    std::map<std::string, std::size_t> m_by_id;
    std::map<std::string, KeyRecord> m_keys;
    std::map<std::string, KeyRecord> m_refund_keys;
    std::map<std::string, KeyRecord> m_capture_keys;
    std::map<std::string, KeyRecord> m_void_keys;
    std::uint64_t m_action_seq = 0;
    // Capture and void POSTs read in full after the key was accepted, and those made.
    std::uint64_t m_capture_deliveries = 0;
    std::uint64_t m_void_deliveries = 0;
    std::uint64_t m_captures = 0;
    std::uint64_t m_voids = 0;
};

} // namespace payrecon::fake
