#pragma once
// The fake provider's webhooks: after each execution it notifies a configured URL (serve's
// /v1/providers/<name>/webhooks) the way the real provider would -- a Stripe event signed with
// `Stripe-Signature: t=...,v1=...`, or an Adyen notification whose item carries its
// `additionalData.hmacSignature` -- with faults: delayed, duplicated, out of order (a Stripe
// `payment_intent.processing` sent after the final event), dropped, badly signed. A notification
// answered with a 5xx or not answered is sent again (up to `attempts`), as providers do; one
// answered 4xx is not. One sender thread, libcurl; counts for the tests in ledger().

#include "tests/fake_provider/stripe.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>

namespace payrecon::fake {

struct WebhookOptions {
    std::string url;    // where to POST; empty: no webhooks
    std::string secret; // Stripe: the endpoint's signing secret; Adyen: the HMAC key, hex
    std::chrono::milliseconds delay{0}; // after the execution, before the first delivery
    double drop_rate = 0;               // never sent
    double duplicate_rate = 0;          // sent twice (the same event)
    double bad_signature_rate = 0;      // signed with another secret (the receiver must refuse)
    double out_of_order_rate = 0; // Stripe: a payment_intent.processing sent after the final one
    int attempts = 5;             // deliveries of one notification answered 5xx or not at all
    std::chrono::milliseconds retry_after{200};
    std::uint64_t seed = 7;
};

class WebhookSender {
public:
    WebhookSender();
    ~WebhookSender(); // stop()
    WebhookSender(const WebhookSender&) = delete;
    WebhookSender& operator=(const WebhookSender&) = delete;

    void configure(WebhookOptions options); // applies to executions from now on
    // Queues the notifications of one execution (none if no URL is configured).
    void notify(const Executed& executed);
    // Waits until nothing is queued or being sent, or `deadline` passes; true if idle.
    bool wait_idle(std::chrono::milliseconds deadline);
    void stop();

    // {"notifications", "dropped", "duplicated", "badly_signed", "out_of_order", "posts",
    //  "delivered" (2xx), "refused" (4xx), "failed" (5xx or no answer, each try), "given_up"}.
    nlohmann::ordered_json ledger() const;

private:
    struct Post {
        std::chrono::steady_clock::time_point due;
        std::string url;
        std::string body;
        std::vector<std::string> headers;
        int tries_left = 1;
        std::chrono::milliseconds retry_after{200};
    };
    void run();
    void send(Post post);
    std::vector<Post> build(const Executed& e, const WebhookOptions& o, bool bad_signature,
                            bool out_of_order);

    mutable std::mutex m_mutex;
    std::condition_variable m_cv;
    WebhookOptions m_options;
    std::mt19937_64 m_rng;
    std::deque<Post> m_queue; // by due time (each appended in due order per notification)
    int m_sending = 0;
    bool m_stopping = false;
    std::map<std::string, long long> m_counts;
    std::uint64_t m_next_event = 1;
    std::thread m_thread;
};

} // namespace payrecon::fake
