#pragma once
// PayPal's dialect of the fake provider (Orders v2, Transaction Search v1, OAuth2; shared/specs/
// paypal-*.json), on the ledger, clock and faults every dialect shares (ledger.hpp):
//   POST /v1/oauth2/token       HTTP basic client_id:client_secret, grant_type=client_credentials
//                               -> {"scope","access_token","token_type","app_id","expires_in",
//                               "nonce"}; bad credentials: 401 invalid_client
//   POST /v2/checkout/orders    an order_request with a vaulted payment source
//                               (payment_source.card.vault_id or .paypal.vault_id): executes at
//                               once -> 201, a COMPLETED order whose one capture is COMPLETED (or
//                               DECLINED: still a COMPLETED order, no charge). Without a
//                               payment_source the order is only CREATED (awaiting a payer's
//                               approval): no capture, no execution
//   GET  /v2/checkout/orders/{id}  the order; its purchase unit's payments hold its capture and
//                               the capture's refunds (payment_collection.refunds)
//   POST /v2/payments/captures/{id}/refund
//                               refund_request {amount?, invoice_id?, custom_id?, note_to_payer?}
//                               under PayPal-Request-Id (required): executes at once -> 201, a
//                               COMPLETED refund; `refunded` gains it (add_refunded_locked); a
//                               `decline` fault makes it FAILED (201, nothing given back). Never
//                               past what the capture has left: 422 CAPTURE_FULLY_REFUNDED when
//                               nothing is left, REFUND_AMOUNT_EXCEEDED past it; a DECLINED capture
//                               422 REFUND_NOT_ALLOWED; another currency 422
//                               REFUND_CAPTURE_CURRENCY_MISMATCH; an invoice_id another refund of
//                               the capture has 422 DUPLICATE_INVOICE_ID; an unknown capture 404
//   GET  /v2/payments/captures/{id}  the capture (capture-2): status COMPLETED, PARTIALLY_REFUNDED
//   or
//                               REFUNDED as refunds add up, supplementary_data.related_ids.order_id
//   GET  /v2/payments/refunds/{id}   the refund
//   Authorisations (intent AUTHORIZE with a vaulted source): the order is COMPLETED, its purchase
//   unit's payments.authorizations[0] CREATED (DENIED under a `decline` fault or the declined vault
//   ID: nothing held); nothing is charged until a capture.
//   POST /v2/payments/authorizations/{id}/capture
//                               capture_request {amount?, final_capture?, invoice_id?,
//                               note_to_payer?, soft_descriptor?} under PayPal-Request-Id
//                               (required): executes at once -> 201, a COMPLETED capture (DECLINED
//                               under a `decline` fault: nothing taken), charged; without an amount
//                               what is left; final_capture (default false) releases the rest: the
//                               authorization CAPTURED, else PARTIALLY_CAPTURED (CAPTURED once
//                               nothing is left). Never past what is left: 422
//                               MAX_CAPTURE_AMOUNT_EXCEEDED; a VOIDED one 422 AUTHORIZATION_VOIDED,
//                               an EXPIRED one 422 AUTHORIZATION_EXPIRED, a CAPTURED one 422
//                               AUTHORIZATION_ALREADY_CAPTURED, a DENIED one 422
//                               AUTHORIZATION_DENIED; another currency 422
//                               AUTH_CAPTURE_CURRENCY_MISMATCH; an invoice_id another capture of
//                               it has 422 DUPLICATE_INVOICE_ID; an unknown authorization 404
//   POST /v2/payments/authorizations/{id}/void
//                               no body, under PayPal-Request-Id (required) -> 204 (200 with the
//                               authorization under return=representation), the authorization
//                               VOIDED (what was captured stays captured); a CAPTURED one 422
//                               PREVIOUSLY_CAPTURED, a VOIDED one 422 PREVIOUSLY_VOIDED, an EXPIRED
//                               one 422 AUTHORIZATION_EXPIRED, a DENIED one 422
//                               AUTHORIZATION_DENIED
//   GET  /v2/payments/authorizations/{id}  the authorization (authorization-2), its order in
//                               supplementary_data.related_ids.order_id; CREATED or
//                               PARTIALLY_CAPTURED untouched for `authorization_validity` (29 days)
//                               of fake time reads EXPIRED everywhere, and captures nothing more
//   An authorization's capture is a capture like the others: GET /v2/payments/captures/{id} (its
//   `up` link the authorization, supplementary_data its order), refunds of it, and in the search
//   (T0006, its invoice_id); the authorization itself is in the search as T1301 (status P while
//   capturable, S once captured in full, V voided or expired, D denied).
//   GET  /v1/reporting/transactions?start_date=&end_date=[&page_size=&page=&fields=...]
//                               the captures and refunds initiated in [start_date, end_date),
//                               oldest first, each only `lookup_stale` after its creation (PayPal's
//                               search lag): a capture T0006 with its invoice_id, a refund T1107
//                               (money out: a negative amount; S, or D when FAILED) with the
//                               refund's invoice_id and custom_field
// Every API call needs `Authorization: Bearer <an access token this fake issued>`; the tokens
// expire `token_ttl` of fake time after issue, or at once on expire_tokens(); an expired or unknown
// one gets 401 invalid_token (what an adapter's refresh-once-on-401 meets).
//
// Responses follow the `Prefer` header as the spec says: `return=representation` gives the whole
// order; otherwise (its default, `return=minimal`) only id, status and links -- so an adapter that
// does not ask for the representation never sees the capture, nor whether it was declined.
//
// Idempotency as PayPal documents it (`PayPal-Request-Id`, required when a payment_source is
// given): a known request ID answers the CURRENT state of the order it created -- 200, nothing
// executed, also after an `http_500_after_execute` -- for key_retention (6 h) of fake time. A
// request ID whose first request is still executing gets 409 RESOURCE_CONFLICT (ambiguous: the
// first may yet execute). Nothing is remembered for a request that created no order (validation
// errors, 401, a 500 before execution). The body of a repeated request is not compared.
//
// A capture's and a void's request ID is kept `refund_key_retention` too (the Payments v2
// document's one retention) and answers the capture's, or the authorization's, current state the
// same way, with the create's faults and latency (a `decline` fault declines a capture; a void is
// never declined by a fault). A capture's operation ID is its invoice_id, else the
// PayPal-Request-Id; a void's the PayPal-Request-Id.
//
// A refund's request ID is kept `refund_key_retention` (45 days: "The server stores keys for 45
// days", the Payments v2 document) and answers the refund's current state the same way; its faults
// and latency are the order creation's.
//
// Executions count per operation ID: purchase_units[0].invoice_id, else its custom_id, else its
// reference_id, else the PayPal-Request-Id, else "(none)"; a refund's: its invoice_id, else its
// custom_id, else the PayPal-Request-Id. `charged` counts a COMPLETED capture in
// the ISO 4217 minor units of its decimal value (the value is parsed exactly, never as a float).

#include "core/secret.hpp"
#include "tests/fake_provider/dialect.hpp"
#include "tests/fake_provider/ledger.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace payrecon::fake {

struct PayPalOptions {
    std::string client_id = "fake-paypal-client-id";
    Secret client_secret; // empty: every token request is refused (401 invalid_client)
    std::chrono::seconds token_ttl{32400};                     // expires_in; fake time
    std::chrono::seconds key_retention{21600};                 // PayPal-Request-Id; fake time (6 h)
    std::chrono::seconds refund_key_retention{45 * 24 * 3600}; // a refund's; fake time (45 d)
    // "An authorization places a hold on the funds and is valid for 29 days"; fake time.
    std::chrono::seconds authorization_validity{29 * 24 * 3600};
};

class PayPalApi final : public Dialect {
public:
    // `ledger` is the fake provider's, shared with the other dialects; it outlives this.
    // `account`: whether request IDs and the transaction search exist at all.
    PayPalApi(Ledger& ledger, const Account& account, PayPalOptions options);

    // /v1/oauth2/..., /v1/reporting/... and /v2/..., but for Square's /v2/payments and
    // /v2/payments/{id} (square.hpp), which share PayPal's prefix.
    bool serves(const http::Request& request) const override;

    // Serves one request on the main port. Never throws for anything the client sent.
    Reply handle(const http::Request& request, const Wait& wait) override;

    // Every access token issued so far is expired from now on; answers how many were still valid.
    std::size_t expire_tokens();

    // Adds "paypal_tokens_issued", "paypal_order_count", "paypal_refund_count", "paypal_orders"
    // (oldest first, as GET /v2/checkout/orders/{id} answers each; only if
    // options.payment_intents), and for authorisations "paypal_capture_deliveries" and
    // "paypal_void_deliveries" (capture and void POSTs read in full), "paypal_captures" and
    // "paypal_voids" (executed), and "paypal_authorizations": per authorization its id, order_id,
    // operation_id, status, amount and amount_captured (minor units), captures, voids,
    // capture_deliveries, void_deliveries. Under the ledger's lock.
    void write_ledger_locked(nlohmann::ordered_json& j, LedgerOptions options) const override;

    // Forgets every order, request ID and token, and the token count. Under the ledger's lock.
    void reset_locked() override;

private:
    enum class Source { card, paypal };
    enum class Capture { none, completed, declined };

    // One capture of an authorization.
    struct AuthCapture {
        std::string id; // 17 upper-case letters and digits
        std::string value;
        std::int64_t minor = 0;
        bool declined = false; // a `decline` fault: nothing taken
        bool final = false;
        std::optional<std::string> invoice_id;
        std::optional<std::string> note_to_payer;
        std::string operation_id;
        std::chrono::system_clock::time_point created_at;
    };

    struct Order {
        std::string id;         // 17 upper-case letters and digits
        std::string capture_id; // the same form; empty without a capture
        Capture capture = Capture::none;
        std::string currency;     // upper case
        std::string value;        // normalised to the currency's decimals
        std::int64_t minor = 0;   // ISO 4217 minor units
        std::string reference_id; // "default" when not given, as PayPal sets it
        std::optional<std::string> invoice_id;
        std::optional<std::string> custom_id;
        std::optional<std::string> description;
        std::string operation_id;
        std::optional<Source> source;
        std::string vault_id;
        std::string payer_id; // a PayPal wallet's account ID
        std::chrono::system_clock::time_point created_at;
        std::string base_url;             // "http://" + the create's Host: where `links` point
        std::vector<std::size_t> refunds; // indexes into m_refunds, oldest first
        // intent AUTHORIZE with a payment source: the authorization and its captures.
        bool authorize = false;
        std::string authorization_id; // 17 upper-case letters and digits
        bool denied = false;          // a declined authorization: nothing held
        bool voided = false;
        bool closed = false; // a final capture released the rest
        std::vector<AuthCapture> captures;
        std::int64_t capture_deliveries = 0;
        std::int64_t void_deliveries = 0;
        std::int64_t voids = 0;
    };

    struct Refund {
        std::string id;        // 17 upper-case letters and digits
        std::size_t order = 0; // index into m_orders: the capture refunded
        // The authorization's capture refunded (index into its order's captures); none: the
        // order's own capture.
        std::optional<std::size_t> auth_capture;
        std::string currency;   // upper case
        std::string value;      // normalised to the currency's decimals
        std::int64_t minor = 0; // ISO 4217 minor units
        std::optional<std::string> invoice_id;
        std::optional<std::string> custom_id;
        std::optional<std::string> note_to_payer;
        std::string operation_id;
        std::chrono::system_clock::time_point created_at;
        bool failed = false; // a `decline` fault: FAILED, nothing given back
    };

    struct RequestRecord {
        std::chrono::system_clock::time_point first_seen;
        bool in_flight = true;
        std::size_t index = 0; // the order (or refund) it made; meaningful once not in flight
        // A capture's or a void's: the capture's index among its authorization's captures, and
        // whether the request was a void (its replay answers the authorization).
        std::size_t capture = 0;
        bool void_request = false;
    };

    // One entry of an error's `details`.
    struct Issue {
        int status = 400; // 400 INVALID_REQUEST or 422 UNPROCESSABLE_ENTITY
        std::string issue;
        std::string field; // a JSON pointer, or a header or query parameter's name
        std::string description;
        std::string location = "body";
    };

    Reply token(const http::Request& request, const Wait& wait);
    Reply create(const http::Request& request, const Wait& wait);
    Reply get_order(const http::Request& request, const std::string& id, const Wait& wait);
    Reply search(const http::Request& request, const Wait& wait);
    Reply refund(const http::Request& request, const std::string& capture_id, const Wait& wait);
    // POST /v2/payments/authorizations/{id}/capture, or with `void_it` /void.
    Reply capture_or_void(const http::Request& request, const std::string& authorization_id,
                          bool void_it, const Wait& wait);
    // GET /v2/payments/captures/{id}, /v2/payments/refunds/{id} and
    // /v2/payments/authorizations/{id}.
    Reply get_payment(const http::Request& request, const std::string& path, const Wait& wait);

    // Under the ledger's lock.
    // nullopt if the request carries a valid access token; else the 401 to answer.
    std::optional<http::Response> token_refusal_locked(const http::Request& request) const;
    // PayPal's error envelope {"name","message","debug_id","details","links"}.
    http::Response error_locked(int status, std::string_view name, std::string_view message,
                                const std::vector<Issue>& details);
    http::Response issue_locked(const Issue& issue);
    nlohmann::ordered_json render_order(const Order& order, bool representation) const;
    // The order's capture; `standalone` (GET /v2/payments/captures/{id}) adds what capture-2 has
    // beyond an order's capture: supplementary_data (the order's ID) and payee.
    nlohmann::ordered_json render_capture(const Order& order, bool standalone) const;
    nlohmann::ordered_json render_refund(const Refund& refund, bool representation) const;
    // What the order's capture (or its authorization's capture `auth_capture`) has given back so
    // far, in minor units.
    std::int64_t refunded_minor(const Order& order,
                                std::optional<std::size_t> auth_capture = std::nullopt) const;
    // An authorization's status now: CREATED, PARTIALLY_CAPTURED, CAPTURED, VOIDED, EXPIRED
    // (CREATED or PARTIALLY_CAPTURED past authorization_validity), DENIED.
    std::string authorization_status(const Order& order,
                                     std::chrono::system_clock::time_point now) const;
    // What its captures took (COMPLETED ones), in minor units.
    static std::int64_t captured_minor(const Order& order);
    // The authorization (authorization-2); `standalone` (GET /v2/payments/authorizations/{id})
    // adds supplementary_data (the order's ID) and payee.
    nlohmann::ordered_json render_authorization(const Order& order, bool standalone) const;
    // One capture of the authorization; `standalone` as render_capture's.
    nlohmann::ordered_json render_auth_capture(const Order& order, std::size_t capture,
                                               bool standalone) const;
    // A known PayPal-Request-Id in `requests` (kept `retention`): true when it answered `reply` --
    // 409 PREVIOUS_REQUEST_IN_PROGRESS (`in_progress` its description) while its first request
    // executes, else `current(index)`, the current state of what it made, counted as a replay --
    // false when the ID is new (or forgotten). What an order's and a refund's request IDs share.
    bool request_answered_locked(std::map<std::string, RequestRecord>& requests,
                                 const std::string& request_id, std::chrono::seconds retention,
                                 std::string_view in_progress,
                                 const std::function<http::Response(std::size_t)>& current,
                                 Reply& reply);
    // The 404 PayPal answers for an ID it does not know.
    http::Response not_found_locked(std::string_view field);

    Ledger& m_ledger;
    Account m_account;
    PayPalOptions m_options;
    std::vector<Order> m_orders; // creation order
    std::map<std::string, std::size_t> m_by_id;
    std::map<std::string, RequestRecord> m_requests;
    std::vector<Refund> m_refunds;                         // creation order
    std::map<std::string, std::size_t> m_by_capture;       // capture ID -> order
    std::map<std::string, std::size_t> m_by_authorization; // authorization ID -> order
    // An authorization's capture ID -> (order, index into its captures).
    std::map<std::string, std::pair<std::size_t, std::size_t>> m_auth_captures;
    std::map<std::string, RequestRecord> m_capture_requests; // captures' and voids' request IDs
    std::int64_t m_capture_deliveries = 0;
    std::int64_t m_void_deliveries = 0;
    std::int64_t m_captures = 0;
    std::int64_t m_voids = 0;
    std::map<std::string, std::size_t> m_refunds_by_id; // refund ID -> refund
    std::map<std::string, RequestRecord> m_refund_requests;
    std::map<std::string, std::chrono::system_clock::time_point> m_tokens; // token -> expiry
    std::uint64_t m_tokens_issued = 0;
};

} // namespace payrecon::fake
