#include "tests/fake_provider/webhooks.hpp"

#include "core/encoding.hpp"
#include "core/fingerprint.hpp"

#include <algorithm>
#include <ctime>
#include <curl/curl.h>

namespace payrecon::fake {
namespace {

using Json = nlohmann::ordered_json;

std::string upper(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](char c) { return static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c); });
    return s;
}

// Adyen's escaping of a signed field: `\` -> `\\`, `:` -> `\:`.
std::string adyen_escaped(const std::string& v) {
    std::string out;
    for (const char c : v) {
        if (c == '\\' || c == ':') {
            out += '\\';
        }
        out += c;
    }
    return out;
}

std::size_t discard(char*, std::size_t size, std::size_t n, void*) {
    return size * n;
}

} // namespace

WebhookSender::WebhookSender() : m_rng(7) {
    m_thread = std::thread([this] { run(); });
}

WebhookSender::~WebhookSender() {
    stop();
}

void WebhookSender::configure(WebhookOptions options) {
    std::lock_guard lock(m_mutex);
    m_rng.seed(options.seed);
    m_options = std::move(options);
}

std::vector<WebhookSender::Post> WebhookSender::build(const Executed& e, const WebhookOptions& o,
                                                      bool bad_signature, bool out_of_order) {
    const std::string secret = bad_signature ? o.secret + "-not-the-secret" : o.secret;
    const long long now = static_cast<long long>(std::time(nullptr));
    const auto stripe_post = [&](const std::string& type, const std::string& status) {
        const std::string id = "evt_fake" + std::to_string(m_next_event++);
        Json body;
        body["id"] = id;
        body["object"] = "event";
        body["type"] = type;
        body["created"] = now;
        body["livemode"] = false;
        body["data"]["object"] = {
            {"id", e.provider_id}, {"object", "payment_intent"},
            {"amount", e.amount},  {"currency", e.currency},
            {"status", status},    {"metadata", {{"operation_id", e.operation_id}}}};
        if (!e.stripe_event.empty()) {
            body["data"]["object"]["amount_capturable"] = e.amount_capturable;
            body["data"]["object"]["amount_received"] = e.amount_received;
        }
        body["request"] = {
            {"id", "req_fake" + std::to_string(m_next_event)},
            {"idempotency_key", e.request_key.empty() ? e.operation_id : e.request_key}};
        Post p;
        p.body = body.dump();
        const std::string t = std::to_string(now);
        p.headers = {"Content-Type: application/json",
                     "Stripe-Signature: t=" + t +
                         ",v1=" + to_hex(hmac_sha256(secret, t + "." + p.body))};
        return p;
    };
    std::vector<Post> out;
    if (e.adyen) {
        Json item;
        const std::string value = std::to_string(e.amount);
        const std::string currency = upper(e.currency);
        const std::string success = e.charged ? "true" : "false";
        const std::string code = e.event_code.empty() ? "AUTHORISATION" : e.event_code;
        const std::string signed_fields =
            adyen_escaped(e.provider_id) + ":" + adyen_escaped(e.original_reference) + ":" +
            adyen_escaped(e.merchant_account) + ":" + adyen_escaped(e.operation_id) + ":" + value +
            ":" + currency + ":" + code + ":" + success;
        const auto key = from_hex(secret);
        // A key that is not hex signs with its bytes: the receiver refuses it either way.
        const std::string sig = base64(hmac_sha256(key ? *key : secret, signed_fields));
        item["additionalData"] = {{"hmacSignature", sig}};
        item["amount"] = {{"currency", currency}, {"value", e.amount}};
        item["eventCode"] = code;
        item["eventDate"] = "2026-12-04T00:00:00+01:00";
        item["merchantAccountCode"] = e.merchant_account;
        item["merchantReference"] = e.operation_id;
        item["originalReference"] = e.original_reference;
        item["pspReference"] = e.provider_id;
        item["reason"] = e.reason ? *e.reason : e.charged ? "" : "Not enough balance";
        item["success"] = success;
        Json body;
        body["live"] = "false";
        body["notificationItems"] = Json::array({{{"NotificationRequestItem", item}}});
        Post p;
        p.body = body.dump();
        p.headers = {"Content-Type: application/json"};
        out.push_back(std::move(p));
        return out;
    }
    if (!e.stripe_event.empty()) {
        out.push_back(stripe_post(e.stripe_event, e.stripe_status));
    } else {
        out.push_back(
            e.charged ? stripe_post("payment_intent.succeeded", "succeeded")
                      : stripe_post("payment_intent.payment_failed", "requires_payment_method"));
    }
    if (out_of_order) {
        // What came first at Stripe, delivered last: it must not move the payment backwards.
        out.push_back(stripe_post("payment_intent.processing", "processing"));
    }
    return out;
}

void WebhookSender::notify(const Executed& executed) {
    std::lock_guard lock(m_mutex);
    const WebhookOptions& o = m_options;
    if (o.url.empty() || m_stopping) {
        return;
    }
    std::uniform_real_distribution<double> draw(0.0, 1.0);
    ++m_counts["notifications"];
    if (draw(m_rng) < o.drop_rate) {
        ++m_counts["dropped"];
        return;
    }
    const bool bad = draw(m_rng) < o.bad_signature_rate;
    const bool duplicate = draw(m_rng) < o.duplicate_rate;
    const bool out_of_order = !executed.adyen && draw(m_rng) < o.out_of_order_rate;
    m_counts["badly_signed"] += bad;
    m_counts["duplicated"] += duplicate;
    m_counts["out_of_order"] += out_of_order;
    std::vector<Post> posts = build(executed, o, bad, out_of_order);
    if (duplicate) {
        posts.push_back(posts.front()); // the same event, delivered again
    }
    auto due = std::chrono::steady_clock::now() + o.delay;
    for (auto& p : posts) {
        p.url = o.url;
        p.due = due;
        p.tries_left = std::max(1, o.attempts);
        p.retry_after = o.retry_after;
        due += std::chrono::milliseconds(1); // in this order
        m_queue.push_back(std::move(p));
    }
    std::stable_sort(m_queue.begin(), m_queue.end(),
                     [](const Post& a, const Post& b) { return a.due < b.due; });
    m_cv.notify_all();
}

void WebhookSender::run() {
    std::unique_lock lock(m_mutex);
    while (true) {
        if (m_stopping) {
            return;
        }
        if (m_queue.empty()) {
            m_cv.wait(lock);
            continue;
        }
        if (m_queue.front().due > std::chrono::steady_clock::now()) {
            m_cv.wait_until(lock, m_queue.front().due);
            continue;
        }
        Post p = std::move(m_queue.front());
        m_queue.pop_front();
        ++m_sending;
        lock.unlock();
        send(std::move(p));
        lock.lock();
        --m_sending;
        m_cv.notify_all();
    }
}

void WebhookSender::send(Post post) {
    long status = 0;
    if (CURL* curl = curl_easy_init()) {
        curl_slist* headers = nullptr;
        for (const auto& h : post.headers) {
            headers = curl_slist_append(headers, h.c_str());
        }
        curl_easy_setopt(curl, CURLOPT_URL, post.url.c_str());
        curl_easy_setopt(curl, CURLOPT_POST, 1L);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, post.body.data());
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(post.body.size()));
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L); // the providers' 10 s budget
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
        if (curl_easy_perform(curl) == CURLE_OK) {
            curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        }
        curl_slist_free_all(headers);
        curl_easy_cleanup(curl);
    }
    std::lock_guard lock(m_mutex);
    ++m_counts["posts"];
    if (status >= 200 && status < 300) {
        ++m_counts["delivered"];
        return;
    }
    if (status >= 400 && status < 500) {
        ++m_counts["refused"];
        return;
    }
    ++m_counts["failed"];
    if (--post.tries_left <= 0 || m_stopping) {
        ++m_counts["given_up"];
        return;
    }
    post.due = std::chrono::steady_clock::now() + post.retry_after;
    post.retry_after *= 2;
    m_queue.push_back(std::move(post));
    std::stable_sort(m_queue.begin(), m_queue.end(),
                     [](const Post& a, const Post& b) { return a.due < b.due; });
}

bool WebhookSender::wait_idle(std::chrono::milliseconds deadline) {
    std::unique_lock lock(m_mutex);
    return m_cv.wait_for(lock, deadline, [&] { return m_queue.empty() && m_sending == 0; });
}

void WebhookSender::stop() {
    {
        std::lock_guard lock(m_mutex);
        if (m_stopping) {
            return;
        }
        m_stopping = true;
    }
    m_cv.notify_all();
    if (m_thread.joinable()) {
        m_thread.join();
    }
}

nlohmann::ordered_json WebhookSender::ledger() const {
    std::lock_guard lock(m_mutex);
    Json j;
    for (const char* k : {"notifications", "dropped", "duplicated", "badly_signed", "out_of_order",
                          "posts", "delivered", "refused", "failed", "given_up"}) {
        const auto it = m_counts.find(k);
        j[k] = it == m_counts.end() ? 0 : it->second;
    }
    return j;
}

} // namespace payrecon::fake
