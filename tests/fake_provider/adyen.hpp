#pragma once
// Adyen's dialect of the fake provider: `POST /v71/payments`, Adyen's Checkout create as the adyen
// adapter sends it (JSON: `amount` {`value`, `currency`}, `reference` = our operation ID,
// `merchantAccount`, `paymentMethod.storedPaymentMethodId`; the account's key in `X-API-Key`;
// `Idempotency-Key`). It answers 200 with `pspReference` (16 characters), `resultCode`
// `Authorised` or `Refused` and `merchantReference`; a body without the required fields gets
// Adyen's 422 ServiceError, a wrong key its 401. There is no lookup: Adyen has none.
//
// It executes on Stripe's PaymentIntents (stripe.hpp, through IntentCreate): the same ledger,
// Idempotency-Keys (one set for both dialects, kept StripeOptions::key_retention), faults and
// webhooks (Adyen's notifications), so every fault behaves as on Stripe's create. Its answers
// carry Stripe's Request-Id and Stripe-Version headers, as they always have. The operation ID is
// `reference`, else the Idempotency-Key, else "(none)".
//
// Refunds: `POST /v71/payments/{paymentPspReference}/refunds` (JSON: `merchantAccount`, `amount`,
// `reference` = the refund's operation ID), on the same PaymentIntents through IntentRefund: the
// same keys, faults and latency. Adyen answers every refund it can read 201 `status` "received"
// with the refund's own pspReference; the outcome goes by the REFUND notification (success "true",
// the refund recorded in the ledger's `refunded` and counted as an execution; "false" for one past
// what the payment has left, in another currency, or under the decline fault: nothing refunded).
// A payment it does not know is a 422 ("167"); a body without amount or merchantAccount a 422
// ("100"). The Stripe seed refund_reversed of such a refund sends its REFUND_FAILED.
//
// Authorise, then capture or cancel: a create with `additionalData.manualCapture` "true" only
// authorises (a capture_method=manual PaymentIntent; Authorised, nothing charged; Stripe's 7 days
// of validity on the fake clock). `POST /v71/payments/{pspReference}/captures` (JSON:
// `merchantAccount`, `amount`, `reference`) and `/cancels` (`merchantAccount`, `reference`) run on
// the same PaymentIntents through IntentModification: the same keys, faults and latency. Each is
// answered 201 `status` "received" with its own pspReference; the outcome goes by the CAPTURE or
// CANCELLATION notification: success "true" when the authorisation was held and (a capture) the
// amount within it -- one capture, the rest released, as Adyen without multiple partial captures
// --, the capture added to `charged` and counted as an execution; "false" otherwise (captured or
// canceled already, expired, more than it holds, another currency, the decline fault: nothing
// changes). The seed capture_reversed of such a capture sends its CAPTURE_FAILED.

#include "tests/fake_provider/dialect.hpp"
#include "tests/fake_provider/stripe.hpp"

#include <map>
#include <optional>
#include <string>
#include <variant>

namespace payrecon::fake {

// Adyen's refund request read for Stripe's PaymentIntents, and its answer (see above). `payments`:
// the pspReference of each payment made through Adyen's dialect, to its PaymentIntent's "pi_..." --
// AdyenApi's, read under the ledger's lock.
class AdyenRefunds final : public IntentRefund {
public:
    explicit AdyenRefunds(const std::map<std::string, std::string>& payments)
        : m_payments(payments) {}

    std::string operation_id(const http::Request& request) const override;
    std::optional<http::Response> refusal(const http::Request& request,
                                          const Account& account) const override;
    std::variant<RefundParams, http::Response>
    read_locked(const http::Request& request) const override;
    http::Fields replay_params(const http::Request& request) const override;
    http::Response answer(const http::Request& request, Executed& executed) const override;

private:
    const std::map<std::string, std::string>& m_payments;
};

// Adyen's capture (`cancel` false) or cancel read for Stripe's PaymentIntents, and its answer (see
// above). `payments` as AdyenRefunds'.
class AdyenModifications final : public IntentModification {
public:
    AdyenModifications(const std::map<std::string, std::string>& payments, bool cancel)
        : m_payments(payments), m_cancel(cancel) {}

    std::string operation_id(const http::Request& request) const override;
    std::optional<http::Response> refusal(const http::Request& request,
                                          const Account& account) const override;
    std::variant<ModificationParams, http::Response>
    read_locked(const http::Request& request) const override;
    http::Fields replay_params(const http::Request& request) const override;
    http::Response answer(const http::Request& request, Executed& executed) const override;

private:
    const std::map<std::string, std::string>& m_payments;
    bool m_cancel;
};

class AdyenApi final : public Dialect, private IntentCreate {
public:
    // `intents`: where its payments execute, the fake provider's Stripe dialect; it outlives this.
    explicit AdyenApi(StripeApi& intents);

    // POST /v71/payments and POST /v71/payments/{pspReference}/refunds, /captures and /cancels.
    // Other methods on the path are Stripe's to answer, as every request no dialect serves.
    bool serves(const http::Request& request) const override;
    Reply handle(const http::Request& request, const Wait& wait) override;

    // Nothing of its own: its payments are PaymentIntents in Stripe's part of the ledger.
    void write_ledger_locked(nlohmann::ordered_json& j, LedgerOptions options) const override;
    void reset_locked() override;

private:
    std::string operation_id(const http::Request& request) const override;
    std::optional<http::Response> refusal(const http::Request& request,
                                          const Account& account) const override;
    std::variant<CreateParams, http::Response> read(const http::Request& request) const override;
    http::Fields replay_params(const http::Request& request) const override;
    http::Response answer(const http::Request& request, Executed& executed) const override;

    StripeApi& m_intents;
    // Each payment's pspReference -> its PaymentIntent ("pi_..."); under the ledger's lock.
    mutable std::map<std::string, std::string> m_payments;
    AdyenRefunds m_refunds{m_payments};
    AdyenModifications m_captures{m_payments, false};
    AdyenModifications m_cancels{m_payments, true};
};

} // namespace payrecon::fake
