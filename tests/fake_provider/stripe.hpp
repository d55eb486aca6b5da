#pragma once
// The Stripe subset the fake provider serves, on the ledger every dialect shares (ledger.hpp). Its
// PaymentIntents are also where Adyen's dialect (adyen.hpp) executes, through IntentCreate, and
// what seeds change (seed.hpp). No sockets here: `handle` turns a parsed request into a reply
// and a socket action (answer, FIN, RST, hang, half a body), and the server carries the action out.
// In the ledger:
//   deliveries  every POST /v1/payment_intents (and Adyen's /v71/payments), /v1/refunds and
//               /v1/payment_intents/{id}/capture and /cancel read in full, whatever it was
//               answered (capture_deliveries and cancel_deliveries count the last two apart)
//   executions  per operation ID, PaymentIntents actually created (a decline is an execution too:
//               Stripe creates the PaymentIntent and a failed charge, and the key keeps the 402)
//               and refunds actually made (POST /v1/refunds: of a succeeded PaymentIntent, never
//               past what its charge has left -- a refusal executes nothing and saves nothing
//               under the key; listed by GET /v1/refunds, by payment_intent= and by created
//               window, paged by starting_after), captures and cancels actually made (POST
//               /v1/payment_intents/{id}/capture and /cancel: a capture of a requires_capture
//               PaymentIntent created with capture_method=manual, a cancel of a cancelable one --
//               a refusal executes nothing and saves nothing under the key)
// The operation ID is `metadata[operation_id]` (Adyen: `reference`), else the Idempotency-Key,
// else "(none)".
//
// An authorisation (capture_method=manual) holds its amount until a capture takes all or part of
// it (the rest is released: one capture is final), a cancel releases it, or Stripe cancels it 7
// days after its creation (`cancellation_reason: automatic`): on the fake clock, read whenever the
// PaymentIntent is rendered or captured, so no timer runs and a clock advance is seen at once.
//
// Idempotency follows Stripe's v1 contract: a result is saved only once execution began (a 200,
// a 402, or a 500 after execution); validation errors, 401, 409 and a 500 before execution save
// nothing. Same key and same parameters replay the saved status and body with
// `Idempotent-Replayed: true`; other parameters get 400 idempotency_error; a key whose first
// request is still executing gets 409 idempotency_key_in_use. Keys are forgotten `key_retention`
// after their first request, on the fake clock (real time plus whatever advance_clock added).

#include "tests/fake_provider/dialect.hpp"
#include "tests/fake_provider/faults.hpp"
#include "tests/fake_provider/http.hpp"
#include "tests/fake_provider/ledger.hpp"
#include "tests/fake_provider/seed.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

namespace payrecon::fake {

// Stripe's own settings; the API key and whether keys and lookups exist at all are the Account's.
struct StripeOptions {
    // Fake time. Adyen's keys are kept with Stripe's, and for as long.
    std::chrono::seconds key_retention{86400};
};

// How a PaymentIntent ended: succeeded (a paid charge), requires_action (no charge), or a decline
// (a failed charge for card_declined, none for authentication_required).
enum class IntentOutcome : std::uint8_t {
    succeeded,
    requires_action,
    declined_generic,
    declined_insufficient_funds,
    declined_authentication_required,
};

// A payment the fake executed, as its webhooks tell it (webhooks.hpp): the provider's ID, our
// operation ID, the amount and whether it was charged. `adyen`: created through Adyen's dialect
// (its webhooks are Adyen's notifications).
struct Executed {
    std::string provider_id; // "pi_..." or Adyen's 16-character pspReference
    std::string operation_id;
    std::int64_t amount = 0;
    std::string currency; // lower case as Stripe shows it
    bool charged = false;
    bool adyen = false;
    std::string merchant_account; // Adyen only
    // Adyen only: the notification's eventCode ("AUTHORISATION" when empty; "REFUND" for a refund
    // received, `charged` then whether it refunded; "REFUND_FAILED" for a late reversal), the
    // payment's pspReference a refund's notification names as originalReference, and its reason.
    std::string event_code;
    std::string original_reference;
    std::optional<std::string> reason;
    // Stripe only, when not a create's payment_intent.succeeded / payment_failed: the event's type
    // (an authorisation's payment_intent.amount_capturable_updated, a capture's
    // payment_intent.succeeded, a cancel's payment_intent.canceled), the PaymentIntent's status
    // and its amount_capturable and amount_received then.
    std::string stripe_event;
    std::string stripe_status;
    std::int64_t amount_capturable = 0;
    std::int64_t amount_received = 0;
    // The request's Idempotency-Key the event names, when not the operation ID (a capture's or a
    // cancel's: the event's metadata stays the PaymentIntent's).
    std::string request_key;
};

// What another dialect's refund asks for (Adyen's), in Stripe's terms.
struct RefundParams {
    std::string intent_id; // "pi_..." of the PaymentIntent refunded
    std::int64_t amount = 0;
    std::string currency; // lower case
};

// What a create asks for, in whichever dialect it came.
struct CreateParams {
    std::int64_t amount = 0;
    std::string currency; // lower case, as Stripe shows it
    std::string payment_method;
    std::optional<std::string> customer;
    std::optional<std::string> description;
    bool off_session = false;
    bool manual_capture = false; // Stripe's capture_method=manual: authorise only
    std::map<std::string, std::string> metadata;
};

// How another dialect's create reads its request and words its answers when it executes on
// Stripe's PaymentIntents (Adyen's: adyen.hpp). StripeApi runs everything else as for its own
// create: the deliveries, the Idempotency-Key (one set of keys for both), the faults, the
// execution, the webhooks.
class IntentCreate {
public:
    virtual ~IntentCreate() = default;
    // The operation ID the request names; empty if it names none (the key then stands for it).
    virtual std::string operation_id(const http::Request& request) const = 0;
    // nullopt if the request carries the account's key; else the 401 to answer.
    virtual std::optional<http::Response> refusal(const http::Request& request,
                                                  const Account& account) const = 0;
    // The create's parameters, or the 4xx to answer (nothing executes; the key stays free).
    virtual std::variant<CreateParams, http::Response> read(const http::Request& request) const = 0;
    // What a later request under the same key must match to be replayed.
    virtual http::Fields replay_params(const http::Request& request) const = 0;
    // The answer to a create that executed, saved under the key; rewords `executed` for the
    // webhooks (the provider's ID, ...) where the dialect's differ from Stripe's.
    virtual http::Response answer(const http::Request& request, Executed& executed) const = 0;

protected:
    IntentCreate() = default;
    IntentCreate(const IntentCreate&) = default;
    IntentCreate& operator=(const IntentCreate&) = default;
};

// How another dialect's refund reads its request and words its answer when it refunds Stripe's
// PaymentIntents (Adyen's: adyen.hpp). StripeApi runs the rest as for its own refunds: the
// deliveries, the Idempotency-Key (one set for every dialect), the faults, the refund in the
// ledger (`refunded`, an execution of its operation ID), the webhooks. Unlike Stripe's, such a
// refund is received whatever the payment has left: one it cannot make (past what is left, in
// another currency, the decline fault) is answered as received, refunds nothing and counts no
// execution; its notification says it failed.
class IntentRefund {
public:
    virtual ~IntentRefund() = default;
    // The operation ID the request names; empty if it names none (the key then stands for it).
    virtual std::string operation_id(const http::Request& request) const = 0;
    // nullopt if the request carries the account's key; else the 401 to answer.
    virtual std::optional<http::Response> refusal(const http::Request& request,
                                                  const Account& account) const = 0;
    // The refund's parameters (under the ledger's lock: the dialect may read what it recorded of
    // its payments), or the 4xx to answer (nothing executes; the key stays free).
    virtual std::variant<RefundParams, http::Response>
    read_locked(const http::Request& request) const = 0;
    // What a later request under the same key must match to be replayed.
    virtual http::Fields replay_params(const http::Request& request) const = 0;
    // The answer to a refund received, saved under the key; rewords `executed` (its
    // provider_id is "re_...", `charged` whether it refunded) for the webhooks.
    virtual http::Response answer(const http::Request& request, Executed& executed) const = 0;

protected:
    IntentRefund() = default;
    IntentRefund(const IntentRefund&) = default;
    IntentRefund& operator=(const IntentRefund&) = default;
};

// What another dialect's capture or cancel asks for (Adyen's), in Stripe's terms.
struct ModificationParams {
    std::string intent_id;   // "pi_..." of the PaymentIntent captured or canceled
    std::int64_t amount = 0; // a capture's; a cancel takes none
    std::string currency;    // lower case; a capture's
};

// How another dialect's capture or cancel reads its request and words its answer when it modifies
// Stripe's PaymentIntents (Adyen's: adyen.hpp). StripeApi runs the rest as for its own captures and
// cancels: the deliveries, the Idempotency-Key (one set for every dialect), the faults, the
// capture or cancel in the ledger (an execution of its operation ID), the webhooks. Unlike
// Stripe's, such a request is received whatever the authorisation allows: one it cannot make
// (captured or canceled already, expired, more than it holds, in another currency, the decline
// fault) is answered as received, changes nothing and counts no execution; its notification says
// it failed.
class IntentModification {
public:
    virtual ~IntentModification() = default;
    // The operation ID the request names; empty if it names none (the key then stands for it).
    virtual std::string operation_id(const http::Request& request) const = 0;
    // nullopt if the request carries the account's key; else the 401 to answer.
    virtual std::optional<http::Response> refusal(const http::Request& request,
                                                  const Account& account) const = 0;
    // The modification's parameters (under the ledger's lock), or the 4xx to answer (nothing
    // executes; the key stays free).
    virtual std::variant<ModificationParams, http::Response>
    read_locked(const http::Request& request) const = 0;
    // What a later request under the same key must match to be replayed.
    virtual http::Fields replay_params(const http::Request& request) const = 0;
    // The answer to a modification received, saved under the key; rewords `executed` (its
    // provider_id the modification's "pi_..."-shaped id, `charged` whether it was made) for the
    // webhooks.
    virtual http::Response answer(const http::Request& request, Executed& executed) const = 0;

protected:
    IntentModification() = default;
    IntentModification(const IntentModification&) = default;
    IntentModification& operator=(const IntentModification&) = default;
};

class StripeApi final : public Dialect {
public:
    using Wait = fake::Wait;

    // `ledger` is the fake provider's, shared with the other dialects; it outlives this.
    StripeApi(Ledger& ledger, const Account& account, StripeOptions options);

    // /v1/payment_intents and the paths under it.
    bool serves(const http::Request& request) const override;

    // Serves one request on the main port; also what the server answers a request no dialect
    // serves (Stripe's 401, else its 404), as the fake always has. Never throws for anything the
    // client sent.
    Reply handle(const http::Request& request, const Wait& wait) override;

    // `dialect`'s create, executed on these PaymentIntents. Its answers carry Stripe's Request-Id
    // and Stripe-Version headers, as every answer on this ledger always has.
    Reply create_for(const IntentCreate& dialect, const http::Request& request, const Wait& wait);
    // `dialect`'s refund, of these PaymentIntents (IntentRefund says how it differs from Stripe's).
    Reply refund_for(const IntentRefund& dialect, const http::Request& request, const Wait& wait);
    // `dialect`'s capture (`cancel` false) or cancel of these PaymentIntents (IntentModification
    // says how it differs from Stripe's): one capture takes all or part of a requires_capture
    // authorisation and releases the rest, as Stripe's does.
    Reply modify_for(const IntentModification& dialect, const http::Request& request, bool cancel,
                     const Wait& wait);

    // Called (outside the lock) after each execution: what the webhooks tell.
    void set_on_executed(std::function<void(const Executed&)> callback);

    // Adds "seeded", "payment_intent_count" and "payment_intents" (oldest first by
    // created; only if options.payment_intents) to the ledger JSON. Under the ledger's lock.
    void write_ledger_locked(nlohmann::ordered_json& j, LedgerOptions options) const override;

    // Seeds a discrepancy (seed.hpp); answers the ids of the PaymentIntents it created or changed.
    // Throws SeedNotFound for an unknown PaymentIntent or operation, std::invalid_argument for a
    // seed the fake cannot apply (a bad amount or currency, a refund of an unpaid PaymentIntent,
    // a refund past the amount). Nothing changes when it throws.
    std::vector<std::string> seed(const Seed& seed);
    std::vector<std::string> seed_orphan_charge(const OrphanCharge& s) { return seed(s); }
    std::vector<std::string> seed_duplicate_charge(const DuplicateCharge& s) { return seed(s); }
    std::vector<std::string> seed_amount_mismatch(const AmountMismatch& s) { return seed(s); }
    std::vector<std::string> seed_refunded(const Refunded& s) { return seed(s); }
    std::vector<std::string> seed_bulk(const BulkSeed& s) { return seed(s); }
    std::vector<std::string> seed_refund_reversed(const RefundReversed& s) { return seed(s); }
    std::vector<std::string> seed_capture_reversed(const CaptureReversed& s) { return seed(s); }
    // Counts `n` ids of a seed of `kind` another dialect applied (a Square refund's reversal) in
    // the ledger's "seeded", which this dialect writes. Takes the ledger's lock.
    void count_seeded(std::string_view kind, std::size_t n);

    // Forgets every PaymentIntent, key and seed count. Under the ledger's lock (the ledger resets
    // its own counts, faults and clock).
    void reset_locked() override;

private:
    // Stripe's form-encoded create when `other` is null, else `other`'s.
    Reply create(const http::Request& request, const Wait& wait, const IntentCreate* other);
    // Adds the headers every answer on this ledger carries.
    void stamp(Reply& reply);
    std::function<void(const Executed&)> m_on_executed;

    // A random id part: "pi_" / "ch_" / "re_" + these 24 characters.
    using IdPart = std::array<char, 24>;

    using Outcome = IntentOutcome;

    struct Refund {
        IdPart id{};
        std::int64_t amount = 0;
        std::int64_t created = 0;
        std::string operation_id; // metadata[operation_id] of a refund created through the API
        std::optional<std::string> reason;
        std::map<std::string, std::string> metadata;
        std::optional<std::string> failure_reason; // a refund reversed after it succeeded
        bool adyen = false; // made through Adyen's dialect: its reversal is a REFUND_FAILED
        std::string merchant_account; // Adyen's
        std::uint64_t seq = 0;        // creation order among every refund: the listing's tiebreak
    };

    // Kept compact (a bulk seed holds a million): the JSON is rendered on demand (render()).
    // Why a PaymentIntent was canceled: the cancel's cancellation_reason, or Stripe's own.
    enum class Cancellation : std::uint8_t {
        none,        // not canceled
        unspecified, // canceled without a reason: cancellation_reason null
        abandoned,
        duplicate,
        fraudulent,
        requested_by_customer,
    };
    // What a PaymentIntent is at some time: its status and amounts, the authorisation's expiry
    // applied (Intent::at).
    struct State {
        std::string_view status;
        std::int64_t amount_capturable = 0;
        std::int64_t amount_received = 0;
        bool captured = false; // its charge is captured (money taken, not merely authorised)
        std::optional<std::string_view> cancellation_reason; // nullopt: null
        std::int64_t canceled_at = 0;                        // unix seconds; 0: null
    };

    struct Intent {
        IdPart id{};
        IdPart charge_id{}; // meaningful when has_charge()
        IdPart secret{};    // client_secret = id + "_secret_" + secret
        Outcome outcome = Outcome::succeeded;
        std::chrono::system_clock::time_point created_at;
        std::int64_t created = 0; // unix seconds, as Stripe shows it
        std::int64_t amount = 0;
        std::int64_t amount_refunded = 0;
        std::string currency;
        std::string operation_id;
        std::string payment_method;
        std::optional<std::string> customer;
        std::optional<std::string> description;
        std::map<std::string, std::string> metadata;
        std::vector<Refund> refunds; // oldest first
        // capture_method=manual: succeeded only authorises; amount_captured is what the capture
        // took (captured), the rest released.
        bool manual = false;
        bool captured = false;
        Cancellation cancellation = Cancellation::none;
        std::int64_t amount_captured = 0;
        std::int64_t canceled_at = 0; // unix seconds, when cancellation is set
        // Made and asked: captures and cancels executed, their POSTs read (ledger JSON).
        std::uint32_t captures = 0;
        std::uint32_t cancels = 0;
        std::uint32_t capture_deliveries = 0;
        std::uint32_t cancel_deliveries = 0;
        // A capture made through another dialect (Adyen's): its operation ID and id, the account
        // that made it, and whether the scheme failed it since (capture_reversed).
        std::string capture_operation_id;
        IdPart capture_id{};
        std::string capture_account;
        bool capture_reversed = false;

        bool has_charge() const;
        // The card was approved (an authorisation included).
        bool succeeded() const { return outcome == Outcome::succeeded; }
        // Money was taken: approved and, for an authorisation, captured.
        bool paid() const { return succeeded() && (!manual || captured); }
        // What was taken: the amount, or what the capture took.
        std::int64_t received() const { return !paid() ? 0 : manual ? amount_captured : amount; }
        // What this PaymentIntent adds to `charged`: received less refunded.
        std::int64_t net() const { return received() - amount_refunded; }
        // Its status and amounts at `now`: an authorisation untouched for 7 days is canceled
        // (automatic) from then on.
        State at(std::chrono::system_clock::time_point now) const;
    };

    struct KeyRecord {
        http::Fields params; // sorted: the parameters the key was first used with
        std::chrono::system_clock::time_point first_seen;
        bool in_flight = true;
        int status = 0;
        std::string body;
    };

    // The Idempotency-Key phase of a create, under the ledger's lock: true when it answered
    // `reply` (a bad key, the key in flight, other parameters, a replay); false when the create
    // goes on, its key (if any) recorded in flight. `sorted`: what a replay must match.
    bool key_answered_locked(const std::string* key, const http::Fields& sorted, Reply& reply);
    // The answer of an executed create, saved under its key (if any).
    void save_key_locked(const std::string* key, const Reply& reply);

    // POST /v1/payment_intents/{id}/capture and /cancel (`cancel` false: the capture): under the
    // same keys (the path is part of what a replay must match), faults and latency as a create;
    // judged after the latency. A capture takes `amount_to_capture` (default: all) of a
    // requires_capture PaymentIntent and releases the rest; a cancel cancels a cancelable one.
    // Each made counts as an execution of its operation ID and in the PaymentIntent's counts.
    Reply capture_or_cancel(const http::Request& request, std::string_view id, bool cancel,
                            const Wait& wait);
    // POST /v1/refunds: a refund of a succeeded PaymentIntent, never past what it charged, under
    // the same keys, faults and latency as a create; counted as an execution of its operation ID.
    Reply create_refund(const http::Request& request, const Wait& wait);
    // GET /v1/refunds: the refunds of one PaymentIntent (payment_intent=) or of every one, in a
    // created window (created[gte], [gt], [lt], [lte]), newest first (within a second the later
    // refund first), `limit` a page, paged by starting_after (a refund's re_...); lookup_down
    // 503 as the PaymentIntents' list.
    Reply list_refunds(const http::Fields& query, const Wait& wait);
    // The next refund's creation order.
    std::uint64_t next_refund_seq_locked() { return ++m_refund_seq; }
    nlohmann::ordered_json render_refund(const Intent& intent, const Refund& refund) const;

    Reply retrieve(const std::string& id, const http::Fields& query, const Wait& wait);
    Reply search(const http::Fields& query, const Wait& wait);
    Reply list(const http::Fields& query, const Wait& wait);

    // Under the ledger's lock.
    IdPart random_part();
    // The PaymentIntent as Stripe shows it at `now` (an authorisation expires on the fake clock).
    nlohmann::ordered_json render(const Intent& intent,
                                  std::chrono::system_clock::time_point now) const;
    // Adds an intent (index, order, executions, charged); returns its index in m_intents.
    std::size_t add_intent(Intent intent);
    // (created, index) order: oldest first, and within a second creation order.
    bool before_in_order(std::size_t a, std::size_t b) const;
    // The position in m_order of m_intents[i].
    std::size_t order_position(std::size_t i) const;
    // The index in m_intents of "pi_..."; nullopt if unknown.
    std::optional<std::size_t> find_id(std::string_view id) const;
    std::size_t find_ref(const IntentRef& ref) const; // throws SeedNotFound
    std::vector<std::string> seed_locked(const OrphanCharge& s);
    std::vector<std::string> seed_locked(const DuplicateCharge& s);
    std::vector<std::string> seed_locked(const AmountMismatch& s);
    std::vector<std::string> seed_locked(const Refunded& s);
    std::vector<std::string> seed_locked(const BulkSeed& s);
    std::vector<std::string> seed_locked(const RefundReversed& s);
    std::vector<std::string> seed_locked(const CaptureReversed& s);
    bool authorized(const http::Request& request) const;

    Ledger& m_ledger;
    Account m_account;
    StripeOptions m_options;
    std::mt19937_64 m_id_rng;

    // Intents in creation order, in fixed chunks: an intent never moves once added (m_by_id's
    // keys view Intent::id), and a bulk seed allocates one chunk per 4096 intents, not one each
    // (as std::deque does for an element this large).
    class Store {
    public:
        std::size_t size() const { return m_size; }
        Intent& operator[](std::size_t i) { return m_chunks[i / k_chunk][i % k_chunk]; }
        const Intent& operator[](std::size_t i) const { return m_chunks[i / k_chunk][i % k_chunk]; }
        Intent& emplace_back() {
            if (m_size == m_chunks.size() * k_chunk) {
                m_chunks.push_back(std::make_unique<Intent[]>(k_chunk));
            }
            return (*this)[m_size++];
        }
        void clear() {
            m_chunks.clear();
            m_size = 0;
        }

    private:
        static constexpr std::size_t k_chunk = 4096;
        std::vector<std::unique_ptr<Intent[]>> m_chunks;
        std::size_t m_size = 0;
    };
    Store m_intents;
    // Indexes into m_intents by (created, index) ascending: what list binary-searches. Equal to
    // creation order unless a seed went back in time.
    std::vector<std::size_t> m_order;
    std::uint64_t m_refund_seq = 0; // the last refund's Refund::seq
    // Random ids: their first 8 bytes are hash enough (and nothing to cache in the node).
    struct IdHash {
        std::size_t operator()(std::string_view id) const noexcept {
            std::uint64_t h = 0;
            std::memcpy(&h, id.data(), std::min(id.size(), sizeof h));
            return static_cast<std::size_t>(h);
        }
    };
    std::unordered_map<std::string_view, std::size_t, IdHash> m_by_id; // the 24 after "pi_"
    std::map<std::string, KeyRecord> m_keys;
    std::map<std::string, std::uint64_t> m_seeded; // seeds applied, by kind
    // Indexes of the PaymentIntents created with capture_method=manual or named by a capture or
    // cancel POST: the ledger's `authorizations`, in creation order.
    std::set<std::size_t> m_authorizations;
    // Capture and cancel POSTs read in full (an unknown PaymentIntent's included), and those made.
    std::uint64_t m_capture_deliveries = 0;
    std::uint64_t m_cancel_deliveries = 0;
    std::uint64_t m_captures = 0;
    std::uint64_t m_cancels = 0;
    // The notification a seed under way owes (an Adyen refund's REFUND_FAILED, a capture's
    // CAPTURE_FAILED), sent after it.
    std::optional<Executed> m_adyen_reversal;
};

// Adyen's pspReference of a PaymentIntent or refund the fake made through Adyen's dialect ("pi_..."
// or "re_..."): the first 16 characters of its random part, in upper case.
std::string adyen_reference(std::string_view stripe_id);

} // namespace payrecon::fake
